"""The training :func:`~biasfree.analysis.analyse.analyse` answers about, resolved once
(docs/verdict.md): what every stage is handed (:class:`Setting`), and for one net the
:class:`Plan`: the training a prediction is for (a :class:`~biasfree.analysis.verdict.Dynamics`),
the run measured as asked, and the run that measures by default where the prediction is
undecided (each a :class:`Run`: its config in final form, α the model's and κ set, its
dynamics, its time budget).

``train=`` as :func:`resolve` reads it: None/False nothing to run; a
:class:`~biasfree.dynamics.train_config.TrainConfig` as ``analyse`` made it final (α the model's,
κ set); True GD at a quarter of the stability limit of the sharpness measured at the given
weights, to the default horizon (:func:`gd_run` of the net's :func:`schedule`). A default
measurement is that GD run on log-spaced records within :data:`MEASURE_BUDGET` seconds, or the
optimiser named with ``train=``, within ``analyse``'s ``time_budget``, as the run it was named
for. Each net's default schedule is measured once, when first asked, and kept: the predicted
growth term (:mod:`~biasfree.analysis.predicted`) and the default measurement read the same
one (the time it takes counts against the run's budget when the run is the first to ask).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..core.layers import Params
from ..dynamics import GDConfig, TrainConfig
from ..dynamics.optimiser_twin import NAMED
from . import measure_step
from . import regime as rg
from .function_now import Context
from .report import NetReport
from .verdict import FLOW, Dynamics

MEASURE_BUDGET = 10.0
"""Seconds of training a default measurement allows itself (or ``analyse``'s ``time_budget`` if
less). With the loop's geometric chunks (:mod:`~biasfree.analysis.measured`) the run takes at
most about 1.8× this, so that with the rest of ``analyse`` a 784→256→10 net on 10,000 inputs
gets its answer in about 30 s on 2 cores (benchmarks/bench_analyse.py, row "alone")."""
PREDICTED = "training by {}, predicted (not measured)"
"""The kind of the answer on training when it is predicted, with the dynamics it is for
(``Dynamics.name``, :class:`~biasfree.analysis.verdict.Dynamics`; measured:
``"training by ..., measured"``)."""


@dataclass(frozen=True)
class Setting:
    """What every stage of ``analyse`` is handed, checked once: the data ``X``, ``Y`` and slope
    ``a``, what they say (``ctx``), the predicted curve's ``t_max`` (None: from the modes) on
    ``n_times`` points, the ``budget`` in seconds (None: no limit) and ``progress``."""

    X: np.ndarray
    Y: np.ndarray
    a: float
    ctx: Context
    t_max: float | None
    n_times: int
    budget: float | None
    progress: Callable[[int, int], None] | None


@dataclass(frozen=True)
class Run:
    """One run measured beside the twin: ``cfg`` in final form, ``dyn`` the training it is
    (named in the answer; ``dyn.flow``: plain descent, whose end's stationarity bounds the gap
    after it), ``budget`` seconds (None: no limit), ``by_default`` when it measures an undecided
    prediction nobody asked to measure. A default GD measurement has ``cfg`` and ``dyn`` None
    until it runs: ``make()`` then measures its step (:func:`default_gd`). ``twin`` the twin's
    optimiser of an optax ``cfg``, built with its κ
    (:func:`~biasfree.dynamics.optimiser_twin.with_degree`; None for GD)."""

    cfg: TrainConfig | None
    dyn: Dynamics | None
    budget: float | None
    by_default: bool = False
    make: Callable[[], TrainConfig] | None = None
    twin: object = None


@dataclass(frozen=True)
class Plan:
    """The training asked of one net: ``dyn`` what a prediction is for, ``kind`` the answer's
    kind (:data:`PREDICTED`, "training by ..., measured", or the history's), ``run`` the run
    measured as asked (None: predicted), ``fallback`` the run that measures a prediction left
    undecided (None: it stays undecided), ``note`` how κ was found (empty for GD), ``schedule``
    the net's default GD schedule (:func:`schedule`: measured once, when first asked)."""

    dyn: Dynamics
    kind: str
    run: Run | None
    fallback: Run | None
    note: str = ""
    schedule: Callable[[], tuple[float, int]] | None = None


def schedule(params: Params, net: NetReport, s: Setting) -> Callable[[], tuple[float, int]]:
    """The default GD schedule from ``params`` (measured ``net``) on the data of ``s``: ``(η, K)``,
    η a quarter of the stability limit of the sharpness measured at ``params`` and K the steps
    to the default horizon, uncapped (:func:`~biasfree.analysis.measure_step.schedule`),
    measured when first asked and kept: ``train=True``'s run, the predicted growth term and a
    default measurement all read this one measurement (each a Lanczos run on the Hessian)."""
    a0 = float(np.linalg.norm(net.beta_eff, 2))

    @functools.cache
    def measured() -> tuple[float, int]:
        lr, _, need = measure_step.schedule(params, s.X, s.Y, s.a, s.ctx.modes, a0)
        return lr, need
    return measured


def gd_run(sched: Callable[[], tuple[float, int]], a: float, spacing: str = "linear",
           max_steps: int | None = rg.MAX_STEPS) -> TrainConfig:
    """GD at the step η of ``sched()`` (:func:`schedule`) for its K steps, at most ``max_steps``
    (None: the time budget ends it), α = ``a``, 201 records at ``spacing``."""
    lr, need = sched()
    return GDConfig(alpha=a, lr=lr, steps=need if max_steps is None else min(need, max_steps), n_records=201,
                    spacing=spacing)


def budget_of(time_budget: float | None) -> float | None:
    """A default measurement's budget: :data:`MEASURE_BUDGET`, or ``time_budget`` if less
    (None: no limit, as the caller asked)."""
    return None if time_budget is None else min(time_budget, MEASURE_BUDGET)


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


def dynamics_of(cfg: TrainConfig | None, default: bool = False) -> Dynamics:
    """The training a prediction is for, and how to measure it: gradient flow without a training
    config (measured by ``train=True``); GD at the config's step (``train=True`` when ``cfg`` is
    the default GD, ``default``, else the ``GDConfig`` given); any other optimiser by its name (its
    twin is exact, but no closed form predicts it: measured by ``train=`` that optimiser). The
    call keeps the config's batches, weight decay and loss (``_batches``)."""
    if cfg is None:
        return FLOW
    kw, opts = _batches(cfg)
    if cfg.gd:
        if default:
            return Dynamics(f"GD at lr={cfg.lr:.3g}", "True", True, "--train")
        plain = cfg.plain_gd  # minibatches, weight decay or another loss: not the flow of the MSE
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


def plan(cfg: TrainConfig | None, dyn: Dynamics, fallback: TrainConfig | Callable[[], TrainConfig] | None,
         s: Setting, note: str = "", kind: str | None = None, twin=None,
         sched: Callable[[], tuple[float, int]] | None = None) -> Plan:
    """Measure ``cfg`` as asked (None: predict, for ``dyn``), and where that prediction is
    undecided measure ``fallback`` (None: leave it undecided; a callable: the default GD run,
    made when it runs, :func:`default_gd`): by GD within :func:`budget_of`
    the budget when nothing was asked (``dyn`` gradient flow), else by ``dyn`` within it.
    ``kind`` the answer's (None: :data:`PREDICTED`, or measured, for ``dyn``); ``twin`` the twin's
    optimiser of an optax ``cfg`` or ``fallback`` (:class:`Run`); ``sched`` the net's default GD
    schedule (:func:`schedule`)."""
    kind = kind or (PREDICTED.format(dyn.name) if cfg is None else f"training by {dyn.name}, measured")
    run = None if cfg is None else Run(cfg, dyn, s.budget, twin=twin)
    if fallback is None or cfg is not None:
        return Plan(dyn, kind, run, None, note, sched)
    if dyn is FLOW:  # nothing asked: default GD within the default budget, its step measured when it runs
        by_default = Run(None, None, budget_of(s.budget), True, make=fallback)
    else:  # the optimiser given, within the time_budget given for it
        by_default = Run(fallback, dyn, s.budget, True, twin=twin)
    return Plan(dyn, kind, run, by_default, note, sched)


def default_gd(sched: Callable[[], tuple[float, int]], s: Setting) -> Callable[[], TrainConfig]:
    """A default measurement's GD run at the schedule ``sched`` (:func:`schedule`: the step of the
    sharpness measured at the net's weights, once), made when it runs: :func:`gd_run` on log-spaced
    records, uncapped under a time budget (the budget ends it)."""
    cap = rg.MAX_STEPS if s.budget is None else None
    return lambda: gd_run(sched, s.a, "log", cap)


def resolve(train: TrainConfig | bool, note: str, measure: bool, s: Setting, params: Params, net: NetReport,
            init: Params | None = None, init_net: NetReport | None = None, twin=None
            ) -> tuple[Plan, Plan | None]:
    """The plans for the given net ``params`` (measured ``net``) and for the history from the
    weights ``init`` (measured ``init_net``; None: no history), resolved once: ``train`` the
    user's config in final form (α the model's, κ set, ``note`` how, ``twin`` its twin's
    optimiser, each :func:`~biasfree.dynamics.optimiser_twin.with_degree`'s), or True (the
    default GD, :func:`gd_run` of the net's :func:`schedule`), or False (nothing to run); and the
    training a prediction is for (:func:`dynamics_of`). With an init, the run asked for is the
    history's, and training from the given weights is predicted; without a run asked for, the
    history is predicted for gradient flow. With ``measure``, an undecided prediction is
    measured by default: the given optimiser, else GD from the weights it is about."""
    sched = schedule(params, net, s)
    cfg = train if isinstance(train, TrainConfig) else gd_run(sched, s.a) if train else None
    dyn = dynamics_of(cfg, default=train is True)
    fallback = None if not measure else (cfg or default_gd(sched, s))
    given_plan = plan(cfg if init is None else None, dyn, fallback, s, note, twin=twin, sched=sched)
    if init_net is None:
        return given_plan, None
    again = dyn if cfg else FLOW
    kind = (f"how the net got here: training from the init by {again.name}, "
            + ("measured" if cfg else "predicted"))
    sched0 = schedule(init, init_net, s)
    fallback0 = default_gd(sched0, s) if measure and cfg is None else None
    return given_plan, plan(cfg, again, fallback0, s, note, kind, twin, sched0)
