"""Two-layer linear nets from balanced but unaligned init: the exact matrix Riccati solution.

Fukumizu (1998); Braun, Dominé, Fitzgerald & Saxe (2022). Net ``f(x) = W_2 W_1 x``,
``W_1`` (n, d), ``W_2`` (p, n), loss ``1/(2N) Σ ||y - W_2 W_1 x||²``, weight decay λ.

Conditions: (i) whitened inputs, ``Σ_xx = XᵀX/N = I``; (ii) balanced init,
``W_1 W_1ᵀ = W_2ᵀ W_2`` (gradient flow keeps it, also with weight decay). Nothing
else: any width n, any rank of ``W_1``, ``W_2`` or ``Σ_yx``, no invertibility of
``Σ_yx`` (the matrix functions below are entire functions of F).

Derivation. Stack ``Q = [W_1ᵀ; W_2]`` ((d+p) × n) and let
``F = [[0, Σ_xy], [Σ_yx, 0]] - λ I`` (symmetric). Gradient flow
``dW_1/dt = W_2ᵀ(Σ_yx - W_2 W_1) - λ W_1``, ``dW_2/dt = (Σ_yx - W_2 W_1) W_1ᵀ - λ W_2``
reads, using balance to write ``W_1ᵀ W_2ᵀ W_2 = ½ W_1ᵀ QᵀQ`` and
``W_2 W_1 W_1ᵀ = ½ W_2 QᵀQ``,

    dQ/dt = F Q - ½ Q QᵀQ,   so  M = QQᵀ  obeys  dM/dt = F M + M F - M²,

a matrix Riccati equation with the closed-form solution (check by differentiating)

    M(t) = e^{Ft} Q_0 [I + Q_0ᵀ φ_t(F) Q_0]^{-1} Q_0ᵀ e^{Ft},   φ_t(λ) = (e^{2λt} - 1)/(2λ),

(φ_t(0) = t). The bracket is I plus a positive semi-definite matrix, so always
invertible. The blocks of M are ``W_1ᵀW_1``, ``W_2 W_2ᵀ`` and the product
``P = W_2 W_1`` (lower-left, p × d), which gives the loss
``L(t) = ½ ||Σ_yx - P(t)||_F² + ½ (tr<y yᵀ> - ||Σ_yx||_F²)``.

Numerics: in the eigenbasis of F (eigenvalues ±s_i and 0, shifted by -λ) the
growing factors are pulled out, ``D = e^{max(λ_j,0) t}``, ``Ẽ = e^{min(λ_j,0) t}``,
``φ̃ = φ_t / D²`` ∈ (0, t], so that with ``Z = Oᵀ Q_0`` and ``A = φ̃^{1/2} D Z``

    M = O Ẽ φ̃^{-1/2} [A (I + AᵀA)^{-1} Aᵀ] φ̃^{-1/2} Ẽ Oᵀ,   A (I + AᵀA)^{-1} Aᵀ = Q_A Q_Aᵀ,

where ``[A; I] = [Q_A; Q_I] R`` (Householder QR, rows sorted by size: A is graded, its
rows differ by factors e^{λt}, and this is the row-wise stable way). Long times are
reached by restarting from M(t) (the flow is a semigroup and conserves rank Q), so no
factor exceeds e^{100}.
"""

from __future__ import annotations

import numpy as np

from .. import _validate as v
from ..core.layers import Layer, Params, takes_net
from .inits import _imbalance, imbalance
from .modes import check_decay, check_y_power

_MAX_EXPONENT = 100.0


def _F(Sigma_yx, weight_decay: float):
    S = np.asarray(Sigma_yx, dtype=float)
    F = np.block([[np.zeros((S.shape[1],) * 2), S.T], [S, np.zeros((S.shape[0],) * 2)]])
    return F - weight_decay * np.eye(F.shape[0])


def _factor(M, n: int):
    """``Q`` with ``QQᵀ = M`` and n columns: the flow conserves rank(Q) = n, so the other
    eigenvalues of M are round-off and are dropped."""
    w, V = np.linalg.eigh(M)
    w, V = w[-n:], V[:, -n:]
    return V * np.sqrt(np.maximum(w, 0.0))


