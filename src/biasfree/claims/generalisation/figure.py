"""Figure of the generalisation experiment: train and test loss against rescaled time,
the population-loss reference, and the random-init gaps to the linear twin."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from ..._figure import action_start, claim_title
from ...core.twin import slope_factor
from ...results import Result

KINDS = ("pair", "pair_twin", "random", "random_twin")  # arrays loss_<kind>, test_loss_<kind>: (α, t)

def figure(result: Result):
    A = result.arrays
    alphas, t = A["alphas"], A["t"]
    cs = slope_factor(alphas)
    L, Lt = {k: A[f"loss_{k}"] for k in KINDS}, {k: A[f"test_loss_{k}"] for k in KINDS}
    colors = plt.cm.viridis(np.linspace(0, 0.8, len(alphas)))
    fig, ax = plt.subplots(1, 3, figsize=(16, 4.4))
    for i, a in enumerate(alphas):
        ct = cs[i] * t
        kw = {"color": colors[i]}
        ax[0].loglog(ct, L["pair"][i], lw=2, label=f"pair init, α = {a:g}", **kw)
        ax[0].loglog(ct, L["pair_twin"][i], "k:", lw=1)
        ax[0].loglog(ct, L["random"][i], "--", lw=1.2, label=f"random init, α = {a:g}", **kw)
        ax[1].semilogx(ct, Lt["pair"][i], lw=2, label=f"pair init, α = {a:g}", **kw)
        ax[1].semilogx(ct, Lt["random"][i], "--", lw=1.2, **kw)
        ax[1].semilogx(cs[i] * A["t_flow"], A["population_loss_flow"][i], "o", ms=3, mfc="none",
                       **kw)
        for ls, name, ref in (("-", "train", L), ("--", "test", Lt)):
            gap = np.abs(ref["random"][i] - ref["random_twin"][i]) / ref["random"][i, 0]
            ax[2].loglog(ct[1:], gap[1:] + 1e-17, ls, lw=1.5,
                         label=f"random init, {name}, α = {a:g}", **kw)
            gap_p = np.abs(ref["pair"][i] - ref["pair_twin"][i]) / ref["pair"][i, 0]
            ax[2].loglog(ct[1:], gap_p[1:] + 1e-17, ls, lw=0.8, color="0.6")
        ax[2].loglog(ct[1:], 0.5 * A["even_energy_random"][i, 1:] / L["random"][i, 0], ":", lw=1.2,
                     **kw)
    ax[1].axhline(0.5 * result.config["noise"] ** 2, color="k", lw=0.8, ls="-.", label="σ²/2")
    ax[0].plot([], [], "k:", label="linear twin (pair)")
    ax[1].plot([], [], "ko", ms=3, mfc="none", label="½(||β(t) - T||² + σ²), gradient flow")
    ax[2].plot([], [], color="0.6", label="pair init (round-off)")
    ax[2].plot([], [], "k:", label="½<f_even²>_train / L(0), random init")
    ax[0].set(xlabel="rescaled time (1+α) t / 2", ylabel="training loss (½·MSE)", title="(a) train loss")
    ax[1].set(xlabel="rescaled time (1+α) t / 2", ylabel="test loss (½·MSE)",
              title="(b) test loss (dashed: random init)")
    ax[2].set(xlabel="rescaled time (1+α) t / 2", ylabel="|L - L_twin| / L(0)", ylim=(1e-17, 1),
              title="(c) gap to the linear twin")
    x0 = action_start(cs[0] * t, L["pair"], Lt["pair"])
    for a_ in ax:
        a_.legend(fontsize=7)
        a_.set_xlim(x0, float(cs[-1] * t[-1]) * 1.05)
    claim_title(fig, result)
    fig.tight_layout()
    return fig
