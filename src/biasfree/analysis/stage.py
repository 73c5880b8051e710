"""Where a net stands on its saddle-to-saddle staircase (docs/theory.md §11.7): its effective
units now, the embedded fixed point nearest to it, whether that point is a saddle and when the
net leaves it, and (given the init) the staircase its training went through.

The point answered is the NEAREST of the embedded k-unit points over k (§11.7.2: k = 0 …
min(H, rank) in closed form; the k strongest groups or heads for k ≤ the count, by branch and
bound, where each is a solve, :mod:`~biasfree.analysis.nearest`), not the one of the count's k:
without ``init`` the count (:func:`~biasfree.core.units.effective_units`) has round-off as its
threshold and is only an upper bound (§11.1; ``Stage.count_decided``). For a bias-free two-layer
dense *linear* net ``f(x) = W₂W₁x`` (width H), the k-unit candidate is the best rank-k map
``β_k = U_k diag(s_k) V_kᵀ Σ_xx^{-1/2}`` (:mod:`biasfree.theory.reduced_rank`) in balanced form,
embedded into width H by zero units (Theorem 1, §11.4) and rotated to the net's hidden basis:
``W₁* = Q B₁``, ``W₂* = B₂ Qᵀ`` with ``B₁ = diag(√s_k) V_kᵀ Σ_xx^{-1/2}``, ``B₂ = U_k diag(√s_k)``
and Q (H, k) the orthonormal Q maximising ``tr Qᵀ(W₁B₁ᵀ + W₂ᵀB₂)`` (orthogonal Procrustes: the
polar factor, the closest such point to the net in ‖θ − θ*‖). Any factorisation of β_k is a fixed
point (G = Σ_yx − β_kΣ_xx has W₂*ᵀG = 0, G W₁*ᵀ = 0, §11.4.2).

At θ*: :func:`~biasfree.analysis.saddles.fixed_point` (gradient, Hessian λ_min, their round-off);
the unstable eigenspace E (Hessian eigenvalues within 2λ_tol of λ_min, Weyl: indistinguishable
from it) and the net's distance along it ``ε = ‖P_E(θ − θ*)‖``. The escape time (§11.4.4) is
``ln(1/ε)/|λ_min|`` to leading order; on whitened inputs (Σ_xx = I) the next mode, s = ``|λ_min|``
= s_{k+1}, starts at strength a₀ = ε²/2 (§3.1's effective strength ¼‖W₁r + W₂ᵀq‖², summed over
the units) and follows Saxe's logistic, so the next drop (the loss crossing L_{k+1} + s²/8, mode
k+1 half learned) comes ``ln(s/a₀ − 1)/(2s)`` = ``ln(1/ε)/s + ln(2s − ε²)/(2s)`` later.

With ``init``: the data-induced staircase of §11.5 (:func:`~biasfree.theory.plateau_times.data_plateaus`)
from the data's whitened singular values s_i and each mode's initial strength
``a₀ᵢ = ¼‖W₁Σ_xx^{1/2}vᵢ + W₂ᵀuᵢ‖²`` at init; the net has passed the drops whose crossing level
its loss is at or below.

Covered (:data:`COVERED`): the nearest fixed point of two-layer bias-free nets of four kinds.
Dense linear nets, by the closed form above. Dense and conv (leaky) ReLU nets, units or kernels
(:mod:`~biasfree.analysis.unit_stage`, §11.7.6): their zero units sit on the kink, where the
Hessian is not defined, so the saddle and the escape come from the one-sided rate λ*. Linear conv
nets with a pooled readout, ``f = V K z̄(x)``: a dense linear net on the mean patch z̄ (§11.7.7).
Merged linear attention, through its twin ``W₂W₁z`` (§11.7.7). Separate linear attention, numerically
(:mod:`~biasfree.analysis.attention_stage`, §11.7.12): its strongest heads solved to a fixed point,
the rest zero, the saddle from the escape coefficient of order ε³, the time to leave from the
net's small heads under the cubic escape flow (:mod:`~biasfree.analysis.head_escape`). The
staircase from ``init`` is given for the linear ones (dense, pooled conv, merged attention); a
recorded ``curve`` is matched to the k-unit levels of every covered family but separate
attention (each level would be a numerical solve); effective units for every family of
:data:`~biasfree.core.units.FAMILIES` that the model readers give. Not covered (said in
``notes``): the fixed points of deep or biased nets, of quadratic nets, of linear conv nets with a
dense readout, and the staircase from ``init`` of nonlinear nets (and of separate attention).
"""

