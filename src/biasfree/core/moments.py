"""Second moments of a data set: covariances, whitening, and the moment set of a linear net.

``Σ_xx = XᵀX/N``, ``Σ_yx = YᵀX/N`` for inputs ``X`` (N, d) and targets ``Y`` (N, p)
(docs/theory.md §0). A linear net sees the data only through them, so :func:`moment_data`
replaces N points by r = rank(Σ_xx) with the same moments.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from .. import _validate as validate
from .data import Dataset
from .precision import precise

Array = jax.Array


class Whitened(tuple):
    """What :func:`whiten` returns: the pair ``(X_white, M)`` (so ``Xw, M = whiten(X)``
    unpacks as before), with the eigenvalues of ``Σ = XᵀX/N`` (descending) and how many
    directions were kept (``rank``) or dropped (``dropped = d - rank``)."""

    def __new__(cls, X, M, eigenvalues):
        obj = super().__new__(cls, (X, M))
        obj.eigenvalues = np.asarray(eigenvalues, dtype=float)
        return obj

    X = property(lambda self: self[0], doc="The whitened inputs ``X M`` (N, r).")
    M = property(lambda self: self[1], doc="The whitening map ``M`` (d, r).")
    rank = property(lambda self: int(self.M.shape[1]), doc="Directions kept, r (the columns of ``X``).")
    dropped = property(lambda self: int(self.M.shape[0] - self.M.shape[1]), doc="Directions dropped, d - r.")

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
    X = jnp.asarray(validate.finite_array("X", X, ndim=2))
    tol = validate.nonnegative("tol", tol, scalar=True)
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
    M = (evecs / jnp.sqrt(evals)) @ evecs.T if r == d else evecs[:, :r] / jnp.sqrt(evals[:r])
    return Whitened(np.asarray(X @ M), np.asarray(M), lam)  # a tuple subclass: precise leaves it as is


@precise
def input_covariance(X) -> Array:
    """``Σ_xx = <x xᵀ> = XᵀX / N``, shape (d, d)."""
    X = jnp.asarray(validate.finite_array("X", X, ndim=2))
    return X.T @ X / X.shape[0]


@precise
def cross_covariance(X, Y) -> Array:
    """``Σ_yx = <y xᵀ> = YᵀX / N``, shape (p, d)."""
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
    """A data set of r = rank(Σ_xx) points on which a *linear* net of any depth has exactly
    the trajectory it has on ``(X, Y)`` (``X`` (N, d), ``Y`` (N, p)): a cheap linear twin.

    A linear net ``f(x) = Pᵀx`` sees the data only through ``Σ_xx = <x xᵀ>`` and ``Σ_yx``:
    ``L(P) = ½ tr Σ_yy - tr(Pᵀ Σ_xy) + ½ tr(Pᵀ Σ_xx P)``. With ``Σ_xx = Σ_i λ_i e_i e_iᵀ``
    (the r eigenvalues above ``rank_tol · λ_1``), the points ``x'_i = √(r λ_i) e_i``,
    ``y'_i = √(r/λ_i) Σ_yx e_i`` have the same ``Σ_xx`` and ``Σ_yx`` in the directions a
    linear net's gradients reach, so GD and flow give the same parameters to round-off;
    only ``½ tr Σ_yy`` differs, returned as ``loss_offset = ½(<||y||²> - <||y'||²>') ≥ 0``.
    Cost per step O(r d) instead of O(N d). Not valid for α < 1 (a leaky net sees more).
    """
    validate.data(X, Y, y_1d=False)
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
