"""Closed-form learning curves (THEORY.md §3).

Two-layer linear network, whitened inputs (``<x xᵀ> = I``),
``Σ_yx = <y xᵀ> = Σ_i s_i u_i v_iᵀ``, balanced init aligned with the modes, initial
mode strengths ``a_i0`` (Saxe et al. 2014). Each mode is logistic:

    a_i(t) = s_i / (1 + (s_i / a_i0 - 1) exp(-2 s_i t)),
    L(t)   = 1/2 Σ_i (s_i - a_i(t))² + 1/2 (tr<y yᵀ> - Σ_i s_i²).

A two-layer bias-free leaky ReLU net (slope α, c = (1 + α)/2) whose even part stays
zero follows the same curve at time ``c t`` from the effective strength
``ã_0 = c a_0`` (§2.4, §3.2). Time is gradient-flow time t = η k throughout.
"""

from __future__ import annotations

import numpy as np

from .nets import check_alpha, slope_factor


def _modes(s, a0):
    s, a0 = np.broadcast_arrays(np.asarray(s, dtype=float), np.asarray(a0, dtype=float))
    if np.any(s <= 0) or np.any(a0 <= 0):
        raise ValueError("singular values s and initial strengths a0 must be > 0")
    return s, a0


def mode_strength(t, s, a0):
    """``a(t) = s / (1 + (s/a0 - 1) exp(-2 s t))`` for times ``t`` (T,), singular
    values ``s`` and initial strengths ``a0`` (broadcast; modes on the last axis)."""
    s, a0 = _modes(s, a0)
    t = np.asarray(t, dtype=float)[..., None] if s.ndim else np.asarray(t, dtype=float)
    return s / (1.0 + (s / a0 - 1.0) * np.exp(-2.0 * s * t))


def linear_loss(t, s, a0, y_power: float):
    """``L(t) = 1/2 Σ_i (s_i - a_i(t))² + 1/2 (y_power - Σ_i s_i²)``.

    ``y_power`` = tr<y yᵀ>, the mean squared target; the second term is the loss no
    linear map removes.
    """
    s, a0 = _modes(s, a0)
    a = mode_strength(t, s, a0)
    fit = 0.5 * ((s - a) ** 2 if s.ndim == 0 else np.sum((s - a) ** 2, axis=-1))
    return fit + 0.5 * (y_power - np.sum(s**2))


def half_time(s, a0):
    """``t_1/2 = ln(s/a0 - 1) / (2 s)``: when a mode reaches half its strength.

    Examples (THEORY.md §3.1): s = 1, a0 = 1e-3 -> 3.4534; a0 = 1e-6 -> 6.9078.
    """
    s, a0 = _modes(s, a0)
    return np.log(s / a0 - 1.0) / (2.0 * s)


def leaky_effective_init(a0_raw, alpha):
    """``ã_0 = c a0_raw``: the effective mode strength of a leaky net whose raw
    product ``qᵀ W_2 W_1 r`` is ``a0_raw``, slope ``alpha`` (§3.2)."""
    check_alpha(alpha)
    return slope_factor(alpha) * np.asarray(a0_raw, dtype=float)


def leaky_mode_strength(t, s, a0_raw, alpha):
    """``ã(t) = s / (1 + (s/ã_0 - 1) exp(-2 s c t))``, ``ã_0 = c a0_raw`` (§3.2)."""
    c = slope_factor(alpha)
    return mode_strength(c * np.asarray(t, dtype=float), s, leaky_effective_init(a0_raw, alpha))


def leaky_loss(t, s, a0_raw, alpha, y_power: float):
    """Loss of the leaky net: :func:`linear_loss` at time ``c t`` from ``ã_0 = c a0_raw``."""
    c = slope_factor(alpha)
    return linear_loss(c * np.asarray(t, dtype=float), s, leaky_effective_init(a0_raw, alpha),
                       y_power)


def leaky_half_time(s, a0_raw, alpha):
    """``t_1/2 = ln(s/ã_0 - 1) / (2 s c)``; ReLU, s = 1, a0 = 1e-3 gives 7.600 (§3.2)."""
    return half_time(s, leaky_effective_init(a0_raw, alpha)) / slope_factor(alpha)
