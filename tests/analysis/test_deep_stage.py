"""Where a deep linear net stands (biasfree.analysis.deep_stage, docs/theory.md §11.7.10): a depth-3
linear net trained by GD from a small balanced aligned init onto plateau k reads k units; the balanced
rank-k factorisation nearest to it is a fixed point (gradient at round-off) whose saddle the Hessian
does not see (λ_min = 0 to round-off) while the loss falls as −s_{k+1}ε³ along the zero units; the net
leaves it when §3.3's deep half time from its next mode's strength says. Failing controls: a perturbed
point is not stationary; a rank-1 point on the weaker mode has λ_min = s₂^{1/3}(s₂ − s₁) < 0; the
two-layer law misses the drop; the global minimum and a bottleneck net are not saddles."""

import numpy as np
import pytest
from roundoff import gamma
from tasks import whitened_linear

import biasfree as bf
from biasfree.analysis.deep_stage import balanced_point, deep_point, escape_path, mode_strengths
from biasfree.analysis.saddles import fixed_point, hessian_eigh
from biasfree.analysis.stage import stage
from biasfree.analysis.stationary import accumulations
from biasfree.nets import Layer
from biasfree.theory import aligned_init, data_modes, deep_mode_strength
from biasfree.theory.plateau_times import crossing_times
from biasfree.theory.reduced_rank import reduced_rank_fit, reduced_rank_losses, whitened_svd

S = np.array([4.0, 1.0, 0.25])
"""Well separated: at depth 3 a mode from a₀ = 1e-4 leaves at ≈ a₀^{-1/3}/s = 5.4, 21.5, 86."""
A0, LR, L = 1e-4, 0.01, 3
N, D = 40, 4
PLATEAUS = {0: 0, 1: 1000, 2: 4000}
"""GD steps to sit on plateau k: t = 0 (the origin), t = 10 (mode 1 learned at t₁ ≈ 5.3, mode 2 at
6.5a₀), t = 40 (mode 2 learned at t₂ ≈ 20.7, mode 3 at 6.5a₀), each under the init's noise bound."""


@pytest.fixture(scope="module")
def task():
    X, Y = whitened_linear(N, D, S)  # XᵀX/N = I to round-off
    m = data_modes(X, Y)
    p0 = aligned_init(m.U, m.V, A0, depth=L, width=4)  # balanced, aligned: each mode follows §3.3
    nets = {0: p0}
    for k in (1, 2):
        cfg = bf.GDConfig(alpha=1.0, lr=LR, steps=PLATEAUS[k], n_records=2)
        nets[k] = bf.train(p0, bf.Dataset(X, Y), cfg, observables="loss").params
    return X, Y, p0, nets, m


def _loss_tol(params, X, loss):
    """Round-off of one computed loss (biasfree.analysis.stationary, *At the floor*): γ_K L +
    γ_K rms‖r‖ P rms‖x‖, K the accumulations plus d."""
    P = float(np.prod([np.linalg.norm(np.asarray(la.W)) for la in params]))
    rx = float(np.sqrt(np.mean(np.sum(X**2, 1))))
    return gamma(accumulations(params, X.shape[0]) + X.shape[1]) * (loss + np.sqrt(2 * loss) * P * rx)


