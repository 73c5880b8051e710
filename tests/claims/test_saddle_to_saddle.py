"""The saddle-to-saddle claim's predictions and checks (issue 49 item 6): the quadratic unit's
closed-form half time is its ODE's, and the staircase checks fail on a wrong prediction (a level
shifted by a tenth of a drop, a time from a wrong init, a unit count one short)."""

import dataclasses
import math

import numpy as np
import pytest
from scipy.integrate import solve_ivp

from biasfree.claims import get
from biasfree.claims.saddle_to_saddle import run as s2s
from biasfree.theory.plateau_times import quadratic_unit_time_to


@pytest.fixture(scope="module")
def panel():
    cfg = get("saddle-to-saddle").presets["tiny"]
    p, *_ = s2s._linear_fc(cfg, np.random.default_rng(0), lambda _: None)
    return p


@pytest.mark.parametrize("a0", [1e-3, 0.02, 0.1])
def test_quadratic_half_time_is_its_odes(a0):
    """``da/dt = 2μa²(1 − 2a³/c)`` integrated to a b² = 2a³ = c/2 (tight RK45: rtol 1e-11, so the
    event time is good to ~1e-9 relative) equals the closed form; a wrong antiderivative does not."""
    mu, c = 0.7, 1.3
    half = (c / 4) ** (1 / 3)
    ev = lambda t, a: a[0] - half  # noqa: E731
    ev.terminal = True
    sol = solve_ivp(lambda t, a: 2 * mu * a**2 * (1 - 2 * a**3 / c), (0, 10 / (mu * a0)), [a0],
                    events=ev, rtol=1e-11, atol=1e-14)
    t_ode = float(sol.t_events[0][0])
    assert quadratic_unit_time_to(0.5, mu, c, a0) == pytest.approx(t_ode, rel=1e-7)
    # control: the hyperbolic leading term 1/(2 μ a0) alone misses it by far more than the tolerance
    assert abs(1 / (2 * mu * a0) - t_ode) > 1e-4 * t_ode


def test_a_true_prediction_passes_and_wrong_ones_fail(panel):
    ev = s2s._evaluate(panel)
    gaps = np.abs(ev["levels_measured"] - panel.levels)
    assert np.all(gaps <= ev["level_tol"])
    assert np.all(np.abs(ev["times_measured"] - panel.times) <= ev["time_tol"])
    assert ev["units_final"] == panel.expected_units and ev["units_start"] == 0
    assert np.all(ev["units_at_drops"] >= np.arange(1, len(panel.times) + 1))
    # a level moved by a tenth of its drop fails its tolerance
    drops = -np.diff(panel.levels)
    wrong = dataclasses.replace(panel, levels=panel.levels + np.r_[0.1 * drops[0], np.zeros(drops.size)])
    ev_w = s2s._evaluate(wrong)
    assert abs(ev_w["levels_measured"][0] - wrong.levels[0]) > ev_w["level_tol"][0]
    # times predicted from an init 10× too large (half times shift by ln 10/(2s)) fail
    s = np.asarray(get("saddle-to-saddle").presets["tiny"].strengths)
    a0 = get("saddle-to-saddle").presets["tiny"].scale
    shifted = np.log(s / (10 * a0) - 1) / (2 * s)
    assert np.all(np.abs(shifted - panel.times) > math.log(10) / (2 * s) * 0.9)
    ev_t = s2s._evaluate(dataclasses.replace(panel, times=shifted))
    assert np.all(np.abs(ev_t["times_measured"] - shifted) > ev_t["time_tol"])


def test_the_unit_check_counts_a_missing_unit(panel):
    short = dataclasses.replace(panel, units=np.minimum(panel.units, panel.expected_units - 1))
    ev = s2s._evaluate(short)
    assert ev["units_final"] == panel.expected_units - 1
    assert np.sum(ev["units_at_drops"] < np.arange(1, len(panel.times) + 1)) >= 1


def test_the_attention_panels_time_to_leave_brackets_its_half_drop():
    """``analyse``'s time to leave the one-head plateau (§11.7.13), from the record at its flattest
    point: the loss's half drop lies in the window [t* − 2^{1/3}/(cε₁), t*] (widened by GD against
    flow and the records; measured at tiny: t* = 112.37 from t = 34.2, half drop 108.05, window
    [99.47, 120.56]). Control: the order-2 law ln(1/ε₀)/c from the same ε₀ and c (a zero head escaping
    as a two-layer unit would) puts the window far before the drop. Fails on main: there the panel has
    no ``leave`` (separate attention had no time to leave)."""
    from biasfree.claims.saddle_to_saddle.leave import leave_checks
    cfg = get("saddle-to-saddle").presets["tiny"]
    import jax
    p = s2s._attention(cfg, jax.random.PRNGKey(0), lambda _: None)
    lv = p.leave
    assert lv["times"].size == len(cfg.eigs) - 1 and np.all(lv["units"] == np.arange(1, len(cfg.eigs)))
    _, _, checks = leave_checks("attention", "separate attention", lv)
    assert all(c.passed for c in checks.values())
    shift = lv["now"] + np.log(1 / lv["a0"] ** (1 / 3)) / lv["rate"] - lv["times"]
    wrong = dict(lv, lo=lv["lo"] + shift, hi=lv["hi"] + shift, times=lv["times"] + shift)
    _, _, bad = leave_checks("attention", "separate attention", wrong)
    assert not any(c.passed for c in bad.values())


def test_the_linear_conv_task_has_its_own_modes_and_their_levels_are_reduced_rank_regressions():
    """The linear conv panel's mean patch P = X Aᵀ has second moment V diag(λ) Vᵀ (λ falling by
    ``conv_spread``), so mode h has input variance λ_h and its drop is ½ λ_h s_h²: the best k-kernel
    losses (reduced-rank regression on (P, Y), an independent whitened SVD) are ½ Σ_{h≥k} λ_h s_h².
    Round-off: P is a QR basis times √N, a rotation and A's pseudo-inverse (κ(A) ≈ 1 for the
    pooled patch map), so its moments are good to a few ε·N relative: 1e-12 is far below any
    misplaced λ (the whitened task, the control, is off by (√2 − 1)/√2 of the first drop)."""
    from biasfree.theory.reduced_rank import reduced_rank_losses

    cfg = get("saddle-to-saddle").presets["paper"]
    s = np.asarray(cfg.strengths[:cfg.conv_kernel])
    lam = s2s.conv_variances(cfg)
    assert np.all(np.diff(lam) < 0) and np.prod(lam) == pytest.approx(1.0, rel=1e-14)
    X, Y, A, U, V = s2s.linear_conv_task(np.random.default_rng(3), 300, cfg.conv_n, s, lam)
    P = X @ A.T
    assert np.max(np.abs(P.T @ P / len(P) - (V * lam) @ V.T)) < 1e-12
    drops = 0.5 * lam * s**2
    expected = np.concatenate([np.cumsum(drops[::-1])[::-1], [0.0]])
    assert np.max(np.abs(reduced_rank_losses(P, Y) - expected)) < 1e-12 * expected[0]
    Xw, Yw, Aw, *_ = s2s.linear_conv_task(np.random.default_rng(3), 300, cfg.conv_n, s)
    assert abs(reduced_rank_losses(Xw @ Aw.T, Yw)[0] - expected[0]) > 0.1 * drops[0]
