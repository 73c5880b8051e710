"""Closed-form and semi-analytical learning curves (biasfree.theory) against exact
numbers, limits, independent solvers and the gradient-flow simulator (biasfree.flow).

Simulation tests share three compiled shapes (two layers of width 4 — linear nets pad
with zero units, which stay zero —, depth 3, depth 4) and one data size, so the jit cache
is reused across tests. "Relative" errors are
``max_t |a_sim - a_theory| / s_i`` for mode strengths and ``max_t |L_sim - L_theory| / L(0)``
for losses. The simulator is run at rtol 1e-10, atol 1e-12: its global error on θ is at
most n·(rtol max|θ| + atol) over n accepted steps (roundoff.flow_error_bound), and the
observables (β a product of L <= 4 layers of width <= 4 with |θ| <= ~1.5, a = uᵀβv, L
quadratic in β) multiply that by <= L (n_hidden max|θ|)^{L-1} ~ 10. ``_flow`` checks
n <= MAX_STEPS = 1000, so 1000 · 1e-10 · 10 = 1e-6 = TOL_SIM (solver error, not round-off).
"""

from __future__ import annotations

from unittest import mock

import jax
import numpy as np
import pytest
from roundoff import EPS, chain_length, forward_gap, gamma, loss_eval_gap, trajectory_gap
from scipy.integrate import DOP853, quad, solve_ivp

import biasfree as bf
from biasfree import theory as th
from biasfree.core.inits import pad_hidden

pytestmark = pytest.mark.numerics  # round-off bounds: make test-portable reruns them

D, P, N_HALF, N_REC, WIDTH = 4, 2, 40, 81, 4
MAX_STEPS = 1000  # the step count TOL_SIM assumes (module doc)
TOL_SIM = MAX_STEPS * 1e-10 * 10


def _flow(params, data, alpha=1.0, t_max=12.0, weight_decay=0.0):
    cfg = bf.FlowConfig(alpha=alpha, t_max=t_max, n_records=N_REC, rtol=1e-10, atol=1e-12,
                        weight_decay=weight_decay)
    traj = bf.flow(params, data, cfg)
    assert traj.stats["accepted"] <= MAX_STEPS, traj.stats  # TOL_SIM's premise (module doc)
    return traj


def _logistic_roundoff(t, sigma, a):
    """Round-off of a computed logistic a(t) (modes.logistic: expm1, exp and four products,
    sums or divisions: γ_6 relative) at a time t that itself carries up to γ_8 relative error
    (a closed-form time: a log and a few divisions). a's relative condition in t is
    2σt(1 − a/σ) <= 2|σ|t, so the bound is (2|σ| t γ_8 + γ_6)·a."""
    return (2 * np.abs(sigma) * np.asarray(t) * gamma(8) + gamma(6)) * np.abs(a)


def _ode_error(sol, rtol, atol):
    """Global error bound of a scipy solve_ivp run (solver error, not round-off): each
    accepted step commits a local error <= rtol|y| + atol, and they add up at most
    linearly (the logistic and the deep-mode ODEs contract relative errors once past the
    transition): nfev (> the number of steps) × (rtol max|y| + atol)."""
    return sol.nfev * (rtol * np.max(np.abs(sol.y)) + atol)


def _abs_net(params, X):
    """``|X| |W_1|ᵀ … |W_L|ᵀ``: the net on absolute values (dominates every partial sum
    of a forward pass; round-off of the weights' own scaling reaches f through it)."""
    M = np.abs(np.asarray(X, dtype=float))
    for layer in params:
        M = M @ np.abs(np.asarray(layer.W)).T
    return M


def _rel_modes(traj, modes, a_theory):
    a_sim = th.mode_projections(np.asarray(traj.beta), modes)
    return float(np.max(np.abs(a_sim - a_theory) / modes.s))


def _rel_loss(traj, L_theory):
    L = np.asarray(traj.loss)
    return float(np.max(np.abs(L - L_theory)) / L[0])


@pytest.fixture(scope="module")
def white():
    """Whitened symmetric data from a noisy rank-2 linear teacher; its modes."""
    T = bf.data.teacher_matrix(jax.random.PRNGKey(0), D, [2.0, 1.0])
    data = bf.make_dataset(jax.random.PRNGKey(1), bf.linear_target(T), N_HALF, D, whitened=True,
                           noise=0.1)
    modes = th.data_modes(data.X, data.Y)
    assert modes.whitened and modes.s.shape == (2,)
    return data, modes


@pytest.fixture(scope="module")
def raw():
    """The same kind of data, not whitened (anisotropic input covariance)."""
    T = bf.data.teacher_matrix(jax.random.PRNGKey(2), D, [2.0, 1.0])
    cov = np.diag([2.0, 1.0, 0.5, 0.25])
    data = bf.make_dataset(jax.random.PRNGKey(3), bf.linear_target(T), N_HALF, D, cov=cov,
                           noise=0.1)
    assert not th.is_whitened(data.X)
    return data


# ------------------------------------------------------------ closed forms alone


def test_half_times_match_theory_md_numbers():
    # docs/theory.md quotes 4 decimals (3 for ReLU): tolerance is half a unit in the last digit
    assert abs(th.half_time(1.0, 1e-3) - 3.4534) <= 5e-5
    assert abs(th.half_time(1.0, 1e-6) - 6.9078) <= 5e-5
    assert abs(th.leaky_half_time(1.0, 1e-3, 0.0) - 7.600) <= 5e-4
    # the mode is at half strength at its half time (exact identity, round-off)
    for s, a0, lam in [(1.0, 1e-3, 0.0), (2.5, 1e-5, 0.5)]:
        th_ = th.half_time(s, a0, weight_decay=lam)
        # (_logistic_roundoff at t½ with a = σ/2, and σ/2 itself rounded: ε σ/2)
        sig = s - lam
        tol = _logistic_roundoff(th_, sig, sig / 2) + EPS * sig / 2
        assert abs(th.mode_strength(th_, s, a0, weight_decay=lam) - sig / 2) <= tol


