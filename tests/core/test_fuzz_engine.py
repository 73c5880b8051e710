"""Property-based fuzz of the training engine's public API (issue 13 item 6): bad inputs get a clear error.

The pattern of ``tests/core/test_fuzz_api.py``: train (one run, an ensemble), flow, flow_ensemble, GDConfig,
FlowConfig, record_steps, record_times, loss_value, objective, objective_mirrored,
forward_mirrored, observe, conserved_quantities and the Trajectory methods are called from a
valid base call (checked to succeed), with one argument replaced by a bad value drawn by
hypothesis for that argument's kind (NaN, strings, bools, fractional step counts, nets that
do not fit the data, configs that are not configs...). The call must raise ``TypeError`` or
``ValueError`` whose message names the argument, raised by biasfree's own code before any
compilation, never a JAX/NumPy/diffrax error from inside.
"""

from __future__ import annotations

import jax
import numpy as np
import pytest
from fuzzing import assert_refused, assert_takes_lists, has_arrays, jax_arrays_in, name
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import biasfree as bf
from biasfree.core.layers import Layer
from biasfree.dynamics.trajectory import conserved_quantities, observe

D, P, N = 3, 2, 8
_rng = np.random.default_rng(0)
X0 = _rng.normal(size=(N // 2, D))
X = np.vstack([X0, -X0])
Y = X @ _rng.normal(size=(D, P))
NET = bf.init_gaussian(jax.random.PRNGKey(0), (D, 4, P), 0.5)
DATA = bf.Dataset(X, Y)
CFG = bf.GDConfig(lr=0.05, steps=3, n_records=2)
FCFG = bf.FlowConfig(t_max=0.05, n_records=2, rtol=1e-4, atol=1e-6)
TRAJ = bf.train(NET, DATA, CFG)
ENS = bf.train(NET, DATA, CFG, alpha=[0.0, 1.0])

NAN, INF = float("nan"), float("inf")
_junk = st.sampled_from([None, "0.5", b"1", {"a": 1}, True, 1 + 2j, [[1.0], [1.0, 2.0]]])
_nonfinite = st.sampled_from([NAN, INF, -INF, [1.0, NAN], np.array([INF, 1.0])])
_negative = st.floats(max_value=-1e-9, allow_nan=False, allow_infinity=False, min_value=-1e6)
BAD_NETS = [(), [np.ones((2, 2))], "net",
            (Layer(np.ones((4, D))), Layer(np.ones((P, 5)))),  # widths do not chain
            (Layer(np.full((4, D), np.nan)), Layer(np.ones((P, 4)))),
            (Layer(np.ones(4)), Layer(np.ones((P, 4)))),  # a vector, not a matrix
            (Layer(np.ones((4, D)), np.ones(3)), Layer(np.ones((P, 4))))]  # bias of the wrong length
BAD_NETS_D = BAD_NETS + [(Layer(np.ones((4, D + 1))), Layer(np.ones((P, 4))))]  # wrong input dim
BAD_NETS_X = BAD_NETS_D + [(Layer(np.ones((4, D))), Layer(np.ones((P + 1, 4))))]  # wrong output dim


def _bad(kind: str):
    """A hypothesis strategy of values that are wrong for an argument of ``kind``."""
    optional = kind.endswith("?")  # None means "the default" there
    kind = kind.rstrip("?")
    if kind == "bool":  # True is valid
        base = st.sampled_from([None, 1.5, 0, np.ones(2), {"a": 1}, b"1"])
    elif kind in ("loss", "spacing", "solver", "layout"):
        base = st.sampled_from([None, 3, 1.5, {"a": 1}, True, b"mse"])
    else:
        base = st.one_of(_junk, _nonfinite)
    if optional:
        base = base.filter(lambda x: x is not None)
    specific = {
        "unit": st.one_of(_negative, st.floats(min_value=1.0 + 1e-9, max_value=1e6), st.just("0.5"),
                          st.just(False)),
        "positive": st.one_of(_negative, st.just(0.0)),
        "nonneg": _negative,
        "real": st.nothing(),
        "int1": st.one_of(st.integers(max_value=0, min_value=-5), st.just(2.5), st.just("3")),
        "int2": st.one_of(st.integers(max_value=1, min_value=-5), st.just(2.5), st.just("3")),
        "index": st.sampled_from([2, -3, 1.5, "0"]),
        "loss": st.sampled_from(["hinge", "MSE", ""]),
        "spacing": st.sampled_from(["lin", "geom", ""]),
        "solver": st.sampled_from(["euler", "Tsit5", ""]),
        "layout": st.sampled_from(["pmap", "Map", ""]),
        "bool": st.sampled_from(["yes"]),
        "Xnet": st.sampled_from([np.ones(N), np.ones((0, D)), np.ones((N, D, 1)), np.ones((N, D + 1))]),
        "Yarr": st.sampled_from([np.ones((N - 1, P)), np.ones((0, P)), np.ones((N, P, 1)),
                                 np.ones((N, P + 1))]),
        "matrix": st.sampled_from([np.ones(3), np.ones((0, 2)), np.ones((2, 2, 2)), np.ones((5, 7))]),
        "net": st.sampled_from(BAD_NETS),
        "netD": st.sampled_from(BAD_NETS_D),
        "netX": st.sampled_from(BAD_NETS_X),
        "cfg": st.sampled_from([None, {"lr": 0.1}, "mse", 3]),
        "dataset": st.sampled_from([None, (X, Y), "data", 3]),
    }[kind]
    return st.one_of(base, specific)


def _fixed(kind: str) -> list:
    """Every listed bad value for ``kind`` (the hypothesis test draws only some of them)."""
    out = []
    for sub in _bad(kind).original_strategies:
        for leaf in getattr(sub, "original_strategies", [sub]):
            leaf = getattr(leaf, "filtered_strategy", leaf)
            for inner in getattr(leaf, "original_strategies", [leaf]):
                out += list(getattr(inner, "elements", []))
                if hasattr(inner, "value"):
                    out.append(inner.value)
    return out


_GD = {"alpha": "unit", "loss": "loss", "weight_decay": "nonneg", "n_records": "int2", "spacing": "spacing",
       "keep_params": "bool"}
_ENS = {"params": "netX", "data": "dataset", "cfg": "cfg", "alpha": "unit?", "weight_decay": "nonneg?",
        "batched_params": "bool", "layout": "layout?"}
# train's third argument is its config (None is valid there: gradient descent, given steps and lr)
_TRAIN_ENS = {"params": "netX", "data": "dataset", "optimiser": "cfg?", "alpha": "unit?",
              "weight_decay": "nonneg?", "batched": "bool", "layout": "layout?", "lr": "positive?"}

# (function, valid base keyword arguments, {argument: kind})
SPECS = [
    (bf.GDConfig, dict(), {**_GD, "lr": "positive", "steps": "int1"}),
    (bf.FlowConfig, dict(), {**_GD, "t_max": "positive", "rtol": "positive", "atol": "positive",
                             "solver": "solver", "max_steps": "int1"}),
    (bf.train, dict(params=NET, data=DATA, optimiser=CFG),
     {"params": "netX", "data": "dataset", "optimiser": "cfg?"}),
    (bf.flow, dict(params=NET, data=DATA, cfg=FCFG), {"params": "netX", "data": "dataset", "cfg": "cfg"}),
    (bf.train, dict(params=NET, data=DATA, optimiser=CFG, alpha=[0.0, 0.5]), _TRAIN_ENS),
    (bf.flow_ensemble, dict(params=NET, data=DATA, cfg=FCFG, alpha=[0.0, 0.5], batched_params=False), _ENS),
    (bf.dynamics.record_steps, dict(steps=10, n_records=3), {"steps": "int1", "n_records": "int2",
                                                    "spacing": "spacing"}),
    (bf.dynamics.record_times, dict(t_max=1.0, n_records=3), {"t_max": "positive", "n_records": "int2",
                                                     "spacing": "spacing"}),
    (bf.dynamics.losses.loss_value, dict(F=Y, Y=Y), {"F": "Yarr", "Y": "Yarr", "loss": "loss"}),
    (bf.dynamics.losses.objective, dict(params=NET, X=X, Y=Y, alpha=0.3),
     {"params": "netX", "X": "Xnet", "Y": "Yarr", "alpha": "unit", "weight_decay": "nonneg", "loss": "loss"}),
    (bf.dynamics.losses.objective_mirrored, dict(params=NET, X_half=X0, Y=Y, alpha=0.3),
     {"params": "netX", "X_half": "Xnet", "Y": "Yarr", "alpha": "unit", "weight_decay": "nonneg",
      "loss": "loss"}),
    (bf.dynamics.losses.forward_mirrored, dict(params=NET, X_half=X0, alpha=0.3),
     {"params": "netD", "X_half": "Xnet",
                                                                    "alpha": "unit"}),
    (observe, dict(params=NET, X=X, Y=Y, alpha=0.3, loss="mse"),
     {"params": "netX", "X": "Xnet", "Y": "Yarr", "alpha": "unit", "loss": "loss", "mirrored": "bool",
      "pinv_X": "matrix?"}),
    (conserved_quantities, dict(params=NET), {"params": "net"}),
    (TRAJ.half_time, dict(target_loss=None), {"target_loss": "real?"}),
    (ENS.member, dict(i=1), {"i": "index"}),
]
CASES = [(fn, base, arg, kind) for fn, base, kinds in SPECS for arg, kind in kinds.items()]



@pytest.mark.parametrize("fn, base", [(fn, base) for fn, base, _ in SPECS], ids=[name(s[0]) for s in SPECS])
def test_base_calls_are_valid(fn, base):
    """The fuzz starts from calls that work (else a refusal proves nothing)."""
    out = fn(**base)
    assert not jax_arrays_in(out), f"JAX arrays returned (NumPy expected): {jax_arrays_in(out)}"
    leaves = [x for x in jax.tree_util.tree_leaves(out) if isinstance(x, np.ndarray | jax.Array | float)]
    assert all(np.all(np.isfinite(np.asarray(x, dtype=float))) for x in leaves)



def _check_refused(fn, base, arg, kind, bad):
    assert_refused(fn, base, arg, bad, data_arg=kind.rstrip("?") in ("Xnet", "Yarr"))


LISTABLE = [(fn, base) for fn, base, _ in SPECS if has_arrays(base)]


@pytest.mark.parametrize("fn, base", LISTABLE, ids=[name(fn) for fn, _ in LISTABLE])
def test_array_arguments_may_be_lists_or_tuples(fn, base):
    """Issue 19: every entry point takes array-likes; lists and tuples give the same result."""
    assert_takes_lists(fn, base)


@pytest.mark.parametrize("fn, base, arg, kind", CASES, ids=[f"{name(c[0])}-{c[2]}" for c in CASES])
def test_every_listed_bad_value_is_refused(fn, base, arg, kind):
    values = _fixed(kind)
    assert values, kind
    for bad in values:
        if bad is None and kind.endswith("?"):
            continue
        _check_refused(fn, base, arg, kind, bad)


@pytest.mark.parametrize("fn, base, arg, kind", CASES, ids=[f"{name(c[0])}-{c[2]}" for c in CASES])
@settings(max_examples=4, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(data=st.data())
def test_bad_argument_gets_a_clear_error(fn, base, arg, kind, data):
    _check_refused(fn, base, arg, kind, data.draw(_bad(kind), label=arg))


def test_ensembles_refuse_members_of_unequal_number():
    net2 = jax.vmap(lambda k: bf.init_gaussian(k, (D, 4, P), 0.5))(jax.random.split(jax.random.PRNGKey(1), 2))
    with pytest.raises(ValueError, match=r"ensemble sizes disagree: \{'alpha': 3, 'params': 2\}"):
        bf.train(net2, DATA, CFG, alpha=[0.0, 0.5, 1.0], batched=True)
    with pytest.raises(ValueError, match="params: with batched=True every weight needs one leading"):
        bf.train(NET, DATA, CFG, alpha=[0.0, 0.5], batched=True)
    with pytest.raises(ValueError, match="alpha must be a scalar or a 1-D array"):
        bf.flow_ensemble(NET, DATA, FCFG, alpha=np.zeros((2, 2)), batched_params=False)