def _step(lam, O, Q0, t: float):
    """Riccati solution at time t from ``M(0) = Q0 Q0ᵀ``, F = O diag(lam) Oᵀ."""
    if t == 0.0:
        return Q0 @ Q0.T
    Z = O.T @ Q0  # Q_0 in F's eigenbasis
    lt = lam * t
    D = np.exp(np.maximum(lt, 0.0))
    Et = np.exp(np.minimum(lt, 0.0))
    # φ̃ = φ_t / D²: λ>0 -> (1 - e^{-2λt})/(2λ); λ<=0 -> (e^{2λt} - 1)/(2λ) (t at λ = 0)
    safe = np.where(lam == 0.0, 1.0, lam)
    phit = np.where(lam > 0, -np.expm1(-2.0 * lt) / (2.0 * safe),
                    np.where(lam == 0.0, t, np.expm1(2.0 * lt) / (2.0 * safe)))
    A = (np.sqrt(phit) * D)[:, None] * Z
    if np.linalg.norm(A, 2) <= 1.0:
        # a short step: I + AᵀA has condition <= 2, so M̃ = G (I + AᵀA)^{-1} Gᵀ with
        # G = e^{Λt} Z is accurate to a few ε ||G||². (The QR form below knows Q_A only to
        # ε absolute, which φ̃^{-1/2} ~ t^{-1/2} would amplify when t is small, e.g. a
        # round-off-length step after a restart.)
        G = (Et * D)[:, None] * Z
        return O @ (G @ np.linalg.solve(np.eye(Z.shape[1]) + A.T @ A, G.T)) @ O.T
    # A (I + AᵀA)^{-1} Aᵀ = Q_A Q_Aᵀ with [A; I] = [Q_A; Q_I] R. A is graded (rows differ
    # by e^{λt}); Householder QR with rows sorted by decreasing norm is row-wise stable.
    order = np.argsort(-np.linalg.norm(A, axis=1), kind="stable")
    Qs, _ = np.linalg.qr(np.concatenate([A[order], np.eye(A.shape[1])], axis=0))
    QA = Qs[: A.shape[0]][np.argsort(order)]
    scale = Et / np.sqrt(phit)
    return O @ (scale[:, None] * (QA @ QA.T) * scale[None, :]) @ O.T


def riccati_gram(t, Q0, Sigma_yx, *, weight_decay: float = 0.0,
                 balance_tol: float = 1e-10) -> np.ndarray:
    """``M(t) = Q(t) Q(t)ᵀ`` for ``dM/dt = F M + M F - M²``, ``M(0) = Q_0 Q_0ᵀ`` (module doc).

    ``t`` times (T,) ≥ 0, ``Q0`` = ``[W_1ᵀ; W_2]`` ((d+p) × n) of a balanced net,
    ``Sigma_yx`` (p, d) = <y xᵀ> (whitened inputs), ``weight_decay`` λ. The net must be
    balanced, ``W_1 W_1ᵀ = W_2ᵀ W_2`` to ``balance_tol`` relative (checked: otherwise the
    result is not the gradient flow). Returns (T, d+p, d+p).
    """
    lam_decay = check_decay(weight_decay)
    t = np.atleast_1d(v.times("t", t, ndim=(0, 1)))
    S = v.finite_array("Sigma_yx", Sigma_yx, ndim=2)
    p, d = S.shape
    Q0 = v.finite_array("Q0", Q0, ndim=2)
    if Q0.shape[0] != d + p:
        raise ValueError(f"Q0 must have d + p = {d + p} rows ([W_1ᵀ; W_2] for Sigma_yx of shape "
                         f"{S.shape}), got shape {Q0.shape}")
    _check_balanced("Q0", imbalance((Layer(Q0[:d].T), Layer(Q0[d:]))), balance_tol)
    return _gram(t, Q0, S, lam_decay)


def _check_balanced(what: str, gap: float, balance_tol) -> None:
    """Refuse a net of relative :func:`~biasfree.theory.imbalance` ``gap`` above ``balance_tol``."""
    tol = v.nonnegative("balance_tol", balance_tol, scalar=True)
    if gap > tol:
        raise ValueError(f"{what} is not balanced (relative imbalance {gap:.2e} > balance_tol={tol:g}): "
                         "the Riccati solution needs W1 W1ᵀ = W2ᵀ W2; build one with "
                         "biasfree.theory.balanced_init or aligned_init")


