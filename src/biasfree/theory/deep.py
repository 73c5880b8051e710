"""Deep linear networks, one balanced aligned mode at a time (docs/theory.md §3.3).

Depth L, whitened inputs, balanced init aligned with the modes of ``Σ_yx``
(:func:`~biasfree.theory.aligned_init` with ``depth=L``): every layer carries the
mode with the same scalar strength b, and the mode strength is the product
``a = b^L = u_iᵀ W_L ⋯ W_1 v_i``. Gradient flow on the per-mode loss
``1/2 (s - a)²`` gives ``db/dt = (s - a) b^{L-1}``, hence

    da/dt = L a^{2 - 2/L} (s - a),                        (1)
    t(a)  = ∫_{a_0}^{a} du / (L u^{2-2/L} (s - u)).       (2)

For L = 2 this is the logistic of :func:`~biasfree.theory.mode_strength`. For L > 2
the substitution ``u = s / (1 + e^{-ξ})`` (ξ the logit of u/s) removes the
singularity of (2) at u = s:

    t(ξ) = (s^{2/L - 2} / L) ∫_{ξ_0}^{ξ} (1 + e^{-ζ})^{1 - 2/L} dζ,

a smooth, increasing integrand ≥ 1, evaluated by ``scipy.integrate.quad`` and
inverted by ``scipy.optimize.brentq`` (bracket from the bound integrand ≥ 1), and
``s - a = s / (1 + e^{ξ})`` stays accurate however close a gets to s.
"""

from __future__ import annotations

import numpy as np
from scipy.integrate import quad
from scipy.optimize import brentq
from scipy.special import expit, logit

from .. import _validate as v
from ..core.inits import pair_up
from ..core.layers import Layer, Params, takes_net
from ..core.twin import twin_scales
from .modes import _modes, check_y_power, final_loss, gd_steps, logistic

_XI_FLAT = 60.0  # beyond ξ = 60 the integrand differs from 1 by < e^{-60}


def _excess(z, kappa):
    """``(1 + e^{-z})^κ - 1``, computed without cancellation."""
    return np.expm1(kappa * np.logaddexp(0.0, -z))


def _integral(lo, hi, kappa):
    """``∫_lo^hi (1 + e^{-ζ})^κ dζ = (hi - lo) + ∫ ((1 + e^{-ζ})^κ - 1) dζ``."""
    a, b = min(lo, _XI_FLAT), min(hi, _XI_FLAT)
    return (hi - lo) + (quad(_excess, a, b, args=(kappa,), epsabs=0.0, epsrel=1e-13, limit=200)[0] if b > a
                        else 0.0)


def _logit_path(t, s: float, a0: float, L: int):
    """Logit ξ(t) of a(t)/s for one mode: solves ``t(ξ) = t`` in increasing time."""
    kappa = 1.0 - 2.0 / L
    rate = L * s ** (2.0 - 2.0 / L)  # dt/dξ >= 1 / rate
    xi0 = float(logit(a0 / s))
    order = np.argsort(t)
    out = np.empty(len(t))
    xi_prev, t_prev = xi0, 0.0
    for j in order:
        tj = float(t[j])
        if tj == t_prev:
            out[j] = xi_prev
            continue
        hi = xi_prev + rate * (tj - t_prev)  # integrand >= 1, so g(hi) >= 0 up to round-off
        if xi_prev < _XI_FLAT:  # beyond, the integrand is 1 to e^{-60}: t is linear in ξ (hi)

            def g(xi, base=xi_prev, t0=t_prev, target=tj):
                return t0 + _integral(base, xi, kappa) / rate - target

            while g(hi) < 0:
                hi += 1e-9 * (1.0 + abs(hi))
            hi = brentq(g, xi_prev, hi, xtol=1e-14, rtol=1e-15, maxiter=500)
        xi_prev, t_prev = hi, tj
        out[j] = xi_prev
    return out


def _check_deep(t, s, a0):
    t = v.times("t", t)
    s, a0 = _modes(s, a0)
    if np.any(s <= 0) or np.any(a0 >= s):
        raise ValueError("deep-linear curves need s > 0 and 0 < a0 < s for every mode")
    return t, s, a0


