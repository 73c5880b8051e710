"""The two-layer linear net's gradient flow on ill-conditioned inputs: a stiff solver.

Flow (docs/theory.md §0, §3.5), for ``f(x) = W_2 W_1 x``, ``W_1`` (h, d), ``W_2`` (p, h),
data moments ``Σ_xx`` (d, d), ``Σ_yx`` (p, d), weight decay λ:

    dW_1/dt = -W_2ᵀ G - λ W_1,   dW_2/dt = -G W_1ᵀ - λ W_2,   G = W_2 W_1 Σ_xx - Σ_yx.

On raw pixels it is stiff: a step of an explicit method is bounded by
``λ_max(Σ_xx)·(||W_1||² + ||W_2||²)`` while the horizon is set by the slowest mode
(docs/performance.md: λ_max = 587, about 4,500 DOP853 steps at 784→1024→10). Here:

**An exact reduction, nothing dropped.** Input coordinates that are zero on every sample
(``Σ_xx``'s zero diagonal, e.g. a digit's border) get no gradient: ``W_1``'s columns there
stay at ``e^{-λt}`` times their init. The others are rotated into ``Σ_xx``'s eigenbasis
``U`` (r × r, all r eigen-directions kept, however small their eigenvalue), so ``Σ_xx`` is
``diag(μ)``. The hidden space reduces too: ``dW_1``'s columns lie in the row space of ``W_2``
and ``dW_2``'s rows in the column space of ``W_1``, so ``V = range([W_1 U, W_2ᵀ])`` (dimension
k ≤ r + p) holds the whole trajectory; with ``Q`` an orthonormal basis of V the state is
``M_1 = Qᵀ W_1 U`` (k, r), ``M_2 = W_2 Q`` (p, k), and ``W_2 W_1 = M_2 (M_1 Uᵀ + e^{-λt} C_0)``
on the input coordinates, with ``C_0 = Qᵀ W_1(0)`` on the zero ones (0 elsewhere).
Exact in exact arithmetic: the reduced flow is the same ODE in other coordinates.

**A Rosenbrock-W method** (ROS34PW2, Rang & Angermann 2005, BIT 45:761: 4 stages,
order 3 with an embedded order-2 estimate, L-stable and stiffly accurate; a W-method keeps
its order for *any* matrix T in place of the Jacobian). T is the flow's Gauss–Newton part,
``T = -JᵀKJ - λ`` with ``J: (δM_1, δM_2) ↦ δM_2 M_1 + M_2 δM_1`` and ``K: δP ↦ δP diag(μ)``,
which holds every stiff direction (the rest of the Jacobian is bounded by ``||G||``, the
learning rate itself). ``(I - γhT)`` is inverted exactly by Woodbury's identity in P's
p × r space, where it splits into p SPD systems of size r, one per eigenvector ``e_i`` of
``B = M_2 M_2ᵀ`` (eigenvalue ``b_i``): ``I + c D(A + b_i I)D``, ``A = M_1ᵀ M_1``,
``D = diag(√μ)``, ``c = γh/(1 + γhλ)`` — p Cholesky factorisations of r × r per step, no
Krylov iterations. The times asked for are read off a cubic Hermite interpolant of each step
(``θ`` and ``dθ/dt`` at both ends; the method's order).
"""

from __future__ import annotations

import time

import numpy as np
from scipy.linalg.lapack import dpotrf, dpotrs
from threadpoolctl import threadpool_limits

STIFF_RTOL, STIFF_ATOL = 1e-8, 1e-11
"""The default tolerances of :func:`two_layer_flow`: the embedded error estimate of a step,
entry by entry, at most ``atol + rtol·|θ|`` in root mean square. The method is of order 3 and
its controller steers an order-2 estimate, so the step count grows as rtol^(-1/3): 10× tighter
costs 2.15× the steps (measured on the closed-form test: 233, 503, 1084 steps at 1e-6, 1e-7,
1e-8, with the curve's error 3× rtol in units of its largest entry)."""

# ROS34PW2 (Rang & Angermann 2005, Table 2.1), in Hairer & Wanner's form: stage i solves
# (I - γhT) k_i = h f(θ + Σ_j A_ij k_j) + hT Σ_j Γ_ij k_j; θ_new = θ + Σ b_i k_i, error Σ (b_i - b̂_i) k_i
_GAMMA = 4.3586652150845900e-01
_A = np.array([[0.0, 0.0, 0.0, 0.0],
               [8.7173304301691801e-01, 0.0, 0.0, 0.0],
               [8.4457060015369423e-01, -1.1299064236397981e-01, 0.0, 0.0],
               [0.0, 0.0, 1.0, 0.0]])
