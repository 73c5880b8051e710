"""Attention measured by default where the theory is silent (issue 47, items 2 and 4;
docs/verdict.md "Attention models"; :mod:`biasfree.analysis.attention_measure`): a separate
key–query model, off-twin blocks and unmirrored sequences, each given alone, get a decided
answer from GD at the measured step beside the twin, the same run as the explicit
``train=bf.GDConfig(lr=η, steps=k)``; a tiny budget leaves it undecided, saying so; the floor
that ends a run early bounds the model's loss, not only the twin's. Tiny models (D = 3, N = 8,
2 heads, 32 sequences) in float64."""

from __future__ import annotations

import jax
import numpy as np
import pytest

import biasfree as bf
from biasfree.analysis import attention_measure as am
from biasfree.analysis.plan import MEASURE_BUDGET
from biasfree.analysis.verdict import EFFECTIVE, EXACT, NOT, PAPER_LEVEL, UNDECIDED
from biasfree.core.attention import MergedAttention, init_attention
from biasfree.core.attention_twin import twin_dataset
from biasfree.core.icl_data import in_context_regression

EPS = np.finfo(float).eps
D, N, H, S = 3, 8, 2, 32
K_SUM = N + D * D + H
"""The longest chain of sums in one prediction (tests/core/test_attention.py)."""


def gamma(k: int) -> float:
    return k * EPS / (1 - k * EPS)


@pytest.fixture(scope="module")
def mirrored():
    return in_context_regression(jax.random.PRNGKey(0), S, N, D)


@pytest.fixture(scope="module")
def plain():
    return in_context_regression(jax.random.PRNGKey(0), S, N, D, mirror=False)


@pytest.fixture(scope="module")
def att():
    return init_attention(jax.random.PRNGKey(1), D, H, N, 0.05)


def _off_twin(att, u: float = 1e-3) -> MergedAttention:
    V = np.array(att.V)
    V[0, D, :D] = u  # the value row's x-part u_0: off the twin, its function within 1e-8 of the twin's
    return MergedAttention(jax.numpy.asarray(V), att.KQ, n_ctx=N)


def _ev(judgement, start: str):
    return next(e for e in judgement.evidence if e.name.startswith(start))


def _same_run(res, data, model):
    """The default run against ``train=bf.GDConfig(lr=η, steps=k)`` at its step η and its k steps:
    the same code path (one loop, the gap carried over every step), recorded at other steps."""
    tr = res.prediction.trained
    k = tr.steps_run
    explicit = bf.analyse(model, data, train=bf.GDConfig(lr=tr.config.lr, steps=k))
    # the same GD steps in chunks of other lengths: each step's losses within γ_K relative of the
    # other run's, carried through k steps (as LOCKSTEP in tests/analysis/test_analyse_attention.py)
    rel = k * gamma(K_SUM + 2 * S)
    L = np.concatenate([explicit.net.loss, explicit.net.twin_loss])
    ks = res.net.record_steps
    np.testing.assert_allclose(res.net.loss, explicit.net.loss[ks], rtol=rel, atol=0)
    np.testing.assert_allclose(res.net.twin_loss, explicit.net.twin_loss[ks], rtol=rel, atol=0)
    assert abs(res.net.gap - explicit.net.gap) <= 2 * rel * L.max() / res.net.loss_ref
    return explicit


def test_unmirrored_data_alone_measured_by_default_not(att, plain):
    """Unmirrored sequences given alone (on main: undecided, "measure it: train=..."): GD moves u, b
    (§10.2), and the default measurement reads a gap past 0.3% and stops there."""
    res = bf.analyse(att, plain)
    v = res.verdict.training
    assert v.kind.startswith("training by GD at lr=") and v.kind.endswith("measured by default")
    assert v.level == NOT and res.verdict.level == NOT  # measured 0.78% at step 9
    gap = _ev(v, "loss gap to the twin under GD")
    assert gap.value > PAPER_LEVEL and "max(L(θ₀), ½<y_q²>)" in gap.name
    notes = " ".join(v.notes)
    tr = res.prediction.trained
    assert tr.by_default and tr.decided and tr.steps_run < tr.config.steps  # ended once decided
    assert f"ended once decided, after {tr.steps_run} of {tr.config.steps} steps" in notes
    assert f"GD at η = {tr.config.lr:.3g}" in notes and f"time budget {MEASURE_BUDGET:g} s" in notes
    assert "the data are not label-mirrored" in notes  # why it measured
    assert _ev(v, "step × sharpness at the run's end").passed  # GD was stable
    explicit = _same_run(res, plain, att)
    assert explicit.verdict.training.level == NOT


