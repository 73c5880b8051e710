"""Effective units: how many units a net's solution uses (docs/theory.md §11.1), the measure
of the saddle-to-saddle staircase (Zhang, Saxe & Latham 2025): linear nets add rank, ReLU nets
kinks, conv nets kernels, attention heads, the quadratic net units.

Two rules, each counting magnitudes above one threshold ``τ = max(τ_round, τ_init)``:

- **Rank** (a linear map written as a product of factors ``M = F_L ⋯ F_1``): the singular
  values of M. Dense linear nets (α = 1, any depth; a bias is a constant input, so
  ``[M | c]``), two-layer linear conv nets (``M = Σ_c out_c in_cᵀ``, channel c's readout and
  kernel), merged attention (its twin ``W₂W₁``: at most one head) and separate attention
  (the in-context map ``B = Σ_h γ_h K_hᵀQ_h``).
- **Units** (two-layer nets whose σ is homogeneous of degree q: leaky/ReLU q = 1, quadratic
  q = 2): unit i reads ``ũ_i`` (its incoming weights, with its bias when there is one; a conv
  channel's kernel) and writes ``v_i``; units whose ``ũ`` point the same way (either way for
  the even σ(z) = z²) compute one unit, ``σ(ũ_iᵀx) = ‖ũ_i‖^q σ(ûᵀx)``, and are merged:
  ``m_g = ‖Σ_{i∈g} ‖ũ_i‖^q v_i‖``.

``τ_round`` is the round-off of the computed magnitudes; ``τ_init`` (with ``init`` or
``init_scale``) the largest magnitude that Gaussian init noise of that scale can give, from
``‖G‖ ≤ σ(√m + √n + t)`` (m × n, i.i.d. N(0, σ²); probability ≥ 1 − e^{−t²/2}, t = :data:`TAIL`).
Derivations in docs/theory.md §11.1 and in the functions below.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from .. import _validate as validate
from .attention import MergedAttention, SeparateAttention
from .attention_twin import merged_to_twin
from .conv import Conv, PooledDense
from .layers import AbstractLayer, Layer, check_net, is_net

EPS = float(np.finfo(float).eps)
TAIL = math.sqrt(2 * math.log(1e9))
"""t of the Gaussian norm bound: a noise matrix exceeds σ(√m + √n + t) with probability ≤ 1e-9."""

FAMILIES = {
    "linear": "dense linear net (α = 1, any depth): rank of the end-to-end map",
    "leaky": "two-layer leaky/ReLU net (α < 1, dense): groups of aligned hidden units (kinks)",
    "quadratic": "two-layer quadratic net (σ(z) = z²): groups of aligned units",
    "conv-linear": "two-layer linear conv net (α = 1): rank of Σ_c readout_c kernel_cᵀ (kernels)",
    "conv": "two-layer (leaky) ReLU conv net: groups of aligned channels (kernels)",
    "attention-merged": "merged linear attention: rank of its twin W₂W₁ (at most one head)",
    "attention-separate": "separate linear attention: rank of B = Σ_h γ_h K_hᵀQ_h (heads)",
}
"""The families with an effective-unit rule, and what each counts."""


class EffectiveUnits(NamedTuple):
    """What :func:`effective_units` found: ``count`` magnitudes above ``threshold``."""

    count: int
    magnitudes: np.ndarray
    """Per direction (singular values) or per merged unit, descending; one entry per unit
    (min(m, n) per direction), 0 for a unit merged into another."""
    threshold: float
    why: str
    """Which bound set the threshold, with its numbers."""
    family: str
    """A key of :data:`~biasfree.core.units.FAMILIES`."""


def _gaussian_bound(sigma: float, m: int, n: int) -> float:
    """``σ(√m + √n + t)``: the norm an m × n matrix of N(0, σ²) entries exceeds with
    probability ≤ e^{−t²/2} (Davidson & Szarek 2001; Vershynin 2018, Cor. 7.3.3)."""
    return sigma * (math.sqrt(m) + math.sqrt(n) + TAIL)


def _rms(a) -> float:
    a = np.asarray(a, dtype=float)
    return float(np.sqrt(np.mean(a * a))) if a.size else 0.0


# ----------------------------------------------------------------- each family's ingredients


def _with_bias(layer, W):
    """``[W | b]``: the bias as the weight of a constant input 1 (``W`` when there is none)."""
    b = layer.b
    return W if b is None else np.concatenate([W, np.asarray(b, dtype=float)[:, None]], axis=1)


def conv_units(params):
    """A two-layer conv net's channels: kernels (C, C_in·∏k) [+ bias] and readouts (C, ·)."""
    conv, out = params
    K = np.asarray(conv.K, dtype=float)
    C = K.shape[0]
    incoming = _with_bias(conv, K.reshape(C, -1))
    if isinstance(out, PooledDense):
        outgoing = np.asarray(out.V, dtype=float).T  # (C, p)
    else:  # a dense readout of the flat (C·S) hidden state: channel c's columns
        W = np.asarray(out.W, dtype=float)
        outgoing = W.reshape(W.shape[0], C, -1).transpose(1, 0, 2).reshape(C, -1)
    return incoming, outgoing


