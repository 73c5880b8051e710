"""Is *your* network effectively linear? One call from a model and data to a graded verdict.

:func:`analyse` measures on the given data what docs/theory.md says decides the answer:
the data's symmetry (§2.1) and mode strengths s_i of ``Σ_yx Σ_xx^{-1/2}``; the net's
depth, widths, slope α, biases and its split ``f = f_odd + f_even`` (§1.2:
``even_fraction = <||f_even||²>/<||f||²>``, ``odd_nonlinear_fraction =
min_β <||f_odd − βᵀx||²>/<||f_odd||²>``, ``nonlinear_fraction`` the squared distance from f
to the nearest linear map over <||f||²>); the regime (§6.3); the prediction from the
*linear twin* (§2.4; depth L > 2: the approximate odd-part twin, §4.1), its learning curve,
the floors and a predicted gap (§6.4); optionally the net trained by GD beside its twin
(:func:`biasfree.dynamics.trainer.train` with ``twin``). Losses are the package's half mean squared error
``L = (1/2N) Σ_n ||y_n − f(x_n)||²``. The verdict: :mod:`biasfree.analysis.verdict` (§6).
Beside it, reported and not judged: the local linear analysis of the net as given (§8:
homogeneity, Euler's f(x) = J(x)x, the bias term, J's effective dimension) at up to
:data:`~biasfree.analysis.measurements.LOCAL_INPUTS` of the inputs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .. import _validate as validate
from .. import theory
from ..core import nets
from ..core.blocks import _outputs
from ..core.conv import drop_zero_biases, is_conv
from ..core.data import check_data
from ..core.layers import Params, _scale_params
from ..core.nets import depth, has_bias, widths
from ..core.precision import precise
from ..core.symmetry import _asymmetry, _mirror_violation, _stack, max_row_norm
from ..core.twin import _slope_factor, _twin_scales
from ..dynamics import TrainConfig, record_steps
from ..dynamics.optimiser_twin import with_degree
from ..dynamics.train_config import as_train_config
from ..expressivity.decomposition import energy
from ..expressivity.floors import _dataset_floor
from ..theory.modes import _data_modes
from ..theory.reference import _Known, _product, _reference_curve
from . import measured as ms
from . import regime as rg
from . import verdict as vd
from .attention import analyse_attention
from .attention_import import is_attention_model
from .gap import reference, zero_loss
from .interop import Model, as_model
from .measured import dynamics_of
from .measurements import data_arrays, local_report, split
from .moments import Moments, linear_floor, moments
from .report import Analysis, DataReport, History, NetReport, Prediction, Regime, Training
from .stationary import stationarity
from .structure import PAIRS, exact_structure
from .verdict import PAPER_LEVEL, ROUND_OFF
from .verify import check_reading

DEFAULT_TIME_BUDGET = 120.0
"""Seconds of training ``analyse(train=...)`` allows itself unless told otherwise."""
ASYMMETRY_POINTS = 2000
"""The data's asymmetry (reported, not judged) is averaged over at most this many evenly
spaced points, each one's nearest mirror sought among all N: O(N·D) per point."""
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
PREDICTED = "training by {}, predicted (not measured)"
"""The kind of the answer on training when it is predicted, with the dynamics it is for
(``Dynamics.name``, :class:`~biasfree.analysis.verdict.Dynamics`; measured:
``"training by ..., measured"``)."""
__all__ = ["Analysis", "analyse"]


# ----------------------------------------------------------------- the call


@dataclass(frozen=True)
class _Context:
    """What the data say, measured once: the report (with the mirror violations and the
    target's even share), the modes and the exact floor."""

    report: DataReport
    modes: theory.Modes
    floor: float | None
    moments: Moments


