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

import math
from dataclasses import dataclass

import jax.numpy as jnp
import numpy as np

from ..core.conv import drop_zero_biases
from ..core.data import check_data
from ..core.layers import Layer, Params
from ..core.nets import _forward, widths
from ..core.precision import precise
from ..core.units import EffectiveUnits, effective_units
from ..theory.plateau_times import PlateauPrediction, data_plateaus
from ..theory.reduced_rank import _whitened_svd, reduced_rank_losses
from .attention_import import is_attention_model
from .interop import as_model
from .measurements import data_arrays
from .saddles import DENSE_HESSIAN, FixedPoint, _fixed_point, _hessian
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

    @property
    def saddle(self) -> bool:
        """The fixed point is a saddle: zero gradient and λ_min < −λ_tol, each beyond round-off."""
        return self.fixed_point is not None and self.fixed_point.saddle

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
def stage(model, data, *, alpha=None, init=None) -> Stage:
    """Where ``model`` stands on ``data`` (module doc; docs/theory.md §11.7): the forms
    :func:`~biasfree.analysis.analyse.analyse` takes (a torch ``nn.Sequential``, an
    ``eqx.nn.MLP``, a weight file, a Model or params; data ``(X, Y)``, a Dataset, a file or a
    bundled name), ``alpha`` where the model does not state it, ``init`` the weights training
    started from (same forms and architecture). Returns a :class:`Stage`.

    Example::

        st = bf.analysis.stage.stage(net, (X, Y), alpha=1.0, init=net0)
        st.units.count, st.saddle, st.drop_time, st.staircase.passed
    """
    if is_attention_model(model):
        raise ValueError("stage: attention models are not covered (no embedded fixed point is built for "
                         "heads); bf.effective_units(layer) counts their heads")
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
    return stage_of(params, X, Y, a, start)


@precise
def stage_of(params: Params, X, Y, alpha: float, init: Params | None = None) -> Stage:
    """:func:`stage` of read and checked ``params`` (zero biases dropped), float arrays X (N, d),
    Y (N, p), slope ``alpha`` and ``init`` (same architecture, or None): what ``analyse`` has."""
    units = effective_units(params, alpha, init=init)
    loss = float(0.5 * np.mean(np.sum((np.asarray(_forward(params, jnp.asarray(X), alpha)) - Y) ** 2, 1)))
    dense_linear = (units.family == "linear" and len(params) == 2
                    and all(type(la) is Layer and la.bias is None for la in params))
    if not dense_linear:
        biased = " with biases" if any(getattr(la, "bias", None) is not None for la in params) else ""
        why = (f"a {units.family} net of depth {len(params)}{biased}" if units.family != "leaky" else
               "ReLU/leaky nets: the zero unit sits on the kink, so the escape is one-sided and the Hessian "
               "does not see it (§11.4.4)")
        return Stage(units.family, loss, units, notes=(
            f"not covered: the nearest fixed point, its saddle test and escape time, and the staircase "
            f"({why}); they are built for bias-free two-layer dense linear nets",))
    return _linear(params, X, Y, loss, units, init)


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