def ingredients(params, alpha, checked: bool = False):
    """``(family, kind, arrays)``: kind "rank" with the factors ``[F_1, …, F_L]`` of
    ``M = F_L ⋯ F_1``, or "units" with ``(incoming (n, a), outgoing (n, b), q)``
    (``checked``: the net and α were checked already)."""
    if isinstance(params, AbstractLayer):
        params = (params,)
    if is_net(params) and len(params) == 1 and isinstance(params[0], MergedAttention | SeparateAttention):
        layer = params[0]
        if isinstance(layer, MergedAttention):
            return "attention-merged", "rank", [np.asarray(la.W, dtype=float) for la in merged_to_twin(layer)]
        D = layer.d
        Q = np.asarray(layer.Q, dtype=float)[..., :D].reshape(-1, D)  # (H r, D)
        K = np.asarray(layer.K, dtype=float)[..., :D].reshape(-1, D)
        gamma = np.repeat(np.asarray(layer.V, dtype=float)[:, D, D], layer.rank)
        return "attention-separate", "rank", [Q, np.diag(gamma), K.T]
    _no_rule(params)
    if not checked:
        check_net(params)
    if alpha is None and not (len(params) == 2 and params[0].activation == "quadratic"):
        raise TypeError("effective_units: pass the net's slope alpha (1 for a linear net, 0 for ReLU)")
    if len(params) == 2 and params[0].activation == "quadratic":
        W1, W2 = params
        return "quadratic", "units", (_with_bias(W1, np.asarray(W1.W, dtype=float)),
                                      np.asarray(W2.W, dtype=float).T, 2)
    alpha = float(alpha) if checked else validate.slope(alpha)
    if all(isinstance(la, Layer) for la in params):
        if alpha == 1.0:
            return "linear", "rank", _affine_factors(params)
        if len(params) == 2:
            W1, W2 = params
            return "leaky", "units", (_with_bias(W1, np.asarray(W1.W, dtype=float)),
                                      np.asarray(W2.W, dtype=float).T, 1)
    elif len(params) == 2 and isinstance(params[0], Conv) and isinstance(params[1], PooledDense | Layer):
        incoming, outgoing = conv_units(params)
        if alpha == 1.0:
            return "conv-linear", "rank", [incoming, outgoing.T]
        return "conv", "units", (incoming, outgoing, 1)
    _no_rule(params, alpha)


def _affine_factors(params) -> list[np.ndarray]:
    """The layers' matrices; with a bias anywhere, each layer on ``(h, 1)``: ``[[W, b], [0, 1]]``
    (the last without its constant row), so the product is the affine map ``[M | c]``."""
    Ws = [np.asarray(la.W, dtype=float) for la in params]
    if not any(la.b is not None for la in params):
        return Ws
    out = []
    for i, (la, W) in enumerate(zip(params, Ws, strict=True)):
        b = np.zeros(W.shape[0]) if la.b is None else np.asarray(la.b, dtype=float)
        A = np.hstack([W, b[:, None]])
        out.append(A if i == len(Ws) - 1 else np.vstack([A, np.eye(1, A.shape[1], A.shape[1] - 1)]))
    return out


def _no_rule(params, alpha=None) -> None:
    """The one error of a net with no effective-unit rule, naming the families that have one."""
    what = None
    if not is_net(params):
        what = f"a {type(params).__name__}"
    elif any(isinstance(la, MergedAttention | SeparateAttention) for la in params) and len(params) > 1:
        what = "an attention layer inside a deeper net"
    elif alpha is not None:
        kinds = "+".join(type(la).__name__ for la in params)
        what = f"a depth-{len(params)} {kinds} net at α = {alpha:g}"
    elif len(params) > 2 and any(la.activation == "quadratic" for la in params[:-1]):
        what = f"a depth-{len(params)} quadratic net"
    if what is not None:
        raise ValueError(f"effective_units: no effective-unit rule for {what}; the families with one: "
                         + "; ".join(FAMILIES.values()))


