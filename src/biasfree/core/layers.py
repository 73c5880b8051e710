"""The layer protocol, the dense layer, and the one network check.

A network is a tuple of layers (docs/theory.md §0); layer l maps hidden states ``H``
(N, n_{l-1}) to pre-activations ``Z = H Aᵀ + b`` (N, n_l), where ``A`` (n_l, n_{l-1}) is
the layer's bias-free linear map, its :attr:`~AbstractLayer.matrix`. Dense theory applies
to any layer through ``.matrix``. A new layer type (e.g. a convolution, whose matrix is
Toeplitz) is one new module: a pytree that subclasses :class:`AbstractLayer` and provides
what it lists. The layers of this package (:class:`Layer`; ``Conv``, ``PooledDense`` in
:mod:`.conv`) are :class:`WeightLayer` s. Layers are recognised by type, never by their attributes.
"""

from __future__ import annotations

import abc
import dataclasses
import functools
import inspect
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from .. import _validate as validate
from .precision import precise

Array = jax.Array


class AbstractLayer(abc.ABC):
    """What a layer provides: ``matrix`` (n_out, n_in), ``bias`` ((n_out,) or None),
    ``linear(H)`` the pre-activations without the bias, ``scaled(factor)``; from these
    ``n_in``, ``n_out``, ``has_bias`` and ``apply(H)`` the pre-activations. Layers that read
    or write a ``(C, *spatial)`` layout (convolutions, :mod:`.conv`) also give ``in_layout`` /
    ``out_layout``; ``None`` means flat. ``check(name)`` raises on a malformed layer; ``weight``
    is the weights in torch's layout (the matrix, unless stored otherwise)."""

    in_layout = out_layout = None
    activation = "leaky"
    """The σ applied to this layer's outputs when a layer follows
    (:data:`~biasfree.core.layers.ACTIVATIONS`): "leaky",
    the net's ``σ_α`` (docs/theory.md §0), for every layer type; a dense :class:`Layer` may say
    "quadratic", ``σ(z) = z²`` (§11.2)."""
    is_linear = True
    """Whether :meth:`linear` is a linear map of ``H`` (so ``matrix`` exists and ``f(−H)`` is
    ``−f(H)`` through it); False for attention (:mod:`biasfree.core.attention`), whose output is cubic."""

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
        plus the bias."""
        Z, b = self.linear(H), self.bias
        return Z if b is None else Z + b

    @abc.abstractmethod
    def linear(self, H: Array) -> Array:
        """``H Aᵀ``, the pre-activations without the bias (N, n_out)."""

    @abc.abstractmethod
    def scaled(self, factor) -> AbstractLayer:
        """The layer with weights and bias times ``factor``; a factor of shape (K,) makes a
        batch of K layers (or scales a batch of K layers member by member)."""

    def check(self, name: str) -> None:
        """Shape checks of one (unbatched) layer beyond
        :func:`~biasfree.core.layers.check_net`'s, each error naming the layer (``name``) and
        the fix; none by default."""
        return None

    def spec(self) -> dict | None:
        """What a weight file stores beside the weight to rebuild the layer; ``None``: none."""
        return None

    weight = property(lambda self: self.matrix, doc="The weights in torch's layout: output units "
                      "(channels), inputs, any kernel axes; ``matrix`` unless stored otherwise.")
    n_in = property(lambda self: int(np.shape(self.matrix)[-1]))
    n_out = property(lambda self: int(np.shape(self.matrix)[-2]))
    has_bias = property(lambda self: self.bias is not None)
    kind = property(lambda self: type(self).__name__, doc="The type's name, as weight files store it.")


def static(default):
    """A :func:`layer_type` field that is not an array: part of the pytree's structure."""
    return dataclasses.field(default=default, metadata={"static": True})


def layer_type(cls):
    """Class decorator: ``cls`` (a :class:`WeightLayer`) as a frozen dataclass pytree whose
    array fields (the weight, then ``b``) are leaves and whose :func:`static` fields are not."""
    cls = jax.tree_util.register_dataclass(dataclasses.dataclass(frozen=True)(cls))
    fields = dataclasses.fields(cls)
    cls._weight, cls._static = fields[0].name, tuple(f.name for f in fields if f.metadata.get("static"))
    return cls


def _per_member(factor, ndim: int):
    """``factor`` shaped to multiply arrays with ``ndim`` axes per member: a number as it is,
    (K,) as (K, 1, ..., 1)."""
    return factor if np.ndim(factor) == 0 else factor[(...,) + (None,) * ndim]


