"""Plateaus and drops of a recorded loss curve, noisy or exact (docs/theory.md §11.3).

The rule works on log-time ``u = ln t`` (records at t ≤ 0 are left out), where saddle-to-
saddle training looks like a staircase. With ``D = max L − min L`` the total change and
``U = u_last − u_first`` the log-time span, ``τ = D/(2U)`` is half the rate of a curve falling
uniformly in log-time. Each record is the true loss plus an error e_i; ``δ`` bounds the
differences, ``|e_i − e_j| ≤ 2δ`` for every pair of records (below). Two records i < j are

* a *fall* when ``L_i − L_j > τ (u_j − u_i) + 2δ``: the true curve fell faster than τ between
  them, whatever the errors;
* a *rise* when ``L_j − L_i > τ (u_j − u_i) + 2δ``.

A fall or rise is *minimal* when no other fall or rise lies inside it. A *change* is a
connected union of minimal falls and rises; two changes closer than ``W = 2δ/τ`` in log-time
are one (a stretch shorter than W cannot show that it is flat: its fall can hide in 2δ). A
change whose net fall ``L_first − L_last`` exceeds 2δ is a *drop*, one whose net rise does is a
*rise*, and one within ±2δ is counted as part of the plateau around it (``Staircase.note``
says how many). A *plateau* is what lies between drops and rises. Its level is the mean of
the records in its flattest window: the run of records spanning at least W in log-time (and
at least one interval) whose end-to-end slope is least, i.e. the closest approach to the
saddle seen through the noise. For an exact curve δ is round-off, W is below any record
interval, and the rule is the record-by-record one: an interval is flat when
``|ΔL| ≤ τ Δu + 2δ``, a plateau a run of flat intervals, its level the flattest interval's.

The errors. ``noise`` σ is the standard deviation of one record's error, independent between
records. Given σ, ``P(|e_i − e_j| > 2kσ) = 2Φ̄(√2 k) ≤ e^{−k²}``, so over the < T²/2 pairs of T
records ``δ = kσ`` with ``k = √(ln(T²/(2α)))``, ``α = 10⁻³``, bounds every pair at once with
probability ≥ 1 − α. Not given, σ is estimated from the curve (:func:`noise_level`). δ is never
below the round-off of a mean over up to 10⁶ squared residuals, ``γ_{10⁶} max|L|``
(Higham §3.1); ``noise=0`` says the curve is exact and leaves δ at that round-off.

A drop must be resolved: a drop within one record interval has no located start or end, and
raises an error saying how many log-spaced records halve the spacing there. At least
:data:`MIN_RECORDS` records at t > 0 are needed at all (two per plateau and one inside the
drop between them).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.stats import norm

from .. import _validate as v

MIN_RECORDS = 5
"""Records at t > 0 the rule needs: two per plateau on either side of a drop, one inside it. A
level held by one record only is not a plateau to it: between two drops it reads as a record
inside one longer drop, and no rule on the records can tell the two apart (measured: two sharp
drops at t = 3 and 30 on 7 or 9 log-spaced records over [0.1, 1000] come back as one drop)."""
FALSE_ALARM = 1e-3
"""α: the probability that independent Gaussian errors of the stated σ make any false fall or
rise on a curve (the union bound of the module doc)."""
_EPS = float(np.finfo(np.float64).eps) / 2
_NOISE_TERMS = 10**6
"""Terms of the mean a loss record is assumed to be (δ's round-off floor)."""


@dataclass(frozen=True)
class Plateau:
    """A plateau: from ``start`` to ``end`` (times of its first and last record), at ``level``
    (the mean loss over its flattest window, whose log-midpoint time is ``t_level``); ``slope``
    that window's end-to-end ``|ΔL/Δ ln t|``."""

    start: float
    end: float
    level: float
    t_level: float
    slope: float


@dataclass(frozen=True)
class Drop:
    """A drop: from ``start`` to ``end`` (the times of the records bounding it), the loss
    falling by ``size`` > 2δ."""

    start: float
    end: float
    size: float


@dataclass(frozen=True)
class Rise:
    """A rise: from ``start`` to ``end`` (the times of the records bounding it), the loss rising
    by ``size`` > 2δ. Never counted as a drop."""

    start: float
    end: float
    size: float


@dataclass(frozen=True)
class Staircase:
    """The plateaus, drops and rises of a curve in time order, with the rule's numbers:
    ``threshold`` τ = D/(2U) (loss per e-fold of time), ``noise`` δ (the bound on one record's
    error: pairs differ by at most 2δ from noise), ``sigma`` σ (the errors' standard deviation,
    given or estimated; 0 for an exact curve), ``total`` D, ``window`` W = 2δ/τ, and ``note``
    (changes within the noise left inside plateaus, or "")."""

    plateaus: tuple[Plateau, ...]
    drops: tuple[Drop, ...]
    threshold: float
    noise: float
    total: float
    rises: tuple[Rise, ...] = ()
    sigma: float = 0.0
    window: float = 0.0
    note: str = ""

    @property
    def levels(self) -> np.ndarray:
        return np.array([p.level for p in self.plateaus])

    def summary(self) -> str:
        """One line: what was found and the numbers the rule used."""
        rule = (f"noise σ = {self.sigma:.3g}, allowance 2δ = {2 * self.noise:.3g}, τ = {self.threshold:.3g} "
                f"per e-fold, W = {self.window:.3g} e-folds")
        if not self.drops and not self.rises:
            return (f"no drop or rise beyond the noise: the curve changes by D = {self.total:.3g} in all, "
                    f"one plateau at {self.levels[0]:.4g} ({rule})" + (f"; {self.note}" if self.note else ""))
        levels = ", ".join(f"{x:.4g}" for x in self.levels)
        parts = [f"{len(self.plateaus)} plateau(s) at {levels}", f"{len(self.drops)} drop(s)"]
        if self.rises:
            parts.append(f"{len(self.rises)} rise(s)")
        return "; ".join(parts) + f" ({rule})" + (f"; {self.note}" if self.note else "")


def noise_level(t, loss) -> float:
    """σ̂, the standard deviation of independent errors on the records of ``loss`` (T,) at times
    ``t`` (T,) (those at t > 0, on u = ln t): the smaller of two difference estimates, each equal
    to σ on pure noise and each pushed up only by the curve itself (docs/theory.md §11.3.1):

    * first differences ``ΔL_i/√2`` (Rice 1984): var(e_{i+1} − e_i) = 2σ²; the curve adds its
      slope times Δu;
    * pseudo-residuals ``r_i/c_i`` (Gasser, Sroka & Jennen-Steinmetz 1986):
      ``r_i = L_i − (b_i L_{i−1} + a_i L_{i+1})``, a_i = (u_i − u_{i−1})/(u_{i+1} − u_{i−1}),
      b_i = 1 − a_i, the record minus the straight line in u through its neighbours,
      var r_i = σ²(1 + a_i² + b_i²) = σ² c_i²; the curve adds its curvature times Δu².

    Each is read from the lower quartile of its absolute values, ``Q_{1/4}/Φ⁻¹(5/8)``, which
    stays on the noise while a quarter of the stencils sit where the curve's own slope
    (curvature) is below it, and raised by twice its relative spread ``s/√m`` (s ≈ 1.79 for m
    values) so that it is below σ with probability ≈ 2 %."""
    t = v.finite_array("t", t, ndim=1)
    loss = v.finite_array("loss", loss, ndim=1)
    keep = t > 0
    return _noise_level(np.log(t[keep]), loss[keep])


_Q = 0.25
"""The quantile of |x| the noise estimate reads (module doc, :func:`noise_level`)."""
_ZQ = float(norm.ppf((1 + _Q) / 2))
"""|Z| has its ``_Q`` quantile at Φ⁻¹((1 + q)/2) for Z ~ N(0, 1)."""
_SQ = math.sqrt(_Q * (1 - _Q)) / (2 * float(norm.pdf(_ZQ)) * _ZQ)
"""Relative standard deviation × √m of that quantile's scale estimate from m values (asymptotic)."""


def _scale(x: np.ndarray) -> float:
    """σ of zero-mean Gaussian x from the lower quartile of |x|, raised by two of its own
    standard deviations, (1 + 2 s/√m), so that it is below σ with probability ≈ 2.3 %."""
    q = float(np.quantile(np.abs(x), _Q)) / _ZQ
    return q * (1 + 2 * _SQ / math.sqrt(x.size))


def _noise_level(u, loss) -> float:
    first = _scale(np.diff(loss)) / math.sqrt(2)
    a = (u[1:-1] - u[:-2]) / (u[2:] - u[:-2])
    r = loss[1:-1] - ((1 - a) * loss[:-2] + a * loss[2:])
    pseudo = _scale(r / np.sqrt(1 + a**2 + (1 - a) ** 2))
    return float(min(first, pseudo))


def pair_factor(n: int) -> float:
    """k = √(ln(T²/(2α))): with δ = kσ, all T(T−1)/2 pair differences of independent N(0, σ²)
    errors are within 2δ with probability ≥ 1 − α (α = :data:`FALSE_ALARM`, module doc)."""
    return math.sqrt(math.log(n * n / (2 * FALSE_ALARM)))


def find_plateaus(t, loss, *, noise: float | None = None) -> Staircase:
    """The :class:`Staircase` of a loss curve ``loss`` (T,) recorded at times ``t`` (T,),
    strictly increasing (module doc for the rule). ``noise`` σ, the standard deviation of one
    record's error (default: estimated from the curve, :func:`noise_level`; 0: the curve is
    exact, δ its round-off)."""
    t = v.finite_array("t", t, ndim=1)
    loss = v.finite_array("loss", loss, ndim=1)
    if t.shape != loss.shape:
        raise ValueError(f"t and loss must have the same length, got {t.size} and {loss.size}")
    if np.any(np.diff(t) <= 0):
        raise ValueError("t must be strictly increasing: record the curve in time order, one loss per time")
    keep = t > 0
    n = int(keep.sum())
    if n < MIN_RECORDS:
        raise ValueError(f"a loss curve with {n} records at t > 0 is too short to find plateaus: it "
                         f"needs at least {MIN_RECORDS} (two per plateau, one inside each drop); record more")
    if noise is not None:
        noise = v.nonnegative("noise", noise, scalar=True)
    t, loss = t[keep], loss[keep]
    u = np.log(t)
    estimated = noise is None
    sigma = _noise_level(u, loss) if estimated else float(noise)
    roundoff = (_NOISE_TERMS * _EPS / (1 - _NOISE_TERMS * _EPS)) * float(np.max(np.abs(loss)))
    delta = pair_factor(n) * sigma if noise else max(roundoff, pair_factor(n) * sigma)
    D, U = float(loss.max() - loss.min()), float(u[-1] - u[0])
    tau = D / (2 * U)
    W = 2 * delta / tau if tau > 0 else math.inf
    changes = []
    cores = _changes(u, loss, tau, delta, W)
    for c, (a, b) in enumerate(cores):
        net = float(loss[a] - loss[b])
        if abs(net) > 2 * delta:
            ceil = cores[c + 1][0] if c + 1 < len(cores) else n - 1
            a, b = _continue(u, loss, tau, a, b, 1 if net > 0 else -1, changes[-1][1] if changes else 0, ceil)
            if changes and a <= changes[-1][1] and changes[-1][2] == (net > 0):  # one change now
                a = changes.pop()[0]
            net = float(loss[a] - loss[b])
        changes.append((a, b, net > 0, abs(net) <= 2 * delta))
    plateaus, drops, rises = [], [], []
    flat_from = 0  # first record of the plateau being built
    for a, b, falls, within in changes:
        if within:
            continue
        net = float(loss[a] - loss[b])
        if falls and b - a < 2:
            need = math.ceil(2 * U / (u[b] - u[a])) + 1
            how = (f"σ = {sigma:.3g} estimated from the curve; pass noise= if known" if estimated
                   else f"σ = {sigma:.3g} given")
            raise ValueError(
                f"the loss curve is too coarse: it falls by {net:.3g} (beyond its noise allowance 2δ = "
                f"{2 * delta:.3g}, {how}) between t = {t[a]:.4g} and t = {t[b]:.4g} with no record in "
                f"between; record at least {need} log-spaced times over [{t[0]:.4g}, {t[-1]:.4g}] (got {n})")
        if a > flat_from:
            plateaus.append(_plateau(t, u, loss, flat_from, a, W))
        (drops if falls else rises).append((Drop if falls else Rise)(float(t[a]), float(t[b]), abs(net)))
        flat_from = b
    if flat_from < n - 1:
        plateaus.append(_plateau(t, u, loss, flat_from, n - 1, W))
    kept = sum(c[3] for c in changes)
    note = (f"{kept} change(s) within the noise allowance 2δ = {2 * delta:.3g} (σ = {sigma:.3g}) left "
            f"inside plateaus" if kept else "")
    return Staircase(tuple(plateaus), tuple(drops), tau, delta, D, tuple(rises), sigma, W, note)


def _continue(u, loss, tau, a: int, b: int, sign: int, floor: int, ceil: int) -> tuple[int, int]:
    """Records a..b of a drop (sign 1) or rise (−1) continued over each adjacent interval that
    moves the same way faster than τ on the records themselves (the exact curve's rule), within
    records ``floor`` (the previous change's end) to ``ceil`` (the next one's start)."""
    steep = sign * -np.diff(loss) > tau * np.diff(u)  # interval i..i+1
    while a > floor and steep[a - 1]:
        a -= 1
    while b < ceil and steep[b]:
        b += 1
    return a, b


def _plateau(t, u, loss, p0: int, p1: int, W: float) -> Plateau:
    """Records p0..p1: the window [i, j] spanning ≥ W in u (≥ one interval) with least
    |L_j − L_i|/(u_j − u_i); its mean loss is the level."""
    i = np.arange(p0, p1)
    j = np.maximum(np.searchsorted(u, u[i] + W, side="left"), i + 1)
    ok = j <= p1
    if not ok.any():  # a plateau shorter than W: only at a curve's end, where it is all there is
        i, j = np.array([p0]), np.array([p1])
    else:
        i, j = i[ok], j[ok]
    slope = np.abs(loss[j] - loss[i]) / (u[j] - u[i])
    k = int(np.argmin(slope))
    a, b = int(i[k]), int(j[k])
    return Plateau(float(t[p0]), float(t[p1]), float(np.mean(loss[a:b + 1])),
                   float(np.sqrt(t[a] * t[b])), float(slope[k]))


def _changes(u, loss, tau: float, delta: float, W: float) -> list[tuple[int, int]]:
    """The changes of the module doc: (first, last record) of each connected union of minimal
    falls and rises, those closer than W in u joined, one that starts or ends within W of the
    curve's end stretched to it."""
    n = u.size
    spans = []
    for g in (loss + tau * u, tau * u - loss):  # a fall of L is a fall of g = L + τu; a rise, of τu − L
        j = _first_below(g, g - 2 * delta)
        spans += _minimal(j, n)
    spans.sort()
    out: list[list[int]] = []
    for a, b in spans:
        if out and u[a] - u[out[-1][1]] < W:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    if out and u[out[0][0]] - u[0] < W:
        out[0][0] = 0
    if out and u[-1] - u[out[-1][1]] < W:
        out[-1][1] = n - 1
    return [(a, b) for a, b in out]


def _sparse_min(x: np.ndarray) -> list[np.ndarray]:
    """Sparse table: level k holds min(x[i : i + 2^k]) for each i with i + 2^k ≤ len(x)."""
    table = [x]
    while (1 << len(table)) <= x.size:
        h = 1 << (len(table) - 1)
        table.append(np.minimum(table[-1][:-h], table[-1][h:]))
    return table


def _first_below(g: np.ndarray, thr: np.ndarray) -> np.ndarray:
    """For each i the first j > i with g[j] < thr[i], or len(g) if none (binary lifting on
    range minima: O(T log T))."""
    n = g.size
    table = _sparse_min(g)
    pos = np.arange(n) + 1  # g[i+1 .. pos-1] all ≥ thr[i]
    for k in range(len(table) - 1, -1, -1):
        lv = table[k]
        ok = pos < lv.size
        idx = np.flatnonzero(ok)
        adv = idx[lv[pos[idx]] >= thr[idx]]
        pos[adv] += 1 << k
    return np.minimum(pos, n)


def _minimal(j: np.ndarray, n: int) -> list[tuple[int, int]]:
    """The minimal pairs (i, j[i]): no i' in (i, j[i]) has j[i'] ≤ j[i] (range minima of j)."""
    table = _sparse_min(j)
    i = np.flatnonzero(j < n)
    lo, hi = i + 1, j[i]  # i' in [lo, hi)
    inner = np.full(i.size, n + 1)
    wide = hi > lo
    k = np.zeros(i.size, dtype=int)
    k[wide] = np.floor(np.log2(hi[wide] - lo[wide])).astype(int)
    for lev in np.unique(k[wide]):
        s = np.flatnonzero(wide & (k == lev))
        inner[s] = np.minimum(table[lev][lo[s]], table[lev][hi[s] - (1 << int(lev))])
    keep = inner > hi
    return list(zip(i[keep].tolist(), hi[keep].tolist(), strict=True))


@dataclass(frozen=True)
class LevelMatch:
    """Plateau ``i`` of a staircase matched to the predicted level ``k`` (``levels[k]``, e.g. the
    best loss with k units), ``gap`` = measured − predicted."""

    plateau: int
    k: int
    level: float
    predicted: float
    gap: float


def match_levels(staircase: Staircase, levels) -> tuple[LevelMatch, ...]:
    """Each plateau of ``staircase`` matched to the nearest of ``levels`` (K,), the predicted
    plateau losses (index k = number of units: :func:`~biasfree.theory.reduced_rank.reduced_rank_losses` for a
    linear net, :func:`~biasfree.theory.attention.plateau_losses` for merged attention, the loss at
    an embedded fixed point otherwise)."""
    if not isinstance(staircase, Staircase):
        raise TypeError(f"staircase must be a Staircase (from find_plateaus), got {type(staircase).__name__}")
    levels = v.finite_array("levels", levels, ndim=1)
    out = []
    for i, p in enumerate(staircase.plateaus):
        k = int(np.argmin(np.abs(levels - p.level)))
        out.append(LevelMatch(i, k, p.level, float(levels[k]), float(p.level - levels[k])))
    return tuple(out)


def drop_times(t, loss, staircase: Staircase) -> np.ndarray:
    """When each drop (or rise) of ``staircase`` (found on ``t``, ``loss``) happens: for plateaus i and i+1
    at levels L_i, L_{i+1}, the first time after plateau i's flattest window (t_level) that the loss
    crosses their midpoint ``m = (L_i + L_{i+1})/2``, interpolated linearly in (ln t, L)
    between the two records that bracket the crossing (so it lies in that record interval,
    whatever the curve does inside it). For a logistic mode of a linear net this is the
    half-loss time ``ln[(s/a_0 − 1)/(s/a½ − 1)]/(2s)`` of
    :func:`~biasfree.theory.small_init.half_loss_time` (docs/theory.md §11.6). Returns
    (len(plateaus) − 1,)."""
    if not isinstance(staircase, Staircase):
        raise TypeError(f"staircase must be a Staircase (from find_plateaus), got {type(staircase).__name__}")
    t = v.finite_array("t", t, ndim=1)
    loss = v.finite_array("loss", loss, ndim=1)
    if t.shape != loss.shape:
        raise ValueError(f"t and loss must have the same length, got {t.size} and {loss.size}")
    keep = t > 0
    u, loss = np.log(t[keep]), loss[keep]
    out = []
    for a, b in zip(staircase.plateaus[:-1], staircase.plateaus[1:], strict=True):
        m = 0.5 * (a.level + b.level)
        side = np.sign(loss - m)
        i0 = int(np.searchsorted(u, np.log(a.t_level)))
        cross = [j for j in range(max(i0, 1), u.size) if side[j] != side[j - 1] or side[j] == 0]
        if not cross:
            raise ValueError(f"the loss never crosses {m:.4g}, the midpoint between the plateaus at "
                             f"{a.level:.4g} and {b.level:.4g}: pass the staircase found on this curve")
        j = cross[0]
        w = 0.0 if loss[j] == loss[j - 1] else (m - loss[j - 1]) / (loss[j] - loss[j - 1])
        out.append(float(np.exp(u[j - 1] + w * (u[j] - u[j - 1]))))
    return np.array(out)
