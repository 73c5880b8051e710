"""The orthogonal-inputs theory (biasfree.theory.orthogonal), its data and inits, against
hand-worked cases and the gradient-flow logistic; and the experiment's angle helper."""

import dataclasses
import re

import numpy as np
import pytest
from roundoff import EPS, chain_length, gamma, matmul_gap, trajectory_gap

import biasfree as bf
from biasfree import theory
from biasfree.claims.orthogonal_inputs.run import sin_angle
from biasfree.core.data import orthogonal_data
from biasfree.core.inits import balanced_units
from biasfree.theory.orthogonal import aligned_halves_init, alignment_directions, half_net_modes, half_targets

pytestmark = pytest.mark.numerics  # round-off bounds: make test-portable reruns them


def test_alignment_rule_keep_cross_stuck():
    """n = 3 pairs, Q = I, one unit with v > 0, so velocities (ρ/N)(y_i at w_i > 0,
    -y'_i at w_i < 0) with ρ/N = √3/6. Pair 0 keeps its side (y_0 > 0), pair 1 crosses
    (y_1 < 0 pushes w_1 > 0 to zero, y'_1 > 0 carries it on below zero), pair 2 is stuck
    (y_2 < 0 and y'_2 < 0)."""
    k = np.sqrt(3) / 6
    y, y_neg = np.array([2.0, -1.0, -1.0]), np.array([0.5, 3.0, -2.0])
    W0 = np.array([[0.1, 0.2, 0.3]])
    D, B = alignment_directions(W0, np.array([1.0]), np.eye(3), y, y_neg)
    # each entry: ρ/N = √3/6 (2 roundings) times a sum of two small numbers, per side: 4ε × 3k
    np.testing.assert_allclose(D, [[2.0 * k, -3.0 * k, 0.0]], rtol=0, atol=4 * EPS * 3 * k)
    # crossing error max(|w|, |G2| |w| / |G1|) = max(0.2, 3 * 0.2 / 1) = 0.6
    # √ of 3 squares summed (+ a product for 0.6): γ_5 per side
    np.testing.assert_allclose(B, [np.sqrt(0.1**2 + 0.6**2 + 0.3**2)], rtol=2 * gamma(5))
    # the same unit with v < 0 sees every velocity reversed: pair 0 is now stuck
    # (-y_0 < 0 pushes w_0 > 0 to zero, +y'_0 > 0 pushes it back), pairs 1, 2 keep
    D_neg, _ = alignment_directions(W0, np.array([-1.0]), np.eye(3), y, y_neg)
    np.testing.assert_allclose(D_neg, [[0.0, 1.0 * k, 1.0 * k]], rtol=0, atol=4 * EPS * 3 * k)


def test_odd_target_aligns_every_unit_with_beta_star():
    """y' = -y (no even part): D_k = sign(v_k)(ρ/N) o for every unit, whatever its
    initial signs: the rank-one linear-net picture, exactly."""
    rng = np.random.default_rng(1)
    n, d = 5, 7
    Q, _ = np.linalg.qr(rng.normal(size=(d, n)))
    o = rng.normal(size=n)
    W0 = rng.normal(size=(30, d))
    sg = rng.choice([-1.0, 1.0], size=30)
    D, B = alignment_directions(W0, sg, Q, o, -o)
    expected = sg[:, None] * (np.sqrt(n) / (2 * n)) * (Q @ o)[None]
    # Q o by two kernels (matmul_gap), times √n/2n and a sign: + 4ε of the largest entry
    c = np.sqrt(n) / (2 * n)
    np.testing.assert_allclose(D, expected, rtol=0, atol=c * (np.max(matmul_gap(Q, o[:, None]))
                                                              + 4 * EPS * np.max(np.abs(Q @ o))))
    # at least the data-span part; both norms of d- and n-term sums: 2 γ_{d+n+1} of |W0||Q|
    span = np.linalg.norm(W0 @ Q, axis=1)
    assert np.all(B >= span - 2 * gamma(d + n + 1) * np.linalg.norm(np.abs(W0) @ np.abs(Q), axis=1))
    # sin = √(1 - cos²) with cos rounded by δ <= γ_{2d+n} (the dot, two norms, Q o): sin <= √(2δ·2),
    # √(4γ) ≈ 1e-7 — the square root is this formula's conditioning at 0°; a misalignment is O(1)
    assert np.max(sin_angle(D, (Q @ o)[None])) <= np.sqrt(4 * gamma(2 * d + n))


