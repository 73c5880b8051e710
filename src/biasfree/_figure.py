"""The figure kit every figure uses: matplotlib on the Agg backend (the only place it is
chosen), the claim-and-verdict title, a panel's check mark, and the useful ends of a time axis."""

from __future__ import annotations

import textwrap

import matplotlib
import numpy as np

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402

from .results import Result  # noqa: E402

__all__ = ["action_end", "action_start", "claim_title", "mark", "measured", "plt"]


def mark(result: Result, *checks: str) -> str:
    """``" ✓"`` when every named check of ``result`` passed, else ``" ✗ FAILED"``, for a
    panel title; a KeyError names a check the result does not have (renamed in the run?)."""
    missing = [c for c in checks if c not in result.checks]
    if missing:
        raise KeyError(f"{result.experiment} has no check {', '.join(missing)}: the figure and the "
                       f"run disagree (checks: {', '.join(result.checks)})")
    return " ✓" if all(result.checks[c].passed for c in checks) else " ✗ FAILED"


def measured(value: float, criterion: float, op: str = "<=") -> str:
    """A panel title's note for a claim that is measured, not checked: ``"0.77 (criterion <= 1):
    holds (measured, not a self-check)"``, or ``does NOT hold``; it never reads as a check's ✓."""
    holds = value <= criterion if op == "<=" else value >= criterion
    verdict = "holds" if holds else "does NOT hold"
    return f"{value:.3g} (criterion {op} {criterion:.3g}): {verdict} (measured, not a self-check)"


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


def action_end(t, *curves, frac: float = 0.01, margin: float = 1.25) -> float:
    """A time axis's useful end: ``margin`` × the last time any curve is still more than
    ``frac`` of its total change away from its final value (``t[-1]`` at most)."""
    t = np.asarray(t, float)
    last = float(t[1] if t.size > 1 else t[0])
    for y in curves:
        y = np.asarray(y, float).reshape(-1, t.size)
        for row in y:
            span = np.nanmax(row) - np.nanmin(row)
            away = np.nonzero(np.abs(row - row[-1]) > frac * span)[0] if span > 0 else []
            if len(away):
                last = max(last, float(t[min(away[-1] + 1, t.size - 1)]))
    return min(float(t[-1]), margin * last)


def action_start(t, *curves, frac: float = 0.01, factor: float = 0.3) -> float:
    """A log time axis's useful start: ``factor`` × the first positive time any curve has
    moved ``frac`` of its total change from its first value."""
    t = np.asarray(t, float)
    first = float(t[-1])
    for y in curves:
        y = np.asarray(y, float).reshape(-1, t.size)
        for row in y:
            span = np.nanmax(row) - np.nanmin(row)
            moved = np.nonzero((np.abs(row - row[0]) > frac * span) & (t > 0))[0] if span > 0 \
                else []
            if len(moved):
                first = min(first, float(t[moved[0]]))
    positive = t[t > 0]
    return max(float(positive[0]) if positive.size else first, factor * first)