from __future__ import annotations

import dataclasses
import math

import jax.numpy as jnp
import numpy as np

from ..core.attention import MergedAttention, SeparateAttention
from ..core.attention_twin import merged_to_twin, off_twin, twin_dataset
from ..core.conv import Conv, PooledDense, drop_zero_biases
from ..core.data import Dataset, check_data
from ..core.layers import Layer, Params
from ..core.nets import forward, forward_unchecked, widths
from ..core.precision import precise
from ..core.units import INIT_NOISE, effective_units, ingredients, init_scales
from ..theory.plateau_times import data_plateaus
from ..theory.reduced_rank import (
    is_whitened,
    kronecker_departure,
    numerical_rank,
    reduced_rank_losses,
    whitened_svd,
)
from ..theory.staircase import find_plateaus, match_levels
from .attention_import import as_attention, is_attention_model, with_n_ctx
from .attention_stage import head_fixed_point
from .deep_stage import balanced_point, deep_stage
from .interop import as_model
from .measurements import data_arrays
from .saddles import DENSE_HESSIAN, fixed_point, hessian_eigh
from .stage_budget import fits
from .stage_result import Recorded, Stage, Staircase
from .unit_leave import COPY_HORIZON, HORIZON, LEAD_HORIZON, measured_leave
from .unit_stage import search_numbers, unit_fixed_point, unit_levels
from .verify import check_reading


def _read(model, alpha, what: str):
    m = as_model(model, alpha)
    if m.alpha is None:
        raise ValueError(f"{what}: the slope α of {m.source} is unknown (weight files do not store the "
                         "activation): pass alpha (0 ReLU, a in (0, 1) leaky, 1 linear)")
    return m, float(m.alpha), drop_zero_biases(m.params)[0]


@precise
def stage(model, data, *, alpha=None, init=None, curve=None) -> Stage:
    """Where ``model`` stands on ``data`` (module doc; docs/theory.md §11.7): the forms
    :func:`~biasfree.analysis.analyse.analyse` takes (a torch ``nn.Sequential``, an
    ``eqx.nn.MLP``, a weight file, a Model or params; data ``(X, Y)``, a Dataset, a file or a
    bundled name), ``alpha`` where the model does not state it, ``init`` the weights training
    started from (same forms and architecture), ``curve`` ``(t, loss)`` a loss curve recorded in
    training from it (its plateaus matched to the k-unit levels). Returns a :class:`Stage`.

    Example::

        st = bf.analysis.stage.stage(net, (X, Y), alpha=1.0, init=net0)
        st.units.count, st.saddle, st.drop_time, st.staircase.passed
    """
    if is_attention_model(model):  # read as analyse_attention reads it (a torch module is run on X)
        X, Y, _ = data_arrays(data)
        X, Y = np.asarray(X, float), np.asarray(Y, float)
        layer = with_n_ctx(as_attention(model, X), X.shape[1])
        start = None if init is None else with_n_ctx(as_attention(init, X, like=layer, name="init"),
                                                      X.shape[1])
        return stage_of(layer, X, Y, 0.0, start, curve=curve)
    m, a, params = _read(model, alpha, "model")
    X, Y, _ = data_arrays(data)
    check_data(X, Y)
    X, Y = np.asarray(X, float), np.asarray(Y, float)
    w = widths(params)
    if X.shape[1] != w[0] or Y.shape[1] != w[-1]:
        raise ValueError(f"the net maps {w[0]} inputs to {w[-1]} outputs but the data have X {X.shape} and "
                         f"Y {Y.shape}")
    start = None
    if init is not None:
        start = _read(init, a, "init")[2]
        if widths(start) != w or any(type(p) is not type(q) for p, q in zip(start, params, strict=True)):
            raise ValueError(f"init has widths {widths(start)} but the model has {w}: give the weights "
                             "training started from, of the model's architecture")
    check_reading(model, params, a, X, names=m.names)  # a live module is run (verify.py)
    check_reading(init, start, a, X, what="init")
    return stage_of(params, X, Y, a, start, curve=curve)


