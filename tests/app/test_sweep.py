"""Sweeps on Dask: the table equals the points run one by one, a sweep whose worker is
killed resumes to the same table on an existing scheduler, a failed point is recorded,
a bad spec exits 2 at once.

One LocalCluster serves the module (starting one costs seconds); the sweeps reach it by
its address, as `biasfree sweep --scheduler` does. It has a single worker, as does the
scheduler of the kill test: every worker process imports JAX and traces the experiment
afresh (seconds of CPU each), and nothing here needs two (tasks, retries and the table
do not depend on how many workers share them).
"""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from biasfree.app.cli import app
from biasfree.app.sweep import WORKER_ENV, Counts, SpecError, parse_spec, plan_points, run_sweep
from biasfree.app.sweep_cluster import COMPILE_CACHE
from biasfree.app.sweep_table import TIMES, saved
from biasfree.claims import get, resolve_config, run_experiment
from biasfree.experiments import load_sweep

distributed = pytest.importorskip("distributed", reason="the [sweep] extra (make test installs it)")

runner = CliRunner()
EXP = "orthogonal-inputs"  # the cheapest experiment at its tiny preset
GRID = {"width": [6, 8], "scale": [1e-4, 1e-3]}
FIXED = {"n": 3, "d": 4, "t_max": 20.0, "n_records": 41}
SPEC = {"experiment": EXP, "preset": "tiny", "seeds": [0, 2], "grid": GRID, "fixed": FIXED}
# the same points as SPEC's rows at scale 1e-4 (the same configs: the same point keys)
KILL_SPEC = {**SPEC, "grid": {"width": GRID["width"]}, "fixed": {**FIXED, "scale": GRID["scale"][0]}}


def spec_text(doc: dict) -> str:
    lines = [f"experiment = {json.dumps(doc['experiment'])}", f"preset = {json.dumps(doc['preset'])}",
             f"seeds = {json.dumps(doc['seeds'])}"]
    for table in ("grid", "fixed"):
        if doc.get(table):
            lines.append(f"[{table}]")
            lines += [f"{k} = {json.dumps(v)}" for k, v in doc[table].items()]
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def worker_env():
    """Every worker of the module shares one JAX compilation cache (COMPILE_CACHE), the
    session's (tests/conftest.py): the programs compiled by the first are loaded by the
    others, restarted ones and later sessions included (its keys hold the workers' own
    XLA flags)."""
    return {**WORKER_ENV, COMPILE_CACHE: os.environ[COMPILE_CACHE],
            "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0"}


@pytest.fixture(scope="module")
def cluster(worker_env):
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                                  dashboard_address=":0", env=worker_env) as c:
        yield c.scheduler_address


@pytest.fixture(scope="module")
def full_sweep(cluster, tmp_path_factory):
    out = tmp_path_factory.mktemp("sweep")
    outcome = run_sweep(parse_spec(SPEC), out, scheduler=cluster)
    return out, outcome


