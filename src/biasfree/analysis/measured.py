"""Training measured beside the linear twin (docs/theory.md §6.3, docs/verdict.md): the training
and history stages of ``analyse`` (:func:`stages`), the run, its record (with how far the
weights moved, :func:`relative_movement`, :func:`row_alignment`) and its answer, each run as the
:class:`~biasfree.analysis.plan.Plan` resolved once says.

``analyse(train=...)`` measures what it is asked to. Where the theory is silent (an init that is
not small, depth > 2, a conv first layer, an optimiser no closed form predicts, a predicted
interval that straddles 0.3%), ``analyse`` measures *by default*: it trains on from the given
weights beside the twin, under GD at the step of the measured sharpness and the default horizon
(:func:`~biasfree.analysis.plan.default_gd`, its stability checked at the run's end),
within :data:`~biasfree.analysis.plan.MEASURE_BUDGET` seconds (or the optimiser named with
``train=``, within ``analyse``'s ``time_budget``, as the run it was named for). Its
records are log-spaced, so the loop's budget check (after each of its ~20 chunks of records)
comes after chunks that grow geometrically, by K^{1/20} (1.8× for K = 200,000 steps): the run
overshoots its budget by that factor at most. The gap is the one of :mod:`~biasfree.analysis.gap`,
carried through the loop at every step.
"""

from __future__ import annotations

import dataclasses
import time

import numpy as np

from ..core.blocks import _outputs
from ..core.data import unchecked_dataset
from ..core.layers import Params
from ..dynamics.trainer import run_checked as train_run
from ..dynamics.trajectory import PairedRun
from ..expressivity.decomposition import energy
from . import function_now as now
from . import measure_step
from . import regime as rg
from .gap import NAME as GAP_REF
from .gap import of
from .measurements import split
from .plan import Run, Setting, dynamics_of
from .predicted import Predicted
from .report import History, Prediction, Regime, Training
from .stationary import Stationarity, stationarity
from .verdict import (
    EFFECTIVE,
    EXACT,
    MEASURE,
    NOT,
    PAPER_LEVEL,
    RICH_MOVEMENT,
    ROUND_OFF,
    UNDECIDED,
    Facts,
    Judgement,
    evidence,
    judgement,
    structural,
)


def stages(given: Predicted, init: Predicted | None, s: Setting) -> tuple:
    """The training and history stages of ``analyse`` (docs/verdict.md) after the prediction
    (:func:`~biasfree.analysis.predicted.predicted`), one way as each net's plan says
    (:func:`~biasfree.analysis.plan.resolve`): the training from the given weights by
    :func:`training` (the prediction, or measured), the function it ends with, and from the init
    ``init`` (None: no history) :func:`history`. ``(prediction, its judgement, regime, the
    trained function's judgement or None, history or None)``; a net with biases has no
    prediction and no history."""
    pred, answer, reg = training(given, s)
    if given.st.net.has_bias:
        return pred, answer, reg, None, None
    function = (None if pred.trained is None
                else now.trained_function(pred.trained, s.a, s.ctx, "function after training"))
    return pred, answer, reg, function, None if init is None else history(init, given.params, s)


