"""bf.train under optax optimisers and bf.optimiser_twin (docs/theory.md §9): a pair net and
its twin trained in lockstep by SGD (with and without momentum, Nesterov), Adam with ε
scaled, sign descent, Lion, Muon, AdamW, mirrored minibatches, all float64 at round-off;
each beside a control (wrong scale, unmirrored batches) that must miss by far.

Small runs (d = 3, N = 40, p = 2, pair width 8) so the file takes seconds per optimiser.
"""

import jax
import numpy as np
import optax
import pytest
from roundoff import EPS, chain_length, gamma

import biasfree as bf
from biasfree.dynamics.optimiser_twin import (
    HOMOGENEITY_RTOL,
    PROBE_SCALES,
    NotHomogeneousError,
    measure_degree,
    probe_rhos,
    twin_scale,
)

pytestmark = pytest.mark.numerics

D, P, N_HALF, N_REC = 3, 2, 20, 21


@pytest.fixture(scope="module")
def sym():
    """(X₊, Y₊): N = 40 symmetric points in d = 3, linear teacher with singular values (2, 1)."""
    rng = np.random.default_rng(1)
    X = rng.normal(size=(N_HALF, D))
    return X, X @ np.array([[2.0, 0.0, 0.0], [0.0, 1.0, 0.0]]).T


def _data(sym, x_factor=1.0, y_factor=1.0, mirror=True):
    X, Y = sym
    return bf.Dataset(*bf.symmetrize(X * x_factor, Y * y_factor), mirror=mirror)


def _pair(scale=0.1, seed=2):
    rng = np.random.default_rng(seed)
    return bf.pair_up(bf.from_arrays([scale * rng.normal(size=(4, D)), scale * rng.normal(size=(P, 4))]))


def _leaves(tree):
    return [np.asarray(x) for x in jax.tree_util.tree_leaves(tree)]


def _observe(traj, factor=1.0):
    flat = np.concatenate([factor * x.ravel() for x in _leaves(traj.params)])
    return {"loss": np.asarray(traj.loss), "params": flat}


def _roundoff_bound(run, params, sym, steps, rel=1e-7, mirror=True):
    """Observable by observable, a first-order bound on the round-off of one ``steps``-step
    run ``run(params, data) -> dict`` (roundoff.trajectory_gap, extended to the data): every
    computed step is an exact step from weights and data perturbed entrywise by at most
    2γ_k relative (Higham §3.5: a computed product is the exact product of perturbed
    factors; the optimiser's own few operations per entry add O(ε), inside γ_k), and a
    perturbation at any step moves the observables by at most the run's measured response
    to the same relative perturbation ``rel`` (random signs) of the init and of the data,
    kept for the whole run: ``steps · 2γ_k · (|Δ_init| + |Δ_data|) / rel + 2γ_k |obs|``."""
    rng = np.random.default_rng(0)
    data = _data(sym, mirror=mirror)
    base = run(params, data)
    def jiggle(a):
        return np.asarray(a) * (1 + rel * rng.choice([-1.0, 1.0], size=np.shape(a)))

    moved = jax.tree_util.tree_map(jiggle, params)
    X, Y = sym
    fx, fy = (jiggle(np.ones_like(a)) for a in (X, Y))
    by_init, by_data = run(moved, data), run(params, _data(sym, fx, fy, mirror=mirror))
    g = 2 * gamma(chain_length(params, 2 * N_HALF))
    return {k: steps * g * (np.abs(by_init[k] - base[k]) + np.abs(by_data[k] - base[k])) / rel
            + g * np.abs(base[k]) for k in base}


def _lockstep(sym, make, alpha, steps, twin=None, scale=0.1, **kw):
    """Train the pair net with ``make(1)`` (or ``make``) and its twin √c·θ with
    ``optimiser_twin(make, α)`` (or ``twin``); returns (net, twin) observables, the twin's
    final weights divided by √c, and the net run's round-off bound."""
    opt = make if hasattr(make, "init") else make(1.0)
    twin = bf.optimiser_twin(make, alpha) if twin is None else twin
    pair, data, a = _pair(scale), _data(sym), twin_scale(alpha)

    def run(p, d):
        return _observe(bf.train(p, d, opt, steps=steps, alpha=alpha, n_records=N_REC, **kw))

    net = run(pair, data)
    tw = _observe(bf.train(bf.linear_twin(pair, alpha), data, twin, steps=steps, alpha=1.0,
                           n_records=N_REC, **kw), 1.0 / a)
    return net, tw, _roundoff_bound(run, pair, sym, steps)


