"""Figure of the ``expressivity`` experiment, drawn only from ``result.arrays``: one row per
target, training loss (½·MSE) over the loss of f = 0 against time for the three nets, with
the population two-layer floor (± its standard error), the exact floor of the training set
and the 1-homogeneous (any-depth) floor in the same ratio, final test losses with error bars
at the right; then 2-D slices (x1, x2; x3 = 1) of the target and of each net."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from ..._figure import claim_title
from ...results import Result
from . import ARCH_LABELS, ARCHS, TARGETS

COLORS = {"two_layer": "tab:blue", "depth3": "tab:orange", "biased": "tab:green"}
TITLES = {"x1x2x3": "y = x1 x2 x3 (odd)", "sine": "y = wᵀx + sin(4wᵀx) (odd)",
          "even": "y = (||x||² - d)/√(2d) (even): training dips below the floor, test does not"}

def _curves(ax, a, name):
    floor, floor_se, hom, _, train_floor = a[f"floor_{name}"]
    t_end, t_start = 0.0, np.inf
    for arch in ARCHS:
        t, tr = a[f"t_{arch}_{name}"][1:], a[f"train_{arch}_{name}"][1:]  # t > 0 (log axis)
        ax.plot(t, tr, color=COLORS[arch], lw=1.5, label=f"{ARCH_LABELS[arch]}: training loss")
        t_end, t_start = max(t_end, float(t[-1])), min(t_start, float(t[0]))
    for i, arch in enumerate(ARCHS):
        test, se = a[f"test_{arch}_{name}"]
        ax.errorbar(t_end * (1.3 + 0.25 * i), test, yerr=se, fmt="o", ms=4, color=COLORS[arch],
                    capsize=2, label="final test loss ± SE" if i == 0 else None)
    ax.axhspan(floor - floor_se, floor + floor_se, color="k", alpha=0.15, lw=0)
    ax.axhline(floor, color="k", lw=1.2, label="2-layer floor (population)")
    ax.axhline(train_floor, color="k", lw=1.0, ls=":",
               label="2-layer bound on the training set (exact, odd part)")
    ax.axhline(hom, color="0.45", lw=1.0, ls="--", label="any-depth bias-free floor")
    ax.set(ylim=(0.0, max(1.15, 1.1 * floor)), xscale="log", xlim=(t_start, t_end * 2.2),
           ylabel="loss / loss of f = 0  (½·MSE / ½E y²)")
    ax.set_xlabel("t = η k (dots: test loss at the end)", fontsize=8)
    ax.set_title(TITLES[name], fontsize=9)


def _slices(axes, a, name):
    g = a["slice_grid"]
    ext = (g[0], g[-1], g[0], g[-1])
    target = a[f"slice_target_{name}"]
    lim = float(np.max(np.abs(target)))
    panels = [("target", target)] + [(ARCH_LABELS[arch], a[f"slice_{arch}_{name}"]) for arch in ARCHS]
    for ax, (title, Z) in zip(axes, panels, strict=True):
        im = ax.imshow(Z.T, origin="lower", extent=ext, cmap="RdBu_r", vmin=-lim, vmax=lim,
                       aspect="equal")
        ax.set_title(title, fontsize=8)
        ax.set(xticks=[g[0], 0, g[-1]], yticks=[g[0], 0, g[-1]])
        ax.tick_params(labelsize=7)
        ax.set_xlabel("x1", fontsize=8)
    axes[0].set_ylabel("x2 (x3 = 1)", fontsize=8)
    return im


def figure(result: Result):
    a = result.arrays
    fig, axes = plt.subplots(len(TARGETS), 5, figsize=(16, 3.6 * len(TARGETS) + 0.8),
                             gridspec_kw={"width_ratios": [1.9, 1, 1, 1, 1]}, layout="constrained")
    for row, name in enumerate(TARGETS):
        _curves(axes[row, 0], a, name)
        im = _slices(axes[row, 1:], a, name)
        fig.colorbar(im, ax=axes[row, 1:].tolist(), shrink=0.8, pad=0.01)
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=4, fontsize=8)
    claim_title(fig, result, "Training loss may dip below the population floor on a finite "
                "training set (the even row); the test loss (dots) may not")
    return fig
