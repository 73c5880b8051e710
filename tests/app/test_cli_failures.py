"""The CLI's and the store's failure paths (issue 13 item 5, issue 19 items 3-4): bad
``--out``/``--seed``/``--set``/names/files are refused before JAX is imported, with exit 2
and one line; an experiment that raises exits 3 with its traceback saved, and the others
still run; a save killed by SIGKILL or interrupted by
SIGINT never leaves a mixed or half-written result, and what a kill leaves behind is
cleaned by the next run; ``report`` skips an unreadable result, names the file, writes
the page for the rest and exits non-zero.

A toy experiment registered only here keeps the runs to microseconds; the two kill tests
run ``store.save`` in child processes (started together, to share the import time).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
from toys import toy_experiment
from typer.testing import CliRunner

from biasfree import store
from biasfree.app.cli import app
from biasfree.claims import REGISTRY
from biasfree.claims.base import Experiment, config, run_experiment
from biasfree.results import Result, at_most, config_dict

runner = CliRunner()


@config
class ToyConfig:
    width: int = 3


def _toy(name: str, calls: list) -> Experiment:
    def run(cfg: ToyConfig, seed: int = 0, progress=None) -> Result:
        calls.append((name, seed))
        if name == "toy-crash" or cfg.width == 13:  # width 13: a config that crashes any toy
            raise ZeroDivisionError("a bug inside the experiment\nsecond line of the message")
        return Result(name, seed, config_dict(cfg), {"width": float(cfg.width)},
                      {"ok": at_most(0.0, 1.0, "Zero is at most one, so this toy check passes.")},
                      {"w": np.arange(cfg.width) + seed})

    return toy_experiment(name, "a toy experiment for the failure-path tests", run, ToyConfig,
                          {"tiny": ToyConfig(2), "paper": ToyConfig()})


@pytest.fixture
def toy(monkeypatch):
    calls: list = []
    for name in ("toy", "toy-b", "toy-crash"):
        monkeypatch.setitem(REGISTRY, name, _toy(name, calls))
    return calls


def cli(*args):
    return runner.invoke(app, [str(a) for a in args])


# ------------------------------------------------------------------ --out and --seed


@pytest.mark.parametrize("out, why", [
    ("/proc/x", "not a writable folder"),
    ("/dev/null", "is a file"),
    ("/etc/hostname/sub", "not a writable folder"),
])
def test_bad_out_exits_2_before_running_anything(toy, out, why):
    t0 = time.perf_counter()
    res = cli("run", "toy", "--preset", "tiny", "--out", out)
    assert res.exit_code == 2 and toy == [], res.output
    assert "--out" in res.output and why in res.output and "Traceback" not in res.output
    assert time.perf_counter() - t0 < 5.0


def test_a_refused_command_leaves_no_out_folder_behind(toy, tmp_path):
    out = tmp_path / "new" / "results"
    for args in (["run", "no-such-experiment"], ["run", "toy", "--set", "nonsense=1"]):
        res = cli(*args, "--out", out)
        assert res.exit_code == 2 and toy == [], res.output
        assert not (tmp_path / "new").exists()  # the probe's folders were removed again
    assert cli("run", "toy", "--preset", "tiny", "--out", out).exit_code == 0  # the save makes them
    assert (out / "toy" / "result.json").exists()


@pytest.mark.parametrize("seed, why", [("-1", ">= 0"), (str(2**31), "<= 2147483647")])
def test_bad_seed_exits_2_before_running_anything(toy, tmp_path, seed, why):
    res = cli("run", "toy", "--preset", "tiny", "--seed", seed, "--out", tmp_path / "r")
    assert res.exit_code == 2 and toy == [], res.output
    assert "--seed" in res.output and why in res.output
    assert not (tmp_path / "r").exists()  # refused before the folder was made


def test_out_is_created_and_the_largest_seed_runs(toy, tmp_path):
    out = tmp_path / "new" / "deeper"
    res = cli("run", "toy", "--preset", "tiny", "--seed", 2**31 - 1, "--out", out)
    assert res.exit_code == 0, res.output
    assert json.loads((out / "toy" / "result.json").read_text())["seed"] == 2**31 - 1
    assert not [p for p in out.iterdir() if p.name.startswith(".")]  # the write probe is gone


@pytest.mark.parametrize("seed, exc", [(-1, ValueError), (2**31, ValueError), (1.5, TypeError),
                                       (True, TypeError), ("3", TypeError)])
def test_run_experiment_checks_the_seed_like_the_cli(toy, seed, exc):
    with pytest.raises(exc, match="^seed"):
        run_experiment(REGISTRY["toy"], ToyConfig(), seed)
    assert toy == []


# ------------------------------------------------------------------ refused before JAX loads

REFUSE = textwrap.dedent("""
    import contextlib, io, json, sys
    from biasfree.app.cli import app
    HEAVY = set(json.loads(sys.argv[2]))
    out = []
    for args in json.loads(sys.argv[1]):
        buf = io.StringIO()
        with contextlib.redirect_stderr(buf), contextlib.redirect_stdout(io.StringIO()):
            try:
                app(args, prog_name="biasfree")
                code = 0
            except SystemExit as e:
                code = e.code
        out.append([code, buf.getvalue()])
    print(json.dumps({"results": out, "heavy": sorted({m.split(".")[0] for m in sys.modules} & HEAVY),
                      "experiments": sorted(m for m in sys.modules if m.startswith("biasfree.claims.")
                                            and m.endswith((".run", ".figure")))}))