# ----------------------------------------------------------------- the two counts


def _rank(factors, sigmas) -> tuple[np.ndarray, float, str]:
    """Singular values of ``M = F_L ⋯ F_1`` and their threshold (docs/theory.md §11.1).

    Round-off: M's product and SVD are backward stable, each computed singular value within
    ``ε·L·n·∏‖F_l‖`` of the exact one (n the largest dimension). Init: a net learned along k
    directions plus init noise N_l (‖N_l‖ ≤ b_l, the Gaussian bound) has, at leading order in
    b/s_k, its (k+1)-th singular value below the Schur complement's norm, ``2^{L−1} ∏ b_l``
    (L = 2: ``‖N₂N₁‖ + ‖N₂A₁(A₂A₁)⁺A₂N₁‖ ≤ 2 b₁b₂`` for balanced learned weights)."""
    M = factors[0]
    for F in factors[1:]:
        M = F @ M
    s = np.linalg.svd(M, compute_uv=False)
    L, n = len(factors), max(max(F.shape) for F in factors)
    round_off = EPS * L * n * math.prod(float(np.linalg.norm(F, 2)) for F in factors)
    init = 0.0
    if sigmas is not None:
        init = 2.0 ** (L - 1) * math.prod(_gaussian_bound(sg, *F.shape) for sg, F in zip(sigmas, factors,
                                                                                         strict=True))
    return s, *_threshold(round_off, init, f"2^{L - 1}·∏_l σ_l(√m_l + √n_l + {TAIL:.2f})")


def _units(incoming, outgoing, q: int, sigmas) -> tuple[np.ndarray, float, str]:
    """Merged unit magnitudes ``m_g = ‖Σ_{i∈g} ‖ũ_i‖^q v_i‖`` and their threshold (§11.1).

    Unit i's direction is determined to ``r_i = 2ρ/‖ũ_i‖`` (ũ = c û + e with ‖e‖ ≤ ρ moves
    ``ũ/‖ũ‖`` by at most 2ρ/‖ũ‖), ρ the noise on one incoming vector: its init bound
    ``σ_in(√a + t)`` or round-off ``ε√a‖ũ_i‖``. Units i, j merge when their directions (either sign
    for q = 2) differ by at most ``r_i + r_j``; a unit with ``r_i ≥ 1/2`` (no direction: its
    incoming weights are noise) merges with none. Threshold: an unlearned unit has
    ``‖v‖‖ũ‖^q ≤ σ_out(√b + t)·(σ_in(√a + t))^q``; round-off of a sum of n terms,
    ``n ε max_g m_g``."""
    n, a = incoming.shape
    b = outgoing.shape[1]
    norms = np.linalg.norm(incoming, axis=1)
    group = unit_groups(incoming, q, sigmas)
    sums = np.zeros((n, b))
    np.add.at(sums, group, (norms**q)[:, None] * outgoing)
    m = np.zeros(n)  # one entry per unit: the groups' magnitudes first, 0 for units merged away
    m[:np.unique(group).size] = np.sort(np.linalg.norm(sums[np.unique(group)], axis=1))[::-1]
    round_off = 4 * EPS * n * (float(m[0]) if m.size else 0.0)
    init = 0.0
    if sigmas is not None:
        init = sigmas[1] * (math.sqrt(b) + TAIL) * (sigmas[0] * (math.sqrt(a) + TAIL)) ** q
    return m, *_threshold(round_off, init, f"σ_out(√{b} + {TAIL:.2f})·(σ_in(√{a} + {TAIL:.2f}))^{q}")


def unit_groups(incoming, q: int, sigmas) -> np.ndarray:
    """Each unit's group (the smallest index of the units it merges with; ``_units``'s rule:
    directions within ``r_i + r_j``, ``r_i = 2ρ/‖ũ_i‖``, none for ``r_i ≥ 1/2``)."""
    a = incoming.shape[1]
    norms = np.linalg.norm(incoming, axis=1)
    rho = EPS * math.sqrt(a) * norms
    if sigmas is not None:
        rho = np.maximum(rho, sigmas[0] * (math.sqrt(a) + TAIL))
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.where(norms > 0, 2 * rho / norms, np.inf)
        U = np.where(norms[:, None] > 0, incoming / norms[:, None], 0.0)
    G = U @ U.T  # ‖û_i ∓ û_j‖² = 2 ∓ 2 û_iᵀû_j (unit vectors)
    dist2 = 2 - 2 * (np.abs(G) if q % 2 == 0 else G)
    ok = r < 0.5
    # the Gram entry of two unit vectors is off by ≤ γ_a + 2ε (a products, two normalisations), so the
    # squared distance by 2(γ_a + 2ε): without this, two exact copies read √ε apart (§11.1)
    slack = 2 * ((a * EPS / 2) / (1 - a * EPS / 2) + 2 * EPS)
    merge = (dist2 <= (r[:, None] + r[None]) ** 2 + slack) & ok[:, None] & ok[None]
    return _components(merge)


