"""The attention panel's time to leave, as ``analyse`` would tell it: at the record nearest each
intermediate plateau's flattest point, :func:`~biasfree.analysis.stage.stage_of` finds the
embedded k-head saddle and the blow-up t* of the net's small heads under the cubic escape flow
(docs/theory.md §11.7.13). The loss's half drop, the crossing of ``L* − ΔL/2`` (L* the saddle's
loss, ΔL = L_k − L_{k+1} from the predicted principal-component levels), is then predicted in the
window ``[t* − 2^{1/3}/(cε₁), t*]`` after that record, ε₁ = (ΔL/c)^{1/3}, widened by GD against flow
(§11.5.3: ``t*·(ηR/2)/(1 − ηR/2)`` above, per-weight rate R ≤ cε₁) and the bracketing record
interval each side."""

from __future__ import annotations

import math

import jax
import numpy as np

from ...analysis.stage import stage_of
from ...results import at_most
from ...theory import attention as th
from ...theory.staircase import find_plateaus


def attention_leave(t, loss, path, X, Y, init, levels, lr: float) -> dict:
    """Per intermediate plateau k = 1 … K − 1 (arrays of that length): ``now`` the record's time,
    ``times`` now + t*, ``lo``/``hi`` the window (absolute times, widened as in the module doc),
    ``measured`` the interpolated half drop (NaN, a failed check, when the stage answered another saddle than
    plateau k's, ``k`` its heads, or the loss was already past the half drop at the record), ``rate`` c,
    ``a0`` and ``units`` at the record."""
    t, loss, levels = (np.asarray(a, float) for a in (t, loss, levels))
    stair = find_plateaus(t, loss)
    got = np.array([q.level for q in stair.plateaus])
    out = {n: [] for n in ("now", "times", "lo", "hi", "measured", "rate", "a0", "units", "k")}
    for k in range(1, levels.size - 1):
        if got.size == 0:
            break
        q = stair.plateaus[int(np.argmin(np.abs(got - levels[k])))]
        j = int(np.argmin(np.abs(t - q.t_level)))
        layer = jax.tree_util.tree_map(lambda a, j=j: a[j], path)
        st = stage_of(layer, X, Y, 0.0, init)
        lv = None if st.head_point is None else st.head_point.leave
        if lv is None or not math.isfinite(lv.escape_time):
            continue
        c, tstar, dL = lv.rate, lv.escape_time, levels[k] - levels[k + 1]
        e1 = (dL / c) ** (1 / 3)
        x = lr * c * e1 / 2
        crossing = th.crossing_time(t[j:], loss[j:], st.head_point.loss - dL / 2)
        if st.k != k or not crossing > t[j]:  # another saddle's t*, or a drop already past: not a measurement
            crossing = math.nan
        i = int(np.searchsorted(t, crossing)) if math.isfinite(crossing) else t.size - 1
        width = float(t[min(i, t.size - 1)] - t[max(i - 1, 0)])
        for n, val in (("now", t[j]), ("times", t[j] + tstar),
                       ("lo", t[j] + tstar - 2 ** (1 / 3) / (c * e1) - width),
                       ("hi", t[j] + tstar + tstar * x / (1 - x) + width), ("measured", crossing),
                       ("rate", c), ("a0", lv.a0), ("units", st.units.count), ("k", st.k)):
            out[n].append(float(val))
    return {n: np.asarray(v, float) for n, v in out.items()}


def leave_checks(key: str, title: str, leave: dict) -> tuple[dict, dict, dict]:
    """``(arrays, metrics, checks)`` of :func:`attention_leave`'s answer for panel ``key``: the half
    drop measured inside its window, per plateau."""
    arrays = {f"{key}_leave_{n}": v for n, v in leave.items()}
    metrics, checks = {}, {}
    for i, (lo, hi, tm) in enumerate(zip(leave["lo"], leave["hi"], leave["measured"], strict=True)):
        metrics[f"{key}_leave{i + 1}_measured"], metrics[f"{key}_leave{i + 1}_t_star"] = tm, leave["times"][i]
        metrics[f"{key}_leave{i + 1}_lo"], metrics[f"{key}_leave{i + 1}_hi"] = lo, hi
        checks[f"{key}_leave{i + 1}"] = at_most(
            max(lo - tm, tm - hi) if math.isfinite(tm) else math.inf, 0.0,
            f"{title}: from plateau {i + 1} (t = {leave['now'][i]:.4g}, the stage's saddle of "
            f"{leave['k'][i]:.0f} heads), analyse's time to leave (the small "
            f"heads' cubic blow-up at {leave['times'][i]:.4g}) brackets the half drop: window "
            f"[{lo:.4g}, {hi:.4g}] (docs/theory.md §11.7.13).", unit="time ηk outside the window")
    return arrays, metrics, checks
