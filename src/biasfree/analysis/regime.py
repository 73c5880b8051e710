"""The scales :func:`biasfree.analyse` compares: the data's modes, the init's gain, a GD
step and a horizon from them, and a first-order estimate of the even part that the
init's growing modes carry into the trained net (docs/theory.md §6.4).

Symbols: inputs X (N, d), targets Y (N, p); ``Σ_xx = XᵀX/N``, ``Σ_yx = YᵀX/N``; ``s_i``
the singular values of ``Σ_yx Σ_xx^{-1/2}`` (the mode strengths of §3.1, in whitened
units; ``Σ s_i² ≤ <||y||²>`` with equality when y is linear in x); c = (1 + α)/2.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from ..core.blocks import BLOCK_ENTRIES  # per temporary block of growth_even_energy, gradient_norm
from ..core.layers import Params
from ..core.nets import forward_unchecked
from ..theory import deep_half_time
from ..theory.modes import Modes
from .sign_groups import groups

MODE_CUT = 1e-2
"""Modes weaker than this fraction of the strongest are left out of horizons and estimates."""
MAX_STEPS = 200_000
"""Cap on the default number of GD steps of ``analyse(train=True)``."""


def init_gain(params: Params, lam_max: float, norms=None) -> float:
    """``Π_l ‖W_l‖₂ · √λ_max(Σ_xx)``: the largest output a unit-variance input direction can
    get at init (≈ σ²m for a two-layer Gaussian init of std σ and width m ≫ d); ``norms`` the
    ‖W_l‖₂ when the caller has them (their largest singular values)."""
    norms = [np.linalg.norm(np.asarray(la.matrix, float), 2) for la in params] if norms is None else norms
    return float(np.prod(norms) * np.sqrt(lam_max))


def default_lr(params: Params, modes: Modes, c: float) -> float:
    """A GD step a quarter of the stability limit 2/H, with H ≈ λ_max(Σ_xx) Σ_l Π_{j≠l} ‖W_j‖₂²
    at the larger of the init and the balanced solution (every layer of norm (g/c)^{1/L},
    g = max(‖B‖₂, √(<||y||²>/λ_max))) (docs/theory.md §6.3)."""
    L = len(params)
    norms = np.array([np.linalg.norm(np.asarray(la.matrix, float), 2) for la in params])
    g = max(np.linalg.norm(modes.B, 2) if modes.B.size else 0.0, np.sqrt(modes.y_power / modes.lam_max))
    sol = (g / c) ** (1.0 / L)

    def curvature(n):
        return modes.lam_max * sum(np.prod(np.delete(n, i)) ** 2 for i in range(L))

    H = max(curvature(norms), curvature(np.full(L, sol)), 1e-300)
    return float(0.5 / H)


def default_t_max(modes: Modes, a0: float, time_scale: float, horizon: float = 3.0,
                  depth: int = 2) -> tuple[float, bool]:
    """``(T, floored)``: ``horizon`` × the slowest kept mode's half time over ``time_scale``
    k_t: ``ln(max(s/a₀ − 1, e)) / (2 s)`` (§3.1) for two layers, the deep-linear ``t(s/2)``
    of §3.3 for ``depth`` > 2, with a₀ ≥ 1e-12 s (and ≤ s/4). Modes below ``MODE_CUT`` of
    the strongest and of √(0.3% <||y||²>) are left out; with none left (Σ_yx ≈ 0) that
    weakest detectable strength sets T and ``floored`` is True, so T is bounded by the
    data's scale (docs/theory.md §6.3)."""
    s_min = MODE_CUT * max(modes.s[0] if modes.s.size else 0.0, np.sqrt(3e-3 * modes.y_power))
    s = modes.s[modes.s >= s_min]
    floored = s.size == 0
    if floored:
        s = np.array([s_min / MODE_CUT])
    a0 = np.maximum(a0, 1e-12 * s)
    if depth == 2:
        half = np.log(np.maximum(s / a0 - 1.0, np.e)) / (2.0 * s)
    else:
        half = np.array([deep_half_time(si, min(ai, si / 4), depth) for si, ai in zip(s, a0, strict=True)])
    return float(horizon * np.max(half) / time_scale), floored