def test_mode_strength_limits_and_ode():
    s, a0 = np.array([3.0, 1.0, 0.2]), np.array([1e-4, 1e-2, 1e-3])
    # t = 0: expm1(0) = 0 and exp(0) = 1, so a0 / (1 + a0·0) is exact; ε allows a libm whose
    # exp(0) is one ulp off
    np.testing.assert_allclose(th.mode_strength([0.0], s, a0)[0], a0, rtol=EPS)
    # t = 1e4: e^{-2σt} underflows to 0 and expm1 to −1, leaving a0 / (a0 (1/σ)): three
    # roundings, γ_3 relative
    np.testing.assert_allclose(th.mode_strength([1e4], s, a0)[0], s, rtol=gamma(3))
    # with weight decay λ the limit is s - λ, and a mode with s < λ dies out (σ = s − λ
    # rounded once more on the left; the right's s − 0.1 is the same rounding: γ_4)
    np.testing.assert_allclose(th.mode_strength([1e4], s, a0, weight_decay=0.1)[0], s - 0.1,
                               rtol=gamma(4))
    assert th.mode_strength(1e4, 0.2, 1e-3, weight_decay=0.5) == 0.0
    # s = 0 (or σ = s - λ = 0) is the limit a0 / (1 + 2 a0 t), continuous in σ
    t = np.linspace(0, 50, 11)
    # (a0 (2t) against 0.6 t, 1 + · and the division: three roundings a side, 2γ_3)
    np.testing.assert_allclose(th.mode_strength(t, 0.0, 0.3), 0.3 / (1 + 0.6 * t), rtol=2 * gamma(3))
    # not round-off: a(t; σ) − a(t; 0) = σ ∂a/∂σ + O(σ²), and the relative sensitivity
    # ∂ln a/∂σ = 2t (1 + a0 t)/(1 + 2 a0 t) <= 2t: 2σ t_max = 1e-7 at σ = 1e-9, t <= 50
    np.testing.assert_allclose(th.logistic(t, 1e-9, 0.3), th.logistic(t, 0.0, 0.3), rtol=2 * 1e-9 * t.max())
    # independent oracle: solve_ivp of da/dt = 2a(s - λ - a)
    for sigma_s, lam in [(1.5, 0.0), (1.5, 0.4), (0.3, 0.8)]:
        ts = np.linspace(0, 20, 41)
        sol = solve_ivp(lambda _, a, s_=sigma_s, l_=lam: 2 * a * (s_ - l_ - a), (0, 20), [1e-3],
                        t_eval=ts, method="DOP853", rtol=1e-13, atol=1e-18)
        got = th.mode_strength(ts, sigma_s, 1e-3, weight_decay=lam)
        # the solver's own error (_ode_error) plus the closed form's round-off
        tol = _ode_error(sol, 1e-13, 1e-18) + _logistic_roundoff(ts, sigma_s - lam, got)
        assert np.all(np.abs(got - sol.y[0]) <= tol) and np.max(tol) < 1e-9 * sigma_s


def test_loss_limits_plateaus_and_final_loss(white):
    data, modes = white
    s, yp = modes.s, modes.y_power
    a0 = np.array([1e-3, 2e-3])
    L0 = th.linear_loss(0.0, s, a0, yp)
    # t = 0: the loss of the (tiny) initial map, computed directly from the data
    W = th.aligned_init(modes.U, modes.V, a0)
    F0 = np.asarray(bf.forward(W, data.X, 1.0))
    # round-off: both sides are sums of at most N + d² products (the N-point moments, the
    # SVD of Σ_yx with its ~d² ε backward error, the aligned init) of terms bounded by
    # y_power + Σ s²: γ_{N+d²} twice that. About 1e-13 relative; a wrong mode is O(1e-3)
    N = data.X.shape[0]
    tol = 2 * gamma(N + D * D) * (yp + np.sum(s**2))
    assert abs(L0 - 0.5 * np.mean(np.sum((np.asarray(data.Y) - F0) ** 2, axis=1))) <= tol
    # t -> inf: what no linear map explains, = the least-squares residual (whitened data)
    Linf = th.linear_loss(1e4, s, a0, yp)
    # a(1e4) = s (1 ± γ_3) (see above): ½Σ(s − a)² <= ½Σ(γ_3 s)², plus the final addition ε L∞
    assert abs(Linf - th.final_loss(s, yp)) <= EPS * Linf + 0.5 * np.sum((gamma(3) * s) ** 2)
    # the least-squares residual on whitened data (κ(X) = 1) against ½(y_power − Σs²): the
    # same γ_{N+d²} count on the same magnitudes
    assert abs(th.final_loss(s, yp) - th.linear_floor(data.X, data.Y)) <= tol
    assert th.final_loss(s, yp) > 0  # the teacher is noisy
    # plateaus: widely separated modes, s = (4, 1), a0 = 1e-12. At t = 8 mode 1 is done
    # (s1 - a1 <= s1 e^{-2 s1 (t - t1/2)}) and mode 2 has a2 <= a0 e^{2 s2 t} = 8.9e-6,
    # so |L - L_1| <= s2 a2 + a2²/2 + (s1 e^{-2 s1 (8 - t1/2)})²/2.
    s2m, a0s, t = np.array([4.0, 1.0]), 1e-12, 8.0
    plates = th.plateaus(s2m, 20.0)
    # ½(20 − partial sums of s²): two roundings, γ_2 (all exact on these dyadic values)
    np.testing.assert_allclose(plates, [10.0, 2.0, 1.5], rtol=gamma(2))
    a2 = a0s * np.exp(2 * 1.0 * t)
    bound = 1.0 * a2 + a2**2 / 2 + (4 * np.exp(-8 * (t - th.half_time(4.0, a0s)))) ** 2 / 2
    assert abs(th.linear_loss(t, s2m, a0s, 20.0) - plates[1]) <= bound
    # at t = 0: L(0) - L_0 = Σ_i (a0²/2 - s_i a0) exactly; round-off: L(0) is ½Σ(s − a0)²
    # (<= 8.5) + ½(20 − Σs²) (= 1.5), five roundings on terms <= 10 = L_0: γ_5 · 2 L_0
    L0_gap = th.linear_loss(0.0, s2m, a0s, 20.0) - plates[0] - (a0s**2 - 5 * a0s)
    assert abs(L0_gap) <= gamma(5) * 2 * plates[0]


def test_input_validation_names_the_fix():
    with pytest.raises(ValueError, match="a0 > 0"):
        th.mode_strength(1.0, 1.0, 0.0)
    with pytest.raises(ValueError, match="half-way"):
        th.half_time(1.0, 0.7)
    with pytest.raises(ValueError, match="depth"):
        th.deep_mode_strength(1.0, 1.0, 1e-3, 1)
    with pytest.raises(ValueError, match="balanced"):
        th.unaligned_product([1.0], bf.from_arrays([np.ones((2, 3)), np.ones((2, 2))]),
                             np.ones((2, 3)))
    with pytest.raises(ValueError, match="pair"):
        th.pair_to_linear(bf.from_arrays([np.ones((4, 3)), np.ones((1, 4))]), 0.0)
    with pytest.raises(ValueError, match="alpha"):
        th.leaky_to_linear(bf.from_arrays([np.ones((2, 3)), np.ones((1, 2))]), 1.5)


# ------------------------------------------------------------------ deep linear


def _deep_logit_error(ts, s, a0, L):
    """Solver error of theory.deep's logit path ξ(t) (not round-off): at each of the T
    records brentq stops within xtol 1e-14 + 4ε|ξ| (its rtol 1e-15 rounds up to 4ε), and the
    quadrature (epsrel 1e-13) of the excess integral, <= rate·t_max in size, moves t by
    <= 1e-13 t_max and so ξ by <= 1e-13 rate t_max (dξ/dt <= rate); the records chain, so
    the errors add: T (1e-14 + 4ε ξ_max) + 1e-13 rate t_max, ξ_max <= |ξ_0| + rate t_max."""
    rate = L * s ** (2 - 2 / L)
    xi_max = abs(np.log(a0 / (s - a0))) + rate * np.max(ts)
    return len(ts) * (1e-14 + 4 * EPS * xi_max) + 1e-13 * rate * np.max(ts)


