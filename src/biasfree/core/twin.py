"""The linear twin: the one map from a leaky net to the linear net it equals (§2.3–2.5).

``σ_α(z) = c z + (1 - c)|z|`` with ``c = (1 + α)/2`` (docs/theory.md §1.1). A two-layer
bias-free leaky net whose even part stays zero computes ``c W_2 W_1 x``, and its twin
``√c (W_1, W_2)`` (α = 1) follows the same gradient flow in time ``c t`` (§2.4).
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from .. import _validate as validate
from .layers import Params, scale_params


def slope_factor(alpha):
    """``c = (1 + α) / 2`` for the leaky slope ``alpha`` = α in [0, 1] (one or an array)."""
    validate.slope(alpha, array_ok=True)
    return _slope_factor(alpha)


def _slope_factor(alpha):
    """:func:`slope_factor` unchecked."""
    return (1.0 + alpha) / 2.0


def linear_twin(params: Params, alpha) -> Params:
    """The linear twin ``√c · params`` (every weight and bias), c = :func:`slope_factor`.

    One slope α: one net. Slopes of shape (K,): K twins on a leading ensemble axis, member
    k scaled by ``√c_k`` (``params`` one net, or a batch of K nets, one per slope).
    """
    c = slope_factor(alpha)
    return scale_params(params, jnp.sqrt(c) if validate.traced(c) else np.sqrt(c))
