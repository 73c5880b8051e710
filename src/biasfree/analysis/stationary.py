"""Is a net where training leaves it? A stationary point, or the two-layer floor, to round-off.

A net trained to the best fit it can reach (a two-layer net on a nonlinear odd target sits at
the linear least-squares fit) has large weights, so the small-init prediction does not apply;
but from such a point gradient flow does not move, nor does its twin, and the gap between them
stays what it is now, which is exact. Two tests say so, each against a bound on float64
round-off (unit round-off ε = 2⁻⁵³, Higham's γ_K = Kε/(1 − Kε) for a sum of K products,
*Accuracy and Stability of Numerical Algorithms* §3.1), worst case rather than typical, so a
true stationary point is never missed:

**Stationary.** For ``f(x) = W_L σ(⋯σ(W_1 x))``, residual ``r_n = f(x_n) − y_n``, the gradient
of layer l is ``G_l = (1/N) Σ_n δ_{l,n} h_{l−1,n}ᵀ`` (h_0 = x, δ_L = r, δ_l = D_l W_{l+1}ᵀ δ_{l+1}).
Every entry is a sum over the N points of products that each passed through K_f = Σ_l n_{l−1}
forward and K_b = Σ_l n_l backward accumulations, so with K = N + K_f + K_b its computed value
is off by at most γ_K times the sum of the products' absolute values, and f itself by
``|δf_n| ≤ γ_K P ‖x_n‖`` (P = Π_l ‖W_l‖_F, since ``‖|W|‖₂ ≤ ‖W‖_F`` and ``|σ(z)| ≤ |z|``). By
Cauchy–Schwarz over n,

    ‖δ∇L‖ ≤ γ_K S (rms‖r‖ rms‖x‖ + P ms‖x‖),   S = (Σ_l Π_{j≠l} ‖W_j‖_F²)^{1/2}.

Stored weights are themselves rounded, ``θ = θ* + Δ`` with ``|Δ| ≤ ε|θ*|``, which adds ∇L(θ) ≈ HΔ:
‖H‖ ≤ S² ms‖x‖ (Gauss–Newton part) + R rms‖r‖ rms‖x‖ (the residual's, R = (Σ_{l≠k}
Π_{j≠l,k} ‖W_j‖_F²)^{1/2}), so a further ε ‖θ‖ (S² ms‖x‖ + R rms‖r‖ rms‖x‖). The sum of both,
times ‖θ‖/(½<||y||²>), bounds the *relative* gradient ‖∇L‖·‖θ‖/(½<||y||²>) that round-off
alone leaves at a stationary point. It scales with the weights as the gradient does, so a
small init (whose gradient is small only because its weights are) is not stationary.

**At the floor.** On mirror-symmetric inputs no two-layer net's loss goes below the floor L*
(the odd residual of the best linear fit, §1.3), nor does its linear twin's. The computed
``L = (1/2N) Σ‖r_n‖²`` is off by at most γ_K L + γ_K rms‖r‖ P rms‖x‖, and the computed floor
(a least-squares residual, a minimum value and so first-order insensitive to the fit's
error; backward stable: the data perturbed by γ_K relative) by γ_K (L* + rms‖r*‖ (‖B‖_F
rms‖x‖ + rms‖y‖)). L − L* within their sum is the floor to round-off. **Near the floor.** The
same holds wherever L is: under any loss-nonincreasing descent (gradient flow; GD below its
stability limit) both losses stay in [L*, max(L, L_twin)], so the gap to the twin never exceeds
``max(|L − L_twin|, max(L, L_twin) − L*)`` plus the floor's round-off. That bound decides
wherever it is below the threshold, not only at round-off: a net trained to 6e-6 of ½<‖y‖²> above
the floor is bounded at about that, far below 0.3%.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..core.blocks import _outputs
from ..core.layers import Layer, Params
from ..expressivity.decomposition import energy
from ..results import Check
from .regime import gradient_norm

EPS = float(np.finfo(np.float64).eps) / 2
"""Unit round-off of float64, 2⁻⁵³."""


def gamma(k: int) -> float:
    """``γ_k = k·u / (1 − k·u)``, u = :data:`EPS` the unit round-off: the relative round-off of k
    floating-point operations (Higham, *Accuracy and Stability of Numerical Algorithms*, §3.1)."""
    return k * EPS / (1.0 - k * EPS)


def layer_norms(params: Params) -> np.ndarray:
    """``‖W_l‖_F`` of every layer (L,)."""
    return np.array([np.linalg.norm(np.asarray(layer.matrix, float)) for layer in params])


def _rms_rows(A) -> float:
    return float(np.sqrt(energy(A)))


def accumulations(params: Params, n: int) -> int:
    """K = N + Σ_l (n_{l−1} + n_l): the longest chain of sums one gradient entry goes through
    (module doc); a conv layer counts its matrix's rows and columns."""
    return n + sum(int(np.shape(layer.matrix)[0]) + int(np.shape(layer.matrix)[1]) for layer in params)


