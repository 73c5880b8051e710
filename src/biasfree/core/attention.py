"""Multi-head linear self-attention read at the query's label slot (docs/theory.md §10), a
layer of the net family that is not a linear map.

A sequence is N context tokens and a query, each a column ``e = (x; y)`` of D + 1 numbers,
the query's label slot 0: ``E = [e_1 … e_N  e_q]``, ``e_q = (x_q; 0)``. It enters a net flat,
one row of (N + 1)(D + 1) numbers, tokens in order (``E.T.reshape(-1)``: x_1, y_1, x_2, …,
x_q, 0), so data sets, batches and the trainer treat sequences as inputs. The layer returns
the label slot of the query's output, one number per sequence:

    ŷ = Σ_h (1/N) Σ_{n=1}^N (v_hᵀ e_n)(e_nᵀ W_h e_q),                     (merged)

``v_hᵀ = W_h^V[D, :]`` the last row of head h's value weights, ``W_h = W_h^{KQ}`` its merged
key–query matrix; the residual ``e_q`` adds 0 at the label slot. :class:`SeparateAttention`
has ``W_h = W_h^{Kᵀ} W_h^Q`` with key and query weights of rank r each,
``W_h^K, W_h^Q`` (r, D + 1). Keys and values are the N context tokens (the query attends to
them, not to itself); with ``include_query=True`` the sum also runs over the query's own token,
``n = q``, still divided by N, as in Zhang, Singh, Latham & Saxe's linear attention
(``ATTN(X) = X + Σ_h (1/N) W_h^V X Xᵀ W_h X`` over all N + 1 columns of X). On the twin's
manifold the query's term is 0, so the twin and its map are the same (docs/theory.md §10.2).

``norm`` names the normaliser c of the context sum, ``ŷ = Σ_h (1/c) Σ_n …``: ``"n"`` c = N
(the default, the module's equations above), ``"none"`` c = 1 (the authors' code's default: no
normalisation) and ``"n+1"`` c = N + 1 (their ``vary_len=True``: the sum divided by its N + 1
tokens). The twin's feature carries the same 1/c (docs/theory.md §10.2,
:func:`~.attention_twin.twin_dataset`).

Both are pytrees (the weights leaves, ``n_ctx`` static), so ``jit``, ``vmap`` and ``grad``
see only the weights; :meth:`~MergedAttention.apply` takes (S, (N+1)(D+1)) to (S, 1), as
``Σ_h v_hᵀ G W_h e_q`` with the context's ``G = (1/c) Σ_n e_n e_nᵀ``: O(S·N·D²) once for G, then
O(S·H·D²); both compute in float64 (:func:`~biasfree.core.precision.precise`) whatever JAX's default. They
have no ``matrix`` (``TypeError``): the map is cubic in the tokens, and
the dense theory that reads ``matrix`` does not apply. Training records their losses only
(``bf.train(..., observables="loss")``). Inits: :func:`init_attention`; the exact linear twin
of the merged model: :mod:`biasfree.core.attention_twin`.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from .. import _validate as validate
from .draws import normal
from .layers import AbstractLayer, static
from .precision import precise

Array = jax.Array
HIGHEST = jax.lax.Precision.HIGHEST
NORMS = ("n", "none", "n+1")
"""The normalisers of the context sum a layer's ``norm`` names (module doc)."""


def norm_divisor(norm: str, n_ctx: int) -> int:
    """The normaliser c of ``norm`` (:data:`NORMS`) for context length ``n_ctx`` = N: N, 1 or N + 1."""
    return {"n": n_ctx, "none": 1, "n+1": n_ctx + 1}[validate.choice("norm", norm, NORMS)]


def _attention_type(cls):
    """``cls`` as a frozen dataclass pytree: array fields leaves, :func:`static` fields not."""
    return jax.tree_util.register_dataclass(dataclasses.dataclass(frozen=True)(cls))


