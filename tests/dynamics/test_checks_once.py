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
from biasfree import _overflow as overflow
from biasfree import _validate as validate
from biasfree.analysis import verify
from biasfree.core import data as core_data
from biasfree.core import layers

VALIDATORS = {"check_net": layers.check_net, "slope": validate.slope, "finite_array": validate.finite_array,
              "data": validate.data, "check_data": core_data.check_data,
              "check_reading": verify.check_reading,
              "finite_forward": overflow.finite_forward}
_CODES = {f.__code__: name for name, f in VALIDATORS.items()}
CHECKED = {"check_net": "params", "data": "X", "check_data": "X", "finite_array": "x",
           "check_reading": "model"}
"""The argument whose identity each validator's call is keyed by: the net, the data set's inputs,
the model whose reading is checked by running it (issue 47)."""


class Checks(collections.Counter):
    """How often each validator ran (the counts), and how often on each object (``on``)."""

    def __init__(self):
        super().__init__()
        self.on: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
        self._alive: list = []  # the checked objects, kept so that no id is reused during the call

    def twice(self, name: str) -> list[int]:
        """The counts of the objects ``name`` checked more than once (empty: each once)."""
        return [n for n in self.on[name].values() if n > 1]


def count_checks(call) -> Checks:
    """How often each validator ran during ``call()``, in all and per checked object."""
    seen = Checks()

    def profile(frame, event, arg):
        if event == "call" and frame.f_code in _CODES:
            name = _CODES[frame.f_code]
            seen[name] += 1
            if name in CHECKED:
                obj = frame.f_locals[CHECKED[name]]
                seen._alive.append(obj)
                seen.on[name][id(obj)] += 1

    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(None)
    return seen


def assert_each_once(seen: Checks) -> None:
    """No net and no data set is validated twice in the call."""
    for name in ("check_net", "data", "check_data", "check_reading"):
        assert not seen.twice(name), (name, seen.twice(name), seen)


@pytest.fixture(scope="module")
def problem():
    key = jax.random.PRNGKey(0)
    data = bf.make_dataset(key, bf.sine_target(key, d=4)[0], n=40, d=4)
    return bf.init_gaussian(key, (4, 6, 1), scale=0.01), data


def test_counter_sees_the_validators(problem):
    """The counter itself: a direct call of each validator is seen once (a counter that never
    fires would make the tests below pass vacuously)."""
    params, data = problem
    X = data.X  # a mirrored Dataset builds X on each access
    seen = count_checks(lambda: (layers.check_net(params), validate.slope(0.5),
                                 validate.finite_array("x", np.ones(2)), core_data.check_data(X, data.Y)))
    assert seen["check_net"] == 1 and seen["slope"] == 1 and seen["check_data"] == 1
    assert seen["finite_array"] >= 1
    assert seen.on["check_net"] == {id(params): 1} and seen.on["check_data"] == {id(X): 1}
    twice = count_checks(lambda: (layers.check_net(params), layers.check_net(params)))
    assert twice.twice("check_net") == [2]


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
    assert seen["finite_forward"] == 1, seen  # one forward that must not overflow (issue 48)
    assert_each_once(seen)


def test_deprecated_gd_checks_its_net_once(problem):
    """The 0.1 wrapper ``gd`` checks its config and leaves the rest to ``train``: no second check."""
    params, data = problem
    cfg = bf.GDConfig(lr=0.05, steps=5, n_records=2)
    with pytest.warns(DeprecationWarning):
        seen = count_checks(lambda: bf.gd(params, data, cfg))
    assert seen["check_net"] == 1 and seen["slope"] == 0 and seen["data"] == 0, seen
    assert_each_once(seen)


def test_flow_checks_its_net_once(problem):
    params, data = problem
    seen = count_checks(lambda: bf.flow(params, data, bf.FlowConfig(t_max=0.5, n_records=2)))
    assert seen["check_net"] == 1, seen
    assert seen["slope"] <= 1, seen
    assert_each_once(seen)


@pytest.mark.parametrize("case", ["gd", "init", "depth 3", "adam"])
def test_analyse_checks_each_net_and_the_data_once(problem, case):
    """analyse checks the model (and the init) and the data where they enter, then runs on
    internals that do not check again: one check_net per net, one data check, one slope check
    per net (the train config, built before the call, is not checked again)."""
    params, data = problem
    X, Y = np.asarray(data.X), np.asarray(data.Y)
    gd = bf.GDConfig(lr=0.05, steps=20, n_records=5)
    deep = bf.init_gaussian(jax.random.PRNGKey(1), (4, 5, 5, 1), scale=0.1)
    init = bf.init_gaussian(jax.random.PRNGKey(2), (4, 6, 1), scale=0.01)
    adam = bf.TrainConfig(optimiser=optax.adam(1e-3), steps=20, n_records=5, degree=0.0)
    calls = {"gd": lambda: bf.analyse(params, (X, Y), alpha=0.0, train=gd),
             "init": lambda: bf.analyse(params, (X, Y), alpha=0.0, train=gd, init=init),
             "depth 3": lambda: bf.analyse(deep, (X, Y), alpha=0.3, train=gd),
             "adam": lambda: bf.analyse(params, (X, Y), alpha=0.0, train=adam)}
    seen = count_checks(calls[case])
    nets = 2 if case == "init" else 1
    assert seen["check_net"] == nets, seen
    assert seen["slope"] <= nets, seen
    assert seen["check_data"] == 1 and seen["data"] == 1, seen
    assert seen["finite_forward"] == 1, seen  # the model's forward on the data, once (issue 48)
    assert_each_once(seen)


