"""The exact linear twin of merged linear attention (docs/theory.md §10.2): a two-layer linear
net on the cubic feature ``z = vec((1/N) Σ_n y_n x_n x_qᵀ)`` (1/c for a layer normalised by c).

Split head h's weights (:class:`~.attention.MergedAttention`) into blocks, D rows/columns for
x and one for the label y: ``W_h = [[A_h, ·], [b_hᵀ, ·]]`` (A_h (D, D), b_h (D,); the last
column multiplies the query's label slot, 0, and is never read) and ``v_h = (u_h; γ_h)`` the
last row of ``W_h^V`` (its other rows are never read either). Then

    ŷ = Σ_h (1/N) Σ_n (u_hᵀx_n + γ_h y_n)(x_nᵀ A_h x_q + y_n b_hᵀ x_q)

and with ``u_h = 0`` and ``b_h = 0`` (:func:`off_twin`) only ``γ_h (1/N) Σ_n y_n x_nᵀ A_h x_q =
γ_h vec(A_h)·z`` remains: the prediction is ``W₂ W₁ z`` with

    W₁[h, :] = vec(A_h)   (H, D²),     W₂[0, h] = γ_h   (1, H)         (:func:`merged_to_twin`),

and back: ``A_h = W₁[h].reshape(D, D)``, ``W_h^V[D, D] = W₂[0, h]``, every other entry 0
(:func:`twin_to_merged`). The loss of the attention and of the twin is then one function of
(A, γ), so gradient descent and any optax optimiser move them identically, as long as u and
b stay 0: on label-mirrored data (:func:`~.icl_data.in_context_regression`) their gradients
are sums of terms odd under y → −y, which cancel pair by pair (§10.2).

A layer with ``include_query`` (the sum over the query's own token too) has the same twin: the
query's term ``(1/N)(v_hᵀe_q)(e_qᵀW_h e_q) = (1/N)(u_hᵀx_q)(x_qᵀA_h x_q)`` vanishes with u_h,
and its gradient in u_h has no y, so the mirror still cancels it (§10.2).

A layer's ``norm`` (its normaliser c of the context sum: N, 1 or N + 1) goes into the feature,
``z = vec((1/c) Σ_n y_n x_n x_qᵀ)`` (:func:`twin_dataset`), and the map stays the same: then
the loss is the same function of (A, γ) on both sides and GD moves them identically. Scaling W₁
by N/c instead computes the same function but not the same training: GD on W₁ = (N/c)A steps A
by (c/N)² times as far (§10.2).

The twin's layers are :class:`TwinLayer` s: dense layers of a *linear* net, which
:func:`~biasfree.dynamics.trainer.train` runs at slope α = 1 only (it refuses any other α, which
would silently train a ReLU net on z instead).
"""

from __future__ import annotations

import jax
import numpy as np

from .attention import MergedAttention, SeparateAttention, norm_divisor
from .data import Dataset
from .icl_data import _cubic_features
from .layers import Layer, layer_type
from .precision import precise


@layer_type
class TwinLayer(Layer):
    """A dense layer (``W``, no bias) of the linear twin of an attention layer
    (:func:`merged_to_twin`): its net is linear, W₂W₁z, so it is trained at slope α = 1 only
    (``bf.train`` sets it when no α is given, and refuses another). It computes, saves and loads
    as a :class:`Layer`."""

    kind = property(lambda self: "Layer", doc="Stored as a dense Layer.")


TWIN_SLOPE = 1.0
"""The slope α a net of :class:`TwinLayer` s is trained at (module doc)."""


def twin_slope(params, alpha):
    """The slope to train ``params`` at: ``alpha`` as given; for a net of :class:`TwinLayer` s
    given none (None), :data:`TWIN_SLOPE`: the map sets it, so the twin cannot be trained as a
    ReLU net by default."""
    if alpha is None and isinstance(params, tuple | list) and any(isinstance(la, TwinLayer) for la in params):
        return TWIN_SLOPE
    return alpha


def check_twin_slope(params, alpha) -> None:
    """Refuse a net holding :class:`TwinLayer` s at a slope ``alpha`` (a number or per-member
    array) other than 1, naming the fix (the trainer calls this once per run)."""
    if any(isinstance(layer, TwinLayer) for layer in params) and np.any(np.asarray(alpha) != TWIN_SLOPE):
        got = np.asarray(alpha).tolist()
        raise ValueError(f"train: params are an attention layer's linear twin (merged_to_twin), the linear "
                         f"net W₂W₁z, but alpha={got} would put a leaky ReLU between W₁ and W₂: pass "
                         "alpha=1.0")


def _merged(layer) -> MergedAttention:
    if isinstance(layer, SeparateAttention):
        return layer.merged
    if not isinstance(layer, MergedAttention):
        raise TypeError(f"expected a MergedAttention or SeparateAttention layer, got {type(layer).__name__}")
    return layer


def _host(layer) -> tuple[np.ndarray, np.ndarray]:
    """``(V, KQ)`` of a layer's merged form as NumPy arrays (a separate layer's ``K_hᵀ Q_h``
    multiplied on the host: no program per shape)."""
    if isinstance(layer, SeparateAttention):
        K, Q = np.asarray(layer.K), np.asarray(layer.Q)
        return np.asarray(layer.V), np.einsum("...hrd,...hre->...hde", K, Q)
    m = _merged(layer)
    return np.asarray(m.V), np.asarray(m.KQ)