def tokens(X, n_ctx: int) -> Array:
    """The flat sequences ``X`` (S, (N+1)(D+1)) as token arrays (S, N + 1, D + 1)."""
    S, width = np.shape(X)
    return jnp.reshape(X, (S, n_ctx + 1, width // (n_ctx + 1)))


class _Attention(AbstractLayer):
    """What both attention layers share: the shapes, scaling and the missing matrix."""

    is_linear = False
    V: Array
    n_ctx: int

    d = property(lambda self: int(np.shape(self.V)[-1]) - 1, doc="Input dimension D of x.")
    heads = property(lambda self: int(np.shape(self.V)[-3]), doc="Number of heads H.")
    batch_ndim = property(lambda self: np.ndim(self.V) - 3, doc="Number of leading ensemble axes.")
    n_in = property(lambda self: (self.n_ctx + 1) * (self.d + 1))
    n_out = property(lambda self: 1)
    bias = property(lambda self: None, doc="None: attention has no bias.")
    divisor = property(lambda self: norm_divisor(self.norm, self.n_ctx),
                       doc="The normaliser c of the context sum (module doc): N, 1 or N + 1.")

    @property
    def matrix(self):
        raise TypeError(f"{type(self).__name__} is not a linear map of its input (its output is cubic "
                        "in the tokens), so it has no matrix; train it with observables='loss' and use "
                        "biasfree.core.attention_twin for its linear twin")

    def _arrays(self) -> dict:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                if not f.metadata.get("static")}

    def scaled(self, factor):
        """Every weight times ``factor`` (one number, or (K,) for K members)."""
        f = factor if np.ndim(factor) == 0 else factor[(...,) + (None,) * 3]
        return dataclasses.replace(self, **{k: f * v for k, v in self._arrays().items()})

    def _read(self, H):
        """``G = (1/c) Σ_n e_n e_nᵀ`` (S, D+1, D+1) of the context (and of the query, with
        ``include_query``; c the layer's :attr:`divisor`), the query (S, D+1) and the value
        readout ``v_h`` (H, D+1). ``G`` depends on the data alone: inside a training loop XLA
        computes it once."""
        E = tokens(H, self.n_ctx)
        C = E if self.include_query else E[:, :-1]
        G = jnp.einsum("snd,sne->sde", C, C, precision=HIGHEST) / self.divisor
        return G, E[:, -1], self.V[:, -1, :]

    def check(self, name: str) -> None:
        for k, a in self._arrays().items():  # numbers first: a string's "shape ()" would mislead
            validate.finite_array(f"{name}.{k}", a)
        validate.integer(f"{name}.n_ctx", self.n_ctx, 1)
        validate.flag(f"{name}.include_query", self.include_query)
        validate.choice(f"{name}.norm", self.norm, NORMS)
        V = np.shape(self.V)
        if len(V) != 3 or V[1] != V[2] or V[1] < 2:
            raise ValueError(f"{name}.V must be (heads, D + 1, D + 1) value weights per head, got shape {V}")
        for k, a in self._arrays().items():
            if k != "V" and (np.ndim(a) != 3 or np.shape(a)[0] != V[0] or np.shape(a)[2] != V[2]):
                raise ValueError(f"{name}.{k} must be ({V[0]}, ·, {V[2]}) (one per head, D + 1 = {V[2]} "
                                 f"columns), got shape {np.shape(a)}")


@_attention_type
class MergedAttention(_Attention):
    """Linear attention with merged key–query weights (module doc): ``V`` (H, D+1, D+1)
    value weights per head, ``KQ`` (H, D+1, D+1) key–query weights ``W_h`` per head,
    ``n_ctx`` the context length N, ``include_query`` whether the sum runs over the query's own
    token too, ``norm`` the normaliser of the sum (module doc). Inputs flat sequences
    (S, (N+1)(D+1)), output (S, 1)."""

    V: Array
    KQ: Array
    n_ctx: int = static(1)
    include_query: bool = static(False)
    norm: str = static("n")

    @precise
    def linear(self, H: Array) -> Array:
        """``ŷ`` (S, 1) as ``Σ_h v_hᵀ G W_h e_q`` with ``G = (1/c) Σ_n e_n e_nᵀ`` (linear
        attention's associativity: the N tokens are summed once, not once per head; in a
        training loop G depends on the data alone and XLA hoists it out of the loop).

        Per step, plain GEMMs (XLA's CPU batched small products ran 2–5× slower,
        docs/performance.md "Linear attention"): with few heads' worth of width
        (D + 1 ≤ 2H) the heads are folded into ``U[d, e, f] = Σ_h v_h[d] W_h[e, f]`` first and
        ``ŷ = Σ_{de} G_de (U e_q)_de`` costs S (D+1)³; else ``G v_h`` and ``W_h e_q`` cost
        2 S H (D+1)²."""
        G, q, v = self._read(H)
        S, D1 = q.shape
        if D1 <= 2 * self.heads:
            U = jnp.einsum("hd,hef->def", v, self.KQ, precision=HIGHEST).reshape(D1 * D1, D1)
            return jnp.sum(G.reshape(S, D1 * D1) * jnp.matmul(q, U.T, precision=HIGHEST), axis=1)[:, None]
        Wq = jnp.matmul(q, jnp.transpose(self.KQ, (2, 0, 1)).reshape(D1, -1), precision=HIGHEST)  # S, H(D+1)
        Gv = jnp.matmul(G.reshape(S * D1, D1), v.T, precision=HIGHEST).reshape(S, D1, -1)  # (S, D+1, H)
        return jnp.sum(jnp.transpose(Gv, (0, 2, 1)).reshape(S, -1) * Wq, axis=1)[:, None]

    def check(self, name: str) -> None:
        super().check(name)
        if np.shape(self.KQ) != np.shape(self.V):
            raise ValueError(f"{name}.KQ must have V's shape {np.shape(self.V)}, got {np.shape(self.KQ)}")


@_attention_type
class SeparateAttention(_Attention):
    """Linear attention with separate key and query weights (module doc): ``V`` (H, D+1, D+1),
    ``K`` and ``Q`` (H, r, D+1) of rank r per head, ``W_h = K_hᵀ Q_h``; ``n_ctx`` = N,
    ``include_query`` and ``norm`` as :class:`MergedAttention`'s."""

    V: Array
    K: Array
    Q: Array
    n_ctx: int = static(1)
    include_query: bool = static(False)
    norm: str = static("n")

    rank = property(lambda self: int(np.shape(self.K)[-2]), doc="Rank r of each head's key–query map.")

    @precise
    def linear(self, H: Array) -> Array:
        """``ŷ`` (S, 1) as ``Σ_h (K_h G v_h)·(Q_h e_q)``, ``G = (1/c) Σ_n e_n e_nᵀ``."""
        G, q, v = self._read(H)
        KGv = jnp.einsum("hrd,sde,he->shr", self.K, G, v, precision=HIGHEST)
        Qq = jnp.einsum("hrd,sd->shr", self.Q, q, precision=HIGHEST)
        return jnp.sum(KGv * Qq, axis=(1, 2))[:, None]

    def check(self, name: str) -> None:
        super().check(name)
        if np.shape(self.K) != np.shape(self.Q):
            raise ValueError(f"{name}.K and {name}.Q must share one shape (H, r, D + 1), got "
                             f"{np.shape(self.K)} and {np.shape(self.Q)}")

    @property
    def merged(self) -> MergedAttention:
        """The merged layer computing the same map: ``W_h = K_hᵀ Q_h`` (float64, as :meth:`linear`)."""
        return _merge(self)


@precise
def _merge(layer: SeparateAttention) -> MergedAttention:
    return MergedAttention(layer.V, jnp.einsum("...hrd,...hre->...hde", layer.K, layer.Q, precision=HIGHEST),
                           n_ctx=layer.n_ctx, include_query=layer.include_query, norm=layer.norm)


@precise
def init_attention(key, d: int, heads: int, n_ctx: int, scale: float, *, rank: int | None = None,
                   blocks: str = "twin", include_query: bool = False, norm: str = "n"):
    """A small Gaussian init, every drawn weight ``N(0, scale²)``: a :class:`MergedAttention`
    (``rank=None``) or a :class:`SeparateAttention` of key–query rank ``rank``, for inputs of
    dimension ``d`` = D, ``heads`` = H heads and context length ``n_ctx`` = N.

    ``blocks="twin"`` draws only what the prediction on the twin's manifold reads (docs/theory.md
    §10.2): the x-block ``W_h[:D, :D]`` (merged) or the x-columns of ``K_h`` and ``Q_h``
    (separate), and the label weight ``v_h[D] = W_h^V[D, D]``; every other entry is 0.
    ``blocks="all"`` draws every entry (off the manifold: the twin identity does not hold).
    ``include_query``, ``norm``: the layer's (module doc)."""
    validate.key(key)
    validate.flag("include_query", include_query)
    validate.choice("norm", norm, NORMS)
    validate.choice("blocks", blocks, ("twin", "all"))
    d, heads, n_ctx = (validate.integer(k, v, 1) for k, v in (("d", d), ("heads", heads), ("n_ctx", n_ctx)))
    scale = validate.positive("scale", scale, scalar=True, why="the init's std")
    kv, kk, kq = jax.random.split(key, 3)
    draw = lambda k, shape: scale * np.asarray(normal(k, shape))  # noqa: E731 (shared draws, module draws)
    V = draw(kv, (heads, d + 1, d + 1))
    if blocks == "twin":
        V = _keep(V, (..., d, d))
    if rank is None:
        KQ = draw(kk, (heads, d + 1, d + 1))
        if blocks == "twin":
            KQ = _keep(KQ, (..., slice(None, d), slice(None, d)))
        return MergedAttention(jax.device_put(V), jax.device_put(KQ), n_ctx=n_ctx,
                               include_query=include_query, norm=norm)
    rank = validate.integer("rank", rank, 1)
    K, Q = (draw(k, (heads, rank, d + 1)) for k in (kk, kq))
    if blocks == "twin":
        K[..., d] = Q[..., d] = 0.0
    return SeparateAttention(*(jax.device_put(a) for a in (V, K, Q)), n_ctx=n_ctx,
                             include_query=include_query, norm=norm)


def _keep(a: np.ndarray, index) -> np.ndarray:
    """``a`` with every entry outside ``a[index]`` set to 0."""
    out = np.zeros_like(a)
    out[index] = a[index]
    return out
