"""A benchmark row is a result only if every run behind it ended on finite numbers.

A time ratio says "ours is r× faster at the same computation": if either side's run ended on
a NaN or an infinite loss, it did not do that computation, and the ratio is not a result (a
full ``make bench`` once printed the attention arm at 130× the PyTorch loop next to
``attention_loss_gap_f64 = NaN``: the PyTorch reference had not ended on a finite loss).
Each arm calls :func:`finite_or_fail` on its final losses before it computes a ratio or
prints a line; bench_engine.py then stops with that one line and exit status 1.
"""

from __future__ import annotations

import math


class NotAResult(RuntimeError):
    """An arm's run (ours or its reference) ended on a non-finite value: no ratio is reported."""


def finite_or_fail(arm: str, **finals) -> None:
    """Raise :class:`NotAResult` naming ``arm`` and every run of ``finals`` (name → final loss
    or other number the arm's ratio rests on) that is NaN or infinite; return if all are finite."""
    bad = {}
    for name, value in finals.items():
        try:
            x = float(value)
        except (TypeError, ValueError):
            x = math.nan  # not a number at all: no result either
        if not math.isfinite(x):
            bad[name] = value
    if bad:
        runs = ", ".join(f"{name} = {value!r}" for name, value in bad.items())
        raise NotAResult(f"[{arm}] not a result, no ratio reported: {runs} did not end finite (of "
                         f"{', '.join(finals)}); that run diverged or failed: rerun the arm alone "
                         "(bench_engine.py --only NAME) and look at its losses")
