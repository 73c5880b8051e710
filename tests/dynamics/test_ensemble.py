"""Named ensembles (biasfree.dynamics.ensemble): members by name, twins built by the library."""

import jax
import numpy as np
import pytest
from roundoff import EPS, chain_length, gamma, trajectory_gap

import biasfree as bf
from biasfree.dynamics.ensemble import Member

pytestmark = pytest.mark.numerics  # round-off bounds: make test-portable reruns them


@pytest.fixture(scope="module")
def data():
    key = jax.random.PRNGKey(0)
    X = jax.random.normal(key, (40, 4))
    X, Y = bf.symmetrize(X, X @ np.array([[1.0], [-0.5], [0.2], [0.0]]) + np.sin(X[:, :1]))
    return bf.Dataset(X, Y)


def test_members_equal_their_single_runs_and_keep_their_names(data):
    """Each named member, grouped by shape into one compiled call, follows the same
    trajectory as its own single train() run (round-off: same arithmetic, batched)."""
    wide = bf.init_gaussian(jax.random.PRNGKey(1), (4, 6, 1), 0.3)
    narrow = bf.init_gaussian(jax.random.PRNGKey(2), (4, 3, 1), 0.3)
    members = {"relu": Member(wide, alpha=0.0), "leaky_fast": Member(wide, alpha=0.4, lr=0.05),
               "linear_decay": Member(narrow, alpha=1.0, weight_decay=0.1)}
    cfg = bf.GDConfig(lr=0.02, steps=300, n_records=11)
    runs = bf.train(members, data, cfg)
    assert list(runs) == list(members)
    for name, m in members.items():
        one = bf.GDConfig(alpha=m.alpha, lr=m.lr or cfg.lr, steps=300, n_records=11,
                          weight_decay=m.weight_decay)
        single = bf.train(m.params, data, one)
        # The batched and the unbatched kernel do the same float64 operations, but may sum
        # in another order: each step's sums (at most k = N = 80 terms: data points;
        # widths and d are smaller) differ by <= 2 γ_k relative (tests/roundoff.py), a
        # relative perturbation of θ of at most that (less: the step η∇ is small against
        # θ). Carried to the records it is amplified by at most about κ, the relative
        # change of the recorded losses per relative change of the init, measured here
        # by a run from θ₀(1 ± 1e-7). Over T = 300 steps: rtol = T · 2γ_k · κ.
        kappa = _loss_condition(m.params, data, one, single.loss)
        rtol = one.steps * 2 * gamma(data.X.shape[0]) * kappa
        assert rtol < 1e-9, f"{name}: κ = {kappa:.3g}, too ill-conditioned to compare"
        np.testing.assert_allclose(runs[name].loss, single.loss, rtol=rtol)
        # record times: t_j = k_j η, the same product on both paths: equal
        np.testing.assert_array_equal(runs[name].t, single.t)


def _loss_condition(params, data, cfg, loss, rel=1e-7):
    """κ = max_j |δL_j| / L_j ÷ rel, the first-order sensitivity of the recorded losses to
    a relative change ``rel`` of every init weight (signs at random): one more run. Its
    own round-off (~1e-14 on a difference of ~1e-7) is negligible."""
    rng = np.random.default_rng(0)
    moved = jax.tree_util.tree_map(lambda a: a * (1 + rel * rng.choice([-1.0, 1.0], size=a.shape)), params)
    loss = np.asarray(loss)
    return float(np.max(np.abs(np.asarray(bf.train(moved, data, cfg).loss) - loss) / loss)) / rel


