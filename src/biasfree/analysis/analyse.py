"""Is *your* network effectively linear? One call from a model and data to a graded verdict.

:func:`analyse` measures on the given data what docs/theory.md says decides the answer:
the data's symmetry (§2.1) and mode strengths s_i of ``Σ_yx Σ_xx^{-1/2}``; the net's
depth, widths, slope α, biases and its split ``f = f_odd + f_even`` (§1.2:
``even_fraction = <||f_even||²>/<||f||²>``, ``odd_nonlinear_fraction =
min_β <||f_odd − βᵀx||²>/<||f_odd||²>``, ``nonlinear_fraction`` the squared distance from f
to the nearest linear map over <||f||²>); the regime (§6.3); the prediction from the
*linear twin* (§2.4; depth L > 2: the approximate odd-part twin, §4.1), its learning curve,
the floors and a predicted gap (§6.4); optionally the net trained by GD beside its twin
(:mod:`biasfree.dynamics.twin_training`). Losses are the package's half mean squared error
``L = (1/2N) Σ_n ||y_n − f(x_n)||²``. The verdict: :mod:`biasfree.analysis.verdict` (§6).
Beside it, reported and not judged: the local linear analysis of the net as given (§8:
homogeneity, Euler's f(x) = J(x)x, the bias term, J's effective dimension) at up to
:data:`LOCAL_INPUTS` of the inputs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .. import _validate as validate
from .. import theory
from ..core import nets
from ..core.blocks import outputs, outputs_and_mirror
from ..core.data import Dataset, check_data
from ..core.layers import Params, scale_params
from ..core.nets import depth, has_bias, widths
from ..core.precision import precise
from ..core.real_data import RealData, load_data
from ..core.symmetry import asymmetry, is_symmetric, max_row_norm, mirror_violation
from ..core.twin import slope_factor
from ..dynamics import GDConfig
from ..dynamics.twin_training import relative_movement, row_alignment, train_with_twin
from ..expressivity.decomposition import Decomposition, OddFit, odd_fit_of
from ..expressivity.floors import dataset_floor
from ..expressivity.local_linear import MAX_ENTRIES, Identities, local_linear
from . import regime as rg
from . import verdict as vd
from .interop import Model, as_model
from .report import Analysis, DataReport, LocalReport, NetReport, Prediction, Regime, Training
from .verdict import PAPER_LEVEL, ROUND_OFF

LOCAL_INPUTS = 64
"""The local linear analysis (§8) looks at most at this many inputs, evenly spaced rows."""
DEFAULT_TIME_BUDGET = 120.0
"""Seconds of training ``analyse(train=...)`` allows itself unless told otherwise."""
__all__ = ["Analysis", "analyse"]


# ----------------------------------------------------------------- measurements


@dataclass(frozen=True)
class _Split:
    energy: float
    even: float
    odd_linear: float
    odd_nonlinear: float
    odd_fraction_nonlinear: float
    beta: np.ndarray
    outputs: np.ndarray | None = None  # f(X), kept for the loss at init

    @property
    def even_fraction(self) -> float:
        return self.even / self.energy if self.energy else 0.0


def _energy(A) -> float:
    """``<||a_n||²>``: the mean over the rows a_n of A of their squared norm."""
    return float(np.mean(np.sum(np.asarray(A) ** 2, axis=1)))


def _split(params: Params, X, alpha) -> _Split:
    """Energies of f, of f_even, of the best linear fit of f_odd and of its remainder."""
    F, Fm = outputs_and_mirror(params, X, alpha)  # in row blocks: no N × width array
    beta, res, dec = odd_fit_of(X, Decomposition(F, 0.5 * (F - Fm), 0.5 * (F + Fm)))
    fit = OddFit(beta, float(np.mean(res)), dec.odd_energy)
    return _Split(_energy(F), _energy(dec.even), _energy(np.asarray(X) @ fit.beta), fit.residual,
                  fit.fraction, fit.beta, F)


def _data_arrays(data):
    if isinstance(data, RealData):
        return data.X, data.Y, data.source
    if isinstance(data, Dataset):
        return np.asarray(data.X), np.asarray(data.Y), "Dataset"
    if isinstance(data, str) or hasattr(data, "__fspath__"):
        try:
            d = load_data(data)
        except ValueError as e:
            raise ValueError(f"data: {e}") from None
        return d.X, d.Y, d.source
    if isinstance(data, tuple) and len(data) == 2:
        return data[0], data[1], "arrays"
    raise TypeError(f"data: give (X, Y), a biasfree Dataset, a load_data result, a file or a data "
                    f"set name; got {type(data).__name__}")


def _twin_scales(L: int, alpha: float) -> tuple[float, float]:
    """(weight scale per layer, time scale): ``c^{(L-1)/L}`` and ``c^{2(L-1)/L}``."""
    c = float(slope_factor(alpha))
    return c ** ((L - 1) / L), c ** (2 * (L - 1) / L)


def _paired(params: Params) -> bool:
    """Depth 2: the rows [w_k, v_k] form a mirror-symmetric multiset (antisymmetric pairs)."""
    if len(params) != 2:
        return False
    Z = np.hstack([np.asarray(params[0].matrix, float), np.asarray(params[1].matrix, float).T])
    scale = float(np.max(np.linalg.norm(Z, axis=1)))
    return scale > 0 and is_symmetric(Z, tol=ROUND_OFF * scale)


def _local(params: Params, X, alpha) -> LocalReport | None:
    """The local linear analysis (§8) at up to :data:`LOCAL_INPUTS` evenly spaced rows of X
    (fewer when their Jacobians would exceed ``MAX_ENTRIES`` numbers; None when one does)."""
    N, d, p = X.shape[0], X.shape[1], params[-1].n_out
    n = min(N, LOCAL_INPUTS, MAX_ENTRIES // (p * d))
    if n == 0:
        return None
    rows = np.unique(np.linspace(0, N - 1, n).round().astype(int))
    r = local_linear(params, X[rows], alpha)
    shared = {f.name: getattr(r, f.name) for f in dataclasses.fields(Identities)}
    return LocalReport(**shared, n_used=int(rows.size), n_total=N, rows=rows,
                       participation_ratio=r.participation_ratio,
                       participation_ratio_median=float(np.median(r.participation_ratio)),
                       effective_rank_median=float(np.median(r.effective_rank)),
                       frobenius_dimension_median=float(np.median(r.frobenius_dimension)),
                       max_dimension=int(r.singular_values.shape[1]))


# ----------------------------------------------------------------- the call


@precise
def analyse(model, data, *, alpha=None, train: GDConfig | bool | None = None, t_max: float | None = None,
            n_times: int = 201, time_budget: float | None = DEFAULT_TIME_BUDGET,
            progress: Callable[[int, int], None] | None = None) -> Analysis:
    """Analyse a bias-free (leaky) ReLU net on data: is it effectively linear? (module doc)

    ``model``: a torch ``nn.Sequential``, an ``eqx.nn.MLP``, a ``.safetensors``/``.npz``
    path, a :class:`~biasfree.analysis.interop.Model` or a params tuple (:mod:`biasfree.analysis.interop`).
    ``data``: ``(X, Y)``, a Dataset, a :func:`~biasfree.load_data` result, a file or a
    bundled name. ``alpha``: the slope α, needed when the model does not state it.
    ``train``: a :class:`~biasfree.GDConfig` (its ``alpha`` is replaced by the model's;
    ``n_records`` sets only the stored curve, the gap is measured at every step), or
    True for a default one (step a quarter of the stability limit, steps to the default
    horizon, at most ``regime.MAX_STEPS``). ``t_max``: horizon of the predicted curve
    without training (default: from the data's modes, bounded), on ``n_times`` points.
    ``time_budget``: seconds of training at most (None: no limit); ``progress(k, K)``
    is called as training goes.
    """
    if train is not None and not isinstance(train, GDConfig | bool):
        raise TypeError(f"train={train!r} must be a biasfree.GDConfig, True (default training) or None")
    if t_max is not None:
        t_max = validate.positive("t_max", t_max, scalar=True, why="the horizon of the predicted curve")
    n_times = validate.integer("n_times", n_times, 2)
    if time_budget is not None:
        time_budget = validate.positive("time_budget", time_budget, scalar=True, why="seconds of training")
    m: Model = as_model(model, alpha)
    if m.alpha is None:
        raise ValueError(f"the slope α of {m.source} is unknown (weight files do not store the "
                         "activation): pass alpha (0 ReLU, a in (0, 1) leaky, 1 linear)")
    a, params = float(m.alpha), m.params
    X, Y, source = _data_arrays(data)
    check_data(X, Y)
    X, Y = np.asarray(X, float), np.asarray(Y, float)
    if isinstance(train, GDConfig) and train.loss == "logistic":
        validate.labels("data", Y, "the logistic loss (train.loss='logistic')",
                        " or train with loss='mse'")
    w = widths(params)
    if X.shape[1] != w[0] or Y.shape[1] != w[-1]:
        raise ValueError(f"the net maps {w[0]} inputs to {w[-1]} outputs but the data have "
                         f"X {X.shape} and Y {Y.shape}")
    L, c, biased = depth(params), float(slope_factor(a)), has_bias(params)
    local = _local(params, X, a)

    lam = np.linalg.eigvalsh(X.T @ X / X.shape[0])
    modes = rg.data_modes(X, Y)
    asym = asymmetry(X, Y)
    mv = mirror_violation(X, Y) / max(max_row_norm(X, Y), 1e-300)
    # mv <= ROUND_OFF also bounds asym: asym <= mv² max||z||² / <||z||²> <= N mv² <= ROUND_OFF for N <= 1e10
    symmetric = mv <= ROUND_OFF
    x_scale = max(float(np.max(np.linalg.norm(X, axis=1))), 1e-300)
    mv_x = mirror_violation(X) / x_scale  # the inputs alone: the target's parity is judged apart
    dsf = (dataset_floor(X, Y, alpha=a, tol=vd.NEAR_SYMMETRIC * x_scale) if mv_x <= vd.NEAR_SYMMETRIC
           else None)
    even_t = dsf.even / dsf.power if dsf is not None and dsf.power > 0 else float("nan")
    data_rep = DataReport(X.shape[0], X.shape[1], Y.shape[1], asym, symmetric,
                          int(np.sum(lam > 1e-12 * lam.max())), theory.is_whitened(X), source, mv,
                          modes.s, modes.linear_fraction, even_t, mv_x)
    sp = _split(params, X, a)
    svs = tuple(np.linalg.svd(np.asarray(layer.matrix, float), compute_uv=False) for layer in params)
    beta = (c * np.asarray(params[0].matrix).T @ np.asarray(params[1].matrix).T
            if L == 2 and not biased else sp.beta)
    nonlin = (sp.even + sp.odd_nonlinear) / sp.energy if sp.energy else 0.0
    ranks = tuple(float(nets.effective_rank(s)) if s.any() else 0.0 for s in svs)  # a zero layer: 0
    net_rep = NetReport(L, w, a, c, biased, sp.energy, sp.even_fraction, sp.odd_fraction_nonlinear,
                        sp.even, sp.odd_linear, sp.odd_nonlinear, np.asarray(beta), ranks, svs, nonlin,
                        _paired(params))
    s1 = float(modes.s[0]) if modes.s.size else 0.0
    gain = rg.init_gain(params, modes.lam_max)
    ratio = gain / s1 if s1 > 0 else float("inf")
    reg = Regime(gain, s1, ratio, ratio <= vd.SMALL_INIT)
    function = vd.judge_function(has_bias=biased, alpha=a, even_fraction=sp.even_fraction,
                                 odd_nonlinear_of_odd=sp.odd_fraction_nonlinear, nonlinear_fraction=nonlin,
                                 paired=net_rep.paired, depth=L,
                                 output_ratio=np.sqrt(sp.energy / modes.power) if modes.power else np.nan)
    loss0 = 0.5 * _energy(Y - sp.outputs)
    floor = dsf.value if dsf is not None and mv_x <= ROUND_OFF else None  # exact only then (§1.3)
    facts = vd.Facts(L, a, biased, mv_x, even_t, modes.linear_fraction, ratio, function, floor, loss0)
    if biased:
        return Analysis(data_rep, net_rep, None, vd.combine(function, vd.judge_predicted(
            facts, paired=False, t0_gap=0.0, growth_gap=0.0)), reg, local)
    cfg = _train_config(train, params, modes, c, beta, a)
    pred = _predict(params, a, X, Y, modes, beta, cfg, t_max, n_times, sp, loss0, floor, net_rep.paired)
    if cfg is None:
        training = vd.judge_predicted(facts, paired=net_rep.paired, t0_gap=pred.t0_gap,
                                      growth_gap=pred.growth_gap,
                                      growth_range=(pred.growth_gap_low, pred.growth_gap_high))
        return Analysis(data_rep, net_rep, pred, vd.combine(function, training), reg, local)
    tr, reg = _train(params, pred, a, X, Y, cfg, modes, loss0, reg, time_budget, progress)
    pred = dataclasses.replace(pred, trained=tr)
    exact = function.level == vd.EXACT and mv <= ROUND_OFF
    training = vd.judge_measured(facts, gap=tr.gap_to_twin, step=tr.gap_step, t=tr.gap_time,
                                 steps_run=tr.steps_run, steps_asked=cfg.steps, movement=reg.movement[0],
                                 alignment=reg.alignment, alignment0=reg.alignment0, exact_structure=exact)
    total = tr.final_odd_linear_energy + tr.final_odd_nonlinear_energy + tr.final_even_energy
    after = vd.judge_function(has_bias=False, alpha=a, even_fraction=tr.final_even_fraction,
                              odd_nonlinear_of_odd=tr.final_odd_nonlinear_fraction,
                              nonlinear_fraction=(tr.final_even_energy + tr.final_odd_nonlinear_energy)
                              / max(total, 1e-300),
                              paired=_paired(tr.params), depth=L, kind="function after training",
                              output_ratio=np.sqrt(total / modes.power))
    return Analysis(data_rep, net_rep, pred, vd.combine(function, training, after), reg, local)


def _train_config(train, params, modes, c, beta, a) -> GDConfig | None:
    if train is None or train is False:
        return None
    if isinstance(train, GDConfig):
        return dataclasses.replace(train, alpha=a)
    lr = rg.default_lr(params, modes, c)
    T, _ = rg.default_t_max(modes, float(np.linalg.norm(beta, 2)), _twin_scales(len(params), a)[1],
                            depth=len(params))
    return GDConfig(alpha=a, lr=lr, steps=int(min(rg.MAX_STEPS, max(1, np.ceil(T / lr)))), n_records=201)


def _predict(params, a, X, Y, modes, beta, cfg, t_max, n_times, sp, loss0, floor, paired) -> Prediction:
    L = depth(params)
    ws, ks = _twin_scales(L, a)
    twin = scale_params(params, ws)
    floored = False
    if cfg is not None:
        t = cfg.lr * np.unique(np.linspace(0, cfg.steps, min(cfg.n_records, cfg.steps + 1)).round())
    else:
        T, floored = (rg.default_t_max(modes, float(np.linalg.norm(beta, 2)), ks, depth=L) if t_max is None
                      else (float(t_max), False))
        t = np.linspace(0.0, T, n_times)
    if L == 2 or a == 1.0:
        curve = theory.reference_curve(params, X, Y, t, alpha=a)
        note = curve.note
        # the twin map is exact only with a zero even part on mirror-symmetric data (as a
        # multiset): reference_curve measures both and says so in curve.exact
        exact = a == 1.0 or (curve.exact and sp.even <= 1e-24 * max(sp.energy, 1e-300))
    else:
        exact = False
        curve = theory.reference_curve(twin, X, Y, ks * t, alpha=1.0)
        note = (f"APPROXIMATE: depth {L} > 2 has no exact linear twin (docs/theory.md §4.1); the twin is "
                f"the net with σ_α replaced by its odd part c z, weights × c^((L-1)/L) = {ws:.4g}, "
                f"time × c^(2(L-1)/L) = {ks:.4g}; " + curve.note)
    L0 = max(loss0, 1e-300)
    twin0 = 0.5 * _energy(Y - outputs(twin, X, 1.0))
    g = (rg.growth_even_energy(params, X, Y, float(slope_factor(a)), modes.B)
         if L == 2 and a != 1.0 and modes.linear_fraction > PAPER_LEVEL else rg.GrowthEstimate(0, 0, 0, 1))
    if paired:  # a unit and its mirror cancel in f_even, remainder and all: κ = 0, no interval
        g = rg.GrowthEstimate(g.energy, g.energy, g.energy, g.gain)
    return Prediction(twin, ws, ks, curve.reference, bool(exact), note, np.asarray(t),
                      np.asarray(curve.loss), loss0, theory.linear_floor(X, Y), floor, None,
                      abs(loss0 - twin0) / L0, 0.5 * g.energy / L0, floored, 0.5 * g.low / L0,
                      0.5 * g.high / L0)


def _train(params, pred: Prediction, a, X, Y, cfg: GDConfig, modes, loss0, reg: Regime, budget, progress):
    run = train_with_twin(params, pred.twin, X, Y, alpha=a, lr=cfg.lr, time_scale=pred.time_scale,
                          steps=cfg.steps, n_records=cfg.n_records, loss=cfg.loss,
                          weight_decay=cfg.weight_decay, time_budget=budget, progress=progress)
    L0 = max(loss0, 1e-300)
    t = cfg.lr * run.k.astype(float)
    predicted = np.interp(t, pred.t, pred.loss)
    sp = _split(run.params, X, a)
    dirs = rg.learned_directions(modes.B)
    tr = Training(cfg, t, run.loss, run.twin_loss, predicted, run.even_energy,
                  float(np.max(np.abs(run.loss - predicted)) / L0), run.gap_max / L0,
                  sp.even_fraction, sp.odd_fraction_nonlinear, sp.odd_linear, sp.odd_nonlinear, sp.even,
                  run.params, run.gap_step, cfg.lr * run.gap_step, run.steps)
    move = relative_movement(params, run.params)
    reg = dataclasses.replace(reg, movement=move, rich=move[0] >= vd.RICH_MOVEMENT,
                              alignment0=row_alignment(params[0].matrix, dirs),
                              alignment=row_alignment(run.params[0].matrix, dirs))
    return tr, reg
