"""Figure of the linear-attention experiment: (a) merged attention's single drop beside its twin
and the sigmoid, (b) the net–twin loss gap per step, (c) the separate model's staircase beside
its scalar equations and the PCR plateaus."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from ..._figure import claim_title
from ...results import Result


def figure(result: Result):
    A = result.arrays
    fig, ax = plt.subplots(1, 3, figsize=(16, 4.8), layout="constrained")
    t = A["m_t"]
    ax[0].plot(t, A["m_loss"], color="tab:blue", lw=3, label="merged attention")
    ax[0].plot(t, A["m_twin"], color="k", ls="--", lw=1.5, label="its twin on z")
    ax[0].plot(t, A["m_theory"], color="tab:orange", ls=":", lw=2, label="sigmoid (§10.3)")
    for L, name in zip(A["m_fixed"], ("L₀", "L*"), strict=True):
        ax[0].axhline(L, color="0.6", lw=0.8, ls="--")
        ax[0].text(t[-1], L, f" {name}", va="bottom", ha="right", fontsize=10, color="0.4")
    ax[0].set(xlabel="t = ηk", ylabel="training loss", title="(a) merged: one drop")
    ax[0].legend(fontsize=10)
    floor = np.finfo(float).eps / 10
    for key, col, label in (("m_rel_gd", "tab:blue", "GD"),
                            ("m_rel_adam", "tab:green", "Adam, off-twin masked"),
                            ("m_rel_adam_plain", "tab:red", "Adam, plain")):
        ax[1].semilogy(np.maximum(A[key], floor), color=col, lw=1.2, label=label)
    for key, col in (("m_bound_gd", "tab:blue"), ("m_bound_adam", "tab:green")):
        ax[1].semilogy(A[key], color=col, ls="--", lw=1)
    ax[1].plot([], [], color="0.4", ls="--", lw=1, label="round-off bounds (measured response)")
    ax[1].set(xlabel="step k", ylabel="|L_att − L_twin| / L_twin", title="(b) attention vs twin, every step")
    ax[1].legend(fontsize=10)
    ts = A["s_t"]
    ax[2].semilogx(ts[1:], A["s_loss"][1:], color="tab:purple", lw=3, label="separate, rank-one heads")
    tt = A["s_theory_t"]
    ax[2].semilogx(tt[1:], A["s_theory"][1:], color="tab:orange", ls=":", lw=2,
                   label="scalar equations (§10.4)")
    for k, L in enumerate(A["s_plateaus"]):
        ax[2].axhline(L, color="0.6", lw=0.8, ls="--")
        ax[2].text(ts[1], L, f"PCR, top {k}", va="bottom", fontsize=9, color="0.4")
    ax[2].set(xlabel="t = ηk", ylabel="training loss", title="(c) separate: one drop per component")
    ax[2].legend(fontsize=10, loc="upper right")
    claim_title(fig, result)
    return fig