COVERED = ("bias-free dense linear nets of any depth (closed form, §11.7.2, §11.7.10), two-layer "
           "bias-free dense and conv (leaky) ReLU nets (units and kernels, §11.7.6), two-layer bias-free "
           "linear conv nets with a pooled readout (§11.7.7), merged linear attention (its twin, §11.7.7) "
           "and separate linear attention (numerically, §11.7.12)")
"""The families whose nearest embedded fixed point :func:`stage_of` builds."""


@precise
def stage_of(params: Params, X, Y, alpha: float, init: Params | None = None, *, curve=None) -> Stage:
    """:func:`stage` of read and checked ``params`` (zero biases dropped; a net, or one attention
    layer with X its flat sequences), float arrays X (N, d), Y (N, p), slope ``alpha`` and
    ``init`` (same architecture, or None): what ``analyse`` has. A family with no effective-unit
    rule raises ValueError naming those with one; one with a rule but no fixed point built here
    gets its units and a one-line note naming the families covered (:data:`COVERED`). ``curve``
    ``(t, loss)``: a loss curve recorded from ``init``; its plateaus are found and matched to the
    k-unit levels (``Stage.recorded``)."""
    made = {}  # what the stage computed that the levels read again (_recorded)
    st = dataclasses.replace(_stage_of(params, X, Y, alpha, init, made), init_known=init is not None)
    if curve is None or not st.covered or st.head_point is not None:  # no k-head levels for separate
        return st  # attention: each would be a numerical solve
    return dataclasses.replace(st, recorded=_recorded(st, params, X, Y, alpha, curve, made))


def _recorded(st, params, X, Y, alpha, curve, made) -> Recorded:
    """The plateaus of ``curve`` matched to the k-unit levels; ``made``: the stage's init scales,
    narrow fixed points, twin data or mean patches (:func:`_stage_of`), not computed again."""
    if st.unit_point is not None:
        levels = unit_levels(params, X, Y, alpha, made["sigmas"], st.units.threshold, made["solved"])
    elif isinstance(params, MergedAttention):
        levels = reduced_rank_losses(*made["twin"])
    elif st.family == "conv-linear":
        levels = reduced_rank_losses(made["patches"], Y)
    else:
        levels = reduced_rank_losses(X, Y)
    try:
        found = find_plateaus(*curve)
    except ValueError as e:
        return Recorded(None, (), levels, str(e))
    # from a small init plateau i follows the i-th drop, one unit each (§11.3): a curve with more plateaus
    # than the net has levels (k = 0 … K) went past the units the net has, and its last plateaus are left
    # unmatched, not pinned to the last level (an all-zero net's curve read its 1-unit plateau 0.0118 as
    # 'k = 0: 1.448')
    K = len(levels) - 1
    matches = match_levels(found, levels)[:K + 1]
    beyond = len(found.plateaus) - len(matches)
    note = (f"the last {beyond} of its {len(found.plateaus)} plateaus have no level here: they follow more "
            f"drops than the net has units ({K}); analyse the net at the curve's end") if beyond else ""
    return Recorded(found, matches, levels, note)