def training(x: Predicted, s: Setting, early: bool = True) -> tuple:
    """Training from ``x.params`` beside its twin: measured by ``x.plan.run`` (the prediction
    then holds it as ``trained``), else the predicted answer; a prediction left undecided is
    measured by ``x.plan.fallback`` (a default measurement) when there is one, ended as soon as
    its answer is decided when ``early`` (:class:`Decided`);
    ``(prediction, its judgement, the regime with the relative gradient)``."""
    p, pred, answer, reg = x.plan, x.pred, x.answer, x.regime
    if pred is None:  # a net with biases: judged on its structure alone
        return None, answer, reg
    r, kind, why, spent = p.run, p.kind, "", 0.0
    if r is None:
        if answer.level != UNDECIDED or p.fallback is None:
            return pred, answer, reg
        r, why, predicted = p.fallback, answer.reasons[0], answer
        if r.cfg is None:  # default GD: its step from the sharpness measured now, which counts against
            t0 = time.perf_counter()  # the budget (and again at the end's check)
            cfg = r.make()
            r = dataclasses.replace(r, cfg=cfg, dyn=dynamics_of(cfg, default=True))
            spent = time.perf_counter() - t0
        kind = kind.replace(" (not measured)", "").replace(f"by {p.dyn.name}, predicted",
                                                           f"by {r.dyn.name}, measured by default")
    certify, reg0 = r.dyn.train == "True", reg  # GD at the measured step: its stability checked at the end

    def go(c, b, t=0.0):
        return run(x.params, pred, reg0, dataclasses.replace(r, cfg=c, budget=b), s, certify=certify, spent=t,
                   early=early and r.by_default)

    if certify:  # rerun at a smaller step where the sharpness grew past half the limit (measure_step.settle)
        tr, reg, lam_end, cfg = measure_step.settle(go, r.cfg, r.budget, spent)
        if cfg is not r.cfg:  # the answer names the step it ran at
            old, r = r.dyn.name, dataclasses.replace(r, cfg=cfg, dyn=dynamics_of(cfg, default=True))
            kind = kind.replace(old, r.dyn.name)
    else:
        tr, reg, lam_end = go(r.cfg, r.budget)
    longer = f"analyse(model, data, train={r.dyn.train}, time_budget={{seconds}})"  # judged fills it in
    answer = judged(x.facts, tr, reg, kind, p.note, longer)
    if lam_end is not None:
        answer = measure_step.certify(answer, r.cfg, lam_end, tr.steps_run)
    if why:  # the prediction's numbers stay in the evidence (the exact t = 0 gap, the failed assumption)
        names = {e.name for e in answer.evidence}
        before = tuple(e for e in predicted.evidence if e.name not in names)
        answer = dataclasses.replace(answer, evidence=before + answer.evidence, notes=answer.notes + (
            f"measured by default, since the prediction was undecided ({why}), by {r.dyn.name} from these "
            f"weights beside the twin, {tr.steps_run} of {r.cfg.steps} steps in {tr.seconds:.3g} s (time "
            f"budget {'none' if r.budget is None else f'{r.budget:g} s'}); train=False predicts only",))
    return dataclasses.replace(pred, trained=tr), answer, reg


def history(x: Predicted, params, s: Setting) -> History:
    """Question (iii): training from the init ``x.params`` beside its twin (its plan: measured
    with the config asked, else predicted for gradient flow and, unless ``train=False``,
    measured by default GD where that prediction is undecided), and how close the rerun ends
    to the given net ``params``."""
    pred, answer, reg = training(x, s, early=False)  # the rerun runs whole: it is compared with the net
    if pred is None or pred.trained is None:
        return History(x.st.net, pred, answer, reg)
    tr = pred.trained
    f_given, f_rerun = _outputs(params, s.X, s.a), _outputs(tr.params, s.X, s.a)
    match = energy(f_rerun - f_given) / max(energy(f_given), 1e-300)
    same = ("reproduces it" if match <= PAPER_LEVEL else
            "a default GD run, not the training that made the net" if tr.by_default else
            "does NOT reproduce it: other steps, data or seed?")
    note = (f"the rerun from the init ends {match:.3g} (of <f²>) from the given net ({same}; "
            "reported, not judged)")
    answer = dataclasses.replace(answer, notes=answer.notes + (note,))
    return History(x.st.net, pred, answer, reg, match)