_G = np.array([[0.0, 0.0, 0.0, 0.0],
               [-8.7173304301691801e-01, 0.0, 0.0, 0.0],
               [-9.0338057013044082e-01, 5.4180672388095326e-02, 0.0, 0.0],
               [2.4212380706095346e-01, -1.2232505839045147e+00, 5.4526025533510214e-01, 0.0]])
_B = np.array([2.4212380706095346e-01, -1.2232505839045147e+00, 1.5452602553351023e+00, _GAMMA])
_BHAT = np.array([3.7810903145819369e-01, -9.6042292212423178e-02, 0.5, 2.1793326075422950e-01])
_ORDER_EST = 2  # the embedded solution's order: the controller's exponent is 1/(2 + 1)
BLAS_THREADS = 1
"""BLAS threads while the solver runs: its products and factorisations are small (r ≈ 400), where
OpenBLAS's threads cost more than they give (measured: 10 Cholesky factorisations of 400 × 400,
18 ms on one thread, 100–220 ms on two with the other core busy)."""


class _Reduced:
    """The flow in the reduced coordinates of the module doc: the state is one flat vector
    ``θ = [vec M_1 (k, r), vec M_2 (p, k)]``."""

    def __init__(self, W1, W2, Sxx, Syx, lam: float):
        h, d = W1.shape
        p = W2.shape[0]
        self.live = np.flatnonzero(np.diag(Sxx) > 0)  # the other inputs are zero on every sample
        self.dead = np.flatnonzero(~(np.diag(Sxx) > 0))
        mu, U = np.linalg.eigh(Sxx[np.ix_(self.live, self.live)])
        self.mu, self.U = np.maximum(mu, 0.0), U  # PSD: round-off below 0 is 0
        self.root = np.sqrt(self.mu)
        self.S = Syx[:, self.live] @ U  # (p, r)
        r = self.live.size
        W1u = W1[:, self.live] @ U
        if h > r + p:
            Q, _ = np.linalg.qr(np.hstack([W1u, W2.T]))  # (h, r + p): spans V
            M1, M2, C0 = Q.T @ W1u, W2 @ Q, Q.T @ W1[:, self.dead]
        else:
            M1, M2, C0 = W1u, W2, W1[:, self.dead]
        self.k, self.r, self.p, self.d, self.lam, self.C0 = M1.shape[0], r, p, d, lam, C0
        self.theta0 = np.concatenate([M1.ravel(), M2.ravel()])

    def split(self, theta):
        n1 = self.k * self.r
        return theta[:n1].reshape(self.k, self.r), theta[n1:].reshape(self.p, self.k)

    def field(self, theta):
        M1, M2 = self.split(theta)
        G = (M2 @ M1) * self.mu - self.S
        return np.concatenate([(-(M2.T @ G) - self.lam * M1).ravel(), (-(G @ M1.T) - self.lam * M2).ravel()])

    def product(self, theta, t: float):
        """``W_2 W_1`` (p, d) at state θ, time t."""
        M1, M2 = self.split(theta)
        P = np.empty((self.p, self.d))
        P[:, self.live] = (M2 @ M1) @ self.U.T
        if self.dead.size:
            P[:, self.dead] = np.exp(-self.lam * t) * (M2 @ self.C0)
        return P

    def operator(self, theta, gh: float):
        """``(T, W⁻¹)`` at state θ for ``W = I - gh·T`` (module doc): two functions of flat vectors."""
        M1, M2 = self.split(theta)
        omega = 1.0 + gh * self.lam
        c = gh / omega
        b, E = np.linalg.eigh(M2 @ M2.T)
        DM = M1 * self.root
        DAD = DM.T @ DM
        chol, idx = [], np.arange(self.r)
        for bi in np.maximum(b, 0.0):  # the p systems of the module doc
            N = c * DAD
            N[idx, idx] += 1.0 + c * bi * self.mu
            L, info = dpotrf(N, lower=1, clean=0, overwrite_a=1)
            if info:
                raise np.linalg.LinAlgError(f"stiff solver: I + cD(A + bI)D is not positive definite "
                                            f"(dpotrf {info})")
            chol.append(L)

        def JP(v):  # J v = δM_2 M_1 + M_2 δM_1
            d1, d2 = self.split(v)
            return d2 @ M1 + M2 @ d1

        def Jt(Z):  # Jᵀ Z = (M_2ᵀ Z, Z M_1ᵀ)
            return np.concatenate([(M2.T @ Z).ravel(), (Z @ M1.T).ravel()])

        def T(v):
            return -Jt(JP(v) * self.mu) - self.lam * v

        def solve(v):
            Z = E.T @ (JP(v) * self.root)
            for i, L in enumerate(chol):
                Z[i] = dpotrs(L, Z[i], lower=1)[0]
            return (v - c * Jt(E @ Z * self.root)) / omega

        return T, solve