def _assert_lockstep(net, tw, bound):
    """Net and twin agree within the sum of both runs' round-off bounds. The twin's bound is
    the net's: in exact arithmetic its run is the net's scaled by a, the same map (its
    loss is the net's, its weights a·θ, divided back by a here). Each bound stays below
    1e-8, far under the controls' gaps (>= 1e-3)."""
    for name in ("loss", "params"):
        diff = np.abs(net[name] - tw[name])
        e = 2 * bound[name]
        assert np.all(diff <= e), f"{name}: gap {np.max(diff):.3g} exceeds the bound {np.max(e):.3g}"
        assert np.max(e) < 1e-8, f"{name}: bound {np.max(e):.2g} too loose to catch a broken identity"


def _assert_far(net, tw, L0):
    gap = np.max(np.abs(net["loss"] - tw["loss"])) / L0
    assert gap > 1e-3, f"the control should miss the twin by far; relative loss gap {gap:.3g}"


# ---------------------------------------------------------------- bitwise equal to gd


RECORDS = ("loss", "beta", "even_energy", "singular_values", "conserved", "params", "loss_max")


@pytest.mark.parametrize("mirror", [True, False])
@pytest.mark.parametrize("weight_decay", [0.0, 0.01])
def test_train_sgd_equals_gd_to_roundoff(sym, mirror, weight_decay):
    """``train(optax.sgd(η))`` takes gd's steps (its gradient, records, loop; p + (−η)g is p − ηg
    in exact arithmetic), on the mirrored fast path and on the general one. It is a program of
    its own, η a constant there and traced in gd's, which XLA's simplifier may round
    differently: at XLA's optimisation level 0 with weight decay the two runs differ in the
    last bits (at level 1 they happened to agree bit for bit; this test once asserted that).
    So every recorded array agrees within twice gd's round-off bound (:func:`_roundoff_bound`,
    record by record), a bound far below the runs' own change; the time axis, computed on the
    host from the same η and steps, is equal bitwise."""
    data, pair = _data(sym, mirror=mirror), _pair()
    cfg = bf.GDConfig(alpha=0.0, lr=0.05, steps=300, n_records=N_REC, weight_decay=weight_decay)

    def flat(traj):
        return {name: np.concatenate([x.ravel() for x in _leaves(getattr(traj, name))]) for name in RECORDS}

    a = bf.train(pair, data, cfg)
    b = bf.train(pair, data, optax.sgd(0.05), steps=300, alpha=0.0, n_records=N_REC, lr=0.05,
                 weight_decay=weight_decay)
    assert data.mirrored == mirror and np.array_equal(a.t, b.t)
    bound = _roundoff_bound(lambda p, d: flat(bf.train(p, d, cfg)), pair, sym, cfg.steps, mirror=mirror)
    fa, fb = flat(a), flat(b)
    for name in RECORDS:
        gap, e = np.abs(fa[name] - fb[name]), 2 * bound[name]
        assert np.all(gap <= e), f"{name}: gap {np.max(gap):.3g} exceeds the bound {np.max(e):.3g}"
    assert np.max(2 * bound["loss"]) < 1e-8 * fa["loss"][0] < fa["loss"][0] - fa["loss"][-1]
    assert b.method == "optax" and float(b.stats["lr"]) == 0.05


# ---------------------------------------------------------------- twins, full batch

ADAM = lambda rho: optax.adam(0.01, eps=1e-8 * rho)  # noqa: E731  (ε has the units of a gradient)
CASES = {  # name: (factory or optimiser, κ, steps)
    "sgd": (optax.sgd(0.05), 1, 200),
    "momentum": (optax.sgd(0.02, momentum=0.9), 1, 200),
    "nesterov": (optax.sgd(0.02, momentum=0.9, nesterov=True), 1, 200),
    "adam": (ADAM, 0, 200),
    "sign_sgd": (optax.sign_sgd(0.005), 0, 200),
    "lion": (lambda rho: optax.lion(0.003, weight_decay=1e-2 * rho), 0, 200),
    "adamw": (lambda rho: optax.adamw(0.01, eps=1e-8 * rho, weight_decay=0.1 * rho), 0, 200),
    # Muon: the pair manifold is unstable once the gradients are small (docs/theory.md §9:
    # f_even grows from 3e-32 at step 100 to 3e-4 at step 300), so the identity is tested
    # over the first 100 steps, where round-off has not yet grown
    "muon": (lambda rho: optax.contrib.muon(0.01, eps=1e-8 * rho), 0, 100),
}