def _components(adjacent: np.ndarray) -> np.ndarray:
    """Each unit's group: the smallest index of its connected component (labels spread to
    neighbours until none changes: at most the component's diameter passes of O(n²))."""
    labels = np.arange(adjacent.shape[0])
    while True:
        new = np.minimum(labels, np.where(adjacent, labels[None, :], labels.size).min(axis=1))
        if np.array_equal(new, labels):
            return labels
        labels = new


INIT_NOISE = "init noise"
"""How :attr:`EffectiveUnits.why` begins when the init's noise bound set the threshold."""


def _threshold(round_off: float, init: float, init_rule: str) -> tuple[float, str]:
    if init > round_off:
        return init, f"{INIT_NOISE}: no unlearned unit exceeds {init_rule} = {init:.3g}"
    return round_off, f"round-off of the computed magnitudes, {round_off:.3g}" + (
        "" if init else " (no init scale given: init noise is not bounded; pass init or init_scale)")


# ----------------------------------------------------------------- the public function


def effective_units(params, alpha=None, *, init=None, init_scale=None) -> EffectiveUnits:
    """The number of units the solution ``params`` uses (module doc; docs/theory.md §11.1).

    - ``params``: a net (tuple of layers) of a family in :data:`~biasfree.core.units.FAMILIES`, or
      an attention layer.
    - ``alpha``: the net's slope α (not read for attention or a quadratic net).
    - ``init``: the net it was trained from; each factor's init noise σ is the RMS of that factor
      at init (e.g. ``traj`` of a run from ``net0``: ``effective_units(traj.params, α, init=net0)``).
    - ``init_scale``: instead, one σ for every factor (the std of a Gaussian init's entries).

    Without either, only round-off sets the threshold: right for exact solutions, while a net
    trained from a small init then counts its unlearned units too. Returns
    :class:`EffectiveUnits`: the count, the magnitudes, the threshold and why.
    Raises ValueError naming the families with a rule for any other net.
    """
    if init is not None and init_scale is not None:
        raise TypeError("effective_units: pass init (the net at step 0) or init_scale (one σ), not both")
    family, kind, parts = ingredients(params, alpha)
    sigmas = None
    if init_scale is not None:
        s = validate.nonnegative("init_scale", init_scale, scalar=True, why="the init's std σ")
        sigmas = [s] * (len(parts) if kind == "rank" else 2)
    elif init is not None:
        sigmas = init_scales(init, alpha, family, parts)
    return count(kind, parts, sigmas, family)


def init_scales(init, alpha, family: str, parts) -> list[float]:
    """Each factor's init noise σ: its RMS in the net ``init`` (of the same family and shapes)."""
    fam0, kind, parts0 = ingredients(init, alpha)
    def factors(p):
        return p if kind == "rank" else p[:2]
    shapes, shapes0 = ([np.shape(a) for a in factors(p)] for p in (parts, parts0))
    if fam0 != family or shapes0 != shapes:
        raise ValueError(f"init is a {fam0} net of factor shapes {shapes0} but params a {family} "
                         f"net of {shapes}: pass the net params was trained from")
    if family == "linear":  # the weights and biases, not the constant's exact row of [[W, b], [0, 1]]
        return [_rms(_with_bias(la, np.asarray(la.W, dtype=float))) for la in init]
    if family == "attention-separate":  # Γ's drawn entries are its diagonal
        return [_rms(parts0[0]), _rms(np.diag(parts0[1])), _rms(parts0[2])]
    return [_rms(a) for a in factors(parts0)]


def count(kind: str, parts, sigmas, family: str) -> EffectiveUnits:
    """The count from a family's ingredients (``ingredients``) and the factors' init σ (or
    None): what :func:`effective_units` returns, without its checks (a run's records reuse one
    init)."""
    m, tau, why = _rank(parts, sigmas) if kind == "rank" else _units(*parts, sigmas)
    return EffectiveUnits(int(np.sum(m > tau)), m, float(tau), why, family)
