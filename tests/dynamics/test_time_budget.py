"""``time_budget`` is a bound (issue 48 item 4): a run stops within its budget plus one step
(plus the first call's compile time), its calls sized by the measured time per step
(:mod:`biasfree.dynamics.pacing`), and what it returns is the run up to where it stopped."""

from __future__ import annotations

import time

import jax
import numpy as np
import pytest

import biasfree as bf
from biasfree.dynamics import pacing


@pytest.fixture(scope="module")
def problem():
    key = jax.random.PRNGKey(0)
    data = bf.make_dataset(key, bf.sine_target(key, d=3)[0], n=20, d=3)
    return bf.init_gaussian(key, (3, 8, 1), scale=0.1), data


def test_cut_splits_a_call_at_records_and_at_its_step_count():
    ks = np.array([0, 10, 20, 30])
    assert pacing.cut(ks, 0, 0, 1, 2) == ([0, 1], 1, True)  # record 0, then one step into (0, 10]
    assert pacing.cut(ks, 1, 1, 25, 4) == ([9, 10, 6], 2, True)  # records 10 and 20, then up to 26
    assert pacing.cut(ks, 1, 1, 25, 2) == ([9, 10], 2, False)  # two intervals at most: ends at 20
    assert pacing.cut(ks, 3, 26, 4, 2) == ([4], 1, False)  # the last record, exactly
    assert pacing.next_steps(1.0, None, 10) == 1  # nothing timed yet: one step
    assert pacing.next_steps(1.0, 0.01, 10**9) == 50  # half the time left at 10 ms a step
    assert pacing.next_steps(1.0, 0.01, 7) == 7  # no more than are left
    assert pacing.next_steps(0.015, 0.01, 10) == 0  # under two steps' time left: stop
    assert pacing.next_steps(-1.0, None, 10) == 0


