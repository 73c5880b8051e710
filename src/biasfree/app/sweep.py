"""Sweeps: one experiment over a grid of config overrides × seeds, on Dask distributed
(the spec and its points: :mod:`biasfree.app.sweep_spec`; the files, each written atomically
by this process, the client: :mod:`biasfree.app.sweep_table`; docs/sweeps.md for use).

Each point is stored once under ``DIR/points/<key>/`` (:func:`point_key`: a rerun skips the
points already computed, whatever spec they came from) and runs as ``biasfree run`` runs an
experiment (:func:`biasfree.app.pipeline.run_point`; one that raises is saved as the same
crash record). Points go to the workers in groups of consecutive points, one Dask task per
group (:func:`run_points`), so the scheduling round trip is paid once per group and compiled
programs once per worker and shape; a task whose worker dies is retried (:data:`RETRIES`),
then rerun one point per task, so only the point that kills its worker is recorded as crashed.

A sweep counts its points two ways (:class:`Counts`): ``crashed`` (the experiment raised: a
bug, no result) and ``failed_checks`` (a result whose checks did not all pass); the table's
``failed_checks`` column and the summary figure name which checks failed at which points.
:attr:`Outcome.passed` is False if either happened (``biasfree sweep`` then exits 1). Only
one sweep writes a folder at a time (:func:`biasfree.app.claim.claim`): a second one waits.
"""

from __future__ import annotations

import os
import queue
import time
import traceback
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

# The experiments, the store and Dask are imported where used: `import biasfree` (which
# exports load_sweep) must not load every experiment.
from .. import _validate as validate
from .sweep_cluster import WORKER_ENV, WORKER_TIMEOUT_S, NoWorkers, dask_client, wait_for_workers
from .sweep_spec import Point, Spec, SpecError, parse_spec, plan_points, point_key, read_spec
from .sweep_table import failed_checks, load_sweep, save_point, save_table, saved, table_frame
from .sweep_tasks import MAX_GROUP, group_points, run_points

if TYPE_CHECKING:
    from .pipeline import Crash

__all__ = ["MAX_GROUP", "WORKER_ENV", "WORKER_TIMEOUT_S", "NoWorkers", "Spec", "SpecError", "Point", "Counts",
           "Outcome", "parse_spec", "read_spec", "plan_points", "point_key", "group_points",
           "run_points", "run_sweep", "load_sweep"]

RETRIES = 2
"""Dask ``retries`` per task: a task whose worker dies is tried this many more times
before its points are rerun one per task (and then recorded as crashed)."""


@dataclass
class Counts:
    """Progress of a sweep: ``total`` points, ``skipped`` (saved before), ``done``
    (computed now), ``crashed`` (raised, or killed their worker: no result), ``running``
    (in a task on a worker now), and ``failed_checks``: points with a result that failed a
    check (the computed ones as they arrive; once the table is written, every point's,
    skipped ones included). A point that failed a check is also ``done`` or ``skipped``."""

    total: int
    skipped: int = 0
    done: int = 0
    crashed: int = 0
    running: int = 0
    failed_checks: int = 0

    @property
    def finished(self) -> int:
        return self.skipped + self.done + self.crashed

    @property
    def failed(self) -> int:
        """The old name of ``crashed``."""
        return self.crashed

    def line(self) -> str:
        """``"8 points: 4 computed, 4 skipped (already saved), 0 crashed, 4 with failed checks"``."""
        return (f"{self.total} points: {self.done} computed, {self.skipped} skipped (already saved), "
                f"{self.crashed} crashed, {self.failed_checks} with failed checks")


@dataclass(frozen=True)
class Outcome:
    """What a sweep did: ``counts``, the ``table`` path, the ``summary`` figure's path
    (None when no point has a result) and every figure written (``figures``), the crashed
    points' labels (``crashed``) and ``failed_checks``: for each point with a result whose
    checks did not all pass (skipped ones included), its label -> the names of the checks it
    failed. ``passed``: no point crashed and every point's checks passed."""

    counts: Counts
    table: Path
    summary: Path | None
    crashed: list[str]
    figures: list[Path] = field(default_factory=list)
    phases: dict = field(default_factory=dict)
    """Wall seconds of the sweep's phases: ``plan_s`` (configs and saved points),
    ``cluster_s`` (starting or reaching the cluster and its first worker), ``run_s``
    (from the first task submitted to the last point saved), ``table_s`` and
    ``figures_s`` (the summary)."""
    failed_checks: dict[str, list[str]] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        """No point crashed and every point's checks passed (``biasfree sweep`` exits 0)."""
        return not self.crashed and not self.failed_checks

    @property
    def failed(self) -> list[str]:
        """The old name of ``crashed``."""
        return self.crashed


