"""When a (leaky) ReLU net leaves its saddle, measured where the theory is silent (docs/theory.md
§11.7.6, "Measured where a member may lead"); and so is a dense linear net's drop on inputs that are
not whitened, where the closed form gives only the leading-order escape (§11.7.3, :data:`LEAD_HORIZON`).

The predicted time ``t_drop = ln(u*/a₀ − 1)/(2λ*)`` counts the zero units only. A small member of a
learned group (strength a_i < u*/2) can leave first, turning toward ŵ* as it grows; its
``t_copy = ln(u*/a_i − 1)/(2λ*)`` assumes it turned at once, and no formula here gives the turning
time (three reduced models fail, §11.7.6). Where ``t_copy < t_drop`` the theory cannot say which
unit leads, so the time is measured: gradient descent from the net's own weights until its loss first
reaches the drop level ``L* − (3/8)λ*²/m`` (the escaping unit half learned), at times ``t = ηk``.

The step is the smaller of :data:`~biasfree.analysis.measure_step.STEP_FRACTION` of the stability
limit 2/λ̂ (λ̂ the measured sharpness) and ``RATE_STEP/λ*``: GD grows an escaping unit by
``(1 + ηλ*)`` a step where the flow grows it by ``e^{ηλ*}``, so that growth is slower than the flow's
by the factor ``ηλ*/ln(1 + ηλ*) ≈ 1 + ηλ*/2``, at most ``1 + RATE_STEP/2`` (1%). The rest of the path is
GD's own: an audit measured the whole time 1.2% above GD at η/8 on one net. The answer names GD and η.
The run is bounded by a horizon in t (at most :data:`~biasfree.dynamics.train_config.MAX_STEPS`
steps) and by a budget in seconds, and says which ended it. Its records are chunked; once a chunk ends
below the level, the one chunk before it is run again from its first weights with every step recorded,
so the time is found to within one step η, not one record interval.
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass

import numpy as np

from ..core.data import unchecked_dataset
from ..core.nets import forward_unchecked
from ..dynamics.diagnosis import DivergenceError
from ..dynamics.train_config import MAX_STEPS, GDConfig
from ..dynamics.trainer import run_checked
from ..theory.plateau_times import crossing_times
from . import measure_step, stage_budget

RATE_STEP = 0.02
"""``ηλ*`` at most: GD's escape is then slower than the flow's by at most ``1 + ηλ*/2`` = 1% (module
doc)."""
HORIZON = 2.0
"""The run's horizon, in units of the predicted ``t_drop`` (or ``HORIZON · COPY_HORIZON · t_copy``
where no zero unit lies along the escape, ε = 0): the prediction counts the zero units only, so a
measured time past it would say that they too were slower than predicted."""
LEAD_HORIZON = 4.0
"""A dense linear net on inputs that are not whitened has only the leading-order escape time
``ln(1/ε)/|λ_min|`` (§11.7.3); its drop is measured to ``LEAD_HORIZON`` times that, or times
``1/|λ_min|`` where that is longer (a net well into its drop has ε > 1 and a negative time; on a 5→6→3 net at
three points of its second plateau the drop came 5–31% before it: tests/analysis/test_unit_leave.py)."""
COPY_HORIZON = 10.0
"""With ε = 0, the horizon is ``HORIZON · COPY_HORIZON · t_copy``."""
BUDGET = 10.0
"""Seconds the run may take outside ``analyse``'s stage budget (inside it, what that budget leaves,
at most this)."""
RECORDS = 400
"""Records of the first run (the stop test reads them); the chunk of the crossing is then run again
with every step recorded (module doc)."""


@dataclass(frozen=True)
class Leave:
    """A leave time measured (module doc): ``time`` t = ηk at which the loss first reached ``level``
    (linear between the two steps around it; None if it did not), GD at step ``lr``, ``steps`` run to
    ``horizon``, in ``seconds`` of the ``budget``; ``ended`` what ended the run: "reached", "horizon",
    "budget" (with 0 steps: spent before it began) or "diverged"."""

    time: float | None
    level: float
    lr: float
    steps: int
    horizon: float
    seconds: float
    budget: float
    ended: str

    def line(self) -> str:
        """One clause for the stage's lines."""
        level = f"the drop level {self.level:.6g}"
        if self.steps == 0:
            return (f"measured: the loss is already at or below {level}" if self.ended == "reached" else
                    f"measured: not run, the stage's time budget was spent before it (to reach {level})")
        run = f"GD from these weights at η = {self.lr:.3g}, {self.steps} steps"  # (seconds: .seconds)
        if self.time is not None:
            return f"measured: the loss reaches {level} at t ≈ {self.time:.4g} ({run})"
        why = {"budget": f"the time budget of {self.budget:.3g} s ran out at t = {self.steps * self.lr:.4g}",
               "diverged": f"GD diverged after step {self.steps}",
               "horizon": f"not by the horizon t = {self.horizon:.4g}"}[self.ended]
        return f"measured: the loss has not reached {level}: {why} ({run})"


