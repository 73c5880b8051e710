"""Where a net stands, beyond the dense linear net (docs/theory.md §11.7.6–7): a ReLU net on plateau
1 of a two-kink target stands at the one-unit fixed point, whose loss and escape rate are known in
closed form; the one-sided rate is σ₁(G) = s₂ for a linear net (§11.4.4); a conv net's kernels
embed with the identities of Theorem 1 and a wrong embedding fails them; merged attention at the
origin is the twin's zero saddle; analyse reports the stage, or refuses in one line."""

import dataclasses

import jax
import numpy as np
import pytest
from roundoff import gamma

import biasfree as bf
from biasfree.analysis import stage_answer
from biasfree.analysis.report import _stage_json
from biasfree.analysis.stage import stage, stage_of
from biasfree.analysis.stage_answer import ANALYSE_WEIGHTS
from biasfree.analysis.unit_stage import escape_rate, parts, relative_gradient
from biasfree.core.attention_twin import twin_dataset, twin_to_merged
from biasfree.core.conv import Conv, PooledDense
from biasfree.core.icl_data import in_context_regression
from biasfree.nets import Layer
from biasfree.theory.plateau_times import crossing_times

EPS = np.finfo(float).eps


@pytest.fixture(scope="module")
def kinks():
    """Points ±√2 e₁, ±√2 e₂; y = 3 relu(x₁) + 0.1 relu(−x₁): one unit fits the +e₁ kink, the −e₁ one
    needs a second. A width-6 ReLU net from init std 1e-3, GD η = 0.02 for 1,500 steps (t = 30):
    the first kink is learned at rate ⟨y relu(x₁)⟩ = 1.5 (t ≈ 5–10), the second grows at 0.05 (by
    e^{1.5} ≈ 4.5 at t = 30, still below the init's noise bound)."""
    X = np.sqrt(2) * np.array([[1.0, 0], [-1, 0], [0, 1], [0, -1]])
    Y = (3 * np.maximum(X[:, 0], 0) + 0.1 * np.maximum(-X[:, 0], 0))[:, None]
    p0 = bf.init_gaussian(jax.random.PRNGKey(1), (2, 6, 1), scale=1e-3)
    net = bf.train(p0, bf.Dataset(X, Y), bf.GDConfig(alpha=0.0, lr=0.02, steps=1500, n_records=2),
                   observables="loss").params
    return X, Y, tuple(p0), tuple(net)


