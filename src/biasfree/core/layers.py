"""The layer protocol, its dense implementation, and the one network check.

A network is a tuple of layers (docs/theory.md §0); layer l maps hidden states ``H``
(N, n_{l-1}) to pre-activations ``Z = H Aᵀ + b`` (N, n_l), where ``A`` (n_l, n_{l-1}) is
the layer's bias-free linear map, its :attr:`~AbstractLayer.matrix`. Dense theory applies
to any layer through ``.matrix``. A new layer type (e.g. a convolution, whose matrix is
Toeplitz) is one new module: a pytree that subclasses (or registers with)
:class:`AbstractLayer` and provides what it lists. Layers are recognised by type, never by
their attributes.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from typing import NamedTuple

import jax
import numpy as np

from .. import _validate as validate
from .precision import precise

Array = jax.Array


class AbstractLayer(abc.ABC):
    """What a layer provides: ``matrix`` (n_out, n_in), ``bias`` ((n_out,) or None),
    ``n_in``, ``n_out``, ``apply(H)`` the pre-activations, ``linear(H)`` the same without
    the bias, ``scaled(factor)``, and ``batch_ndim`` (the number of leading ensemble
    axes of its weights). Layers that read or write a (C, *spatial) layout (convolutions,
    :mod:`.conv`) also give ``in_layout`` / ``out_layout``; ``None`` means flat."""

    in_layout = out_layout = None

    @property
    @abc.abstractmethod
    def matrix(self) -> Array:
        """The bias-free linear map as a dense (n_out, n_in) matrix (leading batch axes kept)."""

    @property
    @abc.abstractmethod
    def bias(self) -> Array | None:
        """The bias (n_out,), or ``None`` for a bias-free layer."""

    def apply(self, H: Array) -> Array:
        """Pre-activations ``H Aᵀ + b`` of a batch ``H`` (N, n_in), shape (N, n_out): :meth:`linear`
        plus the bias, for every layer type here (a registered class sets ``apply = AbstractLayer.apply``)."""
        Z, b = self.linear(H), self.bias
        return Z if b is None else Z + b

    @abc.abstractmethod
    def linear(self, H: Array) -> Array:
        """``H Aᵀ``, the pre-activations without the bias (N, n_out)."""

    @abc.abstractmethod
    def scaled(self, factor) -> AbstractLayer:
        """The layer with weights and bias times ``factor``; a factor of shape (K,) makes a
        batch of K layers (or scales a batch of K layers member by member)."""

    @property
    def n_in(self) -> int:
        return int(np.shape(self.matrix)[-1])

    @property
    def n_out(self) -> int:
        return int(np.shape(self.matrix)[-2])

    @property
    def has_bias(self) -> bool:
        return self.bias is not None


class Layer(NamedTuple):
    """The dense layer: weight ``W`` of shape (n_out, n_in), bias ``b`` of shape (n_out,) or
    ``None`` for a bias-free layer. Its ``matrix`` is ``W``."""

    W: Array
    b: Array | None = None

    matrix = property(lambda self: self.W, doc="``W``, the layer's linear map (n_out, n_in).")
    bias = property(lambda self: self.b, doc="``b``, or ``None``.")
    n_in, n_out, has_bias = AbstractLayer.n_in, AbstractLayer.n_out, AbstractLayer.has_bias
    apply = AbstractLayer.apply

    in_layout = out_layout = None  # flat: a dense layer reads and writes any layout

    batch_ndim = property(lambda self: np.ndim(self.W) - 2, doc="Number of leading ensemble axes.")

    def linear(self, H: Array) -> Array:
        """``H Wᵀ``, the bias left out."""
        return H @ self.W.T

    def scaled(self, factor) -> Layer:
        fw, fb = (factor, factor) if np.ndim(factor) == 0 else (factor[..., None, None], factor[..., None])
        return Layer(fw * self.W, None if self.b is None else fb * self.b)


AbstractLayer.register(Layer)  # a NamedTuple cannot subclass an ABC; registering is by type too

Params = tuple[AbstractLayer, ...]


def is_net(params) -> bool:
    """True for a non-empty tuple (or list) of layers."""
    return (isinstance(params, tuple | list) and len(params) > 0
            and all(isinstance(layer, AbstractLayer) for layer in params))


def check_net(params, name: str = "params", *, X=None, x_name: str = "X", depth: int | None = None,
              bias_free: bool = False, d: int | None = None, p_out: int | None = None) -> list:
    """Check a network at a public entry and return its layers' matrices (float arrays,
    each built on first access: a conv layer's Toeplitz matrix only when it is read).

    ``params`` a non-empty tuple of layers whose weights are finite and whose sizes chain
    (``n_in`` of a layer = ``n_out`` of the one before, read from static shapes; a conv
    layer's (channels, *spatial) input must match a conv layer's output before it; conv
    shapes are checked by :func:`biasfree.core.conv.check_layer`), biases ``None`` or
    finite (n_out,) vectors; optionally exactly ``depth`` layers, no biases
    (``bias_free``), input dimension ``d``, output dimension ``p_out``, and inputs ``X``
    (N, d) of the net's input dimension. Traced arguments get the shape checks only (values
    are unknown inside a caller's ``jit``).
    """
    if not is_net(params):
        raise TypeError(f"{name} must be a non-empty tuple of biasfree Layer(W, b) (e.g. from "
                        f"biasfree.init_gaussian or biasfree.from_arrays), got {type(params).__name__}")
    traced = validate.traced(params, X)

    def array(what, x, ndim, shape):  # finite values, unless traced: then the shape only
        x = x if traced else validate.finite_array(what, x, ndim=ndim)
        if np.ndim(x) != ndim:
            raise ValueError(f"{what} must be {ndim}-D {shape}, got shape {np.shape(x)}")
        return x

    sizes, checked = [], []  # (n_out, n_in) of each layer, from static shapes (no Toeplitz matrix)
    for i, layer in enumerate(params):
        if isinstance(layer, Layer):
            checked.append(Layer(array(f"{name}[{i}].W", layer.W, 2, "(n_out, n_in)"), layer.b))
        else:
            checked.append(layer)
            from .conv import check_layer  # the conv module builds on this one
            check_layer(layer, f"{name}[{i}]")
            for field, leaf in zip(_fields(layer), jax.tree_util.tree_leaves(layer), strict=False):
                if not traced:
                    validate.finite_array(f"{name}[{i}].{field}", leaf)
        n_out, n_in = layer.n_out, layer.n_in
        if sizes and n_in != sizes[-1][0]:
            raise ValueError(f"{name}: layer {i} takes {n_in} inputs but layer {i - 1} has "
                             f"{sizes[-1][0]} outputs; consecutive widths must agree")
        prev = params[i - 1].out_layout if i else None
        if prev is not None and layer.in_layout is not None and tuple(prev) != tuple(layer.in_layout):
            raise ValueError(f"{name}: layer {i} reads (channels, *spatial) = {tuple(layer.in_layout)} "
                             f"but layer {i - 1} gives {tuple(prev)}; match its input channels and "
                             "spatial shape to the previous layer's output")
        b = layer.b if isinstance(layer, Layer) else layer.bias
        if b is not None and np.shape(array(f"{name}[{i}].b", b, 1, "(n_out,)")) != (n_out,):
            raise ValueError(f"{name}[{i}].b must have shape ({n_out},), got {np.shape(b)}")
        sizes.append((n_out, n_in))
    Ws = _Matrices(checked)
    if depth is not None and len(sizes) != depth:
        raise ValueError(f"{name} has {len(sizes)} layers; this needs exactly {depth}")
    if bias_free and any(layer.has_bias for layer in params):
        raise ValueError(f"{name} has biases; this result holds for bias-free nets only (drop b)")
    if d is not None and sizes[0][1] != d:
        raise ValueError(f"{name} takes inputs of dimension {sizes[0][1]} but the data have "
                         f"d = {d}; build the net for the data")
    if p_out is not None and sizes[-1][0] != p_out:
        raise ValueError(f"{name} has {sizes[-1][0]} outputs but the targets have p = {p_out}")
    if X is not None and array(x_name, X, 2, "(N, d)").shape[1] != sizes[0][1]:
        raise ValueError(f"{x_name} has {np.shape(X)[1]} columns but {name} takes inputs of dimension "
                         f"d = {sizes[0][1]}: pass X of shape (N, {sizes[0][1]})")
    return Ws


def _fields(layer) -> list[str]:
    """Names of a dataclass layer's array fields, in pytree-leaf order (None fields skipped);
    for any other pytree layer, ``leaf0``, ``leaf1``, ... in leaf order."""
    import dataclasses
    if not dataclasses.is_dataclass(layer):
        return [f"leaf{j}" for j in range(len(jax.tree_util.tree_leaves(layer)))]
    return [f.name for f in dataclasses.fields(layer)
            if not f.metadata.get("static") and getattr(layer, f.name) is not None]


class _Matrices(Sequence):
    """The layers' matrices, each built on first access (a conv's Toeplitz matrix can be large)."""

    def __init__(self, layers):
        self._layers = tuple(layers)

    def __len__(self) -> int:
        return len(self._layers)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(len(self))[i]]
        layer = self._layers[i]
        return layer.W if isinstance(layer, Layer) else np.asarray(layer.matrix, dtype=float)


@precise
def scale_params(params: Params, factor) -> Params:
    """Every weight and bias times ``factor``: one number, or one per member (K,) (see
    :meth:`AbstractLayer.scaled`; then ``params`` may carry a leading ensemble axis)."""
    f = validate.real("factor", factor)
    if np.ndim(f) > 1:
        raise ValueError(f"factor must be one number or one per member, shape (K,); got shape {f.shape}")
    factor = f if np.ndim(f) else factor
    if np.ndim(factor) == 0 or not is_net(params):  # one factor per member: params may be batched
        check_net(params)
    return tuple(layer.scaled(factor) for layer in params)
