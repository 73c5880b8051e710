"""Predicted plateau times of a saddle-to-saddle staircase (docs/theory.md §11.5).

*Data-induced* (timescales between directions; linear nets, two-layer or deep): mode i of the
data, singular value s_i, leaves its saddle at its half time (§3.1, §3.3)

    t_i = ln(s_i/a_0 − 1)/(2 s_i)   (L = 2),   t_i = ∫_{a0}^{s_i/2} du / (L u^{2−2/L}(s_i − u))   (L > 2),

and the plateau before it sits at the reduced-rank level L_{i−1} = ½(tr Σ_yy − Σ_{j<i} s_j²)
(:mod:`.reduced_rank`). The curve crosses ``L_i + s_i²/8`` (mode i at half strength, the others
on their plateaus) at t_i.

*Init-induced* (timescales between units): a unit ``a (w·x)²`` of a quadratic net (σ(z) = z²),
its w along an eigenvector e of ``M = <y x xᵀ>`` with eigenvalue μ, b = w·e, obeys while the
net is small (residual ≈ y)

    da/dt = μ b²,   db/dt = 2 μ a b,   so  C = b² − 2a² is conserved and  da/dt = μ (2a² + C),

which blows up at the *escape time* (:func:`quadratic_escape_time`)

    C = 0:  t* = 1/(2 μ a0);   C > 0:  t* = (π/2 − arctan(a0 √(2/C))) / (μ √(2C));
    C < 0, a0 > κ = √(−C/2):  t* = ln((a0 + κ)/(a0 − κ)) / (4 μ κ)   (never, if a0 ≤ κ).

It is polynomial in 1/a0, not logarithmic as for a linear unit: the unit's own init sets its
time. With the target along e fitted at p* = a b² (``p* = μ/m4``, m4 = <(e·x)⁴>), the balanced
unit (C = 0) obeys ``da/dt = 2 μ a² (1 − 2a³/p*)``; with A = (p*/2)^{1/3} and x = a/A its time
to reach x is (:func:`quadratic_unit_time_to`)

    t(x) = [1/x0 − 1/x + F(x) − F(x0)] / (2 μ A),
    F(x) = −⅓ ln(1 − x) + ⅙ ln(x² + x + 1) − arctan((2x + 1)/√3)/√3,

the half time (p = p*/2) at x = 2^{−1/3}. Time is gradient-flow time ``t = η k``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import _validate as v
from .deep import deep_half_time
from .modes import check_y_power, half_time


@dataclass(frozen=True)
class PlateauPrediction:
    """A predicted staircase: ``times`` (r,) when mode/unit i leaves its saddle (its half time),
    ``levels`` (r + 1,) the plateau losses before mode 1, …, after mode r, ``crossings`` (r,) the
    loss the curve has at ``times[i]`` (mode i half-learned, the others on their plateaus)."""

    times: np.ndarray
    levels: np.ndarray
    crossings: np.ndarray


def data_plateaus(s, a0, y_power: float, *, depth: int = 2) -> PlateauPrediction:
    """The data-induced staircase of a balanced aligned linear net of ``depth`` L from initial
    mode strength ``a0`` (scalar or one per mode) on whitened data with singular values ``s``
    (descending; e.g. ``data_modes(X, Y, whiten=True).s``) and ``y_power`` tr Σ_yy (module doc).
    Modes with equal s share one time: the count of distinct times is the plateau count."""
    s = v.positive("s", s, why="singular values of Σ_yx (drop zero modes)")
    s = np.atleast_1d(s).astype(float)
    if s.ndim != 1 or np.any(np.diff(s) > 0):
        raise ValueError("s must be a 1-D array in descending order, as data_modes returns it")
    depth = v.integer("depth", depth, 2)
    a0 = np.broadcast_to(v.positive("a0", a0, why="initial mode strengths"), s.shape).astype(float)
    if np.any(a0 >= s / 2):
        raise ValueError("data_plateaus needs a0 < s/2 for every mode (a small init): a mode already "
                         "past half strength has no plateau before it")
    y = check_y_power(y_power, s)
    times = half_time(s, a0) if depth == 2 else np.array(
        [float(deep_half_time(si, ai, depth)) for si, ai in zip(s, a0, strict=True)])
    levels = 0.5 * (y - np.concatenate([[0.0], np.cumsum(s**2)]))
    return PlateauPrediction(np.asarray(times, dtype=float), levels, levels[1:] + s**2 / 8)


def quadratic_escape_time(mu, a0, b0):
    """Escape (blow-up) time of a quadratic unit's small-init ODE ``da/dt = μ b²``,
    ``db/dt = 2 μ a b`` (module doc): ``mu`` μ > 0 the eigenvalue of <y x xᵀ> its w lies along,
    ``a0`` its output weight, ``b0`` its input weight along that eigenvector (broadcast). ``inf``
    where the unit never escapes (C < 0 and a0 ≤ κ: a shrinks to κ, b to 0)."""
    mu = v.positive("mu", mu, why="the unit escapes along a positive eigenvalue of <y x xᵀ>")
    a0, b0 = v.real("a0", a0), v.real("b0", b0)
    mu, a0, b0 = np.broadcast_arrays(mu, a0, b0)
    C = b0**2 - 2 * a0**2
    out = np.full(mu.shape, np.inf)
    with np.errstate(divide="ignore", invalid="ignore"):
        zero = np.isclose(C, 0.0, rtol=0.0, atol=1e-12 * np.maximum(b0**2, 1e-300)) & (a0 > 0)
        out = np.where(zero, 1.0 / (2 * mu * a0), out)
        pos = (C > 0) & ~zero
        r = np.sqrt(np.where(pos, 2 * C, 1.0))
        out = np.where(pos, (np.pi / 2 - np.arctan(2 * a0 / r)) / (mu * r), out)
        k = np.sqrt(np.where(C < 0, -C / 2, 1.0))
        neg = (C < 0) & ~zero & (a0 > k)
        out = np.where(neg, np.log((a0 + k) / (a0 - k)) / (4 * mu * k), out)
    return out if out.ndim else float(out)


def _F(x):
    return (-np.log1p(-x) / 3 + np.log(x * x + x + 1) / 6
            - np.arctan((2 * x + 1) / np.sqrt(3.0)) / np.sqrt(3.0))


def quadratic_unit_time_to(frac, mu, p_star, a0):
    """Time for a balanced (b0² = 2a0²) quadratic unit from output weight ``a0`` > 0 to reach the
    fraction ``frac`` of its target strength p* (p = a b² = 2a³), ``mu`` μ = <y (e·x)²>,
    ``p_star`` p* = μ/<(e·x)⁴> (module doc: t(x) at x = frac^{1/3}). Needs 2a0³ < frac·p*."""
    mu = v.positive("mu", mu, scalar=True)
    p_star = v.positive("p_star", p_star, scalar=True)
    a0 = v.positive("a0", a0, scalar=True)
    frac = v.positive("frac", frac)
    if np.any(frac >= 1):
        raise ValueError("frac must be below 1: the unit reaches its target p* only as t -> inf")
    A = (p_star / 2) ** (1 / 3)
    x0, x = a0 / A, np.cbrt(frac)
    if np.any(x0 >= x):
        raise ValueError(f"a0={a0:.3g} already has p = 2a0³ = {2 * a0**3:.3g} >= frac·p*: give a "
                         "smaller init")
    return (1 / x0 - 1 / x + _F(x) - _F(x0)) / (2 * mu * A)


def quadratic_plateaus(mu, m4: float, a0, y_power: float) -> PlateauPrediction:
    """The init-induced staircase of balanced quadratic units, unit h alone on its own feature
    e_h (features that never overlap, module doc): ``mu`` (H,) μ_h = <y (e_h·x)²>, ``m4``
    <(e·x)⁴> (the same for every feature), ``a0`` (H,) or scalar output weights (b0 = √2 a0),
    ``y_power`` <y²>. Unit h fits p*_h = μ_h/m4 and removes ½ μ_h²/m4 of the loss; the units
    leave in the order of their half times (:func:`quadratic_unit_time_to` at ½), which the
    init sets as much as μ does. ``times`` sorted; ``crossings`` = level after + μ_h²/(8 m4)."""
    mu = np.atleast_1d(v.positive("mu", mu, why="each unit's rate <y (e·x)²>"))
    m4 = v.positive("m4", m4, scalar=True, why="the fourth moment <(e·x)⁴>")
    a0 = np.broadcast_to(v.positive("a0", a0, why="each unit's output weight"), mu.shape).astype(float)
    y = v.nonnegative("y_power", y_power, scalar=True, why="the mean squared target <y²>")
    gain = 0.5 * mu**2 / m4
    if y < float(np.sum(gain)) * (1 - 1e-12):
        raise ValueError(f"y_power={y_power!r} is below Σ μ_h²/(2 m4) = {np.sum(gain):.6g}, the power the "
                         "units can fit: take mu, m4 and y_power from the same data")
    times = np.array([float(quadratic_unit_time_to(0.5, m, m / m4, a)) for m, a in zip(mu, a0, strict=True)])
    order = np.argsort(times, kind="stable")
    levels = 0.5 * y - np.concatenate([[0.0], np.cumsum(gain[order])])
    return PlateauPrediction(times[order], levels, levels[1:] + gain[order] / 4)


def crossing_times(t, loss, levels) -> np.ndarray:
    """First time the recorded curve ``loss`` (T,) at times ``t`` (T,) falls to each of
    ``levels`` (K,): linear in ln t between the two bracketing records (NaN if never; a level
    above the first record crosses at t[0]). Its error is at most one record interval."""
    t = v.times("t", t, ndim=1)
    loss = v.finite_array("loss", loss, ndim=1)
    levels = v.finite_array("levels", levels, ndim=1)
    if t.shape != loss.shape or np.any(np.diff(t) <= 0) or t[0] <= 0:
        raise ValueError("t must be positive, strictly increasing and as long as loss (records at t > 0)")
    out = np.full(levels.shape, np.nan)
    for k, lev in enumerate(levels):
        below = np.flatnonzero(loss <= lev)
        if below.size == 0:
            continue
        j = int(below[0])
        if j == 0:
            out[k] = t[0]
            continue
        w = (loss[j - 1] - lev) / (loss[j - 1] - loss[j])
        out[k] = float(np.exp(np.log(t[j - 1]) + w * (np.log(t[j]) - np.log(t[j - 1]))))
    return out


def mode_half_times(t, W1, W2, X, Y, alpha: float = 1.0) -> np.ndarray:
    """Per mode i of the target map Σ_yx = YᵀX/N = U diag(s) Vᵀ (inputs whitened, XᵀX/N = I, so
    the modes are the flow's, §3.1): the first time its strength ``a_i(t) = u_iᵀ M(t) v_i`` reaches
    s_i/2, M = c W₂W₁ the net's odd part (c = (1 + α)/2), by :func:`crossing_times` (NaN if never).
    ``W1`` (T, h, d) and ``W2`` (T, p, h) are a two-layer net's weights at the record times ``t``
    (T,); records at t ≤ 0 are left out. Unlike a plateau, this reading needs no separation
    between drops (docs/theory.md §11.6)."""
    t = v.times("t", t, ndim=1)
    X, Y = np.asarray(X, float), np.asarray(Y, float)
    U, s, Vt = np.linalg.svd(Y.T @ X / X.shape[0])
    M = 0.5 * (1.0 + float(alpha)) * np.einsum("tph,thd->tpd", np.asarray(W2, float), np.asarray(W1, float))
    a = np.einsum("pi,tpd,id->ti", U, M, Vt)[t > 0]
    return np.array([crossing_times(t[t > 0], -a[:, i], [-s[i] / 2])[0] for i in range(s.size)])
