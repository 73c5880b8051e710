"""The network family: deep (leaky) ReLU networks, with or without biases.

Conventions (docs/theory.md §0). Inputs ``X`` have shape (N, d); outputs have shape
(N, p). A network of depth L holds L layers ``(W_l, b_l)`` with ``W_l`` of shape
(n_l, n_{l-1}) and ``b_l`` of shape (n_l,) or ``None`` (bias-free, the default):

    f(x) = W_L σ_α(W_{L-1} σ_α( ... σ_α(W_1 x + b_1) ... ) + b_{L-1}) + b_L,

with the leaky ReLU ``σ_α(z) = max(z, α z)``, α in [0, 1] (0 is ReLU, 1 is the
identity, i.e. a linear network). One code path serves every slope. A dense layer whose
``activation`` is "quadratic" is followed by ``σ(z) = z²`` instead (the slope is then not
read there; docs/theory.md §11.2; :func:`with_activation`).

Parameters are plain pytrees: a tuple of layers (:mod:`.layers`; inits in :mod:`~biasfree.core.inits`).
Everything here is a pure function of arrays; α may be a traced value, so ensembles over α
``vmap``. Also the entropy effective rank of a layer's singular values.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np

from .. import _validate as validate
from .layers import ACTIVATIONS, Layer, Params, check_net, is_net, takes_net
from .precision import precise
from .twin import unchecked_slope_factor

Array = jax.Array


@precise
def leaky_relu(z, alpha):
    """``σ_α(z) = max(z, α z)`` elementwise, for slope ``alpha`` = α in [0, 1].

    Written as ``z if z > 0 else α z`` so that autodiff gives ``σ_α'(0) = α``, PyTorch's
    convention (``jnp.maximum`` would give (1 + α)/2 there; docs/theory.md §0).
    """
    validate.slope(alpha, array_ok=True)
    if not isinstance(z, jax.Array | np.ndarray):
        z = jnp.asarray(validate.real("z", z))
    return _leaky_relu(z, alpha)


def _leaky_relu(z, alpha):
    """:func:`leaky_relu` unchecked (the internals' and the compiled loops' version)."""
    return jnp.where(z > 0, z, alpha * z)


def _activate(z, alpha, activation: str):
    """The σ that follows a layer whose ``activation`` is given (static): ``σ_α`` or ``z²``."""
    return z * z if activation == "quadratic" else _leaky_relu(z, alpha)


def is_leaky(params: Params) -> bool:
    """True when every hidden layer is followed by σ_α (no quadratic layer): the nets the
    odd/even identities, β_eff's closed form and the linear twin are about."""
    return all(layer.activation == "leaky" for layer in params[:-1])


@takes_net()
def with_activation(params: Params, activation: str) -> Params:
    """``params`` with every hidden dense layer followed by ``activation`` ("leaky" or
    "quadratic", :data:`~biasfree.core.layers.ACTIVATIONS`): e.g. the quadratic net
    ``f(x) = W₂ (W₁x)²`` (docs/theory.md §11.2) from any dense init::

        net = bf.nets.with_activation(bf.init_gaussian(key, (3, 4, 1), scale=0.1), "quadratic")
    """
    validate.choice("activation", activation, ACTIVATIONS)
    hidden = params[:-1]
    if any(not isinstance(layer, Layer) for layer in hidden):
        raise ValueError("with_activation: only dense hidden layers (biasfree Layer) take another "
                         "activation; a conv layer is followed by σ_α")
    return tuple(dataclasses.replace(layer, activation=activation) for layer in hidden) + (params[-1],)


def check_apply(params, X, alpha, x_name: str = "X", *, required: bool = True):
    """The one check of a network, its inputs and its slope, for :func:`forward` and every
    public function that applies a net (``x_name``: the inputs' name in messages; with
    ``required=False`` X may be None). Returns ``X`` as an array (lists and tuples arrive
    as NumPy arrays already, by ``validate.array_args``; another array-like becomes one
    too, so that it takes the NumPy inputs' path: a NumPy ``X Wᵀ`` of NumPy weights runs
    on NumPy's BLAS, a JAX one in XLA, and the two may round differently)."""
    if X is None and required:
        raise TypeError(f"{x_name}=None: pass the inputs, an array of shape (N, d)")
    check_net(params, X=X, x_name=x_name)
    validate.slope(alpha)  # one net, one slope (an array would broadcast over units or rows)
    return X if X is None or isinstance(X, jax.Array | np.ndarray) else np.asarray(X, dtype=float)


def depth(params: Params) -> int:
    """Number of weight matrices L."""
    _layers(params)
    return len(params)


def widths(params: Params) -> tuple[int, ...]:
    """``(d, n_1, ..., n_{L-1}, p)``: input size, hidden widths, output size."""
    _layers(params)
    return (params[0].n_in,) + tuple(layer.n_out for layer in params)


def _layers(params) -> None:
    """Structure only (batched nets with a leading axis pass): a tuple of Layers."""
    if not is_net(params) or not all(lay.batch_ndim >= 0 for lay in params):
        raise TypeError(f"params must be a non-empty tuple of biasfree Layer(W, b) with matrix "
                        f"weights (e.g. from biasfree.from_arrays), got {type(params).__name__}")


def has_bias(params: Params) -> bool:
    """True if any layer carries a bias."""
    return any(layer.has_bias for layer in params)


