"""Data sets: the Dataset pytree, Gaussian inputs, symmetrisation, labelled and orthogonal sets.

Shapes follow docs/theory.md §0: inputs ``X`` (N, d), targets ``Y`` (N, p). A data set is
*symmetric* (§2.1) when for every pair (x, y) it also holds (-x, -y); targets come from
:mod:`.targets`, whitening and second moments from :mod:`biasfree.core.moments`.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from .. import _validate as validate
from .draws import normal
from .precision import precise

Array = jax.Array


def check_data(X, Y) -> None:
    """Raise ``ValueError`` naming the problem unless X (N, d) and Y (N, p) are finite
    2-D arrays with the same number of rows (``TypeError`` for strings, bools, complex or
    ragged input)."""
    validate.data(X, Y, y_1d=False)


@dataclass(frozen=True, init=False, eq=False)
class Dataset:
    """Train and held-out test sets: ``X`` (N, d), ``Y`` (N, p), ``X_test``, ``Y_test``.

    When the rows of ``X`` are exactly ``[X₊; -X₊]`` (as :func:`symmetrize` makes them), only
    ``X₊`` is stored (``inputs``, (N/2, d)) and ``mirrored`` is set; ``X`` rebuilds the full
    inputs on access, and the engine computes ``X₊W₁ᵀ`` once for both halves (``z₋ = -z₊``,
    :func:`biasfree.dynamics.losses.forward_mirrored`). ``Y`` is stored in full (targets need
    not be odd). ``mirror=False`` keeps the full inputs and the general path.
    """

    inputs: Array
    Y: Array
    X_test: Array | None
    Y_test: Array | None
    mirrored: bool

    @validate.array_args("X", "Y", "X_test", "Y_test")
    def __init__(self, X, Y, X_test=None, Y_test=None, *, mirror: bool = True):
        validate.data(X, Y, y_1d=False)
        if (X_test is None) != (Y_test is None):
            raise ValueError("give both X_test and Y_test, or neither")
        if X_test is not None:
            validate.data(X_test, Y_test, y_1d=False)
            if np.shape(X_test)[1] != np.shape(X)[1] or np.shape(Y_test)[1] != np.shape(Y)[1]:
                raise ValueError("X_test, Y_test: the test set must have the same d and p as the "
                                 "training set")
        inputs, mirrored = _stored(X, mirror)
        _fill(self, inputs, Y, X_test, Y_test, mirrored)

    @property
    def X(self) -> Array:
        """The training inputs (N, d); ``[X₊; -X₊]`` when ``mirrored``."""
        if self.mirrored:
            if isinstance(self.inputs, np.ndarray):  # NumPy in, NumPy out (keeps float64)
                return np.concatenate([self.inputs, -self.inputs], axis=0)
            with jax.enable_x64(self.inputs.dtype == np.float64):  # keep the stored precision
                return jnp.concatenate([self.inputs, -self.inputs], axis=0)
        return self.inputs

    @property
    def has_test(self) -> bool:
        return self.X_test is not None


def mirrored_half(X) -> np.ndarray | None:
    """X₊ when the rows of ``X`` (N, d) are exactly ``[X₊; -X₊]`` (bitwise; N even), else None."""
    X = np.asarray(X)
    n = X.shape[0] // 2
    return X[:n] if X.shape[0] == 2 * n and n and np.array_equal(X[n:], -X[:n]) else None


def _stored(X, mirror: bool) -> tuple:
    """``(inputs, mirrored)``: what a :class:`Dataset` keeps of its inputs ``X`` (module doc)."""
    mirrored = bool(mirror) and mirrored_half(X) is not None
    inputs = X[: X.shape[0] // 2] if mirrored else X
    if mirrored and isinstance(inputs, np.ndarray):
        inputs = inputs.copy()  # let the full array go
    return inputs, mirrored


def unchecked_dataset(X, Y, *, mirror: bool = True) -> Dataset:
    """``Dataset(X, Y)`` of arrays the caller has checked (:func:`check_data`), unchecked."""
    inputs, mirrored = _stored(X, mirror)
    return _fill(object.__new__(Dataset), inputs, Y, None, None, mirrored)


def _fill(ds: Dataset, *values) -> Dataset:
    """Set the frozen fields ``inputs, Y, X_test, Y_test, mirrored`` of ``ds``."""
    for name, value in zip(("inputs", "Y", "X_test", "Y_test", "mirrored"), values, strict=True):
        object.__setattr__(ds, name, value)
    return ds


# A pytree, so that jit/vmap take a Dataset and precision casts reach its arrays.
jax.tree_util.register_pytree_node(Dataset, lambda ds: ((ds.inputs, ds.Y, ds.X_test, ds.Y_test), ds.mirrored),
                                   lambda mirrored, arrays: _fill(object.__new__(Dataset), *arrays, mirrored))


@precise
def gaussian_inputs(key, n: int, d: int, cov=None) -> Array:
    """``n`` inputs ``x ~ N(0, cov)`` in ``d`` dimensions (identity if ``cov`` is None)."""
    validate.key(key)
    n, d = validate.integer("n", n, 1), validate.integer("d", d, 1)
    Z = normal(key, (n, d))
    if cov is None:
        return Z
    return Z @ jnp.linalg.cholesky(jnp.asarray(check_covariance(cov, d), dtype=float)).T


def check_covariance(cov, d: int) -> np.ndarray:
    """``cov`` (d, d) checked: symmetric positive definite (a covariance of full rank)."""
    C = validate.finite_array("cov", cov, shape=(d, d))
    if not np.allclose(C, C.T) or np.linalg.eigvalsh(0.5 * (C + C.T)).min() <= 0:
        raise ValueError("cov must be symmetric positive definite (a covariance matrix "
                         "with every eigenvalue > 0)")
    return C


@validate.array_args("X", "Y")
@precise
def symmetrize(X, Y=None):
    """Append the mirror images: ``X -> [X; -X]`` and ``Y -> [Y; -Y]`` (§2.1)."""
    if Y is None:
        validate.finite_array("X", X, ndim=2)
        return jnp.concatenate([X, -X], axis=0)
    validate.data(X, Y)
    return jnp.concatenate([X, -X], axis=0), jnp.concatenate([Y, -Y], axis=0)


@validate.array_args("X", "Y")
@precise
def asymmetric_half(X, Y):
    """Drop the mirror half made by :func:`symmetrize` (first N/2 rows kept)."""
    validate.data(X, Y)
    if np.shape(X)[0] % 2:
        raise ValueError(f"X has {np.shape(X)[0]} rows: a symmetrised set has an even number "
                         "(the first half and its mirrors)")
    n = X.shape[0] // 2
    return X[:n], Y[:n]


@validate.array_args("X")
@precise
def label_data(key, X, margin: float = 0.0):
    """±1 labels ``y = sign(w*ᵀ x)`` for a random unit ``w*``, keeping only points
    with ``|w*ᵀ x| >= margin`` (a margin makes the set cleanly separable).

    Labels are odd in x, so a symmetric ``X`` gives a symmetric labelled set.
    Returns ``(X_kept, Y (N, 1), w*)``.
    """
    validate.key(key)
    X = jnp.asarray(validate.finite_array("X", X, ndim=2))
    margin = validate.nonnegative("margin", margin, scalar=True)
    w = normal(key, (X.shape[1],))
    w = w / jnp.linalg.norm(w)
    z = np.asarray(X @ w)
    keep = np.abs(z) >= margin
    if not keep.any():
        raise ValueError(f"margin={margin:g} keeps no point (largest |w*ᵀx| is {np.abs(z).max():.3g}): "
                         "use a smaller margin")
    return X[keep], jnp.sign(z[keep])[:, None], w


def orthonormal_columns(Q, n: int | None = None) -> np.ndarray:
    """``Q`` (d, n) checked: orthonormal columns (to 1e-10), ``n`` of them if given."""
    Q = validate.finite_array("Q", Q, ndim=2)
    if n is not None and Q.shape[1] != n:
        raise ValueError(f"Q must have one column per pair (n = {n}), got shape {Q.shape}")
    if not np.allclose(Q.T @ Q, np.eye(Q.shape[1]), atol=1e-10):
        raise ValueError(f"Q must be a (d, n) matrix with orthonormal columns, got shape {Q.shape}; build "
                         "one with numpy.linalg.qr")
    return Q


def orthogonal_data(Q, y, y_neg) -> Dataset:
    """Orthogonal inputs and their negatives: ``+ρ q_i`` (targets ``y``) then ``-ρ q_i``
    (targets ``y_neg``), ρ = √n, so ``<x xᵀ> = Q Qᵀ`` (whitened on the span of Q).

    ``Q`` (d, n) orthonormal columns q_i (e.g. from ``numpy.linalg.qr``); ``y``, ``y_neg``
    (n,). Returns N = 2n points in the mirrored layout ``[X₊; -X₊]``: odd target part
    ``(y - y_neg)/2``, even part ``(y + y_neg)/2`` (see :mod:`biasfree.theory.orthogonal`)."""
    Q = orthonormal_columns(Q)
    n = Q.shape[1]
    y = validate.finite_array("y", y).ravel()
    y_neg = validate.finite_array("y_neg", y_neg).ravel()
    if y.shape != (n,) or y_neg.shape != (n,):
        raise ValueError(f"y, y_neg: need one target per direction and side, shape ({n},); got "
                         f"{y.shape} and {y_neg.shape}")
    rho = np.sqrt(n)
    return Dataset(np.concatenate([rho * Q.T, -rho * Q.T]), np.concatenate([y, y_neg])[:, None])
