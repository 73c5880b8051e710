"""Symmetric data: Gaussian inputs, targets, symmetrisation, whitening, checks.

Shapes follow docs/theory.md §0: inputs ``X`` (N, d), targets ``Y`` (N, p). A data set is
*symmetric* (§2.1) when for every pair (x, y) it also holds (-x, -y). Targets are
pure functions ``x -> y`` of shape (N, d) -> (N, p), made by the ``*_target``
factories; their parameters are drawn from an explicit key.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from .. import _validate as validate
from .precision import precise

Array = jax.Array
Target = Callable[[Array], Array]


def _traced(*xs) -> bool:
    return any(isinstance(x, jax.core.Tracer) for x in jax.tree_util.tree_leaves(xs))


def _check_key(key, name: str = "key"):
    from .nets import _check_key as check

    return check(key, name)


def _check_columns(name: str, X, need: int) -> None:
    """A target built for input coordinates up to ``need - 1`` refuses narrower inputs (JAX
    would clamp the index and return a plausible, wrong value)."""
    if np.ndim(X) != 2 or np.shape(X)[1] < need:
        raise ValueError(f"{name}: this target reads input coordinate {need - 1} but X has shape "
                         f"{np.shape(X)}; pass inputs (N, d) with d >= {need}")


def _target_values(target, X):
    """``target(X)`` as an (N, p) array, checked: an (N,) result is refused with the fix,
    NaN/inf values are refused."""
    Y = target(X)
    shape = np.shape(Y)
    if len(shape) != 2 or shape[0] != X.shape[0]:
        raise ValueError(f"target must map inputs (N, d) to targets (N, p); it returned shape {shape} "
                         f"for N = {X.shape[0]} (for one output return y[:, None])")
    if not _traced(Y) and not np.all(np.isfinite(np.asarray(Y))):
        raise ValueError("target returned NaN or infinite values on the drawn inputs: use a target "
                         "that is finite for every input")
    return Y


def check_data(X, Y) -> None:
    """Raise ``ValueError`` naming the problem unless X (N, d) and Y (N, p) are finite
    2-D arrays with the same number of rows (``TypeError`` for strings, bools, complex or
    ragged input)."""
    if not _traced(X, Y):
        X = validate._numeric("X", X, "an array of inputs (N, d)")
        Y = validate._numeric("Y", Y, "an array of targets (N, p)")
    X, Y = np.asarray(X), np.asarray(Y)
    if X.ndim != 2:
        raise ValueError(f"inputs X must have shape (N, d), got {X.shape}; reshape 1-D x to (N, 1)")
    if Y.ndim != 2:
        raise ValueError(f"targets Y must have shape (N, p), got {Y.shape}; use Y[:, None] for p = 1")
    if X.shape[0] == 0 or X.shape[1] == 0 or Y.shape[1] == 0:
        raise ValueError(f"X, Y: the data set is empty (X {X.shape}, Y {Y.shape}): give at least one "
                         "row, one input and one target column")
    if X.shape[0] != Y.shape[0]:
        raise ValueError(f"X has {X.shape[0]} rows but Y has {Y.shape[0]}: one target per input")
    for name, A in (("X", X), ("Y", Y)):
        bad = ~np.isfinite(A)
        if bad.any():
            row = int(np.argwhere(bad)[0][0])
            raise ValueError(
                f"{name} holds {int(bad.sum())} NaN/inf values (first in row {row}); "
                "drop or impute those rows before training"
            )


@dataclass(frozen=True, init=False, eq=False)
class Dataset:
    """Train and held-out test sets: ``X`` (N, d), ``Y`` (N, p), ``X_test``, ``Y_test``.

    Mirrored inputs. When the rows of ``X`` are exactly ``[X₊; -X₊]`` (the layout
    :func:`symmetrize` and :func:`make_dataset` produce; checked once, here), the set
    stores only the positive half ``X₊`` (``inputs``, (N/2, d)) and sets ``mirrored``;
    ``X`` still returns the full (N, d) inputs, rebuilt on access. The engine then
    computes the first layer's product ``X₊W₁ᵀ`` once for both halves, since
    ``z₋ = -z₊`` (:func:`biasfree.dynamics.losses.forward_mirrored`). Only the inputs need to be
    mirrored: ``Y`` is stored in full, so targets that are not odd keep the shortcut.
    ``mirror=False`` stores the full inputs and keeps the general path (for comparisons).
    """

    inputs: Array
    Y: Array
    X_test: Array | None
    Y_test: Array | None
    mirrored: bool

    @validate.array_args("X", "Y", "X_test", "Y_test")
    def __init__(self, X, Y, X_test=None, Y_test=None, *, mirror: bool = True):
        check_data(X, Y)
        if (X_test is None) != (Y_test is None):
            raise ValueError("give both X_test and Y_test, or neither")
        if X_test is not None:
            check_data(X_test, Y_test)
            if np.shape(X_test)[1] != np.shape(X)[1] or np.shape(Y_test)[1] != np.shape(Y)[1]:
                raise ValueError("X_test, Y_test: the test set must have the same d and p as the "
                                 "training set")
        mirrored = bool(mirror) and _is_mirror_layout(X)
        inputs = X[: X.shape[0] // 2] if mirrored else X
        if mirrored and isinstance(inputs, np.ndarray):
            inputs = inputs.copy()  # let the full array go
        for name, value in (("inputs", inputs), ("Y", Y), ("X_test", X_test), ("Y_test", Y_test),
                            ("mirrored", mirrored)):
            object.__setattr__(self, name, value)

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

    @property
    def arrays(self) -> tuple:
        """``(X, Y, X_test, Y_test)`` with the full training inputs."""
        return (self.X, self.Y, self.X_test, self.Y_test)


def _is_mirror_layout(X) -> bool:
    """True if the N rows of ``X`` are ``[X₊; -X₊]`` exactly (N even, N >= 2)."""
    A = np.asarray(X)
    n = A.shape[0] // 2
    return A.shape[0] % 2 == 0 and n > 0 and bool(np.array_equal(A[n:], -A[:n]))


def _dataset_flatten(ds: Dataset):
    return (ds.inputs, ds.Y, ds.X_test, ds.Y_test), ds.mirrored


def _dataset_unflatten(mirrored, children) -> Dataset:
    ds = object.__new__(Dataset)
    for name, value in zip(("inputs", "Y", "X_test", "Y_test"), children, strict=True):
        object.__setattr__(ds, name, value)
    object.__setattr__(ds, "mirrored", mirrored)
    return ds


# A pytree, so that jit/vmap take a Dataset and precision casts reach its arrays.
jax.tree_util.register_pytree_node(Dataset, _dataset_flatten, _dataset_unflatten)


@precise
def gaussian_inputs(key, n: int, d: int, cov=None) -> Array:
    """``n`` inputs ``x ~ N(0, cov)`` in ``d`` dimensions (identity if ``cov`` is None)."""
    _check_key(key)
    n, d = validate.integer("n", n, 1), validate.integer("d", d, 1)
    Z = jax.random.normal(key, (n, d))
    if cov is None:
        return Z
    cov = jnp.asarray(validate.finite_array("cov", cov), dtype=float)
    if cov.shape != (d, d):
        raise ValueError(f"cov must have shape ({d}, {d}), got {cov.shape}")
    sym = np.asarray(cov)
    if not np.allclose(sym, sym.T) or np.linalg.eigvalsh(0.5 * (sym + sym.T)).min() <= 0:
        raise ValueError("cov must be symmetric positive definite (a covariance matrix "
                         "with every eigenvalue > 0)")
    return Z @ jnp.linalg.cholesky(cov).T


@validate.array_args("X", "Y")
@precise
def symmetrize(X, Y=None):
    """Append the mirror images: ``X -> [X; -X]`` and ``Y -> [Y; -Y]`` (§2.1)."""
    if not _traced(X, Y):
        if Y is None:
            validate.finite_array("X", X, ndim=2)
        else:
            validate.data(X, Y)
    Xs = jnp.concatenate([X, -X], axis=0)
    if Y is None:
        return Xs
    return Xs, jnp.concatenate([Y, -Y], axis=0)


@validate.array_args("X", "Y")
@precise
def asymmetric_half(X, Y):
    """Drop the mirror half made by :func:`symmetrize` (first N/2 rows kept)."""
    if not _traced(X, Y):
        validate.data(X, Y)
        if np.shape(X)[0] % 2:
            raise ValueError(f"X has {np.shape(X)[0]} rows: a symmetrised set has an even number "
                             "(the first half and its mirrors)")
    n = X.shape[0] // 2
    return X[:n], Y[:n]


def is_symmetric(X, Y=None, tol: float = 1e-9) -> bool:
    """True if the points (x, y) form a mirror-symmetric *multiset*: every point's mirror
    (-x, -y) is present as often as the point itself, up to Euclidean ``tol``.

    A point duplicated without a duplicated mirror makes the set asymmetric (the
    odd/even orthogonality of §1.3 fails there), although its nearest mirror exists.
    Measured by :func:`biasfree._validate.mirror_violation` (sorting, O(N log N), plus an
    optimal pairing when that is not tight).
    """
    tol = validate.nonnegative("tol", tol, scalar=True)
    return bool(validate.mirror_violation(X, Y) <= tol)


class Whitened(tuple):
    """What :func:`whiten` returns: the pair ``(X_white, M)`` (so ``Xw, M = whiten(X)``
    unpacks as before), with the eigenvalues of ``Σ = XᵀX/N`` (descending) and how many
    directions were kept (``rank``) or dropped (``dropped = d - rank``)."""

    def __new__(cls, X, M, eigenvalues):
        obj = super().__new__(cls, (X, M))
        obj.eigenvalues = np.asarray(eigenvalues, dtype=float)
        return obj

    @property
    def X(self):
        return self[0]

    @property
    def M(self):
        return self[1]

    @property
    def rank(self) -> int:
        """Number of directions kept, r (the columns of the whitened inputs)."""
        return int(self[1].shape[1])

    @property
    def dropped(self) -> int:
        """Number of input directions dropped, ``d - r``."""
        return int(self[1].shape[0] - self[1].shape[1])

    @property
    def kept_variance(self) -> float:
        """Fraction of ``tr Σ`` in the kept directions (1 when nothing was dropped)."""
        ev = np.clip(self.eigenvalues, 0.0, None)
        return float(ev[: self.rank].sum() / ev.sum()) if ev.sum() > 0 else 1.0


@precise
def whiten(X, rank=None, tol: float = 1e-12) -> Whitened:
    """Exact whitening on the sample, for full-rank or rank-deficient inputs.

    ``Σ = XᵀX / N = Σ_i λ_i v_i v_iᵀ`` (λ_1 ≥ ... ≥ λ_d). Directions with
    ``λ_i <= tol · λ_1`` are *null* (e.g. pixels that are always zero).

    - ``rank=None`` (default): every direction must be kept; ``X -> X Σ^{-1/2}`` with
      the symmetric ``M = Σ^{-1/2}`` (d, d). Null directions raise ``ValueError``.
    - ``rank="auto"``: the null directions are dropped and the rest whitened;
      ``.dropped`` says how many. With none dropped this is the ``rank=None`` map.
    - ``rank=r`` (int): a PCA to the top r directions, whitened.

    When r < d directions are kept, ``M = V_r Λ_r^{-1/2}`` (d, r) and the whitened
    inputs ``X M`` have r columns. Either way ``<x xᵀ> = MᵀΣM = I_r`` to round-off, and
    a symmetric set stays symmetric (the map is linear). Returns a :class:`Whitened`:
    the pair ``(X M, M)`` plus the eigenvalues and the counts.
    """
    if not _traced(X):
        X = validate.finite_array("X", X, ndim=2)
    tol = validate.nonnegative("tol", tol, scalar=True)
    X = jnp.asarray(X)
    d = X.shape[1]
    S = X.T @ X / X.shape[0]
    evals, evecs = jnp.linalg.eigh(S)
    evals, evecs = evals[::-1], evecs[:, ::-1]  # descending
    lam = np.asarray(evals)
    if not lam[0] > 0:
        raise ValueError("X: inputs are all zero: there is nothing to whiten")
    n_null = int(np.sum(lam <= tol * lam[0]))
    if rank is None:
        if n_null:
            raise ValueError(
                f"X: inputs are rank-deficient: {n_null} of {d} directions have variance <= "
                f"{tol:g} × the largest (N < d, constant or collinear features); use "
                "whiten(X, rank='auto') to drop them, or rank=r for a PCA to r directions")
        r = d
    elif isinstance(rank, str):
        if rank != "auto":
            raise ValueError(f"rank={rank!r}: give None, 'auto' or an integer number of directions")
        r = d - n_null
    else:
        if isinstance(rank, bool) or not isinstance(rank, int | np.integer) or not 1 <= rank <= d:
            raise ValueError(f"rank={rank!r} must be an integer between 1 and d = {d}")
        r = int(rank)
        if r > d - n_null:
            raise ValueError(
                f"rank={r} keeps {r - (d - n_null)} null directions (variance <= {tol:g} × "
                f"the largest), which cannot be whitened; use rank <= {d - n_null} or 'auto'")
    if r == d:
        M = (evecs / jnp.sqrt(evals)) @ evecs.T
    else:
        M = evecs[:, :r] / jnp.sqrt(evals[:r])
    return Whitened(np.asarray(X @ M), np.asarray(M), lam)  # a tuple subclass: precise leaves it as is


@precise
def input_covariance(X) -> Array:
    """``Σ_xx = <x xᵀ> = XᵀX / N``, shape (d, d)."""
    if not _traced(X):
        X = jnp.asarray(validate.finite_array("X", X, ndim=2))
    return X.T @ X / X.shape[0]


@precise
def cross_covariance(X, Y) -> Array:
    """``Σ_yx = <y xᵀ> = YᵀX / N``, shape (p, d)."""
    if not _traced(X, Y):
        X, Y = (jnp.asarray(a) for a in validate.data(X, Y))
    return Y.T @ X / X.shape[0]


@dataclass(frozen=True)
class MomentData:
    """What :func:`moment_data` returns: ``data`` (r points with the same second moments
    as the full set) and ``loss_offset`` (add it to a loss measured on ``data``)."""

    data: Dataset
    loss_offset: float


@precise
def moment_data(X, Y, rank_tol: float = 1e-12) -> MomentData:
    """A data set of r = rank(Σ_xx) points on which a *linear* network of any depth
    has exactly the trajectory it has on ``(X, Y)``: a cheap, exact linear twin.

    A linear net ``f(x) = Pᵀx`` sees the data only through ``Σ_xx = <x xᵀ>`` and
    ``Σ_yx = <y xᵀ>``: ``L(P) = ½ tr Σ_yy - tr(Pᵀ Σ_xy) + ½ tr(Pᵀ Σ_xx P)``. With
    ``Σ_xx = Σ_i λ_i e_i e_iᵀ`` (the r eigenvalues above ``rank_tol · λ_1``), the points
    ``x'_i = √(r λ_i) e_i`` and ``y'_i = √(r/λ_i) Σ_yx e_i`` have the same ``Σ_xx`` and
    ``Σ_yx`` (in the kept directions, which are all a linear net's gradients reach), so
    gradient descent and gradient flow give the same parameters on both sets, to
    round-off; only the constant ``½ tr Σ_yy`` differs, returned as ``loss_offset =
    ½(<||y||²> - <||y'||²>')`` (≥ 0: the part of the target no linear map reaches lies
    in it). Cost per step O(r d) instead of O(N d): for N ≫ d, a linear twin trained on
    it is far cheaper than on the full set. ``X`` (N, d), ``Y`` (N, p).
    Not valid for α < 1: a leaky net sees more of the data than its second moments.
    """
    check_data(X, Y)
    rank_tol = validate.nonnegative("rank_tol", rank_tol, scalar=True)
    X, Y = np.asarray(X, dtype=float), np.asarray(Y, dtype=float)
    lam, E = np.linalg.eigh(X.T @ X / X.shape[0])
    keep = lam > rank_tol * max(float(lam.max()), 0.0)
    if not keep.any():
        raise ValueError("moment_data needs inputs with a nonzero covariance: every x is 0")
    lam, E = lam[keep], E[:, keep]
    r = lam.size
    Xm = np.sqrt(r * lam)[:, None] * E.T
    Ym = np.sqrt(r / lam)[:, None] * (E.T @ (X.T @ Y / X.shape[0]))
    offset = 0.5 * (np.mean(np.sum(Y**2, axis=1)) - np.mean(np.sum(Ym**2, axis=1)))
    return MomentData(Dataset(jnp.asarray(Xm), jnp.asarray(Ym)), float(offset))


# --------------------------------------------------------------------- targets


@precise
def linear_target(T) -> Target:
    """``y = T x`` for a matrix ``T`` of shape (p, d)."""
    T = jnp.asarray(validate.finite_array("T", T, ndim=2), dtype=float)

    def f(X):
        _check_columns("T", X, T.shape[1])
        return X @ T.T

    return f


@precise
def teacher_matrix(key, d: int, singular_values) -> Array:
    """Random (p, d) matrix ``T = U diag(s) Vᵀ`` with prescribed ``singular_values``
    s (p of them, p <= d) and Haar-random orthonormal U, V."""
    _check_key(key)
    d = validate.integer("d", d, 1)
    s = validate.nonnegative("singular_values", singular_values, why="singular values are >= 0")
    if s.ndim != 1 or s.size == 0:
        raise ValueError(f"singular_values must be a non-empty list of numbers, got shape {s.shape}")
    s = jnp.asarray(s, dtype=float)
    p = s.shape[0]
    if p > d:
        raise ValueError(f"singular_values: {p} singular values need p <= d = {d}")
    k1, k2 = jax.random.split(key)
    U, _ = jnp.linalg.qr(jax.random.normal(k1, (p, p)))
    V, _ = jnp.linalg.qr(jax.random.normal(k2, (d, p)))
    return (U * s) @ V.T


@precise
def sine_target(key, d: int, freq: float = 4.0) -> tuple[Target, Array]:
    """The paper's target ``y = wᵀx + sin(freq · wᵀx)``, ``w_i ~ U[-1/2, 1/2]``.

    Odd in x. Returns the target function and ``w`` (d,).
    """
    _check_key(key)
    d = validate.integer("d", d, 1)
    freq = validate.real("freq", freq, scalar=True)
    w = jax.random.uniform(key, (d,), minval=-0.5, maxval=0.5)

    def f(X):
        _check_columns("sine_target", X, d)
        z = X @ w
        return (z + jnp.sin(freq * z))[:, None]

    return f, w


def product_target(indices=(0, 1, 2)) -> Target:
    """``y = Π_{i in indices} x_i``: odd for an odd count (x1 x2 x3), even otherwise."""
    if isinstance(indices, str | bytes) or not isinstance(indices, tuple | list | np.ndarray):
        raise TypeError(f"indices={indices!r} must be a tuple of input coordinates, e.g. (0, 1, 2)")
    ints = [validate.integer(f"indices[{k}]", i, 0) for k, i in enumerate(indices)]
    if not ints:
        raise ValueError("indices is empty: give at least one input coordinate, e.g. (0, 1, 2)")
    idx = jnp.asarray(ints)

    def f(X):
        _check_columns("indices", X, max(ints) + 1)
        return jnp.prod(X[:, idx], axis=1, keepdims=True)

    return f


def abs_target(index: int = 0) -> Target:
    """``y = |x_i|``: even and positively 1-homogeneous."""
    index = validate.integer("index", index, 0)

    def f(X):
        _check_columns("index", X, index + 1)
        return jnp.abs(X[:, index : index + 1])

    return f


def xor_target(i: int = 0, j: int = 1) -> Target:
    """``y = sign(x_i) sign(x_j)``: the even, XOR-like target."""
    i, j = validate.integer("i", i, 0), validate.integer("j", j, 0)

    def f(X):
        _check_columns("i, j", X, max(i, j) + 1)
        return (jnp.sign(X[:, i]) * jnp.sign(X[:, j]))[:, None]

    return f


@validate.array_args("X")
@precise
def label_data(key, X, margin: float = 0.0):
    """±1 labels ``y = sign(w*ᵀ x)`` for a random unit ``w*``, keeping only points
    with ``|w*ᵀ x| >= margin`` (a margin makes the set cleanly separable).

    Labels are odd in x, so a symmetric ``X`` gives a symmetric labelled set.
    Returns ``(X_kept, Y (N, 1), w*)``.
    """
    _check_key(key)
    if not _traced(X):
        X = jnp.asarray(validate.finite_array("X", X, ndim=2))
    margin = validate.nonnegative("margin", margin, scalar=True)
    w = jax.random.normal(key, (X.shape[1],))
    w = w / jnp.linalg.norm(w)
    z = np.asarray(X @ w)
    keep = np.abs(z) >= margin
    if not keep.any():
        raise ValueError(f"margin={margin:g} keeps no point (largest |w*ᵀx| is {np.abs(z).max():.3g}): "
                         "use a smaller margin")
    return X[keep], jnp.sign(z[keep])[:, None], w


@precise
def make_dataset(key, target: Target, n: int, d: int, *, n_test: int = 0, cov=None,
                 symmetric: bool = True, mirror_targets: bool = True, noise: float = 0.0,
                 whitened: bool = False) -> Dataset:
    """Gaussian inputs with targets, symmetrised and optionally whitened.

    ``n`` draws ``x ~ N(0, cov)`` (2n points once ``symmetric``), ``y = target(x) + ε``
    with ``ε ~ N(0, noise²)``. With ``symmetric`` the set gains the mirror points: by
    default ``(-x, -y)`` (§2.1, the noise mirrored too), which for a target with an even
    part keeps only its odd part, since ``-y ≠ target(-x)`` there; with
    ``mirror_targets=False`` the mirror points get ``target(-x) + ε'`` instead (inputs
    symmetric, the target unchanged: the setting of §1.3 for even targets).
    ``n_test`` held-out points come from the same distribution (not symmetrised).
    ``whitened`` applies :func:`whiten` to the training inputs and the same map to the
    test inputs.
    """
    _check_key(key)
    validate.callable_("target", target)
    n, d = validate.integer("n", n, 1), validate.integer("d", d, 1)
    n_test = validate.integer("n_test", n_test, 0)
    noise = validate.nonnegative("noise", noise, scalar=True)
    for name, v in (("symmetric", symmetric), ("mirror_targets", mirror_targets), ("whitened", whitened)):
        validate.flag(name, v)
    kx, kn, kt, ktn = jax.random.split(key, 4)
    X = gaussian_inputs(kx, n, d, cov)
    Y0 = _target_values(target, X)
    Y = Y0 + noise * jax.random.normal(kn, Y0.shape)
    if symmetric and mirror_targets:
        X, Y = symmetrize(X, Y)
    elif symmetric:
        k2 = jax.random.fold_in(kn, 1)
        Y = jnp.concatenate([Y, _target_values(target, -X) + noise * jax.random.normal(k2, Y.shape)])
        X = symmetrize(X)
    Xt = Yt = None
    if n_test:
        Xt = gaussian_inputs(kt, n_test, d, cov)
        Yt = _target_values(target, Xt) + noise * jax.random.normal(ktn, (n_test, Y.shape[1]))
    if whitened:
        # targets stay functions of the raw inputs; only the representation changes
        X, M = whiten(X)
        Xt = None if Xt is None else Xt @ M
    return Dataset(X, Y, Xt, Yt)


def orthogonal_data(Q, y, y_neg) -> Dataset:
    """Orthogonal inputs and their negatives: ``+ρ q_i`` (targets ``y``) then ``-ρ q_i``
    (targets ``y_neg``), ρ = √n, so ``<x xᵀ> = Q Qᵀ`` (whitened on the span of Q).

    ``Q`` (d, n) orthonormal columns q_i (e.g. from ``numpy.linalg.qr``); ``y``, ``y_neg``
    (n,). Returns N = 2n points in the mirrored layout ``[X₊; -X₊]``: odd target part
    ``(y - y_neg)/2``, even part ``(y + y_neg)/2`` (see :mod:`biasfree.theory.orthogonal`)."""
    Q = validate.finite_array("Q", Q, ndim=2)
    n = Q.shape[1]
    if not np.allclose(Q.T @ Q, np.eye(n), atol=1e-10):
        raise ValueError(f"Q must be a (d, n) matrix with orthonormal columns, got shape {Q.shape}; "
                         "build one with numpy.linalg.qr")
    y = validate.finite_array("y", y).ravel()
    y_neg = validate.finite_array("y_neg", y_neg).ravel()
    if y.shape != (n,) or y_neg.shape != (n,):
        raise ValueError(f"y, y_neg: need one target per direction and side, shape ({n},); got "
                         f"{y.shape} and {y_neg.shape}")
    rho = np.sqrt(n)
    return Dataset(np.concatenate([rho * Q.T, -rho * Q.T]), np.concatenate([y, y_neg])[:, None])
