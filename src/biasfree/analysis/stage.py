"""Where a net stands on its saddle-to-saddle staircase (docs/theory.md §11.7): its effective
units now, the embedded fixed point nearest to it, whether that point is a saddle and when the
net leaves it, and (given the init) the staircase its training went through.

For a bias-free two-layer dense *linear* net ``f(x) = W₂W₁x`` (width H) with k effective units
(:func:`~biasfree.core.units.effective_units`, the init's scale as noise floor), the candidate is
the best rank-k map ``β_k = U_k diag(s_k) V_kᵀ Σ_xx^{-1/2}`` (:mod:`biasfree.theory.reduced_rank`)
in balanced form, embedded into width H by zero units (Theorem 1, §11.4) and rotated to the net's
hidden basis: ``W₁* = Q B₁``, ``W₂* = B₂ Qᵀ`` with ``B₁ = diag(√s_k) V_kᵀ Σ_xx^{-1/2}``,
``B₂ = U_k diag(√s_k)`` and Q (H, k) the orthonormal Q maximising ``tr Qᵀ(W₁B₁ᵀ + W₂ᵀB₂)``
(orthogonal Procrustes: the polar factor, the closest such point to the net in ‖θ − θ*‖). Any
factorisation of β_k is a fixed point (G = Σ_yx − β_kΣ_xx has W₂*ᵀG = 0, G W₁*ᵀ = 0, §11.4.2).

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

Covered: the fixed point for two-layer dense linear nets; effective units for every family of
:data:`~biasfree.core.units.FAMILIES` that the model readers give (dense, conv). Not covered
(said in ``notes``): ReLU/leaky fixed points (the zero unit sits on the kink, its escape is
one-sided and the Hessian does not see it, §11.4.4), deep, biased and conv nets' fixed points,
staircases of nonlinear nets, and attention models (refused: ``bf.effective_units`` counts
their heads).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import jax.numpy as jnp
import numpy as np

from ..core.attention import MergedAttention, SeparateAttention
from ..core.attention_twin import merged_to_twin, off_twin, twin_dataset
from ..core.conv import Conv, PooledDense, drop_zero_biases
from ..core.data import Dataset, check_data
from ..core.layers import Layer, Params
from ..core.nets import _forward, forward, widths
from ..core.precision import precise
from ..core.units import EffectiveUnits, _ingredients, effective_units, init_scales
from ..theory.plateau_times import PlateauPrediction, data_plateaus
from ..theory.reduced_rank import _whitened_svd, reduced_rank_losses
from ..theory.staircase import find_plateaus, match_levels
from .attention_import import as_attention, is_attention_model
from .interop import as_model
from .measurements import data_arrays
from .saddles import DENSE_HESSIAN, FixedPoint, _fixed_point, _hessian
from .unit_stage import UnitFixedPoint, unit_fixed_point, unit_levels
from .verify import check_reading

WHITE = 1e-10
"""Inputs count as whitened when ‖Σ_xx − I‖₂ ≤ this (far above the round-off of XᵀX/N, far
below any difference that would move Saxe's times): then the drop time is exact flow."""


@dataclass(frozen=True)
class Staircase:
    """The data-induced staircase from the init (§11.5): ``prediction`` (times, levels,
    crossings), ``a0`` each mode's initial strength, ``s`` the modes, and ``passed`` how many
    drops the net's loss is past (loss ≤ crossing level)."""

    prediction: PlateauPrediction
    a0: np.ndarray
    s: np.ndarray
    passed: int


@dataclass(frozen=True)
class Recorded:
    """The staircase a recorded training curve went through (§11.3): ``plateaus``
    (:class:`~biasfree.theory.staircase.Staircase`, the rule of §11.3.1), each matched to the
    nearest of ``levels`` (``matches``: k units; the reduced-rank losses for a linear net, the
    embedded k-unit fixed points' losses for units), or ``note`` why none were found."""

    plateaus: object
    matches: tuple
    levels: np.ndarray
    note: str = ""


@dataclass(frozen=True)
class Stage:
    """Where a net stands (module doc). ``units``: its effective units now. For a covered family
    (``fixed_point`` not None): ``params_star`` the k-unit fixed point θ* embedded in the net's
    width, ``level`` the reduced-rank loss L_k computed apart, ``distance`` ‖θ − θ*‖,
    ``unstable_distance`` ε = ‖P_E(θ − θ*)‖ along its unstable eigenspace E of dimension
    ``unstable_dim``, ``escape_time`` ``ln(1/ε)/|λ_min|`` (gradient-flow time t = η·steps; inf if not
    a saddle), ``drop_time`` the time to the next drop on whitened inputs (None otherwise).
    ``staircase`` with ``init`` (linear nets). ``notes``: what is not covered, and why."""

    family: str
    loss: float
    units: EffectiveUnits
    fixed_point: FixedPoint | None = None
    params_star: Params | None = None
    level: float | None = None
    distance: float | None = None
    unstable_distance: float | None = None
    unstable_dim: int = 0
    escape_time: float | None = None
    drop_time: float | None = None
    staircase: Staircase | None = None
    notes: tuple[str, ...] = ()
    recorded: Recorded | None = None
    """With a recorded loss curve (``analyse``'s rerun from ``init``): its plateaus matched to levels."""
    unit_point: UnitFixedPoint | None = None
    """(Leaky) ReLU dense and conv nets (§11.7.6): the embedded fixed point, its checks, the one-sided
    escape rate λ* (``fixed_point`` is then None: the Hessian is not defined on the kink)."""

    @property
    def saddle(self) -> bool:
        """The fixed point is a saddle: zero gradient and λ_min < −λ_tol (or, for a ReLU net, the
        one-sided rate λ* > its round-off), each beyond round-off."""
        if self.unit_point is not None:
            return self.unit_point.saddle
        return self.fixed_point is not None and self.fixed_point.saddle

    @property
    def covered(self) -> bool:
        """A nearest fixed point was built (else ``notes`` says why not)."""
        return self.fixed_point is not None or self.unit_point is not None

    def lines(self) -> list[str]:
        """The answer in at most three short lines (``analyse``'s summary and the CLI)."""
        u = self.units
        out = [f"effective units {u.count} ({u.family}; threshold {u.threshold:.3g}), loss {self.loss:.6g}"]
        fp, up = self.fixed_point, self.unit_point
        if fp is not None:
            out.append(f"nearest fixed point: best {u.count}-unit solution, loss {fp.loss:.6g}, ‖θ − θ*‖ = "
                       f"{self.distance:.3g}; "
                       + (f"saddle, λ_min = {fp.lambda_min:.4g} (tol {fp.lambda_tol:.2g})"
                          if self.saddle else "not a saddle"))
        elif up is not None:
            out.append(f"nearest fixed point: {up.k} units embedded, loss {up.loss:.6g}, ‖θ − θ*‖ = "
                       f"{up.distance:.3g}; "
                       + (f"saddle, one-sided rate λ* = {up.rate:.4g} (tol {up.rate_tol:.2g})"
                          if self.saddle else "not a saddle"))
        else:
            out.append(self.notes[0] if self.notes else "no fixed point")
        if self.covered and self.saddle:
            t = self.escape_time if self.drop_time is None else self.drop_time
            out[-1] += (f"; leaves in t ≈ {t:.4g} (ε = {self.unstable_distance:.3g}"
                        + (", next drop at ln(u*/a₀ − 1)/(2λ), a₀ = ε²/2)" if self.drop_time is not None else
                           ", ln(1/ε)/rate)"))
        if self.staircase is not None:
            st = self.staircase
            out.append(f"staircase from init: levels {np.round(st.prediction.levels, 4).tolist()}, passed "
                       f"{st.passed} of {st.prediction.times.size} drops")
        if self.recorded is not None:
            out.append(self.recorded_line())
        return out

    def recorded_line(self) -> str:
        """The recorded curve's plateaus and the units k each matches."""
        r = self.recorded
        if r.plateaus is None:
            return f"recorded curve: {r.note}"
        got = ", ".join(f"{m.level:.4g} (k = {m.k}: {m.predicted:.4g})" for m in r.matches)
        return f"recorded curve from init: {len(r.matches)} plateaus, levels {got}"

    def summary(self) -> str:
        """One line per answer, each with its numbers and thresholds."""
        u = self.units
        out = [f"effective units: {u.count} ({u.family}; magnitudes above {u.threshold:.3g}: {u.why})"]
        fp = self.fixed_point
        if fp is not None:
            out.append(f"nearest fixed point: the best {u.count}-unit solution embedded, loss {fp.loss:.6g} "
                       f"(L_{u.count} = {self.level:.6g}), distance ‖θ − θ*‖ = {self.distance:.3g}; gradient "
                       f"{fp.grad:.2g} vs round-off {fp.grad_tol:.2g}: "
                       + ("stationary" if fp.stationary else "NOT stationary"))
            out.append(f"λ_min = {fp.lambda_min:.6g} (round-off {fp.lambda_tol:.2g}): "
                       + (f"a saddle; ε = {self.unstable_distance:.3g} along its {self.unstable_dim}-dim "
                          f"unstable space; escape ln(1/ε)/|λ_min| = {self.escape_time:.4g} (leading order)"
                          + ("" if self.drop_time is None else
                             f", next drop ln(s/a₀ − 1)/(2s) at a₀ = ε²/2 in {self.drop_time:.4g}")
                          if self.saddle else "not a saddle"))
        up = self.unit_point
        if up is not None:
            out.append(f"nearest fixed point: the {up.k} strongest learned units as a narrow fixed point, "
                       "embedded "
                       f"(rescaled copies, zero units), loss {up.loss:.6g}, "
                       f"distance ‖θ − θ*‖ = {up.distance:.3g}; "
                       f"function change {up.function_gap:.2g} vs round-off {up.function_tol:.2g}; gradient "
                       f"{up.grad:.2g} vs round-off {up.grad_tol:.2g}: "
                       + ("stationary" if up.stationary else "NOT stationary"))
            out.append(f"one-sided escape rate λ* = max_ŵ ‖⟨r σ(ŵ·x)⟩‖ = {up.rate:.6g} (round-off "
                       f"{up.rate_tol:.2g}): " + (f"a saddle; ε = {up.eps:.3g}; escape ln(1/ε)/λ* = "
                                                  f"{up.escape_time:.4g} (leading order)" if up.saddle
                                                  else "not a saddle")
                       + ("" if up.drop_time is None else
                          f", next drop ln(u*/a₀ − 1)/(2λ*) at u* = λ*/m = {up.rate / up.m:.4g}, a₀ = ε²/2 "
                          f"in {up.drop_time:.4g}"))
        if self.recorded is not None:
            out.append(self.recorded_line())
        if self.staircase is not None:
            st = self.staircase
            out.append(f"staircase from init: levels {np.round(st.prediction.levels, 6).tolist()} at times "
                       f"{np.round(st.prediction.times, 4).tolist()}; passed {st.passed} of "
                       f"{st.prediction.times.size} drops (loss {self.loss:.6g})")
        return "\n".join(out + list(self.notes))


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
        from .attention import _with_n_ctx

        X, Y, _ = data_arrays(data)
        X, Y = np.asarray(X, float), np.asarray(Y, float)
        layer = _with_n_ctx(as_attention(model, X), X.shape[1])
        start = None if init is None else _with_n_ctx(as_attention(init, X, like=layer, name="init"),
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


COVERED = ("two-layer bias-free dense linear nets (closed form, §11.7.2), two-layer bias-free dense and "
           "conv (leaky) ReLU nets (units and kernels, §11.7.6), two-layer bias-free linear conv nets with "
           "a pooled readout (§11.7.7) and merged linear attention (its twin, §11.7.7)")
"""The families whose nearest embedded fixed point :func:`stage_of` builds."""


ANALYSE_WEIGHTS = DENSE_HESSIAN
"""``analyse`` builds the nearest fixed point only for nets of at most this many weights (the size
up to which the Hessian is formed whole, §11.4.3); above, it reports the effective units alone
(measured: ≤ 20% of ``analyse``'s time at ``bench_analyse`` medium, docs/performance.md)."""


def weights(params) -> int:
    """The number of trained weights of a net or an attention layer (its twin's for merged)."""
    if isinstance(params, MergedAttention | SeparateAttention):
        return sum(int(np.size(la.W)) for la in merged_to_twin(params))
    leaves = (getattr(la, n, None) for la in params for n in ("W", "K", "V", "b"))
    return sum(int(np.size(leaf)) for leaf in leaves if leaf is not None)


def stage_answer(params, X, Y, alpha: float, init=None, history=None) -> Stage | str:
    """What ``analyse`` reports (``Analysis.stage``): :func:`stage_of` for nets of at most
    :data:`ANALYSE_WEIGHTS` weights (with the curve of ``history``'s measured rerun from ``init``,
    when there is one), else the effective units and their loss with a note; the one-line refusal
    (a str) for a net with no effective-unit rule."""
    try:
        n = weights(params)
        if n <= ANALYSE_WEIGHTS:
            run = None if history is None or history.prediction is None else history.prediction.trained
            curve = None if run is None else (np.asarray(run.t), np.asarray(run.loss))
            return stage_of(params, X, Y, alpha, init, curve=curve)
        units = effective_units(params, alpha, init=init)
        net = (params,) if isinstance(params, MergedAttention | SeparateAttention) else params
        loss = float(0.5 * np.mean(np.sum((np.asarray(forward(net, jnp.asarray(X), alpha)) - Y) ** 2, 1)))
        return Stage(units.family, loss, units, notes=(
            f"the nearest fixed point is not built by analyse above {ANALYSE_WEIGHTS} weights (this net has "
            f"{n}): call biasfree.analysis.stage.stage(model, data) for it",))
    except ValueError as e:
        return f"stage: {e}"


@precise
def stage_of(params: Params, X, Y, alpha: float, init: Params | None = None, *, curve=None) -> Stage:
    """:func:`stage` of read and checked ``params`` (zero biases dropped; a net, or one attention
    layer with X its flat sequences), float arrays X (N, d), Y (N, p), slope ``alpha`` and
    ``init`` (same architecture, or None): what ``analyse`` has. A family with no effective-unit
    rule raises ValueError naming those with one; one with a rule but no fixed point built here
    gets its units and a one-line note naming the families covered (:data:`COVERED`). ``curve``
    ``(t, loss)``: a loss curve recorded from ``init``; its plateaus are found and matched to the
    k-unit levels (``Stage.recorded``)."""
    st = _stage_of(params, X, Y, alpha, init)
    if curve is None or not st.covered:
        return st
    return dataclasses.replace(st, recorded=_recorded(st, params, X, Y, alpha, init, curve))


def _recorded(st, params, X, Y, alpha, init, curve) -> Recorded:
    if st.unit_point is not None:
        sigmas = None
        if init is not None:
            fam, _, parts0 = _ingredients(params, alpha, checked=True)
            sigmas = init_scales(init, alpha, fam, parts0)
        levels = unit_levels(params, X, Y, alpha, sigmas, st.units.threshold)
    elif isinstance(params, MergedAttention):
        zd = twin_dataset(Dataset(X, Y, mirror=False), params.n_ctx, norm=params.norm)
        levels = reduced_rank_losses(np.asarray(zd.X), np.asarray(zd.Y))
    elif st.family == "conv-linear":
        levels = reduced_rank_losses(_pooled_patches(params[0], X), Y)
    else:
        levels = reduced_rank_losses(X, Y)
    try:
        found = find_plateaus(*curve)
    except ValueError as e:
        return Recorded(None, (), levels, str(e))
    return Recorded(found, match_levels(found, levels), levels)


def _stage_of(params, X, Y, alpha, init) -> Stage:
    if isinstance(params, MergedAttention | SeparateAttention):
        return _attention(params, X, Y, init)
    units = effective_units(params, alpha, init=init)
    loss = float(0.5 * np.mean(np.sum((np.asarray(_forward(params, jnp.asarray(X), alpha)) - Y) ** 2, 1)))
    biased = any(getattr(la, "bias", None) is not None for la in params)
    two = len(params) == 2 and not biased
    if two and units.family == "linear" and all(type(la) is Layer for la in params):
        return _linear(params, X, Y, loss, units, init)
    if two and units.family in ("leaky", "conv"):
        return _units_stage(params, X, Y, float(alpha), loss, units, init)
    if two and units.family == "conv-linear" and isinstance(params[1], PooledDense):
        return _conv_linear(params, X, Y, loss, units, init)
    what = f"a {units.family} net of depth {len(params)}" + (" with biases" if biased else "")
    return Stage(units.family, loss, units, notes=(
        f"not covered: the nearest fixed point, its saddle test and escape time, for {what}; covered: "
        f"{COVERED}",))


def _units_stage(params, X, Y, alpha, loss, units, init) -> Stage:
    """§11.7.6: the k learned groups as a narrow net at its fixed point, embedded
    (:mod:`~biasfree.analysis.unit_stage`)."""
    sigmas = None
    if init is not None:
        fam, kind, parts0 = _ingredients(params, alpha, checked=True)
        sigmas = init_scales(init, alpha, fam, parts0)
    ufp, k = unit_fixed_point(params, X, Y, alpha, sigmas, units.magnitudes, units.threshold)
    notes = ["the zero units sit on the kink (no Hessian there): saddle and escape from the one-sided rate "
             "λ* = max_ŵ ‖⟨r σ(ŵ·x)⟩‖, found by ascent (a lower bound, so the time is an upper bound)"]
    if not ufp.stationary:
        notes.append(f"the {k}-unit net did not reach a fixed point: relative gradient {ufp.grad:.3g} > "
                     f"round-off {ufp.grad_tol:.3g} (the net is not near a plateau of {k} units)")
    return Stage(units.family, loss, units, None, ufp.params, ufp.loss, ufp.distance, ufp.eps,
                 1 if ufp.saddle else 0, ufp.escape_time if ufp.saddle else None, ufp.drop_time, None,
                 tuple(notes), unit_point=ufp)


def _pooled_patches(conv, X) -> np.ndarray:
    """z̄(x) = (1/S) Σ_s P_s(x): the mean patch (N, C_in·∏k), one basis kernel at a time."""
    n = int(np.prod(np.shape(conv.K)[1:]))
    basis = np.eye(n).reshape((n, 1) + tuple(np.shape(conv.K)[1:]))
    out = [np.asarray(Conv(jnp.asarray(b), in_shape=conv.in_shape, padding=conv.padding)
                      .linear(jnp.asarray(X))) for b in basis]
    return np.stack([o.mean(1) for o in out], 1)


def _conv_linear(params, X, Y, loss, units, init) -> Stage:
    """§11.7.7: a linear conv net with a pooled readout is ``f = V K z̄(x)``, a two-layer linear
    net on the mean patch z̄: its stage there, the fixed point's kernels mapped back."""
    conv, out = params
    C = np.shape(conv.K)[0]
    as_dense = (Layer(jnp.asarray(np.asarray(conv.K, float).reshape(C, -1))), Layer(jnp.asarray(out.V)))
    start = None
    if init is not None:
        start = (Layer(jnp.asarray(np.asarray(init[0].K, float).reshape(C, -1))),
                 Layer(jnp.asarray(init[1].V)))
    st = _linear(as_dense, _pooled_patches(conv, X), Y, loss, units, start)
    K1, V2 = st.params_star
    star = (Conv(jnp.asarray(np.asarray(K1.W).reshape(np.shape(conv.K))), in_shape=conv.in_shape,
                 padding=conv.padding), PooledDense(V2.W, in_shape=out.in_shape))
    return dataclasses.replace(st, family="conv-linear", params_star=star, notes=st.notes + (
        "computed on the mean patch z̄(x) = (1/S)Σ_s P_s(x), where f = V K z̄(x) exactly",))


def _attention(layer, X, Y, init) -> Stage:
    """§11.7.7: merged attention is its twin W₂W₁z exactly when u = b = 0, a two-layer linear net
    on z (heads are its hidden units): the twin's stage. Separate attention: its heads only."""
    units = effective_units(layer, init=init)
    zd = twin_dataset(Dataset(np.asarray(X, float), np.asarray(Y, float), mirror=False), layer.n_ctx,
                      norm=layer.norm)
    Z, Yz = np.asarray(zd.X, float), np.asarray(zd.Y, float)
    F = np.asarray(forward((layer,), jnp.asarray(X), 0.0))
    loss = float(0.5 * np.mean(np.sum((F - Yz) ** 2, 1)))
    if isinstance(layer, SeparateAttention):
        return Stage(units.family, loss, units, notes=(
            f"not covered: the nearest fixed point of separate attention (γ, K, Q train as a depth-3 net, "
            f"no closed form on a sample); covered: {COVERED}",))
    twin = tuple(Layer(la.W) for la in merged_to_twin(layer))
    start = None if init is None else tuple(Layer(la.W) for la in merged_to_twin(init))
    st = _linear(twin, Z, Yz, loss, units, start)
    off = off_twin(layer)
    notes = ("computed on the twin W₂W₁z (heads: its hidden units; θ: the twin's weights A_h, γ_h)"
             + ("" if off == 0 else f"; the off-twin blocks are {off:.3g}, not 0: the twin is not exact"),)
    return dataclasses.replace(st, family="attention-merged", notes=st.notes + notes)


def _linear(params, X, Y, loss, units, init) -> Stage:
    W1, W2 = (np.asarray(la.W, float) for la in params)
    N = X.shape[0]
    U, s, Vt, isqrt = _whitened_svd(X, Y)
    k = min(units.count, s.size)
    B1 = np.sqrt(s[:k])[:, None] * Vt[:k] @ isqrt  # (k, d)
    B2 = U[:, :k] * np.sqrt(s[:k])  # (p, k)
    Um, _, Vmt = np.linalg.svd(W1 @ B1.T + W2.T @ B2, full_matrices=False)
    Q = Um @ Vmt  # (H, k): the polar factor, the closest rotation of the balanced factors
    S1, S2 = Q @ B1, B2 @ Q.T
    fp = _fixed_point(S1, S2, X, Y, 1.0)
    delta = np.concatenate([(W1 - S1).ravel(), (W2 - S2).ravel()])
    notes = []
    if delta.size <= DENSE_HESSIAN:
        H = W1.shape[0]
        flat = jnp.asarray(np.concatenate([S1.ravel(), S2.ravel()]))
        lam, vec = np.linalg.eigh(np.asarray(_hessian(flat, jnp.asarray(X), jnp.asarray(Y), 1.0, H)))
        E = vec[:, lam <= fp.lambda_min + 2 * fp.lambda_tol]  # Weyl: within 2λ_tol, indistinguishable
    else:
        E = fp.direction[:, None]
        notes.append(f"{delta.size} weights > {DENSE_HESSIAN}: ε is measured along one eigenvector of λ_min "
                     "(Lanczos), not its whole eigenspace")
    eps = float(np.linalg.norm(E.T @ delta))
    escape = drop = None
    if fp.saddle:
        escape = fp.escape_time(eps) if eps > 0 else math.inf
        Sxx = X.T @ X / N
        if np.linalg.norm(Sxx - np.eye(X.shape[1]), 2) <= WHITE:
            sn, a0 = abs(fp.lambda_min), eps**2 / 2
            drop = math.inf if a0 == 0 else (math.log(sn / a0 - 1) / (2 * sn) if a0 < sn / 2 else 0.0)
        else:
            notes.append("inputs not whitened (‖Σ_xx − I‖₂ > 1e-10): only the leading-order escape time "
                         "ln(1/ε)/|λ_min| is given, not the drop time")
    stair = None
    if init is not None:
        stair, note = _staircase(init, X, Y, loss)
        notes += [note] if note else []
    return Stage("linear", loss, units, fp, (Layer(jnp.asarray(S1)), Layer(jnp.asarray(S2))),
                 float(reduced_rank_losses(X, Y)[k]), float(np.linalg.norm(delta)), eps, E.shape[1],
                 escape, drop, stair, tuple(notes))


def _staircase(init, X, Y, loss) -> tuple[Staircase | None, str]:
    U, s, Vt, isqrt = _whitened_svd(X, Y)
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
