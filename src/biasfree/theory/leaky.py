"""Leaky-ReLU nets as linear nets: the exact maps and closed-form curves (§2.3–2.5, §3.2).

Slope α, ``c = (1 + α)/2``. A two-layer bias-free leaky net whose even part stays zero on
the data (``f_even ≡ 0``: antisymmetric-pair or rank-one zero-even init on symmetric data,
docs/theory.md §2.3, §2.5) computes ``f(x) = c W_2 W_1 x`` and

    (W_1', W_2') = √c (W_1, W_2)   follows the linear net's gradient flow in   t' = c t,

with weight decay ``λ' = λ / c`` (§2.4, §2.7). The pair form (§2.3): the width-2m pair net
of (W, v) equals the width-m linear net at ``√(1 + α) (W, v)`` trained with step ``η c``.
The closed forms for leaky nets are the linear ones (:mod:`.modes`) at time ``c t`` from
``ã_0 = c a_0`` (a_0 the raw product's strength).
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from .. import _validate as v
from ..core.inits import pair_up
from ..core.layers import Layer, Params, scale_params, takes_net
from ..core.nets import has_bias
from ..core.precision import precise
from ..core.twin import linear_twin, unchecked_slope_factor
from .modes import half_time, linear_loss, mode_strength


def _c(alpha):
    """c = (1 + α)/2 of the slope(s) ``alpha``, checked: a float for one slope."""
    a = v.slope(alpha, array_ok=True)
    return float(unchecked_slope_factor(a)) if np.ndim(a) == 0 else unchecked_slope_factor(a)


def check_two_layer(params: Params, what: str) -> None:
    """The maps' shape rule, on a net :func:`~biasfree.core.layers.takes_net` has checked."""
    if len(params) != 2 or has_bias(params):
        raise ValueError(f"params: {what} holds for two-layer bias-free nets only (got depth "
                         f"{len(params)}{', with biases' if has_bias(params) else ''}); deeper "
                         "leaky nets are only approximately linear (docs/theory.md §4.1)")


@precise
@takes_net()
def leaky_to_linear(params: Params, alpha) -> Params:
    """Linear twin of a two-layer leaky net: ``(W_1', W_2') = √c (W_1, W_2)``, c = (1+α)/2.

    ``params`` the leaky net (slope ``alpha``). Exact when ``f_even ≡ 0`` along the
    trajectory (§2.4); the twin runs in time ``c t`` (:func:`leaky_time_to_linear`) with
    weight decay ``λ / c`` (:func:`leaky_decay_to_linear`).
    """
    check_two_layer(params, "the leaky-linear map")
    v.slope(alpha)  # the weight maps take one slope
    return linear_twin(params, alpha)


@precise
@takes_net()
def linear_to_leaky(params: Params, alpha) -> Params:
    """Inverse of :func:`leaky_to_linear`: ``(W_1, W_2) = (W_1', W_2') / √c``."""
    check_two_layer(params, "the leaky-linear map")
    return scale_params(params, 1.0 / np.sqrt(_c(v.slope(alpha))))


def leaky_time_to_linear(t, alpha):
    """``t' = c t``: leaky-net time ``t`` -> linear-twin time, c = (1 + α)/2."""
    return _c(alpha) * v.times("t", t)


def linear_time_to_leaky(t_linear, alpha):
    """``t = t' / c``: linear-twin time ``t_linear`` -> leaky-net time."""
    return v.times("t_linear", t_linear) / _c(alpha)


def leaky_decay_to_linear(weight_decay, alpha):
    """``λ' = λ / c``: the leaky net's weight decay λ -> the linear twin's (§2.7)."""
    return v.nonnegative("weight_decay", weight_decay) / _c(alpha)


def linear_decay_to_leaky(weight_decay, alpha):
    """``λ = c λ'``: inverse of :func:`leaky_decay_to_linear`."""
    return _c(alpha) * v.nonnegative("weight_decay", weight_decay)


@precise
@takes_net()
def pair_to_linear(params: Params, alpha, *, tol: float = 1e-12) -> Params:
    """Width-2m antisymmetric-pair net -> width-m linear net ``√(1 + α) (W, v)`` (§2.3).

    ``params`` two layers ``W_1 = [W; -W]`` (2m, d), ``W_2 = [v, -v]`` (p, 2m) as made
    by :func:`biasfree.core.inits.pair_up` (checked to ``tol``); ``alpha`` the slope. Train the
    result with learning rate ``η c`` (:func:`pair_lr_to_linear`) to follow the pair net
    step for step.
    """
    check_two_layer(params, "the pair map")
    tol = v.nonnegative("tol", tol, scalar=True)
    W1, W2 = np.asarray(params[0].matrix, float), np.asarray(params[1].matrix, float)
    m = W1.shape[0] // 2
    scale = max(np.max(np.abs(W1)), np.max(np.abs(W2)), 1e-300)
    if (W1.shape[0] % 2 or np.max(np.abs(W1[:m] + W1[m:])) > tol * scale
            or np.max(np.abs(W2[:, :m] + W2[:, m:])) > tol * scale):
        raise ValueError("params are not an antisymmetric-pair net ([W; -W], [v, -v]); build "
                         "one with biasfree.pair_up or biasfree.theory.linear_to_pair")
    v.slope(alpha)
    k = np.sqrt(1.0 + float(alpha))
    return (Layer(jnp.asarray(k * W1[:m])), Layer(jnp.asarray(k * W2[:, :m])))