def _stage_of(params, X, Y, alpha, init, made) -> Stage:
    """The stage (:func:`stage_of`, no curve); ``made`` gets what :func:`_recorded` reads again."""
    if isinstance(params, MergedAttention | SeparateAttention):
        return _attention(params, X, Y, init, made)
    units = effective_units(params, alpha, init=init)
    biased = any(getattr(la, "bias", None) is not None for la in params)
    two = len(params) == 2 and not biased
    if two and units.family in ("leaky", "conv"):  # the count's search, before any pass over the data
        k = units.count
        fits(search_numbers(params, np.size(Y), k), f"the Jacobian of the {k}-unit narrow net")
    F = np.asarray(forward_unchecked(params, jnp.asarray(X), alpha))
    loss = float(0.5 * np.mean(np.sum((F - Y) ** 2, 1)))
    if two and units.family == "linear" and all(type(la) is Layer for la in params):
        return _linear(params, X, Y, loss, units, init)
    if two and units.family in ("leaky", "conv"):
        return _units_stage(params, X, Y, float(alpha), loss, units, init, made)
    if two and units.family == "conv-linear" and isinstance(params[1], PooledDense):
        return _conv_linear(params, X, Y, loss, units, init, made)
    if (len(params) > 2 and not biased and units.family == "linear"
            and all(type(la) is Layer for la in params)):
        # every k = 0 … min(widths, rank), each by Procrustes sweeps; the nearest is built (§11.7.10)
        svd = whitened_svd(X, Y)
        kmax = min([int(np.shape(la.W)[0]) for la in params[:-1]] + [numerical_rank(svd, X.shape[0])])
        dists = [_distance(params, balanced_point(params, X, Y, k, svd=svd)[0]) for k in range(kmax + 1)]
        k = int(np.argmin(dists))
        return dataclasses.replace(deep_stage(params, X, Y, loss, units, init, k=k), k=k,
                                   candidates=tuple((j, d, True) for j, d in enumerate(dists)))
    what = f"a {units.family} net of depth {len(params)}" + (" with biases" if biased else "")
    return Stage(units.family, loss, units, notes=(
        f"not covered: the nearest fixed point, its saddle test and escape time, for {what}; covered: "
        f"{COVERED}",))


def _distance(params, star) -> float:
    """‖θ − θ*‖ over the layers' weights."""
    return math.sqrt(sum(float(np.sum((np.asarray(a.W, float) - np.asarray(b.W, float)) ** 2))
                         for a, b in zip(params, star, strict=True)))


def _units_stage(params, X, Y, alpha, loss, units, init, made) -> Stage:
    """§11.7.6: the k learned groups as a narrow net at its fixed point, embedded
    (:mod:`~biasfree.analysis.unit_stage`)."""
    sigmas = None
    if init is not None:
        fam, kind, parts0 = ingredients(params, alpha, checked=True)
        sigmas = init_scales(init, alpha, fam, parts0)
    made.update(sigmas=sigmas, solved={})
    ufp = unit_fixed_point(params, X, Y, alpha, sigmas, units.threshold, made["solved"])
    k = ufp.k
    notes = ["the zero units sit on the kink (no Hessian there): saddle and escape from the one-sided rate "
             "λ* = max_ŵ ‖⟨r σ(ŵ·x)⟩‖, found by ascent (a lower bound, so the time is an upper bound)"]
    if init is None:
        notes.append("no init: units group only when aligned to round-off (§11.1), so copies of one unit "
                     "that differ by init noise are separate groups, merged into fewer units by a greedy "
                     "search (§11.7.6) that can miss the nearest merge (pass init=)")
    if not ufp.stationary:
        notes.append(f"the {k}-unit net did not reach a fixed point: its relative gradient stays above "
                     f"its round-off bound (.unit_point.grad, .grad_tol): the net is not near a plateau "
                     f"of {k} units")
    escape, drop = (ufp.escape_time if ufp.saddle and ufp.eps > 0 else None), ufp.drop_time
    if ufp.drop_level is not None and loss < ufp.drop_level:  # (a NaN loss, above 600 weights: not known)
        escape = drop = 0.0
        notes.append(f"the net is past this saddle's drop: its loss {loss:.6g} is below the drop level "
                     f"L* − (3/8)λ*²/m = {ufp.drop_level:.6g}, where the escaping unit is half learned")
    leave = None
    if ufp.saddle and drop != 0.0 and ufp.copy_time is not None and (drop is None or ufp.copy_time < drop):
        # a small member may lead, and no formula gives its turning time: measured (unit_leave)
        horizon = HORIZON * (drop if drop is not None else COPY_HORIZON * ufp.copy_time)
        leave = measured_leave(params, X, Y, alpha, ufp.drop_level, ufp.rate, horizon)
    return Stage(units.family, loss, units, None, ufp.params, ufp.loss, ufp.distance, ufp.eps,
                 1 if ufp.saddle else 0, escape, drop, None,
                 tuple(notes), unit_point=ufp, k=k, candidates=ufp.candidates, leave=leave)