@pytest.mark.parametrize("L", [3, 4])
def test_deep_closed_form_solves_its_ode(L):
    s, a0 = np.array([1.3, 0.6]), np.array([2e-3, 5e-2])
    ts = np.linspace(0, 60, 61)
    got = th.deep_mode_strength(ts, s, a0, L)
    for i in range(2):
        sol = solve_ivp(lambda _, a, si=s[i]: L * a ** (2 - 2 / L) * (si - a), (0, 60), [a0[i]],
                        t_eval=ts, method="DOP853", rtol=1e-13, atol=1e-18)
        # both solvers' errors: solve_ivp's (_ode_error) and the logit path's, which reaches
        # a = s expit(ξ) through da/dξ = a(1 − a/s) <= s/4, plus expit's γ_3 on a
        tol = (_ode_error(sol, 1e-13, 1e-18) + s[i] / 4 * _deep_logit_error(ts, s[i], a0[i], L)
               + gamma(3) * got[:, i])
        assert np.all(np.abs(got[:, i] - sol.y[0]) <= tol) and np.max(tol) < 1e-9 * s[i]
    # limits and round trip t(a(t)) = t. t = 0: s expit(logit(a0/s)), a log and an exp round
    # trip: ε(|ξ_0| + 5) relative (the log's result and four more roundings)
    np.testing.assert_allclose(got[0], a0, rtol=EPS * (np.max(np.abs(np.log(a0 / (s - a0)))) + 5))
    # t = 1e6: ξ is far past 60, expit(ξ) rounds to 1 (ε/2) and s·1 is exact
    np.testing.assert_allclose(th.deep_mode_strength([1e6], s, a0, L)[0], s, rtol=EPS)
    # (only while a < 0.9 s: t(a) is ill-conditioned as a -> s, where dt/da -> inf)
    mid = ts[(got[:, 0] < 0.9 * s[0]) & (ts > 0)]
    back = th.deep_time_to(th.deep_mode_strength(mid, 1.3, 2e-3, L), 1.3, 2e-3, L)
    assert mid.size >= 3
    # t(ξ) has dt/dξ = (1 + e^{-ξ})^κ / rate <= (s/a0)^κ / rate (κ = 1 − 2/L): the forward
    # path's ξ error (_deep_logit_error) and the return quadrature's (epsrel 1e-13) add up
    rate, kappa = L * 1.3 ** (2 - 2 / L), 1 - 2 / L
    tol = 2 * _deep_logit_error(mid, 1.3, 2e-3, L) * (1.3 / 2e-3) ** kappa / rate + 1e-13 * mid
    assert np.all(np.abs(back - mid) <= tol) and np.max(tol / mid) < 1e-9
    # the loss gap s - a is computed directly: still accurate where a rounds to s
    gap = np.sqrt(2 * (th.deep_loss([30.0], 1.3, 2e-3, L, 1.3**2)[0]))
    assert 0 < gap < 1e-20


def test_deep_two_layers_is_the_logistic_and_half_time_asymptotics():
    ts = np.linspace(0, 10, 21)
    # L = 2 is modes.logistic on the same arguments (σ = s − 0 = s exactly): the same code path
    np.testing.assert_array_equal(th.deep_mode_strength(ts, [2.0, 0.5], [1e-3, 1e-2], 2),
                                  th.mode_strength(ts, [2.0, 0.5], [1e-3, 1e-2]))
    # (0 − logit(a0/s))/(2s) against ln(s/a0 − 1)/(2s): the same log of nearly the same
    # rounded argument, each side within γ_4 of t½ (κ = 0: the excess integral is exactly 0)
    t_half = th.half_time(1.0, 1e-3)
    assert abs(th.deep_half_time(1.0, 1e-3, 2) - t_half) <= 2 * gamma(4) * t_half
    # L = 3, s = 1: t(1/2) = ∫_{a0}^{1/2} du / (3 u^{4/3} (1 - u)). Splitting
    # 1/(1-u) = 1 + u/(1-u) ≤ 1 + 2u gives |t - a0^{-1/3}| ≤ 2^{1/3} + 2^{-2/3} = 1.890
    for a0 in (1e-6, 1e-9, 1e-12):
        assert abs(th.deep_half_time(1.0, a0, 3) - a0 ** (-1 / 3)) <= 2 ** (1 / 3) + 2 ** (-2 / 3)
    # deeper nets wait longer from the same small init
    assert th.deep_half_time(1.0, 1e-3, 2) < th.deep_half_time(1.0, 1e-3, 3) < th.deep_half_time(
        1.0, 1e-3, 4)


# ---------------------------------------------------------- Riccati (unaligned)


def _random_problem(seed, d=4, p=3, width=5, scale=0.01):
    rng = np.random.default_rng(seed)
    S = rng.normal(size=(p, d))
    return S, th.balanced_init(scale * rng.normal(size=(p, d)), width)


def test_riccati_aligned_is_the_logistic_and_limits():
    rng = np.random.default_rng(0)
    U, _ = np.linalg.qr(rng.normal(size=(3, 3)))
    V, _ = np.linalg.qr(rng.normal(size=(4, 3)))
    s, a0 = np.array([2.0, 1.0, 0.5]), np.array([1e-3, 2e-3, 1e-2])
    basis, _ = np.linalg.qr(rng.normal(size=(5, 3)))
    params = th.aligned_init(U, V, a0, width=5, bases=[basis])
    # W_1W_1ᵀ and W_2ᵀW_2 are both R diag(a0) Rᵀ through orthonormal factors (Householder
    # QR: ||QᵀQ − I|| <= ~nε, n = 3, 4, 5 for U, V, R) and sums of <= 5 terms: γ_{3+4+5+5}
    # relative to ||W_1||² + ||W_2||²
    assert th.imbalance(params) <= gamma(3 + 4 + 5 + 5)
    # the restart at t = 100 / max|λ| = 50 falls a round-off below or above 50 by the
    # LAPACK build, so t = 50 ± 1e-12 and the tiny times take the short-step form
    ts = np.concatenate([np.linspace(0, 60, 31), [1e-14, 1e-8, 1e-3, 50 - 1e-12, 50 + 1e-12]])
    Pt = th.unaligned_product(ts, params, (U * s) @ V.T)
    a = np.einsum("tpd,pi,di->ti", Pt, U, V)
    # round-off: M = QQᵀ goes through ~6 backward-stable dense steps of size d+p = 7 (eigh of
    # F, Oᵀ Q_0, the QR or solve, two products, the restart's eigh), each ≲ (d+p) ε ||M||
    # with ||M|| <= 2 s_max (M's eigenvalues are 2 a_i), read against s_i >= s_min; and the
    # eigenvalues of F, off by ε ||F|| = ε s_max, move a(t) by <= t s_max ε s_i / 2
    tol = EPS * (6 * 7 * 2 * s.max() / s.min() + ts.max() * s.max())  # 456 ε = 1.0e-13
    assert np.max(np.abs(a - th.mode_strength(ts, s, a0)) / s) <= tol
    # t = 0 gives the init; t -> inf the full map Σ_yx (width >= rank), even past e^{700}
    # t = 0 is W_2 W_1 (inner size 5) of aligned_init's U √a0 Bᵀ, B √a0 Vᵀ (inner size 3, B
    # orthonormal to a few ε): entrywise within 16 ε of |U| a0 |V|ᵀ
    np.testing.assert_array_less(np.abs(Pt[0] - (U * a0) @ V.T), 16 * EPS * (np.abs(U) * a0) @ np.abs(V).T)
    # t = 1e4 is 200 restarts to an attracting fixed point: one restart's round-off remains
    np.testing.assert_allclose(th.unaligned_product([1e4], params, (U * s) @ V.T)[0], (U * s) @ V.T,
                               rtol=0, atol=EPS * 6 * 7 * 2 * s.max())


