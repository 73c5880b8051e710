"""What train accepted silently or failed on with a raw error (issue 48, items 3 and 5): each is
now refused before any work, in one line that names the problem and the fix, or (the
per-member lr) works. Each test failed on the main of issue 48: the reason is in its doc."""

from __future__ import annotations

import functools
import warnings

import jax
import numpy as np
import optax
import pytest

import biasfree as bf
from biasfree import _overflow as overflow
from biasfree import _validate as validate
from biasfree.core.nets import forward_unchecked


@pytest.fixture(scope="module")
def problem():
    key = jax.random.PRNGKey(0)
    data = bf.make_dataset(key, bf.sine_target(key, d=3)[0], n=20, d=3)
    return bf.init_gaussian(key, (3, 4, 1), scale=0.1), data


def one_line(e) -> str:
    msg = str(e.value)
    assert "\n" not in msg and len(msg) < 400, msg
    return msg


@pytest.mark.parametrize(("ctor", "call"), [
    (optax.adam, r"optax\.adam\(1e-3\), or .* lambda rho: optax\.adam\(1e-3, eps=1e-8 \* rho\)"),
    (optax.sgd, r"optax\.sgd\(1e-3\), or .* lambda rho: optax\.sgd\(1e-3\)$"),
    (optax.inject_hyperparams(optax.adam), r"optax\.adam\(1e-3\)"),
    (functools.partial(optax.adamw, weight_decay=0.1), r"optax\.adamw\(1e-3\)"),
])
def test_an_uncalled_optax_constructor_is_refused_naming_the_call(problem, ctor, call):
    """On main ``train(net, data, optax.adam, steps=50)`` took the constructor for a factory of ρ
    and trained Adam at learning rate ρ = 1, silently."""
    params, data = problem
    with pytest.raises(TypeError, match=r"is an optimiser's constructor, not an optimiser .*" + call) as e:
        bf.train(params, data, ctor, steps=5)
    one_line(e)
    with pytest.raises(TypeError, match="constructor"):  # the config and the twin's builder alike
        bf.TrainConfig(optimiser=ctor, steps=5)
    with pytest.raises(TypeError, match="constructor"):
        bf.optimiser_twin(ctor, 0.0)


def test_a_factory_of_rho_is_still_a_factory(problem):
    """The control: callables of one argument ρ that build an optimiser train as before, however
    they are written (a lambda, a def, a partial of one)."""
    params, data = problem

    def my_adam(rho, lr=1e-3):
        return optax.adam(lr, eps=1e-8 * rho)

    for f in (lambda rho: optax.adam(1e-3, eps=1e-8 * rho), my_adam, functools.partial(my_adam, lr=1e-2)):
        assert validate.optimiser("optimiser", f) is f
        assert np.isfinite(float(bf.train(params, data, f, steps=3, n_records=2).loss[-1]))


def test_a_callable_that_cannot_take_rho_alone_is_refused(problem):
    params, data = problem
    with pytest.raises(TypeError, match=r"cannot be called with the one argument ρ of a factory") as e:
        bf.train(params, data, lambda rho, eta: optax.sgd(eta), steps=3)
    one_line(e)


def test_a_factory_that_returns_no_optimiser_is_refused(problem):
    """On main: ``AttributeError: 'int' object has no attribute 'init'``."""
    params, data = problem
    with pytest.raises(TypeError, match=r"the factory returned int 3 at ρ = 1, not an optax\."
                                        r"GradientTransformation; return one, e\.g\. lambda rho") as e:
        bf.train(params, data, lambda rho: 3, steps=3)
    one_line(e)


def test_an_update_of_the_wrong_structure_is_refused(problem):
    """On main: a raw pytree structure error from inside the compiled loop."""
    params, data = problem
    wrong = optax.GradientTransformation(lambda p: (), lambda g, s, p=None: ((1.0,), s))
    shapes = r"returns 1 arrays of shapes \[\(\)\] where the weights have 2 of shapes \[\(4, 3\), \(1, 4\)\]"
    with pytest.raises(TypeError, match=r"its update " + shapes + "; return updates shaped like") as e:
        bf.train(params, data, wrong, steps=3)
    one_line(e)

    def broken(g, s, p=None):
        raise KeyError("momentum")
    with pytest.raises(TypeError, match=r"its init/update fails on the net's weights \(KeyError"):
        bf.train(params, data, optax.GradientTransformation(lambda p: (), broken), steps=3)