class WeightLayer(AbstractLayer):
    """A layer stored as one weight array in torch's layout (its first field: output units or
    channels, then inputs, then any kernel axes, after leading ensemble axes), a bias ``b``
    (one per output unit or channel, or ``None``) and :func:`static` fields; made with
    :func:`layer_type`. Scaling, pairing, bias removal and the stored form are derived here."""

    _weight: str  # the weight field's name, and the static fields': set by layer_type
    _static: tuple[str, ...] = ()

    weight = property(lambda self: getattr(self, self._weight), doc="``W``, ``K`` or ``V``.")
    bias = property(lambda self: self.b, doc="``b``, or ``None``.")
    batch_ndim = property(lambda self: np.ndim(self.weight) - 2, doc="Number of leading ensemble axes.")

    def with_weight(self, weight) -> WeightLayer:
        """The same layer type and static fields with another weight array (and the same ``b``)."""
        return dataclasses.replace(self, **{self._weight: weight})

    def without_bias(self) -> WeightLayer:
        """The layer with ``b = None``: its bias-free map."""
        return dataclasses.replace(self, b=None)

    def scaled(self, factor) -> WeightLayer:
        """Weight and bias times ``factor``: one number, or (K,) for K members."""
        w = _per_member(factor, np.ndim(self.weight) - self.batch_ndim) * self.weight
        return dataclasses.replace(self, **{self._weight: w},
                                   b=None if self.b is None else _per_member(factor, 1) * self.b)

    def paired(self, outputs: bool, inputs: bool) -> WeightLayer:
        """Units (channels) doubled with sign-flipped partners, bias dropped (docs/theory.md
        §2.3, §7): outputs ``[W; −W]``, inputs ``[W, −W]``, both ``[[W, −W], [−W, W]]``."""
        w, ax = self.weight, self.batch_ndim
        if inputs:
            w = jnp.concatenate([w, -w], axis=ax + 1)
        if outputs:
            w = jnp.concatenate([w, -w], axis=ax)
        return dataclasses.replace(self, **{self._weight: w}, b=None)

    def spec(self) -> dict:
        """What a weight file stores beside the weight to rebuild the layer
        (:func:`~biasfree.core.conv.from_spec`): ``{"type": kind}`` and the static fields."""
        return {"type": self.kind} | {k: list(v) if isinstance(v, tuple) else v
                                      for k in self._static for v in [getattr(self, k)]}


ACTIVATIONS = ("leaky", "quadratic")
"""What may follow a layer: ``σ_α(z) = max(z, αz)`` at the net's slope α, or ``σ(z) = z²``."""


@layer_type
class Layer(WeightLayer):
    """The dense layer: weight ``W`` of shape (n_out, n_in), bias ``b`` of shape (n_out,) or
    ``None`` for a bias-free layer, and the ``activation`` applied to its outputs when a layer
    follows (:data:`~biasfree.core.layers.ACTIVATIONS`; default "leaky", the slope α's σ_α). Its
    ``matrix`` is ``W``."""

    W: Array
    b: Array | None = None
    activation: str = static("leaky")

    def __post_init__(self):
        validate.choice("activation", self.activation, ACTIVATIONS)

    def spec(self) -> dict:
        """As :meth:`WeightLayer.spec`; the default activation is left out (files as before)."""
        out = super().spec()
        if self.activation == "leaky":
            del out["activation"]
        return out

    matrix = property(lambda self: self.W, doc="``W``, the layer's linear map (n_out, n_in).")

    def linear(self, H: Array) -> Array:
        """``H Wᵀ``, the bias left out."""
        return H @ self.W.T

    def check(self, name: str) -> None:
        if np.ndim(self.W) != 2:
            raise ValueError(f"{name}.W must be 2-D (n_out, n_in), got shape {np.shape(self.W)}")


Params = tuple[AbstractLayer, ...]
"""A network: its layers, first to last (a plain pytree)."""


def is_net(params) -> bool:
    """True for a non-empty tuple (or list) of layers."""
    return (isinstance(params, tuple | list) and len(params) > 0
            and all(isinstance(layer, AbstractLayer) for layer in params))


def is_dense(params) -> bool:
    """True for a net of dense :class:`Layer` s only (the two-layer fast paths read ``W``)."""
    return is_net(params) and all(isinstance(layer, Layer) for layer in params)


def _listed(x) -> bool:
    """A list or tuple: one leaf when checking a layer's arrays, not a container of numbers."""
    return isinstance(x, list | tuple)


