"""Figure for ``even-part``: the even part's energy over training, the deviation from the
linear twin against init scale (and width), drawn from ``result.arrays`` only."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.ticker import NullFormatter

from ..._figure import action_end, claim_title
from ...results import Result
from . import INITS

FLOOR = 1e-34  # plotting floor for quantities that are exactly zero up to round-off
LABELS = {"pair": "antisymmetric pairs", "rank_one": "rank-one balanced", "random": "random Gaussian"}
COLORS = {"pair": "tab:blue", "rank_one": "tab:green", "random": "tab:red"}


def figure(result: Result):
    a = result.arrays
    scales, t, D, E = a["scales"], a["t"], a["deviation"], a["even_energy"]
    c = float(a["c"])
    row = {str(name): k for k, name in enumerate(a["inits"])}  # init name -> row of D, E, loss
    rand = row["random"]
    study = "study_widths" in a
    fig, axes = plt.subplots(1, 4 if study else 3, figsize=(17 if study else 13.5, 3.9))

    ax = axes[0]
    shades = plt.cm.Reds(np.linspace(0.35, 1.0, len(scales)))
    for j, sc in enumerate(scales):
        ax.semilogy(t, np.maximum(E[rand, j], FLOOR), color=shades[j], label=f"random σ={sc:g}")
    for init, ls, label in (("pair", "--", "pairs"), ("rank_one", ":", "rank-one")):
        ax.semilogy(t, np.maximum(E[row[init], -1], FLOOR), color=COLORS[init], ls=ls,
                    label=f"{label} σ={scales[-1]:g}")
    ax.set_ylim(FLOOR, 2 * max(np.max(E), 1e-30))
    ax.set(xlabel="time t = η k", ylabel="<f_even²> / <y²>", title="(a) even part during training")
    ax.legend(fontsize=7)

    ax = axes[1]
    for name in INITS:
        ax.loglog(scales, np.maximum(D[row[name]], FLOOR), "o-", color=COLORS[name], label=LABELS[name])
    ax.loglog(scales, np.maximum(a["random_t0_gap"], FLOOR), "x:", color="0.4",
              label="½<f_even²>(0) / L(0), random (the t = 0 gap)")
    ax.axhline(3e-3, color="k", lw=0.7, ls="--")
    ax.text(scales[0], 3.6e-3, "paper's 0.3%", fontsize=7)
    ax.set(xlabel="init scale σ", ylabel="max_t |L(t) - L_lin(ct)| / L(0)",
           title="(b) deviation from the linear twin")
    ax.legend(fontsize=7)

    ax = axes[2]
    for j, ls in ((0, "-"), (len(scales) - 1, "--")):
        ax.plot(t, a["loss"][rand, j], color="tab:red", ls=ls,
                label=f"leaky α={float(a['alpha']):g}, σ={scales[j]:g}")
        ax.plot(t, a["loss_twin"][rand, j], color="k", ls=ls, lw=0.8,
                label=f"linear twin at c t (c={c:g}) σ={scales[j]:g}")
    ax.set(xlabel="time t = η k (twin: c t)", ylabel="loss (½·MSE)", title="(c) random init: leaky vs twin",
           xlim=(0, action_end(t, a["loss"][rand, [0, -1]], a["loss_twin"][rand, [0, -1]])))
    ax.legend(fontsize=7)

    if study:
        ax = axes[3]
        w, D0 = a["study_widths"], a["study_deviation"]
        for i, wi in enumerate(w):
            ax.loglog(np.full(D0.shape[1], wi), D0[i], ".", color="tab:red", alpha=0.5)
        med = np.median(D0, axis=1)
        ax.loglog(w, med, "o-", color="tab:red", label="median over seeds")
        ax.loglog(w, med[0] * (w / w[0]) ** -0.5, "k:", label="∝ width^(-1/2)")
        ax.loglog(w, med[0] * (w / w[0]) ** -1.0, "k--", lw=0.8, label="∝ width^(-1)")
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set(xlabel="width", ylabel="D₀ (smallest σ)", title="(d) rich limit vs width")
        ax.legend(fontsize=7)
    claim_title(fig, result)
    fig.tight_layout()
    return fig
