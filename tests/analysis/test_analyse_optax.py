"""`analyse(train=...)` under an optax optimiser: the net trained beside the twin that
`optimiser_twin` builds, the gap measured at every step, the verdict naming the optimiser
and κ; both sides of each rule (docs/theory.md §9)."""

import json

import jax
import numpy as np
import optax
import pytest
from roundoff import EPS, chain_length, loss_eval_gap
from typer.testing import CliRunner

import biasfree as bf
from biasfree.analysis import verdict as vd
from biasfree.app.cli import app
from biasfree.dynamics.optimiser_twin import NAMED, with_degree


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 4))
    X, Y = bf.symmetrize(X, X @ rng.normal(size=(4, 2)))
    return np.asarray(X), np.asarray(Y)


def _adam(rho):  # ε scaled with the gradients: an exact twin (§9.2)
    return optax.adam(1e-2, eps=1e-8 * rho)


PAIR = bf.pair_up(bf.init_gaussian(jax.random.PRNGKey(0), (4, 8, 2), 0.1))


def test_a_pair_net_under_adam_is_exactly_on_its_twin_and_the_verdict_names_adam_and_kappa(data):
    cfg = bf.TrainConfig(optimiser=_adam, steps=300, name="adam")
    res = bf.analyse(PAIR, data, alpha=0.0, train=cfg)
    tr = res.prediction.trained
    # the loop measures the gap at every step; the records are only the stored curve
    assert tr.t.size == cfg.n_records < 301 and tr.steps_run == 300
    # the exact identity holds to round-off; the verdict's threshold is ROUND_OFF
    assert tr.gap_to_twin <= vd.ROUND_OFF and res.verdict.training.level == vd.EXACT
    ev = res.verdict.training.evidence[-2]
    assert "adam (κ = 0)" in ev.name and "every step" in ev.name
    assert any("κ = 0 measured" in n for n in res.verdict.training.notes)
    doc = json.loads(json.dumps(res.to_json()))
    assert doc["prediction"]["trained"]["config"]["optimiser"] == "adam"
    assert doc["prediction"]["trained"]["config"]["degree"] == 0.0


def test_the_wrong_degree_puts_the_twin_off_and_the_verdict_says_not(data):
    # control: κ = 1 (GD's scale c) for Adam: the twin moves c^{1/2} too slowly
    cfg = bf.TrainConfig(optimiser=_adam, steps=300, degree=1.0, name="adam")
    res = bf.analyse(PAIR, data, alpha=0.0, train=cfg)
    assert res.prediction.trained.gap_to_twin > vd.PAPER_LEVEL and res.verdict.training.level == vd.NOT
    assert "adam (κ = 1)" in res.verdict.training.evidence[-2].name


def test_the_gap_is_in_units_of_L0_once_as_under_gd(data):
    # A random (unpaired) init leaves a real gap; Y × 10 puts L₀ = max(L(θ₀), ½<|y|²>) near 300,
    # far from 1, so a gap divided by L₀ twice (a past bug) would read 300× too small. The two
    # sides divide the same max|L − L_twin| once each, by L₀s whose L(θ₀) may come from two
    # evaluations of the loss (the run's record, analyse's own): those differ by at most
    # roundoff.loss_eval_gap (k = chain_length: the forward sums, the mean over the 80 points,
    # ½, 1/N; ~1e-13 relative here), max(·, ½<|y|²>) passes it on unchanged (1-Lipschitz), and
    # each division rounds once (ε each side)
    X, Y = data
    Y = 10.0 * Y
    net = bf.init_gaussian(jax.random.PRNGKey(1), (4, 8, 2), 0.1)
    path = jax.tree_util.tree_map(lambda a: np.asarray(a)[None], net)
    for train in (bf.TrainConfig(optimiser=_adam, steps=100, name="adam"), bf.GDConfig(lr=0.05, steps=100)):
        tr = bf.analyse(net, (X, Y), alpha=0.0, train=train).prediction.trained
        L0 = max(float(tr.loss[0]), 0.5 * float(np.mean(np.sum(Y**2, axis=1))))
        assert L0 > 10.0
        expected = float(np.max(np.abs(tr.loss - tr.twin_loss))) / L0
        rel = float(loss_eval_gap(path, X, Y, [L0], chain_length(net, X.shape[0]))[0]) / L0 + 2 * EPS
        assert tr.gap_to_twin == pytest.approx(expected, rel=rel), type(train).__name__


