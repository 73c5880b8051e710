"""Where a two-layer (leaky) ReLU net of units stands: dense hidden units or conv kernels
(docs/theory.md §11.7.6). The net ``f(x) = Σ_i v_i σ_α(ũ_i · x)`` (a conv channel: kernel ũ_i
read at every patch, readout v_i) has k effective units, the groups of aligned units of
:func:`~biasfree.core.units.effective_units` whose magnitude is above its threshold.

- **The narrow net.** Group g (members i, ``ũ_i = c_i û_g``, c_i = ‖ũ_i‖) computes one unit,
  ``(Σ_i c_i v_i) σ(û_g·x)`` (1-homogeneity); the k-unit net of these is refined to its nearest
  fixed point by Levenberg–Marquardt (trust-region
  reflective when it has fewer residuals than weights) on its residuals, then Newton on its exact Hessian (to
  round-off): the narrow fixed point that training passes near.
- **The nearest over k.** The k strongest groups for k = 0 … the count, by branch and bound
  (:mod:`~biasfree.analysis.nearest`: the zeroed units' norm bounds a candidate's distance from
  below); only a candidate whose search reached a fixed point can be the nearest (§11.7.6).
- **The embedding** (Theorem 1, §11.4: rescaled copies and zero units, the same construction for
  a kernel as for a hidden unit): member i of group g gets ``ũ_i* = c_i ŵ_g*`` and
  ``v_i* = λ_i T_g`` (T_g = ‖w_g*‖ a_g*, Σ_i c_i λ_i = 1, the λ_i closest to the net's v_i in
  least squares), every unit outside the learned groups ``ũ = 0, v = 0``. The function is the
  narrow one, and each gradient a multiple of a narrow one (0).
- **Saddle and escape.** A zero unit sits on the kink, where the Hessian is not defined. Along a
  direction ŵ, a small unit ``(b ŵ, c ĝ)`` obeys ``ḃ = ‖g(ŵ)‖c``, ``ċ = ‖g(ŵ)‖b`` with
  ``g(ŵ) = −∂L/∂v = ⟨r σ(ŵ·x)⟩`` (Euler: σ'(z)z = σ(z)), so it grows at rate
  ``λ* = max_ŵ ‖g(ŵ)‖`` (α = 1: σ₁(G) = ``|λ_min|``, §11.4.4). λ* is found by the ascent
  ``ŵ ← ∇_ŵ(ĝ·g(ŵ))/‖·‖`` (power iteration when α = 1) from several starts: a lower bound on the
  max. The fixed point is a saddle when λ* exceeds its round-off; the net is
  ``ε = (Σ_h max(b_h + c_h, 0)²/2)^{1/2}`` along it (b_h = ũ_h·ŵ*, c_h = v_h·ĝ over the zero
  units, §11.7.3's projection), and leaves after ``ln(1/ε)/λ*`` (leading order).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from ..core.conv import Conv, PooledDense
from ..core.layers import Layer
from ..core.nets import _forward
from ..core.units import conv_units, unit_groups
from .nearest import dropped_norms, nearest
from .stage_result import EmbeddedPoint
from .stationary import accumulations, gamma, gradient_tolerance, layer_norms

ASCENT_STEPS = 200
"""Steps of the escape-direction ascent from each start."""
STARTS = 8
"""Random starts of the ascent (besides the learned units' directions, ±)."""


@dataclass(frozen=True)
class UnitFixedPoint(EmbeddedPoint):
    """The embedded k-unit fixed point θ* of a (leaky) ReLU net (module doc), with the checks of
    :class:`~biasfree.analysis.stage_result.EmbeddedPoint` (``rate`` λ*); ``direction`` ŵ*,
    ``distance`` ‖θ − θ*‖ over the net's weights and ``eps`` ε along the escape direction."""

    direction: np.ndarray
    distance: float
    eps: float
    k: int = 0
    """Units of the narrow fixed point: the k ≤ effective units whose embedding is nearest the net
    (the weakest groups may be units now leaving the init's ball, §11.1, or, without the init's scale,
    its noise)."""

    m: float = 0.0
    """``ĝᵀ(∂²L/∂v²)ĝ`` of a new unit along ŵ*: its strength saturates at u* = λ*/m."""

    candidates: tuple = ()
    """``((k, ‖θ − θ*_k‖, stationary), …)``: the embeddings of the k strongest groups solved; this one is
    the nearest stationary one."""

    @property
    def drop_time(self) -> float | None:
        """``ln(u*/a₀ − 1)/(2λ*)``, u* = λ*/m, a₀ = ε²/2: the escaping unit's strength u = b c obeys
        ``u̇ = 2u(λ* − m u)`` while the learned units stay put (balanced, b = c), Saxe's logistic;
        the time at which it is half learned (u = u*/2), the loss then ``L* − (3/8)λ*²/m`` (None if
        not a saddle or ε = 0; 0 if already past half)."""
        if not self.saddle or self.eps <= 0 or self.m <= 0:
            return None
        a0, ustar = self.eps**2 / 2, self.rate / self.m
        return math.log(ustar / a0 - 1) / (2 * self.rate) if a0 < ustar / 2 else 0.0

    @property
    def saddle(self) -> bool:
        return self.stationary and self.rate > self.rate_tol

    @property
    def escape_time(self) -> float:
        """``ln(1/ε)/λ*`` (inf if not a saddle or ε = 0)."""
        if not self.saddle or self.eps <= 0:
            return math.inf
        return max(math.log(1 / self.eps), 0.0) / self.rate


LM_EVALS = 200
"""Residual evaluations Levenberg–Marquardt may take before Newton polishes (``narrow_fixed_point``). Near
a fixed point it converges in tens (quadratically at the end); a net far from one (every unit
still moving, e.g. 30 units after 400 steps) is not searched further: its point is reported with
its gradient against the round-off bound, which then says it is no fixed point. Uncapped
(100·(P + 1) evaluations) such a net took 11 s of a 1.5 s ``analyse``."""

def parts(params):
    """``(incoming (n, a), outgoing (n, b), rebuild)`` of a bias-free two-layer dense or conv net;
    ``rebuild(U, V)`` gives the net of n' units with those weights (jax-traceable)."""
    first, out = params
    if type(first) is Layer:
        return (np.asarray(first.W, float), np.asarray(out.W, float).T,
                lambda U, V: (Layer(U), Layer(V.T)))
    inc, outg = conv_units(params)
    kshape, in_shape, pad = np.shape(first.K)[1:], first.in_shape, first.padding

    def rebuild(U, V):
        conv = Conv(U.reshape((U.shape[0],) + kshape), in_shape=in_shape, padding=pad)
        if isinstance(out, PooledDense):
            return conv, PooledDense(V.T, in_shape=out.in_shape)
        S, C = math.prod(conv.out_shape), U.shape[0]  # S explicit: C = 0 (the origin) has no -1 to infer
        p = V.shape[1] // S
        return conv, Layer(V.reshape(C, p, S).transpose(1, 0, 2).reshape(p, C * S))
    return inc, outg, rebuild


def _flat_loss(rebuild, n: int, a: int, X, Y, alpha):
    def loss(th):
        U, V = th[:n * a].reshape(n, a), th[n * a:].reshape(n, -1)
        R = _forward(rebuild(U, V), X, alpha) - Y
        return 0.5 * jnp.sum(R**2) / X.shape[0]
    return loss


def _relgrad(rebuild, U, V, X, Y, alpha):
    n, a = U.shape
    th = jnp.asarray(np.concatenate([U.ravel(), V.ravel()]))
    g = np.asarray(jax.grad(_flat_loss(rebuild, n, a, X, Y, alpha))(th))
    p = rebuild(jnp.asarray(U), jnp.asarray(V))
    R = np.asarray(_forward(p, X, alpha)) - Y
    ref = 0.5 * float(np.mean(np.sum(Y**2, 1)))
    return float(np.linalg.norm(g) * np.linalg.norm(th) / ref), gradient_tolerance(p, X, R, ref), R


def relative_gradient(params, X, Y, alpha: float) -> tuple[float, float]:
    """``(‖∇L‖‖θ‖/(½⟨‖y‖²⟩), its round-off bound)`` of a bias-free two-layer dense or conv net over
    its units' weights (:func:`parts`): a fixed point has the first below the second (§11.4.3)."""
    U, V, rebuild = parts(params)
    g, tol, _ = _relgrad(rebuild, U, V, np.asarray(X, float), np.asarray(Y, float), float(alpha))
    return g, tol


def escape_rate(params, X, Y, alpha: float) -> float:
    """λ* = max_ŵ ‖⟨r σ(ŵ·x)⟩‖ at the net ``params`` (module doc): the rate at which a new unit
    leaves it (α = 1: σ₁(G), the Hessian's ``|λ_min|`` at a zero unit)."""
    U, V, rebuild = parts(params)
    return _rate(rebuild, U, V, np.asarray(X, float), np.asarray(Y, float), float(alpha))[0]


def narrow_fixed_point(rebuild, U0, V0, X, Y, alpha):
    """The narrow net's fixed point nearest (U0, V0): LM on the residuals, then Newton. ``rebuild(U, V)``
    gives the params of n rows U (n, a), V (n, b); any net ``_forward`` runs (units, kernels, heads)."""
    from scipy.optimize import least_squares

    n, a = U0.shape
    if n == 0:
        return U0, V0
    N = X.shape[0]
    Xj, Yj = jnp.asarray(X), jnp.asarray(Y)

    def res(th):
        U, V = th[:n * a].reshape(n, a), th[n * a:].reshape(n, -1)
        return ((_forward(rebuild(U, V), Xj, alpha) - Yj) / math.sqrt(N)).ravel()
    fun, jac = jax.jit(res), jax.jit(jax.jacfwd(res))
    th = np.concatenate([U0.ravel(), V0.ravel()])
    sol = least_squares(lambda t: np.asarray(fun(jnp.asarray(t))), th,
                        jac=lambda t: np.asarray(jac(jnp.asarray(t))),
                        method="lm" if Y.size >= th.size else "trf",  # LM needs residuals ≥ variables
                        xtol=1e-15, ftol=1e-15, gtol=1e-15, max_nfev=LM_EVALS)
    th = sol.x
    loss = _flat_loss(rebuild, n, a, Xj, Yj, alpha)
    grad, hess = jax.jit(jax.grad(loss)), jax.jit(jax.hessian(loss))
    g = np.asarray(grad(jnp.asarray(th)))
    for _ in range(8):  # Newton to round-off (quadratic convergence near a smooth fixed point)
        step = np.linalg.lstsq(np.asarray(hess(jnp.asarray(th))), -g, rcond=None)[0]
        g2 = np.asarray(grad(jnp.asarray(th + step)))
        if not np.linalg.norm(g2) < np.linalg.norm(g):  # the loss is flat to round-off there: the
            break  # gradient is the measure that still moves
        th, g = th + step, g2
    return th[:n * a].reshape(n, a), th[n * a:].reshape(n, -1)


def _rate(rebuild, U, V, X, Y, alpha, seed: int = 0):
    """λ* = max_ŵ ‖g(ŵ)‖, g(ŵ) = −∂L/∂v of a new unit (ŵ, 0) at (U, V) (module doc), by ascent."""
    n, a = U.shape
    b = V.shape[1]
    Xj, Yj = jnp.asarray(X), jnp.asarray(Y)

    def new_unit_loss(w, v):
        p = rebuild(jnp.vstack([jnp.asarray(U), w[None]]), jnp.vstack([jnp.asarray(V), v[None]]))
        return 0.5 * jnp.sum((_forward(p, Xj, alpha) - Yj) ** 2) / Xj.shape[0]

    def g(w):
        return -jax.grad(lambda v: new_unit_loss(w, v))(jnp.zeros(b))

    @jax.jit
    def step(w):
        gw = g(w)
        gh = gw / jnp.maximum(jnp.linalg.norm(gw), 1e-300)
        w2 = jax.grad(lambda u: gh @ g(u))(w)
        return w2 / jnp.maximum(jnp.linalg.norm(w2), 1e-300), jnp.linalg.norm(gw)

    rng = np.random.default_rng(seed)
    starts = list(rng.standard_normal((STARTS, a)))
    starts += [s * u for u in U if np.linalg.norm(u) > 0 for s in (1, -1)]
    best, best_w = -1.0, None
    for w in starts:
        w = jnp.asarray(w / np.linalg.norm(w))
        for _ in range(ASCENT_STEPS):
            w, _ = step(w)
        r = float(np.linalg.norm(np.asarray(g(w))))
        if r > best:
            best, best_w = r, np.asarray(w)
    gw = np.asarray(g(jnp.asarray(best_w)))
    gh = gw / max(np.linalg.norm(gw), 1e-300)
    # m = ĝᵀ ∂²L/∂v² ĝ: how fast the new unit's own output closes its residual (dense: ⟨σ(ŵ*·x)²⟩)
    hv = jax.jvp(jax.grad(lambda v: new_unit_loss(jnp.asarray(best_w), v)), (jnp.zeros(b),),
                 (jnp.asarray(gh),))[1]
    return best, best_w, gh, float(gh @ np.asarray(hv))


def unit_fixed_point(params, X, Y, alpha: float, sigmas, threshold) -> UnitFixedPoint:
    """The embedded fixed point of a bias-free two-layer (leaky) ReLU dense or conv net
    ``params`` (module doc), with ``sigmas`` the init noise per factor (or None) and the
    effective units' ``threshold``; its units k are ``.k``."""
    U, V, rebuild = parts(params)
    n, a = U.shape
    group = unit_groups(U, 1, sigmas)
    c = np.linalg.norm(U, axis=1)
    labels = np.unique(group)
    mags = {g: float(np.linalg.norm((c[group == g, None] * V[group == g]).sum(0))) for g in labels}
    learned = sorted((g for g in labels if mags[g] > threshold), key=lambda g: -mags[g])
    # the k strongest groups for every k ≤ the count (above it, units within the init's noise bound):
    # the nearest embedding is the answer (§11.7.6). k = 0 (the origin) is exact and free, then the count
    # down; a k whose zeroed units alone are farther than the best so far is not solved
    size2 = [float(np.sum(U[group == g] ** 2) + np.sum(V[group == g] ** 2)) for g in learned]
    bound = dropped_norms(float(np.sum(U**2) + np.sum(V**2)), size2)
    def solve(k):
        point, dist = _embedded(U, V, rebuild, group, c, learned[:k], X, Y, alpha)
        grad, tol, _ = _relgrad(rebuild, point[2], point[3], X, Y, alpha)
        return point, dist, grad <= tol

    top = len(learned)  # the origin, the count and one fewer (as before), then upward (nearest.SOLVES)
    order = [0, *dict.fromkeys(k for k in (top, top - 1, *range(1, top)) if k > 0)]
    (_, best, dist), tried = nearest(order, lambda k: bound[k], solve)
    Un, Vn, Us, Vs, learned = best
    star = rebuild(jnp.asarray(Us), jnp.asarray(Vs))
    f_w = np.asarray(_forward(star, jnp.asarray(X), alpha))
    P = float(np.prod(layer_norms(star)))
    f_n = np.zeros_like(f_w)  # the 0-unit narrow net (the origin) computes 0; a conv of 0 channels cannot run
    if len(learned):
        narrow = rebuild(jnp.asarray(Un), jnp.asarray(Vn))
        f_n = np.asarray(_forward(narrow, jnp.asarray(X), alpha))
        P = max(P, float(np.prod(layer_norms(narrow))))
    ftol = 2 * gamma(X.shape[1] + n) * P * float(np.max(np.linalg.norm(X, axis=1)))
    grad, grad_tol, R = _relgrad(rebuild, Us, Vs, X, Y, alpha)
    rate, w_dir, g_dir, m = _rate(rebuild, Un, Vn, X, Y, alpha)
    rx, rr = (float(np.sqrt(np.mean(np.sum(A**2, 1)))) for A in (X, R))
    # g = ⟨r σ(ŵ·x)⟩ over N terms, |σ(ŵ·x)| ≤ ‖x‖: γ_K (rms‖r‖ + its own round-off P rms‖x‖) rms‖x‖
    rate_tol = gamma(accumulations(star, X.shape[0])) * (rr + P * rx) * rx
    zero = np.ones(n, bool)
    for g in learned:
        zero[group == g] = False
    bh, ch = U[zero] @ w_dir, V[zero] @ g_dir
    eps = float(np.sqrt(np.sum(np.maximum(bh + ch, 0.0) ** 2) / 2))
    loss = 0.5 * float(np.mean(np.sum(R**2, 1)))
    return UnitFixedPoint(tuple(star), loss, grad, grad_tol, float(np.max(np.linalg.norm(f_w - f_n, axis=1))),
                          ftol, rate, rate_tol, w_dir, dist, eps, len(learned), m, tried)


def _embedded(U, V, rebuild, group, c, learned, X, Y, alpha):
    """The narrow net of the ``learned`` groups at its fixed point, embedded (module doc);
    ``((Un, Vn, Us, Vs, learned), ‖θ − θ*‖)``."""
    a = U.shape[1]
    U0, V0 = np.zeros((len(learned), a)), np.zeros((len(learned), V.shape[1]))
    for j, g in enumerate(learned):
        m = group == g
        u = U[m].sum(0)
        T = (c[m, None] * V[m]).sum(0)
        s = math.sqrt(np.linalg.norm(T))
        U0[j], V0[j] = s * u / np.linalg.norm(u), T / s
    Un, Vn = narrow_fixed_point(rebuild, U0, V0, X, Y, alpha)
    # embed: rescaled copies for the members, zero units for the rest
    Us, Vs = np.zeros_like(U), np.zeros_like(V)
    for j, g in enumerate(learned):
        idx = np.flatnonzero(group == g)
        wn = np.linalg.norm(Un[j])
        T = wn * Vn[j]
        tt = float(T @ T)
        ci = c[idx]
        mu = (tt - float(ci @ (V[idx] @ T))) / float(ci @ ci)
        lam = (V[idx] @ T + mu * ci) / tt
        Us[idx] = ci[:, None] * (Un[j] / wn)[None]
        Vs[idx] = lam[:, None] * T[None]
    dist = float(np.sqrt(np.sum((U - Us) ** 2) + np.sum((V - Vs) ** 2)))
    return (Un, Vn, Us, Vs, learned), dist


def unit_levels(params, X, Y, alpha: float, sigmas, threshold) -> np.ndarray:
    """The losses of the embedded fixed points with 0, 1, …, k units (the k strongest groups, each
    narrow net at its fixed point): the levels a staircase of this net is matched to (§11.3.3)."""
    U, V, rebuild = parts(params)
    group = unit_groups(U, 1, sigmas)
    c = np.linalg.norm(U, axis=1)
    labels = np.unique(group)
    mags = {g: float(np.linalg.norm((c[group == g, None] * V[group == g]).sum(0))) for g in labels}
    learned = sorted((g for g in labels if mags[g] > threshold), key=lambda g: -mags[g])
    out = []
    for k in range(len(learned) + 1):
        (_, _, Us, Vs, _), _ = _embedded(U, V, rebuild, group, c, learned[:k], X, Y, alpha)
        R = np.asarray(_forward(rebuild(jnp.asarray(Us), jnp.asarray(Vs)), jnp.asarray(X), alpha)) - Y
        out.append(0.5 * float(np.mean(np.sum(R**2, 1))))
    return np.array(out)

