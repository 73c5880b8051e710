"""The stiff two-layer solver (biasfree.theory.stiff, ROS34PW2 in Σ_xx's eigenbasis) against
closed forms where they hold and against DOP853 where DOP853 finishes.

Error budget of the stiff solver (solver error, not round-off): each accepted step keeps its
embedded estimate at most ``atol + rtol·|θ|`` per entry in root mean square, and the global
error of the reduced state θ adds up at most linearly over the n accepted steps on these
contracting flows: ``n (atol + rtol max|θ|) √(#θ)`` bounds every entry (RMS ≤ 1 lets one entry
carry the whole √#θ). The product ``P = M_2 M_1`` then moves by at most ``2 max|θ|·k`` times
that (k the inner size).
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from biasfree import theory as th
from biasfree.core.layers import Layer

pytestmark = pytest.mark.numerics


def _orth(rng, n):
    return np.linalg.qr(rng.normal(size=(n, n)))[0]


def _moments_data(rng, lam, Syx_right, n):
    """``X`` (n, d), ``Y`` (n, p) with ``XᵀX/n = U diag(lam) Uᵀ`` and ``YᵀX/n = Syx_right Uᵀ``:
    ``X = √n O diag(√lam) Uᵀ``, ``Y = √n O diag(1/√lam) Syx_rightᵀ`` for O (n, d) orthonormal."""
    d = lam.size
    U = _orth(rng, d)
    O = np.linalg.qr(rng.normal(size=(n, d)))[0]
    X = np.sqrt(n) * (O * np.sqrt(lam)) @ U.T
    Y = np.sqrt(n) * (O / np.sqrt(lam)) @ Syx_right.T
    return X, Y, U


def test_stiff_flow_completes_the_curve_dop853_cuts_and_matches_the_closed_form(monkeypatch):
    # d = 50 inputs, λ(Σ_xx) from 1e-2 to 1e2 (condition 1e4) in a random basis U; p = 5 targets
    # on the five weakest directions, Σ_yx = V Uₚᵀ (σ = 1), commuting with Σ_xx; a balanced,
    # aligned init W_1 = R √a0 Uₚᵀ, W_2 = V √a0 Rᵀ. Then each mode is logistic (docs/theory.md
    # §3.6): a_j(t) = K_j / (1 + (K_j/a0 - 1) e^{-2t}), K_j = 1/λ_j, and P = V diag(a) Uₚᵀ.
    # Stiff: the other 45 input directions relax at λ_i a_j, up to 100·100 = 1e4, while the modes
    # learn at 2σ = 2: DOP853 takes ~830 steps per unit of time (10⁴ reach t = 12 at 3de720b), so
    # ~2e4 to t = 25; the stiff solver ~1e3 in all. A clock that
    # ticks 0.1 ms a reading (each solver reads it once a step) makes the 1 s budget 10⁴ steps
    # on any machine, loaded or not.
    rng = np.random.default_rng(0)
    d, p, a0 = 50, 5, 1e-3
    lam = np.logspace(-2, 2, d)
    V, R = _orth(rng, p), _orth(rng, p)
    X, Y, U = _moments_data(rng, lam, np.hstack([V, np.zeros((p, d - p))]), 2 * d)
    Up = U[:, :p]
    params = (Layer((R * np.sqrt(a0)) @ Up.T), Layer((V * np.sqrt(a0)) @ R.T))
    t = np.linspace(0.0, 25.0, 26)
    clock = itertools.count()
    monkeypatch.setattr(th.reference.time, "monotonic", lambda: 1e-4 * next(clock))
    curve = th.reference_curve(params, X, Y, t, time_budget=1.0)
    assert "CUT SHORT" not in curve.note and curve.t.size == t.size  # the whole horizon, in budget
    K = 1 / lam[:p]
    a = K / (1 + (K / a0 - 1) * np.exp(-2 * t[:, None]))
    exact = np.einsum("pi,ti,di->tdp", V, a, Up)  # β = Pᵀ
    # solver error: ROS34PW2 at its default rtol 1e-8 keeps the local error of θ (entries up to
    # √K = 10) near 1e-8·10 a step; the global error on the curve measured 3e-8 of max K = 100
    # (1e-6 and 1e-7 give 3e-6 and 3e-7: it scales with rtol). Round-off: X's moments hold
    # Σ_xx to ~1e-14, moving K_j = 1/λ_j by 1e-12 relative
    np.testing.assert_allclose(curve.beta, exact, rtol=0, atol=1e-7 * K.max())
    L = th.moment_loss(np.transpose(exact, (0, 2, 1)), X.T @ X / X.shape[0], Y.T @ X / X.shape[0],
                       float(np.sum(Y**2) / X.shape[0]))
    np.testing.assert_allclose(curve.loss, L, rtol=0, atol=1e-7 * L[0])


@pytest.mark.parametrize("decay", [0.0, 0.1])
def test_stiff_flow_is_dop853_where_dop853_finishes(decay):
    # a general (unbalanced, unaligned) init on pixel-like inputs: two dead pixels (zero on every
    # sample), condition ~1e3 on the others, width 40 > r + p (the hidden space reduces)
    rng = np.random.default_rng(1)
    d, h, p, n = 16, 40, 3, 400
    X = np.maximum(rng.normal(size=(n, 6)) @ rng.normal(size=(6, d)), 0.0) * np.logspace(0, -1.5, d)
    X[:, [3, 11]] = 0.0
    Y = np.tanh(X @ rng.normal(size=(d, p)))
    params = (Layer(0.3 * rng.normal(size=(h, d))), Layer(0.3 * rng.normal(size=(p, h))))
    Sxx, Syx = X.T @ X / n, Y.T @ X / n
    t = np.linspace(0.0, 30.0, 31)
    info = {}
    new = th.reference._linear_net_ode(params, Sxx, Syx, t, decay, solver="ros34pw2", stats=info)
    old = th.linear_net_ode(params, Sxx, Syx, t, weight_decay=decay, solver="dop853")
    assert info["r"] == d - 2 and info["k"] == d - 2 + p  # the exact reductions of the module doc
    theta = max(np.max(np.abs(W.matrix)) for W in params) * 3  # |θ| stays below 3× its init here
    # solver error (module doc): n steps of rtol 1e-9 on |θ|, #θ = (r + p)(r + p) entries,
    # through P's inner size k = r + p; DOP853's own (rtol 1e-11) is 100× smaller
    bound = info["steps"] * (1e-12 + 1e-9 * theta) * np.sqrt((d + 1) * (d + 1)) * 2 * theta * (d + 1)
    assert np.max(np.abs(new - old)) <= bound
    assert np.max(np.abs(new - old)) <= 1e-6 * np.max(np.abs(old))  # and in practice far below


def test_stiff_flow_on_whitened_inputs_is_the_logistic_modes():
    # whitened inputs and a small aligned balanced init: Saxe's sigmoid (§3.1), to ~1e-8
    rng = np.random.default_rng(2)
    d, p = 6, 3
    U, V = _orth(rng, d), _orth(rng, p)
    s, a0 = np.array([3.0, 1.0, 0.3]), 1e-4
    Syx = (V * s) @ U[:, :p].T
    params = (Layer(np.sqrt(a0) * U[:, :p].T), Layer(np.sqrt(a0) * V))  # balanced and aligned
    t = np.linspace(0.0, 40.0, 41)
    P = th.linear_net_ode(params, np.eye(d), Syx, t, solver="ros34pw2", rtol=1e-9, atol=1e-12)
    a = np.einsum("pi,tpd,di->ti", V, P, U[:, :p])
    # solver error: ~3 rtol of the largest entry (the closed-form test above), rtol 1e-9 here
    np.testing.assert_allclose(a, th.mode_strength(t, s, a0), rtol=0, atol=1e-8 * s.max())


def test_a_stiff_budget_still_cuts_and_bad_solver_names_are_refused():
    params = (Layer(np.ones((3, 2))), Layer(np.ones((1, 3))), Layer(np.ones((1, 1))))
    with pytest.raises(ValueError, match="two-layer"):
        th.linear_net_ode(params, np.eye(2), np.ones((1, 2)), [1.0], solver="ros34pw2")
    with pytest.raises(ValueError, match="solver"):
        th.linear_net_ode(params[:2], np.eye(2), np.ones((1, 2)), [1.0], solver="rk4")