def run(params, pred: Prediction, reg: Regime, r: Run, s: Setting, certify: bool = False,
        spent: float = 0.0, early: bool = False) -> tuple:
    """Train ``params`` and its twin ``pred.twin`` by ``r`` side by side (one loop, the gap
    carried at every step) and record it: ``(Training, the regime with movement and
    alignment, the sharpness at the run's last weights when ``certify``, else None)``
    (:mod:`~biasfree.analysis.measure_step`: GD at the measured step is stable there while
    η λ̂ ≤ 2; the loop's share of ``r.budget`` is what the ``spent`` seconds of measuring the
    step leave, ``measure_step.budget_left``); the predicted curve ``pred.t``, ``pred.loss``
    compared for GD, every gap over the prediction's normaliser ``pred.gap_reference``
    (:mod:`~biasfree.analysis.gap`). ``early``: the run ends as soon as :class:`Decided` says its
    answer can no longer change (``Training.decided``)."""
    X, Y, a, modes = s.X, s.Y, s.a, s.ctx.modes
    cfg, budget = r.cfg, r.budget
    L0 = pred.gap_reference  # reference(L(θ₀), ½<||y||²>), as the prediction's gaps
    # GD at the measured step: inputs that are 0 everywhere dropped (measure_step.reduced: the same run)
    keep = measure_step.reduced(params, X) if certify and cfg.plain_gd else None
    P, Q, XP = (params, pred.twin, X) if keep is None else (measure_step.narrow(params, keep),
                                                             measure_step.narrow(pred.twin, keep), X[:, keep])
    t0 = time.perf_counter()
    loop_budget = measure_step.budget_left(budget, spent) if spent else budget
    flow = r.dyn.flow  # GD on the MSE: the end's bound applies (Stationarity), and so it does on the way

    def ends(p, q):  # the loop's weights, on every input column
        return ending(*((p, q) if keep is None else (measure_step.widen(params, p, keep),
                                                     measure_step.widen(pred.twin, q, keep))), s)

    stop = Decided(PAPER_LEVEL * L0, ends if flow else None, s.ctx.floor) if early else None
    traj = train_run(P, unchecked_dataset(XP, Y), cfg, twin=Q, observables="loss", time_budget=loop_budget,
                     progress=s.progress, stop=stop, twin_optimiser=r.twin)
    seconds = time.perf_counter() - t0
    paired = PairedRun.of(traj, cfg.recorded())
    if keep is not None:
        paired = dataclasses.replace(paired, params=measure_step.widen(params, paired.params, keep),
                                     twin=measure_step.widen(pred.twin, paired.twin, keep))
    t = np.asarray(traj.t, dtype=float)
    if cfg.gd:  # nan past a curve cut short
        trainer, predicted = "GD", np.interp(t, pred.t, pred.loss, right=np.nan)
    else:  # no flow curve to compare with: the prediction is for GD
        trainer, predicted = f"{cfg.label} (κ = {cfg.degree:g})", np.full(t.shape, np.nan)
    sp = split(paired.params, X, a, s.ctx.moments.fit)
    dirs = rg.learned_directions(modes.B)
    off = np.abs(paired.loss - predicted)
    off = off[np.isfinite(off)]  # no prediction past a curve cut short, nor for an optax run
    lr = float(np.asarray(traj.stats["lr"]))  # t = η k (t = k when the optimiser hides η)
    tr = Training(config=cfg, t=t, loss=paired.loss, twin_loss=paired.twin_loss, predicted=predicted,
                  even_energy=paired.even_energy, gap_to_twin=paired.gap_max / L0,
                  gap_to_prediction=float(off.max()) / L0 if off.size else np.nan,
                  final_even_fraction=sp.even_fraction,
                  final_odd_nonlinear_fraction=sp.odd_fraction_nonlinear,
                  final_odd_linear_energy=sp.odd_linear, final_odd_nonlinear_energy=sp.odd_nonlinear,
                  final_even_energy=sp.even, params=paired.params, gap_step=paired.gap_step,
                  gap_time=(lr if np.isfinite(lr) else 1.0) * paired.gap_step, steps_run=paired.steps,
                  optimiser=trainer,
                  end=ending(paired.params, paired.twin, s) if flow else None,  # GD stays where the flow does
                  gap_reference=L0, seconds=seconds, time_budget=budget, by_default=r.by_default,
                  step_seconds=seconds_a_step(traj),
                  decided=stop is not None and stop.said)
    move = relative_movement(params, paired.params)
    reg = dataclasses.replace(reg, movement=move, rich=move[0] >= RICH_MOVEMENT,
                              alignment0=row_alignment(params[0].matrix, dirs),
                              alignment=row_alignment(paired.params[0].matrix, dirs))
    lam_end = measure_step.pair_sharpness(paired.params, paired.twin, X, Y, a) if certify else None
    return tr, reg, lam_end


