"""``analyse`` against an independent truth: each case is built in PyTorch as a user would
build it, its truth measured by tests/truth.py (the net and its linear twin trained side by
side in torch, float64, nothing from biasfree), and ``bf.analyse`` called as a user would call
it. Each answer the package gives (``verdict.level``, ``.function``, ``.training``, ``.history``,
``.trained_function``) must agree with the truth for its question; "undecided" where a short
measurement decides counts as disagreement (issue 47: decide wherever a decision is possible),
a refusal of a documented input too. Where the package reports a measured gap, it must equal
the torch gap within the round-off of two float64 implementations of the same run
(:func:`_gap_tolerance`). Every number is in the package's one gap definition,
D = max_k |L_k − L̃_k| / L_ref, L_ref = max(L(θ₀), ½<||y||²>) (docs/verdict.md).

Each case states, in its docstring, its truth and why it is decidable: every deciding
number is at least a factor ``truth.MARGIN`` from 0.3% (the test asserts it)."""

from __future__ import annotations

import copy

import numpy as np
import optax
import pytest
from roundoff import gamma

import biasfree as bf
from biasfree.analysis.verdict import EFFECTIVE, EXACT, LEVELS, NOT, ODD_LINEAR, UNDECIDED

torch = pytest.importorskip("torch", reason="the [torch] extra (make test installs it)")
import truth as T  # noqa: E402  (needs torch)

nn = torch.nn
LINEAR = (EXACT, EFFECTIVE)
NONLINEAR = (ODD_LINEAR, NOT)
REL = 1e-7
"""Relative perturbation of the init for a run's measured sensitivity (tests/roundoff.py)."""


