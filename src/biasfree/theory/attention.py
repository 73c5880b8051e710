"""Closed forms for linear attention trained on in-context linear regression (docs/theory.md
§10.3–10.4): the population moments of the cubic feature, the merged model's two fixed points
and sigmoid, the separate model's scalar equations per principal component and the
principal-component-regression maps its plateaus implement.

Tasks ``w ~ N(0, I_D)``, inputs ``x ~ N(0, Λ)`` (``cov`` = Λ), N context tokens (``n_ctx``),
``z = vec((1/N) Σ_n y_n x_n x_qᵀ)``. By Isserlis' theorem (§10.3)

    E[z y_q] = vec(Λ²),   E[z zᵀ] = M ⊗ Λ,   M = ((N+1)/N) Λ² + (tr Λ / N) Λ,   E[y_q²] = tr Λ,

(entry ``(i·D + j, k·D + l)`` of the Kronecker product is ``M_ik Λ_jl``). Every function is
NumPy on numbers: no training here (``dynamics`` simulates, this predicts).
"""

from __future__ import annotations

import numpy as np

from .. import _validate as validate


def _cov(cov, d: int | None = None) -> np.ndarray:
    C = validate.finite_array("cov", cov, ndim=2)
    if C.shape[0] != C.shape[1] or (d is not None and C.shape[0] != d):
        raise ValueError(f"cov must be a square (D, D) covariance, got shape {C.shape}")
    if not np.allclose(C, C.T) or np.linalg.eigvalsh(C).min() <= 0:
        raise ValueError("cov must be symmetric positive definite")
    return C


def feature_moments(cov, n_ctx: int) -> tuple[np.ndarray, np.ndarray, float]:
    """``(Σ_zz (D², D²), σ_zy (D²,), E[y_q²])`` of the cubic feature (module doc)."""
    L = _cov(cov)
    N = validate.integer("n_ctx", n_ctx, 1)
    M = (N + 1) / N * L @ L + np.trace(L) / N * L
    return np.kron(M, L), (L @ L).reshape(-1), float(np.trace(L))


def merged_fixed_points(cov, n_ctx: int) -> tuple[float, float]:
    """The merged model's two population losses (§10.3): at zero weights ``L₀ = ½ tr Λ`` and at
    the minimum ``L* = ½ (tr Λ − σᵀ Σ⁻¹ σ)``; white Λ = I: ``D/2`` and ``D (D+1) / (2 (N+D+1))``."""
    S, s, Eyy = feature_moments(cov, n_ctx)
    return 0.5 * Eyy, 0.5 * (Eyy - s @ np.linalg.solve(S, s))


def merged_rate(cov, n_ctx: int) -> tuple[float, float, np.ndarray]:
    """``(s, a, r)``: the strength ``s = ‖σ‖``, the feature variance ``a = rᵀΣ r`` along the
    direction ``r = σ/s`` of the drop (§10.3); white Λ: ``s = √D``, ``a = (N+D+1)/N``."""
    S, sig, _ = feature_moments(cov, n_ctx)
    s = float(np.linalg.norm(sig))
    r = sig / s
    return s, float(r @ S @ r), r


def twin_u0(W1, W2, r) -> float:
    """The effective initial strength ``u₀ = ¼ ‖W₁ r + W₂ᵀ‖²`` of a small unaligned init
    (W₁ (H, D²), W₂ (1, H)) along the drop's direction ``r`` (§10.3): the linear phase grows
    ``W₁ r + W₂ᵀ`` as ``e^{st}`` and damps ``W₁ r − W₂ᵀ``."""
    g = np.asarray(W1, float) @ np.asarray(r, float) + np.asarray(W2, float).reshape(-1)
    return 0.25 * float(g @ g)


def sigmoid_flow(t, s: float, a: float, u0: float) -> np.ndarray:
    """The merged twin's strength under gradient flow, ``du/dt = 2u (s − a u)``:
    ``u(t) = (s/a) / (1 + (s/(a u₀) − 1) e^{−2st})`` (§10.3)."""
    t = np.asarray(t, float)
    return (s / a) / (1.0 + (s / (a * u0) - 1.0) * np.exp(-2.0 * s * t))


