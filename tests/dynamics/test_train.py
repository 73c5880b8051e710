"""Training engine: exact identities along GD/GF trajectories (docs/theory.md §2, §4.2),
the GD -> gradient-flow limit, ensembles, and input validation.

All runs are float64 and small (d = 3, N = 40, widths <= 8) so the file runs in
seconds; shapes are shared between tests so that each compiled loop is reused.
Random arrays come from seeded NumPy generators (eager ``jax.random`` compiles per
shape, which would dominate the run time).
"""

import dataclasses
import re
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from roundoff import EPS, chain_length, flow_error_bound, gamma, grad_gap, loss_eval_gap, trajectory_gap

import biasfree as bf
from biasfree.core.layers import Layer
from biasfree.dynamics.pacing import stall_window

pytestmark = pytest.mark.numerics  # round-off bounds: make test-portable reruns them

D, P, N_HALF = 3, 2, 20
N_REC = 51  # records per GD run; one value keeps the compiled loop's shapes shared
FLOW_STAGES = 7  # gradient evaluations per step of the adaptive solver (Tsit5, the default: 7 stages)


def _leaves(params):
    return jax.tree_util.tree_leaves(params)


def _param_dist(a, b):
    return float(np.sqrt(sum(np.sum((x - y) ** 2) for x, y in zip(_leaves(a), _leaves(b), strict=True))))


def _net(rng, widths, scale):
    Ws = [scale * rng.normal(size=(n_out, n_in)) for n_in, n_out in zip(widths[:-1], widths[1:], strict=True)]
    return bf.from_arrays(Ws)


def _teacher():
    """Linear teacher T = U diag(2, 1) Vᵀ of shape (p, d) = (2, 3)."""
    rng = np.random.default_rng(0)
    U, _ = np.linalg.qr(rng.normal(size=(P, P)))
    V, _ = np.linalg.qr(rng.normal(size=(D, P)))
    return U, np.array([2.0, 1.0]), V


@pytest.fixture(scope="module")
def sym_data():
    """Symmetric set (x, y), (-x, -y): N = 40 Gaussian inputs in d = 3, linear teacher
    with singular values (2, 1), p = 2 outputs."""
    U, s, V = _teacher()
    X = np.random.default_rng(1).normal(size=(N_HALF, D))
    Xs, Ys = bf.symmetrize(X, X @ ((U * s) @ V.T).T)
    return bf.Dataset(Xs, Ys)


@pytest.fixture(scope="module")
def rank1_data():
    """As ``sym_data`` (same shapes) but with the rank-one teacher T = 2 u_1 v_1ᵀ.

    A rank-one net trained on a teacher with a second mode leaves the rank-one manifold:
    it is invariant but unstable, round-off seeds the second mode (measured: f_even
    grows from 1e-32 to 1e-2 by t ~ 150), so §2.5 is tested where it is stable."""
    U, _, V = _teacher()
    X = np.random.default_rng(1).normal(size=(N_HALF, D))
    Xs, Ys = bf.symmetrize(X, X @ (2.0 * np.outer(U[:, 0], V[:, 0])).T)
    return bf.Dataset(Xs, Ys)


def _mapped_linear_run(half, data, alpha, eta, steps, factor, lr_factor, weight_decay=0.0,
                       wd_factor=1.0, loss="mse"):
    """The linear (α = 1) twin: init ``factor * half``, lr ``lr_factor * η``, decay
    ``wd_factor * λ``; returns (trajectory, its init, its config)."""
    cfg = bf.GDConfig(alpha=1.0, lr=lr_factor * eta, steps=steps, loss=loss,
                      weight_decay=wd_factor * weight_decay, n_records=N_REC)
    init = bf.nets.scale_params(half, factor)
    return bf.train(init, data, cfg), init, cfg


def _curves(p, data, cfg):
    tr = bf.train(p, data, cfg)
    return {"loss": np.asarray(tr.loss), "beta": np.asarray(tr.beta)}


def _assert_same_run(leaky, linear, data, leaky_init, leaky_cfg, linear_init, linear_cfg) -> dict:
    """Loss and β_eff curves of the leaky run and its linear twin (equal in exact arithmetic)
    agree within the sum of both runs' round-off bounds (roundoff.trajectory_gap: T·2γ_k ×
    the measured sensitivity to the init), each bound below 1e-8 (a broken identity strays by
    O(1e-2)). Returns the summed bounds by observable."""
    k = chain_length(leaky_init, data.X.shape[0])
    gaps = [trajectory_gap(lambda p, c=c: _curves(p, data, c), init, c.steps, k)
            for init, c in ((leaky_init, leaky_cfg), (linear_init, linear_cfg))]
    bound = {name: gaps[0][name] + gaps[1][name] for name in gaps[0]}
    if leaky_cfg.loss == "mse":  # near an exact fit the loss's own evaluation is not relative
        for tr, init, c in ((leaky, leaky_init, leaky_cfg), (linear, linear_init, linear_cfg)):
            path = bf.train(init, data, dataclasses.replace(c, keep_params=True)).path
            bound["loss"] = bound["loss"] + loss_eval_gap(path, data.X, data.Y, tr.loss, k)
    for name, e in bound.items():
        diff = np.abs(np.asarray(getattr(leaky, name)) - np.asarray(getattr(linear, name)))
        assert np.all(diff <= e), f"{name}: {np.max(diff):.3g} vs bound {np.max(e):.3g}"
        assert np.max(e) < 1e-8, f"{name}: bound {np.max(e):.2g} too loose to catch a broken identity"
    return bound


# ------------------------------------------------------------------ §2.3 pair init


