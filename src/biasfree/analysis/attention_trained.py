"""Attention's training measured beside its twin (docs/verdict.md "Attention models"): the run,
its record and its answer, as :mod:`~biasfree.analysis.measured` for dense nets.

The model and its twin (:func:`~biasfree.core.attention_twin.merged_to_twin`; a separate model
merged first, ``W_h = K_hᵀQ_h``) run the same optimiser on the same sequences in one
:func:`~biasfree.dynamics.trainer.train` loop (``twin=(twin, z data)``), the gap carried over
every step, the one definition dense models use (docs/verdict.md),

    ``gap = max_k |L_k − L̃_k| / L_ref``,   L_ref = max(L(θ₀), ½<y_q²>),

weighed against the paper's 0.3%. A run is what ``train=`` names (:func:`run_beside_twin`,
:func:`answer`), GD on the default schedule (``train=True``, :func:`gd_run`), or, where the
prediction is undecided, the default measurement (:func:`measure_by_default`: the schedule, budget and
early stop of :mod:`~biasfree.analysis.attention_measure`).
"""

from __future__ import annotations

import dataclasses
import time

import jax
import numpy as np

from ..core.attention_twin import merged_to_twin
from ..core.data import Dataset
from ..dynamics import GDConfig, TrainConfig
from ..dynamics.trainer import run_checked as train_run
from . import attention_measure as am
from . import gap, measure_step
from . import verdict as vd
from .measured import Decided, end_bound, measure_longer, seconds_a_step
from .plan import budget_of
from .regime import MAX_STEPS
from .report import Training
from .verdict import PAPER_LEVEL, ROUND_OFF, UNDECIDED, evidence

GD_CALL = "analyse(model, data, train=bf.GDConfig(lr=..., steps=...))"
"""The call that measures GD from the given weights (no training config given)."""
NORMALISER = "max(L(θ₀), ½<y_q²>)"
"""What every gap is a fraction of (:func:`~biasfree.analysis.gap.reference`, the one
normaliser dense models use), as the evidence names it."""


def mirror_evidence(rep) -> list:
    """The label-mirror violation of ``rep``'s sequences against round-off, the evidence line every
    training answer starts with (:func:`~biasfree.analysis.attention.label_mirror_violation`)."""
    return [evidence("label-mirror violation of the sequences (relative to the largest row of [X, Y])",
                     rep.label_mirror_violation,
                     ROUND_OFF,
                     "every sequence has its copy with y → −y, so the gradients of u, b cancel pair by pair "
                     "(§10.2)")]


def training_name(cfg: TrainConfig | None) -> str:
    """The training a judgement is about, as its answer names it: "GD or gradient flow" without a
    config, "GD at lr=η", else the optimiser's name (the config's ``label``), with its batches
    when it has them ("adam, batches of 32 sequences at random")."""
    if cfg is None:
        return "GD or gradient flow"
    name = f"GD at lr={cfg.lr:.3g}" if cfg.gd else cfg.label
    return name + ("" if cfg.batch_size is None else f", batches of {cfg.batch_size} sequences at random")


def measure_call(cfg: TrainConfig | None) -> str:
    """The call that measures the training ``cfg`` stands for, with its optimiser and batches."""
    if cfg is None:
        return GD_CALL
    if cfg.gd and cfg.batch_size is None:
        return f"analyse(model, data, train=bf.GDConfig(lr={cfg.lr:g}, steps={cfg.steps}))"
    batches = "" if cfg.batch_size is None else f", batch_size={cfg.batch_size}, mirrored_batches=False"
    opt = f"optax.sgd({cfg.lr:g})" if cfg.gd else cfg.label
    return f"analyse(model, data, train=bf.TrainConfig(optimiser={opt}, steps={cfg.steps}{batches}))"


def longer_call(cfg: TrainConfig) -> str:
    """The call that measures ``cfg`` longer, ``{seconds}`` to fill in."""
    return measure_call(cfg)[:-1] + ", time_budget={seconds})"


