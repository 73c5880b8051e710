"""Where a deep dense linear net stands (depth L ≥ 3; docs/theory.md §11.7.10): the rank-k
fixed point nearest to it, whether it is a saddle, and when the net leaves it.

With C = Σ_yx Σ_xx^{-1/2} = U diag(s) Vᵀ and k effective units, the fixed point is the best rank-k
map β_k = U_k diag(s_k) V_kᵀ Σ_xx^{-1/2} (:mod:`biasfree.theory.reduced_rank`) in balanced form,
D = diag(s_k^{1/L}):

    W₁* = Q₁ D V_kᵀ Σ_xx^{-1/2},   W_l* = Q_l D Q_{l−1}ᵀ (1 < l < L),   W_L* = U_k D Q_{L−1}ᵀ,

Q_l (H_l, k) orthonormal, the hidden units beyond k zero (Theorem 1's zero units). Every such point
is a fixed point: with G = Σ_yx − β_kΣ_xx = U_⊥S_⊥V_⊥ᵀΣ_xx^{1/2}, layer l's gradient
−(W_L*⋯W_{l+1}*)ᵀ G (W_{l−1}*⋯W₁*)ᵀ starts with U_kᵀU_⊥ = 0 (l < L) or ends with V_⊥ᵀV_k = 0
(l = L). The Q_l closest to the net maximise J = Σ_l tr(W_lᵀW_l*) (‖W_l*‖ is fixed): given its
neighbours, Q_l's best is the polar factor of M_l = W_l Q_{l−1} D + W_{l+1}ᵀ Q_{l+1} D (orthogonal
Procrustes; Q₀D → V_kᵀΣ_xx^{-1/2} read as W₁'s, Q_L → U_k). Q_l sits in two layers, so no one SVD
solves all; a forward pass (each Q_l from its input side alone) then alternating sweeps, each step
an exact block maximiser, raise J monotonically to a stationary point (:data:`SWEEPS` at most).

*Saddle* (L ≥ 3): θ* is left at order ε^L, not 2. Along the zero units' path
δW₁ = q₁ v_{k+1}ᵀΣ_xx^{-1/2}, δW_l = q_l q_{l−1}ᵀ, δW_L = u_{k+1} q_{L−1}ᵀ (q_l ⊥ Q_l, unit),
every cross term with θ* vanishes, so the product is β_k + ε^L u_{k+1}v_{k+1}ᵀΣ_xx^{-1/2} and

    L(θ* + εδ) − L(θ*) = −s_{k+1} ε^L + ½ ε^{2L}   exactly.

The Hessian sees none of it (its quadratic form along δ is 0; at the top-k point it is PSD), so the
rule is: θ* is a saddle when it is stationary (gradient at round-off), s_{k+1} exceeds its round-off
``s_tol`` and every hidden width exceeds k (room for the next unit). *Escape*: on whitened inputs
the next mode, balanced and aligned, grows from its strength now a₀ = u_{k+1}ᵀ W_L⋯W₁ Σ_xx^{1/2} v_{k+1}
by da/dt = L a^{2−2/L}(s − a) (§3.3), so the loss crosses L_{k+1} + s²/8 (mode half learned) after
``deep_half_time(s, a0, L)``; to leading order a₀^{−(L−2)/L}/((L − 2)s), the blow-up time.

Every function here reads C's SVD; :func:`deep_stage` computes it once
(:func:`~biasfree.theory.reduced_rank.whitened_svd`) and passes it on as ``svd=`` (None: computed).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import jax.numpy as jnp
import numpy as np

from ..core.layers import Layer, Params
from ..core.precision import precise
from ..theory.deep import deep_half_time
from ..theory.plateau_times import data_plateaus
from ..theory.reduced_rank import WhitenedSVD, is_whitened, reduced_rank_losses, whitened_svd
from .saddles import FixedPoint, fixed_point
from .stage_budget import check
from .stage_result import Stage, Staircase
from .stationary import gamma

SWEEPS = 100
"""At most this many alternating Procrustes sweeps (each raises J; stopped when J gains ≤ 1e-15 J)."""


def _polar(M: np.ndarray) -> np.ndarray:
    U, _, Vt = np.linalg.svd(M, full_matrices=False)
    return U @ Vt


@dataclass(frozen=True)
class DeepPoint:
    """The rank-k fixed point of a deep linear net (module doc). ``params`` θ*, ``bases`` the Q_l,
    ``check`` its :class:`~biasfree.analysis.saddles.FixedPoint` (gradient and Hessian, each with its
    round-off), ``level`` L_k computed apart, ``distance`` ‖θ − θ*‖, ``sweeps`` the Procrustes sweeps
    run; ``s_next`` s_{k+1} (0 when k is the data's rank) and ``s_tol`` its round-off, ``room`` every
    hidden width > k; ``a0`` the next mode's strength now (None without a next mode), ``drop_time``
    and ``escape_time`` (whitened inputs and 0 < a₀ < s/2, else None)."""

    depth: int
    k: int
    params: Params
    bases: tuple
    check: FixedPoint
    level: float
    distance: float
    sweeps: int
    s_next: float
    s_tol: float
    room: bool
    a0: float | None
    drop_time: float | None
    escape_time: float | None

    @property
    def stationary(self) -> bool:
        """θ*'s gradient is zero to round-off."""
        return self.check.stationary

    @property
    def saddle(self) -> bool:
        """Stationary, s_{k+1} > s_tol and room for unit k + 1: the loss falls as −s_{k+1}ε^L along it."""
        return self.stationary and self.room and self.s_next > self.s_tol


@precise
def balanced_point(params: Params, X, Y, k: int, *,
                   svd: WhitenedSVD | None = None) -> tuple[Params, tuple, int]:
    """``(θ*, (Q_1, …, Q_{L−1}), sweeps)``: the balanced rank-k factorisation of β_k across the net's
    layers nearest to the dense linear net ``params`` (module doc) on inputs X (N, d), targets Y."""
    Ws = [np.asarray(la.W, float) for la in params]
    L = len(Ws)
    U, s, Vt, isqrt = whitened_svd(X, Y) if svd is None else svd
    A = isqrt @ Vt[:k].T  # (d, k): W₁* = Q₁ D Aᵀ
    Uk, D = U[:, :k], np.diag(s[:k] ** (1.0 / L))
    if k == 0:
        return tuple(Layer(jnp.zeros_like(jnp.asarray(W))) for W in Ws), tuple(
            np.zeros((W.shape[0], 0)) for W in Ws[:-1]), 0
    Q = [None] * (L - 1)
    for i in range(L - 1):  # forward pass: Q_l from its input side alone
        Q[i] = _polar((Ws[0] @ A if i == 0 else Ws[i] @ Q[i - 1]) @ D)

    def J():
        return float(np.trace(Q[0].T @ Ws[0] @ A @ D) + sum(np.trace(Q[i].T @ Ws[i] @ Q[i - 1] @ D)
                                                            for i in range(1, L - 1))
                     + np.trace(Q[-1].T @ Ws[-1].T @ Uk @ D))

    now, sweeps = J(), 0
    while sweeps < SWEEPS:
        check()
        for i in range(L - 1):
            before = Ws[0] @ A if i == 0 else Ws[i] @ Q[i - 1]
            after = Ws[i + 1].T @ (Uk if i == L - 2 else Q[i + 1])
            Q[i] = _polar((before + after) @ D)
        sweeps, last, now = sweeps + 1, now, J()
        if now - last <= 1e-15 * abs(now):
            break
    star = [Q[0] @ D @ A.T] + [Q[i] @ D @ Q[i - 1].T for i in range(1, L - 1)] + [Uk @ D @ Q[-1].T]
    return tuple(Layer(jnp.asarray(W)) for W in star), tuple(Q), sweeps


@precise
def escape_path(point: DeepPoint, X, Y, eps: float, *, svd: WhitenedSVD | None = None) -> Params:
    """θ* + εδ along the zero units' path of mode k + 1 (module doc: the loss there is
    L(θ*) − s_{k+1}ε^L + ½ε^{2L}): q_l the first unit vector orthogonal to Q_l."""
    k = point.k
    if point.s_next == 0.0 or not point.room:
        raise ValueError(f"no mode k + 1 = {k + 1} to escape along (s_next = {point.s_next}, room "
                         f"{point.room}): the point is not a saddle")
    U, _, Vt, isqrt = whitened_svd(X, Y) if svd is None else svd
    qs = []
    for Q in point.bases:
        P = np.eye(Q.shape[0]) - Q @ Q.T  # the projector off the learned units; its longest column
        q = P[:, int(np.argmax(np.sum(P**2, 0)))]
        qs.append(q / np.linalg.norm(q))
    v, u = isqrt @ Vt[k], U[:, k]
    deltas = ([np.outer(qs[0], v)] + [np.outer(qs[i], qs[i - 1]) for i in range(1, len(qs))]
              + [np.outer(u, qs[-1])])
    return tuple(Layer(jnp.asarray(np.asarray(la.W) + eps * dl))
                 for la, dl in zip(point.params, deltas, strict=True))


def s_tolerance(X, Y, *, svd: WhitenedSVD | None = None) -> float:
    """Round-off of the computed s_i: Σ_yx's error is ≤ γ_N ``|Y|ᵀ|X|/N`` entrywise, of 2-norm ≤
    γ_N rms‖y‖ rms‖x‖ (Cauchy–Schwarz over n); whitening and the SVD (backward stable) add γ_{d +
    max(d, p)}; times ‖Σ_xx^{-1/2}‖₂. By Weyl every s_i moves at most this."""
    N, d = X.shape
    isqrt = (whitened_svd(X, Y) if svd is None else svd).isqrt
    rms = math.sqrt(float(np.mean(np.sum(X**2, 1))) * float(np.mean(np.sum(Y**2, 1))))
    return gamma(N + d + max(d, Y.shape[1])) * rms * float(np.linalg.norm(isqrt, 2))


@precise
def mode_strengths(params: Params, X, Y, *, svd: WhitenedSVD | None = None) -> np.ndarray:
    """a_i = u_iᵀ W_L⋯W₁ Σ_xx^{1/2} v_i for every mode of C (§3.3's a = b^L for a balanced aligned
    mode)."""
    U, _, Vt, isqrt = whitened_svd(X, Y) if svd is None else svd
    P = np.asarray(params[0].W, float)
    for la in params[1:]:
        P = np.asarray(la.W, float) @ P
    return np.einsum("pi,pd,di->i", U, P @ np.linalg.pinv(isqrt), Vt.T)


@precise
def deep_point(params: Params, X, Y, k: int, *, svd: WhitenedSVD | None = None) -> DeepPoint:
    """:class:`DeepPoint` of a bias-free dense linear net ``params`` (depth ≥ 3) with ``k`` units."""
    L = len(params)
    svd = whitened_svd(X, Y) if svd is None else svd
    star, bases, sweeps = balanced_point(params, X, Y, k, svd=svd)
    check = fixed_point(star, X, Y, 1.0)
    s = svd.s
    delta = math.sqrt(sum(float(np.sum((np.asarray(a.W) - np.asarray(b.W)) ** 2))
                          for a, b in zip(params, star, strict=True)))
    room = all(int(np.shape(la.W)[0]) > k for la in params[:-1])
    s_next = float(s[k]) if k < s.size else 0.0
    a0 = float(mode_strengths(params, X, Y, svd=svd)[k]) if k < s.size else None
    drop = escape = None
    if is_whitened(X) and a0 is not None and 0 < a0 < s_next / 2:
        drop = float(deep_half_time(s_next, a0, L))
        escape = a0 ** (-(L - 2) / L) / ((L - 2) * s_next)
    return DeepPoint(L, k, star, bases, check, float(reduced_rank_losses(X, Y, svd=svd)[k]), delta, sweeps,
                     s_next, s_tolerance(X, Y, svd=svd), room, a0, drop, escape)


def deep_stage(params: Params, X, Y, loss: float, units, init, k: int | None = None) -> Stage:
    """The :class:`~biasfree.analysis.stage_result.Stage` of a deep dense linear net (module doc), at its
    rank-``k`` point (default: the effective units')."""
    svd = whitened_svd(X, Y)
    k = min(units.count, svd.s.size) if k is None else k
    pt = deep_point(params, X, Y, k, svd=svd)
    L = pt.depth
    notes = [f"depth {L}: the saddle is left at order ε^{L} (loss −s_{{k+1}}ε^{L} along the zero units), "
             "which the Hessian does not see (λ_min = 0 to round-off); saddle = stationary, s_{k+1} > its "
             "round-off and a free unit in every hidden layer"]
    if pt.saddle and pt.drop_time is None:
        notes.append("inputs not whitened (‖Σ_xx − I‖₂ > 1e-10): the closed form of §3.3 does not apply, no "
                     "time given" if not is_whitened(X) else
                     f"the next mode's strength a₀ = {pt.a0:.3g} is not in (0, s/2) = "
                     f"(0, {pt.s_next / 2:.3g}): "
                     "no time given (the closed form needs a small balanced aligned mode)")
    stair = None
    if init is not None:
        s = svd.s
        keep = s > 1e-10 * s[0] if s.size else s > 0
        a0 = mode_strengths(init, X, Y, svd=svd)[keep]
        if np.all(a0 > 0) and np.all(a0 < s[keep] / 2):
            pred = data_plateaus(s[keep], a0, float(np.mean(np.sum(Y**2, 1))), depth=L)
            stair = Staircase(pred, a0, s[keep], int(np.sum(loss <= pred.crossings)))
        else:
            notes.append(f"no staircase: the init's mode strengths {np.round(a0, 6).tolist()} are not all in "
                         f"(0, s/2) for s = {np.round(s[keep], 6).tolist()} (not a small aligned init)")
    eps = None if pt.a0 is None or pt.a0 <= 0 else math.sqrt(L) * pt.a0 ** (1.0 / L)
    return Stage("linear", loss, units, pt.check, pt.params, pt.level, pt.distance, eps, 0,
                 pt.escape_time if pt.saddle else None, pt.drop_time if pt.saddle else None, stair,
                 tuple(notes), deep_point=pt)
