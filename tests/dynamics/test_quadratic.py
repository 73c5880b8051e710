"""The quadratic net σ(z) = z² (docs/theory.md §11.2) in the one net family and on the one
trainer: its forward map, its refusal of the leaky-only paths, and its init-induced staircase
recorded with ``observables="units"`` (the effective units of §11.1 against time)."""

import numpy as np
import pytest

import biasfree as bf
from biasfree.core.conv import from_spec
from biasfree.core.layers import Layer
from biasfree.core.nets import beta_eff_is_exact, forward, with_activation
from biasfree.dynamics.losses import forward_mirrored
from tests.roundoff import gamma


def _quadratic(W1, W2, **kw):
    return (Layer(np.asarray(W1, float), activation="quadratic", **kw), Layer(np.asarray(W2, float)))


def test_forward_is_w2_times_the_square():
    """f(x) = W₂ (W₁x)², whatever α (the slope is not read after a quadratic layer); the
    mirrored path (one first-layer product) agrees to round-off and is even, f(−x) = f(x)."""
    rng = np.random.default_rng(0)
    W1, W2, X = rng.normal(size=(4, 3)), rng.normal(size=(2, 4)), rng.normal(size=(5, 3))
    net = _quadratic(W1, W2)
    want = (X @ W1.T) ** 2 @ W2.T
    scale = (np.abs(X) @ np.abs(W1.T)) ** 2 @ np.abs(W2.T)
    for alpha in (0.0, 1.0):  # round-off: γ_3 on z (doubled by the square), γ_4 on the readout
        assert np.all(np.abs(np.asarray(forward(net, X, alpha)) - want) <= 4 * gamma(4) * scale)
    F = np.asarray(forward_mirrored(net, X, 0.0))
    assert np.all(np.abs(F[:5] - want) <= 4 * gamma(4) * scale)
    assert np.array_equal(F[:5], F[5:])  # (−z)² = z² exactly
    leaky = (Layer(W1), Layer(W2))  # failing control: the same weights under σ_α
    assert np.max(np.abs(np.asarray(forward(leaky, X, 0.0)) - want)) > 0.1


def test_quadratic_stays_off_the_leaky_only_paths():
    net = _quadratic(np.ones((3, 2)), np.ones((1, 3)))
    assert not beta_eff_is_exact(net)
    with pytest.raises(ValueError, match="no linear twin"):
        bf.linear_twin(net, 0.0)
    data = bf.Dataset(np.eye(2), np.ones((2, 1)))
    with pytest.raises(ValueError, match="no linear twin"):
        bf.train(net, data, steps=1, lr=0.1, twin=True)
    with pytest.raises(ValueError, match="activation='cubic'"):
        Layer(np.ones((3, 2)), activation="cubic")
    layer = net[0]
    assert layer.spec() == {"type": "Layer", "activation": "quadratic"}
    assert from_spec(layer.spec(), layer.W).activation == "quadratic"
    assert Layer(np.ones((3, 2))).spec() == {"type": "Layer"}  # files of leaky nets as before
    assert with_activation((Layer(np.ones((3, 2))), Layer(np.ones((1, 3)))), "quadratic")[0].activation == \
        "quadratic"


