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

This module is the pipeline's first stage and its driver: it checks every argument and reads
the model (verified by running it, :mod:`~biasfree.analysis.verify`), then hands on to the
function now (:mod:`~biasfree.analysis.function_now`), resolves the training asked for once
into its final form (:func:`~biasfree.analysis.plan.resolve`), and hands that plan to the
training and history stages (:func:`~biasfree.analysis.measured.stages`: predicted by
:mod:`~biasfree.analysis.predicted`, else measured), so the training config travels one way.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial

import numpy as np

from .. import _validate as validate
from .._overflow import finite_forward
from ..core import nets
from ..core.conv import drop_zero_biases
from ..core.data import check_data
from ..core.layers import Params
from ..core.nets import widths
from ..core.precision import precise
from ..dynamics import TrainConfig
from ..dynamics.optimiser_twin import with_degree
from ..dynamics.train_config import as_train_config, check_update
from . import function_now as now
from . import measured as ms
from . import verdict as vd
from .attention import analyse_attention
from .attention_import import is_attention_model
from .interop import Model, as_model
from .measurements import data_arrays, local_report
from .plan import Setting, resolve
from .predicted import predicted
from .report import Analysis
from .stage_answer import stage_answer
from .verify import check_reading

DEFAULT_TIME_BUDGET = 120.0
"""Seconds of training ``analyse(train=...)`` allows itself unless told otherwise."""
__all__ = ["Analysis", "analyse"]


# ----------------------------------------------------------------- the call


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
      given weights beside the twin within :data:`~biasfree.analysis.plan.MEASURE_BUDGET`
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
      curve's ODE (at most :data:`~biasfree.analysis.predicted.CURVE_BUDGET`; a curve cut short says so).
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
    began = time.perf_counter()  # the stage answer's budget is a share of the call (stage_answer)
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
    # refuse an overflow
    finite_forward(params, X, a, nets.forward_unchecked, name="model", x_name="data X")
    start = None if init is None else _start(init, a, params)
    check_reading(init, start, a, X, what="init")  # None, a file or params: nothing to run
    note, twin = "", None  # twin: the twin's optimiser, built once with κ (none for GD)
    if given is not None:  # the config in final form, here once: α the model's (checked by as_model), κ set
        given = given._with_alpha(a)
    if given is not None and not given.gd:  # update checked, κ measured (or refused) before any compute
        check_update(given.make(1.0), params, given.label)
        given, twin, note = with_degree(given, a, len(params))
    measure = train is not False  # measure by default where the theory is silent (False: predict only)
    train = given if given is not None else bool(train)

    ctx = now.data_context(X, Y, a, source)
    st = now.measure_net(params, X, Y, a, ctx)
    local = local_report(params, X, a)
    s = Setting(X, Y, a, ctx, t_max, n_times, time_budget, progress)
    rerun = start is not None and not st.net.has_bias  # a net with biases has no history
    st0 = now.measure_net(start, X, Y, a, ctx, kind="the init's function") if rerun else None
    p, p0 = resolve(train, note, measure, s, params, st.net, start, None if st0 is None else st0.net, twin)
    from_given = predicted(params, st, p, s)
    from_init = predicted(start, st0, p0, s) if rerun else None
    pred, training, reg, trained, history = ms.stages(from_given, from_init, s)
    where = partial(stage_answer, params, X, Y, a, start, history,  # saddle to saddle (§11.7), when asked
                    rest=time.perf_counter() - began)
    if st.net.has_bias:
        return Analysis(ctx.report, st.net, None, vd.combine(st.function, training), reg, local,
                        stage_of=where)
    verdict = vd.combine(st.function, training, trained, None if history is None else history.judgement,
                         asked=pred.trained is None or not pred.trained.by_default)
    return Analysis(ctx.report, st.net, pred, verdict, reg, local, history, stage_of=where)