def test_separate_model_alone_measured_by_default(mirrored):
    """A separate key–query model (a depth-3 net on z, §10.4; on main: undecided) measured beside its
    merged twin K_hᵀQ_h: decided, at the depth-3 horizon, the same run as the explicit call."""
    sep = init_attention(jax.random.PRNGKey(2), D, H, N, 0.05, rank=2)
    res = bf.analyse(sep, mirrored)
    v = res.verdict.training
    assert v.level in (NOT, EFFECTIVE) and v.kind.endswith("measured by default")
    assert "separate key–query weights" in " ".join(v.notes) and "depth-3 net on z" in " ".join(v.notes)
    explicit = _same_run(res, mirrored, sep)
    assert explicit.verdict.training.level == v.level


def test_off_twin_model_alone_measured_effectively_linear(att, mirrored):
    """Off-twin blocks (u_0 = 1e-3; on main: undecided, "nothing keeps the identity"): the run goes
    its whole horizon within 0.3% and ends within the floor bound, so the answer holds past it."""
    off = _off_twin(att)
    res = bf.analyse(off, mirrored)
    v = res.verdict.training
    assert res.verdict.function.level == EFFECTIVE and v.level == EFFECTIVE
    tr = res.prediction.trained
    assert tr.steps_run == tr.config.steps and not tr.decided
    assert _ev(v, "loss gap to the twin under GD").value <= PAPER_LEVEL
    assert _ev(v, "gap to the twin after the run, bound").passed and "holds past step" in v.text
    explicit = _same_run(res, mirrored, off)
    assert explicit.verdict.training.level == EFFECTIVE


def test_a_tiny_budget_leaves_it_undecided_saying_so(att, mirrored):
    """The control: the same model with a budget that ends the run after its first chunk is
    undecided, and says the budget ran out, after how many steps, and the call that measures longer."""
    res = bf.analyse(_off_twin(att), mirrored, time_budget=1e-9)
    v = res.verdict.training
    tr = res.prediction.trained
    assert v.level == UNDECIDED and 0 < tr.steps_run < tr.config.steps
    assert v.reasons[0].startswith(f"the time budget ran out after {tr.steps_run} of {tr.config.steps} steps")
    assert f"train=bf.GDConfig(lr={tr.config.lr:g}, steps={tr.config.steps}), time_budget=" in v.reasons[0]


def test_train_false_predicts_only(att, plain):
    v = bf.analyse(att, plain, train=False).verdict.training
    assert v.level == UNDECIDED and "predicted (not measured)" in v.kind


def test_mirrored_on_twin_is_predicted_not_measured(att, mirrored):
    """Where the theory decides (zero blocks, mirrored sequences, GD), nothing is run."""
    res = bf.analyse(att, mirrored)
    assert res.verdict.training.level == EXACT and res.prediction.trained is None


def test_history_measured_by_default_whole(att, plain):
    """From an init, unmirrored data: the history is measured by default GD, run whole (it is
    compared with the model), not stopped when decided."""
    res = bf.analyse(att, plain, init=att)
    h = res.verdict.history
    assert h.kind.startswith("how the model got here: training from the init by GD at lr=")
    assert h.kind.endswith("measured by default") and h.level != UNDECIDED
    tr = res.history.prediction.trained
    assert tr.steps_run == tr.config.steps and not tr.decided
    assert "a default GD run, not the training that made the model" in h.notes[-1]


