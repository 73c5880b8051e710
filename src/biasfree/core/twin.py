"""The linear twin: the one map from a leaky net to the linear net it equals (§2.3–2.5).

``σ_α(z) = c z + (1 - c)|z|`` with ``c = (1 + α)/2`` (docs/theory.md §1.1). A two-layer
bias-free leaky net whose even part stays zero computes ``c W_2 W_1 x``, and its twin
``√c (W_1, W_2)`` (α = 1) follows the same gradient flow in time ``c t`` (§2.4).
"""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp
import numpy as np

from .. import _validate as validate
from .layers import Params, scale_params


def slope_factor(alpha):
    """``c = (1 + α) / 2`` for the leaky slope ``alpha`` = α in [0, 1] (one or an array)."""
    validate.slope(alpha, array_ok=True)
    return unchecked_slope_factor(alpha)


def unchecked_slope_factor(alpha):
    """:func:`slope_factor` without its check, ``(1 + α)/2``, for a caller that checked ``alpha``
    (the analyse pipeline checks it once, at its first stage); the one place the formula is
    written."""
    return (1.0 + alpha) / 2.0


def linear_twin(params: Params, alpha) -> Params:
    """The linear twin ``√c · params`` (every weight and bias), ``c = (1 + α)/2``
    (:func:`slope_factor`): the linear net (α = 1) whose gradient flow, in time ``c t``, a
    two-layer leaky net with a zero even part follows exactly (docs/theory.md §2.4); with step
    ``η c`` and weight decay ``λ/c``, its GD steps too (§2.3, §2.7).

    Arguments:

    - ``params``: the net (a tuple of layers), or a batch of K nets (leading axis K) for K slopes.
    - ``alpha``: the leaky slope α in [0, 1], or K slopes (shape (K,)): then K twins on a
      leading ensemble axis, member k scaled by ``√c_k``.

    Returns the twin's weights, in the layout of ``params``.

    Example::

        import jax, biasfree as bf
        net = bf.pair_up(bf.init_gaussian(jax.random.PRNGKey(0), (5, 10, 1), scale=0.1))
        twin = bf.linear_twin(net, 0.0)          # train it with α = 1 and step η/2
    """
    check_leaky(params)
    c = slope_factor(alpha)
    return scale_params(params, jnp.sqrt(c) if validate.traced(c) else np.sqrt(c))


def check_leaky(params) -> None:
    """Refuse a net with a quadratic layer: the twin map is about σ_α (§2.3–2.5)."""
    if isinstance(params, tuple | list) and any(getattr(la, "activation", "leaky") != "leaky"
                                                 for la in params[:-1]):
        raise ValueError("a net with a quadratic layer has no linear twin (σ(z) = z² is even, its "
                         "odd part is 0); train it with twin=False")


class TwinScales(NamedTuple):
    """How a depth-L leaky net maps to its linear twin (§2.4, §2.7, §4.1): every weight ×
    ``weight`` = c^{(L−1)/L}, time (and the GD step) × ``time`` = c^{2(L−1)/L}, weight decay
    ÷ ``time``. Depth 2: √c, c, λ/c — exact under §2.3–2.5; depth > 2: the would-be map of
    §4.1 (exact for α = 1 only)."""

    weight: float
    time: float

    @classmethod
    def unchecked(cls, alpha, depth: int) -> TwinScales:
        """:func:`twin_scales` without its checks, for a caller that checked ``alpha`` and the
        net (the analyse pipeline checks each once, at its first stage)."""
        return _twin_scales(unchecked_slope_factor(alpha), depth)


def twin_scales(alpha, depth: int = 2) -> TwinScales:
    """The one twin-scale map (:class:`TwinScales`) for slope ``alpha`` and ``depth`` L ≥ 2."""
    c = float(slope_factor(alpha))
    return _twin_scales(c, validate.integer("depth", depth, 2))


def _twin_scales(c, L: int) -> TwinScales:
    """:func:`twin_scales` unchecked, from c = (1 + α)/2 (one, or an array of them)."""
    return TwinScales(c ** ((L - 1) / L), c ** (2 * (L - 1) / L))


def twin_weights(params: Params, alpha, depth: int) -> Params:
    """The twin's weights, unchecked: :func:`linear_twin`'s ``√c·params`` at depth 2, the odd-part
    twin's ``c^{(L−1)/L}·params`` beyond (§4.1); ``alpha`` one slope, or one per member (K,)
    for ``params`` with a leading member axis."""
    c = unchecked_slope_factor(np.asarray(alpha, dtype=float))
    factor = np.sqrt(c) if depth == 2 else _twin_scales(c, depth).weight
    return tuple(layer.scaled(factor) for layer in params)
