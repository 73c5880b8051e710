"""Helpers shared by the even-part, robustness and breaking experiments."""

import numpy as np
import pytest

from biasfree.claims.checks import loglog_slope
from biasfree.theory import linear_floor

pytestmark = pytest.mark.numerics  # round-off bounds: make test-portable reruns them


def test_loglog_slope_recovers_power_law():
    x = np.geomspace(1e-3, 1.0, 7)
    # exact power law: the least-squares fit is exact up to round-off in the logs
    assert abs(loglog_slope(x, 3.0 * x**-0.5) + 0.5) <= 1e-12


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
