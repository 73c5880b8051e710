"""Figure of the orthogonal-inputs experiment: losses, half-net strengths, odd and even
parts against their references, and unit alignment over time."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from ..._figure import action_end, claim_title
from ...results import Result


def _proj(F, target):
    """Fraction of a target learned: ``<f, target> / ||target||²`` per record."""
    return F @ target / float(target @ target)


def figure(result: Result):
    A = result.arrays
    t = A["t"]
    fig, ax = plt.subplots(2, 2, figsize=(13, 9))
    ax = ax.ravel()

    ax[0].semilogy(t, A["loss_full"], lw=2, label="full target, random init")
    ax[0].semilogy(t, A["loss_aligned"], "--", lw=1.5, label="full target, aligned init")
    ax[0].semilogy(t, A["loss_half_nets"], "k:", lw=1.2, label="two half-nets from t₁")
    ax[0].semilogy(t, A["loss_odd"], color="0.5", lw=1.5, label="odd target only, ReLU")
    ax[0].semilogy(t, A["loss_odd_twin"], color="0.5", ls=":", lw=1.5,
                   label="its linear twin at c·t")
    ax[0].set(xlabel="t (gradient-flow time, η k)", ylabel="training loss",
              ylim=(1e-12, 2 * float(A["loss_full"][0])), title="(a) loss")
    ax[0].legend(fontsize=7)

    s_pm = A["s_pm"]
    for h, (name, col) in enumerate((("+ half", "tab:red"), ("− half", "tab:blue"))):
        ax[1].plot(t, A["strength_random"][:, h], color=col, lw=2,
                   label=f"{name}, random init (rate 2s = {2 * s_pm[h]:.3g})")
        ax[1].plot(t, A["strength_pred"][:, h], "k:", lw=1.2)
        ax[1].plot(t, A["strength_aligned"][:, h], color=col, ls="--", lw=1)
    ax[1].plot([], [], "k:", label="exact half-net map from t₁")
    ax[1].set(xlabel="t", ylabel="σ²a± / s±", title="(b) half-net strengths\n"
              "(dashed: aligned init, exact)")
    ax[1].legend(fontsize=7)

    o, e = A["odd_target"], A["even_target"]
    ax[2].plot(t, _proj(A["odd_full"], o), "tab:green", lw=2, label="odd part, full target")
    ax[2].plot(t, _proj(A["odd_twin"], o), "tab:green", ls="--", lw=1.2,
               label=f"odd-target linear twin (rate {float(A['s_odd']):.3g})")
    ax[2].plot(t, _proj(A["odd_pred"], o), "k:", lw=1.2, label="half-nets from t₁")
    ax[2].plot(t, _proj(A["even_full"], e), "tab:purple", lw=2, label="even part, full target")
    ax[2].plot(t, _proj(A["even_pred"], e), "k:", lw=1.2)
    ax[2].set(xlabel="t", ylabel="<f_part, target part> / ||target part||²",
              title="(c) odd and even parts learned")
    ax[2].legend(fontsize=7)

    styles = (("full", "tab:red"), ("odd", "0.4"), ("mixed", "tab:blue"))
    for k, col in styles:
        q = A[f"sin_D_{k}"]
        ax[3].semilogy(t, q[:, 1], color=col, lw=2, label=f"sin∠(w_k, D_k), {k}")
        ax[3].fill_between(t, q[:, 0], q[:, 2], color=col, alpha=0.15)
        early = A[f"early_{k}"] > 0
        ax[3].semilogy(t, np.where(early, A[f"bound_{k}"][:, 1], np.nan), color=col, ls="--",
                       lw=1)
        end = np.nonzero(early)[0][-1]
        ax[3].axvline(t[end], color=col, lw=0.6, ls=":")
    for k, col in (("full", "tab:red"), ("odd", "0.4")):
        ax[3].semilogy(t, A[f"sin_beta_{k}"][:, 1], color=col, ls="-.", lw=1.2,
                       label=f"sin∠(w_k, β*), {k}")
    ax[3].set(xlabel="t", ylabel="sin angle (median, 10–90 % band)", ylim=(1e-4, 1.5),
              title="(d) unit alignment; dashed: derived bound\n(dotted: end of early phase)")
    ax[3].legend(fontsize=7)
    t_end = action_end(t, A["strength_random"].T, A["strength_aligned"].T, _proj(A["odd_full"], o),
                       _proj(A["even_full"], e))
    for a_ in ax:
        a_.set_xlim(0, t_end)
    claim_title(fig, result)
    fig.tight_layout()
    return fig