def seconds_a_step(traj) -> float:
    """A run's seconds a step once compiled, as the loop measured it when a time budget paced the run
    (``stats["step_seconds"]``); NaN where it was not measured."""
    return float(np.asarray(traj.stats.get("step_seconds", np.nan)))


def measure_longer(seconds: float, steps_asked: int, step_seconds: float, longer: str) -> str:
    """The advice of a run the time budget stopped: the whole run's ``steps_asked`` steps at
    ``step_seconds``, the loop's seconds a step after its first call compiled the program, and
    ``longer`` (the call that runs longer) with 1.5× that budget. A budget spent within the first
    call (``step_seconds`` NaN) measured no step: 10× the ``seconds`` it took is asked instead (the
    run's mean rate, compiling included, would ask for 1,230 s where the whole run takes 1.6 s)."""
    if np.isfinite(step_seconds) and step_seconds > 0:
        whole = step_seconds * steps_asked
        return (f"measure longer (about {whole:.3g} s at this rate): "
                + longer.format(seconds=f"{1.5 * whole:.2g}"))
    return ("measure longer (the budget ended in the run's first call, which compiles it: no step's "
            "rate was measured): " + longer.format(seconds=f"{10 * seconds:.2g}"))


def judged(facts: Facts, tr: Training, reg: Regime, kind: str, note: str, longer: str = MEASURE) -> Judgement:
    """The measured answer of ``tr``; ``note`` is
    :func:`~biasfree.dynamics.optimiser_twin.with_degree`'s (how κ was found, APPROXIMATE when
    the twin optimiser is inexact), empty for GD; ``longer`` the call that measures longer when
    the budget ran out."""
    j = judge_measured(facts, gap=tr.gap_to_twin, step=tr.gap_step, t=tr.gap_time, steps_run=tr.steps_run,
                       steps_asked=tr.config.steps, movement=reg.movement[0], alignment=reg.alignment,
                       alignment0=reg.alignment0, exact_structure=facts.exact, kind=kind,
                       trainer=tr.optimiser, over="every step",
                       approximate=note if note.startswith("APPROXIMATE") else "", end=tr.end,
                       scale=tr.gap_reference, seconds=tr.seconds, budget=tr.time_budget, longer=longer,
                       step_seconds=tr.step_seconds,
                       decided=tr.decided)
    return dataclasses.replace(j, notes=j.notes + (f"twin optimiser: {note}",)) if note else j


