"""What a sweep point costs beyond its compute, and how many map points a core computes.

1. **Per-point overhead, trivial points**: ``orthogonal-inputs`` at a tiny config (about
   0.05 s of compute a point once compiled), N points on a warm cluster (every worker
   has compiled the points' programs in a first sweep of other seeds), on a
   ``LocalCluster`` and on a scheduler-plus-workers cluster this script starts on
   127.0.0.1 (``dask scheduler`` and ``dask worker`` subprocesses, killed at the end).
   Reported: ``overhead_per_point_s = (wall × workers − Σ compute) / N``, the
   core-seconds a point costs beyond its own compute (goal: ≤ 50 ms), with the table's
   split of it into IO and scheduling, and ``wall / Σ compute`` as is; ``wall`` is the
   sweep's run phase (first task submitted to last point saved); the once-per-sweep
   phases (planning, reaching the cluster, the table, the summary figure) are reported
   beside it (``plan_s``, ``cluster_s``, ``table_s``, ``figures_s``, ``sweep_wall_s``).
2. **The linearity map's own points**: rows of ``sweeps/linearity-map-10k.toml`` (one
   row: 200 map points, 4 α × 10 init stds × 5 widths, 4 inits each, bias-free and
   biased) on the warm local cluster. Reported: map points per second per core, the
   overhead as a fraction of compute (goal: ≤ 10% for points of about 1 s), and the
   projected time of the whole 10⁴-point spec here and on 64 and 1,024 cores:
   ``T(C) = t_compile + ceil(rows / C) × t_row`` (a worker compiles once; a row is one
   task's unit, so past 50 cores the map's 50 rows leave cores idle).

Wall-clock times on a shared machine are inflated by its load; the ratios are measured
side by side in one run. ``--json FILE`` writes the numbers.

Run: ``make bench`` (or ``.venv/bin/python benchmarks/bench_sweep.py [--quick] [--json FILE]``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from biasfree import store
from biasfree.app.sweep_cluster import COMPILE_CACHE, WORKER_ENV
from biasfree.experiments import load_sweep, parse_spec, read_spec, run_sweep

TRIVIAL = {"experiment": "orthogonal-inputs", "preset": "tiny",
           "fixed": {"n": 3, "d": 4, "t_max": 20.0, "n_records": 41, "width": 6}}
MAP_SPEC = Path(__file__).resolve().parents[1] / "sweeps" / "linearity-map-10k.toml"
START_TIMEOUT_S = 120


def timed_sweep(spec, out: Path, **kw) -> dict:
    """Run ``spec`` into ``out`` and return its wall time and the table's time sums."""
    t0 = time.perf_counter()
    outcome = run_sweep(spec, out, **kw)
    wall = time.perf_counter() - t0
    assert outcome.counts.done + outcome.counts.failed == outcome.counts.total, outcome.counts
    df = load_sweep(out)  # a failed point's compute (until it raised) counts too
    return {"points": len(df), "failed": outcome.counts.failed, "sweep_wall_s": wall,
            "wall_s": outcome.phases["run_s"], **outcome.phases,
            "compute_s": float(df["compute_s"].sum()),
            "io_s": float(df["io_s"].sum()), "sched_s": float(df["sched_s"].sum()),
            "compute_median_s": float(df["compute_s"].median()),
            "compute_max_s": float(df["compute_s"].max())}


def overhead(t: dict, workers: int) -> dict:
    n = t["points"]
    return {**t, "workers": workers, "wall_over_compute": t["wall_s"] / t["compute_s"],
            "overhead_per_point_s": (t["wall_s"] * workers - t["compute_s"]) / n,
            "overhead_fraction": (t["wall_s"] * workers - t["compute_s"]) / t["compute_s"],
            "io_per_point_s": t["io_s"] / n, "sched_per_point_s": t["sched_s"] / n}


def trivial(n: int, tmp: Path, name: str, client, workers: int) -> dict:
    """Warm the cluster (a sweep of other seeds, one task a point so that every worker
    compiles), then time ``n`` new trivial points."""
    timed_sweep(parse_spec({**TRIVIAL, "seeds": list(range(1000, 1000 + 2 * workers))}), tmp / f"{name}-warm",
                client=client, group_size=1)
    return overhead(timed_sweep(parse_spec({**TRIVIAL, "seeds": list(range(n))}), tmp / name, client=client),
                    workers)


def start_cluster(tmp: Path, workers: int, env: dict) -> tuple[str, list]:
    """``dask scheduler`` and ``dask worker`` (``workers`` processes of one thread) on 127.0.0.1."""
    sched_file = tmp / "scheduler.json"
    env = {**os.environ, **env}
    procs = [subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
                               "--port", "0", "--no-dashboard", "--scheduler-file", str(sched_file)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)]
    t0 = time.monotonic()
    while not sched_file.exists():
        if time.monotonic() - t0 > START_TIMEOUT_S:
            stop(procs)
            raise TimeoutError(f"the scheduler did not start within {START_TIMEOUT_S} s")
        time.sleep(0.2)
    address = json.loads(sched_file.read_text())["address"]
    procs.append(subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_worker", address, "--nworkers",
                                   str(workers), "--nthreads", "1", "--no-dashboard", "--host", "127.0.0.1",
                                   "--death-timeout", "60"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env))
    return address, procs


