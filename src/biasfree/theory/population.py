"""Population (test) loss in closed form for Gaussian inputs and linear(-izable) nets.

Inputs ``x ~ N(0, Σ)`` in d dimensions; the network computes (or, for a leaky net
with zero even part, its odd part is) the linear map ``f(x) = βᵀ x``, ``β`` (d, p) —
e.g. ``Trajectory.beta`` or ``Curve.beta``. The loss is the mean half squared error
``R(β) = E ½ ||y - βᵀx||²`` (each function gives its formula), for a linear teacher
``y = T x + ε`` or the paper's sine teacher ``y = wᵀx + sin(k wᵀx) + ε`` (p = 1),
``ε ~ N(0, σ² I_p)``.

The sine forms follow, with ``z = wᵀx ~ N(0, τ²)``, ``τ² = wᵀΣw``, from the Gaussian
identities (ζ ~ N(0, 1)) ``E sin(a ζ) = 0``, ``E[ζ sin(a ζ)] = a e^{-a²/2}``,
``E sin²(a ζ) = (1 - e^{-2a²})/2`` and ``E[x g(z)] = Σw E[z g(z)] / τ²`` (Stein). The
floor :func:`sine_linear_floor` is what no linear map — hence no two-layer bias-free net,
on the odd target (docs/theory.md §1.3) — can remove.

A two-layer bias-free net whose even part is not zero, ``x ~ N(0, I)``: odd and even
parts are orthogonal, so ``R = R(β_eff) + ½ E f_even²`` with
``E f_even² = (1-c)² Σ_kl v_k v_l E|w_kᵀx||w_lᵀx|`` and the arc-cosine kernel
``E|w_kᵀx||w_lᵀx| = (2/π) ||w_k|| ||w_l|| (sqrt(1 - ρ²) + ρ arcsin ρ)``,
``ρ = cos∠(w_k, w_l)`` (:func:`population_loss_two_layer`).
"""

from __future__ import annotations

import numpy as np

from .. import _validate as chk
from ..core.layers import Params, takes_net
from ..core.twin import slope_factor


def _cov(cov, d: int, against: str) -> np.ndarray:
    if cov is None:
        return np.eye(d)
    S = chk.finite_array("cov", cov, ndim=2)
    if S.shape != (d, d):
        raise ValueError(f"cov must have shape ({d}, {d}) to match {against} (d = {d}), got {S.shape}")
    scale = max(float(np.max(np.abs(S))), 1e-300)
    if np.max(np.abs(S - S.T)) > 1e-10 * scale or np.linalg.eigvalsh(0.5 * (S + S.T))[0] < -1e-10 * scale:
        raise ValueError("cov must be a covariance: symmetric and positive semi-definite (e.g. "
                         "A @ A.T); a loss from anything else can be negative")
    return S


def _noise(noise) -> float:
    return chk.nonnegative("noise", noise, scalar=True, why="the target-noise standard deviation σ")


def population_loss_linear(beta, T, cov=None, noise: float = 0.0):
    """``R(β) = ½ tr((T - βᵀ) Σ (T - βᵀ)ᵀ) + ½ p σ²`` for ``y = T x + ε`` (module doc).

    ``beta`` (..., d, p) the net's linear map(s), ``T`` (p, d) the teacher, ``cov`` Σ
    (d, d) of the inputs (identity if None), ``noise`` σ the target-noise standard
    deviation. Returns an array of shape ``beta.shape[:-2]``.
    """
    T = chk.finite_array("T", T, ndim=2)
    beta = chk.finite_array("beta", beta, ndim=tuple(range(2, 8)))
    noise = _noise(noise)
    if beta.shape[-2:] != (T.shape[1], T.shape[0]):
        raise ValueError(f"beta must have shape (..., d, p) = (..., {T.shape[1]}, {T.shape[0]}) "
                         f"for a teacher T of shape {T.shape}; got {beta.shape}")
    S = _cov(cov, T.shape[1], "T")
    D = T.T - beta  # (..., d, p)
    return 0.5 * np.einsum("...dp,de,...ep->...", D, S, D) + 0.5 * T.shape[0] * noise**2


def _sine_terms(w, cov, freq):
    w = chk.finite_array("w", w, ndim=(1, 2)).ravel()
    S = _cov(cov, w.size, "w")
    tau2 = float(w @ S @ w)
    k = chk.real("freq", freq, scalar=True)
    return w, S, tau2, k, k * np.exp(-0.5 * k**2 * tau2), 0.5 * -np.expm1(-2.0 * k**2 * tau2)


