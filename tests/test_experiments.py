"""Every registered experiment at size tiny, through the CLI, and the HTML report.

One CLI run (``biasfree run all --size tiny``) feeds every test here: its exit code says
whether every check passed, its files must follow DESIGN.md's output contract, and the
report built from them must show every figure and every check.
"""

import json
import re

import numpy as np
import pytest
from typer.testing import CliRunner

from biasfree import store
from biasfree.cli import app
from biasfree.experiments import HEADLINE, REGISTRY, get
from biasfree.report import render

runner = CliRunner()


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    out = tmp_path_factory.mktemp("results")
    res = runner.invoke(app, ["run", "all", "--size", "tiny", "--out", str(out)])
    return out, res


def test_registry_has_the_headline_first():
    assert next(iter(REGISTRY)) == HEADLINE == "leaky-collapse"


def test_list_shows_every_experiment():
    res = runner.invoke(app, ["list"])
    assert res.exit_code == 0
    for name in REGISTRY:
        assert re.search(rf"^{re.escape(name)}\s", res.stdout, re.M)


def test_run_all_tiny_passes_every_check(results):
    out, res = results
    failed = {n: store.load(out / n).failed() for n in REGISTRY if (out / n).exists()}
    assert res.exit_code == 0, f"failed checks: {failed}\n{res.output[-3000:]}"


@pytest.mark.parametrize("name", list(REGISTRY))
def test_output_contract(results, name):
    out, _ = results
    folder = out / name
    for f in ("result.json", "arrays.npz", "figure.png", "figure.pdf"):
        assert (folder / f).stat().st_size > 0, f"{name}: {f} missing or empty"
    doc = json.loads((folder / "result.json").read_text())
    assert set(store.RESULT_KEYS) <= set(doc)
    assert doc["experiment"] == name and doc["size"] == "tiny" and doc["seed"] == 0
    assert doc["checks"], f"{name} has no checks"
    for key, check in doc["checks"].items():
        assert {"value", "threshold", "passed", "claim"} <= set(check), key
        assert len(check["claim"]) > 20, f"{name}.{key}: state the claim in a sentence"
        assert check["passed"], f"{name}.{key}: {check}"
    with np.load(folder / "arrays.npz", allow_pickle=False) as z:
        assert z.files, f"{name}: no arrays saved"
    # paths written go to stdout
    assert str(folder / "result.json") in results[1].stdout


def test_report_shows_every_figure_and_check(results):
    out, _ = results
    res = runner.invoke(app, ["report", "--out", str(out)])
    assert res.exit_code == 0, res.output
    page = (out / "index.html").read_text()
    assert page == render(out)
    assert "http://" not in page and "https://" not in page, "report must work offline"
    assert page.count("data:image/png;base64,") == len(REGISTRY)
    for name in REGISTRY:
        doc = json.loads((out / name / "result.json").read_text())
        for key in doc["checks"]:
            assert f"<td>{name}</td><td>{key}</td>" in page


def test_saved_result_round_trips(results):
    out, _ = results
    res = store.load(out / HEADLINE)
    assert res.experiment == HEADLINE and res.passed
    assert set(res.arrays) >= {"t", "alphas", "loss_theory"}


def test_bad_cli_input_names_the_problem(tmp_path):
    res = runner.invoke(app, ["run", "no-such-experiment", "--out", str(tmp_path)])
    assert res.exit_code == 2 and "unknown experiment" in res.output
    res = runner.invoke(app, ["run", HEADLINE, "--size", "huge", "--out", str(tmp_path)])
    assert res.exit_code == 2 and "unknown preset 'huge'" in res.output
    res = runner.invoke(app, ["report", "--out", str(tmp_path)])
    assert res.exit_code == 2 and "no results" in res.output
    with pytest.raises(TypeError, match="takes a .*Config"):
        get(HEADLINE).run("tiny", 0)


def test_failed_check_is_reported_and_sets_exit_code(tmp_path, monkeypatch):
    from dataclasses import dataclass

    from biasfree.experiments.base import Experiment, Result, at_most, config_dict

    @dataclass(frozen=True)
    class Config:
        n: int = 2

    def failing(cfg, seed, progress=None):
        return Result("failing", seed, config_dict(cfg), {"x": 1.0},
                      {"impossible": at_most(1.0, 0.5, "One is not at most one half, so this fails.")},
                      {"x": np.zeros(cfg.n)})

    exp = Experiment("failing", "always fails", failing, Config, {"tiny": Config(), "paper": Config()})
    monkeypatch.setitem(REGISTRY, "failing", exp)
    res = runner.invoke(app, ["run", "failing", "--size", "tiny", "--out", str(tmp_path)])
    assert res.exit_code == 1
    doc = json.loads((tmp_path / "failing" / "result.json").read_text())
    assert doc["checks"]["impossible"]["passed"] is False