def _measure(layer, data: Dataset, zd: Dataset, cfg: TrainConfig, budget, progress, stop=None, every=True):
    """The model and its twin (on its own data, the cubic features ``zd`` of the same sequences)
    trained by the same optimiser in one loop, the gap carried over every step, the losses
    recorded at every step (``every``; else at ``cfg``'s records): the trajectory. α = 1: the
    attention's twin map has c = 1 (same step, same optimiser, §10.2); the attention layer does
    not read α. ``stop``: :class:`~biasfree.analysis.measured.Decided` of a default measurement."""
    run = (dataclasses.replace(cfg, n_records=cfg.steps + 1) if every else cfg)._with_alpha(1.0)
    return train_run((layer,), data, run, twin=(merged_to_twin(layer), zd), observables="loss",
                     time_budget=budget, progress=progress, stop=stop)


def run_beside_twin(rep, layer, ds, zd, cfg, budget, progress, *, stop=None, every=True, ends=None,
                    by_default=False, stated: float | None | str = "budget"):
    """``rep`` with the run from ``layer`` beside its twin (one loop, within ``budget``
    seconds): the losses at its records, the gap the loop carried over every step,
    ``max_k |L_k − L̃_k|``, over ``loss_ref``, the last weights of both, the seconds it took, whether
    ``stop`` ended it, and where ``ends`` (:func:`~.attention_measure.ends`) finds the end; the
    budget the answer states (``stated``; "budget": ``budget``)."""
    t0 = time.perf_counter()
    traj = _measure(layer, ds, zd, cfg, budget, progress, stop, every)
    seconds = time.perf_counter() - t0
    steps = int(traj.stats["steps"])
    lr = float(np.asarray(traj.stats["lr"]))  # t = η k (t = k when the optimiser hides η)
    ks = np.rint(np.asarray(traj.t, float) / (lr if np.isfinite(lr) and lr > 0 else 1.0)).astype(int)
    final = jax.tree_util.tree_map(np.asarray, traj.params[0])
    twin = jax.tree_util.tree_map(np.asarray, tuple(traj.twin.params))
    return dataclasses.replace(rep, loss=np.asarray(traj.loss), twin_loss=np.asarray(traj.twin.loss),
                               gap=float(traj.twin_gap) / rep.loss_ref, gap_step=int(traj.twin_gap_step),
                               trained=final, trained_twin=twin, steps_run=steps, record_steps=ks,
                               seconds=seconds, budget=budget if stated == "budget" else stated,
                               step_seconds=seconds_a_step(traj),
                               decided=stop is not None and stop.said,
                               end=None if ends is None else ends((final,), twin), by_default=by_default)