@pytest.mark.parametrize("alpha", [0.0, 0.5])
@pytest.mark.parametrize("name", list(CASES))
def test_pair_net_follows_its_twin(sym, name, alpha):
    """Pair net under an optimiser == its twin √c·θ under optimiser_twin (κ measured), at
    every record and in the final weights; control: the scale of the other degree
    (c^{(1+κ')/2}, κ' = 1 − κ: Adam at step η·c, SGD at η·√c) misses by far."""
    make, kappa, steps = CASES[name]
    c = bf.nets.slope_factor(alpha)
    rho = 1.0 / np.sqrt(c)
    assert measure_degree(make if not hasattr(make, "init") else (lambda r: make), (3.0, rho)) == kappa
    net, tw, bound = _lockstep(sym, make, alpha, steps)
    _assert_lockstep(net, tw, bound)
    assert net["loss"][-1] < 0.5 * net["loss"][0]  # it learns, so agreement is not trivial
    inner = make if hasattr(make, "init") else make(rho)
    wrong = optax.chain(inner, optax.scale(c ** ((2 - kappa) / 2)))
    ctrl = _observe(bf.train(bf.linear_twin(_pair(), alpha), _data(sym), wrong, steps=steps, alpha=1.0,
                             n_records=N_REC))
    _assert_far(net, ctrl, net["loss"][0])


def test_adam_with_unscaled_eps_is_off_by_more_than_roundoff(sym):
    """Adam's ε is the one non-homogeneous constant: a twin with ε unscaled (degree=0
    given, so nothing refuses it) strays above the round-off bound (measured 2e-6 of L(0)
    at init 0.1, 1e-3 at init 1e-7, docs/theory.md §9), the exact one stays within."""
    alpha = 0.0
    net, tw, bound = _lockstep(sym, optax.adam(0.01), alpha, 200,
                               twin=bf.optimiser_twin(optax.adam(0.01), alpha, degree=0))
    assert np.max(np.abs(net["loss"] - tw["loss"])) > 100 * np.max(2 * bound["loss"])


# ---------------------------------------------------------------- minibatches


@pytest.mark.parametrize("name", ["sgd", "adam"])
def test_mirrored_minibatches_keep_the_identity(sym, name):
    """Batches of 4 mirror pairs: every batch is symmetric, so the pair identity holds step
    by step (same key, same batches for net and twin); control: plain random batches of
    the same size break it (measured D = 0.07 for SGD, 0.1 for Adam, docs/theory.md §9)."""
    make = CASES[name][0]
    key = jax.random.PRNGKey(3)
    net, tw, bound = _lockstep(sym, make, 0.0, 200, batch_size=8, key=key)
    _assert_lockstep(net, tw, bound)
    net_r, tw_r, _ = _lockstep(sym, make, 0.0, 200, batch_size=8, key=key, mirrored_batches=False)
    _assert_far(net_r, tw_r, net_r["loss"][0])


def test_minibatches_depend_on_key_only(sym):
    """The batches come from fold_in(key, k): the same key gives the same run whatever the
    records; another key another run; a batch of all N points in random order is the full
    batch up to the order of the sum."""
    data, pair, opt = _data(sym), _pair(), optax.sgd(0.05)
    run = lambda **kw: bf.train(pair, data, opt, steps=60, alpha=0.0, **kw)  # noqa: E731
    a = run(batch_size=8, key=jax.random.PRNGKey(0), n_records=4)
    b = run(batch_size=8, key=jax.random.PRNGKey(0), n_records=7)
    assert all(np.array_equal(x, y) for x, y in zip(_leaves(a.params), _leaves(b.params), strict=True))
    other = run(batch_size=8, key=jax.random.PRNGKey(1), n_records=4)
    assert not np.allclose(a.loss[-1], other.loss[-1], rtol=1e-6)
    full, perm = run(n_records=4), run(batch_size=40, key=jax.random.PRNGKey(0), n_records=4,
                                       mirrored_batches=False)
    # same sums in another order: 60 steps of relative 2γ_k, amplified by at most the
    # observed contraction (GD on this convex-ish problem shrinks errors): 60·2γ_k·|L|
    k = chain_length(pair, 40)
    assert np.allclose(full.loss, perm.loss, rtol=60 * 2 * gamma(k), atol=0)


