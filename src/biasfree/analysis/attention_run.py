"""The run check of an imported attention module (:mod:`.attention_import`): its forward
against the layer read from its weights, at float64 round-off, and the likely cause of a
mismatch, named.

*Read by running* (:func:`check_by_running`). The module runs on sequences, the first
:data:`~.attention_import.CHECK_ROWS` of the data (else a seeded Gaussian probe), as float64
tokens (S, N+1, D+1), query last, under ``torch.func.functional_call`` with its weights in float64. Its
output at the query's label slot must equal the layer read, per sequence, within

    ``|f_module − f_read| ≤ 2 γ_K A``,   ``A = (1/c) Σ_h Σ_n |v_h|ᵀ|e_n| · |e_n|ᵀ|W_h||e_q|``,

γ_K = K u / (1 − K u), u = 2⁻⁵³, K = 3(D+1) + (N+1) + H + 5: every term of ŷ is a product of
five factors (four multiplications, and the 1/c of the layer's ``norm``) summed over three
contractions of D + 1, at most N + 1 tokens and H heads, so any order of summing the same
products lies within γ_K A of the exact sum (Higham, *Accuracy and Stability*, §3.1) and two
such computations within 2γ_K A.
A separate layer's terms run through W_h = K_hᵀQ_h too: K gains its r sums and A reads
``|K_h|ᵀ|Q_h|`` for ``|W_h|``.
On a mismatch the readings a module is likely to compute instead are tried at the same bound —
the key–query transposed, another of the normalisers (1/N, none, 1/(N + 1)), with or without
the query's own term, and their combinations; the layout's reading at float32's u = 2⁻²⁴; a
merged layer's heads interleaved in the nn.Linear rows (row i·H + h instead of h·(D+1) + i);
the reading times one number s (least squares), named as the normaliser c/s it divides by —
and the refusal names the one that matches, else a softmax or other nonlinearity in
``forward``.
"""

from __future__ import annotations

import itertools

import numpy as np

from ..core.attention import NORMS, SeparateAttention, norm_divisor
from .model import UnsupportedModelError

LAYOUT = ("linear attention: W_V (H, D+1, D+1) with W_KQ (H, D+1, D+1) (merged) or W_K, W_Q "
          "(H, r, D+1) (separate), or nn.Linear kq, value (H·(D+1), D+1) / key, query (H·r, D+1) as "
          "Zhang et al.'s, read at the query's label slot (docs/verdict.md 'Attention models')")
"""What :func:`~.attention_import.attention_from_state_dict` and
:func:`~.attention_import.attention_from_torch` read, as every refusal says."""
_U64, _U32 = 2.0**-53, 2.0**-24


def _reading(V, KQ, E, c: float, include_query: bool, abs_kq=None) -> tuple[np.ndarray, np.ndarray]:
    """``(ŷ, A)`` per sequence: the prediction of value weights ``V`` and merged ``KQ`` on tokens
    ``E`` (S, N+1, D+1), the context sum divided by ``c``, and the sum of its terms' magnitudes
    (module doc; ``abs_kq`` the
    magnitudes of the key–query's terms, ``|K_h|ᵀ|Q_h|`` for a separate layer, else ``|KQ|``), float64."""
    C, q, v = (E if include_query else E[:, :-1]), E[:, -1], V[:, -1, :]
    f = np.einsum("hd,snd,sne,hef,sf->s", v, C, C, KQ, q, optimize=True) / c
    absolute = (np.abs(v), np.abs(C), np.abs(C), np.abs(KQ) if abs_kq is None else abs_kq, np.abs(q))
    return f, np.einsum("hd,snd,sne,hef,sf->s", *absolute, optimize=True) / c


def _abs_kq(layer) -> np.ndarray | None:
    if isinstance(layer, SeparateAttention):
        K, Q = (np.abs(np.asarray(a, float)) for a in (layer.K, layer.Q))
        return np.einsum("hrd,hre->hde", K, Q)
    return None


def _gamma(layer, u: float) -> float:
    """γ_K at unit round-off ``u`` (module doc; a separate layer's K_hᵀQ_h adds its r sums)."""
    K = 3 * (layer.d + 1) + layer.n_ctx + 1 + layer.heads + 5
    K += layer.rank if isinstance(layer, SeparateAttention) else 0
    return K * u / (1 - K * u)