def _pooled_patches(conv, X) -> np.ndarray:
    """z̄(x) = (1/S) Σ_s P_s(x): the mean patch (N, C_in·∏k), one basis kernel at a time."""
    n = int(np.prod(np.shape(conv.K)[1:]))
    basis = np.eye(n).reshape((n, 1) + tuple(np.shape(conv.K)[1:]))
    out = [np.asarray(Conv(jnp.asarray(b), in_shape=conv.in_shape, padding=conv.padding)
                      .linear(jnp.asarray(X))) for b in basis]
    return np.stack([o.mean(1) for o in out], 1)


def _conv_linear(params, X, Y, loss, units, init, made) -> Stage:
    """§11.7.7: a linear conv net with a pooled readout is ``f = V K z̄(x)``, a two-layer linear
    net on the mean patch z̄: its stage there, the fixed point's kernels mapped back."""
    conv, out = params
    C = np.shape(conv.K)[0]
    as_dense = (Layer(jnp.asarray(np.asarray(conv.K, float).reshape(C, -1))), Layer(jnp.asarray(out.V)))
    start = None
    if init is not None:
        start = (Layer(jnp.asarray(np.asarray(init[0].K, float).reshape(C, -1))),
                 Layer(jnp.asarray(init[1].V)))
    made["patches"] = _pooled_patches(conv, X)
    st = _linear(as_dense, made["patches"], Y, loss, units, start)
    K1, V2 = st.params_star
    star = (Conv(jnp.asarray(np.asarray(K1.W).reshape(np.shape(conv.K))), in_shape=conv.in_shape,
                 padding=conv.padding), PooledDense(V2.W, in_shape=out.in_shape))
    return dataclasses.replace(st, family="conv-linear", params_star=star, notes=st.notes + (
        "computed on the mean patch z̄(x) = (1/S)Σ_s P_s(x), where f = V K z̄(x) exactly",))


