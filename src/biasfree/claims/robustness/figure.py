"""Figure for ``robustness``: weight decay, large init, large learning rate (from arrays)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.ticker import NullFormatter

from ..._figure import action_end, claim_title
from ...results import Result
from . import INITS

FLOOR = 1e-18
NAMES = ("pairs", "random")
COLORS = ("tab:blue", "tab:red")


def figure(result: Result):
    a = result.arrays
    c = float(a["c"])
    fig, axes = plt.subplots(1, 3, figsize=(14, 4))

    ax = axes[0]
    t = a["t_long"]
    for init, name, col in zip(INITS, NAMES, COLORS, strict=True):
        B = a[f"beta_wd_{init}"]
        ax.semilogy(t, np.linalg.norm(B - a["beta_star_lambda_over_c"], axis=1), color=col,
                    label=f"{name}: |β_eff - β*(λ/c)|")
        ax.semilogy(t, np.linalg.norm(B - a["beta_star_lambda"], axis=1), color=col, ls=":",
                    label=f"{name}: |β_eff - β*(λ)|")
    ax.set(xlabel="time t = η k", ylabel="distance", ylim=(1e-16, None),
           title=f"(a) decay λ={result.config['weight_decay']:g}: β_eff ends at β*(λ/c) (c={c:g}), "
                 "not β*(λ)")
    ax.legend(fontsize=7)

    ax = axes[1]
    t = a["t_large"]
    for init, name, col in zip(INITS, NAMES, COLORS, strict=True):
        ax.plot(t, a[f"loss_large_{init}"], color=col, label=f"{name}: leaky")
        ax.plot(t, a[f"loss_large_twin_{init}"], color=col, ls="--", lw=0.9, label=f"{name}: twin at c t")
    half_even = 0.5 * a["even_energy_large_random"]
    ax.plot(t, half_even, color="0.4", ls=":", label="random: ½<f_even²>")
    ax.set(xlabel="time t = η k (twin: c t)", ylabel="loss",
           xlim=(0, action_end(t, *(a[f"loss_large{tw}_{k}"] for k in INITS for tw in ("", "_twin")),
                               half_even)),
           title=f"(b) large init σ={a['scales'][1]:g}: the even part\nopens a gap at t = 0 (random only)")
    ax.legend(fontsize=7)

    ax = axes[2]
    lrs = a["lrs"]
    for init, name, col in zip(INITS, NAMES, COLORS, strict=True):
        ax.loglog(lrs, a[f"gap_flow_{init}"], "o-", color=col, label=f"{name}: max |L_GD - L_flow| / L(0)")
        ax.loglog(lrs, np.maximum(a[f"twin_deviation_lr_{init}"], FLOOR), "s--", color=col, mfc="none",
                  label=f"{name}: deviation from linear twin")
    ax.loglog(lrs, a["gap_flow_pair"][0] * lrs / lrs[0], "k:", lw=0.8, label="∝ η")
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set(xlabel="learning rate η", ylabel="relative gap (fraction of L(0))",
           title="(c) large steps: GD leaves the flow ∝ η;\npairs stay on their twin")
    ax.legend(fontsize=7)
    claim_title(fig, result)
    fig.tight_layout()
    return fig
