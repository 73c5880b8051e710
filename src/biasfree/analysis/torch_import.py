"""PyTorch in: a ``torch.nn.Sequential`` (or any module whose layers, in the order they are
registered, are such a stack) as a :class:`~.model.Model`, weights in float64.

What is mapped to what (layers named by their index in the Sequential, or their attribute
name in another module; nested modules flattened, in registration order):

- ``Linear`` -> :class:`~biasfree.core.layers.Layer` with ``W = weight`` (out, in), ``b = bias``;
- ``Conv1d/Conv2d`` (stride 1, dilation 1, groups 1, ``padding_mode="zeros"``,
  padding ``"same"``, ``"valid"``, 0, or ``(k − 1)/2`` per axis for odd k) ->
  :class:`~biasfree.core.conv.Conv` with ``K = weight`` (C_out, C_in, k[, k]), ``b = bias``, on
  the spatial shape the layer reads (from ``in_shape``, the network's input spatial shape);
- ``AdaptiveAvgPool1d/2d(1)``, ``Flatten``, ``Linear`` -> one
  :class:`~biasfree.core.conv.PooledDense` with ``V = weight`` (out, C), ``b = bias``;
- ``Flatten()`` -> nothing: hidden states are already flat, channel-major (its order);
- ``ReLU`` (α = 0), ``LeakyReLU`` (α = ``negative_slope``), ``Identity`` or none (α = 1)
  (``Dropout`` in eval mode is the identity, read as nothing; in training mode refused):
  the slope, one for the whole net;
- bias-free ``BatchNorm1d/2d`` in eval mode, ``y = s ⊙ x`` per channel (or feature) with
  ``s = γ / √(running_var + eps)`` (γ = ``weight``, 1 without ``affine``): folded exactly
  (in exact arithmetic) into the preceding layer's output rows, ``K[o] ← s_o K[o]`` or
  ``W[j] ← s_j W[j]`` (and its bias, ``b ← s ⊙ b``), when it directly follows that layer;
  otherwise into the next layer's inputs, ``K[:, i] ← s_i K[:, i]`` or ``W[:, j] ← s_j W[:, j]``
  (through an activation only when s ≥ 0, since σ_α(s z) = s σ_α(z) needs s ≥ 0). A shift
  (β ≠ 0 or ``running_mean`` ≠ 0) is a bias and is refused, and so is training mode (batch statistics).

Biases that are exactly zero are dropped (such a layer computes the bias-free map); nonzero
ones are kept, as in a params tuple with biases (``analyse`` measures the function, and the
net has no linear twin). A module that holds parameters of its own (``nn.Parameter``
attributes outside its Linear/Conv/BatchNorm layers) is refused, naming them: the walk reads
layers only.

The walk reads what the layers are, not what ``forward`` does with them. ``analyse`` runs the
module on the data and refuses a reading that does not reproduce it
(:mod:`biasfree.analysis.verify`): a softmax or other function in ``forward`` that no layer
shows, a transposed weight, a scaling, layers used in another order.
"""

from __future__ import annotations

import dataclasses
import math

import jax.numpy as jnp
import numpy as np

from ..core.conv import drop_zero_biases, spatial_shape
from ..core.inits import from_arrays
from ..core.precision import precise
from .model import Model, one_slope, refuse
from .model_files import build_layer

_SHIFT_FIX = ("A bias-free batch norm only scales (β = 0 and running_mean = 0, as in the BF-CNN of "
              "Mohan et al.); build it so, or remove the layer.")


def _torch_slope(mod, where: str) -> float | None:
    """α of an activation module, None for Identity and for dropout in eval mode (the identity);
    refuses anything else."""
    import torch.nn as nn

    if isinstance(mod, nn.Identity):
        return None
    if isinstance(mod, nn.modules.dropout._DropoutNd):  # the identity in eval mode, random in training
        if mod.training and mod.p > 0:
            raise refuse(where, f"{type(mod).__name__}(p={mod.p:g}) in training mode drops units at random",
                         "Call model.eval() first (dropout is then the identity).")
        return None
    if isinstance(mod, nn.ReLU):
        return 0.0
    if isinstance(mod, nn.LeakyReLU):
        a = float(mod.negative_slope)
        if not 0.0 <= a <= 1.0:
            raise refuse(where, f"LeakyReLU(negative_slope={a:g}) is outside the family 0 <= α <= 1")
        return a
    kind = type(mod).__name__
    if isinstance(mod, nn.modules.conv._ConvNd):
        raise refuse(where, f"{kind} is a convolution this package does not read",
                     "Use Conv1d or Conv2d (stride 1), or a fully connected net.")
    raise refuse(where, f"{kind} is not supported")