def judge_measured(f: Facts, *, gap: float, step: int, t: float, steps_run: int, steps_asked: int,
                   movement: float, alignment: float, alignment0: float, exact_structure: bool,
                   kind: str = "training, measured", trainer: str = "GD",
                   over: str = "every step", approximate: str = "", end: Stationarity | None = None,
                   scale: float = 1.0, seconds: float = float("nan"), budget: float | None = None,
                   longer: str = MEASURE, decided: bool = False,
                   step_seconds: float = float("nan")) -> Judgement:
    """The training measured (§6.3): ``gap`` = max over every step k of ``|L(θ_k) − L_twin(k)| /
    scale``, ``scale`` = max(L(θ₀), ½<||y||²>) (:mod:`~biasfree.analysis.gap`), reached at ``step``
    (time ``t``); ``movement`` the first layer's relative movement, ``alignment``/``alignment0``
    the first-layer rows' energy share in the learned input directions after/before training
    (reported, not judged); ``trainer`` the optimiser (with its degree κ) that trained both and
    ``over`` the steps the maximum is taken over, both named in the evidence. ``approximate``
    says why the twin's optimiser is only approximately the exact twin's (non-empty): a gap above
    0.3% is then no evidence that the net left its twin, and the answer is :data:`UNDECIDED`,
    naming the fix. ``end`` (:class:`~biasfree.analysis.stationary.Stationarity` of the run's
    last net and twin, descent only): its bound (stationary, or the floor bound
    ``max(|L − L_twin|, max(L, L_twin) − L*)``, or the converged max(L, L_twin)) within 0.3% says that
    a longer run keeps the gap within it, so the answer holds past the steps run. A run the time
    budget stopped (``steps_run`` < ``steps_asked``, ``seconds`` of ``budget``) whose gap is within
    0.3% without such a bound is :data:`UNDECIDED`, saying so and naming ``longer``, the call
    that runs longer (its ``{seconds}``, if any, filled in with 1.5× the time the whole run takes
    at the rate measured, :func:`measure_longer`); a gap above 0.3% in the steps run
    says "not" whatever the budget.
    ``decided``: the run ended before its steps because one of those two already held
    (:class:`Decided`), which the notes say instead of a budget."""
    ev, fails, silent, notes = structural(f)
    context = fails + silent  # the theory does not cover these cases, but the measured gap decides
    measured = evidence(f"trained gap to the twin under {trainer}, max over {over} ({of(scale)})", gap,
                        PAPER_LEVEL, f"the paper's 0.3%; maximum at step {step} (t = {t:.4g})")
    ev.append(measured)
    rich = evidence("first-layer movement ‖W₁(T)−W₁(0)‖/‖W₁(0)‖", movement, RICH_MOVEMENT,
                    "rich learning: the weights left their init (§6.3)", op=">=")
    ev.append(rich)
    notes = notes + [f"regime: {'rich' if rich.passed else 'lazy'} ({rich.line()}); first-layer rows' "
                     f"energy in the learned input directions {alignment:.3g} (init {alignment0:.3g}; "
                     "reported, not judged)"]
    if context:
        notes.append(f"the theory does not cover this case ({'; '.join(context)}); the measured gap decides")
    final = ""
    if end is not None:
        ev.extend(end.evidence("at the run's end"))
        bound = end_bound(end)
        after = evidence(f"gap to the twin after the run, bound ({of(scale)})", bound / scale, PAPER_LEVEL,
                         "the run ended stationary, above the two-layer floor or converged: longer "
                         "descent keeps the gap within this")
        ev.append(after)
        how = (end.reason(f.loss_ref).split(":")[0] if end.stationary or np.isfinite(end.floor)
               else "converged")
        final = "" if not after.passed else (f"; the run ended {how}, so longer training keeps the "
                 f"gap ≤ {after.value:.2g} of {GAP_REF}: the answer holds past step {steps_run}")
    stopped = steps_run < steps_asked
    spent = (f"{steps_run} of {steps_asked} steps in {seconds:.3g} s"
             + ("" if budget is None else f" (time budget {budget:.3g} s)"))
    if stopped and decided:
        notes.append(f"ended once decided, after {spent}: " + (
            "the gap passed 0.3%, which no later step can undo" if not measured.passed else
            "the run's weights were within the bound no later descent can leave"))
    elif stopped:
        notes.append(f"stopped by the time budget after {spent}: the gap is the maximum over the steps "
                     "run" + (" (and the run ended within its bound)" if final else ""))
    if not measured.passed:
        why = [f"trained gap {100 * gap:.3g}% of {GAP_REF} at step {step} (t = {t:.4g}) > 0.3%"]
        if approximate:  # the gap holds the twin optimiser's own error: no evidence either way
            return judgement(kind, UNDECIDED, why + [
                f"against an approximate twin ({approximate}), so the gap may be the twin's own error; "
                "pass an optimiser factory (e.g. lambda rho: optax.adam(lr, eps=1e-8 * rho)) for an "
                "exact twin"], ev, notes)
        if not rich.passed:
            why.append(f"lazy regime: {rich.line()}")
        return judgement(kind, NOT, why + fails, ev, notes)  # a silent case is no evidence: noted only
    if stopped and not final:
        return judgement(kind, UNDECIDED, [
            f"the time budget ran out after {spent}: the gap {gap:.3g} ({of(scale)}) is within 0.3% for "
            f"those steps only and nothing bounds it after them; "
            + measure_longer(seconds, steps_asked, step_seconds, longer)], ev, notes)
    if exact_structure and gap <= ROUND_OFF:
        return judgement(kind, EXACT, [], ev, notes,
                         f"on its twin to round-off at {over} ({gap:.2g} of {GAP_REF}){final}")
    return judgement(kind, EFFECTIVE, [], ev, notes, f"within {100 * gap:.2g}% of {GAP_REF} of its twin at "
                     f"{over} (max at step {step}){final}")


