"""Training predicted (docs/verdict.md, the training stage where the theory speaks): the linear
twin of the net (§2.4; depth L > 2: the approximate odd-part twin, §4.1), its learning curve,
the floors and the predicted gap (§6.4), each gap over
``reference(L(θ₀), ½<||y||²>)`` (:mod:`~biasfree.analysis.gap`); :func:`predicted`, the
stage: the prediction for one net, the facts both training answers weigh, and the predicted
answer (:func:`~biasfree.analysis.verdict.judge_predicted`) unless the plan measures as asked.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from ..core.layers import Params
from ..core.nets import depth
from ..core.symmetry import max_row_norm
from ..core.twin import TwinScales, twin_weights
from ..expressivity.decomposition import energy
from ..theory.reference import Known, _reference_curve, product
from . import function_now as now
from . import regime as rg
from . import sign_groups
from .function_now import State
from .gap import reference, zero_loss
from .moments import linear_floor
from .plan import Plan, Setting
from .report import Prediction, Regime
from .structure import PAIRS
from .verdict import Facts, Judgement, judge_predicted

CURVE_BUDGET = 20.0
"""Seconds the predicted curve's ODE may take (or ``time_budget`` if less). A two-layer twin's
flow, stiff on raw pixels, is solved by the stiff solver of :mod:`biasfree.theory.stiff`
(784→2048→10 on 60,000 inputs: about 160 steps, seconds); a deeper twin's by DOP853, which
can need thousands of steps there. The verdict does not rest on the curve: a curve cut short
ends where the budget ran out and its note says so."""
CURVE_RTOL = 1e-6
"""The two-layer curve's ODE tolerance (atol 1e-3 of it): its error, about 3 rtol of the
largest weight product (tests/theory/test_stiff.py), is far below the paper's level of a gap
(``verdict.PAPER_LEVEL`` = 3e-3 of L(0)); rtol^(-1/3) sets the steps, so 1e-8 would cost 4.6×
the time."""


def predict(params, st: State, s: Setting, gd: tuple[float, int, np.ndarray] | None,
            sched: Callable[[], tuple[float, int]]) -> Prediction:
    """The prediction for ``params`` (measured ``st``) on the data of ``s``: its curve at the times
    ``t = η k`` of the GD run measured as asked, ``gd = (η, K, its record steps k)``, else on
    ``s.n_times`` points to ``s.t_max`` (default from the modes, bounded); the curve's ODE within
    :data:`CURVE_BUDGET` seconds, or ``s.budget`` if less (None: no limit). The growth term is for
    that GD run's (η, K), else for the net's default schedule ``sched()``
    (:func:`~biasfree.analysis.plan.schedule`, measured once; at most ``regime.MAX_STEPS``
    steps), asked only when there is a growth term."""
    a, X, Y, ctx, t_max, n_times = s.a, s.X, s.Y, s.ctx, s.t_max, s.n_times
    budget = CURVE_BUDGET if s.budget is None else min(CURVE_BUDGET, s.budget)
    L, modes, net, loss0 = depth(params), ctx.modes, st.net, st.loss0
    ws, ks = TwinScales.unchecked(a, L)  # α and the net checked by analyse's first stage
    twin = twin_weights(params, a, L)
    floored = False
    if gd is not None:
        t = gd[0] * gd[2]  # the steps the trainer records
    else:
        T, floored = (rg.default_t_max(modes, float(np.linalg.norm(net.beta_eff, 2)), ks, depth=L)
                      if t_max is None else (float(t_max), False))
        t = np.linspace(0.0, T, n_times)
    # what the data and net measurements already hold is not measured again (each pass over X is
    # seconds at 60,000 × 784): Σ_xx once, the even part from split, the mirror violation
    Sxx = ctx.moments.Sxx
    mv_rel = ctx.report.mirror_violation
    mirror = (mv_rel * max(max_row_norm(X, Y), 1e-300), mv_rel)
    known = Known(Sxx, (net.even_energy, net.output_energy), mirror)
    if L == 2 or a == 1.0:
        curve = _reference_curve(params, X, Y, np.atleast_1d(np.asarray(t, float)), alpha=a, weight_decay=0.0,
                                 time_budget=budget, rtol=CURVE_RTOL if L == 2 else None, known=known)
        note = curve.note
        # the twin map is exact only with a zero even part on mirror-symmetric data (as a
        # multiset): reference_curve measures both and says so in curve.exact
        exact = a == 1.0 or (curve.exact and net.even_energy <= 1e-24 * max(net.output_energy, 1e-300))
    else:
        exact = False
        curve = _reference_curve(twin, X, Y, np.atleast_1d(np.asarray(ks * t, float)), alpha=1.0,
                                 weight_decay=0.0, time_budget=budget, known=Known(Sxx))
        note = (f"APPROXIMATE: depth {L} > 2 has no exact linear twin (docs/theory.md §4.1); the twin is "
                f"the net with σ_α replaced by its odd part c z, weights × c^((L-1)/L) = {ws:.4g}, "
                f"time × c^(2(L-1)/L) = {ks:.4g}; " + curve.note)
    L0 = reference(loss0, zero_loss(Y))  # every gap's normaliser (biasfree.analysis.gap)
    twin0 = 0.5 * energy(Y - X @ product([np.asarray(la.matrix, float) for la in twin]).T)  # f = W_L⋯W_1 x
    g = st.growth  # rg.growth_even_energy's, from the split's pass over the rows (function_now.measure_net)
    # the growth term: the sign groups' peak gap under the GD that training runs (the given
    # step and steps, else analyse's default schedule, §6.3), with the remainder's interval (§6.4)
    growth = (0.0, 0.0, 0.0)
    if g.modes:
        lr, steps = gd[:2] if gd is not None else sched()
        steps = steps if gd is not None else min(steps, rg.MAX_STEPS)  # analyse's cap on its default run
        growth = sign_groups.growth_interval(g.modes, a, float(lr), steps)
    if net.structure == PAIRS:  # a unit and its mirror cancel, remainder and all: P = Q at every step
        growth = (0.0, 0.0, 0.0)  # (§6.4), and the sums of their squares only differ by round-off
    return Prediction(twin=twin, weight_scale=ws, time_scale=ks, reference=curve.reference, exact=bool(exact),
                      note=note, t=np.asarray(t)[:len(curve.loss)], loss=np.asarray(curve.loss),
                      loss0_net=loss0,
                      linear_floor=linear_floor(ctx.moments, X, Y), two_layer_floor=ctx.floor,
                      t0_gap=abs(loss0 - twin0) / L0, growth_gap=growth[0] / L0, horizon_floored=floored,
                      growth_gap_low=growth[1] / L0, growth_gap_high=growth[2] / L0, twin_loss0=twin0,
                      gap_reference=L0)


@dataclass(frozen=True)
class Predicted:
    """The training stage's prediction for one net: its weights ``params``, measured ``st``, its
    :class:`~biasfree.analysis.plan.Plan`, the prediction ``pred`` (None for a net with
    biases: no twin), the ``facts`` both training answers weigh, the predicted ``answer`` (None
    when the plan measures as asked) and the ``regime`` with the relative gradient."""

    params: Params
    st: State
    plan: Plan
    pred: Prediction | None
    facts: Facts
    answer: Judgement | None
    regime: Regime


def predicted(params, st: State, p: Plan, s: Setting) -> Predicted:
    """Training from ``params`` (measured ``st``) beside its twin, predicted for ``p.dyn``
    (:func:`predict`, at the times ``p.run`` records when it is GD) and judged unless ``p.run``
    measures it. A net with biases has no twin: no prediction, and the judgement rests on its
    structure alone."""
    r = p.run
    gd = None if r is None or not r.cfg.gd else (r.cfg.lr, r.cfg.steps, r.cfg.recorded())
    pred = None if st.net.has_bias else predict(params, st, s, gd, p.schedule)
    facts = now.facts(st, s.ctx, params, s.X, s.Y, s.a, pred)
    if pred is None:
        answer = judge_predicted(facts, t0_gap=0.0, growth_gap=0.0, kind=p.kind, dynamics=p.dyn)
        return Predicted(params, st, p, None, facts, answer, st.regime)
    answer = None if r is not None else judge_predicted(
        facts, t0_gap=pred.t0_gap, growth_gap=pred.growth_gap,
        growth_range=(pred.growth_gap_low, pred.growth_gap_high), kind=p.kind, dynamics=p.dyn)
    return Predicted(params, st, p, pred, facts, answer, replace(st.regime, relative_gradient=facts.grad_rel))
