"""Figure of the saddle-conjectures experiment: ReLU loss curves across widths and across spectra
(the aligned linear control dashed), the plateau counts against the number of distinct singular
values (ReLU, linear, control, and the linear theory's 1 + k), effective units over time, and the
deep-layer rule's spread per layer (units / directions used by the weight change)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from ..._figure import claim_title
from ...results import Result

KIND_COLOUR = {"relu": "tab:red", "linear": "tab:blue", "quadratic": "tab:purple"}


def _curves(ax, t, losses, labels, colours, control=None, title=""):
    keep = t > 0
    for L, lab, c in zip(losses, labels, colours, strict=True):
        ax.semilogx(t[keep], L[keep], color=c, lw=2, label=lab)
    if control is not None:
        ax.semilogx(t[keep], control[keep], color="k", ls="--", lw=1.2, label="aligned linear control")
    ax.set(xlabel="t = ηk (log)", ylabel="training loss", title=title)
    ax.legend(fontsize=8)


def figure(result: Result):
    A, m = result.arrays, result.metrics
    t, loss, units = A["t"], A["loss"], A["units"]  # loss (W, S, 2B + 1, T)
    widths, distinct = A["widths"], A["distinct"]
    B = (loss.shape[2] - 1) // 2
    W, S = len(widths), len(distinct)
    fig, axes = plt.subplots(2, 3, figsize=(17, 10), layout="constrained")
    shades = plt.cm.Reds(np.linspace(0.45, 0.95, max(W, S)))
    _curves(axes[0, 0], t, [loss[i, -1, 0] for i in range(W)], [f"ReLU, width {w}" for w in widths],
            shades[:W], loss[-1, -1, -1],
            f"ReLU across widths ({distinct[-1]} distinct singular values, init 0)")
    _curves(axes[0, 1], t, [loss[-1, j, 0] for j in range(S)], [f"ReLU, {k} distinct" for k in distinct],
            shades[:S], None, f"ReLU across spectra (width {widths[-1]}, init 0)")
    ax = axes[0, 2]
    counts = A["counts"]
    x = np.arange(S)
    for n_k, (kind, off) in enumerate((("relu", -0.2), ("linear", 0.0))):
        c = counts[..., n_k * B:(n_k + 1) * B]
        for i, w in enumerate(widths):
            v = c[i]
            mean = np.array([np.nanmean(r) if np.isfinite(r).any() else np.nan for r in v])
            lo = np.array([np.nanmin(r) if np.isfinite(r).any() else np.nan for r in v])
            hi = np.array([np.nanmax(r) if np.isfinite(r).any() else np.nan for r in v])
            ax.errorbar(x + off + 0.05 * i, mean, yerr=[mean - lo, hi - mean], fmt="o", capsize=3,
                        color=KIND_COLOUR[kind], alpha=0.4 + 0.6 * (i + 1) / W,
                        label=f"{kind}, width {w}")
    exact = A["control_exact"]
    for i in range(W):
        ax.plot(x + 0.2 + 0.05 * i, counts[i, :, -1], "ks", ms=8, mfc="none" if i else "k",
                label="aligned linear control (trained; = its exact GD curve)" if i == 0 else None)
        ax.plot(x + 0.2 + 0.05 * i, exact[i], "y.", ms=6, label="exact GD curve" if i == 0 else None)
    ax.plot(x, 1 + distinct, "k_", ms=30, mew=2, label="linear theory: 1 + k")
    ax.set(xticks=x, xticklabels=[str(k) for k in distinct], xlabel="distinct singular values k",
           ylabel="plateaus found (mean, min–max over inits)",
           title=f"Plateau count: ReLU = 1 + k in {m['relu_matches_spectrum']:.0%} of nets\n(over the "
                 f"{m['resolvable_cells']:.0%} of cells whose exact staircase shows 1 + k)")
    finite = counts[np.isfinite(counts)]
    ax.set_ylim(min(finite.min(), 2) - 0.5, max(finite.max(), 1 + distinct[-1]) + 2.0)  # room for the legend
    ax.legend(fontsize=7, ncol=2, loc="upper left")
    ax = axes[1, 0]
    keep = t > 0
    for n_k, kind in enumerate(("relu", "linear")):
        for b in range(B):
            ax.step(t[keep], units[-1, -1, n_k * B + b][keep], where="post", color=KIND_COLOUR[kind],
                    alpha=0.6, label=f"{kind} ({'kinks' if kind == 'relu' else 'rank'})" if b == 0 else None)
    ax.step(t[keep], units[-1, -1, -1][keep], where="post", color="k", ls="--", label="control (rank)")
    ax.set(xscale="log", xlabel="t = ηk (log)", ylabel="effective units",
           title=f"Effective units (width {widths[-1]}, {distinct[-1]} distinct)")
    ax.legend(fontsize=8)
    ax = axes[1, 1]
    names = sorted({k.rsplit("_layer", 1)[0] for k in A if k.startswith("deep_") and k.endswith("_spread")})
    ticks = []
    for name in names:
        kind = name.split("_")[1]
        layers = sorted(k for k in A if k.startswith(name + "_layer") and k.endswith("_spread"))
        for lay in layers:
            v = A[lay]
            xi = len(ticks)
            ax.plot(np.full(v.size, xi), v, "o", color=KIND_COLOUR[kind], alpha=0.7)
            ax.plot([xi - 0.3, xi + 0.3], [np.median(v)] * 2, color=KIND_COLOUR[kind], lw=2)
            ticks.append(f"{kind[:4]} L{name.split('_L')[1]} l{lay.split('_layer')[1].split('_')[0]}")
    ax.axhline(1, color="0.4", ls=":", lw=1)
    ax.set_xticks(range(len(ticks)), ticks, rotation=70, fontsize=8)
    ax.set(ylabel="units used / directions used (1: sparse)",
           title="Deep-layer rule: quadratic layers ≈ 1 (sparse), linear-in-u layers ≫ 1 (low rank)?")
    ax = axes[1, 2]
    ax.axis("off")
    lines = ["Measured, not proved (this seed; spread over inits):"]
    for kind in ("relu", "linear"):
        lines.append(f"{kind}: matches 1 + k in {m[f'{kind}_matches_spectrum']:.0%}, unresolved "
                     f"{m[f'{kind}_unresolved']:.0%}")
        lines.append("   follows " + ", ".join(f"{f} {m[f'{kind}_follows_{f}']:.0%}"
                                                for f in ("spectrum", "width", "both", "neither")))
    lines.append(f"control: {m['control_mismatches']} cells off its exact GD curve (derived check)")
    lines.append(f"resolvable cells (exact curve shows 1 + k): {m['resolvable_cells']:.0%}")
    ax.text(0, 1, "\n".join(lines), va="top", fontsize=10, family="monospace", wrap=True)
    claim_title(fig, result)
    return fig
