"""The predicted gap's growth term and its interval (docs/theory.md §6.4): closed forms on
nets built at the learning transition of the linear flow, and the Minkowski bound."""

import numpy as np
import pytest

from biasfree import theory
from biasfree.analysis import regime as rg
from biasfree.core.nets import even_part
from biasfree.nets import Layer

EPS = float(np.finfo(float).eps)
C = 0.5  # ReLU


def _data(seed=0, n=40, d=4):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    X = np.vstack([X, -X])
    w = rng.normal(size=d)
    return X, (X @ w + np.sin(X @ w))[:, None]


def _mode(X, Y):
    O, sig, R = np.linalg.svd(Y.T @ X / X.shape[0], full_matrices=False)
    B = theory.data_modes(X, Y, 0.0, whiten=True).B
    return O[:, 0], R[0], float(O[:, 0] @ B @ R[0]), B


def _even_energy(params, X):
    return float(np.mean(np.sum(np.asarray(even_part(params, X, 0.0)) ** 2, axis=1)))


def _transition(W1, W2, X, Y):
    """The linear flow's state at the transition of the one mode (§6.4): u grown by g, z
    shrunk by 1/g, the rest unchanged; returns it with g."""
    o, r, A, _ = _mode(X, Y)
    u, z = 0.5 * (W2.T @ o + W1 @ r), 0.5 * (W2.T @ o - W1 @ r)
    g = max(1.0, np.sqrt(abs(A) / (2 * C * np.sum(u**2))))
    W1t = W1 - np.outer(W1 @ r, r) + np.outer(g * u - z / g, r)
    W2t = W2 - np.outer(o, W2.T @ o) + np.outer(o, g * u + z / g)
    return (Layer(W1t), Layer(W2t)), g


def test_grown_units_alone_give_the_estimate_exactly_and_no_interval():
    X, Y = _data()
    o, r, A, B = _mode(X, Y)
    u = np.random.default_rng(1).normal(size=7) * 1e-3
    net = (Layer(np.outer(u, r)), Layer(np.outer(o, u)))  # no remainder: z = 0, nothing off the mode
    est = rg.growth_even_energy(net, X, Y, C, B)
    grown, g = _transition(net[0].W, net[1].W, X, Y)
    # f_even of the grown state is (1-c) g² Σ_k u_k|u_k| |ρ·x| o, whose energy is the estimate's
    # formula with c g² Σu² = A/2: the same sums, a few γ_N apart (N = 80): 80 ε × 10
    assert est.energy == pytest.approx(_even_energy(grown, X), rel=80 * EPS * 10)
    assert est.low == est.high == pytest.approx(est.energy, rel=80 * EPS * 10)
    assert est.gain == pytest.approx(g, rel=1e-12)


@pytest.mark.parametrize("scale", [1e-3, 1e-2, 1e-1])
def test_interval_holds_the_even_energy_of_the_linear_flow_at_the_transition(scale):
    X, Y = _data(2)
    _, _, _, B = _mode(X, Y)
    rng = np.random.default_rng(3)
    W1, W2 = scale * rng.normal(size=(8, 4)), scale * rng.normal(size=(1, 8))
    est = rg.growth_even_energy((Layer(W1), Layer(W2)), X, Y, C, B)
    grown, _ = _transition(W1, W2, X, Y)
    E = _even_energy(grown, X)
    # the bound of §6.4 (triangle inequality at every x, Minkowski over the data); 1e-12
    # relative slack for the round-off of two different sums of the same terms
    assert est.low * (1 - 1e-12) <= E <= est.high * (1 + 1e-12)
    assert est.low <= est.energy <= est.high


def test_interval_closes_as_the_init_shrinks():
    X, Y = _data(4)
    _, _, _, B = _mode(X, Y)
    base = np.random.default_rng(5)
    W1, W2 = base.normal(size=(8, 4)), base.normal(size=(1, 8))
    width = []
    for s in (1e-1, 1e-2, 1e-3):
        e = rg.growth_even_energy((Layer(s * W1), Layer(s * W2)), X, Y, C, B)
        width.append((np.sqrt(e.high) - np.sqrt(e.low)) / np.sqrt(e.energy))
    # the remainder is O(1/g) of the grown part and g ∝ 1/σ: the relative width falls ~10× a decade
    assert width[1] < width[0] / 5 and width[2] < width[1] / 5


def _facts():
    from biasfree.analysis import verdict as vd

    fn = vd.judge_function(has_bias=False, alpha=0.0, even_fraction=1e-4, odd_nonlinear_of_odd=0.0,
                           nonlinear_fraction=1e-4, structure=None, depth=2)
    # L(θ) = L_twin = ½<||y||²>: nothing learned yet, so the converged bound does not apply
    return vd.Facts(2, 0.0, False, 0.0, 0.0, 0.9, 0.01, fn, None, 1.0, twin_loss0=1.0, loss_ref=1.0)


@pytest.mark.parametrize(("low", "high", "level"), [(1e-4, 2e-3, "effectively linear"),
                                                    (1e-3, 5e-3, "undecided"),
                                                    (4e-3, 9e-3, "not effectively linear")])
def test_the_interval_decides_the_predicted_level(low, high, level):
    from biasfree.analysis import verdict as vd

    j = vd.judge_predicted(_facts(), t0_gap=1e-5, growth_gap=(low + high) / 2,
                           growth_range=(low, high))
    assert j.level == level
    ends = {e.name.split(", ")[1].split(" ")[0]: e for e in j.evidence if e.name.startswith("predicted gap")}
    assert ends["high"].value == high and ends["low"].value == low
    if level == vd.UNDECIDED:
        assert "straddles 0.3%" in j.reasons[0] and "[0.1%, 0.5%]" in j.reasons[0]
    # the exact t = 0 term raises both ends when it is larger
    big = vd.judge_predicted(_facts(), t0_gap=0.02, growth_gap=(low + high) / 2,
                             growth_range=(low, high))
    assert big.level == vd.NOT


def test_an_undecided_prediction_is_not_called_effectively_linear():
    from biasfree.analysis import verdict as vd

    f = _facts()
    v = vd.combine(f.function, vd.judge_predicted(f, t0_gap=0.0, growth_gap=2e-3,
                                                  growth_range=(1e-3, 5e-3)))
    assert v.level == vd.UNDECIDED and not v.effectively_linear
