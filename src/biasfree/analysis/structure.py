"""Exact structures of a depth-2 net that keep its even part zero under training on
mirror-symmetric data, so that it trains exactly as its linear twin at any init scale and
step size (docs/theory.md §2.3, §2.5):

- antisymmetric pairs: the rows z_k = [w_k, v_k] of ``[W₁, W₂ᵀ]`` form a mirror-symmetric
  multiset, every hidden unit (w, v) has its (−w, −v) (any first layer whose matrix has
  these rows, conv pair channels included, §7);
- rank-one zero-even (dense first layer): w_k = u_k r and W₂[:, k] = u_k q for one unit
  vector u with ``Σ_k u_k|u_k| = 0``, so ``f_even = (1−c) q Σ_k u_k|u_k| |r·x| = 0``; the flow
  moves r and q and rescales every u_k by one factor, so the structure stays.

Both are tested to :data:`~biasfree.analysis.verdict.ROUND_OFF` relative to the weights' scale.
"""

from __future__ import annotations

import numpy as np

from ..core.conv import is_conv
from ..core.layers import Params
from ..core.symmetry import _is_symmetric, stack_points
from .verdict import ROUND_OFF

PAIRS = "antisymmetric pairs"
"""The antisymmetric-pair structure's name (module doc)."""
RANK_ONE = "rank-one zero-even units"
"""The rank-one zero-even structure's name (module doc)."""


def paired(params: Params) -> bool:
    """Depth 2: the rows [w_k, v_k] form a mirror-symmetric multiset (antisymmetric pairs)."""
    if len(params) != 2:
        return False
    Z = np.hstack([np.asarray(params[0].matrix, float), np.asarray(params[1].matrix, float).T])
    scale = float(np.max(np.linalg.norm(Z, axis=1)))
    return scale > 0 and _is_symmetric(stack_points(Z), ROUND_OFF * scale)  # Z built here: no check


def rank_one_zero_even(params: Params) -> bool:
    """Depth 2, dense first layer: W₂ = q uᵀ and W₁ = u rᵀ for one unit vector u (the top
    right singular vector of W₂), each to ROUND_OFF of its norm (Frobenius), and
    ``|Σ_k u_k|u_k|| ≤ ROUND_OFF`` (so ``f_even = (1−c) q Σ_k u_k|u_k| |r·x|·‖…‖ = 0``)."""
    if len(params) != 2 or is_conv(params):
        return False
    W, V = np.asarray(params[0].matrix, float), np.asarray(params[1].matrix, float)
    if not V.any() or not W.any():
        return False
    u = np.linalg.svd(V, full_matrices=False)[2][0]
    return bool(np.linalg.norm(V - np.outer(V @ u, u)) <= ROUND_OFF * np.linalg.norm(V)
                and np.linalg.norm(W - np.outer(u, u @ W)) <= ROUND_OFF * np.linalg.norm(W)
                and abs(float(u @ np.abs(u))) <= ROUND_OFF)


def exact_structure(params: Params) -> str | None:
    """The name of the exact structure of ``params`` (:data:`PAIRS`, :data:`RANK_ONE`), or None."""
    if any(layer.has_bias for layer in params):
        return None
    return PAIRS if paired(params) else RANK_ONE if rank_one_zero_even(params) else None
