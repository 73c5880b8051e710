"""Symmetric data, whitening, targets and labels (docs/theory.md §1.3, §1.4, §2.1, §3.1)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from roundoff import EPS, gamma, matmul_gap, whiten_gap

import biasfree as bf

pytestmark = pytest.mark.numerics  # round-off bounds: make test-portable reruns them


def _key(i):
    return jax.random.PRNGKey(i)


@pytest.fixture(scope="module")
def X_raw():
    return np.random.default_rng(0).normal(size=(25, 3))


# ------------------------------------------------------------------ symmetry


def test_symmetrize_and_is_symmetric(X_raw):
    Y = X_raw[:, :1] ** 3 - X_raw[:, 1:2]  # any function: symmetrize mirrors the pair
    Xs, Ys = bf.symmetrize(X_raw, Y)
    assert Xs.shape == (50, 3) and Ys.shape == (50, 1)
    np.testing.assert_array_equal(Xs[25:], -X_raw)
    np.testing.assert_array_equal(Ys[25:], -Y)
    assert bf.data.is_symmetric(Xs, Ys) and bf.data.is_symmetric(Xs)
    Xh, Yh = bf.data.asymmetric_half(Xs, Ys)
    np.testing.assert_array_equal(Xh, X_raw)
    assert not bf.data.is_symmetric(Xh, Yh)
    # a perturbation above tol breaks symmetry, one below it does not: the mirror pairs are
    # exact negations (no rounding), so the decision is 1e-6 vs 1e-9 vs 1e-12 on O(1) entries
    for eps, expected in ((1e-6, False), (1e-12, True)):
        Xp = np.array(Xs)
        Xp[3, 1] += eps
        assert bf.data.is_symmetric(Xp, Ys, tol=1e-9) is expected
    # symmetric inputs with a non-odd target are not a symmetric set
    assert not bf.data.is_symmetric(Xs, jnp.abs(Xs[:, :1]))


def test_whiten_gives_identity_covariance_and_keeps_symmetry(X_raw):
    Xs = bf.symmetrize(X_raw @ np.array([[2.0, 0.5, 0.0], [0.0, 1.0, 0.3], [0.0, 0.0, 0.2]]))
    Xw, M = bf.data.whiten(Xs)
    # 4 γ_{N+d} κ with κ = m/λ_min of this 3x3 Σ (whiten_gap); a wrong map is off by O(1)
    np.testing.assert_allclose(bf.data.input_covariance(Xw), np.eye(3), rtol=0, atol=whiten_gap(Xs))
    # X M by XLA here and by NumPy there: 2 γ_d |X||M| (matmul_gap)
    np.testing.assert_array_less(np.abs(np.asarray(Xw) - Xs @ np.asarray(M)), matmul_gap(Xs, M) + 1e-300)
    # symmetric Σ^{-1/2} = V diag(s) Vᵀ: M_ij, M_ji sum the same products in other orders,
    # each product rounded once more: 2 γ_{d+1} ||M||₂ (rows of V unit)
    np.testing.assert_allclose(M, M.T, rtol=0, atol=2 * gamma(4) * np.linalg.norm(np.asarray(M), 2))
    assert bf.data.is_symmetric(Xw)
    with pytest.raises(ValueError, match="rank-deficient"):
        bf.data.whiten(np.ones((10, 3)))


def test_covariances(X_raw):
    Y = X_raw @ np.array([[1.0], [2.0], [0.0]])
    # the same products by two kernels, then one division: 2 γ_N |X|ᵀ|X| / N + ε (matmul_gap)
    np.testing.assert_array_less(np.abs(bf.data.input_covariance(X_raw) - X_raw.T @ X_raw / 25),
                                 (matmul_gap(X_raw.T, X_raw) + EPS * np.abs(X_raw).T @ np.abs(X_raw)) / 25)
    np.testing.assert_array_less(np.abs(bf.data.cross_covariance(X_raw, Y) - Y.T @ X_raw / 25),
                                 (matmul_gap(Y.T, X_raw) + EPS * np.abs(Y).T @ np.abs(X_raw)) / 25 + 1e-300)
    assert bf.data.cross_covariance(X_raw, Y).shape == (1, 3)


# ------------------------------------------------------------------ targets


def test_teacher_matrix_has_exact_singular_values():
    s = np.array([3.0, 1.0, 0.25])
    T = bf.data.teacher_matrix(_key(1), 5, s)
    assert T.shape == (3, 5)
    # T = U diag(s) Vᵀ with QR factors orthonormal to O(d ε); the SVD is backward stable
    # (Weyl: |Δσ| <= ||ΔT||₂): 4 γ_{d+p} s_max covers both QRs, the product and the SVD
    np.testing.assert_allclose(np.linalg.svd(np.asarray(T), compute_uv=False), s, rtol=0,
                               atol=4 * gamma(5 + 3) * s[0])
    with pytest.raises(ValueError, match="need p <= d"):
        bf.data.teacher_matrix(_key(1), 2, s)


def test_sine_target_weights_range_and_oddness():
    d = 64
    f, w = bf.sine_target(_key(2), d)
    assert w.shape == (d,)
    assert float(jnp.min(w)) >= -0.5 and float(jnp.max(w)) <= 0.5
    # U[-1/2, 1/2]: with 64 draws both extremes lie within 0.1 of the ends unless the
    # draw is off (probability 2 * 0.8^64 ~ 1e-6); a U[-1, 1] or U[0, 1] bug fails
    assert float(jnp.min(w)) < -0.4 and float(jnp.max(w)) > 0.4
    X = np.random.default_rng(2).normal(size=(25, d))
    y = f(X)
    z = X @ np.asarray(w)
    assert y.shape == (25, 1)
    # z by two kernels differs by 2 γ_d |X||w| (matmul_gap); z + sin 4z has slope <= 5 in z,
    # plus, on each side, a rounding of sin and of the sum (4z is exact): 4ε(|z| + 1)
    dz = matmul_gap(X, np.asarray(w)[:, None])[:, 0]
    bound = 5 * dz + 4 * EPS * (np.abs(z) + 1)
    np.testing.assert_array_less(np.abs(y[:, 0] - (z + np.sin(4 * z))), bound)
    # -X negates each product exactly, but the kernel may sum in another order for -X: the same
    # bound (sin is odd up to its rounding)
    np.testing.assert_array_less(np.abs(np.asarray(f(-X))[:, 0] + y[:, 0]), bound)


def test_product_abs_xor_parities(X_raw):
    odd = bf.data.product_target((0, 1, 2))
    # a product of 3 factors: 2 roundings each side, in any order: γ_2 twice
    np.testing.assert_allclose(odd(X_raw)[:, 0], np.prod(X_raw, axis=1), rtol=2 * gamma(2))
    np.testing.assert_allclose(odd(-X_raw), -odd(X_raw), rtol=0, atol=0)
    even_pair = bf.data.product_target((0, 1))
    np.testing.assert_allclose(even_pair(-X_raw), even_pair(X_raw), rtol=0, atol=0)
    for g in (bf.data.abs_target(1), bf.data.xor_target(0, 2)):
        assert g(X_raw).shape == (25, 1)
        np.testing.assert_array_equal(g(-X_raw), g(X_raw))
    np.testing.assert_array_equal(bf.data.abs_target(1)(X_raw)[:, 0], np.abs(X_raw[:, 1]))
    assert set(np.unique(np.asarray(bf.data.xor_target(0, 2)(X_raw)))) == {-1.0, 1.0}
    T = np.array([[1.0, -2.0, 0.5]])
    np.testing.assert_array_less(np.abs(bf.linear_target(T)(X_raw) - X_raw @ T.T), matmul_gap(X_raw, T.T))


def test_label_data_is_separable_with_margin():
    X = bf.symmetrize(np.random.default_rng(3).normal(size=(200, 4)))
    margin = 0.3
    Xk, Y, w = bf.data.label_data(_key(3), X, margin)
    assert Xk.shape[0] == Y.shape[0] and Y.shape[1] == 1
    # w/||w|| then its norm: d + 2 roundings, γ_{d+2} each way
    np.testing.assert_allclose(jnp.linalg.norm(w), 1.0, rtol=2 * gamma(4 + 2))
    # |w·x| ~ |N(0,1)| < 0.3 for ~24% of points: some are dropped, most kept
    assert 0.5 * X.shape[0] < Xk.shape[0] < X.shape[0]
    assert float(jnp.min(Y[:, 0] * (Xk @ w))) >= margin  # separable with margin
    assert set(np.unique(np.asarray(Y))) == {-1.0, 1.0}
    assert bf.data.is_symmetric(Xk, Y)  # odd labels on symmetric inputs stay symmetric


# ------------------------------------------------------------------ make_dataset


def test_make_dataset_shapes_symmetry_and_test_set():
    T = np.array([[1.0, 0.0, -1.0], [0.5, 0.5, 0.0]])
    data = bf.make_dataset(_key(4), bf.linear_target(T), 30, 3, n_test=10)
    assert data.X.shape == (60, 3) and data.Y.shape == (60, 2)
    assert data.X_test.shape == (10, 3) and data.Y_test.shape == (10, 2)
    assert data.has_test and bf.data.is_symmetric(data.X, data.Y)
    # the same product by XLA and NumPy: 2 γ_d |X||T|ᵀ (matmul_gap)
    np.testing.assert_array_less(np.abs(data.Y - data.X @ T.T), matmul_gap(data.X, T.T) + 1e-300)
    np.testing.assert_array_less(np.abs(data.Y_test - data.X_test @ T.T),
                                 matmul_gap(data.X_test, T.T) + 1e-300)
    noisy = bf.make_dataset(_key(4), bf.linear_target(T), 30, 3, noise=0.1)
    assert bf.data.is_symmetric(noisy.X, noisy.Y)  # noise is mirrored with its point
    assert float(jnp.max(jnp.abs(noisy.Y - noisy.X @ T.T))) > 1e-3
    asym = bf.make_dataset(_key(4), bf.linear_target(T), 30, 3, symmetric=False)
    assert asym.X.shape == (30, 3) and not bf.data.is_symmetric(asym.X, asym.Y)


def test_make_dataset_whitened_is_consistent():
    """Whitening changes only the representation: X_w = X_raw M with XᵀX/N = I, targets
    are the raw ones, and the test inputs get the same map M."""
    f = bf.data.product_target((0, 1, 2))
    cov = np.array([[2.0, 0.6, 0.0], [0.6, 1.0, 0.0], [0.0, 0.0, 0.5]])
    raw = bf.make_dataset(_key(6), f, 30, 3, n_test=10, cov=cov)
    wht = bf.make_dataset(_key(6), f, 30, 3, n_test=10, cov=cov, whitened=True)
    Xw, M = bf.data.whiten(raw.X)
    # wht.X and Xw: whiten on the same raw.X, by the same code path: bitwise
    np.testing.assert_array_equal(wht.X, Xw)
    np.testing.assert_allclose(bf.data.input_covariance(wht.X), np.eye(3), rtol=0, atol=whiten_gap(raw.X))
    np.testing.assert_array_equal(wht.Y, raw.Y)
    # a product of 3 factors in any order: 2 γ_2 relative
    np.testing.assert_allclose(wht.Y, f(raw.X), rtol=2 * gamma(2), atol=0)
    np.testing.assert_array_less(np.abs(wht.X_test - raw.X_test @ M), matmul_gap(raw.X_test, M) + 1e-300)
    np.testing.assert_array_equal(wht.Y_test, raw.Y_test)
    assert bf.data.is_symmetric(wht.X, wht.Y)
    # the raw inputs do follow cov: sample covariance within sampling error (N = 60)
    assert float(jnp.max(jnp.abs(bf.data.input_covariance(raw.X) - cov))) < 1.0


def test_gaussian_inputs_cov_shape_error():
    with pytest.raises(ValueError, match=r"cov must have shape \(3, 3\)"):
        bf.data.gaussian_inputs(_key(0), 5, 3, cov=np.eye(2))


def test_make_dataset_can_keep_an_even_target_on_the_mirror_points():
    key = jax.random.PRNGKey(5)
    target = bf.data.abs_target(0)
    odd_only = bf.make_dataset(key, target, 30, 3)
    kept = bf.make_dataset(key, target, 30, 3, mirror_targets=False)
    assert bf.data.is_symmetric(odd_only.X, odd_only.Y)  # (x, y) and (-x, -y): |x1| loses itself
    assert np.allclose(kept.X, odd_only.X, atol=0, rtol=0)
    np.testing.assert_array_equal(kept.Y, target(kept.X))  # y = |x1| on every point: abs is exact
    assert bf.data.is_symmetric(kept.X)
