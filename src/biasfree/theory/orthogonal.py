"""Two-layer ReLU on orthogonal inputs and their negatives (docs/theory.md §2.9; the setting
of Boursier et al. 2022, made symmetric).

n orthonormal directions q_i (columns of ``Q``, d ≥ n), inputs ``±ρ q_i`` with ρ = √n,
N = 2n points (:func:`biasfree.core.data.orthogonal_data`), targets y_i at ``+ρ q_i`` and
y'_i at ``-ρ q_i``: odd part ``o_i = (y_i - y'_i)/2``, even part ``e_i = (y_i + y'_i)/2``.
A unit k sees pair i only through ``w_ki = q_iᵀ w_k``; gradient flow reads
``dw_ki/dt = v_k (ρ/N) y_i`` (w_ki > 0), ``-v_k (ρ/N) y'_i`` (w_ki < 0).

1. *Early alignment* (:func:`alignment_directions`): with f ≈ 0 and balanced units (sign
   v_k fixed), the direction of w_k tends to a computable limit D_k.
2. *Independent half-nets* (:func:`half_targets`, :func:`aligned_halves_init`): if
   ``|o_i| > |e_i|`` for every pair, units with v_k > 0 end on ``p_i = s_i ρ q_i`` (s_i = sign
   o_i, targets ``t⁺_i = |o_i| + e_i``) and units with v_k < 0 on ``-p_i``
   (``t⁻_i = e_i - |o_i|``): exactly two two-layer linear nets with ``Σ_xx = σ² I``,
   σ² = ρ²/N, singular values ``s± = ρ||t±||/N``, whose strength ``ã = σ² a`` follows the
   logistic and, under GD, the exact map of :func:`~biasfree.theory.gd_mode_strength`.
3. *An empty half*: with no unit of one sign of v_k, that half-net is a linear net at zero
   init and ``ã(t) = 0``; :func:`aligned_halves_init` needs ``m >= 1`` units per half (a
   random init has none in one with chance 2^(1-m)).
"""

from __future__ import annotations

import numpy as np

from .. import _validate as validate
from ..core.data import orthonormal_columns
from ..core.layers import Layer, Params


def half_targets(o, e):
    """``(s, t⁺, t⁻)``: ``s_i = sign o_i``, ``t⁺_i = |o_i| + e_i`` at the point ``s_i ρ q_i``
    and ``t⁻_i = e_i - |o_i|`` at ``-s_i ρ q_i`` (the odd part ``o`` flips sign with x, the
    even part ``e`` does not); t⁺ > 0 > t⁻ when ``|e_i| < |o_i|``."""
    o = validate.finite_array("o", o, ndim=1)
    e = validate.finite_array("e", e, ndim=1)
    if o.shape != e.shape:
        raise ValueError(f"o and e must have one entry per pair i, same shape; got {o.shape} and {e.shape}")
    return np.sign(o), np.abs(o) + e, e - np.abs(o)


def half_net_modes(o, e):
    """Singular values ``s± = ρ||t±||/N`` of the two half-nets (ρ = √n, N = 2n) and the
    input variance ``σ² = ρ²/N`` of their points: ``(s_plus, s_minus, sigma2)``."""
    _, tp, tm = half_targets(o, e)
    n = tp.size
    rho, N = np.sqrt(n), 2 * n
    return rho * np.linalg.norm(tp) / N, rho * np.linalg.norm(tm) / N, rho**2 / N


