"""Figure of ``biasfree analyse``: the verdict and its evidence, the predicted learning
curve (and the trained one beside its twin, with the step of the largest gap), and the
split of the net's output into linear odd, nonlinear odd and even parts."""

from __future__ import annotations

import numpy as np

from .._figure import plt
from .report import Analysis

_TINY = 1e-32  # where an energy at round-off is drawn on the log axis
_COLOURS = {"exactly linear": "tab:green", "effectively linear": "tab:green", "undecided": "tab:olive",
            "linear odd part, nonlinear function": "tab:orange", "not effectively linear": "tab:red"}


def figure(analysis: Analysis):
    """A matplotlib Figure for an :class:`~biasfree.analysis.report.Analysis`."""
    pred, net = analysis.prediction, analysis.net
    tr = None if pred is None else pred.trained
    fig = plt.figure(figsize=(13, 8.2))
    grid = fig.add_gridspec(2, 2, height_ratios=(1.0, 0.9))
    ax = [fig.add_subplot(grid[0, 0]), fig.add_subplot(grid[0, 1]), fig.add_subplot(grid[1, :])]
    if pred is None:
        ax[0].text(0.5, 0.5, "no prediction: the net has biases", ha="center", va="center")
    else:
        ax[0].plot(pred.t, pred.loss, "k-", lw=2,
                   label=f"predicted: linear twin, gradient flow ({pred.reference})")
        if tr is not None:
            ax[0].plot(tr.t, tr.loss, "C0--", lw=1.5, label=f"trained, α = {net.alpha:g} (GD)")
            ax[0].plot(tr.t, tr.twin_loss, "C1:", lw=1.5, label="linear twin (GD, same steps)")
            ax[0].axvline(tr.gap_time, color="C3", lw=0.8,
                          label=f"largest gap {100 * tr.gap_to_twin:.2g}% of L(0), step {tr.gap_step}")
        h = analysis.history
        if h is not None and h.prediction is not None and h.prediction.trained is not None:
            hr = h.prediction.trained
            ax[0].plot(hr.t, hr.loss, "C2--", lw=1.5, label="rerun from the given init (GD)")
            ax[0].plot(hr.t, hr.twin_loss, "C4:", lw=1.5,
                       label=f"its linear twin; largest gap {100 * hr.gap_to_twin:.2g}% of L₀")
        ax[0].axhline(pred.linear_floor, color="0.5", lw=0.8, ls="-.", label="linear floor")
        ax[0].set_yscale("log")
        ax[0].set(xlabel="time t = η k", ylabel="training loss (½·MSE)",
                  title="(a) learning curves: from the given weights"
                        + ("; rerun from the given init" if h is not None and h.prediction else ""))
        ax[0].legend(fontsize=8)
    labels, parts = ["as given"], [(net.odd_linear_energy, net.odd_nonlinear_energy, net.even_energy)]
    if tr is not None:
        parts.append((tr.final_odd_linear_energy, tr.final_odd_nonlinear_energy, tr.final_even_energy))
        labels.append("trained")
    x = np.arange(len(labels))
    names = ("odd, linear (βᵀx)", "odd, nonlinear", "even")
    for k, (name, col) in enumerate(zip(names, ("C2", "C3", "C4"), strict=True)):
        vals = np.maximum([p[k] for p in parts], _TINY)
        ax[1].bar(x + (k - 1) * 0.25, vals, 0.25, color=col, label=name)
    ax[1].set_yscale("log")
    ax[1].set_xticks(x, labels)
    ax[1].set(ylabel="energy <||·||²> on the data",
              title=f"(b) odd/even split (bars at {_TINY:g} are round-off or zero)")
    ax[1].legend(fontsize=8)
    _evidence_panel(ax[2], analysis)
    v = analysis.verdict
    fig.suptitle(f"{v.level.upper()} — depth {net.depth}, widths {list(net.widths)}, α = {net.alpha:g}"
                 f"\nthe question answered: {v.question} (levels and thresholds: docs/theory.md §6)",
                 fontsize=12,
                 color=_COLOURS[v.level], fontweight="bold")
    fig.tight_layout()
    return fig


def _evidence_panel(ax, analysis: Analysis) -> None:
    """Every answer with its level and each deciding number against its threshold."""
    v = analysis.verdict
    ax.axis("off")
    ax.set_title("(c) the answers and the numbers that decided them (✓ passes, ✗ fails)", fontsize=10,
                 loc="left")
    answers = [j for j in (v.function, v.training, v.trained_function, v.history) if j is not None]
    lines = sum(1.3 + min(len(j.reasons), 3) + len(j.evidence) + min(len(j.notes), 2) for j in answers)
    loc = analysis.local
    lines += 0 if loc is None else 1.3 + len(loc.lines())
    step = min(0.065, 0.95 / lines)
    y = 0.97

    def put(text, x=0.02, fontsize=8.5, gap=1.0, **style):  # one line of text, then the next line down
        nonlocal y
        ax.text(x, y, text, transform=ax.transAxes, fontsize=fontsize, va="top", **style)
        y -= gap * step

    for j in answers:
        put(f"{j.kind}: {j.level}", 0.0, 9.5, 1.3, fontweight="bold", color=_COLOURS[j.level])
        for r in j.reasons[:3]:
            put(_short(f"reason: {r}"), color="tab:red")
        for e in j.evidence:
            mark = "✓" if e.passed else "✗"
            put(f"{mark} {e.name} = {e.value:.3g}   (must be {e.op} {e.threshold:.3g})",
                color="k" if e.passed else "tab:red")
        for n in j.notes[:2]:
            put(_short(f"note: {n}"), fontsize=8, color="0.35")
    if loc is not None:  # docs/theory.md §8: beside the verdict, never part of it
        put(f"reported, not judged (no part of the verdict): local linearity at {loc.n_used} of "
            f"{loc.n_total} inputs (§8)", 0.0, 9.5, 1.3, fontweight="bold", color="0.35")
        for line in loc.lines():
            put(f"· {line}", color="0.35")


def _short(text: str, width: int = 190) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"