@precise
@takes_net()
def linear_to_pair(params: Params, alpha) -> Params:
    """Width-m linear net ``(W', v')`` -> the width-2m pair net ``pair_up((W', v') / √(1+α))``
    that it follows (inverse of :func:`pair_to_linear`); ``alpha`` the pair net's slope."""
    check_two_layer(params, "the pair map")
    v.slope(alpha)
    return pair_up(scale_params(params, 1.0 / np.sqrt(1.0 + float(alpha))))


def pair_lr_to_linear(lr, alpha):
    """``η' = η c``: the pair net's learning rate η -> its width-m linear twin's (§2.3)."""
    return _c(alpha) * v.positive("lr", lr, why="a GD step size η > 0")


def linear_lr_to_pair(lr_linear, alpha):
    """``η = η' / c``: inverse of :func:`pair_lr_to_linear`."""
    return v.positive("lr_linear", lr_linear, why="a GD step size η > 0") / _c(alpha)


# ------------------------------------------------------------ closed-form curves


def leaky_effective_init(a0_raw, alpha):
    """``ã_0 = c a0_raw``: the effective mode strength of a leaky net whose raw
    product ``qᵀ W_2 W_1 r`` is ``a0_raw`` (= Σ over all 2m units of a pair net), slope
    ``alpha``, c = (1 + α)/2 (§3.2)."""
    return _c(alpha) * v.nonnegative("a0_raw", a0_raw, why="an initial mode strength")


def leaky_mode_strength(t, s, a0_raw, alpha, *, weight_decay: float = 0.0):
    """Effective strength ``ã(t) = u_iᵀ β_eff(t)ᵀ v_i`` of a leaky net (§3.2):

        ã(t) = σ / (1 + (σ/ã_0 - 1) exp(-2 σ c t)),   σ = s - λ/c,   ã_0 = c a0_raw,

    ``t`` times, ``s`` singular values of Σ_yx (whitened inputs), ``a0_raw`` raw
    initial strengths, ``alpha`` slope α (c = (1 + α)/2), ``weight_decay`` λ of the
    leaky net.
    """
    v.times("t", t), v.positive("a0_raw", a0_raw, why="a mode that starts at 0 never grows")
    return mode_strength(leaky_time_to_linear(t, alpha), s, leaky_effective_init(a0_raw, alpha),
                         weight_decay=float(leaky_decay_to_linear(weight_decay, alpha)))


def leaky_loss(t, s, a0_raw, alpha, y_power: float, *, weight_decay: float = 0.0):
    """Loss of the leaky net, ``L(t) = 1/2 Σ_i (s_i - ã_i(t))² + 1/2 (y_power - Σ s_i²)``:
    :func:`~biasfree.theory.linear_loss` at time ``c t`` from ``ã_0 = c a0_raw`` with
    decay ``λ/c``. Arguments as in :func:`leaky_mode_strength`; ``y_power`` = tr<y yᵀ>."""
    v.times("t", t), v.positive("a0_raw", a0_raw, why="a mode that starts at 0 never grows")
    return linear_loss(leaky_time_to_linear(t, alpha), s, leaky_effective_init(a0_raw, alpha),
                       y_power, weight_decay=float(leaky_decay_to_linear(weight_decay, alpha)))


def leaky_half_time(s, a0_raw, alpha, *, weight_decay: float = 0.0):
    """``t_1/2 = ln(σ/ã_0 - 1) / (2 σ c)``, σ = s - λ/c, ã_0 = c a0_raw. ReLU, s = 1,
    a0 = 1e-3 gives 7.600 (§3.2). Arguments as in :func:`leaky_mode_strength`."""
    v.positive("a0_raw", a0_raw, why="a mode that starts at 0 never grows")
    t_lin = half_time(s, leaky_effective_init(a0_raw, alpha),
                      weight_decay=float(leaky_decay_to_linear(weight_decay, alpha)))
    return linear_time_to_leaky(t_lin, alpha)
