"""Figure of ``biasfree analyse``: the predicted learning curve (and the trained one),
and the split of the net's output into linear odd, nonlinear odd and even parts."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from ..analyse import Analysis

_TINY = 1e-32  # where an energy at round-off is drawn on the log axis


def figure(analysis: Analysis):
    """A matplotlib Figure for an :class:`~biasfree.analyse.Analysis`."""
    pred, net = analysis.prediction, analysis.net
    tr = None if pred is None else pred.trained
    fig, ax = plt.subplots(1, 2, figsize=(12, 4.4))
    if pred is None:
        ax[0].text(0.5, 0.5, "no prediction: the net has biases", ha="center", va="center")
    else:
        ax[0].plot(pred.t, pred.loss, "k-", lw=2, label=f"predicted: linear twin ({pred.reference})")
        if tr is not None:
            ax[0].plot(tr.t, tr.loss, "C0--", lw=1.5, label=f"trained, α = {net.alpha:g} (GD)")
            ax[0].plot(tr.t, tr.twin_loss, "C1:", lw=1.5, label="linear twin (GD)")
        ax[0].axhline(pred.linear_floor, color="0.5", lw=0.8, ls="-.", label="linear floor")
        ax[0].set_yscale("log")
        ax[0].set(xlabel="time t = η k", ylabel="training loss (½·MSE)",
                  title="(a) learning curve from this init")
        ax[0].legend(fontsize=8)
    labels, parts = ["init"], [(net.odd_linear_energy, net.odd_nonlinear_energy, net.even_energy)]
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
    v = analysis.verdict
    head = "EFFECTIVELY LINEAR" if v.effectively_linear else "NOT effectively linear"
    fig.suptitle(f"{head} — depth {net.depth}, widths {list(net.widths)}, α = {net.alpha:g}\n"
                 + _wrap(v.text), fontsize=10)
    fig.tight_layout()
    return fig


def _wrap(text: str, width: int = 140) -> str:
    words, lines, line = text.split(), [], ""
    for w in words:
        if len(line) + len(w) + 1 > width:
            lines.append(line)
            line = w
        else:
            line = f"{line} {w}".strip()
    return "\n".join(lines + [line])
