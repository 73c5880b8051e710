"""A net evaluated on a large data set in row blocks: O(block × width) memory.

:func:`~biasfree.core.nets.forward` on N inputs holds every hidden layer at once, N × n_l
numbers (1 GB for 60,000 inputs and width 2048, twice during the activation). Here the rows
go through in blocks of at most :data:`BLOCK_ENTRIES` hidden numbers, one compiled program
per block shape, and only the outputs (N, p) are kept. :func:`outputs_and_mirror` gives
``f(X)`` and ``f(-X)`` (the odd and even parts of docs/theory.md §1.2) from one product with
a bias-free first layer: ``(-X) W_1ᵀ = -(X W_1ᵀ)`` exactly, negation commuting with rounding.
The values are those of ``forward`` up to the order of the sums in the matrix products
(round-off: ``|Δf| ≤ 2 γ_K |W_L| |h_{L-1}| + …``, γ_K = Kε/(1 − Kε), K the inner size).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from .layers import Params
from .nets import check_apply, forward_unchecked, net_after_first
from .precision import precise

BLOCK_ENTRIES = 2**22
"""Numbers of the widest layer per row block (32 MiB in float64)."""


@jax.jit
def _pair(params, Xb, alpha):
    first = params[0]
    Z = first.apply(Xb)
    Zm = -Z if first.bias is None else first.apply(-Xb)
    return net_after_first(params, Z, alpha), net_after_first(params, Zm, alpha)


_one = jax.jit(lambda params, Xb, alpha: (forward_unchecked(params, Xb, alpha),))


def _blocks(fn, params, X, alpha, n_out: int):
    """The outputs of ``fn`` on the rows of ``X`` in blocks, unchecked (the callers check)."""
    X = np.asarray(X)
    X = X if np.issubdtype(X.dtype, np.floating) else X.astype(float)
    N = X.shape[0]
    width = max(layer.n_out for layer in params)
    step = max(1, BLOCK_ENTRIES // width)
    outs = [np.empty((N, params[-1].n_out), dtype=X.dtype) for _ in range(n_out)]
    a = jnp.asarray(alpha, X.dtype)
    for i in range(0, N, step):
        for out, r in zip(outs, fn(tuple(params), X[i:i + step], a), strict=True):
            out[i:i + step] = np.asarray(r)
    return outs


@precise
def outputs(params: Params, X, alpha) -> np.ndarray:
    """``f(X)`` (N, p) of the net ``params`` (any depth and layer type) at slope ``alpha``,
    computed in row blocks (module doc)."""
    check_apply(params, X, alpha)
    return _outputs(params, X, alpha)


def _outputs(params: Params, X, alpha) -> np.ndarray:
    """:func:`outputs` unchecked (for internals whose caller checked the net and X)."""
    return _blocks(_one, params, X, alpha, 1)[0]


@precise
def outputs_and_mirror(params: Params, X, alpha) -> tuple[np.ndarray, np.ndarray]:
    """``(f(X), f(-X))``, each (N, p), computed in row blocks sharing the first layer's
    product when it has no bias (module doc); ``f_odd = (f(X) − f(−X))/2``,
    ``f_even = (f(X) + f(−X))/2``."""
    check_apply(params, X, alpha)
    return _outputs_and_mirror(params, X, alpha)


def _outputs_and_mirror(params: Params, X, alpha) -> tuple[np.ndarray, np.ndarray]:
    """:func:`outputs_and_mirror` unchecked."""
    return tuple(_blocks(_pair, params, X, alpha, 2))