def _norm_products(w) -> tuple[float, float, float]:
    """``(S, R̂, P)`` of the layer norms w (module doc; its R is R̂ here): S = (Σ_l Π_{j≠l} w_j²)^{1/2},
    R̂ = (Σ_{l≠k} Π_{j≠l,k} w_j²)^{1/2}, P = Π_l w_l."""
    L = len(w)
    others = np.array([np.prod(np.delete(w, i)) for i in range(L)])
    pairs = [np.prod(np.delete(w, [i, k])) for i in range(L) for k in range(L) if i != k]
    return float(np.sqrt(np.sum(others**2))), float(np.sqrt(np.sum(np.square(pairs)))), float(np.prod(w))


def hessian_bound(params: Params, X, R) -> float:
    """``‖H‖₂ ≤ S² ms‖x‖ + R̂ rms‖r‖ rms‖x‖`` (module doc) at a net ``params`` on inputs X, residuals
    R (N, p): the Gauss–Newton part and the residual's."""
    return _hessian_norm(layer_norms(params), _rms_rows(X), _rms_rows(R))


def _hessian_norm(w, rx: float, rr: float) -> float:
    S, Rh, _ = _norm_products(w)
    return S**2 * rx**2 + Rh * rr * rx


def gradient_tolerance(params: Params, X, R, ref: float) -> float:
    """The bound (module doc) on the relative gradient ‖∇L‖·‖θ‖/``ref`` that round-off leaves
    at a stationary point of a net ``params`` on inputs X, residuals R (N, p)."""
    return gradient_bound(layer_norms(params), _rms_rows(X), _rms_rows(R), accumulations(params, X.shape[0]),
                          ref)


def gradient_bound(w, rx: float, rr: float, K: int, ref: float) -> float:
    """The bound (module doc) for layer norms ``w`` (‖W_l‖_F), rms input norm ``rx``, rms residual
    ``rr`` and K accumulations: ``(γ_K S (rr rx + P rx²) + ε‖θ‖(S² rx² + R̂ rr rx))‖θ‖/ref``. Any
    product of factors with these norms on inputs of norm x (separate attention's heads, §11.7.12)."""
    w = np.asarray(w, float)
    S, _, P = _norm_products(w)
    theta = float(np.sqrt(np.sum(w**2)))
    evaluation = gamma(K) * S * (rr * rx + P * rx**2)
    stored = EPS * theta * _hessian_norm(w, rx, rr)
    return (evaluation + stored) * theta / ref


