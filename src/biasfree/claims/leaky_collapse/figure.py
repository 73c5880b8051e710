"""Figure of the headline: the paper's curves from one shared init with their
predictions, the rescaled-time view, the gap against the paper's 0.3%, the log
correction against init scale, and the exact identities that prove the mechanism."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from ..._figure import action_end, claim_title, mark
from ...core.twin import slope_factor
from ...results import Result
from ...theory import raw_init_half_time_ratio


def _curves(ax, A, result):
    alphas, t, lr = A["alphas"], A["t"], result.config["lr"]
    cs = slope_factor(alphas)
    L0 = A["loss"][:, :1]
    colors = plt.cm.viridis(np.linspace(0, 0.9, len(alphas)))
    gaps = np.abs(A["loss"] - A["loss_pred"]) / L0
    for i, a in enumerate(alphas):
        ax[0].plot(t / lr, A["loss"][i], color=colors[i], lw=2, label=f"α = {a:g}")
        ax[0].plot(t / lr, A["loss_pred"][i], "--", color="k", lw=0.8)
        ax[1].plot(cs[i] * t, A["loss"][i], color=colors[i], lw=2, label=f"α = {a:g}")
        if a < 1:
            ax[2].semilogy(cs[i] * t, gaps[i] + 1e-18, color=colors[i], lw=1.5, label=f"α = {a:g}")
    ax[0].plot([], [], "k--", lw=0.8, label="linear-twin prediction")
    k_half = float(A["t_half"][-1] / lr)
    ax[0].axvline(k_half, color="0.6", lw=0.8, ls=":")
    # below and left of the linear net's half-loss point no curve passes (every α is still above
    # half its loss before the linear net, the fastest, gets there): the note sits there
    ax[0].annotate(f"linear net (α = 1):\nhalf loss at\nstep {k_half:.0f}",
                   xy=(k_half, 0.5 * (A["loss"].max() + A["loss"].min())), xytext=(-10, -30),
                   textcoords="offset points", ha="right", va="top", fontsize=8,
                   arrowprops={"arrowstyle": "->", "color": "0.4", "lw": 0.8})
    ax[0].set(xlabel="GD step k", ylabel="training loss ½·MSE", xlim=(0, t[-1] / lr),
              title="(a) one small random init shared by every α")
    # below the axes: inside, every corner but the note's holds a plateau, a drop or the floor
    ax[0].legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=4, frameon=False,
                 columnspacing=1.2)
    i0 = int(np.argmin(alphas))
    shift = np.log(1 / cs[i0]) / (2 * float(A["s"]))
    ax[1].set(xlabel="rescaled time (1+α) t / 2   (t = η k)", ylabel="training loss ½·MSE",
              xlim=(0, cs.min() * t[-1]),
              title="(b) rescaled time: the same curve, up to a log shift")
    ax[1].text(0.03, 0.3, f"α = {alphas[i0]:g} starts from the twin's c·a0:\nlater by ln(1/c)/(2s) = "
               f"{shift:.2f}\nin rescaled time, at any init scale", transform=ax[1].transAxes,
               ha="left", fontsize=8)
    ax[1].legend(fontsize=8)
    ax[2].axhline(3e-3, color="tab:red", ls="--", lw=1.2, label="paper: 0.3%")
    ax[2].set(xlabel="rescaled time (1+α) t / 2", ylabel="|L - L_pred| / L(0)",
              ylim=(1e-6, 3e-2), xlim=(0, cs.min() * t[-1]),
              title=f"(c) gap to the prediction: max {np.max(gaps[alphas < 1]):.2%} of L(0)"
                    + mark(result, "prediction_gap_max"))
    ax[2].legend(fontsize=8, loc="upper left", ncol=2)


def _log_correction(ax, A, result):
    scales, meas, pred, tol = (A[f"sweep_{k}"] for k in ("scales", "measured", "predicted", "tol"))
    a_unit = float(A["sweep_a0"][0]) / scales[0] ** 2
    s = float(A["s"])
    grid = np.logspace(np.log10(scales.min()) - 0.5, np.log10(scales.max()) + 0.3, 200)
    grid = grid[a_unit * grid**2 < s]  # the formula's range: a mode still to be learned
    ax.semilogx(grid, raw_init_half_time_ratio(s, a_unit * grid**2, float(A["sweep_alpha"])), "k-", lw=1,
                label="ln-ratio of half-loss times\nfrom c·a0 and a0 (§2.4)")
    ax.errorbar(scales, meas, yerr=tol, fmt="o", color="tab:blue", capsize=3,
                label="measured (derived tolerance)")
    i0 = int(np.argmin(A["alphas"]))
    ax.plot([result.config["random_scale"]], [A["ratios"][i0]], "*", color="tab:orange", ms=12,
            label="panels (a)–(c)")
    ax.axhline(1.0, color="0.5", lw=0.8, ls=":")
    ax.set(xlabel="init std σ (same raw init for α and α = 1)",
           ylabel=f"c·t½(α={A['sweep_alpha']:g}) / t½(1)",
           title="(d) log correction: → 1 only as 1/ln(1/σ)"
                 + mark(result, "init_scale_shift_matches_log_correction"))
    ax.legend(fontsize=8, loc="upper left")


def _identities(ax, A, result):
    alphas = A["alphas"]
    x = np.arange(len(alphas))
    for off, key, label, m in ((-0.2, "proof_pair_gap", "pair init vs its linear net", "o"),
                               (0.0, "proof_rank_one_gap", "rank-one init vs its twin", "s"),
                               (0.2, "proof_map_gap", "GD vs exact discrete map", "^")):
        ax.semilogy(x + off, np.maximum(A[key], 1e-18), m, ms=7, label=label)
    ax.axhline(1e-10, color="tab:red", ls="--", lw=1, label="round-off budget 1e-10")
    ax.axhline(2.2e-16, color="0.5", ls=":", lw=1, label="machine ε")
    ax.set(xticks=x, xticklabels=[f"{a:g}" for a in alphas], xlabel="α", ylim=(1e-18, 1e-6),
           ylabel="max gap (fraction of L(0); of s for the map)",
           title="(e) exact identities: equal to round-off" + mark(
               result, "pair_init_equals_linear_net", "rank_one_init_equals_linear_net",
               "gd_matches_exact_discrete_map"))
    ax.legend(fontsize=8, loc="upper left")


def _step_error(ax, A, result):
    alphas, t, t_fl = A["alphas"], A["proof_t"], A["proof_t_flow"]
    cs = slope_factor(alphas)
    L0 = float(A["proof_closed"][0, 0])
    colors = plt.cm.viridis(np.linspace(0, 0.9, len(alphas)))
    for i in range(len(alphas)):
        ax.semilogy(cs[i] * t, np.abs(A["proof_loss_gd"][i] - A["proof_closed"][i]) / L0 + 1e-18,
                    color=colors[i], lw=1.5)
        ax.semilogy(cs[i] * t_fl, np.abs(A["proof_loss_flow"][i] - A["proof_closed_flow"][i]) / L0
                    + 1e-18, ":", color=colors[i], lw=1.2)
    ax.plot([], [], "k-", label=f"GD (η = {result.config['identity_lr']:g}) vs the flow's closed form: "
                                "step-size error O(η c s), not theory error")
    ax.plot([], [], "k:", label="gradient flow (diffrax) vs the closed form: solver tolerance")
    ax.set(xlabel="rescaled time (1+α) t / 2", ylabel="|L - L_closed form| / L(0)",
           ylim=(1e-14, 1), xlim=(0, action_end(cs.min() * t, A["proof_closed"], frac=1e-4)),
           title="(f) rank-one init: GD vs gradient flow" + mark(result, "flow_matches_closed_form"))
    # below the axes: the curves span every height the panel shows, the dotted ones low down
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.13), frameon=False)


def figure(result: Result):
    A = result.arrays
    fig, ax = plt.subplots(2, 3, figsize=(16, 9.5))
    _curves(ax[0], A, result)
    _log_correction(ax[1, 0], A, result)
    _identities(ax[1, 1], A, result)
    _step_error(ax[1, 2], A, result)
    claim_title(fig, result, fontsize=13)
    fig.tight_layout()
    return fig