def aligned_halves_init(Q, o, e, magnitudes) -> Params:
    """Units already on their final active sets (item 2 of the module doc): the first m
    with ``v_k = g_k > 0``, ``w_k = g_k R⁺``, ``R⁺ = Σ_i s_i t⁺_i q_i / ||t⁺||``; the next m
    with ``v_k = -h_k``, ``w_k = h_k R⁻``, ``R⁻ = -Σ_i s_i |t⁻_i| q_i / ||t⁻||``.

    ``Q`` (d, n) orthonormal columns, ``o``, ``e`` (n,) odd and even targets,
    ``magnitudes`` (2, m) positive ``(g, h)``; the raw half strengths are ``Σ g²`` and
    ``Σ h²``. Every unit is balanced (``|v_k| = ||w_k||``). Returns a width-2m net."""
    s, tp, tm = half_targets(o, e)
    mags = validate.positive("magnitudes", magnitudes, why="signs of v are set by the half")
    if mags.ndim != 2 or mags.shape[0] != 2 or mags.shape[1] == 0:
        raise ValueError(f"magnitudes must have shape (2, m): (g, h), got {mags.shape}")
    g, h = mags
    Q = orthonormal_columns(Q, tp.size)
    Rp = Q @ (s * tp) / np.linalg.norm(tp)
    Rm = -Q @ (s * np.abs(tm)) / np.linalg.norm(tm)
    W = np.concatenate([g[:, None] * Rp, h[:, None] * Rm])
    return (Layer(W), Layer(np.concatenate([g, -h])[None, :]))


def alignment_directions(W0, v_sign, Q, y, y_neg):
    """Frozen-residual early alignment (item 1 of the module doc) for every unit.

    ``W0`` (m, d) initial input weights, ``v_sign`` (m,) signs of v_k, ``Q`` (d, n),
    ``y``/``y_neg`` targets at ``±ρ q_i``. In ``τ = ∫|v_k| dt`` coordinate i moves with
    velocity ``G⁺ = sign(v_k)(ρ/N) y_i`` while w_ki > 0 and ``G⁻ = -sign(v_k)(ρ/N) y'_i``
    while w_ki < 0: it keeps its side if its velocity there points outwards, else crosses
    if the other side's velocity points onwards, else is stuck at 0. Returns ``(D, B)``:
    ``D`` (m, d) the limit velocity (the predicted direction, in input space), ``B`` (m,)
    a bound on ``||w_k(τ) - τ D_k||``: per coordinate ``|w_ki(0)|`` if it keeps its side
    or gets stuck, ``max(|w_ki(0)|, |G₂| |w_ki(0)|/|G₁|)`` if it crosses, plus (in
    quadrature) the part of w_k(0) outside the data span, which never moves.
    """
    Q = orthonormal_columns(Q)
    n = Q.shape[1]
    W0 = validate.finite_array("W0", W0, ndim=2)
    if W0.shape[1] != Q.shape[0]:
        raise ValueError(f"W0 has {W0.shape[1]} columns but Q has d = {Q.shape[0]} rows: W0 is (m, d)")
    v_sign = validate.finite_array("v_sign", v_sign, shape=(W0.shape[0],))
    if not np.all(np.abs(v_sign) == 1):
        raise ValueError("v_sign must hold one sign ±1 per unit")
    y = validate.finite_array("y", y, shape=(n,))
    y_neg = validate.finite_array("y_neg", y_neg, shape=(n,))
    rho, N = np.sqrt(n), 2 * n
    w = W0 @ Q  # (m, n) coordinates w_ki
    sg = v_sign[:, None]
    Gp, Gm = sg * (rho / N) * y[None, :], -sg * (rho / N) * y_neg[None, :]
    side = np.where(w >= 0, 1.0, -1.0)
    g1 = np.where(side > 0, Gp, Gm)
    g2 = np.where(side > 0, Gm, Gp)
    keeps = side * g1 > 0
    crosses = ~keeps & (-side * g2 > 0)
    D = np.where(keeps, g1, np.where(crosses, g2, 0.0))
    with np.errstate(divide="ignore", invalid="ignore"):
        cross_err = np.where(crosses, np.abs(g2) * np.abs(w) / np.abs(g1), 0.0)
    Bi = np.maximum(np.abs(w), cross_err)
    outside = W0 - w @ Q.T
    B = np.sqrt(np.sum(Bi**2, axis=1) + np.sum(outside**2, axis=1))
    return D @ Q.T, B