@pytest.mark.parametrize("alpha", [0.0, 0.5])
def test_pair_init_gd_equals_mapped_linear_net(sym_data, alpha):
    """Width-2m leaky net from pair_up(W, v) == width-m linear net started at
    sqrt(1+α)(W, v) with lr η(1+α)/2: loss and β_eff at 51 records over 1500 steps (§2.3)."""
    eta, steps = 0.05, 1500
    half = _net(np.random.default_rng(2), (D, 4, P), 0.1)
    c = bf.nets.slope_factor(alpha)
    lcfg = bf.GDConfig(alpha=alpha, lr=eta, steps=steps, n_records=N_REC)
    leaky = bf.train(bf.pair_up(half), sym_data, lcfg)
    linear, linit, cfg = _mapped_linear_run(half, sym_data, alpha, eta, steps, np.sqrt(1 + alpha), c)
    # the runs learn (so agreement is not trivial): loss drops by > 1e3
    assert float(leaky.loss[-1]) < 1e-3 * float(leaky.loss[0])
    # identity exact in real arithmetic: within both runs' round-off bounds
    _assert_same_run(leaky, linear, sym_data, bf.pair_up(half), lcfg, linit, cfg)

    # final weights, as observables of the two runs: the effective map β_eff = c [W;-W]ᵀ[v,-v]ᵀ
    # of the pair net == W'ᵀv'ᵀ of the twin, the pairing W1[4:] = -W1[:4] kept, and the first
    # half of the pair net = the twin's W1 / sqrt(1+α); each within the summed trajectory_gap
    # of the two runs (the pairing: of the pair run alone)
    def pair_final(p):
        tr = bf.train(p, sym_data, lcfg)
        W1 = np.asarray(tr.params[0].W)
        return {"map": np.asarray(bf.beta_eff(tr.params, alpha)), "pairing": W1[4:] + W1[:4],
                "half": np.sqrt(1 + alpha) * W1[:4]}

    def twin_final(p):
        tr = bf.train(p, sym_data, cfg)
        return {"map": np.asarray(bf.nets.end_to_end_linear(tr.params).T), "half": np.asarray(tr.params[0].W)}

    k = chain_length(bf.pair_up(half), sym_data.X.shape[0])
    gl = trajectory_gap(pair_final, bf.pair_up(half), steps, k)
    gt = trajectory_gap(twin_final, linit, steps, k)
    got, want = pair_final(bf.pair_up(half)), twin_final(linit)
    for name in ("map", "half"):
        e = gl[name] + gt[name]
        assert np.all(np.abs(got[name] - want[name]) <= e) and np.max(e) < 1e-8, name
    assert np.all(np.abs(got["pairing"]) <= gl["pairing"]) and np.max(gl["pairing"]) < 1e-8
    # f_even ≡ 0: cancellation of O(1) numbers, so <f_even²> is at round-off squared
    assert float(jnp.max(leaky.even_energy)) <= 1e-28


@pytest.mark.parametrize("alpha", [0.0, 0.5])
def test_deep_pair_init_computes_scaled_product_and_stays_odd(sym_data, alpha):
    """L = 3 pair net: f = (2c)^{L-1} W_3 W_2 W_1 x at init; trained by GD on symmetric
    data it stays odd (f_even ≡ 0) and its middle layer keeps the swap symmetry
    M = [[A, B], [B, A]] (§2.3, §4.1)."""
    half = _net(np.random.default_rng(3), (D, 3, 3, P), 0.5)
    pair = bf.pair_up(half)
    c = bf.nets.slope_factor(alpha)
    cfg = bf.GDConfig(alpha=alpha, lr=0.05, steps=1500, n_records=N_REC)
    traj = bf.train(pair, sym_data, cfg)
    # β_eff at init (least squares X⁺ f_odd(X) for a deep net) against the product: the
    # forward's error per column is <= 2γ_k (2c)² |X| |W₁|ᵀ|W₂|ᵀ|W₃|ᵀ (k the chain), so in
    # 2-norm <= 2γ_k (2c)² ||X||_F ||P||_F (P = |W₃||W₂||W₁|), carried by ||X⁺||₂; the
    # computed pseudo-inverse adds a relative error of order γ_k κ(X) on β (N = 40, d = 3)
    k = chain_length(pair, sym_data.X.shape[0])
    X = np.asarray(sym_data.X)
    P_abs = np.linalg.norm(np.abs(half[2].W) @ np.abs(half[1].W) @ np.abs(half[0].W))
    e = 2 * gamma(k) * (2 * c) ** 2 * P_abs * (np.linalg.norm(X) * np.linalg.norm(np.linalg.pinv(X), 2)
                                              + np.linalg.cond(X))
    beta0 = (2 * c) ** 2 * bf.nets.end_to_end_linear(half).T
    assert np.max(np.abs(traj.beta[0] - beta0)) <= e < 1e-10
    assert float(traj.loss[-1]) < 1e-2 * float(traj.loss[0])  # it learned
    assert float(jnp.max(traj.even_energy)) <= 1e-28
    M = np.asarray(traj.params[1].W)
    # swap symmetry of the middle layer, exact in real arithmetic: each block within its
    # trajectory_gap (T·2γ_k × measured sensitivity of the final weights), summed
    g = trajectory_gap(lambda p: np.asarray(bf.train(p, sym_data, cfg).params[1].W), pair, cfg.steps, k)
    for a, b in ((np.s_[:3, :3], np.s_[3:, 3:]), (np.s_[:3, 3:], np.s_[3:, :3])):
        assert np.all(np.abs(M[a] - M[b]) <= g[a] + g[b]) and np.max(g) < 1e-8
    # but not the linear pairing B = -A of the initial block [[A, -A], [-A, A]]: the
    # middle layer acquires an even part and f_odd stops being linear (§4.1).
    # Measured max|A + B|: 0.28 (α = 0), 0.047 (α = 0.5), from exactly 0 at init.
    assert float(jnp.max(jnp.abs(M[:3, :3] + M[:3, 3:]))) > 1e-3


# ------------------------------------------------------------------ §2.5 rank-one init


@pytest.mark.parametrize("aligned", [True, False])
@pytest.mark.parametrize("alpha", [0.0, 0.5])
def test_rank_one_balanced_init_equals_linear_net(rank1_data, alpha, aligned):
    """Rank-one, balanced, zero-even init: f_even ≡ 0 along GD, and the run equals the
    linear net started at sqrt(c)(W, v) with lr ηc (§2.4, §2.5), with the directions
    (r, q) aligned with the teacher's top mode or not."""
    U, _, V = _teacher()
    r, q = (V[:, 0], U[:, 0]) if aligned else (np.array([1.0, -0.3, 0.2]), np.array([0.6, 0.8]))
    eta, steps = 0.05, 1500
    params = bf.init_rank_one(jax.random.PRNGKey(4), D, 4, 0.01, direction=r, out_direction=q, p=P)
    c = bf.nets.slope_factor(alpha)
    lcfg = bf.GDConfig(alpha=alpha, lr=eta, steps=steps, n_records=N_REC)
    leaky = bf.train(params, rank1_data, lcfg)
    linear, linit, cfg = _mapped_linear_run(params, rank1_data, alpha, eta, steps, np.sqrt(c), c)
    assert float(leaky.loss[-1]) < 1e-3 * float(leaky.loss[0])
    _assert_same_run(leaky, linear, rank1_data, params, lcfg, linit, cfg)
    assert float(jnp.max(leaky.even_energy)) <= 1e-28


# ------------------------------------------------------------------ §2.7 weight decay


@pytest.mark.parametrize("alpha", [0.0, 0.5])
def test_weight_decay_maps_to_lambda_over_c(sym_data, alpha):
    """Pair net with decay λ == linear twin with decay λ/c and lr ηc (§2.7)."""
    eta, steps, lam = 0.05, 1500, 0.05
    half = _net(np.random.default_rng(2), (D, 4, P), 0.1)
    c = bf.nets.slope_factor(alpha)
    lcfg = bf.GDConfig(alpha=alpha, lr=eta, steps=steps, weight_decay=lam, n_records=N_REC)
    leaky = bf.train(bf.pair_up(half), sym_data, lcfg)
    linear, linit, cfg = _mapped_linear_run(half, sym_data, alpha, eta, steps, np.sqrt(1 + alpha), c,
                                            weight_decay=lam, wd_factor=1 / c)
    _assert_same_run(leaky, linear, sym_data, bf.pair_up(half), lcfg, linit, cfg)
    # decay matters here: the run without decay ends elsewhere (so the test can fail)
    free = bf.train(bf.pair_up(half), sym_data,
                    bf.GDConfig(alpha=alpha, lr=eta, steps=steps, n_records=N_REC))
    assert float(jnp.max(jnp.abs(free.beta[-1] - leaky.beta[-1]))) > 1e-3


