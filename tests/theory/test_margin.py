"""Hard-margin SVM without intercept and its KKT certificate (biasfree.theory.margin).

Oracle: two active points z_1 = (2, 1), z_2 = (1, 2) (z = y x), their negatives with
the opposite labels, and an inactive point. With both constraints active,
``w = Zᵀμ``, ``Z Zᵀ μ = 1``: ``Z Zᵀ = [[5, 4], [4, 5]]`` gives μ = (1/9, 1/9) >= 0, so
``w_svm = (1/3, 1/3)`` exactly, direction (1, 1)/√2, margin 1/||w|| = 3/√2.
"""

import numpy as np
import pytest

from biasfree.theory.margin import KKT_TOL, cosine, hard_margin_svm, kkt_residual, margin_ratio

pytestmark = pytest.mark.numerics  # round-off bounds: make test-portable reruns them

Z = np.array([[2.0, 1.0], [1.0, 2.0], [3.0, 3.0]])
X = np.concatenate([Z, -Z])
Y = np.array([1.0, 1.0, 1.0, -1.0, -1.0, -1.0])
W_SVM = np.array([1.0, 1.0]) / 3


def test_svm_matches_the_closed_form():
    w = hard_margin_svm(X, Y)
    # SLSQP at ftol 1e-15: the solution to ~1e-8 (square root of the objective tolerance)
    np.testing.assert_allclose(w, W_SVM, atol=1e-7)
    assert kkt_residual(X, Y, w) <= KKT_TOL
    assert kkt_residual(X, Y, W_SVM) <= 1e-15  # the closed form is its own certificate


def test_svm_known_solution_axis_case():
    """{±(1, ±1/2)} labelled by sign x_1: both constraints w_1 ± w_2/2 >= 1 active, w = (1, 0)."""
    Xa = np.array([[1.0, 0.5], [1.0, -0.5], [-1.0, -0.5], [-1.0, 0.5]])
    w = hard_margin_svm(Xa, np.array([1.0, 1.0, -1.0, -1.0]))
    np.testing.assert_allclose(w, [1.0, 0.0], atol=1e-7)


def test_certificate_rejects_feasible_non_optimal_and_infeasible_w():
    # 2 w_svm meets every constraint with margin >= 2: none active, the whole of w is residual
    assert kkt_residual(X, Y, 2 * W_SVM) == pytest.approx(1.0, abs=1e-15)
    # (0.5, 0.25): z_1 margin 1.25 (inactive), z_2 margin 1.0 (active), z_3 1.75. Projecting w
    # on the cone of z_2 = (1, 2): μ = (wᵀz_2)/||z_2||² = 0.2, residual w - 0.2 z_2 = (0.3, -0.15)
    w = np.array([0.5, 0.25])
    expected = np.hypot(0.3, 0.15) / np.hypot(0.5, 0.25)
    assert kkt_residual(X, Y, w) == pytest.approx(expected, abs=1e-14)
    # W_SVM scaled by 0.9 violates both active constraints by 0.1
    assert kkt_residual(X, Y, 0.9 * W_SVM) == pytest.approx(0.1, abs=1e-14)


def test_non_separable_data_and_bad_labels_raise():
    with pytest.raises(ValueError, match="not separable"):
        hard_margin_svm(np.array([[1.0, 0.0], [-1.0, 0.0]]), np.array([1.0, 1.0]))
    with pytest.raises(ValueError, match="-1 or \\+1"):
        hard_margin_svm(X, np.abs(Y) - 1.0)


def test_cosine_and_margin_ratio():
    B = np.array([[1.0, 0.0], [0.0, 2.0], [-3.0, 0.0]])
    np.testing.assert_allclose(cosine(B, np.array([2.0, 0.0])), [1.0, 0.0, -1.0], atol=1e-15)
    # the SVM direction has ratio 1 at any scale; (1, 0) has min_i z_i1 / 1 = 1 against 3/√2
    np.testing.assert_allclose(margin_ratio(np.array([5 * W_SVM, [1.0, 0.0], [-1.0, 0.0]]), X, Y, W_SVM),
                               [1.0, np.sqrt(2) / 3, -3 * np.sqrt(2) / 3], rtol=1e-14)
