"""Training measured beside the linear twin (docs/theory.md §6.3, docs/verdict.md): the schedule,
the run, its record (with how far the weights moved, :func:`relative_movement`,
:func:`row_alignment`), its answer, and the call that measures it (:func:`dynamics_of`).

``analyse(train=...)`` measures what it is asked to. Where the theory is silent (an init that is
not small, depth > 2, a conv first layer, an optimiser no closed form predicts, a predicted
interval that straddles 0.3%), ``analyse`` measures *by default*: it trains on from the given
weights beside the twin, under GD at the step of the measured sharpness and the default horizon
(:func:`~biasfree.analysis.measure_step.default_config`, its stability checked at the run's end),
within :data:`MEASURE_BUDGET` seconds (or the optimiser named with ``train=``, within
``analyse``'s ``time_budget``, as the run it was named for). Its
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
from ..dynamics import TrainConfig, record_steps
from ..dynamics.optimiser_twin import NAMED
from ..dynamics.train_config import plain_gd
from ..dynamics.trainer import _run as train_run
from ..dynamics.trajectory import PairedRun
from ..expressivity.decomposition import energy
from . import function_now as now
from . import measure_step
from . import regime as rg
from .function_now import Context, State
from .gap import NAME as GAP_REF
from .gap import of, reference, zero_loss
from .measurements import split
from .predicted import predict
from .report import History, Regime, Training
from .stationary import Stationarity, stationarity
from .verdict import (
    EFFECTIVE,
    EXACT,
    FLOW,
    MEASURE,
    NOT,
    PAPER_LEVEL,
    RICH_MOVEMENT,
    ROUND_OFF,
    UNDECIDED,
    Dynamics,
    Facts,
    Judgement,
    evidence,
    judge_predicted,
    judgement,
    structural,
)

MEASURE_BUDGET = 10.0
"""Seconds of training a default measurement allows itself (or ``analyse``'s ``time_budget`` if
less). With the loop's geometric chunks (module doc) the run takes at most about 1.8× this, so
that with the rest of ``analyse`` a 784→256→10 net on 10,000 inputs gets its answer in about
30 s on 2 cores (benchmarks/bench_analyse.py, row "alone")."""
PREDICTED = "training by {}, predicted (not measured)"
"""The kind of the answer on training when it is predicted, with the dynamics it is for
(``Dynamics.name``, :class:`~biasfree.analysis.verdict.Dynamics`; measured:
``"training by ..., measured"``)."""


def config(train, params, modes, c, beta, a, spacing: str = "linear", X=None, Y=None,
           max_steps: int | None = rg.MAX_STEPS) -> TrainConfig | None:
    """The run ``train`` asks for: None for None/False; a TrainConfig as given (α the model's);
    True: GD at a quarter of the stability limit of the sharpness measured on ``(X, Y)`` to the
    default horizon (:func:`~biasfree.analysis.measure_step.default_config`, at most
    ``max_steps`` steps; None: the time budget ends it), 201 records at ``spacing``."""
    if train is None or train is False:
        return None
    if isinstance(train, TrainConfig):
        return train._with_alpha(a)  # α checked once, by as_model
    return measure_step.default_config(params, X, Y, a, modes, float(np.linalg.norm(beta, 2)), spacing,
                                       max_steps)


def budget_of(time_budget: float | None) -> float | None:
    """A default measurement's budget: :data:`MEASURE_BUDGET`, or ``time_budget`` if less
    (None: no limit, as the caller asked)."""
    return None if time_budget is None else min(time_budget, MEASURE_BUDGET)


def stages(train, given: TrainConfig | None, note: str, measure: bool, params: Params, start, st: State,
           ctx: Context, X, Y, a, t_max, n_times, budget, progress) -> tuple:
    """The training and history stages of ``analyse`` (docs/verdict.md), one way from the config:
    ``train`` as :func:`config` reads it (``given`` the user's config, κ set, ``note`` how),
    the training from ``params`` (measured ``st``) beside its twin by :func:`training` (predicted,
    measured with the config; with ``measure`` an undecided prediction is measured by default:
    the given optimiser, else GD), the function it ends with, and from ``start`` (None: no
    history) :func:`history`. ``(prediction, its judgement, regime, the trained function's
    judgement or None, history or None)``; a net with biases has no prediction and no history."""
    cfg = config(train, params, ctx.modes, st.net.c, st.net.beta_eff, a, X=X, Y=Y)
    dyn = dynamics_of(given, cfg)  # what a prediction is for, and the call that measures it
    fallback = None if not measure else (  # a default measurement: the given optimiser, else GD,
        cfg or (lambda: config(True, params, ctx.modes, st.net.c, st.net.beta_eff, a, "log", X, Y,  # its
                               rg.MAX_STEPS if budget is None else None)))  # step measured only when run
    pred, answer, reg = training(params, st, ctx, X, Y, a, cfg if start is None else None, t_max, n_times,
                                 budget, progress, note=note, dyn=dyn, fallback=fallback)
    if st.net.has_bias:
        return pred, answer, reg, None, None
    function = (None if pred.trained is None
                else now.trained_function(pred.trained, a, ctx, "function after training"))
    rerun = None if start is None else history(start, params, a, X, Y, ctx, cfg, t_max, n_times, budget,
                                               progress, note, dyn, measure)
    return pred, answer, reg, function, rerun


def training(params, st: State, ctx: Context, X, Y, a, cfg, t_max, n_times, budget, progress,
             kind: str | None = None, note: str = "", dyn: Dynamics = FLOW, fallback=None) -> tuple:
    """Training from ``params`` (measured ``st``) beside its twin: measured with ``cfg`` (the
    prediction then holds it as ``trained``), else predicted; a prediction left undecided is
    measured by ``fallback`` (a default measurement) when one is given;
    ``(prediction, its judgement, the regime with the relative gradient)``. A net with biases has
    no twin: no prediction, and the judgement rests on its structure alone. ``dyn`` the training
    a prediction is for."""
    measured = "measured" if cfg is not None else "measured by default"
    kind = kind or (PREDICTED.format(dyn.name) if cfg is None else f"training by {dyn.name}, measured")
    pred = None if st.net.has_bias else predict(params, a, X, Y, ctx, st, cfg, t_max, n_times, budget)
    facts = now.facts(st, ctx, params, X, Y, a, pred)
    if pred is None:
        return None, judge_predicted(facts, t0_gap=0.0, growth_gap=0.0, kind=kind, dynamics=dyn), st.regime
    reg = dataclasses.replace(st.regime, relative_gradient=facts.grad_rel)
    if cfg is None:
        answer = judge_predicted(facts, t0_gap=pred.t0_gap, growth_gap=pred.growth_gap,
                                 growth_range=(pred.growth_gap_low, pred.growth_gap_high),
                                 kind=kind, dynamics=dyn)
        if answer.level != UNDECIDED or fallback is None:
            return pred, answer, reg
        why, predicted = answer.reasons[0], answer
        if dyn is FLOW:  # nothing asked: default GD within the default budget
            budget, t0 = budget_of(budget), time.perf_counter()
            cfg = fallback()  # its step from the sharpness measured now: that time counts, twice (the end's)
            mdyn, spent = dynamics_of(None, cfg), time.perf_counter() - t0
        else:  # the optimiser given, within the time_budget given for it
            cfg, mdyn, spent = fallback, dyn, 0.0
        kind = kind.replace(" (not measured)", "").replace(f"by {dyn.name}, predicted",
                                                           f"by {mdyn.name}, {measured}")
    else:
        mdyn, why, spent = dyn, "", 0.0  # the step given, or measured for train=True before the clock
    certify, reg0 = mdyn.train == "True", reg  # GD at the measured step: its stability checked at the end

    def go(c, b, s=0.0):
        return run(params, pred.twin, pred.t, pred.loss, a, X, Y, c, ctx.moments.fit, ctx.floor, ctx.modes,
                   st.loss0, reg0, b, progress, by_default=bool(why), certify=certify, spent=s)

    if certify:  # rerun at a smaller step where the sharpness grew past half the limit (measure_step.settle)
        tr, reg, lam_end, step_cfg = measure_step.settle(go, cfg, budget, spent)
        if step_cfg is not cfg:  # the answer names the step it ran at
            old, cfg, mdyn = mdyn.name, step_cfg, dynamics_of(None, step_cfg)
            kind = kind.replace(old, mdyn.name)
    else:
        tr, reg, lam_end = go(cfg, budget)
    longer = f"analyse(model, data, train={mdyn.train}, time_budget={{seconds}})"  # judged fills it in
    answer = judged(facts, tr, reg, kind, note, longer)
    if lam_end is not None:
        answer = measure_step.certify(answer, cfg, lam_end, tr.steps_run)
    if why:  # the prediction's numbers stay in the evidence (the exact t = 0 gap, the failed assumption)
        names = {e.name for e in answer.evidence}
        before = tuple(e for e in predicted.evidence if e.name not in names)
        answer = dataclasses.replace(answer, evidence=before + answer.evidence, notes=answer.notes + (
            f"measured by default, since the prediction was undecided ({why}), by {mdyn.name} from these "
            f"weights beside the twin, {tr.steps_run} of {cfg.steps} steps in {tr.seconds:.3g} s (time "
            f"budget {'none' if budget is None else f'{budget:g} s'}); train=False predicts only",))
    return dataclasses.replace(pred, trained=tr), answer, reg



def history(start, params, a, X, Y, ctx: Context, cfg, t_max, n_times, budget, progress, note,
            dyn: Dynamics, measure: bool = False) -> History:
    """Question (iii): training from ``start`` beside its twin (measured with ``cfg``, else
    predicted for gradient flow, and with ``measure`` measured by default GD where that prediction
    is undecided), and how close the rerun ends to the given net."""
    st = now.measure_net(start, X, Y, a, ctx, kind="the init's function")
    dyn = dyn if cfg else FLOW
    kind = (f"how the net got here: training from the init by {dyn.name}, "
            + ("measured" if cfg else "predicted"))
    cap = rg.MAX_STEPS if budget is None else None  # with a budget, the budget ends the run
    fallback = ((lambda: config(True, start, ctx.modes, st.net.c, st.net.beta_eff, a, "log", X, Y, cap))
                if measure and cfg is None else None)
    pred, answer, reg = training(start, st, ctx, X, Y, a, cfg, t_max, n_times, budget, progress, kind, note,
                                 dyn, fallback)
    if pred is None or pred.trained is None:
        return History(st.net, pred, answer, reg)
    tr = pred.trained
    f_given, f_rerun = _outputs(params, X, a), _outputs(tr.params, X, a)
    match = energy(f_rerun - f_given) / max(energy(f_given), 1e-300)
    same = ("reproduces it" if match <= PAPER_LEVEL else
            "a default GD run, not the training that made the net" if tr.by_default else
            "does NOT reproduce it: other steps, data or seed?")
    note = (f"the rerun from the init ends {match:.3g} (of <f²>) from the given net ({same}; "
            "reported, not judged)")
    answer = dataclasses.replace(answer, notes=answer.notes + (note,))
    return History(st.net, pred, answer, reg, match)


def run(params, twin, pred_t, pred_loss, a, X, Y, cfg: TrainConfig, fit, floor, modes, loss0, reg: Regime,
        budget, progress, by_default: bool = False, certify: bool = False, spent: float = 0.0) -> tuple:
    """Train ``params`` and ``twin`` by ``cfg`` side by side (one loop, the gap carried at every
    step) and record it: ``(Training, the regime with movement and alignment, the sharpness at
    the run's last weights when ``certify``, else None)`` (:mod:`~biasfree.analysis.measure_step`:
    GD at the measured step is stable there while η λ̂ ≤ 2; the loop's share of ``budget`` is
    what the ``spent`` seconds of measuring the step leave, ``measure_step.budget_left``);
    ``pred_t``,
    ``pred_loss`` the predicted curve (compared for GD), ``fit`` the least-squares solver, ``floor``
    the exact two-layer floor (or None), ``loss0`` L(θ₀)."""
    L0 = reference(loss0, zero_loss(Y))
    # GD at the measured step: inputs that are 0 everywhere dropped (measure_step.reduced: the same run)
    keep = measure_step.reduced(params, X) if certify and plain_gd(cfg) else None
    P, Q, XP = (params, twin, X) if keep is None else (measure_step.narrow(params, keep),
                                                        measure_step.narrow(twin, keep), X[:, keep])
    t0 = time.perf_counter()
    loop_budget = measure_step.budget_left(budget, spent) if spent else budget
    traj = train_run(P, unchecked_dataset(XP, Y), cfg, twin=Q, observables="loss", time_budget=loop_budget,
                     progress=progress)
    seconds = time.perf_counter() - t0
    paired = PairedRun.of(traj, record_steps(cfg.steps, cfg.n_records, cfg.spacing))
    if keep is not None:
        paired = dataclasses.replace(paired, params=measure_step.widen(params, paired.params, keep),
                                     twin=measure_step.widen(twin, paired.twin, keep))
    descent = plain_gd(cfg)  # GD stays only where the MSE's flow does: then the end's stationarity
    t = np.asarray(traj.t, dtype=float)
    if cfg.gd:
        trainer, predicted = "GD", np.interp(t, pred_t, pred_loss, right=np.nan)  # nan past a curve cut short
    else:  # no flow curve to compare with: the prediction is for GD
        trainer, predicted = f"{cfg.label} (κ = {cfg.degree:g})", np.full(t.shape, np.nan)
    sp = split(paired.params, X, a, fit)
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
                  end=None if not descent else stationarity(
                      paired.params, paired.twin, X, Y, a, max(0.5 * modes.y_power, 1e-300), floor, modes.B),
                  gap_reference=L0, seconds=seconds, time_budget=budget, by_default=by_default)
    move = relative_movement(params, paired.params)
    reg = dataclasses.replace(reg, movement=move, rich=move[0] >= RICH_MOVEMENT,
                              alignment0=row_alignment(params[0].matrix, dirs),
                              alignment=row_alignment(paired.params[0].matrix, dirs))
    lam_end = measure_step.pair_sharpness(paired.params, paired.twin, X, Y, a) if certify else None
    return tr, reg, lam_end


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
                       scale=tr.gap_reference, seconds=tr.seconds, budget=tr.time_budget, longer=longer)
    return dataclasses.replace(j, notes=j.notes + (f"twin optimiser: {note}",)) if note else j


def judge_measured(f: Facts, *, gap: float, step: int, t: float, steps_run: int, steps_asked: int,
                   movement: float, alignment: float, alignment0: float, exact_structure: bool,
                   kind: str = "training, measured", trainer: str = "GD",
                   over: str = "every step", approximate: str = "", end: Stationarity | None = None,
                   scale: float = 1.0, seconds: float = float("nan"), budget: float | None = None,
                   longer: str = MEASURE) -> Judgement:
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
    at the rate measured); a gap above 0.3% in the steps run says "not" whatever the budget."""
    ev, fails, notes = structural(f)
    context = fails[:]  # the theory does not cover these cases, but the measured gap decides
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
        bound = end.bound() if end.stationary or np.isfinite(end.floor) else max(end.loss, end.twin_loss)
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
    if stopped:
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
        return judgement(kind, NOT, why + context, ev, notes)
    if stopped and not final:
        whole = seconds / max(steps_run, 1) * steps_asked
        return judgement(kind, UNDECIDED, [
            f"the time budget ran out after {spent}: the gap {gap:.3g} ({of(scale)}) is within 0.3% for "
            f"those steps only and nothing bounds it after them; measure longer (about {whole:.3g} s at "
            f"this rate): {longer.format(seconds=f'{1.5 * whole:.2g}')}"], ev, notes)
    if exact_structure and gap <= ROUND_OFF:
        return judgement(kind, EXACT, [], ev, notes,
                         f"on its twin to round-off at {over} ({gap:.2g} of {GAP_REF}){final}")
    return judgement(kind, EFFECTIVE, [], ev, notes, f"within {100 * gap:.2g}% of {GAP_REF} of its twin at "
                     f"{over} (max at step {step}){final}")


def _batches(cfg: TrainConfig) -> tuple[str, str]:
    """A config's minibatches, weight decay and loss where they differ from the defaults, as
    keywords of the call and as CLI options (the CLI has none for decay or another loss: None)."""
    kw, cli = "", ""
    if cfg.batch_size is not None:
        kw += f", batch_size={cfg.batch_size}" + ("" if cfg.mirrored_batches else ", mirrored_batches=False")
        cli += f" --batch-size {cfg.batch_size}" + ("" if cfg.mirrored_batches else " --random-batches")
    if cfg.weight_decay != 0 or cfg.loss != "mse":
        kw += (f", weight_decay={cfg.weight_decay:g}" if cfg.weight_decay != 0 else "") + (
            f", loss={cfg.loss!r}" if cfg.loss != "mse" else "")
        cli = None
    return kw, cli


def dynamics_of(given: TrainConfig | None, cfg: TrainConfig | None) -> Dynamics:
    """The training a prediction is for, and how to measure it: gradient flow without a training
    config (measured by ``train=True``); GD at the config's step (``train=True`` when the user
    asked for the default, else the ``GDConfig`` given); any other optimiser by its name (its
    twin is exact, but no closed form predicts it: measured by ``train=`` that optimiser). The
    call keeps the config's batches, weight decay and loss (``_batches``)."""
    if cfg is None:
        return FLOW
    kw, opts = _batches(cfg)
    if cfg.gd:
        if given is None:
            return Dynamics(f"GD at lr={cfg.lr:.3g}", "True", True, "--train")
        plain = plain_gd(cfg)  # minibatches, weight decay or another loss: not the flow of the MSE
        extra = ("" if plain else
                 f" (batch {cfg.batch_size}, weight decay {cfg.weight_decay:g}, {cfg.loss} loss)")
        cli = ("" if opts is None else f"--train-steps {cfg.steps} --lr {cfg.lr:g}"
               + (f" --optimiser sgd{opts}" if cfg.batch_size is not None else ""))
        call = f"GDConfig(lr={cfg.lr:g}, steps={cfg.steps}{kw})"
        return Dynamics(f"GD at lr={cfg.lr:.3g}{extra}", call, plain, cli)
    name = cfg.label
    cli = (f"--train-steps {cfg.steps} --optimiser {name}" + (f" --lr {cfg.lr:g}" if cfg.lr else "") + opts
           if name in NAMED and opts is not None else "")
    call = name if not kw else f"TrainConfig(optimiser={name}, steps={cfg.steps}{kw})"
    return Dynamics(name, call, False, cli)


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