@pytest.fixture(scope="module", autouse=True)
def _one_thread():
    """torch on one thread: its loops here are small, and the suite shares 2 cores."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


# ----------------------------------------------------------------- building cases


def dense_data(n: int, d: int, *, target: str = "linear", symmetric: bool = True, seed: int = 0):
    """n points x ~ N(0, I_d) (and their mirrors when ``symmetric``), u = wᵀx with w ~ N(0, I/d);
    targets: "linear" u, "cubic" u + u³/3 (odd, not linear), "even" u + |u| − <|u|>."""
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, d, generator=g, dtype=torch.float64)
    w = torch.randn(d, 1, generator=g, dtype=torch.float64) / np.sqrt(d)
    if symmetric:
        X = torch.cat([X, -X])
    u = X @ w
    Y = {"linear": u, "cubic": u + u**3 / 3, "even": u + u.abs() - u.abs().mean()}[target]
    return X, Y


def dense_net(d: int, m: int, std: float | None, *, act=None, depth: int = 2, bias: bool = False,
              seed: int = 0) -> nn.Sequential:
    """A ``nn.Sequential`` of ``depth`` Linear layers of width m, ``act`` (ReLU) between them,
    weights N(0, std²) (None: torch's default init)."""
    torch.manual_seed(seed)
    act = nn.ReLU() if act is None else act
    layers = [nn.Linear(d, m, bias=bias)]
    for _ in range(depth - 2):
        layers += [copy.deepcopy(act), nn.Linear(m, m, bias=bias)]
    layers += [copy.deepcopy(act), nn.Linear(m, 1, bias=bias)]
    net = nn.Sequential(*layers).double()
    if std is not None:
        for layer in T.weight_layers(net):
            nn.init.normal_(layer.weight, std=std)
    return net


def paired(net: nn.Sequential) -> nn.Sequential:
    """The two-layer net with its hidden units in antisymmetric pairs (w, v), (−w, −v) (§2.3)."""
    first, last = T.weight_layers(net)
    W1, W2 = T.pair_init(first.weight.detach(), last.weight.detach())
    out = dense_net(W1.shape[1], W1.shape[0], 1.0, act=copy.deepcopy(net[1]), bias=first.bias is not None)
    with torch.no_grad():
        out[0].weight.copy_(W1)
        out[2].weight.copy_(W2)
        for layer in T.weight_layers(out):
            if layer.bias is not None:
                layer.bias.zero_()
    return out


def np_data(X, Y):
    return X.reshape(len(X), -1).numpy(), Y.numpy()


def adam(lr: float):
    """torch's Adam as an optax factory: ε scales with the gradients, so the twin is exact (§9)."""
    return lambda rho: optax.adam(lr, eps=1e-8 * rho)


def analyse(model, data, **kw):
    """``bf.analyse`` as a user calls it; a refusal is returned, to be reported as an answer."""
    try:
        return bf.analyse(model, data, **kw)
    except (TypeError, ValueError) as e:  # UnsupportedModelError is a ValueError
        return e


# ----------------------------------------------------------------- comparing


def _chain(net, n_rows: int) -> int:
    """k of γ_k: the longest chain of sums one loss or gradient entry goes through (as
    biasfree.core.precision.chain_length counts it): the rows (``n_rows``; for a conv net rows ×
    positions, since a kernel's gradient sums over both), 4 (the residual, 1/N, ½ and the update)
    and each weight layer's fan-in and fan-out (a conv's fan-in C_in × its kernel size)."""
    return n_rows + 4 + sum(m.weight[0].numel() + m.weight.shape[0] for m in T.weight_layers(net))


def _gap_tolerance(run: T.Run, rerun: T.Run, k: int) -> float:
    """How far the package's D may be from torch's for the same run. Both compute the same float64
    steps from the same weights and data and differ only in the order of their sums (torch's and
    XLA's kernels; on mirror-symmetric data the package's mirrored forward, with intermediates up
    to 3× the plain ones: factor 3). Each step commits a relative error ≤ 2γ_k·3 on θ (k the
    longest chain of sums, :func:`_chain`, :func:`_attention_k`), and an error committed at any
    step reaches the losses amplified by at most the run's measured sensitivity S to a relative
    change of the init (``rerun``: the same torch run from θ₀(1 ± REL), random signs, the twin
    taken from it), so per step |ΔL_k| + |ΔL̃_k| ≤ K·2γ_k·3·S (the method of tests/roundoff.py's
    trajectory_gap, a first-order bound with nothing tuned), plus the final evaluation's
    2γ_k·(L_k + L̃_k); |max_k a_k − max_k b_k| ≤ max_k |a_k − b_k| carries it to D, over L_ref."""
    K = len(run.loss) - 1
    g = 2 * gamma(k) * 3
    S = T.relative_sensitivity(run, rerun, REL)
    return (K * g * S + g * float((run.loss + run.twin_loss).max())) / run.ref


class Verdicts:
    """Collects every disagreement of one case, so that its assertion names them all."""

    def __init__(self, case: str, res, *, refusal_ok: bool = False):
        """``refusal_ok``: a model whose own forward is not the layout its weights read as may be
        refused (issue 47 item 1) instead of judged."""
        self.case, self.res, self.bad, self.refusal_ok = case, res, [], refusal_ok

    def _say(self, msg: str) -> None:
        self.bad.append(msg)

    def judged(self, question: str, answer: str, truth: T.Answer | bool | None) -> None:
        """The package's ``verdict.<answer>`` (a Judgement; "level": the headline) on ``question``
        against the truth."""
        if isinstance(truth, T.Answer):
            want, why = truth.linear, truth.line()
        else:
            want, why = truth, {True: "effectively linear", False: "not effectively linear"}.get(truth)
        assert want is not None, f"{self.case}: {question}: the truth is not decidable ({why}): rebuild it"
        if isinstance(self.res, Exception):
            return
        judgement = getattr(self.res.verdict, answer)
        if judgement is None:
            self._say(f"{question}: the package gives no answer; torch truth: {why}")
            return
        level = judgement if isinstance(judgement, str) else judgement.level
        text = "" if isinstance(judgement, str) else f" — {judgement.text}"
        if level == UNDECIDED:
            self._say(f"{question}: package says undecided{text}; torch truth, decided by a short "
                      f"measurement: {why}")
        elif (level in LINEAR) != want:
            self._say(f"{question}: package says {level!r}{text}; torch truth: {why}")
        elif level == EXACT and isinstance(truth, T.Answer) and not truth.exact:
            self._say(f"{question}: package says exactly linear{text}; torch measures {truth.what} = "
                      f"{truth.value:.3g}, above round-off")

    def gap(self, question: str, truth: T.Run, rerun: T.Run, k: int) -> None:
        """The package's measured gap on ``question`` ("training" or "history") against torch's,
        within :func:`_gap_tolerance`."""
        if isinstance(self.res, Exception):
            return
        measured = measured_gap(self.res, question)
        if measured is None:
            self._say(f"{question}: the package reports no measured gap; torch's D = {truth.gap:.6g}")
            return
        tol = _gap_tolerance(truth, rerun, k)
        if not abs(measured - truth.gap) <= tol:
            self._say(f"{question}: package's measured gap {measured:.6g} != torch's D = max_k |L − L̃|/L_ref "
                      f"= {truth.gap:.6g} (|difference| {abs(measured - truth.gap):.3g} > round-off "
                      f"tolerance {tol:.3g})")

    def check(self) -> None:
        if isinstance(self.res, Exception) and not self.refusal_ok:
            self.bad.insert(0, f"the package refused the model: {type(self.res).__name__}: {self.res}")
        if self.bad:
            head = f"{self.case}: the package disagrees with the torch truth:"
            pytest.fail("\n  ".join([head, *self.bad]), pytrace=False)


def measured_gap(res, question: str) -> float | None:
    """The package's measured D for ``question`` ("training" or "history"): the result's field,
    else the measured judgement's evidence line for it."""
    part = res.history if question == "history" else res
    trained = getattr(getattr(part, "prediction", None), "trained", None)
    if trained is not None:
        return float(trained.gap_to_twin)
    judgement = getattr(res.verdict, question)
    for e in () if judgement is None else judgement.evidence:
        if "gap to the twin" in e.name and "max" in e.name:
            return float(e.value)
    return None


# ----------------------------------------------------------------- the harness itself


def test_every_level_is_read_as_linear_not_or_undecided():
    """The comparison reads each level of the verdict as linear, not, or undecided: a new level
    must be placed before the truths below can be compared with it."""
    assert sorted(LINEAR + NONLINEAR + (UNDECIDED,)) == sorted(LEVELS)


def test_harness_twins_are_exact_with_failing_controls():
    """The truth's own twins (tests/truth.py), before any verdict rests on them: antisymmetric
    pairs on mirrored data follow their √c twin exactly under GD, momentum and Adam (§2.3, §9.2),
    and merged linear attention with zero off-twin blocks on label-mirrored data its W₂W₁z twin
    (§10.2): each gap at round-off (T.EXACT_GAP = 1e-10 of L_ref, the package's exact level: K ≤
    200 steps × γ_k ~ 1e-13 per step). Each control (a wrong twin step, Adam scaled as if κ = 1,
    z without its 1/N) misses by more than 0.3%."""
    X, Y = dense_data(20, 5)
    net = paired(dense_net(5, 6, 0.3, act=nn.LeakyReLU(0.2)))
    twin = T.dense_twin(net)
    gaps = {kind: T.train_pair(net, twin, X, Y, T.Optimiser(kind, lr), 150).gap
            for kind, lr in (("gd", 0.05), ("momentum", 0.02), ("adam", 1e-2))}
    assert max(gaps.values()) <= T.EXACT_GAP, gaps

    class WrongStep(T.Optimiser):  # GD's twin at the net's own step, not × c
        def twin(self, a):
            return T.Optimiser("gd", self.lr)

    class AdamAsSGD(T.Optimiser):  # Adam's twin scaled by a² (κ = 1) instead of a (κ = 0)
        def twin(self, a):
            return T.Optimiser("adam", self.lr * a * a, eps=self.eps / a)

    controls = {"GD twin at the net's step": T.train_pair(net, twin, X, Y, WrongStep("gd", 0.05), 150).gap,
                "Adam twin scaled as κ = 1": T.train_pair(net, twin, X, Y, AdamAsSGD("adam", 1e-2), 150).gap}
    Xa, Ya = T.in_context_data(40, 4, 2, mirror=True)
    E = T.attention_tokens(Xa, 2)
    torch.manual_seed(0)
    model = T.MergedLinearAttention(2, 2)
    with torch.no_grad():
        model.W_KQ[:, :2, :2] = 0.3 * torch.randn(2, 2, 2, dtype=torch.float64)
        model.W_V[:, 2, 2] = 0.3 * torch.randn(2, dtype=torch.float64)
    Z = T.cubic_features(E)
    att = T.train_pair(model, T.attention_twin(model), E, Ya, T.Optimiser("gd", 0.05), 100, Z=Z)
    assert att.gap <= T.EXACT_GAP and T.function_fraction(model, E) <= T.EXACT_ENERGY, att.gap
    controls["attention twin on z without 1/N"] = T.train_pair(model, T.attention_twin(model), E, Ya,
                                                               T.Optimiser("gd", 0.05), 100, Z=Z * 4).gap
    assert min(controls.values()) > T.PAPER_LEVEL, controls


# ----------------------------------------------------------------- dense nets, GD


def test_gd_narrow_history_measured():
    """ReLU width 20 from a small init (σ = 1e-3), GD beside its twin, given with ``init=`` and the
    same GD: the run's gap is 2% of L_ref (the 1/width gap of §2.6), so the history is not
    effectively linear; the trained net's function is linear to ~1e-10 (a converged depth-2 net)."""
    X, Y = dense_data(50, 5)
    init = dense_net(5, 20, 1e-3)
    run = T.train_pair(init, T.dense_twin(init), X, Y, T.Optimiser("gd", 0.1), 400)
    rerun = T.train_pair(init, T.dense_twin(init), X, Y, T.Optimiser("gd", 0.1), 400, perturb=REL)
    fn, hist = T.function_answer(run.net, X), T.gap_answer(run)
    res = analyse(run.net, np_data(X, Y), init=init, train=bf.GDConfig(lr=0.1, steps=400))
    v = Verdicts("GD, width 20, history measured", res)
    v.judged("function now", "function", fn)
    v.judged("history", "history", hist)
    v.judged("headline", "level", T.worst(fn, hist))
    v.gap("history", run, rerun, _chain(run.net, len(X)))
    v.check()


def test_gd_wide_history_predicted_and_given_alone():
    """Width 100 from σ = 1e-3: the GD run stays within 0.034% of L_ref of its twin, so the history
    (``init=`` alone, predicted by the package) is effectively linear; the same net given alone:
    linear now, and training on from it by GD (run until settled) keeps it within 1e-10 of L_ref."""
    X, Y = dense_data(50, 5)
    init = dense_net(5, 100, 1e-3)
    run = T.train_pair(init, T.dense_twin(init), X, Y, T.Optimiser("gd", 0.1), 400)
    on = T.train_pair(run.net, T.dense_twin(run.net), X, Y, T.Optimiser("gd", 0.1), 200)
    fn, hist, train_on = T.function_answer(run.net, X), T.gap_answer(run), T.gap_answer(on, final=True)
    res = analyse(run.net, np_data(X, Y), init=init)
    v = Verdicts("GD, width 100, history predicted", res)
    v.judged("function now", "function", fn)
    v.judged("history", "history", hist)
    v.judged("training on", "training", train_on)
    v.judged("headline", "level", T.worst(fn, hist))
    v.check()
    alone = analyse(run.net, np_data(X, Y))
    v = Verdicts("GD, width 100, given alone", alone)
    v.judged("training on", "training", train_on)
    v.judged("headline", "level", T.worst(fn, train_on))
    v.check()


# ----------------------------------------------------------------- other optimisers, minibatches


@pytest.fixture(scope="module")
def adam_trained():
    """README's own-model story, small: width 200 from σ = 1e-3 on 50 points and their mirrors, a
    linear target, torch's Adam (3e-3, 500 steps), the user's loop beside the twin."""
    X, Y = dense_data(50, 5)
    init = dense_net(5, 200, 1e-3)
    run = T.train_pair(init, T.dense_twin(init), X, Y, T.Optimiser("adam", 3e-3), 500)
    return X, Y, init, run


def test_adam_history_and_training_on(adam_trained):
    """``analyse(net, data, init=init, train=adam)`` (README). Truth: the Adam run from the init
    stays within 0.006% of L_ref of its twin (history linear); the trained net is linear (~7e-9);
    training on from it by the same Adam (500 steps) kicks both off their minimum by η-sized
    normalised steps but keeps them within 0.04% of L_ref (training on linear); so the headline
    is effectively linear. (Issue 47 item 3: the package's t = 0 rule divided a 6e-9 loss gap by
    L(θ) = 6e-9 and said "not".)"""
    X, Y, init, run = adam_trained
    rerun = T.train_pair(init, T.dense_twin(init), X, Y, T.Optimiser("adam", 3e-3), 500, perturb=REL)
    on = T.train_pair(run.net, T.dense_twin(run.net), X, Y, T.Optimiser("adam", 3e-3), 500)
    fn, hist, train_on = T.function_answer(run.net, X), T.gap_answer(run), T.gap_answer(on, final=True)
    res = analyse(run.net, np_data(X, Y), init=init, train=bf.TrainConfig(optimiser=adam(3e-3), steps=500))
    v = Verdicts("Adam, history measured", res)
    v.judged("function now", "function", fn)
    v.judged("history", "history", hist)
    v.judged("training on (by the same Adam)", "training", train_on)
    v.judged("headline", "level", T.worst(fn, hist))
    v.gap("history", run, rerun, _chain(run.net, len(X)))
    v.check()


def test_adam_trained_given_alone(adam_trained):
    """The Adam-trained net given alone (no init, no train): linear now, and training on by GD
    (the package's default dynamics) from it, run until settled, stays within 1e-8 of L_ref of its
    twin (its even part, 7e-9 of <f²>)."""
    X, Y, _, run = adam_trained
    on = T.train_pair(run.net, T.dense_twin(run.net), X, Y, T.Optimiser("gd", 0.1), 200)
    fn, train_on = T.function_answer(run.net, X), T.gap_answer(on, final=True)
    res = analyse(run.net, np_data(X, Y))
    v = Verdicts("Adam-trained net given alone", res)
    v.judged("function now", "function", fn)
    v.judged("training on", "training", train_on)
    v.judged("headline", "level", T.worst(fn, train_on))
    v.check()


def test_momentum_mirrored_minibatches_pairs():
    """Antisymmetric pairs (σ = 0.1) trained by heavy-ball momentum (0.9) on mirrored minibatches
    of 8 of 40 points: every batch is itself symmetric, so the net is its twin at every step
    (§9.3): torch's gap is at round-off; the trained pair net is linear to round-off. The package
    draws other batches, so only the answers are compared (any mirrored draw is exact)."""
    X, Y = dense_data(20, 5)
    init = paired(dense_net(5, 10, 0.1))
    opt = T.Optimiser("momentum", 0.02)
    run = T.train_pair(init, T.dense_twin(init), X, Y, opt, 200, batch=8, mirrored=True)
    fn, hist = T.function_answer(run.net, X), T.gap_answer(run)
    cfg = bf.TrainConfig(optimiser=optax.sgd(0.02, momentum=0.9), steps=200, batch_size=8,
                         mirrored_batches=True)
    res = analyse(run.net, np_data(X, Y), init=init, train=cfg)
    v = Verdicts("momentum, mirrored minibatches, pairs", res)
    v.judged("function now", "function", fn)
    v.judged("history", "history", hist)
    v.judged("headline", "level", T.worst(fn, hist))
    v.check()


def test_adam_random_minibatches_pairs():
    """The same pairs under Adam on plain random minibatches of 8: a batch sees x without −x, the
    pairs drift apart and the net leaves its twin by several % of L_ref (§9.4's table: 0.1 at
    this batch size); the package draws other batches, so only the answers are compared."""
    X, Y = dense_data(20, 5)
    init = paired(dense_net(5, 10, 0.1))
    run = T.train_pair(init, T.dense_twin(init), X, Y, T.Optimiser("adam", 1e-2), 300, batch=8,
                       mirrored=False)
    fn, hist = T.function_answer(run.net, X), T.gap_answer(run)
    cfg = bf.TrainConfig(optimiser=adam(1e-2), steps=300, batch_size=8, mirrored_batches=False)
    res = analyse(run.net, np_data(X, Y), init=init, train=cfg)
    v = Verdicts("Adam, random minibatches, pairs", res)
    v.judged("history", "history", hist)
    v.judged("headline", "level", T.worst(fn, hist))
    v.check()


# ----------------------------------------------------------------- conv nets


def conv_net(dims: int, channels: int, std: float, seed: int = 0) -> nn.Sequential:
    """Conv(1 → C, 3, 'same', bias-free) + ReLU + global average pooling + Linear(C → 1), the
    layout docs/verdict.md reads with ``bf.from_torch(net, in_shape=...)``."""
    torch.manual_seed(seed)
    conv, pool = (nn.Conv1d, nn.AdaptiveAvgPool1d) if dims == 1 else (nn.Conv2d, nn.AdaptiveAvgPool2d)
    net = nn.Sequential(conv(1, channels, 3, padding="same", bias=False), nn.ReLU(), pool(1), nn.Flatten(),
                        nn.Linear(channels, 1, bias=False)).double()
    for layer in T.weight_layers(net):
        nn.init.normal_(layer.weight, std=std)
    return net


def conv_data(n: int, shape: tuple[int, ...], seed: int = 0):
    """n images (1, *shape) and their mirrors, target a pooled linear conv teacher's output (a
    function the net's linear twin can express), scaled to unit variance."""
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, 1, *shape, generator=g, dtype=torch.float64)
    X = torch.cat([X, -X])
    teacher = T.dense_twin(conv_net(len(shape), 1, 1.0, seed=5))
    with torch.no_grad():
        Y = teacher(X)
    return X, Y / Y.std()


