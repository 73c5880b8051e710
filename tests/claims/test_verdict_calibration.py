"""The verdict-calibration experiment's own pieces (its tiny preset runs in
tests/claims/test_experiments.py with every experiment): zero-padded hidden units change nothing,
the config refuses grids the figure cannot draw, the families' data and truths are what they say,
and the families' checks fail on the cases they exclude."""

from types import SimpleNamespace

import numpy as np
import pytest
from roundoff import chain_length, trajectory_gap

from biasfree import Dataset, GDConfig, pair_up, train
from biasfree.analysis import verdict as vd
from biasfree.claims.checks import ROUND_OFF, numpy_gaussian
from biasfree.claims.verdict_calibration import Config
from biasfree.claims.verdict_calibration.evaluate import Family, _answer, measure, truth_setup
from biasfree.claims.verdict_calibration.families import conv_data, reference_loss
from biasfree.claims.verdict_calibration.run import _pad
from biasfree.claims.verdict_calibration.summary import summarise

pytestmark = pytest.mark.numerics  # round-off bounds: make test-portable reruns them


def test_zero_padded_units_train_exactly_like_the_unpadded_net():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(12, 3))
    X = np.vstack([X, -X])
    Y = np.sin(X[:, :1])
    for widths, bias in (((3, 5, 1), False), ((3, 4, 4, 1), True)):
        net = numpy_gaussian(rng, widths, 0.3, bias)
        big = _pad(net, 9)
        cfg = GDConfig(alpha=0.0, lr=0.05, steps=50, n_records=3)
        runs = [train(p, Dataset(X, Y), cfg, twin=p, observables="loss") for p in (net, big)]
        # the padded units add exact zeros to every sum: the same numbers up to summation order:
        # trajectory_gap over the 50 steps at γ of the padded net's chain length (factor 3: the
        # mirrored path), × the run's measured sensitivity; a padded unit that moved is O(L) off
        def run(p, cfg=cfg):
            return np.asarray(train(p, Dataset(X, Y), cfg, twin=p, observables="loss").loss)
        tol = trajectory_gap(run, big, 50, chain_length(big, X.shape[0]), factor=3)
        np.testing.assert_array_less(np.abs(runs[1].loss - runs[0].loss), tol + 1e-300)
        assert runs[1].twin_gap_step == runs[0].twin_gap_step
        assert np.all(np.asarray(runs[1].params[0].W)[widths[1]:] == 0.0)  # still zero


def test_config_refuses_grids_without_a_contour():
    with pytest.raises(ValueError, match="widths"):
        Config(widths=(8,))
    with pytest.raises(ValueError, match="scales"):
        Config(scales=(1e-3,), torch_default=False)
    with pytest.raises(ValueError, match="depths"):
        Config(depths=(4,))
    with pytest.raises(ValueError, match="asymmetries"):
        Config(asymmetries=(1.5,))


def test_config_refuses_bad_families():
    with pytest.raises(ValueError, match="families"):
        Config(families=("conv3d",))
    with pytest.raises(ValueError, match="family_widths"):
        Config(family_widths=(7,))  # pairs split the width in two
    with pytest.raises(ValueError, match="conv_kernel"):
        Config(conv_kernel=9, conv_image=4)


def test_conv_data_is_mirrored_with_an_odd_target():
    X, Y = conv_data(np.random.default_rng(0), (3, 3), 5, 2)
    assert X.shape == (10, 9) and Y.shape == (10, 1)
    assert np.array_equal(X[5:], -X[:5]) and np.array_equal(Y[5:], -Y[:5])  # negation is exact


def _family(name, level, gap, assumption=False):
    n = len(gap)
    return Family(name, ("x",) * n, ("x",) * n, np.full(n, vd.LEVELS.index(level)), np.full(n, assumption),
                  np.full(n, np.nan), np.asarray(gap, float), np.ones(n, bool), np.ones(n, int))


