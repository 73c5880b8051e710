"""Initialisations: the networks the experiments start from, each a pure function of a key.

Widths are ``(d, n_1, ..., n_{L-1}, p)`` (docs/theory.md §0). The antisymmetric pairs
(:func:`pair_up`, §2.3), the rank-one zero-even init (§2.5) and balanced units (§4.2) make
the leaky net equal its linear twin.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from .. import _validate as validate
from .conv import Conv, PooledDense
from .draws import normal
from .layers import Layer, Params, takes_net
from .nets import has_bias, widths
from .precision import precise


def _layer_scales(scale, n_layers: int) -> tuple[float, ...]:
    if validate.traced(scale):
        return tuple(jnp.broadcast_to(scale, (n_layers,)))
    s = validate.real("scale", scale)
    if s.ndim > 1 or (s.ndim == 1 and s.shape != (n_layers,)) or np.any(s < 0):
        raise ValueError(
            f"scale={scale!r}: an init scale must be a non-negative number or one per layer "
            f"({n_layers} values)"
        )
    return tuple(float(v) for v in np.broadcast_to(s, (n_layers,)))


@precise
def init_gaussian(key, widths: tuple[int, ...], scale=1.0, *, bias: bool = False,
                  bias_scale=None) -> Params:
    """Independent Gaussian weights ``W_l[i, j] ~ N(0, s_l²)``.

    ``widths`` = (d, n_1, ..., p); ``scale`` = s_l, one number or one per layer;
    ``bias`` adds biases ``b_l ~ N(0, bias_scale²)`` (default ``bias_scale = s_l``).
    Small ``scale`` is the rich (feature-learning) regime, large is lazy.
    """
    w = validate.layer_widths(widths)
    validate.key(key)
    scales = _layer_scales(scale, len(w) - 1)
    validate.flag("bias", bias)
    bias_scale = None if bias_scale is None else validate.nonnegative("bias_scale", bias_scale, scalar=True)
    keys = jax.random.split(key, 2 * (len(w) - 1))
    bs = scales if bias_scale is None else (float(bias_scale),) * len(scales)
    return tuple(Layer(scales[i] * normal(keys[2 * i], (n_out, n_in)),
                       bs[i] * normal(keys[2 * i + 1], (n_out,)) if bias else None)
                 for i, (n_in, n_out) in enumerate(zip(w[:-1], w[1:], strict=True)))


@precise
@takes_net()
def pair_up(params: Params) -> Params:
    """Antisymmetric pairs built from a bias-free net (docs/theory.md §2.3).

    Every hidden unit k becomes a pair (k, k'), the partner a sign flip:
    ``W_1 -> [W_1; -W_1]``, ``W_L -> [W_L, -W_L]`` and, for middle layers,
    ``W_l -> [[A, -A], [-A, A]]``. A conv layer (:mod:`.conv`) pairs whole channels the
    same way (kernels ``[K; −K]``, …); since hidden states are channel-major, a dense
    layer after it pairs its columns by the rule above. Then ``f(-x) = -f(x)`` at every depth, and
    ``f = (2c)^{L-1} W_L ... W_1 x`` at init, c = (1 + α)/2; f stays linear under training
    on symmetric data only for L = 2 (§4.1).
    """
    if has_bias(params):
        raise ValueError("params: pair_up needs a bias-free network: pairs with biases are not odd "
                         "(drop b)")
    return _pair_up(params)


def _pair_up(params: Params) -> Params:
    """:func:`pair_up` unchecked."""
    L = len(params)  # channels of a conv layer pair the same way (docs/theory.md §7)
    return tuple(layer.paired(outputs=i < L - 1, inputs=i > 0) for i, layer in enumerate(params))


@precise
def init_pairs(key, widths: tuple[int, ...], scale=1.0) -> Params:
    """Antisymmetric-pair init: Gaussian net of hidden widths n_l/2, then
    :func:`pair_up`. ``widths`` = (d, n_1, ..., p) with every hidden n_l even;
    ``scale`` as in :func:`init_gaussian`."""
    w = validate.layer_widths(widths)
    validate.key(key)
    if any(n % 2 for n in w[1:-1]):
        raise ValueError(f"widths: pair init needs even hidden widths, got {w[1:-1]}; make each "
                         "hidden width even")
    half = (w[0],) + tuple(n // 2 for n in w[1:-1]) + (w[-1],)
    return _pair_up(init_gaussian(key, half, scale))


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
    validate.key(key)
    d = validate.integer("d", d, 1)
    width = validate.integer("width", width, 1)
    p = validate.integer("p", p, 1)
    if width < 2 or width % 2:
        raise ValueError(f"width={width}: rank-one balanced init needs an even width >= 2")
    scale = validate.positive("scale", scale, scalar=True,
                              why="the rank-one init scale is the raw mode strength a_0")
    for name, vec in (("direction", direction), ("out_direction", out_direction)):
        if vec is not None:
            validate.finite_array(name, vec, ndim=1)
    k1, k2, k3 = jax.random.split(key, 3)
    r = normal(k1, (d,)) if direction is None else jnp.asarray(direction, float)
    q = ((jnp.ones((1,)) if p == 1 else normal(k3, (p,))) if out_direction is None
         else jnp.asarray(out_direction, float))
    for name, vec, n in (("direction", r, d), ("out_direction", q, p)):
        traced = validate.traced(vec)  # under jit only the shape is known
        if vec.shape != (n,) or (not traced and not float(jnp.linalg.norm(vec)) > 0):
            raise ValueError(f"{name} must be a non-zero vector of shape ({n},), got shape "
                             f"{vec.shape}")
    r, q = r / jnp.linalg.norm(r), q / jnp.linalg.norm(q)
    pos, neg = jnp.abs(normal(k2, (2, width // 2))) + 0.1
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
    if not isinstance(weights, tuple | list):
        raise TypeError(f"weights must be a list of weight matrices [W_1, ..., W_L], got "
                        f"{type(weights).__name__}")
    if biases is not None and not isinstance(biases, tuple | list):
        raise TypeError(f"biases must be a list with one vector (or None) per layer, got "
                        f"{type(biases).__name__}")
    traced = validate.traced(weights, biases)
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


@takes_net()
def pad_hidden(params: Params, width: int) -> Params:
    """Bias-free ``params`` with every hidden layer zero-padded to ``width`` units: the
    same function, and zero units stay zero under gradient descent (their incoming and
    outgoing gradients both vanish). ``width`` must be at least every hidden width."""
    width = validate.integer("width", width, 1)
    if has_bias(params):
        raise ValueError("params: pad_hidden needs a bias-free network (drop b)")
    if any(w > width for w in widths(params)[1:-1]):
        raise ValueError(f"width={width} is below a hidden width {widths(params)[1:-1]}: pad to at "
                         "least the widest layer")
    L = len(params)  # zero rows under every layer but the last, zero columns beside all but the first
    return tuple(Layer(np.pad(np.asarray(la.matrix, dtype=float), ((0, width - la.n_out if i < L - 1 else 0),
                                                                   (0, width - la.n_in if i else 0))))
                 for i, la in enumerate(params))


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


@precise
def init_conv(key, in_shape, channels, kernel, p: int = 1, scale=1.0, *, padding: str = "same",
              readout: str = "dense", bias: bool = False, bias_scale=None, pairs: bool = False) -> Params:
    """A conv net (docs/theory.md §7): L − 1 :class:`~.conv.Conv` layers, then a readout,
    every weight ``~ N(0, s_l²)``.

    ``in_shape`` the inputs' spatial shape, (n,) (1-D) or (H, W) (2-D); ``channels`` =
    (C_0, C_1, ..., C_{L-1}): C_0 input channels (inputs are flat (N, C_0·∏in_shape),
    channel-major), C_l the channels of conv layer l; ``kernel`` the kernel size, an int
    (the same on every axis) or one per axis; ``p`` outputs; ``scale`` s_l, one number or
    one per layer (L values); ``padding`` "same" or "valid"; ``readout`` "dense" (flatten,
    then a dense (p, C_{L-1}·∏spatial) layer) or "pool" (global average pooling, then
    (p, C_{L-1}): :class:`~.conv.PooledDense`); ``bias`` adds per-channel conv biases and
    readout biases ``~ N(0, bias_scale²)`` (default s_l). ``pairs``: a Gaussian net with
    half the hidden channels, then :func:`pair_up` (channels (k, −k), readouts (v, −v)),
    which makes it exactly linear (every hidden C_l must be even; bias-free only).
    """
    validate.key(key)
    if not isinstance(channels, tuple | list) or len(channels) < 2:
        raise ValueError(f"channels={channels!r}: give (C_0, C_1, ..., C_(L-1)), the input channels then "
                         "those of each conv layer (at least one)")
    ch = tuple(validate.integer(f"channels[{i}]", c, 1) for i, c in enumerate(channels))
    validate.choice("padding", padding, ("same", "valid"))
    validate.choice("readout", readout, ("dense", "pool"))
    validate.flag("pairs", pairs)
    p = validate.integer("p", p, 1)
    spatial = tuple(in_shape) if isinstance(in_shape, tuple | list) else (in_shape,)
    if not isinstance(kernel, int | np.integer | tuple | list):
        raise TypeError(f"kernel={kernel!r} must be an integer, or one per spatial axis of in_shape "
                        f"(e.g. 3 or (3, 3)), not {type(kernel).__name__}")
    ks = (kernel,) * len(spatial) if isinstance(kernel, int | np.integer) else tuple(kernel)
    ks = tuple(validate.integer("kernel", k, 1) for k in ks)
    if len(ks) != len(spatial):
        raise ValueError(f"kernel={kernel!r}: give one size per spatial axis of in_shape={in_shape!r}")
    if pairs:
        if bias:
            raise ValueError("pairs=True needs a bias-free net (pairs with biases are not odd): drop bias")
        if any(c % 2 for c in ch[1:]):
            raise ValueError(f"channels: pair init needs even hidden channel counts, got {ch[1:]}")
        half = init_conv(key, in_shape, (ch[0],) + tuple(c // 2 for c in ch[1:]), ks, p, scale,
                         padding=padding, readout=readout)
        return _pair_up(half)
    scales = _layer_scales(scale, len(ch))
    validate.flag("bias", bias)
    bias_scale = None if bias_scale is None else validate.nonnegative("bias_scale", bias_scale, scalar=True)
    layers, shape = [], spatial  # with zero weights, checked before drawing
    for i, (c_in, c_out) in enumerate(zip(ch[:-1], ch[1:], strict=True)):
        layers.append(Conv(np.zeros((c_out, c_in) + ks), None, shape, padding))
        layers[-1].check(f"conv layer {i}")  # e.g. a kernel larger than its input
        shape = layers[-1].out_shape
    layers.append(PooledDense(np.zeros((p, ch[-1])), None, shape) if readout == "pool"
                  else Layer(np.zeros((p, ch[-1] * int(np.prod(shape))))))
    bs = [s if bias_scale is None else bias_scale for s in scales]
    draws = _normals(key, tuple((np.shape(la.weight), np.shape(la.weight)[:1]) for la in layers),
                     jnp.stack([jnp.asarray(s, float) for s in scales + tuple(bs)]), bias)
    return tuple(replace(la, **{la._weight: w, "b": b}) for la, (w, b) in zip(layers, draws, strict=True))


@partial(jax.jit, static_argnames=("shapes", "bias"))
def _normals(key, shapes, scales, bias):
    """``(s_l N(0, 1) of shape w_l, s'_l N(0, 1) of shape b_l or None)`` per layer, ``shapes``
    the (w_l, b_l) pairs, ``scales`` the L weight then L bias scales: one compiled call."""
    keys = jax.random.split(key, 2 * len(shapes))
    L = len(shapes)
    return tuple((scales[i] * jax.random.normal(keys[2 * i], w),
                  scales[L + i] * jax.random.normal(keys[2 * i + 1], b) if bias else None)
                 for i, (w, b) in enumerate(shapes))
