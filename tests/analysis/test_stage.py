"""Where a net stands (biasfree.analysis.stage, docs/theory.md §11.7): a linear net trained by GD
from a small init onto plateau 1 of a 3-mode target is read at 1 unit, next to the rank-1 fixed
point, a saddle with λ_min = −s₂, and leaves it when the predicted drop time says; the global
minimum is not a saddle; a torch module reads as its params; a family with no rule is refused."""

import dataclasses

import jax
import numpy as np
import pytest
from roundoff import gamma
from tasks import whitened_linear

import biasfree as bf
from biasfree.analysis.report import _stage_json
from biasfree.analysis.stage import stage
from biasfree.core.attention import SeparateAttention
from biasfree.core.conv import Conv
from biasfree.nets import Layer
from biasfree.theory import aligned_init, data_modes, mode_strength
from biasfree.theory.plateau_times import crossing_times
from biasfree.theory.reduced_rank import reduced_rank_fit, reduced_rank_losses

S = np.array([4.0, 0.25, 0.05])
"""Well separated: each mode is learned while the next is still below the init's noise bound."""
A0, LR = 1e-4, 0.02
N, D = 40, 4
PLATEAUS = {0: 0, 1: 100, 2: 1500}
"""GD steps to sit on plateau k: t = 0 (the origin), t = 2 (mode 1 learned at t₁ ≈ 1.3, mode 2 at
≈ 2.7a₀ against the init floor ≈ 46a₀), t = 30 (mode 2 learned at t₂ ≈ 15.6, mode 3 at ≈ 20a₀)."""


@pytest.fixture(scope="module")
def task():
    X, Y = whitened_linear(N, D, S)  # XᵀX/N = I to round-off
    m = data_modes(X, Y)
    p0 = aligned_init(m.U, m.V, A0, width=4)  # balanced, aligned: each mode follows Saxe's logistic
    tr = bf.train(p0, bf.Dataset(X, Y), bf.GDConfig(alpha=1.0, lr=LR, steps=PLATEAUS[1], n_records=2),
                  observables="loss")
    return X, Y, p0, tr.params


def _on_plateau(task, k):
    X, Y, p0, net1 = task
    if k < 2:
        return (p0, net1)[k]
    return bf.train(p0, bf.Dataset(X, Y), bf.GDConfig(alpha=1.0, lr=LR, steps=PLATEAUS[k], n_records=2),
                    observables="loss").params


@pytest.mark.parametrize("k", [0, 1, 2])
def test_a_net_on_plateau_k_stands_at_the_rank_k_saddle_and_leaves_when_predicted(task, k):
    X, Y, p0, _ = task
    net = _on_plateau(task, k)
    st = stage(net, (X, Y), alpha=1.0, init=p0)
    assert st.units.count == k and st.family == "linear"
    fp = st.fixed_point
    # the rank-k reduced-rank map, by its own closed form: product and loss to γ_K of their size
    beta, Lk = reduced_rank_fit(X, Y, k)
    W1s, W2s = (np.asarray(la.W) for la in st.params_star)
    assert np.max(np.abs(W2s @ W1s - beta)) <= gamma(N + D) * S[0] * 4
    assert abs(fp.loss - Lk) <= gamma(N + D + 3) * S[0] ** 2 * 4 and st.level == pytest.approx(Lk, rel=1e-12)
    assert fp.stationary and st.saddle
    # λ_min = −σ₁(G) = −s_{k+1} on whitened inputs (§11.4.4), to λ_tol plus the SVD's γ_K of ‖G‖;
    # failing control: not the next mode's −s_{k+2}
    s_next = S[k]
    tol = fp.lambda_tol + gamma(N + D) * S[0]
    assert abs(fp.lambda_min + s_next) <= tol
    assert abs(fp.lambda_min + S[(k + 1) % 3]) > 1e6 * tol
    assert st.unstable_dim == 4 - k  # one −s_{k+1} block per zero unit: width 4, k units learned
    # the drop: GD on from the net, every step recorded; the loss crosses L_{k+1} + s²/8 (mode k+1
    # half learned) st.drop_time after now. Tolerance (§11.5.3): GD against flow over the remaining
    # time at rate R = s_{k+1}; one record interval; the other modes' distance from their plateaus
    # (learned: a = s, unlearned: a = 0) at the crossing, from the flow closed form from the init,
    # over the slope s³/4, doubled.
    t_pred = st.drop_time
    steps = int(1.3 * t_pred / LR)
    tr = bf.train(net, bf.Dataset(X, Y), bf.GDConfig(alpha=1.0, lr=LR, steps=steps, n_records=steps + 1),
                  observables="loss")
    level = reduced_rank_losses(X, Y)[k + 1] + s_next**2 / 8
    t_meas = float(crossing_times(np.asarray(tr.t)[1:], np.asarray(tr.loss)[1:], [level])[0])
    a = np.asarray(mode_strength(PLATEAUS[k] * LR + t_pred, S, A0), dtype=float)
    rest = np.arange(3) != k
    off = float(np.sum(np.abs(0.5 * (S - a) ** 2 - 0.5 * (S - np.where(np.arange(3) < k, S, 0)) ** 2)[rest]))
    x = LR * s_next / 2
    tol = t_pred * x / (1 - x) + LR + 2 * off / (s_next**3 / 4)
    assert abs(t_meas - t_pred) <= tol, (t_meas, t_pred, tol)
    # failing control: the leading-order escape time alone misses by |ln(2s − ε²)|/(2s) (§11.4.4)
    assert abs(t_meas - st.escape_time) > tol
    assert st.escape_time == pytest.approx(np.log(1 / st.unstable_distance) / s_next, rel=1e-9)
    # the staircase from the init: k drops passed, at the reduced-rank levels
    sc = st.staircase
    assert sc.passed == k and np.allclose(sc.prediction.levels, reduced_rank_losses(X, Y), rtol=0, atol=1e-12)
    assert np.allclose(sc.a0, A0, rtol=1e-9)  # ¼‖W₁v + W₂ᵀu‖² of the aligned init: a₀ per mode
    if k == 0:
        # at the origin ε²/2 is ¼‖W₁v₁ + W₂ᵀu₁‖² itself: the drop time is the staircase's t₁. Both are
        # ln(s/a₀ − 1)/(2s); a₀ from the projector on E, off by ‖δH‖/gap ≤ λ_tol/(s₁ − s₂) relative
        # (Davis–Kahan), moves t by that over 2s₁ (twice, for ε²)
        assert abs(t_pred - sc.prediction.times[0]) <= 2 * fp.lambda_tol / (S[0] - S[1]) / (2 * S[0]) + 1e-15


