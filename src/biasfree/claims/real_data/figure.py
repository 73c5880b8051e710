"""Figure of the real-data experiment: loss against rescaled time beside the linear twin
and the predicted curve, the gap to the twin, and the odd/even split of the trained nets."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from ..._figure import claim_title
from ...core.twin import slope_factor
from ...results import Result

_TINY = 1e-32


def figure(result: Result):
    A, M = result.arrays, result.metrics
    t, L, Lw = A["t"], A["loss"], A["twin_loss"]
    c = float(slope_factor(result.config["alpha"]))
    ct = c * t
    fig, ax = plt.subplots(1, 3, figsize=(17, 4.6))
    names = [str(n) for n in A["members"]]
    pair, randoms = names.index("pair"), [i for i, n in enumerate(names) if n != "pair"]
    ax[0].semilogx(ct[1:], L[pair, 1:], color="C2", lw=2.5, label="ReLU, pair init")
    ax[0].semilogx(ct[1:], Lw[pair, 1:], "k:", lw=1.2, label="linear twin (GD)")
    for k, i in enumerate(randoms):
        ax[0].semilogx(ct[1:], L[i, 1:], "C0--", lw=1.2, label="ReLU, random init" if k == 0 else None)
    ax[0].semilogx(c * A["t_flow"][1:], A["predicted_loss"][1:], "o", color="C3", ms=4, mfc="none",
                   label="predicted (twin's gradient flow, 1st random init)")
    ax[0].axhline(float(A["linear_floor"]), color="0.5", lw=0.8, ls="-.", label="linear floor")
    ax[0].set(xlabel="rescaled time (1+α) t / 2", ylabel="training loss (½·MSE)",
              title="(a) digits: ReLU net vs linear twin")
    ax[0].legend(fontsize=7)
    for i in [pair, *randoms]:
        g = np.abs(L[i] - Lw[i]) / L[i, 0]
        kw = ({"color": "C2", "lw": 2, "label": "pair init (round-off)"} if i == pair else
              {"color": "C0", "lw": 1.2, "ls": "--", "label": "random init" if i == randoms[0] else None})
        ax[1].loglog(ct[1:], g[1:] + 1e-17, **kw)
    ax[1].axhline(3e-3, color="k", lw=0.8, ls="-.", label="paper's 0.3%")
    ax[1].set(xlabel="rescaled time (1+α) t / 2", ylabel="|L - L_twin| / L(0)", ylim=(1e-17, 1),
              title="(b) gap to the linear twin")
    ax[1].legend(fontsize=7)
    S = np.maximum(A["splits"], _TINY)
    x = np.arange(S.shape[0])
    for k, (name, col) in enumerate(zip(("odd, linear (βᵀx)", "odd, nonlinear", "even"),
                                        ("C2", "C3", "C4"), strict=True)):
        ax[2].bar(x + (k - 1) * 0.27, S[:, k], 0.27, color=col, label=name)
    ax[2].set_xticks(x, names)
    ax[2].set(yscale="log", ylabel="energy <||·||²> on the training set", ylim=(1e-33, 1e6),
              title=f"(c) trained nets: odd/even split (bars at {_TINY:g}: round-off)")
    ax[2].legend(fontsize=7, loc="upper center", ncol=3)
    claim_title(fig, result, f"Random-init gap {100 * M['random_gap_to_twin_median']:.2g}% of L(0) "
                "(paper: < 0.3%), pair init exact; held-out accuracy "
                f"{100 * M['random_test_accuracy_mean']:.1f}% "
                f"(twin {100 * M['twin_test_accuracy_mean']:.1f}%)", fontsize=10)
    fig.tight_layout()
    return fig