""")
HEAVY = {"jax", "jaxlib", "scipy", "optax", "equinox", "diffrax", "matplotlib", "torch"}
"""What a refusal never imports: JAX and the libraries built on it, SciPy, matplotlib, torch
(``import biasfree`` binds its entry points lazily; each command imports after its checks)."""


def test_bad_arguments_are_refused_before_any_work(tmp_path):
    """Every refusal below happens in one fresh process that never imports JAX (nor SciPy,
    matplotlib, ...: :data:`HEAVY`) nor any experiment's run or figure module (the registry
    and the configs are light): exit 2, one line that names the problem. On main before
    issue 48, ``import biasfree`` imported JAX (about 2.5 s of a refusal's 3 s here), the
    analyse option values were checked after it, and click's usage errors were a boxed panel."""
    a_file = tmp_path / "a_file"
    a_file.write_text("")
    model = [str(a_file), "--data", "d.npz"]  # no file is read before the options are checked
    cases = [
        (["run", "--out", "/proc/nope"], "--out='/proc/nope' is not a writable folder"),
        (["run", "--out", str(a_file)], "is a file, not a folder"),
        (["run", "nosuch", "--out", str(tmp_path)], "unknown experiment 'nosuch'; known: leaky-collapse"),
        (["run", "deep", "--set", "width=[1,", "--out", str(tmp_path)], "is not a TOML value"),
        (["run", "deep", "--set", "nonsense=1", "--out", str(tmp_path)], "deep has no field 'nonsense'"),
        (["run", "deep", "--set", "leaky-collapse.width=10", "--out", str(tmp_path)],
         "leaky-collapse is not being run (running: deep)"),
        (["run", "deep", "--config", str(tmp_path / "no.toml"), "--out", str(tmp_path)],
         "cannot read config file"),
        (["run", "deep", "--preset", "huge", "--out", str(tmp_path)], "unknown preset 'huge'"),
        (["run", "deep", "--set", "lr=-1", "--out", str(tmp_path)], "lr=-1 must be > 0"),
        (["report", "--out", str(tmp_path / "none")], "does not exist, so it holds no results"),
        (["analyse", str(tmp_path / "no.npz")], "MODEL="),
        (["analyse", str(a_file), "--out", "/proc/nope"], "--out='/proc/nope' is not a writable"),
        (["analyse", str(a_file), "--alpha", "0", "--train"], "analyse needs --data"),
        (["sweep", str(tmp_path / "no.toml")], "SPEC="),
        (["sweep", str(a_file), "--out", str(a_file)], "is a file, not a folder"),
        (["analyse", *model, "--train-steps", "5", "--lr", "nan"], "--lr=nan must be finite"),
        (["analyse", *model, "--train-steps", "5", "--lr", "-1"], "--lr=-1.0 must be > 0"),
        (["analyse", *model, "--train-steps", "5", "--time-budget", "0"], "--time-budget=0.0 must be > 0"),
        (["analyse", *model, "--t-max", "inf"], "--t-max=inf must be finite"),
        (["analyse", *model, "--alpha", "2"], "--alpha=2.0 is outside [0, 1]"),
        (["analyse", *model, "--train", "--optimiser", "adamm"], "--optimiser 'adamm': choose gd or one of"),
        (["analyse", *model, "--train", "--train-steps", "5"], "not both"),
        (["analyse", *model, "--train", "--optimiser", "adam", "--out", "/proc/nope"], "--out='/proc/nope'"),
        # click's usage errors: one line naming the command's --help, not Typer's boxed panel
        (["run", "--seed", "abc"], "Invalid value for '--seed'"),
        (["run", "--set"], "Option '--set' requires an argument. (see: biasfree"),
        (["list", "extra"], "unexpected extra argument"),
        (["analyse"], "Missing argument 'model'"),
        (["analyse", *model, "--n-records", "1"], "Invalid value for '--n-records'"),
        (["nosuch"], "No such command 'nosuch'. (see: biasfree --help)"),
        ([], "Missing command. (see: biasfree --help)"),
    ]
    env = {**os.environ, "COLUMNS": "400"}
    proc = subprocess.run([sys.executable, "-c", REFUSE, json.dumps([c for c, _ in cases]),
                           json.dumps(sorted(HEAVY))],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    for (args, want), (code, text) in zip(cases, report["results"], strict=True):
        first = text.splitlines()[0] if text else ""
        assert code == 2 and first.startswith("error: ") and want in first, (args, code, text)
        assert "Traceback" not in text, (args, text)
        if "nonsense=1" not in args:  # an unknown field lists the valid ones below its line
            assert len(text.strip().splitlines()) == 1, (args, text)
    assert report["heavy"] == [] and report["experiments"] == []


def test_python_dash_m_biasfree_refuses_in_one_line_without_importing_jax(tmp_path):
    """``python -m biasfree`` is the command (src/biasfree/__main__.py; main had none), and a
    refusal's imports, as ``-X importtime`` lists them, hold no JAX and no SciPy. Not timed
    (a shared machine's load decides the wall time); the import list decides it instead."""
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "biasfree", "run", "--seed", "-1",
                           "--out", str(tmp_path)], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "COLUMNS": "400"})
    imported = {ln.rsplit("|", 1)[1].strip().split(".")[0] for ln in proc.stderr.splitlines()
                if ln.startswith("import time:") and "|" in ln}
    said = [ln for ln in proc.stderr.splitlines() if not ln.startswith("import time:")]
    assert proc.returncode == 2 and said == ["error: --seed=-1 must be >= 0"], proc.stderr[-2000:]
    assert {"typer", "biasfree"} <= imported and not imported & HEAVY, sorted(imported & HEAVY)