@pytest.mark.parametrize("k", [0, 1, 2])
def test_the_balanced_rank_k_point_is_a_fixed_point_the_hessian_does_not_see_as_a_saddle(task, k):
    X, Y, _, nets, _ = task
    pt = deep_point(nets[k], X, Y, k)
    Ws = [np.asarray(la.W) for la in pt.params]
    beta, Lk = reduced_rank_fit(X, Y, k)
    # the product is β_k and the loss L_k, each to γ_K of their size (3 products of norm ≤ s₁^{1/3}·√k)
    assert np.max(np.abs(Ws[2] @ Ws[1] @ Ws[0] - beta)) <= gamma(N + 3 * D) * S[0] * 4
    assert abs(pt.check.loss - Lk) <= _loss_tol(pt.params, X, Lk) and pt.level == pytest.approx(Lk, rel=1e-12)
    # balanced: W_{l+1}ᵀW_{l+1} = W_l W_lᵀ (Q_l D² Q_lᵀ both), to γ_d of s₁^{2/3}
    for lo, hi in zip(Ws[:-1], Ws[1:], strict=True):
        assert np.max(np.abs(hi.T @ hi - lo @ lo.T)) <= gamma(2 * D) * S[0] ** (2 / 3) * 4
    # stationary: relative gradient within stationary.py's round-off bound (0 at the origin, k = 0)
    assert pt.check.grad <= pt.check.grad_tol and pt.stationary
    # the Hessian sees no descent: λ_min = 0 to its round-off λ_tol (Weyl, saddles.py), though a saddle
    assert abs(pt.check.lambda_min) <= pt.check.lambda_tol and pt.saddle
    assert pt.s_next == pytest.approx(S[k], rel=1e-12) and pt.room
    # the loss falls at order L along the zero units: −s_{k+1}ε³ + ½ε⁶, exactly, to two losses' round-off
    for eps in (0.1, 0.2):
        q = escape_path(pt, X, Y, eps)
        fall = fixed_point(q, X, Y, 1.0).loss - pt.check.loss
        tol = _loss_tol(q, X, pt.check.loss) + _loss_tol(pt.params, X, pt.check.loss)
        assert abs(fall - (-S[k] * eps**3 + eps**6 / 2)) <= tol, (eps, fall, tol)
        # failing control: the two-layer order −s ε² is off by far more
        assert abs(fall - (-S[k] * eps**2 + eps**4 / 2)) > 1e6 * tol
    # the Procrustes sweeps end at a maximum of J: a small rotation of any Q_l (θ* stays in the family:
    # QᵀQ = I, same product) moves it no closer to the net, beyond the distance's round-off
    if k:
        _, bases, sweeps = balanced_point(nets[k], X, Y, k)
        U, s, Vt, isqrt = whitened_svd(X, Y)
        Dk, A = np.diag(s[:k] ** (1 / L)), isqrt @ Vt[:k].T

        def dist(Q1, Q2):
            star = (Q1 @ Dk @ A.T, Q2 @ Dk @ Q1.T, U[:, :k] @ Dk @ Q2.T)
            return np.sqrt(sum(np.sum((np.asarray(a.W) - b) ** 2)
                               for a, b in zip(nets[k], star, strict=True)))

        assert sweeps >= 1 and dist(*bases) == pytest.approx(pt.distance, rel=1e-12)
        rng = np.random.default_rng(3)
        # the distance's round-off: n_θ squares summed, θ* entries products of ≤ d terms
        norm = np.sqrt(sum(np.sum(np.asarray(la.W) ** 2) for la in nets[k]))
        tol = gamma(sum(W.size for W in Ws) + D) * (norm + np.sqrt(sum(np.sum(W**2) for W in Ws)))
        for _ in range(10):
            turned = []
            for Q in bases:  # QR of Q + 1e-3 Z, its columns' signs kept (a small rotation, not a flip)
                q, r = np.linalg.qr(Q + 1e-3 * rng.standard_normal(Q.shape))
                turned.append(q * np.sign(np.diag(r)))
            assert dist(*turned) >= pt.distance - tol