def test_a_relu_net_on_plateau_one_stands_at_the_one_kink_saddle(kinks):
    X, Y, p0, net = kinks
    st = stage(net, (X, Y), alpha=0.0, init=p0)
    assert st.family == "leaky" and st.units.count == 1 and st.covered and st.fixed_point is None
    up = st.unit_point
    # the one-unit fixed point fits +e₁ exactly and leaves r = 0.1√2 on −e₁: L* = ½·0.02/4 = 0.0025
    # (round-off: a mean of 4 squares of size ≤ 18, γ_8 relative)
    assert abs(up.loss - 0.0025) <= gamma(8) * 18
    f = np.asarray(bf.forward(up.params, X, 0.0))[:, 0]
    assert np.max(np.abs(f - [3 * np.sqrt(2), 0, 0, 0])) <= 10 * gamma(2 + 4) * 3 * np.sqrt(2)
    # Theorem 1's identities: the embedded point computes the narrow net's function and is stationary
    assert up.function_gap <= up.function_tol and up.stationary
    # the escape: g(ŵ) = ⟨r relu(ŵ·x)⟩ = ¼·0.1√2·√2 relu(−ŵ₁), so λ* = 0.05 at ŵ* = −e₁ (the second kink);
    # the ascent's round-off is γ_K of ‖g‖'s terms, far below 1e-12
    assert abs(up.rate - 0.05) <= 1e-12 and up.saddle and st.saddle
    assert np.allclose(up.direction, [-1, 0], atol=1e-12)
    assert np.isfinite(st.escape_time)
    assert st.escape_time == pytest.approx(np.log(1 / up.eps) / 0.05, rel=1e-12)
    # the net is near it: its learned unit is the fixed point's to within the init's noise (σ·(√2 + 6.44)
    # per unlearned unit, 4 units: ≲ 0.05), and far nearer than to the origin
    assert up.distance <= 0.05 < np.sqrt(sum(np.sum(np.asarray(la.W) ** 2) for la in net))
    assert "one-sided escape rate" in st.summary()
    # the next drop: GD on from the net, every step recorded, crosses L* − (3/8)λ*²/m (the second kink
    # half learned) st.drop_time later. Tolerance (§11.5.3): GD against flow over that time at rate
    # R = λ*, t·(ηR/2)/(1 − ηR/2), plus one record interval; the features of the two kinks never
    # overlap (disjoint points), so the learned unit does not move the escaping one's rate
    t_pred, lr = st.drop_time, 0.02
    steps = int(1.3 * t_pred / lr)
    tr = bf.train(net, bf.Dataset(X, Y), bf.GDConfig(alpha=0.0, lr=lr, steps=steps, n_records=steps + 1),
                  observables="loss")
    level = up.loss - 3 / 8 * up.rate**2 / up.m
    t_meas = float(crossing_times(np.asarray(tr.t)[1:], np.asarray(tr.loss)[1:], [level])[0])
    x = lr * up.rate / 2
    tol = t_pred * x / (1 - x) + lr
    assert abs(t_meas - t_pred) <= tol, (t_meas, t_pred, tol)
    assert abs(t_meas - st.escape_time) > tol  # failing control: the leading-order time misses
    # the small members' early time (§11.7.6): recomputed from the net's own units in the kept cluster
    # (θ*'s nonzero rows) with strength ‖ũ‖‖v‖ below u*/2; a member here cannot turn to −e₁ (no data
    # point between), so the drop came at st.drop_time, and the line prints both
    kept = np.linalg.norm(np.asarray(up.params[0].W), axis=1) > 0
    W1, W2 = np.asarray(net[0].W, float), np.asarray(net[1].W, float).T
    a = np.linalg.norm(W1[kept], axis=1) * np.linalg.norm(W2[kept], axis=1)
    ustar = up.rate / up.m
    a = a[a < ustar / 2]
    assert a.size and up.copy_time == pytest.approx(np.min(np.log(ustar / a - 1)) / (2 * up.rate), rel=1e-12)
    assert up.copy_time < t_meas and f"half learned at t ≈ {up.copy_time:.4g}" in st.lines()[1]
    assert _stage_json(st)["copy_time"] == up.copy_time  # the JSON says the same
    # so the time is also measured (§11.7.6): GD from the net at its own step, within both runs' lag
    lv = st.leave
    x1 = lv.lr * up.rate / 2
    lag = t_meas * x1 / (1 - x1) + tol + lv.lr
    assert abs(lv.time - t_meas) <= lag, (lv.time, t_meas)


def test_a_net_below_its_saddles_drop_level_is_said_to_be_past_it(kinks, monkeypatch):
    """/tmp/audit50 (F4): a net whose loss is already below its nearest saddle's drop level
    L* − (3/8)λ*²/m was told it 'leaves in t ≈ 41'. Here the answer is forced to the one-kink saddle
    (as a wrong nearest point would give) for the net trained on past that drop: no time is claimed,
    the line names the loss and the level. Control: at the saddle itself the time is positive."""
    import biasfree.analysis.stage as stage_mod

    X, Y, p0, net = kinks
    st = stage(net, (X, Y), alpha=0.0, init=p0)
    up = st.unit_point
    assert st.drop_time > 0 and up.drop_level == up.loss - 0.375 * up.rate**2 / up.m
    steps = int(1.5 * st.drop_time / 0.02)
    later = bf.train(net, bf.Dataset(X, Y), bf.GDConfig(alpha=0.0, lr=0.02, steps=steps, n_records=2),
                     observables="loss")
    monkeypatch.setattr(stage_mod, "unit_fixed_point", lambda *a, **k: up)
    past = stage(tuple(later.params), (X, Y), alpha=0.0, init=p0)
    assert past.loss < up.drop_level and past.drop_time == 0.0 and past.escape_time == 0.0
    assert "already past its drop" in past.lines()[1]
    assert any("past this saddle's drop" in n for n in past.notes)