def test_a_plain_adam_runs_with_an_approximate_twin_and_says_so(data):
    res = bf.analyse(PAIR, data, alpha=0.0, train=optax.adam(1e-2))
    note = " ".join(res.verdict.training.notes)
    assert "APPROXIMATE twin" in note and "κ = 0" in note
    assert np.isfinite(res.prediction.trained.gap_to_twin)


@pytest.mark.parametrize("opt", [optax.adam(1e-2), optax.lion(1e-2)], ids=["adam-eps", "lion-decay"])
def test_train_and_analyse_share_one_kappa_policy(data, opt):
    """A plain optimiser that is not homogeneous (ε, a decoupled decay): ``bf.train(twin=True)``
    runs the same approximate twin that ``analyse(train=)`` runs, and says so in the same words
    (a warning there, a note here); the twin is the same, so the gap is (one loop, bitwise
    the same run). A factory that is not homogeneous is refused by both, before training."""
    from biasfree.analysis.gap import reference, zero_loss
    from biasfree.dynamics.optimiser_twin import ApproximateTwinWarning, NotHomogeneousError

    with pytest.warns(ApproximateTwinWarning, match="APPROXIMATE twin") as seen:
        run = bf.train(PAIR, bf.Dataset(*data), opt, steps=60, alpha=0.0, twin=True)
    res = bf.analyse(PAIR, data, alpha=0.0, train=bf.TrainConfig(optimiser=opt, steps=60))
    assert str(seen[0].message) in " ".join(res.verdict.training.notes)
    # the same steps of the same twin: equal to the last bits (one division apart)
    ref = reference(run.loss[0], zero_loss(data[1]))
    np.testing.assert_allclose(res.prediction.trained.gap_to_twin, run.twin_gap / ref, rtol=4 * EPS)
    bad = lambda rho: optax.adam(1e-2)  # noqa: E731 - a factory that ignores ρ: ε unscaled
    with pytest.raises(NotHomogeneousError):
        bf.train(PAIR, bf.Dataset(*data), bad, steps=60, alpha=0.0, twin=True)
    with pytest.raises(NotHomogeneousError):
        bf.analyse(PAIR, data, alpha=0.0, train=bf.TrainConfig(optimiser=bad, steps=60))


def test_at_alpha_one_neither_train_nor_analyse_measures_kappa(data, monkeypatch):
    """At α = 1 (c = 1) the twin is the net and its optimiser's scale is 1^(1+κ) = 1 whatever κ:
    ``bf.train(twin=True)`` and ``analyse(train=)`` both take κ = 0 without measuring it (one
    policy, :func:`~biasfree.dynamics.optimiser_twin.with_degree`). Main's analyse measured it
    there and called plain Adam's twin APPROXIMATE, and refused a factory that ignores ρ,
    which its train accepted. The twin steps as the net does: the gap is round-off (≤ ROUND_OFF)."""
    import importlib
    import warnings

    optimiser_twin = importlib.import_module("biasfree.dynamics.optimiser_twin")  # not the function
    measured = []
    measure = optimiser_twin.measure_degree
    monkeypatch.setattr(optimiser_twin, "measure_degree",
                        lambda *a, **k: measured.append(a) or measure(*a, **k))
    bad = lambda rho: optax.adam(1e-2)  # noqa: E731 - a factory that ignores ρ: ε unscaled
    for opt in (optax.adam(1e-2), bad):
        with warnings.catch_warnings():
            warnings.simplefilter("error", optimiser_twin.ApproximateTwinWarning)
            run = bf.train(PAIR, bf.Dataset(*data), opt, steps=60, alpha=1.0, twin=True)
        res = bf.analyse(PAIR, data, alpha=1.0, train=bf.TrainConfig(optimiser=opt, steps=60))
        notes = " ".join(res.verdict.training.notes)
        assert "κ = 0: at α = 1" in notes and "APPROXIMATE" not in notes, notes
        assert res.prediction.trained.gap_to_twin <= vd.ROUND_OFF and float(run.twin_gap) <= vd.ROUND_OFF
    assert measured == []
    # control: at α = 0 the same plain Adam is measured, and its twin is APPROXIMATE
    res = bf.analyse(PAIR, data, alpha=0.0, train=bf.TrainConfig(optimiser=optax.adam(1e-2), steps=60))
    assert len(measured) == 1 and "APPROXIMATE" in " ".join(res.verdict.training.notes)


