"""Your own model: PyTorch, equinox and weight files in, as a bias-free network (no pickle).

Every adapter returns a :class:`~.model.Model` (:mod:`.model`: the net family it supports,
:data:`~.model.SUPPORTED`, its convention, and the refusal naming the layer of anything
else). The adapters: :func:`~.torch_import.from_torch` (dense and conv ``nn.Sequential``
stacks, :mod:`.torch_import`), :func:`from_equinox` (here), :func:`~.model_files.from_state_dict`,
:func:`~.model_files.load_model` and :func:`~.model_files.save_model` (names -> arrays and
weight files, :mod:`.model_files`), and :func:`as_model`, any of them by the input's type.

The adapters read a module's layers; :func:`~biasfree.analyse` runs a live module (torch or
equinox, given as it is or as the Model read from it, its ``origin``) on the data and refuses
a reading its forward does not reproduce to round-off (:mod:`.verify`). A file or a state
dict has nothing to run: only its shapes are checked.
"""

from __future__ import annotations

import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from .. import _validate as validate
from ..core.inits import from_arrays
from ..core.layers import Params, check_net, is_net
from ..core.precision import precise
from .model import SUPPORTED, Model, UnsupportedModelError, one_slope, refuse
from .model_files import conv_spec, from_state_dict, load_model, save_model, torch_names
from .torch_import import from_torch
from .verify import live

__all__ = ["SUPPORTED", "Model", "UnsupportedModelError", "as_model", "conv_spec", "from_equinox",
           "from_state_dict", "from_torch", "load_model", "save_model", "torch_names"]


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
        raise refuse(where, f"activation {getattr(act, '__name__', act)!r} could not be "
                      f"evaluated elementwise ({type(e).__name__})") from None
    alpha = float(-vals[_PROBE == -1.0][0].mean()) + 0.0  # + 0.0: no "-0" for ReLU
    expected = np.maximum(_PROBE, alpha * _PROBE)[:, None]
    if not np.allclose(vals, expected, rtol=1e-6, atol=0.0):
        name = getattr(act, "__name__", None) or getattr(getattr(act, "func", None), "__name__", None)
        raise refuse(where, f"activation {name or type(act).__name__} is not max(z, α z)")
    if not 0.0 <= alpha <= 1.0:
        raise refuse(where, f"activation is a leaky ReLU with slope {alpha:g}, outside [0, 1]")
    return alpha


@precise
def from_equinox(mlp) -> Model:
    """An ``eqx.nn.MLP`` with ``use_bias=False``, ``use_final_bias=False`` as a
    :class:`Model`, weights in float64.

    The activation is read by evaluating it: ``jax.nn.relu`` (α = 0),
    ``jax.nn.leaky_relu`` (α = 0.01, or ``functools.partial(jax.nn.leaky_relu,
    negative_slope=a)``), the identity (α = 1), or any function equal to
    ``max(z, α z)``. The final activation must be the identity. Anything else is
    refused, naming the layer. This reads the layers and probes the activation; a subclass
    whose ``__call__`` does something else is caught when ``analyse`` runs the module on the
    data (the Model keeps it as ``origin``; :mod:`~biasfree.analysis.verify`).
    """
    import equinox as eqx

    if not isinstance(mlp, eqx.nn.MLP):
        raise TypeError(f"from_equinox takes an equinox.nn.MLP, got {type(mlp).__name__}; "
                        "for other models give the weight matrices to biasfree.from_arrays")
    if mlp.depth < 1:
        raise refuse("equinox MLP", "depth 0 (a single Linear layer)", "Give depth >= 1.")

    def member(tree, i):  # entry i of the arrays stacked on a leading axis (scan, per-layer activations)
        return jax.tree_util.tree_map(lambda x: x[i] if eqx.is_array(x) else x, tree)

    layers = list(mlp.layers)
    if mlp.scan:  # (input, stacked hidden, output)
        layers = [layers[0]] + [member(layers[1], i) for i in range(mlp.depth - 1)] + [layers[2]]
    weights = []
    for i, lin in enumerate(layers):
        if getattr(lin, "bias", None) is not None and np.any(np.asarray(lin.bias)):  # exactly 0: dropped
            flag = "use_final_bias" if i == len(layers) - 1 else "use_bias"
            raise refuse(f"layers[{i}] (Linear)", "has a bias", f"Build the MLP with {flag}=False.")
        W = np.asarray(lin.weight, dtype=float)
        weights.append(W if W.ndim == 2 else W.reshape(-1, 1))
    final = mlp.final_activation
    if mlp.out_size == "scalar":
        weights[-1] = weights[-1].reshape(1, -1)
        final = eqx.filter_vmap(lambda: mlp.final_activation, axis_size=1)()
    wheres = [f"activation after layers[{i}]" for i in range(mlp.depth)]
    slopes = [(w, _probe_slope(member(mlp.activation, i), int(mlp.width_size), w))
              for i, w in enumerate(wheres)]
    if _probe_slope(final, weights[-1].shape[0], "final_activation") != 1.0:
        raise refuse("final_activation", "is not the identity", "The output layer must be linear.")
    alpha = one_slope(slopes, "equinox MLP")
    return Model(from_arrays(weights), alpha, f"equinox:{type(mlp).__name__}",
                 tuple(f"layers[{i}].weight" for i in range(len(weights))), mlp)


def _model(params: Params, alpha: float | None, source: str = "", names: tuple[str, ...] = (),
           origin: object = None) -> Model:
    """A :class:`Model` of a net and a slope its caller has checked (``Model(...)`` checks them)."""
    m = object.__new__(Model)
    for name, value in (("params", params), ("alpha", alpha), ("source", source), ("names", names),
                        ("origin", origin)):
        object.__setattr__(m, name, value)
    return m


@precise
def as_model(model, alpha=None) -> Model:
    """Any supported model as a :class:`Model`: a Model, a params tuple, a torch module
    (:func:`from_torch`), an ``eqx.nn.MLP`` (or a subclass), or a path to a weight file.
    ``alpha``, if given, must agree with the slope the model states (or fills it in). A live
    module is read, not run: :func:`~.verify.check_reading` runs it on data."""
    if alpha is not None:
        alpha = validate.slope(alpha)
    if isinstance(model, Model):
        m = model
    elif isinstance(model, str | Path):
        m = load_model(model, alpha)
    elif isinstance(model, tuple) and is_net(model):
        check_net(model)  # α was checked above: Model(...) would check it again
        m = _model(model, alpha, "params")
    elif live(model) == "torch":
        m = from_torch(model)  # a conv net needs in_shape: from_torch's error says so
    elif live(model) == "equinox" and isinstance(model, sys.modules["equinox"].nn.MLP):
        m = from_equinox(model)
    else:
        raise TypeError(
            f"cannot read a model of type {type(model).__name__}: give a torch module (an nn.Sequential of "
            "layers), an equinox.nn.MLP, a .safetensors/.npz path, or biasfree params (biasfree.from_arrays)")
    if alpha is not None and m.alpha is not None and abs(m.alpha - alpha) > 1e-12:
        raise ValueError(f"alpha={alpha} contradicts the model's own slope α = {m.alpha:g} "
                         f"({m.source}); leave alpha out")
    return m if m.alpha is not None or alpha is None else _model(m.params, alpha, m.source, m.names, m.origin)
