"""Small random init (theory.small_init, §2.4, §3.1) and the exact moment-data twin
(data.moment_data) that makes linear predictions cheap."""

import jax
import numpy as np
import pytest
from roundoff import EPS, chain_length, gamma, loss_eval_gap, trajectory_gap

import biasfree as bf
from biasfree import theory as th
from biasfree.core.moments import moment_data

pytestmark = pytest.mark.numerics  # round-off bounds: make test-portable reruns them


def _correlated_data(key, n=300, d=5, p=2):
    k1, k2, k3 = jax.random.split(key, 3)
    A = np.asarray(jax.random.normal(k1, (d, d))) / np.sqrt(d) + np.eye(d)
    X = np.asarray(jax.random.normal(k2, (n, d))) @ A.T
    T = np.asarray(jax.random.normal(k3, (p, d)))
    Y = X @ T.T + np.sin(X[:, :p])           # a part no linear map reaches
    return X, Y


@pytest.mark.parametrize("widths", [(5, 4, 2), (5, 3, 4, 2)])
def test_linear_net_on_moment_data_follows_the_full_data_trajectory(widths):
    """A linear net of any depth sees only Σ_xx and Σ_yx: GD on the r-point moment
    set gives the same parameters, and the same loss once the offset is added."""
    X, Y = _correlated_data(jax.random.PRNGKey(0))
    m = moment_data(X, Y)
    assert m.data.X.shape == (5, 5) and m.loss_offset > 0
    params = bf.init_gaussian(jax.random.PRNGKey(1), widths, 0.3)
    # keep_params for loss_eval_gap's path; every run below shares this one program per data set
    cfg = bf.GDConfig(alpha=1.0, lr=0.05, steps=400, n_records=21, keep_params=True)
    full = bf.train(params, bf.Dataset(X, Y), cfg)
    mom = bf.train(params, m.data, cfg)
    # equal in exact arithmetic. Round-off: the moment set reproduces Σ_xx, Σ_yx only to
    # the eigendecomposition's backward error (~d² ε ||Σ||, LAPACK's p(d) ε) and the N-term
    # sums, so each step's gradient is off by <= 2γ_k relative with k = chain_length(θ, N) +
    # d²; roundoff.trajectory_gap carries that over the 400 steps (× the run's measured
    # sensitivity to its init) for both runs. The loss adds each side's evaluation
    # (roundoff.loss_eval_gap) and the offset's ½(<||y||²> − <||y'||²>) cancellation,
    # γ_N <||y||²>.
    N, d = X.shape
    k = chain_length(params, N) + d * d

    def run(data):
        def observe(p):
            tr = bf.train(p, data, cfg)
            return {"loss": np.asarray(tr.loss), "W": [np.asarray(layer.W) for layer in tr.params]}
        return observe

    sets = ((bf.Dataset(X, Y), full), (m.data, mom))
    gaps = [trajectory_gap(run(data), params, cfg.steps, k) for data, _ in sets]
    e_loss = gaps[0]["loss"] + gaps[1]["loss"] + gamma(N) * np.mean(np.sum(Y**2, axis=1))
    for data, tr in sets:
        e_loss = e_loss + loss_eval_gap(tr.path, data.X, data.Y, tr.loss, k)
    assert np.all(np.abs(np.asarray(mom.loss) + m.loss_offset - np.asarray(full.loss)) <= e_loss)
    for a, b, ga, gb in zip(mom.params, full.params, gaps[1]["W"], gaps[0]["W"], strict=True):
        assert np.all(np.abs(np.asarray(a.W) - np.asarray(b.W)) <= ga + gb)
    # tight enough to catch a twin that is not exact (a wrong offset or moment: O(1e-2))
    assert np.max(e_loss) < 1e-9 and max(np.max(g) for g in gaps[0]["W"]) < 1e-9


def test_moment_data_drops_null_directions_and_refuses_zero_inputs():
    X, Y = _correlated_data(jax.random.PRNGKey(2), d=4, p=1)
    X = np.hstack([X, np.zeros((X.shape[0], 1))])            # a pixel that is always 0
    m = moment_data(X, Y)
    assert m.data.X.shape == (4, 5)
    # Σ_xx = E diag(λ) Eᵀ and Σ_yx E Eᵀ = Σ_yx in exact arithmetic; round-off: the N-term
    # sums (γ_N on |X|ᵀ|X|/N) and the eigendecomposition's backward error and E's loss of
    # orthogonality, each <= d² ε ||Σ_xx||₂ (LAPACK's p(d) ε, d = 5), passed on through the
    # rescaling and the 4-term products (γ_d more): 3 d² ε ||·|| + γ_N |·|
    N, d = X.shape
    Sxx, Syx = np.abs(X).T @ np.abs(X) / N, np.abs(Y).T @ np.abs(X) / N
    tol_x = gamma(N) * Sxx + 3 * d * d * EPS * np.linalg.norm(X.T @ X / N, 2)
    tol_y = gamma(N) * Syx + 3 * d * d * EPS * np.linalg.norm(Y.T @ X / N, 2)
    assert np.all(np.abs(m.data.X.T @ m.data.X / 4 - X.T @ X / N) <= tol_x)
    assert np.all(np.abs(m.data.Y.T @ m.data.X / 4 - Y.T @ X / N) <= tol_y)
    with pytest.raises(ValueError, match="nonzero covariance"):
        moment_data(np.zeros((3, 2)), np.ones((3, 1)))


