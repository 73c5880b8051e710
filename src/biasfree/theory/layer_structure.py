"""Low rank or sparse: what a layer learned, read off its weight change (docs/theory.md §11.8).

The two mechanisms of saddle-to-saddle learning leave different weights (Zhang, Saxe & Latham
2025). Separation *between directions* (data-induced, linear nets) grows every unit along the
same few data directions, each in proportion to its init's projection on them: the learned
change is **low rank** and spread over many units. Separation *between units* (init-induced,
the quadratic net) lets the unit with the largest init escape alone: the change is **sparse**,
a few units carrying everything.

For a hidden layer l with incoming weights W_l (m, n) and readout W_{l+1} (p, m), take the
change Δ_l = W_l(T) − W_l(0), Δ_{l+1} likewise, and two participation ratios,

    r_dir  = (Σ_i σ_i²)² / Σ_i σ_i⁴,        σ_i the singular values of Δ_l,
    r_unit = (Σ_h e_h)² / Σ_h e_h²,          e_h = ‖Δ_l[h, :]‖² + ‖Δ_{l+1}[:, h]‖²,

the number of directions and of units the change uses. A sparse change puts each learned
direction in its own unit(s) of that direction alone: r_unit ≈ r_dir. A low-rank change from a
Gaussian init puts direction k in unit h with weight g_hk² (g_hk the init's projection, i.i.d.
Gaussian), and for one direction r_unit = (Σ_h g_h²)²/Σ_h g_h⁴ → m/3 as m grows (E g⁴ = 3(E g²)²):
the spread ``r_unit / r_dir`` grows with the width. Nothing here is fitted; which ratio a layer
shows is a measurement.
"""

from __future__ import annotations

import numpy as np

from .. import _validate as v


def participation(x) -> float:
    """``(Σ x)² / Σ x²`` of non-negative weights ``x``: how many of them carry the total
    (n for n equal weights, 1 for one). 0 for all-zero weights."""
    x = v.nonnegative("x", x)
    x = np.ravel(x)
    den = float(np.sum(x * x))
    return 0.0 if den == 0.0 else float(np.sum(x) ** 2 / den)


def layer_structure(W0, W, R0, R) -> dict:
    """The participation ratios of a hidden layer's change (module doc): ``W0``, ``W`` (m, n) its
    incoming weights at init and now, ``R0``, ``R`` (p, m) the next layer's (its readout). Returns
    ``{"directions": r_dir, "units": r_unit, "spread": r_unit / r_dir}``."""
    W0, W = v.finite_array("W0", W0, ndim=2), v.finite_array("W", W, ndim=2)
    R0, R = v.finite_array("R0", R0, ndim=2), v.finite_array("R", R, ndim=2)
    if W0.shape != W.shape or R0.shape != R.shape or R.shape[1] != W.shape[0]:
        raise ValueError(f"layer_structure: W0, W must share a shape (m, n) and R0, R one (p, m); got "
                         f"{W0.shape}, {W.shape}, {R0.shape}, {R.shape}")
    D, E = W - W0, R - R0
    s2 = np.linalg.svd(D, compute_uv=False) ** 2
    e = np.sum(D * D, axis=1) + np.sum(E * E, axis=0)
    r_dir, r_unit = participation(s2), participation(e)
    return {"directions": r_dir, "units": r_unit, "spread": r_unit / r_dir if r_dir else float("nan")}
