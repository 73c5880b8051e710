"""Initialisations the closed forms assume: balanced, and (optionally) mode-aligned.

*Balanced* means ``W_l W_lᵀ = W_{l+1}ᵀ W_{l+1}`` for every hidden layer l (gradient
flow conserves ``W_l W_lᵀ - W_{l+1}ᵀ W_{l+1}``, docs/theory.md §4.2, so a balanced net
stays balanced). *Aligned* means the net's product shares the singular vectors of
``Σ_yx``. These builders return plain :data:`biasfree.core.layers.Params`.
"""

from __future__ import annotations

import numpy as np

from .. import _validate as v
from ..core.layers import Layer, Params, takes_net


def _basis(basis, n: int, r: int, what: str) -> np.ndarray:
    if basis is None:
        return np.eye(n)[:, :r]
    B = v.finite_array(what, basis, ndim=2)
    if B.shape != (n, r) or not np.allclose(B.T @ B, np.eye(r), atol=1e-12):
        raise ValueError(f"{what} must be an ({n}, {r}) matrix with orthonormal columns, "
                         f"got shape {B.shape}; build one with numpy.linalg.qr")
    return B


def aligned_init(U, V, a0, *, depth: int = 2, width: int | None = None, bases=None) -> Params:
    """Balanced, mode-aligned linear net of ``depth`` L whose product is ``U diag(a0) Vᵀ``.

    With ``b = a0^{1/L}`` (per mode) and hidden bases ``R_l`` (n, r):
    ``W_1 = R_1 diag(b) Vᵀ``, ``W_l = R_l diag(b) R_{l-1}ᵀ`` (1 < l < L),
    ``W_L = U diag(b) R_{L-1}ᵀ``, so ``W_L ... W_1 = U diag(a0) Vᵀ`` and every mode i
    has strength ``a_i = a0_i`` split equally over the layers (§3.1, §3.3).

    ``U`` (p, r) and ``V`` (d, r) orthonormal columns (e.g. from
    :func:`~biasfree.theory.data_modes`), ``a0`` (r,) or scalar initial strengths
    (> 0), ``width`` n ≥ r every hidden width (default r; extra units are zero and stay
    zero), ``bases`` optional list of L - 1 matrices R_l (n, r) with orthonormal columns
    (default: the first r unit vectors).
    """
    U, V = v.finite_array("U", U, ndim=2), v.finite_array("V", V, ndim=2)
    r = U.shape[1]
    if V.shape[1] != r:
        raise ValueError(f"U has {r} columns but V has {V.shape[1]}: one pair (u_i, v_i) per mode")
    for name, B in (("U", U), ("V", V)):  # else W_1 W_1ᵀ != W_2ᵀ W_2: not balanced
        if not np.allclose(B.T @ B, np.eye(r), atol=1e-10):
            raise ValueError(f"{name} must have orthonormal columns (the init is balanced only then); "
                             "take U, V from biasfree.theory.data_modes or numpy.linalg.qr")
    a0 = v.positive("a0", a0, why="initial mode strengths")
    if a0.ndim > 1 or (a0.ndim == 1 and a0.size not in (1, r)):
        raise ValueError(f"a0 must be a scalar or have one value per mode (r = {r}), got shape {a0.shape}")
    a0 = np.broadcast_to(a0.ravel() if a0.ndim else a0, (r,))
    depth = v.integer("depth", depth, 2)
    n = r if width is None else v.integer("width", width, 1)
    if n < r:
        raise ValueError(f"width={n} is below the number of modes r={r}: use width >= r")
    bases = [None] * (depth - 1) if bases is None else list(bases)
    if len(bases) != depth - 1:
        raise ValueError(f"give one hidden basis per hidden layer ({depth - 1}), got {len(bases)}")
    R = [_basis(B, n, r, f"bases[{i}]") for i, B in enumerate(bases)]
    b = a0 ** (1.0 / depth)  # W_l = B_out diag(b) B_inᵀ, the bases chained V, R_1, ..., R_{L-1}, U
    return tuple(Layer(B_out @ np.diag(b) @ B_in.T) for B_in, B_out in zip([V] + R, R + [U], strict=True))


def balanced_init(P0, width: int, *, basis=None) -> Params:
    """Two-layer balanced linear net with a prescribed product ``W_2 W_1 = P0``.

    SVD ``P0 = A diag(σ) Bᵀ`` (k = rank), then ``W_1 = R diag(√σ) Bᵀ``,
    ``W_2 = A diag(√σ) Rᵀ``, so ``W_1 W_1ᵀ = W_2ᵀ W_2 = R diag(σ) Rᵀ``. A random
    ``P0`` gives a balanced init that is *not* aligned with the data's modes (the
    setting of :func:`~biasfree.theory.unaligned_product`).

    ``P0`` (p, d) the initial product, ``width`` n ≥ rank(P0), ``basis`` R (n, k) with
    orthonormal columns (default the first k unit vectors).
    """
    P0 = v.finite_array("P0", P0, ndim=2)
    width = v.integer("width", width, 1)
    A, sig, Bt = np.linalg.svd(P0, full_matrices=False)
    k = int(np.sum(sig > 1e-14 * max(sig[0], 1e-300)))
    if width < k:
        raise ValueError(f"width={width} is below rank(P0)={k}: a narrower net cannot hold P0")
    R = _basis(basis, width, k, "basis")
    rs = np.sqrt(sig[:k])
    return (Layer(R @ (rs[:, None] * Bt[:k])), Layer((A[:, :k] * rs) @ R.T))


@takes_net(bias_free=True)
def imbalance(params: Params) -> float:
    """``max_l ||W_l W_lᵀ - W_{l+1}ᵀ W_{l+1}||_F / (||W_l||_F² + ||W_{l+1}||_F²)``:
    0 for a balanced net (relative, so it is scale-free)."""
    return _imbalance(params)


def _imbalance(params: Params) -> float:
    """:func:`imbalance` unchecked."""
    def gap(Wa, Wb):
        return np.linalg.norm(Wa @ Wa.T - Wb.T @ Wb) / max(np.sum(Wa**2) + np.sum(Wb**2), 1e-300)
    Ws = [np.asarray(layer.matrix, float) for layer in params]
    return float(max([0.0] + [gap(Wa, Wb) for Wa, Wb in zip(Ws[:-1], Ws[1:], strict=True)]))