def _context(X, Y, a, source) -> _Context:
    mo = moments(X)  # XᵀX/N and its eigh once; the least-squares fits from them
    lam = mo.lam
    modes = _data_modes(X, Y, 0.0, whiten=True, gram=(mo.Sxx, (mo.lam, mo.W)))  # X, Y checked by analyse
    asym = _asymmetry(_stack(X, Y), ASYMMETRY_POINTS)
    mv = _mirror_violation(X, Y) / max(max_row_norm(X, Y), 1e-300)
    # mv <= ROUND_OFF also bounds asym: asym <= mv² max||z||² / <||z||²> <= N mv² <= ROUND_OFF for N <= 1e10
    x_scale = max(float(np.max(np.linalg.norm(X, axis=1))), 1e-300)
    mv_x = _mirror_violation(X) / x_scale  # the inputs alone: the target's parity is judged apart
    dsf = (_dataset_floor(X, Y, a, vd.NEAR_SYMMETRIC * x_scale, mo.fit) if mv_x <= vd.NEAR_SYMMETRIC
           else None)
    even_t = dsf.even / dsf.power if dsf is not None and dsf.power > 0 else float("nan")
    report = DataReport(n=X.shape[0], d=X.shape[1], p=Y.shape[1], asymmetry=asym, symmetric=mv <= ROUND_OFF,
                        input_rank=int(np.sum(lam > 1e-12 * lam.max())), whitened=modes.whitened,
                        source=source, mirror_violation=mv, modes=modes.s,
                        linear_fraction=modes.linear_fraction, target_even_fraction=even_t,
                        mirror_violation_inputs=mv_x, asymmetry_points=min(X.shape[0], ASYMMETRY_POINTS))
    floor = dsf.value if dsf is not None and mv_x <= ROUND_OFF else None  # exact only then (§1.3)
    return _Context(report, modes, floor, mo)


@dataclass(frozen=True)
class _State:
    """One net measured on the data: its report (the odd/even split included), the
    function-now judgement, its regime and L(θ); :func:`_facts` adds the twin's loss and the
    gradient, for the facts both training answers weigh."""

    net: NetReport
    function: vd.Judgement
    regime: Regime
    loss0: float
    outputs: np.ndarray  # f(X), and ‖∇L‖·‖θ‖, from the split's one pass over the rows
    grad: float | None


def _state(params: Params, X, Y, a, ctx: _Context, kind: str = "function now") -> _State:
    L, c, biased = depth(params), float(_slope_factor(a)), has_bias(params)
    sp = split(params, X, a, ctx.moments.fit, Y)
    svs = tuple(np.linalg.svd(np.asarray(layer.matrix, float), compute_uv=False) for layer in params)
    beta = np.asarray(nets._beta_eff(params, a)) if nets.beta_eff_is_exact(params) else sp.beta
    nonlin = (sp.even + sp.odd_nonlinear) / sp.energy if sp.energy else 0.0
    ranks = tuple(float(nets.effective_rank(s)) if s.any() else 0.0 for s in svs)  # a zero layer: 0
    structure = exact_structure(params)
    net = NetReport(depth=L, widths=widths(params), alpha=a, c=c, has_bias=biased,
                    output_energy=sp.energy, even_fraction=sp.even_fraction,
                    odd_nonlinear_fraction=sp.odd_fraction_nonlinear, even_energy=sp.even,
                    odd_linear_energy=sp.odd_linear, odd_nonlinear_energy=sp.odd_nonlinear,
                    beta_eff=np.asarray(beta), effective_ranks=ranks, singular_values=svs,
                    nonlinear_fraction=nonlin, paired=structure == PAIRS, structure=structure)
    modes = ctx.modes
    s1 = float(modes.s[0]) if modes.s.size else 0.0
    gain = rg.init_gain(params, modes.lam_max, [s[0] if s.size else 0.0 for s in svs])
    ratio = gain / s1 if s1 > 0 else float("inf")
    function = vd.judge_function(has_bias=biased, alpha=a, even_fraction=sp.even_fraction,
                                 odd_nonlinear_of_odd=sp.odd_fraction_nonlinear, nonlinear_fraction=nonlin,
                                 structure=structure, depth=L, kind=kind,
                                 output_ratio=np.sqrt(sp.energy / modes.y_power) if modes.y_power else np.nan)
    loss0 = 0.5 * energy(Y - sp.outputs)
    regime = Regime(init_gain=gain, s1=s1, init_ratio=ratio, small_init=ratio <= vd.SMALL_INIT)
    return _State(net, function, regime, loss0, sp.outputs, sp.grad)


def _facts(st: _State, ctx: _Context, params, X, Y, a, pred: Prediction | None) -> vd.Facts:
    ref = max(0.5 * ctx.modes.y_power, 1e-300)
    d = ctx.report
    still = None if pred is None else stationarity(params, pred.twin, X, Y, a, ref, ctx.floor, ctx.modes.B,
                                                   outputs=st.outputs, grad=st.grad, Sxx=ctx.moments.Sxx)
    return vd.Facts(st.net.depth, a, st.net.has_bias, d.mirror_violation_inputs, d.target_even_fraction,
                    d.linear_fraction, st.regime.init_ratio, st.function, ctx.floor, st.loss0,
                    float("nan") if pred is None else pred.twin_loss0, ref,
                    (rg.gradient_norm(params, X, Y, a) if st.grad is None else st.grad) / ref if still is None
                    else still.grad,
                    st.net.structure, is_conv(params), still)