def _attention(layer, X, Y, init, made) -> Stage:
    """§11.7.7: merged attention is its twin W₂W₁z exactly when u = b = 0, a two-layer linear net
    on z (heads are its hidden units): the twin's stage. Separate attention: its heads only."""
    units = effective_units(layer, init=init)
    zd = twin_dataset(Dataset(np.asarray(X, float), np.asarray(Y, float), mirror=False), layer.n_ctx,
                      norm=layer.norm)
    Z, Yz = np.asarray(zd.X, float), np.asarray(zd.Y, float)
    made["twin"] = Z, Yz
    F = np.asarray(forward((layer,), jnp.asarray(X), 0.0))
    loss = float(0.5 * np.mean(np.sum((F - Yz) ** 2, 1)))
    if isinstance(layer, SeparateAttention):  # §11.7.11–12: no closed form; solved numerically
        dev, tol = kronecker_departure(Z, layer.d)
        hp = head_fixed_point(layer, X, Y, units.count)
        notes = [f"solved numerically (§11.7.12): the {hp.k}-head point is a rank-{hp.k} fit "
                 f"of the in-context map B in the metric Σ_zz, a closed form only when Σ_zz is a Kronecker "
                 f"product P ⊗ Q; on these data the nearest Kronecker product misses Σ_zz by {dev:.3g} of "
                 f"‖Σ_zz‖_F (round-off {tol:.2g}); a zero head escapes at order ε³ (Hessian blind): the time "
                 "to leave is the net's small heads' cubic flow (§11.7.13)"]
        if not hp.stationary:
            notes.append(f"the {len(hp.heads)}-head layer did not reach a fixed point: its relative gradient "
                         "stays above its round-off bound (.head_point.grad, .grad_tol)")
        lv = hp.leave
        notes += [lv.note] if lv is not None and lv.note else []
        return Stage(units.family, loss, units, None, hp.params, hp.loss, hp.distance,
                     None if lv is None else math.sqrt(3) * lv.eps, 0,
                     None if lv is None else lv.escape_time, None,
                     None, tuple(notes), head_point=hp, k=len(hp.heads), candidates=hp.candidates)
    twin = tuple(Layer(la.W) for la in merged_to_twin(layer))
    start = None if init is None else tuple(Layer(la.W) for la in merged_to_twin(init))
    st = _linear(twin, Z, Yz, loss, units, start)
    off = off_twin(layer)
    notes = ("computed on the twin W₂W₁z (heads: its hidden units; θ: the twin's weights A_h, γ_h)"
             + ("" if off == 0 else f"; the off-twin blocks are {off:.3g}, not 0: the twin is not exact"),)
    return dataclasses.replace(st, family="attention-merged", notes=st.notes + notes)


