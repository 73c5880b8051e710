"""Where separate linear attention stands: its nearest embedded k-head fixed point, found
numerically (docs/theory.md §11.7.12). Head h computes ``f_h = (K_h G v_h)·(Q_h e_q)``
(:class:`~biasfree.core.attention.SeparateAttention`; ``v_h`` the value weights' last row, the
only one read, ``G = (1/c) Σ_n e_n e_nᵀ``), trilinear in its own weights (v_h, K_h, Q_h).

- **The narrow net.** The k effective units are the rank of B = Σ_h γ_h K_hᵀQ_h (§11.1);
  at most ⌈k/r⌉ heads (r the key–query rank) carry it: the net's n strongest, by ‖v_h‖‖K_hᵀQ_h‖_F,
  for the n = 0 … ⌈k/r⌉ whose embedding is nearest (branch and bound, §11.7.6). The
  layer of those heads alone, started from their weights, is moved to its nearest stationary
  point of the sample loss by :func:`~biasfree.analysis.unit_stage.narrow_fixed_point`
  (Levenberg–Marquardt on the residuals, then Newton): no closed form exists on a sample (§11.7.11).
- **The family.** A head's function is unchanged along (v, K, Q) → (bv, AK, A⁻ᵀQ/b), b ≠ 0, A in
  GL(r): a narrow fixed point is a family, and where the solver lands in it depends on round-off
  (measured: the K weights scaled by 1 + 1e-12 moved the landing point's distance by 9%). Each kept
  head is moved to its family's point nearest the net's head (:func:`nearest_in_family`), so the
  distance is the family's, not the landing point's.
- **The embedding** (Theorem 1's zero unit): the kept heads get the narrow weights (the unread rows of
  V stay the net's), every other head ``V_h = K_h = Q_h = 0``. The function is the narrow one,
  and a zero head's gradient is 0: each of ∂f_h/∂v_h, ∂f_h/∂K_h, ∂f_h/∂Q_h is a product of the
  head's two other factors. Checked: the function against 2γ_KΠ max z, the relative gradient
  against :func:`~biasfree.analysis.stationary.gradient_bound` (three factors of norms
  ‖v‖_F, ‖K‖_F, ‖Q‖_F on features of norm ‖G‖_F‖e_q‖).
- **Saddle.** A zero head moved by ε(k, v, q) changes f by ε³(kᵀGv)(qᵀe_q) exactly, and the
  loss by ``−ε³ T(k, v, q) + ½ε⁶⟨((kᵀGv)(qᵀe_q))²⟩`` with ``T = ⟨(y − f) G ⊗ e_q⟩`` (the Hessian
  is blind to it: its zero-head block is 0). The point is a saddle when it is stationary, has a
  zero head, and the escape coefficient ``c* = max_{‖k‖=‖v‖=‖q‖=1} T(k, v, q)`` (the tensor's
  spectral norm; T is odd in each argument, so ± is a descent) is above its round-off. c* is found
  by higher-order power iteration from several starts: a lower bound on the max.
- **Time to leave** (at a saddle): the net's small heads under the cubic flow ẋ = ∇P(x)
  (:mod:`~biasfree.analysis.head_escape`, §11.7.13): ``HeadFixedPoint.leave``.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from ..core.attention import SeparateAttention, tokens
from .head_escape import Leave, time_to_leave
from .nearest import dropped_norms, nearest
from .stage_result import EmbeddedPoint
from .stationary import gamma, gradient_bound
from .unit_stage import narrow_fixed_point

ASCENT_STEPS = 200
"""Steps of the power iteration for c* from each start."""
STARTS = 8
"""Random starts of the power iteration (besides the unfoldings' top vectors and the net's heads)."""


@dataclass(frozen=True)
class HeadFixedPoint(EmbeddedPoint):
    """The embedded k-head fixed point θ* of separate attention (module doc), with the checks of
    :class:`~biasfree.analysis.stage_result.EmbeddedPoint` (over all heads' read weights; ``rate``
    the escape coefficient c*: the loss falls as −c*ε³): ``heads`` the net's heads it keeps,
    ``distance`` ‖θ − θ*‖ over V, K, Q (θ*'s heads each at their family's point nearest the net's,
    :func:`nearest_in_family`), ``k`` the effective units (rank of B)."""

    heads: tuple
    distance: float
    k: int
    direction: tuple = ()
    """The unit (k, v, q) of c*: a zero head ε(k, v, q) lowers the loss by c*ε³ − ½ε⁶⟨φ²⟩."""
    leave: Leave | None = None
    """At a saddle, when the net leaves it (:func:`~biasfree.analysis.head_escape.time_to_leave`,
    §11.7.13); None otherwise."""
    candidates: tuple = ()
    """``((n, ‖θ − θ*_n‖, stationary), …)``: the embeddings of the n strongest heads solved; this one is
    the nearest stationary one."""

    @property
    def saddle(self) -> bool:
        """Stationary, a zero head left, and c* above its round-off (module doc)."""
        free = np.shape(self.params.V)[0] > len(self.heads)
        return self.stationary and free and self.rate > self.rate_tol


def _weights(layer) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(v (H, D+1), K (H, r, D+1), Q (H, r, D+1))``: the weights the layer reads."""
    return (np.asarray(layer.V, float)[:, -1, :], np.asarray(layer.K, float), np.asarray(layer.Q, float))