def test_riccati_matches_independent_ode_with_and_without_decay():
    S, params = _random_problem(1)
    ts = np.linspace(0, 25, 11)
    solvers = []  # each DOP853 solver linear_net_ode steps, for its step count

    def counted(*args, **kwargs):
        solvers.append(DOP853(*args, **kwargs))
        return solvers[-1]

    for lam in (0.0, 0.2):
        exact = th.unaligned_product(ts, params, S, weight_decay=lam)
        with mock.patch("biasfree.theory.reference.DOP853", counted):
            ode = th.linear_net_ode(params, np.eye(4), S, ts, weight_decay=lam, solver="dop853")
        # solver error (not round-off): linear_net_ode runs DOP853 at rtol 1e-11, atol 1e-14;
        # local errors <= rtol|θ| + atol per step add up (at most linearly: the flow contracts
        # onto the fixed point) over its K steps, K <= nfev / 12 (12 stages a step, rejected
        # steps included): K · (1e-11 · max|S| + 1e-14), |P| <= |S| along the way
        K = solvers[-1].nfev / 12
        assert np.max(np.abs(exact - ode)) <= K * (1e-11 * np.max(np.abs(S)) + 1e-14)


def test_riccati_narrow_net_learns_best_rank_one_map():
    # width 1: the product converges to the top SVD term (Eckart–Young), rank stays 1
    S, _ = _random_problem(2)
    rng = np.random.default_rng(3)
    params = th.balanced_init(1e-3 * np.outer(rng.normal(size=3), rng.normal(size=4)), 1)
    P_inf = th.unaligned_product([500.0], params, S)[0]
    U, s, Vt = np.linalg.svd(S)
    # t = 500 is far past convergence (e^{-2(s_1 − s_2)·500} underflows): one restart's
    # round-off as in the aligned test (6 dense steps of size d + p = 7 on ||M|| <= 2 s_1),
    # plus the SVD's on the right (γ_7 s_1 each for u, v)
    np.testing.assert_allclose(P_inf, s[0] * np.outer(U[:, 0], Vt[0]),
                               atol=EPS * 6 * 7 * 2 * s[0] + 2 * gamma(7) * s[0])


# --------------------------------------------------------- leaky <-> linear maps


def test_leaky_maps_are_inverse_and_preserve_the_function():
    key = jax.random.PRNGKey(5)
    X = np.asarray(jax.random.normal(key, (30, 3)))
    lin = bf.init_gaussian(jax.random.PRNGKey(6), (3, 4, 2), 0.7)
    for alpha in (0.0, 0.3, 1.0):
        c = (1 + alpha) / 2
        pair = th.linear_to_pair(lin, alpha)
        back = th.pair_to_linear(pair, alpha)
        # a scaling by f ≈ 1/√(1+α) and back by ≈ √(1+α): each factor within 2ε of exact
        # (1 + α, the sqrt, the reciprocal), each product rounded once: γ_6 relative
        for a, b in zip(back, lin, strict=True):
            np.testing.assert_allclose(a.W, b.W, rtol=gamma(6))
        # the pair net computes exactly its linear twin's function (§2.3): two evaluations
        # (roundoff.forward_gap of each) and the weights' γ_6 scaling through |X||W|ᵀ|v|ᵀ
        Ws = lambda p: [layer.W for layer in p]  # noqa: E731
        tol = (forward_gap(Ws(pair), X) + forward_gap(Ws(lin), X)
               + gamma(6) * (_abs_net(pair, X) + _abs_net(lin, X)))
        assert np.all(np.abs(np.asarray(bf.forward(pair, X, alpha)) - np.asarray(bf.forward(lin, X, 1.0)))
                      <= tol)
        for a, b in zip(th.linear_to_leaky(th.leaky_to_linear(pair, alpha), alpha), pair,
                        strict=True):
            np.testing.assert_allclose(a.W, b.W, rtol=gamma(6))  # (as above, by √c and 1/√c)
        # √c map on an even-free leaky net: same function, twin is linear (the same bound)
        twin = th.leaky_to_linear(pair, alpha)
        tol = (forward_gap(Ws(twin), X) + forward_gap(Ws(pair), X)
               + gamma(6) * (_abs_net(twin, X) + _abs_net(pair, X)))
        assert np.all(np.abs(np.asarray(bf.forward(twin, X, 1.0)) - np.asarray(bf.forward(pair, X, alpha)))
                      <= tol)
        assert th.leaky_time_to_linear(2.0, alpha) == 2.0 * c
        # c = (1 + α)/2 is rounded the same way in the test and the library; x·c/c and x/c·c
        # are two roundings (γ_2), x/c or x·c against the same expression one each side (ε)
        assert th.linear_time_to_leaky(th.leaky_time_to_linear(2.0, alpha), alpha) == pytest.approx(
            2.0, rel=gamma(2))
        assert th.leaky_decay_to_linear(0.3, alpha) == pytest.approx(0.3 / c, rel=EPS)
        assert th.linear_decay_to_leaky(th.leaky_decay_to_linear(0.3, alpha), alpha) == \
            pytest.approx(0.3, rel=gamma(2))
        assert th.pair_lr_to_linear(0.1, alpha) == pytest.approx(0.1 * c, rel=EPS)
        assert th.linear_lr_to_pair(0.1 * c, alpha) == pytest.approx(0.1, rel=gamma(2))


# ---------------------------------------------------------------- populations


def test_gaussian_sine_identities_by_quadrature():
    pdf = lambda z: np.exp(-z * z / 2) / np.sqrt(2 * np.pi)  # noqa: E731
    for a in (0.5, 4.0 * 0.6):
        E = lambda g: quad(lambda z: g(z) * pdf(z), -40, 40, limit=400, epsabs=1e-14)  # noqa: E731
        # quadrature error, not round-off: QUADPACK's own error estimate (asked <= 1e-14; the
        # tails beyond ±40 are e^{-800}), plus γ_4 on the closed forms (an exp, two products)
        # and on the integrand's O(1) values; a wrong identity is off by O(0.1)
        val, err = E(lambda z, a=a: z * np.sin(a * z))
        assert abs(val - a * np.exp(-a * a / 2)) <= err + gamma(4) * (1 + a)
        val, err = E(lambda z, a=a: np.sin(a * z) ** 2)
        assert abs(val - (1 - np.exp(-2 * a * a)) / 2) <= err + gamma(4)


