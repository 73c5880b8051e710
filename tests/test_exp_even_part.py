"""Helpers shared by the even-part, robustness, breaking and max-margin experiments."""

import numpy as np

from biasfree.experiments._common import batch_scaled, loglog_slope, stack_params
from biasfree.nets import Layer
from biasfree.theory import linear_floor


def test_loglog_slope_recovers_power_law():
    x = np.geomspace(1e-3, 1.0, 7)
    # exact power law: the least-squares fit is exact up to round-off in the logs
    assert abs(loglog_slope(x, 3.0 * x**-0.5) + 0.5) <= 1e-12


def test_batch_scaled_and_stack():
    unit = (Layer(np.ones((3, 2))), Layer(np.full((1, 3), 2.0)))
    P = batch_scaled(unit, [1.0, 0.5])
    assert P[0].W.shape == (2, 3, 2) and P[1].W.shape == (2, 1, 3)
    np.testing.assert_array_equal(P[1].W[1], np.full((1, 3), 1.0))
    both = stack_params(P, P)
    assert both[0].W.shape == (4, 3, 2)
    assert both[0].b is None  # bias-free stays bias-free


def test_linear_floor_exact_cases():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 3))
    B = rng.normal(size=(3, 1))
    # a linear target is fitted exactly: floor at round-off (targets O(1))
    assert linear_floor(X, X @ B) <= 1e-28
    # a constant target: no linear fit helps much, an intercept removes it exactly
    Y = np.ones((30, 1))
    assert linear_floor(X, Y, intercept=True) <= 1e-28
    assert linear_floor(X, Y) > 0.1
