"""conv-collapse beyond the generic tiny run: its config refuses bad input with a clear
error, the zero-channel padding that lets its channel sweep share one compiled call
leaves a net's function and GD run unchanged, and its gaps are maxima over every GD step."""

import dataclasses

import jax
import numpy as np
import pytest

import biasfree as bf
from biasfree.claims.conv_collapse import PRESETS, Config
from biasfree.claims.conv_collapse.run import beside_twins, gap, gap_at_records, padded
from tests.roundoff import gamma


@pytest.mark.parametrize("field, value, match", [
    ("channels", 3, "even"),
    ("alphas", (0.0, 0.5), "must include 1.0"),
    ("n_images", 5, "n_images"),
    ("kernel", 9, "kernel"),
    ("teacher_kernel", 20, "teacher_kernel"),
    ("lr", 0.0, "lr"),
    ("sweep_channels", (4,), "sweep_channels"),
    ("sweep_scales", (1e-3, -1.0), "sweep_scales"),
    ("sweep_inits", 0, "sweep_inits"),
    ("n_records", 3, "n_records"),
])
def test_config_refuses_bad_values(field, value, match):
    with pytest.raises(ValueError, match=match):
        dataclasses.replace(PRESETS["tiny"], **{field: value})


def test_presets_are_configs():
    assert set(PRESETS) == {"tiny", "paper"} and all(isinstance(c, Config) for c in PRESETS.values())


@pytest.mark.numerics
@pytest.mark.parametrize("kind", ["conv", "dense"])
def test_zero_padding_leaves_the_run_unchanged(kind):
    """A C-unit net padded with zero units (in and out) computes the same function, and GD
    keeps the padding exactly zero (σ_α(0) = 0, no bias: zero gradients) with the same loss."""
    rng = np.random.default_rng(0)
    Xp = rng.normal(size=(5, 16))
    data = bf.Dataset(*bf.symmetrize(Xp, Xp @ rng.normal(size=(16, 2)) / 4))
    key = jax.random.PRNGKey(0)
    net = (bf.init_conv(key, (4, 4), (1, 2), 3, 2, 0.5) if kind == "conv"
           else bf.init_gaussian(key, (16, 2, 2), 0.5))
    big = padded(net, 5)
    assert padded(net, 2) is net
    n = max(max(la.n_in, la.n_out) for la in big)
    F = np.asarray(bf.forward(net, data.X, 0.0))
    # the padded units add exact zeros to each sum, but the kernels may sum in another order: γ_n
    assert np.max(np.abs(np.asarray(bf.forward(big, data.X, 0.0)) - F)) <= 2 * gamma(n) * np.max(np.abs(F))
    cfg = bf.GDConfig(alpha=0.0, lr=0.05, steps=50, n_records=6)
    a, b = bf.train(net, data, cfg), bf.train(big, data, cfg)
    L = np.asarray(a.loss)
    assert np.max(np.abs(np.asarray(b.loss) - L)) <= 50 * gamma(n) * L[0]  # K γ_n L(0)
    first = np.asarray(b.params[0].K if kind == "conv" else b.params[0].W)
    assert np.all(first[2:] == 0)  # zero gradients: exactly zero, not merely small


@pytest.mark.numerics
def test_gap_is_the_max_over_every_gd_step():
    """The run's gap is the largest |L − L_twin| over every GD step, not over its records:
    with 2 records (k = 0 and K) it equals the maximum over a run that records all K + 1
    steps. From a small init the gap peaks at the transition, mid-run, so the two records
    miss it: a gap taken from the records fails this test."""
    rng = np.random.default_rng(1)
    Xp = rng.normal(size=(6, 16))
    data = bf.Dataset(*bf.symmetrize(Xp, np.tanh(Xp @ rng.normal(size=(16, 2)))))
    net = bf.init_conv(jax.random.PRNGKey(2), (4, 4), (1, 4), 3, 2, 0.1)
    K = 100
    ends = beside_twins({"n": (net, 0.0)}, data, 0.05, K, 2)["n"]
    every = beside_twins({"n": (net, 0.0)}, data, 0.05, K, K + 1)["n"]
    assert list(every.k) == list(range(K + 1)) and list(ends.k) == [0, K]
    L0 = float(every.loss[0])
    # each loss is a mean of N p squares of outputs summed over ≤ n = 4·16 products: relative
    # round-off γ_{Np + n}; the gap is a difference of two such losses of size ≤ L_max, and the
    # two runs (and the records vs the loop's losses) compute them by different kernels: 4 γ L_max
    tol = 4 * gamma(data.Y.size + 64) * float(np.max(every.loss)) / L0
    assert abs(gap(ends) - gap(every)) <= tol
    assert abs(gap(every) - gap_at_records(every)) <= tol
    assert 0 < ends.gap_step < K  # the peak lies between the records
    assert gap_at_records(ends) < 0.5 * gap(ends)  # measured 0.59% vs 1.75% of L(0)
