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
solved before), then k = 1, 2, …; a net of units (two candidates per k) has 2·SOLVES searches. A k left
unsolved whose bound is below the best distance is reported as such (``None``): a net at a small init
given without ``init`` counts every unit (§11.1) and would otherwise solve each k (measured: 51 solves,
296 s, for a 10→50→1 ReLU net at σ = 1e-3)."""


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


EXACT_TOP = 64
"""Above this size (the smaller side of a cluster's rows) σ₁² is bounded, not computed: a merged
cluster's ``σ₁(A ∪ B)² ≤ σ₁(A)² + σ₁(B)²`` (Weyl), so the bound stays a lower bound, tight for
clusters along one direction (copies). Exact at every merge it cost 0.5 s of 4.2 s for 1,024 groups
of one unit each on 784 inputs."""


def _top2(A) -> float:
    """σ₁(A)², from the smaller Gram matrix."""
    G = A @ A.T if A.shape[0] <= A.shape[1] else A.T @ A
    return float(np.linalg.eigvalsh(G)[-1]) if G.size else 0.0


def merged_candidates(U, V, group, learned) -> dict:
    """``{k: [(kept, b), …]}`` for k = 0 … n = len(learned): the k-unit candidates of the nearest
    fixed point (§11.7.6), each ``kept`` (k clusters, tuples of group labels; its embedding zeroes
    the rest) with b a lower bound on its ‖θ − θ*‖.

    - The groups are merged greedily into m = n, n − 1, …, 1 clusters, each one narrow unit whose
      members become rescaled copies ``ũ_i* = c_i ŵ``, ``v_i* = λ_i T`` (module doc). Whatever ŵ, T
      and the c_i, λ_i, a kept cluster C costs at least ``(‖U_C‖² − σ₁(U_C)²) + (‖V_C‖² − σ₁(V_C)²)``
      of ‖θ − θ*‖² (rows onto one direction, Eckart–Young), a zeroed unit its own ‖ũ‖² + ‖v‖².
    - Merging A and B rotates them onto one direction, at least ``2(‖s_A‖ + ‖s_B‖ − ‖s_A + s_B‖)`` at
      the net's own norms (``s_C = Σ_{i∈C} c_i ũ_i``): the pair of least rise merges (Ward's rule for
      this cost), unless the rise exceeds zeroing the smaller of the two (a unit of init noise pointing
      away is zeroed, not merged); merging stops when no pair is left.
    - At each level the k strongest clusters (by ‖Σ_{i∈C} c_i v_i‖) are kept. The candidates of k: the
      k strongest groups (m = n), and the level m ∈ [k, n) of least bound (k = n, or no level below
      k: one).

    O(n²) per merge (its row of merge costs, the least of them): 2.6 s for 1,024 groups of one unit
    each on 784 inputs, 0.16 s for 256."""
    c = np.linalg.norm(U, axis=1)
    n = len(learned)
    rows = [np.flatnonzero(group == g) for g in learned]
    S = np.array([(c[r, None] * U[r]).sum(0) for r in rows]).reshape(n, U.shape[1])  # n = 0: no groups
    T = np.array([(c[r, None] * V[r]).sum(0) for r in rows]).reshape(n, V.shape[1])
    size2 = np.array([float(np.sum(U[r] ** 2) + np.sum(V[r] ** 2)) for r in rows])
    # rows off one direction, ‖A‖² − σ₁(A)² (Eckart–Young), U's and V's: σ₁² kept per slot (bounded above)
    top = np.array([[_top2(U[r]), _top2(V[r])] for r in rows]).reshape(n, 2)
    sq = np.array([[np.sum(U[r] ** 2), np.sum(V[r] ** 2)] for r in rows]).reshape(n, 2)
    rot = np.maximum(sq - top, 0.0).sum(1)
    total2 = float(np.sum(U**2) + np.sum(V**2))
    G = S @ S.T  # s_A·s_B over the clusters' slots (a merged cluster keeps the lower slot)
    alive = np.ones(n, bool)
    slot = np.arange(n)  # each group's cluster slot

    def rises(i):  # row i of the merge cost, inf where merging is barred
        d = np.sqrt(np.maximum(np.diag(G), 0.0))
        r = 2 * (d[i] + d - np.sqrt(np.maximum(d[i] ** 2 + d**2 + 2 * G[i], 0.0)))
        r[(r >= np.minimum(size2[i], size2)) | ~alive] = np.inf
        r[i] = np.inf
        return r
    R = np.array([rises(i) for i in range(n)]).reshape(n, n)
    best = np.full(n + 1, np.inf)  # per k: the least bound of a merged level, and where it was found
    where = [None] * (n + 1)  # per k: (its kept slots, the index of the slots' snapshot at its level)
    snaps = []
    out = {k: [] for k in range(n + 1)}
    out[0] = [((), math.sqrt(total2))]  # the origin: every unit zeroed
    for m in range(n, 0, -1):
        check()
        live = np.flatnonzero(alive)
        order = live[np.argsort(-np.linalg.norm(T[live], axis=1), kind="stable")]
        b = np.sqrt(np.maximum(total2 - np.cumsum(size2[order]) + np.cumsum(rot[order]), 0.0))  # k = 1 … m
        if m == n:
            for k in range(1, n + 1):
                out[k] = [(tuple((learned[j],) for j in order[:k]), float(b[k - 1]))]
        else:
            better = np.flatnonzero(b < best[1:m + 1]) + 1
            best[better] = b[better - 1]
            if better.size:
                snaps.append(slot.copy())
            for k in better:
                where[k] = (order[:k], len(snaps) - 1)
        if m == 1 or not np.isfinite(R).any():  # no pair left to merge: no level below
            break
        i, j = sorted(np.unravel_index(int(np.argmin(R)), R.shape))
        slot[slot == j] = i
        alive[j] = False
        G[i] += G[j]
        G[:, i] += G[:, j]
        for A in (T, size2):
            A[i] += A[j]
        sq[i] += sq[j]
        units = np.concatenate([rows[g] for g in np.flatnonzero(slot == i)])
        exact = min(units.size, max(U.shape[1], V.shape[1])) <= EXACT_TOP
        top[i] = [_top2(U[units]), _top2(V[units])] if exact else top[i] + top[j]
        rot[i] = float(np.maximum(sq[i] - top[i], 0.0).sum())
        R[j] = R[:, j] = np.inf
        R[i] = rises(i)
        R[:, i] = R[i]
    members = []  # per snapshot: each slot's groups
    for at in snaps:
        by = {}
        for g, s in enumerate(at.tolist()):
            by.setdefault(s, []).append(learned[g])
        members.append(by)
    for k in range(1, n):
        if where[k] is not None:
            kept, i = where[k]
            out[k].append((tuple(tuple(members[i][s]) for s in kept.tolist()), float(best[k])))
    return out


def nearest_copies(U, V, w, T):
    """``(U*, V*)``: the rescaled copies nearest the members (U (m, a), V (m, b)) of one narrow unit
    with direction ``w`` (‖w‖ = 1) and readout ``T`` (it computes ``T σ(w·x)``): ``ũ_i* = c_i w``,
    ``v_i* = λ_i T`` with ``Σ c_i λ_i = 1`` (the function kept) and every c_i > 0 (σ is positively
    homogeneous only), the c_i free. With ``p_i = ũ_i·w``, ``q_i = v_i·T̂``, ``μ_i = λ_i‖T‖`` the
    distance² is a constant plus ``Σ (c_i − p_i)² + (μ_i − q_i)²`` under ``Σ c_i μ_i = ‖T‖``;
    Lagrange gives ``c_i = (p_i + νq_i)/(1 − ν²)``, ``μ_i = (q_i + νp_i)/(1 − ν²)``, a minimum for
    ``|ν| < 1``, ν the root of ``Σ c_i μ_i = ‖T‖`` there (brentq). None when no root keeps every
    c_i > 0 (a member pointing away), or the root's norms overflow (members far smaller than T, ν at
    ±1 to round-off), or T = 0: the caller keeps the net's own norms then."""
    from scipy.optimize import brentq

    tau = float(np.linalg.norm(T))
    if not tau > 0:
        return None
    p, q = U @ w, V @ (T / tau)

    def excess(nu):
        return float(np.sum((p + nu * q) * (q + nu * p))) / (1 - nu * nu) ** 2 - tau
    lo, hi = -1 + 1e-9, 1 - 1e-9
    if not excess(lo) < 0 < excess(hi):
        return None
    nu = brentq(excess, lo, hi, xtol=1e-16, rtol=4 * np.finfo(float).eps)
    with np.errstate(over="ignore", invalid="ignore"):  # a root at |ν| → 1 (members far smaller than T)
        c, mu = (p + nu * q) / (1 - nu * nu), (q + nu * p) / (1 - nu * nu)
        s = float(c @ mu)
    if not (np.all(c > 0) and np.isfinite(s) and s > 0 and np.all(np.isfinite(c))):
        return None
    lam = mu / s  # Σ c_i λ_i = 1 to round-off, whatever the root's last digits
    return c[:, None] * w[None], lam[:, None] * T[None]