_LEAVES = ("Linear", "Conv1d", "Conv2d", "BatchNorm1d", "BatchNorm2d")
"""Modules read as layers (their subclasses too); every other module with children is walked."""


def _flatten(module, prefix: str = ""):
    """(name, module) of every leaf of ``module`` in registration order, walking into every
    module with children that is not a layer read here; such a container holding parameters
    of its own is refused, naming them (a leaf of an unread type is refused by its type)."""
    import torch.nn as nn

    leaves = tuple(getattr(nn, n) for n in _LEAVES)
    if isinstance(module, leaves) and not prefix:  # one layer given alone
        yield type(module).__name__, module
        return
    own = [f"{prefix}{n}" for n, _ in module.named_parameters(recurse=False)]
    if own:
        raise refuse(f"'{own[0]}' ({type(module).__name__})", "is a parameter of the module itself, not of "
                     "a layer (the walk reads Linear, Conv1d/Conv2d and BatchNorm layers)",
                     "Hold the weights in nn.Linear / nn.Conv2d layers and call those in forward.")
    for name, mod in module.named_children():
        full = f"{prefix}{name}"
        if not isinstance(mod, leaves) and next(mod.children(), None) is not None:
            yield from _flatten(mod, full + ".")
        else:
            yield full, mod


def _array(t) -> np.ndarray:
    return t.detach().cpu().double().numpy().copy()


def _bias(mod) -> np.ndarray | None:
    return None if mod.bias is None else _array(mod.bias)


