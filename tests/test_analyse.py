"""`analyse`: the verdict follows docs/theory.md's three conditions (bias, symmetric data, a
linear odd part), the prediction is exact where theory says so, and `biasfree analyse`
writes its contract (analysis.json, twin.safetensors, figure) and exits 0 or 2."""

import json

import numpy as np
import pytest
from typer.testing import CliRunner

import biasfree as bf
from biasfree.cli import app

runner = CliRunner()


def _sym_data(seed=0, n=40, d=4, p=2):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    Y = X @ rng.normal(size=(d, p)) + 0.1 * rng.normal(size=(n, p))
    X, Y = bf.symmetrize(X, Y)
    return np.asarray(X), np.asarray(Y)


def _net(seed, widths, scale=0.1, bias=False):
    import jax
    return bf.init_gaussian(jax.random.PRNGKey(seed), widths, scale, bias=bias)


def test_pair_net_is_exactly_linear_and_trains_as_its_twin():
    X, Y = _sym_data()
    pair = bf.pair_up(_net(0, (4, 5, 2), 0.05))
    res = bf.analyse(pair, (X, Y), alpha=0.0, train=bf.GDConfig(lr=0.05, steps=200, n_records=21))
    assert res.verdict.effectively_linear and res.verdict.text.startswith("effectively linear")
    assert res.data.symmetric and res.data.asymmetry == 0.0
    assert res.net.even_fraction <= 1e-28  # pairs: f_even = 0 exactly, up to round-off squared
    assert res.net.odd_nonlinear_fraction <= 1e-20  # energy ratio of round-off
    assert res.prediction.exact and res.prediction.reference == "ode"  # Gaussian init: not balanced
    # §2.3: pair GD equals the twin's GD (√c, ηc) step for step, to round-off
    assert res.prediction.trained.gap_to_twin <= 1e-12
    # the prediction is gradient flow: GD differs from it at first order in η (measured, not 0)
    assert 0.0 < res.prediction.trained.gap_to_prediction < 0.05
    # β_eff = c W_1ᵀ W_2ᵀ (§1.2), the twin is √c·θ
    np.testing.assert_allclose(res.net.beta_eff, 0.5 * np.asarray(pair[0].W).T @ np.asarray(pair[1].W).T,
                               rtol=0, atol=1e-16)
    assert res.prediction.weight_scale == pytest.approx(np.sqrt(0.5), rel=1e-15)
    # floors in loss units (½ MSE): symmetric data with odd targets -> two-layer floor = linear floor
    assert res.prediction.two_layer_floor == pytest.approx(res.prediction.linear_floor, rel=1e-10)


def test_balanced_init_on_whitened_data_uses_the_closed_form():
    from biasfree import theory as th

    X, Y = _sym_data(1)
    Xw = np.asarray(bf.whiten(X)[0])
    modes = th.data_modes(Xw, Y)
    twin = th.aligned_init(modes.U, modes.V, np.array([1e-3, 1e-3]))
    relu = th.linear_to_pair(twin, 0.0)
    res = bf.analyse(relu, (Xw, Y), alpha=0.0, t_max=10.0)
    assert res.prediction.reference == "riccati" and res.prediction.exact
    # the closed form agrees with the pair net's actual L(0) (no even part): round-off
    assert abs(res.prediction.loss[0] - res.prediction.loss0_net) <= 1e-14


def test_each_failing_condition_is_named_with_its_number():
    X, Y = _sym_data(2)
    biased = bf.analyse(_net(0, (4, 6, 2), bias=True), (X, Y), alpha=0.0)
    assert not biased.verdict.effectively_linear and biased.prediction is None
    assert any(f.startswith("bias: layer(s) 1, 2") for f in biased.verdict.failures)
    half = bf.analyse(_net(0, (4, 6, 2)), (X[:40], Y[:40]), alpha=0.0)
    assert [f[:16] for f in half.verdict.failures] == ["asymmetric data:"]
    assert half.data.asymmetry > 0.1 and half.prediction.two_layer_floor is None
    deep = bf.analyse(_net(0, (4, 8, 8, 2), scale=0.7), (X, Y), alpha=0.0)
    assert deep.net.odd_nonlinear_fraction > 1e-6  # a random depth-3 ReLU net uses its depth
    assert "depth 3 > 2 with a nonlinear odd part" in deep.verdict.text
    assert "APPROXIMATE" in deep.prediction.note
    with pytest.raises(ValueError, match="maps 4 inputs"):
        bf.analyse(_net(0, (4, 6, 2)), (X[:, :3], Y), alpha=0.0)
    with pytest.raises(ValueError, match="unknown"):
        bf.analyse(bf.Model(_net(0, (4, 6, 2)), None, "test"), (X, Y))