def test_conv1d_small_init_given_alone():
    """Conv1d, 4 channels, σ = 1e-2, on 60 signals of length 8 and their mirrors with a linear
    target, given alone: its function is a random init's (nonlinear fraction 0.94: not linear),
    and GD from it beside its linear conv twin leaves the twin by 3.5% of L_ref at the transition
    (step 85; the gap is a maximum, so a run past it decides "not"). The package must decide the
    training answer by measuring it (issue 47 item 2), not leave it undecided."""
    X, Y = dense_data(60, 8)
    X = X.reshape(len(X), 1, 8)
    net = conv_net(1, 4, 1e-2)
    on = T.train_pair(net, T.dense_twin(net), X, Y, T.Optimiser("gd", 0.5), 300)
    fn, train_on = T.function_answer(net, X), T.gap_answer(on, final=True)
    res = analyse(bf.from_torch(net, in_shape=(8,)), np_data(X, Y))
    v = Verdicts("Conv1d given alone", res)
    v.judged("function now", "function", fn)
    v.judged("training on", "training", train_on)
    v.judged("headline", "level", T.worst(fn, train_on))
    v.check()


def test_conv2d_history_measured():
    """Conv2d, 8 channels on 5 × 5 images, σ = 1e-2, GD (0.2, 300 steps) beside its twin: 1.8% of
    L_ref off it at the transition (history not linear); the trained net's function is linear
    (1e-5 of <f²>, the even part removed once the mode is learned)."""
    X, Y = conv_data(60, (5, 5))
    init = conv_net(2, 8, 1e-2)
    run = T.train_pair(init, T.dense_twin(init), X, Y, T.Optimiser("gd", 0.2), 300)
    rerun = T.train_pair(init, T.dense_twin(init), X, Y, T.Optimiser("gd", 0.2), 300, perturb=REL)
    fn, hist = T.function_answer(run.net, X), T.gap_answer(run)
    res = analyse(bf.from_torch(run.net, in_shape=(5, 5)), np_data(X, Y),
                  init=bf.from_torch(init, in_shape=(5, 5)), train=bf.GDConfig(lr=0.2, steps=300))
    v = Verdicts("Conv2d history measured", res)
    v.judged("function now", "function", fn)
    v.judged("history", "history", hist)
    v.judged("headline", "level", T.worst(fn, hist))
    v.gap("history", run, rerun, _chain(run.net, len(X) * 25))
    v.check()


