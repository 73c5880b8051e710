"""Helpers of the deep experiment: the pair <-> deep-linear map (exact where the maths says
it is), the exact GD mode map against the §3.3 flow, effective rank, zero padding."""

import numpy as np
import pytest

import biasfree as bf
from biasfree import theory
from biasfree.experiments.deep import (
    deep_linear_map,
    effective_rank,
    gaussian_net,
    linear_to_pair,
    pad_hidden,
    pair_to_linear,
    time_factor,
)


def test_time_factor_limits():
    """λ_2 = c (the two-layer twin, §2.4), λ_L = 1 for α = 1, λ_3 = 2^{-4/3} for ReLU."""
    assert time_factor(2, 0.5) == pytest.approx(0.75, rel=1e-15)
    assert time_factor(4, 1.0) == 1.0
    assert time_factor(3, 0.0) == pytest.approx(2 ** (-4 / 3), rel=1e-15)


def _unpair(pair):
    """The scaled half net inside a pair net: top blocks of every layer."""
    out = []
    for i, layer in enumerate(pair):
        W = np.asarray(layer.W)
        r = W.shape[0] if i == len(pair) - 1 else W.shape[0] // 2
        c = W.shape[1] if i == 0 else W.shape[1] // 2
        out.append(bf.Layer(W[:r, :c]))
    return tuple(out)


@pytest.mark.parametrize("depth", [3, 4])
def test_pair_net_computes_the_linear_net(depth):
    """linear_to_pair(half) computes the same (linear) function as half at α = 0, and
    pair_to_linear undoes its layer scaling."""
    rng = np.random.default_rng(depth)
    half = gaussian_net(rng, (3,) + (4,) * (depth - 1) + (2,), 0.8)
    X = rng.normal(size=(10, 3))
    pair = linear_to_pair(half, depth)
    np.testing.assert_allclose(bf.forward(pair, X, 0.0), bf.forward(half, X, 1.0), rtol=1e-13,
                               atol=1e-14)
    for a, b in zip(pair_to_linear(_unpair(pair), depth), half, strict=True):
        np.testing.assert_allclose(a.W, b.W, rtol=1e-14)


def test_pair_map_is_exact_for_the_identity_activation():
    """α = 1: the pair net's gradient lies in the pair manifold, so pair GD (step η) equals
    GD of the deep linear half net it was mapped from (step ηλ, λ = 1) to round-off."""
    rng = np.random.default_rng(0)
    half = gaussian_net(rng, (3, 4, 4, 2), 0.5)
    X = rng.normal(size=(20, 3))
    X, Y = bf.symmetrize(X, X @ rng.normal(size=(2, 3)).T)
    data = bf.Dataset(X, Y)
    cfg = bf.GDConfig(alpha=1.0, lr=0.05, steps=200, n_records=5)
    pair = bf.gd(linear_to_pair(half, 3, alpha=1.0), data, cfg)
    lin = bf.gd(pad_hidden(half, 8), data, cfg)
    assert float(pair.loss[-1]) < 0.5 * float(pair.loss[0])  # it did train
    assert float(np.max(np.abs(pair.loss - lin.loss))) <= 1e-12 * float(pair.loss[0])


def test_deep_linear_map_is_first_order_in_the_step():
    """The exact GD mode map tends to the §3.3 flow solution with error linear in η: halving
    η halves the max error (ratio within 0.45–0.55)."""
    s, a0, L, t_end = np.array([1.5, 0.7]), 1e-2, 3, 20.0
    errs = []
    for lr in (0.01, 0.005):
        steps = int(round(t_end / lr))
        t = lr * np.arange(0, steps + 1, steps // 40)
        a = deep_linear_map(steps, s, a0, L, lr)[np.arange(0, steps + 1, steps // 40)]
        errs.append(np.max(np.abs(a - theory.deep_mode_strength(t, s, a0, L)) / s))
    assert errs[0] < 0.05
    assert 0.45 <= errs[1] / errs[0] <= 0.55


def test_effective_rank_counts_equal_singular_values():
    assert effective_rank([2.0, 2.0, 2.0, 0.0]) == pytest.approx(3.0, rel=1e-14)
    assert effective_rank([5.0, 0.0]) == pytest.approx(1.0, rel=1e-14)


def test_zero_padding_keeps_the_function():
    rng = np.random.default_rng(3)
    net = gaussian_net(rng, (3, 2, 2, 1), 1.0)
    X = rng.normal(size=(6, 3))
    np.testing.assert_allclose(bf.forward(pad_hidden(net, 5), X, 0.0), bf.forward(net, X, 0.0),
                               rtol=1e-14, atol=1e-15)