# ------------------------------------------------------------------ §2.8 logistic loss


@pytest.mark.parametrize("alpha", [0.0, 0.5])
def test_logistic_pair_net_equals_mapped_linear_net(alpha):
    """ℓ(-y,-f) = ℓ(y,f) for the logistic loss, so §2.3 holds for ±1 labels (§2.8)."""
    rng = np.random.default_rng(5)
    X, Y, _ = bf.data.label_data(jax.random.PRNGKey(5), bf.symmetrize(rng.normal(size=(30, D))), 0.2)
    assert bf.data.is_symmetric(X, Y)
    data = bf.Dataset(X, Y)
    eta, steps = 0.1, 1000
    half = _net(np.random.default_rng(6), (D, 4, 1), 0.1)
    c = bf.nets.slope_factor(alpha)
    lcfg = bf.GDConfig(alpha=alpha, lr=eta, steps=steps, loss="logistic", n_records=N_REC)
    leaky = bf.train(bf.pair_up(half), data, lcfg)
    linear, linit, cfg = _mapped_linear_run(half, data, alpha, eta, steps, np.sqrt(1 + alpha), c,
                                            loss="logistic")
    assert float(leaky.loss[-1]) < 0.2 * float(leaky.loss[0])
    _assert_same_run(leaky, linear, data, bf.pair_up(half), lcfg, linit, cfg)


# ------------------------------------------------------------------ GD -> gradient flow


@pytest.fixture(scope="module")
def flow_setup(sym_data):
    """A generic (non-paired) two-layer leaky net and a tight gradient-flow solve."""
    params = _net(np.random.default_rng(7), (D, 4, P), 0.3)
    cfg = bf.FlowConfig(alpha=0.5, t_max=2.0, n_records=3, rtol=1e-11, atol=1e-13)
    return params, bf.flow(params, sym_data, cfg)


def test_gd_converges_to_gradient_flow_at_first_order(sym_data, flow_setup):
    """GD error at fixed time t = 2 is O(η): log-log slope of ||θ_GD - θ_GF|| vs η in
    [0.9, 1.1] (Euler's method is first order)."""
    params, ref = flow_setup
    assert bool(ref.stats["ok"])
    etas = np.array([0.04, 0.02, 0.01, 0.005])
    errs = []
    for eta in etas:
        cfg = bf.GDConfig(alpha=0.5, lr=float(eta), steps=int(round(2.0 / eta)), n_records=N_REC)
        errs.append(_param_dist(bf.train(params, sym_data, cfg).params, ref.params))
    errs = np.array(errs)
    slope = np.polyfit(np.log(etas), np.log(errs), 1)[0]
    assert 0.9 <= slope <= 1.1, (slope, errs)
    # the flow reference is far more accurate than the finest GD run
    assert errs[-1] > 100 * flow_error_bound(ref, rtol=1e-11, atol=1e-13)


# ------------------------------------------------------------------ §4.2 conservation


def _conserved_drift(traj):
    """max over records and hidden units of |Q(t) - Q(0)| for Q = ||w_k||² - v_k²."""
    Q = np.asarray(traj.conserved[0])
    return float(np.max(np.abs(Q - Q[0])))


def test_gradient_flow_conserves_balance_to_solver_tolerance(sym_data, flow_setup):
    """Under gradient flow Q_k = ||w_k||² - ||v_k||² is constant (§4.2); the solver's
    error is the only drift.

    Bound: the exact flow conserves Q from *any* state, so the drift is the sum over
    the n accepted steps of the change of Q caused by each local error e (no
    amplification by the flow). The controller keeps the RMS of e_i / (atol + rtol|θ_i|)
    below 1, so ||e|| <= sqrt(m) (atol + rtol max|θ|) for m parameters, and Q_k is
    quadratic: |ΔQ_k| <= 2 ||θ_k|| ||e|| per step. Hence
    drift <= 2 n max_k||θ_k|| sqrt(m) (atol + rtol max|θ|), about 1e-7 at rtol = 1e-10.
    """
    params, _ = flow_setup
    cfg = bf.FlowConfig(alpha=0.5, t_max=2.0, n_records=3, rtol=1e-10, atol=1e-12)
    traj = bf.flow(params, sym_data, cfg)
    m = sum(np.size(x) for x in _leaves(params))
    big = 0.0  # max over the start and the end of max|θ| and of the unit norms ||θ_k||
    unit = 0.0
    for p in (params, traj.params):
        W1, W2 = np.asarray(p[0].W), np.asarray(p[1].W)
        big = max(big, float(np.max(np.abs(W1))), float(np.max(np.abs(W2))))
        unit = max(unit, float(np.max(np.sqrt(np.sum(W1**2, axis=1) + np.sum(W2**2, axis=0)))))
    n = int(traj.stats["accepted"])
    bound = 2 * n * unit * np.sqrt(m) * (cfg.atol + cfg.rtol * big)
    drift = _conserved_drift(traj)
    assert drift <= bound, (drift, bound, n)
    assert bound <= 1e-6  # the bound itself is tight enough to be a real check


