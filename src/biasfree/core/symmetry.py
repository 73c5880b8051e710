"""The symmetry measure: how far a data set is from mirror-symmetric (docs/theory.md §2.1).

A set of points ``z_n = (x_n, y_n)`` is symmetric when it equals its mirror image as a
multiset, ``{z_n} = {-z_n}``; the exact leaky <-> linear results rest on it. The one
measure is :func:`mirror_violation`; :func:`is_symmetric` compares it with a tolerance,
and :func:`asymmetry` summarises the same nearest-mirror distances as a relative mean.
"""

from __future__ import annotations

import numpy as np
from scipy.spatial import cKDTree

from .. import _validate as validate


def _points(X, Y) -> np.ndarray:
    """The rows ``z_n = [x_n, y_n]`` (N, d + p), or ``x_n`` when ``Y`` is None."""
    if Y is None:
        return validate.finite_array("X", X, ndim=2)
    return np.hstack(validate.data(X, Y))


def nearest_mirror(Z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(min_m ||z_n + z_m||, that m)`` for every row n of ``Z``: -z_n's nearest row (k-d tree)."""
    return cKDTree(Z).query(-Z, k=1)


def mirror_violation(X, Y=None) -> float:
    """How far the points ``z_n = (x_n, y_n)`` are from a mirror-symmetric multiset.

    Returns ``v = max_n ||z_n + z_π(n)||`` for a one-to-one pairing ``π`` of the points with
    mirrors: ``v = 0`` exactly when every point's mirror ``-z`` is present as often as the
    point itself (a duplicated point without a duplicated mirror is a violation, which a
    nearest-mirror test misses), and ``v`` is at least the largest nearest-mirror distance.
    The pairing is the one sorting gives (exact for symmetric data), improved by an optimal
    assignment (``scipy.optimize.linear_sum_assignment``) when that is not tight and
    N <= 1500. ``X`` (N, d), ``Y`` (N, p), (N,) or None. No tolerance: compare ``v`` with
    the data's scale yourself (``v / max_n ||z_n||``).
    """
    from scipy.optimize import linear_sum_assignment

    Z = _points(X, Y)
    order = np.lexsort(Z.T[::-1])
    mirror = np.lexsort((-Z).T[::-1])
    ub = float(np.max(np.linalg.norm(Z[order] + Z[mirror], axis=1)))
    if ub == 0.0:
        return 0.0
    lb = float(np.max(nearest_mirror(Z)[0]))
    if ub <= lb or Z.shape[0] > 1500:
        return ub
    D = np.linalg.norm(Z[:, None, :] + Z[None, :, :], axis=-1)
    rows, cols = linear_sum_assignment(D**2)
    return float(min(ub, np.max(D[rows, cols])))


def is_symmetric(X, Y=None, tol: float = 1e-9) -> bool:
    """True if :func:`mirror_violation` of the points (x, y) is at most ``tol`` (Euclidean):
    every point's mirror (-x, -y) is present as often as the point itself."""
    tol = validate.nonnegative("tol", tol, scalar=True)
    return bool(mirror_violation(X, Y) <= tol)


def asymmetry(X, Y=None) -> float:
    """The mean relative nearest-mirror distance, a number ≥ 0:

        A = <min_m ||z_n + z_m||²>_n / <||z_n||²>_n,

    with ``z_n`` the rows of ``[X, Y]`` (``Y`` None: inputs alone). ``A = 0`` exactly when
    every (x, y) has its mirror (-x, -y) in the set; a set none of whose points has a mirror
    gives A of order 1 (about 2 for scattered high-dimensional points, more for a cloud on
    one side of the origin, such as raw pixel intensities).
    """
    Z = _points(X, Y)
    power = float(np.mean(np.sum(Z**2, axis=1)))
    if power == 0.0:
        return 0.0
    return float(np.mean(nearest_mirror(Z)[0] ** 2) / power)