def test_the_floor_bounds_the_model_not_only_the_twin(plain):
    """The early stop's floor L* is the least squares on the full cubic feature Φ: attention weights
    that realise that fit (D + 1 heads, v_h = e_h, W_h[:, :D] the fit's block h) reach it, so it is
    the model's floor; the twin's floor on z (the control) lies above that model's loss, so a stop
    bounded by it would claim what does not hold."""
    X, Y = np.asarray(plain.X), np.asarray(plain.Y)
    model = init_attention(jax.random.PRNGKey(3), D, D + 1, N, 0.05)
    floor, floor_tol = am.cubic_floor(X, Y, model)
    P = am.cubic_features(X, model)
    beta = np.linalg.lstsq(P, Y, rcond=None)[0][:, 0].reshape(-1, D)  # (pairs i ≤ j, D)
    T = np.zeros((D + 1, D + 1, D))
    T[np.triu_indices(D + 1)] = beta
    V, KQ = np.zeros((D + 1, D + 1, D + 1)), np.zeros((D + 1, D + 1, D + 1))
    V[:, D, :] = np.eye(D + 1)
    KQ[:, :, :D] = T
    fit = MergedAttention(jax.numpy.asarray(V), jax.numpy.asarray(KQ), n_ctx=N)
    f = np.asarray(bf.forward((fit,), X, 0.0))
    L = 0.5 * np.mean((Y - f) ** 2)
    # f and Φβ are one function summed in two orders: per sequence |f − Φβ| ≤ δ = γ_K A + γ_F |Φ||β|,
    # A = (1/N) Σ_h Σ_n |v_h·e_n| |e_nᵀ W_h e_q| in absolute values (the bound of attention_run), K its
    # sums, F Φ's features; so |L − ½<(y − Φβ)²>| ≤ <|y − Φβ| δ> + ½<δ²> + γ_S (L + L*) for the two
    # means; and ½<(y − Φβ)²> is the floor within its stated round-off (another solver's β: the same
    # minimum, backward stable)
    E = np.abs(X.reshape(len(X), N + 1, D + 1))
    A = np.einsum("hd,snd,sne,hef,sf->s", np.abs(V[:, D, :]), E[:, :N], E[:, :N], np.abs(KQ), E[:, N]) / N
    K = 3 * (D + 1) + N + 1 + (D + 1) + 5  # attention_run's K at D + 1 heads
    delta = gamma(K) * A + gamma(P.shape[1]) * (np.abs(P) @ np.abs(beta.ravel()))
    r = np.abs(Y[:, 0] - P @ beta.ravel())
    L_fit = 0.5 * np.mean(r**2)
    assert abs(L - L_fit) <= np.mean(r * delta) + 0.5 * np.mean(delta**2) + gamma(len(X)) * (L + L_fit)
    assert abs(L_fit - floor) <= floor_tol + gamma(len(X) + P.shape[1]) * L_fit
    Z = np.asarray(twin_dataset(bf.Dataset(X, Y, mirror=False), N).X)
    r = Y - Z @ np.linalg.lstsq(Z, Y, rcond=None)[0]
    z_floor = 0.5 * np.mean(r**2)
    assert z_floor > L + 0.1 * z_floor  # the twin's floor is no bound on the model (measured 0.20 vs 0.0075)


def test_train_true_is_gd_on_the_same_schedule(att, mirrored):
    """train=True runs GD on the default schedule, the step measured at the given weights as a
    default measurement's (one rule for both, as for dense nets), run whole on linear records."""
    off = _off_twin(att)
    asked = bf.analyse(off, mirrored, train=True)
    by_default = bf.analyse(off, mirrored)
    a, b = asked.prediction.trained, by_default.prediction.trained
    assert not a.by_default and a.config.lr == b.config.lr and a.config.steps == b.config.steps
    assert a.config.spacing == "linear" and a.steps_run == a.config.steps
    assert asked.verdict.training.kind == f"training by GD at lr={a.config.lr:.3g}, measured"
    assert asked.verdict.training.level == by_default.verdict.training.level == EFFECTIVE


def test_near_its_floor_the_run_ends_on_the_bound_and_longer_runs_keep_it(att, mirrored):
    """A model trained on until its loss is near the floor (off-twin blocks, so the theory is silent)
    is decided at the first check: both losses within max(|L − L̃|, max(L, L̃) − L*) ≤ 0.3% of L_ref.
    The claim behind the stop, checked: GD run on 5x the default's steps from there never opens a
    gap past that bound."""
    off = _off_twin(att)
    lr = bf.analyse(off, mirrored).prediction.trained.config.lr
    cfg = bf.GDConfig(lr=lr, steps=20_000, alpha=0.0)
    late = bf.train((off,), mirrored, cfg, observables="loss").params[0]
    res = bf.analyse(late, mirrored)
    v, tr = res.verdict.training, res.prediction.trained
    assert v.level == EFFECTIVE and tr.decided and tr.steps_run < tr.config.steps
    assert "the run's weights were within the bound no later descent can leave" in " ".join(v.notes)
    bound = _ev(v, "gap to the twin after the run, bound")
    assert bound.passed
    longer = bf.analyse(late, mirrored, train=bf.GDConfig(lr=tr.config.lr, steps=5 * tr.config.steps))
    # the gap of the longer run, over the same L_ref (the same start), within the bound plus the
    # round-off of the losses it compares (γ over the prediction's sums and the mean, per step)
    slack = 5 * tr.config.steps * gamma(K_SUM + 2 * S) * 2 * longer.net.loss.max() / res.net.loss_ref
    assert longer.net.loss_ref == res.net.loss_ref
    assert longer.net.gap <= max(res.net.gap, bound.value) + slack