def test_gd_one_step_changes_balance_by_eta_squared_exactly(sym_data):
    """One GD step changes Q_k by exactly η² (||g_{w_k}||² - g_{v_k}²): the O(η) terms
    cancel by Euler's identity wᵀ∂_w L = v ∂_v L for homogeneous units (§4.2)."""
    params = _net(np.random.default_rng(8), (D, 4, P), 0.5)
    eta, alpha = 0.05, 0.5
    g = jax.jit(jax.grad(bf.dynamics.losses.objective))(params, sym_data.X, sym_data.Y, alpha)  # one compile
    # steps = N_REC - 1: every record is one step apart (and the compiled loop is shared)
    traj = bf.train(params, sym_data, bf.GDConfig(alpha=alpha, lr=eta, steps=N_REC - 1, n_records=N_REC))
    dQ = np.asarray(traj.conserved[0][1] - traj.conserved[0][0])
    predicted = eta**2 * (np.sum(np.asarray(g[0].W) ** 2, axis=1) - np.sum(np.asarray(g[1].W) ** 2, axis=0))
    assert np.max(np.abs(predicted)) > 1e-6  # a measurable drift, not round-off
    # exact in real arithmetic; round-off, per unit k: Q = ||w_k||² − ||v_k||² is a sum of
    # d + p squares, so each of Q_0, Q_1 is within γ_{d+p}·(||w||² + ||v||²) (Qabs); θ₁ =
    # θ₀ − ηg carries ε|θ₁| + η·δg per entry (δg = roundoff.grad_gap), moving Q_1 by
    # <= 2|θ₁|·(ε|θ₁| + η δg); the prediction η²(||g_w||² − ||g_v||²) by <= 2η²|g|·δg +
    # γ_{d+p} η²|g|²: all summed per unit (~1e-15 here, against a drift > 1e-6)
    th0, gs = [np.asarray(layer.W) for layer in params], [np.asarray(x.W) for x in g]
    th1 = [t - eta * x for t, x in zip(th0, gs, strict=True)]  # θ after the one step (magnitudes)
    dg = [np.asarray(x.W) for x in grad_gap(params, sym_data.X, sym_data.Y)]

    def per_unit(a, b):  # Σ over unit k's first-layer row and second-layer column
        return np.sum(a[0] * b[0], axis=1) + np.sum(a[1] * b[1], axis=0)

    ab = lambda xs: [np.abs(x) for x in xs]  # noqa: E731
    gk = gamma(D + P)
    e = (gk * (per_unit(th0, th0) + per_unit(th1, th1))
         + 2 * per_unit(ab(th1), [EPS * np.abs(t) + eta * d for t, d in zip(th1, dg, strict=True)])
         + eta**2 * (2 * per_unit(ab(gs), dg) + gk * per_unit(gs, gs)))
    assert np.all(np.abs(dQ - predicted) <= e) and np.max(e) < 1e-9


def test_gd_drift_is_first_order_in_eta_at_fixed_time(sym_data, flow_setup):
    """Over a fixed time t, GD drifts by Σ_k η²(...) ≈ η ∫(...)dt: halving η halves the
    drift (log-log slope in [0.9, 1.1]), and every GD drift dwarfs the flow's."""
    params, ref = flow_setup
    etas = np.array([0.04, 0.02, 0.01])
    drifts = []
    for eta in etas:
        cfg = bf.GDConfig(alpha=0.5, lr=float(eta), steps=int(round(2.0 / eta)), n_records=N_REC)
        drifts.append(_conserved_drift(bf.train(params, sym_data, cfg)))
    slope = np.polyfit(np.log(etas), np.log(drifts), 1)[0]
    assert 0.9 <= slope <= 1.1, (slope, drifts)
    assert min(drifts) > 1e3 * max(_conserved_drift(ref), 1e-15)


# ------------------------------------------------------------------ ensembles


def _observed(traj) -> dict:
    return {"loss": np.asarray(traj.loss), "beta": np.asarray(traj.beta),
            "params": [np.asarray(x) for x in _leaves(traj.params)]}


def test_ensemble_equals_separate_runs(sym_data):
    """vmap over α and seeds (batched params) == train one member at a time, to round-off."""
    alphas = np.array([0.0, 0.5, 1.0])
    nets = [_net(np.random.default_rng(10 + i), (D, 4, P), 0.3) for i in range(3)]
    batched = jax.tree_util.tree_map(lambda *a: jnp.stack(a), *nets)
    cfg = bf.GDConfig(lr=0.05, steps=300, n_records=N_REC)
    ens = bf.train(batched, sym_data, cfg, alpha=alphas, batched=True)
    assert ens.loss.shape == (3, N_REC) and ens.t.shape == (3, N_REC)
    for i, (a, net) in enumerate(zip(alphas, nets, strict=True)):
        ocfg = bf.GDConfig(alpha=float(a), lr=0.05, steps=300, n_records=N_REC)
        one, m = bf.train(net, sym_data, ocfg), ens.member(i)
        # batched vs single: the same operations, sums maybe in another order: within
        # trajectory_gap (T·2γ_k × measured sensitivity), each bound < 1e-8 (a wrong α or
        # seed per member is O(1e-2) off)
        gap = trajectory_gap(lambda p, c=ocfg: _observed(bf.train(p, sym_data, c)), net, 300,
                             chain_length(net, sym_data.X.shape[0]))
        got, want = _observed(m), _observed(one)
        for name, e in gap.items():
            for x, y, ee in zip(_leaves(got[name]), _leaves(want[name]), _leaves(e), strict=True):
                assert np.all(np.abs(x - y) <= ee) and np.max(ee) < 1e-8, name
        np.testing.assert_array_equal(m.t, one.t)  # t = η k: one rounding of the same product


def test_ensemble_over_learning_rates_with_shared_params(sym_data):
    net = _net(np.random.default_rng(12), (D, 4, P), 0.3)
    lrs = np.array([0.01, 0.02, 0.05])  # three members, like the test above: shared compile
    cfg = bf.GDConfig(alpha=0.5, steps=300, n_records=N_REC)
    ens = bf.train(net, sym_data, cfg, lr=lrs)
    for i, lr in enumerate(lrs):
        ocfg = bf.GDConfig(alpha=0.5, lr=float(lr), steps=300, n_records=N_REC)
        one = bf.train(net, sym_data, ocfg)
        e = trajectory_gap(lambda p, c=ocfg: np.asarray(bf.train(p, sym_data, c).loss), net, 300,
                           chain_length(net, sym_data.X.shape[0]))  # as in the test above
        assert np.all(np.abs(np.asarray(ens.member(i).loss) - np.asarray(one.loss)) <= e) and np.max(e) < 1e-8
        # t = η k: one correctly rounded product of the same two numbers
        np.testing.assert_array_equal(ens.member(i).t, lr * bf.dynamics.record_steps(300, N_REC))


def test_flow_ensemble_equals_separate_runs_smooth_case(sym_data):
    """vmap-ed adaptive solves == separate solves to 1e-12 when the vector field is
    smooth (α = 1): members over seeds and weight decays."""
    nets = [_net(np.random.default_rng(20 + i), (D, 4, P), 0.3) for i in range(3)]
    batched = jax.tree_util.tree_map(lambda *a: jnp.stack(a), *nets)
    wds = np.array([0.0, 0.01, 0.1])
    cfg = bf.FlowConfig(alpha=1.0, t_max=2.0, n_records=3, rtol=1e-8, atol=1e-10)
    ens = bf.flow_ensemble(batched, sym_data, cfg, weight_decay=wds)
    for i, (net, wd) in enumerate(zip(nets, wds, strict=True)):
        ocfg = bf.FlowConfig(alpha=1.0, t_max=2.0, n_records=3, rtol=1e-8, atol=1e-10, weight_decay=float(wd))
        one = bf.flow(net, sym_data, ocfg)
        # the same step sequence (smooth field: no accept/reject flips), sums in another
        # order: roundoff.trajectory_gap over the solver's n steps, each step's chain
        # FLOW_STAGES gradient evaluations long, < 1e-8 (a wrong λ per member is O(1e-2))
        k = FLOW_STAGES * chain_length(net, sym_data.X.shape[0])
        gap = trajectory_gap(lambda p, c=ocfg: _observed(bf.flow(p, sym_data, c)), net,
                             int(one.stats["steps"]), k)
        got, want = _observed(ens.member(i)), _observed(one)
        for name in ("loss", "params"):
            for x, y, e in zip(_leaves(got[name]), _leaves(want[name]), _leaves(gap[name]), strict=True):
                assert np.all(np.abs(x - y) <= e) and np.max(e) < 1e-8, name
        assert int(ens.stats["steps"][i]) == int(one.stats["steps"])