def test_sweep_table_equals_points_run_one_by_one(cluster, full_sweep):
    out, outcome = full_sweep
    c = outcome.counts
    assert (c.done, c.skipped, c.crashed, c.failed_checks) == (8, 0, 0, 0) and outcome.passed
    df = load_sweep(out)
    assert len(df) == 8 and list(df["status"]) == ["done"] * 8 and list(df["failed_checks"]) == [""] * 8
    assert (out / "summary.png").stat().st_size > 10_000
    overs = [{**FIXED, "width": int(row["width"]), "scale": float(row["scale"])} for _, row in df.iterrows()]
    # each point run on its own by run_experiment, on the cluster's workers: the same
    # single-threaded environment (WORKER_ENV) as the sweep's tasks, so the same float64
    # program, and the table must hold its numbers bit for bit (through parquet)
    def one_by_one(over: dict, seed: int):  # a local function: sent to the worker by value
        exp = get(EXP)
        ref = run_experiment(exp, resolve_config(exp, "tiny", over), seed)
        return ref.metrics, {k: (c.value, c.passed) for k, c in ref.checks.items()}, ref.passed

    with distributed.Client(cluster) as client:
        refs = client.gather([client.submit(one_by_one, over, int(row["seed"]), pure=False)
                              for over, (_, row) in zip(overs, df.iterrows(), strict=True)])
    for over, (metrics, checks, passed), (_, row) in zip(overs, refs, df.iterrows(), strict=True):
        for k, v in metrics.items():
            np.testing.assert_array_equal(row[k], v, err_msg=k)
        for k, (value, ok) in checks.items():
            np.testing.assert_array_equal(row[f"check.{k}.value"], value, err_msg=k)
            assert row[f"check.{k}.passed"] == ok
        assert row["passed"] == passed
        folder = out / "points" / row["point"]
        assert {p.name for p in folder.iterdir()} == {"result.json", "arrays.npz"}  # figures: off
        # the table splits each point's time: compute (the experiment), IO, scheduling
        assert row["compute_s"] > 0 and row["io_s"] > 0 and row["sched_s"] >= 0
        # elapsed_s is the same three float64 summed (order aside): equal to 2 eps relative, 1e-12 ≫ that
        assert row["elapsed_s"] == pytest.approx(row["compute_s"] + row["io_s"] + row["sched_s"], rel=1e-12)
        assert json.loads((folder / "result.json").read_text())["overrides"] == over
    # one row per point: the grid in the spec's order, seeds innermost
    assert list(zip(df["width"], df["scale"], df["seed"], strict=True)) == \
        [(w, sc, s) for w in GRID["width"] for sc in GRID["scale"] for s in SPEC["seeds"]]
    assert df.attrs["experiment"] == EXP and df.attrs["grid"] == ["width", "scale"]


def test_failed_point_is_recorded_and_does_not_stop_the_sweep(cluster, tmp_path):
    spec = {"experiment": EXP, "preset": "tiny", "seeds": [0],
            "grid": {"scale": [1.0, 1e-4]}, "fixed": {**FIXED, "width": 6, "lr": 50.0}}  # σ = 1 is refused
    path = tmp_path / "spec.toml"
    path.write_text(spec_text(spec))
    # both points in one task: the failing first one must not stop the second
    res = runner.invoke(app, ["sweep", str(path), "--out", str(tmp_path / "out"), "--scheduler", cluster,
                              "--group-size", "2", "--figures"])
    assert res.exit_code == 1, res.output
    # σ = 1 is refused after the seed's draws (not a small init: issue 48's one-line refusal); lr 50
    # is large: the point that runs has a result, but it fails its checks
    assert "2 points: 1 computed, 0 skipped (already saved), 1 crashed, 1 with failed checks" in \
        " ".join(res.output.split())
    df = load_sweep(tmp_path / "out")
    assert list(df["status"]) == ["crashed", "done"]
    assert df["error"].iloc[0].startswith("ValueError: scale=1 is not a small init here")
    tb = df["traceback"].iloc[0]
    assert tb.startswith("Traceback") and "ValueError" in tb.splitlines()[-1]
    # the crash record biasfree run writes (app/pipeline.py), in the point's own folder
    crashed = tmp_path / "out" / "points" / df["point"].iloc[0]
    assert sorted(p.name for p in crashed.iterdir()) == ["error.json", "traceback.txt"]
    doc = json.loads((crashed / "error.json").read_text())
    assert (crashed / "traceback.txt").read_text() == tb and doc["error"] == "ValueError"
    assert doc["seed"] == 0 and doc["overrides"]["scale"] == 1.0 and doc["config"]["lr"] == 50.0
    assert doc["elapsed_s"] > 0 and df["error"].iloc[0] == f"ValueError: {doc['message']}"
    # --figures: the computed point has its figure
    assert (tmp_path / "out" / "points" / df["point"].iloc[1] / "figure.png").stat().st_size > 10_000
    # --force recomputes the saved point (without it a rerun skips it: the kill test below)
    saved_at = (tmp_path / "out" / "points" / df["point"].iloc[1] / "result.json").stat().st_mtime_ns
    res = runner.invoke(app, ["sweep", str(path), "--out", str(tmp_path / "out"), "--scheduler", cluster,
                              "--group-size", "2", "--figures", "--force"])
    assert res.exit_code == 1, res.output
    # σ = 1 is refused after the seed's draws (not a small init: issue 48's one-line refusal); lr 50
    # is large: the point that runs has a result, but it fails its checks
    assert "2 points: 1 computed, 0 skipped (already saved), 1 crashed, 1 with failed checks" in \
        " ".join(res.output.split())
    assert (tmp_path / "out" / "points" / df["point"].iloc[1] / "result.json").stat().st_mtime_ns > saved_at