def test_analyse_refuses_a_diverging_lr_and_a_1d_x_in_one_line(tmp_path):
    """Two refusals only a computation or a file's contents find: a --lr that makes training
    diverge (main: DivergenceError's traceback, exit 1) and a 1-D X in --data (main: an
    IndexError inside load_data): each exit 2, one line naming the option and the fix."""
    import jax

    import biasfree as bf

    rng = np.random.default_rng(0)
    X = rng.normal(size=(20, 4))
    X = np.concatenate([X, -X])
    np.savez(tmp_path / "d.npz", X=X, Y=X[:, :1] / 3)
    np.savez(tmp_path / "x1.npz", X=X[:, 0], Y=X[:, :1] / 3)
    bf.save_model(bf.init_gaussian(jax.random.PRNGKey(0), (4, 8, 1), scale=0.01), tmp_path / "m.safetensors")
    common = ["analyse", tmp_path / "m.safetensors", "--alpha", "0", "--out", tmp_path / "out"]
    for args, want in (
        (["--data", tmp_path / "d.npz", "--train-steps", "20", "--lr", "1e6"],
         ["--lr 1e+06: gradient descent diverged at step", "try lr="]),
        (["--data", tmp_path / "d.npz", "--train", "--optimiser", "adam", "--lr", "1e9"],
         ["--lr 1e+09: training by adam diverged at step"]),
        (["--data", tmp_path / "x1.npz"], [f"--data {tmp_path / 'x1.npz'}: inputs X must have shape (N, d), "
                                           "got (40,); reshape 1-D x to (N, 1)"]),
    ):
        res = runner.invoke(app, [str(a) for a in common + args], env={"COLUMNS": "1000"})
        lines = res.output.strip().splitlines()
        assert res.exit_code == 2 and len(lines) == 1 and lines[0].startswith("error: "), res.output
        assert all(w in lines[0] for w in want) and "Traceback" not in res.output, (want, res.output)
        assert res.exception is None or isinstance(res.exception, SystemExit), res.exception


