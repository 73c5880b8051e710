"""Losses and the training objective (THEORY.md §0).

- MSE: ``L = (1/(2N)) Σ_n ||y_n - f(x_n)||²``.
- Logistic, labels y in {-1, +1}: ``L = (1/N) Σ_n log(1 + exp(-y_n f(x_n)))``.
Both satisfy ``ℓ(-y, -f) = ℓ(y, f)``, the property behind the pair identity (§2.3, §2.8).
The objective adds weight decay ``(λ/2) Σ ||θ||²`` over every weight and bias.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from .nets import Params, forward

LOSSES = ("mse", "logistic")


def check_loss(name: str) -> None:
    """Raise ``ValueError`` unless ``name`` is one of :data:`LOSSES`."""
    if name not in LOSSES:
        raise ValueError(f"unknown loss {name!r}: choose one of {', '.join(LOSSES)}")


def loss_value(F, Y, loss: str = "mse"):
    """Data loss of outputs ``F`` (N, p) = f(x_n) against targets ``Y`` (N, p) = y_n:
    ``loss="mse"``: ``(1/(2N)) Σ_n ||y_n - f(x_n)||²``; ``loss="logistic"`` (labels ±1):
    ``(1/N) Σ_n Σ_j log(1 + exp(-y_nj f_j(x_n)))``."""
    if loss == "mse":
        return 0.5 * jnp.mean(jnp.sum((Y - F) ** 2, axis=-1))
    if loss == "logistic":
        return jnp.mean(jnp.sum(jax.nn.softplus(-Y * F), axis=-1))
    raise ValueError(f"unknown loss {loss!r}: choose one of {', '.join(LOSSES)}")


def sq_norm(params: Params):
    """``Σ ||θ||²`` over every array of ``params``."""
    return sum(jnp.sum(a**2) for a in jax.tree_util.tree_leaves(params))


def objective(params: Params, X, Y, alpha, weight_decay=0.0, loss: str = "mse"):
    """``L(θ) + (λ/2) ||θ||²`` with λ = ``weight_decay``, slope ``alpha``."""
    return loss_value(forward(params, X, alpha), Y, loss) + 0.5 * weight_decay * sq_norm(params)