# ----------------------------------------------------------------- stationary, lazy, biased


@pytest.fixture(scope="module")
def cubic_fit():
    """y = u + u³/3 (odd, not linear) on 60 points and their mirrors, d = 3; width 20 from σ = 1e-2."""
    X, Y = dense_data(60, 3, target="cubic")
    return X, Y, dense_net(3, 20, 1e-2)


@pytest.mark.parametrize("optimiser", [T.Optimiser("gd", 0.1), T.Optimiser("adam", 1e-2)], ids=["gd", "adam"])
def test_stationary_net_given_alone(cubic_fit, optimiser):
    """A net trained (1,500 steps) to the best linear fit of a nonlinear odd target, given alone:
    its loss sits at the two-layer floor, far above 0.3% of ½<y²>, its weights are not small, and
    nothing moves. Truth: the function is linear (depth 2, even part removed); training on by GD
    from it (run until settled) stays within 1e-8 of L_ref of its twin. (Issue 47 item 2: the
    package said "undecided (init not small)".)"""
    X, Y, init = cubic_fit
    net = T.train_pair(init, T.dense_twin(init), X, Y, optimiser, 1500).net
    on = T.train_pair(net, T.dense_twin(net), X, Y, T.Optimiser("gd", 0.1), 300)
    fn, train_on = T.function_answer(net, X), T.gap_answer(on, final=True)
    res = analyse(net, np_data(X, Y))
    v = Verdicts(f"stationary net trained by {optimiser.kind}, given alone", res)
    v.judged("function now", "function", fn)
    v.judged("training on", "training", train_on)
    v.judged("headline", "level", T.worst(fn, train_on))
    v.check()