def run_module(module, E: np.ndarray, source: str, weights: dict | None = None) -> np.ndarray:
    """The module's output at the query's label slot on float64 tokens ``E``, its floating weights
    and buffers cast to float64 for the call only (``torch.func.functional_call``), those named
    in ``weights`` (NumPy) replaced."""
    import torch

    named = {**dict(module.named_parameters()), **dict(module.named_buffers())}
    weights = {k: t.detach().double() if t.is_floating_point() else t.detach() for k, t in named.items()} | {
        k: torch.from_numpy(np.asarray(a, float)) for k, a in (weights or {}).items() if k in named}
    S, T, D1 = E.shape
    try:
        with torch.no_grad():
            out = torch.func.functional_call(module, weights, (torch.from_numpy(np.ascontiguousarray(E)),))
    except Exception as e:  # noqa: BLE001 (any failure of the user's forward is reported in one line)
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        raise UnsupportedModelError(f"{source}: forward failed on float64 tokens of shape ({S}, {T}, {D1}) "
                                    f"({type(e).__name__}: {first}); forward must take sequences as tokens "
                                    "(S, N+1, D+1), query last, and return the prediction at its label slot"
                                    ) from None
    out = out[0] if isinstance(out, tuple | list) else out
    f = np.asarray(out.detach().cpu().double().numpy() if isinstance(out, torch.Tensor) else out, float)
    if f.shape == (S, T, D1):
        f = f[:, -1, -1]  # the authors' modules return every token's output: read the query's label slot
    elif f.size == S and f.ndim <= 3 and (f.ndim == 0 or f.shape[0] == S):
        f = f.reshape(S)
    else:
        raise UnsupportedModelError(f"{source}: forward returned shape {f.shape} on tokens ({S}, {T}, {D1}); "
                                    f"expected ({S},), ({S}, 1) or the tokens' shape ({S}, {T}, {D1}), read "
                                    "at the query's label slot")
    if not np.all(np.isfinite(f)):
        raise UnsupportedModelError(f"{source}: forward returned NaN or infinite values on the data's first "
                                    f"{S} sequences: give finite weights and data")
    return f


def check_by_running(module, layer, X: np.ndarray, source: str, weights: dict | None = None, *,
                     at: str = "") -> None:
    """Run ``module`` on the flat sequences ``X`` (with its weights, or those of ``weights``) and
    refuse, in one line, unless its output is ``layer``'s prediction within the round-off bound
    2γ_K A of the module doc; the refusal names the layout, the size of the difference and the
    reading that matches instead (``at`` says where in weight space it ran)."""
    E = np.asarray(X, float).reshape(len(X), layer.n_ctx + 1, layer.d + 1)
    f = run_module(module, E, source, weights)
    if not agrees(f, layer, E, X):
        refuse(f, layer, E, X, source, at=at)


def _parts(layer, E):
    """``(V, KQ, ŷ, A)``: the merged weights, the package's own prediction on tokens ``E`` and the
    sum of its terms' magnitudes (module doc)."""
    merged = layer.merged if isinstance(layer, SeparateAttention) else layer
    V, KQ = np.asarray(merged.V, float), np.asarray(merged.KQ, float)
    mine = np.asarray(layer.apply(E.reshape(len(E), -1)), float)[:, 0]
    _, A = _reading(V, KQ, E, layer.divisor, layer.include_query, _abs_kq(layer))
    return V, KQ, mine, A


def agrees(f, layer, E, X) -> bool:
    """The module's output ``f`` is ``layer``'s prediction on ``E`` within 2γ_K A (module doc)."""
    _, _, mine, A = _parts(layer, E)
    return bool(np.all(np.abs(f - mine) <= 2 * _gamma(layer, _U64) * A))


def refuse(f, layer, E, X, source: str, *, at: str = "", norm_found: bool = False):
    """Raise the one-line refusal: the layout, the size of the difference, the likely cause
    (``norm_found``: the reader finds the normaliser itself, so a cause beside it leaves it out)."""
    V, KQ, mine, A = _parts(layer, E)
    g = _gamma(layer, _U64)
    scale = max(float(np.max(np.abs(mine))), float(np.max(np.abs(f))), 1e-300)
    diff = float(np.max(np.abs(f - mine))) / scale
    cause = _cause(f, V, KQ, E, layer, mine, A, norm_found)
    raise UnsupportedModelError(
        f"{source}: forward is not the layer read from its weights: max |f_module − f_read| = {diff:.2g} of "
        f"max |f| on {len(X)} sequences{' ' + at if at else ''} (float64 round-off bound "
        f"{float(np.max(2 * g * A)) / scale:.2g}); "
        f"likely cause: {cause}. Read with include_query={layer.include_query}, norm={layer.norm!r}: "
        f"{LAYOUT}")