def _mc_check(loss_closed, per_sample):
    # Monte-Carlo mean within 5 standard errors (a false alarm has probability 6e-7)
    se = per_sample.std(ddof=1) / np.sqrt(per_sample.size)
    assert abs(per_sample.mean() - loss_closed) <= 5 * se, (per_sample.mean(), loss_closed, se)


def test_population_losses_against_monte_carlo():
    rng = np.random.default_rng(7)
    n, d, p = 400_000, 3, 2
    A = rng.normal(size=(d, d))
    cov = A @ A.T / d + 0.2 * np.eye(d)
    X = rng.multivariate_normal(np.zeros(d), cov, size=n)
    T, beta, noise = rng.normal(size=(p, d)), rng.normal(size=(d, p)), 0.3
    Y = X @ T.T + noise * rng.normal(size=(n, p))
    _mc_check(th.population_loss_linear(beta, T, cov, noise),
              0.5 * np.sum((Y - X @ beta) ** 2, axis=1))
    w = rng.uniform(-0.5, 0.5, size=d)
    b1 = rng.normal(size=d) * 0.3
    ys = X @ w + np.sin(4.0 * X @ w) + noise * rng.normal(size=n)
    _mc_check(th.population_loss_sine(b1, w, cov, 4.0, noise), 0.5 * (ys - X @ b1) ** 2)
    # the best linear map is a stationary point and attains the floor
    best = th.sine_best_linear(w, cov, 4.0)
    # round-off: R(β*) = ½[δᵀΣδ + 2k e^{-k²τ²/2} δᵀΣw + sin2 + σ²] sums d² + 4 terms whose
    # sizes are e_k²τ², 2e_k²τ², sin2 <= ½ and σ² (e_k = k e^{-k²τ²/2}, δ = −e_k w): γ_{d²+6}
    # on M = ½(3 e_k²τ² + ½ + σ²) per side, and β* itself rounded (γ_3, first order zero
    # at the minimum)
    k, tau2 = 4.0, float(w @ cov @ w)
    ek = k * np.exp(-k * k * tau2 / 2)
    M = 0.5 * (3 * ek**2 * tau2 + 0.5 + noise**2)
    assert abs(th.population_loss_sine(best, w, cov, 4.0, noise)
               - th.sine_linear_floor(w, cov, 4.0, noise)) <= 2 * gamma(d * d + 6) * M
    h = 1e-5
    for j in range(d):
        e = np.eye(d)[j] * h
        grad = (th.population_loss_sine(best + e, w, cov) - th.population_loss_sine(best - e, w, cov))
        # central difference of a quadratic: no truncation error; round-off of the two
        # evaluations (γ_{d²+6} M each, M as above at σ = 0) over 2h, and β* rounded (γ_3)
        # moves the gradient by Σ γ_3|β*|; about 1e-10, against O(1) for a non-stationary β
        M0 = 0.5 * (3 * ek**2 * tau2 + 0.5)
        tol = 2 * gamma(d * d + 6) * M0 / (2 * h) + gamma(3) * float(np.abs(cov[j]) @ np.abs(best))
        assert abs(grad / (2 * h)) <= tol
    # shape handling: a (T, d, 1) trajectory of maps gives (T,) losses
    assert th.population_loss_sine(np.stack([best, b1])[..., None], w, cov).shape == (2,)


# ---------------------------------------------- against the gradient-flow simulator


def test_two_layer_linear_modes_and_loss_match_flow(white):
    data, modes = white
    a0 = np.array([1e-3, 3e-3])
    params = th.aligned_init(modes.U, modes.V, a0, width=WIDTH)
    for lam in (0.0, 0.3):
        traj = _flow(params, data, weight_decay=lam)
        t = np.asarray(traj.t)
        a_th = th.mode_strength(t, modes.s, a0, weight_decay=lam)
        assert _rel_modes(traj, modes, a_th) <= TOL_SIM
        assert _rel_loss(traj, th.linear_loss(t, modes.s, a0, modes.y_power,
                                              weight_decay=lam)) <= TOL_SIM
        if lam == 0.0:  # by t = 12 both modes are learned: the run ends on the final loss
            L_end = float(traj.loss[-1])
            assert abs(L_end - th.final_loss(modes.s, modes.y_power)) <= TOL_SIM * float(traj.loss[0])


@pytest.mark.parametrize("alpha", [0.0, 0.5])
def test_leaky_pair_net_matches_closed_form(white, alpha):
    data, modes = white
    c = (1 + alpha) / 2
    a0_raw = np.array([2e-3, 4e-3])
    twin = th.aligned_init(modes.U, modes.V, th.leaky_effective_init(a0_raw, alpha))
    pair = th.linear_to_pair(twin, alpha)
    # the raw product of the pair net carries the raw strengths a0_raw
    raw = np.asarray(bf.nets.end_to_end_linear(pair)).T
    # u_iᵀ P v_i through products of inner sizes <= d + p + 2·width, the twin's init and the
    # pair map (γ_6 more): γ_k relative to |u_i|ᵀ|U| diag(a)|V|ᵀ|v_i| <= √(pd) Σ_j a_j
    k = D + P + 2 * 2 * WIDTH + 6
    rtol = gamma(k) * np.sqrt(P * D) * a0_raw.sum() / a0_raw.min()
    np.testing.assert_allclose(th.mode_projections(raw, modes), a0_raw, rtol=rtol)
    for lam in (0.0, 0.2):
        traj = _flow(pair, data, alpha=alpha, t_max=12.0 / c, weight_decay=lam)
        t = np.asarray(traj.t)
        # f_even ≡ 0 (pairs preserved): exact in real arithmetic, and the solver's steps are
        # combinations of field values that keep the pair form, so the halves drift apart
        # only by the field's round-off, <= 2γ_k|θ| a step (k = chain_length): after n
        # accepted steps f_even <= n 2γ_k |f|_abs (the net on absolute values), squared.
        # ~1e-21 here, against O(1e-4) for a net whose pairs come apart
        k = chain_length(pair, data.X.shape[0])
        f_abs = float(np.max(_abs_net(traj.params, data.X)))
        bound = (traj.stats["accepted"] * 2 * gamma(k) * f_abs) ** 2
        assert float(np.max(traj.even_energy)) <= bound < 1e-12
        a_th = th.leaky_mode_strength(t, modes.s, a0_raw, alpha, weight_decay=lam)
        assert _rel_modes(traj, modes, a_th) <= TOL_SIM
        assert _rel_loss(traj, th.leaky_loss(t, modes.s, a0_raw, alpha, modes.y_power,
                                             weight_decay=lam)) <= TOL_SIM