def test_a_net_with_no_unit_to_spare_is_not_a_saddle_of_its_width(kinks):
    """/tmp/audit51 F2: a width-1 ReLU net at its best fit was called a saddle (λ* > 0 is the rate of a
    unit it does not have; the audit's Hessian there: eigenvalues ≥ 0, and perturbed runs return).
    Here: one unit fitting the +x₁ kink exactly (u = √3 e₁, v = √3: 3 relu(x₁)), λ* = 0.05 for the −x₁ kink.
    Control: the same unit beside a zero unit is a saddle (the zero unit can grow)."""
    X, Y, _, _ = kinks
    u = np.sqrt(3.0) * np.array([[1.0, 0.0]])
    one = (Layer(u), Layer(np.array([[np.sqrt(3.0)]])))
    st = stage(one, (X, Y), alpha=0.0)
    up = st.unit_point
    assert up.k == 1 and up.stationary and up.full and abs(up.rate - 0.05) <= 1e-12
    assert not st.saddle and st.escape_time is None and st.drop_time is None
    assert "not a saddle of this width: every unit is in use" in st.lines()[1]
    two = (Layer(np.concatenate([u, np.zeros((1, 2))])), Layer(np.array([[np.sqrt(3.0), 0.0]])))
    st2 = stage(two, (X, Y), alpha=0.0)
    assert st2.unit_point.k == 1 and not st2.unit_point.full and st2.saddle


def test_a_unit_search_that_stopped_short_found_no_fixed_point(kinks):
    """Stage.found for a ReLU net: the one-kink point is stationary, its rate written; the same
    point with its gradient 10× its round-off bound (Levenberg–Marquardt stopped short) found none,
    and neither the lines nor the JSON give its loss, rate or times."""
    X, Y, p0, net = kinks
    st = stage(net, (X, Y), alpha=0.0, init=p0)
    up = st.unit_point
    assert st.found and _stage_json(st)["escape_rate"] == up.rate
    short = dataclasses.replace(st, unit_point=dataclasses.replace(up, grad=10 * up.grad_tol))
    assert not short.found and not short.saddle
    doc = _stage_json(short)
    assert not doc["fixed_point_found"] and doc["gradient"] == 10 * up.grad_tol
    for key in ("fixed_point_loss", "distance", "escape_rate", "unstable_distance", "escape_time",
                "drop_time"):
        assert doc[key] is None, key
    line = short.lines()[1]
    assert line.startswith("no 1-unit fixed point near the net") and "Levenberg–Marquardt" in line
    assert f"{up.loss:.6g}" not in line and "λ*" not in line


def test_a_wrong_embedding_is_not_a_fixed_point(kinks):
    """Failing control: a "zero" unit with incoming weights −e₁ and readout 0 keeps f but has
    ∂L/∂v = −g(−e₁) ≠ 0: its relative gradient is far above round-off."""
    X, Y, p0, net = kinks
    star = stage(net, (X, Y), alpha=0.0, init=p0).unit_point.params
    U, V, rebuild = parts(star)
    zero = np.flatnonzero(np.linalg.norm(U, axis=1) == 0)[0]
    U2 = U.copy()
    U2[zero] = [-1.0, 0.0]
    g, tol = relative_gradient(rebuild(U2, V), X, Y, 0.0)
    assert g > 1e6 * tol
    g0, tol0 = relative_gradient(star, X, Y, 0.0)
    assert g0 <= tol0


def test_the_one_sided_rate_of_a_linear_net_is_the_next_mode():
    """At α = 1, g(ŵ) = Gŵ and the ascent is power iteration: λ* = σ₁(G) = s₂ at the rank-1 map
    on whitened inputs (§11.4.4), to the power iteration's convergence (ratio (s₃/s₂)^{2·200})."""
    rng = np.random.default_rng(0)
    N, D = 40, 4
    X = np.linalg.qr(rng.standard_normal((N, D)))[0] * np.sqrt(N)
    U = np.linalg.qr(rng.standard_normal((3, 3)))[0]
    V = np.linalg.qr(rng.standard_normal((D, 3)))[0]
    S = np.array([4.0, 0.25, 0.05])
    Y = X @ (U @ np.diag(S) @ V.T).T
    one = (Layer(np.sqrt(S[0]) * V[:, :1].T), Layer(np.sqrt(S[0]) * U[:, :1]))
    rate = escape_rate(one, X, Y, 1.0)
    assert abs(rate - S[1]) <= 1e-12
    assert abs(rate - S[2]) > 0.1  # failing control: not the mode after