def test_half_loss_time_is_where_the_loss_is_half_way():
    """linear_loss(t½) - L∞ = ½ (L(0) - L∞) for the logistic mode, to round-off."""
    s, a0, y_power = 1.3, 1e-4, 2.0
    t = th.half_loss_time(s, a0)
    L = th.linear_loss(np.array([0.0, t]), s, a0, y_power)
    L_inf = th.final_loss(s, y_power)
    # exact in real arithmetic. Round-off: t½ carries <= γ_8 relative (a log of a ratio of
    # two rounded differences, s/a½ − 1 ≈ 2.4 the worse), which moves a(t) by its relative
    # condition x = 2st½ (the logistic's exponent) times that, plus γ_6 for evaluating the
    # logistic; (s − a)² then moves by 2a/(s − a) relative. Each L_j − L∞ subtracts two
    # rounded numbers: 3ε(L_j + L∞)/(L_j − L∞) relative. ~1e-14 here; a wrong a½ is O(0.1)
    a = float(th.mode_strength(t, s, a0))
    x = 2 * s * t
    tol = (2 * a / (s - a) * (x * gamma(8) + gamma(6))
           + sum(3 * EPS * (Lj + L_inf) / (Lj - L_inf) for Lj in L))
    assert abs((L[1] - L_inf) / (L[0] - L_inf) - 0.5) <= tol
    # later than... earlier than the mode half time by ln(1 + √2)/(2s) as a0 -> 0: the
    # difference is ln(s/a½ − 1)/(2s) exactly, a½ = s(1 − 1/√2) + a0/√2, so the next term
    # of the expansion in u = a0/s is −(2 + √2) u/(2s) (≈ 1.01e-12 here, measured 1.011e-12),
    # the one after O(u²/s) ~ 1e-24: 3.5 a0/(2s²) bounds both (not round-off); round-off:
    # each time is a log over 2s, within γ_8 of itself (t ≈ 10 here, ~4e-14)
    a0s = 1e-12
    t_mode, t_loss = th.half_time(s, a0s), th.half_loss_time(s, a0s)
    tol = 3.5 * a0s / (2 * s * s) + gamma(8) * (t_mode + t_loss + np.log(1 + np.sqrt(2)) / (2 * s))
    assert abs(t_mode - t_loss - np.log(1 + np.sqrt(2)) / (2 * s)) <= tol
    with pytest.raises(ValueError, match="0 < a0 < s"):
        th.half_loss_time(1.0, 2.0)


def test_raw_init_ratio_is_the_log_correction():
    """c t½(α)/t½(1) from the same raw init: 1 at α = 1, → 1 + ln(1/c)/ln(s/a0)."""
    # c = 1 exactly, so both times are the same function of the same arguments: x/x = 1
    assert th.raw_init_half_time_ratio(1.0, 1e-6, 1.0) == 1.0
    for a0 in (1e-4, 1e-8, 1e-16):
        r = th.raw_init_half_time_ratio(1.0, a0, 0.0)
        approx = 1 + np.log(2) / (np.log(1 / a0) - np.log(1 + np.sqrt(2)))
        # corrections are O(a0/s): each 2s t½ = ln(s/a0) − ln(1 + √2) + <= 4.4 a0/s (as above),
        # so r − approx <= 4.4(c + r) a0/s / (ln(s/a0) − 1) < 1.2 a0/s for a0 <= 1e-4;
        # 10 a0 keeps that with room. Round-off: r and approx are each a ratio of logs
        # within γ_8 relative of themselves (at a0 = 1e-16 that is ~1e-15, as large as 10 a0)
        assert r > 1 and abs(r - approx) < 10 * a0 + gamma(8) * (r + approx)


def test_effective_strength_predicts_a_random_init_linear_net():
    """From a small *unbalanced, unaligned* Gaussian init, a linear net on whitened
    data with a rank-one Σ_yx reaches half loss when the logistic from
    a0 = ¼||W1 r + W2ᵀ||² says (gradient flow, so no step-size error)."""
    key = jax.random.PRNGKey(3)
    X = np.asarray(jax.random.normal(key, (200, 6)))
    X = bf.data.whiten(X)[0]
    w = np.array([1.0, -0.5, 0.3, 0.0, 0.2, 0.1])
    data = bf.Dataset(X, X @ w[:, None])
    s = float(np.linalg.norm(w))
    params = bf.init_gaussian(jax.random.PRNGKey(4), (6, 30, 1), [1e-4, 3e-4])   # unbalanced
    a0 = th.effective_strength(params, w / s)
    t_pred = float(th.half_loss_time(s, a0))
    traj = bf.flow(params, data, bf.FlowConfig(alpha=1.0, t_max=1.5 * t_pred, n_records=400,
                                              rtol=1e-10, atol=1e-14))
    L_inf = th.final_loss(s, float(np.mean(np.asarray(data.Y) ** 2)))
    t_meas = traj.half_time(L_inf + 0.5 * (float(traj.loss[0]) - L_inf))
    # neglected: the decaying combination and off-mode weights, O(a0/s) ~ 1e-6 relative;
    # the crossing is read off 400 records by linear interpolation, an error of
    # ~(Δt/t½)² ~ 1e-5 at most (measured: 1.3e-7 overall)
    assert abs(t_meas / t_pred - 1) < 1e-5, (t_meas, t_pred)
    with pytest.raises(ValueError, match="unit vector"):
        th.effective_strength(params, w)