def test_the_option_names_checked_before_jax_are_the_trainers():
    """analyse_options holds --optimiser's names and --train's steps as literals (it imports no
    JAX): they must be those of the optimisers table and of TrainConfig."""
    from biasfree.app import analyse_options
    from biasfree.dynamics import TrainConfig
    from biasfree.dynamics.optimiser_twin import NAMED

    assert analyse_options.OPTIMISERS == tuple(NAMED)
    assert analyse_options.TRAIN_STEPS == TrainConfig.__dataclass_fields__["steps"].default


def test_the_registry_lists_every_claim_folder_once():
    """The registry is an explicit list: a claim folder left out of it is caught here."""
    from pathlib import Path

    from biasfree import claims

    folders = {p.name for p in Path(claims.__file__).parent.iterdir() if (p / "__init__.py").exists()}
    assert sorted(n.replace("-", "_") for n in claims.NAMES) == sorted(folders)
    assert list(claims.NAMES) == [n for n in REGISTRY if not n.startswith("toy")]


# ------------------------------------------------------------------ a crash is not a result


def test_a_crash_exits_3_records_the_traceback_and_the_others_run(toy, tmp_path):
    res = cli("run", "toy-crash", "toy", "--preset", "tiny", "--seed", "7", "--set", "width=4",
              "--out", tmp_path)
    assert res.exit_code == 3, res.output
    assert [n for n, _ in toy] == ["toy-crash", "toy"]  # the second still ran
    assert (tmp_path / "toy" / "result.json").exists()
    line = next(ln for ln in res.output.splitlines() if "crashed (" in ln)
    for text in ("toy-crash crashed (seed 7, preset tiny", "'width': 4",
                 "ZeroDivisionError: a bug inside the experiment", "traceback.txt"):
        assert text in " ".join(res.output.split()), text
    assert "second line" not in line and "Traceback" not in res.output
    folder = tmp_path / "toy-crash"
    assert sorted(p.name for p in folder.iterdir()) == ["error.json", "traceback.txt"]
    doc = json.loads((folder / "error.json").read_text())
    assert doc["error"] == "ZeroDivisionError" and doc["seed"] == 7 and doc["overrides"] == {"width": 4}
    assert doc["config"] == {"width": 4} and doc["preset"] == "tiny" and doc["exit_code"] == 3
    assert "Traceback" in (folder / "traceback.txt").read_text()
    assert "raise ZeroDivisionError" in (folder / "traceback.txt").read_text()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # written atomically
    # the report shows it as a crashed card, beside the good result
    assert cli("report", "--out", tmp_path).exit_code == 0
    page = (tmp_path / "index.html").read_text()
    assert 'class="card crashed" id="exp-toy-crash"' in page and 'id="exp-toy"' in page
    assert "1 crashed (no result, not counted)" in page
    # a rerun reruns it (a crash record is never reused as a result)
    res = cli("run", "toy-crash", "--preset", "tiny", "--seed", "7", "--set", "width=4",
              "--out", tmp_path)
    assert res.exit_code == 3 and [n for n, _ in toy].count("toy-crash") == 2


def test_a_crashed_rerun_keeps_the_last_result_in_previous(toy, tmp_path):
    assert cli("run", "toy", "--preset", "tiny", "--out", tmp_path).exit_code == 0
    folder = tmp_path / "toy"
    good = {p.name: p.read_bytes() for p in folder.iterdir()}
    for _ in range(2):  # a crash over a crash keeps the same last result
        res = cli("run", "toy", "--preset", "tiny", "--set", "width=13", "--out", tmp_path)
        assert res.exit_code == 3, res.output
        assert "its last result kept in" in " ".join(res.output.split())
        assert sorted(p.name for p in folder.iterdir()) == ["error.json", "previous", "traceback.txt"]
        assert {p.name: p.read_bytes() for p in (folder / "previous").iterdir()} == good
    assert store.load(folder / "previous").metrics == {"width": 2.0}
    assert [d["experiment"] for d in store.load_crashes(tmp_path)] == ["toy"]  # still a crash record
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # written atomically
    # a good rerun replaces the folder as a unit: no crash record, no previous/
    assert cli("run", "toy", "--preset", "tiny", "--out", tmp_path).exit_code == 0
    assert sorted(p.name for p in folder.iterdir()) == sorted(good)