@precise
def merged_to_twin(layer) -> tuple[Layer, Layer]:
    """The twin ``(Layer(W₁), Layer(W₂))`` of a merged layer (module doc; a separate layer is
    merged first, ``W_h = K_hᵀ Q_h``): exact when :func:`off_twin` is 0, with or without
    ``include_query``. Its layers are :class:`TwinLayer` s: ``bf.train`` runs them at α = 1 only."""
    V, KQ = _host(layer)
    H, D = V.shape[-3], V.shape[-1] - 1
    return (TwinLayer(jax.device_put(KQ[:, :D, :D].reshape(H, D * D))),
            TwinLayer(jax.device_put(V[:, D, D][None, :])))


@precise
def twin_to_merged(twin, n_ctx: int, *, include_query: bool = False, norm: str = "n") -> MergedAttention:
    """The merged layer (context length ``n_ctx``, ``include_query`` and ``norm`` as the layer's) of a
    two-layer linear twin ``(W₁ (H, D²), W₂ (1, H))``: ``A_h = W₁[h].reshape(D, D)``,
    ``W_h^V[D, D] = W₂[0, h]``, every other entry 0."""
    W1, W2 = (np.asarray(layer.W) for layer in twin)
    H, D2 = W1.shape
    D = int(round(np.sqrt(D2)))
    if D * D != D2 or np.shape(W2) != (1, H):
        raise ValueError(f"twin must be (W₁ (H, D²), W₂ (1, H)), got {np.shape(W1)} and {np.shape(W2)}")
    KQ = np.zeros((H, D + 1, D + 1), W1.dtype)
    KQ[:, :D, :D] = np.reshape(W1, (H, D, D))
    V = np.zeros((H, D + 1, D + 1), W1.dtype)
    V[:, D, D] = W2[0]
    return MergedAttention(jax.device_put(V), jax.device_put(KQ), n_ctx=n_ctx, include_query=include_query,
                           norm=norm)


def off_twin(layer) -> float:
    """``max(|u_h|, |b_h|)`` over heads: the largest entry of the blocks that must vanish for the
    twin identity (module doc), the value row's x-part and the key–query's label row (a separate
    layer: of its merged ``K_hᵀ Q_h``)."""
    V, KQ = _host(layer)
    D = V.shape[-1] - 1
    return float(max(np.max(np.abs(V[..., D, :D])), np.max(np.abs(KQ[..., D, :D]))))


def in_context_map(layer) -> np.ndarray:
    """``B = Σ_h γ_h A_h`` (D, D): on the twin's manifold the layer predicts
    ``ŷ = Σ_ij B_ij z_ij = (1/N) Σ_n y_n x_nᵀ B x_q`` (docs/theory.md §10.3)."""
    V, KQ = _host(layer)
    D = V.shape[-1] - 1
    return np.einsum("h,hij->ij", V[:, D, D], KQ[:, :D, :D])


def twin_dataset(data: Dataset, n_ctx: int, *, norm: str = "n") -> Dataset:
    """The twin's training set: the cubic features of ``data``'s sequences
    (:func:`~.icl_data.cubic_features`), ``z = vec((1/c) Σ_n y_n x_n x_qᵀ)`` with the layer's
    normaliser c of ``norm`` (N, 1 or N + 1; module doc), and the same targets. A label-mirrored
    set gives ``[Z; −Z]`` exactly (each term of z changes sign), so the twin takes the mirrored path."""
    per_token = 1.0 / norm_divisor(norm, n_ctx)
    Z = _cubic_features(data.X, n_ctx, per_token)
    test = {} if not data.has_test else {
        "X_test": _cubic_features(data.X_test, n_ctx, per_token), "Y_test": data.Y_test}
    return Dataset(Z, data.Y, **test)


def twin_mask(layer):
    """A pytree like ``layer`` of 0/1 arrays, 1 on the entries the twin reads (``A_h`` and
    ``γ_h``; a separate layer: the x-columns of ``K_h``, ``Q_h``). Multiplying an optimiser's
    updates by it keeps ``u_h = b_h = 0`` exactly: Adam divides the pair sums' round-off
    (~1e-17) by ``√v + ε`` and would move them by ~η (docs/theory.md §10.2). A net (tuple of
    layers) gives a tuple of masks."""
    if isinstance(layer, tuple | list):
        return tuple(twin_mask(la) for la in layer)
    D = layer.d
    V = np.zeros(np.shape(layer.V), layer.V.dtype)  # NumPy constants (also in a traced update)
    V[..., D, D] = 1.0
    if isinstance(layer, MergedAttention):
        KQ = np.zeros(np.shape(layer.KQ), layer.V.dtype)
        KQ[..., :D, :D] = 1.0
        return MergedAttention(V, KQ, n_ctx=layer.n_ctx, include_query=layer.include_query, norm=layer.norm)
    if isinstance(layer, SeparateAttention):
        KQ = np.zeros(np.shape(layer.K), layer.V.dtype)
        KQ[..., :D] = 1.0
        return SeparateAttention(V, KQ, KQ, n_ctx=layer.n_ctx, include_query=layer.include_query,
                                 norm=layer.norm)
    raise TypeError(f"expected an attention layer, got {type(layer).__name__}")