def _conv_padding(mod, where: str, ks: tuple[int, ...]) -> str:
    """torch's padding as "same" or "valid" (module doc), or refused."""
    p = mod.padding
    if isinstance(p, str):
        return p
    p = tuple(int(x) for x in p)
    if all(x == 0 for x in p):
        return "valid"
    if all(k % 2 == 1 and x == (k - 1) // 2 for x, k in zip(p, ks, strict=True)):
        return "same"
    raise refuse(where, f"padding={p} is neither 0 ('valid') nor (k − 1)/2 on every axis of an odd "
                 f"kernel {ks} ('same')", "Use padding='same' or padding='valid'.")


class _Walk:
    """The conversion's state while walking the Sequential (from_torch's module doc)."""

    def __init__(self, spatial):
        self.spatial = spatial        # spatial shape of the current state, None when flat
        self.width = None             # channels (spatial) or features (flat); None: not yet known
        self.layers: list[dict] = []  # type (as build_layer reads it), name, W, torch, in_shape, padding
        self.acts: list[tuple[str, float]] = []  # activations since the last weight layer
        self.slopes: list[tuple[str, float]] = []
        self.fresh = False            # the state is the last weight layer's output, unchanged
        self.scale = None             # (where, s): a batch norm's scale for the next layer's inputs
        self.pool = None              # (where, spatial, flattened) after AdaptiveAvgPool

    def weight_layer(self, name, where, kind, W, n_in, b=None, **extra):
        if self.width is not None and n_in != self.width:
            what = "channels" if kind == "Conv" else "features"
            raise refuse(where, f"takes {n_in} input {what} but the layer before gives {self.width}",
                         "Match its input size to the previous layer's output.")
        torch_type = where.split("(")[-1][:-1]  # "layer 3 (Linear)" -> "Linear"
        if self.scale is not None:  # fold a batch norm's scale into this layer's inputs
            W = W * self.scale[1]
            self.scale = None
        if self.layers:
            if len(self.acts) > 1:
                raise refuse(f"layers {', '.join(n for n, _ in self.acts)}", "two activations in a row")
            a = self.acts[0][1] if self.acts else 1.0
            self.slopes.append((f"after layer {self.layers[-1]['name']}", a))
        elif self.acts:
            raise refuse(f"layer {self.acts[0][0]}", f"an activation before the first {torch_type}")
        self.layers.append(dict(type=kind, name=name, W=W, b=b, torch=torch_type, **extra))
        self.acts, self.fresh = [], True

    def batch_norm(self, mod, where, nd):
        if mod.training:
            raise refuse(where, "is in training mode (it normalises by each batch's statistics)",
                         "Call model.eval() first.")
        if mod.running_var is None:
            raise refuse(where, "has no running statistics (track_running_stats=False normalises by "
                         "each batch)", "Build it with track_running_stats=True and call model.eval().")
        if (mod.bias is not None and bool((mod.bias != 0).any())) or bool((mod.running_mean != 0).any()):
            raise refuse(where, "has a shift (β = bias ≠ 0 or running_mean ≠ 0), which is a bias", _SHIFT_FIX)
        if nd == 2 and (self.spatial is None or len(self.spatial) != 2):
            raise refuse(where, "normalises (C, H, W) states but the state here is "
                         + ("flat" if self.spatial is None else f"1-D {self.spatial}"), "Use BatchNorm1d.")
        if nd == 1 and self.spatial is not None and len(self.spatial) != 1:
            raise refuse(where, f"normalises (C[, L]) states but the state here is 2-D {self.spatial}",
                         "Use BatchNorm2d.")
        C = int(mod.num_features)
        if self.width is not None and C != self.width:
            raise refuse(where, f"has num_features={C} but the layer before gives {self.width}",
                         "Match num_features to the previous layer's output.")
        self.width = C
        s = (_array(mod.running_var) + float(mod.eps)) ** -0.5  # in float64, whatever the module's dtype
        if mod.weight is not None:
            s = _array(mod.weight) * s
        if self.fresh and not self.pool:  # into the rows of the layer just before
            last = self.layers[-1]
            last["W"] = last["W"] * s.reshape((-1,) + (1,) * (last["W"].ndim - 1))
            if last["b"] is not None:  # s (z + b) = (s z) + s b
                last["b"] = last["b"] * s
        else:  # into the next layer's input channels / features: its weight's axis 1 (a kernel's C_in)
            prev = self.scale[1] if self.scale is not None else 1.0
            self.scale = (where, prev * s.reshape((1, -1) + (1,) * len(self.spatial or ())))

    def activation(self, a, name, where):
        if self.pool is not None:
            raise refuse(where, "an activation after AdaptiveAvgPool",
                         "A pooled readout is AdaptiveAvgPool, Flatten, Linear with nothing between.")
        if self.scale is not None and np.any(self.scale[1] < 0):
            raise refuse(self.scale[0], "has a negative scale γ/√(var + eps) before an activation, which "
                         "cannot be folded (σ(s z) ≠ s σ(z) for s < 0)",
                         "Put the batch norm before the activation, right after its conv or Linear.")
        self.acts.append((name, a))
        self.fresh = False

    def flatten(self, mod, where):
        if mod.start_dim != 1 or mod.end_dim != -1:
            raise refuse(where, f"Flatten(start_dim={mod.start_dim}, end_dim={mod.end_dim}) is not the "
                         "flattening of (C, *spatial)", "Use nn.Flatten() (start_dim=1, end_dim=-1).")
        if self.pool is not None:  # pooled: one feature per channel
            self.pool = (self.pool[0], self.pool[1], True)
            if self.scale is not None:
                self.scale = (self.scale[0], self.scale[1].reshape(1, -1))
            self.spatial = None
        elif self.spatial is not None:
            S = math.prod(self.spatial)
            if self.scale is not None:  # one scale per channel -> one per feature, channel-major
                self.scale = (self.scale[0], np.repeat(self.scale[1].reshape(1, -1), S, axis=1))
            self.fresh = self.fresh and S == 1
            self.width = None if self.width is None else self.width * S
            self.spatial = None

    def conv(self, mod, name, where):
        import torch.nn as nn

        nd = 1 if isinstance(mod, nn.Conv1d) else 2
        for attr in ("stride", "dilation"):
            if any(int(v) != 1 for v in getattr(mod, attr)):
                raise refuse(where, f"{attr}={tuple(getattr(mod, attr))}", f"Use {attr}=1 (only stride-1, "
                             "undilated convolutions are supported).")
        if mod.groups != 1:
            raise refuse(where, f"groups={mod.groups}", "Use groups=1.")
        if mod.padding_mode != "zeros":
            raise refuse(where, f"padding_mode={mod.padding_mode!r}", "Use padding_mode='zeros'.")
        if self.pool is not None:
            raise refuse(where, "a convolution after AdaptiveAvgPool",
                         "A pooled readout is AdaptiveAvgPool, Flatten, Linear with nothing between.")
        if self.spatial is None:
            raise refuse(where, "reads (C, *spatial) states but the state here is flat (after Flatten)",
                         "Put the convolutions before nn.Flatten().")
        if len(self.spatial) != nd:
            raise refuse(where, f"is {nd}-D but its input has spatial shape {self.spatial}",
                         f"Give in_shape with {nd} axes, or use Conv{len(self.spatial)}d.")
        ks = tuple(int(k) for k in mod.kernel_size)
        padding = _conv_padding(mod, where, ks)
        if padding == "valid" and any(k > n for k, n in zip(ks, self.spatial, strict=True)):
            raise refuse(where, f"kernel {ks} is larger than its input {self.spatial} with padding 'valid'",
                         "Use a smaller kernel, padding='same', or a larger in_shape.")
        spatial = self.spatial
        self.weight_layer(name, where, "Conv", _array(mod.weight), int(mod.in_channels), _bias(mod),
                          in_shape=spatial, padding=padding)
        self.width = int(mod.out_channels)
        if padding == "valid":
            self.spatial = tuple(n - k + 1 for n, k in zip(spatial, ks, strict=True))

    def linear(self, mod, name, where):
        W, b = _array(mod.weight), _bias(mod)
        if self.pool is not None:
            pwhere, spatial, flat = self.pool
            if not flat:
                raise refuse(where, f"follows {pwhere} without nn.Flatten()",
                             "A pooled readout is AdaptiveAvgPool, Flatten, Linear.")
            self.pool = None
            self.weight_layer(name, where, "PooledDense", W, int(mod.in_features), b, in_shape=spatial)
        elif self.spatial is not None:
            raise refuse(where, f"would read only the last axis of the (C, *spatial) = "
                         f"({self.width}, *{self.spatial}) state", "Put nn.Flatten() before it.")
        else:
            self.weight_layer(name, where, "Layer", W, int(mod.in_features), b)
        self.width = int(mod.out_features)

    def pooling(self, mod, where, nd):
        size = mod.output_size
        sizes = (size,) * nd if isinstance(size, int) or size is None else tuple(size)
        if any(s != 1 for s in sizes):
            raise refuse(where, f"output_size={size!r}", "Only global average pooling (output_size=1) "
                         "followed by Flatten and Linear is supported.")
        if self.spatial is None or len(self.spatial) != nd:
            raise refuse(where, f"pools {nd}-D states but the state here is "
                         + ("flat" if self.spatial is None else f"{len(self.spatial)}-D {self.spatial}"),
                         f"Use AdaptiveAvgPool{len(self.spatial or (0,))}d(1) right after the convolutions.")
        if self.pool is not None:
            raise refuse(where, "pooling twice", "Pool once, then Flatten and Linear.")
        self.pool = (where, self.spatial, False)
        self.fresh = False


@precise
def from_torch(module, *, in_shape=None) -> Model:
    """A ``torch.nn.Sequential`` of (leaky) ReLU layers, or any ``nn.Module`` whose layers in
    registration order are one, as a :class:`~.model.Model`, weights in float64 (what maps
    to what: the module doc; biases that are exactly zero dropped, nonzero ones kept).

    ``in_shape``: the input's spatial shape, ``(length,)`` for ``Conv1d`` or ``(H, W)`` for
    ``Conv2d``; needed (and only allowed) when the net has a convolution or pooling; the
    model then reads flat inputs ``x_img.reshape(N, -1)`` of ``(N, C, *in_shape)`` images.
    Refuses (:class:`~.model.UnsupportedModelError`), naming the layer by its index and type
    in the Sequential and the fix: any other module (Tanh, GELU, dropout, max pooling), a
    parameter held outside the layers, a conv's stride, dilation, groups or padding outside
    the module doc, a kernel larger than a 'valid' input, mismatched channels, a batch norm with a shift or in
    training mode, two activations in a row, an activation before the first or after the
    last weight layer, and different slopes in different places.

    This reads the layers, not ``forward``; :func:`~biasfree.analyse` also runs the module on
    the data and refuses a reading that ``forward`` does not reproduce
    (:mod:`biasfree.analysis.verify`), from this Model too (it keeps the module as ``origin``).
    """
    try:
        import torch.nn as nn
    except ImportError:  # pragma: no cover - exercised only without the extra
        raise ImportError("from_torch needs PyTorch: pip install 'biasfree[torch]'") from None
    if not isinstance(module, nn.Module):
        raise TypeError(f"from_torch takes a torch.nn.Module (an nn.Sequential of layers), got "
                        f"{type(module).__name__}")
    complex_ = next((n for n, t in module.state_dict().items() if t.is_complex()), None)
    if complex_ is not None:  # .double() would drop the imaginary part with only a warning
        raise refuse(f"'{complex_}'", "holds complex numbers", "Give a real net (float32 or float64).")
    mods = list(_flatten(module))
    spatial_kinds = (nn.modules.conv._ConvNd, nn.AdaptiveAvgPool1d, nn.AdaptiveAvgPool2d, nn.BatchNorm2d)
    spatial_net = next((f"layer {n} ({type(m).__name__})" for n, m in mods if isinstance(m, spatial_kinds)),
                       None)
    if spatial_net and in_shape is None:
        raise ValueError(f"from_torch: {spatial_net} needs the input's spatial shape, which a torch module "
                         "does not store: pass in_shape=(H, W) for Conv2d or (length,) for Conv1d, e.g. "
                         "biasfree.from_torch(model, in_shape=(8, 8)) (and analyse that Model)")
    if in_shape is not None and not spatial_net:
        raise ValueError(f"from_torch: in_shape={in_shape!r} is the spatial shape of a conv net's input, but "
                         "this net has no convolution or pooling (it reads flat vectors): leave it out")
    walk = _Walk(None if in_shape is None else spatial_shape(in_shape))
    for name, mod in mods:
        where = f"layer {name} ({type(mod).__name__})"
        if isinstance(mod, nn.Linear):
            walk.linear(mod, name, where)
        elif type(mod) in (nn.Conv1d, nn.Conv2d):
            walk.conv(mod, name, where)
        elif type(mod) in (nn.BatchNorm1d, nn.BatchNorm2d):
            walk.batch_norm(mod, where, 1 if type(mod) is nn.BatchNorm1d else 2)
        elif type(mod) in (nn.AdaptiveAvgPool1d, nn.AdaptiveAvgPool2d):
            walk.pooling(mod, where, 1 if type(mod) is nn.AdaptiveAvgPool1d else 2)
        elif isinstance(mod, nn.Flatten):
            walk.flatten(mod, where)
        else:
            a = _torch_slope(mod, where)
            if a is not None:
                walk.activation(a, name, where)
    if walk.acts:
        raise refuse(f"layer {walk.acts[-1][0]}", f"an activation after the last {walk.layers[-1]['torch']}",
                     "The output layer must be linear.")
    if walk.pool is not None:
        raise refuse(walk.pool[0], "pooling without a readout", "Follow it with nn.Flatten() and nn.Linear.")
    if walk.scale is not None:
        raise refuse(walk.scale[0], "cannot be folded: no layer with weights follows it and it does not "
                     "directly follow one", "Put it right after its conv or Linear layer.")
    kinds = {layer["type"] for layer in walk.layers}
    if len(walk.layers) < 2:
        what = "Linear layer(s)" if kinds <= {"Layer"} else "layer(s) with weights"
        raise refuse("torch model", f"{len(walk.layers)} {what}", "Give at least two (one hidden layer).")
    alpha, source = one_slope(walk.slopes, "torch model"), f"torch:{type(module).__name__}"
    params = (from_arrays([la["W"] for la in walk.layers], [la["b"] for la in walk.layers])
              if kinds == {"Layer"} else
              tuple(_with_bias(build_layer(la["name"], la["W"], la, source), la["b"]) for la in walk.layers))
    params, _ = drop_zero_biases(params)  # exactly zero: the bias-free map
    return Model(params, alpha, source, tuple(layer["name"] for layer in walk.layers), module)


def _with_bias(layer, b):
    return layer if b is None else dataclasses.replace(layer, b=jnp.asarray(b, dtype=float))