def _staircase(scales, steps=8000):
    """Three aligned units of init scales ``scales`` on the target Σ_i x_i² (one unit each):
    counts and losses at log-spaced records."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 3))
    data = bf.Dataset(X, np.sum(X**2, axis=1, keepdims=True))
    a = np.asarray(scales, float)
    run = bf.train(_quadratic(np.diag(a), a[None, :]), data, steps=steps, lr=0.02, n_records=80,
                   spacing="log", observables="units")
    return np.asarray(run.units["count"]), np.asarray(run.loss)


def _stages(count, loss, hold=3):
    """The stages: maximal runs of one unit count held for ≥ ``hold`` records, with the loss's
    drift within each and the fall from each stage to the next."""
    edges = np.flatnonzero(np.diff(count)) + 1
    runs = [(s, e) for s, e in zip(np.r_[0, edges], np.r_[edges, count.size], strict=True) if e - s >= hold]
    drift = [np.ptp(loss[s:e]) for s, e in runs]
    fall = [loss[runs[i][1] - 1] - loss[runs[i + 1][1] - 1] for i in range(len(runs) - 1)]
    return [int(count[s]) for s, _ in runs], drift, fall


def test_quadratic_net_learns_one_unit_per_separated_init_scale():
    """Init-induced staircase: units at init scales a decade-ish apart escape at t ∝ 1/a, one
    after another: the count visits 0, 1, 2, 3, each stage held, and each fall of the loss
    to the next stage exceeds the drift on the plateau before it (a drop, not a slope). The
    control, equal init scales, escapes at once: stages 0 and 3, one drop."""
    count, loss = _staircase([0.1, 0.02, 0.004])
    units, drift, fall = _stages(count, loss)
    assert units == [0, 1, 2, 3], count
    assert all(f > d for f, d in zip(fall, drift[1:-1], strict=False)), (fall, drift)
    count, loss = _staircase([0.02, 0.02, 0.02])
    assert _stages(count, loss)[0] == [0, 3], count


def test_units_observable_refuses_a_net_without_a_rule_before_training():
    net = bf.init_gaussian(np.zeros(2, np.uint32), (2, 3, 3, 1), scale=0.1)
    data = bf.Dataset(np.eye(2), np.ones((2, 1)))
    with pytest.raises(ValueError, match="no effective-unit rule"):
        bf.train(net, data, steps=1, lr=0.1, alpha=0.0, observables="units")
    with pytest.raises(ValueError, match="at α = 0;"):  # an ensemble: every slope's rule is checked
        bf.train(net, data, steps=1, lr=0.1, alpha=np.array([1.0, 0.0]), observables="units")


def test_linear_net_counts_rank_over_time():
    """Data-induced staircase of a linear net from a small init: the rank of W₂W₁ steps up one
    direction at a time (target singular values 4, 1, 0.25), and the weights are not kept."""
    rng = np.random.default_rng(1)
    X = rng.normal(size=(300, 3))
    X = X @ np.linalg.inv(np.linalg.cholesky(X.T @ X / 300)).T  # white: XᵀX/N = I
    data = bf.Dataset(X, X @ np.diag([4.0, 1.0, 0.25]))
    net = bf.init_gaussian(np.zeros(2, np.uint32), (3, 3, 3), scale=1e-4)
    run = bf.train(net, data, steps=3000, lr=0.02, alpha=1.0, n_records=60, spacing="log",
                   observables="units")
    assert run.path is None and run.units["magnitudes"].shape == (len(run.t), 3)
    assert _stages(np.asarray(run.units["count"]), np.asarray(run.loss))[0] == [0, 1, 2, 3]
    # the threshold is the init bound of the init's own scale (§11.1), the same at every record
    assert np.all(run.units["threshold"] == bf.effective_units(net, 1.0, init=net).threshold)


def test_units_of_an_ensemble_are_per_member():
    """An ensemble over slopes: member b's counts are those of its own run."""
    rng = np.random.default_rng(2)
    X = rng.normal(size=(50, 2))
    data = bf.Dataset(X, X @ np.array([[2.0], [0.5]]))
    net = bf.init_gaussian(np.zeros(2, np.uint32), (2, 4, 1), scale=1e-3)
    ens = bf.train(net, data, steps=200, lr=0.05, alpha=np.array([0.0, 1.0]), n_records=5,
                   observables="units")
    assert ens.units["count"].shape == (2, 5) and ens.units["magnitudes"].shape == (2, 5, 4)
    lin = bf.train(net, data, steps=200, lr=0.05, alpha=1.0, n_records=5, observables="units")
    assert np.array_equal(ens.units["count"][1], lin.units["count"])
