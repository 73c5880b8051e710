"""Figure of the deep experiment: per depth, loss with plateaus, mode strengths, per-layer
effective rank and the odd nonlinear / even energies; and the sine target against the
two-layer floor."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from ..experiments.base import Result
from ..experiments.deep import MEMBERS

_STYLE = {"linear_aligned": ("k", "-"), "relu_pair_aligned": ("tab:red", "-"),
          "relu_gaussian": ("tab:blue", "-"), "relu_pair_random": ("tab:green", "-"),
          "linear_twin_of_pair_random": ("tab:green", ":")}


def figure(result: Result):
    A = result.arrays
    depths = [int(L) for L in A["depths"]]
    s, plateaus = A["s"], A["plateaus"]
    rows = len(depths)
    fig, ax = plt.subplots(rows, 5, figsize=(25, 4.3 * rows), squeeze=False)
    for r, L in enumerate(depths):
        t, loss, a = A[f"L{L}_t"], A[f"L{L}_loss"], A[f"L{L}_a"]
        lam = float(A[f"L{L}_lam"])
        a_flow = A[f"L{L}_a_flow"]
        for b, name in enumerate(MEMBERS):
            col, ls = _STYLE[name]
            ax[r, 0].loglog(t[1:], loss[b, 1:], color=col, ls=ls, lw=1.8, label=name)
        ax[r, 0].loglog(t[1:], 0.5 * np.sum((s - a_flow[1:]) ** 2, axis=-1), "y--", lw=1.2,
                        label="§3.3 deep linear at λt")
        for Lk in plateaus[:-1]:
            ax[r, 0].axhline(Lk, color="0.7", lw=0.8, ls="--")
        ax[r, 0].set(xlabel="t (ReLU time; linear nets at λt)", ylabel="training loss",
                     ylim=(max(plateaus[-2] * 1e-3, 1e-8), 2 * plateaus[0]),
                     title=f"(a) depth {L}: loss, plateaus of §3.4 (λ = {lam:.3f})")
        for i in range(s.size):
            for b in (0, 1, 2):
                col, _ = _STYLE[MEMBERS[b]]
                ax[r, 1].semilogx(t[1:], a[b, 1:, i] / s[i], color=col, lw=1.5,
                                  ls=("-", "--", ":")[i % 3])
            ax[r, 1].semilogx(t[1:], a_flow[1:, i] / s[i], "y--", lw=1)
        ax[r, 1].set(xlabel="t", ylabel="a_i / s_i",
                     title="(b) mode strengths (line style = mode;\ncolours as in (a))")
        er = A[f"L{L}_erank"]
        for li in range(L):
            for b in (0, 2):
                col, _ = _STYLE[MEMBERS[b]]
                ax[r, 2].semilogx(t[1:], er[b, 1:, li], color=col, lw=1.5,
                                  ls=("-", "--", ":", "-.")[li % 4],
                                  label=f"{MEMBERS[b]}, layer {li + 1}")
        ax[r, 2].set(xlabel="t", ylabel="effective rank exp(H(σ/Σσ))",
                     title="(c) per-layer effective rank")
        ax[r, 2].legend(fontsize=6)
        odd_nl, odd_e, even = A[f"L{L}_odd_nl"], A[f"L{L}_odd_energy"], A[f"L{L}_even"]
        for b in (1, 2, 3):
            col, _ = _STYLE[MEMBERS[b]]
            frac = np.clip(odd_nl[b] / np.maximum(odd_e[b], 1e-300), 1e-17, None)
            ax[r, 3].loglog(t[1:], frac[1:], color=col, lw=1.5, label=f"{MEMBERS[b]}: odd nonlinear")
            ax[r, 3].loglog(t[1:], np.clip(even[b, 1:] / np.maximum(odd_e[b, 1:], 1e-300), 1e-17,
                                           None), color=col, ls=":", lw=1.2)
        ax[r, 3].plot([], [], "k:", label="even energy / odd energy")
        ax[r, 3].set(xlabel="t", ylabel="fraction of <||f_odd||²>", ylim=(1e-12, 10),
                     title="(d) nonlinear odd part and even part")
        ax[r, 3].legend(fontsize=6)
        ax[r, 0].legend(fontsize=6)
    floor = float(A["sine_floor"])
    for L in [int(x) for x in A["sine_depths"]]:
        ax[0, 4].loglog(A[f"sine_L{L}_t"][1:], A[f"sine_L{L}_loss"][1:], lw=1.8, label=f"depth {L}")
    ax[0, 4].axhline(floor, color="k", ls="--", lw=1, label="linear floor (lstsq): two-layer limit")
    ax[0, 4].set(xlabel="t", ylabel="training loss", title="(e) sine target y = wᵀx + sin(4wᵀx)")
    ax[0, 4].legend(fontsize=7)
    for r in range(1, rows):
        ax[r, 4].axis("off")
    fig.suptitle(f"Deep bias-free ReLU nets vs deep linear nets — {result.size}, seed {result.seed}")
    fig.tight_layout()
    return fig