def test_cli_analyse_writes_the_contract(tmp_path):
    net = _net(3, (64, 30, 10), scale=0.05)
    model = bf.save_model(net, tmp_path / "m.safetensors")  # no alpha stored
    out = tmp_path / "A"
    res = runner.invoke(app, ["analyse", str(model), "--alpha", "0", "--data", "digits", "--out", str(out)])
    assert res.exit_code == 0, res.output
    doc = json.loads((out / "analysis.json").read_text())
    assert {"data", "net", "prediction", "verdict"} <= set(doc)
    assert doc["verdict"]["effectively_linear"] is True
    assert doc["net"]["odd_nonlinear_fraction"] <= 1e-10
    assert doc["data"]["symmetric"] and doc["net"]["widths"] == [64, 30, 10]
    assert doc["prediction"]["loss_unit"].startswith("half mean squared error")
    twin = bf.load_model(out / "twin.safetensors")
    assert twin.alpha == 1.0
    np.testing.assert_allclose(np.asarray(twin.params[0].W), np.sqrt(0.5) * np.asarray(net[0].W),
                               rtol=1e-15, atol=0)
    assert (out / "figure.png").stat().st_size > 0
    for p in ("analysis.json", "twin.safetensors", "figure.png"):
        assert str(out / p) in res.stdout


def test_cli_analyse_bad_input_exits_2(tmp_path):
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "b.npz", **{"0.weight": rng.normal(size=(5, 64)), "0.bias": np.zeros(5),
                                    "2.weight": rng.normal(size=(10, 5))})
    res = runner.invoke(app, ["analyse", str(tmp_path / "b.npz"), "--alpha", "0", "--out", str(tmp_path)])
    assert res.exit_code == 2 and "layer 0" in res.output and "bias" in res.output
    ok = bf.save_model(_net(0, (64, 6, 10)), tmp_path / "m.npz")
    res = runner.invoke(app, ["analyse", str(ok), "--out", str(tmp_path)])  # α unknown
    assert res.exit_code == 2 and "alpha" in res.output
    res = runner.invoke(app, ["analyse", str(ok), "--alpha", "0", "--data", "nope", "--out", str(tmp_path)])
    assert res.exit_code == 2 and "unknown data" in res.output


def test_done_when_torch_sequential_saved_with_safetensors(tmp_path):
    """The issue's acceptance test: a bias-free torch.nn.Sequential saved with
    safetensors.torch.save_file is analysed as effectively linear; a bias or a Tanh is refused."""
    torch = pytest.importorskip("torch")
    from safetensors.torch import save_file

    nn = torch.nn
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 32, bias=False), nn.ReLU(), nn.Linear(32, 10, bias=False))
    save_file(model.state_dict(), str(tmp_path / "m.safetensors"))
    res = runner.invoke(app, ["analyse", str(tmp_path / "m.safetensors"), "--alpha", "0", "--data",
                              "digits", "--out", str(tmp_path / "A")])
    assert res.exit_code == 0, res.output
    doc = json.loads((tmp_path / "A" / "analysis.json").read_text())
    assert doc["verdict"]["effectively_linear"] and doc["net"]["odd_nonlinear_fraction"] <= 1e-10
    biased = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10, bias=False))
    save_file(biased.state_dict(), str(tmp_path / "b.safetensors"))
    res = runner.invoke(app, ["analyse", str(tmp_path / "b.safetensors"), "--alpha", "0",
                              "--out", str(tmp_path / "B")])
    assert res.exit_code == 2 and "layer 0" in res.output
    with pytest.raises(bf.UnsupportedModelError, match=r"layer 1 \(Tanh\)"):
        bf.analyse(nn.Sequential(nn.Linear(64, 32, bias=False), nn.Tanh(), nn.Linear(32, 10, bias=False)),
                   "digits")
