"""Helpers and tolerances shared by several experiments. (Leaky nets beside their linear
twins are :func:`biasfree.dynamics.trainer.train` with ``Member(..., twin=True)``.)"""

from __future__ import annotations

import numpy as np
from scipy.interpolate import CubicSpline
from scipy.optimize import brentq

from ..core.layers import Layer
from ..dynamics.ensemble import Runs
from ..results import Check, at_most

ROUND_OFF = 1e-10
"""Round-off budget for an exact identity, relative: ε = 2.2e-16 per operation, grown
by at most the step count (~10³–10⁴) and a factor ~10 of conditioning: ≤ 1e-10."""

FRACTION = "fraction of L(0)"
"""The unit of a loss gap measured against the initial loss L(0)."""

PAPER_LEVEL = 3e-3
"""The paper's error level for small random init ("errors below 0.3%"): the resolution
at which it calls a leaky curve equal to the linear one."""


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


def numpy_gaussian(rng, widths, scale, bias=False):
    """N(0, scale²) weights (and biases) of a net of layer ``widths``: :func:`biasfree.init_gaussian`'s
    law, drawn by NumPy's ``rng`` (no compiled random call per shape)."""
    return tuple(Layer(scale * rng.normal(size=(o, i)), scale * rng.normal(size=o) if bias else None)
                 for i, o in zip(widths[:-1], widths[1:], strict=True))


def twin_identity(runs: Runs, names, what: str, *, test: bool = False) -> Check:
    """The one check that exact-twin members (antisymmetric-pair or rank-one zero-even
    inits on symmetric data) equal their linear twins (§2.3–2.5): the largest
    :meth:`~biasfree.dynamics.ensemble.Runs.twin_gap` over ``names`` against :data:`ROUND_OFF`.
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
                   unit=FRACTION)
