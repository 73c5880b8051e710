"""Helpers of the max-margin experiment: the hard-margin SVM and its KKT certificate.

Oracle: the symmetric set {±(1, ±1/2)} labelled by the sign of x_1 has the hard-margin
SVM without intercept ``w = (1, 0)`` (both constraints ``w_1 ± w_2/2 >= 1`` are active,
and ``(1, 0)`` is the shortest vector meeting them).
"""

import numpy as np
import pytest

from biasfree.experiments.max_margin import KKT_TOL, cosine, hard_margin_svm, kkt_residual

X = np.array([[1.0, 0.5], [1.0, -0.5], [-1.0, -0.5], [-1.0, 0.5]])
Y = np.array([1.0, 1.0, -1.0, -1.0])


def test_svm_known_solution():
    w = hard_margin_svm(X, Y)
    # SLSQP at ftol 1e-15: the solution to ~1e-8 (square root of the objective tolerance)
    np.testing.assert_allclose(w, [1.0, 0.0], atol=1e-7)
    assert kkt_residual(X, Y, w) <= KKT_TOL


def test_certificate_rejects_a_feasible_non_optimal_w():
    # (2, 0) meets every constraint with margin 2: no constraint active, so the
    # stationarity residual is the whole of w (relative residual 1)
    assert kkt_residual(X, Y, np.array([2.0, 0.0])) == pytest.approx(1.0, abs=1e-15)
    # (1, 0.2) violates the constraint of z = (1, -1/2) by 0.1; projecting w on the cone
    # of z leaves w - 0.72 z = (0.28, 0.56), so the residual is 0.28·√5 / √1.04 > 0.1
    expected = 0.28 * np.sqrt(5) / np.sqrt(1.04)
    assert kkt_residual(X, Y, np.array([1.0, 0.2])) == pytest.approx(expected, abs=1e-14)


def test_non_separable_data_raise():
    with pytest.raises(ValueError, match="not separable"):
        hard_margin_svm(np.array([[1.0, 0.0], [-1.0, 0.0]]), np.array([1.0, 1.0]))


def test_cosine():
    B = np.array([[1.0, 0.0], [0.0, 2.0], [-3.0, 0.0]])
    np.testing.assert_allclose(cosine(B, np.array([2.0, 0.0])), [1.0, 0.0, -1.0], atol=1e-15)