# ---------------------------------------------------------------- optimiser_twin


def test_optimiser_twin_scales_and_degrees():
    """Measured κ: SGD 1, Adam (ε scaled) 0, LAMB -1 (its trust ratio ||θ||/||u||); the
    twin's scale a^{1+κ}: at depth 2 c (SGD) and √c (Adam); at depth 3 the odd-part
    twin's a = c^{2/3}, so SGD's scale is λ_3 = c^{4/3} (docs/theory.md §4.1)."""
    probe = (3.0, 1 / 7)
    assert measure_degree(lambda r: optax.sgd(0.1), probe) == 1.0
    assert measure_degree(ADAM, probe) == 0.0
    assert measure_degree(lambda r: optax.lamb(1e-3, eps=1e-6 * r), probe) == -1.0
    g = {"w": np.array([[0.3, -2.0], [1.5, 4.0]])}
    for alpha, depth, make, want in ((0.0, 2, lambda r: optax.sgd(1.0), 0.5), (0.5, 2, ADAM, None),
                                     (0.0, 3, lambda r: optax.sgd(1.0), 0.5 ** (4 / 3))):
        twin = bf.optimiser_twin(make, alpha, depth=depth)
        u, _ = twin.update(g, twin.init(g))
        c = bf.nets.slope_factor(alpha)
        if want is None:  # Adam's first step is -η·sign(g)·(1 - O(ε)): scaled by √c
            np.testing.assert_allclose(u["w"], -0.01 * np.sqrt(c) * np.sign(g["w"]), rtol=1e-7)
        else:  # one multiplication each: exact to 2 ε
            np.testing.assert_allclose(u["w"], -want * g["w"], rtol=2 * EPS)
    assert twin_scale(0.0, 2) == np.sqrt(0.5)


@pytest.mark.parametrize("opt, why", [
    (optax.adam(0.01), "ε unscaled"),
    (optax.lion(0.01), "decoupled weight decay 1e-3, unscaled"),
    (optax.chain(optax.clip_by_global_norm(1.0), optax.sgd(0.1)), "κ = 1 below the threshold, 0 above"),
    (lambda rho: optax.adamw(0.01, eps=1e-8 * rho, weight_decay=0.1), "decay not scaled by ρ"),
    (lambda rho: optax.adagrad(0.01, eps=1e-7 * rho), "ε inside the root scales as ρ²"),
])
def test_optimiser_twin_refuses_inhomogeneous_updates(opt, why):
    """An update that is not homogeneous within round-off has no exact twin: refused with
    the measured κ range and deviations, and the fix; the refusal (a ValueError) carries the
    κ measured at every probe scale and ρ (what analyse's approximate twin reads)."""
    fix = r"not homogeneous.*measured κ from .* deviation .*factory"
    with pytest.raises(NotHomogeneousError, match=fix) as refused:
        bf.optimiser_twin(opt, 0.0)
    assert set(refused.value.kappas) == {(s, r) for s in PROBE_SCALES for r in probe_rhos(0.0)}
    assert HOMOGENEITY_RTOL < 1e-6


def test_optimiser_twin_trusts_a_given_degree():
    twin = bf.optimiser_twin(optax.adam(0.01), 0.0, degree=0)  # no refusal: the user asserts κ
    g = {"w": np.array([1.0, -3.0])}
    u, _ = twin.update(g, twin.init(g))
    np.testing.assert_allclose(u["w"], -0.01 * np.sqrt(0.5) * np.sign(g["w"]), rtol=1e-7)
    with pytest.raises(TypeError, match="factory returned"):
        bf.optimiser_twin(lambda rho: 3, 0.0, degree=1)


# ---------------------------------------------------------------- time axis and checks