def test_a_failed_check_is_counted_apart_from_crashes_named_in_the_table_and_figure_and_exits_1(
        cluster, tmp_path):
    """Issue 48 item 1: a point whose check fails is a result, not a crash, and not a success:
    on main the sweep said "2 computed, 0 failed" and exited 0. At init std 0.03 the
    orthogonal-inputs net has no early phase, so its early-alignment check fails (value inf)."""
    from biasfree._figure import plt
    from biasfree.app.sweep_figure import summary_figure

    spec = {"experiment": EXP, "preset": "tiny", "seeds": [0],
            "grid": {"scale": [1e-4, 0.03]}, "fixed": {**FIXED, "width": 6}}
    failing = "early_alignment_within_frozen_residual_bound"
    out = tmp_path / "out"
    res = runner.invoke(app, ["sweep", str(write_spec(tmp_path, spec)), "--out", str(out),
                              "--scheduler", cluster])
    assert res.exit_code == 1, res.output
    text = " ".join(res.output.split())
    assert "2 points: 2 computed, 0 skipped (already saved), 0 crashed, 1 with failed checks" in text, text
    assert f"1 point(s) failed a check (the table's failed_checks column): scale=0.03, seed=0: {failing}" \
        in text, text
    df = load_sweep(out)
    assert list(df["status"]) == ["done", "done"] and list(df["passed"]) == [True, False]
    assert list(df["failed_checks"]) == ["", failing]
    # the Python API returns the same account (it raises for neither a crash nor a failed check),
    # the skipped points' checks counted too
    logs = []
    outcome = run_sweep(parse_spec(spec), out, scheduler=cluster, log=logs.append)
    c = outcome.counts
    assert (c.done, c.skipped, c.crashed, c.failed_checks) == (0, 2, 0, 1) and not outcome.passed
    assert outcome.failed_checks == {"scale=0.03, seed=0": [failing]} and outcome.crashed == []
    assert any(f"1 of 2 points failed a check: {failing} (at 1 point)" in line for line in logs), logs
    # the summary: the failing check's panel first, its title naming where, a red cross there
    fig = summary_figure(df)
    ax = fig.axes[0]
    assert ax.get_title().startswith("check: early alignment") and "✗ 1 of 2 fail" in ax.get_title()
    assert "at scale = 0.03" in ax.get_title().replace("\n", " ")
    crosses = [ln for ln in ax.get_lines() if ln.get_marker() == "x" and len(ln.get_xdata())]
    assert [list(ln.get_xdata()) for ln in crosses] == [[0.03]]
    assert f"failed checks: {failing} (at 1 point)" in fig._suptitle.get_text().replace("\n", " ")
    plt.close(fig)


def test_a_second_sweep_into_the_same_folder_waits_for_the_first_then_computes_nothing(cluster, full_sweep):
    import threading

    from biasfree.app.claim import claim

    out, _ = full_sweep
    held, release, logs = threading.Event(), threading.Event(), []

    def first():  # another sweep holds the folder for a second
        with claim(out, "sweeping into"):
            held.set()
            release.wait(30)

    t = threading.Thread(target=first)
    t.start()
    held.wait(30)
    threading.Timer(1.0, release.set).start()
    outcome = run_sweep(parse_spec(SPEC), out, scheduler=cluster, log=logs.append)
    t.join()
    assert any(f"is sweeping into {out}: waiting for it" in line for line in logs), logs
    assert (outcome.counts.skipped, outcome.counts.done) == (8, 0)