_NORM_WORDS = {"none": ("a missing 1/N (the output is N× the reading with 1/N)", "no normaliser"),
               "n+1": ("forward divides by the N + 1 tokens", "1/(N + 1)"),
               "n": ("forward divides by the N context tokens", "1/N")}


def _cause(f, V, KQ, E, layer, mine, A, norm_found: bool = False) -> str:
    """The first alternative reading (module doc) that the module's output ``f`` matches, in words;
    else the scale it computes, if it is a reading times one number. ``norm_found``: the reader tries
    every normaliser itself (the authors' layout), so one is named only when nothing else is."""
    N, inc, c0 = layer.n_ctx, layer.include_query, layer.divisor
    if np.all(np.abs(f - mine) <= 2 * _gamma(layer, _U32) * A):
        return ("forward computes in float32 (the difference is within float32 round-off): compute in "
                "float64, the dtype of the weights given to it")
    g = _gamma(layer, _U64)
    absW = _abs_kq(layer)
    H, D1 = V.shape[0], V.shape[1]

    def mixed(A):  # a merged layer's heads as nn.Linear rows i·H + h, not h·(D+1) + i
        return A.reshape(H * D1, D1).reshape(D1, H, D1).transpose(1, 0, 2)
    heads = (False, True) if H > 1 and not isinstance(layer, SeparateAttention) else (False,)
    for mix, transposed, other, norm in itertools.product(heads, (False, True), (False, True), NORMS):
        if not (mix or transposed or other or norm != layer.norm):
            continue
        W = np.swapaxes(KQ, 1, 2) if transposed else KQ
        Vr, W = (mixed(V), np.swapaxes(mixed(np.swapaxes(W, 1, 2)), 1, 2)) if mix else (V, W)
        r, a = _reading(Vr, W, E, norm_divisor(norm, N), inc != other,
                        None if absW is None or not transposed else np.swapaxes(absW, 1, 2))  # mix: absW None
        if np.all(np.abs(f - r) <= 2 * g * a):
            words = []
            if mix:
                words.append("the heads interleaved in the nn.Linear weights (forward views the H·(D+1) "
                             "outputs as (D+1, H), row i·H + h, where the layout reads (H, D+1), row "
                             "h·(D+1) + i): reorder each weight by weight.view(D+1, H, D+1).transpose(0, 1)"
                             ".reshape(H·(D+1), D+1)")
            if transposed:
                words.append("a key–query transposed against the layout read (the score e_qᵀ W e_n for "
                             "e_nᵀ W e_q, or key and query swapped): transpose each head's key–query")
            if other:
                flag = "True" if not inc else "False"
                words.append(("forward sums over the query's own token too" if not inc else "forward leaves "
                              "the query's own token out of its sum") + ": read it with bf.models."
                             f"attention_from_torch(module, data=data, include_query={flag}) and analyse "
                             "that")
            if norm != layer.norm and not (norm_found and words):
                words.append(f"{_NORM_WORDS[norm][0]}: read it with attention_from_torch(module, data=data, "
                             f"norm={norm!r}), or divide forward's output as the layout does "
                             f"({_NORM_WORDS[layer.norm][1]})")
            return "; and ".join(words)
    r, a = _reading(V, KQ, E, c0, inc, absW)
    s = float(np.dot(f, r) / np.dot(r, r)) if np.any(r) else 0.0
    # a least-squares s from f = s·r + e, |e| ≤ 2γ|s|A: s is off by ≤ 2γ|s| Σ|r|A / Σr², so the
    # residual of a true scale is ≤ 2γ|s|(A + |r| Σ|r|A / Σr²)
    slack = 2 * g * abs(s) * (a + np.abs(r) * np.dot(np.abs(r), a) / max(np.dot(r, r), 1e-300))
    if s != 0.0 and np.all(np.abs(f - s * r) <= slack):
        return (f"forward divides the context sum by c = {c0 / s:.6g} (its output is {s:.6g}× the reading "
                f"with {_NORM_WORDS[layer.norm][1]}), none of the normalisers read: N = {N} ('n'), 1 "
                f"('none'), N + 1 = {N + 1} ('n+1'): divide forward's output by one of them")
    return ("a softmax or other nonlinearity in forward (no reading matches: not the key–query "
            "transposed, without 1/N, over N + 1 tokens, with or without the query's own term, nor one "
            "reading times a number): only linear attention has an exact twin (docs/theory.md §10.5)")