def _start(init, a: float, params: Params) -> Params:
    """The weights training started from, read like the model, of the same architecture."""
    try:
        m = as_model(init, a)
    except (TypeError, ValueError, OSError) as e:  # OSError: a file that is not there
        raise type(e)(f"init: {e}") from None
    start, _ = drop_zero_biases(m.params)
    same = (len(start) == len(params) and widths(start) == widths(params)
            and all(type(p) is type(q) and np.shape(p.matrix) == np.shape(q.matrix)
                    for p, q in zip(start, params, strict=True)))
    if not same:
        raise ValueError(f"init has widths {widths(start)} but the model has {widths(params)}: give the "
                         "weights training started from, of the model's architecture (same layers)")
    return start


@precise
def analyse(model, data, *, alpha=None, train: TrainConfig | bool | None = None, init=None,
            t_max: float | None = None, n_times: int = 201, time_budget: float | None = DEFAULT_TIME_BUDGET,
            progress: Callable[[int, int], None] | None = None) -> Analysis:
    """Analyse a bias-free (leaky) ReLU net on data: is it effectively linear? Three questions
    answered apart, each with its deciding numbers (module doc; docs/verdict.md): the function
    now; what training from these weights does beside the linear twin; and, given ``init``,
    how the net got here.

    Arguments:

    - ``model``: a torch ``nn.Sequential``, an ``eqx.nn.MLP``, a ``.safetensors``/``.npz`` path,
      a :class:`~biasfree.analysis.interop.Model` or a params tuple
      (:mod:`biasfree.analysis.interop`). Biases that are exactly zero are dropped (the net
      computes the bias-free map); nonzero ones are kept and named.
      A linear-attention model (``MergedAttention``, ``SeparateAttention`` or a torch module
      in :mod:`~biasfree.analysis.attention_import`'s layout) goes to
      :func:`~biasfree.analysis.attention.analyse_attention`.
    - ``data``: ``(X, Y)``, a Dataset, a :func:`~biasfree.core.real_data.load_data` result, a
      file or a bundled name.
    - ``alpha``: the slope α, needed when the model does not state it.
    - ``train``: None (predict; where the theory is silent, measure by default: GD from the
      given weights beside the twin within :data:`~biasfree.analysis.measured.MEASURE_BUDGET`
      seconds), False (predict only), True (gradient descent at a quarter of the
      estimated stability limit, to the default horizon, at most ``regime.MAX_STEPS`` steps), an
      optax optimiser or a factory ``rho -> optimiser`` (1000 steps), or a
      :class:`~biasfree.dynamics.train_config.TrainConfig` (``GDConfig(lr=..., steps=...)``, or
      ``TrainConfig(optimiser=optax.adam(1e-3), steps=500)``): the net is trained beside its
      twin in one loop, the gap measured at every step (``n_records`` sets only the stored
      curve); the config's ``alpha`` is replaced by the model's.
    - ``init``: the weights training started from (any form ``model`` takes, same
      architecture): then the question is how the net got here, and ``train`` (if given) is
      rerun from ``init`` beside the twin; without ``train`` that run is predicted (and measured
      by default where the theory is silent).
    - ``t_max``: horizon of the predicted curve without training (default: from the data's
      modes, bounded), on ``n_times`` points.
    - ``time_budget``: seconds of training at most (None: no limit), and of the predicted
      curve's ODE (at most :data:`CURVE_BUDGET`; a curve cut short says so).
    - ``progress(k, K)``: called as training goes.

    Every argument is checked before the model's kind is read; an attention model refuses
    ``alpha``, ``t_max`` and ``n_times`` by name (it has no slope and no predicted curve).

    Returns an :class:`~biasfree.analysis.report.Analysis`: the data, net, regime, prediction
    and the graded ``verdict`` with its evidence.

    Example::

        import jax, numpy as np, biasfree as bf
        rng = np.random.default_rng(0)
        X = rng.normal(size=(100, 5)); X = np.concatenate([X, -X])   # symmetric inputs
        Y = X @ rng.normal(size=(5, 1))                               # an odd (linear) target
        net = bf.init_gaussian(jax.random.PRNGKey(0), (5, 50, 1), scale=1e-3)
        res = bf.analyse(net, (X, Y), alpha=0.0, train=True)
        res.verdict.level, res.verdict.training.text
    """
    given = as_train_config(train)  # refuses any other kind of value
    if t_max is not None:
        t_max = validate.positive("t_max", t_max, scalar=True, why="the horizon of the predicted curve")
    n_times = validate.integer("n_times", n_times, 2)
    if time_budget is not None:
        time_budget = validate.positive("time_budget", time_budget, scalar=True, why="seconds of training")
    if progress is not None:
        validate.callable_("progress", progress, "a function called as progress(k, K): k of K steps done")
    if is_attention_model(model):  # linear attention and its twin on z (docs/verdict.md "Attention models")
        for name, value, unset in (("alpha", alpha, None), ("t_max", t_max, None), ("n_times", n_times, 201)):
            if value != unset:
                raise ValueError(f"{name}={value!r} does not apply to an attention model (no slope α, no "
                                 f"predicted curve); leave {name} unset")
        return analyse_attention(model, data, train=train, init=init, time_budget=time_budget,
                                 progress=progress)
    m: Model = as_model(model, alpha)
    if m.alpha is None:
        raise ValueError(f"the slope α of {m.source} is unknown (weight files do not store the "
                         "activation): pass alpha (0 ReLU, a in (0, 1) leaky, 1 linear)")
    a = float(m.alpha)
    params, _ = drop_zero_biases(m.params)
    X, Y, source = data_arrays(data)
    check_data(X, Y)
    X, Y = np.asarray(X, float), np.asarray(Y, float)
    for name, A, zero in (("X", X, "every net outputs 0 on it, so nothing can be learnt"),
                          ("Y", Y, "the zero function fits it: nothing to learn or to judge")):
        if not np.any(A):
            raise ValueError(f"data: {name} is all zero ({zero}); check the data")
        if not np.isfinite(np.einsum("ij,ij->", A, A)):  # second moments overflow float64
            raise ValueError(f"data: {name} reaches {np.max(np.abs(A)):.3g}, whose squares overflow float64; "
                             f"rescale it (e.g. {name} / {name}.std())")
    if given is not None and given.loss == "logistic":
        validate.labels("data", Y, "the logistic loss (train.loss='logistic')",
                        " or train with loss='mse'")
    w = widths(params)
    if X.shape[1] != w[0] or Y.shape[1] != w[-1]:
        raise ValueError(f"the net maps {w[0]} inputs to {w[-1]} outputs but the data have "
                         f"X {X.shape} and Y {Y.shape}")
    check_reading(model, params, a, X, names=m.names)  # a live module is run (verify.py)
    validate.finite_forward(params, X, a, nets._forward, name="model", x_name="data X")  # refuse an overflow
    start = None if init is None else _start(init, a, params)
    check_reading(init, start, a, X, what="init")  # None, a file or params: nothing to run
    note = ""
    if given is not None and not given.gd:  # κ measured (or refused) before any compute
        given, note = with_degree(given, a, len(params))
    measure = train is not False  # measure by default where the theory is silent (False: predict only)
    train = given if given is not None else bool(train)

    ctx = _context(X, Y, a, source)
    now = _state(params, X, Y, a, ctx)
    local = local_report(params, X, a)
    cfg = ms.config(train, params, ctx.modes, now.net.c, now.net.beta_eff, a)
    dyn = dynamics_of(given, cfg)  # what a prediction is for, and the call that measures it
    fallback = None if not measure else (  # a default measurement: the given optimiser, else GD
        cfg or ms.config(True, params, ctx.modes, now.net.c, now.net.beta_eff, a, "log"))
    pred, training, reg = _training(params, now, ctx, X, Y, a, cfg if start is None else None, t_max, n_times,
                                    time_budget, progress, note=note, dyn=dyn, fallback=fallback)
    if now.net.has_bias:
        return Analysis(ctx.report, now.net, None, vd.combine(now.function, training), reg, local)
    trained_function = (None if pred.trained is None
                        else _trained_function(pred.trained, a, ctx, "function after training"))
    history = None if start is None else _history(start, params, a, X, Y, ctx, cfg, t_max, n_times,
                                                  time_budget, progress, note, dyn, measure)
    verdict = vd.combine(now.function, training, trained_function,
                         None if history is None else history.judgement,
                         asked=pred.trained is None or not pred.trained.by_default)
    return Analysis(ctx.report, now.net, pred, verdict, reg, local, history)