def test_conv_kernels_embed_and_a_wrong_kernel_fails():
    """A ReLU conv net (1-D, 3 kernels of width 3, pooled readout) with one kernel k₁, a ×2 copy of it
    and a zero channel, on a target of k₁ plus a weak second kernel: 1 effective kernel; the
    one-kernel fixed point embedded (rescaled copy, zero channel) keeps the function and is stationary;
    putting a kernel into the zero channel (readout 0) is not a fixed point."""
    rng = np.random.default_rng(4)
    k1, k2 = rng.normal(size=(2, 1, 1, 3))
    X = rng.normal(size=(60, 8))
    teach = lambda k, v: (Conv(k, None, (8,), "same"), PooledDense(np.array([[v]]), None, (8,)))  # noqa: E731
    Y = np.asarray(bf.forward(teach(k1, 1.0), X, 0.0)) + 0.1 * np.asarray(bf.forward(teach(k2, 1.0), X, 0.0))
    K = np.concatenate([k1, 2 * k1, np.zeros((1, 1, 3))])
    net = (Conv(K, None, (8,), "same"), PooledDense(np.array([[0.6, 0.2, 0.0]]), None, (8,)))
    st = stage(net, (X, Y), alpha=0.0)
    assert st.family == "conv" and st.units.count == 1 and st.covered
    up = st.unit_point
    assert up.function_gap <= up.function_tol and up.stationary
    Ks = np.asarray(up.params[0].K)
    # a rescaled copy (its norm the nearest one, not fixed) and a zero channel: each copy is c_i times one
    # unit vector, so their directions agree to a few ε per entry (3 entries): 1e-12 is far above that
    d0, d1 = (Ks[i].ravel() / np.linalg.norm(Ks[i]) for i in (0, 1))
    assert np.allclose(Ks[2], 0) and np.linalg.norm(d1 - d0) <= 1e-12 and np.all(Ks[1] * Ks[0] >= 0)
    assert up.saddle  # the weak kernel is left in the residual: λ* > 0 beyond round-off
    U, V, rebuild = parts(up.params)
    U2 = U.copy()
    U2[2] = k2.ravel()
    g, tol = relative_gradient(rebuild(U2, V), X, Y, 0.0)
    assert g > 1e3 * tol


def test_merged_attention_at_the_origin_is_the_twins_zero_saddle():
    """Merged attention from a tiny off-twin-free init: 0 heads; the fixed point is the origin
    (the twin's rank-0 map), loss ½⟨y²⟩, λ_min = −‖Σ_zy‖ (the zero unit's block [[0, −Gᵀ], [−G, 0]]
    with G = Σ_zy, one output), to λ_tol plus γ_N of ‖Σ_zy‖."""
    ds = in_context_regression(jax.random.PRNGKey(0), 64, 8, 2)
    rng = np.random.default_rng(0)
    layer = twin_to_merged((Layer(1e-4 * rng.normal(size=(2, 4))), Layer(1e-4 * rng.normal(size=(1, 2)))), 8)
    X, Y = np.asarray(ds.X), np.asarray(ds.Y)
    st = stage(layer, (X, Y), init=layer)
    assert st.family == "attention-merged" and st.units.count == 0 and st.saddle
    Z = np.asarray(twin_dataset(bf.Dataset(X, Y, mirror=False), 8).X)
    G = np.linalg.norm(Z.T @ Y / len(Z))
    assert abs(st.fixed_point.lambda_min + G) <= st.fixed_point.lambda_tol + gamma(len(Z)) * G
    assert st.fixed_point.loss == pytest.approx(0.5 * np.mean(Y**2), rel=1e-12)


