"""Figure for ``optimisers``: (a) the pair-identity gap per optimiser beside its round-off
bound and its control, each bar labelled "holds" or "does not hold"; (b) the measured
random-init gap against init std; (c) random vs mirrored minibatches against batch size;
(d) stage-like learning under GD, Adam and Muon, ReLU net against its twin. Config values
come from ``result.config``."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from ..._figure import claim_title
from ...claims.checks import PAPER_LEVEL
from ...results import Result
from . import LABELS

FLOOR = 1e-18
"""Exact zeros are drawn at this level on the log axes."""
COLORS = {"sgd": "tab:blue", "momentum": "tab:cyan", "adam": "tab:orange", "lion": "tab:green",
          "muon": "tab:purple"}


def _identities(ax, result: Result):
    a = result.arrays
    names = [str(n) for n in a["identity_names"]]
    y = np.arange(len(names))[::-1]
    gap, ctrl, bound = (np.maximum(np.nan_to_num(a[k], nan=FLOOR), FLOOR)
                        for k in ("identity_gap", "control_gap", "identity_bound"))
    ax.barh(y + 0.2, gap, 0.4, color="tab:blue", label="pair net vs its twin (optimiser_twin)")
    ax.barh(y - 0.2, np.where(np.isnan(a["control_gap"]), 0, ctrl), 0.4, color="tab:red",
            label="control: twin under the net's own optimiser\n(or random batches for mirrored rows)")
    for yi, b in zip(y, bound, strict=True):
        ax.plot([b, b], [yi - 0.05, yi + 0.45], color="k", lw=2)
    ax.plot([], [], color="k", lw=2, label="round-off bound (2b, max over records)")
    for yi, n in zip(y, names, strict=True):
        check = result.checks.get(f"{n}_pair_identity")
        if check is not None:
            text, col = ("holds ✓", "tab:green") if check.passed else ("does not hold ✗", "tab:red")
        else:  # measured, not checked
            ok = float(a["identity_ratio"][names.index(n)]) <= 1
            text, col = ("within bound (measured)" if ok else "does not hold (measured)"), "0.3"
        ax.text(30, yi, text, va="center", fontsize=8, color=col, fontweight="bold")
    ax.set_xscale("log")
    ax.set_yticks(y, [LABELS[n] for n in names], fontsize=8)
    ax.set_xticks(10.0 ** np.arange(-18, 1, 3))
    ax.set(xlim=(FLOOR, 1e7), xlabel="max over steps of |L − L_twin| / L(0)  (fraction of L(0))",
           title=f"(a) pair init, α = {float(result.config['alpha']):g}, {result.config['steps']} steps, "
                 "every step recorded")
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.45, -0.13), ncol=3)


def _random_init(ax, result: Result):
    a, cfg = result.arrays, result.config
    scales, widths = np.asarray(cfg["sweep_scales"], float), list(cfg["sweep_widths"])
    shown = sorted({0, len(widths) - 1})  # the narrowest (dashed) and widest (solid): readable
    styles = {0: "--", len(widths) - 1: "-"}
    for i, n in enumerate(str(x) for x in a["sweep_names"]):
        G = a["sweep_gap"][i]  # (width, scale, init)
        for w in shown:
            ax.loglog(scales, G[w].mean(axis=-1), styles[w], marker="o", color=COLORS[n],
                      label=LABELS[n] if w == shown[-1] else None)
    for w in shown:
        ax.plot([], [], styles[w], color="0.3", label=f"width {widths[w]}")
    ax.axhline(PAPER_LEVEL, color="k", lw=0.8, ls="-.", label="paper's 0.3% (reference)")
    n_inits = int(cfg["sweep_inits"])
    ax.set(xlabel="init std σ (Gaussian, not paired)", ylabel="max |L − L_twin| / L(0)  (fraction of L(0))",
           title=f"(b) random small init: gap to the twin, measured\n(mean over {n_inits} init"
                 f"{'s' if n_inits > 1 else ''}; {cfg['sweep_steps']} steps; widths {widths}: metrics)")
    ax.legend(fontsize=7, ncol=2)


def _batches(ax, result: Result):
    a, cfg = result.arrays, result.config
    sizes = np.asarray(cfg["batch_sizes"], float)
    for i, n in enumerate(str(x) for x in a["batch_names"]):
        mir, rnd = a["batch_gap"][i]
        ax.loglog(sizes, np.maximum(rnd, FLOOR), "-o", color=COLORS[n], label=f"{LABELS[n]}, random batches")
        ax.loglog(sizes, np.maximum(mir, FLOOR), "--s", mfc="none", color=COLORS[n],
                  label=f"{LABELS[n]}, mirrored batches (x, −x)")
    ax.set(xlabel="batch size (points per step)", ylabel="max |L − L_twin| / L(0)  (fraction of L(0))",
           ylim=(FLOOR, 1), title=f"(c) pair init, minibatches: random vs mirrored, measured\n"
                                  f"(of {2 * int(cfg['n'])} points; {cfg['steps']} steps)")
    if len(sizes) == 1:
        ax.set_xlim(sizes[0] / 2, sizes[0] * 2)
    ax.legend(fontsize=7)


def _stages(ax, result: Result):
    a = result.arrays
    k = np.asarray(a["modes_k"], float)
    keep = k > 0
    for i, n in enumerate(str(x) for x in a["modes_names"]):
        L = a["modes_loss"][i]
        pr, pt = (int(v) for v in a["modes_plateaus"][i])
        ax.semilogx(k[keep], L[0][keep] / L[0][0], "-", color=COLORS[n], lw=2,
                    label=f"{LABELS[n]}: plateaus ReLU {pr} / twin {pt}")
        ax.semilogx(k[keep], L[1][keep] / L[1][0], "--", color="k", lw=0.9)
        th = a["modes_t_half"][i][0]
        ax.plot(th, np.interp(th, k, L[0] / L[0][0]), "v", color=COLORS[n], mec="k", ms=7)
    ax.plot([], [], "k--", lw=0.9, label="its linear twin (optimiser_twin)")
    ax.plot([], [], "v", color="0.6", mec="k", label="half time of each mode (ReLU)")
    s = ", ".join(f"{v:.2g}" for v in a["modes_s"])
    ax.set(xlabel="optimiser step k", ylabel="training loss L / L(0)", ylim=(0, 1.05),
           title=f"(d) stage-like learning from small random init (measured)\nteacher s = ({s}); "
                 "plateau:\n"
                 "mode i ≥ 0.9 s_i while mode i+1 ≤ 0.1 s_(i+1)")
    ax.legend(fontsize=7, loc="lower left")


def figure(result: Result):
    fig, axes = plt.subplots(2, 2, figsize=(14, 11))
    _identities(axes[0, 0], result)
    _random_init(axes[0, 1], result)
    _batches(axes[1, 0], result)
    _stages(axes[1, 1], result)
    claim_title(fig, result)
    fig.tight_layout()
    return fig
