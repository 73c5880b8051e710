"""Helpers shared by several experiments: leaky nets run beside their linear twins,
the gaps between them, crossing times, and the two tolerances every experiment uses.
(Not an experiment: the registry skips modules whose names start with ``_``.)"""

from __future__ import annotations

import jax
import numpy as np
from scipy.interpolate import CubicSpline
from scipy.optimize import brentq

from ..data import Dataset
from ..ensemble import Runs
from ..nets import slope_factor
from ..train import GDConfig, gd_ensemble
from .base import Check, at_most

ROUND_OFF = 1e-10
"""Round-off budget for an exact identity, relative: ε = 2.2e-16 per operation, grown
by at most the step count (~10³–10⁴) and a factor ~10 of conditioning: ≤ 1e-10."""

PAPER_LEVEL = 3e-3
"""The paper's error level for small random init ("errors below 0.3%"): the resolution
at which it calls a leaky curve equal to the linear one."""


def stack_params(*params):
    """Concatenate batched parameter pytrees along the leading (ensemble) axis (NumPy:
    no per-op compilation)."""
    return jax.tree_util.tree_map(lambda *a: np.concatenate([np.asarray(x) for x in a]),
                                  *params)


def batch_scaled(unit, factors):
    """``unit`` (one net) times each of ``factors`` (B,): a batched pytree (NumPy)."""
    f = np.asarray(factors, dtype=float)
    return jax.tree_util.tree_map(lambda a: f.reshape((-1,) + (1,) * np.ndim(a)) * np.asarray(a),
                                  unit)


def run_with_twins(params, data: Dataset, cfg: GDConfig, alpha, *, weight_decay=0.0):
    """GD of B leaky nets and of their linear twins, in one compiled ensemble call.

    ``params`` B nets (leading axis), slope ``alpha`` (scalar or (B,)), step
    ``cfg.lr`` = η, decay ``weight_decay`` = λ (scalar or (B,)). Twin b starts at
    ``√c_b · params_b`` with α = 1, step ``η c_b`` and decay ``λ_b / c_b``, for the same
    number of steps, so its record j is at twin time ``c t_j`` (THEORY.md §2.4, §2.7).
    Returns ``(leaky, twin)`` trajectories, each with leading axis B.
    """
    B = jax.tree_util.tree_leaves(params)[0].shape[0]
    a = np.broadcast_to(np.asarray(alpha, dtype=float), (B,))
    lam = np.broadcast_to(np.asarray(weight_decay, dtype=float), (B,))
    c = slope_factor(a)
    root_c = np.sqrt(c)
    twins = jax.tree_util.tree_map(
        lambda x: root_c.reshape((-1,) + (1,) * (np.ndim(x) - 1)) * np.asarray(x), params)
    tr = gd_ensemble(stack_params(params, twins), data, cfg, alpha=np.r_[a, np.ones(B)],
                     lr=cfg.lr * np.r_[np.ones(B), c], weight_decay=np.r_[lam, lam / c])
    return (jax.tree_util.tree_map(lambda x: x[:B], tr),
            jax.tree_util.tree_map(lambda x: x[B:], tr))


def twin_gap(leaky, twin) -> np.ndarray:
    """``D = max_t |L_leaky(t) - L_lin(c t)| / L_leaky(0)`` per ensemble member (B,)."""
    L, Ll = np.asarray(leaky.loss), np.asarray(twin.loss)
    return np.max(np.abs(L - Ll), axis=-1) / L[..., 0]


def loglog_slope(x, y) -> float:
    """Least-squares slope of ``log y`` against ``log x``: the fitted power-law exponent."""
    return float(np.polyfit(np.log(np.asarray(x, float)), np.log(np.asarray(y, float)), 1)[0])


def crossing_time(t, a, level):
    """First time ``a(t)`` reaches ``level``: root of a cubic spline through the
    records (interpolation error O(Δt⁴)), bracketed by the first record above it."""
    t, a = np.asarray(t), np.asarray(a)
    i = int(np.argmax(a >= level))
    if a[i] < level or i == 0:
        return float("nan")
    spline = CubicSpline(t, a - level)
    return float(brentq(spline, t[i - 1], t[i], xtol=1e-14))


def twin_identity(runs: Runs, names, what: str, *, test: bool = False) -> Check:
    """The one check that exact-twin members (antisymmetric-pair or rank-one zero-even
    inits on symmetric data) equal their linear twins (§2.3–2.5): the largest
    :meth:`~biasfree.ensemble.Runs.twin_gap` over ``names`` against :data:`ROUND_OFF`.
    ``what`` names the members in the claim (e.g. "pair-init ReLU nets with weight decay");
    ``test`` also takes the held-out loss's gap (same parameters, so the same identity)."""
    names = list(names)
    gap = max(runs.twin_gap(n) for n in names)
    if test:
        gap = max(gap, max(runs.twin_gap(n, test=True) for n in names))
    losses = ", training and held-out" if test else ""
    return at_most(gap, ROUND_OFF,
                   f"{what} follow their linear twins (√c·init, step η c, decay λ/c) to round-off "
                   f"(max over {len(names)} members and every record of |L - L_twin| / L(0){losses}; "
                   "§2.3–2.5).",
                   unit="fraction of L(0)")