def deep_logit(t, s, a0, depth: int):
    """Logit ``ξ_i(t) = ln(a_i / (s_i - a_i))`` of every mode of a depth-``depth`` linear net
    (see module doc): ``t`` (T,), ``s`` singular values, ``a0`` initial strengths
    (0 < a0 < s), broadcast with modes on the last axis. Returns (T,) or (T, r)."""
    L = v.integer("depth", depth, 2)
    t, s, a0 = _check_deep(t, s, a0)
    flat_t = t.ravel()
    if L == 2:
        return (logit(a0 / s) + 2.0 * s * (flat_t[:, None] if s.ndim else flat_t)).reshape(t.shape + s.shape)
    cols = [_logit_path(flat_t, float(si), float(ai), L) for si, ai in zip(s.ravel(), a0.ravel(),
                                                                         strict=True)]
    return np.stack(cols, axis=-1).reshape(t.shape + s.shape)


def deep_mode_strength(t, s, a0, depth: int):
    """Mode strength ``a(t)`` of a depth-L balanced aligned linear net, the solution of
    ``da/dt = L a^{2-2/L} (s - a)``, ``a(0) = a0`` (§3.3).

    ``t`` times (T,), ``s`` singular values s_i of Σ_yx (whitened inputs), ``a0``
    initial strengths (0 < a0 < s; broadcast, modes on the last axis), ``depth`` L ≥ 2.
    L = 2: the closed-form logistic; L > 2: quadrature of t(a) and root finding.
    """
    if v.integer("depth", depth, 2) == 2:
        t, s, a0 = _check_deep(t, s, a0)
        return logistic(t[..., None] if s.ndim else t, s, a0)
    return np.asarray(s, dtype=float) * expit(deep_logit(t, s, a0, depth))


def deep_loss(t, s, a0, depth: int, y_power: float):
    """``L(t) = 1/2 Σ_i (s_i - a_i(t))² + 1/2 (y_power - Σ_i s_i²)`` for a depth-L net,
    a_i from :func:`deep_mode_strength` (``s_i - a_i = s_i / (1 + e^{ξ_i})`` computed
    directly). ``y_power`` = tr<y yᵀ>; other arguments as in :func:`deep_mode_strength`."""
    t, s, a0 = _check_deep(t, s, a0)
    check_y_power(y_power, s)
    gap = s * expit(-deep_logit(t, s, a0, depth))
    fit = 0.5 * (gap**2 if s.ndim == 0 else np.sum(gap**2, axis=-1))
    return fit + final_loss(s, y_power)


def deep_time_to(a, s, a0, depth: int):
    """``t(a) = ∫_{a0}^{a} du / (L u^{2-2/L} (s - u))`` (§3.3): when a mode of strength
    ``a0`` reaches ``a`` (a0 ≤ a < s). ``s``, ``a0`` scalars, ``depth`` L; ``a`` scalar or
    array."""
    L = v.integer("depth", depth, 2)
    _, s, a0 = _check_deep(0.0, s, a0)
    if s.ndim:
        raise TypeError(f"s and a0 must be single numbers here (got shape {s.shape}); use "
                        "deep_half_time or loop over the modes")
    s, a0 = float(s), float(a0)
    a = v.finite_array("a", a)
    if np.any(a < a0) or np.any(a >= s):
        raise ValueError("deep_time_to needs a0 <= a < s")
    rate = L * s ** (2.0 - 2.0 / L)
    xi0 = float(logit(a0 / s))
    times = [_integral(xi0, float(logit(ai / s)), 1.0 - 2.0 / L) / rate for ai in a.ravel()]
    return np.asarray(times).reshape(a.shape)


def deep_half_time(s, a0, depth: int):
    """Transition time of a mode: ``t_1/2 = t(s/2)`` of :func:`deep_time_to` (for L = 2,
    ``ln(s/a0 - 1)/(2s)``). Scalars ``s``, ``a0``, depth L. From small init
    (a0 << s, L > 2) it grows like ``a0^{-(1-2/L)} / (L s (1 - 2/L))``: deeper nets
    wait longer on the plateau but switch more sharply."""
    _, s_arr, a0_arr = _check_deep(0.0, s, a0)
    out = [deep_time_to(si / 2.0, si, ai, depth) for si, ai in zip(s_arr.ravel(), a0_arr.ravel(),
                                                                   strict=True)]
    return np.asarray(out, dtype=float).reshape(s_arr.shape)


