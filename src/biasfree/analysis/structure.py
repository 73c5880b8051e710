"""Exact structures of a depth-2 net that keep its even part zero under training on
mirror-symmetric data, so that it trains exactly as its linear twin at any init scale and
step size (docs/theory.md §2.3, §2.5):

- antisymmetric pairs: the rows z_k = [w_k, v_k] of ``[W₁, W₂ᵀ]`` form a mirror-symmetric
  multiset, every hidden unit (w, v) has its (−w, −v) (any first layer whose matrix has
  these rows, conv pair channels included, §7);
- rank-one zero-even (scalar output, dense first layer): w_k = v_k r for one vector r and
  Σ_k v_k|v_k| = 0, so f_even = (1−c) Σ_k v_k|v_k| |r·x| = 0, and every v_k is rescaled by
  the same factor along the flow.

Both are tested to :data:`~biasfree.analysis.verdict.ROUND_OFF` relative to the weights' scale.
"""

from __future__ import annotations

import numpy as np

from ..core.conv import is_conv
from ..core.layers import Params
from ..core.symmetry import mirror_violation
from .verdict import ROUND_OFF

PAIRS = "antisymmetric pairs"
RANK_ONE = "rank-one zero-even units"


def paired(params: Params) -> bool:
    """Depth 2: the rows [w_k, v_k] form a mirror-symmetric multiset (antisymmetric pairs)."""
    if len(params) != 2:
        return False
    Z = np.hstack([np.asarray(params[0].matrix, float), np.asarray(params[1].matrix, float).T])
    scale = float(np.max(np.linalg.norm(Z, axis=1)))
    return scale > 0 and mirror_violation(Z) <= ROUND_OFF * scale


def rank_one_zero_even(params: Params) -> bool:
    """Depth 2, one output, dense first layer: W₁ = v rᵀ with r = W₁ᵀv/‖v‖² to ROUND_OFF·‖W₁‖
    (Frobenius) and |Σ_k v_k|v_k|| ≤ ROUND_OFF·Σ_k v_k²."""
    if len(params) != 2 or params[1].n_out != 1 or is_conv(params):
        return False
    W, v = np.asarray(params[0].matrix, float), np.asarray(params[1].matrix, float)[0]
    vv = float(v @ v)
    if vv == 0.0:
        return False
    r = W.T @ v / vv
    return bool(np.linalg.norm(W - np.outer(v, r)) <= ROUND_OFF * np.linalg.norm(W)
                and abs(float(v @ np.abs(v))) <= ROUND_OFF * vv)


def exact_structure(params: Params) -> str | None:
    """The name of the exact structure of ``params`` (:data:`PAIRS`, :data:`RANK_ONE`), or None."""
    if any(layer.has_bias for layer in params):
        return None
    if paired(params):
        return PAIRS
    return RANK_ONE if rank_one_zero_even(params) else None
