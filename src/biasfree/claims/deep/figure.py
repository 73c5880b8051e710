"""Figure of the deep experiment, a grid: one row per depth (loss with the plateaus,
mode strengths, per-layer effective rank, nonlinear odd and even energies), then a row
with the sine target against the two-layer floor and one legend for the whole figure."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.lines import Line2D
from matplotlib.ticker import FormatStrFormatter, LogLocator, NullFormatter

from ..._figure import action_end, action_start, claim_title
from ...results import Result
from . import MEMBERS

_STYLE = {"linear_aligned": ("k", "-", "deep linear, aligned init (at λt)"),
          "relu_pair_aligned": ("tab:red", "-", "ReLU pair net mapped from it"),
          "relu_gaussian": ("tab:blue", "-", "ReLU, small Gaussian init"),
          "relu_pair_random": ("tab:green", "-", "ReLU pair net, random halves"),
          "linear_twin_of_pair_random": ("tab:green", ":", "its deep linear twin (at λt)")}
"""Member -> (colour, line style, legend label)."""
_LAYER_LS = ("-", "--", ":", "-.")


def _legend(ax) -> None:
    """One legend for every panel: members by colour, then what the line styles mean."""
    handles = [Line2D([], [], color=c, ls=ls, lw=2, label=label) for c, ls, label in _STYLE.values()]
    handles += [Line2D([], [], color="y", ls="--", lw=1.5, label="§3.3 deep linear closed form at λt"),
                Line2D([], [], color="0.6", ls="--", lw=1, label="(a) plateaus of §3.4")]
    handles += [Line2D([], [], color="0.3", ls=ls, label=f"(b) mode {i + 1}  /  (c) layer {i + 1}")
                for i, ls in enumerate(_LAYER_LS[:3])]
    handles += [Line2D([], [], color="0.3", ls="-", lw=2, label="(d) odd nonlinear / odd energy"),
                Line2D([], [], color="0.3", ls=":", lw=1.5, label="(d) even / odd energy")]
    ax.axis("off")
    ax.legend(handles=handles, loc="center", ncol=2, fontsize=10.5, frameon=False)


def figure(result: Result):
    A = result.arrays
    depths = list(result.config["depths"])
    s, plateaus = A["s"], A["plateaus"]
    rows = len(depths) + 1
    fig = plt.figure(figsize=(16, 3.7 * rows + 1.0), layout="constrained")
    grid = fig.add_gridspec(rows, 4)
    for r, L in enumerate(depths):
        ax = [fig.add_subplot(grid[r, j]) for j in range(4)]
        t = A[f"L{L}_t"]
        loss, a, er, odd_nl, odd_e, even = ({name: A[f"L{L}_{key}_{name}"] for name in MEMBERS}
                                            for key in ("loss", "a", "erank", "odd_nl", "odd_energy", "even"))
        lam = float(A[f"L{L}_lam"])
        a_flow = A[f"L{L}_a_flow"]
        xlim = (action_start(t, *loss.values()), action_end(t, *loss.values(), frac=1e-3))
        for name in MEMBERS:
            col, ls, _ = _STYLE[name]
            ax[0].loglog(t[1:], loss[name][1:], color=col, ls=ls, lw=1.8)
        ax[0].loglog(t[1:], 0.5 * np.sum((s - a_flow[1:]) ** 2, axis=-1), "y--", lw=1.2)
        for Lk in plateaus[:-1]:
            ax[0].axhline(Lk, color="0.7", lw=0.8, ls="--")
        ax[0].set(xlabel="t (η k; linear nets at λt)", ylabel="training loss",
                  ylim=(max(plateaus[-2] * 1e-3, 1e-8), 2 * plateaus[0]),
                  title=f"(a) depth {L}: loss in stages (λ = {lam:.3f})")
        for i in range(s.size):
            for name in ("linear_aligned", "relu_pair_aligned", "relu_gaussian"):
                ax[1].semilogx(t[1:], a[name][1:, i] / s[i], color=_STYLE[name][0], lw=1.5,
                               ls=_LAYER_LS[i % 3])
            ax[1].semilogx(t[1:], a_flow[1:, i] / s[i], "y--", lw=1)
        ax[1].set(xlabel="t (η k)", ylabel="a_i / s_i", title=f"(b) depth {L}: mode strengths")
        for li in range(L):
            for name in ("linear_aligned", "relu_gaussian"):
                ax[2].semilogx(t[1:], er[name][1:, li], color=_STYLE[name][0], lw=1.5, ls=_LAYER_LS[li % 4])
        ax[2].set(xlabel="t (η k)", ylabel="effective rank exp(H(σ/Σσ))",
                  title=f"(c) depth {L}: per-layer effective rank")
        for name in ("relu_pair_aligned", "relu_gaussian", "relu_pair_random"):
            col = _STYLE[name][0]
            frac = np.clip(odd_nl[name] / np.maximum(odd_e[name], 1e-300), 1e-17, None)
            ax[3].loglog(t[1:], frac[1:], color=col, lw=1.5)
            ax[3].loglog(t[1:], np.clip(even[name][1:] / np.maximum(odd_e[name][1:], 1e-300), 1e-17,
                                        None), color=col, ls=":", lw=1.2)
        ax[3].set(xlabel="t (η k)", ylabel="fraction of <||f_odd||²>", ylim=(1e-12, 10),
                  title=f"(d) depth {L}: nonlinear odd and even parts")
        for x in ax:
            x.set_xlim(*xlim)
            x.xaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))  # a short range: label 1, 2, 5
            x.xaxis.set_major_formatter(FormatStrFormatter("%g"))
            x.xaxis.set_minor_formatter(NullFormatter())
    ax = fig.add_subplot(grid[-1, :2])
    floor = float(A["sine_floor"])
    sine = [(int(L), A[f"sine_L{int(L)}_t"], A[f"sine_L{int(L)}_loss"]) for L in A["sine_depths"]]
    for L, t, loss in sine:
        ax.loglog(t[1:], loss[1:], lw=1.8, label=f"depth {L}")
    ax.axhline(floor, color="k", ls="--", lw=1, label="linear floor (lstsq): the two-layer limit")
    t_all = sine[0][1]
    ax.set_xlim(action_start(t_all, *[np.interp(t_all, t, y) for _, t, y in sine]), t_all[-1])
    ax.set(xlabel="t (η k)", ylabel="training loss",
           title="(e) sine target y = wᵀx + sin(4wᵀx): only depth ≥ 3 goes below the floor")
    ax.legend(fontsize=9)
    _legend(fig.add_subplot(grid[-1, 2:]))
    claim_title(fig, result)
    return fig