@dataclass
class _Tasks:
    """The tasks in flight: Dask futures by task key, their points and submit times,
    and the recent task ends per worker (for the scheduling time)."""

    client: object
    spec: Spec
    figures: bool
    retries: int
    done: queue.Queue = field(default_factory=queue.Queue)
    live: dict = field(default_factory=dict)
    ends: dict = field(default_factory=dict)
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:8])

    def submit(self, group: list[Point]) -> None:
        items = [(p.key, p.planned, p.seed) for p in group]
        key = f"{self.spec.experiment}-{group[0].key}-{len(group)}-{self.run_id}"
        fut = self.client.submit(run_points, items, self.figures, key=key, retries=self.retries,
                                 pure=False)
        self.live[key] = (fut, group, time.time())
        fut.add_done_callback(lambda f: self.done.put((f, time.time())))

    def points_of(self, key: str) -> list[str] | None:
        return [p.key for p in self.live[key][1]] if key in self.live else None

    def sched_share(self, res: dict, submitted: float, arrived: float) -> float:
        """A point's share of its task's scheduling time: the worker's wait from the later
        of the submit and its previous task's end to the task's start, plus the return of
        its result, plus the task's time outside its points."""
        ends = self.ends.setdefault(res["worker"], [])
        prev = max([e for e in ends if e <= res["start"]], default=submitted)
        waited = max(0.0, res["start"] - max(prev, submitted)) + max(0.0, arrived - res["end"])
        inside = res["end"] - res["start"] - sum(p["ran"].compute_s + p["ran"].render_s
                                                 for p in res["points"])
        ends[:] = [*ends[-7:], res["end"]]
        return (waited + max(inside, 0.0)) / max(len(res["points"]), 1)


def run_sweep(spec: Spec, out, *, workers: int | None = None, scheduler: str | None = None,
              client=None, force: bool = False, figures: bool = False,
              group_size: int | None = None, retries: int = RETRIES, all_panels: bool = False,
              worker_timeout_s: float = WORKER_TIMEOUT_S,
              progress: Callable[[Counts], None] = lambda _: None,
              log: Callable[[str], None] = lambda _: None, poll_s: float = 0.1) -> Outcome:
    """Run every point of ``spec`` not already saved under ``out`` (all of them with
    ``force``) on Dask, save each as it arrives, then write ``out/table.parquet`` and
    the summary figures.

    The cluster: ``client`` (any ``distributed.Client``, e.g. on a dask-jobqueue
    ``SLURMCluster``; left open), or a ``scheduler`` address, or a new local cluster of
    ``workers`` processes (default: one per core, sharing their compiled programs in
    ``out/.jax-cache``: :data:`~biasfree.app.sweep_cluster.COMPILE_CACHE`). ``figures``:
    also draw each point's figure (off: the sweep's summary only). ``group_size``: points per task (default
    from the number of points and worker threads, :func:`group_points`).
    ``worker_timeout_s``: how long to wait for a worker (:class:`NoWorkers` after it).
    ``all_panels``: the summary draws every check and metric (default: the first
    :data:`~biasfree.app.sweep_figure.MAX_PANELS`, checks first).
    ``progress(counts)`` is called as points start and finish; ``log(line)`` with what a
    user should read (skips, the dashboard, workers lost and joined, retries, crashes,
    failed checks, a wait for another sweep writing ``out``).
    Neither a crashed point nor a failed check stops the sweep or raises: both are counted
    in the :class:`Outcome` (``passed`` False). Another process sweeping into the same
    ``out`` is waited for (:func:`~biasfree.app.claim.claim`), so each point is computed once.
    On Ctrl-C the saved points stay and the pending tasks are cancelled."""
    if not isinstance(spec, Spec):
        raise TypeError(f"spec={spec!r} must be a Spec: biasfree.experiments.read_spec(path) reads a file, "
                        "biasfree.experiments.parse_spec(dict) a table")
    if sum(x is not None for x in (workers, scheduler, client)) > 1:
        raise ValueError("give one of workers (a new local cluster), scheduler (an address) or "
                         "client (a distributed.Client), not several")
    if workers is not None:
        validate.integer("workers", workers, 1)
    validate.nonnegative("worker_timeout_s", worker_timeout_s, scalar=True,
                         why="seconds to wait for a Dask worker; pass e.g. 60 (0: do not wait)")
    out = validate.writable_folder("out", out)  # before any point runs
    from .claim import claim

    with claim(out, "sweeping into", log):  # one sweep writes a folder at a time
        return _sweep(spec, out, workers, scheduler, client, force, figures, group_size, retries,
                      all_panels, worker_timeout_s, progress, log, poll_s)