def answer(rep, cfg: TrainConfig, kind: str, longer: str) -> vd.Judgement:
    """The answer of a measured run (``rep`` trained by ``cfg``): the gap over every step against
    0.3% of ``loss_ref``; where the run ended within the bound no later descent can leave
    (``rep.end``, :mod:`.attention_measure`) the answer holds past it; a run the time budget
    stopped before its steps with neither a gap past 0.3% nor that bound is undecided, naming
    ``longer``, the call that runs longer (its ``{seconds}`` filled in)."""
    name = training_name(cfg)
    ev = mirror_evidence(rep)
    measured = evidence(f"loss gap to the twin under {name}, max_k |L_k − L_twin,k| / {NORMALISER} over "
                        "every step", rep.gap, PAPER_LEVEL,
                        f"the paper's 0.3%; maximum at step {rep.gap_step}; "
                        f"{NORMALISER} = {rep.loss_ref:.4g}")
    ev.append(measured)
    final = ""
    if rep.end is not None:
        floored = np.isfinite(rep.end.floor)
        how = ("max(|L − L_twin|, max(L, L_twin) − L*), L* the least squares on the cubic feature Φ"
               if floored else "max(L, L_twin), converged")
        after = evidence(f"gap to the twin after the run, bound {how} (fraction of {NORMALISER})",
                         end_bound(rep.end) / rep.loss_ref, PAPER_LEVEL,
                         "descent keeps both losses in [L*, max(L, L_twin)] (no attention weights and no "
                         "twin fit better than the best linear map of Φ), so longer training keeps the gap "
                         "within this")
        ev.append(after)
        final = "" if not after.passed else (
            f"; the run ended within its bound ({after.value:.2g} of {NORMALISER}), so longer training keeps "
            f"the gap within it: the answer holds past step {rep.steps_run}")
    stopped = rep.steps_run < cfg.steps
    spent = (f"{rep.steps_run} of {cfg.steps} steps in {rep.seconds:.3g} s"
             + ("" if rep.budget is None else f" (time budget {rep.budget:.3g} s)"))
    notes = []
    if stopped and rep.decided:
        notes.append(f"ended once decided, after {spent}: " + (
            "the gap passed 0.3%, which no later step can undo" if not measured.passed else
            "the run's weights were within the bound no later descent can leave"))
    elif stopped:
        notes.append(f"stopped by the time budget after {spent}: the gap is the maximum over the steps run")
    if not measured.passed:
        why = f"trained gap {100 * rep.gap:.3g}% of {NORMALISER} at step {rep.gap_step} > 0.3%"
        return vd.judgement(kind, vd.NOT, [why], ev, tuple(notes))
    if stopped and not final:
        return vd.judgement(kind, UNDECIDED, [
            f"the time budget ran out after {spent}: the gap {rep.gap:.3g} of {NORMALISER} is within 0.3% "
            "for those steps only and nothing bounds it after them; "
            + measure_longer(rep.seconds, cfg.steps, rep.step_seconds, longer)], ev, tuple(notes))
    exact = rep.kind == "merged" and rep.on_twin and ev[0].passed
    if exact and rep.gap <= ROUND_OFF:
        return vd.judgement(kind, vd.EXACT, [], ev, tuple(notes),
                            f"on its twin to round-off at every step ({rep.gap:.2g} of {NORMALISER}){final}")
    return vd.judgement(kind, vd.EFFECTIVE, [], ev, tuple(notes),
                        f"within {100 * rep.gap:.2g}% of {NORMALISER} of its twin's loss at every step "
                        f"(max at step {rep.gap_step}){final}")


def ends_of(layer, ds: Dataset, zd: Dataset):
    """``(ends, L*)``: :func:`~.attention_measure.ends` for ``layer``'s runs on ``ds`` (its twin on
    ``zd``), with the floor L* of :func:`~.attention_measure.cubic_floor` (NaN beyond its size)."""
    X, Y = np.asarray(ds.X), np.asarray(ds.Y)
    floor, floor_tol = am.cubic_floor(X, Y, layer)
    terms = 3 * (layer.d + 1) + layer.n_ctx + 1 + layer.heads + 5  # the sums in one prediction
    return am.ends(X, Y, np.asarray(zd.X), floor, floor_tol, max(gap.zero_loss(Y), 1e-300), terms), floor


def gd_run(rep, layer, ds: Dataset, zd: Dataset, budget, progress, kind: str, early: bool,
            by_default: bool):
    """GD on the default schedule from ``layer`` (:func:`~.attention_measure.schedule`: the step of
    the sharpness measured there, which counts against ``budget``, to the default horizon), beside
    the twin, its stability checked at the end (:func:`~.measure_step.settle` reruns at a smaller
    step where the sharpness grew past half the limit, :func:`~.measure_step.certify`): a default
    measurement (``by_default``: log-spaced records, uncapped under a budget, ended once decided
    when ``early``) or ``train=True`` (linear records, at most
    :data:`~biasfree.analysis.regime.MAX_STEPS` steps). ``(report, answer, config run, what ran
    in words)``."""
    t0 = time.perf_counter()  # the floor and the step count against the budget (the step again at the end)
    ends, floor = ends_of(layer, ds, zd)
    level = PAPER_LEVEL * rep.loss_ref  # 0.3% of L_ref, in loss units (the loop's gap)
    cap = MAX_STEPS if budget is None or not by_default else None  # a default run: its budget ends it
    lr, steps, T, horizon = am.schedule(layer, ds, zd, cap)
    spent = time.perf_counter() - t0

    def go(c, b, t=0.0):
        stop = Decided(level, ends, floor) if early else None
        loop = measure_step.budget_left(b, t) if t else b  # what measuring the step left
        r = run_beside_twin(rep, layer, ds, zd, c, loop, progress, stop=stop, every=False, ends=ends,
                            by_default=by_default, stated=budget)
        return r, None, am.sharpness(r.trained, r.trained_twin, ds, zd)

    start = GDConfig(lr=lr, steps=steps, n_records=201, spacing="log" if by_default else "linear")
    r, _, lam_end, run = measure_step.settle(go, start, budget, spent)
    j = answer(r, run, kind.format(training_name(run)), longer_call(run))
    j = measure_step.certify(j, run, lam_end, r.steps_run)  # η λ̂ ≤ 2 at the end, else no evidence
    what = (f"GD at η = {run.lr:.3g} (a quarter of the stability limit 2/λ̂, λ̂ the sharpness of the "
            f"model and its twin at these weights, Lanczos; or T/{measure_step.MIN_STEPS}), {run.steps} "
            f"steps to t = {run.lr * run.steps:.4g} (the horizon T = {T:.4g}: {horizon})")
    return r, j, run, what