def test_a_saved_result_with_damaged_arrays_is_rerun_not_a_traceback(toy, tmp_path):
    assert cli("run", "toy", "--preset", "tiny", "--out", tmp_path).exit_code == 0
    (tmp_path / "toy" / "arrays.npz").write_bytes(b"PK\x03\x04 not a zip")
    res = cli("run", "toy", "--preset", "tiny", "--out", tmp_path)
    assert res.exit_code == 0 and "Traceback" not in res.output, res.output
    assert "rerunning: arrays.npz unreadable" in " ".join(res.output.split())
    assert [n for n, _ in toy] == ["toy", "toy"] and store.load(tmp_path / "toy").passed


# ------------------------------------------------------------------ report


def test_report_on_one_experiments_folder_names_the_folder_to_give(toy, tmp_path):
    assert cli("run", "toy", "--preset", "tiny", "--out", tmp_path).exit_code == 0
    res = cli("report", "--out", tmp_path / "toy")
    assert res.exit_code == 2, res.output  # it once said "run `biasfree run all` first"
    assert f"one experiment's folder; give the folder that holds it: --out {tmp_path}" in res.output


@pytest.mark.parametrize("key, value, why", [("config", [1], "config is list, not dict"),
                                             ("experiment", 3, "experiment is int, not str"),
                                             ("notes", 5, "notes is int, not str"),
                                             ("versions", "x", "versions is str, not dict")])
def test_report_skips_a_hand_edited_result_of_the_wrong_types(toy, tmp_path, key, value, why):
    """Each of these was a traceback (AttributeError, TypeError) inside the page's rendering."""
    assert cli("run", "toy", "toy-b", "--preset", "tiny", "--out", tmp_path).exit_code == 0
    path = tmp_path / "toy-b" / "result.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), key: value}))
    res = cli("report", "--out", tmp_path)
    assert res.exit_code == 1 and "Traceback" not in res.output, res.output
    assert f"malformed ({why})" in " ".join(res.output.split())


def test_report_skips_a_truncated_result_names_it_and_exits_1(toy, tmp_path):
    assert cli("run", "toy", "toy-b", "--preset", "tiny", "--out", tmp_path).exit_code == 0
    bad = tmp_path / "toy-b" / "result.json"
    bad.write_bytes(bad.read_bytes()[:57])  # a write cut short
    res = cli("report", "--out", tmp_path)
    assert res.exit_code == 1, res.output
    assert str(bad) in res.output and "warning" in res.output and "not valid JSON" in res.output
    page = (tmp_path / "index.html").read_text()
    assert 'id="exp-toy"' in page and 'id="exp-toy-b"' not in page  # the good one is shown
    assert 'id="skipped"' in page and "toy-b/result.json" in page  # the bad one is marked
    with pytest.raises(store.CorruptResult, match="toy-b/result.json: not valid JSON"):
        store.load_all(tmp_path)  # without a list to collect them, it still refuses


def test_report_skips_corrupt_arrays_and_incomplete_folders(toy, tmp_path):
    assert cli("run", "toy", "toy-b", "--preset", "tiny", "--out", tmp_path).exit_code == 0
    (tmp_path / "toy-b" / "arrays.npz").write_bytes(b"PK\x03\x04 not a zip")
    (tmp_path / "half").mkdir()  # a folder with result files but no result.json
    (tmp_path / "half" / "arrays.npz").write_bytes(b"")
    (tmp_path / "unrelated").mkdir()  # other folders are not results and not warned about
    skipped: list = []
    results = store.load_all(tmp_path, skipped)
    assert [r.experiment for r, _ in results] == ["toy"]
    assert sorted(e.path.relative_to(tmp_path).as_posix() for e in skipped) == \
        ["half/result.json", "toy-b/arrays.npz"]
    res = cli("report", "--out", tmp_path)
    assert res.exit_code == 1 and "toy-b/arrays.npz" in res.output and "unrelated" not in res.output


