"""Plateaus and drops of a recorded loss curve (docs/theory.md §11.3).

The rule works on log-time ``u = ln t`` (records at t ≤ 0 are left out), where saddle-to-
saddle training looks like a staircase: a saddle is left after a time ``~ ln(1/ε)/|λ|``, so
plateaus of very different lengths show side by side. With ``D = max L − min L`` the total
change and ``U = u_last − u_first`` the log-time span, the curve's mean slope is ``D/U``:
a curve falling at one rate in log-time would fall at D/U everywhere. A record interval
``[u_i, u_{i+1}]`` is *flat* when

    ``|L_{i+1} − L_i| ≤ τ (u_{i+1} − u_i) + 2 δ``,   τ = D/(2U),

at most half that uniform rate (so a uniform descent has no plateau, by a factor 2), δ the
uncertainty of one record (by default the round-off
of a mean over up to 10⁶ squared residuals, ``γ_{10⁶} max|L|``, Higham §3.1). A *plateau* is
a maximal run of flat intervals, a *drop* a maximal run of the others. A plateau's level is the
loss at its flattest interval (the mean of that interval's two records): the point of closest
approach to the saddle. Nothing is fitted: τ comes from the curve's own scale and span (the
factor ½ separates "slower than uniform" from uniform), δ from round-off.

A drop must be resolved: it needs a record inside it (two intervals), or its start and end are
one interval and neither is located; a drop that falls in one interval raises an error saying
how many log-spaced records the curve needs. At least :data:`MIN_RECORDS` records at t > 0 are
needed at all (two per plateau and one inside the drop between them).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .. import _validate as v

MIN_RECORDS = 5
"""Records at t > 0 the rule needs: two per plateau on either side of a drop, one inside it."""
_EPS = float(np.finfo(np.float64).eps) / 2
_NOISE_TERMS = 10**6
"""Terms of the mean a loss record is assumed to be (the default δ's round-off bound)."""


@dataclass(frozen=True)
class Plateau:
    """A plateau: from ``start`` to ``end`` (times of its first and last record), at ``level``
    (the loss at its flattest interval, whose log-midpoint time is ``t_level``); ``slope`` that
    interval's ``|ΔL/Δ ln t|``."""

    start: float
    end: float
    level: float
    t_level: float
    slope: float


@dataclass(frozen=True)
class Drop:
    """A drop: from ``start`` to ``end`` (the times of the records bounding it), the loss
    falling by ``size`` (negative for a rise)."""

    start: float
    end: float
    size: float


@dataclass(frozen=True)
class Staircase:
    """The plateaus and drops of a curve in time order, with the rule's numbers: ``threshold``
    τ = D/(2U) (loss per e-fold of time), ``noise`` δ, ``total`` D."""

    plateaus: tuple[Plateau, ...]
    drops: tuple[Drop, ...]
    threshold: float
    noise: float
    total: float

    @property
    def levels(self) -> np.ndarray:
        return np.array([p.level for p in self.plateaus])


def find_plateaus(t, loss, *, noise: float | None = None) -> Staircase:
    """The :class:`Staircase` of a loss curve ``loss`` (T,) recorded at times ``t`` (T,),
    strictly increasing (module doc for the rule). ``noise`` δ, the uncertainty of one record
    (default ``γ_{10⁶} max|L|``: round-off only)."""
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
    delta = (_NOISE_TERMS * _EPS / (1 - _NOISE_TERMS * _EPS)) * float(np.max(np.abs(loss))) \
        if noise is None else float(noise)
    u = np.log(t)
    du, dL = np.diff(u), np.diff(loss)
    D, U = float(loss.max() - loss.min()), float(u[-1] - u[0])
    tau = D / (2 * U)
    flat = np.abs(dL) <= tau * du + 2 * delta
    runs = _runs(flat)
    plateaus, drops = [], []
    for is_flat, i, j in runs:  # intervals i..j-1, records i..j
        if is_flat:
            k = i + int(np.argmin(np.abs(dL[i:j]) / du[i:j]))
            plateaus.append(Plateau(float(t[i]), float(t[j]), float(0.5 * (loss[k] + loss[k + 1])),
                                    float(np.sqrt(t[k] * t[k + 1])), float(abs(dL[k]) / du[k])))
        else:
            if j - i < 2:
                need = math.ceil(2 * U / du[i]) + 1
                raise ValueError(
                    f"the loss curve is too coarse: it falls by {loss[i] - loss[j]:.3g} between t = "
                    f"{t[i]:.4g} and t = {t[j]:.4g} with no record in between; record at least {need} "
                    f"log-spaced times over [{t[0]:.4g}, {t[-1]:.4g}] (got {n})")
            drops.append(Drop(float(t[i]), float(t[j]), float(loss[i] - loss[j])))
    return Staircase(tuple(plateaus), tuple(drops), tau, delta, D)


def _runs(mask: np.ndarray) -> list[tuple[bool, int, int]]:
    """Maximal runs of equal values in ``mask``: (value, first index, one past the last)."""
    edges = np.flatnonzero(np.diff(mask.astype(np.int8))) + 1
    bounds = np.concatenate([[0], edges, [mask.size]])
    return [(bool(mask[a]), int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]


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
    """When each drop of ``staircase`` (found on ``t``, ``loss``) happens: for plateaus i and i+1
    at levels L_i, L_{i+1}, the first time after plateau i's flattest point that the loss
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
