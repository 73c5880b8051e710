"""Figure of the conv experiment, one panel per comparison of the package docstring. Every
gap is the maximum over every GD step; the drawn curves are its records."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from ..._figure import claim_title, mark
from ...core.twin import slope_factor
from ...results import Result


def _collapse(ax, A, prefix: str, title: str):
    alphas, t = A["alphas"], A["t"]
    cs = slope_factor(alphas)
    colors = plt.cm.viridis(np.linspace(0, 0.9, len(alphas)))
    for i, a in enumerate(alphas):
        ax.plot(cs[i] * t, A[f"{prefix}_loss"][i], color=colors[i], lw=2, label=f"conv net α = {a:g}")
        if a < 1:
            ax.plot(cs[i] * t, A[f"{prefix}_twin_loss"][i], "--", color="k", lw=0.9)
    ax.plot([], [], "k--", lw=0.9, label="its linear conv twin\n(√c·init, step η c)")
    gap = float(np.max(A[f"{prefix}_gap"]))
    ax.set(xlabel="rescaled time c·t = (1+α) η k / 2", ylabel="training loss ½·MSE",
           xlim=(0, cs.min() * t[-1]),
           title=f"{title}\nmax over every GD step of |L − L_twin|: {gap:.2%} of L(0)\n(measured, "
                 f"not checked; {'≤' if gap <= float(A['paper_level']) else '>'} the paper's dense 0.3%)")
    ax.legend(fontsize=8)


def _gaps(ax, A, result):
    alphas, t = A["alphas"], A["t"]
    cs = slope_factor(alphas)
    lr = float(result.config["lr"])
    leaky = [i for i, a in enumerate(alphas) if a < 1]
    for prefix, ls, color in (("digits", "-", "tab:blue"), ("teacher", ":", "tab:orange")):
        L, Lt = A[f"{prefix}_loss"], A[f"{prefix}_twin_loss"]
        for j, i in enumerate(leaky):
            ax.semilogy(cs[i] * t, np.abs(L[i] - Lt[i]) / L[i, 0] + 1e-18, ls, lw=1.5, color=color,
                        alpha=1 - 0.5 * j / max(len(leaky), 1),
                        label=f"{prefix}, α = {alphas[i]:g} (records)")
            ax.plot(cs[i] * lr * A[f"{prefix}_gap_step"][j], A[f"{prefix}_gap"][j], "*", ms=12, color=color,
                    mec="k", label=f"max over every GD step: {A[f'{prefix}_gap'][j]:.2%}")
    ax.axhline(float(A["paper_level"]), color="tab:red", ls="--", lw=1.2, label="paper (dense): 0.3%")
    ax.set(xlabel="rescaled time c·t", ylabel="|L − L_twin| / L(0)  (fraction of L(0))", ylim=(1e-6, 1),
           xlim=(0, cs.min() * t[-1]),
           title="(c) one random init shared by every α: gap to the\n"
                 "linear conv twin (measured, not checked)")
    ax.legend(fontsize=8, loc="lower right")


def _identities(ax, A, result):
    labels = [f"pair {prefix}\nα={a:g}: max over\nGD steps |L − L_twin|"
              for prefix in ("digits", "teacher") for a in A["alphas"] if a < 1]
    labels.append("all random inits:\n|L(0) − L_twin(0)\n− ½⟨f_even²⟩|")
    values = [*A["digits_pair_gap"], *A["teacher_pair_gap"], result.metrics["initial_identity_error_max"]]
    x = np.arange(len(values))
    ax.semilogy(x, np.maximum(values, 1e-18), "o", ms=9)
    ax.axhline(float(A["round_off"]), color="tab:red", ls="--", lw=1, label="round-off budget 1e-10")
    ax.axhline(2.2e-16, color="0.5", ls=":", lw=1, label="machine ε")
    ax.set(xticks=x, xlim=(-0.5, len(x) - 0.5), ylim=(1e-18, 1e-6), ylabel="error (fraction of L(0))",
           title="(d) exact identities (checked): pair channels equal the twin\nat every GD step; "
                 "the gap at t = 0 is ½⟨f_even²⟩"
                 + mark(result, "pair_channels_equal_linear_twin", "initial_gap_is_half_even_energy"))
    ax.set_xticklabels(labels, fontsize=7)
    ax.legend(fontsize=8, loc="upper left")


def _sweep(ax, A, x, conv, dense, xlabel, title, logx):
    plot = ax.loglog if logx else ax.semilogy
    for G, color, label in ((conv, "tab:blue", "conv net (C channels, dense readout)"),
                            (dense, "tab:orange", "dense net, width C")):
        plot(x, G, "o", color=color, alpha=0.5, ms=5)  # one dot series per init
        plot(x, np.median(G, axis=1), "-", color=color, lw=2, label=label + " (median; dots: inits)")
    ax.axhline(float(A["paper_level"]), color="tab:red", ls="--", lw=1.2, label="paper (dense): 0.3%")
    low = min(float(np.min(conv)), float(np.min(dense)), float(A["paper_level"]))
    ax.set(xlabel=xlabel, ylabel="max over GD steps |L − L_twin| / L(0)", title=title, ylim=(low / 3, None))
    if not logx:
        ax.set_xscale("log", base=2)
        ax.set_xticks(x, [str(int(v)) for v in x])
    ax.legend(fontsize=8)


def figure(result: Result):
    A = result.arrays
    fig, ax = plt.subplots(2, 3, figsize=(16, 10))
    _collapse(ax[0, 0], A, "digits", "(a) symmetrised 8×8 digits, 2-D conv")
    _collapse(ax[0, 1], A, "teacher", "(b) Gaussian signals, teacher φ(κ⋆x), 1-D conv")
    _gaps(ax[0, 2], A, result)
    _identities(ax[1, 0], A, result)
    a, C, s = float(A["sweep_alpha"]), int(A["channels"]), float(A["scale"])
    _sweep(ax[1, 1], A, A["sweep_channels"], A["gaps_channels_conv"], A["gaps_channels_dense"],
           "channels C (dense: hidden width C)",
           f"(e) digits, α = {a:g}, init std {s:g}: gap vs channels (measured)", logx=False)
    _sweep(ax[1, 2], A, A["sweep_scales"], A["gaps_scales_conv"], A["gaps_scales_dense"],
           "init std σ", f"(f) digits, α = {a:g}, C = {C}: gap vs init scale (measured)", logx=True)
    claim_title(fig, result, fontsize=13)
    fig.tight_layout()
    return fig
