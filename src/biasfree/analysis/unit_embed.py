"""Theorem 1's embeddings (docs/theory.md §11.4) for a net of units as
:mod:`~biasfree.analysis.unit_stage` reads it: a bias-free two-layer (leaky) ReLU net, dense or
conv, whose unit i (a hidden unit, or a kernel with its readout) has incoming weights ``U_i`` and
outgoing ``V_i`` (:func:`~biasfree.analysis.unit_stage.parts`; f = Σ_i f(U_i, V_i)). The
constructions are :mod:`~biasfree.analysis.saddles`' on (U, Vᵀ) in place of (W₁, W₂):
``"split"`` (unit j copied, its outputs shared ρ : 1 − ρ), ``"zero"`` (a unit of zeros, on
σ(0) = 0), ``"rescale"`` (a copy c U_j, c > 0: σ_α is 1-homogeneous, a kernel's channel too) and
``"linear"`` (α = 1). A conv kernel embeds exactly as a hidden unit does: its channel reads the
patches with its own kernel, the readout reads that channel only. A quadratic net
(σ(z) = z², ``Layer(W, activation="quadratic")``, dense) embeds by split and zero unit, and by
a rescaled copy of degree 2 (σ(cz) = c²σ(z): the copy's outputs are divided by c²); not by
``"linear"``.

Checked as :func:`~biasfree.analysis.saddles.embed` checks a dense net, without its Hessian (a conv
net's is not formed here, and a zero unit sits on the kink, where it is not defined: the escape is
:mod:`~biasfree.analysis.unit_escape`'s one-sided rate): the function unchanged to round-off,
``max_n ‖f_wide(x_n) − f_narrow(x_n)‖ ≤ 2 γ_K P max‖x‖`` (K = a + n', P the larger product of the
layers' Frobenius norms, as :func:`~biasfree.analysis.unit_stage.unit_fixed_point` bounds it), and
both nets' relative gradients ‖∇L‖·‖θ‖/(½<‖y‖²>) under their round-off bounds
(:func:`~biasfree.analysis.unit_stage.relative_gradient`). A narrow net that is not a fixed point
is refused with its gradient.

For a quadratic net each unit v (u·x)² is a product of three factors (v, u, u) on the input x ⊗ x,
so the bounds are those of such products (:func:`~biasfree.analysis.stationary.gradient_bound`, as
separate attention's heads use it): factor norms ‖U‖_F, ‖U‖_F, ‖V‖_F on inputs of norm ‖x‖² (the
two copies of U count ‖U‖ twice in ‖θ‖, a larger bound), and the function change within
2 γ_K ‖U‖_F² ‖V‖_F max‖x‖² (each ``z = u·x`` within ``γ_a |u|·|x|``, its square within
``γ_{2a+1} (|u|·|x|)²``, summed over the units with ``|v|``: Cauchy–Schwarz).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from .. import _validate as v
from ..core.attention import SeparateAttention
from ..core.conv import Conv, PooledDense
from ..core.layers import Layer, Params
from ..core.nets import forward_unchecked, is_leaky
from ..core.precision import precise
from .attention_stage import features, function_change
from .attention_stage import relative_gradient as head_gradient
from .saddles import checked_construction, embedded_weights
from .stationary import accumulations, gamma, gradient_bound, layer_norms
from .unit_stage import parts, relative_gradient


@dataclass(frozen=True)
class UnitEmbedding:
    """The wide net ``params`` of ``construction``; the narrow and wide relative gradients with their
    round-off bounds; ``function_gap`` max_n ‖f_wide(x_n) − f_narrow(x_n)‖ and its bound (module doc)."""

    params: Params
    construction: str
    narrow_grad: float
    narrow_grad_tol: float
    grad: float
    grad_tol: float
    function_gap: float
    function_tol: float

    @property
    def holds(self) -> bool:
        """Theorem 1's identities: the same function and a zero gradient, each to round-off."""
        return self.function_gap <= self.function_tol and self.grad <= self.grad_tol


def _quadratic(params) -> bool:
    return type(params[0]) is Layer and params[0].activation == "quadratic"


def _units(params, name: str) -> Params:
    """``params`` as a bias-free two-layer dense or conv σ_α net or dense z² net, else a ValueError
    naming the families."""
    ok = (isinstance(params, tuple | list) and len(params) == 2
          and (all(type(la) is Layer for la in params)
               or (isinstance(params[0], Conv) and isinstance(params[1], PooledDense | Layer)))
          and all(getattr(la, "bias", None) is None for la in params))
    if not ok or not (is_leaky(params) or (_quadratic(params) and params[1].activation == "leaky")):
        raise ValueError(f"{name} must be a bias-free two-layer net of units: two biasfree.nets Layers "
                         "(σ_α, or z² on the hidden layer), or a Conv with a PooledDense or Layer readout "
                         "(σ_α), b=None (Theorem 1's constructions here; biasfree.analysis.saddles.embed "
                         "gives a dense σ_α net's Hessian too)")
    return tuple(params)


