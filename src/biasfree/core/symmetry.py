"""The symmetry measure: how far a data set is from mirror-symmetric (docs/theory.md §2.1).

A set of points ``z_n = (x_n, y_n)`` is symmetric when it equals its mirror image as a
multiset, ``{z_n} = {-z_n}``; the exact leaky <-> linear results rest on it. The one
measure is :func:`mirror_violation`; :func:`is_symmetric` compares it with a tolerance,
and :func:`asymmetry` summarises the nearest-mirror distances (:func:`nearest_mirror`) as
a relative mean.

Memory is linear in the data, O(N·D) for N points of D = d + p numbers: no N×N×D array is
ever built. The mirror pairing that sorting gives costs O(N·D log N) time; a nearest-mirror
search looks first in a window of one coordinate around the mirror (near-symmetric data:
a few points each) and otherwise over Gram-matrix blocks of at most :data:`BLOCK_ENTRIES`
numbers, O(N²·D) time, every distance it returns recomputed directly as ``||z_n + z_m||``.
"""

from __future__ import annotations

import numpy as np

from .. import _validate as validate

BLOCK_ENTRIES = 2**22
"""Numbers per temporary block of the searches (32 MiB in float64)."""
ASSIGNMENT_MAX = 1500
"""Up to this many points :func:`mirror_violation` refines the sort pairing by an optimal assignment."""
WINDOW_MAX = 64
"""A point whose one-coordinate window holds more candidates than this is searched by Gram blocks."""
CANDIDATES_MAX = 64
"""At most this many Gram-block candidates per point are checked directly (ties beyond: see
:func:`nearest_mirror`)."""


def _points(X, Y) -> np.ndarray:
    """The rows ``z_n = [x_n, y_n]`` (N, d + p), or ``x_n`` when ``Y`` is None, checked."""
    if Y is None:
        validate.finite_array("X", X, ndim=2)
    else:
        validate.data(X, Y)  # checked (on copies, dropped before Z is made)
    return stack_points(X, Y)


def stack_points(X, Y=None) -> np.ndarray:
    """``_points`` unchecked: a float copy of ``X`` (N, d), or ``[X, Y]`` (N, d + p) with a
    1-D ``Y`` read as (N, 1)."""
    if Y is None:
        return np.asarray(X).astype(float)
    X = np.asarray(X, float)
    return np.hstack([X, np.asarray(Y, float).reshape(X.shape[0], -1)])


