"""The nearest of a net's embedded k-unit fixed points when each costs a numerical solve
(docs/theory.md §11.7.2, §11.7.6): candidates in a given order, each skipped when a lower bound on
its distance is already no smaller than the best distance found (branch and bound: the answer is
the nearest of all the candidates, found with fewer solves). A candidate whose search did not reach
a fixed point is not one, and is not answered."""

from __future__ import annotations

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
solved before), then k = 1, 2, … A k left unsolved whose bound is below the best distance is reported
as such (``None``): a net at a small init given without ``init`` counts every unit (§11.1) and would
otherwise solve each k (measured: 51 solves, 296 s, for a 10→50→1 ReLU net at σ = 1e-3)."""


def nearest(order: Sequence[int], bound: Callable[[int], float], solve: Callable[[int], tuple],
            limit: int = SOLVES):
    """``(best, tried)``: ``solve(k)`` returns ``(point, distance, stationary)``; the candidates k are
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
        point, dist, ok = solve(k)
        tried[k] = (k, dist, bool(ok))
        first = first or (k, point, dist)
        if ok and (best is None or dist < best[2]):
            best = (k, point, dist)
    best = best or first
    for k in left:
        if bound(k) < best[2]:
            tried[k] = (k, float(bound(k)), None)
    return best, tuple(tried[k] for k in sorted(tried))