# ------------------------------------------------------ deep pair nets and the GD mode map


def deep_pair_time_factor(depth: int, alpha=0.0) -> float:
    """``λ_L = c^{2(L-1)/L}``, c = (1 + α)/2 (docs/theory.md §4.1).

    A depth-L pair net (:func:`~biasfree.core.inits.pair_up`) computes
    ``f = (2c)^{L-1} W_L A ⋯ W_1 x``. *If* its blocks kept the pair form, its half
    parameters would follow the deep linear net ``(√(2λ) W_1, 2√λ A_l, √(2λ) W_L)`` in
    time ``λ t``. ``depth`` L ≥ 2, ``alpha`` the slope; λ_2 = c (the two-layer twin),
    ReLU: λ_3 = 2^{-4/3}, λ_4 = 2^{-3/2}. For α < 1 and L > 2 the middle blocks lose the
    pair form, so this is a would-be map, exact only for α = 1."""
    return twin_scales(alpha, v.integer("depth", depth, 2)).time


def _scale_layers(params: Params, end: float, mid: float) -> Params:
    last = len(params) - 1
    return tuple(Layer(np.asarray(layer.matrix) * (end if i in (0, last) else mid))
                 for i, layer in enumerate(params))


@takes_net(bias_free=True, arg="half")
def deep_pair_half_to_linear(half: Params, alpha=0.0) -> Params:
    """The deep linear net ``(√(2λ) W_1, 2√λ A_l, √(2λ) W_L)`` that the pair net
    ``pair_up(half)`` would follow in time λt (λ from :func:`deep_pair_time_factor`);
    ``half`` the bias-free half net (W_1, A_2, …, W_L), ``alpha`` the pair net's slope.
    Both compute the same function at init."""
    lam = deep_pair_time_factor(len(half), alpha)
    return _scale_layers(half, np.sqrt(2 * lam), 2 * np.sqrt(lam))


@takes_net(bias_free=True, arg="linear")
def deep_linear_to_pair(linear: Params, alpha=0.0) -> Params:
    """The pair net whose would-be linear twin is the deep linear net ``linear``: inverse
    of :func:`deep_pair_half_to_linear` on the half net (first and last layers scaled by
    ``1/√(2λ)``, middle ones by ``1/(2√λ)``), then :func:`~biasfree.core.inits.pair_up`. It
    computes the same function as ``linear`` at init, for slope ``alpha``."""
    lam = deep_pair_time_factor(len(linear), alpha)
    return pair_up(_scale_layers(linear, 1.0 / np.sqrt(2 * lam), 1.0 / (2 * np.sqrt(lam))))


def deep_gd_mode_strength(steps, s, a0, depth: int, lr: float) -> np.ndarray:
    """Exact gradient-descent map of balanced aligned modes of a depth-L linear net on
    whitened data: each layer's mode weight b moves by ``η (s - b^L) b^{L-1}``, so

        a_{k+1} = a_k (1 + η (s - a_k) a_k^{(L-2)/L})^L        (a = b^L),

    the discrete twin of :func:`deep_mode_strength` (L = 2: the map of
    :func:`~biasfree.theory.gd_mode_strength`). ``steps`` sorted non-negative integers
    (T,), ``s`` singular values (r,) or scalar, ``a0`` initial strengths (broadcast),
    ``depth`` L, ``lr`` η. Returns ``a`` at ``steps``: (T, r), or (T,) for scalar s."""
    L = v.integer("depth", depth, 2)
    steps = gd_steps(steps)
    lr = v.positive("lr", lr, scalar=True, why="a GD step size η > 0")
    s = v.nonnegative("s", s, why="singular values of Σ_yx")
    a = np.broadcast_to(v.nonnegative("a0", a0, why="initial mode strengths"), s.shape).copy()
    out, k = np.empty(steps.shape + s.shape), 0
    for i, target in enumerate(steps):
        for _ in range(target - k):
            a = a * (1.0 + lr * (s - a) * a ** ((L - 2) / L)) ** L
        if not np.all(np.isfinite(a)):
            raise ValueError(f"lr={lr!r} is too large: GD on these modes diverges; stable steps need "
                             f"roughly lr < 1/s_max = {1 / max(float(np.max(s)), 1e-300):.3g}")
        k = target
        out[i] = a
    return out
