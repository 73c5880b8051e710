"""Figure for ``robustness``: weight decay, large init, large learning rate (from arrays)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.ticker import NullFormatter

from ..experiments.base import Result
from . import action_end, claim_title

FLOOR = 1e-18
NAMES = ("pairs", "random")
CLAIM = ("Weight decay λ acts on a leaky net as λ/c on its linear twin; large init and large steps "
         "move random-init nets off the twin, never pair-init nets")
COLORS = ("tab:blue", "tab:red")


def figure(result: Result):
    a = result.arrays
    c = float(a["c"])
    fig, axes = plt.subplots(1, 3, figsize=(14, 4))

    ax = axes[0]
    t, B = a["t_long"], a["beta_wd"]
    for i, (name, col) in enumerate(zip(NAMES, COLORS, strict=True)):
        ax.semilogy(t, np.linalg.norm(B[i] - a["beta_star_lambda_over_c"], axis=1), color=col,
                    label=f"{name}: |β_eff - β*(λ/c)|")
        ax.semilogy(t, np.linalg.norm(B[i] - a["beta_star_lambda"], axis=1), color=col, ls=":",
                    label=f"{name}: |β_eff - β*(λ)|")
    ax.set(xlabel="time t = η k", ylabel="distance", ylim=(1e-16, None),
           title=f"(a) decay λ={result.config['weight_decay']:g}: β_eff ends at β*(λ/c) (c={c:g}), "
                 "not β*(λ)")
    ax.legend(fontsize=7)

    ax = axes[1]
    L, Lt, E = a["loss_large"], a["loss_large_twin"], a["even_energy_large"]
    t = a["t_large"]
    for i, (name, col) in enumerate(zip(NAMES, COLORS, strict=True)):
        ax.plot(t, L[i], color=col, label=f"{name}: leaky")
        ax.plot(t, Lt[i], color=col, ls="--", lw=0.9, label=f"{name}: twin at c t")
    ax.plot(t, 0.5 * E[1], color="0.4", ls=":", label="random: ½<f_even²>")
    ax.set(xlabel="time t = η k (twin: c t)", ylabel="loss",
           xlim=(0, action_end(t, L, Lt, 0.5 * E[1])),
           title=f"(b) large init σ={a['scales'][1]:g}: the even part\nopens a gap at t = 0 (random only)")
    ax.legend(fontsize=7)

    ax = axes[2]
    lrs, gap, D = a["lrs"], a["gap_flow"], a["twin_deviation_lr"]
    for i, (name, col) in enumerate(zip(NAMES, COLORS, strict=True)):
        ax.loglog(lrs, gap[:, i], "o-", color=col, label=f"{name}: max |L_GD - L_flow| / L(0)")
        ax.loglog(lrs, np.maximum(D[:, i], FLOOR), "s--", color=col, mfc="none",
                  label=f"{name}: deviation from linear twin")
    ax.loglog(lrs, gap[0, 0] * lrs / lrs[0], "k:", lw=0.8, label="∝ η")
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set(xlabel="learning rate η", ylabel="relative gap (fraction of L(0))",
           title="(c) large steps: GD leaves the flow ∝ η;\npairs stay on their twin")
    ax.legend(fontsize=7)
    claim_title(fig, result, CLAIM)
    fig.tight_layout()
    return fig
