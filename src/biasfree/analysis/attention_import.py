"""Linear-attention models from outside: a torch module or names -> arrays, as the package's
:class:`~biasfree.core.attention.MergedAttention` or :class:`~biasfree.core.attention.SeparateAttention`
(docs/theory.md §10.1; docs/verdict.md "Attention models"), a torch module verified by running it.

Two layouts are read (every weight per head):

- *the package's*: ``W_V`` (H, D+1, D+1) value weights (``v = W_V e``, as a torch
  ``Linear(D+1, D+1).weight``; the prediction reads the label row ``W_V[h, D, :]``) with merged
  ``W_KQ`` (H, D+1, D+1), score ``e_nᵀ W_KQ[h] e_q``, or separate ``W_K``, ``W_Q`` (H, r, D+1),
  score ``(W_K e_n)·(W_Q e_q)``; a single head may drop H; the sum runs over the N context tokens;
- *the authors'* (Zhang, Singh, Latham & Saxe, ICML 2025): ``nn.Linear`` modules without bias,
  ``kq`` and ``value`` (weights (H·(D+1), D+1)) or ``key``, ``query`` (H·r, D+1) and ``value``.
  Their merged score is ``e_qᵀ W_h e_n``, the transpose of ours, so it is read as
  ``W_KQ[h] = W_hᵀ``; their separate score ``(Q e_q)·(K e_n)`` is ours; their sum runs over
  every token, the query's own included (``include_query=True``), and their code normalises it
  by nothing (its default) or by the sequence's N + 1 tokens (``vary_len=True``): a module in
  their layout is read with the normaliser its forward computes (the layer's ``norm``: ``"none"``,
  ``"n+1"``, or ``"n"`` for a module dividing by N), their default tried first.

Names match by their last dot-separated part (the package's) or the part before ``.weight``
(an ``nn.Linear``), case-insensitively, with or without ``W_``: ``v``/``value``, ``kq``,
``k``/``key``, ``q``/``query``. Anything else in the state dict is refused, naming it; an
exactly zero bias is dropped. The prediction is
``ŷ = Σ_h (1/N) Σ_n (W_V[h] e_n)[D] (e_nᵀ W_KQ[h] e_q)`` on sequences of N context tokens
``e = (x; y)`` and a query ``(x_q; 0)``, read at the query's label slot (1/c for a layer's other
``norm``, :data:`~biasfree.core.attention.NORMS`).

*Read by running* (:mod:`.attention_run`): the module runs on the data's first
:data:`CHECK_ROWS` sequences (else a seeded Gaussian probe) at its own weights and at generic
ones, and must equal the layer read within float64 round-off; else refused naming the cause.
Softmax attention (``nn.MultiheadAttention``, any ``nn.Softmax``) is refused by type before:
its small-init limit is not linear attention (docs/theory.md §10.5).
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from .. import _validate as validate
from ..core.attention import NORMS, MergedAttention, SeparateAttention
from .attention_run import LAYOUT, agrees, refuse, run_module
from .model import UnsupportedModelError

SEQUENCES = ("flat sequences: X (S, (N+1)(D+1)), row s = (x_1, y_1, …, x_N, y_N, x_q, 0), and Y (S, 1) "
             "the query targets y_q (what biasfree.core.icl_data.in_context_regression writes)")
"""The data layout an attention model is analysed on, as every refusal names it."""
_ROLES = {"v": "V", "value": "V", "kq": "KQ", "k": "K", "key": "K", "q": "Q", "query": "Q"}
SOFTMAX_FIX = ("softmax attention is not supported: only linear attention has an exact linear twin "
               "(its small init does not make softmax attention linear, docs/theory.md §10.5); "
               f"give a linear-attention module in the layout {LAYOUT}")
CHECK_ROWS = 64
"""Sequences the module runs on (the first of the data): the check costs one forward of these."""


def _role(name: str) -> tuple[str | None, bool]:
    """``(role, linear)``: the weight's role and whether it is an ``nn.Linear``'s ``.weight``."""
    parts = str(name).lower().split(".")
    linear = len(parts) > 1 and parts[-1] == "weight" and parts[-2].removeprefix("w_") in _ROLES
    return _ROLES.get((parts[-2] if linear else parts[-1]).removeprefix("w_")), linear


def _is_bias(name: str) -> bool:
    parts = str(name).lower().split(".")
    return len(parts) > 1 and parts[-1] == "bias" and parts[-2].removeprefix("w_") in _ROLES


def attention_from_state_dict(mapping: Mapping, n_ctx: int = 1, source: str = "state dict", *,
                              include_query: bool | None = None, norm: str | None = None):
    """The attention layer of names -> arrays in either layout of the module doc (float64),
    context length ``n_ctx`` (``analyse`` reads N from the data's width), ``include_query``
    and ``norm`` (the normaliser of the context sum, :data:`~biasfree.core.attention.NORMS`) None
    for the layout's own (the package's False and ``"n"``, the authors' True and ``"none"``, their
    code's default). Reads, does not run: :func:`attention_from_torch` also runs the module, and
    reads the authors' normaliser from what it computes."""
    if not isinstance(mapping, Mapping):
        raise TypeError(f"mapping must be names -> arrays, got {type(mapping).__name__}")
    n_ctx = validate.integer("n_ctx", n_ctx, 1)
    if include_query is not None:
        validate.flag("include_query", include_query)
    if norm is not None:
        validate.choice("norm", norm, NORMS)
    arrays: dict[str, np.ndarray] = {}
    linear: set[bool] = set()
    for name, value in mapping.items():
        A = validate.finite_array(f"{source}['{name}']", value).astype(float)
        if _is_bias(name):
            if np.any(A):
                raise UnsupportedModelError(f"{source}: '{name}' is a nonzero bias; linear attention here "
                                            "has none: build the nn.Linear with bias=False")
            continue  # an exactly zero bias computes the bias-free map
        role, lin = _role(name)
        if role is None:
            raise UnsupportedModelError(f"{source}: '{name}' is not an attention weight: drop it from the "
                                        "state dict (a buffer forward needs: register it with "
                                        "persistent=False; the run check still verifies forward). "
                                        f"Supported: {LAYOUT}.")
        if role in arrays:
            raise UnsupportedModelError(f"{source}: two weights read as {role} ('{name}' is the second)")
        arrays[role] = A
        linear.add(lin)
    roles = set(arrays)
    if roles not in ({"V", "KQ"}, {"V", "K", "Q"}):
        raise UnsupportedModelError(f"{source}: found {sorted(roles)}; need V with KQ (merged) or with K and "
                                    f"Q (separate). Supported: {LAYOUT}.")
    if len(linear) > 1:
        raise UnsupportedModelError(f"{source}: some weights are nn.Linear '.weight's and some are not; give "
                                    f"every weight in one layout. Supported: {LAYOUT}.")
    authors = linear == {True}
    if authors:
        arrays = _from_linear(arrays, source)
    else:
        arrays = {k: a[None] if a.ndim == 2 else a for k, a in arrays.items()}
    inc = authors if include_query is None else include_query
    c = ("none" if authors else "n") if norm is None else norm
    put = arrays  # NumPy float64: jax.device_put would truncate to float32 where JAX's x64 is off
    layer = (MergedAttention(put["V"], put["KQ"], n_ctx=n_ctx, include_query=inc, norm=c) if "KQ" in put
             else SeparateAttention(put["V"], put["K"], put["Q"], n_ctx=n_ctx, include_query=inc, norm=c))
    try:
        layer.check(source)
    except ValueError as e:
        raise UnsupportedModelError(f"{e}. Supported: {LAYOUT}.") from None
    return layer


def _from_linear(arrays: dict, source: str) -> dict:
    """The authors' ``nn.Linear`` weights (rows per head stacked) as per-head arrays in the
    package's orientation: ``kq`` (H·(D+1), D+1) -> W_KQ[h] = W_hᵀ (module doc)."""
    V = arrays["V"]
    if V.ndim != 2 or V.shape[0] % V.shape[1]:
        raise UnsupportedModelError(f"{source}: the value weight must be nn.Linear(D+1, H·(D+1)).weight, "
                                    f"(H·(D+1), D+1), got shape {V.shape}. Supported: {LAYOUT}.")
    D1 = V.shape[1]
    H = V.shape[0] // D1
    out = {"V": V.reshape(H, D1, D1)}
    for role in set(arrays) - {"V"}:
        A = arrays[role]
        if A.ndim != 2 or A.shape[1] != D1 or A.shape[0] % H or (role == "KQ" and A.shape[0] != H * D1):
            want = f"({H * D1}, {D1})" if role == "KQ" else f"({H}·r, {D1})"
            raise UnsupportedModelError(f"{source}: the {role} weight must be an nn.Linear weight {want} for "
                                        f"H = {H} heads of D + 1 = {D1}, got shape {A.shape}")
        A = A.reshape(H, A.shape[0] // H, D1)
        out[role] = np.swapaxes(A, 1, 2) if role == "KQ" else A
    return out


def attention_from_torch(module, n_ctx: int | None = None, *, data=None, include_query: bool | None = None,
                         norm: str | None = None):
    """A torch linear-attention module as the package's attention layer, weights in float64:
    its ``state_dict()`` read in either layout of the module doc, then the module run on
    sequences and checked against the reading (:func:`~.attention_run.check_by_running`). ``data``: the
    sequences (a Dataset, or X (S, (N+1)(D+1))) whose first :data:`CHECK_ROWS` it runs on, else
    a seeded Gaussian probe; ``n_ctx`` None reads N from the data's width (1 without data);
    ``include_query`` None: the layout's own; ``norm`` (the normaliser of the context sum,
    :data:`~biasfree.core.attention.NORMS`) None: the package's layout ``"n"``, the authors' the
    one their forward computes (``_verified``). Refuses softmax attention and any module whose
    forward is not the reading, naming the likely cause."""
    X = None if data is None else _sequences(data)
    return _verified(*_read_torch(module, include_query, norm), X, n_ctx)


def _read_torch(module, include_query: bool | None = None, norm: str | None = None):
    """``(module, layer read from its state dict (n_ctx 1), source, norms)``, softmax refused by
    type; ``norms`` the normalisers the run may find (``norm`` if given, the authors' layout any of
    :data:`~biasfree.core.attention.NORMS`, their code's default first, the package's ``"n"``)."""
    import torch.nn as nn

    if not isinstance(module, nn.Module):
        raise TypeError(f"attention_from_torch takes a torch.nn.Module, got {type(module).__name__}")
    for name, sub in module.named_modules():
        if isinstance(sub, nn.MultiheadAttention | nn.Softmax):
            raise UnsupportedModelError(f"{name or 'the module'} ({type(sub).__name__}): {SOFTMAX_FIX}")
    source = f"torch:{type(module).__name__}"
    state = {k: t.detach().cpu().double().numpy() if t.is_floating_point() else t.detach().cpu().numpy()
             for k, t in module.state_dict().items()}
    layer = attention_from_state_dict(state, 1, source, include_query=include_query, norm=norm)
    authors = all(_role(k)[1] for k in state if _role(k)[0])
    norms = (layer.norm,) if norm is not None or not authors else (layer.norm,) + tuple(
        c for c in NORMS if c != layer.norm)
    return module, layer, source, norms


def _generic(module, layer, source: str):
    """``(weights, layer)``: Gaussian weights N(0, 1/(D+1)) (seeded) in place of every attention
    weight of ``module``'s state dict (biases and other entries as they are), and the layer read
    from them: the run check at a generic point of weight space, off the twin's manifold, where
    a transposed key–query or the query's own term cannot hide behind zero blocks."""
    rng = np.random.default_rng(1)
    state = {k: t.detach().cpu().double().numpy() if t.is_floating_point() else t.detach().cpu().numpy()
             for k, t in module.state_dict().items()}
    weights = {k: rng.standard_normal(a.shape) / np.sqrt(layer.d + 1) if _role(k)[0] else a
               for k, a in state.items()}
    read = attention_from_state_dict(weights, layer.n_ctx, source, include_query=layer.include_query,
                                     norm=layer.norm)
    return weights, read


def _verified(module, layer, source: str, norms: tuple, X, n_ctx: int | None = None):
    """``layer`` with its context length (``n_ctx``, else the width of ``X``, else 1) and the
    first normaliser of ``norms`` that ``module``'s forward computes, on ``X``'s first rows (else
    on a probe) and at generic weights (:func:`~.attention_run.check_by_running`); refused,
    naming the cause, if none."""
    if n_ctx is None:
        n = 1 if X is None else sequence_length(layer, X.shape[1])
    else:
        n = validate.integer("n_ctx", n_ctx, 1)
        if X is not None and sequence_length(layer, X.shape[1]) != n:
            raise ValueError(f"data: X holds sequences of {sequence_length(layer, X.shape[1])} context "
                             f"tokens but n_ctx = {n}")
    layer = dataclasses.replace(layer, n_ctx=n)
    X = _probe(layer) if X is None else X[:CHECK_ROWS]
    E = np.asarray(X, float).reshape(len(X), n + 1, layer.d + 1)
    f = run_module(module, E, source)
    readings = [dataclasses.replace(layer, norm=c) for c in norms]
    found = [r for r in readings if agrees(f, r, E, X)]  # the same function at the given weights
    if not found:
        refuse(f, readings[0], E, X, source, norm_found=len(norms) > 1)
    weights, _ = _generic(module, layer, source)
    g = run_module(module, E, source, weights)
    for r in found:  # a normaliser hidden at the given weights (zero blocks) is told apart here
        generic = _generic(module, r, source)[1]
        if agrees(g, generic, E, X):
            return r
    refuse(g, _generic(module, found[0], source)[1], E, X, source, at="at generic weights")


def _sequences(data) -> np.ndarray:
    X = data.X if hasattr(data, "X") and not isinstance(data, np.ndarray) else data
    X = validate.finite_array("data X", X, ndim=2)
    if not np.any(X):
        raise ValueError("data: every sequence is all zeros, so the attention's output and its twin's are 0 "
                         "whatever the weights: give sequences with nonzero tokens (docs/theory.md §10.1)")
    return X


def sequence_length(layer, width: int) -> int:
    """N of flat sequences of ``width`` columns for ``layer``'s tokens of D + 1, refusing a
    width that is not (N + 1)(D + 1) with N ≥ 1 (the message names the model's token size)."""
    D1 = layer.d + 1
    if width % D1 or width // D1 < 2:
        raise ValueError(f"data: X has {width} columns, not (N + 1)(D + 1) for D + 1 = {D1} (the model's "
                         f"token size) and N ≥ 1 context tokens; attention reads {SEQUENCES}")
    return width // D1 - 1


def _probe(layer) -> np.ndarray:
    """:data:`CHECK_ROWS` Gaussian sequences (seeded), the query's label slot 0."""
    E = np.random.default_rng(0).standard_normal((CHECK_ROWS, layer.n_ctx + 1, layer.d + 1))
    E[:, -1, -1] = 0.0
    return E.reshape(CHECK_ROWS, -1)


def _attention_names(names) -> bool:
    """Every name a weight of the layout (or its bias), a value among them with a key–query or a key and
    a query: the names of an attention layer, not of a dense net."""
    names = [str(n) for n in names]
    roles = {_role(n)[0] for n in names if not _is_bias(n)}
    return None not in roles and "V" in roles and ("KQ" in roles or {"K", "Q"} <= roles)


def file_arrays(path) -> dict:
    """Names -> arrays of a ``.safetensors`` (``safetensors.numpy``, no torch) or ``.npz`` file
    (``allow_pickle=False``)."""
    if Path(path).suffix == ".safetensors":
        from safetensors.numpy import load_file

        return load_file(str(path))
    with np.load(path, allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def attention_file(path) -> bool:
    """Whether ``path`` is a ``.safetensors`` or ``.npz`` file whose names are an attention layer's in
    the layout (:data:`LAYOUT`: the package's or the authors' ``nn.Linear`` names); only the names are
    read. A dense net's file (``0.weight``, …) is not, nor one that cannot be opened (its reader says why)."""
    path = Path(path)
    if path.suffix not in (".safetensors", ".npz") or not path.is_file():
        return False
    try:
        if path.suffix == ".safetensors":
            from safetensors import safe_open

            with safe_open(str(path), framework="numpy") as fh:
                names = list(fh.keys())
        else:
            with np.load(path, allow_pickle=False) as z:
                names = list(z.files)
    except Exception:  # noqa: BLE001 - not readable as either: the dense reader's error names the file
        return False
    return _attention_names(names)


def is_attention_model(model) -> bool:
    """An attention layer, a one-layer tuple of one, a weight file with an attention layer's names
    (:func:`attention_file`), or a torch module that is not an ``nn.Sequential`` (those are read by
    :func:`~.torch_import.from_torch`) holding a value and a key–query weight by the layout's names
    (other entries are refused by the importer, naming them), or softmax attention (refused by
    :func:`attention_from_torch`)."""
    if isinstance(model, MergedAttention | SeparateAttention):
        return True
    if isinstance(model, str | Path):
        return attention_file(model)
    if isinstance(model, tuple) and len(model) == 1:
        return isinstance(model[0], MergedAttention | SeparateAttention)
    if "torch" not in sys.modules:  # not imported: the model is no torch module (and no import cost)
        return False
    import torch.nn as nn

    if not isinstance(model, nn.Module) or isinstance(model, nn.Sequential):
        return False
    if any(isinstance(m, nn.MultiheadAttention) for m in model.modules()):
        return True
    roles = {_role(k)[0] for k in model.state_dict()}
    return "V" in roles and ("KQ" in roles or {"K", "Q"} <= roles)


def as_attention(model, X=None, *, like=None, name: str = "model"):
    """The attention layer of what :func:`is_attention_model` accepts. With the data's flat
    sequences ``X``: N read from their width, a torch module verified by running it on them
    (:func:`~.attention_run.check_by_running`), all-zero data refused; ``like``: the model an init must match
    (the same D, heads and kind, checked before the data; the same sum, checked once read)."""
    layer = _as_attention(model, X, like, name)
    if like is not None and (layer.norm, layer.include_query) != (like.norm, like.include_query):
        raise ValueError(f"{name}: its context sum is norm={layer.norm!r}, include_query="
                         f"{layer.include_query}, but the model's is norm={like.norm!r}, include_query="
                         f"{like.include_query}: give the init of the model's own layer (the same "
                         "normaliser and tokens summed)")
    return layer


def _as_attention(model, X, like, name: str):
    if isinstance(model, tuple):
        model = model[0]
    if isinstance(model, str | Path):
        model = attention_from_state_dict(file_arrays(model), source=str(model))
    if isinstance(model, MergedAttention | SeparateAttention):
        layer, module = model, None
    else:
        module, layer, source, norms = _read_torch(model)
    if module is None:
        layer.check(name)
    if like is not None:
        _check_like(layer, like, name)
    if X is None:
        return layer if module is None else _verified(module, layer, source, norms, None)
    X = _sequences(X)
    if module is None:
        n = sequence_length(layer, X.shape[1])
        if layer.n_ctx not in (1, n):
            raise ValueError(f"data: X holds sequences of {n} context tokens but the {name} has n_ctx = "
                             f"{layer.n_ctx}")
        return dataclasses.replace(layer, n_ctx=n)
    return _verified(module, layer, source, norms, X)


def _check_like(layer, like, name: str) -> None:
    """An init must be the model's kind with its token size and heads (before any data check:
    an init of another D is the init's fault, not the data's)."""
    if type(layer) is not type(like) or layer.d != like.d or layer.heads != like.heads:
        raise ValueError(f"{name}: a {type(layer).__name__} with {layer.heads} heads of D = {layer.d}, but "
                         f"the model is a {type(like).__name__} with {like.heads} heads of D = {like.d}: "
                         "give the weights this model's training started from")


def with_n_ctx(layer, width: int):
    """``layer`` with its context length N read from the data's width (N + 1)(D + 1), refused
    in one line when the width does not fit the model's token size or its fixed N."""
    D1 = layer.d + 1
    if width % D1 or width // D1 < 2:
        raise ValueError(f"data: X has {width} columns, not (N + 1)(D + 1) for D + 1 = {D1} (the model's "
                         f"token size) and N ≥ 1 context tokens; attention reads {SEQUENCES}")
    n = width // D1 - 1
    if layer.n_ctx not in (1, n):
        raise ValueError(f"data: X holds sequences of {n} context tokens but the model has "
                         f"n_ctx = {layer.n_ctx}")
    return dataclasses.replace(layer, n_ctx=n)
