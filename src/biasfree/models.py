"""Models from outside: PyTorch, equinox and weight files in and out (no pickle).

The public home of :mod:`biasfree.analysis.interop` (re-exported). Each adapter returns
a :class:`Model` (a bias-free net, its slope α and where it came from), or raises
:class:`UnsupportedModelError` naming the layer it cannot take: :func:`from_torch` (an
``nn.Sequential`` of dense or conv layers), :func:`from_equinox` (an ``eqx.nn.MLP``),
:func:`from_state_dict` (names -> arrays), :func:`load_model` and :func:`save_model`
(``.safetensors`` or ``.npz`` files); ``analyse`` runs a torch or equinox model on the data
to verify its reading (:mod:`biasfree.analysis.verify`); linear attention:
:func:`~biasfree.analysis.attention_import.attention_from_torch` and
:func:`~biasfree.analysis.attention_import.attention_from_state_dict` (docs/verdict.md "Attention models")::

    import biasfree as bf
    model = bf.load_model("net.safetensors")
    bf.analyse(model, data)
"""

from .analysis.attention_import import attention_from_state_dict as attention_from_state_dict
from .analysis.attention_import import attention_from_torch as attention_from_torch
from .analysis.interop import Model as Model
from .analysis.interop import UnsupportedModelError as UnsupportedModelError
from .analysis.interop import from_equinox as from_equinox
from .analysis.interop import from_state_dict as from_state_dict
from .analysis.interop import from_torch as from_torch
from .analysis.interop import load_model as load_model
from .analysis.interop import save_model as save_model

__all__ = ["Model", "UnsupportedModelError", "attention_from_state_dict", "attention_from_torch",
           "from_equinox", "from_state_dict", "from_torch", "load_model",
           "save_model"]
