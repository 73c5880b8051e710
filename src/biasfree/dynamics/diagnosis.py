"""Why a run failed or misleads, said in its error: divergence (:class:`DivergenceError`, raised by
the trainer, :mod:`biasfree.dynamics.trainer`, at the first step whose loss left every bound),
loss spikes between records (:class:`LossSpikeWarning`) and flow stalls
(:class:`FlowStallError`, which tells a ReLU kink, :data:`KINK_REL`, from a stiff or slow
flow and names the fix that works for each).
"""

from __future__ import annotations

import warnings

import numpy as np

from .trajectory import Trajectory


class DivergenceError(RuntimeError):
    """Gradient descent left every bounded region: the step size is too large."""


class FlowStallError(RuntimeError):
    """Gradient flow could not reach ``t_max``: the adaptive solver spent its step budget
    (or its step size collapsed), typically chattering on a ReLU kink where the vector
    field is discontinuous. The message names the time, the unit and the data point."""


class LossSpikeWarning(RuntimeWarning):
    """Gradient descent's loss rose above ``SPIKE_FACTOR · L(0)`` between two records and
    came back: the recorded curve hides it (``Trajectory.loss_max`` holds the peak)."""


SPIKE_FACTOR = 10.0
"""A GD run warns (:class:`LossSpikeWarning`) when ``max_k L(θ_k) > SPIKE_FACTOR · L(θ_0)``."""

KINK_REL = 1e-3
"""A pre-activation ``z = w·h`` with ``|z| < KINK_REL · ||w|| ||h||`` sits on a ReLU kink."""


def _who(bad: np.ndarray) -> str:
    """How a message names the failing members of an ensemble (nothing for one run)."""
    return "" if bad.size == 1 else f" (ensemble members {np.nonzero(bad)[0].tolist()})"


def check_spike(traj: Trajectory, lrs) -> None:
    """Warn when the loss rose above ``SPIKE_FACTOR · L(0)`` between records."""
    peak = np.asarray(traj.loss_max).reshape(-1)
    L = np.asarray(traj.loss).reshape(peak.size, -1)
    spiked = peak > SPIKE_FACTOR * L[:, 0]
    if spiked.any():
        i = int(np.argmax(spiked))
        lr = float(np.broadcast_to(np.asarray(lrs), peak.shape)[i])
        warnings.warn(
            f"gradient descent{_who(spiked)}: the loss spiked to {peak[i]:.3g} = "
            f"{peak[i] / L[i, 0]:.3g}·L(0) between records (the recorded curve peaks at "
            f"{np.nanmax(L[i]):.3g}) with lr={lr:g}; "
            f"the step overshoots (more than {SPIKE_FACTOR:g}·L(0)). Lower lr (e.g. lr={lr / 4:g}) "
            "for a run that follows gradient flow; Trajectory.loss_max holds the peak.",
            LossSpikeWarning, stacklevel=6)  # the caller of train, past its precision wrapper


def nearest_kink(params, X, alpha):
    """``(rel, z, layer, unit, point)`` of the hidden pre-activation closest to its kink,
    relative to ``||w_k|| ||h_n||`` (a cosine), at the network ``params`` on inputs ``X``."""
    H = np.asarray(X, dtype=float)
    best = (np.inf, np.nan, -1, -1, -1)
    for li, layer in enumerate(params[:-1]):
        with np.errstate(all="ignore"):  # some BLAS builds flag spurious matmul warnings
            W = np.asarray(layer.matrix, dtype=float)
            b = None if layer.bias is None else np.asarray(layer.bias, dtype=float)
            Z = H @ W.T + (0.0 if b is None else b)
            Hn = np.sqrt(np.sum(H**2, axis=1, keepdims=True) + (0.0 if b is None else 1.0))
            Wn = np.sqrt(np.sum(W**2, axis=1) + (0.0 if b is None else b**2))
            rel = np.abs(Z) / np.maximum(Hn * Wn[None, :], 1e-300)
            n, k = np.unravel_index(np.argmin(rel), rel.shape)
            if rel[n, k] < best[0]:
                best = (float(rel[n, k]), float(Z[n, k]), li + 1, int(k), int(n))
            H = np.where(Z > 0, Z, alpha * Z)
    return best


def stall_error(cfg, ok: np.ndarray, stats: dict, stall, X, alpha: float) -> FlowStallError:
    """The :class:`FlowStallError` of a flow (``cfg`` its FlowConfig, ``ok`` which members
    reached ``t_max``) whose first failing member has solver ``stats`` and, re-solved from
    its last record, ``stall = (t, θ, pace, finished)`` (the time and parameters where it
    crawls, the time per accepted step there, whether the re-solve reached ``t_max``);
    ``X`` the training inputs, ``alpha`` that member's slope."""
    who = _who(~ok)
    t_rec, steps, rej = float(stats["t_reached"]), int(stats["steps"]), int(stats["rejected"])
    t_r, at, pace, finished = stall
    if finished:
        return FlowStallError(
            f"gradient flow{who} ran out of steps: at its pace max_steps={cfg.max_steps} solver "
            f"steps could not reach t_max = {cfg.t_max:g} (stopped after {steps}, {rej} rejected; "
            f"last record t = {t_rec:.6g}); the flow is smooth but slow or stiff there. Raise "
            "max_steps (restarted from that record it finished within the same budget), or try "
            "solver='kvaerno5'.")
    rel, z, layer, unit, point = (nearest_kink(at, X, alpha) if alpha < 1
                                  else (np.inf, np.nan, -1, -1, -1))
    head = (f"gradient flow{who} stalled at t = {t_r:.6g} of t_max = {cfg.t_max:g}: there it "
            f"advanced {pace:.2g} time units an accepted step, so t_max would take "
            f"~{(cfg.t_max - t_r) / max(pace, 1e-300):.2g} more steps; "
            + (f"stopped after {steps} of max_steps={cfg.max_steps} ({rej} rejected) instead of "
               "spending them all" if steps < cfg.max_steps else
               f"all max_steps={cfg.max_steps} solver steps spent ({rej} rejected)"))
    if rel < KINK_REL:
        loose = 1e-4 if cfg.rtol < 1e-4 else min(10 * cfg.rtol, 1e-2)
        return FlowStallError(
            f"{head}, on a ReLU kink: the pre-activation of layer-{layer} unit {unit} on data "
            f"point {point} is {z:.2g} ({rel:.1g} of its scale). With α = {alpha:g} the vector "
            f"field is discontinuous there and the flow slides along the kink, so no adaptive "
            f"solver (kvaerno5 and dopri8 included) can meet rtol={cfg.rtol:g} at useful step "
            f"sizes, and more max_steps only waste time. Loosen the tolerance to "
            f"FlowConfig(rtol={loose:g}, atol={loose / 100:g}) so the solver steps across it, use "
            f"gd with a small lr (same time axis t = lr·k, e.g. lr={min(1e-3, cfg.t_max / 1e3):g}), or "
            "use α = 1 or a pair init (init_pairs) where the field is smooth.")
    return FlowStallError(
        f"{head}; no pre-activation is near a kink (closest {rel:.2g} of its scale), so the "
        "flow is stiff or fast here. Raise max_steps, try solver='kvaerno5' (stiff "
        "problems), loosen rtol/atol, or shorten t_max.")
