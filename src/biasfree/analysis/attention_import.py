"""Linear-attention models from outside: a torch module or names -> arrays, as the package's
:class:`~biasfree.core.attention.MergedAttention` or :class:`~biasfree.core.attention.SeparateAttention`
(docs/theory.md §10.1; docs/verdict.md "Attention models").

The layout read (every weight per head, one leading head axis H; a single head may drop it):

- ``W_V`` (H, D+1, D+1): value weights, ``v = W_V e`` as a torch ``Linear(D+1, D+1).weight``;
  the prediction reads the label row ``W_V[h, D, :]`` (the others are never read);
- merged: ``W_KQ`` (H, D+1, D+1), the score of context token e_n for the query e_q being
  ``e_nᵀ W_KQ[h] e_q``;
- separate: ``W_K``, ``W_Q`` (H, r, D+1), keys ``K e`` and queries ``Q e`` as torch
  ``Linear(D+1, r).weight``, score ``(K e_n)·(Q e_q)``, so ``W_KQ[h] = W_K[h]ᵀ W_Q[h]``.

Names match by their last dot-separated part, case-insensitively, with or without ``W_``
(``attn.W_KQ``, ``kq``, ``V``); anything else in the state dict is refused, naming it. The
prediction is ``ŷ = Σ_h (1/N) Σ_n (W_V[h] e_n)[D] (e_nᵀ W_KQ[h] e_q)`` on sequences of N
context tokens ``e = (x; y)`` and a query ``(x_q; 0)``, read at the query's label slot. Softmax
attention (``nn.MultiheadAttention``, any ``nn.Softmax``) is refused: its small-init limit is
not linear attention (docs/theory.md §10.5), so it has no exact twin here.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping

import jax
import numpy as np

from .. import _validate as validate
from ..core.attention import MergedAttention, SeparateAttention
from .model import UnsupportedModelError

LAYOUT = ("linear attention: W_V (H, D+1, D+1) with W_KQ (H, D+1, D+1) (merged) or W_K, W_Q "
          "(H, r, D+1) (separate), read at the query's label slot (docs/verdict.md 'Attention models')")
"""What :func:`attention_from_state_dict` and :func:`attention_from_torch` read, as every refusal says."""
_ROLES = {"v": "V", "kq": "KQ", "k": "K", "q": "Q"}
SOFTMAX_FIX = ("softmax attention is not supported: only linear attention has an exact linear twin "
               "(its small init does not make softmax attention linear, docs/theory.md §10.5); "
               f"give a linear-attention module in the layout {LAYOUT}")


def _role(name: str) -> str | None:
    leaf = name.rsplit(".", 1)[-1].lower()
    return _ROLES.get(leaf.removeprefix("w_"))


def attention_from_state_dict(mapping: Mapping, n_ctx: int = 1, source: str = "state dict"):
    """The attention layer of names -> arrays in the module doc's layout (float64), context
    length ``n_ctx`` (``analyse`` reads N from the data's width when it is left at 1)."""
    if not isinstance(mapping, Mapping):
        raise TypeError(f"mapping must be names -> arrays, got {type(mapping).__name__}")
    arrays: dict[str, np.ndarray] = {}
    for name, value in mapping.items():
        role = _role(str(name))
        if role is None:
            raise UnsupportedModelError(f"{source}: '{name}' is not an attention weight. "
                                        f"Supported: {LAYOUT}.")
        if role in arrays:
            raise UnsupportedModelError(f"{source}: two weights read as {role} ('{name}' is the second)")
        A = validate.finite_array(f"{source}['{name}']", np.asarray(value, dtype=float))
        arrays[role] = A[None] if A.ndim == 2 else A
    roles = set(arrays)
    if roles not in ({"V", "KQ"}, {"V", "K", "Q"}):
        raise UnsupportedModelError(f"{source}: found {sorted(roles)}; need V with KQ (merged) or with K and "
                                    f"Q (separate). Supported: {LAYOUT}.")
    n_ctx = validate.integer("n_ctx", n_ctx, 1)
    put = {k: jax.device_put(a) for k, a in arrays.items()}
    layer = (MergedAttention(put["V"], put["KQ"], n_ctx=n_ctx) if "KQ" in put
             else SeparateAttention(put["V"], put["K"], put["Q"], n_ctx=n_ctx))
    try:
        layer.check(source)
    except ValueError as e:
        raise UnsupportedModelError(f"{e}. Supported: {LAYOUT}.") from None
    return layer


def attention_from_torch(module, n_ctx: int = 1):
    """A torch linear-attention module (its ``state_dict()`` in the module doc's layout) as the
    package's attention layer, weights in float64. Refuses softmax attention, naming the fix."""
    import torch.nn as nn

    if not isinstance(module, nn.Module):
        raise TypeError(f"attention_from_torch takes a torch.nn.Module, got {type(module).__name__}")
    for name, sub in module.named_modules():
        if isinstance(sub, nn.MultiheadAttention | nn.Softmax):
            raise UnsupportedModelError(f"{name or 'the module'} ({type(sub).__name__}): {SOFTMAX_FIX}")
    state = {k: t.detach().cpu().double().numpy() for k, t in module.state_dict().items()}
    return attention_from_state_dict(state, n_ctx, f"torch:{type(module).__name__}")


def is_attention_model(model) -> bool:
    """An attention layer, a one-layer tuple of one, or a torch module that is not an
    ``nn.Sequential`` (those are read by :func:`~.torch_import.from_torch`) holding weights in
    the layout's names, or softmax attention (refused by :func:`attention_from_torch`)."""
    if isinstance(model, MergedAttention | SeparateAttention):
        return True
    if isinstance(model, tuple) and len(model) == 1:
        return isinstance(model[0], MergedAttention | SeparateAttention)
    if "torch" not in sys.modules:  # not imported: the model is no torch module (and no import cost)
        return False
    import torch.nn as nn

    if not isinstance(model, nn.Module) or isinstance(model, nn.Sequential):
        return False
    if any(isinstance(m, nn.MultiheadAttention) for m in model.modules()):
        return True
    names = [_role(k) for k in model.state_dict()]
    return bool(names) and "V" in names and all(r is not None for r in names)


def as_attention(model):
    """The attention layer of what :func:`is_attention_model` accepts."""
    if isinstance(model, tuple):
        model = model[0]
    if isinstance(model, MergedAttention | SeparateAttention):
        model.check("model")
        return model
    return attention_from_torch(model)
