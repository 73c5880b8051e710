"""The CLI's and the store's failure paths (issue 13 item 5): bad ``--out``/``--seed`` are
refused before any computation with exit 2; a save killed by SIGKILL or interrupted by
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
from dataclasses import dataclass

import numpy as np
import pytest
from typer.testing import CliRunner

from biasfree import store
from biasfree.cli import app
from biasfree.experiments import REGISTRY
from biasfree.experiments.base import Experiment, Result, at_most, config_dict, run_experiment

runner = CliRunner()


@dataclass(frozen=True)
class ToyConfig:
    width: int = 3


def _toy(name: str, calls: list) -> Experiment:
    def run(cfg: ToyConfig, seed: int = 0, progress=None) -> Result:
        calls.append((name, seed))
        return Result(name, seed, config_dict(cfg), {"width": float(cfg.width)},
                      {"ok": at_most(0.0, 1.0, "Zero is at most one, so this toy check passes.")},
                      {"w": np.arange(cfg.width) + seed})

    return Experiment(name, "a toy experiment for the failure-path tests", run, ToyConfig,
                      {"tiny": ToyConfig(2), "paper": ToyConfig()})


@pytest.fixture
def toy(monkeypatch):
    calls: list = []
    for name in ("toy", "toy-b"):
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


# ------------------------------------------------------------------ report


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
    import sys, time
    from pathlib import Path
    import numpy as np
    from biasfree import store
    from biasfree.experiments.base import Result, at_most

    out, seed, marker = Path(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3])

    class Stuck:  # a figure whose save hangs half-written
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
    for proc in procs.values():
        proc.wait(timeout=60)
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