def test_the_global_minimum_is_not_a_saddle(task):
    """Every mode learned (the full least-squares map, balanced): 3 units, the fixed point is the
    net itself, λ_min ≥ −λ_tol (G = 0: the zero unit's block is 0, the rest PSD)."""
    X, Y, _, _ = task
    m = data_modes(X, Y)
    best = aligned_init(m.U, m.V, m.s, width=4)
    st = stage(best, (X, Y), alpha=1.0)
    assert st.units.count == 3 and st.fixed_point.stationary
    assert not st.saddle and st.fixed_point.lambda_min >= -st.fixed_point.lambda_tol
    assert st.escape_time is None and st.drop_time is None and st.staircase is None
    assert st.distance <= 1e-12 * np.sqrt(S[0])  # the net is its own fixed point, to round-off
    assert "λ_min" in st.summary() and "not a saddle" in st.summary()


def test_a_stage_that_found_no_fixed_point_says_so_once_in_its_lines_and_json(task):
    """Stage.found: the rank-1 point of a net on plateau 1 is stationary to round-off, so its numbers
    are printed and written; the same stage with its point's gradient above its bound (a search that
    stopped short) found none: its lines and JSON give that gradient against its bound and leave
    the point's numbers out."""
    X, Y, p0, net = task
    st = stage(net, (X, Y), alpha=1.0, init=p0)
    fp = st.fixed_point
    assert st.found and st.saddle
    doc = _stage_json(st)
    assert doc["fixed_point_found"] and doc["fixed_point_loss"] == fp.loss and doc["distance"] == st.distance
    assert doc["lambda_min"] == fp.lambda_min and doc["escape_time"] == st.escape_time
    assert f"loss {fp.loss:.6g}" in st.lines()[1]
    # control: the same point with its gradient 10× its round-off bound
    short = dataclasses.replace(st, fixed_point=dataclasses.replace(fp, grad=10 * fp.grad_tol))
    assert short.covered and not short.found and not short.saddle
    doc = _stage_json(short)
    assert not doc["fixed_point_found"] and doc["lines"] == short.lines()
    for key in ("fixed_point_loss", "distance", "lambda_min", "unstable_distance", "escape_time",
                "drop_time"):
        assert doc[key] is None, key
    assert doc["gradient"] == 10 * fp.grad_tol and doc["gradient_tol"] == fp.grad_tol
    line = short.lines()[1]
    assert line.startswith("no 1-unit fixed point near the net: its relative gradient")
    assert f"{fp.loss:.6g}" not in line and "λ_min" not in line