def check_net(params, name: str = "params", *, X=None, x_name: str = "X", depth: int | None = None,
              bias_free: bool = False, d: int | None = None, p_out: int | None = None) -> list:
    """Check a network at a public entry and return its layers' matrices (float arrays,
    each built on first access: a conv layer's Toeplitz matrix only when it is read).

    ``params`` a non-empty tuple of layers whose weights are finite and whose sizes chain
    (``n_in`` of a layer = ``n_out`` of the one before, read from static shapes; a conv
    layer's ``(channels, *spatial)`` input must match a conv layer's output before it; each
    layer's own shape rules by its :meth:`~AbstractLayer.check`), biases ``None`` or
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

    for i, layer in enumerate(params):
        for path, leaf in [] if traced else jax.tree_util.tree_leaves_with_path(layer, is_leaf=_listed):
            where = f"{name}[{i}]{jax.tree_util.keystr(path)}"  # params[0].W
            if _listed(leaf):  # the layer computes with it as it is: H @ W.T needs an array
                raise TypeError(f"{where} is a {type(leaf).__name__}: build the layer from an array, "
                                "e.g. Layer(np.asarray(W)), or use biasfree.from_arrays")
            validate.finite_array(where, leaf)
        layer.check(f"{name}[{i}]")
        n_out, n_in = layer.n_out, layer.n_in  # static shapes: no Toeplitz matrix is built
        if i and n_in != params[i - 1].n_out:
            raise ValueError(f"{name}: layer {i} takes {n_in} inputs but layer {i - 1} has "
                             f"{params[i - 1].n_out} outputs; consecutive widths must agree")
        prev = params[i - 1].out_layout if i else None
        if prev is not None and layer.in_layout is not None and tuple(prev) != tuple(layer.in_layout):
            raise ValueError(f"{name}: layer {i} reads (channels, *spatial) = {tuple(layer.in_layout)} "
                             f"but layer {i - 1} gives {tuple(prev)}; match its input channels and "
                             "spatial shape to the previous layer's output")
        b = layer.bias
        if b is not None and np.shape(array(f"{name}[{i}].b", b, 1, "(n_out,)")) != (n_out,):
            raise ValueError(f"{name}[{i}].b must have shape ({n_out},), got {np.shape(b)}")
    d_in, p = params[0].n_in, params[-1].n_out
    if depth is not None and len(params) != depth:
        raise ValueError(f"{name} has {len(params)} layers; this needs exactly {depth}")
    if bias_free and any(layer.has_bias for layer in params):
        raise ValueError(f"{name} has biases; this result holds for bias-free nets only (drop b)")
    if d is not None and d_in != d:
        raise ValueError(f"{name} takes inputs of dimension {d_in} but the data have "
                         f"d = {d}; build the net for the data")
    if p_out is not None and p != p_out:
        raise ValueError(f"{name} has {p} outputs but the targets have p = {p_out}")
    if X is not None and array(x_name, X, 2, "(N, d)").shape[1] != d_in:
        raise ValueError(f"{x_name} has {np.shape(X)[1]} columns but {name} takes inputs of dimension "
                         f"d = {d_in}: pass X of shape (N, {d_in})")
    return _Matrices(params, traced)


def takes_net(*, bias_free: bool = False, arg: str = "params"):
    """Decorate a public function with a net argument ``arg``: the body runs after
    :func:`check_net` has checked it (no biases allowed when ``bias_free``), so the check is
    declared once, at the boundary (``fn.__wrapped__`` is the unchecked body)."""
    def wrap(fn):
        index = list(inspect.signature(fn).parameters).index(arg)

        @functools.wraps(fn)
        def checked(*args, **kwargs):
            check_net(kwargs[arg] if arg in kwargs else args[index], arg, bias_free=bias_free)
            return fn(*args, **kwargs)
        return checked
    return wrap


class _Matrices(Sequence):
    """The layers' matrices as float arrays, each built on first access (a conv's Toeplitz
    matrix can be large); traced ones as they are."""

    def __init__(self, layers, traced: bool):
        self._layers, self._traced = tuple(layers), traced

    def __len__(self) -> int:
        return len(self._layers)

    def __getitem__(self, i):
        A = self._layers[i].matrix
        return A if self._traced else np.array(A, dtype=float)  # a copy, as the check made


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
    return _scale_params(params, factor)


def _scale_params(params: Params, factor) -> Params:
    """:func:`scale_params` unchecked."""
    return tuple(layer.scaled(factor) for layer in params)