@validate.array_args("X")
@precise
def hidden(params: Params, X: Array, alpha) -> list[Array]:
    """Post-activations ``h_l = σ_α(W_l h_{l-1} + b_l)`` for l = 1..L-1, each (N, n_l)."""
    H, out = check_apply(params, X, alpha), []
    for layer in params[:-1]:
        H = _activate(layer.apply(H), alpha, layer.activation)
        out.append(H)
    return out


@validate.array_args("X")
@precise
def forward(params: Params, X: Array, alpha) -> Array:
    """Network output ``f(X)`` of shape (N, p) for inputs ``X`` (N, d), slope ``alpha``."""
    return forward_unchecked(params, check_apply(params, X, alpha), alpha)


def forward_unchecked(params: Params, X, alpha):
    """:func:`forward` unchecked."""
    return net_after_first(params, params[0].apply(X), alpha)


def net_after_first(params: Params, Z, alpha):
    """The net after its first layer's pre-activations ``Z``."""
    for before, layer in zip(params[:-1], params[1:], strict=True):
        Z = layer.apply(_activate(Z, alpha, before.activation))
    return Z


@validate.array_args("X")
@precise
def odd_part(params: Params, X: Array, alpha) -> Array:
    """``f_odd(x) = (f(x) - f(-x)) / 2`` on the rows of ``X``, shape (N, p).

    For a two-layer bias-free net this equals ``c (Wᵀv)ᵀ x`` exactly (docs/theory.md §1.2).
    """
    return _odd_part(params, check_apply(params, X, alpha), alpha)


def _odd_part(params: Params, X, alpha):
    """:func:`odd_part` unchecked."""
    return 0.5 * (forward_unchecked(params, X, alpha) - forward_unchecked(params, -X, alpha))


@validate.array_args("X")
@precise
def even_part(params: Params, X: Array, alpha) -> Array:
    """``f_even(x) = (f(x) + f(-x)) / 2`` on the rows of ``X``, shape (N, p).

    For a two-layer bias-free net: ``(1 - c) Σ_k v_k |w_kᵀ x|`` (docs/theory.md §1.2).
    """
    return _even_part(params, check_apply(params, X, alpha), alpha)


def _even_part(params: Params, X, alpha):
    """:func:`even_part` unchecked."""
    return 0.5 * (forward_unchecked(params, X, alpha) + forward_unchecked(params, -X, alpha))


def beta_eff_is_exact(params: Params) -> bool:
    """True for a two-layer bias-free leaky net, whose odd part is exactly linear (§1.2)."""
    return depth(params) == 2 and not has_bias(params) and is_leaky(params)


@validate.array_args("X")
@precise
def beta_eff(params: Params, alpha, X: Array | None = None, *, pinv_X: Array | None = None) -> Array:
    """Linear map of the odd part, shape (d, p): ``f_odd(x) ≈ β_effᵀ x``.

    Two bias-free layers: exact, ``β_eff = c W_1ᵀ W_2ᵀ`` with c = (1 + α)/2
    (``alpha``). Any other network: the least-squares fit
    ``β_eff = argmin_β Σ_n ||f_odd(x_n) - βᵀ x_n||² = X⁺ f_odd(X)`` on the rows of ``X``
    (required; ``pinv_X`` = X⁺ may be passed to avoid recomputing it).
    """
    check_apply(params, X, alpha, required=False)
    if pinv_X is not None and X is not None and np.shape(pinv_X) != (X.shape[1], X.shape[0]):
        raise ValueError(f"pinv_X must be X⁺ of shape ({X.shape[1]}, {X.shape[0]}) for X of shape "
                         f"{X.shape}, got {np.shape(pinv_X)}; leave it out to compute it")
    if X is None and not beta_eff_is_exact(params):
        raise ValueError(
            "beta_eff of a network deeper than two layers (or with biases) is a "
            "least-squares fit of its odd part: pass inputs X of shape (N, d)"
        )
    return _beta_eff(params, alpha, X, pinv_X)


def _beta_eff(params: Params, alpha, X=None, pinv_X=None):
    """:func:`beta_eff` unchecked."""
    if beta_eff_is_exact(params):
        return unchecked_slope_factor(alpha) * params[0].matrix.T @ params[1].matrix.T
    P = jnp.linalg.pinv(X) if pinv_X is None else pinv_X
    return P @ _odd_part(params, X, alpha)


@precise
@takes_net()
def end_to_end_linear(params: Params) -> Array:
    """Product ``W_L ... W_1`` of shape (p, d): the map a linear (α = 1) net computes."""
    return functools.reduce(lambda P, layer: layer.matrix @ P, params[1:], params[0].matrix)


def effective_rank(sv) -> np.ndarray:
    """Entropy effective rank ``exp(-Σ_i p_i ln p_i)``, ``p = σ / Σσ`` (Roy & Vetterli
    2007), of the singular values ``sv`` on the last axis (any leading axes, e.g. records):
    k for k equal non-zero values, 1 for a rank-one matrix, 0 for the zero matrix."""
    sv = validate.nonnegative("sv", sv, why="singular values are >= 0")
    if sv.ndim == 0 or sv.shape[-1] == 0:
        raise ValueError(f"sv must hold singular values on its last axis, got shape {sv.shape}")
    total = np.sum(sv, axis=-1, keepdims=True)
    p = sv / np.where(total > 0, total, 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        h = -np.sum(np.where(p > 0, p * np.log(p), 0.0), axis=-1)
    return np.where(total[..., 0] > 0, np.exp(h), 0.0)