def ending(params, twin, s: Setting) -> Stationarity:
    """Where a run's net ``params`` and twin ``twin`` stand on the whole data, with the setting's
    two-layer floor (:func:`~biasfree.analysis.stationary.stationarity`)."""
    return stationarity(params, twin, s.X, s.Y, s.a, max(0.5 * s.ctx.modes.y_power, 1e-300), s.ctx.floor,
                        s.ctx.modes.B)


def end_bound(end: Stationarity) -> float:
    """The largest gap to the twin any later descent can open from ``end`` (loss units): its
    :meth:`~biasfree.analysis.stationary.Stationarity.bound` (stationary, or the floor bound), else
    max(L, L_twin), both losses being ≥ 0 and non-increasing."""
    return end.bound() if end.bounded else max(end.loss, end.twin_loss)


class Decided:
    """The stop test of a default measurement (``trainer.run_checked``'s ``stop``), asked between the
    loop's calls: the answer is decided once the gap so far is above ``level`` (loss units:
    0.3% of L_ref) — "not", whatever follows (:func:`judge_measured`) — or, where ``ends``
    (None: not GD on the MSE) finds the run's weights within the bound no later descent can
    leave (:func:`end_bound` ≤ ``level``, the bound :func:`judge_measured` reads at the run's
    end). ``ends`` costs passes over the data, so it is asked only once the last record's losses
    L, L̃ pass the same bound without its round-off terms: max(L, L̃), or with the two-layer
    ``floor`` L* ``max(|L − L̃|, max(L, L̃) − L*)`` (a stationary point to round-off is left to the
    run's end). ``said``: whether it ended the run."""

    def __init__(self, level: float, ends=None, floor: float | None = None):
        self.level, self.ends, self.said = level, ends, False
        self.floor = float("nan") if floor is None else float(floor)

    def __call__(self, state, last) -> bool:
        if float(state["gap"]) > self.level:
            self.said = True
        elif self.ends is not None:
            L, Lt = float(last["net"]["loss"]), float(last["twin"]["loss"])
            near = max(L, Lt) if not np.isfinite(self.floor) else max(abs(L - Lt), max(L, Lt) - self.floor)
            self.said = near <= self.level and end_bound(self.ends(state["p"], state["q"])) <= self.level
        return self.said


def relative_movement(before: Params, after: Params) -> tuple[float, ...]:
    """Per layer ``‖A_l(T) − A_l(0)‖_F / ‖A_l(0)‖_F``, A_l the layer's matrix (∞ for a layer that
    started at 0)."""
    def one(a, b):
        A = np.asarray(a.matrix)
        n0 = float(np.linalg.norm(A))
        return float(np.linalg.norm(np.asarray(b.matrix) - A)) / n0 if n0 > 0 else float("inf")
    return tuple(one(a, b) for a, b in zip(before, after, strict=True))


def row_alignment(W1, directions) -> float:
    """Share of the first layer's energy in the span of ``directions`` (d, r),
    orthonormal columns: ``‖W₁ D‖_F² / ‖W₁‖_F²`` (r/d on average for random rows, 1 when
    every row lies in the span)."""
    W1 = np.asarray(W1, float)
    tot = float(np.sum(W1**2))
    return float(np.sum((W1 @ directions) ** 2) / tot) if tot > 0 else 0.0