def test_analyse_reports_the_stage_or_refuses_in_one_line(kinks, monkeypatch):
    X, Y, p0, net = kinks
    res = bf.analyse(net, (X, Y), alpha=0.0, train=False, init=p0)
    assert res.stage.units.count == 1 and res.stage.saddle
    text = res.summary()
    assert "stage: effective units 1" in text and "one-sided rate" in text and "staircase" not in text
    doc = res.to_json()["stage"]
    assert doc["units"] == 1 and doc["saddle"] and doc["escape_rate"] == pytest.approx(0.05, abs=1e-12)
    # with a measured rerun from the init: the recorded curve's plateaus, matched to the 0- and 1-unit
    # levels (½⟨y²⟩ = 2.2525 and 0.0025), each unambiguously (within half the levels' separation)
    rerun = bf.analyse(net, (X, Y), alpha=0.0, init=p0, train=bf.GDConfig(lr=0.02, steps=1500, n_records=400))
    rec = rerun.stage.recorded
    assert np.allclose(rec.levels, [2.2525, 0.0025], rtol=1e-12)
    assert [m.k for m in rec.matches] == [0, 1]
    assert all(abs(m.gap) < (2.2525 - 0.0025) / 2 for m in rec.matches)
    assert "recorded curve from init: 2 plateaus" in rerun.summary()
    # /tmp/audit51 F1: the net at its init (0 units: one level, 2.2525) with the same rerun's curve. Its
    # second plateau (0.0025) needs a unit the net has not learned: left unmatched, with a note, where it
    # read 'k = 0: 2.25'
    at0 = bf.analyse(p0, (X, Y), alpha=0.0, init=p0, train=bf.GDConfig(lr=0.02, steps=1500, n_records=400))
    rec0 = at0.stage.recorded
    assert np.allclose(rec0.levels, [2.2525], rtol=1e-12) and [m.k for m in rec0.matches] == [0]
    assert rec0.note.startswith("the last 1 of its 2 plateaus have no level here")
    text = at0.summary()
    assert "recorded curve from init: 2 plateaus, levels 2.252 (k = 0: 2.253); the last 1" in text
    # above ANALYSE_WEIGHTS weights, a search that does not fit analyse's budget: the units alone, with a
    # note naming the call that builds the rest (tests/analysis/test_stage_budget.py: one that fits)
    rng = np.random.default_rng(0)
    big = (Layer(rng.normal(size=(ANALYSE_WEIGHTS, 2))), Layer(rng.normal(size=(1, ANALYSE_WEIGHTS))))
    monkeypatch.setattr(stage_answer, "STAGE_NUMBERS", 100)
    st = bf.analyse(big, (X, Y), alpha=0.0, train=False).stage
    assert not st.covered and "not built" in st.notes[0] and "stage.stage(model, data)" in st.notes[0]
    # a deep ReLU net has no effective-unit rule: the stage is the one-line refusal naming the families
    deep = tuple(Layer(rng.normal(size=s)) for s in ((3, 2), (3, 3), (1, 3)))
    ref = bf.analyse(deep, (X, Y), alpha=0.0, train=False).stage
    assert isinstance(ref, str) and "\n" not in ref and "families with one" in ref and "conv" in ref


def test_a_deep_linear_net_of_full_rank_stands_at_the_minimum_not_a_saddle():
    """A random depth-3 linear net on raw (not whitened) inputs uses both units the data allow
    (k = min(d, p) = 2): its nearest fixed point is the least-squares map, balanced over the layers
    (§11.7.10), stationary, with no next mode, so no saddle and no time; the note says why the Hessian
    is not the test at depth 3."""
    rng = np.random.default_rng(1)
    X, Y = rng.normal(size=(20, 3)), rng.normal(size=(20, 2))
    deep = tuple(Layer(rng.normal(size=s)) for s in ((3, 3), (3, 3), (2, 3)))
    st = stage_of(deep, X, Y, 1.0)
    assert st.units.count == 2 and st.covered and st.fixed_point.stationary
    assert st.deep_point.s_next == 0.0 and not st.saddle and st.drop_time is None
    assert "depth 3" in st.notes[0] and "order ε^3" in st.notes[0] and "\n" not in st.notes[0]


