"""Figure of ``biasfree analyse`` for a linear-attention model (docs/verdict.md "Attention
models"), beside the dense one of :mod:`biasfree.analysis.figure`: (a) the model's and its twin's
losses at every step of each measured run (from the given weights; the rerun from the init), (b) their gap
``|L_k − L̃_k| / max(L(θ₀), ½<y_q²>)`` per step against the paper's 0.3%, (c) every answer with
the numbers that decided it."""

from __future__ import annotations

import textwrap

import numpy as np

from .._figure import plt
from .report import Analysis
from .verdict import EXACT, NOT, PAPER_LEVEL, UNDECIDED

FLOOR = 1e-18
"""Where a gap of exactly 0 is drawn on the log axis."""
WIDTH = 13.0
"""Inches."""
_COLOUR = {EXACT: "tab:green", UNDECIDED: "tab:olive", NOT: "tab:red"}


def _runs(analysis: Analysis) -> list:
    """``(who, Training, normaliser)`` of each measured run."""
    out, p, h = [], analysis.prediction, analysis.history
    if p is not None and p.trained is not None:
        out.append(("trained from the given weights", p.trained, analysis.net.loss_ref))
    if h is not None and h.prediction is not None and h.prediction.trained is not None:
        out.append(("rerun from the given init", h.prediction.trained, h.init.loss_ref))
    return out


def _lines(analysis: Analysis) -> list[tuple[str, str, bool]]:
    """``(text, colour, bold)`` of panel (c): each answer, its reasons and evidence, wrapped."""
    v, out = analysis.verdict, []
    chars = int(0.9 * (WIDTH - 0.8) * 72 / (0.55 * 8.5))
    for j in (j for j in (v.function, v.training, v.trained_function, v.history) if j is not None):
        out.append((f"{j.kind}: {j.level}", _COLOUR.get(j.level, "k"), True))
        items = [(f"reason: {r}", "tab:red") for r in j.reasons[:2]]
        items += [(f"{'✓' if e.passed else '✗'} {e.line()}", "k" if e.passed else "tab:red")
                  for e in j.evidence]
        for text, colour in items:
            out.extend((line, colour, False) for line in textwrap.wrap(text, chars, subsequent_indent="    "))
    return out


def attention_figure(analysis: Analysis):
    """A matplotlib Figure for the :class:`~.report.Analysis` of an attention model."""
    v, lines = analysis.verdict, _lines(analysis)
    fig = plt.figure(figsize=(WIDTH, 4.0 + 0.17 * len(lines) + 1.4), layout="constrained")
    grid = fig.add_gridspec(2, 2, height_ratios=(4.0, 0.17 * len(lines) + 0.3))
    ax = [fig.add_subplot(grid[0, 0]), fig.add_subplot(grid[0, 1]), fig.add_subplot(grid[1, :])]
    runs = _runs(analysis)
    for i, (who, tr, ref) in enumerate(runs):
        k = np.arange(tr.loss.size)
        ax[0].plot(k, tr.loss, f"C{2 * i}-", lw=2, label=f"{who} by {tr.optimiser}")
        ax[0].plot(k, tr.twin_loss, f"C{2 * i + 1}:", lw=2, label="its twin W₂W₁z, in the same loop")
        ax[1].semilogy(k, np.maximum(np.abs(tr.loss - tr.twin_loss) / ref, FLOOR), f"C{2 * i}-", lw=1.2,
                       label=f"{who}: max {tr.gap_to_twin:.2g} at step {tr.gap_step}")
    if runs:
        ax[0].axhline(analysis.prediction.linear_floor, color="0.5", lw=0.8, ls="-.",
                      label="the twin's least-squares floor on z")
        ax[1].axhline(PAPER_LEVEL, color="tab:red", lw=0.8, ls="--", label="the paper's 0.3%")
        for a in ax[:2]:
            a.legend(fontsize=8)
    else:
        for a in ax[:2]:
            a.text(0.5, 0.5, "nothing trained: pass train= (CLI: --train)\nto measure the model beside its "
                   "twin", ha="center", va="center", transform=a.transAxes)
    ax[0].set(xlabel="step k", ylabel="training loss (½·MSE)")
    ax[0].set_title("(a) the model and its twin, every step", fontsize=10, loc="left")
    ax[1].set(xlabel="step k", ylabel="|L − L_twin| / max(L(θ₀), ½<y_q²>)")
    ax[1].set_title(f"(b) the gap to the twin per step (exact zeros drawn at {FLOOR:g})", fontsize=10,
                    loc="left")
    ax[2].axis("off")
    ax[2].set_title("(c) the answers and the numbers that decided them (✓ passes, ✗ fails)", fontsize=10,
                    loc="left")
    step = 1.0 / max(len(lines), 1)
    for n, (text, colour, bold) in enumerate(lines):
        ax[2].text(0.0 if bold else 0.02, 1.0 - n * step, text, transform=ax[2].transAxes, va="top",
                   fontsize=9.5 if bold else 8.5, color=colour, fontweight="bold" if bold else "normal")
    head = f"{v.level.upper()} — {analysis.net.title(analysis.data.n, analysis.data.source)}"
    fig.suptitle(textwrap.fill(head, int((WIDTH - 0.6) * 72 / (0.6 * 12))), fontsize=12,
                 color=_COLOUR.get(v.level, "k"), fontweight="bold")
    return fig


__all__ = ["attention_figure"]
