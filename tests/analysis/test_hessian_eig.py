"""One end of a symmetric operator's spectrum (biasfree.analysis.hessian_eig), which the sharpness
(analysis.measure_step, largest) and the saddles' λ_min (analysis.saddles, smallest) share: each
end, on each path (dense, Lanczos), against numpy.linalg.eigvalsh of the whole matrix, with the
other end as the failing control."""

import numpy as np
import pytest

from biasfree.analysis.hessian_eig import extreme_eigenvalue

EPS = np.finfo(float).eps


def _symmetric(n: int, seed: int) -> np.ndarray:
    """A random symmetric matrix (GOE-like, entries O(1)): ½(A + Aᵀ), A standard normal."""
    A = np.random.default_rng(seed).normal(size=(n, n))
    return 0.5 * (A + A.T)


class Products:
    """``v ↦ H v``, recording whether every product was with a unit vector (the dense path's
    columns) and how many there were."""

    def __init__(self, H):
        self.H, self.calls, self.only_columns = H, 0, True

    def __call__(self, v):
        v = np.ravel(v)
        self.calls += 1
        self.only_columns &= bool(np.count_nonzero(v) == 1 and np.max(v) == 1.0)
        return self.H @ v


def _bound(H, lam, tol):
    """|λ̂ − λ| for either path: LAPACK's backward error n·ε·‖H‖₂ on the whole matrix (its
    factor p(n) is a few n at most; n·ε is generous for n ≤ 300), plus, for Lanczos, ARPACK's
    stopping residual tol·|λ̂| (≥ |λ̂ − λ| for a symmetric H; tol = 0 means ε)."""
    n, norm = H.shape[0], np.linalg.norm(H, 2)
    return n * EPS * norm + max(tol, EPS) * abs(lam)


@pytest.mark.parametrize("which, end", [("LA", -1), ("SA", 0)])
@pytest.mark.parametrize("n, dense_up_to, tol", [(40, 64, 0.0), (300, 64, 0.0), (300, 64, 1e-10)],
                         ids=["dense", "lanczos", "lanczos-tol"])
def test_each_end_on_each_path_is_eigvalsh_s(which, end, n, dense_up_to, tol):
    H = _symmetric(n, seed=n)
    want = np.linalg.eigvalsh(H)
    op = Products(H)
    v0 = np.random.default_rng(1).normal(size=n)
    got = extreme_eigenvalue(op, n, which, dense_up_to=dense_up_to, tol=tol, v0=v0)
    dense = n <= dense_up_to
    assert op.only_columns == dense and (op.calls == n or not dense)  # the path asked for was taken
    assert abs(got - want[end]) <= _bound(H, got, tol)
    # control: the other end is far outside that bound (entries of variance ½: the ends near ±√(2n))
    assert abs(got - want[-1 - end]) > 100 * _bound(H, got, tol)


@pytest.mark.parametrize("which, end", [("LA", -1), ("SA", 0)])
@pytest.mark.parametrize("n", [30, 200], ids=["dense", "lanczos"])
def test_the_eigenvector_is_the_ends(which, end, n):
    """``vector=True`` (saddles' escape direction): H v = λ v, ‖v‖ = 1, to the same bound."""
    H = _symmetric(n, seed=7)
    lam, vec = extreme_eigenvalue(Products(H), n, which, dense_up_to=64, vector=True)
    want = np.linalg.eigvalsh(H)
    assert abs(lam - want[end]) <= _bound(H, lam, 0.0)
    assert np.linalg.norm(vec) == pytest.approx(1.0, abs=n * EPS)  # an orthonormal basis vector, to round-off
    # residual of a converged Ritz pair: ARPACK's tol (ε here) × |λ|, plus the product's n ε ‖H‖;
    # of LAPACK's pair, p(n) ε ‖H‖ with p(n) a small multiple of n (Demmel, Applied Numerical Linear
    # Algebra §5.3): the factor 10 is that multiple over _bound's n
    assert np.linalg.norm(H @ vec - lam * vec) <= 10 * _bound(H, lam, 0.0)
    # control: for the eigenvector v, ‖H v − μ v‖ = |λ − μ|, μ the other end: the spectrum's width,
    # ≈ 2√(2n) for ½(A + Aᵀ) (15 at n = 30), far above 1
    assert np.linalg.norm(H @ vec - want[-1 - end] * vec) > 1.0


def test_a_given_matrix_is_used_as_is_on_the_dense_path():
    """saddles hands its ``jax.hessian`` in (``matrix``): no product is taken, and an asymmetric
    matrix is not symmetrised (LAPACK reads its lower triangle), unlike the products' columns."""
    H = _symmetric(20, seed=3)
    skew = H + np.triu(np.ones_like(H), 1)  # the upper triangle off by 1: only the lower is read
    op = Products(H)
    got = extreme_eigenvalue(op, 20, "SA", dense_up_to=64, matrix=lambda: skew)
    assert op.calls == 0
    assert got == np.linalg.eigvalsh(H)[0]  # the same LAPACK call on the same lower triangle: bit for bit
    # control: the columns of skew's products, symmetrised, give another λ_min
    assert abs(extreme_eigenvalue(Products(skew), 20, "SA", dense_up_to=64) - got) > 0.1


def test_an_unknown_end_is_refused_before_any_product():
    op = Products(np.eye(3))
    with pytest.raises(ValueError, match="which must be 'LA'.*'SA'.*got 'LM'"):
        extreme_eigenvalue(op, 3, "LM", dense_up_to=64)
    assert op.calls == 0
