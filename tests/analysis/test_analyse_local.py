"""`analyse` reports the local linear analysis (docs/theory.md §8) beside the verdict, marked
reported, not judged: at most 64 evenly spaced inputs, the identities against their
round-off bounds, the bias term of a biased net, the Jacobian's effective dimension; in
analysis.json (new key, old keys kept), the CLI's table and the figure."""

import json

import numpy as np
import pytest
from typer.testing import CliRunner

import biasfree as bf
from biasfree.analysis import measurements
from biasfree.app.cli import app

runner = CliRunner()


def _data(n, d=4, p=2, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    X, Y = bf.symmetrize(X, X @ rng.normal(size=(d, p)))
    return np.asarray(X), np.asarray(Y)


def _net(seed, widths, bias=False):
    rng = np.random.default_rng(seed)
    Ws = [0.3 * rng.normal(size=(o, i)) for i, o in zip(widths[:-1], widths[1:], strict=True)]
    return bf.from_arrays(Ws, [rng.normal(size=W.shape[0]) for W in Ws] if bias else None)


@pytest.mark.numerics  # round-off bounds: make test-portable reruns it
def test_bias_free_net_local_linearity_is_reported_at_round_off_and_not_judged():
    X, Y = _data(50)  # 100 rows after mirroring: 64 are used
    res = bf.analyse(_net(1, (4, 12, 9, 2)), (X, Y), alpha=0.2)
    loc = res.local
    assert loc.n_used == measurements.LOCAL_INPUTS == 64 and loc.n_total == 100 and not loc.judged
    assert np.array_equal(loc.rows, np.unique(np.linspace(0, 99, 64).round().astype(int)))
    # local_linear's derived bounds (its module doc); measured ratios are far below 1 (theory §8.7)
    assert loc.homogeneity_ratio <= 1.0 and loc.euler_ratio <= 1.0
    assert loc.homogeneity_gap <= loc.homogeneity_bound and loc.euler_residual <= loc.euler_bound
    assert 1.0 <= loc.participation_ratio_median <= loc.max_dimension == 2
    assert loc.participation_ratio.shape == (64,)
    # the verdict weighs none of it: no evidence names these numbers, the text does not either
    for j in (res.verdict.function, res.verdict.training):
        assert not any(w in e.name.lower() for e in j.evidence for w in ("homogen", "euler", "dimension"))
    assert "Euler" not in res.verdict.text and "reported, not judged" in loc.note


def test_biased_net_reports_its_bias_term_and_small_data_use_every_input():
    X, Y = _data(10)
    res = bf.analyse(_net(2, (4, 8, 2), bias=True), (X, Y), alpha=0.0)
    loc = res.local
    assert loc.n_used == loc.n_total == 20 and np.array_equal(loc.rows, np.arange(20))
    assert loc.bias_fraction > 1e-3 and loc.euler_ratio > 1e6 and loc.homogeneity_ratio > 1e6
    assert any(line.startswith("bias term") for line in loc.lines())
    bias_free = bf.analyse(_net(2, (4, 8, 2)), (X, Y), alpha=0.0).local
    assert not any(line.startswith("bias term") for line in bias_free.lines())


def test_jacobian_cap_reduces_the_inputs_or_skips(monkeypatch):
    X, Y = _data(50)
    net = _net(3, (4, 6, 2))
    monkeypatch.setattr(measurements, "MAX_ENTRIES", 10 * 2 * 4)  # room for 10 Jacobians of 2·4 numbers
    assert bf.analyse(net, (X, Y), alpha=0.0).local.n_used == 10
    monkeypatch.setattr(measurements, "MAX_ENTRIES", 7)  # not even one
    res = bf.analyse(net, (X, Y), alpha=0.0)
    assert res.local is None and res.to_json()["local_linear"] is None


def test_cli_prints_it_apart_from_the_verdict_and_writes_the_new_key(tmp_path):
    X, Y = _data(20)
    np.savez(tmp_path / "data.npz", X=X, Y=Y)
    model = bf.save_model(_net(4, (4, 10, 2)), tmp_path / "m.safetensors")
    out = tmp_path / "A"
    res = runner.invoke(app, ["analyse", str(model), "--alpha", "0", "--data", str(tmp_path / "data.npz"),
                              "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "reported, not judged" in res.output and "local linearity at 40 of 40 inputs" in res.output
    doc = json.loads((out / "analysis.json").read_text())
    assert {"data", "net", "regime", "prediction", "verdict", "versions", "local_linear"} <= set(doc)
    loc = doc["local_linear"]
    assert loc["judged"] is False and loc["n_used"] == 40 and loc["euler_ratio"] <= 1.0
    assert {"homogeneity_gap", "homogeneity_bound", "euler_residual", "euler_bound", "bias_fraction",
            "participation_ratio_median", "effective_rank_median", "frobenius_dimension_median"} <= set(loc)
