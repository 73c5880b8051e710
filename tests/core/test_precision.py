"""Precision as an explicit choice (biasfree.core.precision).

- Importing biasfree leaves ``jax_enable_x64`` as it was (checked in fresh processes by
  tests/app/test_api.py).
- With x64 off, as in a user's float32 program, biasfree still computes in float64 by
  default: the same numbers, bit for bit, as with x64 on.
- ``precision="float32"`` (or ``use_precision``) computes in float32, and the exact
  identities hold there at tolerances derived from float32's unit round-off u = 2^-24.
"""

import dataclasses

import jax
import numpy as np
import pytest
from roundoff import EPS32, chain_length, forward_gap, loss_eval_gap, trajectory_gap

import biasfree as bf
from biasfree.core.precision import eps
from biasfree.dynamics.losses import forward_mirrored

U32 = 2.0**-24  # float32 unit round-off


def _leaves(tree):
    return [np.asarray(a) for a in jax.tree_util.tree_leaves(tree)]


def _workload():
    key = jax.random.PRNGKey(0)
    target, _ = bf.sine_target(key, 4)
    data = bf.make_dataset(key, target, 20, 4, n_test=7, whitened=True)
    params = bf.init_gaussian(jax.random.PRNGKey(1), (4, 6, 1), 0.3)
    cfg = bf.GDConfig(alpha=0.3, lr=0.05, steps=50, weight_decay=1e-3, n_records=3)
    tr = bf.train(params, data, cfg)
    ens = bf.train(params, data, cfg, alpha=[0.0, 0.5])
    fl = bf.flow(params, data, bf.FlowConfig(alpha=0.3, t_max=0.5, n_records=2))
    return data, params, tr, ens, fl


@pytest.mark.x64_off
def test_float64_by_default_with_x64_off():
    """Data, init, GD, an ensemble and gradient flow: float64 and identical to x64 on."""
    assert not jax.config.jax_enable_x64 or not jax.numpy.ones(1).dtype == np.float64
    off = _workload()
    with jax.enable_x64(True):
        on = _workload()
    for a, b in zip(_leaves(off), _leaves(on), strict=True):
        if np.issubdtype(a.dtype, np.floating):
            assert a.dtype == np.float64
        np.testing.assert_array_equal(a, b)  # same float64 program: bit for bit


@pytest.mark.x64_off
@pytest.mark.numerics  # round-off bounds at float32: make test-portable reruns it
def test_float32_on_request_and_identities_at_float32_round_off():
    with bf.use_precision("float32"):
        assert bf.precision.current_precision() == "float32" and eps() == U32
        key = jax.random.PRNGKey(0)
        target, _ = bf.sine_target(key, 4)
        data = bf.make_dataset(key, target, 30, 4)
        params = bf.init_gaussian(jax.random.PRNGKey(1), (4, 6, 1), 0.5)
        assert data.inputs.dtype == np.float32 and params[0].W.dtype == np.float32
        # the mirror identity z₋ = -z₊ (fast path) vs the general forward
        F_fast = np.asarray(forward_mirrored(params, data.inputs, 0.3))
        F_gen = np.asarray(bf.forward(params, data.X, 0.3))
        assert F_fast.dtype == np.float32
        # the same sums in another order (f(-x) = -f(x) exactly aside): forward_gap at float32's ε
        np.testing.assert_array_less(np.abs(F_fast - F_gen),
                                     forward_gap([np.asarray(p.W) for p in params], data.X, eps=EPS32)
                                     + np.finfo(np.float32).tiny)
        # σ_α(z) = c z + (1 - c)|z|: two roundings on each side, 4 u |z|
        z = np.asarray(data.inputs[:, 0])
        c = bf.nets.slope_factor(0.3)
        np.testing.assert_allclose(bf.nets.leaky_relu(z, 0.3), c * z + (1 - c) * np.abs(z), rtol=0,
                                   atol=4 * U32 * np.max(np.abs(z)))
    # the pair identity: a ReLU pair net is the linear net at sqrt(1+α)(W, v) trained at
    # lr η (1+α)/2, step for step. Both float32 runs are within their trajectory_gap (K steps
    # of 2γ_k at float32's ε × the run's measured sensitivity, plus the loss's evaluation) of
    # the exact run; so of each other within the sum, and of the float64 run within one.
    cfg = bf.GDConfig(alpha=0.0, lr=0.05, steps=200, n_records=5)
    lin_cfg = bf.GDConfig(alpha=1.0, lr=0.05 * 0.5, steps=200, n_records=5)
    half = bf.init_gaussian(jax.random.PRNGKey(2), (4, 3, 1), 0.3, precision="float32")
    pair = bf.train(bf.pair_up(half), data, cfg, precision="float32")
    lin = bf.train(bf.nets.scale_params(half, 1.0), data, lin_cfg, precision="float32")
    assert pair.loss.dtype == np.float32
    pair64 = bf.train(bf.pair_up(half), data, cfg)
    assert pair64.loss.dtype == np.float64
    k = chain_length(bf.pair_up(half), data.X.shape[0])

    def gap(init, c):
        run = bf.train(init, data, dataclasses.replace(c, keep_params=True))
        return (trajectory_gap(lambda p: bf.train(p, data, c).loss, init, c.steps, k, eps=EPS32)
                + loss_eval_gap(run.path, data.X, data.Y, run.loss, k, eps=EPS32))

    g_pair, g_lin = gap(bf.pair_up(half), cfg), gap(bf.nets.scale_params(half, 1.0), lin_cfg)
    assert np.all(np.abs(pair.loss - lin.loss) <= g_pair + g_lin)
    assert np.all(np.abs(pair.loss - pair64.loss) <= g_pair)
    # the bound can fail: the twin at the pair's own step η (time scale off by 1/c = 2) strays
    # more than 10x the bound
    wrong = bf.train(bf.nets.scale_params(half, 1.0), data, dataclasses.replace(lin_cfg, lr=cfg.lr),
                     precision="float32")
    assert np.max(g_pair + g_lin) < 0.1 * np.max(np.abs(wrong.loss - pair.loss))


def test_bad_precision_names_the_choices():
    with pytest.raises(ValueError, match="float64"):
        bf.train(None, None, None, precision="float16")
    with pytest.raises(ValueError, match="float32"), bf.use_precision("double"):
        pass