def test_rank_one_leaky_init_matches_closed_form(white):
    # docs/theory.md §2.5: w_k = v_k r, Σ v_k|v_k| = 0; aligned with mode 1 only
    data, modes = white
    alpha, a0_raw = 0.0, 1e-3
    params = bf.init_rank_one(jax.random.PRNGKey(9), D, WIDTH, a0_raw, direction=modes.V[:, 0],
                              out_direction=modes.U[:, 0], p=P)
    traj = _flow(params, data, alpha=alpha, t_max=12.0 / 0.5)
    t = np.asarray(traj.t)
    a_sim = th.mode_projections(np.asarray(traj.beta), modes)
    a_th = th.leaky_mode_strength(t, modes.s[0], a0_raw, alpha)
    assert float(np.max(np.abs(a_sim[:, 0] - a_th))) / modes.s[0] <= TOL_SIM
    # mode 2 is never touched in exact arithmetic (w_k = v_k r stays along r = v_1, the
    # output along u_1); round-off seeds components along v_2 and u_2 of <= n 2γ_k max|θ|
    # each (n accepted steps), and each grows at most like e^{c s_2 t} (the linearised
    # rate), so a_2 <= √(dp) (n 2γ_k max|θ|)² e^{2 c s_2 t_max} (c = ½, ReLU); and the
    # projection u_2ᵀβv_2 itself rounds: γ_{d+p} √(dp) max|β|
    k = chain_length(params, data.X.shape[0])
    th_max = max(float(np.max(np.abs(np.asarray(layer.W)))) for layer in traj.params)
    seed = traj.stats["accepted"] * 2 * gamma(k) * th_max
    bound = np.sqrt(D * P) * (seed**2 * np.exp(2 * 0.5 * modes.s[1] * float(t[-1]))
                              + gamma(D + P) * float(np.max(np.abs(np.asarray(traj.beta)))))
    assert float(np.max(np.abs(a_sim[:, 1]))) <= bound < 1e-6
    # loss: mode 2 stays unlearned, so it counts with the unexplained part
    assert _rel_loss(traj, th.leaky_loss(t, modes.s[0], a0_raw, alpha, modes.y_power)) <= TOL_SIM


@pytest.mark.parametrize("L", [3, 4])
def test_deep_linear_matches_flow(white, L):
    data, modes = white
    a0 = np.array([2e-2, 4e-2])
    rng = np.random.default_rng(L)
    bases = [np.linalg.qr(rng.normal(size=(2, 2)))[0] for _ in range(L - 1)]
    params = th.aligned_init(modes.U, modes.V, a0, depth=L, bases=bases)
    # L products of inner size 2 with orthonormal bases (QR: ~2ε each) and b = a0^{1/L}
    # raised back to the L-th power (L roundings): γ_{4L+4} on |W_L|…|W_1|
    tol = gamma(4 * L + 4) * _abs_net(params, np.eye(D)).T
    assert np.all(np.abs(np.asarray(bf.nets.end_to_end_linear(params)) - (modes.U * a0) @ modes.V.T) <= tol)
    traj = _flow(params, data, t_max=15.0)
    t = np.asarray(traj.t)
    assert _rel_modes(traj, modes, th.deep_mode_strength(t, modes.s, a0, L)) <= TOL_SIM
    assert _rel_loss(traj, th.deep_loss(t, modes.s, a0, L, modes.y_power)) <= TOL_SIM


def test_unaligned_balanced_init_matches_flow(white):
    data, modes = white
    Syx = np.asarray(bf.data.cross_covariance(data.X, data.Y))
    rng = np.random.default_rng(11)
    basis, _ = np.linalg.qr(rng.normal(size=(WIDTH, 2)))
    params = th.balanced_init(0.02 * rng.normal(size=(P, D)), WIDTH, basis=basis)
    # balanced through the SVD of P0 (A, B orthonormal to ~(d + p)ε each) and the basis's QR
    # (~width ε), sums of <= 4 terms: γ_{2(d+p)+width+4} relative
    assert th.imbalance(params) <= gamma(2 * (D + P) + WIDTH + 4)
    traj = _flow(params, data)
    t = np.asarray(traj.t)
    Pt = th.unaligned_product(t, params, Syx)
    beta_sim = np.transpose(np.asarray(traj.beta), (0, 2, 1))
    assert float(np.max(np.abs(beta_sim - Pt))) / modes.s[0] <= TOL_SIM
    assert _rel_loss(traj, th.unaligned_loss(t, params, Syx, modes.y_power)) <= TOL_SIM
    curve = th.reference_curve(params, data.X, data.Y, t)
    assert curve.reference == "riccati"
    assert _rel_loss(traj, curve.loss) <= TOL_SIM


