"""Reduced-rank regression: the best linear map of rank k, and its loss (docs/theory.md §11.3).

For inputs X (N, d), targets Y (N, p), ``Σ_xx = XᵀX/N``, ``Σ_yx = YᵀX/N``, the loss of a map β
(p, d) is ``L(β) = ½<||y − βx||²> = ½ tr Σ_yy − tr(β Σ_xy) + ½ tr(β Σ_xx βᵀ)``. In the whitened
metric ``β = M Σ_xx^{-1/2}`` it is ``½ tr Σ_yy − tr(M Cᵀ) + ½||M||_F²`` with
``C = Σ_yx Σ_xx^{-1/2} = U diag(s) Vᵀ``, so by Eckart–Young the best rank-k map is the
rank-k truncation of C, mapped back:

    β_k = U_k diag(s_k) V_kᵀ Σ_xx^{-1/2},   L_k = ½ (tr Σ_yy − Σ_{i≤k} s_i²).

A two-layer linear net of width k sits at β_k at its global minimum, and a wider one has a
saddle there (§11.4): β_k are the plateaus of its staircase. Truncating the least-squares map
``Σ_yx Σ_xx^{-1}`` in the plain metric instead is not optimal unless Σ_xx ∝ I.
"""

from __future__ import annotations

import numpy as np

from .. import _validate as v

_CUT = 1e-12
"""Input directions with Σ_xx eigenvalue below this fraction of the largest are left out."""


def whitened_svd(X, Y):
    """``(U, s, Vt, Σ_xx^{-1/2})``: the SVD ``C = Σ_yx Σ_xx^{-1/2} = U diag(s) Vᵀ`` (module doc), with
    Σ_xx^{-1/2} on its range (directions below :data:`_CUT` of the largest eigenvalue left out)."""
    N = X.shape[0]
    lam, W = np.linalg.eigh(X.T @ X / N)
    keep = lam > _CUT * lam.max()
    isqrt = (W[:, keep] / np.sqrt(lam[keep])) @ W[:, keep].T  # Σ_xx^{-1/2} on its range
    U, s, Vt = np.linalg.svd(Y.T @ X / N @ isqrt, full_matrices=False)
    return U, s, Vt, isqrt


def reduced_rank_fit(X, Y, k: int) -> tuple[np.ndarray, float]:
    """``(β_k, L_k)``: the best map of rank ≤ k (p, d) and its loss ½<||y − β_k x||²> (module
    doc), computed from the map on the data."""
    X, Y = v.data(X, Y)
    k = v.integer("k", k, 0, min(X.shape[1], Y.shape[1]))
    U, s, Vt, isqrt = whitened_svd(X, Y)
    beta = (U[:, :k] * s[:k]) @ Vt[:k] @ isqrt
    return beta, float(0.5 * np.mean(np.sum((Y - X @ beta.T) ** 2, axis=1)))


def reduced_rank_losses(X, Y) -> np.ndarray:
    """``L_k = ½ (tr Σ_yy − Σ_{i≤k} s_i²)`` for k = 0..min(d, p) (module doc): the loss of the
    best linear map of each rank, the plateau levels of a two-layer linear net."""
    X, Y = v.data(X, Y)
    s = whitened_svd(X, Y)[1]
    return 0.5 * (float(np.mean(np.sum(Y**2, axis=1))) - np.concatenate([[0.0], np.cumsum(s**2)]))
