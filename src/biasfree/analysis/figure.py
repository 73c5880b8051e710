"""Figure of ``biasfree analyse``: the verdict and its evidence, the learning curves (the
gradient-flow prediction, and any trained run beside its twin, with the step of the largest
gap) and the split of the net's output into linear odd, nonlinear odd and even parts.

Panel (a) plots every curve on one axis in the units it was measured in: time ``t = η k``
(gradient-flow units) when every run is gradient descent, else optimiser steps ``k``. No
closed form predicts another optimiser's curve, so there the reference drawn is the linear
twin's measured curve from the same run, and the gradient-flow prediction is left out."""

from __future__ import annotations

import functools
import textwrap

import numpy as np
from matplotlib.font_manager import FontProperties
from matplotlib.textpath import TextPath

from .._figure import plt
from ..dynamics.train_config import optimiser_name, record_steps
from .report import Analysis

_TINY = 1e-32  # where an energy at round-off is drawn on the log axis
_COLOURS = {"exactly linear": "tab:green", "effectively linear": "tab:green", "undecided": "tab:olive",
            "linear odd part, nonlinear function": "tab:orange", "not effectively linear": "tab:red"}
_WIDTH = 13.0  # inches
_LINE = 0.165  # inches per line of panel (c) at 8.5 pt
_SAMPLE = "reason: trained gap 0.645% of L(0) at step 66 (t = 66) > 0.3%; κ = 0, ‖W₁(T)−W₁(0)‖/‖W₁(0)‖ = 83.7"


@functools.cache
def _em(bold: bool) -> float:
    """The mean width of a character of panel text, in em, measured on :data:`_SAMPLE`."""
    path = TextPath((0, 0), _SAMPLE, size=1.0, prop=FontProperties(weight="bold" if bold else "normal"))
    return path.get_extents().width / len(_SAMPLE)


def _wrap(text: str, inches: float, fontsize: float, indent: str = "", bold: bool = False) -> list[str]:
    """``text`` wrapped to lines that fit ``inches`` at ``fontsize`` points (10% to spare)."""
    width = int(0.9 * inches * 72 / (_em(bold) * fontsize))
    return textwrap.wrap(text, max(20, width), subsequent_indent=indent) or [""]


def trainer_name(cfg) -> str:
    """How the figure names the optimiser of a run's ``cfg`` (its ``name``, else
    :func:`~biasfree.dynamics.train_config.optimiser_name`: "GD" for gradient descent)."""
    return cfg.name or optimiser_name(cfg.optimiser)


def figure(analysis: Analysis):
    """A matplotlib Figure for an :class:`~biasfree.analysis.report.Analysis`."""
    net, v = analysis.net, analysis.verdict
    lines = _evidence_lines(analysis, _WIDTH - 0.8)
    top = 4.3
    bottom = 0.45 + _LINE * sum(line[-1] for line in lines)
    fig = plt.figure(figsize=(_WIDTH, top + bottom + 1.0), layout="constrained")
    grid = fig.add_gridspec(2, 2, height_ratios=(top, bottom))
    ax = [fig.add_subplot(grid[0, 0]), fig.add_subplot(grid[0, 1]), fig.add_subplot(grid[1, :])]
    _curves_panel(ax[0], analysis)
    _split_panel(ax[1], analysis)
    _evidence_panel(ax[2], lines)
    head = f"{v.level.upper()} — depth {net.depth}, widths {list(net.widths)}, α = {net.alpha:g}"
    question = f"the question answered: {v.question}"
    fig.suptitle("\n".join([head, *_wrap(question, _WIDTH - 0.6, 12, bold=True)]), fontsize=12,
                 color=_COLOURS[v.level], fontweight="bold")
    return fig


def _runs(analysis: Analysis) -> list:
    """``(who, Training, its gradient-flow Prediction)`` for each trained run: from the given
    weights, and the rerun from the given init."""
    out = []
    pred, h = analysis.prediction, analysis.history
    if pred is not None and pred.trained is not None:
        out.append(("trained from the given weights", pred.trained, pred))
    if h is not None and h.prediction is not None and h.prediction.trained is not None:
        out.append(("rerun from the given init", h.prediction.trained, h.prediction))
    return out


