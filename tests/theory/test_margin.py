"""Hard-margin SVM without intercept and its KKT certificate (biasfree.theory.margin).

Oracle: two active points z_1 = (2, 1), z_2 = (1, 2) (z = y x), their negatives with
the opposite labels, and an inactive point. With both constraints active,
``w = Zᵀμ``, ``Z Zᵀ μ = 1``: ``Z Zᵀ = [[5, 4], [4, 5]]`` gives μ = (1/9, 1/9) >= 0, so
``w_svm = (1/3, 1/3)`` exactly, direction (1, 1)/√2, margin 1/||w|| = 3/√2.
"""

import numpy as np
import pytest
from roundoff import EPS, gamma

from biasfree.theory.margin import KKT_TOL, cosine, hard_margin_svm, kkt_residual, margin_ratio

pytestmark = pytest.mark.numerics  # round-off bounds: make test-portable reruns them

Z = np.array([[2.0, 1.0], [1.0, 2.0], [3.0, 3.0]])
X = np.concatenate([Z, -Z])
Y = np.array([1.0, 1.0, 1.0, -1.0, -1.0, -1.0])
W_SVM = np.array([1.0, 1.0]) / 3


def _kkt_roundoff(Z_active, mu, w):
    """Round-off in kkt_residual when w lies exactly in the cone of the active z_i (w = Z_Aᵀμ):
    the margins z_iᵀw are length-2 dots on rounded w (γ_3 |z_i|ᵀ|w|), and nnls's small
    backward-stable solve leaves a residual <= γ_k (||w|| + ||Z_A||₂ ||μ||) (k = 8 covers
    its length-2 sums, two Householder reflections and the norms), divided by ||w||."""
    w = np.abs(np.asarray(w))
    return gamma(8) * max(np.max(np.abs(Z_active) @ w),
                          1 + np.linalg.norm(Z_active, 2) * np.linalg.norm(mu) / np.linalg.norm(w))


def test_svm_matches_the_closed_form():
    w = hard_margin_svm(X, Y)
    # solver error, not round-off: SLSQP stops when the objective ½||w||² moves by < ftol
    # = 1e-15, which pins w only to ~√ftol ≈ 3e-8 (first-order change of a quadratic that
    # is stationary on the active set); 1e-7 = 3√ftol, against an O(0.1) gap to any other
    # vertex of the constraints
    np.testing.assert_allclose(w, W_SVM, atol=3 * np.sqrt(1e-15))
    assert kkt_residual(X, Y, w) <= KKT_TOL
    # the closed form is its own certificate: round-off only (μ = (1/9, 1/9), both active)
    assert kkt_residual(X, Y, W_SVM) <= _kkt_roundoff(Z[:2], [1 / 9, 1 / 9], W_SVM)


def test_svm_known_solution_axis_case():
    """{±(1, ±1/2)} labelled by sign x_1: both constraints w_1 ± w_2/2 >= 1 active, w = (1, 0)."""
    Xa = np.array([[1.0, 0.5], [1.0, -0.5], [-1.0, -0.5], [-1.0, 0.5]])
    w = hard_margin_svm(Xa, np.array([1.0, 1.0, -1.0, -1.0]))
    # the same solver setting as above: w to 3√ftol (ftol 1e-15), not round-off
    np.testing.assert_allclose(w, [1.0, 0.0], atol=3 * np.sqrt(1e-15))


def test_certificate_rejects_feasible_non_optimal_and_infeasible_w():
    # 2 w_svm meets every constraint with margin >= 2: none active, the whole of w is residual
    # (the residual is then ||w|| / ||w||: the same norm computed twice, x/x = 1 exactly)
    assert kkt_residual(X, Y, 2 * W_SVM) == 1.0
    # (0.5, 0.25): z_1 margin 1.25 (inactive), z_2 margin 1.0 (active), z_3 1.75. Projecting w
    # on the cone of z_2 = (1, 2): μ = (wᵀz_2)/||z_2||² = 0.2, residual w - 0.2 z_2 = (0.3, -0.15)
    w = np.array([0.5, 0.25])
    expected = np.hypot(0.3, 0.15) / np.hypot(0.5, 0.25)
    # round-off of the one-constraint nnls (_kkt_roundoff, μ = 0.2) and of `expected` (3ε)
    z2 = Z[1:2]
    assert kkt_residual(X, Y, w) == pytest.approx(expected, abs=_kkt_roundoff(z2, [0.2], w) + 3 * EPS)
    # W_SVM scaled by 0.9 violates both active constraints by 0.1
    # 1 − z_iᵀ(0.9 w) with z_iᵀ(0.9 w) = 0.9 to γ_4 (two roundings of w, a length-2 dot):
    # 1 − 0.9 is then exact (Sterbenz); 0.1 itself is rounded (ε/2 · 0.1); the nnls part is
    # ~γ_8, far below 0.1
    assert kkt_residual(X, Y, 0.9 * W_SVM) == pytest.approx(0.1, abs=gamma(4) * 0.9 + EPS * 0.1)


def test_non_separable_data_and_bad_labels_raise():
    with pytest.raises(ValueError, match="not separable"):
        hard_margin_svm(np.array([[1.0, 0.0], [-1.0, 0.0]]), np.array([1.0, 1.0]))
    with pytest.raises(ValueError, match="-1 or \\+1"):
        hard_margin_svm(X, np.abs(Y) - 1.0)


def test_cosine_and_margin_ratio():
    B = np.array([[1.0, 0.0], [0.0, 2.0], [-3.0, 0.0]])
    # (B w)/(||b|| ||w||): a length-2 dot (γ_2), two norms (γ_2/2 + ε each), a product and a
    # division: <= γ_6 relative on |cos| <= 1 (here every step is exact on small integers)
    np.testing.assert_allclose(cosine(B, np.array([2.0, 0.0])), [1.0, 0.0, -1.0], atol=gamma(6))
    # the SVM direction has ratio 1 at any scale; (1, 0) has min_i z_i1 / 1 = 1 against 3/√2
    np.testing.assert_allclose(margin_ratio(np.array([5 * W_SVM, [1.0, 0.0], [-1.0, 0.0]]), X, Y, W_SVM),
                               [1.0, np.sqrt(2) / 3, -3 * np.sqrt(2) / 3],
                               # W_SVM and 5 W_SVM rounded (2ε), length-2 dots (γ_2), two norms
                               # (γ_2 + 2ε), product and division (2ε), √2/3 on the right (3ε)
                               rtol=gamma(12))
