"""conv-collapse beyond the generic tiny run: its config refuses bad input with a clear
error, and the zero-channel padding that lets its channel sweep share one compiled call
leaves a net's function and GD run unchanged."""

import dataclasses

import jax
import numpy as np
import pytest

import biasfree as bf
from biasfree.claims.conv_collapse import PRESETS, Config
from biasfree.claims.conv_collapse.run import padded
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
    a, b = bf.gd(net, data, cfg), bf.gd(big, data, cfg)
    L = np.asarray(a.loss)
    assert np.max(np.abs(np.asarray(b.loss) - L)) <= 50 * gamma(n) * L[0]  # K γ_n L(0)
    first = np.asarray(b.params[0].K if kind == "conv" else b.params[0].W)
    assert np.all(first[2:] == 0)  # zero gradients: exactly zero, not merely small
