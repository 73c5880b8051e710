"""Property-based fuzz of ``biasfree.theory`` (issue 13 item 6): bad inputs get a clear error.

Every public theory function is called from a valid base call (checked to succeed), with
one argument replaced by a bad value drawn by hypothesis for that argument's kind
(negative or NaN times, a0 <= 0, y_power below what the modes explain, slopes outside
[0, 1], strings, bools, ragged or empty arrays, mismatched shapes, nets with biases or
NaN weights...). The call must raise ``TypeError`` or ``ValueError`` whose message names
the argument, raised by biasfree's own code (the innermost frame of the traceback is in
the package), never a NumPy/SciPy/JAX error surfacing from inside.
"""

from __future__ import annotations

import math

import jax
import numpy as np
import pytest
from fuzzing import assert_refused, assert_takes_lists, has_arrays, jax_arrays_in, name
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import biasfree as bf
from biasfree import theory as th
from biasfree.core.layers import Layer
from biasfree.core.symmetry import mirror_violation

D, P, N = 3, 2, 16
_rng = np.random.default_rng(0)
X0 = _rng.normal(size=(N // 2, D))
X = np.vstack([X0, -X0])
Y = X @ _rng.normal(size=(D, P))
_ev, _evec = np.linalg.eigh(X.T @ X / N)
XW = X @ _evec @ np.diag(_ev**-0.5) @ _evec.T  # whitened to round-off
MODES = th.data_modes(XW, Y)
S_YX = Y.T @ XW / N
PAIR = bf.init_pairs(jax.random.PRNGKey(0), (D, 4, P), 0.3)
BAL = th.balanced_init(np.outer(np.ones(P), np.ones(D)) * 0.01, 2)
Y_POWER = float(np.mean(np.sum(Y**2, 1)))
Q0 = np.concatenate([np.asarray(BAL[0].W).T, np.asarray(BAL[1].W)], axis=0)
NET1 = bf.from_arrays([_rng.normal(size=(4, D)), _rng.normal(size=(1, 4))])

# ------------------------------------------------------------ bad values by kind

NONE_OK = {"cov", "width", "tol"}

BAD_NETS = [(), [np.ones((2, 2))],
            (Layer(np.ones((4, D))), Layer(np.ones((P, 5)))),  # widths do not chain
            (Layer(np.full((4, D), np.nan)), Layer(np.ones((P, 4)))),
            (Layer(np.ones((4, D)), np.ones(4)), Layer(np.ones((P, 4)), np.ones(P))),  # biases
            (Layer(np.ones((4, D + 1))), Layer(np.ones((P, 4)))),  # wrong input dimension
            (Layer(np.ones(4)), Layer(np.ones((P, 4))))]  # a vector, not a matrix

NAN, INF = float("nan"), float("inf")
_junk = st.sampled_from([None, "0.5", b"1", {"a": 1}, True, False, 1 + 2j, [[1.0], [1.0, 2.0]]])
_nonfinite = st.sampled_from([NAN, INF, -INF, [1.0, NAN], np.array([INF, 1.0])])
_negative = st.floats(max_value=-1e-9, allow_nan=False, allow_infinity=False, min_value=-1e6)


def _fixed(kind: str) -> list:
    """Every listed bad value for ``kind`` (the hypothesis test draws only some of them)."""
    strat = _bad(kind)
    out = []
    for sub in getattr(strat, "original_strategies", [strat]):
        for leaf in getattr(sub, "original_strategies", [sub]):
            out += list(getattr(leaf, "elements", []))
            if hasattr(leaf, "value"):
                out.append(leaf.value)
    return out


def _bad(kind: str):
    """A hypothesis strategy of values that are wrong for an argument of ``kind``."""
    base = st.one_of(_junk, _nonfinite)
    if kind in NONE_OK:  # None means "the default" there
        base = base.filter(lambda x: x is not None)
    if kind == "bool":  # True and False are the valid values
        return st.sampled_from([None, "yes", 1.5, 0, np.ones(2)])
    extra = {
        "time": st.one_of(_negative, st.lists(_negative, min_size=1, max_size=3), st.just([])),
        "positive": st.one_of(_negative, st.just(0.0), st.just(-0.0)),
        "tol": st.one_of(_negative, st.just(0.0), st.just(-0.0)),  # positive, or None: the solver's default
        "nonneg": _negative,
        "unit": st.one_of(_negative, st.floats(min_value=1.0 + 1e-9, max_value=1e6)),
        "real": st.nothing(),
        "depth": st.one_of(st.integers(max_value=1, min_value=-5), st.just(2.5), st.just("3")),
        "width": st.one_of(st.integers(max_value=0, min_value=-5), st.just(4.5)),
        "steps": st.one_of(st.just([3, 1]), st.just([-1, 2]), st.just([0.5, 1.0]), st.just([])),
        "ypower": st.one_of(_negative, st.just(0.0)),  # below Σ s² of the base call
        "X": st.one_of(st.just(np.ones(N)), st.just(np.ones((N - 1, D))), st.just(np.ones((0, D))),
                       st.just(np.ones((N, D, 1)))),
        "Y": st.one_of(st.just(np.ones((N - 1, P))), st.just(np.ones((0, P)))),
        "params": st.sampled_from(BAD_NETS),
        "net": st.sampled_from(BAD_NETS[:-2] + BAD_NETS[-1:]),  # no data: any input dimension is fine
        "matrix": st.sampled_from([np.ones(3), np.ones((7, 9)), np.ones((0, 2))]),
        "anymatrix": st.sampled_from([np.ones(3), np.ones((0, 2)), np.ones((2, 2, 2))]),
        "vector": st.sampled_from([np.ones(D + 1), np.ones((0,)), np.ones((2, 2, 2))]),
        "anyvec": st.sampled_from([np.ones((0,)), np.ones((2, 2, 2))]),
        "Xalone": st.sampled_from([np.ones(N), np.ones((0, D)), np.ones((N, D, 1))]),
        "method": st.sampled_from(["rk4", "", None, 1]),
        "modes": st.sampled_from([None, (1, 2), np.ones(3)]),
        "bool": st.sampled_from([None, "yes", 1.5]),
        "cov": st.one_of(st.just(np.ones((2, 2))), st.just(-np.eye(D)),
                         st.just(np.array([[1.0, 2.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]))),
    }[kind]
    return st.one_of(base, extra)


# ------------------------------------------------------------ the functions

# (function, valid base keyword arguments, {argument: kind})
SPECS = [
    (th.logistic, dict(t=[0.0, 1.0], sigma=1.0, a0=1e-3), {"t": "time", "sigma": "real", "a0": "nonneg"}),
    (th.mode_strength, dict(t=[0.0, 1.0], s=[2.0, 1.0], a0=1e-3, weight_decay=0.0),
     {"t": "time", "s": "nonneg", "a0": "positive", "weight_decay": "nonneg"}),
    (th.linear_loss, dict(t=[0.0, 1.0], s=[2.0, 1.0], a0=1e-3, y_power=6.0),
     {"t": "time", "s": "nonneg", "a0": "positive", "y_power": "ypower"}),
    (th.half_time, dict(s=1.0, a0=1e-3), {"s": "nonneg", "a0": "positive"}),
    (th.final_loss, dict(s=[2.0, 1.0], y_power=6.0), {"s": "nonneg", "y_power": "ypower"}),
    (th.plateaus, dict(s=[2.0, 1.0], y_power=6.0), {"s": "nonneg", "y_power": "ypower"}),
    (th.gd_mode_strength, dict(steps=[0, 5], s=1.0, a0=1e-3, lr=0.1),
     {"steps": "steps", "s": "nonneg", "a0": "nonneg", "lr": "positive"}),
    (th.data_modes, dict(X=XW, Y=Y, rank_tol=1e-10), {"X": "X", "Y": "Y", "rank_tol": "nonneg"}),
    (th.is_whitened, dict(X=XW, tol=1e-10), {"X": "Xalone", "tol": "nonneg"}),
    (th.linear_floor, dict(X=X, Y=Y, intercept=False), {"X": "X", "Y": "Y", "intercept": "bool"}),
    (th.mode_projections, dict(beta=np.zeros((2, D, P)), modes=MODES), {"beta": "matrix", "modes": "modes"}),
    (th.leaky_time_to_linear, dict(t=[0.0, 1.0], alpha=0.0), {"t": "time", "alpha": "unit"}),
    (th.linear_time_to_leaky, dict(t_linear=[1.0], alpha=0.0), {"t_linear": "time", "alpha": "unit"}),
    (th.leaky_decay_to_linear, dict(weight_decay=0.1, alpha=0.0),
     {"weight_decay": "nonneg", "alpha": "unit"}),
    (th.linear_decay_to_leaky, dict(weight_decay=0.1, alpha=0.0),
     {"weight_decay": "nonneg", "alpha": "unit"}),
    (th.pair_lr_to_linear, dict(lr=0.1, alpha=0.0), {"lr": "positive", "alpha": "unit"}),
    (th.linear_lr_to_pair, dict(lr_linear=0.1, alpha=0.0), {"lr_linear": "positive", "alpha": "unit"}),
    (th.leaky_effective_init, dict(a0_raw=1e-3, alpha=0.0), {"a0_raw": "nonneg", "alpha": "unit"}),
    (th.leaky_mode_strength, dict(t=[0.0, 1.0], s=1.0, a0_raw=1e-3, alpha=0.0),
     {"t": "time", "s": "nonneg", "a0_raw": "positive", "alpha": "unit"}),
    (th.leaky_loss, dict(t=[0.0, 1.0], s=1.0, a0_raw=1e-3, alpha=0.0, y_power=2.0),
     {"t": "time", "a0_raw": "positive", "alpha": "unit", "y_power": "ypower"}),
    (th.leaky_half_time, dict(s=1.0, a0_raw=1e-3, alpha=0.0), {"a0_raw": "positive", "alpha": "unit"}),
    (th.leaky_to_linear, dict(params=PAIR, alpha=0.0), {"params": "net", "alpha": "unit"}),
    (th.pair_to_linear, dict(params=PAIR, alpha=0.0), {"params": "net", "alpha": "unit"}),
    (th.deep_mode_strength, dict(t=[0.0, 1.0], s=1.0, a0=1e-3, depth=3),
     {"t": "time", "s": "positive", "a0": "positive", "depth": "depth"}),
    (th.deep_loss, dict(t=[0.0, 1.0], s=1.0, a0=1e-3, depth=3, y_power=2.0),
     {"t": "time", "depth": "depth", "y_power": "ypower"}),
    (th.deep_time_to, dict(a=0.5, s=1.0, a0=1e-3, depth=3),
     {"a": "real", "a0": "positive", "depth": "depth"}),
    (th.deep_half_time, dict(s=1.0, a0=1e-3, depth=3), {"s": "positive", "a0": "positive", "depth": "depth"}),
    (th.riccati_gram, dict(t=[0.0, 1.0], Q0=Q0, Sigma_yx=S_YX),
     {"t": "time", "Q0": "matrix", "Sigma_yx": "matrix", "weight_decay": "nonneg"}),
    (th.unaligned_product, dict(t=[0.0, 1.0], params=BAL, Sigma_yx=S_YX),
     {"t": "time", "params": "params", "Sigma_yx": "matrix", "weight_decay": "nonneg"}),
    (th.unaligned_loss, dict(t=[0.0, 1.0], params=BAL, Sigma_yx=S_YX, y_power=Y_POWER),
     {"t": "time", "params": "params", "y_power": "ypower"}),
    (th.reference_curve, dict(params=PAIR, X=X, Y=Y, t=[0.0, 0.5], alpha=0.0),
     {"params": "params", "X": "X", "Y": "Y", "t": "time", "alpha": "unit", "weight_decay": "nonneg",
      "method": "method", "symmetry_tol": "nonneg"}),
    (th.linear_net_ode, dict(params=BAL, Sxx=np.eye(D), Syx=S_YX, t=[0.0, 0.5]),
     {"params": "params", "Sxx": "cov", "Syx": "matrix", "t": "time", "weight_decay": "nonneg",
      "rtol": "tol", "atol": "tol", "solver": "method"}),
    (th.moment_loss, dict(P=np.zeros((P, D)), Sxx=np.eye(D), Syx=S_YX, y_power=1.0),
     {"P": "matrix", "Syx": "matrix", "y_power": "nonneg"}),
    (th.population_loss_linear, dict(beta=np.zeros((D, P)), T=np.ones((P, D)), cov=np.eye(D), noise=0.1),
     {"beta": "matrix", "T": "matrix", "cov": "cov", "noise": "nonneg"}),
    (th.population_loss_sine, dict(beta=np.zeros(D), w=np.ones(D), cov=np.eye(D), freq=4.0, noise=0.1),
     {"beta": "vector", "w": "vector", "cov": "cov", "freq": "real", "noise": "nonneg"}),
    (th.sine_best_linear, dict(w=np.ones(D), freq=4.0), {"w": "anyvec", "freq": "real"}),
    (th.sine_linear_floor, dict(w=np.ones(D), freq=4.0, noise=0.1), {"w": "anyvec", "noise": "nonneg"}),
    (th.population_even_energy, dict(W=np.ones((4, D)), v=np.ones(4), alpha=0.0),
     {"W": "matrix", "v": "matrix", "alpha": "unit"}),
    (th.population_loss_two_layer, dict(params=NET1, T=np.ones((1, D)), noise=0.1, alpha=0.0),
     {"params": "net", "T": "vector", "noise": "nonneg", "alpha": "unit"}),
    (th.effective_strength, dict(params=NET1, r=np.eye(D)[0]), {"params": "net", "r": "matrix"}),
    (th.half_loss_time, dict(s=1.0, a0=1e-3), {"s": "positive", "a0": "positive"}),
    (th.raw_init_half_time_ratio, dict(s=1.0, a0=1e-3, alpha=0.0),
     {"s": "positive", "a0": "positive", "alpha": "unit"}),
    (th.aligned_init, dict(U=MODES.U, V=MODES.V, a0=1e-3, depth=2),
     {"U": "matrix", "a0": "positive", "depth": "depth", "width": "width"}),
    (th.balanced_init, dict(P0=np.ones((P, D)), width=2), {"P0": "anymatrix", "width": "width"}),
    (th.imbalance, dict(params=BAL), {"params": "net"}),
]
CASES = [(fn, base, arg, kind) for fn, base, kinds in SPECS for arg, kind in kinds.items()]



@pytest.mark.parametrize("fn, base", [(fn, base) for fn, base, _ in SPECS], ids=[name(s[0]) for s in SPECS])
def test_base_calls_are_valid(fn, base):
    """The fuzz starts from calls that work (else a refusal proves nothing)."""
    out = fn(**base)
    assert not jax_arrays_in(out), f"JAX arrays returned (NumPy expected): {jax_arrays_in(out)}"
    if isinstance(out, th.Curve):
        out = (out.t, out.loss, out.beta)
    leaves = jax.tree_util.tree_leaves(out)
    assert all(np.all(np.isfinite(np.asarray(x, dtype=float)))
               for x in leaves if not isinstance(x, str | bool)), out



def _check_refused(fn, base, arg, kind, bad):
    assert_refused(fn, base, arg, bad, data_arg=kind.rstrip("?") in ("X", "Y"))


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
        if bad is None and kind in NONE_OK:
            continue
        _check_refused(fn, base, arg, kind, bad)


@pytest.mark.parametrize("fn, base, arg, kind", CASES, ids=[f"{name(c[0])}-{c[2]}" for c in CASES])
@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(data=st.data())
def test_bad_argument_gets_a_clear_error(fn, base, arg, kind, data):
    _check_refused(fn, base, arg, kind, data.draw(_bad(kind), label=arg))


# ------------------------------------------------------------ guards on the promises


def test_reference_curve_pair_init_on_asymmetric_data_is_approximate():
    """Issue 13: a pair init has zero even part at t = 0 on *any* data, but only on
    mirror-symmetric data does it stay zero; the note must say which, with the measure."""
    Xa = X0  # one half: no mirrors at all
    Ya = np.sin(2 * Xa[:, :1]) + Xa[:, 1:2]
    net = bf.init_pairs(jax.random.PRNGKey(1), (D, 4, 1), 0.3)
    curve = th.reference_curve(net, Xa, Ya, [0.0, 1.0], alpha=0.0)
    assert not curve.exact and "APPROXIMATE" in curve.note and "mirror violation" in curve.note
    Xs, Ys = bf.symmetrize(Xa, Ya)
    curve = th.reference_curve(net, Xs, Ys, [0.0, 1.0], alpha=0.0)
    assert curve.exact and "exact" in curve.note and "APPROXIMATE" not in curve.note
    # a linear net needs no symmetry: exact on any data
    assert th.reference_curve(th.pair_to_linear(net, 0.0), Xa, Ya, [1.0]).exact


def test_reference_curve_refuses_biases_and_states_whitening():
    biased = bf.from_arrays([np.asarray(BAL[0].W), np.asarray(BAL[1].W)], [np.zeros(2), np.zeros(P)])
    with pytest.raises(ValueError, match="params has biases"):
        th.reference_curve(biased, XW, Y, [1.0])  # the Riccati form used to ignore them
    curve = th.reference_curve(BAL, XW, Y, [1.0])
    assert curve.reference == "riccati" and "max|XᵀX/N - I| =" in curve.note and "imbalance" in curve.note
    with pytest.raises(ValueError, match=r"max\|XᵀX/N - I\| = .* must be <= 1e-10"):
        th.reference_curve(BAL, X * 1.5, Y, [1.0], method="riccati")


def test_riccati_gram_refuses_an_unbalanced_q0():
    Q = Q0.copy()
    Q[0, 0] += 0.5
    with pytest.raises(ValueError, match="Q0 is not balanced"):
        th.riccati_gram([1.0], Q, S_YX)


@pytest.mark.parametrize("X_, Y_, expect_zero", [
    (X, Y, True),
    (np.vstack([X, X[:1]]), np.vstack([Y, Y[:1]]), False),  # one point duplicated without its mirror
    (np.vstack([X, X[:1], -X[:1]]), np.vstack([Y, Y[:1], -Y[:1]]), True),  # ... and with it
    (X0, X0[:, :1], False),
])
def test_mirror_violation_counts_multiplicities(X_, Y_, expect_zero):
    mv = mirror_violation(X_, Y_)
    assert (mv == 0.0) is expect_zero and math.isfinite(mv)
    if not expect_zero:  # the duplicate's nearest mirror exists; the pairing still sees it
        assert mv > 0.1


def test_mirror_violation_measures_small_noise():
    noisy = X + 1e-8 * _rng.normal(size=X.shape)
    # statistical, not round-off: v = max over the 8 mirror pairs of ||ξ_n + ξ_m||, which is
    # 1e-8 √2 χ₃ each (the O(1)-apart non-mirrors cannot pair better); all 8 below 1e-9
    # (χ₃ < 0.07: p ≈ 1e-4 each) has probability ~1e-32, any above 1e-7 (χ₃ > 7) ~1e-9. The
    # rounding of x + (-x) adds at most ε|x| ≈ 1e-15.
    assert 1e-9 < mirror_violation(noisy, Y) < 1e-7
