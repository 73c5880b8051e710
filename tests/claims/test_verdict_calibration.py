"""The verdict-calibration experiment's own pieces (its tiny preset runs in
tests/claims/test_experiments.py with every experiment): zero-padded hidden units change nothing,
and the config refuses grids the figure cannot draw."""

import numpy as np
import pytest
from roundoff import chain_length, trajectory_gap

from biasfree.claims.verdict_calibration import Config
from biasfree.claims.verdict_calibration.run import _gaussian, _pad
from biasfree.dynamics.twin_training import train_with_twin

pytestmark = pytest.mark.numerics  # round-off bounds: make test-portable reruns them


def test_zero_padded_units_train_exactly_like_the_unpadded_net():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(12, 3))
    X = np.vstack([X, -X])
    Y = np.sin(X[:, :1])
    for widths, bias in (((3, 5, 1), False), ((3, 4, 4, 1), True)):
        net = _gaussian(rng, widths, 0.3, bias)
        big = _pad(net, 9)
        runs = [train_with_twin(p, p, X, Y, alpha=0.0, lr=0.05, time_scale=1.0, steps=50, n_records=3)
                for p in (net, big)]
        # the padded units add exact zeros to every sum: the same numbers up to summation order:
        # trajectory_gap over the 50 steps at γ of the padded net's chain length (factor 3: the
        # mirrored path), × the run's measured sensitivity; a padded unit that moved is O(L) off
        def run(p):
            return np.asarray(train_with_twin(p, p, X, Y, alpha=0.0, lr=0.05, time_scale=1.0, steps=50,
                                              n_records=3).loss)
        tol = trajectory_gap(run, big, 50, chain_length(big, X.shape[0]), factor=3)
        np.testing.assert_array_less(np.abs(runs[1].loss - runs[0].loss), tol + 1e-300)
        assert runs[1].gap_step == runs[0].gap_step
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