def features(layer, X) -> tuple[np.ndarray, np.ndarray]:
    """``G`` (S, D+1, D+1) and ``e_q`` (S, D+1) of each sequence (the layer's own reading)."""
    E = np.asarray(tokens(jnp.asarray(X), layer.n_ctx), float)
    C = E if layer.include_query else E[:, :-1]
    return np.einsum("snd,sne->sde", C, C) / layer.divisor, E[:, -1]


def _norms(v, K, Q) -> np.ndarray:
    return np.array([np.linalg.norm(v), np.linalg.norm(K), np.linalg.norm(Q)])


def accumulations(layer, S: int) -> int:
    """K = S + (N + 1) + 3(D + 1) + H r: the sums one gradient entry goes through (the sample, the
    context's G, the three contractions, the heads and ranks)."""
    return S + layer.n_ctx + 1 + 3 * (layer.d + 1) + layer.heads * layer.rank


def relative_gradient(layer, X, Y, feats=None) -> tuple[float, float, np.ndarray]:
    """``(‖∇L‖‖θ‖/(½⟨y²⟩), its round-off bound, residuals)`` over the weights the layer reads;
    ``feats`` its :func:`features` on X, if already computed. The bound is §11.4.3's for three
    factors of norms w = (‖v‖_F, ‖K‖_F, ‖Q‖_F) over all heads on features of norm
    ``z_s = ‖G_s‖_F‖e_q,s‖`` (:func:`~biasfree.analysis.stationary.gradient_bound`):
    ``|f_h| ≤ ‖v_h‖‖K_h‖_F‖Q_h‖_F z`` and Σ_h of such products is at most Π w (Hölder)."""
    v, K, Q = _weights(layer)
    Xj = jnp.asarray(X)

    def loss(v, K, Q):
        lay = dataclasses.replace(layer, V=jnp.asarray(layer.V).at[:, -1, :].set(v), K=K, Q=Q)
        return 0.5 * jnp.mean(jnp.sum((lay.apply(Xj) - Y) ** 2, 1))
    g = jax.grad(loss, argnums=(0, 1, 2))(jnp.asarray(v), jnp.asarray(K), jnp.asarray(Q))
    gn = math.sqrt(sum(float(np.sum(np.asarray(a) ** 2)) for a in g))
    R = np.asarray(layer.apply(Xj)) - Y
    G, q = features(layer, X) if feats is None else feats
    z = np.linalg.norm(G, axis=(1, 2)) * np.linalg.norm(q, axis=1)
    rz, rr = float(np.sqrt(np.mean(z**2))), float(np.sqrt(np.mean(np.sum(R**2, 1))))
    ref = 0.5 * float(np.mean(np.sum(Y**2, 1)))
    w = _norms(v, K, Q)
    tol = gradient_bound(w, rz, rr, accumulations(layer, X.shape[0]), ref)
    return gn * float(np.linalg.norm(w)) / ref, tol, R