def _training(params, st: _State, ctx: _Context, X, Y, a, cfg, t_max, n_times, budget, progress,
              kind: str | None = None, note: str = "", dyn: vd.Dynamics = vd.FLOW, fallback=None) -> tuple:
    """Training from ``params`` (measured ``st``) beside its twin: measured with ``cfg`` (the
    prediction then holds it as ``trained``), else predicted; a prediction left undecided is
    measured by ``fallback`` (a default measurement, :mod:`~.measured`) when one is given;
    ``(prediction, its judgement, the regime with the relative gradient)``. A net with biases has
    no twin: no prediction, and the judgement rests on its structure alone. ``dyn`` the training
    a prediction is for."""
    measured = "measured" if cfg is not None else "measured by default"
    kind = kind or (PREDICTED.format(dyn.name) if cfg is None else f"training by {dyn.name}, measured")
    if st.net.has_bias:
        facts = _facts(st, ctx, params, X, Y, a, None)
        return None, vd.judge_predicted(facts, t0_gap=0.0, growth_gap=0.0, kind=kind, dynamics=dyn), st.regime
    curve_budget = CURVE_BUDGET if budget is None else min(CURVE_BUDGET, budget)
    pred = _predict(params, a, X, Y, ctx, st, cfg, t_max, n_times, curve_budget)
    facts = _facts(st, ctx, params, X, Y, a, pred)
    reg = dataclasses.replace(st.regime, relative_gradient=facts.grad_rel)
    if cfg is None:
        judged = vd.judge_predicted(facts, t0_gap=pred.t0_gap, growth_gap=pred.growth_gap,
                                    growth_range=(pred.growth_gap_low, pred.growth_gap_high),
                                    kind=kind, dynamics=dyn)
        if judged.level != vd.UNDECIDED or fallback is None:
            return pred, judged, reg
        cfg, why, predicted = fallback, judged.reasons[0], judged
        if dyn is vd.FLOW:  # nothing asked: default GD within the default budget
            mdyn, budget = dynamics_of(None, fallback), ms.budget_of(budget)
        else:  # the optimiser given, within the time_budget given for it
            mdyn = dyn
        kind = kind.replace(" (not measured)", "").replace(f"by {dyn.name}, predicted",
                                                           f"by {mdyn.name}, {measured}")
    else:
        mdyn, why = dyn, ""
    tr, reg = ms.run(params, pred.twin, pred.t, pred.loss, a, X, Y, cfg, ctx.moments.fit, ctx.floor,
                     ctx.modes, st.loss0, reg, budget, progress, by_default=bool(why))
    longer = f"analyse(model, data, train={mdyn.train}, time_budget={{seconds}})"  # judged fills it in
    judged = ms.judged(facts, tr, reg, kind, note, longer)
    if why:  # the prediction's numbers stay in the evidence (the exact t = 0 gap, the failed assumption)
        names = {e.name for e in judged.evidence}
        before = tuple(e for e in predicted.evidence if e.name not in names)
        judged = dataclasses.replace(judged, evidence=before + judged.evidence, notes=judged.notes + (
            f"measured by default, since the prediction was undecided ({why}), by {mdyn.name} from these "
            f"weights beside the twin, {tr.steps_run} of {cfg.steps} steps in {tr.seconds:.3g} s (time "
            f"budget {'none' if budget is None else f'{budget:g} s'}); train=False predicts only",))
    return dataclasses.replace(pred, trained=tr), judged, reg