def test_pair_member_equals_its_twin_and_errors_name_the_member(data):
    # the shapes and run length of the test above (pair (4, 6, 1), twin (4, 3, 1), 300 steps,
    # 11 records): its compiled batched and single programs are reused
    pair = bf.pair_up(bf.init_gaussian(jax.random.PRNGKey(3), (4, 3, 1), 0.3))
    member = Member(pair, alpha=0.2, twin=True, weight_decay=0.05)
    cfg = bf.GDConfig(lr=0.03, steps=300, n_records=11)
    runs = bf.train({"pair": member, "plain": Member(pair, alpha=0.2)}, data, cfg)
    # antisymmetric pairs on symmetric data: exactly the twin (§2.3-2.4, §2.7), so the gap
    # is the round-off of two 300-step runs (the pair net and its linear twin, k the longer
    # chain): roundoff.trajectory_gap of each, relative to L(0) as twin_gap is; ~1e-12 here,
    # where a pair that is not its twin strays by O(1e-2)
    assert runs.twin_gap("pair") <= _twin_gap_bound(runs, "pair", member, data, cfg) < 1e-9
    # the twin's t = (η·c)·k against 0.6·(η·k), c = 0.6 the slope factor at α = 0.2: three
    # roundings of products of the same reals (c itself rounded once more): <= 4ε relative
    np.testing.assert_allclose(runs.twin("pair").t, 0.6 * runs["pair"].t, rtol=4 * EPS)
    with pytest.raises(ValueError, match="no test loss"):
        runs.twin_gap("pair", test=True)
    with pytest.raises(KeyError, match="without its twin"):
        runs.twin("plain")
    with pytest.raises(KeyError, match="members: pair, plain"):
        runs["nope"]


def test_bad_members_are_refused():
    p = bf.init_gaussian(jax.random.PRNGKey(4), (2, 2, 1), 0.1)
    with pytest.raises(ValueError, match="alpha"):
        Member(p, alpha=1.5)
    with pytest.raises(ValueError, match="lr"):
        Member(p, lr=-1.0)
    with pytest.raises(TypeError, match="Member"):
        bf.train({"x": p}, bf.Dataset(np.ones((2, 2)), np.ones((2, 1))), bf.GDConfig())
    with pytest.raises(ValueError, match="at least one"):
        bf.train({}, bf.Dataset(np.ones((2, 2)), np.ones((2, 1))), bf.GDConfig())


def test_twin_gap_of_the_held_out_loss(data):
    """A pair net equals its twin on any input, so the held-out loss gap is round-off; a
    random init's is not (its even part is non-zero off the training set too)."""
    key = jax.random.PRNGKey(5)
    Xt = jax.random.normal(key, (30, 4))
    held = bf.Dataset(data.X, data.Y, Xt, Xt @ np.array([[1.0], [-0.5], [0.2], [0.0]]))
    net = bf.init_gaussian(jax.random.PRNGKey(6), (4, 6, 1), 0.3)
    member, cfg = Member(bf.pair_up(net), alpha=0.0, twin=True), bf.GDConfig(lr=0.03, steps=300, n_records=11)
    runs = bf.train({"pair": member, "random": Member(net, alpha=0.0, twin=True)}, held, cfg)
    # round-off of two 300-step runs, as in the test above
    bound = _twin_gap_bound(runs, "pair", member, held, cfg, test=True)
    assert runs.twin_gap("pair", test=True) <= bound < 1e-9
    assert runs.twin_gap("random", test=True) > 1e-3


def _twin_gap_bound(runs, name, member, data, cfg, test=False) -> float:
    """Round-off bound on ``runs.twin_gap(name)``: the member's and its twin's recorded
    losses each within roundoff.trajectory_gap of their exact values (each rerun alone
    through bf.train from its init: the same arithmetic, unbatched), summed, over L(0)."""
    key = "test_loss" if test else "loss"
    total = 0.0
    for m in (member, member.linear_twin(cfg.lr)):
        one = bf.GDConfig(alpha=m.alpha, lr=m.lr or cfg.lr, steps=cfg.steps, n_records=cfg.n_records,
                          weight_decay=m.weight_decay)
        total = total + trajectory_gap(lambda p, one=one: np.asarray(getattr(bf.train(p, data, one), key)),
                                       m.params, cfg.steps, chain_length(m.params, data.X.shape[0]))
    return float(np.max(total) / np.asarray(getattr(runs[name], key))[0])


@pytest.mark.parametrize("lr", [None, "0.1", -0.1])
def test_a_members_twin_needs_a_step(lr):
    """Member.lr defaults to None: linear_twin(m.lr) once failed on None * float."""
    m = bf.Member(bf.from_arrays([np.ones((4, 3)), np.ones((1, 4))]), alpha=0.3)
    with pytest.raises((TypeError, ValueError), match="^lr="):
        m.linear_twin(lr)