@dataclass(frozen=True)
class GrowthEstimate:
    """The even energy <||f_even||²> the init's growing modes carry at their learning
    transition (docs/theory.md §6.4): ``energy`` the first-order estimate, ``low``/``high``
    its interval once the init's remainder (every weight component that does not grow)
    is bounded; ``gain`` the smallest growth factor g_i at a transition (1: the init is
    already past it); ``modes`` per mode ``(σ_i, λ_i, P₀, Q₀, E_i, δ_i)``: its strength, the
    input variance along it ``λ_i = σ_i/A_i = 1/(ρ_iᵀ Σ_xx⁻¹ ρ_i)`` (= ``ρ_iᵀ Σ_xx ρ_i`` for
    whitened inputs), the sign groups of its grown parts
    (:func:`~biasfree.analysis.sign_groups.groups`), its estimate and its remainder bound."""

    energy: float
    low: float
    high: float
    gain: float
    modes: tuple = ()


NO_GROWTH = GrowthEstimate(0.0, 0.0, 0.0, float("inf"))
"""The estimate where no mode grows (or the net has no growth term): no even energy, no transition."""


def growth_even_energy(params: Params, X, Y, c: float, B) -> GrowthEstimate:
    """First-order estimate of <f_even²> at the learning transition of a two-layer net
    ``params`` from small init, slope factor ``c``, on inputs X, targets Y, ``B`` (p, d)
    the least-squares map, with its interval (derivation and symbols: docs/theory.md §6.4).

    Per singular pair (σ_i, o_i, ρ_i) of Σ_yx, unit k = (w_k, v_k): ``E_i = ¼ κ_i² A_i² ρ_iᵀ
    Σ_xx ρ_i``, ``κ_i = ((1 − c)/c) Σ_k u_ki|u_ki| / Σ_k u_ki²``, ``u_ki = (o_i·v_k + ρ_i·w_k)/2``,
    ``A_i = o_iᵀ B ρ_i``; ``energy = Σ_i E_i``, ``low = Σ_i max(√E_i − δ_i, 0)²``, ``high =
    Σ_i (√E_i + δ_i)²`` with ``δ_i = √<b²>``, b(x) §6.4's bound on the remainder's effect at
    the transition ``g_i² = |A_i| / (2c Σ_k u_ki²)`` (at least 1). Modes below ``MODE_CUT``
    of σ_1 are left out; antisymmetric pairs give κ = 0.

    Memory O(N d + m (d + p)): ``r_k·x = w_k·x − (w_k·ρ_i + z_ki/g) ρ_i·x`` is taken from
    ``H = X W_1ᵀ``, computed once in row blocks of at most :data:`BLOCK_ENTRIES` numbers, and
    ``ρ_iᵀ Σ_xx ρ_i`` as ``<(ρ_i·x)²>``; round-off apart, the formulas above. The three steps
    apart: :func:`growth_plan` (the weights and Σ_yx), :func:`growth_sums` (a row block's H and
    X ρ: ``analyse`` takes them in the pass over the rows that gives f, from the same H) and
    :func:`growth_from_sums`."""
    plan = growth_plan(params, X, Y, c, B)
    return NO_GROWTH if plan is None else growth_from_rows(plan, params, X)


