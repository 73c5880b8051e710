"""Small *random* init: the mode that grows, its effective strength, half-loss times,
and the log correction of a leaky net started from the same raw init (§2.4, §3.1).

Two-layer linear net ``f(x) = W_2 W_1 x`` on whitened inputs, one mode ``(q, s, r)`` of
``Σ_yx``: whatever the (small, unaligned, unbalanced) init, the mode enters the logistic
of §3.1 from the *effective* strength (derived in docs/theory.md §3.1, "Small random init")

    a_0 = ¼ ||W_1(0) r + W_2(0)ᵀ q||².

A leaky net with slope α runs like its twin ``√c·init`` (c = (1 + α)/2, §2.4), whose
effective strength is ``c a_0``, at time ``c t``: so from the *same raw* init its rescaled
half time is later by about ``ln(1/c)/(2s)``, independent of the init scale.
"""

from __future__ import annotations

import numpy as np

from .. import _validate as v
from ..core.layers import Params, takes_net
from ..core.nets import depth
from ..core.twin import slope_factor
from .modes import broadcast_together


@takes_net(bias_free=True)
def effective_strength(params: Params, r, q=None) -> float:
    """``a_0 = ¼ ||W_1 r + W_2ᵀ q||²``: the strength at which a small two-layer init
    enters the logistic of mode ``(q, r)`` (see the module docstring).

    ``params`` a two-layer net (W_1 of shape (h, d), W_2 of shape (p, h)), ``r`` (d,)
    the unit input direction of the mode, ``q`` (p,) its unit output direction
    (default: the only one, p = 1). Accurate while ``a_0 ≪ s``.
    """
    if depth(params) != 2:
        raise ValueError(f"effective_strength is derived for two-layer nets; got depth {depth(params)}")
    W1, W2 = (np.asarray(layer.matrix, dtype=float) for layer in params)
    r = v.finite_array("r", r, ndim=(1, 2)).reshape(-1)
    if q is None:
        if W2.shape[0] != 1:
            raise ValueError(f"the net has {W2.shape[0]} outputs: give the output direction q")
        q = np.ones(1)
    q = v.finite_array("q", q, ndim=(1, 2)).reshape(-1)
    for name, vec, n in (("r", r, W1.shape[1]), ("q", q, W2.shape[0])):
        if vec.shape != (n,) or not np.isclose(np.linalg.norm(vec), 1.0, rtol=1e-9):
            raise ValueError(f"{name} must be a unit vector of length {n}")
    return float(0.25 * np.sum((W1 @ r + W2.T @ q) ** 2))


def half_loss_time(s, a0):
    """Time at which the loss of one logistic mode (§3.1) has fallen half-way from
    ``L(0)`` to its final value: ``½(s - a)² = ¼(s - a_0)²``, i.e.
    ``a½ = s - (s - a_0)/√2``, reached at

        t½ = ln[(s/a_0 - 1) / (s/a½ - 1)] / (2s)  ≈  [ln(s/a_0) - ln(1 + √2)] / (2s).

    (The *mode* half time of :func:`~biasfree.theory.half_time`, a = s/2, is later by
    ``ln(1 + √2)/(2s)``.) ``s`` singular value, ``a0`` initial strength, 0 < a_0 < s.
    """
    s, a0 = broadcast_together(s=v.real("s", s), a0=v.real("a0", a0))
    if np.any(s <= 0) or np.any(a0 <= 0) or np.any(a0 >= s):
        raise ValueError("half_loss_time needs 0 < a0 < s (a mode still to be learned)")
    a_half = s - (s - a0) / np.sqrt(2.0)
    return np.log((s / a0 - 1.0) / (s / a_half - 1.0)) / (2.0 * s)


def raw_init_half_time_ratio(s, a0, alpha):
    """``c t½(α) / t½(1)`` for a leaky net and a linear net started from the *same raw*
    init of effective strength ``a0`` (§2.4): the leaky net is its twin from ``c a_0``
    at time ``c t``, so the ratio is ``half_loss_time(s, c a_0) / half_loss_time(s, a_0)``
    ``≈ 1 + ln(1/c) / ln(s/a_0)``: above 1, tending to 1 only logarithmically as the
    init shrinks. ``s`` singular value, ``a0`` effective strength, ``alpha`` slope α.
    """
    alpha = v.slope(alpha, array_ok=True)
    a0 = v.real("a0", a0)
    return half_loss_time(s, slope_factor(alpha) * a0) / half_loss_time(s, a0)
