"""The network family: deep (leaky) ReLU networks, with or without biases.

Conventions (docs/theory.md §0). Inputs ``X`` have shape (N, d); outputs have shape
(N, p). A network of depth L holds L layers ``(W_l, b_l)`` with ``W_l`` of shape
(n_l, n_{l-1}) and ``b_l`` of shape (n_l,) or ``None`` (bias-free, the default):

    f(x) = W_L σ_α(W_{L-1} σ_α( ... σ_α(W_1 x + b_1) ... ) + b_{L-1}) + b_L,

with the leaky ReLU ``σ_α(z) = max(z, α z)``, α in [0, 1] (0 is ReLU, 1 is the
identity, i.e. a linear network). One code path serves every slope.

Parameters are plain pytrees: a tuple of :class:`Layer`. Everything here is a pure
function of arrays; α may be a traced value, so ensembles over α ``vmap``.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .. import _validate as validate
from .precision import precise

Array = jax.Array


class Layer(NamedTuple):
    """One affine layer: weight ``W`` of shape (n_out, n_in), bias ``b`` of shape
    (n_out,) or ``None`` for a bias-free layer."""

    W: Array
    b: Array | None = None


Params = tuple[Layer, ...]


def slope_factor(alpha):
    """``c = (1 + α) / 2``, the factor relating a leaky net to its linear twin.

    ``σ_α(z) = c z + (1 - c) |z|`` (docs/theory.md §1.1): c is the odd (linear) part of the
    activation; ``alpha`` is the leaky slope α.
    """
    check_alpha(alpha)
    return (1.0 + alpha) / 2.0


@precise
def leaky_relu(z, alpha):
    """``σ_α(z) = max(z, α z)`` elementwise, for slope ``alpha`` = α in [0, 1].

    Written as ``z if z > 0 else α z`` so that autodiff gives ``σ_α'(0) = α``, the
    convention of PyTorch's ``ReLU``/``LeakyReLU`` (``jnp.maximum`` would give the mean
    of the one-sided slopes, (1 + α)/2): gradients then agree with a PyTorch model
    even when a pre-activation is exactly zero (docs/theory.md §0).
    """
    check_alpha(alpha)
    if not isinstance(z, jax.Array | np.ndarray):
        z = jnp.asarray(validate.real("z", z))
    return jnp.where(z > 0, z, alpha * z)


def check_alpha(alpha) -> None:
    """Raise ``ValueError`` unless every α in ``alpha`` lies in [0, 1] (``TypeError`` for a
    string, a bool, None or a complex number). Traced values pass (shape only)."""
    validate.slope(alpha, array_ok=True)


def _traced(*trees) -> bool:
    return any(isinstance(x, jax.core.Tracer) for x in jax.tree_util.tree_leaves(trees))


def check_net(params, name: str = "params", *, X=None, x_name: str = "X") -> None:
    """Check a network at a public entry: a non-empty tuple of :class:`Layer` whose weights
    are finite matrices that chain, biases ``None`` or finite (n_out,) vectors, and, with
    ``X``, inputs (N, d) of the net's input dimension. Traced arguments get the shape
    checks only (values are unknown inside a caller's ``jit``)."""
    if not isinstance(params, tuple | list) or not params or not all(hasattr(lay, "W") for lay in params):
        raise TypeError(f"{name} must be a non-empty tuple of biasfree Layer(W, b) (e.g. from "
                        f"biasfree.init_gaussian or biasfree.from_arrays), got {type(params).__name__}")
    traced = _traced(params, X)
    prev = None
    for i, layer in enumerate(params):
        W = layer.W
        if not traced:
            W = validate.finite_array(f"{name}[{i}].W", W, ndim=2)
        elif np.ndim(W) != 2:
            raise ValueError(f"{name}[{i}].W must be 2-D (n_out, n_in), got shape {np.shape(W)}")
        if prev is not None and W.shape[1] != prev:
            raise ValueError(f"{name}: layer {i} takes {W.shape[1]} inputs but layer {i - 1} has "
                             f"{prev} outputs; consecutive widths must agree")
        b = getattr(layer, "b", None)
        if b is not None:
            if not traced:
                b = validate.finite_array(f"{name}[{i}].b", b, ndim=1)
            if np.shape(b) != (W.shape[0],):
                raise ValueError(f"{name}[{i}].b must have shape ({W.shape[0]},), got {np.shape(b)}")
        prev = W.shape[0]
    if X is not None:
        d = np.shape(params[0].W)[1]
        if not traced:
            X = validate.finite_array(x_name, X, ndim=2)
        elif np.ndim(X) != 2:
            raise ValueError(f"{x_name} must be 2-D (N, d), got shape {np.shape(X)}")
        if X.shape[1] != d:
            raise ValueError(f"{x_name} has {X.shape[1]} columns but {name} takes inputs of dimension "
                             f"d = {d}: pass X of shape (N, {d})")


def _check_apply(params, X, alpha):
    """Checks for :func:`forward` and friends; returns ``X`` as an array."""
    if X is None:
        raise TypeError("X=None: pass the inputs, an array of shape (N, d)")
    check_net(params, X=X)
    check_alpha(alpha)
    return X if isinstance(X, jax.Array | np.ndarray) else jnp.asarray(X, dtype=float)


def depth(params: Params) -> int:
    """Number of weight matrices L."""
    _layers(params)
    return len(params)


def widths(params: Params) -> tuple[int, ...]:
    """``(d, n_1, ..., n_{L-1}, p)``: input size, hidden widths, output size."""
    _layers(params)
    return (params[0].W.shape[-1],) + tuple(layer.W.shape[-2] for layer in params)


def _layers(params) -> None:
    """Structure only (batched nets with a leading axis pass): a tuple of Layers."""
    if (not isinstance(params, tuple | list) or not params
            or not all(hasattr(lay, "W") and np.ndim(lay.W) >= 2 for lay in params)):
        raise TypeError(f"params must be a non-empty tuple of biasfree Layer(W, b) with matrix "
                        f"weights (e.g. from biasfree.from_arrays), got {type(params).__name__}")


def has_bias(params: Params) -> bool:
    """True if any layer carries a bias."""
    return any(layer.b is not None for layer in params)


def _affine(layer: Layer, H: Array) -> Array:
    Z = H @ layer.W.T
    return Z if layer.b is None else Z + layer.b


@precise
def hidden(params: Params, X: Array, alpha) -> list[Array]:
    """Post-activations ``h_l = σ_α(W_l h_{l-1} + b_l)`` for l = 1..L-1, each (N, n_l)."""
    X = _check_apply(params, X, alpha)
    H, out = X, []
    for layer in params[:-1]:
        H = leaky_relu(_affine(layer, H), alpha)
        out.append(H)
    return out


@precise
def forward(params: Params, X: Array, alpha) -> Array:
    """Network output ``f(X)`` of shape (N, p) for inputs ``X`` (N, d), slope ``alpha``."""
    X = _check_apply(params, X, alpha)
    H = X
    for layer in params[:-1]:
        H = leaky_relu(_affine(layer, H), alpha)
    return _affine(params[-1], H)


@precise
def odd_part(params: Params, X: Array, alpha) -> Array:
    """``f_odd(x) = (f(x) - f(-x)) / 2`` on the rows of ``X``, shape (N, p).

    For a two-layer bias-free net this equals ``c (Wᵀv)ᵀ x`` exactly (docs/theory.md §1.2).
    """
    X = _check_apply(params, X, alpha)
    return 0.5 * (forward(params, X, alpha) - forward(params, -X, alpha))


@precise
def even_part(params: Params, X: Array, alpha) -> Array:
    """``f_even(x) = (f(x) + f(-x)) / 2`` on the rows of ``X``, shape (N, p).

    For a two-layer bias-free net: ``(1 - c) Σ_k v_k |w_kᵀ x|`` (docs/theory.md §1.2).
    """
    X = _check_apply(params, X, alpha)
    return 0.5 * (forward(params, X, alpha) + forward(params, -X, alpha))


def beta_eff_is_exact(params: Params) -> bool:
    """True for a two-layer bias-free net, whose odd part is exactly linear (§1.2)."""
    return depth(params) == 2 and not has_bias(params)


@precise
def beta_eff(params: Params, alpha, X: Array | None = None, *, pinv_X: Array | None = None) -> Array:
    """Linear map of the odd part, shape (d, p): ``f_odd(x) ≈ β_effᵀ x``.

    Two bias-free layers: exact, ``β_eff = c W_1ᵀ W_2ᵀ`` with c = (1 + α)/2
    (``alpha``). Any other network: the least-squares fit
    ``β_eff = argmin_β Σ_n ||f_odd(x_n) - βᵀ x_n||² = X⁺ f_odd(X)`` on the rows of ``X``
    (required; ``pinv_X`` = X⁺ may be passed to avoid recomputing it).
    """
    check_net(params, X=X)
    check_alpha(alpha)
    if pinv_X is not None and X is not None and np.shape(pinv_X) != (X.shape[1], X.shape[0]):
        raise ValueError(f"pinv_X must be X⁺ of shape ({X.shape[1]}, {X.shape[0]}) for X of shape "
                         f"{X.shape}, got {np.shape(pinv_X)}; leave it out to compute it")
    if beta_eff_is_exact(params):
        return slope_factor(alpha) * params[0].W.T @ params[1].W.T
    if X is None:
        raise ValueError(
            "beta_eff of a network deeper than two layers (or with biases) is a "
            "least-squares fit of its odd part: pass inputs X of shape (N, d)"
        )
    P = jnp.linalg.pinv(X) if pinv_X is None else pinv_X
    return P @ odd_part(params, X, alpha)


@precise
def end_to_end_linear(params: Params) -> Array:
    """Product ``W_L ... W_1`` of shape (p, d): the map a linear (α = 1) net computes."""
    check_net(params)
    P = params[0].W
    for layer in params[1:]:
        P = layer.W @ P
    return P


# ---------------------------------------------------------------- initialisations


def _layer_scales(scale, n_layers: int) -> tuple[float, ...]:
    if _traced(scale):
        return tuple(jnp.broadcast_to(scale, (n_layers,)))
    s = validate.real("scale", scale)
    if s.ndim > 1 or (s.ndim == 1 and s.shape != (n_layers,)) or np.any(s < 0):
        raise ValueError(
            f"scale={scale!r}: an init scale must be a non-negative number or one per layer "
            f"({n_layers} values)"
        )
    return tuple(float(v) for v in np.broadcast_to(s, (n_layers,)))


def _check_widths(widths_: tuple[int, ...]) -> tuple[int, ...]:
    return validate.layer_widths(widths_)


def _check_key(key, name: str = "key"):
    """A JAX PRNG key: ``jax.random.PRNGKey(seed)`` (uint32 (2,)) or ``jax.random.key(seed)``."""
    if _traced(key):
        return key
    ok = False
    if isinstance(key, jax.Array | np.ndarray):
        if jnp.issubdtype(key.dtype, jax.dtypes.prng_key):
            ok = key.ndim == 0
        else:
            ok = key.dtype == np.uint32 and key.shape == (2,)
    if not ok:
        raise TypeError(f"{name}={key!r} must be a JAX random key: pass jax.random.PRNGKey(seed) "
                        "(an integer seed is not a key)")
    return key


@precise
def init_gaussian(key, widths: tuple[int, ...], scale=1.0, *, bias: bool = False,
                  bias_scale=None) -> Params:
    """Independent Gaussian weights ``W_l[i, j] ~ N(0, s_l²)``.

    ``widths`` = (d, n_1, ..., p); ``scale`` = s_l, one number or one per layer;
    ``bias`` adds biases ``b_l ~ N(0, bias_scale²)`` (default ``bias_scale = s_l``).
    Small ``scale`` is the rich (feature-learning) regime, large is lazy.
    """
    w = _check_widths(widths)
    _check_key(key)
    scales = _layer_scales(scale, len(w) - 1)
    validate.flag("bias", bias)
    if bias_scale is not None and not _traced(bias_scale):
        bias_scale = validate.nonnegative("bias_scale", bias_scale, scalar=True)
    keys = jax.random.split(key, 2 * (len(w) - 1))
    layers = []
    for i, (n_in, n_out) in enumerate(zip(w[:-1], w[1:], strict=True)):
        W = scales[i] * jax.random.normal(keys[2 * i], (n_out, n_in))
        b = None
        if bias:
            bs = scales[i] if bias_scale is None else float(bias_scale)
            b = bs * jax.random.normal(keys[2 * i + 1], (n_out,))
        layers.append(Layer(W, b))
    return tuple(layers)


@precise
def pair_up(params: Params) -> Params:
    """Antisymmetric pairs built from a bias-free net (docs/theory.md §2.3).

    Every hidden unit k becomes a pair (k, k'), the partner a sign flip:
    ``W_1 -> [W_1; -W_1]``, ``W_L -> [W_L, -W_L]`` and, for middle layers,
    ``W_l -> [[A, -A], [-A, A]]``. Then ``f(-x) = -f(x)`` at every depth, and
    ``f = (2c)^{L-1} W_L ... W_1 x`` with c = (1 + α)/2 at init. On symmetric data
    training preserves the pair symmetry, so f stays odd; it stays *linear* only for
    L = 2 (deeper, the middle blocks lose ``B = -A`` and f_odd turns nonlinear, §4.1).
    A two-layer pair net equals the width-n linear net initialised at
    ``sqrt(1 + α) (W, v)`` and trained with learning rate ``η (1 + α)/2``.
    """
    check_net(params)
    if has_bias(params):
        raise ValueError("params: pair_up needs a bias-free network: pairs with biases are not odd "
                         "(drop b)")
    L = len(params)
    out = []
    for i, layer in enumerate(params):
        W = layer.W
        if i == 0:
            W2 = jnp.concatenate([W, -W], axis=0)
        elif i == L - 1:
            W2 = jnp.concatenate([W, -W], axis=1)
        else:
            W2 = jnp.block([[W, -W], [-W, W]])
        out.append(Layer(W2))
    return tuple(out)


@precise
def init_pairs(key, widths: tuple[int, ...], scale=1.0) -> Params:
    """Antisymmetric-pair init: Gaussian net of hidden widths n_l/2, then
    :func:`pair_up`. ``widths`` = (d, n_1, ..., p) with every hidden n_l even;
    ``scale`` as in :func:`init_gaussian`."""
    w = _check_widths(widths)
    _check_key(key)
    if any(n % 2 for n in w[1:-1]):
        raise ValueError(f"widths: pair init needs even hidden widths, got {w[1:-1]}; make each "
                         "hidden width even")
    half = (w[0],) + tuple(n // 2 for n in w[1:-1]) + (w[-1],)
    return pair_up(init_gaussian(key, half, scale))


@precise
def init_rank_one(key, d: int, width: int, scale: float, *, direction=None,
                  out_direction=None, p: int = 1) -> Params:
    """Rank-one, balanced, zero-even two-layer init (docs/theory.md §2.5).

    ``w_k = v_k r`` with ``||r|| = 1`` (``direction``, random if ``None``); output
    weights ``W_2[:, k] = v_k q`` with ``||q|| = 1`` (``out_direction``; p = 1 gives
    q = 1). Half of the v_k are positive, half negative, magnitudes random and
    rescaled so that ``Σ_k v_k |v_k| = 0``; then ``f_even ≡ 0`` and every unit is
    balanced (``v_k² = ||w_k||²``). ``scale`` sets the raw mode strength
    ``a_0 = qᵀ W_2 W_1 r = Σ_k v_k² = scale``; a linear net (α = 1) then computes
    ``a_0 q rᵀ x``, a leaky one ``c a_0 q rᵀ x``.
    """
    _check_key(key)
    d = validate.integer("d", d, 1)
    width = validate.integer("width", width, 1)
    p = validate.integer("p", p, 1)
    if width < 2 or width % 2:
        raise ValueError(f"width={width}: rank-one balanced init needs an even width >= 2")
    if not _traced(scale):
        scale = validate.positive("scale", scale, scalar=True,
                                  why="the rank-one init scale is the raw mode strength a_0")
    for name, vec in (("direction", direction), ("out_direction", out_direction)):
        if vec is not None and not _traced(vec):
            validate.finite_array(name, vec, ndim=1)
    k1, k2, k3 = jax.random.split(key, 3)
    r = jax.random.normal(k1, (d,)) if direction is None else jnp.asarray(direction, float)
    if out_direction is None:
        q = jnp.ones((1,)) if p == 1 else jax.random.normal(k3, (p,))
    else:
        q = jnp.asarray(out_direction, float)
    for name, vec, n in (("direction", r, d), ("out_direction", q, p)):
        traced = isinstance(vec, jax.core.Tracer)  # under jit only the shape is known
        if vec.shape != (n,) or (not traced and not float(jnp.linalg.norm(vec)) > 0):
            raise ValueError(f"{name} must be a non-zero vector of shape ({n},), got shape "
                             f"{vec.shape}")
    r, q = r / jnp.linalg.norm(r), q / jnp.linalg.norm(q)
    m = width // 2
    mags = jnp.abs(jax.random.normal(k2, (2, m))) + 0.1
    pos, neg = mags[0], mags[1]
    neg = neg * jnp.sqrt(jnp.sum(pos**2) / jnp.sum(neg**2))  # Σ v|v| = 0
    v = jnp.concatenate([pos, -neg])
    v = v * jnp.sqrt(scale / jnp.sum(v**2))  # Σ v² = a_0
    return (Layer(v[:, None] * r[None, :]), Layer(q[:, None] * v[None, :]))


@precise
def from_arrays(weights, biases=None) -> Params:
    """Network from given weight matrices (and optional biases), shapes checked.

    ``weights`` = [W_1, ..., W_L] with ``W_l`` (n_l, n_{l-1}); ``biases`` a matching
    list of vectors or ``None`` entries.
    """
    if isinstance(weights, str | bytes | dict) or not isinstance(weights, tuple | list):
        raise TypeError(f"weights must be a list of weight matrices [W_1, ..., W_L], got "
                        f"{type(weights).__name__}")
    if biases is not None and (isinstance(biases, str | bytes | dict)
                               or not isinstance(biases, tuple | list)):
        raise TypeError(f"biases must be a list with one vector (or None) per layer, got "
                        f"{type(biases).__name__}")
    traced = _traced(weights, biases)
    Ws = [jnp.asarray(W if traced else validate.finite_array(f"weights[{i}]", W), dtype=float)
          for i, W in enumerate(weights)]
    bs = [None] * len(Ws) if biases is None else list(biases)
    if len(Ws) < 2 or len(bs) != len(Ws):
        raise ValueError(f"weights: give at least two weight matrices (got {len(Ws)}), and biases: one "
                         f"bias (or None) per layer (got {len(bs)})")
    layers = []
    for i, (W, b) in enumerate(zip(Ws, bs, strict=True)):
        if W.ndim != 2:
            raise ValueError(f"weights[{i}]: weight {i + 1} must be a matrix, got shape {W.shape}")
        if i and W.shape[1] != Ws[i - 1].shape[0]:
            raise ValueError(
                f"weights[{i}]: weight {i + 1} has {W.shape[1]} inputs but layer {i} has "
                f"{Ws[i - 1].shape[0]} outputs: shapes must chain (n_l, n_(l-1))"
            )
        if b is not None:
            b = jnp.asarray(b if traced else validate.finite_array(f"biases[{i}]", b), dtype=float)
            if b.shape != (W.shape[0],):
                raise ValueError(f"biases[{i}]: bias {i + 1} must have shape ({W.shape[0]},), got "
                                 f"{b.shape}")
        layers.append(Layer(W, b))
    return tuple(layers)


@precise
def scale_params(params: Params, factor) -> Params:
    """Multiply every weight and bias by ``factor``."""
    check_net(params)
    if not _traced(factor):
        validate.real("factor", factor, scalar=True)
    return jax.tree_util.tree_map(lambda a: factor * a, params)


# ---------------------------------------------------------------- shape and rank


def pad_hidden(params: Params, width: int) -> Params:
    """Bias-free ``params`` with every hidden layer zero-padded to ``width`` units: the
    same function, and zero units stay zero under gradient descent (their incoming and
    outgoing gradients both vanish). ``width`` must be at least every hidden width."""
    check_net(params)
    width = validate.integer("width", width, 1)
    if has_bias(params):
        raise ValueError("params: pad_hidden needs a bias-free network (drop b)")
    if any(w > width for w in widths(params)[1:-1]):
        raise ValueError(f"width={width} is below a hidden width {widths(params)[1:-1]}: pad to at "
                         "least the widest layer")
    out = []
    for i, layer in enumerate(params):
        W = np.asarray(layer.W)
        P = np.zeros((width if i < len(params) - 1 else W.shape[0], width if i > 0 else W.shape[1]))
        P[: W.shape[0], : W.shape[1]] = W
        out.append(Layer(P))
    return tuple(out)


def effective_rank(sv) -> np.ndarray:
    """Entropy effective rank ``exp(-Σ_i p_i ln p_i)``, ``p = σ / Σσ`` (Roy & Vetterli
    2007), of the singular values ``sv`` on the last axis (any leading axes, e.g. records):
    k for k equal non-zero values, 1 for a rank-one matrix."""
    sv = validate.nonnegative("sv", sv, why="singular values are >= 0")
    if sv.ndim == 0 or sv.shape[-1] == 0:
        raise ValueError(f"sv must hold singular values on its last axis, got shape {sv.shape}")
    p = sv / np.sum(sv, axis=-1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        h = -np.sum(np.where(p > 0, p * np.log(p), 0.0), axis=-1)
    return np.exp(h)


def balanced_units(W, signs) -> Params:
    """Two-layer net with input weights ``W`` (m, d) and output weights
    ``v_k = signs_k ||w_k||``: every unit balanced, so ``v_k² - ||w_k||² = 0`` is conserved
    and sign v_k never changes under gradient flow (docs/theory.md §4.2). ``signs`` (m,)
    of ±1 (draw them at random for a random balanced init)."""
    W, sg = validate.finite_array("W", W, ndim=2), validate.finite_array("signs", signs, ndim=1)
    if sg.shape != (W.shape[0],) or not np.all(np.abs(sg) == 1):
        raise ValueError(f"signs: need one sign ±1 per unit of W (m, d), got shapes {W.shape}, "
                         f"{sg.shape}")
    return (Layer(W), Layer((sg * np.linalg.norm(W, axis=1))[None, :]))
