"""Configurable, resumable runs: ``--preset``, ``--set``, ``--config``, ``show``, the skip
of finished experiments and a crash-safe save.

Most tests use a toy experiment registered only here (it runs in microseconds); the real
experiments are used where no training is needed (resolving configs, bad input, ``show``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from matplotlib.figure import Figure
from toys import give_figures, toy_experiment
from typer.testing import CliRunner

from biasfree import claims, store
from biasfree.app.cli import app
from biasfree.claims import REGISTRY, SIZES, ConfigError, get, resolve_config
from biasfree.claims.base import Experiment, config, run_experiment
from biasfree.claims.config import parse_set, read_config_file
from biasfree.results import Result, at_most, config_dict

runner = CliRunner()


@config
class ToyConfig:
    """``width`` units, ``lr`` step, ``alphas`` slopes, ``tag`` a label."""

    width: int = 4
    lr: float = 0.1
    alphas: tuple[float, ...] = (0.0, 1.0)
    tag: str = "a"

    def __post_init__(self):
        if self.width < 1:
            raise ValueError(f"width={self.width} must be >= 1 (toy validation)")


TOY_PRESETS = {"tiny": ToyConfig(width=2), "paper": ToyConfig()}


def make_toy(name: str, calls: list):
    def run(cfg: ToyConfig, seed: int = 0, progress=None) -> Result:
        calls.append((name, cfg, seed))
        return Result(name, seed, config_dict(cfg), {"width": float(cfg.width)},
                      {"ok": at_most(0.0, 1.0, "Zero is at most one, so this toy check passes.")},
                      {"w": np.arange(cfg.width) * cfg.lr + seed})

    return toy_experiment(name, "a toy experiment for the CLI tests", run, ToyConfig, TOY_PRESETS)


@pytest.fixture
def toy(monkeypatch):
    """Register ``toy`` and ``toy-b``; returns the list of their runs."""
    calls: list = []
    for name in ("toy", "toy-b"):
        monkeypatch.setitem(REGISTRY, name, make_toy(name, calls))
    return calls


def cli(*args):
    return runner.invoke(app, [str(a) for a in args])


def doc_of(out, name="toy") -> dict:
    return json.loads((out / name / "result.json").read_text())


# ----------------------------------------------------------------- parsing and resolving


@pytest.mark.parametrize("item, expected", [
    ("width=200", ("width", 200)),
    ("lr=0.01", ("lr", 0.01)),
    ("lr=1e-3", ("lr", 1e-3)),
    ("alphas=[0.0,0.5,1.0]", ("alphas", [0.0, 0.5, 1.0])),
    (" alphas = [0, 1] ", ("alphas", [0, 1])),
    ('tag="b"', ("tag", "b")),
    ("leaky-collapse.width=40", ("leaky-collapse.width", 40)),
])
def test_set_values_are_toml_literals(item, expected):
    assert parse_set(item) == expected


@pytest.mark.parametrize("item, message", [
    ("width", "expects FIELD=VALUE"), ("=3", "expects FIELD=VALUE"), ("width=", "expects FIELD=VALUE"),
    ("alphas=[0.0,", "not a TOML value"), ("tag=b", "not a TOML value"),
    ("x={a=1}", "a table is not a field value"),
])
def test_bad_set_items_name_the_problem(item, message):
    with pytest.raises(ConfigError, match=message):
        parse_set(item)


def test_values_are_coerced_to_the_field_types(toy):
    exp = get("toy")
    cfg = resolve_config(exp, "tiny", {"alphas": [0, 1], "lr": 1, "width": 7})
    assert cfg == ToyConfig(width=7, lr=1.0, alphas=(0.0, 1.0))
    assert isinstance(cfg.lr, float) and all(isinstance(a, float) for a in cfg.alphas)
    assert resolve_config(exp, "tiny") is TOY_PRESETS["tiny"]
    assert resolve_config(exp) is TOY_PRESETS["paper"]  # paper is the default preset
    for overrides, message in [({"width": 1.5}, "'width' expects int, got float 1.5"),
                               ({"width": True}, "'width' expects int, got bool"),
                               ({"lr": False}, "'lr' expects float, got bool"),
                               ({"alphas": 0.5}, "'alphas' expects a list"),
                               ({"alphas": [0.0, "x"]}, r"alphas\[1\]' expects float"),
                               ({"tag": 3}, "'tag' expects str"),
                               ({"width": 0}, "width=0 must be >= 1 \\(toy validation\\)")]:
        with pytest.raises(ConfigError, match=message):
            resolve_config(exp, "tiny", overrides)


def test_real_configs_coerce_tuples_by_element_type():
    cfg = resolve_config(get("deep"), "tiny", {"depths": [3, 4], "random_scales": [0.03, 1],
                                               "s": [3, 2, 1]})
    assert cfg.depths == (3, 4) and cfg.random_scales == (0.03, 1.0) and cfg.s == (3.0, 2.0, 1.0)
    assert all(type(d) is int for d in cfg.depths) and all(type(s) is float for s in cfg.s)
    with pytest.raises(ConfigError, match=r"depths\[0\]=2 must be >= 3 \(depth 2 is leaky-collapse\)"):
        resolve_config(get("deep"), "tiny", {"depths": [2], "random_scales": [0.03]})


def test_leaky_collapse_keeps_an_alphas_field():
    cfg = resolve_config(get("leaky-collapse"), "tiny", {"alphas": [0.0, 1.0], "width": 40})
    assert cfg.alphas == (0.0, 1.0) and cfg.width == 40


@pytest.mark.parametrize("name", [n for n in REGISTRY if not n.startswith("toy")])
def test_every_experiment_has_config_presets_and_a_config_run(name):
    exp = get(name)
    assert exp.config is not None and set(SIZES) <= set(exp.presets)
    assert all(isinstance(c, exp.config) for c in exp.presets.values())
    assert exp.config.__doc__ and "``" in exp.config.__doc__, "document the fields"
    with pytest.raises(TypeError, match="takes a .*Config"):
        run_experiment(exp, "tiny", 0)  # a preset's name is not a config: a clear error, before any work


# ----------------------------------------------------------------- the command line


def test_run_records_config_preset_and_overrides(toy, tmp_path):
    res = cli("run", "toy", "--preset", "tiny", "--set", "alphas=[0,0.5]", "--set", "width=7",
              "--set", "lr=0.01", "--out", tmp_path)
    assert res.exit_code == 0, res.output
    doc = doc_of(tmp_path)
    assert doc["config"] == {"width": 7, "lr": 0.01, "alphas": [0.0, 0.5], "tag": "a"}
    assert doc["preset"] == doc["size"] == "tiny"
    assert doc["overrides"] == {"alphas": [0.0, 0.5], "width": 7, "lr": 0.01}
    assert toy == [("toy", ToyConfig(width=7, lr=0.01, alphas=(0.0, 0.5)), 0)]
    loaded = store.load(tmp_path / "toy")
    assert loaded.preset == "tiny" and loaded.overrides == doc["overrides"]
    assert np.array_equal(loaded.arrays["w"], np.arange(7) * 0.01)
    for f in ("result.json", "arrays.npz", "figure.png", "figure.pdf"):
        assert str(tmp_path / "toy" / f) in res.stdout


def test_size_is_an_alias_of_preset(toy, tmp_path):
    assert cli("run", "toy", "--preset", "tiny", "--out", tmp_path).exit_code == 0
    assert doc_of(tmp_path)["config"]["width"] == 2 and doc_of(tmp_path)["preset"] == "tiny"


def test_config_file_then_set(toy, tmp_path):
    f = tmp_path / "cfg.toml"
    f.write_text('preset = "tiny"\nlr = 0.5\ntag = "file"\n\n[toy]\nwidth = 9\n\n'
                 '[toy-b]\nwidth = 5\n\n[deep]\nwidth = 64  # another experiment: ignored\n')
    assert read_config_file(f)["toy"] == {"width": 9}
    res = cli("run", "toy", "toy-b", "--config", f, "--set", "toy.tag='cli'", "--out", tmp_path / "o")
    assert res.exit_code == 0, res.output
    a, b = doc_of(tmp_path / "o", "toy"), doc_of(tmp_path / "o", "toy-b")
    assert a["preset"] == b["preset"] == "tiny"
    assert a["config"] == {"width": 9, "lr": 0.5, "alphas": [0.0, 1.0], "tag": "cli"}
    assert b["config"] == {"width": 5, "lr": 0.5, "alphas": [0.0, 1.0], "tag": "file"}
    assert a["overrides"] == {"lr": 0.5, "tag": "cli", "width": 9}
    # --preset on the command line wins over the file's
    res = cli("run", "toy", "--config", f, "--preset", "paper", "--out", tmp_path / "p")
    assert res.exit_code == 0 and doc_of(tmp_path / "p")["preset"] == "paper"


def test_several_names_run_once_each_in_order(toy, tmp_path):
    res = cli("run", "toy-b", "toy", "toy-b", "--preset", "tiny", "--set", "toy-b.width=3",
              "--out", tmp_path)
    assert res.exit_code == 0, res.output
    assert [(n, c.width) for n, c, _ in toy] == [("toy-b", 3), ("toy", 2)]


def test_no_name_runs_the_headline(toy, tmp_path, monkeypatch):
    import biasfree.claims as experiments

    monkeypatch.setattr(experiments, "HEADLINE", "toy-b")
    assert cli("run", "--preset", "tiny", "--out", tmp_path).exit_code == 0
    assert [n for n, _, _ in toy] == ["toy-b"]


def test_unknown_field_exits_2_listing_the_fields(toy, tmp_path):
    res = cli("run", "toy", "--set", "nonsense=1", "--out", tmp_path)
    assert res.exit_code == 2 and not toy
    for text in ("toy has no field 'nonsense'", "width: int = 4", "lr: float = 0.1",
                 "alphas: tuple[float, ...] = (0.0, 1.0)", "tag: str = 'a'"):
        assert text in res.output, res.output
    res = cli("run", "generalisation", "--preset", "tiny", "--set", "nonsense=1", "--out", tmp_path)
    assert res.exit_code == 2 and "t_max: float = 200.0" in res.output, res.output
    assert not (tmp_path / "generalisation").exists()


@pytest.mark.parametrize("args, message", [
    (["--set", "width=0"], "width=0 must be >= 1 (toy validation)"),
    (["--set", "width=2.5"], "'width' expects int, got float 2.5"),
    (["--set", "alphas=[0.0,"], "not a TOML value"),
    (["--preset", "huge"], "unknown preset 'huge' for toy; choose one of tiny, paper"),
    (["--set", "nosuch.width=3"], "unknown experiment(s) nosuch"),
    (["--set", "toy-b.width=3"], "--set toy-b.width: toy-b is not being run (running: toy)"),
    (["--config", "missing.toml"], "cannot read config file"),
])
def test_bad_input_exits_2_with_the_message(toy, tmp_path, args, message):
    res = cli("run", "toy", *args, "--out", tmp_path)
    assert res.exit_code == 2 and message in " ".join(res.output.split()), res.output
    assert not toy and not (tmp_path / "toy").exists()


def test_an_unscoped_field_some_experiments_lack_names_them_and_the_scoped_form(tmp_path):
    res = cli("run", "all", "--set", "width=40", "--out", tmp_path)
    assert res.exit_code == 2, res.output  # it once named only the first lacking one, with no way out
    text = " ".join(res.output.split())
    assert "'width' is not a field of bias-free-denoiser, conv-collapse" in text
    assert "scope it to one: NAME.FIELD=VALUE" in text


def test_bad_value_of_a_real_experiment_shows_its_validation(tmp_path):
    res = cli("run", "generalisation", "--set", "width=3", "--out", tmp_path)
    assert res.exit_code == 2 and "width=3 must be even" in res.output, res.output
    res = cli("run", "breaking", "--set", "lr=-0.1", "--set", "steps=0", "--out", tmp_path)
    assert res.exit_code == 2 and "lr=-0.1 must be > 0; steps=0 must be >= 1" in res.output, res.output
    bad = tmp_path / "bad.toml"
    bad.write_text("width = = 3\n")
    res = cli("run", "generalisation", "--config", bad, "--out", tmp_path)
    assert res.exit_code == 2 and f"config file {bad} is not valid TOML" in res.output, res.output
    bad.write_bytes(b"# \xe9tude\nwidth = 40\n")  # Latin-1: once a bare codec message
    res = cli("run", "generalisation", "--config", bad, "--out", tmp_path)
    assert res.exit_code == 2 and f"config file {bad} is not UTF-8 text" in " ".join(res.output.split())


def test_show_prints_claim_fields_and_presets():
    # a wide terminal, so no cell folds a value across lines (80 columns: tests/app/test_cli_show.py)
    res = runner.invoke(app, ["show", "generalisation"], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    exp = get("generalisation")
    text = " ".join(res.stdout.split())
    assert " ".join(exp.claim.split())[:40] in text
    for f in ("d", "alphas", "t_max", "flow_records", "tuple[float, ...]", "tiny", "paper"):
        assert f in text
    assert "120.0" in text and "200.0" in text  # t_max of tiny and paper
    assert "bounds" in text and ">= 100" in text  # the bounds column: n_test >= 100
    assert cli("show", "nosuch").exit_code == 2


# ----------------------------------------------------------------- resume and crash safety


def test_rerun_skips_a_matching_result_and_force_reruns(toy, tmp_path):
    args = ("run", "toy", "--preset", "tiny", "--out", tmp_path)
    assert cli(*args).exit_code == 0 and len(toy) == 1
    before = (tmp_path / "toy" / "result.json").read_bytes()
    res = cli(*args)
    assert res.exit_code == 0 and len(toy) == 1, res.output
    assert "toy skipped" in res.output and "same config, seed 0" in res.output
    assert "result.json" not in res.stdout  # nothing written
    assert (tmp_path / "toy" / "result.json").read_bytes() == before
    res = cli(*args, "--force")
    assert res.exit_code == 0 and len(toy) == 2 and "rerunning" in res.output
    res = cli(*args, "--seed", "1")
    assert len(toy) == 3 and "seed differs" in res.output and doc_of(tmp_path)["seed"] == 1
    res = cli(*args, "--seed", "1", "--set", "width=3")
    assert len(toy) == 4 and "config differs: width 2 -> 3" in " ".join(res.output.split())
    # same effective config reached another way: still a match
    res = cli("run", "toy", "--preset", "paper", "--set", "width=3", "--seed", "1", "--out", tmp_path)
    assert len(toy) == 4 and "skipped" in res.output
    # another biasfree version computed it: rerun
    doc = doc_of(tmp_path)
    doc["versions"]["biasfree"] = "0.0.0-old"
    (tmp_path / "toy" / "result.json").write_text(json.dumps(doc))
    res = cli(*args, "--seed", "1", "--set", "width=3")
    assert len(toy) == 5 and "biasfree version differs" in res.output


def test_skipped_failing_result_still_exits_1(toy, tmp_path):
    assert cli("run", "toy", "--preset", "tiny", "--out", tmp_path).exit_code == 0
    doc = doc_of(tmp_path)
    doc["checks"]["ok"]["value"] = 5.0  # as if the saved run had failed its check
    (tmp_path / "toy" / "result.json").write_text(json.dumps(doc))
    res = cli("run", "toy", "--preset", "tiny", "--out", tmp_path)
    assert res.exit_code == 1 and len(toy) == 1 and "skipped" in res.output


class _BrokenFigure(Figure):
    def savefig(self, fh, **kw):
        fh.write(b"half a figure")
        raise RuntimeError("disk full while saving the figure")


def test_failed_save_leaves_the_old_result_intact(toy, tmp_path, monkeypatch):
    assert cli("run", "toy", "--preset", "tiny", "--out", tmp_path).exit_code == 0
    folder = tmp_path / "toy"
    old = {p.name: p.read_bytes() for p in folder.iterdir()}
    give_figures(monkeypatch, "toy", figure=lambda result: _BrokenFigure())
    res = cli("run", "toy", "--preset", "tiny", "--seed", "1", "--out", tmp_path)
    assert res.exit_code != 0 and isinstance(res.exception, RuntimeError)
    assert len(toy) == 2  # it ran; only the save failed
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == old  # seed 0, complete
    assert sorted(p.name for p in tmp_path.iterdir()) == ["toy"]  # no temporary folder left


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", ""])
    proc.wait()
    return proc.pid


def test_leftovers_of_a_killed_save_are_cleaned_or_restored(toy, tmp_path):
    args = ("run", "toy", "--preset", "tiny", "--out", tmp_path)
    assert cli(*args).exit_code == 0
    dead = _dead_pid()
    # killed between its two renames: the old result aside, nothing in place
    os.rename(tmp_path / "toy", tmp_path / f".toy.old-{dead}-abcd1234")
    half = tmp_path / f".toy.tmp-{dead}-xyz"  # killed while writing the new one
    half.mkdir()
    (half / "result.json").write_text('{"experiment": "toy", "seed": 1')
    alive = tmp_path / f".toy.tmp-{os.getppid()}-busy"  # a save still running elsewhere
    alive.mkdir()
    assert [r for r, _ in store.load_all(tmp_path)] == []  # in-progress folders are not results
    res = cli(*args, "--seed", "1")
    assert res.exit_code == 0 and len(toy) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == [alive.name, "toy"]
    assert doc_of(tmp_path)["seed"] == 1
    # a kill between the renames, then a rerun that can reuse the restored result
    os.rename(tmp_path / "toy", tmp_path / f".toy.old-{dead}-0000")
    store.clean_leftovers(tmp_path, "toy")
    res = cli(*args, "--seed", "1")
    assert len(toy) == 2 and "skipped" in res.output


def test_a_result_without_a_figure_is_a_clear_error():
    res = Result("toy-without-figure", 0, {}, {}, {})
    with pytest.raises(LookupError, match="'toy-without-figure' has no figure: register it"):
        claims.figure(res)


def test_a_missing_figure_is_a_crash_not_a_fallback(toy, tmp_path, monkeypatch):
    give_figures(monkeypatch, "toy", figure=None)
    res = cli("run", "toy", "--preset", "tiny", "--out", tmp_path)
    assert res.exit_code == 3 and "has no figure" in res.output, res.output
    assert not (tmp_path / "toy" / "result.json").exists()


def test_a_result_without_its_claim_sentence_gets_the_registrys_in_its_title(toy, monkeypatch):
    titles = []
    give_figures(monkeypatch, "toy", figure=lambda result: titles.append(result.claim))
    claims.figure(Result("toy", 0, {}, {}, {}))  # as loaded from a result.json of before
    claims.figure(Result("toy", 0, {}, {}, {}, claim="its own sentence"))
    assert titles == ["a toy experiment for the CLI tests", "its own sentence"]


def test_old_result_files_without_preset_still_load(toy, tmp_path):
    assert cli("run", "toy", "--preset", "tiny", "--out", tmp_path).exit_code == 0
    doc = doc_of(tmp_path)
    del doc["preset"], doc["overrides"]
    (tmp_path / "toy" / "result.json").write_text(json.dumps(doc))
    res = store.load(tmp_path / "toy")
    assert res.preset == "tiny" and res.overrides == {}


def test_interrupted_run_keeps_finished_results_and_the_rerun_does_the_rest(toy, tmp_path, monkeypatch):
    calls_b = []

    def interrupted(cfg, seed=0, progress=None):
        calls_b.append(cfg)
        raise KeyboardInterrupt  # Ctrl-C while toy-b computes

    monkeypatch.setitem(REGISTRY, "toy-b", toy_experiment("toy-b", "interrupted", interrupted, ToyConfig,
                                                          TOY_PRESETS))
    args = ("run", "toy", "toy-b", "--preset", "tiny", "--out", tmp_path)
    res = cli(*args)
    assert res.exit_code != 0 and len(toy) == 1 and len(calls_b) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["toy"]
    monkeypatch.setitem(REGISTRY, "toy-b", make_toy("toy-b", toy))
    res = cli(*args)
    assert res.exit_code == 0, res.output
    assert [n for n, _, _ in toy] == ["toy", "toy-b"] and "toy skipped" in res.output


def test_an_experiment_whose_config_is_not_a_config_class_is_refused_by_name():
    from dataclasses import dataclass

    @dataclass(frozen=True)
    class Plain:
        width: int = 3

    with pytest.raises(TypeError, match="bare: config=.*Plain.* is not a config class; make it with "
                                        "@biasfree.claims.base.config"):
        Experiment("bare", "a claim", Plain, {"tiny": Plain()})