def _hermite(t0, y0, f0, t1, y1, f1, t):
    """Cubic Hermite interpolant of a step ``[t0, t1]`` at ``t`` (scalar)."""
    hh = t1 - t0
    s = (t - t0) / hh
    h00, h10, h01, h11 = (1 + 2 * s) * (1 - s) ** 2, s * (1 - s) ** 2, s * s * (3 - 2 * s), s * s * (s - 1)
    return h00 * y0 + hh * h10 * f0 + h01 * y1 + hh * h11 * f1


CURVE_FAILED = ("its rates, set by the weights' and the data's scale, are too fast (or it blows up) there; "
                "rescale the weights or the data toward order 1, or ask for a shorter horizon (analyse's "
                "t_max, reference_curve's t); only theory.linear_net_ode also takes looser rtol/atol")
"""The advice of a linear net's ODE that failed, for every caller (``analyse``, ``reference_curve``
and ``linear_net_ode``; only the last takes tolerances)."""


def two_layer_flow(W1, W2, Sxx, Syx, ts, lam: float = 0.0, rtol: float = STIFF_RTOL, atol: float = STIFF_ATOL,
                   time_budget: float | None = None, stats: dict | None = None) -> list:
    """Products ``W_2(t) W_1(t)`` (p, d) at the sorted times ``ts`` (ts[-1] > 0) of the flow in
    the module doc, from ``W1`` (h, d), ``W2`` (p, h), ``Sxx`` (d, d) PSD, ``Syx`` (p, d), decay
    ``lam``; tolerances ``rtol``/``atol`` on the reduced state. Past ``time_budget`` seconds it
    stops after the current step: the list then holds the first times only. ``stats`` (a dict)
    receives ``steps``, ``rejected``, ``k``, ``r``."""
    with threadpool_limits(BLAS_THREADS, user_api="blas"):
        return _flow(np.asarray(W1, float), np.asarray(W2, float), np.asarray(Sxx, float),
                     np.asarray(Syx, float), ts, float(lam), rtol, atol, time_budget, stats)


def _flow(W1, W2, Sxx, Syx, ts, lam, rtol, atol, time_budget, stats) -> list:
    red = _Reduced(W1, W2, Sxx, Syx, lam)
    deadline = None if time_budget is None else time.monotonic() + time_budget
    y, t, t_end = red.theta0, 0.0, float(ts[-1])
    f = red.field(y)
    out, i = [], 0
    while i < ts.size and ts[i] <= 0.0:
        out.append(red.product(y, 0.0))
        i += 1
    scale = atol + rtol * np.abs(y)
    h = min(t_end, 0.01 * max(np.sqrt(np.mean((y / scale) ** 2)), 1.0)
            / max(np.sqrt(np.mean((f / scale) ** 2)), 1e-300))
    steps = rejected = 0
    while i < ts.size and (deadline is None or not out or time.monotonic() < deadline):
        h = min(h, t_end - t)
        T, solve = red.operator(y, _GAMMA * h)
        k = []
        for s in range(4):
            ys = y + sum(_A[s, j] * k[j] for j in range(s)) if s else y
            fs = f if s == 0 else red.field(ys)
            rhs = h * fs
            if s:
                rhs = rhs + h * T(sum(_G[s, j] * k[j] for j in range(s)))
            k.append(solve(rhs))
        y_new = y + sum(bi * ki for bi, ki in zip(_B, k, strict=True))
        err_vec = sum((bi - ci) * ki for bi, ci, ki in zip(_B, _BHAT, k, strict=True))
        scale = atol + rtol * np.maximum(np.abs(y), np.abs(y_new))
        err = float(np.sqrt(np.mean((err_vec / scale) ** 2)))
        if not np.isfinite(err) or err > 1.0:
            rejected += 1
            h *= 0.2 if not np.isfinite(err) else max(0.2, 0.9 * err ** (-1.0 / (_ORDER_EST + 1)))
            if h <= 1e-14 * max(t, 1.0):
                raise RuntimeError(f"the linear net's ODE failed at t = {t:.6g} of {t_end:g} (the stiff "
                                   f"solver's step fell to {h:.3g}): " + CURVE_FAILED)
            continue
        t_new = t_end if t + h >= t_end * (1 - 1e-15) else t + h
        f_new = red.field(y_new)
        while i < ts.size and ts[i] <= t_new:
            yi = y_new if ts[i] == t_new else _hermite(t, y, f, t_new, y_new, f_new, ts[i])
            out.append(red.product(yi, float(ts[i])))
            i += 1
        steps += 1
        h *= min(5.0, max(0.2, 0.9 * max(err, 1e-10) ** (-1.0 / (_ORDER_EST + 1))))
        t, y, f = t_new, y_new, f_new
    if stats is not None:
        stats.update(steps=steps, rejected=rejected, k=red.k, r=red.r)
    return out