def floor_tolerance(params: Params, X, Y, loss: float, floor: float, B, ref: float) -> float:
    """The bound (module doc) on ``|L − L*|/ref`` from round-off in L and in the floor L*."""
    P = float(np.prod(layer_norms(params)))
    k = accumulations(params, X.shape[0]) + X.shape[1]
    rx, ry = _rms_rows(X), _rms_rows(Y)
    b = 0.0 if B is None else float(np.linalg.norm(B))
    return gamma(k) * (loss + floor + np.sqrt(2 * loss) * P * rx + np.sqrt(2 * floor) * (b * rx + ry)) / ref


@dataclass(frozen=True)
class Stationarity:
    """Where a net and its twin stand (module doc): ``grad``/``twin_grad`` their relative
    gradients ‖∇L‖·‖θ‖/(½<||y||²>) with the round-off bounds ``grad_tol``/``twin_grad_tol``;
    ``floor_excess`` (L − L*)/(½<||y||²>) with ``floor_tol`` (NaN without an exact two-layer
    floor: inputs not mirror-symmetric, or depth > 2); ``loss``/``twin_loss`` L and L_twin, ``floor`` L*
    (NaN without one), ``ref`` ½<||y||²>."""

    grad: float
    grad_tol: float
    twin_grad: float
    twin_grad_tol: float
    floor_excess: float
    floor_tol: float
    loss: float
    twin_loss: float
    floor: float
    ref: float = float("nan")

    @property
    def stationary(self) -> bool:
        """Both gradients within round-off: gradient flow leaves both where they are."""
        return self.grad <= self.grad_tol and self.twin_grad <= self.twin_grad_tol

    @property
    def at_floor(self) -> bool:
        """The net's loss is the two-layer floor to round-off."""
        return bool(np.isfinite(self.floor_excess) and abs(self.floor_excess) <= self.floor_tol)

    @property
    def still(self) -> bool:
        """Stationary, or at the floor, to round-off: training leaves the gap where it is now."""
        return self.stationary or self.at_floor

    @property
    def bounded(self) -> bool:
        """:meth:`bound` exists: stationary to round-off, or a two-layer floor to bound the losses by."""
        return self.stationary or bool(np.isfinite(self.floor))

    def bound(self) -> float:
        """The largest gap to the twin any later descent can open (loss units): exactly the
        present one when stationary, else ``max(|L − L_twin|, max(L, L_twin) − L*)`` plus the
        floor's round-off (module doc: *Near the floor*); NaN when neither applies."""
        gap = abs(self.loss - self.twin_loss)
        if self.stationary:
            return gap
        if not np.isfinite(self.floor):
            return float("nan")
        return max(gap, max(self.loss, self.twin_loss) - self.floor + self.floor_tol * self.ref)

    def evidence(self, where: str) -> list[Check]:
        """The deciding numbers, one line each: both gradients and, with a floor, the loss above it."""
        ev = [Check(self.grad, self.grad_tol, "a stationary point to float64 round-off (the bound of "
                    "biasfree.analysis.stationary)", name=f"relative gradient ‖∇L‖·‖θ‖/(½<||y||²>) {where}"),
              Check(self.twin_grad, self.twin_grad_tol, "the twin is stationary to round-off too",
                    name=f"the twin's relative gradient {where}")]
        if np.isfinite(self.floor_excess):
            ev.append(Check(abs(self.floor_excess), self.floor_tol, "the loss is the two-layer floor (§1.3) "
                            "to round-off: no two-layer net, and no linear twin, goes lower",
                            name=f"|L − two-layer floor| (fraction of ½<||y||²>) {where}"))
        return ev

    def reason(self, ref: float) -> str:
        """Why training keeps the gap within :meth:`bound`, in words."""
        if self.stationary:
            return (f"stationary to round-off: relative gradients {self.grad:.2g} (net) and "
                    f"{self.twin_grad:.2g} "
                    f"(twin) ≤ their round-off bounds {self.grad_tol:.2g} and {self.twin_grad_tol:.2g}, so "
                    "gradient flow (and GD) leaves both where they are")
        where = (f"at the two-layer floor to round-off: |L − floor| = {abs(self.floor_excess):.2g} of "
                 f"½<||y||²> (≤ {self.floor_tol:.2g})" if self.at_floor else
                 f"near the two-layer floor: L − floor = {self.floor_excess:.2g} of ½<||y||²>")
        return f"{where}, so descent keeps both losses in [floor, max(L, L_twin)]"