def test_init_past_small_given_alone():
    """Width 60 at σ = 0.1 (init gain 0.7 of the strongest mode: past the small-init theory's
    limit, not lazy either), given alone: a random init's function (nonlinear fraction 0.38), and
    GD from it (settled) leaves its twin by 0.9% of L_ref, three times 0.3%: training on is not
    effectively linear, decided by a 400-step run (issue 47 item 2: measure where the theory is
    silent)."""
    X, Y = dense_data(50, 5)
    net = dense_net(5, 60, 0.1)
    on = T.train_pair(net, T.dense_twin(net), X, Y, T.Optimiser("gd", 0.05), 400)
    fn, train_on = T.function_answer(net, X), T.gap_answer(on, final=True)
    res = analyse(net, np_data(X, Y))
    v = Verdicts("init past small, given alone", res)
    v.judged("function now", "function", fn)
    v.judged("training on", "training", train_on)
    v.judged("headline", "level", T.worst(fn, train_on))
    v.check()


def test_lazy_default_init_training_measured():
    """torch's default init (large: the lazy side of §5), width 20, given with ``train=`` GD:
    its function is a third to a half even (not linear) and the run leaves the twin by 7% of
    L_ref within 30 steps (training not linear)."""
    X, Y = dense_data(50, 5)
    net = dense_net(5, 20, None)
    run = T.train_pair(net, T.dense_twin(net), X, Y, T.Optimiser("gd", 0.05), 200)
    rerun = T.train_pair(net, T.dense_twin(net), X, Y, T.Optimiser("gd", 0.05), 200, perturb=REL)
    fn, train, trained_fn = T.function_answer(net, X), T.gap_answer(run), T.function_answer(run.net, X)
    res = analyse(net, np_data(X, Y), train=bf.GDConfig(lr=0.05, steps=200))
    v = Verdicts("lazy default init, training measured", res)
    v.judged("function now", "function", fn)
    v.judged("training (measured)", "training", train)
    if trained_fn.linear is not None:
        v.judged("function after training", "trained_function", trained_fn)
    v.judged("headline", "level", T.worst(train, trained_fn))
    v.gap("training", run, rerun, _chain(run.net, len(X)))
    v.check()


