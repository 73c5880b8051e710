"""Data in: bundled digits, files, symmetrisation, rank-deficient whitening, asymmetry."""

import numpy as np
import pytest
from roundoff import gamma, matmul_gap, whiten_gap

import biasfree as bf

EPS = np.finfo(float).eps

pytestmark = pytest.mark.numerics  # round-off bounds: make test-portable reruns them


@pytest.fixture(scope="module")
def digits():
    return bf.load_data("digits")


def test_digits_default_is_symmetrised_one_hot(digits):
    X, Y = digits
    assert X.shape == (2 * 1797, 64) and Y.shape == (2 * 1797, 10)
    assert digits.symmetrised and digits.target == "onehot"
    np.testing.assert_array_equal(X[1797:], -X[:1797])
    np.testing.assert_array_equal(np.abs(Y).sum(axis=1), np.ones(2 * 1797))  # one-hot rows
    assert digits.asymmetry == 0.0 and bf.data.is_symmetric(X, Y)
    assert digits.raw_asymmetry > 1.0  # raw pixels lie on one side of the origin
    assert 0.0 <= X.min() + 1.0 and X.max() <= 1.0  # pixels / 16


def test_regression_target_and_subset():
    d = bf.load_data("digits", target="value", n=100, seed=1)
    assert d.X.shape == (200, 64) and d.Y.shape == (200, 1)
    assert set(np.unique(np.abs(d.Y))) <= set(range(10))
    with pytest.raises(ValueError, match="unknown data"):
        bf.load_data("no-such-set")
    with pytest.raises(ValueError, match="target"):
        bf.load_data("digits", target="labels")


def test_whiten_rank_deficient_digits(digits):
    with pytest.raises(ValueError, match=r"rank-deficient.*rank='auto'"):
        bf.data.whiten(digits.X)
    w = bf.data.whiten(digits.X, rank="auto")
    assert w.dropped == 3 and w.rank == 61 and w.X.shape == (digits.X.shape[0], 61)
    # kept block's condition m/λ_61 ~ 7e6, N + d = 3658 terms: 4 γ_{N+d} κ ≈ 2e-5 (whiten_gap);
    # measured 2e-11; a wrong map or a dropped 1/√λ is off by O(1)
    Xw = np.asarray(w.X)
    np.testing.assert_allclose(Xw.T @ Xw / Xw.shape[0], np.eye(61), rtol=0, atol=whiten_gap(digits.X, 61))
    assert bf.data.is_symmetric(w.X, digits.Y)
    Xw, M = w  # unpacks as the old pair: X M, here by NumPy's BLAS, there by XLA's kernel
    np.testing.assert_array_less(np.abs(np.asarray(Xw) - digits.X @ np.asarray(M)),
                                 matmul_gap(digits.X, M) + np.finfo(float).tiny)
    p = bf.data.whiten(digits.X, rank=30)
    assert p.rank == 30 and p.dropped == 34 and 0.9 < p.kept_variance < 1.0
    Xp = np.asarray(p.X)
    # top 30 directions: κ ~ 600, bound 4 γ_{N+d} κ ≈ 2e-9 (whiten_gap); measured 3e-14
    np.testing.assert_allclose(Xp.T @ Xp / Xp.shape[0], np.eye(30), rtol=0, atol=whiten_gap(digits.X, 30))
    with pytest.raises(ValueError, match="null directions"):
        bf.data.whiten(digits.X, rank=64)


def test_whiten_full_rank_is_unchanged_by_auto():
    X = bf.symmetrize(np.random.default_rng(0).normal(size=(50, 4)))
    a, b = bf.data.whiten(X), bf.data.whiten(X, rank="auto")
    assert b.dropped == 0
    # same Σ^{-1/2}, by the same code path (rank='auto' with nothing dropped is rank=None)
    np.testing.assert_array_equal(np.asarray(a.M), np.asarray(b.M))
    # M = V diag(s) Vᵀ: M_ij and M_ji sum the same d products in other orders, each product
    # rounded once more: <= 2 γ_{d+1} Σ_k s_k |V_ik V_jk| <= 2 γ_{d+1} ||M||₂ (rows of V unit)
    M = np.asarray(a.M)
    np.testing.assert_allclose(M, M.T, rtol=0, atol=2 * gamma(5) * np.linalg.norm(M, 2))