def _gram(t, Q0, S, lam_decay: float) -> np.ndarray:
    """:func:`riccati_gram` on checked input (``t`` (T,), ``Q0``, ``S`` = Σ_yx, λ)."""
    lam, O = np.linalg.eigh(_F(S, lam_decay))
    chunk = _MAX_EXPONENT / max(np.max(np.abs(lam)), 1e-300)
    out = np.empty((t.size, Q0.shape[0], Q0.shape[0]))
    sv = np.linalg.svd(Q0, compute_uv=False)
    n = int(np.sum(sv > 1e-13 * max(sv[0] if sv.size else 0.0, 1e-300)))  # rank of Q, conserved
    Q_base, t_base = Q0, 0.0
    for j in np.argsort(t):
        tj = float(t[j])
        while tj - t_base > chunk:  # restart from M(t_base + chunk): the flow is a semigroup
            Q_base, t_base = _factor(_step(lam, O, Q_base, chunk), n), t_base + chunk
        out[j] = _step(lam, O, Q_base, tj - t_base)
    return out


@takes_net(bias_free=True)
def unaligned_product(t, params: Params, Sigma_yx, *, weight_decay: float = 0.0,
                      balance_tol: float = 1e-10) -> np.ndarray:
    """Product ``P(t) = W_2(t) W_1(t)`` (T, p, d) of a two-layer linear net under gradient
    flow, exact from any balanced init (aligned or not), whitened inputs (module doc).

    ``t`` times (T,), ``params`` the initial net (W_1 (n, d), W_2 (p, n); checked
    balanced to ``balance_tol``), ``Sigma_yx`` (p, d) = YᵀX/N, ``weight_decay`` λ.
    ``β_eff(t) = P(t)ᵀ``.
    """
    if len(params) != 2:
        raise ValueError(f"the Riccati solution is for two-layer nets, got depth {len(params)}")
    W1, W2 = (np.asarray(layer.matrix, float) for layer in params)
    S, d = v.finite_array("Sigma_yx", Sigma_yx, ndim=2), W1.shape[1]
    if S.shape != (W2.shape[0], d):
        raise ValueError(f"Sigma_yx must have shape (p, d) = {(W2.shape[0], d)} to match params "
                         f"(W_1 (n, d), W_2 (p, n)), got {S.shape}")
    _check_balanced("init", _imbalance(params), balance_tol)  # params checked above
    t = np.atleast_1d(v.times("t", t, ndim=(0, 1)))
    return _unaligned_product(t, params, S, check_decay(weight_decay))


def _unaligned_product(t, params: Params, Sigma_yx, weight_decay: float) -> np.ndarray:
    """:func:`unaligned_product` unchecked: ``t`` (T,), a balanced two-layer net, ``Sigma_yx``
    (p, d) and λ = ``weight_decay`` already checked."""
    W1, W2 = (np.asarray(layer.matrix, float) for layer in params)
    M = _gram(t, np.concatenate([W1.T, W2], axis=0), Sigma_yx, weight_decay)
    return M[:, W1.shape[1]:, :W1.shape[1]]


def unaligned_loss(t, params: Params, Sigma_yx, y_power: float, *, weight_decay: float = 0.0,
                   balance_tol: float = 1e-10) -> np.ndarray:
    """``L(t) = ½ ||Σ_yx - P(t)||_F² + ½ (y_power - ||Σ_yx||_F²)`` with P(t) from
    :func:`unaligned_product` (whitened inputs; ``y_power`` = tr<y yᵀ>). Arguments as in
    :func:`unaligned_product`."""
    P = unaligned_product(t, params, Sigma_yx, weight_decay=weight_decay, balance_tol=balance_tol)
    S = np.asarray(Sigma_yx, dtype=float)
    check_y_power(y_power, np.linalg.svd(S, compute_uv=False))
    return 0.5 * np.sum((S - P) ** 2, axis=(1, 2)) + 0.5 * (float(y_power) - np.sum(S**2))