def test_a_perturbed_point_is_not_stationary_and_the_wrong_mode_is_a_hessian_saddle(task):
    """Failing controls of the two checks. θ* moved by 1e-3 along a learned direction: its gradient is
    far above round-off. The rank-1 point on mode 2 (mode 1 unlearned) is a fixed point whose Hessian
    *does* go negative, λ_min = s₂^{1/3}(s₂ − s₁) (docs: the (δW₃, δW₁) bridge through the learned middle
    unit): so λ_min = 0 at the top-k point is a measurement, not a blind spot of the check."""
    X, Y, _, nets, m = task
    pt = deep_point(nets[1], X, Y, 1)
    moved = (Layer(np.asarray(pt.params[0].W) * 1.001), *pt.params[1:])
    bad = fixed_point(moved, X, Y, 1.0)
    assert not bad.stationary and bad.grad > 1e6 * bad.grad_tol
    e = np.eye(4)[:, :1]
    for i in (1, 2):  # mode 2, then mode 3, learned alone
        b = S[i] ** (1 / 3)
        wrong = (Layer(b * e @ m.V[:, i:i + 1].T), Layer(b * e @ e.T), Layer(b * m.U[:, i:i + 1] @ e.T))
        fp = fixed_point(wrong, X, Y, 1.0)
        lam = hessian_eigh(wrong, X, Y, 1.0)[0]
        assert fp.stationary and abs(lam[0] - fp.lambda_min) <= fp.lambda_tol
        # the 2×2 block's eigenvalue s_i^{1/3}(s_i − s₁), to λ_tol plus the SVD's γ_K of s₁ (sample s)
        assert abs(fp.lambda_min - b * (S[i] - S[0])) <= fp.lambda_tol + gamma(N + D) * S[0]


@pytest.mark.parametrize("k", [0, 1, 2])
def test_the_net_leaves_its_saddle_when_the_deep_half_time_says(task, k):
    X, Y, p0, nets, _ = task
    st = stage(nets[k], (X, Y), alpha=1.0, init=p0)
    assert st.units.count == k and st.family == "linear" and st.saddle and st.deep_point.depth == L
    dp = st.deep_point
    # a₀ is the next mode's product strength u_{k+1}ᵀ W₃W₂W₁ v_{k+1}; the aligned init keeps it on §3.3's
    # flow, so it is that flow's value at the net's time, to GD's relative error over it (checked loosely:
    # the drop test below carries the real tolerance)
    t_now = PLATEAUS[k] * LR
    flow = float(deep_mode_strength(np.array([max(t_now, 1e-12)]), S[k], A0, L)[0])
    assert dp.a0 == pytest.approx(mode_strengths(nets[k], X, Y)[k], rel=1e-12) and 0.5 < dp.a0 / flow < 2
    # the drop: GD on from the net, every step recorded; the loss crosses L_{k+1} + s²/8 (mode k+1 half
    # learned) st.drop_time after now. Tolerance (§11.5.3): GD against flow over the remaining time at the
    # largest per-layer rate R = s(s/2)^{1/3} on the way to s/2; one record interval; the other modes'
    # distance from their plateaus at the crossing (flow closed form from the init) over the slope
    # (s/2)²·L·(s/2)^{4/3}, doubled.
    t_pred = st.drop_time
    steps = int(1.3 * t_pred / LR)
    tr = bf.train(nets[k], bf.Dataset(X, Y), bf.GDConfig(alpha=1.0, lr=LR, steps=steps, n_records=steps + 1),
                  observables="loss")
    s = S[k]
    level = reduced_rank_losses(X, Y)[k + 1] + s**2 / 8
    t_meas = float(crossing_times(np.asarray(tr.t)[1:], np.asarray(tr.loss)[1:], [level])[0])
    a = np.asarray(deep_mode_strength(np.array([t_now + t_pred]), S, A0, L), dtype=float)[0]
    rest = np.arange(3) != k
    off = float(np.sum(np.abs(0.5 * (S - a) ** 2 - 0.5 * (S - np.where(np.arange(3) < k, S, 0)) ** 2)[rest]))
    x = LR * s * (s / 2) ** (1 / 3) / 2
    tol = t_pred * x / (1 - x) + LR + 2 * off / ((s / 2) ** 2 * L * (s / 2) ** (4 / 3))
    assert abs(t_meas - t_pred) <= tol, (t_meas, t_pred, tol)
    # failing control: the two-layer law ln(s/a₀ − 1)/(2s) from the same a₀ misses
    assert abs(t_meas - np.log(s / dp.a0 - 1) / (2 * s)) > tol
    assert st.escape_time == pytest.approx(dp.a0 ** (-1 / 3) / s, rel=1e-12)  # a₀^{-(L−2)/L}/((L−2)s)
    # the staircase from the init: k drops passed, at the reduced-rank levels, its times §3.3's
    sc = st.staircase
    assert sc.passed == k and np.allclose(sc.prediction.levels, reduced_rank_losses(X, Y), rtol=0, atol=1e-12)
    assert np.allclose(sc.a0, A0, rtol=1e-9)
    if k == 0:  # at the init, the next drop is the staircase's first time
        assert t_pred == pytest.approx(sc.prediction.times[0], rel=1e-12)


