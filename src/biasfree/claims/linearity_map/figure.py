"""The linearity map: phase diagrams of the gap to the linear twin over init scale ×
width, one row per α, bias-free and biased side by side, and the fitted width scaling."""

from __future__ import annotations

import numpy as np
from matplotlib.colors import LogNorm

from ..._figure import claim_title, plt


def log_edges(centres):
    """Cell edges on a log axis around ``centres``."""
    lc = np.log10(np.asarray(centres, float))
    mid = (lc[1:] + lc[:-1]) / 2
    return 10 ** np.r_[lc[0] - (mid[0] - lc[0]), mid, lc[-1] + (lc[-1] - mid[-1])]


def scale_width_axes(ax, scales, widths) -> None:
    """Log-log axes of init std (x) × width (y) whose limits are the cells' outer edges."""
    ax.set(xscale="log", yscale="log", xlim=log_edges(scales)[[0, -1]], ylim=log_edges(widths)[[0, -1]])
    ax.set_yticks(widths, [str(int(w)) for w in widths])
    ax.minorticks_off()


def _map(ax, gap, scales, widths, level, s, norm, title):
    """One phase diagram: median over inits (colour), the ``level`` contour of the
    median (solid) and of the 25% / 75% quantiles over inits (dashed: the seed spread),
    the count of inits below ``level`` in each cell, and the rich/lazy line σ²m = s."""
    med = np.median(gap, axis=-1)
    mesh = ax.pcolormesh(log_edges(scales), log_edges(widths), np.clip(med, norm.vmin, norm.vmax),
                         norm=norm, cmap="magma_r", shading="flat")
    S, W = np.meshgrid(scales, widths)
    for q, style in ((50, "-"), (25, "--"), (75, "--")):
        field = np.percentile(gap, q, axis=-1)
        if field.min() < level < field.max():
            ax.contour(S, W, field, levels=[level], colors="tab:cyan", linestyles=style,
                       linewidths=2.2 if q == 50 else 1.2)
    n = gap.shape[-1]
    for i, w in enumerate(widths):
        for j, sc in enumerate(scales):
            k = int(np.sum(gap[i, j] <= level))
            dark = med[i, j] > np.sqrt(norm.vmin * norm.vmax)
            ax.text(sc, w, f"{k}/{n}", ha="center", va="center", fontsize=7,
                    color="w" if dark else "k")
    sl = np.geomspace(log_edges(scales)[0], log_edges(scales)[-1], 50)
    ax.plot(sl, s / sl**2, ":", color="tab:green", lw=1.5)
    scale_width_axes(ax, scales, widths)
    ax.set_xticks(scales, [f"{x:g}" for x in scales])
    ax.set(xlabel="init std σ (per weight)", ylabel="width m (hidden units)")
    ax.set_title(title, fontsize=9)
    return mesh


def figure(result):
    a = result.arrays
    scales, widths, alphas = a["scales"], a["widths"], a["alphas"]
    level, s = float(a["paper_level"]), float(a["s"])
    biased = "gap_biased" in a
    gaps = [a["gap"]] + ([a["gap_biased"]] if biased else [])
    lo = max(1e-6, min(float(np.min(g[g > 0])) for g in gaps))
    norm = LogNorm(vmin=lo, vmax=max(1.0, max(float(np.max(g)) for g in gaps)))
    ncol = 3 if biased else 2
    fig, axes = plt.subplots(len(alphas), ncol, figsize=(5.0 * ncol, 4.1 * len(alphas) + 1.0),
                             squeeze=False, constrained_layout=True)
    m = result.metrics
    for i, al in enumerate(alphas):
        tag = f"alpha_{al:g}"
        mesh = _map(axes[i, 0], a["gap"][i], scales, widths, level, s, norm,
                    f"bias-free, α = {al:g}: median gap ≤ 0.3% in "
                    f"{m[f'cells_below_paper_level_{tag}']:.0%} of cells")
        if biased:
            _map(axes[i, 1], a["gap_biased"][i], scales, widths, level, s, norm,
                 f"biased (same weights + biases of std σ), α = {al:g}: ≤ 0.3% in "
                 f"{m[f'biased_cells_below_paper_level_{tag}']:.0%} of cells")
        ax = axes[i, -1]
        for g, name, colour in zip(gaps, ("bias-free", "biased"), ("tab:blue", "tab:red"), strict=False):
            rich = g[i][:, 0]  # smallest σ: (W, U)
            ax.plot(widths, rich, "o", color=colour, ms=2.5, alpha=0.35)  # one dot series per init
            ax.plot(widths, np.median(rich, axis=1), "-", color=colour, lw=2,
                    label=f"{name}: median over {rich.shape[1]} inits")
        p = m[f"width_exponent_rich_{tag}"]
        med0 = np.median(a["gap"][i][:, 0], axis=1)
        fit = np.exp(np.mean(np.log(med0) - p * np.log(widths))) * widths.astype(float) ** p
        ax.plot(widths, fit, "k--", lw=1, label=f"fit ∝ m^{p:.2f}")
        ax.axhline(level, color="tab:cyan", lw=1.5, label="paper: 0.3% of L(0)")
        ax.set(xscale="log", yscale="log", xlabel="width m", ylabel="max gap to linear twin / L(0)")
        ax.set_xticks(widths, [str(int(w)) for w in widths])
        ax.minorticks_off()
        ax.set_title(f"rich limit (σ = {scales[0]:g}), α = {al:g}: gap vs width", fontsize=9)
        ax.legend(fontsize=7, loc="best")
    cbar = fig.colorbar(mesh, ax=axes[:, : ncol - 1], shrink=0.85)
    cbar.set_label("median over inits of max_t |L − L_twin| / L(0)")
    fig.supxlabel("cyan: 0.3%-of-L(0) contour of the median over inits (solid) and of its 25% and 75% "
                  "quantiles (dashed: the seed spread); k/n: inits below 0.3% in the cell; green dotted: "
                  "σ²m = s (rich below, lazy above)", fontsize=8)
    where = "; ".join(
        f"α = {al:g}: from width {m[f'min_width_below_paper_level_alpha_{al:g}']:.0f}"
        if np.isfinite(m[f"min_width_below_paper_level_alpha_{al:g}"]) else f"α = {al:g}: at no width"
        for al in alphas)
    slopes = ", ".join(f"{m[f'width_exponent_rich_alpha_{al:g}']:.2f}" for al in alphas)
    never = biased and all(m[f"biased_cells_below_paper_level_alpha_{al:g}"] == 0 for al in alphas)
    claim_title(fig, result, f"At small init the median gap is below the paper's 0.3% of L(0) {where}; "
                f"it falls as width^({slopes}) and grows into the lazy regime"
                + ("; a biased net is never within 0.3%" if never else ""), fontsize=10)
    return fig
