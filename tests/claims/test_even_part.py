"""Helpers shared by the even-part, robustness and breaking experiments."""

import numpy as np
import pytest
from roundoff import EPS, gamma, lstsq_residual_gap

from biasfree.claims.checks import loglog_slope
from biasfree.theory import linear_floor

pytestmark = pytest.mark.numerics  # round-off bounds: make test-portable reruns them


def test_loglog_slope_recovers_power_law():
    x = np.geomspace(1e-3, 1.0, 7)
    # exact power law: a zero-residual least-squares fit of v = log y on A = [u, 1], u = log x.
    # A backward-stable solve (γ_{2n}: QR/SVD of n rows) of data rounded once (logs, the
    # power: 2ε relative) moves the solution β = (-1/2, log 3) by at most
    # κ(A) (4γ_{2n} ||β|| + 2ε ||v|| / ||A||₂) (no κ² term: the residual is zero)
    u, v = np.log(x), np.log(3.0 * x**-0.5)
    A = np.stack([u, np.ones_like(u)], axis=1)
    tol = np.linalg.cond(A) * (4 * gamma(2 * x.size) * np.hypot(0.5, np.log(3.0))
                               + 2 * EPS * np.linalg.norm(v) / np.linalg.norm(A, 2))
    assert abs(loglog_slope(x, 3.0 * x**-0.5) + 0.5) <= tol


def _exact_fit_floor(X, Y):
    """Bound on ``linear_floor`` when Y = X B exactly: lstsq is backward stable (the exact
    fit of X + ΔX, Y + ΔY with ||ΔX|| <= γ_{Nd} ||X||, Higham §20), so the residual is at most
    ``2 γ_{Nd} (||X||₂ ||B̂|| + ||Y||)`` plus ``γ_d |X||B̂|`` for Y - XB̂; the floor is ½ its
    square over N. A target the fit misses gives O(1)."""
    return 0.5 * lstsq_residual_gap(X, Y) ** 2 / X.shape[0]


def test_linear_floor_exact_cases():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 3))
    B = rng.normal(size=(3, 1))
    # a linear target is fitted exactly: floor at round-off (targets O(1))
    assert linear_floor(X, X @ B) <= _exact_fit_floor(X, X @ B)
    # a constant target: no linear fit helps much, an intercept removes it exactly
    Y = np.ones((30, 1))
    assert linear_floor(X, Y, intercept=True) <= _exact_fit_floor(np.hstack([X, np.ones((30, 1))]), Y)
    assert linear_floor(X, Y) > 0.1