def test_per_member_lr_needs_no_config(problem):
    """The bug of issue 48: ``lr=np.array([0.1, 0.2])`` beside no config raised "gradient descent
    needs its step η" while the same array beside a GDConfig trained. Both are one compiled
    program with the same per-member η, so they agree bitwise; the control: other η differ."""
    params, data = problem
    lrs = np.array([0.1, 0.2])
    bare = bf.train(params, data, lr=lrs, steps=5, n_records=3)
    beside = bf.train(params, data, bf.GDConfig(steps=5, n_records=3), lr=lrs)
    np.testing.assert_array_equal(np.asarray(bare.loss), np.asarray(beside.loss))
    np.testing.assert_array_equal(np.asarray(bare.t), np.asarray(beside.t))
    other = bf.train(params, data, lr=np.array([0.1, 0.3]), steps=5, n_records=3)
    assert not np.array_equal(np.asarray(other.loss[1]), np.asarray(bare.loss[1]))
    np.testing.assert_array_equal(np.asarray(other.loss[0]), np.asarray(bare.loss[0]))  # same member 0


def test_steps_past_the_loops_counter_are_refused_as_too_many(problem):
    """On main ``steps=10**30`` was "a whole number (got a fraction)": 1e30 as a float is not
    10**30; and 2**31 steps were accepted by the config. The loop counts steps in int32, so
    2**31 − 1 is the most it can run."""
    params, data = problem
    too_many = r"steps={} is more than the 2147483647 steps the compiled loop counts \(int32\); pass at most"
    with pytest.raises(ValueError, match=too_many.format(10**30)) as e:
        bf.train(params, data, lr=0.01, steps=10**30)
    assert "fraction" not in one_line(e)
    with pytest.raises(ValueError, match=too_many.format(2**31)):
        bf.TrainConfig(lr=0.01, steps=2**31)
    assert validate.integer("n", 10**30) == 10**30  # a Python int is whole, however large
    assert bf.TrainConfig(lr=0.01, steps=2**31 - 1).steps == 2**31 - 1


def test_a_given_twin_of_the_wrong_input_size_is_refused(problem):
    """On main: ``TypeError: dot_general requires contracting dimensions to have the same shape``
    from inside JAX."""
    params, data = problem
    twin = bf.init_gaussian(jax.random.PRNGKey(1), (4, 4, 1))
    with pytest.raises(ValueError, match=r"twin takes inputs of dimension 4 but the data have d = 3") as e:
        bf.train(params, data, lr=0.01, steps=3, twin=twin)
    one_line(e)
    with pytest.raises(ValueError, match=r"twin has 2 outputs but the targets have p = 1"):
        bf.train(params, data, lr=0.01, steps=3, twin=bf.init_gaussian(jax.random.PRNGKey(1), (3, 4, 2)))


def _scaled(params, s):
    return bf.from_arrays([np.asarray(layer.matrix) * s for layer in params])


