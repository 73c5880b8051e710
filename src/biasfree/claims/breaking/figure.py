"""Figure for ``breaking``: loss against the linear floor, the twin curves and the even
part, per case (drawn from ``result.arrays`` only)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from ..._figure import claim_title
from ...results import Result

FLOOR = 1e-34
BAR_FLOOR = 1e-18  # bars of exact zeros (round-off) drawn at this level
COLORS = ("k", "tab:orange", "tab:purple", "tab:green")


def figure(result: Result):
    a = result.arrays
    t, cases = a["t"], [str(k) for k in a["cases"]]
    c = float(a["c"])
    fig, axes = plt.subplots(1, 3, figsize=(14, 4))

    ax = axes[0]
    for i, (case, col) in enumerate(zip(cases, COLORS, strict=True)):
        ax.plot(t, a["loss"][i] / a["floor"][i], color=col, label=case.replace("_", " "))
        ax.plot(t, a["loss_twin"][i] / a["floor"][i], color=col, ls="--", lw=0.8)
    ax.axhline(1.0, color="0.5", lw=0.8)
    ax.set(xlabel="time t = η k (twin, dashed: c t)", ylabel="loss / linear floor",
           title="(a) loss ÷ best linear fit: only the control stays ≥ 1", ylim=(0, None))
    ax.legend(fontsize=8)

    ax = axes[1]
    for i, (case, col) in enumerate(zip(cases, COLORS, strict=True)):
        ax.semilogy(t, np.maximum(a["even_energy"][i], FLOOR), color=col,
                    label=case.replace("_", " "))
    ax.set(xlabel="time t = η k", ylabel="<f_even²> (training inputs)",
           title="(b) even part: zero (round-off) only in the control")
    ax.legend(fontsize=8)

    ax = axes[2]
    x = np.arange(len(cases))
    below = 1 - a["loss"][:, -1] / a["floor"]
    ax.bar(x - 0.2, np.maximum(a["deviation"], BAR_FLOOR), 0.4, color="tab:blue",
           label="deviation from twin (÷ L(0))")
    ax.bar(x + 0.2, np.maximum(below, BAR_FLOOR), 0.4, color="tab:red",
           label="fraction below the floor at the end")
    ax.axhline(3e-3, color="k", lw=0.8, ls="--", label="0.3%")
    ax.set_xticks(x, [k.replace("_", "\n") for k in cases], fontsize=8)
    ax.set(yscale="log", title=f"(c) at the end (α={float(a['alpha']):g}, c={c:g})", ylim=(BAR_FLOOR, 10),
           ylabel="fraction")
    ax.legend(fontsize=7, loc="center right")
    claim_title(fig, result)
    fig.tight_layout()
    return fig