def test_a_negative_worker_timeout_is_refused_in_one_line_before_any_cluster(tmp_path):
    """On main a raw Dask error, after a cluster had started. Here no scheduler answers at the
    address, so reaching for one would fail otherwise (after its 10 s timeout)."""
    import biasfree as bf

    t0 = time.monotonic()
    for bad, message in ((-1, "worker_timeout_s=-1 must be >= 0: seconds to wait for a Dask worker; "
                              "pass e.g. 60"), (float("nan"), "worker_timeout_s=nan must be finite")):
        with pytest.raises(ValueError) as e:
            bf.sweep(SPEC, tmp_path / "out", scheduler="tcp://127.0.0.1:9", worker_timeout_s=bad)
        assert str(e.value).startswith(message) and "\n" not in str(e.value)
    assert time.monotonic() - t0 < 5 and not (tmp_path / "out").exists()


def test_cluster_without_workers_exits_2_after_the_wait(tmp_path):
    path = tmp_path / "spec.toml"
    path.write_text(spec_text({**SPEC, "seeds": [0], "grid": {"width": [6]}}))
    out = tmp_path / "out"
    with distributed.LocalCluster(n_workers=0, processes=False, dashboard_address=":0") as empty:
        t0 = time.monotonic()
        res = runner.invoke(app, ["sweep", str(path), "--out", str(out), "--scheduler",
                                  empty.scheduler_address, "--worker-timeout", "1"])
        waited = time.monotonic() - t0
    assert res.exit_code == 2, res.output
    text = " ".join(res.output.split())
    assert "no Dask worker joined" in text and "within 1 s" in text and "dask worker" in text
    assert waited < 30, f"the wait is bounded by --worker-timeout 1, it took {waited:.1f} s"
    # --out is checked (created, probed) before any work; nothing is written into it
    assert not out.exists() or not any(out.iterdir()), "nothing is written before a worker is there"


def _wait_for(cond, timeout, what):
    t0 = time.time()
    while not cond():
        if time.time() - t0 > timeout:
            raise TimeoutError(f"{what} did not happen within {timeout} s")
        time.sleep(0.2)


def _stop(procs):
    """SIGTERM each process, the last started first, and wait for it before the next: a
    worker stopped while its scheduler is there closes in 0.15 s; signalled together, its
    nanny retried the scheduler that had gone and both took 8 s (measured)."""
    for p in reversed(procs):
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(timeout=20)


