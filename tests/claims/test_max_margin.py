"""The max-margin experiment's own pieces (the SVM and its certificate are tested in
tests/theory/test_margin.py): members named per slope, and configs that would collide."""

import jax
import numpy as np
import pytest

from biasfree.claims.max_margin import Config, member_name
from biasfree.claims.max_margin.run import _members
from biasfree.core.inits import init_gaussian, init_pairs

pytestmark = pytest.mark.numerics  # round-off bounds: make test-portable reruns them


def test_members_are_named_per_init_and_slope_with_twins():
    cfg = Config(d=3, width=4, alphas=(0.0, 0.5), scale=0.1)
    pair = init_pairs(jax.random.PRNGKey(0), (3, 4, 1), 1.0)
    gauss = init_gaussian(jax.random.PRNGKey(1), (3, 4, 1), 1.0)
    members = _members(cfg, pair, gauss)
    assert list(members) == ["pair_alpha_0", "pair_alpha_0.5", "random_alpha_0", "random_alpha_0.5"]
    m = members[member_name("pair", 0.5)]
    assert m.alpha == 0.5 and m.twin
    # one multiplication by 0.1 each side (XLA, NumPy), each within ε/2: 2ε covers both
    np.testing.assert_allclose(m.params[0].W, 0.1 * np.asarray(pair[0].W), rtol=2 * np.finfo(float).eps)
    np.testing.assert_allclose(members["random_alpha_0"].params[1].W, 0.1 * np.asarray(gauss[1].W),
                               rtol=2 * np.finfo(float).eps)


def test_repeated_slopes_are_rejected():
    with pytest.raises(ValueError, match="each slope once"):
        Config(alphas=(0.0, 0.0))