@pytest.mark.parametrize("name", list(NAMED))
def test_every_named_optimiser_gets_an_exact_kappa(name):
    """The CLI's ``--optimiser`` names (and the optimisers claim's table): each factory rescales
    its constants with gradient units (docs/theory.md §9.2: RMSProp's ε inside the square root
    ×ρ², Lion's and AdamW's default decoupled decay ×ρ), so κ is measured exactly and the
    twin is exact, never the APPROXIMATE fallback (nor refused, as a factory that misses one)."""
    cfg, _, note = with_degree(bf.TrainConfig(optimiser=NAMED[name](1e-3)), 0.0, 2)
    assert cfg.degree == (1.0 if name in ("sgd", "momentum", "nesterov") else 0.0)
    assert "measured: the twin optimiser is exact" in note and "APPROXIMATE" not in note


def test_bad_optimisers_are_refused_before_any_training(data, monkeypatch):
    from biasfree.dynamics import trainer

    def never(*a, **k):
        raise AssertionError("trained")

    monkeypatch.setattr(trainer, "drive", never)  # every run of the training loop goes through it
    with pytest.raises(ValueError, match="not homogeneous"):  # a factory that ignores ρ: ε unscaled
        bf.analyse(PAIR, data, alpha=0.0,
                   train=bf.TrainConfig(optimiser=lambda rho: optax.adam(1e-2), steps=10))
    with pytest.raises(ValueError, match="zero updates"):  # a plain optimiser with η = 0: no κ to read
        bf.analyse(PAIR, data, alpha=0.0, train=optax.sgd(0.0))
    with pytest.raises(TypeError, match=r"train='adam' must be .*TrainConfig\(optimiser=\.\.\., steps"):
        bf.analyse(PAIR, data, alpha=0.0, train="adam")
    with pytest.raises(ValueError, match="steps"):
        bf.TrainConfig(optimiser=_adam, steps=0)


def test_an_update_of_the_wrong_shape_is_refused_before_any_compute(data, monkeypatch):
    """analyse checks the optimiser's update on the net where it reads train= (train's own path
    checks it in _train): a run of the net's function, the first compute after the checks, never
    starts (on main it was refused by the trainer, after the function now and the prediction)."""
    import jax.numpy as jnp

    from biasfree.analysis import function_now

    def never(*a, **k):
        raise AssertionError("computed")

    monkeypatch.setattr(function_now, "measure_net", never)
    wrong = optax.GradientTransformation(lambda p: (), lambda g, s, p=None: ((jnp.zeros(3),), s))
    with pytest.raises(TypeError, match="its update returns 1 arrays of shapes"):
        bf.analyse(PAIR, data, alpha=0.0, train=bf.TrainConfig(optimiser=wrong, steps=10, degree=0.0))


def test_the_cli_trains_with_an_optimiser_and_refuses_bad_names(data, tmp_path):
    model, d = tmp_path / "m.safetensors", tmp_path / "d.npz"
    bf.save_model(PAIR, model, alpha=0.0)
    np.savez(d, X=data[0], Y=data[1])
    runner = CliRunner()
    res = runner.invoke(app, ["analyse", str(model), "--data", str(d), "--optimiser", "adam", "--lr", "1e-2",
                              "--train-steps", "50", "--out", str(tmp_path / "o")])
    assert res.exit_code == 0, res.output
    doc = json.loads((tmp_path / "o" / "analysis.json").read_text())
    assert doc["prediction"]["trained"]["optimiser"] == "adam (κ = 0)"
    for args in (["--optimiser", "adamx", "--train-steps", "5"], ["--optimiser", "adam"],
                 ["--batch-size", "4", "--train-steps", "5"]):
        res = runner.invoke(app, ["analyse", str(model), "--data", str(d), *args,
                                  "--out", str(tmp_path / "x")])
        assert res.exit_code == 2 and "error" in res.output, (args, res.output)


def test_the_cli_trains_on_random_batches_of_a_file_that_is_not_mirrored(tmp_path):
    """A user's data file is taken as given: mirror-pair batches need [X; -X], so the CLI
    once refused --batch-size with a fix ('mirrored_batches=False') it had no option for."""
    model, d = tmp_path / "m.safetensors", tmp_path / "d.npz"
    bf.save_model(PAIR, model, alpha=0.0)
    rng = np.random.default_rng(3)
    np.savez(d, X=rng.normal(size=(20, 4)), Y=rng.normal(size=(20, 2)))
    args = ["analyse", str(model), "--data", str(d), "--optimiser", "sgd", "--batch-size", "4",
            "--train-steps", "5", "--out", str(tmp_path / "o")]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 2 and "--random-batches" in res.output, res.output
    res = CliRunner().invoke(app, [*args, "--random-batches"])
    assert res.exit_code == 0, res.output