def _curves_panel(ax, analysis: Analysis) -> None:
    """Panel (a): the learning curves on one axis in the units they were measured in."""
    pred, h, net = analysis.prediction, analysis.history, analysis.net
    if pred is None:
        ax.text(0.5, 0.5, "no prediction: the net has biases\n(no linear twin)", ha="center", va="center")
        ax.set_title("(a) learning curves", fontsize=10, loc="left")
        return
    runs = _runs(analysis)
    gd = all(tr.config.gd for _, tr, _ in runs)
    names = sorted({trainer_name(tr.config) for _, tr, _ in runs})
    if gd:  # time t = ηk: GD's records beside the gradient-flow predictions
        flows = [("from the given weights", pred)]
        if h is not None and h.prediction is not None:
            flows.append(("from the given init", h.prediction))
        for (start, p), style in zip(flows, ("k-", "0.45"), strict=False):
            ax.plot(p.t, p.loss, style, lw=2,
                    label=f"predicted {start}: linear twin, gradient flow ({p.reference})")
    for i, (who, tr, _) in enumerate(runs):
        name = trainer_name(tr.config)
        x = tr.t if gd else record_steps(tr.config.steps, tr.config.n_records)[: tr.t.size]
        ax.plot(x, tr.loss, f"C{2 * i}--", lw=1.5, label=f"{who} by {name}, α = {net.alpha:g}")
        ax.plot(x, tr.twin_loss, f"C{2 * i + 1}:", lw=1.5,
                label=f"its linear twin by {name}, same run (measured)")
        ax.axvline(tr.gap_time if gd else tr.gap_step, color=f"C{2 * i}", lw=0.8, alpha=0.7,
                   label=f"largest gap {100 * tr.gap_to_twin:.2g}% of L₀, step {tr.gap_step}")
    ax.axhline(pred.linear_floor, color="0.5", lw=0.8, ls="-.", label="linear floor")
    ax.set_yscale("log")
    if gd:
        eta = sorted({tr.config.lr for _, tr, _ in runs})
        xlabel = ("time t = η k (gradient-flow units; GD step η = " + ", ".join(f"{e:g}" for e in eta) + ")"
                  if runs else "time t (gradient-flow units; GD step k at t = η k)")
        title = "(a) learning curves: gradient-flow prediction" + (" and GD beside its twin" if runs else "")
    else:
        xlabel = f"optimiser steps k ({', '.join(names)})"
        title = (f"(a) learning curves under {', '.join(names)}, in steps: the net beside its linear twin. "
                 f"No closed form predicts {', '.join(names)}'s curve, so the twin's measured curve is the "
                 "reference; the gradient-flow prediction (time t = η k, for GD) is not drawn")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("training loss (½·MSE)")
    ax.set_title("\n".join(_wrap(title, _WIDTH / 2 - 0.8, 10)), fontsize=10, loc="left")
    ax.legend(fontsize=7.5, loc="best")


def _split_panel(ax, analysis: Analysis) -> None:
    """Panel (b): the odd/even split as given and after training."""
    net, pred = analysis.net, analysis.prediction
    tr = None if pred is None else pred.trained
    labels, parts = ["as given"], [(net.odd_linear_energy, net.odd_nonlinear_energy, net.even_energy)]
    if tr is not None:
        parts.append((tr.final_odd_linear_energy, tr.final_odd_nonlinear_energy, tr.final_even_energy))
        labels.append(f"trained by {trainer_name(tr.config)}")
    x = np.arange(len(labels))
    names = ("odd, linear (βᵀx)", "odd, nonlinear", "even")
    for k, (name, col) in enumerate(zip(names, ("C2", "C3", "C4"), strict=True)):
        vals = np.maximum([p[k] for p in parts], _TINY)
        ax.bar(x + (k - 1) * 0.25, vals, 0.25, color=col, label=name)
    ax.set_yscale("log")
    ax.set_xticks(x, labels)
    ax.set_ylabel("energy <||·||²> on the data")
    ax.set_title(f"(b) odd/even split of the output\n(bars at {_TINY:g} are round-off or zero)",
                 fontsize=10, loc="left")
    ax.legend(fontsize=8)


def _evidence_lines(analysis: Analysis, inches: float) -> list:
    """Panel (c)'s lines ``(text, x, fontsize, style, gap)``: every answer with its level and
    each deciding number against its threshold, wrapped to ``inches``, nothing cut off."""
    v = analysis.verdict
    out = []

    def put(text, x=0.02, fontsize=8.5, gap=1.0, **style):
        bold = style.get("fontweight") == "bold"
        for i, line in enumerate(_wrap(text, inches * (1 - x), fontsize, "    ", bold)):
            out.append((line, x, fontsize, style, gap if i == 0 else 1.0))

    for j in (j for j in (v.function, v.training, v.trained_function, v.history) if j is not None):
        put(f"{j.kind}: {j.level}", 0.0, 9.5, 1.3, fontweight="bold", color=_COLOURS[j.level])
        for r in j.reasons[:3]:
            put(f"reason: {r}", color="tab:red")
        for e in j.evidence:
            put(f"{'✓' if e.passed else '✗'} {e.name} = {e.value:.3g}   (must be {e.op} {e.threshold:.3g})",
                color="k" if e.passed else "tab:red")
        for n in j.notes[:2]:
            put(f"note: {n}", fontsize=8, color="0.35")
    loc = analysis.local
    if loc is not None:  # docs/theory.md §8: beside the verdict, never part of it
        put(f"reported, not judged (no part of the verdict): local linearity at {loc.n_used} of "
            f"{loc.n_total} inputs (§8)", 0.0, 9.5, 1.3, fontweight="bold", color="0.35")
        for line in loc.lines():
            put(f"· {line}", color="0.35")
    return out


def _evidence_panel(ax, lines: list) -> None:
    """Panel (c): ``lines`` from :func:`_evidence_lines`, one below the other."""
    ax.axis("off")
    ax.set_title("(c) the answers and the numbers that decided them (✓ passes, ✗ fails; levels and "
                 "thresholds: docs/theory.md §6)", fontsize=10,
                 loc="left")
    step = 1.0 / max(sum(line[-1] for line in lines), 1.0)
    y = 1.0
    for text, x, fontsize, style, gap in lines:
        y -= (gap - 1.0) * step
        ax.text(x, y, text, transform=ax.transAxes, fontsize=fontsize, va="top", **style)
        y -= step