def test_report_with_only_unreadable_results_still_writes_the_page(toy, tmp_path):
    assert cli("run", "toy", "--preset", "tiny", "--out", tmp_path).exit_code == 0
    (tmp_path / "toy" / "result.json").write_text('["a list, not a result"]')
    res = cli("report", "--out", tmp_path)
    assert res.exit_code == 1 and "not a JSON object" in res.output
    assert 'id="skipped"' in (tmp_path / "index.html").read_text()


def test_report_of_an_empty_or_missing_folder_exits_2(tmp_path):
    for out in (tmp_path, tmp_path / "missing"):
        res = cli("report", "--out", out)
        assert res.exit_code == 2 and "no results" in res.output


# ------------------------------------------------------------------ kills mid-save

CHILD = textwrap.dedent("""
    import signal, sys, time
    # Ctrl-C raises KeyboardInterrupt even when this test runs in a background job, whose
    # children inherit SIGINT ignored (a clean-clone run under `nohup ... &` hung here)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    from pathlib import Path
    import numpy as np
    from biasfree import store
    from biasfree.results import Result, at_most

    out, seed, marker = Path(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3])

    from matplotlib.figure import Figure

    class Stuck(Figure):  # a figure whose save hangs half-written
        def savefig(self, fh, **kw):
            fh.write(b"half a figure")
            fh.flush()
            marker.write_text("saving")
            time.sleep(120)

    res = Result("toy", seed, {"width": 2}, {"m": 1.0}, {"ok": at_most(0.0, 1.0, "Zero <= one.")},
                 {"w": np.arange(3.0)})
    store.save(res, out, 0.0, None if seed == 0 else Stuck())
""")