def _balanced(W1, W2, svd, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The balanced rank-k fixed point ``(Q B₁, B₂ Qᵀ)`` nearest ``(W1, W2)`` (module doc)."""
    U, s, Vt, isqrt = svd
    B1 = np.sqrt(s[:k])[:, None] * Vt[:k] @ isqrt  # (k, d)
    B2 = U[:, :k] * np.sqrt(s[:k])  # (p, k)
    Um, _, Vmt = np.linalg.svd(W1 @ B1.T + W2.T @ B2, full_matrices=False)
    Q = Um @ Vmt  # (H, k): the polar factor, the closest rotation of the balanced factors
    return Q @ B1, B2 @ Q.T


def _linear(params, X, Y, loss, units, init) -> Stage:
    W1, W2 = (np.asarray(la.W, float) for la in params)
    svd = whitened_svd(X, Y)
    # every k = 0 … min(H, rank), the data's numerical rank: each point is one SVD of an (H, k) matrix,
    # the nearest is answered (§11.7.2), not the count's, which without the init's scale counts noise (§11.1)
    rank = numerical_rank(svd, X.shape[0])
    points = [_balanced(W1, W2, svd, k) for k in range(min(W1.shape[0], rank) + 1)]
    dists = [math.sqrt(float(np.sum((W1 - S1) ** 2) + np.sum((W2 - S2) ** 2))) for S1, S2 in points]
    k = int(np.argmin(dists))
    S1, S2 = points[k]
    fp = fixed_point((Layer(S1), Layer(S2)), X, Y, 1.0)
    delta = np.concatenate([(W1 - S1).ravel(), (W2 - S2).ravel()])
    notes = []
    hidden = svd.s[:rank][svd.s[:rank] <= units.threshold]
    at_least = bool(units.why.startswith(INIT_NOISE) and hidden.size)  # §11.1's bound assumes a small init
    if at_least:
        notes.append(f"the init's noise bound {units.threshold:.3g} is at or above {hidden.size} of the "
                     f"data's {rank} strengths ({hidden.max():.3g} and below): a mode learned to its "
                     f"strength reads no more than the bound, so the count {units.count} is a lower bound "
                     f"(§11.1's bound is for a small init); the nearest fixed point, by distance, has "
                     f"{k} units")
    if delta.size <= DENSE_HESSIAN:
        lam, vec = hessian_eigh((Layer(S1), Layer(S2)), X, Y, 1.0)  # flattened W₁ then W₂, as delta
        E = vec[:, lam <= fp.lambda_min + 2 * fp.lambda_tol]  # Weyl: within 2λ_tol, indistinguishable
    else:
        E = fp.direction[:, None]
        notes.append(f"{delta.size} weights > {DENSE_HESSIAN}: ε is measured along one eigenvector of λ_min "
                     "(Lanczos), not its whole eigenspace")
    eps = float(np.linalg.norm(E.T @ delta))
    escape = drop = None
    if fp.saddle:
        escape = fp.escape_time(eps) if eps > 0 else math.inf
        if eps >= 1:  # ln(1/ε) ≤ 0: the leading order, for ε ≪ 1, would give a negative time
            escape = 0.0
            notes.append(f"ε = {eps:.3g} ≥ 1 along the escape: the net is already leaving this saddle (the "
                         "leading-order time ln(1/ε)/|λ_min| is for ε ≪ 1), so it is given as 0")
        if is_whitened(X):
            sn, a0 = abs(fp.lambda_min), eps**2 / 2
            drop = math.inf if a0 == 0 else (math.log(sn / a0 - 1) / (2 * sn) if a0 < sn / 2 else 0.0)
        else:
            notes.append("inputs not whitened (‖Σ_xx − I‖₂ > 1e-10): the closed form gives only the "
                         "leading-order escape time ln(1/ε)/|λ_min|, not the drop time, which is measured")
    stair = None
    if init is not None:
        stair, note = _staircase(init, X, Y, loss)
        notes += [note] if note else []
    level = float(reduced_rank_losses(X, Y)[k])
    leave = None
    if fp.saddle and drop is None and k < rank and math.isfinite(escape):
        # whitened, the next mode is half learned 3/4 of the way from L_k to L_{k+1} = L_k − s²/2
        rate = abs(fp.lambda_min)  # (ε > 1, a net well into its drop: the leading order is negative)
        leave = measured_leave(params, X, Y, 1.0, level - 0.375 * float(svd.s[k]) ** 2, rate,
                               LEAD_HORIZON * max(escape, 1 / rate))
    return Stage("linear", loss, units, fp, (Layer(jnp.asarray(S1)), Layer(jnp.asarray(S2))),
                 level, float(np.linalg.norm(delta)), eps, E.shape[1],
                 escape, drop, stair, tuple(notes), k=k, at_least=at_least,
                 candidates=tuple((j, d, True) for j, d in enumerate(dists)),  # closed forms: exact points
                 leave=leave)


def _staircase(init, X, Y, loss) -> tuple[Staircase | None, str]:
    U, s, Vt, isqrt = whitened_svd(X, Y)
    keep = s > 1e-10 * s[0] if s.size else s > 0
    U, s, Vt = U[:, keep], s[keep], Vt[keep]
    V1, V2 = (np.asarray(la.W, float) for la in init)
    sq = np.linalg.pinv(isqrt)  # Σ_xx^{1/2} on its range
    a0 = 0.25 * np.sum((V1 @ sq @ Vt.T + V2.T @ U) ** 2, axis=0)
    if np.any(a0 >= s / 2) or np.any(a0 <= 0):
        return None, (f"no staircase: the init's mode strengths {np.round(a0, 6).tolist()} are not all in "
                      f"(0, s/2) for s = {np.round(s, 6).tolist()} (not a small init)")
    pred = data_plateaus(s, a0, float(np.mean(np.sum(Y**2, 1))))
    return Staircase(pred, a0, s, int(np.sum(loss <= pred.crossings))), ""
