"""Issue 49 item 8 (audit blocker B3): above ``stage_answer.ANALYSE_WEIGHTS`` weights ``analyse``
builds the nearest fixed point within a budget (seconds and the largest array) instead of never,
and says what stopped it where it does not fit (biasfree.analysis.stage_budget)."""

import jax
import numpy as np
import pytest

import biasfree as bf
from biasfree.analysis import stage_answer, stage_budget
from biasfree.analysis.stage import stage
from biasfree.nets import Layer


@pytest.fixture(scope="module")
def kink():
    """test_stage_families' kinks: a width-6 ReLU net on its one-kink plateau, and the same net with
    244 zero units added (750 weights, above ANALYSE_WEIGHTS): the same function, the same units."""
    X = np.sqrt(2) * np.array([[1.0, 0], [-1, 0], [0, 1], [0, -1]])
    Y = (3 * np.maximum(X[:, 0], 0) + 0.1 * np.maximum(-X[:, 0], 0))[:, None]
    p0 = bf.init_gaussian(jax.random.PRNGKey(1), (2, 6, 1), scale=1e-3)
    net = bf.train(p0, bf.Dataset(X, Y), bf.GDConfig(alpha=0.0, lr=0.02, steps=1500, n_records=2),
                   observables="loss").params
    W1, W2 = (np.asarray(la.W) for la in net)
    wide = (Layer(np.vstack([W1, np.zeros((244, 2))])), Layer(np.hstack([W2, np.zeros((1, 244))])))
    assert stage_answer.weights(wide) == 750 > stage_answer.ANALYSE_WEIGHTS >= stage_answer.weights(net)
    return X, Y, tuple(net), wide


def test_a_net_above_the_weight_limit_gets_its_nearest_fixed_point_within_the_budget(kink, monkeypatch):
    """The wide net's answer is the narrow one's: the zero units are zero units of the embedding
    (Theorem 1), so the same k, fixed-point loss, distance and escape rate (one code path on the
    same learned groups: equal to round-off of the sums over 250 units rather than 6)."""
    X, Y, net, wide = kink
    monkeypatch.setattr(stage_answer, "STAGE_SECONDS", 600.0)  # this test's answer, not the machine's speed
    small = stage(net, (X, Y), alpha=0.0)
    got = bf.analyse(wide, (X, Y), alpha=0.0, train=False).stage
    assert got.covered and got.unit_point is not None and got.k == small.k >= 1
    g, s = got.unit_point, small.unit_point
    for a, b in ((g.loss, s.loss), (g.distance, s.distance), (g.rate, s.rate)):
        # sums of at most 250 terms of size ≤ 20 (loss ≤ ½·18², rates ≤ ‖r‖‖x‖): γ_250 · 20 each side
        assert abs(a - b) <= 2 * 250 * np.finfo(float).eps * 20 * max(1.0, abs(b))
    assert "not built" not in " ".join(got.notes)


def test_a_search_that_does_not_fit_the_budget_gives_the_units_and_says_why(kink, monkeypatch):
    X, Y, _, wide = kink
    monkeypatch.setattr(stage_answer, "STAGE_NUMBERS", 3)  # a k-unit Jacobian has 4 rows × 3k weights
    st = bf.analyse(wide, (X, Y), alpha=0.0, train=False).stage
    k = st.units.count  # the first search is the count's (no init: copies split by init noise count apart)
    assert not st.covered and st.unit_point is None and np.isnan(st.loss) and k >= 1
    why = f"Jacobian of the {k}-unit narrow net would hold {12 * k} numbers, more than the 3 allowed"
    assert why in st.notes[0]
    assert "biasfree.analysis.stage.stage(model, data)" in st.notes[0]
    monkeypatch.setattr(stage_answer, "STAGE_NUMBERS", 2**25)
    monkeypatch.setattr(stage_answer, "STAGE_SECONDS", 0.0)  # and the rest of the call's share 0:
    monkeypatch.setattr(stage_answer, "STAGE_SHARE", 0.0)  # past the time at the first check
    st = bf.analyse(wide, (X, Y), alpha=0.0, train=False).stage
    assert not st.covered and "ran past the time budget of 0 s" in st.notes[0]


def test_the_budget_checks_only_inside_its_block():
    stage_budget.check()  # no block: nothing to check
    stage_budget.fits(10**12, "anything")
    with stage_budget.budget(3600.0, 100):
        stage_budget.check()
        stage_budget.fits(100, "an array")
        with pytest.raises(stage_budget.OverBudget, match="an array would hold 101 numbers"):
            stage_budget.fits(101, "an array")
    with stage_budget.budget(0.0, 100), pytest.raises(stage_budget.OverBudget, match="time budget of 0 s"):
        stage_budget.check()
    stage_budget.check()  # the block's limit is gone with it
