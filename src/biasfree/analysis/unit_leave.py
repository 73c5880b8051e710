"""When a (leaky) ReLU net leaves its saddle, measured where the theory is silent (docs/theory.md
§11.7.6, "Measured where a member may lead").

The predicted time ``t_drop = ln(u*/a₀ − 1)/(2λ*)`` counts the zero units only. A small member of a
learned group (strength a_i < u*/2) can leave first, turning toward ŵ* as it grows; its
``t_copy = ln(u*/a_i − 1)/(2λ*)`` assumes it turned at once, and no formula here gives the turning
time (three reduced models fail, §11.7.6). Where ``t_copy < t_drop`` the theory cannot say which
unit leads, so the time is measured: gradient descent from the net's own weights until its loss first
reaches the drop level ``L* − (3/8)λ*²/m`` (the escaping unit half learned), at times ``t = ηk``.

The step is the smaller of :data:`~biasfree.analysis.measure_step.STEP_FRACTION` of the stability
limit 2/λ̂ (λ̂ the measured sharpness) and ``RATE_STEP/λ*``: GD grows an escaping unit by
``(1 + ηλ*)`` a step where the flow grows it by ``e^{ηλ*}``, so its time to a given size is longer by
the factor ``ηλ*/ln(1 + ηλ*) ≈ 1 + ηλ*/2``, at most ``1 + RATE_STEP/2`` (1%). The run is bounded by a
horizon in t and by a budget in seconds, and says which ended it.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from ..core.data import unchecked_dataset
from ..dynamics.train_config import GDConfig
from ..dynamics.trainer import run_checked
from . import measure_step, stage_budget

RATE_STEP = 0.02
"""``ηλ*`` at most: GD's escape is then slower than the flow's by at most ``1 + ηλ*/2`` = 1% (module
doc)."""
HORIZON = 2.0
"""The run's horizon, in units of the predicted ``t_drop`` (of ``HORIZON · COPY_HORIZON · t_copy``
where no zero unit lies along the escape, ε = 0): the prediction counts the zero units only, so a
measured time past it would say that they too were slower than predicted."""
COPY_HORIZON = 10.0
"""With ε = 0, the horizon is ``HORIZON · COPY_HORIZON · t_copy``."""
BUDGET = 10.0
"""Seconds the run may take outside ``analyse``'s stage budget (inside it, what that budget leaves,
at most this)."""
RECORDS = 400
"""Records of the run: the crossing is interpolated between two of them, ``horizon/RECORDS`` apart."""


@dataclass(frozen=True)
class Leave:
    """A leave time measured (module doc): ``time`` t = ηk at which the loss first reached ``level``
    (linear between the two records around it; None if it did not within the run), GD at step ``lr``,
    ``steps`` run of the ``horizon``'s, in ``seconds`` of the ``budget``."""

    time: float | None
    level: float
    lr: float
    steps: int
    horizon: float
    seconds: float
    budget: float

    @property
    def stopped(self) -> bool:
        """The budget, not the horizon or the crossing, ended the run."""
        return self.time is None and self.steps * self.lr < self.horizon * (1 - 1e-9)

    def line(self) -> str:
        """One clause for the stage's lines."""
        run = f"GD from these weights at η = {self.lr:.3g}, {self.steps} steps in {self.seconds:.2g} s"
        level = f"the drop level {self.level:.6g}"
        if self.time is not None:
            return f"measured: the loss reaches {level} at t ≈ {self.time:.4g} ({run})"
        why = (f"the time budget of {self.budget:g} s ran out at t = {self.steps * self.lr:.4g}"
               if self.stopped else f"not by the horizon t = {self.horizon:.4g}")
        return f"measured: the loss has not reached {level}: {why} ({run})"


def measured_leave(params, X, Y, alpha: float, level: float, rate: float, horizon: float) -> Leave:
    """GD from ``params`` on ``(X, Y)`` (slope ``alpha``) until the loss first reaches ``level``, or
    the ``horizon`` in t, or the budget (module doc); ``rate`` λ* sets the step's accuracy bound."""
    t0 = time.perf_counter()
    data = unchecked_dataset(np.asarray(X, float), np.asarray(Y, float), mirror=False)
    lam = measure_step.sharpness(params, measure_step.sample(data), alpha)
    lr = min(measure_step.step(lam), RATE_STEP / rate)
    steps = max(1, math.ceil(horizon / lr))
    left = stage_budget.left()
    seconds = BUDGET if left is None else max(0.0, min(BUDGET, left))
    cfg = GDConfig(alpha=float(alpha), lr=lr, steps=steps, n_records=min(steps + 1, RECORDS))
    traj = run_checked(params, data, cfg, observables="loss",
                       time_budget=max(seconds - (time.perf_counter() - t0), 1e-3),
                       stop=lambda state, last: float(last["net"]["loss"]) <= level)
    t, loss = np.asarray(traj.t, float), np.asarray(traj.loss, float)
    hit = np.flatnonzero(loss <= level)
    when = None
    if hit.size:
        i = int(hit[0])
        when = float(t[0]) if i == 0 else float(
            t[i - 1] + (t[i] - t[i - 1]) * (loss[i - 1] - level) / (loss[i - 1] - loss[i]))
    return Leave(when, float(level), float(lr), int(np.asarray(traj.stats["steps"])), float(horizon),
                 time.perf_counter() - t0, seconds)
