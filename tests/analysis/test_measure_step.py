"""Issue 47 (Speed): the default measurement's GD step comes from the measured sharpness, not
from the bound λ_max(Σ_xx) Σ_l Π_{j≠l} ‖W_j‖² at the balanced solution (1,800 times too small
on raw pixels, so that its horizon needed 200,000 steps); the step's stability is checked at the
run's end; inputs that are 0 everywhere are left out of the run, which is the same run
(biasfree.analysis.measure_step). Each deciding number is checked against an independent
computation (jax.hessian of a loss written here), with a failing control."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import biasfree as bf
from biasfree.analysis import measure_step as ms
from biasfree.analysis import verdict as vd
from biasfree.core.data import unchecked_dataset


def _hessian_top(Ws, X, Y, alpha):
    """λ_max of the Hessian of ½<‖y − W₂ σ_α(W₁ x)‖²> in (W₁, W₂), by jax.hessian (dense)."""
    shapes = [W.shape for W in Ws]
    cut = int(np.prod(shapes[0]))

    def loss(theta):
        W1, W2 = theta[:cut].reshape(shapes[0]), theta[cut:].reshape(shapes[1])
        H = X @ W1.T
        F = jnp.where(H > 0, H, alpha * H) @ W2.T
        return 0.5 * jnp.mean(jnp.sum((Y - F) ** 2, axis=1))

    theta = jnp.concatenate([jnp.ravel(W) for W in Ws])
    return float(np.linalg.eigvalsh(np.asarray(jax.hessian(loss)(theta)))[-1])


def test_the_sharpness_of_a_scalar_linear_net_is_the_closed_form():
    """f = v w x on x = ±1, y = ±y₀: L = ½(y₀ − vw)², whose Hessian in (w, v) is
    [[v², 2vw − y₀], [2vw − y₀, w²]]: λ_max = (v² + w²)/2 + √(((v² − w²)/2)² + (2vw − y₀)²)."""
    X, Y = np.array([[1.0], [-1.0]]), np.array([[0.7], [-0.7]])
    for w, v in [(0.3, -1.2), (1.5, 0.4)]:
        net = bf.from_arrays([np.array([[w]]), np.array([[v]])])
        got = ms.sharpness(net, unchecked_dataset(X, Y), 1.0)
        want = (v**2 + w**2) / 2 + np.sqrt(((v**2 - w**2) / 2) ** 2 + (2 * v * w - 0.7) ** 2)
        # a 2×2 eigenproblem of exact autodiff entries: round-off of a few ulps
        assert got == pytest.approx(want, rel=1e-12)
    # control: another target, another sharpness
    other = ms.sharpness(net, unchecked_dataset(X, 4 * Y), 1.0)  # 2vw − y₀ = −1.6, not 0.5: λ 3.12, not 2.36
    assert abs(other - want) > 0.5


def test_lanczos_reads_the_top_eigenvalue_of_the_hessian_from_below_within_its_tolerance(linear):
    """96 weights (above DENSE_BELOW: Lanczos): the Ritz value is a Rayleigh quotient, so at most
    λ_max, and within LANCZOS_TOL of it."""
    X, Y = linear
    Y2 = np.hstack([Y, np.tanh(Y)])
    net = bf.init_gaussian(jax.random.PRNGKey(3), (10, 8, 2), 0.5)
    Ws = [np.asarray(la.W) for la in net]
    assert sum(W.size for W in Ws) > ms.DENSE_BELOW
    want = _hessian_top(Ws, X, Y2, 0.0)
    got = ms.sharpness(net, unchecked_dataset(X, Y2), 0.0)
    # from below up to round-off (1e-12 relative on a 96×96 Hessian of O(1) entries), and within
    # the solver's relative tolerance
    assert want * (1 - ms.LANCZOS_TOL) <= got <= want * (1 + 1e-12)


def test_train_true_steps_at_a_quarter_of_the_stability_limit_of_the_measured_sharpness(linear):
    """η = ¼ · 2/λ̂, λ̂ = max(λ_max(∇²L(θ)), c λ_max(∇²L̃(θ̃))), the twin θ̃ = √c θ at slope 1, c = ½
    (§2.4). Main took a quarter of 2/H for the bound H at the larger of the init and the balanced
    solution, 2.9 times smaller here."""
    X, Y = linear
    X = 20 * X  # raw scale: λ(Σ_xx) × 400, so that stability, not MIN_STEPS over the horizon, sets η
    net = bf.init_gaussian(jax.random.PRNGKey(1), (10, 4, 1), 0.3)  # 44 weights: the whole Hessian
    Ws = [np.asarray(la.W) for la in net]
    lam = max(_hessian_top(Ws, X, Y, 0.0), 0.5 * _hessian_top([np.sqrt(0.5) * W for W in Ws], X, Y, 1.0))
    tr = bf.analyse(net, (X, Y), alpha=0.0, train=True).prediction.trained
    # two dense eigenproblems of exact autodiff Hessians (the package's on X₊, ours on all rows):
    # round-off, 1e-10 relative
    assert tr.config.lr == pytest.approx(0.5 / lam, rel=1e-10)
    assert tr.config.steps > ms.MIN_STEPS  # stability, not MIN_STEPS over the horizon, set the step
    from biasfree.analysis import regime as rg
    from biasfree.theory.modes import data_modes

    bound = rg.default_lr(net, data_modes(X, Y, whiten=True), 0.5)  # main's step
    assert tr.config.lr > 2 * bound  # control: not the bound's step


def test_a_step_past_the_stability_limit_at_the_runs_end_is_no_evidence():
    """certify: η λ̂_end ≤ 2 keeps the answer and adds the number to its evidence; above 2 the
    answer is undecided, naming both sharpnesses and the step that would be a quarter of the
    limit at the end."""
    cfg = bf.GDConfig(alpha=0.0, lr=ms.step(100.0), steps=1000)  # λ̂ = 100 at the start: η = 0.005
    answer = vd.judgement("training by GD, measured", vd.EFFECTIVE, [], [], [], "within 0.1%")
    kept = ms.certify(answer, cfg, 300.0, 1000)  # η λ̂ = 1.5
    assert kept.level == vd.EFFECTIVE and kept.text == answer.text
    (e,) = kept.evidence
    assert e.value == pytest.approx(1.5, rel=1e-15) and e.threshold == 2.0 and e.passed
    lost = ms.certify(answer, cfg, 1000.0, 640)  # η λ̂ = 5: past the limit
    assert lost.level == vd.UNDECIDED and not lost.evidence[-1].passed
    why = lost.reasons[0]
    assert "η λ̂ = 5 > 2" in why and "λ̂ = 1000 after 640 steps" in why
    assert "train=GDConfig(lr=0.0005, steps=1000)" in lost.reasons[0]
    # an answer already undecided stays so, with the number
    stopped = vd.judgement("training by GD, measured", vd.UNDECIDED, ["the time budget ran out"], [], [])
    assert ms.certify(stopped, cfg, 1000.0, 5).reasons == stopped.reasons


def test_inputs_that_are_zero_everywhere_are_left_out_of_the_run_exactly(linear):
    """A zero border: GD never moves W₁'s columns there and f never reads them, so the run on the
    other columns, widened back, is the run on all of them."""
    X0, Y = linear
    X = np.hstack([np.zeros((X0.shape[0], 3)), X0, np.zeros((X0.shape[0], 2))])
    net = bf.init_gaussian(jax.random.PRNGKey(2), (15, 6, 1), 0.4)
    keep = ms.reduced(net, X)
    assert keep.tolist() == list(range(3, 13))
    cfg = bf.GDConfig(alpha=0.0, lr=0.05, steps=60)
    full = bf.train(net, bf.Dataset(X, Y), cfg, twin=True, observables="loss")
    small = bf.train(ms.narrow(net, keep), bf.Dataset(X[:, keep], Y), cfg, twin=True, observables="loss")
    back = ms.widen(net, small.params, keep)
    for a, b in zip(back, full.params, strict=True):
        # the same sums with exact zeros left out, 60 steps of a stable run: round-off, 1e-12
        assert np.max(np.abs(np.asarray(a.W) - np.asarray(b.W))) <= 1e-12 * np.max(np.abs(np.asarray(b.W)))
    np.testing.assert_array_equal(np.asarray(back[0].W)[:, :3], np.asarray(net[0].W)[:, :3])  # never moved
    assert np.max(np.abs(np.asarray(small.loss) - np.asarray(full.loss))) <= 1e-12
    # controls: nothing to leave out without a zero column, nor with a first-layer bias
    assert ms.reduced(net, X0 @ np.ones((10, 15))) is None
    from biasfree.nets import Layer

    biased = (Layer(np.asarray(net[0].W), np.zeros(6)),) + tuple(net[1:])
    assert ms.reduced(biased, X) is None


def test_the_loop_gets_what_measuring_the_step_left_of_the_budget():
    assert ms.budget_left(None, 3.0) is None
    assert ms.budget_left(10.0, 2.0) == 6.0  # the start's measurement and the end's
    assert ms.budget_left(10.0, 4.5) == 2.5  # at least a quarter


def test_a_run_whose_sharpness_grew_past_half_the_limit_is_run_again_at_the_ends_step():
    """settle: η λ̂_end > RERUN_ABOVE reruns at η' = step(λ̂_end) to the same horizon η·K, at most
    RERUNS times, and not with less than a quarter of the budget left."""
    calls = []

    def go(cfg, budget, spent=0.0):  # λ̂_end 400 after the first run, 40 after the rerun
        calls.append((cfg.lr, cfg.steps, budget))
        return "tr", "reg", 40.0 if len(calls) > 1 else 400.0

    cfg = bf.GDConfig(alpha=0.0, lr=ms.step(10.0), steps=1000)  # η = 0.05, horizon 50
    tr, reg, lam, last = ms.settle(go, cfg, None)
    assert [c[0] for c in calls] == [0.05, ms.step(400.0)] and lam == 40.0  # 0.05·400 = 20 > 1: rerun
    assert last.lr == ms.step(400.0) and last.steps == 40_000 and last.alpha == 0.0  # the same horizon, 50
    calls.clear()

    def held(c, b, s=0.0):
        calls.append(c)
        return None, None, 19.0  # η λ̂_end = 0.95

    _, _, _, same = ms.settle(held, cfg, None)
    assert same is cfg and len(calls) == 1  # control: within half the limit, no rerun
    calls.clear()

    def grows(c, b, s=0.0):
        calls.append(c)
        return None, None, 100.0 / c.lr  # η λ̂_end = 100 whatever the step: reruns until RERUNS
    ms.settle(grows, cfg, None)
    assert len(calls) == 1 + ms.RERUNS


def test_a_small_init_on_raw_inputs_is_measured_at_a_step_stable_to_the_end(linear):
    """From a small init the sharpness grows about fivefold (saddle to solution): the first run, at
    a quarter of the limit at the init, ends past half of it (η λ̂ = 2.6) and is run again at the
    end's step, which holds to the end. Main stepped at 1.2e-3 from its bound (42,183 steps);
    both say "not" (gap 0.41% here, 0.39% on main: the step's O(η) part)."""
    X, Y = linear
    Xs = X * np.linspace(0.1, 5, 10)  # raw scales: λ(Σ_xx) from 0.01 to 25
    net = bf.init_gaussian(jax.random.PRNGKey(1), (10, 20, 1), 1e-3)
    res = bf.analyse(net, (Xs, Y), alpha=0.0, train=True, time_budget=None)
    t, tr = res.verdict.training, res.prediction.trained
    e = [e for e in t.evidence if e.name.startswith("step × sharpness at the run's end")][0]
    assert e.value <= ms.RERUN_ABOVE and e.passed and tr.steps_run == tr.config.steps
    assert f"GD at lr={tr.config.lr:.3g}" in t.kind and tr.config.lr > 10 * 1.2e-3
    assert t.level == vd.NOT and tr.gap_to_twin > vd.PAPER_LEVEL


def test_the_horizon_takes_at_least_min_steps_where_stability_allows_fewer(linear):
    """The same net on unscaled inputs: a quarter of the stability limit would cross the horizon
    T in 16 steps, too coarse to follow the flow (a conv net's gap read 0.17% in 9 steps where
    GD at a tenth of the step reads 3.5%), so η = T/MIN_STEPS."""
    X, Y = linear
    net = bf.init_gaussian(jax.random.PRNGKey(1), (10, 4, 1), 0.3)
    Ws = [np.asarray(la.W) for la in net]
    lam = max(_hessian_top(Ws, X, Y, 0.0), 0.5 * _hessian_top([np.sqrt(0.5) * W for W in Ws], X, Y, 1.0))
    tr = bf.analyse(net, (X, Y), alpha=0.0, train=True).prediction.trained
    assert tr.config.steps == ms.MIN_STEPS and tr.config.lr < 0.5 / lam / 10
