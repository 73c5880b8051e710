"""The function now (docs/verdict.md, the pipeline's second stage): what the data say and what
the net computes on them, measured once per :func:`~biasfree.analysis.analyse.analyse` call.

``data_context``: the data's report (symmetry, mirror violation, the target's even share),
modes of ``Σ_yx Σ_xx^{-1/2}`` and the exact two-layer floor (§1.3). ``measure_net``: the
net's report with its split ``f = f_odd + f_even`` (``even_fraction = <||f_even||²>/<||f||²>``,
``nonlinear_fraction`` the squared distance from f to the nearest linear map over <||f||²>),
the function-now judgement, its regime (§6.3) and ``L(θ) = (1/2N) Σ_n ||y_n − f(x_n)||²``.
``facts``: what both training answers weigh (the twin's loss, the gradient, stationarity).
:func:`trained_function`: the same function judgement of the net a run ended with.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import theory
from ..core import nets
from ..core.conv import is_conv
from ..core.layers import Params
from ..core.nets import depth, has_bias, widths
from ..core.symmetry import asymmetry_and_violation, max_row_norm, stack_points
from ..core.twin import unchecked_slope_factor
from ..expressivity.decomposition import energy
from ..expressivity.floors import _dataset_floor
from ..theory.modes import _data_modes
from . import regime as rg
from . import verdict as vd
from .measurements import split
from .moments import Moments, moments
from .report import DataReport, NetReport, Prediction, Regime, Training
from .stationary import stationarity
from .structure import PAIRS, exact_structure
from .verdict import ROUND_OFF

ASYMMETRY_POINTS = 2000
"""The data's asymmetry (reported, not judged) is averaged over at most this many evenly
spaced points, each one's nearest mirror sought among all N: O(N·D) per point."""


@dataclass(frozen=True)
class Context:
    """What the data say, measured once: the report (with the mirror violations and the
    target's even share), the modes and the exact floor."""

    report: DataReport
    modes: theory.Modes
    floor: float | None
    moments: Moments


def data_context(X, Y, a, source) -> Context:
    mo = moments(X)  # XᵀX/N and its eigh once; the least-squares fits from them
    lam = mo.lam
    modes = _data_modes(X, Y, 0.0, whiten=True, gram=(mo.Sxx, (mo.lam, mo.W)))  # X, Y checked by analyse
    # X's columns that are 0 on every row add exactly 0 to every ||z_n + z_m||: left out of the search
    cols = mo.cols if mo.cols.size else np.arange(X.shape[1])
    asym, mv, mv_x = asymmetry_and_violation(stack_points(X[:, cols], Y), ASYMMETRY_POINTS, cols.size)
    mv /= max(max_row_norm(X, Y), 1e-300)
    # mv <= ROUND_OFF also bounds asym: asym <= mv² max||z||² / <||z||²> <= N mv² <= ROUND_OFF for N <= 1e10
    x_scale = max(float(np.max(np.linalg.norm(X, axis=1))), 1e-300)
    mv_x, raw = mv_x / x_scale, mv_x  # the inputs alone: the target's parity is judged apart
    dsf = (_dataset_floor(X, Y, a, vd.NEAR_SYMMETRIC * x_scale, mo.fit, raw) if mv_x <= vd.NEAR_SYMMETRIC
           else None)
    even_t = dsf.even / dsf.power if dsf is not None and dsf.power > 0 else float("nan")
    report = DataReport(n=X.shape[0], d=X.shape[1], p=Y.shape[1], asymmetry=asym, symmetric=mv <= ROUND_OFF,
                        input_rank=int(np.sum(lam > 1e-12 * lam.max())), whitened=modes.whitened,
                        source=source, mirror_violation=mv, modes=modes.s,
                        linear_fraction=modes.linear_fraction, target_even_fraction=even_t,
                        mirror_violation_inputs=mv_x, asymmetry_points=min(X.shape[0], ASYMMETRY_POINTS))
    floor = dsf.value if dsf is not None and mv_x <= ROUND_OFF else None  # exact only then (§1.3)
    return Context(report, modes, floor, mo)


@dataclass(frozen=True)
class State:
    """One net measured on the data: its report (the odd/even split included), the
    function-now judgement, its regime and L(θ); ``facts`` adds the twin's loss and the
    gradient, for the facts both training answers weigh."""

    net: NetReport
    function: vd.Judgement
    regime: Regime
    loss0: float
    outputs: np.ndarray  # f(X), ‖∇L‖·‖θ‖ and the growth estimate, from the split's one pass over the rows
    grad: float | None
    growth: rg.GrowthEstimate  # §6.4's, for predict: rg.NO_GROWTH where the net has no growth term


def measure_net(params: Params, X, Y, a, ctx: Context, kind: str = "function now") -> State:
    L, biased = depth(params), has_bias(params)
    c = unchecked_slope_factor(float(a))  # α checked by as_model
    # the growth term (§6.4): two layers, a slope below 1, an odd target linear enough, no bias
    grows = L == 2 and a != 1.0 and not biased and ctx.modes.linear_fraction > vd.PAPER_LEVEL
    plan = rg.growth_plan(params, X, Y, c, ctx.modes.B) if grows else None
    sp = split(params, X, a, ctx.moments.fit, Y, plan)
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
    growth = rg.NO_GROWTH if plan is None else sp.growth
    return State(net, function, regime, loss0, sp.outputs, sp.grad, growth)


def facts(st: State, ctx: Context, params, X, Y, a, pred: Prediction | None) -> vd.Facts:
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


def trained_function(tr: Training, a, ctx: Context, kind: str) -> vd.Judgement:
    """The function judgement (as ``measure_net``'s) of the net the run ``tr`` ended with,
    from the run's final split: ``nonlinear_fraction = (<||f_even||²> + odd remainder) / <||f||²>``."""
    total = tr.final_odd_linear_energy + tr.final_odd_nonlinear_energy + tr.final_even_energy
    return vd.judge_function(has_bias=False, alpha=a, even_fraction=tr.final_even_fraction,
                             odd_nonlinear_of_odd=tr.final_odd_nonlinear_fraction,
                             nonlinear_fraction=(tr.final_even_energy + tr.final_odd_nonlinear_energy)
                             / max(total, 1e-300),
                             structure=exact_structure(tr.params), depth=len(tr.params), kind=kind,
                             output_ratio=np.sqrt(total / ctx.modes.y_power))