def test_lazy_pairs_given_alone():
    """Antisymmetric pairs at a large init (σ = 1) on mirrored data: f is linear exactly and GD
    keeps it on its twin at every step, whatever the scale (§2.3): torch's gap is at round-off."""
    X, Y = dense_data(50, 5)
    net = paired(dense_net(5, 10, 1.0))
    on = T.train_pair(net, T.dense_twin(net), X, Y, T.Optimiser("gd", 2e-3), 300)
    fn, train_on = T.function_answer(net, X), T.gap_answer(on)
    res = analyse(net, np_data(X, Y))
    v = Verdicts("pairs at a large init, given alone", res)
    v.judged("function now", "function", fn)
    v.judged("training on", "training", train_on)
    v.judged("headline", "level", T.worst(fn, train_on))
    v.check()


def test_biased_net():
    """A ReLU net with torch's default (nonzero) biases, given as ``bf.from_arrays(Ws, bs)`` (the
    documented way in for a biased net): its function is far from any linear map (the biases
    add constant and kinked terms), so it is not effectively linear."""
    X, Y = dense_data(50, 5)
    net = dense_net(5, 20, None, bias=True)
    fn = T.function_answer(net, X)
    params = bf.from_arrays([m.weight.detach().numpy() for m in T.weight_layers(net)],
                            [m.bias.detach().numpy() for m in T.weight_layers(net)])
    res = analyse(params, np_data(X, Y), alpha=0.0)
    v = Verdicts("biased net", res)
    v.judged("function now", "function", fn)
    v.judged("headline", "level", fn.linear)
    v.check()


def test_zero_biases_torch_pairs():
    """``nn.Linear(bias=True)`` with every bias exactly 0 (the docs: "biases that are exactly zero
    are dropped"), hidden units in pairs at σ = 0.3: the bias-free map, exactly linear; training
    on (biases held at 0, the map the docs analyse) keeps it on its twin to round-off."""
    X, Y = dense_data(50, 5)
    net = paired(dense_net(5, 10, 0.3, bias=True))
    for layer in T.weight_layers(net):
        layer.bias.requires_grad_(False)
    on = T.train_pair(net, T.dense_twin(net), X, Y, T.Optimiser("gd", 0.02), 200)
    fn, train_on = T.function_answer(net, X), T.gap_answer(on)
    res = analyse(net, np_data(X, Y))
    v = Verdicts("torch net with zero biases", res)
    v.judged("function now", "function", fn)
    v.judged("training on", "training", train_on)
    v.check()


class TanhReLU(nn.ReLU):
    """A user's activation module: a subclass of ``nn.ReLU`` (its type reads as ReLU, α = 0)
    whose forward computes tanh."""

    def forward(self, x):
        return torch.tanh(x)


def test_tanh_in_forward():
    """Pairs (w, −w), (v, −v) at σ = 1 in ``nn.Sequential(Linear, TanhReLU(), Linear)``: read as
    ReLU modules they are exactly linear, but running the module computes 2 Σ v tanh(w·x), odd and
    far from linear (pre-activations O(1)): the truth, measured on the module's output, is "not
    effectively linear" (issue 47 item 1: a model is read by running it). A refusal that the
    module does not compute the layout it reads as is a correct answer too."""
    X, Y = dense_data(50, 5)
    net = paired(dense_net(5, 10, 1.0))
    net[1] = TanhReLU()
    fn = T.function_answer(net, X)
    res = analyse(net, np_data(X, Y))
    v = Verdicts("tanh in forward", res, refusal_ok=True)
    v.judged("function now", "function", fn)
    v.judged("headline", "level", fn.linear)
    v.check()


# ----------------------------------------------------------------- other slopes, depths and data


def test_leaky_history_measured():
    """LeakyReLU(0.3) (c = 0.65), width 40 from σ = 1e-2, GD beside its twin (weights × √c, step ×
    c): 2.3% of L_ref off it at the transition (history not linear), the trained net linear."""
    X, Y = dense_data(50, 5)
    init = dense_net(5, 40, 1e-2, act=nn.LeakyReLU(0.3))
    run = T.train_pair(init, T.dense_twin(init), X, Y, T.Optimiser("gd", 0.1), 300)
    rerun = T.train_pair(init, T.dense_twin(init), X, Y, T.Optimiser("gd", 0.1), 300, perturb=REL)
    fn, hist = T.function_answer(run.net, X), T.gap_answer(run)
    res = analyse(run.net, np_data(X, Y), init=init, train=bf.GDConfig(lr=0.1, steps=300))
    v = Verdicts("leaky α = 0.3, history measured", res)
    v.judged("function now", "function", fn)
    v.judged("history", "history", hist)
    v.judged("headline", "level", T.worst(fn, hist))
    v.gap("history", run, rerun, _chain(run.net, len(X)))
    v.check()