def test_kill_a_worker_interrupt_then_resume_on_a_real_scheduler(full_sweep, worker_env, tmp_path):
    """`dask scheduler` and `dask worker` (one process under a nanny) on 127.0.0.1: the
    worker killed mid-sweep (its nanny restarts it; both are lines in the log, and its
    points are retried), the client interrupted, then the rerun through the CLI
    completes the table: each point once, values equal bit for bit to the LocalCluster
    sweep (the same task code in single-threaded workers: the same program). Before the
    rerun two saves torn by a kill are planted (a dead process's temporary folder, a point
    folder without arrays.npz): neither counts as finished. (This test is also the
    resume test: a separate interrupted-and-resumed sweep on the LocalCluster drew one more
    37-panel summary, 4.6 s, and proved nothing this one does not.)"""
    sched_file = tmp_path / "scheduler.json"
    env = {**os.environ, **worker_env}
    procs = []
    try:
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port", "0",
             "--no-dashboard", "--scheduler-file", str(sched_file)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env))
        _wait_for(sched_file.exists, 60, "the scheduler's start")
        address = json.loads(sched_file.read_text())["address"]
        assert address.startswith("tcp://127.0.0.1:")
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "distributed.cli.dask_worker", address, "--nworkers", "1",
             "--nthreads", "1", "--no-dashboard", "--host", "127.0.0.1", "--death-timeout", "60"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env))
        logs, state = [], {"killed": None}

        class Stop(KeyboardInterrupt):
            pass

        with distributed.Client(address, timeout="30s") as client:
            client.wait_for_workers(1, timeout=120)

            def kill_then_interrupt(c: Counts):
                if state["killed"] is None and c.done >= 1:
                    pids = client.run(os.getpid, workers=list(client.nthreads())[:1], nanny=False)
                    os.kill(next(iter(pids.values())), signal.SIGKILL)
                    state["killed"] = time.monotonic()
                elif state["killed"] is not None and (any("left the cluster" in line for line in logs)
                                                      or time.monotonic() - state["killed"] > 60):
                    raise Stop

            with pytest.raises(Stop):
                run_sweep(parse_spec(KILL_SPEC), tmp_path / "out", client=client, group_size=1,
                          progress=kill_then_interrupt, log=logs.append)
        assert any("left the cluster (lost, killed or restarted by its nanny)" in line for line in logs), logs
        points = tmp_path / "out" / "points"
        finished = [p for p in points.iterdir() if (p / "result.json").exists()]
        pts = plan_points(parse_spec(KILL_SPEC))
        assert 1 <= len(finished) <= len(pts) - 2, "killed after the first point, two left to plant"
        # a save killed by SIGKILL half-way: its temporary folder (a dead process's) and a
        # point folder without arrays.npz must not count as finished
        missing = [p for p in pts if not (points / p.key).exists()]
        tmp = points / f".{missing[0].key}.tmp-999999-x"
        tmp.mkdir()
        (points / missing[1].key).mkdir()
        (points / missing[1].key / "result.json").write_text(json.dumps({"experiment": EXP}))
        res = runner.invoke(app, ["sweep", str(write_spec(tmp_path, KILL_SPEC)), "--out",
                                  str(tmp_path / "out"), "--scheduler", address, "--worker-timeout", "60"])
        assert res.exit_code == 0, res.output
        assert str(tmp_path / "out" / "table.parquet") in res.stdout
        text, k, n = " ".join(res.output.split()), len(finished), len(pts)
        assert f"{k} of {n} points skipped" in text, text
        assert f"{n} points: {n - k} computed, {k} skipped (already saved), 0 crashed, 0 with failed checks" \
            in text, text
    finally:
        _stop(procs)
    assert not tmp.exists()
    # a rerun would compute nothing: every point is saved, as run_sweep's skip test (`saved`,
    # the one it plans with) sees it
    assert all(saved(tmp_path / "out", p, EXP) for p in pts)
    df, ref = load_sweep(tmp_path / "out"), load_sweep(full_sweep[0])
    ref = ref[ref["scale"] == KILL_SPEC["fixed"]["scale"]].drop(columns="scale").reset_index(drop=True)
    assert list(df["status"]) == ["done"] * 4
    assert list(df["point"]) == list(ref["point"])  # every point once, in grid order
    assert sorted(p.name for p in (tmp_path / "out" / "points").iterdir()) == sorted(ref["point"])
    cols = [c for c in ref.columns if c not in ("elapsed_s", *TIMES)]
    assert list(df.columns) == list(ref.columns) and df[cols].equals(ref[cols])


def write_spec(folder: Path, doc: dict) -> Path:
    path = folder / "spec.toml"
    path.write_text(spec_text(doc))
    return path


@pytest.mark.parametrize("change, message", [
    ({"grid": {"no_such_field": [1, 2]}}, "has no field 'no_such_field'"),
    ({"grid": {"width": [6, -2]}}, "width"),
    ({"experiment": "no-such-experiment"}, "unknown experiment"),
    ({"grid": {"width": 6}}, "must be a non-empty list"),
    ({"seeds": []}, "seeds must be a non-empty list"),
    ({"experiment": "leaky-collapse", "grid": {"alphas": [0.0, 1.0]}, "fixed": {}},
     "a list-valued field needs a list of lists, e.g. alphas = [[0.0, 1.0]"),
])
def test_bad_spec_exits_2_before_any_work(tmp_path, change, message):
    path = tmp_path / "spec.toml"
    path.write_text(spec_text({**SPEC, **change}))
    out = tmp_path / "out"
    res = runner.invoke(app, ["sweep", str(path), "--out", str(out), "--workers", "1"])
    assert res.exit_code == 2, res.output
    assert message in " ".join(res.output.split())
    # --out is checked (created, probed) first; nothing is written into it
    assert not out.exists() or not any(out.iterdir()), "nothing may run or be written before a valid spec"