def test_non_whitened_reference_matches_flow(raw):
    # linear net from unbalanced Gaussian init, anisotropic inputs: the ODE reference
    params = bf.init_gaussian(jax.random.PRNGKey(12), (D, WIDTH, P), 0.1)
    traj = _flow(params, raw)
    curve = th.reference_curve(params, raw.X, raw.Y, np.asarray(traj.t))
    assert curve.reference == "ode"
    assert _rel_loss(traj, curve.loss) <= TOL_SIM
    assert float(np.max(np.abs(curve.beta - np.asarray(traj.beta)))) <= TOL_SIM
    # ReLU pair net on the same (symmetric) data: linear twin in time c t, exact
    pair = th.linear_to_pair(bf.init_gaussian(jax.random.PRNGKey(13), (D, WIDTH // 2, P), 0.1), 0.0)
    traj = _flow(pair, raw, alpha=0.0, t_max=24.0, weight_decay=0.05)
    curve = th.reference_curve(pair, raw.X, raw.Y, np.asarray(traj.t), alpha=0.0,
                               weight_decay=0.05)
    assert curve.reference == "ode" and "exact" in curve.note
    assert _rel_loss(traj, curve.loss) <= TOL_SIM


def test_reference_curve_flags_approximate_leaky_maps(raw):
    params = bf.init_gaussian(jax.random.PRNGKey(14), (D, 4, P), 0.1)
    curve = th.reference_curve(params, raw.X, raw.Y, [0.0, 1.0], alpha=0.0)
    assert "APPROXIMATE" in curve.note
    with pytest.raises(ValueError, match="whitened"):
        th.reference_curve(params, raw.X, raw.Y, [0.0, 1.0], method="riccati")
    # the ODE reference ends on the least-squares floor (what no linear map explains)
    lin = bf.init_gaussian(jax.random.PRNGKey(15), (D, 2, P), 0.1)
    end = th.reference_curve(lin, raw.X, raw.Y, [2000.0]).loss[0]
    # converged (t = 2000 against rates >= ~0.1): the ODE's error at a stable fixed point is
    # its local tolerance, rtol 1e-11 on β, and moves L only to second order (~1e-22); the
    # loss from β (½tr Σ_yy − tr βᵀΣ_xy + ½ tr βᵀΣβ) and the least-squares floor each carry
    # γ_{N+d²} on terms <= 2 y_power, which dominates
    N = raw.X.shape[0]
    y_power = float(np.mean(np.sum(np.asarray(raw.Y) ** 2, axis=1)))
    assert abs(end - th.linear_floor(raw.X, raw.Y)) <= 4 * gamma(N + D * D) * y_power


def test_gd_mode_strength_is_the_exact_discrete_map_of_gd():
    """GD on whitened data from aligned rank-one init: the mode strength follows
    a_{k+1} = a_k (1 + η c (s - a_k))² to round-off, and tends to the flow as η -> 0."""
    key = jax.random.PRNGKey(3)
    target, _ = bf.sine_target(key, 6)
    data = bf.make_dataset(key, target, 60, 6, whitened=True)
    modes = th.data_modes(data.X, data.Y)
    r = np.asarray(modes.V[:, 0]) * float(modes.U[0, 0])  # sign so that uᵀΣ_yx r = s, u = +1
    alpha, a0, lr, steps = 0.3, 1e-2, 0.05, 400
    c = bf.nets.slope_factor(alpha)
    params = bf.init_rank_one(key, 6, 8, a0, direction=r)
    cfg = bf.GDConfig(alpha=alpha, lr=lr, steps=steps, n_records=41)
    traj = bf.train(params, data, cfg)
    ks = np.rint(np.asarray(traj.t) / lr).astype(int)
    a_sim = np.asarray(traj.beta)[:, :, 0] @ r
    a_th = th.gd_mode_strength(ks, modes.s[0], c * a0, lr * c)
    # round-off: the simulated run (roundoff.trajectory_gap: steps·2γ_k × its measured
    # sensitivity), the scalar recursion (the same with k = 4: a sum and three products per
    # step), and s from the data's SVD (γ_{N+d²} s, through the recursion's measured ∂a/∂s)
    N = data.X.shape[0]
    sim = trajectory_gap(lambda p: np.asarray(bf.train(p, data, cfg).beta)[:, :, 0] @ r, params,
                         steps, chain_length(params, N))
    rec = trajectory_gap(lambda a: th.gd_mode_strength(ks, modes.s[0], c * a, lr * c), np.array(a0), steps, 4)
    rel = 1e-7
    ds = np.abs(th.gd_mode_strength(ks, modes.s[0] * (1 + rel), c * a0, lr * c) - a_th) / rel
    tol = sim + rec + gamma(N + 36) * ds
    assert np.all(np.abs(a_sim - a_th) <= tol) and np.max(tol) < 1e-9 * modes.s[0]
    fine = th.gd_mode_strength([20_000], 1.0, 1e-3, 1e-4)[0]
    # discretisation error, not round-off: one GD step a(1 + η(s − a))² differs from the
    # flow's step by η²|a(s − a)² − ä/2| <= η² s³ (|ä| <= s³ for s = 1), and while a << s
    # (a(2) ≈ 0.05) errors are carried at a's own growth rate, not amplified beyond it:
    # t/η steps give <= η t s³ = 2e-4 at η = 1e-4, t = 2 (1e-3 leaves ×5)
    assert abs(fine - th.mode_strength(2.0, 1.0, 1e-3)) < 1e-3
    with pytest.raises(ValueError, match="sorted"):
        th.gd_mode_strength([3, 1], 1.0, 1e-3, 0.1)


# ------------------------------------------------------------------ §2.7 weight decay end point


def _spd(rng, d):
    A = rng.normal(size=(d, d))
    return A @ A.T / d + 0.5 * np.eye(d)


def test_decayed_solution_identity_covariance_closed_form():
    """Σ = I: ``β = (1 - λ'/||b||) b``, the norm shrunk by λ' exactly."""
    b = np.array([3.0, -4.0])  # ||b|| = 5
    # brentq stops within xtol 1e-15 ρ_max + 4ε ρ (ρ = 4, ρ_max = ||b|| = 5), which moves
    # β = b/(1 + λ'/ρ) by <= that relative; then γ_4 for eigh's exact Q = I and two divisions
    rho, rho_max = 4.0, 5.0
    tol = 0.8 * np.abs(b) * ((1e-15 * rho_max + 4 * EPS * rho) / rho) + gamma(4) * np.abs(b)
    assert np.all(np.abs(th.decayed_solution(np.eye(2), b, 1.0) - 0.8 * b) <= tol)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_decayed_solution_general_covariance_is_stationary(seed):
    """Stationarity ``Σβ - b + λ' β/||β|| = 0`` to solver and round-off error."""
    rng = np.random.default_rng(seed)
    S, b = _spd(rng, 5), rng.normal(size=5)
    lam = 0.3 * np.linalg.norm(b)
    beta = th.decayed_solution(S, b, lam)
    grad = S @ beta - b + lam * beta / np.linalg.norm(beta)
    # evaluation round-off: γ_5|S||β| + γ_7(|b| + λ'); eigh's backward error d²ε||S||·||β||;
    # and the root ρ = ||β||, within brentq's 1e-15 ρ_max + 4ερ (ρ_max = ||Q b/λ||), which
    # moves β by <= ||β|| (λ'/ρ)/(λ_min ρ + λ') · δρ/ρ·ρ... bounded by ||β|| δρ λ'/(λ_min ρ²),
    # reaching the gradient through ||S|| + λ'/ρ
    rho, lmin, Snorm = np.linalg.norm(beta), np.linalg.eigvalsh(S)[0], np.linalg.norm(S, 2)
    d_rho = 1e-15 * np.linalg.norm(b) / lmin + 4 * EPS * rho
    tol = (gamma(5) * np.abs(S) @ np.abs(beta) + gamma(7) * (np.abs(b) + lam) + 25 * EPS * Snorm * rho
           + (Snorm + lam / rho) * rho * d_rho * lam / (lmin * rho**2))
    assert np.all(np.abs(grad) <= tol) and np.max(tol) < 1e-12 * np.linalg.norm(b)


def test_decayed_solution_is_minimal_against_perturbations():
    rng = np.random.default_rng(3)
    S, b, lam = _spd(rng, 4), rng.normal(size=4), 0.2

    def J(x):
        return 0.5 * x @ S @ x - b @ x + lam * np.linalg.norm(x)

    beta = th.decayed_solution(S, b, lam)
    for _ in range(50):
        # strictly convex objective: any step of size 1e-3 raises it (by >= ~λ_min·1e-6/2)
        assert J(beta + 1e-3 * rng.normal(size=4)) > J(beta)


def test_decayed_solution_strong_decay_gives_zero_and_bad_input_raises():
    np.testing.assert_array_equal(th.decayed_solution(np.eye(3), np.array([0.1, 0.0, 0.0]), 0.5),
                                  np.zeros(3))
    with pytest.raises(ValueError, match="positive definite"):
        th.decayed_solution(np.diag([1.0, 0.0]), np.array([1.0, 1.0]), 0.1)


# ------------------------------------------------------------------ §4.1 deep pair nets, §3.3 GD map


def _np_net(rng, widths, scale):
    return tuple(bf.nets.Layer(scale * rng.normal(size=(b, a)))
                 for a, b in zip(widths[:-1], widths[1:], strict=True))


def _unpair(pair):
    """The scaled half net inside a pair net: top blocks of every layer."""
    out = []
    for i, layer in enumerate(pair):
        W = np.asarray(layer.W)
        r = W.shape[0] if i == len(pair) - 1 else W.shape[0] // 2
        c = W.shape[1] if i == 0 else W.shape[1] // 2
        out.append(bf.nets.Layer(W[:r, :c]))
    return tuple(out)


def test_deep_pair_time_factor_limits():
    """λ_2 = c (the two-layer twin, §2.4), λ_L = 1 for α = 1, λ_3 = 2^{-4/3} for ReLU."""
    # c^{2(L-1)/L} = 0.75^1 (pow by 1: exact in any libm, ε allowed) and 0.5^{4/3} against
    # 2^{-4/3}: two pows (< 1 ulp each) of the same rounded exponent, γ_4
    assert th.deep_pair_time_factor(2, 0.5) == pytest.approx(0.75, rel=EPS)
    assert th.deep_pair_time_factor(4, 1.0) == 1.0
    assert th.deep_pair_time_factor(3, 0.0) == pytest.approx(2 ** (-4 / 3), rel=gamma(4))


@pytest.mark.parametrize("depth", [3, 4])
def test_deep_linear_to_pair_computes_the_linear_net(depth):
    """deep_linear_to_pair(net) computes the same (linear) function as net at α = 0, and
    deep_pair_half_to_linear undoes its layer scaling."""
    rng = np.random.default_rng(depth)
    lin = _np_net(rng, (3,) + (4,) * (depth - 1) + (2,), 0.8)
    X = rng.normal(size=(10, 3))
    pair = th.deep_linear_to_pair(lin, 0.0)
    # two evaluations (roundoff.forward_gap of each) and the layer scalings (a pow and a
    # product per layer, 2 per layer: γ_{2L}) through the absolute-value nets
    Ws = lambda p: [layer.W for layer in p]  # noqa: E731
    tol = (forward_gap(Ws(pair), X) + forward_gap(Ws(lin), X)
           + gamma(2 * depth) * (_abs_net(pair, X) + _abs_net(lin, X)))
    assert np.all(np.abs(np.asarray(bf.forward(pair, X, 0.0)) - np.asarray(bf.forward(lin, X, 1.0))) <= tol)
    for a, b in zip(th.deep_pair_half_to_linear(_unpair(pair), 0.0), lin, strict=True):
        # scaled and unscaled by the same factor (each computed within 2ε): γ_6
        np.testing.assert_allclose(a.W, b.W, rtol=gamma(6))


def test_deep_pair_map_is_exact_for_the_identity_activation():
    """α = 1: the pair net's gradient lies in the pair manifold, so pair GD (step η) equals
    GD of the deep linear net it was mapped from (step ηλ, λ = 1) to round-off."""
    rng = np.random.default_rng(0)
    lin = _np_net(rng, (3, 4, 4, 2), 0.5)
    X = rng.normal(size=(20, 3))
    X, Y = bf.symmetrize(X, X @ rng.normal(size=(2, 3)).T)
    data = bf.Dataset(X, Y)
    # keep_params for loss_eval_gap's path: every run below is this one compiled program
    cfg = bf.GDConfig(alpha=1.0, lr=0.05, steps=200, n_records=5, keep_params=True)
    pair = bf.train(th.deep_linear_to_pair(lin, 1.0), data, cfg)
    padded = bf.train(pad_hidden(lin, 8), data, cfg)
    assert float(pair.loss[-1]) < 0.5 * float(pair.loss[0])  # it did train
    # equal in exact arithmetic: each run's roundoff.trajectory_gap (200 steps · 2γ_k × its
    # measured sensitivity) plus each loss evaluation's loss_eval_gap (near-exact fits)
    k = chain_length(th.deep_linear_to_pair(lin, 1.0), X.shape[0])
    e = 0.0
    for init, tr in ((th.deep_linear_to_pair(lin, 1.0), pair), (pad_hidden(lin, 8), padded)):
        e = e + trajectory_gap(lambda p: np.asarray(bf.train(p, data, cfg).loss), init, cfg.steps, k)
        e = e + loss_eval_gap(tr.path, X, Y, tr.loss, k)
    assert np.all(np.abs(np.asarray(pair.loss) - np.asarray(padded.loss)) <= e)
    assert np.max(e) < 1e-8 * float(pair.loss[0])  # a broken pair map is off by O(1e-2)


def test_deep_gd_mode_strength_is_first_order_in_the_step():
    """The exact GD mode map tends to the §3.3 flow solution with error linear in η: halving
    η halves the max error (ratio within 0.45–0.55)."""
    s, a0, L, t_end = np.array([1.5, 0.7]), 1e-2, 3, 20.0
    errs = []
    for lr in (0.01, 0.005):
        steps = int(round(t_end / lr))
        ks = np.arange(0, steps + 1, steps // 40)
        a = th.deep_gd_mode_strength(ks, s, a0, L, lr)
        errs.append(np.max(np.abs(a - th.deep_mode_strength(lr * ks, s, a0, L)) / s))
    assert errs[0] < 0.05
    assert 0.45 <= errs[1] / errs[0] <= 0.55


@pytest.mark.parametrize("args, error, match", [
    (([0, 10**9], 1.0, 1e-3, 3, 0.1), ValueError, "at most 1e\\+07"),  # was a 10⁹-step Python loop
    (([0, 5], -1.0, 1e-3, 3, 0.1), ValueError, "s=-1.0 must be >= 0"),
    (([0, 5], np.nan, 1e-3, 3, 0.1), ValueError, "s=nan must be finite"),
    (([0, 5], 1.0, -1e-3, 3, 0.1), ValueError, "a0=-0.001 must be >= 0"),
    (([0, 5], "a", 1e-3, 3, 0.1), TypeError, "s='a' must be a real number"),
    (([0, 50], 1.0, 1e-3, 3, 100.0), ValueError, "lr=100.0 is too large"),  # was a NaN returned
])
def test_deep_gd_mode_strength_refuses_what_the_two_layer_map_refuses(args, error, match):
    with np.errstate(all="ignore"), pytest.raises(error, match=match):
        th.deep_gd_mode_strength(*args)


@pytest.mark.parametrize("fn, arg", [(th.deep_linear_to_pair, "linear"),
                                     (th.deep_pair_half_to_linear, "half")])
def test_deep_pair_maps_check_their_net(fn, arg):
    """Both once took anything: a string failed inside, NaN passed through, biases were dropped."""
    with pytest.raises(TypeError, match=f"{arg} must be a non-empty tuple of biasfree Layer"):
        fn("net", 0.0)
    biased = bf.init_gaussian(jax.random.PRNGKey(0), (2, 3, 3, 1), 0.1, bias=True)
    with pytest.raises(ValueError, match=f"{arg} has biases"):
        fn(biased, 0.0)


def test_deep_gd_mode_strength_at_depth_two_is_the_two_layer_map():
    ks = np.array([0, 3, 50, 400])
    # at L = 2 the deep map's a^{(L-2)/L} is a^0 = 1 exactly and (·)^L is (·)^2: the same
    # floating-point operations as the two-layer map, so bit for bit
    np.testing.assert_array_equal(th.deep_gd_mode_strength(ks, 1.3, 1e-3, 2, 0.05),
                                  th.gd_mode_strength(ks, 1.3, 1e-3, 0.05))