def test_depth3_history_and_training_on():
    """Three layers (width 20, σ = 0.1) trained by GD beside the odd-part twin of §4.1 (weights ×
    c^(2/3), step × c^(4/3)): the run leaves it by 33% of L_ref (history not linear). The trained
    net's function is linear (3e-4 of <f²>), but its own odd-part twin computes c²·W₃W₂W₁x, another
    map: their losses differ by 17% of L_ref at once (training on not linear)."""
    X, Y = dense_data(50, 5)
    init = dense_net(5, 20, 0.1, depth=3)
    run = T.train_pair(init, T.dense_twin(init), X, Y, T.Optimiser("gd", 0.1), 300)
    rerun = T.train_pair(init, T.dense_twin(init), X, Y, T.Optimiser("gd", 0.1), 300, perturb=REL)
    on = T.train_pair(run.net, T.dense_twin(run.net), X, Y, T.Optimiser("gd", 0.1), 300)
    fn, hist, train_on = T.function_answer(run.net, X), T.gap_answer(run), T.gap_answer(on, final=True)
    res = analyse(run.net, np_data(X, Y), init=init, train=bf.GDConfig(lr=0.1, steps=300))
    v = Verdicts("depth 3, history measured", res)
    v.judged("function now", "function", fn)
    v.judged("history", "history", hist)
    v.judged("training on", "training", train_on)
    v.judged("headline", "level", T.worst(fn, hist))
    v.gap("history", run, rerun, _chain(run.net, len(X)))
    v.check()


def test_asymmetric_inputs_given_alone():
    """100 Gaussian inputs without their mirrors, a linear target, width 100 from σ = 1e-3: the
    ReLU net fits with both its parts, not at its twin's pace; GD from the init leaves the twin by
    27% of L_ref (training on not linear; the function, a random init's, is not either)."""
    X, Y = dense_data(100, 5, symmetric=False)
    net = dense_net(5, 100, 1e-3)
    on = T.train_pair(net, T.dense_twin(net), X, Y, T.Optimiser("gd", 0.1), 200)
    fn, train_on = T.function_answer(net, X), T.gap_answer(on, final=True)
    res = analyse(net, np_data(X, Y))
    v = Verdicts("asymmetric inputs, given alone", res)
    v.judged("function now", "function", fn)
    v.judged("training on", "training", train_on)
    v.judged("headline", "level", T.worst(fn, train_on))
    v.check()


def test_even_target_trained_given_alone():
    """An even part in the target (y = u + |u| − <|u|> on mirrored inputs), width 40 from σ = 1e-3,
    trained by GD (600 steps) and given alone: the net learns the even part its twin cannot, so
    its function is far from linear (a quarter of <f²>); GD on from it and its twin part by 25% of
    L_ref (training on not linear)."""
    X, Y = dense_data(50, 5, target="even")
    init = dense_net(5, 40, 1e-3)
    net = T.train_pair(init, T.dense_twin(init), X, Y, T.Optimiser("gd", 0.1), 600).net
    on = T.train_pair(net, T.dense_twin(net), X, Y, T.Optimiser("gd", 0.1), 100)
    fn, train_on = T.function_answer(net, X), T.gap_answer(on, final=True)
    res = analyse(net, np_data(X, Y))
    v = Verdicts("even target, trained, given alone", res)
    v.judged("function now", "function", fn)
    v.judged("training on", "training", train_on)
    v.judged("headline", "level", T.worst(fn, train_on))
    v.check()


def test_rank_one_zero_even_given_alone():
    """Rank-one units w_k = v_k r with Σ_k v_k|v_k| = 0 (v ∝ (√2, −1, −1) twice: not pairs) at a
    large scale: f_even = (1−c) Σ v_k|v_k| |rᵀx| = 0, and GD keeps the structure (§2.5, p = 1):
    torch's function and gap are at round-off over the run (an exact structure, so the run need
    not settle)."""
    X, Y = dense_data(50, 5)
    g = torch.Generator().manual_seed(3)
    r = torch.randn(5, 1, generator=g, dtype=torch.float64)
    v = 0.7 * torch.tensor([2**0.5, -1.0, -1.0] * 2, dtype=torch.float64)
    net = dense_net(5, 6, 1.0)
    with torch.no_grad():
        net[0].weight.copy_(v[:, None] * (r / r.norm()).T)
        net[2].weight.copy_(v[None, :])
    on = T.train_pair(net, T.dense_twin(net), X, Y, T.Optimiser("gd", 0.02), 300)
    fn, train_on = T.function_answer(net, X), T.gap_answer(on)
    res = analyse(net, np_data(X, Y))
    v = Verdicts("rank-one zero-even units, given alone", res)
    v.judged("function now", "function", fn)
    v.judged("training on", "training", train_on)
    v.judged("headline", "level", T.worst(fn, train_on))
    v.check()


def test_two_outputs_history_predicted():
    """Two outputs (p = 2, a linear teacher with two modes), width 20 from σ = 1e-3, GD (400 steps):
    the run leaves its twin by 1.3% of L_ref (history not linear, ``init=`` alone: predicted by the
    package); the trained net's function is linear (1e-3 of <f²>: its even part not yet removed)."""
    X, _ = dense_data(50, 5)
    g = torch.Generator().manual_seed(1)
    Y = X @ (torch.randn(5, 2, generator=g, dtype=torch.float64) / 5**0.5)
    torch.manual_seed(0)
    init = nn.Sequential(nn.Linear(5, 20, bias=False), nn.ReLU(), nn.Linear(20, 2, bias=False)).double()
    for p in init.parameters():
        nn.init.normal_(p, std=1e-3)
    run = T.train_pair(init, T.dense_twin(init), X, Y, T.Optimiser("gd", 0.1), 400)
    fn, hist = T.function_answer(run.net, X), T.gap_answer(run)
    res = analyse(run.net, np_data(X, Y), init=init)
    v = Verdicts("two outputs, history predicted", res)
    v.judged("function now", "function", fn)
    v.judged("history", "history", hist)
    v.judged("headline", "level", T.worst(fn, hist))
    v.check()


