"""The nearest of a net's embedded k-unit fixed points when each costs a numerical solve
(docs/theory.md §11.7.2, §11.7.6): candidates in a given order, each skipped when a lower bound on
its distance is already no smaller than the best distance found (branch and bound: the answer is
the nearest of all the candidates, found with fewer solves). A candidate whose search did not reach
a fixed point is not one, and is not answered. A net of units (ReLU, conv) has two candidates per k,
the k strongest groups and the groups merged into clusters (:func:`merged_candidates`), each with its
bound."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from .stage_budget import check


def dropped_norms(total2: float, kept2: Sequence[float]) -> np.ndarray:
    """``b_k = (‖θ‖² − Σ_{j<k} kept2_j)^{1/2}`` for k = 0 … len(kept2): the norm of the units an
    embedded k-unit point sets to zero, when it keeps the first k groups of ``kept2`` (their squared
    norms; ``total2`` = ‖θ‖²). Each is a lower bound on ‖θ − θ*_k‖: on a zeroed unit θ − θ* is θ's
    own weights, and the kept units add a square ≥ 0."""
    kept = np.concatenate([[0.0], np.cumsum(np.asarray(kept2, float))])
    return np.sqrt(np.maximum(total2 - kept, 0.0))


SOLVES = 4
"""At most this many solves per answer (the origin, exact, not counted): the count's k and k − 1 (the two
solved before), then k = 1, 2, …; a net of units (two candidates per k) has instead SOLVES searches'
worth of units, ``SOLVES × count``, spent on smaller searches too. A k left unsolved whose bound is below
the best distance is reported as such (``None``): a net at a small init given without ``init`` counts
every unit (§11.1) and would otherwise solve each k (measured: 51 solves, 296 s, for a 10→50→1 ReLU net
at σ = 1e-3)."""


def nearest(order: Sequence[int], bound: Callable[[int], float], solve: Callable[[int], tuple],
            limit: int = SOLVES):
    """``(best, tried)``: ``solve(k)`` returns ``(point, distance, stationary)``, or None when it has
    no solve left (k is then left unsolved, as past the limit); the candidates k are
    taken in ``order``, each skipped when ``bound(k)`` (a lower bound on its distance) is at least the
    best distance so far, and at most ``limit`` solved after the first. Only a stationary candidate
    (a fixed point: its search reached one) can be the nearest; ``best`` is ``(k, point, distance)`` of
    the nearest (the first of equals), or of the first candidate when none is stationary; ``tried`` the
    ``(k, distance, stationary)`` solved, and ``(k, bound, None)`` for each k left unsolved by the
    limit whose bound is below the best distance, in k's order."""
    best, first, tried, left = None, None, {}, []
    for k in order:
        if best is not None and bound(k) >= best[2]:
            continue
        if len(tried) > limit:
            left.append(k)
            continue
        check()
        got = solve(k)
        if got is None:  # its solves spent (a solve may make more than one search)
            left.append(k)
            continue
        point, dist, ok = got
        tried[k] = (k, dist, bool(ok))
        first = first or (k, point, dist)
        if ok and (best is None or dist < best[2]):
            best = (k, point, dist)
    best = best or first
    for k in left:
        if bound(k) < best[2]:
            tried[k] = (k, float(bound(k)), None)
    return best, tuple(tried[k] for k in sorted(tried))


def merged_candidates(U, V, group, learned) -> dict:
    """``{k: [(kept, b), …]}`` for k = 0 … n = len(learned): the k-unit candidates of the nearest
    fixed point (§11.7.6), each ``kept`` (k clusters, tuples of group labels; its embedding zeroes
    the rest) with b a lower bound on its ‖θ − θ*‖.

    - The groups are merged greedily into m = n, n − 1, …, 1 clusters, each one narrow unit whose
      members become rescaled copies ``ũ_i* = c_i ŵ`` of one direction (module doc). A kept cluster C
      costs at least ``min_ŵ Σ_{i∈C} ‖ũ_i − c_i ŵ‖² = 2(Σ c_i² − ‖s_C‖)``, ``s_C = Σ_{i∈C} c_i ũ_i``,
      of ‖θ − θ*‖² (the readouts add a square ≥ 0); a zeroed unit its own ‖ũ‖² + ‖v‖². Merging A and
      B raises the first by ``2(‖s_A‖ + ‖s_B‖ − ‖s_A + s_B‖)``: the pair of least rise merges (Ward's
      rule for this cost), unless the rise exceeds zeroing the smaller of the two (a unit of init noise
      pointing away is zeroed, not merged); merging stops when no pair is left.
    - At each level the k strongest clusters (by ‖Σ_{i∈C} c_i v_i‖) are kept. The candidates of k: the
      k strongest groups (m = n), and the level m ∈ [k, n) of least bound (k = n, or no level below
      k: one)."""
    c = np.linalg.norm(U, axis=1)
    n = len(learned)
    rows = [group == g for g in learned]
    S = np.array([(c[r, None] * U[r]).sum(0) for r in rows]).reshape(n, U.shape[1])  # n = 0: no groups
    T = np.array([(c[r, None] * V[r]).sum(0) for r in rows]).reshape(n, V.shape[1])
    own = np.array([float(np.sum(c[r] ** 2)) for r in rows])
    size2 = np.array([float(np.sum(U[r] ** 2) + np.sum(V[r] ** 2)) for r in rows])
    total2 = float(np.sum(U**2) + np.sum(V**2))
    clusters = [(g,) for g in learned]
    G = S @ S.T  # s_A·s_B, updated by adding rows as clusters merge
    out = {k: [] for k in range(n + 1)}
    while True:
        d = np.sqrt(np.maximum(np.diag(G), 0.0))
        order = np.argsort(-np.linalg.norm(T, axis=1), kind="stable")
        low2 = total2 - np.cumsum(size2[order]) + np.cumsum(np.maximum(2 * (own - d), 0.0)[order])
        m = len(clusters)
        for k in range(0 if m == n else 1, m + 1):  # k = 0 keeps nothing: once, at the groups
            b = math.sqrt(max(total2 if k == 0 else float(low2[k - 1]), 0.0))
            if m == n or len(out[k]) < 2 or b < out[k][1][1]:
                out[k][int(m < n):] = [(tuple(clusters[j] for j in order[:k]), b)]
        if m <= 1:  # (m = 0: no group learned, the origin only)
            return out
        rise = 2 * (d[:, None] + d[None] - np.sqrt(np.maximum(d[:, None] ** 2 + d[None] ** 2 + 2 * G, 0.0)))
        rise[(rise >= np.minimum(size2[:, None], size2[None])) | np.eye(m, dtype=bool)] = np.inf
        if not np.isfinite(rise).any():  # every merge costs more than zeroing the smaller: no level below
            return out
        i, j = sorted(np.unravel_index(int(np.argmin(rise)), rise.shape))
        clusters[i] += clusters.pop(j)
        G[i] += G[j]
        G[:, i] += G[:, j]
        G = np.delete(np.delete(G, j, 0), j, 1)
        for A in (T, own, size2):
            A[i] += A[j]
        T, own, size2 = (np.delete(A, j, 0) for A in (T, own, size2))