def _trained_function(tr: Training, a, ctx: _Context, kind: str) -> vd.Judgement:
    total = tr.final_odd_linear_energy + tr.final_odd_nonlinear_energy + tr.final_even_energy
    return vd.judge_function(has_bias=False, alpha=a, even_fraction=tr.final_even_fraction,
                             odd_nonlinear_of_odd=tr.final_odd_nonlinear_fraction,
                             nonlinear_fraction=(tr.final_even_energy + tr.final_odd_nonlinear_energy)
                             / max(total, 1e-300),
                             structure=exact_structure(tr.params), depth=len(tr.params), kind=kind,
                             output_ratio=np.sqrt(total / ctx.modes.y_power))


def _history(start, params, a, X, Y, ctx: _Context, cfg, t_max, n_times, budget, progress, note,
             dyn: vd.Dynamics, measure: bool = False) -> History:
    """Question (iii): training from ``start`` beside its twin (measured with ``cfg``, else
    predicted for gradient flow, and with ``measure`` measured by default GD where that prediction
    is undecided), and how close the rerun ends to the given net."""
    st = _state(start, X, Y, a, ctx, kind="the init's function")
    dyn = dyn if cfg else vd.FLOW
    kind = (f"how the net got here: training from the init by {dyn.name}, "
            + ("measured" if cfg else "predicted"))
    fallback = (ms.config(True, start, ctx.modes, st.net.c, st.net.beta_eff, a, "log")
                if measure and cfg is None else None)
    pred, judged, reg = _training(start, st, ctx, X, Y, a, cfg, t_max, n_times, budget, progress, kind, note,
                                  dyn, fallback)
    if pred is None or pred.trained is None:
        return History(st.net, pred, judged, reg)
    tr = pred.trained
    f_given, f_rerun = _outputs(params, X, a), _outputs(tr.params, X, a)
    match = energy(f_rerun - f_given) / max(energy(f_given), 1e-300)
    same = ("reproduces it" if match <= vd.PAPER_LEVEL else
            "a default GD run, not the training that made the net" if tr.by_default else
            "does NOT reproduce it: other steps, data or seed?")
    note = (f"the rerun from the init ends {match:.3g} (of <f²>) from the given net ({same}; "
            "reported, not judged)")
    judged = dataclasses.replace(judged, notes=judged.notes + (note,))
    return History(st.net, pred, judged, reg, match)