def measure_by_default(rep, layer, ds: Dataset, zd: Dataset, cfg: TrainConfig | None, time_budget,
                progress, kind: str, predicted: vd.Judgement, early: bool):
    """A prediction left undecided (``predicted``), measured by default (module doc,
    :mod:`.attention_measure`): the model ``layer`` and its twin trained on beside each other,
    by ``cfg`` when one was named (within ``time_budget``), else by GD at the measured step to
    the default horizon (:func:`~.attention_measure.schedule`, its stability checked at the end,
    :func:`~.measure_step.settle`) within :func:`~.plan.budget_of` the budget; ended once
    decided when ``early`` (:class:`~.measured.Decided`: GD on the MSE reads the end's bound,
    any other optimiser only the gap). ``kind`` the answer's, ``{}`` the training's name.
    ``(the report with the run, the answer, the config run)``."""
    if cfg is None:
        budget = budget_of(time_budget)
        r, j, run, what = gd_run(rep, layer, ds, zd, budget, progress, kind, early, True)
    else:
        ends, floor = ends_of(layer, ds, zd)
        level = PAPER_LEVEL * rep.loss_ref  # 0.3% of L_ref, in loss units (the loop's gap)
        budget, run = time_budget, cfg
        flow = cfg.plain_gd  # plain full-batch GD on the MSE: the end's bound holds under it
        stop = Decided(level, ends if flow else None, floor) if early else None
        r = run_beside_twin(rep, layer, ds, zd, cfg, budget, progress, stop=stop,
                            ends=ends if flow else None, by_default=True)
        j = answer(r, cfg, kind.format(training_name(cfg)), longer_call(cfg))
        what = f"{training_name(cfg)} (the training named), {cfg.steps} steps"
    names = {e.name for e in j.evidence}
    before = tuple(e for e in predicted.evidence if e.name not in names)
    why = predicted.reasons[0].split("; measure it")[0]
    j = dataclasses.replace(j, evidence=before + j.evidence, notes=j.notes + (
        f"measured by default, since the prediction was undecided ({why}): {what}, from these weights "
        f"beside the twin, {r.steps_run} of {run.steps} steps in {r.seconds:.3g} s (time budget "
        f"{'none' if budget is None else f'{budget:g} s'}); train=False predicts only",))
    return r, j, run


def as_training(rep, cfg: TrainConfig) -> Training:
    """The measured run as a dense analysis's :class:`~.report.Training` (gaps over ``loss_ref``;
    the dense-only parts, the even energy, the gradient-flow curve and the trained net's split,
    NaN)."""
    eta = cfg.lr if cfg.gd else 1.0
    t = rep.record_steps * eta
    nan, n = float("nan"), rep.loss.size
    return Training(cfg, t, rep.loss, rep.twin_loss, np.full(n, nan), np.full(n, nan), nan,
                    rep.gap, nan, nan, nan, nan, nan, (rep.trained,), rep.gap_step, eta * rep.gap_step,
                    rep.steps_run, training_name(cfg), end=rep.end, gap_reference=rep.loss_ref,
                    seconds=rep.seconds, time_budget=rep.budget, by_default=rep.by_default,
                    decided=rep.decided)


__all__ = ["answer", "as_training", "ends_of", "gd_run", "longer_call", "measure_by_default", "measure_call",
           "mirror_evidence", "run_beside_twin", "training_name"]