@pytest.mark.parametrize("case", ["torch", "torch init", "equinox"])
def test_analyse_runs_each_live_model_once(problem, case):
    """A torch or equinox model (and a torch init) is checked once per analyse call: one reading
    check per model, in which the module's forward runs twice, on the rows as given and scaled to
    outputs of verify.LARGE (issue 47)."""
    torch = pytest.importorskip("torch")
    import equinox as eqx

    _, data = problem
    X, Y = np.asarray(data.X), np.asarray(data.Y)
    nn = torch.nn
    net, init = (nn.Sequential(nn.Linear(4, 6, bias=False), nn.ReLU(), nn.Linear(6, 1, bias=False))
                 for _ in range(2))
    runs = []
    for module in (net, init):
        module.register_forward_hook(lambda mod, args, out: runs.append(id(mod)))
    mlp = eqx.nn.MLP(4, 1, 6, 1, activation=jax.nn.relu, use_bias=False, use_final_bias=False,
                     key=jax.random.PRNGKey(0))
    gd = bf.GDConfig(lr=0.05, steps=20, n_records=5)
    calls = {"torch": lambda: bf.analyse(net, (X, Y)),
             "torch init": lambda: bf.analyse(net, (X, Y), train=gd, init=init),
             "equinox": lambda: bf.analyse(mlp, (X, Y))}
    seen = count_checks(calls[case])
    nets = 2 if case == "torch init" else 1
    assert seen["check_net"] == nets, seen
    run = [m for m in seen._alive if verify.live(m)]  # the live models check_reading was given
    assert len(run) == nets and len({id(m) for m in run}) == nets, run  # each once (equinox: float64 copy)
    assert seen["check_reading"] == 2, seen  # one call for the model, one for init= (None: returns at once)
    expected = {"torch": [id(net)] * 2, "torch init": [id(net)] * 2 + [id(init)] * 2, "equinox": []}[case]
    assert runs == expected, runs  # each torch module's forward run twice, in its one check
    assert_each_once(seen)


def test_a_claim_checks_each_net_and_data_set_once():
    """One claim at its tiny preset, run in-process (``biasfree run linearity-map --preset tiny``):
    it builds and trains several nets, each checked once; no net or data set is checked twice."""
    from biasfree.claims import REGISTRY, resolve_config, run_experiment

    exp = REGISTRY["linearity-map"]
    cfg = resolve_config(exp, "tiny", {})
    seen = count_checks(lambda: run_experiment(exp, cfg, 0))
    assert seen["check_net"] >= 1 and seen["data"] >= 1, seen  # it did check what it built
    assert_each_once(seen)


def test_the_overflow_check_is_one_compiled_program_per_shape():
    """finite_forward (issue 48) runs the net's forward on the data at every train and analyse
    call: as one jitted program per net and data shape (every α in one call, and again at the
    next call of those shapes, trace nothing new), not as eager operations lowered one by one
    (8 programs for this two-layer net on main, more per layer)."""
    from biasfree.core.nets import forward_unchecked

    key = jax.random.PRNGKey(5)
    params = bf.init_gaussian(key, (5, 7, 3), 0.5)  # shapes no other test uses
    members = jax.tree_util.tree_map(lambda a: np.stack([a, 2 * a]), params)
    X = np.random.default_rng(0).normal(size=(11, 5))
    lowered = []

    def listen(event, duration, **_):
        if event == "/jax/core/compile/jaxpr_to_mlir_module_duration":  # also on a persistent-cache hit
            lowered.append(event)

    jax.monitoring.register_event_duration_secs_listener(listen)
    try:
        overflow.finite_forward(params, X, np.array([0.0, 0.5, 1.0]), forward_unchecked)
        assert len(lowered) <= 1, len(lowered)
        overflow.finite_forward(jax.tree_util.tree_map(lambda a: -a, params), X + 1.0, 0.2, forward_unchecked)
        overflow.finite_forward(members, X, np.array([0.0, 0.3]), forward_unchecked, batched=True)
        assert len(lowered) <= 2, len(lowered)  # the members' program, once for both α
        with pytest.raises(ValueError, match="overflows"):  # still a check: the same program refuses
            big = jax.tree_util.tree_map(lambda a: 1e120 * a, params)
            overflow.finite_forward(big, X, 0.0, forward_unchecked)
        assert len(lowered) <= 2, len(lowered)
    finally:
        jax.monitoring.unregister_event_duration_listener(listen)
