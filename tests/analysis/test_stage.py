"""Where a net stands (biasfree.analysis.stage, docs/theory.md §11.7): a linear net trained by GD
from a small init onto plateau 1 of a 3-mode target is read at 1 unit, next to the rank-1 fixed
point, a saddle with λ_min = −s₂, and leaves it when the predicted drop time says; the global
minimum is not a saddle; a torch module reads as its params; a family with no rule is refused."""

import numpy as np
import pytest
from roundoff import gamma

import biasfree as bf
from biasfree.analysis.stage import stage
from biasfree.nets import Layer
from biasfree.theory import aligned_init, data_modes, linear_loss
from biasfree.theory.plateau_times import crossing_times
from biasfree.theory.reduced_rank import reduced_rank_fit, reduced_rank_losses

S = np.array([4.0, 0.25, 0.05])
"""Well separated: mode 1 is learned (t ≈ 1.3) while mode 2 is still below the init's noise
bound (a₂ ≈ a₀e^{2s₂t} ≈ 2.7a₀ at t = 2, against the threshold ≈ 46a₀)."""
A0, LR, K0 = 1e-4, 0.02, 100
N, D = 40, 4


@pytest.fixture(scope="module")
def task():
    rng = np.random.default_rng(0)
    X = np.linalg.qr(rng.standard_normal((N, D)))[0] * np.sqrt(N)  # XᵀX/N = I to round-off
    U = np.linalg.qr(rng.standard_normal((3, 3)))[0]
    V = np.linalg.qr(rng.standard_normal((D, 3)))[0]
    Y = X @ (U @ np.diag(S) @ V.T).T
    m = data_modes(X, Y)
    p0 = aligned_init(m.U, m.V, A0, width=4)  # balanced, aligned: each mode follows Saxe's logistic
    tr = bf.train(p0, bf.Dataset(X, Y), bf.GDConfig(alpha=1.0, lr=LR, steps=K0, n_records=2),
                  observables="loss")
    return X, Y, p0, tr.params


def test_a_net_on_plateau_one_stands_at_the_rank_one_saddle_and_leaves_when_predicted(task):
    X, Y, p0, net = task
    st = stage(net, (X, Y), alpha=1.0, init=p0)
    assert st.units.count == 1 and st.family == "linear"
    fp = st.fixed_point
    # the rank-1 reduced-rank map, by its own closed form: product and loss to γ_K of their size
    beta1, L1 = reduced_rank_fit(X, Y, 1)
    W1s, W2s = (np.asarray(la.W) for la in st.params_star)
    assert np.max(np.abs(W2s @ W1s - beta1)) <= gamma(N + D) * S[0] * 4
    assert abs(fp.loss - L1) <= gamma(N + D + 3) * S[0] ** 2 * 4 and st.level == pytest.approx(L1, rel=1e-12)
    assert fp.stationary and st.saddle
    # λ_min = −σ₁(G) = −s₂ on whitened inputs (§11.4.4), to λ_tol plus the SVD's γ_K of ‖G‖
    tol = fp.lambda_tol + gamma(N + D) * S[0]
    assert abs(fp.lambda_min + S[1]) <= tol and abs(fp.lambda_min + S[2]) > 1e6 * tol
    assert st.unstable_dim == 3  # one −s₂ block per zero unit: width 4, one unit learned
    # the drop: GD on from the net, every step recorded; the loss crosses L₂ + s₂²/8 (mode 2 half
    # learned) st.drop_time after now. Tolerance (§11.5.3): GD against flow over the remaining
    # time at rate R = s₂, one record interval, and the other modes' distance from their plateaus
    # at the crossing (flow closed form from the init) over the slope s₂³/4, doubled.
    steps = int(1.3 * st.drop_time / LR)
    tr = bf.train(net, bf.Dataset(X, Y), bf.GDConfig(alpha=1.0, lr=LR, steps=steps, n_records=steps + 1),
                  observables="loss")
    y_power = float(np.mean(np.sum(Y**2, 1)))
    level = reduced_rank_losses(X, Y)[2] + S[1] ** 2 / 8
    t_meas = float(crossing_times(np.asarray(tr.t)[1:], np.asarray(tr.loss)[1:], [level])[0])
    t_pred = st.drop_time
    x = LR * S[1] / 2
    off = abs(float(linear_loss(K0 * LR + t_pred, S, A0, y_power)) - level)
    tol = t_pred * x / (1 - x) + LR + 2 * off / (S[1] ** 3 / 4)
    assert abs(t_meas - t_pred) <= tol, (t_meas, t_pred, tol)
    # failing control: the leading-order escape time alone misses by ln(2s₂ − ε²)/(2s₂) ≈ −1.39 (§11.4.4)
    assert abs(t_meas - st.escape_time) > tol
    assert st.escape_time == pytest.approx(np.log(1 / st.unstable_distance) / S[1], rel=1e-9)
    # the staircase from the init: one drop passed, at the reduced-rank levels
    sc = st.staircase
    assert sc.passed == 1 and np.allclose(sc.prediction.levels, reduced_rank_losses(X, Y), rtol=0, atol=1e-12)
    assert np.allclose(sc.a0, A0, rtol=1e-9)  # ¼‖W₁v + W₂ᵀu‖² of the aligned init: a₀ per mode


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
    assert r.family == "leaky" and r.fixed_point is None and "not covered" in r.notes[0]


def test_a_family_with_no_rule_is_refused_naming_those_with_one(task):
    X, Y, _, _ = task
    rng = np.random.default_rng(1)
    deep = tuple(Layer(rng.standard_normal(s)) for s in ((4, D), (4, 4), (3, 4)))
    with pytest.raises(ValueError, match=r"no effective-unit rule for a depth-3 .*with one: .*dense linear"):
        stage(deep, (X, Y), alpha=0.0)
    with pytest.raises(ValueError, match="init has widths"):
        stage(task[3], (X, Y), alpha=1.0, init=(Layer(np.ones((2, D))), Layer(np.ones((3, 2)))))
