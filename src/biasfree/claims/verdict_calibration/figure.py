"""The verdict calibration: one panel per (depth, biases, asymmetry), the init × width grid
coloured by analyse's predicted training level, the measured gap written in each cell, the
measured 0.3% contour drawn on top and every disagreement circled; below, one confusion
table per family (verdict level × measured truth) and the conv nets' measured gap against
the predicted interval's high end."""

from __future__ import annotations

import numpy as np
from matplotlib.colors import ListedColormap
from matplotlib.patches import Patch

from ..._figure import claim_title, mark, plt
from ...analysis.verdict import LEVELS
from .summary import LEVEL_KEYS, slug

_COLOURS = ("#2ca02c", "#98df8a", "#dbdb8d", "#ffbb78", "#ff9896")  # exactly, effectively, undecided,
# odd-linear, not


def figure(result):
    a = result.arrays
    level, gap, pred, full = a["level"], a["gap"], a["predicted_linear"], a["full"]
    undecided = a["undecided"] if "undecided" in a else np.zeros_like(pred)  # files before the level
    depths, biases, asyms = a["depths"], a["biases"], a["asymmetries"]
    widths, cols = a["widths"], a["columns"]
    level_of_paper = float(a["paper_level"])
    ncol = len(asyms) * len(biases)
    nrow = len(depths)
    names = [str(n) for n in a["family_names"]] if "family_names" in a else []
    width = max(3.6 * ncol + 0.5, 2.3 * (len(names) + 1.5))
    fig = plt.figure(figsize=(width, 3.2 * nrow + 1.6 + (3.6 if names else 0)), layout="constrained")
    top, bottom = (fig.subfigures(2, 1, height_ratios=[3.2 * nrow + 1.6, 3.6]) if names
                   else (fig.subfigures(1, 1), None))
    axes = top.subplots(nrow, ncol, squeeze=False)
    cmap = ListedColormap(_COLOURS)
    truth = gap <= level_of_paper
    for iL, ib, ia in np.ndindex(nrow, len(biases), len(asyms)):
        ax = axes[iL, ib * len(asyms) + ia]
        ax.pcolormesh(np.arange(len(cols) + 1) - 0.5, np.arange(len(widths) + 1) - 0.5,
                      level[iL, ib, ia], cmap=cmap, vmin=-0.5, vmax=len(LEVELS) - 0.5)
        # the contour of the measured truth only: a run cut at max_steps has none
        G = np.where(full[iL, ib, ia], np.log10(np.maximum(gap[iL, ib, ia], 1e-300)), np.nan)
        lg = np.log10(level_of_paper)
        if np.sum(np.isfinite(G)) >= 3 and np.nanmin(G) < lg < np.nanmax(G):
            ax.contour(np.arange(len(cols)), np.arange(len(widths)), G, levels=[lg], colors="k",
                       linestyles="solid", linewidths=2.0)
        for i, j in np.ndindex(len(widths), len(cols)):
            at = (iL, ib, ia, i, j)
            done = full[at]
            wrong = done and not undecided[at] and pred[at] != truth[at]
            said = (f"\n[{100 * a['interval'][at][0]:.2g}–{100 * a['interval'][at][2]:.2g}]%"
                    if undecided[at] and "interval" in a else "")
            ax.text(j, i, f"{100 * gap[at]:.2g}%" + ("" if done else "\n(cut)") + said,
                    ha="center", va="center", fontsize=7 if len(cols) < 5 else 6,
                    fontweight="bold" if wrong else "normal", color="k" if done else "0.45")
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
    top.legend(handles=handles, loc="outside lower center", ncol=3, fontsize=8)
    if names:
        _families(bottom, result, names)
    m = result.metrics
    claim_title(fig, result, "Verdict (colour) against the measured gap to the twin (numbers, contour): "
                f"agreement {100 * m['agreement']:.0f}% of the "
                f"{int(m.get('decided', m['points']))} decided points measured to their horizon "
                f"({int(m.get('undecided', 0))} undecided), "
                f"{int(m['confusion_linear_not'])} false 'linear', "
                f"{int(m['confusion_not_linear'])} linear nets called not linear" + _families_line(m, names),
                fontsize=10)
    return fig