def max_row_norm(X, Y=None) -> float:
    """``max_n ||z_n||`` over the rows ``z_n = [x_n, y_n]`` of the arrays ``X`` (N, d) and ``Y``
    (N, p) (None: ``x_n`` alone): ``np.linalg.norm(np.hstack([X, Y]), axis=1).max()``, the
    same numbers, without the stacked copy (row blocks of :data:`BLOCK_ENTRIES` numbers)."""
    X = np.asarray(X)
    Y = None if Y is None else np.asarray(Y).reshape(X.shape[0], -1)
    step = max(1, BLOCK_ENTRIES // (X.shape[1] + (0 if Y is None else Y.shape[1])))
    best = 0.0
    for i in range(0, X.shape[0], step):
        Zb = X[i:i + step] if Y is None else np.hstack([X[i:i + step], Y[i:i + step]])
        best = max(best, float(np.max(np.linalg.norm(Zb, axis=1))))
    return best


def _lex_order(Z: np.ndarray, sign: float) -> np.ndarray:
    """``np.lexsort((sign * Z).T[::-1])``, the rows of ``sign·Z`` in lexicographic order (ties
    by index), without lexsort's D full sorts: sort by the first column, then re-sort only the
    runs still tied by the next column, and so on (O(N log N) for rows that differ early)."""
    N, D = Z.shape
    order = np.argsort(sign * Z[:, 0], kind="stable")
    key = sign * Z[order, 0]
    start = np.ones(N, bool)  # start[i]: position i begins a run of rows tied so far
    start[1:] = key[1:] != key[:-1]
    for j in range(1, D):
        if start.all():
            break
        gid = np.cumsum(start) - 1
        pos = np.flatnonzero(np.bincount(gid)[gid] > 1)  # positions in tied runs (contiguous)
        g, rows = gid[pos], order[pos]
        key = sign * Z[rows, j]
        first = np.ones(pos.size, bool)
        first[1:] = g[1:] != g[:-1]
        if np.array_equal(key, key[first][np.cumsum(first) - 1]):
            continue  # column j constant on every tied run: nothing to split
        sub = np.lexsort((key, g))  # stable, and g is non-decreasing: runs stay in place
        order[pos], key = rows[sub], key[sub]
        start[pos[1:][(key[1:] != key[:-1]) & ~first[1:]]] = True
    return order


def _pair_norms(Z: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``||z_a + z_b||`` for index arrays ``a``, ``b``, computed directly in blocks."""
    out = np.empty(a.size, dtype=Z.dtype)
    step = max(1, BLOCK_ENTRIES // max(Z.shape[1], 1))
    for i in range(0, a.size, step):
        out[i:i + step] = np.linalg.norm(Z[a[i:i + step]] + Z[b[i:i + step]], axis=1)
    return out


def _pairing(Z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(π, u)``: the one-to-one pairing of the rows of Z with mirrors that sorting gives
    (the i-th smallest row of Z with the i-th smallest of -Z, lexicographically) and
    ``u_n = ||z_n + z_π(n)||``; all u are 0 exactly when Z is symmetric as a multiset."""
    order, mirror = _lex_order(Z, 1.0), _lex_order(Z, -1.0)
    partner = np.empty_like(order)
    partner[order] = mirror
    u = np.empty(Z.shape[0], dtype=Z.dtype)
    u[order] = _pair_norms(Z, order, mirror)
    return partner, u


def _keep_nearest(Z, rows, cand, dist, idx) -> None:
    """Set ``dist[n], idx[n]`` to the nearest mirror among candidate pairs (rows, cand), the
    distances computed directly; ties go to the smallest index."""
    if rows.size == 0:
        return
    r = _pair_norms(Z, rows, cand)
    o = np.lexsort((cand, r, rows))
    keep = o[np.r_[True, rows[o][1:] != rows[o][:-1]]]
    dist[rows[keep]], idx[rows[keep]] = r[keep], cand[keep]


def _window_search(Z, todo, u, dist, idx) -> np.ndarray:
    """Search the rows ``todo`` among the points m with ``|z_mj + z_nj| <= u_n`` on the
    coordinate j of widest spread (every mirror within u_n is there); returns the rows whose
    window holds more than :data:`WINDOW_MAX` points, left for ``_gram_search``."""
    N, D = Z.shape
    j = int(np.argmax(np.ptp(Z, axis=0)))
    s_idx = np.argsort(Z[:, j], kind="stable")
    s = Z[s_idx, j]
    eps = float(np.finfo(Z.dtype).eps)
    c = -Z[todo, j]
    # u_n was rounded (relative error <= (D + 2) eps) and so are the window's ends (eps |c|)
    r = u[todo] * (1 + 2 * (D + 4) * eps) + 4 * eps * np.abs(c)
    lo, hi = np.searchsorted(s, c - r, "left"), np.searchsorted(s, c + r, "right")
    small = hi - lo <= WINDOW_MAX
    rows, lo, cnt = todo[small], lo[small], (hi - lo)[small]
    rep = np.repeat(np.arange(rows.size), cnt)
    offset = np.arange(rep.size) - np.repeat(np.cumsum(cnt) - cnt, cnt)
    _keep_nearest(Z, rows[rep], s_idx[lo[rep] + offset], dist, idx)
    return todo[~small]


def _gram_search(Z, rows, dist, idx) -> None:
    """Search the rows ``rows`` over all points in blocks of the Gram matrix: the approximate
    ``D̃²_nm = ||z_n||² + ||z_m||² + 2 z_n·z_m`` is within ``E_n = γ_{D+2} (||z_n|| + max||z||)²``
    of ``||z_n + z_m||²`` (γ_k = k ε / (1 - k ε), any summation order), so every m with
    ``D̃²_nm <= min D̃²_n· + 2 E_n`` (twice, to cover the rounding of the bound itself) is a
    candidate and the nearest is among them; the candidates' distances are computed directly."""
    N, D = Z.shape
    sq = np.einsum("ij,ij->i", Z, Z)
    norm = np.sqrt(sq)
    eps = 0.5 * float(np.finfo(Z.dtype).eps)
    gamma = (D + 2) * eps / (1 - (D + 2) * eps)
    E = 2 * gamma * (norm + norm.max()) ** 2
    step = max(1, BLOCK_ENTRIES // N)
    for i in range(0, rows.size, step):
        rb = rows[i:i + step]
        G = Z[rb] @ Z.T
        G *= 2.0
        G += sq[rb, None]
        G += sq[None, :]
        cand = G <= (G.min(axis=1) + 2 * E[rb])[:, None]
        for row in np.flatnonzero(cand.sum(axis=1) > CANDIDATES_MAX):  # the nearest among its candidates
            m = np.flatnonzero(cand[row])
            cand[row] = False
            cand[row, m[np.argpartition(G[row, m], CANDIDATES_MAX - 1)[:CANDIDATES_MAX]]] = True
        b, m = np.nonzero(cand)
        _keep_nearest(Z, rb[b], m, dist, idx)


def _nearest(Z, partner, u, rows=None) -> tuple[np.ndarray, np.ndarray]:
    """Nearest mirrors of the rows ``rows`` (None: all; the other entries keep the sort
    partner's distance ``u``, an upper bound)."""
    u = u.astype(float)
    dist, idx = u.copy(), partner.copy()
    todo = np.flatnonzero(u > 0)  # u_n = 0: the mirror is present, nothing is nearer
    if rows is not None:
        todo = np.intersect1d(todo, rows)
    if todo.size:
        Z = np.asarray(Z, float)  # the search in float64 whatever Z's precision
        _gram_search(Z, _window_search(Z, todo, u, dist, idx), dist, idx)
    return dist, idx


def nearest_mirror(Z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(min_m ||z_n + z_m||, that m)`` for every row n of ``Z`` (N, D): -z_n's nearest row.

    Exact up to the rounding of ``||z_n + z_m||`` itself, except where more than
    :data:`CANDIDATES_MAX` rows tie with the nearest within the Gram matrix's round-off
    ``E_n`` (``_gram_search``): then the distance returned is within ``2 E_n`` of the
    least, in squares. Ties go to the smallest index (a row at distance 0: its sort partner).
    O(N·D) memory; time O(N·D log N) when every point has its mirror nearby (within a
    window of :data:`WINDOW_MAX` points on one coordinate), up to O(N²·D) otherwise.
    """
    Z = np.asarray(Z)
    return _nearest(Z, *_pairing(Z))


def row_violation(Z: np.ndarray, tol: float | None = None, pairing=None) -> float:
    """:func:`mirror_violation` of the rows Z; with ``tol``, a number on the same side of
    ``tol`` as the violation, returned as soon as that side is known; ``pairing`` Z's sort pairing
    ``(π, u)`` if already made."""
    from scipy.optimize import linear_sum_assignment

    partner, u = _pairing(Z) if pairing is None else pairing
    ub = float(np.max(u))
    if ub == 0.0 or Z.shape[0] > ASSIGNMENT_MAX or (tol is not None and ub <= tol):
        return ub
    lb = float(np.max(_nearest(Z, partner, u)[0]))
    if ub <= lb or (tol is not None and lb > tol):
        return ub if ub <= lb else lb
    Z64 = np.asarray(Z, float)
    sq = np.einsum("ij,ij->i", Z64, Z64)
    D2 = np.maximum(sq[:, None] + sq[None, :] + 2.0 * (Z64 @ Z64.T), 0.0)  # N² numbers, N <= 1500
    rows, cols = linear_sum_assignment(D2)
    return float(min(ub, np.max(_pair_norms(Z, rows, cols))))


def mirror_violation(X, Y=None) -> float:
    """How far the points ``z_n = (x_n, y_n)`` are from a mirror-symmetric multiset.

    Returns ``v = max_n ||z_n + z_π(n)||`` for a one-to-one pairing ``π`` of the points with
    mirrors: ``v = 0`` exactly when every point's mirror ``-z`` is present as often as the
    point itself (a duplicated point without a duplicated mirror is a violation, which a
    nearest-mirror test misses), and ``v`` is at least the largest nearest-mirror distance.
    The pairing is the one sorting gives (exact for symmetric data), improved by an optimal
    assignment (``scipy.optimize.linear_sum_assignment`` on the squared distances from the
    Gram matrix, the chosen pairs' distances computed directly) when that is not tight and
    N <= :data:`ASSIGNMENT_MAX`. ``X`` (N, d), ``Y`` (N, p), (N,) or None. No tolerance:
    compare ``v`` with the data's scale yourself (``v / max_n ||z_n||``). Memory O(N (d + p))
    (N² numbers for the assignment).
    """
    return row_violation(_points(X, Y))


def _mirror_violation(X, Y=None) -> float:
    """:func:`mirror_violation` of checked arrays, unchecked."""
    return row_violation(stack_points(X, Y))


def is_symmetric(X, Y=None, tol: float = 1e-9) -> bool:
    """True if :func:`mirror_violation` of the points (x, y) is at most ``tol`` (Euclidean):
    every point's mirror (-x, -y) is present as often as the point itself."""
    tol = validate.nonnegative("tol", tol, scalar=True)
    return _is_symmetric(_points(X, Y), tol)


def _is_symmetric(Z: np.ndarray, tol: float) -> bool:
    """:func:`is_symmetric` of the rows ``Z`` (:func:`stack_points` of checked arrays), unchecked."""
    return bool(row_violation(Z, tol) <= tol)


def asymmetry(X, Y=None, *, points: int | None = None) -> float:
    """The mean relative nearest-mirror distance, a number ≥ 0:

        A = <min_m ||z_n + z_m||²>_n / <||z_n||²>_n,

    with ``z_n`` the rows of ``[X, Y]`` (``Y`` None: inputs alone). ``A = 0`` exactly when
    every (x, y) has its mirror (-x, -y) in the set; a set none of whose points has a mirror
    gives A of order 1 (about 2 for scattered high-dimensional points, more for a cloud on
    one side of the origin, such as raw pixel intensities). Distances from
    :func:`nearest_mirror`. ``points``: average the numerator over this many evenly spaced
    rows only (each one's nearest mirror still sought among all N), an estimate in
    O(points·N·D) time instead of up to O(N²·D); None (or ≥ N): every row, exact.
    """
    Z = _points(X, Y)
    return _asymmetry(Z, None if points is None else validate.integer("points", points, 1))


def asymmetry_and_violation(Z: np.ndarray, points: int | None = None, d: int | None = None) -> tuple:
    """``(asymmetry over points rows, mirror violation)`` of the rows ``Z`` (:func:`stack_points` of
    checked arrays, unchecked), both from one sort pairing (the sort of N rows is each one's
    costliest part: 1.3 s at 60,000 × 794); with ``d``, also the mirror violation of Z's first d
    columns (the inputs alone) from the same pairing: rows in lexicographic order of all columns
    are in that order of their first d, and rows tied there are equal there, so the i-th smallest
    row of Z[:, :d] and of −Z[:, :d] are the ones Z's pairing pairs (the same distances as their own
    sort's)."""
    partner, u = pairing = _pairing(Z)
    out = (_asymmetry(Z, points, pairing), row_violation(Z, pairing=pairing))
    if d is None:
        return out
    # a view above ASSIGNMENT_MAX (only pair norms, of row copies, are taken); below, a copy, so the
    # assignment's Gram matrix is formed as for X itself
    Zx = Z[:, :d] if Z.shape[0] > ASSIGNMENT_MAX else np.ascontiguousarray(Z[:, :d])
    return (*out, row_violation(Zx, pairing=(partner, _pair_norms(Zx, np.arange(Z.shape[0]), partner))))


def _asymmetry(Z: np.ndarray, points: int | None = None, pairing=None) -> float:
    """:func:`asymmetry` of the rows ``Z`` (:func:`stack_points` of checked arrays), unchecked;
    ``pairing`` Z's sort pairing if already made."""
    N = Z.shape[0]
    step = max(1, BLOCK_ENTRIES // Z.shape[1])  # ||z_n||² in row blocks: no squared copy of Z
    power = float(np.mean(np.concatenate([np.sum(Z[i:i + step] ** 2, axis=1)
                                          for i in range(0, Z.shape[0], step)])))
    if power == 0.0:
        return 0.0
    pairing = _pairing(Z) if pairing is None else pairing
    if points is None or points >= N:
        return float(np.mean(_nearest(Z, *pairing)[0] ** 2) / power)
    rows = np.unique(np.linspace(0, N - 1, points).round().astype(int))
    return float(np.mean(_nearest(Z, *pairing, rows)[0][rows] ** 2) / power)