def stop(procs: list) -> None:
    for p in reversed(procs):
        p.send_signal(signal.SIGTERM)
    for p in reversed(procs):
        try:
            p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(timeout=20)


def map_rows(rows: int, workers: int, tmp: Path, client) -> dict:
    """Time ``rows`` rows of the 10⁴-point spec (after one warm-up row per worker, whose
    extra time over a warm row is the compile time)."""
    full = read_spec(MAP_SPEC)
    per_row = math.prod(len(full.fixed[k]) for k in ("alphas", "scales", "widths"))
    total_rows = len(full.seeds) * math.prod(len(v) for v in full.grid.values())
    asym = list(full.grid["asymmetry"])
    doc = {"experiment": full.experiment, "preset": full.preset, "fixed": full.fixed}
    warm = timed_sweep(parse_spec({**doc, "grid": {"asymmetry": asym[:workers]}, "seeds": [1000]}),
                       tmp / "map-warm", client=client, group_size=1)
    n_asym = min(len(asym), max(1, rows // 2))
    t = overhead(timed_sweep(parse_spec({**doc, "grid": {"asymmetry": asym[:n_asym]},
                                         "seeds": list(range(max(1, rows // n_asym)))}),
                             tmp / "map", client=client), workers)
    t_row = t["compute_s"] / t["points"]
    compile_s = max(warm["compute_s"] / warm["points"] - t_row, 0.0)
    cost = t_row * (1 + max(t["overhead_fraction"], 0.0))  # a row's core-seconds, overhead included
    project = {c: compile_s + math.ceil(total_rows / c) * cost for c in (workers, 64, 1024)}
    return {**t, "map_points_per_row": per_row, "rows_total": total_rows, "row_s": t_row,
            "compile_s": compile_s, "map_points_per_s_per_core": per_row / cost,
            "projected_s": {str(c): v for c, v in project.items()}}


def main(quick: bool, json_path: str | None) -> dict:
    from dask.distributed import Client, LocalCluster

    workers = min(2, os.cpu_count() or 1)
    n = 16 if quick else 32
    out: dict = {}
    with tempfile.TemporaryDirectory(prefix="bench-sweep-") as tmp:
        tmp = Path(tmp)
        env = {**WORKER_ENV, COMPILE_CACHE: str(tmp / "jax-cache"),  # as a sweep's own local cluster
               "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0"}
        with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=":0",
                          env=env) as cluster, Client(cluster) as client:
            out["local_trivial"] = trivial(n, tmp, "local", client, workers)
            print("local cluster, trivial points:", _fmt(out["local_trivial"]), flush=True)
            out["map"] = map_rows(2 * workers if quick else 4 * workers, workers, tmp, client)
            print("linearity map rows:", _fmt(out["map"]), flush=True)
        address, procs = start_cluster(tmp, workers, env)
        try:
            with Client(address, timeout="30s") as client:
                client.wait_for_workers(workers, timeout=START_TIMEOUT_S)
                out["scheduler_trivial"] = trivial(n, tmp, "sched", client, workers)
                print("dask scheduler + workers, trivial points:", _fmt(out["scheduler_trivial"]), flush=True)
        finally:
            stop(procs)
    m = out["map"]
    print(f"summary: trivial-point overhead {1e3 * out['local_trivial']['overhead_per_point_s']:.0f} ms "
          f"(local) and {1e3 * out['scheduler_trivial']['overhead_per_point_s']:.0f} ms (scheduler) a point "
          f"(goal <= 50 ms); map rows of {m['row_s']:.2f} s: overhead {100 * m['overhead_fraction']:.1f}% of "
          f"compute (goal <= 10% for 1 s points); {m['map_points_per_s_per_core']:.1f} map points/s/core; "
          f"the 10^4-point spec projected at {m['projected_s'][str(workers)]:.0f} s on {workers} cores here, "
          f"{m['projected_s']['64']:.0f} s on 64, {m['projected_s']['1024']:.0f} s on 1024")
    if json_path:
        store.write_json(json_path, out)
    return out


def _fmt(t: dict) -> str:
    return json.dumps({k: (round(v, 4) if isinstance(v, float) else v) for k, v in t.items()
                       if not isinstance(v, dict)})


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer points (16 trivial, 2 map rows a worker)")
    ap.add_argument("--json", metavar="FILE", help="write the numbers to FILE")
    args = ap.parse_args()
    main(args.quick, args.json)