_TRUTH_OK = "#c7e9c0"  # verdict and truth agree
_FALSE_LINEAR = "#d62728"
_FALSE_NOT = "#fdae6b"
_NEUTRAL = "#e0e0e0"  # undecided, or no verdict


def _families_line(m, names) -> str:
    """The families' totals for the title: nets with a truth (a family without verdicts has
    none), false 'linear' among them."""
    keys = [slug(n) for n in names if f"{slug(n)}_false_linear" in m]
    if not keys:
        return ""
    return (f"; families: {int(sum(m[f'{k}_false_linear'] for k in keys))} false 'linear' among "
            f"{int(sum(m[f'{k}_points'] for k in keys))} nets with a truth")


def _cell_colour(i: int, j: int, n: int) -> str:
    """Row i (level), column j (0 measured linear, 1 not), n points there."""
    if n == 0:
        return "white"
    if LEVELS[i] == "undecided":
        return _NEUTRAL
    linear = i < 2
    if linear and j == 1:
        return _FALSE_LINEAR
    return _TRUTH_OK if linear == (j == 0) else _FALSE_NOT


def _families(sub, result, names):
    """One confusion table per family and the conv nets' measured gap against the predicted high end."""
    a = result.arrays
    axes = sub.subplots(1, len(names) + 1, gridspec_kw={"width_ratios": [1] * len(names) + [1.6]})
    for k, (ax, name) in enumerate(zip(axes, names, strict=False)):
        s = slug(name)
        T, full = a[f"family_{s}_table"], a[f"family_{s}_full"]
        rgb = [[plt.matplotlib.colors.to_rgb(_cell_colour(i, j, T[i, j])) for j in range(2)]
               for i in range(len(LEVELS))]
        ax.imshow(rgb, aspect="auto")
        truth = a[f"family_{s}_gap"] <= float(a["paper_level"])
        assumed = full & a[f"family_{s}_assumption"]  # "not" on a failed assumption only
        on_assumption = [int(np.sum(assumed & truth)), int(np.sum(assumed & ~truth))]
        for i, j in np.ndindex(len(LEVELS), 2):
            why = (f"\n({on_assumption[j]} on a failed\nassumption)" if LEVELS[i] == LEVELS[-1]
                   and on_assumption[j] else "")
            ax.text(j, i, f"{int(T[i, j])}{why}", ha="center", va="center", fontsize=7 if why else 9,
                    fontweight="bold" if T[i, j] else "normal")
        ax.set_xticks([0, 1], ["measured\n≤ 0.3%", "measured\n> 0.3%"], fontsize=7)
        ax.set_yticks(range(len(LEVELS)), LEVEL_KEYS if k == 0 else [""] * len(LEVELS), fontsize=7)
        check = f"no_false_linear_{s}"
        ok = mark(result, check) if check in result.checks else ""
        count = f"{int(np.sum(full))} with a truth, {int(np.sum(~full))} cut"
        ax.set_title(f"{name}{ok}\n{count}", fontsize=8)
    ax = axes[-1]
    for name, marker in (("conv1d", "o"), ("conv2d", "s")):
        if name in names:
            g, h = a[f"family_{name}_gap"], a[f"family_{name}_high_end"]
            ok = np.isfinite(h) & (h > 0) & a[f"family_{name}_full"]
            ax.loglog(h[ok], g[ok], marker, ms=7, label=f"{name} ({int(np.sum(g[ok] > h[ok]))} of "
                                                       f"{int(np.sum(ok))} above)")
    lims = np.array([1e-5, 1e2])
    ax.loglog(lims, lims, "k-", lw=1, label="measured = predicted high end")
    level = float(a["paper_level"])
    ax.axhline(level, color="tab:red", ls="--", lw=1, label="0.3% of L₀")
    ax.axvline(level, color="tab:red", ls="--", lw=1)
    ax.set(xlim=lims, ylim=lims)
    ax.set_xlabel("predicted gap, high end (fraction of L₀)", fontsize=8)
    ax.set_ylabel("measured gap, max over GD steps (fraction of L₀)", fontsize=8)
    ax.set_title("conv nets: the predicted interval is no bound\n(points above the line)", fontsize=8)
    ax.legend(fontsize=7, loc="lower right")
    sub.suptitle("Families: analyse's verdict (rows) against the measured truth (columns), nets with a "
                 "truth; green agree, red false 'linear', orange false 'not', grey undecided", fontsize=9)