def test_half_net_gd_is_the_two_layer_mode_map_and_first_order_in_the_step():
    """The half-net GD map in ã = σ²a is theory.gd_mode_strength with s = ρ||t||/N; it tends
    to the gradient-flow logistic with an error linear in η (halving η halves it, 0.45–0.55)."""
    n = 4
    rho, N, norm_t, a0, t_end = np.sqrt(n), 2 * n, 1.7, 1e-3, 12.0
    sig2, s = rho**2 / N, rho * norm_t / N
    errs = []
    for lr in (0.02, 0.01):
        ks = np.arange(int(round(t_end / lr)) + 1)
        a = theory.gd_mode_strength(ks, s, sig2 * a0, lr)
        # the raw map a ← a(1 + η(ρ/N)(||t|| - ρa))², iterated by hand
        raw = [a0]
        for _ in ks[1:]:
            raw.append(raw[-1] * (1.0 + lr * rho / N * (norm_t - rho * raw[-1])) ** 2)
        # the same recursion in two parametrisations (ã = σ²a): each step rounds ~8 times, and an
        # error made at a step reaches step K amplified by the map's own sensitivity, measured
        # by trajectory_gap (steps · 2γ_8 · |Δa_K| / rel) + one rounding of σ²
        def run(a_init, lr=lr, ks=ks):
            return np.asarray(theory.gd_mode_strength(ks, s, sig2 * a_init, lr))
        tol = trajectory_gap(run, np.asarray(a0), len(ks), 8)
        np.testing.assert_array_less(np.abs(a - sig2 * np.asarray(raw)), 2 * tol + 2 * EPS * np.abs(a))
        errs.append(np.max(np.abs(a - theory.logistic(lr * ks, s, sig2 * a0))) / s)
    assert errs[0] < 0.05
    assert 0.45 <= errs[1] / errs[0] <= 0.55