def test_flow_ensemble_over_alpha_agrees_to_solver_tolerance(sym_data, flow_setup):
    """For α < 1 the vector field jumps where a unit's pre-activation changes sign, so
    accept/reject decisions of the adaptive solver can flip under round-off (vmap
    reorders floating-point sums): separate and batched solves are then two valid
    solutions, each within n_steps·(rtol|θ| + atol) of the exact flow. Measured
    (rtol 1e-8): ~4e-10 apart; perturbing θ_0 by 1e-15 moves a single solve as much."""
    params, _ = flow_setup
    alphas = np.array([0.0, 0.5, 1.0])  # three members, as above: one shared compile
    cfg = bf.FlowConfig(t_max=2.0, n_records=3, rtol=1e-8, atol=1e-10)
    ens = bf.flow_ensemble(params, sym_data, cfg, alpha=alphas, batched_params=False)
    for i, a in enumerate(alphas):
        one = bf.flow(params, sym_data, bf.FlowConfig(alpha=float(a), t_max=2.0, n_records=3,
                                                      rtol=1e-8, atol=1e-10))
        # two solutions, each within the bound of the exact flow; α = 1 is smooth: round-off
        # only, as in the test above (the largest entry of the loss's and params' bounds)
        ocfg = dataclasses.replace(cfg, alpha=float(a))
        if a == 1.0:
            k = FLOW_STAGES * chain_length(params, sym_data.X.shape[0])
            gap = trajectory_gap(lambda p, c=ocfg: _observed(bf.flow(p, sym_data, c)), params,
                                 int(one.stats["steps"]), k)
            bound = max(float(np.max(x)) for v in gap.values() for x in _leaves(v))
            assert bound < 1e-8
        else:
            bound = 2 * flow_error_bound(one, cfg.rtol, cfg.atol)
        assert _param_dist(ens.member(i).params, one.params) <= bound
        np.testing.assert_allclose(ens.member(i).loss, one.loss, rtol=0, atol=bound)


# ------------------------------------------------------------------ bad input


def test_bad_data_raises_clear_errors():
    X, Y = np.ones((10, 3)), np.ones((10, 1))
    with pytest.raises(ValueError, match="X has 10 rows but Y has 9"):
        bf.Dataset(X, Y[:9])
    with pytest.raises(ValueError, match=r"inputs X must have shape \(N, d\)"):
        bf.Dataset(X[:, 0], Y)
    with pytest.raises(ValueError, match=r"targets Y must have shape \(N, p\).*Y\[:, None\]"):
        bf.Dataset(X, Y[:, 0])
    for bad in (np.nan, np.inf):
        Xb = X.copy()
        Xb[4, 1] = bad
        with pytest.raises(ValueError, match="X holds 1 NaN/inf values.*row 4"):
            bf.Dataset(Xb, Y)
        Yb = Y.copy()
        Yb[7, 0] = -bad
        with pytest.raises(ValueError, match="Y holds 1 NaN/inf values.*row 7"):
            bf.Dataset(X, Yb)
    with pytest.raises(ValueError, match="X_test and Y_test"):
        bf.Dataset(X, Y, X_test=X)


@pytest.mark.parametrize("alpha", [-0.1, 1.5, np.nan])
def test_alpha_outside_unit_interval_raises(sym_data, alpha):
    with pytest.raises(ValueError, match=r"alpha=.* is outside \[0, 1\]"):
        bf.GDConfig(alpha=alpha)
    with pytest.raises(ValueError, match=r"alpha=.* is outside \[0, 1\]"):
        bf.FlowConfig(alpha=alpha)
    net = _net(np.random.default_rng(0), (D, 4, P), 0.3)
    with pytest.raises(ValueError, match=r"alpha=.* is outside \[0, 1\]"):
        bf.train(net, sym_data, bf.GDConfig(), alpha=np.array([0.0, alpha]))


def test_bad_config_values_raise():
    with pytest.raises(ValueError, match="loss='hinge': choose one of mse, logistic"):
        bf.GDConfig(loss="hinge")
    with pytest.raises(ValueError, match="loss='hinge': choose one of mse, logistic"):
        bf.FlowConfig(loss="hinge")
    for lr in (0.0, -0.1):
        with pytest.raises(ValueError, match="lr=.* must be > 0: the step η of θ ← θ − η∇J"):
            bf.GDConfig(lr=lr)
    with pytest.raises(ValueError, match="lr=inf must be finite"):
        bf.GDConfig(lr=np.inf)
    with pytest.raises(ValueError, match="steps=0 must be >= 1"):
        bf.GDConfig(steps=0)
    with pytest.raises(ValueError, match="weight_decay=-1"):
        bf.GDConfig(weight_decay=-1)
    with pytest.raises(ValueError, match="t_max=0"):
        bf.FlowConfig(t_max=0)
    with pytest.raises(ValueError, match="solver='euler'"):
        bf.FlowConfig(solver="euler")


def test_nonpositive_lr_in_ensemble_raises(sym_data):
    net = _net(np.random.default_rng(0), (D, 4, P), 0.3)
    with pytest.raises(ValueError, match=r"lr=.* must be > 0: every member's step size"):
        bf.train(net, sym_data, bf.GDConfig(), lr=np.array([0.1, 0.0]))


def test_diverging_learning_rate_raises_divergence_error(sym_data):
    net = _net(np.random.default_rng(0), (D, 4, P), 0.3)
    with pytest.raises(bf.DivergenceError, match=r"diverged.*with lr=5.*try lr=1\.25"):
        bf.train(net, sym_data, bf.GDConfig(alpha=0.5, lr=5.0, steps=300, n_records=N_REC))


def test_network_data_dimension_mismatch_raises(sym_data):
    with pytest.raises(ValueError, match=r"data.X has 3 columns but params takes inputs of dimension d = 4"):
        bf.train(_net(np.random.default_rng(0), (4, 4, P), 0.3), sym_data, bf.GDConfig())
    with pytest.raises(ValueError, match="params has 1 outputs but data.Y has 2 columns"):
        bf.train(_net(np.random.default_rng(0), (D, 4, 1), 0.3), sym_data, bf.GDConfig())


def test_odd_width_pair_init_raises():
    with pytest.raises(ValueError, match="pair init needs even hidden widths"):
        bf.init_pairs(jax.random.PRNGKey(0), (3, 4, 5, 1), 0.1)


# ------------------------------------------------------------------ small helpers


