"""Two-layer linear network, mode by mode (docs/theory.md §3.1, §3.4; Saxe et al. 2014).

Whitened inputs (``Σ_xx = <x xᵀ> = XᵀX/N = I``), targets with
``Σ_yx = <y xᵀ> = YᵀX/N = Σ_i s_i u_i v_iᵀ`` (SVD, s_1 ≥ s_2 ≥ ... > 0) and a
balanced init aligned with the modes (:func:`biasfree.theory.aligned_init`):
``W_1 = R diag(√a_0) Vᵀ``, ``W_2 = U diag(√a_0) Rᵀ``. Gradient flow keeps that form
and each mode strength ``a_i = u_iᵀ W_2 W_1 v_i`` obeys the logistic equation

    da_i/dt = 2 a_i (s_i - λ - a_i),   a_i(0) = a_i0,

(λ the weight decay, 0 by default), whose solution is :func:`mode_strength`; the loss is
:func:`linear_loss`, its floor :func:`final_loss`, the plateaus of stage-like learning from
small init :func:`plateaus`. Time is gradient-flow time ``t = η k`` throughout.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .. import _validate as v


class Modes(NamedTuple):
    """SVD of the cross-covariance ``Σ_yx = U diag(s) Vᵀ`` of a data set — or, from
    ``data_modes(..., whiten=True)``, of ``Σ_yx Σ_xx^{-1/2}`` (the mode strengths in whitened
    units, the same for whitened inputs).

    ``U`` (p, r) output directions u_i, ``s`` (r,) singular values (descending),
    ``V`` (d, r) input directions v_i, ``y_power`` = tr<y yᵀ> = ``Σ_n ||y_n||² / N``,
    ``whitened`` whether ``XᵀX/N = I`` to 1e-10 (the closed forms need it), ``lam_max``
    λ_max(Σ_xx); with ``whiten=True`` also ``B`` (p, d) the least-squares map
    ``Σ_yx Σ_xx⁺``. ``linear_fraction`` Σ s_i² / y_power: with ``whiten=True`` the share of
    the target's power a linear map captures.
    """

    U: np.ndarray
    s: np.ndarray
    V: np.ndarray
    y_power: float
    whitened: bool
    lam_max: float = float("nan")
    B: np.ndarray | None = None

    @property
    def linear_fraction(self) -> float:
        return float(np.sum(self.s**2) / self.y_power) if self.y_power > 0 else 0.0


def is_whitened(X, tol: float = 1e-10) -> bool:
    """True if ``max |XᵀX/N - I| <= tol`` for inputs ``X`` (N, d)."""
    return _is_whitened(v.finite_array("X", X, ndim=2), v.nonnegative("tol", tol, scalar=True))


def _is_whitened(X, tol: float = 1e-10) -> bool:
    """:func:`is_whitened` of a checked float array ``X``, unchecked."""
    return bool(_whitening_error(X) <= tol)


def whitening_error(X) -> float:
    """``max |XᵀX/N - I|`` for inputs ``X`` (N, d): 0 for whitened inputs."""
    return _whitening_error(v.finite_array("X", X, ndim=2))


def _whitening_error(X) -> float:
    """:func:`whitening_error` of a checked float array ``X``, unchecked."""
    return float(np.max(np.abs(X.T @ X / X.shape[0] - np.eye(X.shape[1]))))


def data_modes(X, Y, rank_tol: float = 1e-10, *, whiten: bool = False) -> Modes:
    """Modes of a data set: ``Σ_yx = YᵀX/N = U diag(s) Vᵀ`` keeping ``s_i > rank_tol · s_1``.

    ``X`` (N, d) inputs, ``Y`` (N, p) targets. ``whiten``: the SVD of ``Σ_yx Σ_xx^{-1/2}``
    instead (input directions of Σ_xx below 1e-12 of its largest eigenvalue left out), with
    ``lam_max`` and the least-squares map ``B``. See :class:`Modes`.
    """
    X, Y = v.data(X, Y)
    return _data_modes(X, Y, v.nonnegative("rank_tol", rank_tol, scalar=True), whiten=whiten)


def _data_modes(X, Y, rank_tol: float = 1e-10, *, whiten: bool = False, gram=None) -> Modes:
    """:func:`data_modes` of checked float arrays ``X`` (N, d), ``Y`` (N, p), unchecked; ``gram``
    ``(XᵀX/N, its eigh)`` when the caller has them (the same numbers, not computed again)."""
    N = X.shape[0]
    S = Y.T @ X / N
    B = None
    if gram is None:
        Sxx = X.T @ X / N
        lam, W = np.linalg.eigh(Sxx)
    else:
        Sxx, (lam, W) = gram
    if whiten:
        keep = lam > 1e-12 * lam.max()
        B = S @ (W[:, keep] / lam[keep]) @ W[:, keep].T
        S = S @ (W[:, keep] / np.sqrt(lam[keep])) @ W[:, keep].T
    U, s, Vt = np.linalg.svd(S, full_matrices=False)
    r = int(np.sum(s > rank_tol * max(s[0], 1e-300))) if s.size else 0
    whitened = bool(float(np.max(np.abs(Sxx - np.eye(X.shape[1])))) <= 1e-10)  # _is_whitened(X), from Σ_xx
    return Modes(U[:, :r], s[:r], Vt[:r].T, float(np.mean(np.sum(Y**2, axis=1))), whitened,
                 float(lam.max()), B)


def mode_projections(beta, modes: Modes) -> np.ndarray:
    """Mode strengths of linear maps: ``a_i = u_iᵀ βᵀ v_i``.

    ``beta`` (..., d, p), e.g. ``Trajectory.beta`` (T, d, p); ``modes`` from
    :func:`data_modes`. Returns (..., r).
    """
    if not isinstance(modes, Modes):
        raise TypeError(f"modes must be a Modes (from biasfree.theory.data_modes), got "
                        f"{type(modes).__name__}")
    d, p = modes.V.shape[0], modes.U.shape[0]
    beta = v.finite_array("beta", beta, ndim=tuple(range(2, 8)))
    if beta.shape[-2:] != (d, p):
        raise ValueError(f"beta must have shape (..., d, p) = (..., {d}, {p}) to match the modes, "
                         f"got {beta.shape}")
    return np.einsum("...dp,pi,di->...i", beta, modes.U, modes.V)


def broadcast_together(**arrays):
    try:
        return np.broadcast_arrays(*arrays.values())
    except ValueError:
        shapes = ", ".join(f"{k} {np.shape(a)}" for k, a in arrays.items())
        raise ValueError(f"{' and '.join(arrays)} must broadcast together (one value per mode, or "
                         f"a scalar), got shapes {shapes}") from None


def _modes(s, a0):
    s = v.nonnegative("s", s, why="singular values of Σ_yx")
    a0 = v.positive("a0", a0, why="a mode that starts at 0 never grows; start it at a small positive a0 "
                                  "(a0 > 0)")
    return tuple(broadcast_together(s=s, a0=a0))


def check_decay(weight_decay) -> float:
    """``weight_decay`` λ >= 0, as a float."""
    return v.nonnegative("weight_decay", weight_decay, scalar=True, why="a weight decay λ >= 0")


def check_y_power(y_power, s) -> float:
    """``y_power`` = tr<y yᵀ> >= Σ s_i² (the targets carry at least the power a linear map
    explains; a relative shortfall up to 1e-6, float32 whitening round-off, is allowed)."""
    y = v.nonnegative("y_power", y_power, scalar=True, why="the mean squared target")
    s = np.asarray(s, dtype=float)
    explained = float(np.max(np.sum(s**2, axis=-1))) if s.ndim else float(s**2)
    if y < explained * (1.0 - 1e-6):
        raise ValueError(f"y_power={y_power!r} is below Σ s_i² = {explained:.6g}: tr<y yᵀ> is at least "
                         "the power a linear map explains; take both s and y_power from "
                         "biasfree.theory.data_modes of the same data")
    return y


def logistic(t, sigma, a0):
    """Solution of ``da/dt = 2 a (σ - a)``, ``a(0) = a0 > 0``, for any real σ:

        a(t) = a0 / (e^{-2σt} + a0 (1 - e^{-2σt}) / σ)

    (``σ = 0``: ``a0 / (1 + 2 a0 t)``). ``t`` times, ``sigma`` σ, ``a0`` a0 (broadcast).
    Written so that neither large t nor σ ≤ 0 overflows or divides by zero.
    """
    t, sigma, a0 = broadcast_together(t=v.times("t", t), sigma=v.real("sigma", sigma),
                              a0=v.nonnegative("a0", a0, why="a(t) of a0 < 0 blows up in finite time"))
    x = -2.0 * sigma * t
    safe = np.where(sigma == 0.0, 1.0, sigma)
    with np.errstate(over="ignore", invalid="ignore"):  # σ < 0, large t: a -> 0, handled below
        g = np.where(sigma == 0.0, 2.0 * t, -np.expm1(x) / safe)  # (1 - e^{-2σt}) / σ
        e = np.exp(x)
        return np.where(np.isinf(e), 0.0, a0 / (e + a0 * g))


def mode_strength(t, s, a0, *, weight_decay: float = 0.0):
    """Mode strength of a two-layer linear net (§3.1), with weight decay λ:

        a(t) = σ / (1 + (σ/a0 - 1) exp(-2 σ t)),   σ = s - λ,

    (λ = 0: Saxe et al.'s ``a(t) = s / (1 + (s/a0 - 1) e^{-2st})``). ``t`` times (T,),
    ``s`` singular values s_i, ``a0`` initial strengths a_i0 (broadcast; modes on the
    last axis), ``weight_decay`` λ (a mode with s ≤ λ decays to 0). Returns (T,) for
    scalar s, else (T, r).
    """
    s, a0 = _modes(s, a0)
    lam = check_decay(weight_decay)
    t = v.times("t", t)
    t = t[..., None] if s.ndim else t
    return logistic(t, s - lam, a0)


def final_loss(s, y_power: float):
    """``L_∞ = 1/2 (tr<y yᵀ> - Σ_i s_i²)``: the part of the loss no linear map removes
    (whitened inputs). ``s`` singular values of Σ_yx, ``y_power`` = tr<y yᵀ>."""
    s = v.nonnegative("s", s, why="singular values of Σ_yx")
    return 0.5 * (check_y_power(y_power, s) - float(np.sum(s**2)))


def linear_floor(X, Y, *, intercept: bool = False) -> float:
    """Least-squares residual ``min_B 1/(2N) Σ_n ||y_n - B x_n||²
    = 1/2 (tr Σ_yy - tr(Σ_yx Σ_xx⁺ Σ_xy))`` for inputs ``X`` (N, d), targets ``Y`` (N, p),
    any input covariance: the final loss of every linear(-izable) net that converges
    to the global minimum. Equals :func:`final_loss` for whitened inputs. With
    ``intercept`` the fit is affine, ``B [x; 1]`` (the floor a net with biases must beat)."""
    X, Y = v.data(X, Y)
    return _linear_floor(X, Y, intercept=v.flag("intercept", intercept))


def _linear_floor(X, Y, *, intercept: bool = False) -> float:
    """:func:`linear_floor` of checked float arrays ``X`` (N, d), ``Y`` (N, p), unchecked."""
    if intercept:
        X = np.hstack([X, np.ones((X.shape[0], 1))])
    B, *_ = np.linalg.lstsq(X, Y, rcond=None)
    return float(0.5 * np.mean(np.sum((Y - X @ B) ** 2, axis=1)))


def linear_loss(t, s, a0, y_power: float, *, weight_decay: float = 0.0):
    """``L(t) = 1/2 Σ_i (s_i - a_i(t))² + 1/2 (y_power - Σ_i s_i²)`` (§3.1).

    ``t`` times, ``s`` singular values s_i of Σ_yx, ``a0`` initial strengths a_i0,
    ``y_power`` = tr<y yᵀ> (the mean squared target), ``weight_decay`` λ (the data
    loss without the decay term, a_i(t) from :func:`mode_strength`).
    """
    s, a0 = _modes(s, a0)
    check_y_power(y_power, s)
    a = mode_strength(t, s, a0, weight_decay=weight_decay)
    fit = 0.5 * ((s - a) ** 2 if s.ndim == 0 else np.sum((s - a) ** 2, axis=-1))
    return fit + final_loss(s, y_power)


def half_time(s, a0, *, weight_decay: float = 0.0):
    """``t_1/2 = ln(σ/a0 - 1) / (2σ)``, σ = s - λ: when a mode reaches half its final
    strength σ/2 (the transition time of mode i). Needs ``a0 < σ/2``.

    ``s`` singular value(s), ``a0`` initial strength(s), ``weight_decay`` λ.
    Examples (docs/theory.md §3.1): s = 1, a0 = 1e-3 -> 3.4534; a0 = 1e-6 -> 6.9078.
    """
    s, a0 = _modes(s, a0)
    sigma = s - check_decay(weight_decay)
    if np.any(a0 >= sigma / 2):
        raise ValueError("half_time needs 0 < a0 < (s - weight_decay)/2: the mode must have "
                         "a half-way point still ahead of it")
    return np.log(sigma / a0 - 1.0) / (2.0 * sigma)


def plateaus(s, y_power: float):
    """Loss plateaus of stage-like learning (§3.4):
    ``L_k = 1/2 (tr<y yᵀ> - Σ_{i≤k} s_i²)`` for k = 0..r, modes sorted by decreasing s.

    ``s`` singular values (any order), ``y_power`` = tr<y yᵀ>. ``L_0`` is the loss at
    (near-)zero init, ``L_r`` = :func:`final_loss`. Returns (r + 1,).
    """
    s = np.sort(np.atleast_1d(v.nonnegative("s", s, why="singular values of Σ_yx")).ravel())[::-1]
    return 0.5 * (check_y_power(y_power, s) - np.concatenate([[0.0], np.cumsum(s**2)]))


_MAX_GD_STEPS = 10**7


def gd_steps(steps) -> np.ndarray:
    """``steps`` checked for a GD map iterated step by step: sorted non-negative whole numbers
    (T,), at most ``_MAX_GD_STEPS``; returned as int64."""
    raw = v.finite_array("steps", steps, ndim=1)
    if np.any(raw != np.round(raw)):
        raise TypeError("steps must be whole numbers of GD steps (got fractions); pass integers")
    if np.any(np.diff(raw) < 0) or raw[0] < 0:
        raise ValueError("steps must be a sorted 1-D array of non-negative integers")
    if raw[-1] > _MAX_GD_STEPS:
        raise ValueError(f"steps go up to {raw[-1]:.3g}; the map is iterated step by step, so at most "
                         f"{_MAX_GD_STEPS:.0e}: beyond, use the flow's (deep_)mode_strength at t = η k")
    return raw.astype(np.int64)


def gd_mode_strength(steps, s, a0, lr: float):
    """Exact gradient-descent map of an aligned balanced mode, whitened inputs.

    Both layers of the mode are scaled by the same factor each step, so
    ``a_{k+1} = a_k (1 + η (s - a_k))²`` exactly (the discrete twin of
    :func:`mode_strength`; ``η`` = ``lr``, ``s`` singular value, ``a0`` = a_0). A leaky
    net with pair or rank-one init follows it with ``lr = η c`` from ``ã_0 = c a0_raw``.
    Returns ``a_k`` at the integer ``steps`` (sorted, shape (T,)).
    """
    steps = gd_steps(steps)
    s = v.nonnegative("s", s, scalar=True, why="a singular value of Σ_yx")
    a0 = v.nonnegative("a0", a0, scalar=True, why="an initial mode strength")
    lr = v.positive("lr", lr, scalar=True, why="a GD step size η > 0")
    out, a, k = np.empty(steps.shape), a0, 0
    for i, target in enumerate(steps):
        for _ in range(target - k):
            a = a * (1.0 + lr * (s - a)) ** 2
        if not np.isfinite(a):
            raise ValueError(f"lr={lr!r} is too large: GD on this mode diverges (a = {a}); stable "
                             f"steps need roughly lr < 1/s = {1 / max(s, 1e-300):.3g}")
        k = target
        out[i] = a
    return out
