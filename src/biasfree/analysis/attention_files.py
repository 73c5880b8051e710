"""Linear-attention models and their data from files, as ``biasfree analyse`` (the command line)
reads them (docs/cli.md "Attention models"): a weight file whose names are an attention layer's
(:func:`~.attention_import.attention_file`) is read as linear attention in
:mod:`.attention_import`'s layout, any other as a dense net first, else as attention; sequences are flat rows
(:data:`SEQUENCES`). A file in neither weight layout is refused naming both.
"""

from __future__ import annotations

from pathlib import Path

from .attention_import import SEQUENCES, attention_file, attention_from_state_dict, file_arrays
from .model import SUPPORTED, UnsupportedModelError


def load_attention(path, dense_refusal: str = ""):
    """A linear-attention layer from a ``.safetensors`` or ``.npz`` file of its weights (what
    ``safetensors.torch.save_file(module.state_dict(), path)`` writes for a module in
    :mod:`.attention_import`'s layout; read with numpy, no pickle). A file in neither that
    layout nor the dense one (``dense_refusal``, the dense reader's message) is refused,
    naming both."""
    path = Path(path)
    arrays = file_arrays(path)
    try:
        return attention_from_state_dict(arrays, source=str(path))
    except UnsupportedModelError as e:
        attention = str(e)
    names = ", ".join(sorted(arrays)[:6]) + (", …" if len(arrays) > 6 else "")
    raise UnsupportedModelError(f"{path} ({names}) is read in two layouts and fits neither: as a dense net "
                                f"({dense_refusal or SUPPORTED}); as {attention.removeprefix(f'{path}: ')}")


def model_file(path, alpha: float | None, in_shape: str | None):
    """``biasfree analyse``'s MODEL (or ``--init``): a dense net's weights
    (:func:`~.model_files.load_model`), else a linear-attention layer's (:func:`load_attention`),
    for which ``--alpha`` and ``--in-shape`` (``alpha``, ``in_shape``) do not apply and are refused."""
    from .model_files import conv_spec, load_model

    if attention_file(path):  # by its names: a one-head authors' file also fits a dense net
        layer = load_attention(path)
    else:
        try:
            return load_model(path, alpha, **conv_spec(in_shape))
        except UnsupportedModelError as dense:
            layer = load_attention(path, str(dense))
    for flag, value in (("--alpha", alpha), ("--in-shape", in_shape)):
        if value is not None:
            raise ValueError(f"{flag} does not apply to {path}, a linear-attention model (no activation, no "
                             f"image input): leave {flag} out")
    return layer


__all__ = ["SEQUENCES", "load_attention", "model_file"]
