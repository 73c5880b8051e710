"""What bias-free (leaky) ReLU networks represent: odd/even parts, homogeneity (docs/theory.md §1).

Conventions (§0): inputs ``X`` (N, d), outputs (N, p). A *function* here is any
callable mapping a batch ``X`` (N, d) to (N,) or (N, p): a network
(``net_function(params, alpha)``), a target from :mod:`biasfree.core.data`, or plain
Python (``per_point=True`` for a function of one point x). For a two-layer bias-free net
``f_odd`` is linear and ``f_even`` positively 1-homogeneous (§1.2). What a *target* needs
that two-layer nets lack (the floors) is in :mod:`biasfree.expressivity.floors`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from .. import _validate as validate
from ..core.layers import Params
from ..core.nets import check_apply, forward
from ..core.precision import precise

Function = Callable


# ------------------------------------------------------------------ evaluation


@precise
def net_function(params: Params, alpha) -> Function:
    """The network as a function ``X -> forward(params, X, alpha)``."""
    check_apply(params, None, alpha, required=False)
    return lambda X: forward(params, jnp.asarray(X), alpha)


@precise
def evaluate(f: Function, X, *, per_point: bool = False, name: str = "f") -> np.ndarray:
    """``f`` on the rows of ``X`` (N, d) as a float64 array (N, p).

    ``f`` takes a batch (N, d) and returns (N,) or (N, p); with ``per_point`` it
    takes one point (d,) and returns a number or a (p,) vector (applied row by row:
    slow, for plain Python functions of x). ``name``: how errors call ``f``.
    """
    validate.callable_(name, f)
    validate.flag("per_point", per_point)
    X = validate.finite_array("X", X, ndim=2)
    try:
        F = (np.array([np.atleast_1d(np.asarray(f(x), dtype=float)) for x in X]) if per_point
             else np.asarray(f(X), dtype=float))
    except (TypeError, ValueError) as e:
        if "convert" not in str(e) and "sequence" not in str(e) and "inhomogeneous" not in str(e):
            raise  # the function's own error
        raise TypeError(f"{name} must return real numbers, (N,) or (N, p); converting its result "
                        f"failed: {e}") from None
    if F.ndim == 1:
        F = F[:, None]
    if F.ndim != 2 or F.shape[0] != X.shape[0]:
        raise ValueError(
            f"{name} returned shape {F.shape} for {X.shape[0]} inputs; it must map a batch "
            "(N, d) to (N,) or (N, p) (pass per_point=True for a function of one point x)"
        )
    if not np.all(np.isfinite(F)):
        raise ValueError(f"{name} returned NaN/inf values on the given inputs X: use a function that "
                         "is finite there (rescale fast-growing targets)")
    return F


@precise
def compiled(f: Function, X_probe) -> Function:
    """``jax.jit(f)`` if ``f`` traces under JAX on inputs shaped like ``X_probe`` (N, d),
    else ``f`` itself (plain NumPy/Python functions). Quadrature calls a target
    hundreds of times on one shape: compiled once, each call then costs microseconds."""
    try:
        jf = jax.jit(f)
        jf(np.asarray(X_probe, dtype=float))
        return jf
    except Exception:  # noqa: BLE001 - anything that does not trace runs uncompiled
        return f


def energy(A) -> float:
    """``<||a_n||²>``: the mean over the rows a_n of A (N, p) of their squared norm."""
    return float(np.mean(np.sum(np.asarray(A) ** 2, axis=1)))


@dataclass(frozen=True)
class Decomposition:
    """``values = odd + even`` on the rows of X, each (N, p): ``odd = (f(x) - f(-x))/2``,
    ``even = (f(x) + f(-x))/2``."""

    values: np.ndarray
    odd: np.ndarray
    even: np.ndarray

    odd_energy = property(lambda self: energy(self.odd), doc="``<||f_odd||²>`` over the rows.")
    even_energy = property(lambda self: energy(self.even), doc="``<||f_even||²>`` over the rows.")


@precise
def decompose(f: Function, X, *, per_point: bool = False) -> Decomposition:
    """Odd and even parts of ``f`` at the rows of ``X`` (evaluates ``f(X)`` and ``f(-X)``)."""
    X = validate.finite_array("X", X, ndim=2)
    F, Fm = evaluate(f, X, per_point=per_point), evaluate(f, -X, per_point=per_point)
    return Decomposition(F, 0.5 * (F - Fm), 0.5 * (F + Fm))


@dataclass(frozen=True)
class OddFit:
    """Least-squares linear fit of the odd part: ``beta`` (d, p) minimises
    ``Σ_n ||f_odd(x_n) - βᵀx_n||²``; ``residual`` and ``odd_energy`` are the means of
    ``||f_odd - βᵀx||²`` and ``||f_odd||²``; ``fraction = residual / odd_energy``
    (0 when the odd part vanishes)."""

    beta: np.ndarray
    residual: float
    odd_energy: float

    @property
    def fraction(self) -> float:
        return 0.0 if self.odd_energy == 0.0 else self.residual / self.odd_energy


@precise
def odd_nonlinearity(f: Function, X, *, per_point: bool = False) -> OddFit:
    """How far the odd part of ``f`` is from linear on the sample ``X`` (N, d).

    ``fraction`` = ``min_β Σ||f_odd - βᵀx||² / Σ||f_odd||²``, the relative energy of
    the odd part outside its best linear fit: 0 (to round-off) for every two-layer
    bias-free net (§1.2), positive for deeper ones that use their extra expressivity.
    """
    X = validate.finite_array("X", X, ndim=2)
    beta, res, dec = odd_fit(f, X, per_point)
    return OddFit(beta, float(np.mean(res)), dec.odd_energy)


def odd_fit(f: Function, X, per_point: bool) -> tuple[np.ndarray, np.ndarray, Decomposition]:
    """``(β, ||f_odd(x_n) - βᵀx_n||² (N,), decompose(f, X))``: β the least-squares fit of f_odd."""
    return odd_fit_of(X, decompose(f, X, per_point=per_point))


def odd_fit_of(X, dec: Decomposition, fit=None) -> tuple[np.ndarray, np.ndarray, Decomposition]:
    """:func:`odd_fit` from a decomposition ``dec`` of f at the rows of ``X`` already made;
    ``fit(X, F)`` the least-squares solver (None: ``np.linalg.lstsq``; ``analyse`` passes
    :meth:`biasfree.analysis.moments.Moments.fit`, the same β to round-off)."""
    beta = np.linalg.lstsq(X, dec.odd, rcond=None)[0] if fit is None else fit(X, dec.odd)
    return beta, np.sum((dec.odd - X @ beta) ** 2, axis=1), dec


@precise
def homogeneity_gap(f: Function, X, *, scales=(0.5, 2.0, 7.0), degree: float = 1.0,
                    per_point: bool = False) -> float:
    """Largest relative violation of positive homogeneity ``f(λx) = λ^k f(x)``, λ > 0.

    ``max_λ ||f(λX) - λ^k f(X)|| / (λ^k ||f(X)||)`` (Frobenius norms over the sample
    ``X``) for λ in ``scales`` and k = ``degree``. Every bias-free (leaky) ReLU net of
    any depth has gap 0 for k = 1 (to round-off).
    """
    lam = validate.positive("scales", scales, why="homogeneity is about f(λx), λ > 0")
    if lam.ndim != 1 or lam.size == 0:
        raise ValueError(f"scales={scales!r} must be a non-empty list of positive numbers")
    degree = validate.real("degree", degree, scalar=True)
    X = validate.finite_array("X", X, ndim=2)
    F = evaluate(f, X, per_point=per_point)
    norm = np.linalg.norm(F)
    if norm == 0.0:
        return 0.0 if all(np.linalg.norm(evaluate(f, s * X, per_point=per_point)) == 0 for s in lam) \
            else float("inf")
    return max(float(np.linalg.norm(evaluate(f, s * X, per_point=per_point) - s**degree * F)
                     / (s**degree * norm)) for s in lam)


@precise
def is_positively_homogeneous(f: Function, X, *, tol: float = 1e-10, degree: float = 1.0,
                              per_point: bool = False) -> bool:
    """True if :func:`homogeneity_gap` is at most ``tol`` (relative)."""
    tol = validate.nonnegative("tol", tol, scalar=True)
    return homogeneity_gap(f, X, degree=degree, per_point=per_point) <= tol