def growth_from_rows(plan: GrowthPlan, params: Params, X) -> GrowthEstimate:
    """:func:`growth_even_energy` of ``plan`` in its own pass over the rows of X."""
    X, W1 = np.asarray(X, float)[:, plan.live], np.asarray(params[0].matrix, float)[:, plan.live]
    proj, b2 = np.zeros(len(plan.modes)), np.zeros(len(plan.modes))  # Σ_n (ρ·x_n)², Σ_n b(x_n)²
    step = max(1, BLOCK_ENTRIES // max(W1.shape[0], 1))
    Rho = plan.Rho[plan.live]
    for j in range(0, X.shape[0], step):
        p2, bb = _growth_block(X[j:j + step], W1, Rho, *plan.arrays)
        proj += np.asarray(p2)
        b2 += np.asarray(bb)
    return growth_from_sums(plan, proj, b2, X.shape[0])


@dataclass(frozen=True)
class GrowthPlan:
    """What :func:`growth_even_energy` needs before its pass over the rows: per mode ``modes``
    (ρ, ¼κ²A², a_k = w_k·ρ + z_k/g, g|u_k| + ‖s_k‖, g Σ_k|u_k|‖s_k‖, g, σ, its sign groups, A);
    ``Rho`` (d, modes) the ρ's, ``arrays`` ``(A (modes, m), WR (modes, m), WG (modes,), 1 − c)``
    for :func:`growth_sums`, ``live`` X's columns not 0 on every row (``Rho`` is 0 on the others)."""

    modes: tuple
    Rho: np.ndarray
    arrays: tuple
    live: np.ndarray


def growth_plan(params: Params, X, Y, c: float, B) -> GrowthPlan | None:
    """:func:`growth_even_energy`'s modes from the weights, Σ_yx and ``B``; None where no mode
    has a growing part. Inputs 0 on every row (a zero border of pixels) are left out: Σ_yx and B
    are 0 there (B the least-squares map, whose minimum-norm solution does not use them)."""
    X, Y = np.asarray(X, float), np.asarray(Y, float)
    live = np.any(X != 0, axis=0)
    W1, W2 = np.asarray(params[0].matrix, float)[:, live], np.asarray(params[1].matrix, float)
    O, sig, R = np.linalg.svd(Y.T @ X[:, live] / X.shape[0], full_matrices=False)
    if sig.size == 0 or sig[0] == 0.0:
        return None
    B = np.asarray(B)[:, live]
    modes = []
    for i in np.nonzero(sig >= MODE_CUT * sig[0])[0]:
        o, r = O[:, i], R[i]
        u, z = 0.5 * (W2.T @ o + W1 @ r), 0.5 * (W2.T @ o - W1 @ r)
        den = float(np.sum(u**2))
        if den == 0.0:
            continue
        kappa = (1.0 - c) / c * float(np.sum(u * np.abs(u))) / den
        A = float(o @ B @ r)
        g = max(1.0, float(np.sqrt(abs(A) / (2.0 * c * den))))
        s_norm = np.linalg.norm(W2.T - np.outer(W2.T @ o - z / g, o), axis=1)  # ||s_k||
        # b(x) = (1 − c) [Σ_k (g|u_k| + ||s_k||) |r_k·x| + g |ρ·x| Σ_k |u_k| ||s_k||]
        modes.append((r, 0.25 * kappa**2 * A**2, W1 @ r + z / g, g * np.abs(u) + s_norm,
                      g * float(np.abs(u) @ s_norm), g, float(sig[i]), groups(u), A))
    if not modes:
        return None
    Rho = np.zeros((live.size, len(modes)))
    Rho[live] = np.stack([mode[0] for mode in modes], axis=1)
    arrays = (np.stack([mode[2] for mode in modes]), np.stack([mode[3] for mode in modes]),
              np.array([mode[4] for mode in modes]), 1.0 - c)
    return GrowthPlan(tuple(modes), Rho, arrays, live)


def growth_from_sums(plan: GrowthPlan, proj, b2, N: int) -> GrowthEstimate:
    """:func:`growth_even_energy` from the sums over all N rows of :func:`growth_sums`."""
    modes = plan.modes
    E = np.array([mode[1] for mode in modes]) * proj / N
    root, d = np.sqrt(E), np.sqrt(b2 / N)
    # the sign groups' scalar problem along ρ_i: rate σ_i, learned amplitude A_i = o_iᵀBρ_i and
    # loss removed ½σ_iA_i (B's, exactly), i.e. λ_i = σ_i/A_i = 1/(ρ_iᵀΣ_xx⁻¹ρ_i); = ρ_iᵀΣ_xxρ_i when
    # ρ_i is an eigenvector of Σ_xx (whitened inputs); the sample's <(ρ_i·x)²> if B gives no A_i > 0
    per_mode = tuple((mode[6], mode[6] / mode[8] if mode[8] > 0 else float(lam), *mode[7], float(e),
                      float(di)) for mode, lam, e, di in zip(modes, proj / N, E, d, strict=True))
    return GrowthEstimate(float(np.sum(E)), float(np.sum(np.maximum(root - d, 0.0) ** 2)),
                          float(np.sum((root + d) ** 2)), float(min(mode[5] for mode in modes)), per_mode)


@jax.jit
def growth_sums(H, P, A, WR, WG, one_minus_c):
    """One row block's ``(Σ_n (ρ_i·x_n)², Σ_n b_i(x_n)²)`` per mode i of
    :func:`growth_even_energy`, from ``H = X_b W₁ᵀ`` (n, m) and ``P = X_b ρ`` (n, modes):
    ``b_i = (1 − c)(Σ_k |w_k·x − a_ki ρ_i·x| wr_ki + wg_i |ρ_i·x|)``, one fused loop over
    (n, modes, m) (no n × m temporary per mode)."""
    rx = jnp.abs(H[:, None, :] - P[:, :, None] * A[None])  # |r_k·x| (n, modes, m), fused into the sum
    b = one_minus_c * (jnp.sum(rx * WR[None], axis=-1) + WG * jnp.abs(P))
    return jnp.sum(P**2, axis=0), jnp.sum(b**2, axis=0)


def learned_directions(B, s_cut: float = MODE_CUT) -> np.ndarray:
    """Orthonormal input directions (d, r) of the least-squares map ``B`` (p, d): its right
    singular vectors with singular value ≥ ``s_cut`` of the largest."""
    if not B.size:
        return np.zeros((0, 0))
    _, sv, Vt = np.linalg.svd(B, full_matrices=False)
    keep = sv >= s_cut * sv[0] if sv.size and sv[0] > 0 else np.zeros(sv.size, bool)
    return Vt[keep].T


@jax.jit
@jax.grad
def _block_gradient(params: Params, Xb, Yb, a, N):
    """∇_θ of one row block's share (1/2N) Σ_{n in block} ||y_n − f(x_n)||² of the loss."""
    return 0.5 * jnp.sum((Yb - forward_unchecked(params, Xb, a)) ** 2) / N


def gradient_norm(params: Params, X, Y, a) -> float:
    """‖∇_θ L(θ)‖·‖θ‖ for L = (1/2N) Σ_n ||y_n − f(x_n)||², the gradient summed over the row
    blocks of :mod:`biasfree.core.blocks` (no N × width array)."""
    N = X.shape[0]
    step = max(1, BLOCK_ENTRIES // max(layer.n_out for layer in params))
    grad = _block_gradient(params, X[:step], Y[:step], a, N)
    for i in range(step, N, step):  # accumulated: one params-sized gradient held at a time
        part = _block_gradient(params, X[i:i + step], Y[i:i + step], a, N)
        grad = jax.tree_util.tree_map(jnp.add, grad, part)
    return gradient_times_weights(grad, params)


def gradient_times_weights(grad, params) -> float:
    """``‖g‖·‖θ‖`` (Frobenius over every leaf) of a gradient ``grad`` and the weights ``params``,
    summed in NumPy on the host (no compiled program per leaf shape)."""
    leaves = jax.tree_util.tree_leaves
    sq = sum(float(np.sum(np.square(np.asarray(g)))) for g in leaves(grad))
    size = sum(float(np.sum(np.asarray(leaf, float) ** 2)) for leaf in leaves(params))
    return float(np.sqrt(sq * size))


@jax.jit
def _growth_block(Xb, W1, Rho, A, WR, WG, one_minus_c):
    """:func:`growth_sums` of the row block ``Xb`` (H and P made in the same program)."""
    return growth_sums(Xb @ W1.T, Xb @ Rho, A, WR, WG, one_minus_c)
