"""When separate linear attention leaves its k-head saddle (docs/theory.md §11.7.13): the net's small
heads under the order-3 escape flow, and the saturation the learned heads let the new one reach.

At the embedded point θ* (:mod:`~biasfree.analysis.attention_stage`) a head x = (v, K, Q) of small
size changes the loss by ``−P(x) + O(‖x‖⁶)``, ``P(x) = Σ_i T(K_i, v, Q_i)``, T the escape tensor,
and the heads do not couple below order six. Gradient flow ``ẋ = ∇P(x)`` is homogeneous of degree
two: with x = ρd, ‖d‖ = 1, and the clock dτ = ρ dt,

    d' = ∇P(d) − 3P(d)d,   (ln ρ)' = 3P(d),   t* = (1/ρ₀) ∫₀^∞ exp(−3∫₀^τ P(d)) dτ,

a gradient ascent of P on the unit sphere that does not depend on ρ₀, and the blow-up time t* of
the cubic flow. The direction settles at a local maximum of P, balanced (each block of norm 1/√3)
and rank one, where P = c/3^{3/2}, c = T(k, v, q) at that unit triple (c* at the global one); from
then on the head is the aligned balanced solution ε(k, v, q), ε̇ = cε², whose blow-up time is
1/(cε). So the head's effective strength is ``ε₀ = 1/(c t*)``, ``a₀ = ε₀³`` (exact for the cubic
flow; for an aligned balanced head, its own size).

The drop: near blow-up the head leaves the cubic regime (its own size saturates the fit, the
learned heads move, the degenerate family of maximisers of T lets its direction turn: all of
order ε⁶ in the loss); with ε₁ = (ΔL/c)^{1/3} the head size at which the cubic gain cε³ is the
drop ΔL to the next plateau, the half drop comes in [t* − 2^{1/3}/(cε₁), t*] (§11.7.13). ΔL is the
next fixed point's, not known here: ``t*`` is the time reported (``Stage.escape_time``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.integrate import solve_ivp

SETTLED = 60.0
"""The flow stops when ``3∫P dτ`` reaches this: the rest of t*'s integral is then e^{−60} of it,
added in closed form."""
TAU_SPAN = 1e4
"""The sphere flow runs at most TAU_SPAN/c in τ (c the escape coefficient) before a head counts as
never leaving (it sits on a critical point of P with P ≤ 0)."""


@dataclass(frozen=True)
class Leave:
    """When the net leaves the saddle (module doc): ``head`` the net's small head that leaves first,
    ``rate`` c = T at the unit triple its direction settles on (``direction`` (v, K, Q), each block
    of norm 1; c* when it is the global maximum), ``a0`` its effective strength ε₀³ = (c t*)^{−3},
    ``escape_time`` t* the blow-up of its cubic flow, ``times`` every small head's (head, t*)."""

    head: int
    rate: float
    direction: tuple
    a0: float
    escape_time: float
    times: tuple
    note: str = ""

    @property
    def eps(self) -> float:
        """ε₀ = a₀^{1/3}: the effective head's size per factor."""
        return self.a0 ** (1 / 3)


def potential(T, v, K, Q) -> float:
    """``P(x) = Σ_i T(K_i, v, Q_i)``: a small head's loss decrease at order three."""
    return float(np.einsum("abc,ia,b,ic->", T, K, v, Q))


def potential_gradient(T, v, K, Q) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``∇P`` over (v, K, Q)."""
    return (np.einsum("abc,ia,ic->b", T, K, Q), np.einsum("abc,b,ic->ia", T, v, Q),
            np.einsum("abc,ia,b->ic", T, K, v))


def blowup(T, v, K, Q, c: float) -> tuple[float, tuple]:
    """The cubic flow's blow-up time t* of a head (v, K (r, n), Q (r, n)) (module doc) and the unit
    direction it settles on, each block rescaled to norm 1; ``c`` the escape coefficient (sets the
    span). ``(inf, ())`` for a zero head, or one that never leaves within the span."""
    n, r = len(v), K.shape[0]
    x = np.concatenate([v, K.ravel(), Q.ravel()])
    rho = float(np.linalg.norm(x))
    if rho == 0 or c <= 0:
        return math.inf, ()

    def split(d):
        return d[:n], d[n:n + r * n].reshape(r, n), d[n + r * n:].reshape(r, n)

    def rhs(_, y):
        d = y[:-2] / np.linalg.norm(y[:-2])  # on the sphere (the flow keeps it there; drift removed)
        p = potential(T, *split(d))
        g = np.concatenate([a.ravel() for a in potential_gradient(T, *split(d))])
        return np.concatenate([g - 3 * p * d, [3 * p, math.exp(-y[-2])]])

    def settled(_, y):
        return y[-2] - SETTLED
    settled.terminal = True
    sol = solve_ivp(rhs, (0.0, TAU_SPAN / c), np.concatenate([x / rho, [0.0, 0.0]]), method="DOP853",
                    rtol=1e-10, atol=1e-14, events=settled)
    if sol.status != 1:
        return math.inf, ()
    y = sol.y[:, -1]
    d = y[:-2] / np.linalg.norm(y[:-2])
    tail = math.exp(-y[-2]) / (3 * potential(T, *split(d)))
    unit = tuple(b / np.linalg.norm(b) for b in split(d))
    return (y[-1] + tail) / rho, unit


def time_to_leave(T, c: float, small: dict) -> Leave:
    """When the net leaves θ* (module doc): ``T`` the escape tensor, ``c`` its spectral norm c*,
    ``small`` the net's heads outside θ*'s kept ones ({head: (v, K, Q)}, their current weights)."""
    times = {h: blowup(T, *x, c) for h, x in small.items()}
    head = min(times, key=lambda h: times[h][0])
    tstar, unit = times[head]
    order = tuple((h, float(times[h][0])) for h in sorted(times))
    if not unit:
        return Leave(head, c, (), 0.0, math.inf, order,
                     "no small head leaves the saddle in the cubic flow (all zero, or on a critical point)")
    rate = potential(T, *unit)
    return Leave(head, rate, unit, float((1.0 / (rate * tstar)) ** 3), float(tstar), order)