def test_analyse_prints_the_deep_stage_and_the_minimum_and_a_bottleneck_are_not_saddles(task):
    X, Y, p0, nets, m = task
    st = bf.analyse(nets[1], (X, Y), alpha=1.0, init=p0, train=False).stage
    assert st.deep_point is not None and st.saddle and st.units.count == 1
    lines = st.lines()
    assert "saddle of order 3" in lines[1] and f"leaves in t ≈ {st.drop_time:.4g}" in lines[1]
    assert f"Hessian λ_min = {st.fixed_point.lambda_min:.2g}" in lines[1]
    assert "next mode s_2 = 1 " in st.summary()
    # every mode learned: k = 3 = the data's rank, no next mode, not a saddle, the net is its own θ*
    best = aligned_init(m.U, m.V, m.s, depth=L, width=4)
    top = stage(best, (X, Y), alpha=1.0)
    assert top.units.count == 3 and top.fixed_point.stationary and not top.saddle
    assert top.deep_point.s_next == 0.0 and top.drop_time is None and top.distance <= 1e-12 * 4
    assert "not a saddle" in top.lines()[1]
    with pytest.raises(ValueError, match=r"no mode k \+ 1 = 4 to escape along"):
        escape_path(top.deep_point, X, Y, 0.1)
    # width 1 in the middle: the rank-1 point is the global minimum of this architecture (no free unit)
    thin = aligned_init(m.U[:, :1], m.V[:, :1], m.s[:1], depth=L, width=1)
    neck = stage(thin, (X, Y), alpha=1.0)
    assert neck.units.count == 1 and not neck.deep_point.room and not neck.saddle


def test_the_deep_stage_computes_the_whitened_svd_once_and_the_same_bits_as_each_function_alone(task,
                                                                                                  monkeypatch):
    """deep_stage computes C's SVD once and passes it (``svd=``) to every function that reads it; each
    of them, called alone, computes it itself and gives the same bits (one SVD of the same data).
    Failing control: the SVD of other data, passed on, gives other numbers (it is used, not ignored)."""
    from biasfree.analysis import deep_stage as ds
    from biasfree.core.units import effective_units
    from biasfree.theory import reduced_rank

    X, Y, p0, nets, _ = task
    calls = []

    def counted(*a):
        calls.append(1)
        return whitened_svd(*a)

    monkeypatch.setattr(ds, "whitened_svd", counted)
    monkeypatch.setattr(reduced_rank, "whitened_svd", counted)
    st = ds.deep_stage(nets[1], X, Y, 0.5, effective_units(nets[1], 1.0, init=p0), p0)
    assert len(calls) == 1 and st.staircase is not None and st.deep_point.a0 is not None
    monkeypatch.undo()
    alone, svd = deep_point(nets[1], X, Y, 1), whitened_svd(X, Y)
    shared = deep_point(nets[1], X, Y, 1, svd=svd)
    for f in ("level", "distance", "s_next", "s_tol", "a0", "drop_time", "escape_time"):
        assert getattr(alone, f) == getattr(shared, f), f
    assert np.array_equal(mode_strengths(p0, X, Y), mode_strengths(p0, X, Y, svd=svd))
    assert np.array_equal(reduced_rank_losses(X, Y), reduced_rank_losses(X, Y, svd=svd))
    assert np.array_equal(np.asarray(escape_path(alone, X, Y, 0.1)[0].W),
                          np.asarray(escape_path(alone, X, Y, 0.1, svd=svd)[0].W))
    other = whitened_svd(X, 2 * Y)  # control: s doubles, to the SVD's round-off γ_K (K = N + d + p)
    doubled = deep_point(nets[1], X, Y, 1, svd=other).s_next
    assert doubled == pytest.approx(2 * alone.s_next, rel=gamma(N + 2 * D))
    assert not np.array_equal(reduced_rank_losses(X, Y), reduced_rank_losses(X, Y, svd=other))
    assert svd.s is svd[1] and svd.isqrt is svd[3]  # the named fields are the tuple's (U, s, Vt, isqrt)


