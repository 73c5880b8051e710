"""Where a two-layer (leaky) ReLU net of units stands: dense hidden units or conv kernels
(docs/theory.md §11.7.6). The net ``f(x) = Σ_i v_i σ_α(ũ_i · x)`` (a conv channel: kernel ũ_i
read at every patch, readout v_i) has k effective units, the groups of aligned units of
:func:`~biasfree.core.units.effective_units` whose magnitude is above its threshold.

- **The narrow net.** Group g (members i, ``ũ_i = c_i û_g``, c_i = ‖ũ_i‖) computes one unit,
  ``(Σ_i c_i v_i) σ(û_g·x)`` (1-homogeneity); the k-unit net of these is refined to its nearest
  fixed point by Levenberg–Marquardt (trust-region
  reflective when it has fewer residuals than weights) on its residuals, then Newton on its exact Hessian (to
  round-off): the narrow fixed point that training passes near.
- **The nearest over k.** For k = 0 … the count two candidates, by branch and bound
  (:mod:`~biasfree.analysis.nearest`): the k strongest groups, the rest zero, and the groups merged
  greedily into m ≥ k clusters with the k strongest kept
  (:func:`~biasfree.analysis.nearest.merged_candidates`: copies of one unit that grew apart by more
  than the init's noise); a lower bound on each distance (the zeroed
  units' norm, each cluster's rows off one direction) skips a candidate already farther than the best, and
  only a candidate whose search reached a fixed point can be the nearest (§11.7.6).
- **The embedding** (Theorem 1, §11.4: rescaled copies and zero units, the same construction for
  a kernel as for a hidden unit): member i of cluster g gets ``ũ_i* = c_i ŵ_g*`` and
  ``v_i* = λ_i T_g`` (T_g = ‖w_g*‖ a_g*, Σ_i c_i λ_i = 1, c_i > 0, the c_i and λ_i nearest the net's
  members: :func:`~biasfree.analysis.nearest.nearest_copies`, else c_i = ‖ũ_i‖ and the λ_i closest
  in least squares), every unit outside the kept clusters ``ũ = 0, v = 0``. The function is the
  narrow one, and each gradient a multiple of a narrow one (0).
- **Saddle and escape.** A zero unit sits on the kink, where the Hessian is not defined. Along a
  direction ŵ, a small unit ``(b ŵ, c ĝ)`` obeys ``ḃ = ‖g(ŵ)‖c``, ``ċ = ‖g(ŵ)‖b`` with
  ``g(ŵ) = −∂L/∂v = ⟨r σ(ŵ·x)⟩`` (Euler: σ'(z)z = σ(z)), so it grows at rate
  ``λ* = max_ŵ ‖g(ŵ)‖`` (α = 1: σ₁(G) = ``|λ_min|``, §11.4.4). λ* is found by the ascent
  ``ŵ ← ∇_ŵ(ĝ·g(ŵ))/‖·‖`` (power iteration when α = 1) from several starts: a lower bound on the
  max. The fixed point is a saddle when λ* exceeds its round-off and the net has a unit to spare (a
  zero unit or a copy: ``full`` says it has none); the net is
  ``ε = (Σ_h max(b_h + c_h, 0)²/2)^{1/2}`` along it (b_h = ũ_h·ŵ*, c_h = v_h·ĝ over the zero
  units, §11.7.3's projection), and leaves after ``ln(1/ε)/λ*`` (leading order).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from ..core.conv import Conv, PooledDense
from ..core.layers import Layer
from ..core.nets import forward_unchecked
from ..core.units import conv_units, unit_groups
from .lm_rotation import rotated
from .nearest import SOLVES, merged_candidates, nearest, nearest_copies
from .stage_budget import check, fits
from .stage_result import EmbeddedPoint
from .stationary import accumulations, gamma, gradient_tolerance, layer_norms
from .unit_escape import ascent_rate


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
    """``((k, ‖θ − θ*_k‖, stationary), …)``: for each k solved, the nearer stationary of its two
    embeddings (the k strongest groups; the groups merged into k); this one is the nearest."""

    groups: int = 0
    """Groups of aligned units the k narrow units embed; more than k when groups merged into one unit
    (copies that grew apart: :func:`~biasfree.analysis.nearest.merged_candidates`)."""

    copy_time: float | None = None
    """``min_i ln(u*/a_i − 1)/(2λ*)`` over the members of the kept clusters with strength
    a_i = ‖ũ_i‖‖v_i‖ < u*/2 (u* = λ*/m): when such a member would be half learned if it turned to ŵ*
    at once, as a new unit grows (None: no such member). ε counts the zero units only, so where this
    is before :attr:`drop_time` a member may leave its group first (§11.7.6's limits)."""

    full: bool = False
    """Every unit of the net is one narrow unit, alone (width k: no zero unit, no copy): a new unit
    would grow at λ*, but the net has none to grow, so the point is not a saddle of this width (an
    audit's width-1 net at its best fit: Hessian eigenvalues ≥ 0, §11.7.6)."""

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
        return self.stationary and self.rate > self.rate_tol and not self.full

    @property
    def drop_level(self) -> float | None:
        """``L* − (3/8)λ*²/m``: the loss when the escaping unit is half learned (:attr:`drop_time`);
        None if not a saddle. A net whose loss is below it is past that drop."""
        return self.loss - 0.375 * self.rate**2 / self.m if self.saddle and self.m > 0 else None

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
(100·(P + 1) evaluations) such a net took 11 s of a 1.5 s ``analyse``. Its end is not repeatable:
a capped search amplifies round-off, and scipy 1.17.1's MINPACK reads heap memory it did not write
(exact replays of its callbacks took another path in 0–2 of 10, 3–4 of 10 under ``MALLOC_PERTURB_``)."""

@dataclass(frozen=True)
class Rebuild:
    """``rebuild(U, V)``: the bias-free two-layer dense or conv net of n' units with incoming
    weights U (n', a) and outgoing V (n', b) (jax-traceable). Hashable by value, so the compiled
    searches below take it as a static argument and are reused from call to call. Its units add:
    ``f(U, V) = Σ_i f(U_i, V_i)`` (a unit's readout reads its own hidden channel only), which the
    Jacobian and the escape ascent use (``additive``)."""

    kshape: tuple | None = None
    """A conv kernel's ``(C_in, *k)`` shape; None for a dense net."""
    in_shape: tuple = ()
    padding: str = "same"
    pooled: tuple | None = None
    """A pooled readout's spatial shape; None for a dense readout."""
    activation: str = "leaky"
    """A dense hidden layer's activation: σ_α, or "quadratic" (z², :mod:`~biasfree.analysis.unit_embed`)."""

    additive = True

    def __call__(self, U, V):
        if self.kshape is None:
            return Layer(U, activation=self.activation), Layer(V.T)
        conv = Conv(U.reshape((U.shape[0],) + self.kshape), in_shape=self.in_shape, padding=self.padding)
        if self.pooled is not None:
            return conv, PooledDense(V.T, in_shape=self.pooled)
        S, C = math.prod(conv.out_shape), U.shape[0]  # S explicit: C = 0 (the origin) has no -1 to infer
        p = V.shape[1] // S
        return conv, Layer(V.reshape(C, p, S).transpose(1, 0, 2).reshape(p, C * S))


def parts(params):
    """``(incoming (n, a), outgoing (n, b), rebuild)`` of a bias-free two-layer dense or conv net;
    ``rebuild(U, V)`` (a :class:`Rebuild`) gives the net of n' units with those weights."""
    first, out = params
    if type(first) is Layer:
        return np.asarray(first.W, float), np.asarray(out.W, float).T, Rebuild(activation=first.activation)
    inc, outg = conv_units(params)
    pooled = tuple(out.in_shape) if isinstance(out, PooledDense) else None
    return inc, outg, Rebuild(tuple(np.shape(first.K)[1:]), tuple(first.in_shape), first.padding, pooled)


def _unflat(th, shape):
    """θ = [vec U; vec V] (row-major) as (U (n, a), V (n, b)), ``shape`` (n, a)."""
    n, a = shape
    return th[:n * a].reshape(n, a), th[n * a:].reshape(n, -1)


@partial(jax.jit, static_argnames=("rebuild", "shape", "alpha"))
def _residuals(th, X, Y, *, rebuild, shape, alpha):
    """``r(θ) = vec(f_θ(X) − Y)/√N``, so ``½‖r‖² = L(θ)``."""
    U, V = _unflat(th, shape)
    return ((forward_unchecked(rebuild(U, V), X, alpha) - Y) / math.sqrt(X.shape[0])).ravel()


@partial(jax.jit, static_argnames=("rebuild", "shape", "alpha"))
def _jacobian(th, X, Y, *, rebuild, shape, alpha):
    """``∂r/∂θ`` (N p, n (a + b)). Units that add (:class:`Rebuild`): each unit's own Jacobian
    ``∂f(U_i, V_i)/∂(U_i, V_i)``, n nets of one unit (exact: the others' terms are zeros), not the
    whole net once per weight; else forward mode through the whole net."""
    if not getattr(rebuild, "additive", False):
        return jax.jacfwd(lambda t: _residuals(t, X, Y, rebuild=rebuild, shape=shape, alpha=alpha))(th)
    U, V = _unflat(th, shape)
    n = U.shape[0]

    def one(u, v):
        return forward_unchecked(rebuild(u[None], v[None]), X, alpha).ravel() / math.sqrt(X.shape[0])
    JU, JV = jax.vmap(jax.jacfwd(one, argnums=(0, 1)))(U, V)  # (n, N p, a), (n, N p, b)
    return jnp.concatenate([JU.transpose(1, 0, 2).reshape(-1, n * U.shape[1]),
                            JV.transpose(1, 0, 2).reshape(-1, n * V.shape[1])], 1)


@partial(jax.jit, static_argnames=("rebuild", "alpha"))
def _outputs(U, V, X, *, rebuild, alpha):
    """``f(X)`` of the net ``rebuild(U, V)`` (compiled once per shape)."""
    return forward_unchecked(rebuild(U, V), X, alpha)


def _out(U, V, X, rebuild, alpha) -> np.ndarray:
    return np.asarray(_outputs(jnp.asarray(U), jnp.asarray(V), jnp.asarray(X), rebuild=rebuild, alpha=alpha))


def _loss(th, X, Y, rebuild, shape, alpha):
    U, V = _unflat(th, shape)
    R = forward_unchecked(rebuild(U, V), X, alpha) - Y
    return 0.5 * jnp.sum(R**2) / X.shape[0]


_grad = jax.jit(jax.grad(_loss), static_argnames=("rebuild", "shape", "alpha"))


@partial(jax.jit, static_argnames=("rebuild", "shape", "alpha"))
def _newton_terms(th, X, Y, *, rebuild, shape, alpha):
    """``(∇L, ∇²L)`` at θ. Units that add: ``∇L = Jᵀr`` and ``∇²L = JᵀJ + Σ_m r_m ∇²r_m``, whose
    second term is block diagonal (unit i's ``∇²_{θ_i}(r·f(θ_i))/√N``, f(θ_i) its own net); else
    by forward-over-reverse through the whole net."""
    kw = {"rebuild": rebuild, "shape": shape, "alpha": alpha}
    if not getattr(rebuild, "additive", False):
        return jax.grad(_loss)(th, X, Y, **kw), jax.hessian(_loss)(th, X, Y, **kw)
    r, J = _residuals(th, X, Y, **kw), _jacobian(th, X, Y, **kw)
    U, V = _unflat(th, shape)
    (n, a), b = shape, V.shape[1]

    def pulled(t):  # r·f(θ_i)/√N of one unit θ_i = (u, v), r held
        f = forward_unchecked(rebuild(t[None, :a], t[None, a:]), X, alpha)
        return r @ f.ravel() / math.sqrt(X.shape[0])
    blocks = jax.vmap(jax.hessian(pulled))(jnp.concatenate([U, V], 1))  # (n, a + b, a + b)
    idx = jnp.concatenate([jnp.arange(n)[:, None] * a + jnp.arange(a),
                           n * a + jnp.arange(n)[:, None] * b + jnp.arange(b)], 1)  # (n, a + b)
    H = (J.T @ J).at[idx[:, :, None], idx[:, None, :]].add(blocks)
    return J.T @ r, H


def _relgrad(rebuild, U, V, X, Y, alpha):
    th = jnp.asarray(np.concatenate([U.ravel(), V.ravel()]))
    g = np.asarray(_grad(th, jnp.asarray(X), jnp.asarray(Y), rebuild, U.shape, alpha))
    p = jax.tree_util.tree_map(jnp.asarray, rebuild(U, V))
    R = _out(U, V, X, rebuild, alpha) - Y
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
    R = _out(U, V, X, rebuild, float(alpha)) - np.asarray(Y, float)
    return ascent_rate(rebuild, U, R, np.asarray(X, float), float(alpha), V.shape[1])[0]


def search_numbers(params, outputs: int, k: int) -> int:
    """Numbers in the Jacobian of the k-unit narrow net of ``params`` (:func:`parts`) on ``outputs``
    residuals (N p): ``outputs × k(a + b)``, the largest array its search makes."""
    U, V, _ = parts(params)
    return int(outputs) * int(k) * (U.shape[1] + V.shape[1])


def narrow_fixed_point(rebuild, U0, V0, X, Y, alpha):
    """The narrow net's fixed point nearest (U0, V0): LM on the residuals, then Newton. ``rebuild(U, V)``
    gives the params of n rows U (n, a), V (n, b); any net ``forward_unchecked`` runs (units, kernels, heads).
    A hashable ``rebuild`` (:class:`Rebuild`) reuses the compiled residuals, Jacobian and Hessian
    from call to call; one whose units add (``rebuild.additive``) has its Jacobian unit by unit."""
    from scipy.optimize import least_squares
    from threadpoolctl import threadpool_limits

    n, a = U0.shape
    if n == 0:
        return U0, V0
    Xj, Yj = jnp.asarray(X), jnp.asarray(Y)
    kw = {"rebuild": rebuild, "shape": (n, a), "alpha": float(alpha)}
    th = np.concatenate([U0.ravel(), V0.ravel()])
    fits(Y.size * th.size, f"the Jacobian of the {n}-unit narrow net")  # search_numbers, in analyse's budget

    def res(t):
        check()
        return np.asarray(_residuals(jnp.asarray(t), Xj, Yj, **kw))

    def jac(t):
        check()
        return np.asarray(_jacobian(jnp.asarray(t), Xj, Yj, **kw))
    with threadpool_limits(1, user_api="blas"):  # two spinning BLAS threads made a 320² lstsq 0.6 s
        if Y.size > th.size + 1:  # LM, on the rotated residuals (:mod:`.lm_rotation`)
            res, jac = rotated(res, jac)
        sol = least_squares(res, th, jac=jac,
                            method="lm" if Y.size >= th.size else "trf",  # LM needs residuals ≥ variables
                            xtol=1e-15, ftol=1e-15, gtol=1e-15, max_nfev=LM_EVALS)
        th = sol.x
        g, H = (np.asarray(x) for x in _newton_terms(jnp.asarray(th), Xj, Yj, **kw))
        for _ in range(8):  # Newton to round-off (quadratic convergence near a smooth fixed point)
            check()
            step = np.linalg.lstsq(H, -g, rcond=None)[0]
            g2, H2 = (np.asarray(x) for x in _newton_terms(jnp.asarray(th + step), Xj, Yj, **kw))
            if not np.linalg.norm(g2) < np.linalg.norm(g):  # the loss is flat to round-off there: the
                break  # gradient is the measure that still moves
            th, g, H = th + step, g2, H2
    return th[:n * a].reshape(n, a), th[n * a:].reshape(n, -1)


def _learned(U, V, sigmas, threshold):
    """``(group, c, learned)``: each unit's group (:func:`~biasfree.core.units.unit_groups`), the
    units' norms c_i, and the groups above ``threshold`` by magnitude ‖Σ_i c_i v_i‖, strongest first."""
    group = unit_groups(U, 1, sigmas)
    c = np.linalg.norm(U, axis=1)
    labels = np.unique(group)
    mags = {g: float(np.linalg.norm((c[group == g, None] * V[group == g]).sum(0))) for g in labels}
    return group, c, sorted((g for g in labels if mags[g] > threshold), key=lambda g: -mags[g])


def unit_fixed_point(params, X, Y, alpha: float, sigmas, threshold, solved=None) -> UnitFixedPoint:
    """The embedded fixed point of a bias-free two-layer (leaky) ReLU dense or conv net
    ``params`` (module doc), with ``sigmas`` the init noise per factor (or None) and the
    effective units' ``threshold``; its units k are ``.k``. ``solved``: a dict that keeps the
    narrow fixed points found, by the groups kept, for :func:`unit_levels` of the same net."""
    U, V, rebuild = parts(params)
    n, a = U.shape
    group, c, learned = _learned(U, V, sigmas, threshold)
    # per k ≤ the count (above it, units within the init's noise bound; §11.7.6) two candidates: the k
    # strongest groups, the rest zero, and of the groups merged into m > k clusters (copies of one unit
    # that grew apart by more than the noise) the k strongest, m the one of least lower bound. k = 0 (the
    # origin) is exact and free, then the count, one fewer, and upward (a high k's bound, the few units it
    # zeroes, is loose); a k, or a candidate within it, whose bound is past the best so far is not solved
    top = len(learned)
    cands = merged_candidates(U, V, group, learned)
    # the searches' budget: 2·SOLVES, two candidates a k (the origin's is free). Each new k compiles its
    # own search; a budget of SOLVES·count units made up to 15 searches and slowed the suite by about 60 s
    left = [2 * SOLVES]

    def solve(k):
        found = []
        for clusters, bnd in sorted(cands[k], key=lambda x: x[1]):
            if found and (found[0][2] and bnd >= found[0][1] or clusters == found[0][0][4]):
                continue
            if clusters and left[0] <= 0:
                break
            left[0] -= bool(clusters)
            point, dist = _embedded(U, V, rebuild, group, c, clusters, X, Y, alpha, solved)
            grad, tol, _ = _relgrad(rebuild, point[2], point[3], X, Y, alpha)
            found.append((point, dist, grad <= tol))
        return min(found, key=lambda f: (not f[2], f[1])) if found else None

    def low(k):
        return min(b for _, b in cands[k])
    order = [0, *dict.fromkeys(k for k in (top, top - 1, *range(1, top)) if k > 0)]  # nearest.SOLVES
    (_, best, dist), tried = nearest(order, low, solve, limit=top + 1)  # the budget above limits
    Un, Vn, Us, Vs, clusters = best
    star = jax.tree_util.tree_map(jnp.asarray, rebuild(Us, Vs))
    f_w = _out(Us, Vs, X, rebuild, alpha)
    P = float(np.prod(layer_norms(star)))
    f_n = np.zeros_like(f_w)  # the 0-unit narrow net (the origin) computes 0; a conv of 0 channels cannot run
    if len(clusters):
        narrow = jax.tree_util.tree_map(jnp.asarray, rebuild(Un, Vn))
        f_n = _out(Un, Vn, X, rebuild, alpha)
        P = max(P, float(np.prod(layer_norms(narrow))))
    ftol = 2 * gamma(X.shape[1] + n) * P * float(np.max(np.linalg.norm(X, axis=1)))
    grad, grad_tol, R = _relgrad(rebuild, Us, Vs, X, Y, alpha)
    rate, w_dir, g_dir, m = ascent_rate(rebuild, Un, f_n - np.asarray(Y, float), X, alpha, V.shape[1])
    rx, rr = (float(np.sqrt(np.mean(np.sum(A**2, 1)))) for A in (X, R))
    # g = ⟨r σ(ŵ·x)⟩ over N terms, |σ(ŵ·x)| ≤ ‖x‖: γ_K (rms‖r‖ + its own round-off P rms‖x‖) rms‖x‖
    rate_tol = gamma(accumulations(star, X.shape[0])) * (rr + P * rx) * rx
    zero = ~np.isin(group, [g for cl in clusters for g in cl])
    bh, ch = U[zero] @ w_dir, V[zero] @ g_dir
    eps = float(np.sqrt(np.sum(np.maximum(bh + ch, 0.0) ** 2) / 2))
    loss = 0.5 * float(np.mean(np.sum(R**2, 1)))
    strength = np.linalg.norm(U[~zero], axis=1) * np.linalg.norm(V[~zero], axis=1)
    small = strength[strength < rate / (2 * m)] if m > 0 else strength[:0]  # (a0 < u*/2, module doc)
    small = small[small > 0]
    copy_time = float(np.min(np.log(rate / m / small - 1))) / (2 * rate) if small.size else None
    full = bool(not zero.any() and n == len(clusters))
    return UnitFixedPoint(tuple(star), loss, grad, grad_tol, float(np.max(np.linalg.norm(f_w - f_n, axis=1))),
                          ftol, rate, rate_tol, w_dir, dist, eps, len(clusters), m, tried,
                          sum(len(cl) for cl in clusters), copy_time, full)


def _embedded(U, V, rebuild, group, c, clusters, X, Y, alpha, solved=None):
    """The narrow net of one unit per cluster of groups (``clusters``: tuples of group labels) at its
    fixed point, embedded (module doc); ``((Un, Vn, Us, Vs, clusters), ‖θ − θ*‖)``. ``solved``: the
    narrow fixed points found before for this net, by the clusters kept (read and filled; None: none
    kept)."""
    a = U.shape[1]
    U0, V0 = np.zeros((len(clusters), a)), np.zeros((len(clusters), V.shape[1]))
    members = [np.isin(group, cl) for cl in clusters]
    for j, m in enumerate(members):
        u = U[m].sum(0)
        T = (c[m, None] * V[m]).sum(0)
        s = math.sqrt(np.linalg.norm(T))
        U0[j], V0[j] = s * u / np.linalg.norm(u), T / s
    key = tuple(tuple(int(g) for g in cl) for cl in clusters)
    if solved is not None and key in solved:
        Un, Vn = solved[key]
    else:
        Un, Vn = narrow_fixed_point(rebuild, U0, V0, X, Y, alpha)
        if solved is not None:
            solved[key] = Un, Vn
    # embed: rescaled copies for the members (their norms free, else the net's own), zero units for the rest
    Us, Vs = np.zeros_like(U), np.zeros_like(V)
    for j, m in enumerate(members):
        idx = np.flatnonzero(m)
        wn = np.linalg.norm(Un[j])
        T = wn * Vn[j]
        tt = float(T @ T)
        ci = c[idx]
        mu = (tt - float(ci @ (V[idx] @ T))) / float(ci @ ci)
        lam = (V[idx] @ T + mu * ci) / tt
        Us[idx] = ci[:, None] * (Un[j] / wn)[None]
        Vs[idx] = lam[:, None] * T[None]
        free = nearest_copies(U[idx], V[idx], Un[j] / wn, T)
        if free is not None and (np.sum((U[idx] - free[0]) ** 2) + np.sum((V[idx] - free[1]) ** 2)
                                 < np.sum((U[idx] - Us[idx]) ** 2) + np.sum((V[idx] - Vs[idx]) ** 2)):
            Us[idx], Vs[idx] = free
    dist = float(np.sqrt(np.sum((U - Us) ** 2) + np.sum((V - Vs) ** 2)))
    return (Un, Vn, Us, Vs, tuple(clusters)), dist


def unit_levels(params, X, Y, alpha: float, sigmas, threshold, solved=None) -> np.ndarray:
    """The losses of the embedded fixed points with 0, 1, …, k units (the k strongest groups, each
    narrow net at its fixed point): the levels a staircase of this net is matched to (§11.3.3).
    ``solved``: :func:`unit_fixed_point`'s dict for the same net (its narrow nets not solved again)."""
    U, V, rebuild = parts(params)
    group, c, learned = _learned(U, V, sigmas, threshold)
    out = []
    for k in range(len(learned) + 1):
        (_, _, Us, Vs, _), _ = _embedded(U, V, rebuild, group, c, [(g,) for g in learned[:k]], X, Y, alpha,
                                           solved)
        R = _out(Us, Vs, X, rebuild, alpha) - Y
        out.append(0.5 * float(np.mean(np.sum(R**2, 1))))
    return np.array(out)