def escape_tensor(layer, X, R, feats=None) -> np.ndarray:
    """``T = ⟨(y − f) G ⊗ e_q⟩`` (D+1, D+1, D+1), axes (key, value, query): a new head ε(k, v, q)
    changes the loss by ``−ε³ T(k, v, q)`` to third order (module doc); ``feats`` as in
    :func:`relative_gradient`."""
    G, q = features(layer, X) if feats is None else feats
    return np.einsum("s,sab,sc->abc", -R[:, 0], G, q) / X.shape[0]


def escape_coefficient(T, starts=(), seed: int = 0) -> tuple[float, tuple]:
    """``c* = max_{unit k, v, q} T(k, v, q)``: higher-order power iteration (k ← T(·, v, q)/‖·‖, …)
    from the unfoldings' top singular vectors, ``starts`` ((k, v, q) triples) and random starts;
    returns c* and its unit (k, v, q), signed so that ``T(k, v, q) = c*``."""
    n = T.shape[0]
    tops = [np.linalg.svd(T.transpose(np.roll(range(3), -i)).reshape(n, -1))[0][:, 0] for i in range(3)]
    rng = np.random.default_rng(seed)
    inits = [tuple(tops)] + list(starts) + [tuple(rng.standard_normal((3, n)))for _ in range(STARTS)]
    best, arg = -1.0, None
    for k, v, q in inits:
        k, v, q = (a / max(np.linalg.norm(a), 1e-300) for a in (k, v, q))
        for _ in range(ASCENT_STEPS):
            k = np.einsum("abc,b,c->a", T, v, q)
            k /= max(np.linalg.norm(k), 1e-300)
            v = np.einsum("abc,a,c->b", T, k, q)
            v /= max(np.linalg.norm(v), 1e-300)
            q = np.einsum("abc,a,b->c", T, k, v)
            q /= max(np.linalg.norm(q), 1e-300)
        val = float(np.einsum("abc,a,b,c->", T, k, v, q))
        if abs(val) > best:
            best, arg = abs(val), (np.sign(val) * k if val else k, v, q)
    return best, arg


