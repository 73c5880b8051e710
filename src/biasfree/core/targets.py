"""Targets, and the data sets made from them: pure functions ``x -> y`` (N, d) -> (N, p).

Each ``*_target`` factory returns a target (docs/theory.md §0); random parameters are drawn
from an explicit key. :func:`make_dataset` draws Gaussian inputs, applies a target and
symmetrises: odd targets survive whole, the even part is what the mirror points remove
(§2.1, §1.3).
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from .. import _validate as validate
from .data import Dataset, gaussian_inputs, symmetrize
from .draws import normal
from .moments import whiten
from .precision import precise

Array = jax.Array
Target = Callable[[Array], Array]


def _reads(name: str, need: int, fn) -> Target:
    """The target ``fn``, built for input coordinates up to ``need - 1``, refusing narrower inputs
    (JAX would clamp the index and return a plausible, wrong value)."""
    def f(X):
        if np.ndim(X) != 2 or np.shape(X)[1] < need:
            raise ValueError(f"{name}: this target reads input coordinate {need - 1} but X has shape "
                             f"{np.shape(X)}; pass inputs (N, d) with d >= {need}")
        return fn(X)
    return f


def target_values(target, X):
    """``target(X)`` as an (N, p) array, checked: an (N,) result is refused with the fix,
    NaN/inf values are refused."""
    Y = target(X)
    shape = np.shape(Y)
    if len(shape) != 2 or shape[0] != X.shape[0]:
        raise ValueError(f"target must map inputs (N, d) to targets (N, p); it returned shape {shape} "
                         f"for N = {X.shape[0]} (for one output return y[:, None])")
    if not validate.traced(Y) and not np.all(np.isfinite(np.asarray(Y))):
        raise ValueError("target returned NaN or infinite values on the drawn inputs: use a target "
                         "that is finite for every input")
    return Y


@precise
def linear_target(T) -> Target:
    """``y = T x`` for a matrix ``T`` of shape (p, d)."""
    T = jnp.asarray(validate.finite_array("T", T, ndim=2), dtype=float)
    return _reads("T", T.shape[1], lambda X: X @ T.T)


@precise
def teacher_matrix(key, d: int, singular_values) -> Array:
    """Random (p, d) matrix ``T = U diag(s) Vᵀ`` with prescribed ``singular_values``
    s (p of them, p <= d) and Haar-random orthonormal U, V."""
    validate.key(key)
    d = validate.integer("d", d, 1)
    s = validate.nonnegative("singular_values", singular_values, why="singular values are >= 0")
    if s.ndim != 1 or s.size == 0:
        raise ValueError(f"singular_values must be a non-empty list of numbers, got shape {s.shape}")
    s = jnp.asarray(s, dtype=float)
    p = s.shape[0]
    if p > d:
        raise ValueError(f"singular_values: {p} singular values need p <= d = {d}")
    k1, k2 = jax.random.split(key)
    U, _ = jnp.linalg.qr(normal(k1, (p, p)))
    V, _ = jnp.linalg.qr(normal(k2, (d, p)))
    return (U * s) @ V.T


@precise
def sine_target(key, d: int, freq: float = 4.0) -> tuple[Target, Array]:
    """The paper's target ``y = wᵀx + sin(freq · wᵀx)``, ``w_i ~ U[-1/2, 1/2]``.

    Odd in x. Returns the target function and ``w`` (d,).
    """
    validate.key(key)
    d = validate.integer("d", d, 1)
    freq = validate.real("freq", freq, scalar=True)
    w = jax.random.uniform(key, (d,), minval=-0.5, maxval=0.5)

    def f(X):
        z = X @ w
        return (z + jnp.sin(freq * z))[:, None]

    return _reads("sine_target", d, f), w


def product_target(indices=(0, 1, 2)) -> Target:
    """``y = Π_{i in indices} x_i``: odd for an odd count (x1 x2 x3), even otherwise."""
    if not isinstance(indices, tuple | list | np.ndarray):
        raise TypeError(f"indices={indices!r} must be a tuple of input coordinates, e.g. (0, 1, 2)")
    ints = [validate.integer(f"indices[{k}]", i, 0) for k, i in enumerate(indices)]
    if not ints:
        raise ValueError("indices is empty: give at least one input coordinate, e.g. (0, 1, 2)")
    idx = jnp.asarray(ints)
    return _reads("indices", max(ints) + 1, lambda X: jnp.prod(X[:, idx], axis=1, keepdims=True))


def abs_target(index: int = 0) -> Target:
    """``y = |x_i|``: even and positively 1-homogeneous."""
    index = validate.integer("index", index, 0)
    return _reads("index", index + 1, lambda X: jnp.abs(X[:, index : index + 1]))


def xor_target(i: int = 0, j: int = 1) -> Target:
    """``y = sign(x_i) sign(x_j)``: the even, XOR-like target."""
    i, j = validate.integer("i", i, 0), validate.integer("j", j, 0)
    return _reads("i, j", max(i, j) + 1, lambda X: (jnp.sign(X[:, i]) * jnp.sign(X[:, j]))[:, None])


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
    validate.key(key)
    validate.callable_("target", target)
    n, d = validate.integer("n", n, 1), validate.integer("d", d, 1)
    n_test = validate.integer("n_test", n_test, 0)
    noise = validate.nonnegative("noise", noise, scalar=True)
    for name, v in (("symmetric", symmetric), ("mirror_targets", mirror_targets), ("whitened", whitened)):
        validate.flag(name, v)
    kx, kn, kt, ktn = jax.random.split(key, 4)
    X = gaussian_inputs(kx, n, d, cov)
    Y0 = target_values(target, X)
    Y = Y0 + noise * normal(kn, Y0.shape)
    if symmetric and mirror_targets:
        X, Y = symmetrize(X, Y)
    elif symmetric:
        k2 = jax.random.fold_in(kn, 1)
        Y = jnp.concatenate([Y, target_values(target, -X) + noise * normal(k2, Y.shape)])
        X = symmetrize(X)
    Xt = Yt = None
    if n_test:
        Xt = gaussian_inputs(kt, n_test, d, cov)
        Yt = target_values(target, Xt) + noise * normal(ktn, (n_test, Y.shape[1]))
    if whitened:
        # targets stay functions of the raw inputs; only the representation changes
        X, M = whiten(X)
        Xt = None if Xt is None else Xt @ M
    return Dataset(X, Y, Xt, Yt)
