"""Your own model: PyTorch, equinox and weight files in, as a bias-free network (no pickle).

Every adapter (:func:`from_torch`, :func:`from_equinox`, :func:`from_state_dict`,
:func:`load_model`; :func:`save_model` writes torch's naming back) returns a
:class:`Model`: the parameters in this package's convention (a tuple of
:class:`~biasfree.core.layers.Layer`, ``W_l`` of shape (n_l, n_{l-1}), (out, in) as in
PyTorch's and equinox's ``Linear.weight``) and the leaky slope α read from the model:

    f(x) = W_L σ_α(W_{L-1} σ_α( ... σ_α(W_1 x))),   σ_α(z) = max(z, α z).

Supported: bias-free linear layers with one activation between consecutive layers,
ReLU (α = 0), LeakyReLU (α in [0, 1]) or none (α = 1), the same everywhere, none after
the last layer. Anything else is refused with an error naming the layer.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from .. import _validate as validate
from ..core.inits import from_arrays
from ..core.layers import Layer, Params, check_net
from ..core.nets import forward, has_bias
from ..core.precision import precise

SUPPORTED = ("bias-free linear layers with ReLU, LeakyReLU(negative_slope in [0, 1]) or no "
             "activation between them, one slope for the whole net")


class UnsupportedModelError(ValueError):
    """The model lies outside the bias-free (leaky) ReLU family this package analyses."""


@dataclass(frozen=True)
class Model:
    """A bias-free (leaky) ReLU network: ``params`` (tuple of Layer), slope ``alpha``
    (None when the source did not say), ``source`` where it came from, and ``names``
    the original name of each weight. ``model(X)`` is ``forward(params, X, alpha)``."""

    params: Params
    alpha: float | None
    source: str = ""
    names: tuple[str, ...] = ()

    def __post_init__(self):
        check_net(self.params)
        if self.alpha is not None:
            validate.slope(self.alpha)

    @precise
    def __call__(self, X):
        if self.alpha is None:
            raise ValueError(f"the slope α of {self.source or 'this model'} is unknown: "
                             "use dataclasses.replace(model, alpha=...)")
        return forward(self.params, np.asarray(X, dtype=float), self.alpha)


def _refuse(where: str, what: str, fix: str = "") -> UnsupportedModelError:
    msg = f"{where}: {what}. Supported: {SUPPORTED}."
    return UnsupportedModelError(msg + (f" {fix}" if fix else ""))


def _one_slope(slopes: list[tuple[str, float]], source: str) -> float:
    values = sorted({a for _, a in slopes})
    if len(values) > 1:
        listing = ", ".join(f"{w} -> α = {a:g}" for w, a in slopes)
        raise _refuse(source, f"mixed slopes ({listing})",
                      "Every hidden layer must use the same slope α.")
    alpha = values[0] if values else 1.0
    if not 0.0 <= alpha <= 1.0:
        raise _refuse(source, f"slope α = {alpha:g} is outside [0, 1]")
    return float(alpha)


# ------------------------------------------------------------------------ torch


def _torch_slope(mod, where: str) -> float | None:
    """α of an activation module, None for Identity; refuses anything else."""
    import torch.nn as nn

    if isinstance(mod, nn.Identity):
        return None
    if isinstance(mod, nn.ReLU):
        return 0.0
    if isinstance(mod, nn.LeakyReLU):
        a = float(mod.negative_slope)
        if not 0.0 <= a <= 1.0:
            raise _refuse(where, f"LeakyReLU(negative_slope={a:g}) is outside the family 0 <= α <= 1")
        return a
    kind = type(mod).__name__
    if isinstance(mod, nn.modules.conv._ConvNd):
        raise _refuse(where, f"{kind} is a convolution",
                      "Flatten the model into Linear layers, or analyse a fully connected net.")
    raise _refuse(where, f"{kind} is not supported")


def _flatten(seq, prefix: str = ""):
    import torch.nn as nn

    for name, mod in seq.named_children():
        full = f"{prefix}{name}"
        if isinstance(mod, nn.Sequential):
            yield from _flatten(mod, full + ".")
        else:
            yield full, mod


@precise
def from_torch(module) -> Model:
    """A bias-free ``torch.nn.Sequential`` as a :class:`Model`, weights in float64.

    Accepts ``Linear(bias=False)`` layers with ``ReLU`` (α = 0), ``LeakyReLU`` (α =
    ``negative_slope``), ``Identity`` or nothing (α = 1) between them (nested
    Sequentials are flattened). Refuses, naming the layer by its index in the
    Sequential: a bias, any other module (Tanh, GELU, a convolution, normalisation,
    dropout), two activations in a row, an activation before the first or after the
    last Linear, and different slopes in different places.
    """
    try:
        import torch.nn as nn
    except ImportError:  # pragma: no cover - exercised only without the extra
        raise ImportError("from_torch needs PyTorch: pip install 'biasfree[torch]'") from None
    if not isinstance(module, nn.Sequential):
        raise TypeError(
            f"from_torch takes a torch.nn.Sequential, got {type(module).__name__}; for another "
            "module pass module.state_dict() to biasfree.from_state_dict(mapping, alpha)")
    weights, names, slopes = [], [], []
    pending: list[tuple[str, float]] = []  # activations since the last Linear
    for name, mod in _flatten(module):
        where = f"layer {name} ({type(mod).__name__})"
        if isinstance(mod, nn.Linear):
            if mod.bias is not None:
                raise _refuse(where, "has a bias", "Build it as nn.Linear(..., bias=False).")
            if weights:
                if len(pending) > 1:
                    raise _refuse(f"layers {', '.join(n for n, _ in pending)}",
                                  "two activations in a row")
                slopes.append((f"after layer {names[-1]}", pending[0][1] if pending else 1.0))
            elif pending:
                raise _refuse(f"layer {pending[0][0]}", "an activation before the first Linear")
            weights.append(mod.weight.detach().cpu().double().numpy())
            names.append(name)
            pending = []
        else:
            a = _torch_slope(mod, where)
            if a is not None:
                pending.append((name, a))
    if pending:
        raise _refuse(f"layer {pending[-1][0]}", "an activation after the last Linear",
                      "The output layer must be linear.")
    if len(weights) < 2:
        raise _refuse("torch model", f"{len(weights)} Linear layer(s)",
                      "Give at least two (one hidden layer).")
    alpha = _one_slope(slopes, "torch model")
    return Model(from_arrays(weights), alpha, f"torch:{type(module).__name__}", tuple(names))


# ---------------------------------------------------------------------- equinox

_PROBE = np.array([-7.0, -3.0, -1.0, -0.25, 0.125, 0.5, 2.0, 9.0])


def _probe_slope(act, width: int, where: str) -> float:
    """α of an elementwise activation applied per neuron (equinox MLP's layout), by
    evaluation: ``σ(z) = max(z, α z)`` at probe points z, with α = -σ(-1)."""
    import equinox as eqx

    def apply(z):
        zs = jnp.full((width,), z)
        return eqx.filter_vmap(lambda a, x: a(x))(act, zs)

    try:
        vals = np.array([np.asarray(apply(z), dtype=float) for z in _PROBE])  # (probes, width)
    except Exception as e:  # noqa: BLE001 - any failure means: not an elementwise activation
        raise _refuse(where, f"activation {getattr(act, '__name__', act)!r} could not be "
                      f"evaluated elementwise ({type(e).__name__})") from None
    alpha = float(-vals[_PROBE == -1.0][0].mean()) + 0.0  # + 0.0: no "-0" for ReLU
    expected = np.maximum(_PROBE, alpha * _PROBE)[:, None]
    if not np.allclose(vals, expected, rtol=1e-6, atol=0.0):
        name = getattr(act, "__name__", None) or getattr(getattr(act, "func", None), "__name__", None)
        raise _refuse(where, f"activation {name or type(act).__name__} is not max(z, α z)")
    if not 0.0 <= alpha <= 1.0:
        raise _refuse(where, f"activation is a leaky ReLU with slope {alpha:g}, outside [0, 1]")
    return alpha


@precise
def from_equinox(mlp) -> Model:
    """An ``eqx.nn.MLP`` with ``use_bias=False``, ``use_final_bias=False`` as a
    :class:`Model`, weights in float64.

    The activation is read by evaluating it: ``jax.nn.relu`` (α = 0),
    ``jax.nn.leaky_relu`` (α = 0.01, or ``functools.partial(jax.nn.leaky_relu,
    negative_slope=a)``), the identity (α = 1), or any function equal to
    ``max(z, α z)``. The final activation must be the identity. Anything else is
    refused, naming the layer.
    """
    import equinox as eqx

    if not isinstance(mlp, eqx.nn.MLP):
        raise TypeError(f"from_equinox takes an equinox.nn.MLP, got {type(mlp).__name__}; "
                        "for other models give the weight matrices to biasfree.from_arrays")
    if mlp.depth < 1:
        raise _refuse("equinox MLP", "depth 0 (a single Linear layer)", "Give depth >= 1.")
    layers = list(mlp.layers)
    if mlp.scan:  # (input, stacked hidden, output)
        hid = layers[1]
        layers = [layers[0]] + [jax.tree_util.tree_map(lambda x, i=i: x[i] if eqx.is_array(x) else x, hid)
                                for i in range(mlp.depth - 1)] + [layers[2]]
    weights = []
    for i, lin in enumerate(layers):
        if getattr(lin, "bias", None) is not None:
            flag = "use_final_bias" if i == len(layers) - 1 else "use_bias"
            raise _refuse(f"layers[{i}] (Linear)", "has a bias", f"Build the MLP with {flag}=False.")
        W = np.asarray(lin.weight, dtype=float)
        weights.append(W if W.ndim == 2 else W.reshape(-1, 1))
    if mlp.out_size == "scalar":
        weights[-1] = weights[-1].reshape(1, -1)
    slopes = []
    for i in range(mlp.depth):
        act_i = jax.tree_util.tree_map(lambda x, i=i: x[i] if eqx.is_array(x) else x, mlp.activation)
        slopes.append((f"activation after layers[{i}]",
                       _probe_slope(act_i, int(mlp.width_size), f"activation after layers[{i}]")))
    p = 1 if mlp.out_size == "scalar" else int(mlp.out_size)
    final = mlp.final_activation
    if mlp.out_size == "scalar":
        final = eqx.filter_vmap(lambda: mlp.final_activation, axis_size=1)()
    if _probe_slope(final, p, "final_activation") != 1.0:
        raise _refuse("final_activation", "is not the identity", "The output layer must be linear.")
    alpha = _one_slope(slopes, "equinox MLP")
    return Model(from_arrays(weights), alpha, "equinox:MLP",
                 tuple(f"layers[{i}].weight" for i in range(len(weights))))


# ------------------------------------------------------------- names -> arrays


def _natural(name: str):
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]


@precise
def from_state_dict(mapping: Mapping, alpha=None, *, source: str = "state dict") -> Model:
    """A :class:`Model` from names -> arrays in PyTorch's naming, slope ``alpha``.

    Weights are the 2-D entries whose names end in ``weight`` (``"0.weight"``,
    ``"net.2.weight"``, ``"fc1.weight"``, ...), taken in natural order of their names
    (so ``"10.weight"`` comes after ``"2.weight"``), each (n_out, n_in) as in
    ``torch.nn.Linear``; their shapes must chain. Refused, naming the entry: a bias
    (``*.bias``), a weight of more than two axes (a convolution), and any other entry
    (e.g. a normalisation layer's ``running_mean``). ``alpha`` (0 ReLU, 1 linear) is
    not stored in a state dict: give it (None leaves it unknown).
    """
    if not isinstance(mapping, Mapping):
        raise TypeError(f"from_state_dict takes a mapping of names to arrays, got {type(mapping).__name__}")
    entries = []
    for name in sorted(mapping, key=_natural):
        if not isinstance(name, str):
            raise TypeError(f"mapping keys must be weight names such as '0.weight', got {name!r}")
        A = validate.finite_array(f"mapping[{name!r}]", mapping[name], nonempty=False)
        leaf = name.rsplit(".", 1)[-1]
        if leaf == "bias" or leaf.endswith("_bias"):
            layer = name.rsplit(".", 1)[0] if "." in name else name
            raise _refuse(f"layer {layer} ('{name}')", "has a bias",
                          "Build the layers with bias=False.")
        if leaf == "weight" or re.fullmatch(r"W_?\d*", leaf) or leaf.endswith("_weight"):
            if A.ndim > 2:
                raise _refuse(f"'{name}' {A.shape}", f"a {A.ndim}-axis weight is a convolution")
            if A.ndim < 2:
                raise _refuse(f"'{name}' {A.shape}", "a 1-axis weight belongs to a normalisation "
                              "layer (BatchNorm, LayerNorm)")
            entries.append((name, A))
        else:
            raise _refuse(f"'{name}' {A.shape}", "is not a Linear weight",
                          "Keep only the '<layer>.weight' entries of bias-free Linear layers.")
    if len(entries) < 2:
        raise _refuse(source, f"{len(entries)} weight matrices", "Give at least two.")
    for (n0, A0), (n1, A1) in zip(entries, entries[1:], strict=False):
        if A1.shape[1] != A0.shape[0]:
            order = ", ".join(f"{n} {A.shape}" for n, A in entries)
            raise ValueError(
                f"{source}: '{n1}' {A1.shape} does not take the {A0.shape[0]} outputs of '{n0}' "
                f"{A0.shape}; weights in name order: {order}. Name them in forward order "
                "('0.weight', '1.weight', ...) with shapes (n_out, n_in)")
    if alpha is not None:
        alpha = validate.slope(alpha)
    return Model(from_arrays([A for _, A in entries]), alpha, source,
                 tuple(n for n, _ in entries))


@precise
def load_model(path, alpha=None) -> Model:
    """A :class:`Model` from a ``.safetensors`` or ``.npz`` file of Linear weights.

    Names as in :func:`from_state_dict` (e.g. ``safetensors.torch.save_file(
    model.state_dict(), path)`` of a bias-free ``nn.Sequential``). ``.safetensors`` is
    read with ``safetensors.numpy`` (no torch needed); ``.npz`` with
    ``allow_pickle=False``. α: the argument ``alpha`` if given, else the file's
    ``"alpha"`` (safetensors metadata, or a scalar entry of the ``.npz``), else unknown.
    """
    if not isinstance(path, str | Path):
        raise TypeError(f"path={path!r} must be a file path (.safetensors or .npz)")
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"model file {path} does not exist")
    stored = None
    if path.suffix == ".safetensors":
        from safetensors import safe_open
        from safetensors.numpy import load_file

        try:
            arrays = load_file(str(path))
            with safe_open(str(path), framework="numpy") as fh:
                meta = fh.metadata() or {}
        except Exception as e:  # noqa: BLE001 - the library's own errors are opaque
            raise ValueError(f"{path} is not a readable safetensors file: {e}") from None
        if "alpha" in meta:
            try:
                stored = float(meta["alpha"])
            except ValueError:
                raise ValueError(f"{path}: metadata alpha={meta['alpha']!r} is not a number; pass "
                                 "alpha= to override it") from None
    elif path.suffix == ".npz":
        try:
            with np.load(path, allow_pickle=False) as z:
                arrays = {k: z[k] for k in z.files}
        except ValueError as e:
            raise ValueError(f"{path}: {e} (object arrays need pickle, which is never used)") from None
        if "alpha" in arrays:
            stored = validate.real(f"{path}: entry alpha", arrays.pop("alpha"), scalar=True)
    else:
        raise ValueError(f"path={str(path)!r}: unknown model format {path.suffix!r}; give a .safetensors or "
                         ".npz file of Linear weights (no pickle: .pt/.pth files are not read)")
    a = stored if alpha is None else alpha
    return from_state_dict(arrays, a, source=str(path))


def torch_names(n_layers: int) -> tuple[str, ...]:
    """``("0.weight", "2.weight", ...)``: the names of ``n_layers`` Linear weights in an
    ``nn.Sequential`` that alternates Linear and activation modules."""
    return tuple(f"{2 * i}.weight" for i in range(n_layers))


@precise
def save_model(params: Params, path, *, alpha=None, metadata: Mapping | None = None) -> Path:
    """Write bias-free ``params`` to ``.safetensors`` (metadata: ``alpha`` and
    ``metadata``, strings) or ``.npz`` (``alpha`` as a scalar entry), names
    :func:`torch_names`, float64. No pickle."""
    check_net(params)
    if has_bias(params):
        raise ValueError("params: save_model writes bias-free nets only (drop b)")
    if not all(isinstance(layer, Layer) for layer in params):
        raise ValueError("params: save_model writes dense layers only so far; a conv net (biasfree.Conv, "
                         "PooledDense) cannot be saved yet: keep its kernels with numpy.savez")
    if not isinstance(path, str | Path):
        raise TypeError(f"path={path!r} must be a file path ending in .safetensors or .npz")
    if alpha is not None:
        alpha = validate.slope(alpha)
    if metadata is not None and not isinstance(metadata, Mapping):
        raise TypeError(f"metadata must be a mapping of names to strings, got {type(metadata).__name__}")
    path = Path(path)
    arrays = {n: np.ascontiguousarray(np.asarray(layer.W, dtype=np.float64))
              for n, layer in zip(torch_names(len(params)), params, strict=True)}
    meta = {str(k): str(v) for k, v in (metadata or {}).items()}
    if alpha is not None:
        meta["alpha"] = repr(float(alpha))
    from ..store import atomic_write

    if path.suffix == ".safetensors":
        from safetensors.numpy import save

        blob = save(arrays, metadata=meta or None)
        atomic_write(path, lambda fh: fh.write(blob))
    elif path.suffix == ".npz":
        extra = {} if alpha is None else {"alpha": np.asarray(float(alpha))}
        atomic_write(path, lambda fh: np.savez(fh, **arrays, **extra))
    else:
        raise ValueError(f"path={str(path)!r}: choose a .safetensors or .npz file name")
    return path


@precise
def as_model(model, alpha=None) -> Model:
    """Any supported model as a :class:`Model`: a Model, a params tuple, a torch
    ``nn.Sequential``, an ``eqx.nn.MLP``, or a path to a weight file. ``alpha``, if
    given, must agree with the slope the model states (or fills it in)."""
    if alpha is not None:
        alpha = validate.slope(alpha)
    if isinstance(model, Model):
        m = model
    elif isinstance(model, str | Path):
        m = load_model(model, alpha)
    elif isinstance(model, tuple) and model and all(isinstance(layer, Layer) for layer in model):
        m = Model(model, None if alpha is None else float(alpha), "params")
    elif type(model).__module__.startswith("torch"):
        m = from_torch(model)
    elif type(model).__name__ == "MLP" and type(model).__module__.startswith("equinox"):
        m = from_equinox(model)
    else:
        raise TypeError(
            f"cannot read a model of type {type(model).__name__}: give a torch.nn.Sequential, an "
            "equinox.nn.MLP, a .safetensors/.npz path, or biasfree params (biasfree.from_arrays)")
    if alpha is not None:
        alpha = validate.slope(alpha)
        if m.alpha is not None and abs(m.alpha - float(alpha)) > 1e-12:
            raise ValueError(f"alpha={alpha} contradicts the model's own slope α = {m.alpha:g} "
                             f"({m.source}); leave alpha out")
        if m.alpha is None:
            m = Model(m.params, float(alpha), m.source, m.names)
    return m