def nearest_in_family(head, star, unread=None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The point of ``star`` = (v*, K*, Q*)'s family {(bv*, AK*, A⁻ᵀQ*/b)} (module doc) nearest
    ``head`` = (v (D+1,), K (r, D+1), Q (r, D+1)): min over b, A of ``‖bv* − v‖² + ‖AK* − K‖²
    + ‖A⁻ᵀQ*/b − Q‖²``, a local minimum found by trust-region least squares from the canonical start
    C = (b₀v*, A₀K*, A₀⁻ᵀQ*/b₀), b₀ = v·v*/‖v*‖², A₀ = KK*⁺: C is the same for every member of
    the family (A₀K* = K projected on K*'s rows, b₀v* = v projected on v*), so the answer does not
    depend on where the solver landed. Where A₀ is singular or b₀ = 0 (the net's head orthogonal to
    the family) the start is ``star`` itself. ``unread`` (D+1,) bool: the query coordinates that are
    0 on every sequence (the query's label slot), which the function never reads: they take the
    net's values and are left out of the distance."""
    from scipy.optimize import least_squares

    v, K, Q = (np.asarray(a, float) for a in head)
    vs, Ks, Qs = (np.asarray(a, float) for a in star)
    read = np.ones(Q.shape[1], bool) if unread is None else ~np.asarray(unread, bool)
    r = K.shape[0]
    b0 = float(v @ vs) / max(float(vs @ vs), 1e-300)
    A0 = K @ np.linalg.pinv(Ks)
    if b0 != 0 and np.linalg.cond(A0) < 1e8:
        vs, Ks, Qs = b0 * vs, A0 @ Ks, np.linalg.solve(A0.T, Qs) / b0

    def moved(x):
        b, A = x[0], x[1:].reshape(r, r)
        return b * vs, A @ Ks, np.linalg.solve(A.T, Qs) / b

    def res(x):
        try:
            bv, AK, Qm = moved(x)
        except np.linalg.LinAlgError:  # A singular: no member there (trust-region shrinks its step)
            return np.full(v.size + K.size + int(read.sum()) * r, np.inf)
        return np.concatenate([bv - v, (AK - K).ravel(), (Qm - Q)[:, read].ravel()])
    x = least_squares(res, np.concatenate([[1.0], np.eye(r).ravel()]), jac="3-point", method="trf",
                      xtol=1e-15, ftol=1e-15, gtol=1e-15, max_nfev=200).x
    bv, AK, Qm = moved(x)
    return bv, AK, np.where(read, Qm, Q)


def _embedded(layer, X, Y, keep: tuple, feats):
    """The layer of the heads ``keep`` alone at its nearest stationary point, embedded (module doc):
    ``((star, narrow, keep), ‖θ − θ*‖)`` over V, K, Q; ``feats`` the layer's :func:`features` on X."""
    v, K, Q = _weights(layer)
    H, r, D1 = K.shape

    def rebuild(U, Vn):
        n = U.shape[0]
        Kn, Qn = U[:, :r * D1].reshape(n, r, D1), U[:, r * D1:].reshape(n, r, D1)
        Vf = jnp.zeros((n, D1, D1)).at[:, -1, :].set(Vn)
        return (dataclasses.replace(layer, V=Vf, K=Kn, Q=Qn),)
    idx = list(keep)
    U0 = np.concatenate([K[idx].reshape(len(idx), r * D1), Q[idx].reshape(len(idx), r * D1)], 1)
    Un, Vn = narrow_fixed_point(rebuild, U0, v[idx], X, Y, 0.0)
    n, unread = len(idx), np.all(feats[1] == 0, axis=0)  # the query slots no sequence fills
    fam = [nearest_in_family((v[h], K[h], Q[h]), (Vn[j], Un[j, :r * D1].reshape(r, D1),
                                                   Un[j, r * D1:].reshape(r, D1)), unread)
           for j, h in enumerate(idx)]
    Vn = np.array([f[0] for f in fam]).reshape(n, D1)
    Un = np.array([np.concatenate([f[1].ravel(), f[2].ravel()]) for f in fam]).reshape(n, 2 * r * D1)
    narrow = rebuild(jnp.asarray(Un), jnp.asarray(Vn))[0]
    Vs, Ks, Qs = np.zeros_like(np.asarray(layer.V, float)), np.zeros_like(K), np.zeros_like(Q)
    nv, nK, nQ = _weights(narrow)
    Vs[idx] = np.asarray(layer.V, float)[idx]  # the unread rows stay the net's: they are not moved
    Vs[idx, -1, :], Ks[idx], Qs[idx] = nv, nK, nQ
    star = dataclasses.replace(layer, V=jnp.asarray(Vs), K=jnp.asarray(Ks), Q=jnp.asarray(Qs))
    dist = math.sqrt(sum(float(np.sum((np.asarray(a, float) - np.asarray(b, float)) ** 2))
                         for a, b in ((layer.V, star.V), (layer.K, star.K), (layer.Q, star.Q))))
    return (star, narrow, keep), dist


def head_fixed_point(layer: SeparateAttention, X, Y, k: int) -> HeadFixedPoint:
    """The embedded fixed point nearest ``layer`` (module doc), ``k`` its effective units, X its
    flat sequences (S, (N+1)(D+1)), Y (S, 1). Candidates: the n strongest heads for n = 0 … ⌈k/r⌉ (0:
    the origin, exact and free; then down from ⌈k/r⌉), a candidate skipped when the heads it zeroes are
    alone farther from the net than the best so far (:func:`~biasfree.analysis.nearest.nearest`)."""
    X, Y = np.asarray(X, float), np.asarray(Y, float)
    v, K, Q = _weights(layer)
    H, r, D1 = K.shape
    strength = np.linalg.norm(v, axis=1) * np.linalg.norm(np.einsum("hrd,hre->hde", K, Q), axis=(1, 2))
    order = tuple(int(h) for h in np.argsort(-strength, kind="stable"))
    top = min(H, math.ceil(k / r))
    Vf = np.asarray(layer.V, float)
    size2 = [float(np.sum(Vf[h] ** 2) + np.sum(K[h] ** 2) + np.sum(Q[h] ** 2)) for h in order[:top]]
    bound = dropped_norms(float(np.sum(Vf**2) + np.sum(K**2) + np.sum(Q**2)), size2)
    feats = features(layer, X)  # G and e_q: the same for every layer of this shape on X

    def solve(n):
        point, dist = _embedded(layer, X, Y, order[:n], feats)
        grad, tol, _ = relative_gradient(point[0], X, Y, feats)
        return point, dist, grad <= tol

    ns = [0, *dict.fromkeys(n for n in (top, top - 1, *range(1, top)) if n > 0)]  # solve keeps order[:n]
    (n, (star, narrow, keep), _), tried = nearest(ns, lambda n: bound[n], solve)
    hp = check_embedding(layer, star, narrow, keep, X, Y, min(k, n * r), feats)
    hp = dataclasses.replace(hp, candidates=tried)
    if not hp.saddle:
        return hp
    R = np.asarray(star.apply(jnp.asarray(X))) - Y
    T = escape_tensor(star, X, R, feats)
    small = {h: (v[h], K[h], Q[h]) for h in range(H) if h not in keep}  # the net's own small heads, now
    return dataclasses.replace(hp, leave=time_to_leave(T, hp.rate, small))


def _scales(layers, feats) -> tuple[np.ndarray, float]:
    """``(z_s = ‖G_s‖_F‖e_q,s‖ per sequence, P)``: the features' sizes and the larger product of
    (‖v‖_F, ‖K‖_F, ‖Q‖_F) over ``layers`` (module doc's bounds)."""
    G, q = feats
    return (np.linalg.norm(G, axis=(1, 2)) * np.linalg.norm(q, axis=1),
            max(float(np.prod(_norms(*_weights(s)))) for s in layers))


def function_change(wide, narrow, X, feats) -> tuple[float, float]:
    """``(max_s |f_wide(x_s) − f_narrow(x_s)|, its round-off bound 2γ_K P max_s z_s)`` of two layers
    meant to compute one function (module doc), P the larger product of (‖v‖_F, ‖K‖_F, ‖Q‖_F),
    ``feats`` their :func:`features` on X (they read sequences alike)."""
    z, P = _scales((wide, narrow), feats)
    Xj = jnp.asarray(X)
    gap = float(np.max(np.abs(np.asarray(wide.apply(Xj)) - np.asarray(narrow.apply(Xj)))))
    return gap, 2 * gamma(accumulations(wide, X.shape[0])) * P * float(np.max(z))


def check_embedding(layer, star, narrow, keep, X, Y, k: int, feats=None) -> HeadFixedPoint:
    """The checks of an embedded point ``star`` (module doc) against its ``narrow`` layer, and its
    escape coefficient; ``layer`` the net (for the distance), ``feats`` as in :func:`relative_gradient`."""
    feats = features(star, X) if feats is None else feats
    grad, grad_tol, R = relative_gradient(star, X, Y, feats)
    z, P = _scales((star, narrow), feats)
    Kacc = accumulations(star, X.shape[0])
    gap, ftol = function_change(star, narrow, X, feats)
    T = escape_tensor(star, X, R, feats)
    v, K, Q = _weights(star)
    starts = [(K[h, i], v[h], Q[h, i]) for h in keep for i in range(K.shape[1])]
    rate, direction = escape_coefficient(T, starts)
    rz, rr = float(np.sqrt(np.mean(z**2))), float(np.sqrt(np.mean(np.sum(R**2, 1))))
    # T sums S terms, each ≤ |r| z for unit (k, v, q), r with its own evaluation error ≤ γ_K P z
    rate_tol = gamma(Kacc) * (rr + P * rz) * rz
    dist = math.sqrt(sum(float(np.sum((np.asarray(a, float) - np.asarray(b, float)) ** 2))
                         for a, b in ((layer.V, star.V), (layer.K, star.K), (layer.Q, star.Q))))
    loss = 0.5 * float(np.mean(np.sum(R**2, 1)))
    return HeadFixedPoint(params=star, loss=loss, grad=grad, grad_tol=grad_tol, function_gap=gap,
                          function_tol=ftol, rate=rate, rate_tol=rate_tol, heads=tuple(keep), distance=dist,
                          k=k, direction=direction)
