"""Figure of the saddle-to-saddle experiment: one panel per two-layer architecture, the loss
staircase on log time with the predicted plateau levels (dashed lines) and drop times (dotted
lines, their tolerance shaded, the measured times as dots), and the effective units against
time on a second axis (steps, right); on the separate-attention panel, ``analyse``'s time to leave
each intermediate plateau (dash-dot, from the record marked by a square; shaded: the window of its
half drop, docs/theory.md §11.7.13). Each panel's title says its mechanism and its verdict."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from ..._figure import claim_title
from ...results import Result
from .run import KEYS, PANELS

MECHANISM = {"linear": "data-induced", "relu": "data-induced",
             "attention": "data-induced at equal head inits", "conv_linear": "data-induced",
             "conv_relu": "data-induced", "quadratic": "init-induced"}


def figure(result: Result):
    A, checks = result.arrays, result.checks
    fig, axes = plt.subplots(2, 3, figsize=(16, 9), layout="constrained")
    for ax, key, title in zip(axes.ravel(), KEYS, PANELS, strict=True):
        t, L = A[f"{key}_t"], A[f"{key}_loss"]
        keep = t > 0
        ax.semilogx(t[keep], L[keep], color="tab:blue", lw=2.5, label="training loss")
        levels = A[f"{key}_levels"]
        span = max(float(np.ptp(np.r_[L[keep], levels])), 1e-300)
        last = {"left": -np.inf, "right": -np.inf}  # the label sides' highest level so far, from below
        for k in np.argsort(levels):
            lv = levels[k]
            ax.axhline(lv, color="0.45", ls="--", lw=0.9)
            # a label within 8% of the axis from the one below it on its side moves to the other side
            side = "left" if lv - last["left"] >= 0.08 * span else "right"
            last[side] = lv
            x, ha = (t[keep][0], "left") if side == "left" else (t[keep][-1], "right")
            ax.text(x, lv, f" best {k}-unit loss ", va="bottom", ha=ha, fontsize=8.5, color="0.35", zorder=6,
                    bbox={"fc": "white", "ec": "none", "alpha": 0.75, "pad": 0.3})
        for tp, tol, tm in zip(A[f"{key}_times"], A[f"{key}_time_tol"], A[f"{key}_times_measured"],
                               strict=True):
            ax.axvspan(max(tp - tol, t[keep][0]), tp + tol, color="tab:orange", alpha=0.15, lw=0)
            ax.axvline(tp, color="tab:orange", ls=":", lw=1.8)
            if np.isfinite(tm):
                ax.plot(tm, np.interp(tm, t, L), "o", color="tab:red", ms=6, zorder=5)
        if f"{key}_leave_times" in A:  # analyse's time to leave from a plateau (separate attention)
            for now, tp, lo, hi, tm in zip(*(A[f"{key}_leave_{n}"] for n in ("now", "times", "lo", "hi",
                                                                              "measured")), strict=True):
                ax.axvspan(lo, hi, color="tab:purple", alpha=0.12, lw=0)
                ax.axvline(tp, color="tab:purple", ls="-.", lw=1.6)
                ax.plot(now, np.interp(now, t, L), "s", color="tab:purple", ms=6, zorder=5)
                ax.plot(tm, np.interp(tm, t, L), "D", color="tab:purple", mfc="none", ms=7, zorder=5)
        ax.set(xlabel="t = ηk (log)", ylabel="training loss")
        mine = [c for n, c in checks.items() if n.startswith(f"{key}_")]  # no key prefixes another
        ok = sum(c.passed for c in mine)
        verdict = f"{ok}/{len(mine)} checks" + (" ✓" if ok == len(mine) else " ✗")
        ax.set_title(f"{title} — {MECHANISM[key]}: {verdict}", fontsize=11,
                     color="k" if ok == len(mine) else "tab:red")
        twin = ax.twinx()
        units = A[f"{key}_units"]
        twin.step(t[keep], units[keep], where="post", color="tab:green", lw=1.5, alpha=0.8)
        twin.set_ylim(-0.2, max(units.max(), len(A[f"{key}_times"])) + 0.6)
        twin.set_yticks(range(int(max(units.max(), len(A[f"{key}_times"]))) + 1))
        twin.set_ylabel("effective units", color="tab:green")
        twin.tick_params(axis="y", colors="tab:green")
    handles = [plt.Line2D([], [], color="tab:blue", lw=2.5), plt.Line2D([], [], color="0.45", ls="--"),
               plt.Line2D([], [], color="tab:orange", ls=":", lw=1.8),
               plt.Line2D([], [], color="tab:red", marker="o", ls=""), plt.Line2D([], [], color="tab:green"),
               plt.Line2D([], [], color="tab:purple", ls="-.", marker="s", lw=1.6)]
    fig.legend(handles, ["training loss", "predicted plateau level (best k-unit loss)",
                         "predicted drop time (shaded: its tolerance)", "measured drop time",
                         "effective units above the init noise (right axis; a growing unit counts "
                         "before its drop)",
                         "analyse's time to leave from the plateau record (■): cubic blow-up t*, shaded: the "
                         "half drop's window, ◇ the measured half drop"],
               loc="outside lower center", ncol=3, fontsize=10)
    embed = checks.get("embed_linear_zero_gradient")
    detail = ""
    if embed is not None:
        m = result.metrics
        detail = ("Embedded fixed points (Theorem 1): function gap "
                  f"{m['embed_linear_zero_function_gap']:.1e} "
                  f"(bound {m['embed_linear_zero_function_tol']:.1e}), "
                  f"gradient {m['embed_linear_zero_grad']:.1e} "
                  f"(bound {m['embed_linear_zero_grad_tol']:.1e}); a wrong embedding's gradient "
                  f"{m['embed_wrong_grad']:.1e} fails its bound.")
    claim_title(fig, result, detail)
    return fig