def _child(out, seed, marker):
    return subprocess.Popen([sys.executable, "-c", CHILD, str(out), str(seed), str(marker)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _wait_for(proc, marker, limit=90.0):
    t0 = time.perf_counter()
    while not marker.exists():
        assert proc.poll() is None, proc.stderr.read().decode()
        assert time.perf_counter() - t0 < limit, "child never reached the save"
        time.sleep(0.05)


def test_sigkill_and_sigint_mid_save(toy, tmp_path):
    """A real SIGKILL and a real SIGINT while the new result's figure is half written."""
    killed, interrupted = tmp_path / "killed", tmp_path / "interrupted"
    for out in (killed, interrupted):  # a complete seed-0 result to protect
        assert cli("run", "toy", "--preset", "tiny", "--out", out).exit_code == 0
    old = {d: (d / "toy" / "result.json").read_bytes() for d in (killed, interrupted)}
    procs = {d: _child(d, 1, tmp_path / f"{d.name}.marker") for d in (killed, interrupted)}
    for d, proc in procs.items():
        _wait_for(proc, tmp_path / f"{d.name}.marker")
    procs[killed].send_signal(signal.SIGKILL)
    procs[interrupted].send_signal(signal.SIGINT)
    for d, proc in procs.items():  # communicate drains the pipes: a chatty child cannot block on them
        try:
            proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
            raise AssertionError(f"{d.name} child still running 60 s after its signal:\n"
                                 f"{err.decode()[-3000:]}") from None
    assert procs[killed].returncode == -signal.SIGKILL
    assert procs[interrupted].returncode != 0
    for d in (killed, interrupted):  # the old result is whole either way
        assert (d / "toy" / "result.json").read_bytes() == old[d]
    assert sorted(p.name for p in interrupted.iterdir()) == ["toy"]  # Ctrl-C cleans up itself
    left = [p.name for p in killed.iterdir() if p.name.startswith(".toy.tmp-")]
    assert len(left) == 1  # a kill cannot clean up...
    res = cli("run", "toy", "--preset", "tiny", "--out", killed)  # ...the next run does,
    assert res.exit_code == 0 and "skipped" in res.output  # even one that skips the experiment
    assert sorted(p.name for p in killed.iterdir()) == ["toy"]


def test_killed_report_write_leaves_a_temp_file_the_next_report_removes(toy, tmp_path):
    assert cli("run", "toy", "--preset", "tiny", "--out", tmp_path).exit_code == 0
    proc = subprocess.Popen([sys.executable, "-c", ""])
    proc.wait()
    stale = tmp_path / f".index.html.tmp-{proc.pid}-abc"  # what a killed atomic_write leaves
    stale.write_text("<html>half")
    assert cli("report", "--out", tmp_path).exit_code == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["index.html", "toy"]
    assert not os.path.exists(stale)


def test_write_json_is_atomic_and_makes_its_folder(tmp_path, monkeypatch):
    """The benchmarks' ``--json FILE`` (store.write_json): a new folder is made, the file reads
    back, and a write that fails leaves the old file whole and no temporary file."""
    path = tmp_path / "new" / "bench.json"
    store.write_json(path, {"ratio": 1.5, "rows": [1, 2]})
    assert json.loads(path.read_text()) == {"ratio": 1.5, "rows": [1, 2]}
    with pytest.raises(TypeError):
        store.write_json(path, {"bad": object()})  # json refuses it before anything is written
    monkeypatch.setattr(store.os, "replace", lambda *a: (_ for _ in ()).throw(OSError("disk full")))
    with pytest.raises(OSError, match="disk full"):
        store.write_json(path, {"ratio": 2.0})
    assert json.loads(path.read_text()) == {"ratio": 1.5, "rows": [1, 2]}
    assert [p.name for p in path.parent.iterdir()] == ["bench.json"]


def test_render_figure_lays_out_once_for_every_format_and_restores_the_figure(monkeypatch):
    """store.render_figure, the one place a figure is rendered: one draw for the layout and
    the tight box, then one per format (savefig(bbox_inches="tight") draws the layout again
    for each); the PNG has the size savefig's own tight crop gives it; the figure keeps its
    layout engine and dpi."""
    import io

    import matplotlib.image as mpimg
    import matplotlib.pyplot as plt
    from matplotlib.figure import Figure

    fig, ax = plt.subplots(1, 2, figsize=(6, 3), layout="constrained")
    ax[0].plot([0, 1], [0, 1], label="a line")
    ax[0].legend()
    fig.suptitle("a title that the tight box must hold")
    engine, dpi = fig.get_layout_engine(), fig.dpi
    draws = []
    real_draw = Figure.draw
    monkeypatch.setattr(Figure, "draw", lambda self, r: (draws.append(1), real_draw(self, r))[1])
    out = store.render_figure(fig)
    assert list(out) == list(store.FIGURE_EXTS) and out["pdf"].startswith(b"%PDF")
    assert len(draws) == 1 + len(store.FIGURE_EXTS)
    assert fig.get_layout_engine() is engine and fig.dpi == dpi
    monkeypatch.setattr(Figure, "draw", real_draw)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=130, bbox_inches="tight")
    plt.close(fig)
    ours, theirs = (mpimg.imread(io.BytesIO(b)).shape for b in (out["png"], buf.getvalue()))
    # the same box in inches; each edge becomes whole pixels at 130 dpi, so a side may differ by 1
    assert all(abs(a - b) <= 1 for a, b in zip(ours, theirs, strict=True)), (ours, theirs)


def _bench_checks():
    """benchmarks/bench_checks.py (the benchmarks are scripts, not a package: loaded by path)."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_checks.py"
    spec = importlib.util.spec_from_file_location("bench_checks", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf"), np.float32("nan"), None, "n/a"])
def test_a_bench_arm_whose_run_ends_non_finite_is_not_a_result(bad):
    """Issue 48 item 9: the attention arm printed 130x the PyTorch loop beside a NaN final loss
    of that loop. Each arm passes its final losses through finite_or_fail before any ratio: a
    non-finite (or non-numeric) one, ours or the reference's, stops the arm, naming the arm and
    the run; all finite, it returns."""
    checks = _bench_checks()
    assert checks.finite_or_fail("attention", twin=0.25, attention=np.float64(0.25), torch=1e300) is None
    for which in ("torch", "twin"):
        finals = {"twin": 0.25, "attention": 0.25, "torch": 0.25} | {which: bad}
        with pytest.raises(checks.NotAResult, match=rf"^\[attention\] not a result, no ratio reported: "
                                                    rf"{which} = .* did not end finite"):
            checks.finite_or_fail("attention", **finals)