def test_the_gap_is_over_every_step_whatever_the_records_and_is_said_so(data):
    """The loop carries max|L − L̃| over every step, so a run of 50 steps stored at 11 records
    still judges (and says) the gap at every step; a wrong twin's gap between records is caught
    as well as one at a record."""
    pair = bf.pair_up(bf.init_gaussian(jax.random.PRNGKey(0), (4, 8, 2), 0.1))
    res = bf.analyse(pair, data, alpha=0.0, train=bf.TrainConfig(optimiser=_adam, steps=50, n_records=11,
                                                                 name="adam"))
    j = res.verdict.training
    tr = res.prediction.trained
    assert tr.t.size == 11 and tr.steps_run == 50 and j.level == vd.EXACT
    assert "every step" in j.evidence[-2].name and "at every step" in j.text
    assert "evenly spaced" not in j.text
    full = bf.analyse(pair, data, alpha=0.0, train=bf.TrainConfig(optimiser=_adam, steps=5, name="adam"))
    assert "at every step" in full.verdict.training.text


def test_a_gap_to_an_approximate_twin_is_undecided_where_the_exact_twin_says_not(data):
    net = bf.init_gaussian(jax.random.PRNGKey(1), (4, 8, 2), 0.3)  # random, not small: a real gap
    exact = bf.analyse(net, data, alpha=0.0, train=bf.TrainConfig(optimiser=_adam, steps=200, name="adam"))
    plain = bf.analyse(net, data, alpha=0.0, train=bf.TrainConfig(optimiser=optax.adam(1e-2), steps=200,
                                                                  name="adam"))
    for res in (exact, plain):  # both sides of the threshold rule are on the same side: above 0.3%
        assert res.prediction.trained.gap_to_twin > vd.PAPER_LEVEL
    assert exact.verdict.training.level == vd.NOT
    j = plain.verdict.training
    assert j.level == vd.UNDECIDED, j.text
    assert "approximate twin" in j.text and "factory" in j.text and "> 0.3%" in j.text


def test_an_optax_run_reports_progress_as_it_trains(data):
    """Net and twin train in one loop, run in chunks with ``progress(k, K)`` between them: the
    steps done rise to K = the steps asked, against that one K. Under analyse's time budget the
    chunks are paced (dynamics.pacing): record 0 and step 1 (compiling), step 2 (timed), then
    chunks of two record intervals, as many steps as fit the time left."""
    seen = []
    pair = bf.pair_up(bf.init_gaussian(jax.random.PRNGKey(0), (4, 8, 2), 0.1))
    cfg = bf.TrainConfig(optimiser=_adam, steps=20, n_records=5, name="adam")
    bf.analyse(pair, data, alpha=0.0, train=cfg,
               progress=lambda k, n: seen.append((k, n)))
    assert seen == [(1, 20), (2, 20), (10, 20), (20, 20)]


@pytest.mark.parametrize("cfg", [
    bf.GDConfig(lr=0.05, steps=400, batch_size=8),
    bf.GDConfig(lr=0.05, steps=400, batch_size=8, mirrored_batches=False, weight_decay=1e-3),
    bf.TrainConfig(optimiser=_adam, steps=300, batch_size=16, name="adam"),
], ids=["gd-mirrored-batches", "gd-random-batches-decay", "adam-batches"])
def test_the_suggested_call_rebuilds_the_run_it_names_batches_included(cfg):
    """The call an answer suggests (``train=`` of its Dynamics) builds the config it stands for:
    the same optimiser, steps, batches, decay and loss (the minibatch suggestion once dropped
    ``batch_size``). Control: the suggestion for full-batch GD is full batch."""
    from biasfree.analysis.plan import dynamics_of

    dyn = dynamics_of(cfg)
    built = eval(dyn.train, {"GDConfig": bf.GDConfig, "TrainConfig": bf.TrainConfig, "adam": cfg.optimiser})
    for field in ("optimiser", "steps", "lr", "batch_size", "mirrored_batches", "weight_decay", "loss"):
        assert getattr(built, field) == getattr(cfg, field), (field, dyn.train)
    full = dynamics_of(bf.GDConfig(lr=0.05, steps=400))
    assert "batch_size" not in full.train and "--batch-size" not in full.cli
    if cfg.weight_decay == 0:  # the CLI has options for batches, none for a decay
        assert f"--batch-size {cfg.batch_size}" in dyn.cli