def sigmoid_gd(steps: int, s: float, a: float, u0: float, lr: float) -> np.ndarray:
    """The same under gradient descent at step ``lr`` (balanced, aligned: ``u = p²``,
    ``p_{k+1} = p_k (1 + η (s − a u_k))``): ``u_k``, k = 0..steps (§10.3)."""
    u = np.empty(steps + 1)
    u[0] = u0
    for k in range(steps):
        u[k + 1] = u[k] * (1.0 + lr * (s - a * u[k])) ** 2
    return u


def merged_loss(u, s: float, a: float, L0: float) -> np.ndarray:
    """The population loss ``L₀ − s u + ½ a u²`` at strength u along the drop's direction."""
    u = np.asarray(u, float)
    return L0 - s * u + 0.5 * a * u**2


def components(cov, n_ctx: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(λ, e, s, a)`` per principal component of Λ, largest first (§10.4): eigenvalues λ_i,
    eigenvectors e_i (columns), strengths ``s_i = λ_i²`` and variances ``a_i = m_i λ_i`` of
    ``z_ii = e_iᵀ Z e_i``, ``m_i = ((N+1)/N) λ_i² + (tr Λ/N) λ_i``."""
    L = _cov(cov)
    N = validate.integer("n_ctx", n_ctx, 1)
    lam, e = np.linalg.eigh(L)
    lam, e = lam[::-1], e[:, ::-1]
    m = (N + 1) / N * lam**2 + np.sum(lam) / N * lam
    return lam, e, lam**2, m * lam


def plateau_losses(cov, n_ctx: int) -> np.ndarray:
    """``L_k = ½ (tr Λ − Σ_{i≤k} s_i²/a_i)``, k = 0..D: the population loss with the top k
    components learned (the separate model's plateaus, §10.4)."""
    lam, _, s, a = components(cov, n_ctx)
    return 0.5 * (np.sum(lam) - np.concatenate([[0.0], np.cumsum(s**2 / a)]))


def separate_gd(steps: int, s, a, w0, lr: float) -> np.ndarray:
    """Per component, a rank-one head on it from the balanced aligned init ``γ = κ = ρ = w₀``:
    ``w_{k+1} = w_k + η w_k² (s − a w_k³)``; returns the strengths ``u = w³`` (steps + 1, D)
    (§10.4; its η → 0 limit is ``du/dt = 3 u^{4/3} (s − a u)``)."""
    s, a = np.asarray(s, float), np.asarray(a, float)
    w = np.empty((steps + 1, s.size))
    w[0] = w0
    for k in range(steps):
        w[k + 1] = w[k] + lr * w[k] ** 2 * (s - a * w[k] ** 3)
    return w**3


def separate_loss(u, cov, n_ctx: int) -> np.ndarray:
    """The population loss ``½ (tr Λ − Σ_i (2 s_i u_i − a_i u_i²))`` at strengths u (..., D)."""
    lam, _, s, a = components(cov, n_ctx)
    u = np.asarray(u, float)
    return 0.5 * (np.sum(lam) - np.sum(2 * s * u - a * u**2, axis=-1))


def pcr_map(cov, n_ctx: int, k: int) -> np.ndarray:
    """The in-context map ``B_k = Σ_{i≤k} (s_i/a_i) e_i e_iᵀ`` (D, D) (§10.4): the best
    ``ŷ = (1/N) Σ_n y_n x_nᵀ B x_q`` on the top k principal components, principal component
    regression in context (``s_i/a_i = N/((N+1) λ_i + tr Λ) → 1/λ_i`` as N → ∞)."""
    lam, e, s, a = components(cov, n_ctx)
    k = validate.integer("k", k, 0, lam.size)
    return (e[:, :k] * (s[:k] / a[:k])) @ e[:, :k].T


def crossing_time(t, loss, level: float) -> float:
    """The first time ``loss`` falls to ``level``, linearly interpolated between records
    (NaN if it never does)."""
    t, loss = np.asarray(t, float), np.asarray(loss, float)
    i = np.nonzero(loss <= level)[0]
    if i.size == 0:
        return float("nan")
    i = int(i[0])
    if i == 0:
        return float(t[0])
    return float(t[i - 1] + (t[i] - t[i - 1]) * (loss[i - 1] - level) / (loss[i - 1] - loss[i]))
