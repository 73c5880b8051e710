"""The figure kit every figure uses: matplotlib on the Agg backend (the only place it is
chosen), the claim-and-verdict title, a panel's check mark, and the useful ends of a time axis."""

from __future__ import annotations

import textwrap

import matplotlib
import numpy as np

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402

from .results import Result  # noqa: E402

__all__ = ["action_end", "action_start", "claim_title", "mark", "plt"]


def mark(result: Result, *checks: str) -> str:
    """``" ✓"`` when every named check of ``result`` passed, else ``" ✗ FAILED"``, for a
    panel title; a KeyError names a check the result does not have (renamed in the run?)."""
    missing = [c for c in checks if c not in result.checks]
    if missing:
        raise KeyError(f"{result.experiment} has no check {', '.join(missing)}: the figure and the "
                       f"run disagree (checks: {', '.join(result.checks)})")
    return " ✓" if all(result.checks[c].passed for c in checks) else " ✗ FAILED"


def claim_title(fig, result: Result, detail: str = "", fontsize: float = 11) -> None:
    """A suptitle: the result's claim sentence (``result.claim``, wrapped to the figure's
    width), the figure's measured ``detail`` if any, then its verdict (``"NAME: n of m
    checks passed (preset, seed)"``, red with the failed checks' names if any)."""
    n_ok = sum(c.passed for c in result.checks.values())
    verdict = f"{n_ok} of {len(result.checks)} checks passed"
    if not result.passed:
        verdict += ". FAILED: " + ", ".join(result.failed())
    claim = "\n".join(textwrap.fill(s, int(fig.get_figwidth() * 72 / (0.55 * fontsize)))
                      for s in (result.claim, detail) if s)
    fig.suptitle(f"{claim}\n{result.experiment}: {verdict} ({result.preset}, seed {result.seed})",
                 fontsize=fontsize, color="k" if result.passed else "tab:red")


def _far(t, curves, frac: float, end: int):
    """For each row of ``curves`` (reshaped to ``t``'s length) that moves at all: the indices
    where it is more than ``frac`` of its total change away from its value at index ``end``."""
    for y in curves:
        for row in np.asarray(y, float).reshape(-1, t.size):
            span = np.nanmax(row) - np.nanmin(row)
            if span > 0:
                yield np.nonzero(np.abs(row - row[end]) > frac * span)[0]


def action_end(t, *curves, frac: float = 0.01, margin: float = 1.25) -> float:
    """A time axis's useful end: ``margin`` × the last time any curve is still more than
    ``frac`` of its total change away from its final value (``t[-1]`` at most)."""
    t = np.asarray(t, float)
    last = max([float(t[1] if t.size > 1 else t[0])]
               + [float(t[min(away[-1] + 1, t.size - 1)]) for away in _far(t, curves, frac, -1) if away.size])
    return min(float(t[-1]), margin * last)


def action_start(t, *curves, frac: float = 0.01, factor: float = 0.3) -> float:
    """A log time axis's useful start: ``factor`` × the first positive time any curve has
    moved ``frac`` of its total change from its first value."""
    t = np.asarray(t, float)
    moved = [m[t[m] > 0] for m in _far(t, curves, frac, 0)]
    first = min([float(t[-1])] + [float(t[m[0]]) for m in moved if m.size])
    positive = t[t > 0]
    return max(float(positive[0]) if positive.size else first, factor * first)
