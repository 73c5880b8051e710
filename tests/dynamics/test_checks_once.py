"""Checks run once per public call (issue 39): a public function validates its inputs, then
calls internals that do not validate again. Counted by profiling every call of the validators
(by code object, so a validator reached through any import alias is counted)."""

from __future__ import annotations

import collections
import sys

import jax
import numpy as np
import optax
import pytest

import biasfree as bf
from biasfree import _validate as validate
from biasfree.core import data as core_data
from biasfree.core import layers

VALIDATORS = {"check_net": layers.check_net, "slope": validate.slope, "finite_array": validate.finite_array,
              "data": validate.data, "check_data": core_data.check_data}
_CODES = {f.__code__: name for name, f in VALIDATORS.items()}


def count_checks(call) -> collections.Counter:
    """How often each validator ran during ``call()``."""
    seen: collections.Counter = collections.Counter()

    def profile(frame, event, arg):
        if event == "call" and frame.f_code in _CODES:
            seen[_CODES[frame.f_code]] += 1

    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(None)
    return seen


@pytest.fixture(scope="module")
def problem():
    key = jax.random.PRNGKey(0)
    data = bf.make_dataset(key, bf.sine_target(key, d=4)[0], n=40, d=4)
    return bf.init_gaussian(key, (4, 6, 1), scale=0.01), data


def test_counter_sees_the_validators(problem):
    """The counter itself: a direct call of each validator is seen once (a counter that never
    fires would make the tests below pass vacuously)."""
    params, data = problem
    seen = count_checks(lambda: (layers.check_net(params), validate.slope(0.5),
                                 validate.finite_array("x", np.ones(2)),
                                 core_data.check_data(data.X, data.Y)))
    assert seen["check_net"] == 1 and seen["slope"] == 1 and seen["check_data"] == 1
    assert seen["finite_array"] >= 1


@pytest.mark.parametrize("kind", ["gd", "gd twin", "adam twin", "ensemble", "members"])
def test_train_checks_its_net_and_data_once(problem, kind):
    params, data = problem
    cfg = bf.GDConfig(lr=0.05, steps=5, n_records=2)  # the user's configs and members, built before the call
    adam = bf.TrainConfig(optimiser=optax.adam(1e-3), steps=5, n_records=2, degree=0.0)
    members = {"a": bf.Member(params, 0.0)}
    calls = {
        "gd": lambda: bf.train(params, data, cfg),
        "gd twin": lambda: bf.train(params, data, cfg, twin=True),
        "adam twin": lambda: bf.train(params, data, adam, twin=True),
        "ensemble": lambda: bf.train(params, data, cfg, alpha=np.array([0.0, 0.5])),
        "members": lambda: bf.train(members, data, cfg),
    }
    seen = count_checks(calls[kind])
    # one net (its weights and the data's inputs against it): one check_net; α was checked when
    # the config (or Member) was built, before the call, so no slope check inside
    assert seen["check_net"] == 1, seen
    assert seen["slope"] == (1 if kind == "ensemble" else 0), seen  # the per-member α array, once
    assert seen["check_data"] == 0 and seen["data"] == 0, seen


def test_flow_checks_its_net_once(problem):
    params, data = problem
    seen = count_checks(lambda: bf.flow(params, data, bf.FlowConfig(t_max=0.5, n_records=2)))
    assert seen["check_net"] == 1, seen
    assert seen["slope"] <= 1, seen