def test_record_steps_and_times():
    ks = bf.dynamics.record_steps(1000, 11)
    np.testing.assert_array_equal(ks, np.arange(0, 1001, 100))
    ks_log = bf.dynamics.record_steps(1000, 11, "log")
    assert ks_log[0] == 0 and ks_log[-1] == 1000 and np.all(np.diff(ks_log) > 0)
    ts = bf.dynamics.record_times(4.0, 5)
    # linspace: t_j = j·(t_max/(n−1)) (and an end fix-up): two roundings, <= 2ε|t_j|
    np.testing.assert_allclose(ts, [0, 1, 2, 3, 4], rtol=2 * EPS, atol=0)
    ts_log = bf.dynamics.record_times(4.0, 5, "log")
    # geomspace: 10^(linspace of log10 t): the exponent's error ~ε|log10 t| becomes a
    # relative error ln(10)·ε|log10 t|, plus a few roundings (log10, power, the ends): 4ε·(|ln t| + 2)
    assert ts_log[0] == 0.0 and ts_log[1] == pytest.approx(4e-4, rel=4 * EPS * (abs(np.log(4e-4)) + 2))
    assert ts_log[-1] == pytest.approx(4.0, rel=4 * EPS * (np.log(4.0) + 2))


def test_trajectory_half_time_interpolates(sym_data):
    """half_time interpolates linearly between records of the loss."""
    traj = bf.Trajectory(t=jnp.array([0.0, 1.0, 2.0]), loss=jnp.array([4.0, 2.0, 0.0]),
                         test_loss=None, beta=jnp.zeros((3, D, 1)), even_energy=jnp.zeros(3),
                         singular_values=(), conserved=(), params=(Layer(jnp.zeros((1, 1))),))
    # interpolation between small dyadic numbers (t 0, 1, 2; loss 4, 2, 0): exact in binary
    assert traj.half_time() == 1.0
    assert traj.half_time(3.0) == 0.5
    assert np.isnan(traj.half_time(-1.0))


def test_keep_params_records_the_path_of_gd_and_flow(sym_data):
    """``keep_params`` stores θ at every record: the first is the init, the last the
    final params, and record j equals a separate run of k_j steps (same arithmetic)."""
    params = _net(np.random.default_rng(7), (D, 6, P), 0.3)
    cfg = bf.GDConfig(alpha=0.2, lr=0.05, steps=40, n_records=5, keep_params=True)
    tr = bf.train(params, sym_data, cfg)
    at = lambda path, j: jax.tree_util.tree_map(lambda a: a[j], path)  # noqa: E731
    assert _param_dist(at(tr.path, 0), params) == 0.0
    assert _param_dist(at(tr.path, -1), tr.params) == 0.0
    k = int(round(float(tr.t[2]) / cfg.lr))
    pcfg = bf.GDConfig(alpha=0.2, lr=0.05, steps=k, n_records=2)
    part = bf.train(params, sym_data, pcfg)
    # another compiled loop (other segment lengths): within roundoff.trajectory_gap of the
    # k-step run (T·2γ_k × measured sensitivity), < 1e-8 (a record off by one step moves θ by ~1e-3)
    gap = trajectory_gap(lambda p: [np.asarray(x) for x in _leaves(bf.train(p, sym_data, pcfg).params)],
                         params, k, chain_length(params, sym_data.X.shape[0]))
    for x, y, e in zip(_leaves(at(tr.path, 2)), _leaves(part.params), gap, strict=True):
        assert np.all(np.abs(np.asarray(x) - np.asarray(y)) <= e) and np.max(e) < 1e-8
    assert part.path is None  # keep_params off: no path stored
    fl = bf.flow(params, sym_data, bf.FlowConfig(alpha=0.2, t_max=1.0, n_records=3,
                                                 keep_params=True))
    assert _param_dist(at(fl.path, -1), fl.params) == 0.0
    ens = bf.train(params, sym_data, cfg, alpha=[0.0, 1.0])
    assert _leaves(ens.path)[0].shape[:2] == (2, len(ens.t[0]))


def test_more_bad_input_is_named(sym_data):
    params = _net(np.random.default_rng(8), (D, 4, P), 0.3)
    with pytest.raises(ValueError, match="weight_decay"):
        bf.GDConfig(weight_decay=float("nan"))
    with pytest.raises(ValueError, match="weight_decay"):
        bf.train(params, sym_data, bf.GDConfig(steps=2), weight_decay=[0.1, -1.0])
    with pytest.raises(TypeError, match="steps=2.5 must be a whole number"):
        bf.GDConfig(steps=2.5)
    with pytest.raises(ValueError, match="t_max"):
        bf.FlowConfig(t_max=float("inf"))
    with pytest.raises(ValueError, match="empty"):
        bf.Dataset(np.zeros((0, D)), np.zeros((0, P)))
    with pytest.raises(ValueError, match="positive definite"):
        bf.data.gaussian_inputs(jax.random.PRNGKey(0), 5, 2, cov=[[1.0, 2.0], [2.0, 1.0]])
    with pytest.raises(ValueError, match="direction must be a non-zero vector of shape"):
        bf.init_rank_one(jax.random.PRNGKey(0), 3, 4, 1e-3, direction=[1.0, 0.0])
    with pytest.raises(ValueError, match="direction must be a non-zero vector"):
        bf.init_rank_one(jax.random.PRNGKey(0), 3, 4, 1e-3, direction=[0.0, 0.0, 0.0])
    with pytest.raises(ValueError, match="p = 1"):
        bf.theory.population_loss_two_layer(params, np.ones((P, D)), 0.0, 0.0)


# ------------------------------------------------- issue 13: the engine fails loudly


def test_config_fields_refuse_the_wrong_type():
    """GDConfig(lr=True) and alpha='0.5' were accepted; every field now names itself."""
    for kwargs, exc, match in [(dict(lr=True), TypeError, "lr=True"),
                               (dict(alpha="0.5"), TypeError, "alpha='0.5'"),
                               (dict(steps=1.5), TypeError, "steps=1.5"),
                               (dict(lr=np.nan), ValueError, "lr=nan"),
                               (dict(weight_decay=-0.1), ValueError, "weight_decay=-0.1"),
                               (dict(n_records=1), ValueError, "n_records=1"),
                               (dict(keep_params="yes"), TypeError, "keep_params"),
                               (dict(spacing="lin"), ValueError, "spacing='lin'")]:
        with pytest.raises(exc, match=match):
            bf.GDConfig(**kwargs)
    for kwargs, exc, match in [(dict(rtol=0.0), ValueError, "rtol=0.0"),
                               (dict(atol="1e-8"), TypeError, "atol"),
                               (dict(max_steps=10.5), TypeError, "max_steps"),
                               (dict(t_max=True), TypeError, "t_max")]:
        with pytest.raises(exc, match=match):
            bf.FlowConfig(**kwargs)
    cfg = bf.GDConfig(alpha=np.float64(0.5), steps=4.0)  # normalised to plain numbers
    assert type(cfg.alpha) is float and type(cfg.steps) is int and cfg.steps == 4


