"""Property-based fuzz of the public non-engine API (issue 13 item 6): bad inputs get a clear error.

The pattern of ``tests/core/test_fuzz_theory.py``: each public function of nets, data, datasets,
expressivity, floors, depth_separation, interop, analyse, ensemble, margin, theory.decay and
theory.orthogonal is called from a valid base call (checked to succeed), with one argument
replaced by a bad value drawn by hypothesis for that argument's kind (NaN, strings, bools,
fractional widths, empty or mismatched arrays, nets that do not chain, keys that are not
keys...). The call must raise ``TypeError`` or ``ValueError`` whose message names the
argument, raised by biasfree's own code, never a NumPy/SciPy/JAX error from inside.
After the fuzz, the guards on the promises: multiset symmetry, "undetermined" floors from
too few samples, targets whose moments diverge, logistic labels.
"""

from __future__ import annotations

import jax
import numpy as np
import pytest
from fuzzing import assert_refused, assert_takes_lists, has_arrays, jax_arrays_in, name
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import biasfree as bf
from biasfree import expressivity as ex
from biasfree import margin as mg
from biasfree.core.layers import Layer
from biasfree.dynamics.ensemble import Member
from biasfree.theory import decay as dc
from biasfree.theory import orthogonal as og

D, P, N = 3, 2, 16
KEY = jax.random.PRNGKey(0)
_rng = np.random.default_rng(0)
X0 = _rng.normal(size=(N // 2, D))
X = np.vstack([X0, -X0])
Y = X @ _rng.normal(size=(D, P))
NET = bf.init_gaussian(KEY, (D, 4, P), 0.5)
NET1 = bf.init_gaussian(KEY, (D, 4, 1), 0.5)
DATA = bf.Dataset(X, Y)
CFG = bf.GDConfig(lr=0.05, steps=2, n_records=2)
XL = np.vstack([X0, -X0])
YL = np.sign(XL @ np.array([1.0, -0.5, 0.2]))
XB = _rng.normal(size=(40, D))  # independent draws for the floors
Q, _ = np.linalg.qr(_rng.normal(size=(4, 3)))
O, E = np.array([1.0, -2.0, 1.5]), np.array([0.2, 0.3, -0.1])


def lin(Z):
    return Z @ np.array([[1.0], [-2.0], [0.5]])


NAN, INF = float("nan"), float("inf")
_junk = st.sampled_from([None, "0.5", b"1", {"a": 1}, True, 1 + 2j, [[1.0], [1.0, 2.0]]])
_nonfinite = st.sampled_from([NAN, INF, -INF, [1.0, NAN], np.array([INF, 1.0])])
_negative = st.floats(max_value=-1e-9, allow_nan=False, allow_infinity=False, min_value=-1e6)
BAD_NETS = [(), [np.ones((2, 2))], "net",
            (Layer(np.ones((4, D))), Layer(np.ones((P, 5)))),  # widths do not chain
            (Layer(np.full((4, D), np.nan)), Layer(np.ones((P, 4)))),
            (Layer(np.ones(4)), Layer(np.ones((P, 4)))),  # a vector, not a matrix
            (Layer(np.ones((4, D)), np.ones(3)), Layer(np.ones((P, 4))))]  # bias of the wrong length
BAD_NETS_X = BAD_NETS + [(Layer(np.ones((4, D + 1))), Layer(np.ones((P, 4))))]  # wrong input dim


def _bad(kind: str):
    """A hypothesis strategy of values that are wrong for an argument of ``kind``."""
    optional = kind.endswith("?")  # None means "the default" there
    kind = kind.rstrip("?")
    if kind in ("bool", "path"):  # True is valid / strings are paths
        base = st.sampled_from([None, 1.5, 0, np.ones(2), {"a": 1}, b"1"] if kind == "bool"
                               else [None, 3, 1.5, ["a"], {"a": 1}, True])
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
        "int0": st.one_of(st.integers(max_value=-1, min_value=-5), st.just(2.5), st.just("3")),
        "widths": st.sampled_from([(D, 4.5, P), (D, 0, P), (D, P), "3,4,2", (D, True, P), (D, -4, P)]),
        "key": st.sampled_from([0, "key", np.ones(3), np.ones(2), None]),
        "X": st.sampled_from([np.ones(N), np.ones((N - 1, D)), np.ones((0, D)), np.ones((N, D, 1))]),
        "Xnet": st.sampled_from([np.ones(N), np.ones((0, D)), np.ones((N, D, 1)), np.ones((N, D + 1))]),
        "Xalone": st.sampled_from([np.ones(N), np.ones((0, D)), np.ones((N, D, 1))]),
        "Y": st.sampled_from([np.ones((N - 1, P)), np.ones((0, P))]),
        "net": st.sampled_from(BAD_NETS),
        "netX": st.sampled_from(BAD_NETS_X),
        "callable": st.sampled_from([None, 3, "x1", np.ones(3)]),
        "bool": st.sampled_from(["yes"]),
        "matrix": st.sampled_from([np.ones(3), np.ones((0, 2)), np.ones((2, 2, 2)), np.ones((5, 7))]),
        "anymatrix": st.sampled_from([np.ones(3), np.ones((0, 2)), np.ones((2, 2, 2))]),
        "rows": st.sampled_from([np.ones((0, D)), np.zeros((2, D)), np.ones((2, 2, 2, 2))]),
        "vector": st.sampled_from([np.ones((0,)), np.ones((2, 2, 2)), np.ones(D + 2)]),
        "cov": st.sampled_from([np.ones((2, 2)), -np.eye(D), np.array([[1.0, 2, 0], [0, 1, 0], [0, 0, 1]])]),
        "labels": st.sampled_from([np.array([1.0, 0.5] * (N // 2)), np.zeros(N), np.ones(N - 1)]),
        "classes": st.sampled_from([np.array([0, 1.5]), np.array([-1, 0]), np.ones((0,)), np.ones((2, 2))]),
        "path": st.just(b"x.npz"),
        "cfg": st.sampled_from([None, {"lr": 0.1}, "mse", 3]),
        "dataset": st.sampled_from([None, (X, Y), "data", 3]),
        "indices": st.sampled_from([(), (0, 1.5), (-1, 0), "012", 3]),
        "members": st.sampled_from([{}, {"a": NET}, [Member(NET)], None]),
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


# (function, valid base keyword arguments, {argument: kind})
SPECS = [
    # nets
    (bf.init_gaussian, dict(key=KEY, widths=(D, 4, P), scale=0.5),
     {"key": "key", "widths": "widths", "scale": "nonneg"}),
    (bf.init_pairs, dict(key=KEY, widths=(D, 4, P), scale=0.5), {"key": "key", "widths": "widths",
                                                                  "scale": "nonneg"}),
    (bf.init_rank_one, dict(key=KEY, d=D, width=4, scale=0.1),
     {"key": "key", "d": "int1", "width": "int1", "scale": "positive"}),
    (bf.forward, dict(params=NET, X=X, alpha=0.3), {"params": "netX", "X": "Xnet", "alpha": "unit"}),
    (bf.nets.odd_part, dict(params=NET, X=X, alpha=0.3), {"params": "netX", "X": "Xnet", "alpha": "unit"}),
    (bf.nets.even_part, dict(params=NET, X=X, alpha=0.3), {"params": "netX", "X": "Xnet", "alpha": "unit"}),
    (bf.nets.hidden, dict(params=NET, X=X, alpha=0.3), {"params": "netX", "X": "Xnet", "alpha": "unit"}),
    (bf.beta_eff, dict(params=NET, alpha=0.3, X=X), {"params": "netX", "alpha": "unit"}),
    (bf.nets.end_to_end_linear, dict(params=NET), {"params": "net"}),
    (bf.pair_up, dict(params=NET), {"params": "net"}),
    (bf.nets.scale_params, dict(params=NET, factor=2.0), {"params": "net", "factor": "real"}),
    (bf.from_arrays, dict(weights=[np.ones((4, D)), np.ones((P, 4))], biases=None),
     {"weights": "matrix", "biases": "matrix?"}),
    (bf.nets.slope_factor, dict(alpha=0.3), {"alpha": "unit"}),
    (bf.nets.leaky_relu, dict(z=np.ones(3), alpha=0.3), {"alpha": "unit"}),
    # data
    (bf.data.gaussian_inputs, dict(key=KEY, n=5, d=D, cov=None),
     {"key": "key", "n": "int1", "d": "int1", "cov": "cov?"}),
    (bf.symmetrize, dict(X=X0, Y=Y[:N // 2]), {"X": "Xalone", "Y": "Y?"}),
    (bf.data.asymmetric_half, dict(X=X, Y=Y), {"X": "X", "Y": "Y"}),
    (bf.data.is_symmetric, dict(X=X, Y=Y, tol=1e-9), {"X": "X", "Y": "Y?", "tol": "nonneg"}),
    (bf.data.whiten, dict(X=X, tol=1e-12), {"X": "Xalone", "tol": "nonneg"}),
    (bf.data.input_covariance, dict(X=X), {"X": "Xalone"}),
    (bf.data.cross_covariance, dict(X=X, Y=Y), {"X": "X", "Y": "Y"}),
    (bf.data.check_data, dict(X=X, Y=Y), {"X": "X", "Y": "Y"}),
    (bf.Dataset, dict(X=X, Y=Y), {"X": "X", "Y": "Y"}),
    (bf.linear_target, dict(T=np.ones((P, D))), {"T": "anymatrix"}),
    (bf.data.teacher_matrix, dict(key=KEY, d=D, singular_values=[2.0, 1.0]),
     {"key": "key", "d": "int1", "singular_values": "nonneg"}),
    (bf.sine_target, dict(key=KEY, d=D, freq=4.0), {"key": "key", "d": "int1", "freq": "real"}),
    (bf.data.product_target, dict(indices=(0, 1, 2)), {"indices": "indices"}),
    (bf.data.abs_target, dict(index=0), {"index": "int0"}),
    (bf.data.xor_target, dict(i=0, j=1), {"i": "int0", "j": "int0"}),
    (bf.data.label_data, dict(key=KEY, X=X, margin=0.1), {"key": "key", "X": "Xalone", "margin": "nonneg"}),
    (bf.make_dataset, dict(key=KEY, target=bf.linear_target(np.ones((1, D))), n=6, d=D, n_test=2, noise=0.1),
     {"key": "key", "target": "callable", "n": "int1", "d": "int1", "n_test": "int0", "noise": "nonneg",
      "cov": "cov?", "symmetric": "bool", "whitened": "bool"}),
    # datasets
    (bf.data.asymmetry, dict(X=X, Y=Y), {"X": "X", "Y": "Y?"}),
    (bf.data.one_hot, dict(labels=np.array([0, 2, 1]), n_classes=3),
     {"labels": "classes", "n_classes": "int1?"}),
    (bf.load_data, dict(path_or_name="iris", n=20, seed=0),
     {"path_or_name": "path", "n": "int1?", "seed": "int0", "symmetrize_data": "bool?"}),
    # expressivity
    (ex.net_function, dict(params=NET, alpha=0.3), {"params": "net", "alpha": "unit"}),
    (ex.decompose, dict(f=lin, X=X), {"f": "callable", "X": "Xalone", "per_point": "bool"}),
    (ex.odd_nonlinearity, dict(f=lin, X=X), {"f": "callable", "X": "Xalone"}),
    (ex.homogeneity_gap, dict(f=lin, X=X), {"f": "callable", "X": "Xalone", "scales": "positive",
                                             "degree": "real"}),
    (ex.is_positively_homogeneous, dict(f=lin, X=X), {"f": "callable", "X": "Xalone", "tol": "nonneg"}),
    # floors
    (ex.odd_floor, dict(target=lin, X=XB), {"target": "callable", "X": "Xalone", "per_point": "bool"}),
    (ex.homogeneous_floor, dict(target=lin, X=XB), {"target": "callable", "X": "Xalone", "cov": "cov?",
                                                     "even_only": "bool"}),
    (ex.two_layer_floor, dict(target=lin, X=XB, alpha=0.0),
     {"target": "callable", "X": "Xalone", "alpha": "unit", "cov": "cov?"}),
    (ex.characterise, dict(target=lin, X=XB), {"target": "callable", "X": "Xalone", "alpha": "unit",
                                                "tol": "nonneg", "z": "nonneg"}),
    (ex.dataset_floor, dict(X=X, Y=Y, alpha=0.0), {"X": "X", "Y": "Y", "alpha": "unit", "tol": "nonneg"}),
    (ex.ray_moments, dict(g=lin, U=XB / np.linalg.norm(XB, axis=1, keepdims=True)),
     {"g": "callable", "U": "Xalone", "epsrel": "positive"}),
    # depth separation
    (ex.fit_net, dict(data=DATA, key=KEY, widths=(D, 4, P), cfg=CFG),
     {"data": "dataset", "key": "key", "widths": "widths", "cfg": "cfg", "restarts": "int1",
      "gain": "positive"}),
    # interop
    (bf.models.from_state_dict,
     dict(mapping={"0.weight": np.ones((4, D)), "2.weight": np.ones((1, 4))}, alpha=0.0),
     {"alpha": "unit?"}),
    (bf.Model, dict(params=NET, alpha=0.0), {"params": "net", "alpha": "unit?"}),
    (bf.load_model, dict(path="/nonexistent/x.npz"), {"path": "path"}),
    # analyse
    (bf.analyse, dict(model=NET, data=(X, Y), alpha=0.0, t_max=1.0, n_times=3),
     {"alpha": "unit?", "t_max": "positive?", "n_times": "int1"}),
    # ensemble
    (Member, dict(params=NET, alpha=0.0, lr=0.1), {"params": "net", "alpha": "unit?", "lr": "positive?",
                                                    "weight_decay": "nonneg"}),
    # named members: train(members, data, cfg) (None is a valid optimiser: gradient descent)
    (bf.train, dict(params={"a": Member(NET)}, data=DATA, optimiser=CFG),
     {"params": "members", "data": "dataset", "optimiser": "cfg?"}),
    # margin
    (mg.hard_margin_svm, dict(X=XL, y=YL), {"X": "X", "y": "labels"}),
    (mg.kkt_residual, dict(X=XL, y=YL, w=np.ones(D)), {"X": "X", "y": "labels", "w": "vector"}),
    (mg.cosine, dict(B=np.ones((2, D)), w=np.ones(D)), {"B": "rows", "w": "vector"}),
    (mg.margin_ratio, dict(B=np.ones((2, D)), X=XL, y=YL, w_svm=np.ones(D)),
     {"B": "rows", "X": "X", "y": "labels", "w_svm": "vector"}),
    # theory.decay, theory.orthogonal
    (dc.decayed_solution, dict(Sxx=np.eye(D), sxy=np.ones(D), decay=0.1),
     {"Sxx": "matrix", "sxy": "vector", "decay": "nonneg"}),
    (og.half_targets, dict(o=O, e=E), {"o": "vector", "e": "vector"}),
    (og.half_net_modes, dict(o=O, e=E), {"o": "vector", "e": "vector"}),
    (og.aligned_halves_init, dict(Q=Q, o=O, e=E, magnitudes=np.ones((2, 2))),
     {"Q": "matrix", "o": "vector", "magnitudes": "positive"}),
    (og.alignment_directions, dict(W0=np.ones((2, 4)), v_sign=np.array([1.0, -1.0]), Q=Q, y=O, y_neg=E),
     {"W0": "matrix", "v_sign": "vector", "Q": "matrix", "y": "vector", "y_neg": "vector"}),
]
CASES = [(fn, base, arg, kind) for fn, base, kinds in SPECS for arg, kind in kinds.items()]



def _valid_base(fn, base):
    if fn is bf.load_model:  # a real file for the base call
        return None
    return fn(**base)


@pytest.mark.parametrize("fn, base", [(fn, base) for fn, base, _ in SPECS], ids=[name(s[0]) for s in SPECS])
def test_base_calls_are_valid(fn, base):
    """The fuzz starts from calls that work (else a refusal proves nothing)."""
    out = _valid_base(fn, base)
    assert not jax_arrays_in(out), f"JAX arrays returned (NumPy expected): {jax_arrays_in(out)}"
    leaves = [x for x in jax.tree_util.tree_leaves(out) if isinstance(x, np.ndarray | jax.Array | float)]
    assert all(np.all(np.isfinite(np.asarray(x, dtype=float))) for x in leaves)



def _check_refused(fn, base, arg, kind, bad):
    assert_refused(fn, base, arg, bad, data_arg=kind.rstrip("?") in ("X", "Y", "Xalone"))


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


# ------------------------------------------------------------ guards on the promises


def test_is_symmetric_and_dataset_floor_see_a_duplicate_without_its_mirror():
    """Issue 13: one point duplicated without its mirror passed as symmetric, and trained
    nets went below dataset_floor's 'exact' bound."""
    Xs = np.asarray(bf.symmetrize(_rng.normal(size=(30, D))))
    Ys = np.sin(Xs[:, :1]) + np.abs(Xs[:, 1:2])
    Ys_odd = np.sin(Xs[:, :1])
    assert bf.data.is_symmetric(Xs, Ys_odd) and ex.dataset_floor(Xs, Ys).exact
    Xd, Yd = np.vstack([Xs, Xs[:1]]), np.vstack([Ys, Ys[:1]])
    assert not bf.data.is_symmetric(Xd, np.vstack([Ys_odd, Ys_odd[:1]]))
    assert not bf.data.is_symmetric(Xd)
    fl = ex.dataset_floor(Xd, Yd)
    assert not fl.exact and fl.violation > 0.1 and "APPROXIMATE" in fl.note
    Xm, Ym = np.vstack([Xd, -Xs[:1]]), np.vstack([Yd, bf.symmetrize(Xs[:1], Ys[:1])[1][1:]])
    assert ex.dataset_floor(Xm, Ym).exact  # the mirror added as often: exact again


def test_characterise_says_undetermined_from_too_few_samples():
    """x1x2x3 has relative floor 1 (unreachable); 5 samples gave 0.26 ± 0.2 and 'reachable'."""
    x1x2x3 = bf.data.product_target((0, 1, 2))
    few = ex.characterise(x1x2x3, np.random.default_rng(1).normal(size=(5, D)))
    assert few.reachable is None and few.verdict == "undetermined"
    assert few.summary().startswith("undetermined: too few samples (n=5")
    many = ex.characterise(x1x2x3, np.random.default_rng(1).normal(size=(400, D)))
    assert many.reachable is False and many.verdict == "unreachable"
    assert ex.characterise(lin, XB).verdict == "reachable"


def test_floors_refuse_a_target_whose_moments_diverge():
    """exp(x1²) has E y² = ∞ under N(0, I); it was 'reachable' with a relative floor 6e81."""
    with pytest.raises(ValueError, match="^target: its moments along rays x = r u do not converge"):
        ex.characterise(lambda Z: np.exp(Z[:, :1] ** 2), XB)


def test_targets_refuse_inputs_narrower_than_their_coordinates():
    with pytest.raises(ValueError, match="indices"):
        bf.data.product_target((0, 1, 5))(X)  # JAX would clamp index 5 to 2: x1 x2 x3 instead
    with pytest.raises(ValueError, match="target must map"):
        bf.make_dataset(KEY, lambda Z: Z[:, 0], 4, D)


def test_widths_are_never_rounded():
    with pytest.raises(TypeError, match=r"widths\[1\]=4.5 must be a whole number"):
        bf.init_gaussian(KEY, (D, 4.5, 1))
    assert bf.nets.widths(bf.init_gaussian(KEY, (D, 4.0, 1))) == (D, 4, 1)


def test_analyse_refuses_logistic_loss_on_real_labels_and_flags_duplicates():
    with pytest.raises(ValueError, match="^data: the logistic loss"):
        bf.analyse(NET1, (X, Y[:, :1]), alpha=0.0, train=bf.GDConfig(loss="logistic", steps=2))
    pair = bf.init_pairs(KEY, (D, 4, 1), 0.3)
    Yo = X @ np.ones((D, 1))
    exact = bf.analyse(pair, (X, Yo), alpha=0.0, t_max=1.0, n_times=3)
    assert exact.data.symmetric and exact.prediction.exact and exact.prediction.two_layer_floor is not None
    dup = bf.analyse(pair, (np.vstack([X, X[:1]]), np.vstack([Yo, Yo[:1]])), alpha=0.0, t_max=1.0, n_times=3)
    assert not dup.data.symmetric and dup.data.mirror_violation > 0
    assert not dup.prediction.exact and dup.prediction.two_layer_floor is None
    # one duplicated point breaks the mirror: no exact twin, and no theory either way, so it is measured
    assert dup.verdict.level != "exactly linear" and dup.verdict.training.kind.endswith("measured by default")