def test_family_checks_fail_on_the_cases_they_exclude():
    """A net called linear that measures 1% off its twin is a false 'linear'; a pair net called
    'not' on evidence, or measured off its twin, fails the exact family's checks."""
    checks, metrics, _, _ = summarise([_family("depth3", vd.EFFECTIVE, [0.01, 1e-4])])
    assert not checks["no_false_linear_depth3"].passed and metrics["depth3_false_linear"] == 1
    assert metrics["depth3_effective_not"] == 1 and metrics["depth3_effective_linear"] == 1
    assert summarise([_family("depth3", vd.UNDECIDED, [0.01])])[0]["no_false_linear_depth3"].passed
    pairs = "pairs-large-init"
    c = summarise([_family(pairs, vd.NOT, [1e-16])])[0]
    assert not c["pairs_large_init_never_called_not_on_evidence"].passed
    c = summarise([_family(pairs, vd.NOT, [1e-16], assumption=True)])[0]  # init not small: no claim
    assert c["pairs_large_init_never_called_not_on_evidence"].passed
    assert c["pairs_large_init_measured_exact"].passed
    assert not summarise([_family(pairs, vd.EXACT, [1e-6])])[0]["pairs_large_init_measured_exact"].passed


def test_a_not_resting_only_on_failed_assumptions_is_marked():
    def answer(level, *reasons):
        return _answer(SimpleNamespace(level=level, reasons=reasons), None)[1]
    assert answer(vd.NOT, "init not small: init gain / strongest mode = 3")
    assert answer(vd.NOT, "depth 3 > 2: no linear twin", "init not small: ...")
    assert not answer(vd.NOT, "init not small: ...", "asymmetric inputs: ...")  # evidence among them
    assert not answer(vd.NOT)
    assert not answer(vd.UNDECIDED, "init not small: ...")


def test_pairs_at_large_init_measure_exact_and_a_random_net_does_not():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(10, 3))
    X, Y = np.vstack([X, -X]), np.vstack([np.sin(X[:, :1]), -np.sin(X[:, :1])])
    nets = [pair_up(numpy_gaussian(rng, (3, 4, 1), 1.0, False)), numpy_gaussian(rng, (3, 8, 1), 1.0, False)]
    runs = []
    for p in nets:
        twin, ks, lr, steps, _ = truth_setup(p, X, Y, 200)
        runs.append((p, twin, X, Y, lr, steps, ks, 0.0))
    gap = measure(runs)
    # the pair net: f_even ≡ 0 exactly, so net and twin differ by round-off alone: the claim's budget
    # ROUND_OFF = 1e-10 (ε = 2.2e-16 grown by ≤ 10⁴ steps and ×10 conditioning; 200 steps here);
    # the random net at σ = 1 has an O(1) even part: its gap is O(1), not round-off
    assert gap[0] <= ROUND_OFF and gap[1] > 1e-3
    L0 = 0.5 * np.mean(np.sum(Y**2, axis=1))
    assert reference_loss(1e-9, Y) == L0 and reference_loss(2 * L0, Y) == 2 * L0  # a trained net: ½<|y|²>


def test_the_truth_runs_use_analyses_default_schedule():
    # one rule (measure_step.schedule) for analyse(train=True) and the calibration's truth runs:
    # the sharpness comes from the same code on the same inputs; η = min(¼·2/λ̂, T/1000) and T
    # has inputs that differ by round-off (a₀ from β_eff there, from the odd fit's β here,
    # ~1e-15 relative, through ln(s/a₀ − 1) of size ≥ 1): η agrees to 1e-12 relative, and the
    # step count ⌈T/η⌉ to 1 (T/η within round-off of an integer may round either way)
    import biasfree as bf

    rng = np.random.default_rng(3)
    X = rng.normal(size=(30, 3))
    X, Y = np.vstack([X, -X]), np.vstack([X, -X]) @ rng.normal(size=(3, 1))
    net = numpy_gaussian(rng, (3, 6, 1), 0.1, False)
    _, _, lr, steps, full = truth_setup(net, X, Y, max_steps=10**6)
    cfg = bf.analyse(net, (X, Y), alpha=0.0, train=True).prediction.trained.config
    assert full and cfg.lr == pytest.approx(lr, rel=1e-12) and abs(cfg.steps - steps) <= 1