def test_a_run_within_its_budget_is_the_run_without_one(problem):
    """The paced calls split the run only between steps, each step the same arithmetic: every
    record is bitwise the unbudgeted run's. The control: another lr gives other records."""
    params, data = problem
    cfg = bf.GDConfig(lr=0.05, steps=3000, n_records=7)
    free = bf.train(params, data, cfg)
    paced = bf.train(params, data, cfg, time_budget=600.0)
    assert int(paced.stats["steps"]) == 3000
    for a, b in ((free.loss, paced.loss), (free.t, paced.t), (free.params[0].matrix, paced.params[0].matrix)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    other = bf.train(params, data, bf.GDConfig(lr=0.04, steps=3000, n_records=7), time_budget=600.0)
    assert not np.array_equal(np.asarray(other.loss[1:]), np.asarray(paced.loss[1:]))


def test_a_spent_budget_stops_after_one_step_with_its_record(problem):
    """A budget spent before the first call returns: the run is its first call, record 0 and one
    step (on main: the first chunk of records, a twentieth of the run, 500 steps here), and its
    last record is the state it returns, bitwise the run of one step."""
    params, data = problem
    seen = []
    cut = bf.train(params, data, bf.GDConfig(lr=0.05, steps=10_000, n_records=101), time_budget=1e-9,
                   progress=lambda k, n: seen.append((k, n)))
    one = bf.train(params, data, bf.GDConfig(lr=0.05, steps=1, n_records=2))
    assert int(cut.stats["steps"]) == 1 and seen == [(1, 10_000)]
    for a, b in ((cut.loss, one.loss), (cut.t, one.t), (cut.params[0].matrix, one.params[0].matrix)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


@pytest.mark.parametrize("layout", ["map", "vmap"])
def test_an_ensemble_stopped_by_its_budget_ran_a_step(problem, layout):
    """An ensemble with few records (one interval a chunk) and its budget spent at once: its
    first call still ran record 0 and one step (a call of one interval was record 0 alone, and
    the run stopped at step 0), each member's last record at t = η_b."""
    params, data = problem
    lrs = np.array([0.05, 0.02])
    tr = bf.train(params, data, bf.GDConfig(steps=10**6, n_records=9), lr=lrs, layout=layout,
                  time_budget=1e-9)
    assert tr.loss.shape == (2, 2) and np.all(np.asarray(tr.stats["steps"]) == 1)
    np.testing.assert_array_equal(np.asarray(tr.t[:, -1]), lrs)  # t = η_b · 1, exactly


def test_a_huge_run_stops_within_its_budget(problem):
    """``TrainConfig(lr=1e-3, steps=10**9)`` with ``time_budget=1``: on main the budget was
    checked between 20 chunks of 5·10^7 steps each, so each call below ran minutes past it.
    Its programs compiled by a first run, the run's calls are planned at half the time left each
    (pacing's doc), so it ends by the budget unless a call runs slower than the one before it; on
    this shared 2-core machine a call may run up to 3× slower than planned, which overshoots by
    at most (3/2 − 1)·budget, and the host work after the last call (the trajectory) takes
    milliseconds: the bound is 1.5·budget + 0.25 s. It also uses its budget: it stops only
    when less than two steps' time is left, so well after budget/2."""
    params, data = problem
    cfg, budget, calls = bf.TrainConfig(lr=1e-3, steps=10**9), 1.0, []
    bf.train(params, data, cfg, time_budget=1e-9)  # compiles this run's programs (stops after a step)
    t0 = time.monotonic()
    tr = bf.train(params, data, cfg, time_budget=budget, progress=lambda k, n: calls.append(k))
    wall = time.monotonic() - t0
    assert budget / 2 <= wall <= 1.5 * budget + 0.25, (wall, calls)
    steps = int(tr.stats["steps"])
    assert 0 < steps < 10**9 and tr.loss.shape == (2,) and calls[-1] == steps  # record 0, and the stop
    assert float(tr.t[-1]) == pytest.approx(1e-3 * steps, rel=1e-12)  # t = η k at the last record


@pytest.mark.parametrize("budget", [None, 600.0])
def test_a_run_stops_where_its_stop_test_says(problem, budget):
    """``stop(state, last)`` ends a run between calls (unpaced: between chunks of records; paced:
    between calls), its records a prefix of the whole run's, bitwise (the same steps, split only
    between steps), its last record the ``last`` the test saw. The control: a test that never
    says stop runs every step."""
    from biasfree.dynamics.trainer import run_checked as _run

    params, data = problem
    cfg = bf.GDConfig(lr=0.05, steps=2000, n_records=41)
    whole = _run(params, data, cfg, twin=True, time_budget=budget)
    seen = []

    def stop(state, last):
        seen.append((int(state["k"]), float(last["net"]["loss"]), float(state["gap"])))
        return int(state["k"]) >= 500

    cut = _run(params, data, cfg, twin=True, time_budget=budget, stop=stop)
    n, k = cut.loss.shape[0], int(cut.stats["steps"])
    assert 500 <= k < 2000 and seen[-1][0] == k  # ended at the first call that reached step 500
    assert all(s[0] < 500 for s in seen[:-1])  # every call before it said go on
    assert float(cut.loss[-1]) == seen[-1][1]  # its last record is the one the test was shown
    m = int(np.sum(np.isin(np.asarray(cut.t), np.asarray(whole.t))))  # a paced call may end between records
    # 41 records over 2000 steps, one every 50: records 0..10 lie at or before step 500, so at least 11
    # of the whole run's records were made before the stop
    assert m >= n - 1 and m >= 11
    np.testing.assert_array_equal(np.asarray(cut.t[:m]), np.asarray(whole.t[:m]))
    np.testing.assert_array_equal(np.asarray(cut.loss[:m]), np.asarray(whole.loss[:m]))
    assert float(cut.twin_gap) <= float(whole.twin_gap) and seen[-1][2] == float(cut.twin_gap)
    never = _run(params, data, cfg, twin=True, time_budget=budget, stop=lambda state, last: False)
    assert int(never.stats["steps"]) == 2000
    np.testing.assert_array_equal(np.asarray(never.loss), np.asarray(whole.loss))


def test_a_paced_run_reports_its_seconds_a_step_without_the_compile(problem):
    """``stats["step_seconds"]``: the loop's seconds a step measured after its first call (which
    compiles the program), for the advice of a stopped run (``measured.measure_longer``); absent
    where nothing paced the run or the budget ended in the first call (every stat is a number). On
    main the advice divided the whole time, compile included, by the steps run: 1 step in 1.23 s
    asked for 1,230 s where the whole run takes 1.6 s."""
    from biasfree.analysis.measured import measure_longer

    params, data = problem
    paced = bf.train(params, data, lr=0.05, steps=2000, observables="loss", time_budget=60.0)
    plain = bf.train(params, data, lr=0.05, steps=20, observables="loss")
    spent = bf.train(params, data, lr=0.05, steps=2000, observables="loss", time_budget=1e-9)
    rate = float(paced.stats["step_seconds"])
    assert 0 < rate < float("inf")
    assert "step_seconds" not in plain.stats and "step_seconds" not in spent.stats
    call = "analyse(model, data, train=True, time_budget={seconds})"
    assert measure_longer(1.23, 1000, rate, call) == (
        f"measure longer (about {rate * 1000:.3g} s at this rate): "
        f"analyse(model, data, train=True, time_budget={1.5 * rate * 1000:.2g})")
    assert measure_longer(1.23, 1000, float("nan"), call).endswith(
        "no step's rate was measured): analyse(model, data, train=True, time_budget=12)")
