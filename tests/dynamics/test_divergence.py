"""The one divergence error (issue 39): raised by the trainer alone, naming the step where the
loss left every bound and a step size that is a number; a twin that blows up counts, and so
does the last step, which only the last record sees."""

from __future__ import annotations

import jax
import optax
import pytest

import biasfree as bf
from biasfree.dynamics import DivergenceError


@pytest.fixture(scope="module")
def problem():
    key = jax.random.PRNGKey(0)
    data = bf.make_dataset(key, bf.sine_target(key, d=4)[0], n=3, d=4)
    return bf.init_gaussian(key, (4, 6, 1), scale=1.0), data


def test_gd_names_the_step_and_a_numeric_lr(problem):
    params, data = problem
    with pytest.raises(DivergenceError, match=r"diverged at step \d+: .* with lr=50 .* try lr=12\.5"):
        bf.train(params, data, bf.GDConfig(lr=50.0, steps=200, n_records=2))


def test_the_last_step_is_checked(problem):
    """K = 1: the loop sees L(θ_0) only; θ_1's loss is in the last record, and it blew up."""
    params, data = problem
    with pytest.raises(DivergenceError, match=r"diverged at step 1:"):
        bf.train(params, data, bf.GDConfig(lr=50.0, steps=1, n_records=2))


def test_a_twin_that_blows_up_is_refused(problem):
    """The net at a stable step, its given twin 30 times larger: the twin's curvature makes the
    same step diverge, so the gap would be measured against garbage; refused, naming the twin."""
    params, data = problem
    small = bf.nets.scale_params(params, 0.1)
    cfg = bf.GDConfig(lr=0.05, steps=300, n_records=2)
    assert bf.train(small, data, cfg, twin=True).twin_gap >= 0  # the run itself is stable
    with pytest.raises(DivergenceError, match=r"its loss \(or its twin's\) left every bound"):
        bf.train(small, data, cfg, twin=bf.nets.scale_params(params, 30.0))


def test_an_optax_run_without_a_known_lr_names_a_smaller_optimiser(problem):
    """A schedule has no one learning rate to quote: the advice is a quarter of it."""
    params, data = problem
    with pytest.raises(DivergenceError, match=r"training by .* diverged at step \d+: .*quarter of its "
                                              r"learning rate"):
        bf.train(params, data, optax.sgd(optax.constant_schedule(50.0), momentum=0.9), steps=200, n_records=2)


@pytest.mark.parametrize(("opt", "advice"), [
    (optax.sgd(50.0), r"sgd was built with learning rate 50, .* rate 12\.5 \(e\.g\. optax\.sgd\(12\.5"),
    (optax.sgd(50.0, momentum=0.9), r"sgd with momentum was built with learning rate 50, .*sgd\(12\.5"),
    (lambda rho: optax.adam(1e3, eps=1e-8 * rho), r"adam was built with learning rate 1000, .*adam\(250"),
    (optax.inject_hyperparams(optax.sgd)(learning_rate=50.0), r"built with learning rate 50, .* 12\.5"),
])
def test_an_optax_divergence_names_its_optimiser_and_a_numeric_lr(problem, opt, advice):
    """Issue 48: the advice once quoted optax.adam(2.5e-4) whatever the optimiser, with no number
    read from it; now the rate it was built with (optax's scale(−η), or an inject_hyperparams
    state) and a quarter of it, in the optimiser's own call."""
    params, data = problem
    with pytest.raises(DivergenceError, match=advice) as e:
        bf.train(params, data, opt, steps=200, n_records=2)
    assert "\n" not in str(e.value) and ("adam" in advice or "optax.adam" not in str(e.value))
