"""The predicted gap's growth term (docs/theory.md §6.4): the grown units of a two-layer net
from small init, split by sign into two groups that each learn as a linear net on its half of
every input line, against the linear twin, by the exact GD map.

Along one mode (σ, o, ρ) of Σ_yx (``Σ_yx ρ = σ o``), with ``Σ_xx ρ = λ ρ`` and data mirror
symmetric, the units ``w_k = a_k ρ``, ``v_k = a_k o`` (a_k > 0, group P) and
``w_k = −a_k ρ``, ``v_k = −a_k o`` (group Q) stay of that form under GD, and the net is
``f(x) = (P σ_α(z) − Q σ_α(−z)) o``, z = ρ·x, ``P = Σ_P a_k²``, ``Q = Σ_Q a_k²``:

    P ← P (1 + η (cσ − λ (h P + α Q)))²,   Q ← Q (1 + η (cσ − λ (α P + h Q)))²,

h = (1 + α²)/2, c = (1 + α)/2, step η. Its linear twin (weights × √c, step ηc) has one strength
``B ← B (1 + η c (σ − λ B))²`` from ``B₀ = c (P₀ + Q₀)``. The loss gap, A = σ/λ,

    L − L_twin = ½ λ (1 − c)² (P − Q)²  +  ½ λ [(A − c (P + Q))² − (A − B)²]

(the even part's energy, and the odd part c(P + Q) lagging the twin's B). From a random small
init the linear phase grows ``u_k = (o·v_k + ρ·w_k)/2`` and nothing else, so the groups start
at ``P₀ = Σ_{u_k > 0} u_k²`` and ``Q₀ = Σ_{u_k < 0} u_k²`` (:func:`groups`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

SETTLED = 1e-6
"""Relative distance of P, Q and B from their fixed points at which :func:`peak_gap` stops:
from there on every term of the gap is O(SETTLED) of λA² and decreasing."""
MAX_MAPS = 200_000
"""GD steps :func:`peak_gap` iterates one by one (a second or so in Python); a run of more steps
is taken in its gradient-flow limit (the step's effect is O(η) and η is then small):
:func:`peak_flow`."""
FLOW_POINTS = 20_001
"""Times at which :func:`peak_flow` reads the solved flow for its largest gap."""


def groups(u) -> tuple[float, float]:
    """``(P₀, Q₀) = (Σ_{u_k > 0} u_k², Σ_{u_k < 0} u_k²)``: the two sign groups' strengths that the
    grown parts ``u_k`` of the units start (module doc)."""
    u = np.asarray(u, float)
    return float(np.sum(u[u > 0] ** 2)), float(np.sum(u[u < 0] ** 2))


@dataclass(frozen=True)
class Peak:
    """The largest gap ``|L − L_twin|`` over the steps of the sign-group model (module doc):
    ``gap`` = ``even`` + ``drift``, the even part's ½λ(1 − c)²(P − Q)² and the odd part's lag
    at that ``step``."""

    gap: float
    even: float
    drift: float
    step: int


def peak_gap(P0: float, Q0: float, sigma: float, lam: float, alpha: float, lr: float, steps: int) -> Peak:
    """The sign-group model's largest ``|L − L_twin|`` over GD steps 0..``steps`` of step ``lr``
    (module doc's maps, from ``P0``, ``Q0`` and ``B₀ = c (P0 + Q0)``), for a mode of strength
    ``sigma`` and input variance ``lam`` along ρ at slope ``alpha``. Stops early once P, Q and
    B are within :data:`SETTLED` of their fixed points; a step whose numbers leave the floats
    (a step past stability) ends the loop, the largest gap before it kept. More than
    :data:`MAX_MAPS` steps: the flow to time ``lr · steps`` (:func:`peak_flow`)."""
    if steps > MAX_MAPS:
        return peak_flow(P0, Q0, sigma, lam, alpha, lr * steps)
    c, h = 0.5 * (1.0 + alpha), 0.5 * (1.0 + alpha * alpha)
    A = sigma / lam
    # the fixed point: P = Q = cA/(h + α) with both groups, cA/h for a group alone (the other
    # empty: 0 is a fixed point of its map); B = σ/λ = A
    both = P0 > 0 and Q0 > 0
    fixed_p = 0.0 if P0 == 0 else c * A / (h + alpha if both else h)
    fixed_q = 0.0 if Q0 == 0 else c * A / (h + alpha if both else h)
    near = SETTLED * c * A / (h + alpha)
    P, Q, B = float(P0), float(Q0), c * (float(P0) + float(Q0))
    best = Peak(0.0, 0.0, 0.0, 0)
    for k in range(int(steps) + 1):
        even = 0.5 * lam * (1.0 - c) ** 2 * (P - Q) ** 2
        drift = 0.5 * lam * ((A - c * (P + Q)) ** 2 - (A - B) ** 2)
        if not math.isfinite(even + drift):
            break
        if abs(even + drift) > abs(best.gap):
            best = Peak(even + drift, even, drift, k)
        if max(abs(P - fixed_p), abs(Q - fixed_q)) <= near and abs(B - A) <= SETTLED * A:
            break
        P, Q, B = (P * (1.0 + lr * (c * sigma - lam * (h * P + alpha * Q))) ** 2,
                   Q * (1.0 + lr * (c * sigma - lam * (alpha * P + h * Q))) ** 2,
                   B * (1.0 + lr * c * (sigma - lam * B)) ** 2)
    return best


def peak_flow(P0: float, Q0: float, sigma: float, lam: float, alpha: float, t_max: float) -> Peak:
    """:func:`peak_gap` in gradient flow to time ``t_max``: dP/dt = 2P(cσ − λ(hP + αQ)),
    dQ/dt = 2Q(cσ − λ(αP + hQ)), dB/dt = 2cB(σ − λB), solved in log variables by SciPy's DOP853
    (rtol 1e-10) and read at :data:`FLOW_POINTS` times (``step`` is the index of that time), to
    ``t_max`` or, if sooner, twice the time a group needs to grow from its start to within
    :data:`SETTLED` of A at the slowest rate a small group has, 2cσ(1 − α/h) (the other group at
    most at cA/h, where it stops growing): past that both groups have made their transitions and
    the gap only decays."""
    from scipy.integrate import solve_ivp

    c, h = 0.5 * (1.0 + alpha), 0.5 * (1.0 + alpha * alpha)
    A = sigma / lam
    start = np.array([P0, Q0, c * (P0 + Q0)], float)
    live = start > 0  # an empty group stays empty (0 is a fixed point)

    def rhs(_t, y):
        P, Q, B = np.where(live, np.exp(np.where(live, y, 0.0)), 0.0)
        return 2.0 * np.array([c * sigma - lam * (h * P + alpha * Q), c * sigma - lam * (alpha * P + h * Q),
                               c * (sigma - lam * B)])

    y0 = np.log(np.where(live, start, 1.0))
    rate = 2.0 * c * sigma * (1.0 - alpha / h) if alpha < 1 else 0.0
    far = float(np.max(np.abs(np.log(start[live] / A)))) + math.log(1.0 / SETTLED)
    t_end = float(t_max) if rate <= 0 else min(float(t_max), 2.0 * far / rate)
    sol = solve_ivp(rhs, (0.0, t_end), y0, method="DOP853", rtol=1e-10, atol=1e-12,
                    t_eval=np.linspace(0.0, t_end, FLOW_POINTS))
    P, Q, B = np.where(live[:, None], np.exp(sol.y), 0.0)
    even = 0.5 * lam * (1.0 - c) ** 2 * (P - Q) ** 2
    drift = 0.5 * lam * ((A - c * (P + Q)) ** 2 - (A - B) ** 2)
    k = int(np.argmax(np.abs(even + drift)))
    return Peak(float(even[k] + drift[k]), float(even[k]), float(drift[k]), k)


def growth_interval(modes, alpha: float, lr: float, steps: int) -> tuple[float, float, float]:
    """The growth term of the predicted gap and its interval, ``(centre, low, high)`` in loss
    units, summed over ``modes`` (``GrowthEstimate.modes`` of :mod:`~biasfree.analysis.regime`: per
    mode σ, λ, P₀, Q₀, the first-order E and the remainder bound δ): the centre is the
    sign-group model's peak (:func:`peak_gap`, GD step ``lr`` for ``steps`` steps); the
    init's remainder moves the even part's norm √<f_even²> = √(2 even) by at most δ
    (Minkowski, §6.4), so the ends are ``½ max(√(2 even) − δ, 0)² + drift`` and
    ``½ (√(2 even) + δ)² + drift``, each at least 0."""
    centre = low = high = 0.0
    for sigma, lam, P0, Q0, _, delta in modes:
        p = peak_gap(P0, Q0, sigma, lam, alpha, lr, steps)
        root = math.sqrt(2.0 * max(p.even, 0.0))
        centre += abs(p.gap)
        low += max(0.5 * max(root - delta, 0.0) ** 2 + p.drift, 0.0)
        high += max(0.5 * (root + delta) ** 2 + p.drift, 0.0)
    return centre, low, high