def _sweep(spec, out, workers, scheduler, client, force, figures, group_size, retries, all_panels,
           worker_timeout_s, progress, log, poll_s) -> Outcome:
    """:func:`run_sweep` once its arguments are checked and ``out`` is claimed."""
    t0 = time.perf_counter()
    phases = {}
    points = plan_points(spec)
    todo = [p for p in points if force or not saved(out, p, spec.experiment)]
    phases["plan_s"] = time.perf_counter() - t0
    counts = Counts(total=len(points), skipped=len(points) - len(todo))
    if counts.skipped:
        log(f"{counts.skipped} of {len(points)} points skipped: saved with the same config, seed and "
            "biasfree version" + ("" if force else " (--force recomputes them)"))
    progress(counts)
    crashed: list[str] = []
    if todo:
        local = None if scheduler is not None or client is not None else \
            min(workers or os.cpu_count() or 1, len(todo))
        t0 = time.perf_counter()
        out.mkdir(parents=True, exist_ok=True)  # the compile cache's parent (validation made none)
        with dask_client(local, scheduler, client, log, out / ".jax-cache") as c:
            n_threads = wait_for_workers(c, worker_timeout_s)
            t1 = time.perf_counter()
            phases["cluster_s"] = t1 - t0
            tasks = _Tasks(c, spec, figures, retries)
            for group in group_points(todo, n_threads, group_size):
                tasks.submit(group)
            try:
                _collect(tasks, out, counts, crashed, progress, log, worker_timeout_s, poll_s)
            finally:
                c.cancel([f for f, _, _ in tasks.live.values()])  # the unfinished ones (Ctrl-C)
            phases["run_s"] = time.perf_counter() - t1
        counts.running = 0
        progress(counts)
    t0 = time.perf_counter()
    df = table_frame(spec, points, out)
    table = save_table(df, out)
    labels = {p.key: p.label() for p in points}
    checks_failed = {labels[k]: names for k, names in failed_checks(df).items()}
    counts.failed_checks = len(checks_failed)
    progress(counts)
    t1 = time.perf_counter()
    from .sweep_figure import write_summary  # matplotlib: only once a sweep has run

    written = write_summary(out, all_panels=all_panels)
    phases |= {"table_s": t1 - t0, "figures_s": time.perf_counter() - t1}
    if counts.crashed:
        log(f"{counts.crashed} of {counts.total} points crashed (error.json and traceback.txt in their "
            f"{out / 'points'}/KEY/ folder; the table's traceback column)")
    if checks_failed:
        log(f"{len(checks_failed)} of {counts.total} points failed a check: {_check_tally(checks_failed)} "
            "(the table's failed_checks column; red crosses in summary.png)")
    return Outcome(counts, table, written[0] if written else None, crashed, written, phases, checks_failed)


def _check_tally(by_point: dict[str, list[str]]) -> str:
    """``"half_times_scale (at 4 points), gd_half_time (at 1 point)"``: each failed check
    and at how many points, the most frequent first."""
    tally: dict[str, int] = {}
    for names in by_point.values():
        for n in names:
            tally[n] = tally.get(n, 0) + 1
    return ", ".join(f"{n} (at {k} point{'s' * (k > 1)})"
                     for n, k in sorted(tally.items(), key=lambda kv: -kv[1]))


def _collect(tasks: _Tasks, out: Path, counts: Counts, crashed: list, progress, log,
             worker_timeout_s: float, poll_s: float) -> None:
    """Save the tasks' points as they arrive until none is left in flight."""
    from .pipeline import Crash, crash  # matplotlib: only once a sweep runs
    from .sweep_cluster import WorkerWatch

    watch = WorkerWatch(tasks.client, tasks.points_of, log, worker_timeout_s)
    last_watch = 0.0
    while tasks.live:
        batch = []
        try:
            batch.append(tasks.done.get(timeout=poll_s))
            while True:
                batch.append(tasks.done.get_nowait())
        except queue.Empty:
            pass
        for fut, arrived in batch:
            if fut.key not in tasks.live:
                continue
            _, group, submitted = tasks.live.pop(fut.key)
            watch.forget(fut.key)
            if fut.status == "finished":
                res = fut.result(timeout=60)
                share = tasks.sched_share(res, submitted, arrived)
                by_key = {p.key: p for p in group}
                for item in res["points"]:
                    p, ran = by_key[item["key"]], item["ran"]
                    save_point(out, p, ran, share)
                    if isinstance(ran, Crash):
                        _crashed(p, ran, counts, crashed, log)
                    else:
                        counts.done += 1
                        counts.failed_checks += not ran.result.passed
            else:
                exc = fut.exception(timeout=60)
                if len(group) > 1:  # find the point that kills its worker: one task each
                    log(f"a task of {len(group)} points ({', '.join(p.key for p in group)}) failed "
                        f"after {tasks.retries} retries ({type(exc).__name__}: {exc}); rerunning its "
                        "points one per task")
                    for p in group:
                        tasks.submit([p])
                else:  # its worker died: the crash record has no elapsed time
                    p, tb = group[0], fut.traceback(timeout=60) or exc.__traceback__
                    text = "".join(traceback.format_exception(type(exc), exc, tb))
                    ran = crash(p.planned, p.seed, exc, text, None)
                    save_point(out, p, ran, 0.0)
                    _crashed(p, ran, counts, crashed, log)
            fut.release()
        now = time.monotonic()
        if now - last_watch >= 0.5:
            counts.running = watch.poll()
            last_watch = now
        progress(counts)


def _crashed(p: Point, ran: Crash, counts: Counts, crashed: list, log) -> None:
    counts.crashed += 1
    crashed.append(p.label())
    log(f"point {p.key} ({p.label()}) crashed: {ran.line()}")