def test_time_axis(sym):
    data, pair = _data(sym), _pair()
    kw = dict(steps=10, alpha=0.0, n_records=3)
    assert list(bf.train(pair, data, optax.sgd(0.05), **kw).t) == [0.0, 5.0, 10.0]  # η unknown: t = k
    assert np.isnan(bf.train(pair, data, optax.sgd(0.05), **kw).stats["lr"])
    assert list(bf.train(pair, data, optax.sgd(0.05), lr=0.1, **kw).t) == [0.0, 0.5, 1.0]
    injected = optax.inject_hyperparams(optax.adam)(learning_rate=0.25)
    assert list(bf.train(pair, data, injected, **kw).t) == [0.0, 1.25, 2.5]
    schedule = optax.inject_hyperparams(optax.sgd)(learning_rate=optax.linear_schedule(0.1, 0.0, 10))
    assert list(bf.train(pair, data, schedule, **kw).t) == [0.0, 5.0, 10.0]  # a schedule: steps


def test_train_refuses_bad_input(sym):
    data, pair, opt = _data(sym), _pair(), optax.sgd(0.05)
    key = jax.random.PRNGKey(0)
    cases = [
        (dict(optimiser="adam"), TypeError, "optax.GradientTransformation"),
        (dict(key=key), ValueError, "full-batch training draws nothing"),
        (dict(batch_size=7, key=key), ValueError, "even batch_size"),
        (dict(batch_size=41, key=key), ValueError, "exceeds the 40 training points"),
        (dict(batch_size=8, key=3), TypeError, "JAX random key"),
        (dict(steps=0), ValueError, "steps"),
        (dict(lr=-1.0), ValueError, "lr"),
    ]
    for kw, err, msg in cases:
        args = dict(optimiser=opt, steps=5, alpha=0.0) | kw
        with pytest.raises(err, match=msg):
            bf.train(pair, data, args.pop("optimiser"), **args)
    # minibatches without a key draw from PRNGKey(seed) (once they needed a key): the same run
    seeded = bf.train(pair, data, opt, steps=5, alpha=0.0, batch_size=8, seed=1, n_records=2)
    keyed = bf.train(pair, data, opt, steps=5, alpha=0.0, batch_size=8, key=jax.random.PRNGKey(1),
                     n_records=2)
    for x, y in zip(_leaves((seeded.loss, seeded.params)), _leaves((keyed.loss, keyed.params)), strict=True):
        assert np.array_equal(x, y)
    X, Y = sym
    lopsided = bf.Dataset(X, Y)  # no mirror half
    with pytest.raises(ValueError, match=r"mirrored_batches=True needs symmetric inputs"):
        bf.train(pair, lopsided, opt, steps=5, alpha=0.0, batch_size=4, key=key)
    bf.train(pair, lopsided, opt, steps=5, alpha=0.0, batch_size=4, key=key, mirrored_batches=False)


def test_compiled_loops_are_bounded(sym, monkeypatch):
    """One compiled loop per optimiser object (loop._compiled, keyed by the program's spec),
    the least recently used dropped: a session that builds optimisers afresh must not keep
    every program (each holds ~150 memory maps; keeping them all ran a long session out of
    maps)."""
    from biasfree.dynamics import loop as trainer

    monkeypatch.setattr(trainer, "CACHE_SIZE", 2)
    data, pair = _data(sym), _pair()
    opts = [optax.sgd(0.01 * (i + 1)) for i in range(3)]
    for opt in opts:
        bf.train(pair, data, opt, steps=2, alpha=0.0, n_records=2)
    assert len(trainer._COMPILED) <= 2
    kept = [entry[0].optimiser for entry in trainer._COMPILED.values()]
    assert opts[0] not in kept and opts[2] in kept  # found by equality: precise rebuilds the tuple
    bf.train(pair, data, opts[2], steps=2, alpha=0.0, n_records=2)  # the same optimiser again: no retrace
    assert len(trainer._COMPILED) <= 2
    (fn,) = [entry[1] for entry in trainer._COMPILED.values() if entry[0].optimiser == opts[2]]
    assert fn._cache_size() == 1


@pytest.mark.parametrize("make", [lambda: bf.optimiser_twin("adam", 0.0),
                                  lambda: bf.TrainConfig(optimiser="adam")])
def test_an_optimiser_named_by_a_string_is_refused_with_what_to_pass(make):
    """The message once asked for 'a function of the inputs X', the targets' wording."""
    with pytest.raises(TypeError, match=r"='adam' must be an optax.GradientTransformation, e.g. optax.adam"):
        make()
