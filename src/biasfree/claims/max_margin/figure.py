"""Figure for ``max-margin``: direction convergence to the SVM, losses against the linear
twins, normalised margins (drawn from ``result.arrays`` only)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from ..._figure import claim_title
from ...results import Result
from . import member_name


def figure(result: Result):
    a = result.arrays
    t, alphas = a["t"], a["alphas"]
    tt = np.maximum(t, t[1])  # log axes: the t = 0 record is drawn at the first step
    colors = plt.cm.viridis(np.linspace(0.1, 0.8, len(alphas)))
    runs = [(f"{init}s α={al:g}" if init == "pair" else f"{init} α={al:g}", member_name(init, al), col, ls)
            for init, ls in (("pair", "-"), ("random", "--")) for al, col in zip(alphas, colors, strict=True)]
    fig, axes = plt.subplots(1, 3, figsize=(14, 4))

    ax = axes[0]
    for label, name, col, ls in runs:
        ax.loglog(tt, np.maximum(1 - a[f"cos_{name}"], 1e-16), color=col, ls=ls, label=label)
    ax.axhline(0.01, color="k", lw=0.8, ls=":", label="cos = 0.99")
    ax.axhline(1 - float(a["cos_mean_direction"]), color="tab:red", lw=0.8, ls=":",
               label="mean direction <y x>")
    ax.axhline(1 - float(a["cos_teacher"]), color="tab:orange", lw=0.8, ls=":",
               label="labelling teacher w*")
    ax.set(xlabel="time t = η k", ylabel="1 - cos(β_eff, w_svm)", title="(a) direction: towards w_svm")
    ax.legend(fontsize=7)

    ax = axes[1]
    for label, name, col, ls in runs:
        ax.loglog(tt, a[f"loss_{name}"], color=col, ls=ls, label=label)
    for i, al in enumerate(alphas):
        ax.loglog(tt, a[f"loss_twin_{member_name('pair', al)}"], color="k", ls=":", lw=0.8,
                  label="linear twins (pairs)" if i == 0 else None)
    ax.set(xlabel="time t = η k (twin: c t)", ylabel="logistic loss", title="(b) loss: pairs on their twins")
    ax.legend(fontsize=7)

    ax = axes[2]
    for label, name, col, ls in runs:
        ax.semilogx(tt, a[f"margin_ratio_{name}"], color=col, ls=ls, label=label)
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set(xlabel="time t", ylabel="min_i y_i β̂ᵀx_i / SVM margin", ylim=(-0.2, 1.05),
           title="(c) normalised margin → the SVM's")
    ax.legend(fontsize=7)
    claim_title(fig, result)
    fig.tight_layout()
    return fig
