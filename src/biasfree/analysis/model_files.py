"""Weight files and state dicts: names -> arrays in PyTorch's naming, in and out, no pickle.

:func:`from_state_dict` and :func:`load_model` read a bias-free net from names -> arrays
(``"0.weight"``, ``"2.weight"``, ...: dense and torch ``Conv1d``/``Conv2d`` weights, mapped
as :func:`from_state_dict` says; a ``.safetensors`` file read with ``safetensors.numpy``, or
an ``.npz`` with ``allow_pickle=False``); :func:`save_model` writes one, with every layer's
type, ``in_shape`` and ``padding`` as JSON under :data:`LAYERS_KEY` (the safetensors
metadata, or a string entry of the ``.npz``), so conv nets round-trip bitwise, and the
slope α under ``"alpha"``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path

import jax.numpy as jnp
import numpy as np

from .. import _validate as validate
from ..core.conv import from_spec, spatial_shape
from ..core.inits import from_arrays
from ..core.layers import Params, is_dense, takes_net
from ..core.nets import has_bias
from ..core.precision import precise
from ..store import atomic_write
from .model import Model, refuse

LAYERS_KEY = "biasfree.layers"
"""Metadata key of the layer types of a saved conv net: a JSON list of
``{"type": "Conv", "in_shape": [H, W], "padding": "same"}``, ``{"type": "PooledDense",
"in_shape": [...]}`` or ``{"type": "Layer"}``, one per weight in name order."""


def _natural(name: str):
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]


def _entries(mapping: Mapping, convs: bool) -> list[tuple[str, np.ndarray]]:
    """The weights of ``mapping`` in natural name order; everything else refused."""
    entries = []
    for name in sorted(mapping, key=_natural):
        A = validate.finite_array(f"mapping[{name!r}]", mapping[name], nonempty=False)
        leaf = name.rsplit(".", 1)[-1]
        if leaf == "bias" or leaf.endswith("_bias"):
            if not np.any(A):  # exactly 0: the layer computes W x, as from_torch reads it (docs/verdict.md)
                continue
            layer = name.rsplit(".", 1)[0] if "." in name else name
            raise refuse(f"layer {layer} ('{name}')",
                         f"has a nonzero bias (max |b| = {np.max(np.abs(A)):.3g})",
                         "Build the layers with bias=False (biases that are exactly 0 are dropped).")
        if leaf == "weight" or re.fullmatch(r"W_?\d*", leaf) or leaf.endswith("_weight"):
            if A.ndim > 4 or (A.ndim > 2 and not convs):
                raise refuse(f"'{name}' {A.shape}", f"a {A.ndim}-axis weight is a convolution",
                             "To read a Conv1d/Conv2d (bias=False) state dict give in_shape=(length,) or "
                             "(H, W), the input's spatial shape (and padding)." if A.ndim <= 4 else "")
            if A.ndim < 2:
                raise refuse(f"'{name}' {A.shape}", "a 1-axis weight belongs to a normalisation "
                             "layer (BatchNorm, LayerNorm)",
                             "Fold it into the conv first: biasfree.from_torch(model, in_shape=...) does.")
            entries.append((name, A))
        else:
            raise refuse(f"'{name}' {A.shape}", "is not a Linear weight",
                         "Keep only the '<layer>.weight' entries of bias-free Linear layers.")
    return entries


def _torch_specs(entries, in_shape, padding, source) -> list[dict]:
    """Layer specs of a torch conv state dict (:func:`from_state_dict`): spatial shapes propagated."""
    spatial = spatial_shape(in_shape)
    n_conv = sum(A.ndim > 2 for _, A in entries)
    if n_conv == 0:
        raise ValueError(f"{source}: in_shape={in_shape!r} is the spatial shape of a conv net's input, but "
                         "it has no convolution (only Linear weights): leave it out")
    if not isinstance(padding, str | list | tuple):
        raise TypeError(f"padding={padding!r}: give 'same' or 'valid' (torch's padding=(k-1)//2 for "
                        "an odd kernel k is 'same', padding=0 is 'valid'), or one per convolution")
    pads = [padding] * n_conv if isinstance(padding, str) else list(padding)
    if len(pads) != n_conv:
        raise ValueError(f"padding={padding!r}: give one padding ('same' or 'valid') or one per "
                         f"convolution ({n_conv})")
    specs, flat = [], False
    for name, A in entries:
        if A.ndim == 2:
            specs.append({"type": "Layer"})
            flat = True
            continue
        if flat:
            raise refuse(f"'{name}' {A.shape}", "a convolution after a Linear layer",
                         "Only Conv layers, then Linear layers, can be read from a state dict.")
        if A.ndim - 2 != len(spatial):
            raise ValueError(f"{source}: '{name}' {A.shape} is a {A.ndim - 2}-D kernel but in_shape="
                             f"{spatial} has {len(spatial)} axes; give in_shape with {A.ndim - 2}")
        pad = validate.choice("padding", pads.pop(0), ("same", "valid"))
        specs.append({"type": "Conv", "in_shape": list(spatial), "padding": pad})
        if pad == "valid":
            spatial = tuple(n - k + 1 for n, k in zip(spatial, A.shape[2:], strict=True))
            if min(spatial) < 1:
                raise ValueError(f"{source}: '{name}' {A.shape}: its kernel is larger than its input with "
                                 "padding 'valid'; check in_shape and padding")
    return specs


def build_layer(name: str, A, spec: dict, source: str):
    """The layer of weight ``name`` (array ``A``) that ``spec``, an entry of :data:`LAYERS_KEY`, describes."""
    try:
        return from_spec(spec, jnp.asarray(A, dtype=float))
    except ValueError as e:
        raise ValueError(f"{source}: '{name}' in {LAYERS_KEY}: {e}") from None


def from_state_dict(mapping: Mapping, alpha=None, *, source: str = "state dict", in_shape=None,
                    padding="same", layers=None, precision: str | None = None) -> Model:
    """A :class:`~.model.Model` from names -> arrays in PyTorch's naming, slope ``alpha``.

    Weights are the entries whose names end in ``weight`` (``"0.weight"``,
    ``"net.2.weight"``, ``"fc1.weight"``, ...), taken in natural order of their names
    (so ``"10.weight"`` comes after ``"2.weight"``): 2-axis ones (n_out, n_in) as in
    ``torch.nn.Linear``; with ``in_shape`` (the input's spatial shape, (length,) or (H, W))
    also 3/4-axis ``Conv1d``/``Conv2d`` kernels with ``padding`` ("same"/"valid", one or
    one per conv), the first Linear after them reading their output flattened channel-major
    (``nn.Flatten``). ``layers``:
    the layer specs of :data:`LAYERS_KEY` (as :func:`load_model` reads them). Shapes must
    chain. Refused, naming the entry: a bias (``*.bias``), a conv kernel without
    ``in_shape``, and any other entry (e.g. a normalisation layer's ``running_mean``).
    ``alpha`` (0 ReLU, 1 linear) is not stored in a state dict: give it (None leaves it
    unknown). Runs at ``precision`` "float64" (default) or "float32"
    (:mod:`biasfree.core.precision`).
    """
    if not isinstance(mapping, Mapping):
        raise TypeError(f"from_state_dict takes a mapping of names to arrays, got {type(mapping).__name__}")
    bad = [name for name in mapping if not isinstance(name, str)]  # before JAX sorts the keys to cast
    if bad:
        raise TypeError(f"mapping keys must be weight names such as '0.weight', got {bad[0]!r}")
    return _from_state_dict(mapping, alpha, source, in_shape, padding, layers, precision=precision)


@precise
def _from_state_dict(mapping, alpha, source, in_shape, padding, layers) -> Model:
    entries = _entries(mapping, convs=in_shape is not None or layers is not None)
    if len(entries) < 2:
        raise refuse(source, f"{len(entries)} weight matrices", "Give at least two.")
    if layers is None and in_shape is not None:
        layers = _torch_specs(entries, in_shape, padding, source)
    if layers is not None and len(layers) != len(entries):
        raise ValueError(f"{source}: {LAYERS_KEY} lists {len(layers)} layers for {len(entries)} weights")
    specs = [{"type": "Layer"}] * len(entries) if layers is None else layers
    built = [build_layer(n, A, s, source) for (n, A), s in zip(entries, specs, strict=True)]
    for (n0, A0), (n1, A1), l0, l1 in zip(entries, entries[1:], built, built[1:], strict=False):
        if l1.n_in != l0.n_out:
            order = ", ".join(f"{n} {A.shape}" for n, A in entries)
            raise ValueError(
                f"{source}: '{n1}' {A1.shape} does not take the {l0.n_out} outputs of '{n0}' "
                f"{A0.shape}; weights in name order: {order}. Name them in forward order "
                "('0.weight', '1.weight', ...) with shapes (n_out, n_in)"
                + ("" if layers is None else ", and check in_shape and padding (a pooled readout "
                   "cannot be told from a state dict: use biasfree.from_torch)"))
    if alpha is not None:
        alpha = validate.slope(alpha)
    dense = is_dense(built)
    params = from_arrays([A for _, A in entries]) if dense else tuple(built)
    return Model(params, alpha, source, tuple(n for n, _ in entries))


@precise
def load_model(path, alpha=None, *, in_shape=None, padding="same") -> Model:
    """A :class:`~.model.Model` from a ``.safetensors`` or ``.npz`` file of weights (module doc).

    Names as in :func:`from_state_dict` (e.g. ``safetensors.torch.save_file(
    model.state_dict(), path)`` of a bias-free ``nn.Sequential``; a conv net's then needs
    ``in_shape`` and ``padding``; a file from :func:`save_model` carries its layer types).
    ``.safetensors`` is read with ``safetensors.numpy`` (no torch needed); ``.npz`` with
    ``allow_pickle=False``. α: the argument ``alpha`` if given, else the file's ``"alpha"``
    (safetensors metadata, or a scalar entry of the ``.npz``), else unknown.
    """
    if not isinstance(path, str | Path):
        raise TypeError(f"path={path!r} must be a file path (.safetensors or .npz)")
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"model file {path} does not exist")
    stored, layers = None, None
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
        layers = meta.get(LAYERS_KEY)
    elif path.suffix == ".npz":
        validate.npz_archive(path)
        try:
            with np.load(path, allow_pickle=False) as z:
                arrays = {k: z[k] for k in z.files}
        except ValueError as e:
            raise ValueError(f"{path}: {e} (object arrays need pickle, which is never used)") from None
        if "alpha" in arrays:
            stored = validate.real(f"{path}: entry alpha", arrays.pop("alpha"), scalar=True)
        if LAYERS_KEY in arrays:
            layers = str(arrays.pop(LAYERS_KEY))
    else:
        raise ValueError(f"path={str(path)!r}: unknown model format {path.suffix!r}; give a .safetensors or "
                         ".npz file of Linear weights (no pickle: .pt/.pth files are not read)")
    if layers is not None:
        try:
            layers = json.loads(layers)
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}: {LAYERS_KEY} is not JSON ({e})") from None
        if not isinstance(layers, list) or not all(isinstance(spec, dict) for spec in layers):
            raise ValueError(f"{path}: {LAYERS_KEY} must be a JSON list of layer objects such as "
                             '{"type": "Layer"}, one per weight; save the net with biasfree.save_model')
        if in_shape is not None:
            raise ValueError(f"{path} stores its layers' shapes ({LAYERS_KEY}): leave in_shape out")
    a = stored if alpha is None else alpha
    return from_state_dict(arrays, a, source=str(path), in_shape=in_shape, padding=padding, layers=layers)


def conv_spec(text: str | None) -> dict:
    """``"H,W"``, ``"n"`` or either with ``",same"``/``",valid"`` (the command line's
    ``--in-shape``) as :func:`load_model`'s ``in_shape`` and ``padding``; None: ``{}``."""
    if text is None:
        return {}
    *dims, last = [t.strip() for t in str(text).split(",")]
    padding = last if last in ("same", "valid") else "same"
    dims = dims if last in ("same", "valid") else [*dims, last]
    if not dims or len(dims) > 2 or not all(t.isdigit() and int(t) > 0 for t in dims):
        raise ValueError(f"--in-shape {text!r}: give the input's spatial shape, e.g. 8,8 or 16, optionally "
                         "with the convolutions' padding, e.g. 8,8,valid (default same)")
    return {"in_shape": tuple(int(t) for t in dims), "padding": padding}


def torch_names(n_layers: int) -> tuple[str, ...]:
    """``("0.weight", "2.weight", ...)``: the names of ``n_layers`` Linear weights in an
    ``nn.Sequential`` that alternates Linear and activation modules."""
    return tuple(f"{2 * i}.weight" for i in range(n_layers))


@precise
@takes_net()
def save_model(params: Params, path, *, alpha=None, metadata: Mapping | None = None) -> Path:
    """Write bias-free ``params`` to ``.safetensors`` (metadata: ``alpha`` and
    ``metadata``, strings) or ``.npz`` (``alpha`` as a scalar entry), names
    :func:`torch_names`, float64, no pickle. A net with conv layers also stores each
    layer's type, ``in_shape`` and ``padding`` under :data:`LAYERS_KEY` (module doc);
    :func:`load_model` reads it back bitwise."""
    if has_bias(params):
        raise ValueError("params: save_model writes bias-free nets only (drop b)")
    specs = [layer.spec() for layer in params]
    if None in specs:
        kinds = sorted({layer.kind for layer, s in zip(params, specs, strict=True) if s is None})
        raise ValueError(f"params: save_model writes Layer, Conv and PooledDense layers, not {kinds}")
    if any(layer.batch_ndim for layer in params):
        raise ValueError("params: save_model writes one net, not an ensemble (leading member axes): "
                         "save each member")
    if not isinstance(path, str | Path):
        raise TypeError(f"path={path!r} must be a file path ending in .safetensors or .npz")
    if alpha is not None:
        alpha = validate.slope(alpha)
    if metadata is not None and not isinstance(metadata, Mapping):
        raise TypeError(f"metadata must be a mapping of names to strings, got {type(metadata).__name__}")
    path = Path(path)
    if path.suffix not in (".safetensors", ".npz"):
        raise ValueError(f"path={str(path)!r}: choose a .safetensors or .npz file name")
    validate.writable_folder("path.parent", path.parent)  # before any work (the write creates it)
    arrays = {n: np.ascontiguousarray(np.asarray(layer.weight, dtype=np.float64))
              for n, layer in zip(torch_names(len(params)), params, strict=True)}
    meta = {str(k): str(v) for k, v in (metadata or {}).items()}
    if alpha is not None:
        meta["alpha"] = repr(float(alpha))
    if not is_dense(params):
        meta[LAYERS_KEY] = json.dumps(specs)
    if path.suffix == ".safetensors":
        from safetensors.numpy import save

        blob = save(arrays, metadata=meta or None)
        atomic_write(path, lambda fh: fh.write(blob))
    else:
        extra = {} if alpha is None else {"alpha": np.asarray(float(alpha))}
        if LAYERS_KEY in meta:
            extra[LAYERS_KEY] = np.asarray(meta[LAYERS_KEY])
        atomic_write(path, lambda fh: np.savez(fh, **arrays, **extra))
    return path