def test_logistic_loss_refuses_real_valued_labels(sym_data):
    net = _net(np.random.default_rng(0), (D, 4, P), 0.3)
    for run, cfg in [(bf.train, bf.GDConfig(loss="logistic", steps=2, n_records=2)),
                     (bf.flow, bf.FlowConfig(loss="logistic", t_max=0.1, n_records=2))]:
        with pytest.raises(ValueError, match=r"^data.Y: the logistic loss needs labels y = ±1.*loss='mse'"):
            run(net, sym_data, cfg)
    with pytest.raises(ValueError, match="data.Y: the logistic loss"):
        bf.train(net, sym_data, bf.GDConfig(loss="logistic", steps=2, n_records=2), alpha=[0.0, 1.0])
    with pytest.raises(ValueError, match="^Y: the logistic loss"):
        bf.dynamics.losses.loss_value(np.zeros((4, 1)), np.array([[1.0], [0.0], [-1.0], [1.0]]), "logistic")
    labels = bf.Dataset(sym_data.X, np.sign(sym_data.Y))
    tr = bf.train(net, labels, bf.GDConfig(loss="logistic", lr=0.1, steps=20, n_records=2))
    assert float(tr.loss[-1]) < float(tr.loss[0])


def _spiking_run():
    """A linear net u·v on x = ±1, y = ±x: at lr = 0.35 the first steps overshoot (the
    loss rises 16-fold) and GD then converges (catapult); 2 records see only the ends."""
    net = (Layer(np.array([[3.0]])), Layer(np.array([[0.05]])))
    data = bf.Dataset(np.array([[1.0], [-1.0]]), np.array([[1.0], [-1.0]]))
    return net, data, bf.GDConfig(alpha=1.0, lr=0.35, steps=400, n_records=3)


def test_loss_spike_between_records_is_carried_and_warned():
    net, data, cfg = _spiking_run()
    with pytest.warns(bf.dynamics.LossSpikeWarning, match=r"spiked to .* between records.*lr=0\.35"):
        tr = bf.train(net, data, cfg)
    L = np.asarray(tr.loss)
    assert L[-1] < 1e-20 and np.max(L) == L[0]  # the records hide the spike
    assert float(tr.loss_max) > bf.dynamics.SPIKE_FACTOR * np.max(L)
    # the peak is the largest loss over every step: replay the steps by hand
    u, v, losses = 3.0, 0.05, []
    for _ in range(cfg.steps):
        r = u * v - 1.0
        losses.append(0.5 * r**2)
        u, v = u - cfg.lr * r * v, v - cfg.lr * r * u
    peak, runner_up = sorted(losses)[-1], sorted(losses)[-2]
    # the replay and the engine round differently (FMA, order): each is within trajectory_gap
    # of the exact run (K steps of 2γ_k × the measured sensitivity of the peak to the init)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", bf.dynamics.LossSpikeWarning)
        g = trajectory_gap(lambda p: bf.train(p, data, cfg).loss_max, net, cfg.steps, chain_length(net, 2))
    # and the bound is below the gap to any other step's loss: the wrong step's peak would fail
    assert abs(float(tr.loss_max) - peak) <= 2 * float(g) < peak - runner_up


def test_loss_max_of_a_smooth_run_is_its_first_loss(sym_data, recwarn):
    net = _net(np.random.default_rng(0), (D, 4, P), 0.3)
    tr = bf.train(net, sym_data, bf.GDConfig(alpha=0.3, lr=0.05, steps=200, n_records=N_REC))
    # the max is L(θ₀), computed in the loop (the gradient's forward) and by the record
    # (observe's forward): two evaluations of one loss, within roundoff.loss_eval_gap
    k = chain_length(net, sym_data.X.shape[0])
    path = jax.tree_util.tree_map(lambda a: np.asarray(a)[None], net)

    def gap(L0):
        return float(loss_eval_gap(path, sym_data.X, sym_data.Y, [L0], k)[0])

    L0 = float(np.max(np.asarray(tr.loss)))
    assert abs(float(tr.loss_max) - L0) <= gap(L0) < 1e-9 * L0  # a wrong step's loss is O(1e-2) off
    ens = bf.train(net, sym_data, bf.GDConfig(lr=0.05, steps=200, n_records=N_REC), alpha=[0.0, 1.0])
    for top, L in zip(np.asarray(ens.loss_max), np.max(np.asarray(ens.loss), axis=1), strict=True):
        assert abs(top - L) <= gap(L)
    assert not [w for w in recwarn if issubclass(w.category, bf.dynamics.LossSpikeWarning)]


def _kink_case():
    """α = 0 net whose unit 0 has pre-activation 1e-5 on data point 0; the flow reaches a
    kink (another unit, another point) near t = 2 and slides along it."""
    rng = np.random.default_rng(1)
    X, Y = rng.normal(size=(6, 2)), rng.normal(size=(6, 1))
    W1, W2 = rng.normal(size=(3, 2)), rng.normal(size=(1, 3))
    W1[0] -= (W1[0] @ X[0] - 1e-5) * X[0] / (X[0] @ X[0])
    return (Layer(W1), Layer(W2)), bf.Dataset(X, Y, mirror=False)


def test_flow_stalled_on_a_relu_kink_says_so_early_and_its_advice_works():
    net, data = _kink_case()
    cfg = bf.FlowConfig(alpha=0.0, t_max=5.0, n_records=5)  # the default budget, 200 000 steps
    stall = (r"stalled at t = 2\.0.* on a ReLU kink: the pre-activation of layer-1 unit \d on data "
             r"point \d is .*rtol=0\.0001, atol=1e-06")
    with pytest.raises(bf.dynamics.FlowStallError, match=stall) as info:
        bf.flow(net, data, cfg)
    msg = str(info.value)
    assert "kvaerno5 and dopri8 included" in msg
    # detected early: two pace windows, not the whole budget
    taken = int(re.search(r"stopped after (\d+) of max_steps=200000", msg).group(1))
    assert taken <= 2 * stall_window(cfg.max_steps), msg
    # the pace named is the crawl on the kink (~rtol), not the average since t = 0
    pace = float(re.search(r"advanced (\S+) time units an accepted step", msg).group(1))
    assert pace < 1e-4 * cfg.t_max, msg
    # the advice: the loosened tolerance reaches t_max, and agrees with GD at a small lr within
    # both methods' own error estimates (not round-off): GD is first order, so its error at η is
    # about 2|L(η) − L(η/2)| (Richardson); the loose solve's, its distance to a 3x tighter one
    loose = bf.flow(net, data, dataclasses.replace(cfg, rtol=1e-4, atol=1e-6))
    tighter = bf.flow(net, data, dataclasses.replace(cfg, rtol=1e-4 / 3, atol=1e-6 / 3))
    gd, gd_half = (bf.train(net, data, bf.GDConfig(alpha=0.0, lr=1e-3 / h, steps=5000 * h, n_records=3))
                   for h in (1, 2))
    assert float(loose.t[-1]) == 5.0
    L, L_gd = float(loose.loss[-1]), float(gd.loss[-1])
    estimate = 2 * abs(L_gd - float(gd_half.loss[-1])) + abs(L - float(tighter.loss[-1]))
    # and the estimate is below a tenth of the loss's fall over the last record interval: a flow
    # that stopped a record short of t_max would fail
    assert abs(L - L_gd) <= estimate < 0.1 * abs(float(loose.loss[-2]) - L)