# ----------------------------------------------------------------- linear attention (§10)

D, N_CTX, HEADS, SEQS = 3, 8, 2, 100


def attention_model(*, softmax: bool = False, std: float = 0.05, seed: int = 0) -> T.MergedLinearAttention:
    """Merged linear attention in the documented layout, only the twin's blocks drawn (A_h,
    γ_h ~ N(0, std²)); the off-twin blocks u_h, b_h zero."""
    torch.manual_seed(seed)
    m = T.MergedLinearAttention(D, HEADS, softmax=softmax)
    with torch.no_grad():
        m.W_KQ[:, :D, :D] = std * torch.randn(HEADS, D, D, dtype=torch.float64)
        m.W_V[:, D, D] = std * torch.randn(HEADS, dtype=torch.float64)
    return m


def _attention_history(optimiser: T.Optimiser, train, *, mirror: bool, steps: int = 200):
    X, Y = T.in_context_data(SEQS, N_CTX, D, mirror=mirror)
    E = T.attention_tokens(X, D)
    Z = T.cubic_features(E)
    init = attention_model()
    run = T.train_pair(init, T.attention_twin(init), E, Y, optimiser, steps, Z=Z)
    rerun = T.train_pair(init, T.attention_twin(init), E, Y, optimiser, steps, Z=Z, perturb=REL)
    fn, hist = T.function_answer(run.net, E), T.gap_answer(run)
    res = analyse(run.net, np_data(X, Y), init=init, train=train)
    return res, fn, hist, run, rerun, len(X)


def _attention_k(n_rows: int) -> int:
    """k of γ_k for attention: the rows, 4 (as :func:`_chain`), every weight of model and twin
    (2H(D+1)² + HD² + H), and the N context tokens one prediction sums (G = (1/N) Σ_n e_n e_nᵀ)."""
    return n_rows + 4 + 2 * HEADS * (D + 1) ** 2 + HEADS * D * D + HEADS + N_CTX


def test_attention_gd_mirrored_history():
    """Zero off-twin blocks on label-mirrored sequences under GD (0.02, 200 steps): the model is its
    twin W₂W₁z at every step (§10.2): torch's gap is at round-off, and so is the trained model's
    distance to its twin's function."""
    gd = bf.GDConfig(lr=0.02, steps=200)
    res, fn, hist, run, rerun, n = _attention_history(T.Optimiser("gd", 0.02), gd, mirror=True)
    v = Verdicts("attention, GD, mirrored, history", res)
    v.judged("function now", "function", fn)
    v.judged("history", "history", hist)
    v.judged("headline", "level", T.worst(fn, hist))
    v.gap("history", run, rerun, _attention_k(n))
    v.check()


def test_attention_gd_unmirrored_history():
    """The same without the label mirror: the gradients of the off-twin blocks are O(1/√S) and GD
    moves them (§10.2): the run leaves its twin by 4.9% of L_ref (history not linear) and the
    trained model is 7% of <f²> off its twin's function. (Issue 47 item 4: the package divided by
    the twin's loss at each step, 13.5%.)"""
    gd = bf.GDConfig(lr=0.02, steps=200)
    res, fn, hist, run, rerun, n = _attention_history(T.Optimiser("gd", 0.02), gd, mirror=False)
    v = Verdicts("attention, GD, unmirrored, history", res)
    v.judged("function now", "function", fn)
    v.judged("history", "history", hist)
    v.judged("headline", "level", T.worst(fn, hist))
    v.gap("history", run, rerun, _attention_k(n))
    v.check()


def test_attention_adam_unmirrored_history():
    """Plain Adam (3e-3; the attention twin's map has scale 1, so the same Adam is its exact twin
    optimiser) on unmirrored sequences: the off-twin blocks grow, the run leaves its twin by 5.2%
    of L_ref and the trained model's function is 11% off its twin's."""
    res, fn, hist, run, rerun, n = _attention_history(T.Optimiser("adam", 3e-3),
                                                      bf.TrainConfig(optimiser=optax.adam(3e-3), steps=200),
                                                      mirror=False)
    v = Verdicts("attention, Adam, unmirrored, history", res)
    v.judged("function now", "function", fn)
    v.judged("history", "history", hist)
    v.judged("headline", "level", T.worst(fn, hist))
    v.gap("history", run, rerun, _attention_k(n))
    v.check()


def test_attention_softmax_in_forward():
    """The documented merged layout with a softmax over the context around the scores in
    ``forward``: the weights read as an exact twin, but the module's own output is 98% of <f²>
    away from its twin's function (issue 47 item 1). A refusal naming the mismatch is correct too."""
    X, Y = T.in_context_data(SEQS, N_CTX, D, mirror=True)
    model = attention_model(softmax=True)
    fn = T.function_answer(model, T.attention_tokens(X, D))
    res = analyse(model, np_data(X, Y))
    v = Verdicts("softmax attention in forward", res, refusal_ok=True)
    v.judged("function now", "function", fn)
    v.judged("headline", "level", fn.linear)
    v.check()
