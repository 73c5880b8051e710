"""When a ReLU net leaves a saddle that a small member of a learned group may leave first
(docs/theory.md §11.7.6, "Measured where a member may lead"): the zero units' t_drop is then several
times late, or not defined (ε = 0), so the stage measures the time by GD from the net's weights, and it
agrees with an independent GD run at another step within the two runs' discretisation."""

import jax
import numpy as np
import pytest

import biasfree as bf
from biasfree.analysis import unit_leave
from biasfree.analysis.report import _stage_json
from biasfree.analysis.stage import stage
from biasfree.theory.plateau_times import crossing_times

LR = 0.02


@pytest.fixture(scope="module")
def teacher():
    """300 Gaussian points in 3-d, y = 2 relu(e₁·x) + 0.5 relu(w₂·x) + 0.12 relu(e₃·x) (w₂ 70° from
    e₁): a width-8 ReLU net from init std 1e-3, GD at η = 0.02, stands on its one-kink plateau at t = 11
    with its first kink held by several units, some of them small (the audits of §11.7.6)."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((300, 3))
    th = np.deg2rad(70)
    W = np.array([[1, 0, 0], [np.cos(th), np.sin(th), 0], [0, 0, 1.0]])
    Y = (np.maximum(X @ W.T, 0) @ np.array([2.0, 0.5, 0.12]))[:, None]
    return X, Y


def _at(X, Y, seed, t):
    p0 = tuple(bf.init_gaussian(jax.random.PRNGKey(seed), (3, 8, 1), scale=1e-3))
    cfg = bf.GDConfig(alpha=0.0, lr=LR, steps=round(t / LR), n_records=2)
    return p0, tuple(bf.train(p0, bf.Dataset(X, Y, mirror=False), cfg, observables="loss").params)


def _crossing(net, X, Y, level, t_max):
    """GD at η = 0.02 from ``net``, every step recorded: when its loss first reaches ``level``."""
    steps = round(t_max / LR)
    tr = bf.train(net, bf.Dataset(X, Y, mirror=False),
                  bf.GDConfig(alpha=0.0, lr=LR, steps=steps, n_records=steps + 1), observables="loss")
    return float(crossing_times(np.asarray(tr.t)[1:], np.asarray(tr.loss)[1:], [level])[0])


@pytest.mark.parametrize("seed", [0, 1])
def test_a_saddle_a_small_member_may_leave_first_gets_its_time_measured(teacher, seed):
    X, Y = teacher
    p0, net = _at(X, Y, seed, 11.0)
    st = stage(net, (X, Y), alpha=0.0, init=p0)
    up, lv = st.unit_point, st.leave
    assert st.k == 1 and up.saddle and up.copy_time is not None
    assert st.drop_time is None or up.copy_time < st.drop_time  # the theory cannot say who leads
    assert lv is not None and lv.time is not None and lv.level == up.drop_level
    t_ref = _crossing(net, X, Y, up.drop_level, 2 * lv.time)
    # tolerance: each GD run escapes at rate ln(1 + ηR)/η where the flow escapes at R ≤ λ* (the escape
    # rate's maximum), so each is late by at most t·x/(1 − x), x = ηλ*/2 (§11.5.3); each crossing is
    # interpolated between two steps, so within its own η
    x1, x2 = lv.lr * up.rate / 2, LR * up.rate / 2
    tol = t_ref * (x1 / (1 - x1) + x2 / (1 - x2)) + lv.lr + LR
    assert abs(lv.time - t_ref) <= tol, (lv.time, t_ref, tol)
    assert lv.lr * up.rate <= unit_leave.RATE_STEP * (1 + 1e-12)
    # failing control: the zero units' prediction misses it (seed 0: 43 against 7.5), or makes none
    assert st.drop_time is None or abs(st.drop_time - t_ref) > tol
    assert lv.line() in st.lines() and "measured: the loss reaches the drop level" in lv.line()
    assert _stage_json(st)["leave_measured"]["time"] == lv.time


def test_a_leave_says_whether_the_horizon_the_budget_or_a_divergence_ended_it(teacher, monkeypatch):
    X, Y = teacher
    _, net = _at(X, Y, 0, 11.0)
    never = unit_leave.measured_leave(net, X, Y, 0.0, level=-1.0, rate=0.13, horizon=5.0)
    assert never.time is None and never.ended == "horizon" and never.steps * never.lr >= 5.0
    assert "not by the horizon t = 5" in never.line()
    # a horizon past the loop's int32 step count is cut to it, and the budget ends the run
    monkeypatch.setattr(unit_leave, "BUDGET", 0.5)
    far = unit_leave.measured_leave(net, X, Y, 0.0, level=-1.0, rate=1e-12, horizon=float("inf"))
    assert far.ended == "budget" and far.time is None and "the time budget of 0.5 s ran out" in far.line()
    monkeypatch.setattr(unit_leave.measure_step, "step", lambda lam: 1e3)  # far past 2/λ̂
    blown = unit_leave.measured_leave(net, X, Y, 0.0, level=-1.0, rate=1e-12, horizon=1e6)
    assert blown.ended == "diverged" and "GD diverged" in blown.line()
    monkeypatch.undo()
    monkeypatch.setattr(unit_leave, "BUDGET", 0.0)
    spent = unit_leave.measured_leave(net, X, Y, 0.0, level=-1.0, rate=0.13, horizon=1e4)
    assert spent.steps == 0 and spent.ended == "budget" and "not run" in spent.line()


def test_a_far_horizon_keeps_the_time_to_one_step(teacher):
    """The records of a long horizon are far apart (1e5/400 = 250 in t); the chunk of the crossing is
    run again with every step recorded, so a horizon 10⁴ times the time gives the same time to η."""
    X, Y = teacher
    p0, net = _at(X, Y, 0, 11.0)
    up = stage(net, (X, Y), alpha=0.0, init=p0).unit_point
    near = unit_leave.measured_leave(net, X, Y, 0.0, up.drop_level, up.rate, 20.0)
    far = unit_leave.measured_leave(net, X, Y, 0.0, up.drop_level, up.rate, 1e5)
    assert near.ended == far.ended == "reached" and near.lr == far.lr
    assert abs(near.time - far.time) <= near.lr, (near.time, far.time)


def test_no_measurement_where_the_zero_units_lead(teacher):
    X, Y = teacher
    p0, net = _at(X, Y, 0, 2.0)  # plateau 0: every unit small, no learned group, no member to lead
    st = stage(net, (X, Y), alpha=0.0, init=p0)
    assert st.k == 0 and st.unit_point.copy_time is None and st.leave is None
    assert _stage_json(st)["leave_measured"] is None


def test_a_conv_nets_leave_is_measured_the_same_way():
    """A ReLU conv net (1-D, kernels of width 3, pooled readout): a kernel k₁, a ×2 copy, a small copy
    and a small random kernel, on k₁ plus a weak second kernel. The small copy may lead, so the time is
    measured; GD at the measured step from the same weights, every step recorded, crosses the drop
    level within a step of the reported time (both interpolate between two steps)."""
    from biasfree.core.conv import Conv, PooledDense
    rng = np.random.default_rng(4)
    k1, k2 = rng.normal(size=(2, 1, 1, 3))
    X = rng.normal(size=(60, 8))
    teach = lambda k: (Conv(k, None, (8,), "same"), PooledDense(np.array([[1.0]]), None, (8,)))  # noqa: E731
    Y = np.asarray(bf.forward(teach(k1), X, 0.0)) + 0.1 * np.asarray(bf.forward(teach(k2), X, 0.0))
    K = np.concatenate([k1, 2 * k1, 0.05 * k1, 0.02 * rng.normal(size=(1, 1, 3))])
    net = (Conv(K, None, (8,), "same"), PooledDense(np.array([[0.6, 0.2, 0.01, 0.0]]), None, (8,)))
    st = stage(net, (X, Y), alpha=0.0)
    lv, up = st.leave, st.unit_point
    assert st.family == "conv" and up.saddle and lv is not None and lv.time is not None
    steps = int(np.ceil(1.5 * lv.time / lv.lr))
    tr = bf.train(net, bf.Dataset(X, Y, mirror=False),
                  bf.GDConfig(alpha=0.0, lr=lv.lr, steps=steps, n_records=steps + 1), observables="loss")
    t_true = float(crossing_times(np.asarray(tr.t)[1:], np.asarray(tr.loss)[1:], [lv.level])[0])
    assert abs(lv.time - t_true) <= 2 * lv.lr, (lv.time, t_true)  # each within one step


def test_a_linear_nets_drop_on_inputs_not_whitened_is_measured():
    """5 → 6 → 3 linear net from init 1e-3 on correlated inputs (whitened strengths 3.46, 0.25, 0.19):
    on its second plateau the closed form gives only the leading-order escape ln(1/ε)/|λ_min|, so the
    drop (3/4 of the way from L_1 to L_2, where a whitened mode is half learned) is measured, and
    agrees with GD at η = 0.002 recorded every step."""
    from biasfree.theory.reduced_rank import reduced_rank_losses, whitened_svd
    rng = np.random.default_rng(0)
    A = rng.normal(size=(5, 5))
    X = rng.normal(size=(400, 5)) @ A * 0.7
    Y = X @ rng.normal(size=(3, 5)).T * np.array([1.0, 0.3, 0.08])
    p0 = tuple(bf.init_gaussian(jax.random.PRNGKey(0), (5, 6, 3), scale=1e-3))
    lr = 0.002
    net = tuple(bf.train(p0, bf.Dataset(X, Y, mirror=False),
                         bf.GDConfig(alpha=1.0, lr=lr, steps=4000, n_records=2), observables="loss").params)
    st = stage(net, (X, Y), alpha=1.0, init=p0)
    lv, rate = st.leave, abs(st.fixed_point.lambda_min)
    assert st.k == 1 and st.saddle and st.drop_time is None and "not whitened" in " ".join(st.notes)
    s, Lk = whitened_svd(X, Y).s, reduced_rank_losses(X, Y)
    assert lv.level == pytest.approx(Lk[1] - 0.375 * s[1] ** 2, rel=1e-12) and lv.ended == "reached"
    steps = round(2 * lv.time / lr)
    tr = bf.train(net, bf.Dataset(X, Y, mirror=False),
                  bf.GDConfig(alpha=1.0, lr=lr, steps=steps, n_records=steps + 1), observables="loss")
    t_ref = float(crossing_times(np.asarray(tr.t)[1:], np.asarray(tr.loss)[1:], [lv.level])[0])
    x1, x2 = lv.lr * rate / 2, lr * rate / 2  # each run's lag at the escape rate, as above, and its step
    tol = t_ref * (x1 / (1 - x1) + x2 / (1 - x2)) + lv.lr + lr
    assert abs(lv.time - t_ref) <= tol, (lv.time, t_ref, tol)
    assert abs(st.escape_time - t_ref) > tol  # failing control: the leading order misses it
    assert lv.line() in st.lines()


def test_a_linear_net_far_along_its_drop_gets_no_negative_time():
    """An audit's 6 → 8 → 5 linear net on anisotropic inputs, answered at the origin's saddle while two
    modes are learned: ε = 1.19 > 1 made ln(1/ε)/|λ_min| negative, the horizon negative, and the stage
    raised (inside analyse, its whole answer became the error). Now the time is 0, a note says why,
    and the measurement says the loss is already below the drop level."""
    rng = np.random.default_rng(1)
    A = rng.normal(size=(6, 6)) * np.array([3, 1, 1, 0.3, 0.1, 0.05])[None, :]
    X = rng.normal(size=(300, 6)) @ A
    Y = X @ rng.normal(size=(5, 6)).T * np.array([1.0, 0.5, 0.2, 0.1, 0.05])
    p0 = tuple(bf.init_gaussian(jax.random.PRNGKey(1), (6, 8, 5), scale=1e-3))
    cfg = bf.GDConfig(alpha=1.0, lr=0.002, steps=3000, n_records=2)
    net = tuple(bf.train(p0, bf.Dataset(X, Y, mirror=False), cfg, observables="loss").params)
    st = stage(net, (X, Y), alpha=1.0, init=p0)
    assert st.saddle and st.unstable_distance >= 1 and st.escape_time == 0.0
    assert any("already leaving this saddle" in n for n in st.notes)
    assert st.loss <= st.leave.level and st.leave.time == 0.0 and st.leave.steps == 0
    assert "already at or below the drop level" in st.leave.line()