@precise
def embed_units(params: Params, X, Y, alpha: float, construction: str, *, unit: int = 0,
                ratio: float = 0.5, scale: float = 1.0) -> UnitEmbedding:
    """Embed the fixed point ``params`` (n units, slope ``alpha``, data X, Y) into n + 1 units by
    ``construction`` (module doc: unit ``unit`` = j, split ratio ``ratio`` = ρ, copy scale
    ``scale`` = c) and check it (:class:`UnitEmbedding`)."""
    params = _units(params, "params")
    X, Y = v.data(X, Y)
    alpha = float(v.slope(alpha))
    construction, scale = checked_construction(construction, alpha, scale)
    if _quadratic(params) and construction == "linear":
        raise ValueError("construction='linear' needs a linear net; a quadratic net embeds by 'split', "
                         "'zero' or 'rescale' (of degree 2)")
    g, tol = _relative_gradient(params, X, Y, alpha)
    if not g <= tol:
        raise ValueError(f"params is not a fixed point: its relative gradient ‖∇L‖·‖θ‖/(½<||y||²>) is "
                         f"{g:.3g}, above the round-off bound {tol:.3g}; train it to a fixed point first")
    U, V, rebuild = parts(params)
    j = v.integer("unit", unit, 0, U.shape[0] - 1)
    W1, W2 = embedded_weights(U, V.T, construction, j, v.real("ratio", ratio, scalar=True), scale,
                              degree=2 if _quadratic(params) else 1)
    return check_unit_embedding(params, rebuild(W1, W2.T), X, Y, alpha, construction)


@precise
def check_unit_embedding(narrow: Params, wide: Params, X, Y, alpha: float,
                         construction: str = "given") -> UnitEmbedding:
    """:class:`UnitEmbedding` of any wide net against the narrow one: :func:`embed_units`'s checks, for
    an embedding built by hand (e.g. a wrong one)."""
    narrow, wide = _units(narrow, "narrow"), _units(wide, "wide")
    X, Y = v.data(X, Y)
    alpha = float(v.slope(alpha))
    if _quadratic(narrow) != _quadratic(wide):
        raise ValueError("narrow and wide must have the same hidden activation")
    g0, tol0 = _relative_gradient(narrow, X, Y, alpha)
    g, tol = _relative_gradient(wide, X, Y, alpha)
    f_n, f_w = (np.asarray(forward_unchecked(p, X, alpha)) for p in (narrow, wide))
    P = max(float(np.prod(_factor_norms(p))) for p in (narrow, wide))
    units = parts(wide)[0]
    k = units.shape[1] * (2 if _quadratic(wide) else 1) + units.shape[0] + 1
    x = float(np.max(np.linalg.norm(X, axis=1)))
    ftol = 2 * gamma(k) * P * (x * x if _quadratic(wide) else x)
    gap = float(np.max(np.linalg.norm(f_w - f_n, axis=1)))
    return UnitEmbedding(wide, construction, g0, tol0, g, tol, gap, ftol)


def _factor_norms(params) -> np.ndarray:
    """The factors' Frobenius norms: the layers', with a quadratic layer's counted twice (module doc)."""
    w = layer_norms(params)
    return np.r_[w[0], w] if _quadratic(params) else w


def _relative_gradient(params, X, Y, alpha: float) -> tuple[float, float]:
    """``(‖∇L‖‖θ‖/(½⟨‖y‖²⟩), its round-off bound)``: unit_stage's for σ_α nets; for a quadratic net the
    same gradient against the bound of a product of factors (‖U‖, ‖U‖, ‖V‖) on inputs x ⊗ x (module doc)."""
    g, tol = relative_gradient(params, X, Y, alpha)
    if not _quadratic(params):
        return g, tol
    R = np.asarray(forward_unchecked(params, X, alpha)) - Y
    rx = float(np.sqrt(np.mean(np.sum(X**2, axis=1) ** 2)))  # rms ‖x ⊗ x‖ = rms ‖x‖²
    rr = float(np.sqrt(np.mean(np.sum(R**2, axis=1))))
    K = accumulations(params, X.shape[0]) + X.shape[1]  # the second dot product of each z²
    return g, gradient_bound(_factor_norms(params), rx, rr, K, 0.5 * float(np.mean(np.sum(Y**2, axis=1))))


@precise
def embed_heads(layer, X, Y, construction: str, *, head: int = 0, ratio: float = 0.5) -> UnitEmbedding:
    """Theorem 1's head constructions for separate linear attention (a
    :class:`~biasfree.core.attention.SeparateAttention` at a fixed point, flat sequences X, targets Y):
    ``"zero"`` adds a head with V, K, Q = 0 (each of f_h's derivatives is a product of the head's two
    other factors: 0); ``"split"`` copies head ``head``'s K and Q and shares its V as ρ : 1 − ρ
    (f_h is linear in V_h). Checked by :mod:`~biasfree.analysis.attention_stage`'s bounds: the
    function change against 2γ_K P max z, both relative gradients against the three-factor bound."""
    if not isinstance(layer, SeparateAttention):
        raise ValueError("layer must be a SeparateAttention (the heads embed here), got "
                         f"{type(layer).__name__}")
    construction = v.choice("construction", construction, ("split", "zero"))
    X, Y = v.data(X, Y)
    feats = features(layer, X)
    g0, tol0, _ = head_gradient(layer, X, Y, feats)
    if not g0 <= tol0:
        raise ValueError(f"layer is not a fixed point: its relative gradient ‖∇L‖·‖θ‖/(½<||y||²>) is "
                         f"{g0:.3g}, above the round-off bound {tol0:.3g}; train it to a fixed point first")
    V, K, Q = (np.asarray(a, float) for a in (layer.V, layer.K, layer.Q))
    j = v.integer("head", head, 0, V.shape[0] - 1)
    rho = v.real("ratio", ratio, scalar=True)
    if construction == "split":
        V = np.concatenate([V, (1 - rho) * V[j:j + 1]])
        V[j] *= rho
        K, Q = np.concatenate([K, K[j:j + 1]]), np.concatenate([Q, Q[j:j + 1]])
    else:
        V, K, Q = (np.concatenate([a, np.zeros_like(a[:1])]) for a in (V, K, Q))
    wide = dataclasses.replace(layer, V=V, K=K, Q=Q)
    g, tol, _ = head_gradient(wide, X, Y, feats)
    gap, ftol = function_change(wide, layer, X, feats)
    return UnitEmbedding((wide,), construction, g0, tol0, g, tol, gap, ftol)
