"""Figure of the headline experiment: loss vs t, the same vs c t, and the gaps."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from ..experiments.base import Result


def figure(result: Result):
    A = result.arrays
    alphas, t = A["alphas"], A["t"]
    cs = (1 + alphas) / 2
    L0 = float(A["L0"])
    colors = plt.cm.viridis(np.linspace(0, 0.9, len(alphas)))
    fig, ax = plt.subplots(1, 3, figsize=(15, 4.2))
    for i, a in enumerate(alphas):
        kw = {"color": colors[i]}
        ax[0].plot(t, A["loss_rank_one"][i], lw=2, label=f"α = {a:g}", **kw)
        ax[0].plot(t, A["loss_theory"][i], "k--", lw=0.8)
        ax[0].plot(t, A["loss_random"][i], ":", lw=1.2, **kw)
        ax[1].plot(cs[i] * t, A["loss_rank_one"][i], lw=2, **kw)
        ax[1].plot(cs[i] * t, A["loss_random"][i], ":", lw=1.2, **kw)
        ax[2].semilogy(cs[i] * t, np.abs(A["loss_rank_one"][i] - A["loss_theory"][i]) / L0
                       + 1e-17, lw=1.5, **kw)
        ax[2].semilogy(cs[i] * A["t_flow"], np.abs(A["loss_flow"][i] - A["loss_theory_flow"][i]) / L0
                       + 1e-17, "--", lw=1, **kw)
        ax[2].semilogy(cs[i] * t, np.abs(A["loss_random"][i] - A["loss_random_twin"][i]) / L0
                       + 1e-17, ":", lw=1.2, **kw)
    ax[1].plot(cs[-1] * t, A["loss_theory"][-1], "k--", lw=0.8, label="closed form §3.1")
    ax[0].set(xlabel="t (gradient-flow time, η k)", ylabel="training loss",
              title="(a) solid: rank-one init, dotted: small random init")
    ax[1].set(xlabel="rescaled time (1+α) t / 2", ylabel="training loss",
              title="(b) curves collapse in rescaled time")
    ax[2].set(xlabel="rescaled time (1+α) t / 2", ylabel="|gap| / L(0)",
              title="(c) solid: GD vs closed form; dashed: flow;\n"
                    "dotted: random init vs its linear twin")
    ax[2].set_ylim(1e-17, 1)
    ax[0].legend(fontsize=8)
    ax[1].legend(fontsize=8)
    fig.suptitle("Bias-free leaky ReLU nets learn like linear nets, time × (1+α)/2 — "
                 f"{result.size}, seed {result.seed}")
    fig.tight_layout()
    return fig