def stationarity(params: Params, twin: Params, X, Y, alpha: float, ref: float,
                 floor: float | None, B, *, outputs=None, grad: float | None = None,
                 Sxx=None) -> Stationarity:
    """:class:`Stationarity` of ``params`` (slope ``alpha``) and its linear ``twin`` on (X, Y);
    ``ref`` = ½<||y||²>; ``floor`` the exact two-layer floor (None: not tested) for a depth-2 net.
    What the caller has measured is not measured again: ``outputs`` f(X) of ``params``, ``grad``
    its :func:`~.regime.gradient_norm`; with ``Sxx`` = XᵀX/N a dense twin's outputs and gradient
    come from its product P = W_L⋯W_1 and the moments (:func:`linear_gradient_norm`), no pass
    through its hidden layers."""
    R = (_outputs(params, X, alpha) if outputs is None else outputs) - Y
    moments = Sxx is not None and all(type(la) is Layer and la.bias is None for la in twin)
    Rt = (X @ _product(twin).T if moments else _outputs(twin, X, 1.0)) - Y
    loss, twin_loss = 0.5 * energy(R), 0.5 * energy(Rt)
    use_floor = floor is not None and len(params) == 2
    excess = (loss - floor) / ref if use_floor else float("nan")
    ftol = floor_tolerance(params, X, Y, loss, floor, B, ref) if use_floor else float("nan")
    tol, ttol = gradient_tolerance(params, X, R, ref), gradient_tolerance(twin, X, Rt, ref)
    tgrad = linear_gradient_norm(twin, Sxx, Y.T @ X / X.shape[0]) if moments else None
    # the passes through the hidden layers last, together (regime.gradient_norm)
    grad = gradient_norm(params, X, Y, alpha) if grad is None else grad
    tgrad = gradient_norm(twin, X, Y, 1.0) if tgrad is None else tgrad
    return Stationarity(grad / ref, tol, tgrad / ref, ttol,
                        excess, ftol, loss, twin_loss, float("nan") if not use_floor else floor, ref)


def _product(params: Params) -> np.ndarray:
    P = np.asarray(params[0].matrix, float)
    for layer in params[1:]:
        P = np.asarray(layer.matrix, float) @ P
    return P


def linear_gradient_norm(params: Params, Sxx, Syx) -> float:
    """:func:`~.regime.gradient_norm` of a bias-free dense *linear* net from the moments: with
    P = W_L⋯W_1 and G = P Σ_xx − Σ_yx, ``∇_{W_l} L = (W_L⋯W_{l+1})ᵀ G (W_{l−1}⋯W_1)ᵀ``. The same
    number to round-off; its round-off is within the bound of :func:`gradient_tolerance`
    (Σ_xx's entries are sums of N products, G's of d more: K grows by d, and
    ``|Σ_yx| ≤ rms‖y‖ rms‖x‖ ≤ (rms‖r‖ + P rms‖x‖) rms‖x‖``, up to a factor 2 of the bound's terms,
    which is worst case by orders of magnitude)."""
    Ws = [np.asarray(la.matrix, float) for la in params]
    G = _product(params) @ Sxx - Syx
    sq = 0.0
    for i in range(len(Ws)):  # the products around layer l; none (not an identity) at the ends
        A = _product(params[i + 1:]).T @ G if i + 1 < len(Ws) else G
        A = A @ _product(params[:i]).T if i else A
        sq += float(np.sum(A**2))
    size = sum(float(np.sum(W**2)) for W in Ws)
    return float(np.sqrt(sq * size))
