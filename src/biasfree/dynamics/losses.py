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
from ..core.nets import _leaky_relu, check_apply, forward_unchecked, net_after_first
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
    F = _forward_mirrored(params, X, alpha) if mirrored else forward_unchecked(params, X, alpha)
    L = _loss_value(F, Y, loss)
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
        return forward_unchecked(params, jnp.concatenate([X_half, -X_half], axis=0), alpha)
    if (len(params) == 2 and is_dense(params) and first.activation == "leaky"
            and first.b is None and params[1].b is None):
        if _is_one(alpha):  # the linear twin: no nonlinearity, so no (n, width) product at all
            return _two_layer_linear_mirrored(first.W, params[1].W, X_half)
        return _two_layer_mirrored(first.W, params[1].W, X_half, alpha)
    A = first.linear(X_half)  # any layer, a convolution included (docs/theory.md §7)
    Z = jnp.concatenate([A, -A], axis=0)
    return net_after_first(params, Z if first.bias is None else Z + first.bias, alpha)


def _is_one(alpha) -> bool:
    """Whether the slope ``alpha`` is the number 1 itself (a Python or NumPy scalar, as the
    training loop and the records pass the twin's): σ_1 is the identity, known when the program
    is traced. A traced slope (the net's, an array of the loop) is never taken for 1."""
    return isinstance(alpha, (int, float, np.integer, np.floating)) and float(alpha) == 1.0


def _two_layer_linear_mirrored(W1, W2, X_half):
    """:func:`_two_layer_mirrored` at α = 1, the linear twin: ``[o; -o]``, ``o = X₊(W₂W₁)ᵀ``.
    There ``e = (1-α)·relu(A)W₂ᵀ`` is 0 (``α o + e = o``, ``e - o = -o`` exactly for finite
    weights, the values the general formula gives), so the twin's step costs the (n, d)·(d, p)
    products of ``W₂W₁`` instead of the (n, d)·(d, width) ones of the net: p/width of them
    (docs/performance.md, "Session 8"). ``oᵀ = (W₂W₁)X₊ᵀ`` is formed as the net's ``Aᵀ`` is (the
    layout note of :func:`_two_layer_mirrored`)."""
    oT = (W2 @ W1) @ X_half.T
    return jnp.concatenate([oT, -oT], axis=1).T


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

    Layout: everything of n rows is formed transposed, ``Aᵀ = W₁X₊ᵀ`` (width, n), ``eᵀ``,
    ``oᵀ`` (p, n), so that the gradient's product ``∂L/∂W₁ = (∂L/∂Aᵀ) X₊`` is a plain (width, n)
    by (n, d) product. With ``A = X₊W₁ᵀ`` it is ``(∂L/∂A)ᵀ X₊``, a product contracting both
    operands' first axis, which XLA's CPU dot ran at half the rate (35 ms against 15–17 ms CPU
    at 5,000 × 400 × 256, float64; docs/performance.md, "Session 8"); the values are the same
    sums in another order.
    """
    eT = (1 - alpha) * (W2 @ _leaky_relu(W1 @ X_half.T, 0.0))
    oT = (W2 @ W1) @ X_half.T
    return jnp.concatenate([alpha * oT + eT, eT - oT], axis=1).T


def _sum(*terms):
    """The sum of the terms that are not None (None if all are: a symbolic zero)."""
    terms = [t for t in terms if t is not None]
    return sum(terms[1:], terms[0]) if terms else None


def _two_layer_mirrored_jvp(primals, tangents):
    W1, W2, X, alpha = primals
    dW1, dW2, dX, dalpha = (None if isinstance(t, SymbolicZero) else t for t in tangents)
    A = W1 @ X.T  # (width, n): transposed, as in _two_layer_mirrored (its layout note)
    R = _leaky_relu(A, 0.0)
    Rv = W2 @ R  # (p, n)
    u = W2 @ W1  # (p, d): the odd part is f_odd(x) = c u x
    o = u @ X.T  # (p, n)
    F = _two_layer_mirrored(W1, W2, X, alpha)  # itself, so that higher derivatives use this rule
    # tangents of Aᵀ, u, oᵀ and W₂relu(±Aᵀ); zero tangents (symbolic) cost nothing
    dA = _sum(None if dW1 is None else dW1 @ X.T, None if dX is None else W1 @ dX.T)
    du = _sum(None if dW1 is None else W2 @ dW1, None if dW2 is None else dW2 @ W1)
    zero = jnp.zeros_like(o)
    do = _sum(zero, None if du is None else du @ X.T, None if dX is None else u @ dX.T)
    dR = zero if dW2 is None else dW2 @ R
    dp = dR if dA is None else W2 @ jnp.where(A > 0, dA, 0.0) + dR
    dm = dR if dA is None else W2 @ jnp.where(A >= 0, dA, 0.0) + dR  # σ_α'(0) = α at -x₊
    dF = jnp.concatenate([alpha * do + (1 - alpha) * dp, (1 - alpha) * dm - do], axis=1)
    if dalpha is not None:
        dF = dF + dalpha * jnp.concatenate([o - Rv, -Rv], axis=1)
    return F, dF.T


_two_layer_mirrored.defjvp(_two_layer_mirrored_jvp, symbolic_zeros=True)


@validate.array_args("X_half", "Y")
@precise
def objective_mirrored(params: Params, X_half, Y, alpha, weight_decay=0.0, loss: str = "mse"):
    """:func:`objective` on the mirrored inputs ``[X₊; -X₊]`` given ``X_half`` = X₊
    (n, d) and all targets ``Y`` (2n, p) in the same row order (see module doc)."""
    _check_objective(params, X_half, Y, alpha, weight_decay, loss, mirrored=True)
    return objective_and_loss(params, X_half, Y, alpha, weight_decay, loss, mirrored=True)[0]