def test_asymmetry_is_zero_exactly_for_mirrored_sets_and_its_stated_value():
    rng = np.random.default_rng(0)
    X, Y = rng.normal(size=(30, 3)), rng.normal(size=(30, 1))
    Xs, Ys = bf.symmetrize(X, Y)
    assert bf.data.asymmetry(Xs, Ys) == 0.0
    # two points z1 = (1, 0), z2 = (3, 0): mirrors -z1, -z2 are nearest to z1 at distances
    # 2 and 4, so A = ((4 + 16) / 2) / ((1 + 9) / 2) = 2
    # sums, squares, roots and one ratio of small integers: a few roundings of <= ε each
    assert bf.data.asymmetry(np.array([[1.0], [3.0]]), np.zeros((2, 1))) == pytest.approx(2.0, rel=8 * EPS)
    half = bf.data.asymmetry(X, Y)
    assert half > 0.3  # no mirrors at all: of order 1


def test_files_round_trip(tmp_path):
    rng = np.random.default_rng(0)
    X, Y = rng.normal(size=(20, 3)), rng.normal(size=(20, 2))
    np.savez(tmp_path / "d.npz", X=X, Y=Y)
    d = bf.load_data(tmp_path / "d.npz")
    assert not d.symmetrised and d.raw_asymmetry == d.asymmetry > 0  # a file is taken as given
    np.testing.assert_array_equal(d.X, X)
    s = bf.load_data(tmp_path / "d.npz", symmetrize_data=True)
    assert s.X.shape == (40, 3) and s.asymmetry == 0.0
    lines = ["a,b,c,y1,y2"] + [",".join(repr(float(v)) for v in row) for row in np.hstack([X, Y])]
    (tmp_path / "d.csv").write_text("\n".join(lines) + "\n")
    c = bf.load_data(tmp_path / "d.csv", y_columns=2)
    np.testing.assert_array_equal(c.X, X)
    np.testing.assert_array_equal(c.Y, Y)
    np.savez(tmp_path / "bad.npz", A=X)
    with pytest.raises(ValueError, match="needs 'X'"):
        bf.load_data(tmp_path / "bad.npz")
    with pytest.raises(FileNotFoundError):
        bf.load_data(tmp_path / "missing.csv")
    for name, X_bad in (("str", np.array([["a"]])), ("complex", np.ones((1, 1)) * 1j)):
        np.savez(tmp_path / f"{name}.npz", X=X_bad, Y=np.ones((1, 1)))
        with pytest.raises(ValueError, match=f"{name}.npz: X and Y must hold real numbers"):
            bf.load_data(tmp_path / f"{name}.npz")  # complex: its imaginary part was dropped
    (tmp_path / "dir.npz").mkdir()
    with pytest.raises(ValueError, match="is a folder, not a file"):  # was IsADirectoryError
        bf.load_data(tmp_path / "dir.npz")
    # Excel's "CSV UTF-8" starts with a byte-order mark: without a header it once made the
    # first row unreadable as numbers, so that row was dropped as if it were a header
    (tmp_path / "bom.csv").write_text("\n".join(lines[1:]) + "\n", encoding="utf-8-sig")
    np.testing.assert_array_equal(bf.load_data(tmp_path / "bom.csv", y_columns=2).X, X)
    (tmp_path / "latin1.csv").write_bytes(b"\xe9,y\n1,2\n")
    with pytest.raises(ValueError, match="latin1.csv is not UTF-8 text .*save it as UTF-8"):
        bf.load_data(tmp_path / "latin1.csv")
