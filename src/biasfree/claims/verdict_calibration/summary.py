"""The families' checks, metrics, arrays and notes (verdict-calibration; docs/theory.md §6).

Per family: the confusion table (rows the verdict levels, columns the measured truth linear /
not, over the points whose truth run reached its horizon) in ``metrics`` as
``<family>_<level>_<linear|not>``, with its points, decided, undecided and false "linear"
counts; conv points also give the measured gap over the predicted interval's high end (the
prediction is not a bound for conv nets, §7.4: this ratio is the calibration). Checks: per
family, no false "linear" (a net called exactly or effectively linear more than 0.3% of L₀
off its twin); the exact family (pairs at large init) at its twin to round-off at every
step, and never called "not" on evidence, only on a failed assumption (:data:`~.evaluate.ASSUMPTIONS`).
"""

from __future__ import annotations

import numpy as np

from ...analysis import verdict as vd
from ...results import Check, at_most
from ..checks import ROUND_OFF
from .evaluate import Family

LEVEL_KEYS = ("exact", "effective", "undecided", "odd_linear", "not")
"""Metric names of :data:`~biasfree.analysis.verdict.LEVELS`, in order."""

WHAT = {"trained": "Nets trained by GD from small init, then given to analyse (truth: training continued)",
        "trained-history": "The same trained nets asked how they got here (analyse(..., init=); truth: the "
                           "gap measured on the way from the init)",
        "pairs-large-init": "Antisymmetric-pair nets at large init",
        "conv1d": "Two-layer 1-D conv nets on symmetrised Gaussian signals with a conv teacher",
        "conv2d": "Two-layer 2-D conv nets on symmetrised Gaussian images with a conv teacher",
        "depth3": "Depth-3 bias-free nets on the symmetric data",
        "weight-decay": "Two-layer nets trained with weight decay (twin's decay λ/c)"}


def slug(name: str) -> str:
    return name.replace("-", "_")


def _checks(f: Family) -> dict[str, Check]:
    s = slug(f.name)
    out = {f"no_false_linear_{s}": at_most(
        f.false_linear, 0, f"{WHAT[f.name]}: analyse never calls 'linear' (exactly or effectively) a net "
        "whose gap to its twin, measured at every GD step, exceeds 0.3% of L₀.", unit="nets")}
    if f.name == "pairs-large-init":
        out[f"{s}_measured_exact"] = at_most(
            float(np.max(f.gap, initial=0.0)), ROUND_OFF,
            f"{WHAT[f.name]} follow their twins to round-off at every GD step of their truth runs, at any "
            "init scale (§2.3: f_even ≡ 0 on symmetric data).", unit="fraction of L₀")
        refuted = ~f.linear & (f.level != vd.LEVELS.index(vd.UNDECIDED)) & ~f.assumption
        out[f"{s}_never_called_not_on_evidence"] = at_most(
            int(np.sum(refuted)), 0,
            f"{WHAT[f.name]}, exactly linear at any scale, are called exactly or effectively linear, or "
            "left outside the theory for a failed assumption (init not small: 'undecided' under issue "
            "31), never 'not' on a predicted or proven departure.", unit="nets")
    return out


def _metrics(f: Family) -> dict[str, float]:
    s, T = slug(f.name), f.table()
    out = {f"{s}_{lk}_{col}": float(T[i, j]) for i, lk in enumerate(LEVEL_KEYS)
           for j, col in enumerate(("linear", "not"))}
    und = f.level == vd.LEVELS.index(vd.UNDECIDED)
    out |= {f"{s}_points": float(np.sum(f.full)), f"{s}_decided": float(np.sum(f.full & ~und)),
            f"{s}_undecided": float(np.sum(f.full & und)), f"{s}_false_linear": float(f.false_linear),
            f"{s}_cut": float(np.sum(~f.full))}
    if f.name.startswith("conv"):
        for k, g, h in zip(f.keys, f.gap, f.high_end, strict=True):
            out |= {f"{s}_{k}_gap": float(g), f"{s}_{k}_high_end": float(h),
                    f"{s}_{k}_gap_over_high_end": float(g / h) if h > 0 else float("nan")}
    if f.name == "pairs-large-init":
        out[f"{s}_gap_max"] = float(np.max(f.gap, initial=0.0))
    if f.name == "trained-history":
        out |= {f"{s}_{k}_gap": float(g) for k, g in zip(f.keys, f.gap, strict=True)}
    return out


def _note(f: Family) -> str:
    rows = [f"{lab}: {vd.LEVELS[lv]}{' (failed assumption)' if a else ''}, measured "
            f"{100 * g:.3g}%{'' if full else ' (cut: no truth)'}"
            + (f", predicted high end {100 * h:.3g}%" if np.isfinite(h) else "")
            for lab, lv, a, g, full, h in zip(f.labels, f.level, f.assumption, f.gap, f.full, f.high_end,
                                              strict=True)]
    return f"{f.name}: " + "; ".join(rows) + "."


def summarise(families: list[Family]):
    """``(checks, metrics, arrays, notes)`` of the families for the Result."""
    checks, metrics, arrays, notes = {}, {}, {"family_names": np.array([f.name for f in families])}, []
    for f in families:
        checks |= _checks(f)
        metrics |= _metrics(f)
        s = slug(f.name)
        arrays |= {f"family_{s}_table": f.table(), f"family_{s}_gap": f.gap,
                   f"family_{s}_high_end": f.high_end, f"family_{s}_level": f.level,
                   f"family_{s}_full": f.full, f"family_{s}_assumption": f.assumption}
        notes.append(_note(f))
    return checks, metrics, arrays, " Families: " + " ".join(notes) if notes else ""