def test_raw_inputs_give_the_saddle_but_no_time_and_lanczos_sees_the_same_hessian():
    """On inputs 2X (Σ_xx = 4I, not whitened) C = Σ_yxΣ_xx^{-1/2} is unchanged: the same saddle, but
    §3.3's flow is not the GD flow in W (it is preconditioned by Σ_xx), so no time, and a note says so.
    Above DENSE_HESSIAN weights (d = 20, width 20: 860) λ_min comes from Lanczos on H + cI: 0 to λ_tol
    at the top-1 point, s₂^{1/3}(s₂ − s₁) at the point on mode 2 (the failing control), each the dense
    eigh's to λ_tol."""
    import jax

    from biasfree.analysis.saddles import DENSE_HESSIAN

    X, Y, p0, net, _ = _raw_task()
    st = stage(net, (2 * X, Y), alpha=1.0, init=p0)
    assert st.units.count == 1 and st.saddle and st.deep_point.s_next == pytest.approx(S[1], rel=1e-12)
    assert st.drop_time is None and st.escape_time is None and "not whitened" in " ".join(st.notes)
    pt = st.deep_point
    m = data_modes(X, Y)
    b, e = S[1] ** (1 / 3), np.eye(20)[:, :1]
    wrong = (Layer(b * e @ m.V[:, 1:2].T), Layer(b * e @ e.T), Layer(b * m.U[:, 1:2] @ e.T))
    for params, want in ((pt.params, 0.0), (wrong, b * (S[1] - S[0]))):
        Xs = 2 * X if params is pt.params else X
        fp = fixed_point(params, Xs, Y, 1.0)
        n = sum(np.size(la.W) for la in params)
        assert n > DENSE_HESSIAN and fp.stationary
        with pytest.raises(ValueError, match="above DENSE_HESSIAN = 600: fixed_point gives its lowest"):
            hessian_eigh(params, Xs, Y, 1.0)
        flat = np.concatenate([np.asarray(la.W).ravel() for la in params])
        shapes = [np.shape(la.W) for la in params]

        def loss(th, Xs=Xs, shapes=shapes):
            i, h = 0, Xs
            for o, k in shapes:
                h, i = h @ th[i:i + o * k].reshape(o, k).T, i + o * k
            return 0.5 * jax.numpy.sum((h - Y) ** 2) / len(Xs)

        with jax.enable_x64(True):
            dense = np.linalg.eigvalsh(np.asarray(jax.hessian(loss)(jax.numpy.asarray(flat))))[0]
        # Lanczos against the dense eigh, both to λ_tol (Weyl); and the derived value, plus the SVD's γ_K
        assert abs(fp.lambda_min - dense) <= 2 * fp.lambda_tol
        assert abs(fp.lambda_min - want) <= 2 * fp.lambda_tol + gamma(200 + 20) * S[0]


def _raw_task():
    """d = 20, width 20, N = 200 (860 weights in a depth-3 net), the module's spectrum, trained to
    plateau 1 from the aligned init."""
    X, Y = whitened_linear(200, 20, S)
    m = data_modes(X, Y)
    p0 = aligned_init(m.U, m.V, A0, depth=L, width=20)
    net = bf.train(p0, bf.Dataset(X, Y), bf.GDConfig(alpha=1.0, lr=LR, steps=PLATEAUS[1], n_records=2),
                   observables="loss").params
    return X, Y, p0, net, m