def population_loss_sine(beta, w, cov=None, freq: float = 4.0, noise: float = 0.0):
    """``R(β) = ½ [δᵀΣδ + 2 k e^{-k²τ²/2} δᵀΣw + (1 - e^{-2k²τ²})/2 + σ²]``, δ = w - β,
    for ``y = wᵀx + sin(k wᵀx) + ε`` (module doc).

    ``beta`` (..., d) or (..., d, 1) the net's linear map(s), ``w`` (d,) the target
    direction, ``cov`` Σ of the inputs (identity if None), ``freq`` k, ``noise`` σ.
    """
    w, S, tau2, k, ek, sin2 = _sine_terms(w, cov, freq)
    noise = _noise(noise)
    beta = chk.finite_array("beta", beta, ndim=tuple(range(1, 8)))
    if beta.shape[-1] == 1 and beta.ndim >= 2 and beta.shape[-2] == w.size:
        beta = beta[..., 0]
    if beta.shape[-1] != w.size:
        raise ValueError(f"beta must have shape (..., {w.size}) or (..., {w.size}, 1), got {beta.shape}")
    delta = w - beta
    quad = np.einsum("...d,de,...e->...", delta, S, delta)
    cross = 2.0 * ek * (delta @ (S @ w))
    return 0.5 * (quad + cross + sin2 + noise**2)


def sine_best_linear(w, cov=None, freq: float = 4.0):
    """``β* = (1 + k e^{-k²τ²/2}) w``, τ² = wᵀΣw: the linear map minimising
    :func:`population_loss_sine` (``w`` (d,), ``cov`` Σ, ``freq`` k). Returns (d,)."""
    w, _, _, _, ek, _ = _sine_terms(w, cov, freq)
    return (1.0 + ek) * w


def sine_linear_floor(w, cov=None, freq: float = 4.0, noise: float = 0.0) -> float:
    """``min_β R(β) = ½ [(1 - e^{-2k²τ²})/2 - k²τ² e^{-k²τ²} + σ²]``: the population loss
    no linear map (no two-layer bias-free net) removes (``w``, ``cov`` Σ, ``freq`` k,
    ``noise`` σ as in :func:`population_loss_sine`)."""
    _, _, tau2, _, ek, sin2 = _sine_terms(w, cov, freq)
    noise = _noise(noise)
    return float(0.5 * (sin2 - ek**2 * tau2 + noise**2))


def population_even_energy(W, v, alpha) -> float:
    """``E f_even(x)²`` for ``f = vᵀσ_α(W x)``, ``x ~ N(0, I)`` (module doc).

    ``W`` (m, d) first-layer weights, ``v`` (m,) output weights, ``alpha`` slope α
    (c = (1 + α)/2; the even part is ``(1 - c) Σ_k v_k |w_kᵀx|``).
    """
    W = chk.finite_array("W", W, ndim=2)
    v = chk.finite_array("v", v, ndim=1)
    if v.shape != (W.shape[0],):
        raise ValueError(f"v must have one output weight per row of W ({W.shape[0]}), got shape {v.shape}")
    c = float(slope_factor(chk.slope(alpha)))
    nw = np.linalg.norm(W, axis=1)
    G, denom = W @ W.T, np.outer(nw, nw)
    rho = np.clip(np.divide(G, denom, out=np.zeros_like(G), where=denom > 0), -1.0, 1.0)
    K = (2.0 / np.pi) * denom * (np.sqrt(1.0 - rho**2) + rho * np.arcsin(rho))
    return (1.0 - c) ** 2 * float(v @ K @ v)


@takes_net()
def population_loss_two_layer(params: Params, T, noise: float, alpha) -> tuple[float, float]:
    """``(R, ½ E f_even²)`` with ``R = R(β_eff) + ½ E f_even²`` for a two-layer
    bias-free net ``params`` (scalar output) with slope ``alpha`` and inputs
    ``x ~ N(0, I)``, teacher ``y = T x + ε`` (``T`` (1, d)), noise std σ = ``noise``;
    ``β_eff = c W_1ᵀ W_2ᵀ``."""
    noise = _noise(noise)
    if len(params) != 2 or params[1].matrix.shape[0] != 1 or any(layer.has_bias for layer in params):
        raise ValueError("params: population_loss_two_layer needs a two-layer bias-free net with "
                         "one output (p = 1)")
    W, v = np.asarray(params[0].matrix, float), np.asarray(params[1].matrix, float)[0]
    alpha = chk.slope(alpha)
    T = chk.finite_array("T", T, ndim=(1, 2))
    if T.size != W.shape[1]:
        raise ValueError(f"T must hold d = {W.shape[1]} teacher weights (shape (1, d)), got shape {T.shape}")
    beta = float(slope_factor(alpha)) * W.T @ v
    half_even2 = 0.5 * population_even_energy(W, v, alpha)
    T = T.reshape(1, -1)
    return float(population_loss_linear(beta[:, None], T, noise=noise)) + half_even2, half_even2
