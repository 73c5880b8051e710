"""Drop times of a staircase (biasfree.theory.staircase.drop_times, docs/theory.md §11.6): under GD
on a linear net with aligned modes, the ratio of successive drop times is the closed form of
§3.1, (s₁/s₂)-like, within a bound derived from the step size and the record spacing; sign
descent, a κ = 0 optimiser, misses it (the failing control)."""

import numpy as np
import optax
import pytest

import biasfree as bf
from biasfree.core.layers import Layer
from biasfree.theory.small_init import half_loss_time
from biasfree.theory.staircase import drop_times, find_plateaus

S = np.array([4.0, 2.0])
A0 = 1e-6
LR, STEPS = 0.01, 900


def _aligned_run(optimiser=None, s=S):
    """Two modes on whitened inputs (XᵀX/N = I exactly), C = diag(4, 2), from the aligned balanced
    init W₁ = W₂ = √a₀ I: the modes are decoupled logistics (§3.1); every step recorded."""
    rng = np.random.default_rng(0)
    X = np.linalg.qr(rng.normal(size=(32, 2)))[0] * np.sqrt(32)
    data = bf.Dataset(X, X @ np.diag(s))
    net = (Layer(np.sqrt(A0) * np.eye(2)), Layer(np.sqrt(A0) * np.eye(2)))
    run = bf.train(net, data, optimiser, steps=STEPS, lr=LR, alpha=1.0, n_records=STEPS + 1,
                   observables="loss")
    t, loss = LR * np.arange(STEPS + 1), np.asarray(run.loss)
    return t, loss, find_plateaus(t, loss)


def _gd_band():
    """The interval the measured ratio T₂/T₁ must lie in (derived; docs/theory.md §11.6).

    Flow: mode i crosses the midpoint of its drop at its half-loss time t_i (``half_loss_time``).
    GD multiplies a by (1 + η(s − a))² a step where the flow's e^{2η(s−a)} would, so per unit of
    ln a it needs η(s−a)/ln(1 + η(s−a)) ∈ [1, g_i], g_i = ηs_i/ln(1 + ηs_i), times the flow's
    time (to first order in the step), plus one step for summing the steps against the integral,
    and one more for locating the crossing inside its record interval: ηk_i ∈ [t_i − 2η, g_i t_i + 2η].
    The midpoint itself is off by the measured levels' distance to L_k (the flattest records) and by
    mode 2's growth by t₁, s₂a₂(t₁) with a₂ = a₀e^{2s₂t₁}; divided by |dL/dt| of mode 1 at its
    midpoint, 2a(s − a)² at a = s(1 − 1/√2), each is a time shift, added to both ends."""
    t = half_loss_time(S, A0)
    g = LR * S / np.log1p(LR * S)
    a_half = S[0] * (1 - 1 / np.sqrt(2))
    slope = 2 * a_half * (S[0] - a_half) ** 2
    overlap = S[1] * A0 * np.exp(2 * S[1] * t[0]) / slope
    return t, g, overlap, slope


def test_gd_drop_time_ratio_is_the_closed_form_and_sign_descent_misses_it():
    t, loss, st = _aligned_run()
    assert len(st.plateaus) == 3  # L₀, L₁, L₂ = 0: two drops
    T = drop_times(t, loss, st)
    tf, g, overlap, slope = _gd_band()
    L0, L1 = 0.5 * np.sum(S**2), 0.5 * S[1] ** 2  # the saddles' losses: no mode, mode 1 learned
    shift = overlap + (abs(st.plateaus[0].level - L0) + abs(st.plateaus[1].level - L1)) / slope
    lo = (tf[1] - 2 * LR - shift) / (g[0] * tf[0] + 2 * LR + shift)
    hi = (g[1] * tf[1] + 2 * LR + shift) / (tf[0] - 2 * LR - shift)
    ratio = T[1] / T[0]
    assert lo <= ratio <= hi, (ratio, lo, hi, tf[1] / tf[0])
    # the band resolves the init's log correction: the bare rate ratio s₁/s₂ = 2 lies outside it
    assert hi < S[0] / S[1]
    # failing control 1: the same GD on the spectrum (4, 1) has its own ratio, outside this band
    t, loss, st = _aligned_run(s=np.array([4.0, 1.0]))
    T = drop_times(t, loss, st)
    assert len(T) == 2 and not lo <= T[1] / T[0] <= hi, T
    # failing control 2: sign descent (κ = 0) moves every weight by η a step whatever the gradient,
    # so both modes grow at one rate: one drop, no second plateau, no GD ratio to match
    t, loss, st = _aligned_run(optax.sign_sgd(LR))
    assert len(st.plateaus) == 2, [p.level for p in st.plateaus]


def test_drop_times_refuses_a_staircase_of_another_curve():
    t = np.geomspace(0.01, 100, 60)
    loss = 1.0 / (1.0 + (t / 1.0) ** 4)
    st = find_plateaus(t, loss)
    assert len(st.plateaus) == 2
    (T,) = drop_times(t, loss, st)
    # the levels are 1 − t₀⁴ and t_end⁻⁴, within 1e-8 of 1 and 0, so the midpoint is ½ (reached
    # at t = 1) to 1e-8, a shift of 1e-8 in ln t; the crossing lies in its record interval
    assert abs(np.log(T)) <= np.log(t[1] / t[0]) + 1e-8
    with pytest.raises(TypeError, match="from find_plateaus"):
        drop_times(t, loss, [st])
    with pytest.raises(ValueError, match="never crosses"):
        drop_times(t, loss + 5.0, st)