def test_a_torch_module_reads_as_its_params(task):
    torch = pytest.importorskip("torch")
    X, Y, _, net = task
    mod = torch.nn.Sequential(torch.nn.Linear(D, 4, bias=False), torch.nn.Linear(4, 3, bias=False)).double()
    with torch.no_grad():
        for lin, la in zip((mod[0], mod[1]), net, strict=True):
            lin.weight.copy_(torch.from_numpy(np.array(la.W, dtype=float)))
    a, b = stage(mod, (X, Y)), stage(net, (X, Y), alpha=1.0)
    assert a.units.count == b.units.count
    assert a.fixed_point.lambda_min == pytest.approx(b.fixed_point.lambda_min, rel=1e-12)
    relu = torch.nn.Sequential(torch.nn.Linear(D, 4, bias=False), torch.nn.ReLU(),
                               torch.nn.Linear(4, 3, bias=False)).double()
    r = stage(relu, (X, Y))
    assert r.family == "leaky" and r.fixed_point is None and r.covered  # §11.7.6: its units' fixed point


def test_a_family_with_no_rule_is_refused_naming_those_with_one(task):
    X, Y, _, _ = task
    rng = np.random.default_rng(1)
    deep = tuple(Layer(rng.standard_normal(s)) for s in ((4, D), (4, 4), (3, 4)))
    with pytest.raises(ValueError, match=r"no effective-unit rule for a depth-3 .*with one: .*dense linear"):
        stage(deep, (X, Y), alpha=0.0)
    with pytest.raises(ValueError, match="init has widths"):
        stage(task[3], (X, Y), alpha=1.0, init=(Layer(np.ones((2, D))), Layer(np.ones((3, 2)))))


def test_conv_nets_get_their_kernels_separate_attention_its_heads_and_a_note():
    """Conv: kernels (§11.1) and their fixed point (§11.7.6). Separate attention: its heads, and at 0
    heads its fixed point θ* = 0 (§11.7.12: loss ½⟨y²⟩, every weight moved), with a one-line note."""
    rng = np.random.default_rng(2)
    conv = (Conv(rng.normal(size=(3, 1, 3)), None, (8,), "same"), Layer(rng.normal(size=(2, 24))))
    X, Y = rng.normal(size=(30, 8)), rng.normal(size=(30, 2))
    st = stage(conv, (X, Y), alpha=0.0)
    assert st.family == "conv" and st.units.count == 3 and st.fixed_point is None and st.covered
    K, Q = rng.normal(size=(2, 2, 1, 4))
    att = SeparateAttention(np.zeros((2, 4, 4)), K, Q, n_ctx=4)
    Xa, Ya = rng.normal(size=(30, 20)), rng.normal(size=(30, 1))
    Xa.reshape(30, 5, 4)[:, -1, -1] = 0  # the query's label slot
    sa = stage(att, (Xa, Ya))
    assert sa.family == "attention-separate" and sa.covered and sa.found and sa.units.count == 0
    star = sa.params_star
    assert sa.head_point.heads == () and not any(np.any(np.asarray(a)) for a in (star.K, star.Q))
    # f = 0 exactly, so the loss is ½⟨y²⟩, a sum of 30 squares: γ_30 relative for another order
    assert abs(sa.level - 0.5 * np.mean(Ya**2)) <= gamma(30) * sa.level
    dist = np.sqrt(np.sum(K**2) + np.sum(Q**2))  # V = 0 already: 16 squares, γ_16 for another order
    assert abs(sa.distance - dist) <= gamma(16) * dist
    note = sa.notes[0]
    assert "solved numerically" in note and "\n" not in note


def test_on_a_plateau_the_units_learned_are_the_nearest_fixed_points_not_the_count():
    """A 4 → 8 → 3 linear net from init 1e-3 on a whitened rank-3 target (s = 2, 1, ½): on the first
    plateau every mode has grown above the init noise, so the count reads 3 (§11.1, "When the count
    moves"), but the net sits at the best 1-unit solution: ``learned`` is 1 and the answer says the
    other 2 are growing (audit of issue 49: the answer said "effective units 3" beside "best 1-unit
    solution", with nothing telling them apart). Trained to the end, the count and ``learned`` agree,
    and nothing is said to grow."""
    rng = np.random.default_rng(0)
    d, N = 4, 64
    X = rng.normal(size=(N, d))
    X = X - X.mean(0)
    U, _, _ = np.linalg.svd(X, full_matrices=False)
    X = U * np.sqrt(N)
    Q1, _ = np.linalg.qr(rng.normal(size=(3, 3)))
    Q2, _ = np.linalg.qr(rng.normal(size=(d, d)))
    Y = X @ (Q1 @ np.diag([2, 1, 0.5]) @ Q2[:3]).T
    net0 = bf.init_gaussian(jax.random.PRNGKey(0), (d, 8, 3), scale=1e-3)
    got = {}
    for steps in (550, 3000):
        net = bf.train(net0, bf.Dataset(X, Y), bf.GDConfig(alpha=1.0, lr=0.01, steps=steps)).params
        st = bf.analyse(net, (X, Y), alpha=1.0, init=net0, train=False).stage
        got[steps] = (st.units.count, st.learned, st.units_line())
    assert got[550][:2] == (3, 1)
    assert "1 learned (the nearest fixed point's units), 2 above init noise" in got[550][2]
    assert got[3000][:2] == (3, 3) and "growing" not in got[3000][2]