def measured_leave(params, X, Y, alpha: float, level: float, rate: float, horizon: float) -> Leave:
    """GD from ``params`` on ``(X, Y)`` (slope ``alpha``) until the loss first reaches ``level``, or
    the ``horizon`` in t, or the budget (module doc); ``rate`` λ* (> 0) bounds the step for accuracy."""
    t0 = time.perf_counter()
    left = stage_budget.left()
    seconds = BUDGET if left is None else min(BUDGET, left)
    if seconds <= 0:
        return Leave(None, float(level), float("nan"), 0, float(horizon), 0.0, seconds, "budget")
    X, Y = np.asarray(X, float), np.asarray(Y, float)

    def below(p) -> bool:  # the weights' own loss (a chunk may end between records)
        return 0.5 * float(np.mean(np.sum((np.asarray(forward_unchecked(p, X, alpha)) - Y) ** 2, 1))) <= level
    if below(params):
        return Leave(0.0, float(level), float("nan"), 0, float(horizon), time.perf_counter() - t0, seconds,
                     "reached")
    data = unchecked_dataset(X, Y, mirror=False)
    lam = measure_step.sharpness(params, measure_step.sample(data), alpha)
    lr = min(measure_step.step(lam), RATE_STEP / rate if rate > 0 else math.inf)
    steps = max(1, math.ceil(horizon / lr)) if horizon / lr < MAX_STEPS else MAX_STEPS  # (NaN: the cap)
    before = {"p": params, "k": 0}

    def stop(state, last):  # the loss is non-increasing (a stable step): the first chunk below it holds it
        if below(state["p"]):
            return True
        before.update(p=state["p"], k=int(state["k"]))
        return False
    cfg = GDConfig(alpha=float(alpha), lr=lr, steps=steps, n_records=min(steps + 1, RECORDS))
    try:
        traj = run_checked(params, data, cfg, observables="loss", stop=stop,
                           time_budget=max(seconds - (time.perf_counter() - t0), 1e-3))
    except DivergenceError:
        return Leave(None, float(level), lr, before["k"], float(horizon), time.perf_counter() - t0, seconds,
                     "diverged")
    run = int(np.asarray(traj.stats["steps"]))
    if not below(traj.params):
        ended = "horizon" if run >= steps else "budget"
        return Leave(None, float(level), lr, run, float(horizon), time.perf_counter() - t0, seconds, ended)
    n = run - before["k"]  # the chunk of the crossing, again, every step recorded
    again = run_checked(before["p"], data, dataclasses.replace(cfg, steps=n, n_records=n + 1),
                        observables="loss")
    t = lr * (before["k"] + np.arange(n + 1))
    keep = t > 0
    when = float(crossing_times(t[keep], np.asarray(again.loss, float)[keep], [level])[0])
    return Leave(when, float(level), lr, run, float(horizon), time.perf_counter() - t0, seconds, "reached")
