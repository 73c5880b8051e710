"""The real-data experiment's config validation and its data pipeline: the held-out
images get the training set's whitening map, and the training set is exactly white and
symmetric after dropping the null pixel directions. (Its tiny preset runs, with every
check, in test_experiments.)"""

import numpy as np
import pytest
from roundoff import matmul_gap

import biasfree as bf
from biasfree.claims import get
from biasfree.claims.real_data import PRESETS, Config

pytestmark = pytest.mark.numerics  # round-off bounds: make test-portable reruns them


def test_registered_with_presets():
    exp = get("real-data")
    assert set(exp.presets) == {"tiny", "paper"} and exp.config is Config
    assert exp.paper_claim.startswith("Claim ")


@pytest.mark.parametrize("kw, match", [
    ({"width": 41}, "even"), ({"alpha": 1.0}, "alpha"), ({"test_fraction": 1.0}, "test_fraction"),
    ({"n_images": 5}, "n_images"), ({"lr": 0.0}, "lr"),
])
def test_config_rejects_bad_values(kw, match):
    with pytest.raises(ValueError, match=match):
        Config(**kw)


def test_pipeline_whitens_training_set_and_maps_test_set_alike():
    raw = bf.load_data("digits", symmetrize_data=False, n=PRESETS["tiny"].n_images, seed=0)
    Xs, Ys = (np.asarray(a) for a in bf.symmetrize(raw.X, raw.Y))
    w = bf.data.whiten(Xs, rank="auto")
    X, M = np.asarray(w.X), np.asarray(w.M)
    assert w.dropped >= 3  # at least the three pixels that are zero in every digit
    assert bf.data.asymmetry(X, Ys) == 0.0  # a linear map keeps the mirror pairs exact
    kappa = w.eigenvalues[0] / w.eigenvalues[w.rank - 1]
    # round-off of an eigendecomposition of condition κ: 100 ε κ
    assert np.max(np.abs(X.T @ X / X.shape[0] - np.eye(w.rank))) <= 100 * np.finfo(float).eps * kappa
    # the same map on the held-out rows: one product, two row counts (BLAS may block them
    # differently), so equal to the dot-product bound 2 γ_d |X| |M|
    gap = np.abs(raw.X @ M - Xs[: raw.X.shape[0]] @ M)
    np.testing.assert_array_less(gap, matmul_gap(raw.X, M) + np.finfo(float).tiny)