def test_read_spec_and_load_sweep_name_a_path_that_is_not_one():
    from biasfree.experiments import read_spec

    with pytest.raises(TypeError, match="sweep spec: path=None must be a path"):  # was pathlib's
        read_spec(None)
    with pytest.raises(TypeError, match="out=None must be a sweep's folder"):
        load_sweep(None)


def test_parse_spec_refuses_what_is_not_a_spec_document():
    """Text, None, NumPy integers and sets once failed inside (iteration, json's encoder)."""
    for doc in (None, 'experiment = "deep"'):
        with pytest.raises(TypeError, match="must be a dict of a spec's keys"):
            parse_spec(doc)
    for grid in ({"width": [np.int64(6), np.int64(8)]}, {"width": {6, 8}}):
        with pytest.raises(SpecError, match="holds a value a spec cannot store .* use plain numbers"):
            parse_spec({**SPEC, "grid": grid})


def test_unknown_spec_key_and_field_in_both_tables_are_errors():
    with pytest.raises(SpecError, match="unknown key.*'seed'"):
        parse_spec({**SPEC, "seed": 3})
    with pytest.raises(SpecError, match="both swept"):
        parse_spec({**SPEC, "fixed": {"width": 6}})


def test_a_spec_file_that_is_not_toml_or_not_readable_is_a_spec_error(tmp_path):
    from biasfree.experiments import read_spec

    bad = tmp_path / "bad.toml"
    bad.write_text("grid = = 3\n")
    with pytest.raises(SpecError, match=f"sweep spec {bad} is not valid TOML"):
        read_spec(bad)
    with pytest.raises(SpecError, match=f"cannot read sweep spec {tmp_path}"):
        read_spec(tmp_path)  # a folder: open() fails


def test_point_key_is_content_addressed():
    pts = plan_points(parse_spec(SPEC))
    assert len({p.key for p in pts}) == 8
    # the same effective config from another spec (the value fixed instead of swept) is the same point
    other = plan_points(parse_spec({**SPEC, "grid": {"scale": [1e-4]}, "fixed": {**FIXED, "width": 6}}))
    assert other[0].key == pts[0].key and other[1].key == pts[1].key


def test_load_sweep_names_the_fix_when_there_is_no_table(tmp_path):
    with pytest.raises(FileNotFoundError, match="biasfree sweep"):
        load_sweep(Path(tmp_path))


def test_summary_legend_keeps_each_fields_own_type():
    """A line's label names each other swept field as it was given: width=40 stays an int
    beside lr=0.01 (an array of the two would have read width=40.0)."""
    import pandas as pd

    from biasfree._figure import plt
    from biasfree.app.sweep_figure import summary_figure

    rows = [{"alpha": a, "width": 40, "lr": lr, "seed": 0, "status": "done", "gap": a + lr}
            for a in (0.0, 0.5) for lr in (0.01, 0.1)]
    df = pd.DataFrame(rows)
    df.attrs["grid"] = ["alpha", "width", "lr"]
    fig = summary_figure(df)
    labels = fig.axes[0].get_legend_handles_labels()[1]
    plt.close(fig)
    assert labels == ["width=40, lr=0.01", "width=40, lr=0.1"]


@pytest.mark.parametrize("address", ["myhost", "http://127.0.0.1:8787"])
def test_a_scheduler_that_is_not_an_address_is_refused_with_the_form_to_use(tmp_path, address):
    (tmp_path / "spec.toml").write_text(spec_text(SPEC))
    res = runner.invoke(app, ["sweep", str(tmp_path / "spec.toml"), "--scheduler", address,
                              "--out", str(tmp_path / "out")])
    assert res.exit_code == 2, res.output
    assert "tcp://HOST:8786" in " ".join(res.output.split()) and "Traceback" not in res.output


def test_run_sweep_checks_its_spec_and_out_before_any_point_runs(tmp_path):
    with pytest.raises(TypeError, match="must be a Spec: biasfree.experiments.read_spec"):
        run_sweep(str(tmp_path / "sweep.toml"), tmp_path / "out")
    (tmp_path / "file").write_text("")
    with pytest.raises(ValueError, match="out=.* is a file, not a folder"):
        run_sweep(parse_spec(SPEC), tmp_path / "file", workers=1)