def _predict(params, a, X, Y, ctx: _Context, st: _State, cfg, t_max, n_times, budget) -> Prediction:
    L, modes, net, loss0 = depth(params), ctx.modes, st.net, st.loss0
    ws, ks = _twin_scales(_slope_factor(a), L)
    twin = _scale_params(params, ws)
    floored = False
    if cfg is not None and cfg.gd:
        t = cfg.lr * record_steps(cfg.steps, cfg.n_records, cfg.spacing)  # the steps the trainer records
    else:
        T, floored = (rg.default_t_max(modes, float(np.linalg.norm(net.beta_eff, 2)), ks, depth=L)
                      if t_max is None else (float(t_max), False))
        t = np.linspace(0.0, T, n_times)
    # what the data and net measurements already hold is not measured again (each pass over X is
    # seconds at 60,000 × 784): Σ_xx once, the even part from split, the mirror violation
    Sxx = ctx.moments.Sxx
    mv_rel = ctx.report.mirror_violation
    mirror = (mv_rel * max(max_row_norm(X, Y), 1e-300), mv_rel)
    known = _Known(Sxx, (net.even_energy, net.output_energy), mirror)
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
                                 weight_decay=0.0, time_budget=budget, known=_Known(Sxx))
        note = (f"APPROXIMATE: depth {L} > 2 has no exact linear twin (docs/theory.md §4.1); the twin is "
                f"the net with σ_α replaced by its odd part c z, weights × c^((L-1)/L) = {ws:.4g}, "
                f"time × c^(2(L-1)/L) = {ks:.4g}; " + curve.note)
    L0 = reference(loss0, zero_loss(Y))  # every gap's normaliser (biasfree.analysis.gap)
    twin0 = 0.5 * energy(Y - X @ _product([np.asarray(la.matrix, float) for la in twin]).T)  # f = W_L⋯W_1 x
    g = (rg.growth_even_energy(params, X, Y, net.c, modes.B)
         if L == 2 and a != 1.0 and modes.linear_fraction > PAPER_LEVEL else rg.GrowthEstimate(0, 0, 0, 1))
    if net.structure == PAIRS:  # a unit and its mirror cancel in f_even, remainder and all: κ = 0
        g = rg.GrowthEstimate(g.energy, g.energy, g.energy, g.gain)
    return Prediction(twin=twin, weight_scale=ws, time_scale=ks, reference=curve.reference, exact=bool(exact),
                      note=note, t=np.asarray(t)[:len(curve.loss)], loss=np.asarray(curve.loss),
                      loss0_net=loss0,
                      linear_floor=linear_floor(ctx.moments, X, Y), two_layer_floor=ctx.floor,
                      t0_gap=abs(loss0 - twin0) / L0, growth_gap=0.5 * g.energy / L0, horizon_floored=floored,
                      growth_gap_low=0.5 * g.low / L0, growth_gap_high=0.5 * g.high / L0, twin_loss0=twin0,
                      gap_reference=L0)
