"""Small data tasks with closed-form answers, shared by test files (imported as ``tasks``, as
``roundoff`` is)."""

from __future__ import annotations

import numpy as np


def whitened_linear(n: int, d: int, s, seed: int = 0):
    """``(X, Y)``: n whitened inputs in d dimensions (XᵀX/n = I to round-off) and the linear target
    y = β x whose map β = U diag(s) Vᵀ has the singular values ``s`` (random orthonormal U, V)."""
    rng = np.random.default_rng(seed)
    X = np.linalg.qr(rng.standard_normal((n, d)))[0] * np.sqrt(n)
    k = len(s)
    U = np.linalg.qr(rng.standard_normal((k, k)))[0]
    V = np.linalg.qr(rng.standard_normal((d, k)))[0]
    return X, X @ (U @ np.diag(s) @ V.T).T
