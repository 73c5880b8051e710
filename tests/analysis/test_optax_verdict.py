"""The measured verdict under an optax optimiser says what it measured: the steps the gap's
maximum was taken over, and "undecided", not "not", when the twin's optimiser is only
approximate (a gap to it is then no evidence that the net left its twin)."""

import jax
import numpy as np
import optax
import pytest

import biasfree as bf
from biasfree.analysis import optax_training
from biasfree.analysis import verdict as vd


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 4))
    X, Y = bf.symmetrize(X, X @ rng.normal(size=(4, 2)))
    return np.asarray(X), np.asarray(Y)


def _adam(rho):  # ε scaled with the gradients: an exact twin (§9.2)
    return optax.adam(1e-2, eps=1e-8 * rho)


def test_a_sampled_gap_names_its_records_in_the_evidence_and_the_answer(data, monkeypatch):
    monkeypatch.setattr(optax_training, "EVERY_STEP_MAX", 10)  # 50 steps > 10: 11 records
    pair = bf.pair_up(bf.init_gaussian(jax.random.PRNGKey(0), (4, 8, 2), 0.1))
    res = bf.analyse(pair, data, alpha=0.0, train=bf.OptaxConfig(_adam, steps=50, n_records=11, name="adam"))
    j = res.verdict.training
    assert res.prediction.trained.t.size == 11 and j.level == vd.EXACT
    assert "11 evenly spaced steps" in j.evidence[-2].name and "11 evenly spaced steps" in j.text
    assert "every step" not in j.text
    full = bf.analyse(pair, data, alpha=0.0, train=bf.OptaxConfig(_adam, steps=5, name="adam"))
    assert "at every step" in full.verdict.training.text  # 5 steps <= 10: every step recorded, and said


def test_a_gap_to_an_approximate_twin_is_undecided_where_the_exact_twin_says_not(data):
    net = bf.init_gaussian(jax.random.PRNGKey(1), (4, 8, 2), 0.3)  # random, not small: a real gap
    exact = bf.analyse(net, data, alpha=0.0, train=bf.OptaxConfig(_adam, steps=200, name="adam"))
    plain = bf.analyse(net, data, alpha=0.0, train=bf.OptaxConfig(optax.adam(1e-2), steps=200, name="adam"))
    for res in (exact, plain):  # both sides of the threshold rule are on the same side: above 0.3%
        assert res.prediction.trained.gap_to_twin > vd.PAPER_LEVEL
    assert exact.verdict.training.level == vd.NOT
    j = plain.verdict.training
    assert j.level == vd.UNDECIDED, j.text
    assert "approximate twin" in j.text and "factory" in j.text and "> 0.3%" in j.text


def test_an_optax_run_reports_progress_around_its_two_compiled_runs(data):
    seen = []
    pair = bf.pair_up(bf.init_gaussian(jax.random.PRNGKey(0), (4, 8, 2), 0.1))
    bf.analyse(pair, data, alpha=0.0, train=bf.OptaxConfig(_adam, steps=20, name="adam"),
               progress=lambda k, n: seen.append((k, n)))
    assert seen == [(0, 40), (20, 40), (40, 40)]