def test_a_linear_conv_net_with_a_pooled_readout_stands_on_the_mean_patch():
    """f = V K z̄(x), z̄ the mean patch: from a tiny init the net stands at the origin, the rank-0 fixed
    point, a saddle with λ_min = −σ₁(Σ_z̄y) (z̄ computed here apart: the mean of the 6 windows of
    width 3 of x; a permutation of its columns leaves σ₁ unchanged), to λ_tol plus γ_N of σ₁."""
    rng = np.random.default_rng(5)
    X = rng.normal(size=(50, 8))
    Zbar = np.mean([X[:, s:s + 3] for s in range(6)], axis=0)
    Y = Zbar @ rng.normal(size=(3, 2))
    net = (Conv(1e-4 * rng.normal(size=(4, 1, 3)), None, (8,), "valid"),
           PooledDense(1e-4 * rng.normal(size=(2, 4)), None, (6,)))
    st = stage(net, (X, Y), alpha=1.0, init=net)
    assert st.family == "conv-linear" and st.units.count == 0 and st.saddle
    s1 = np.linalg.svd(Zbar.T @ Y / len(X), compute_uv=False)[0]
    assert abs(st.fixed_point.lambda_min + s1) <= st.fixed_point.lambda_tol + gamma(len(X)) * s1
    assert isinstance(st.params_star[0], Conv) and np.allclose(np.asarray(st.params_star[0].K), 0)


def test_separate_attention_says_what_it_measured_the_kronecker_departure_of_its_metric():
    """§11.7.11: separate attention's k-head point is a rank-k fit of the in-context map B in the metric
    Σ_zz; a closed form (Eckart–Young) needs Σ_zz = P ⊗ Q. The note gives the relative departure δ of
    the nearest Kronecker product, which is an identity (δ = ‖Σ_zz − P ⊗ Q‖_F/‖Σ_zz‖_F with P, Q from the
    rearranged top singular pair, checked with np.kron) and is 0 to round-off when every sequence shares
    its query x_q (then Σ_zz = ⟨mmᵀ⟩ ⊗ x_qx_qᵀ exactly, z = m ⊗ x_q)."""
    from biasfree.core.attention import SeparateAttention
    from biasfree.theory.reduced_rank import kronecker_departure

    D, N = 3, 8
    seq = in_context_regression(jax.random.PRNGKey(0), 300, N, D)
    rng = np.random.default_rng(4)
    att = SeparateAttention(np.zeros((2, D + 1, D + 1)), 1e-3 * rng.normal(size=(2, 1, D + 1)),
                            1e-3 * rng.normal(size=(2, 1, D + 1)), n_ctx=N)
    st = stage(att, (np.asarray(seq.X), np.asarray(seq.Y)))
    Z = np.asarray(twin_dataset(seq, N).X)
    dev, tol = kronecker_departure(Z, D)
    note = st.notes[0]
    assert st.covered and f"misses Σ_zz by {dev:.3g} of" in note and f"(round-off {tol:.2g})" in note
    assert "\n" not in note and "solved numerically (§11.7.12)" in note
    # the identity, with np.kron: P ⊗ Q from R's top pair (R[(i,k),(j,l)] = Σ[(i,j),(k,l)])
    Szz = Z.T @ Z / len(Z)
    R = Szz.reshape(D, D, D, D).transpose(0, 2, 1, 3).reshape(D * D, D * D)
    u, s, vt = np.linalg.svd(R)
    PQ = s[0] * np.kron(u[:, 0].reshape(D, D), vt[0].reshape(D, D))
    # the same Σ_zz both ways: each SVD is backward stable, γ_{D²}‖R‖_F on each of D² singular values
    # (root-sum-square: × D), and the np.kron path's subtraction and norms add as much: 4Dγ_{D²}, relative
    diff = abs(np.linalg.norm(Szz - PQ) / np.linalg.norm(Szz) - dev)
    assert diff <= 4 * D * gamma(D * D), diff
    assert dev > 1e6 * tol  # a sample's Σ_zz is not a Kronecker product: no closed form
    # failing control: without the rearrangement (Σ_zz itself is not rank one) δ is another number
    bad = np.linalg.svd(Szz, compute_uv=False)
    assert abs(np.sqrt(np.sum(bad[1:] ** 2)) / np.linalg.norm(bad) - dev) > 0.1
    # a shared query: Σ_zz is ⟨mmᵀ⟩ ⊗ x_q x_qᵀ exactly, δ at round-off
    X = np.asarray(seq.X).reshape(len(seq.X), N + 1, D + 1).copy()
    X[:, -1, :D] = X[0, -1, :D]
    Zs = np.asarray(twin_dataset(bf.Dataset(X.reshape(len(X), -1), np.asarray(seq.Y), mirror=False), N).X)
    dev_s, tol_s = kronecker_departure(Zs, D)
    assert dev_s <= tol_s
