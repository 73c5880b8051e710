"""The verdict calibration: one panel per (depth, biases, asymmetry), the init × width grid
coloured by analyse's predicted training level, the measured gap written in each cell, the
measured 0.3% contour drawn on top and every disagreement circled."""

from __future__ import annotations

import numpy as np
from matplotlib.colors import ListedColormap
from matplotlib.patches import Patch

from ..._figure import claim_title, plt
from ...analysis.verdict import LEVELS

_COLOURS = ("#2ca02c", "#98df8a", "#dbdb8d", "#ffbb78", "#ff9896")  # exactly, effectively, undecided,
# odd-linear, not


def figure(result):
    a = result.arrays
    level, gap, pred, full = a["level"], a["gap"], a["predicted_linear"], a["full"]
    undecided = a["undecided"] if "undecided" in a else np.zeros_like(pred)  # files before the level
    depths, biases, asyms = a["depths"], a["biases"], a["asymmetries"]
    widths, cols = a["widths"], a["columns"]
    level_of_paper = float(a["paper_level"])
    panels = [(iL, ib, ia) for iL in range(len(depths)) for ib in range(len(biases))
              for ia in range(len(asyms))]
    ncol = len(asyms) * len(biases)
    nrow = len(depths)
    fig, axes = plt.subplots(nrow, ncol, figsize=(3.6 * ncol + 0.5, 3.2 * nrow + 1.6), squeeze=False,
                             constrained_layout=True)
    cmap = ListedColormap(_COLOURS)
    truth = gap <= level_of_paper
    for iL, ib, ia in panels:
        ax = axes[iL, ib * len(asyms) + ia]
        ax.pcolormesh(np.arange(len(cols) + 1) - 0.5, np.arange(len(widths) + 1) - 0.5,
                      level[iL, ib, ia], cmap=cmap, vmin=-0.5, vmax=len(LEVELS) - 0.5)
        # the contour of the measured truth only: a run cut at max_steps has none
        G = np.where(full[iL, ib, ia], np.log10(np.maximum(gap[iL, ib, ia], 1e-300)), np.nan)
        lg = np.log10(level_of_paper)
        if np.sum(np.isfinite(G)) >= 3 and np.nanmin(G) < lg < np.nanmax(G):
            ax.contour(np.arange(len(cols)), np.arange(len(widths)), G, levels=[lg], colors="k",
                       linestyles="solid", linewidths=2.0)
        for i in range(len(widths)):
            for j in range(len(cols)):
                done = full[iL, ib, ia, i, j]
                at = (iL, ib, ia, i, j)
                wrong = done and not undecided[at] and pred[at] != truth[at]
                said = (f"\n[{100 * a['interval'][at][0]:.2g}–{100 * a['interval'][at][2]:.2g}]%"
                        if undecided[at] and "interval" in a else "")
                ax.text(j, i, f"{100 * gap[at]:.2g}%" + ("" if done else "\n(cut)") + said,
                        ha="center", va="center", fontsize=7 if len(cols) < 5 else 6,
                        fontweight="bold" if wrong else "normal",
                        color="k" if done else "0.45")
                if wrong:
                    ax.plot(j, i, "o", ms=26, mfc="none", mec="tab:red", mew=2)
        ax.set_xticks(range(len(cols)), list(cols), fontsize=8)
        ax.set_yticks(range(len(widths)), [str(int(w)) for w in widths], fontsize=8)
        ax.set_xlabel("init std σ (torch: PyTorch default)", fontsize=8)
        ax.set_ylabel("width m", fontsize=8)
        ax.set_title(f"depth {depths[iL]}, biases {'on' if biases[ib] else 'off'}, "
                     f"asymmetry {asyms[ia]:g}", fontsize=9)
    handles = [Patch(color=c, label=f"predicted: {name}") for c, name in zip(_COLOURS, LEVELS, strict=True)]
    handles.append(plt.Line2D([], [], color="k", lw=2, label="measured gap = 0.3% of L(0)"))
    handles.append(plt.Line2D([], [], ls="none", marker="o", mfc="none", mec="tab:red", mew=2,
                              label="verdict ≠ measured truth"))
    handles.append(Patch(color="none", label="cell: measured gap (% of L(0)); undecided: below it the "
                                             "predicted interval [low–high]%; (cut): stopped at max_steps, "
                                             "no truth (grey)"))
    fig.legend(handles=handles, loc="outside lower center", ncol=3, fontsize=8)
    m = result.metrics
    claim_title(fig, result, "Verdict (colour) against the measured gap to the twin (numbers, contour): "
                f"agreement {100 * m['agreement']:.0f}% of the "
                f"{int(m.get('decided', m['points']))} decided points measured to their horizon "
                f"({int(m.get('undecided', 0))} undecided), "
                f"{int(m['confusion_linear_not'])} false 'linear', "
                f"{int(m['confusion_not_linear'])} linear nets called not linear", fontsize=10)
    return fig