@pytest.fixture(scope="module")
def smooth_flow():
    """A smooth flow (linear net, 12 unmirrored points) and N, the solver steps it needs to
    reach t_max: (net, data, cfg, N). Shared so its compiled solves are reused."""
    net = _net(np.random.default_rng(3), (D, 4, P), 0.5)
    X, Y = np.random.default_rng(4).normal(size=(12, D)), np.random.default_rng(5).normal(size=(12, P))
    data = bf.Dataset(X, Y, mirror=False)
    cfg = bf.FlowConfig(alpha=1.0, t_max=20.0, n_records=5, rtol=1e-10, atol=1e-12)
    return net, data, cfg, int(bf.flow(net, data, cfg).stats["steps"])


def test_the_pace_check_lets_a_smooth_flow_use_its_budget(smooth_flow):
    """A smooth flow that needs N solver steps, fastest at the end, finishes with
    max_steps = N + 1 (the check stops only solves that need more than STALL_MARGIN times
    what is left), and with far too few it is told to raise max_steps."""
    net, data, cfg, need = smooth_flow
    assert need > 2 * stall_window(need + 1), "the case must span several pace windows"
    tight = bf.flow(net, data, dataclasses.replace(cfg, max_steps=need + 1))
    assert int(tight.stats["steps"]) == need and bool(tight.stats["ok"])
    with pytest.raises(bf.dynamics.FlowStallError, match=r"all max_steps=\d+ solver steps spent.*Raise "
                       "max_steps"):
        bf.flow(net, data, dataclasses.replace(cfg, max_steps=need // 4))


def test_failed_runs_print_nothing(capfd, smooth_flow):
    """NaN/unreached records reached LAPACK's SVD, which printed 'DLASCL illegal value'."""
    net, smooth, cfg, need = smooth_flow  # the budget-spent solve of the pace test (compiled once)
    with pytest.raises(bf.dynamics.FlowStallError) as info:
        bf.flow(net, smooth, dataclasses.replace(cfg, max_steps=need // 4))
    assert "all max_steps" in str(info.value)  # spent before t_max: the last records unreached
    rng = np.random.default_rng(1)
    X, Y = rng.normal(size=(6, 2)), rng.normal(size=(6, 1))
    data = bf.Dataset(X, Y, mirror=False)
    biased = bf.init_gaussian(jax.random.PRNGKey(0), (2, 4, 1), 1.0, bias=True)
    with pytest.raises(bf.DivergenceError):
        bf.train(biased, data, bf.GDConfig(lr=30.0, steps=300, n_records=5))
    out, err = capfd.readouterr()
    assert "DLASCL" not in out + err and "illegal" not in out + err


def test_a_twin_on_its_own_data_takes_the_same_rows(sym_data):
    """twin=(weights, data): the twin trains on its own data (linear attention's on z), row n of each
    batch the same point as the net's. Given the net's own points it is the shared-data twin run, to
    round-off; the same points in another row order draw other batches (a failing control)."""
    import optax

    net = _net(np.random.default_rng(20), (D, 4, P), 0.3)
    twin = bf.linear_twin(net, 0.0)
    cfg = bf.TrainConfig(optimiser=optax.sgd(0.05), steps=200, batch_size=8, mirrored_batches=False,
                         n_records=N_REC, alpha=0.0, degree=1.0)
    shared = bf.train(net, sym_data, cfg, twin=True, observables="loss")

    def own_run(q, data=sym_data):
        return bf.train(net, data, cfg, twin=(q, data), observables="loss")

    own = own_run(twin)
    # the same updates on the same rows; the twin's loss summed in another order (its data stored in
    # full, not [X₊; −X₊]): trajectory_gap, 200 steps of 2γ_k times the measured response
    gap = trajectory_gap(lambda q: {"loss": np.asarray(own_run(q).twin.loss)}, twin, 200,
                         chain_length(twin, sym_data.X.shape[0]))["loss"]
    diff = np.abs(np.asarray(own.twin.loss) - np.asarray(shared.twin.loss))
    assert np.all(diff <= gap) and gap.max() < 1e-9
    assert abs(float(own.twin_gap) - float(shared.twin_gap)) <= 2 * gap.max()  # the carried max over steps
    np.testing.assert_array_equal(own.loss, shared.loss)  # the net's own run does not see the twin's data
    perm = np.random.default_rng(0).permutation(2 * N_HALF)
    X, Y = np.asarray(sym_data.X), np.asarray(sym_data.Y)
    shuffled = own_run(twin, bf.Dataset(X[perm], Y[perm], mirror=False))
    assert shuffled.twin.loss[0] == pytest.approx(float(own.twin.loss[0]), rel=1e-12)  # the same points
    assert np.max(np.abs(np.asarray(shuffled.twin.loss) - np.asarray(own.twin.loss))) > 1e3 * gap.max()


def test_a_twin_on_its_own_data_is_refused_where_it_cannot_apply(sym_data):
    from biasfree.core.attention import init_attention
    from biasfree.core.icl_data import in_context_regression

    net = _net(np.random.default_rng(20), (D, 4, P), 0.3)
    X, Y = np.asarray(sym_data.X), np.asarray(sym_data.Y)
    cfg = bf.GDConfig(lr=0.05, steps=5)
    with pytest.raises(ValueError, match="the twin's data has 20 rows but the net's 40; row n of each"):
        bf.train(net, sym_data, cfg, twin=(net, bf.Dataset(X[:20], Y[:20], mirror=False)), observables="loss")
    with pytest.raises(ValueError, match=r"twin=\(params, data\) trains one net beside one twin"):
        bf.train(net, sym_data, cfg, lr=np.array([0.01, 0.02]), twin=(net, sym_data), observables="loss")
    att = init_attention(jax.random.PRNGKey(1), 2, 1, 3, 0.05)
    seqs = in_context_regression(jax.random.PRNGKey(0), 4, 3, 2)
    with pytest.raises(ValueError, match="the twin must be a linear net"):
        bf.train((att,), seqs, cfg, twin=((att,), seqs), observables="loss")
    with pytest.raises(ValueError, match=r"twin=\(merged_to_twin\(layer\), twin_dataset\(data, n_ctx\)\)"):
        bf.train((att,), seqs, cfg, twin=True, observables="loss")