def _rank_two_fit():
    """``(rng, X, Y, net)``: whitened X (200, 10), Y = X Bᵀ of rank 2 (strengths 2, ½, 10 outputs), and
    the balanced rank-2 fit of a 10 → 50 → 10 linear net, its two units spread over the hidden rows."""
    rng = np.random.default_rng(0)
    N, d, H, p = 200, 10, 50, 10
    X = rng.normal(size=(N, d))
    X = X @ np.linalg.inv(np.linalg.cholesky(X.T @ X / N)).T
    U, V = (np.linalg.qr(rng.normal(size=(n, n)))[0] for n in (p, d))
    s = np.array([2.0, 0.5])
    Q = np.linalg.qr(rng.normal(size=(H, 2)))[0]
    net = (Layer(Q @ (np.sqrt(s)[:, None] * V[:, :2].T)), Layer((U[:, :2] * np.sqrt(s)) @ Q.T))
    return rng, X, X @ (U[:, :2] * s @ V[:, :2].T).T, net


def test_a_target_of_lower_rank_than_the_net_stands_at_its_rank_not_at_round_off_modes():
    """Y = X Bᵀ of rank 2 (whitened X, 10 → 10), a 10 → 50 → 10 linear net at the balanced rank-2 fit
    plus noise 1e-5: the data's strengths past 2 are round-off of Σ_yx (s_i ≲ 1e-15 against the rule's
    s₁·max(N, d, p)·ε = 2·200·2.2e-16 ≈ 9e-14), so the best k-unit solutions for k > 2 are the rank-2
    one with units of strength ≈ 0 added, whose √s_i (≈ 1e-8) moved the distance in its 8th digit and
    let round-off name k = 10 before. The answer is k = 2, and no candidate past the rank is offered."""
    from biasfree.theory.reduced_rank import numerical_rank, whitened_svd

    rng, X, Y, net = _rank_two_fit()
    assert numerical_rank(whitened_svd(X, Y), len(X)) == 2
    W1, W2 = (np.asarray(la.W) + 1e-5 * rng.normal(size=np.shape(la.W)) for la in net)
    st = stage((Layer(W1), Layer(W2)), (X, Y), alpha=1.0)
    assert st.k == 2 and [k for k, *_ in st.candidates] == [0, 1, 2], st.candidates
    # L_2 = ½(tr Σ_yy − s₁² − s₂²) cancels ½<‖y‖²> = 2.125 to round-off: ≲ (N + d) ε · 2.125 ≈ 1e-13
    assert st.level == pytest.approx(0.0, abs=1e-12)


def test_an_init_noise_bound_above_the_datas_strengths_makes_the_count_a_lower_bound():
    """The balanced rank-2 fit (strengths 2, ½) of a 10 → 50 → 10 net, counted against a default-scale
    init (entries N(0, 1/fan_in)): §11.1's noise bound σ_out(√10 + t)·σ_in(√10 + t) ≈ 2.3 is above both
    strengths, so the learned modes read below it and the count is 0 (an audit read that as decided).
    The answer says the count is a lower bound and names the nearest point's 2 units. Control: the
    same net against an init of std 1e-3 (bound ≈ 5e-5) counts 2, with no such note."""
    rng, X, Y, net = _rank_two_fit()
    for std, count, noted in ((None, 0, True), (1e-3, 2, False)):
        scales = (1 / np.sqrt(10), 1 / np.sqrt(50)) if std is None else (std, std)
        init = tuple(Layer(c * rng.normal(size=np.shape(la.W))) for c, la in zip(scales, net, strict=True))
        st = stage(net, (X, Y), alpha=1.0, init=init)
        assert st.units.count == count and st.k == 2, (std, st.units)
        assert st.at_least == noted and any("is a lower bound" in n for n in st.notes) == noted, st.notes
        assert st.units_line().startswith(f"effective units {'at least ' if noted else ''}{count} (linear")
