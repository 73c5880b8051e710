"""Losses and the training objective (docs/theory.md §0).

- MSE: ``L = (1/(2N)) Σ_n ||y_n - f(x_n)||²``.
- Logistic, labels y in {-1, +1}: ``L = (1/N) Σ_n log(1 + exp(-y_n f(x_n)))``.

Both satisfy ``ℓ(-y, -f) = ℓ(y, f)``, the property behind the pair identity (§2.3, §2.8).
The objective adds weight decay ``(λ/2) Σ ||θ||²`` over every weight and bias.

Mirrored inputs ``X = [X₊; -X₊]`` (§0 "Symmetric inputs, computed once"):
:func:`forward_mirrored` computes ``f`` from one product ``A = X₊W₁ᵀ`` (pre-activations
``[A; -A] + b₁``) and :func:`objective_mirrored` differentiates through it, equal to the
general path to round-off, the convention ``σ_α'(0) = α`` included.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax.custom_derivatives import SymbolicZero

from .. import _validate as validate
from ..core.layers import Params, is_dense
from ..core.nets import _forward, _leaky_relu, check_apply, net_after_first
from ..core.precision import precise

LOSSES = ("mse", "logistic")


def check_labels(Y, loss: str, name: str = "Y") -> None:
    """For ``loss="logistic"``, refuse targets that are not ±1 (:func:`biasfree._validate.labels`)."""
    if loss == "logistic":
        validate.labels(name, Y)


def check_targets(Y, n_rows: int, p: int, loss: str, name: str = "Y"):
    """``Y`` (n_rows, p) finite (values unchecked when traced), labels ±1 for logistic."""
    validate.finite_array(name, Y, ndim=2)
    if np.shape(Y) != (n_rows, p):
        raise ValueError(f"{name} has shape {np.shape(Y)} but params gives outputs of shape ({n_rows}, {p}): "
                         "one target row of p values per input, and a net with as many outputs as Y "
                         "has columns")
    check_labels(Y, loss, name)


@precise
def loss_value(F, Y, loss: str = "mse"):
    """Data loss of outputs ``F`` (N, p) = f(x_n) against targets ``Y`` (N, p) = y_n:
    ``loss="mse"``: ``(1/(2N)) Σ_n ||y_n - f(x_n)||²``; ``loss="logistic"`` (labels ±1):
    ``(1/N) Σ_n Σ_j log(1 + exp(-y_nj f_j(x_n)))``."""
    validate.choice("loss", loss, LOSSES)
    F = validate.finite_array("F", F, ndim=(1, 2))
    Y = validate.finite_array("Y", Y, ndim=(1, 2))
    if np.shape(F) != np.shape(Y):
        raise ValueError(f"F has shape {np.shape(F)} but Y has {np.shape(Y)}: outputs and targets "
                         "must match row for row")
    check_labels(Y, loss)
    return _loss_value(F, Y, loss)


def _loss_value(F, Y, loss: str):
    """:func:`loss_value` unchecked."""
    if loss == "mse":
        return 0.5 * jnp.mean(jnp.sum((Y - F) ** 2, axis=-1))
    return jnp.mean(jnp.sum(jax.nn.softplus(-Y * F), axis=-1))


def check_run_args(params, X, Y, alpha, loss, *, mirrored=False, x_name="X") -> int:
    """The checks :func:`objective` and :func:`~biasfree.dynamics.trajectory.observe` share:
    a known ``loss``, inputs ``X`` for the net, slope ``alpha``, targets ``Y`` of one row
    per input (twice ``X``'s rows when ``mirrored``: X is X₊). Returns the output count p."""
    validate.choice("loss", loss, LOSSES)
    check_apply(params, X, alpha, x_name)
    p = params[-1].n_out
    check_targets(Y, np.shape(X)[0] * (2 if mirrored else 1), p, loss)
    return p


def objective_and_loss(params, X, Y, alpha, weight_decay, loss, mirrored=False):
    """``(J(θ), L(θ))``: the objective and, as auxiliary output, the data loss; with
    ``mirrored`` X is X₊ and :func:`forward_mirrored` halves the first layer's products."""
    L = _loss_value(_forward_mirrored(params, X, alpha) if mirrored else _forward(params, X, alpha), Y, loss)
    return L + 0.5 * weight_decay * sq_norm(params), L


def _check_objective(params, X, Y, alpha, weight_decay, loss, mirrored=False):
    """Checks of :func:`objective` (``mirrored``: ``X`` is X_half, ``Y`` has twice its rows)."""
    check_run_args(params, X, Y, alpha, loss, mirrored=mirrored, x_name="X_half" if mirrored else "X")
    validate.nonnegative("weight_decay", weight_decay, scalar=True, why="λ of (λ/2)||θ||²")


def sq_norm(params: Params):
    """``Σ ||θ||²`` over every array of ``params`` (internal: the objectives' penalty)."""
    return sum(jnp.sum(a**2) for a in jax.tree_util.tree_leaves(params))


@validate.array_args("X", "Y")
@precise
def objective(params: Params, X, Y, alpha, weight_decay=0.0, loss: str = "mse"):
    """``L(θ) + (λ/2) ||θ||²`` with λ = ``weight_decay``, slope ``alpha``."""
    _check_objective(params, X, Y, alpha, weight_decay, loss)
    return objective_and_loss(params, X, Y, alpha, weight_decay, loss)[0]


@validate.array_args("X_half")
@precise
def forward_mirrored(params: Params, X_half, alpha):
    """``f`` on the mirrored inputs ``[X₊; -X₊]`` from ``X_half`` = X₊ (n, d) alone.

    Returns (2n, p), rows in the order ``[f(X₊); f(-X₊)]``: equal to
    ``forward(params, [X₊; -X₊], alpha)`` to round-off, with one first-layer product
    ``A = X₊W₁ᵀ``; the pre-activations are ``[A; -A] + b₁`` (module doc).
    """
    if X_half is None:
        raise TypeError("X_half=None: pass the positive half X₊ of the inputs, an array of shape (n, d)")
    check_apply(params, X_half, alpha, "X_half")
    return _forward_mirrored(params, X_half, alpha)


def _forward_mirrored(params: Params, X_half, alpha):
    """:func:`forward_mirrored` unchecked."""
    first = params[0]
    if not first.is_linear:  # attention: f(−X₊) is not read off X₊'s products
        return _forward(params, jnp.concatenate([X_half, -X_half], axis=0), alpha)
    if (len(params) == 2 and is_dense(params) and first.activation == "leaky"
            and first.b is None and params[1].b is None):
        return _two_layer_mirrored(first.W, params[1].W, X_half, alpha)
    A = first.linear(X_half)  # any layer, a convolution included (docs/theory.md §7)
    Z = jnp.concatenate([A, -A], axis=0)
    return net_after_first(params, Z if first.bias is None else Z + first.bias, alpha)


@jax.custom_jvp
def _two_layer_mirrored(W1, W2, X_half, alpha):
    """``[f(X₊); f(-X₊)]`` of the two-layer bias-free net ``f(x) = W₂ σ_α(W₁x)`` (§0):

        f(x₊) = α o + e,   f(-x₊) = e - o,   e = (1-α) relu(A) W₂ᵀ,   o = X₊ (W₂W₁)ᵀ,

    with ``A = X₊W₁ᵀ``: one (n, width) nonlinearity for both halves (about twice as fast
    as the general path; docs/performance.md, "Symmetric data"). The JVP below
    differentiates the mirror half with ``σ_α'(0) = α`` (mask ``A >= 0``), as the
    general path does, so gradients and Jacobians in every argument equal the general
    path's, a pre-activation exactly at 0 included. Second derivatives at such a point
    (a zero weight row) take the one-sided slope from the positive half in the term
    ``relu(A)·dW₂`` (an element of the Clarke subdifferential, as any choice there is);
    keeping ``α`` there too costs a second (n, width) pass, 5-10% of every step.
    """
    e = (1 - alpha) * (_leaky_relu(X_half @ W1.T, 0.0) @ W2.T)
    o = X_half @ (W2 @ W1).T
    return jnp.concatenate([alpha * o + e, e - o], axis=0)


def _sum(*terms):
    """The sum of the terms that are not None (None if all are: a symbolic zero)."""
    terms = [t for t in terms if t is not None]
    return sum(terms[1:], terms[0]) if terms else None


def _two_layer_mirrored_jvp(primals, tangents):
    W1, W2, X, alpha = primals
    dW1, dW2, dX, dalpha = (None if isinstance(t, SymbolicZero) else t for t in tangents)
    A = X @ W1.T
    R = _leaky_relu(A, 0.0)
    Rv = R @ W2.T
    u = (W2 @ W1).T  # (d, p): the odd part is f_odd(x) = c uᵀx
    o = X @ u
    F = _two_layer_mirrored(W1, W2, X, alpha)  # itself, so that higher derivatives use this rule
    # tangents of A, u, o and relu(±A)W₂ᵀ; zero tangents (symbolic) cost nothing
    dA = _sum(None if dW1 is None else X @ dW1.T, None if dX is None else dX @ W1.T)
    du = _sum(None if dW1 is None else (W2 @ dW1).T, None if dW2 is None else (dW2 @ W1).T)
    zero = jnp.zeros_like(o)
    do = _sum(zero, None if du is None else X @ du, None if dX is None else dX @ u)
    dR = zero if dW2 is None else R @ dW2.T
    dp = dR if dA is None else jnp.where(A > 0, dA, 0.0) @ W2.T + dR
    dm = dR if dA is None else jnp.where(A >= 0, dA, 0.0) @ W2.T + dR  # σ_α'(0) = α at -x₊
    dF = jnp.concatenate([alpha * do + (1 - alpha) * dp, (1 - alpha) * dm - do], axis=0)
    if dalpha is not None:
        dF = dF + dalpha * jnp.concatenate([o - Rv, -Rv], axis=0)
    return F, dF


_two_layer_mirrored.defjvp(_two_layer_mirrored_jvp, symbolic_zeros=True)


@validate.array_args("X_half", "Y")
@precise
def objective_mirrored(params: Params, X_half, Y, alpha, weight_decay=0.0, loss: str = "mse"):
    """:func:`objective` on the mirrored inputs ``[X₊; -X₊]`` given ``X_half`` = X₊
    (n, d) and all targets ``Y`` (2n, p) in the same row order (see module doc)."""
    _check_objective(params, X_half, Y, alpha, weight_decay, loss, mirrored=True)
    return objective_and_loss(params, X_half, Y, alpha, weight_decay, loss, mirrored=True)[0]