def test_a_forward_that_overflows_is_refused_in_train_and_analyse():
    """Weights near 1e100 in a 3-layer net: outputs ~1e300, their squares inf in float64. On main
    train raised a DivergenceError blaming lr and analyse returned evidence "= nan (FAILS)"."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(20, 3))
    X = np.concatenate([X, -X])
    Y = X @ rng.normal(size=(3, 1))
    net = bf.init_gaussian(jax.random.PRNGKey(0), (3, 4, 4, 1), scale=1.0)
    huge = _scaled(net, 1e100)
    with pytest.raises(ValueError, match=r"params: the forward on data\.X overflows float64 .* params\[0\], "
                                         r"params\[1\], params\[2\] reach .*; rescale them") as e:
        bf.train(huge, bf.Dataset(X, Y), lr=0.01, steps=3)
    one_line(e)
    with pytest.raises(ValueError, match=r"model: the forward on data X overflows float64"):
        bf.analyse(huge, (X, Y), alpha=0.0)
    with pytest.raises(ValueError, match=r"data\.X reaches .*e\+200; rescale it"):  # the inputs to blame
        bf.train(net, bf.Dataset(X * 1e200, Y), lr=0.01, steps=3)


@pytest.mark.parametrize(("scale", "overflows"), [(1e45, False), (1e60, True)])
def test_the_overflow_check_is_where_the_squares_leave_float64(scale, overflows):
    """The control of the refusal: entries of order 1 times s per layer give outputs ~s³ and
    squared outputs ~s⁶, finite below s ≈ 1e51 (s⁶ < 1.8e308) and inf above; 1e45 and 1e60 sit
    a factor 1e6 or more from that edge in s⁶'s exponent, far past any order-1 factor."""
    X = np.random.default_rng(1).normal(size=(10, 3))
    net = _scaled(bf.init_gaussian(jax.random.PRNGKey(0), (3, 4, 4, 1), scale=1.0), scale)
    if overflows:
        with pytest.raises(ValueError, match="overflows"):
            overflow.finite_forward(net, X, 0.0, forward_unchecked)
    else:
        overflow.finite_forward(net, X, 0.0, forward_unchecked)


def test_run_refuses_a_progress_that_is_not_callable():
    """On main ``bf.run(..., progress=3)``: ``TypeError: 'int' object is not callable`` from
    inside the run, after its work began."""
    with pytest.raises(TypeError, match=r"progress=3 must be a function called with a short message"):
        bf.run("leaky-collapse", preset="tiny", progress=3)


def test_a_failed_curve_solve_gives_advice_the_caller_can_follow():
    """One layer of a depth-3 net ×1e100 (the forward finite, L(0) ~ 1e190): the predicted
    curve's ODE cannot take a step. On main the advice was "loosen rtol/atol", which analyse
    does not accept; now it names what analyse takes (t_max) and the fix that works (rescale)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(20, 3))
    X = np.concatenate([X, -X])
    Y = X @ rng.normal(size=(3, 1))
    net = bf.init_gaussian(jax.random.PRNGKey(0), (3, 4, 4, 1), scale=1.0)
    big = bf.from_arrays([np.asarray(la.matrix) * (1e100 if i == 1 else 1.0) for i, la in enumerate(net)])
    advice = r"rescale the weights or the data toward order 1, or ask for a shorter horizon \(analyse's t_max"
    with pytest.raises(RuntimeError, match=r"the linear net's ODE failed at t = .* " + advice) as e, \
            warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # NumPy's and SciPy's overflows on the way there
        bf.analyse(big, (X, Y), alpha=0.0)
    assert "only theory.linear_net_ode also takes looser rtol/atol" in one_line(e)


def test_a_dense_net_whose_bound_is_finite_needs_no_forward_pass():
    """The overflow check's cheap path: for dense layers, h_l = max_i Σ_j|W_ij| h_{l−1} bounds every
    entry, so an ordinary net is certified without running it (a forward that raises is never
    called: bench large spent 3 s of 37 on this pass). At 1e45 per layer (outputs ~1e137, finite) the
    bound p·B² ≈ 1e275 still certifies; at 1e60 it does not, and the forward runs and refuses. A conv
    net always runs its forward (the bound is for dense layers only)."""
    def never(*a):
        raise AssertionError("the forward ran")

    X = np.random.default_rng(1).normal(size=(10, 3))
    net = bf.init_gaussian(jax.random.PRNGKey(0), (3, 4, 4, 1), scale=1.0)
    for s in (1.0, 1e45):
        overflow.finite_forward(_scaled(net, s), X, 0.0, never)
    with pytest.raises(AssertionError, match="the forward ran"):
        overflow.finite_forward(_scaled(net, 1e60), X, 0.0, never)
    conv = bf.init_conv(jax.random.PRNGKey(0), (5,), (1, 2), 3, scale=0.1)
    with pytest.raises(AssertionError, match="the forward ran"):
        overflow.finite_forward(conv, np.ones((2, 5)), 0.0, never)