def test_aligned_halves_init_learns_as_two_linear_nets():
    """Units on their final active sets: ReLU GD on orthogonal ± data follows the exact
    half-net map of each half to round-off (the experiment's first check, at small size)."""
    rng = np.random.default_rng(2)
    n, d, m = 4, 6, 6
    Q, _ = np.linalg.qr(rng.normal(size=(d, n)))
    o = rng.choice([-1.0, 1.0], size=n) * (0.5 + rng.uniform(size=n))
    e = 0.5 * o * rng.uniform(-1.0, 1.0, size=n)
    data = orthogonal_data(Q, o + e, e - o)
    mags = np.abs(rng.normal(size=(2, m // 2))) + 0.1
    net = aligned_halves_init(Q, o, e, 1e-2 * mags)
    # |v| = ||w|| by construction: a d-term norm on each side, 2 γ_{d+1}
    np.testing.assert_allclose(np.abs(net[1].W[0]), np.linalg.norm(net[0].W, axis=1), rtol=2 * gamma(d + 1))
    s_plus, s_minus, sig2 = half_net_modes(o, e)
    tr = bf.train(net, data, bf.GDConfig(lr=0.05, steps=400, n_records=5))
    s_half, tp, _ = half_targets(o, e)
    pos = np.where(s_half > 0, np.arange(n), np.arange(n) + n)
    f = np.asarray(bf.forward(tr.params, data.X, 0.0))[pos, 0]
    a_end = sig2 * (f @ tp / np.linalg.norm(tp)) / np.sqrt(n)
    a_map = theory.gd_mode_strength([400], s_plus, sig2 * np.sum((1e-2 * mags[0]) ** 2), 0.05)[0]
    # GD on the net vs the scalar map: each within its own round-off, bounded by trajectory_gap
    # (400 steps, γ of the gradient's chain length; the map's 8 roundings a step), plus the
    # readout f·t̂ (γ_{N}). A net off its half-net map (a unit crossing sides) is off by O(a).
    def net_run(p):
        fp = np.asarray(bf.forward(bf.train(p, data, bf.GDConfig(lr=0.05, steps=400, n_records=2)).params,
                                   data.X, 0.0))[pos, 0]
        return np.asarray(sig2 * (fp @ tp / np.linalg.norm(tp)) / np.sqrt(n))
    a0_map = np.asarray(sig2 * np.sum((1e-2 * mags[0]) ** 2))
    tol = (trajectory_gap(net_run, net, 400, chain_length(net, 2 * n))
           + trajectory_gap(lambda a: np.asarray(theory.gd_mode_strength([400], s_plus, a, 0.05)[0]),
                            a0_map, 400, 8)
           + 2 * gamma(2 * n) * abs(a_end))
    assert abs(a_end - a_map) <= tol
    assert a_end > 0.5 * s_plus  # it did learn


def test_balanced_units_and_orthogonal_data_refuse_bad_input():
    net = balanced_units(np.array([[3.0, 4.0], [1.0, 0.0]]), [1.0, -1.0])
    np.testing.assert_allclose(net[1].W, [[5.0, -1.0]], rtol=2 * gamma(3))  # √(9 + 16): 3 roundings
    with pytest.raises(ValueError, match="sign"):
        balanced_units(np.ones((2, 2)), [1.0, 0.5])
    with pytest.raises(ValueError, match="orthonormal"):
        orthogonal_data(np.ones((3, 2)), np.ones(2), np.ones(2))
    data = orthogonal_data(np.eye(3)[:, :2], [1.0, 2.0], [3.0, 4.0])
    # a scale by √n or its inverse and a sign: a few roundings each side, 4ε
    np.testing.assert_allclose(np.asarray(data.X)[2], [-np.sqrt(2), 0.0, 0.0], rtol=4 * EPS, atol=0)
    np.testing.assert_allclose(np.asarray(data.Y)[:, 0], [1.0, 2.0, 3.0, 4.0], rtol=4 * EPS, atol=0)



def _numpy_gd(params, X, y, lr, ks):
    """Plain-NumPy GD on a two-layer ReLU net, loss (1/2N) Σ (y - f)²: outputs f (T, N) at
    the step counts ``ks`` (cheap; the engine's own GD is tested elsewhere)."""
    W, v = np.array(params[0].W, float), np.array(params[1].W, float)[0]
    N, F = X.shape[0], []
    for k in range(ks[-1] + 1):
        H = X @ W.T  # (N, m)
        f = np.maximum(H, 0) @ v
        if k in ks:
            F.append(f)
        r = y - f
        v, W = v + lr * np.maximum(H, 0).T @ r / N, W + lr * ((H > 0) * r[:, None] * v).T @ X / N
    return np.array(F)


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_an_init_whose_output_weights_share_one_sign_has_an_empty_half(sign):
    """Issue 19: every v_k of one sign (chance 2^(1-m)) leaves one half-net without units;
    the seed-81 crash came from its slightly negative measured strength (-5e-8) fed to the
    GD map. Built here on purpose: the half-net analysis must not raise, must predict the
    empty half by its zero-init curve (a fixed point) and, exactly, its measured strength
    never exceeds 0 (f has one sign everywhere: a sum of same-signed terms)."""
    from biasfree.claims import orthogonal_inputs as oi
    from biasfree.claims.orthogonal_inputs import run as oi_run

    cfg = oi.Config(n=3, d=3, width=4, lr=0.05, t_max=30.0, n_records=31)
    P = oi_run._problem(cfg, np.random.default_rng(0))
    W = np.asarray(P["inits"]["random"][0].W)
    P["inits"]["random"] = balanced_units(W, np.full(cfg.width, sign))  # the degenerate init
    ks = bf.dynamics.record_steps(int(cfg.t_max / cfg.lr), cfg.n_records)
    data = P["data"]["full"]
    X, y = np.asarray(data.X), np.asarray(data.Y)[:, 0]
    F_full = _numpy_gd(P["inits"]["random"], X, y, cfg.lr, ks)
    F_al = _numpy_gd(P["inits"]["aligned"], X, y, cfg.lr, ks)
    H = oi_run._half_nets(cfg, P, F_full, F_al, ks, cfg.lr * ks)
    empty = 1 if sign > 0 else 0  # all v > 0: the - half (index 1) has no unit
    assert list(H["units"]) == ([4, 0] if sign > 0 else [0, 4])
    assert np.all(H["pred"][:, empty] == 0.0) and np.isnan(H["slopes"][empty])
    assert np.min(H["a_rand"][:, empty]) < 0.0  # the case that raised: a negative start
    live = 1 - empty
    assert np.all(np.isfinite(H["pred"][-5:, live]))  # the other half is predicted as before
    align = {k: {"ratio": 0.5} for k in oi.ALIGN}
    checks = oi_run._checks(cfg, H, align)
    assert checks["empty_half_never_learns"].passed  # exact sign identity: threshold 0, no tolerance
    assert checks["empty_half_never_learns"].value <= 0.0
    assert "has no unit in this init" in checks["half_nets_learn_at_rate_2s"].claim


def test_an_init_already_past_the_early_phase_is_refused_in_one_line_before_training(monkeypatch):
    """Issue 48: at scale=0.05, width 6, n = 3 the net's output at init already exceeds
    early·min|y| on the mixed targets, so no record lies in the early phase and the alignment
    summary raised an IndexError after every GD run. Now refused in one line before any training,
    naming the largest scale that fits (|f| ∝ scale² for the same draw); the control, that scale
    less 1%, is accepted."""
    from biasfree.claims.orthogonal_inputs import PRESETS
    from biasfree.claims.orthogonal_inputs import run as oi

    def no_training(*args, **kwargs):
        raise AssertionError("trained before refusing")

    monkeypatch.setattr(oi, "_runs", no_training)
    args = dict(n=3, d=4, t_max=20.0, n_records=41, width=6)
    with pytest.raises(ValueError, match=r"^scale=0\.05 is not a small init .* set scale below 0\.038 ") as e:
        bf.run("orthogonal-inputs", preset="tiny", scale=0.05, **args)
    assert "\n" not in str(e.value)
    # the largest scale that fits, from the message's own numbers: max|f| and early·min|y|
    f_max, limit = (float(x) for x in re.findall(r"= ([0-9.e-]+)", str(e.value))[:2])
    fits = 0.05 * np.sqrt(limit / f_max) * 0.99
    cfg = dataclasses.replace(PRESETS["tiny"], scale=fits, **args)
    oi.refuse_large_init(cfg, oi._problem(cfg, np.random.default_rng(0)))  # the same draw, scaled: accepted
