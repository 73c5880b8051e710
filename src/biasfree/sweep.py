"""Sweeps: one experiment over a grid of config overrides × seeds, on Dask distributed.

A spec is a TOML file (read with :mod:`tomllib`)::

    experiment = "leaky-collapse"   # any registered experiment
    preset = "tiny"                 # the config every point starts from (default "paper")
    seeds = [0, 1, 2, 3]
    [grid]                          # cartesian product over config fields
    width = [40, 100]
    random_scale = [1e-4, 1e-2]
    [fixed]                         # optional overrides for every point
    n_records = 50

A *point* is (config overrides, seed). Every point's config is resolved and validated
(:func:`biasfree.experiments.config.resolve_config`) before any task starts, so a bad
spec fails at once with the config's own message.

**Where results go.** Each point is stored once under
``DIR/points/<key>/`` (``result.json``, ``arrays.npz``, ``figure.png``/``.pdf``), where
``key`` hashes the experiment, the *effective* config, the seed and the biasfree
version (:func:`point_key`): a rerun finds the points already computed and skips
them, whatever spec they came from. Tasks run :func:`run_point` on Dask workers and
*return* their results; only this process (the client, which owns ``DIR``) writes, each
point atomically (:func:`biasfree.store.save`), so two workers never write the same
file and a kill at any moment (Ctrl-C, SIGKILL, a lost worker) leaves complete points
only. A point whose task still fails after Dask's ``retries`` is recorded in
``DIR/errors/<key>.json`` and the sweep goes on; a rerun tries it again.

**The table.** ``DIR/table.parquet``: one row per point of the spec, in grid order,
with the swept fields, ``seed``, ``point`` (the key), ``status`` ("done" or "failed"),
``error``, ``elapsed_s``, every metric (named as in ``result.json``; ``metric.NAME``
where a name is also a column above), ``check.NAME.value`` and ``check.NAME.passed``
for every check, and ``passed`` (every check passed). :func:`load_sweep` reads it back
as a pandas DataFrame; ``DataFrame.attrs`` holds the experiment, preset, grid and
fixed overrides. ``DIR/summary.png`` plots each metric against the first swept field,
median over seeds with the min–max band (:mod:`biasfree.plotting.sweep`).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import time
import traceback
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas

# The experiments, the store and Dask are imported where used: `import biasfree` (which
# exports load_sweep) must not load every experiment.
DEFAULT_PRESET = "paper"  # as biasfree.experiments.config.DEFAULT_PRESET

SPEC_KEYS = ("experiment", "preset", "seeds", "grid", "fixed")
RETRIES = 2
"""Dask ``retries`` per point: a task that raises (or whose worker dies) is tried this
many more times before the point is recorded as failed."""
WORKER_ENV = {"XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1",
              "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
"""Environment of local worker processes: one thread each, so N workers use N cores
instead of fighting over them."""
TABLE, SUMMARY, POINTS, ERRORS = "table.parquet", "summary.png", "points", "errors"


class SpecError(ValueError):
    """A sweep spec that cannot run: unreadable, an unknown key, a bad grid or seeds, or a
    point whose config the experiment rejects."""


# ------------------------------------------------------------------ the spec


@dataclass(frozen=True)
class Spec:
    """A parsed sweep spec: ``experiment`` name, ``preset`` name, ``seeds``, ``grid``
    (field -> tuple of values, in the file's order) and ``fixed`` (field -> value)."""

    experiment: str
    preset: str = DEFAULT_PRESET
    seeds: tuple[int, ...] = (0,)
    grid: dict = field(default_factory=dict)
    fixed: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Point:
    """One task: its ``key`` (folder name under ``points/``), ``seed``, ``swept`` (grid
    field -> value), the recorded ``overrides`` (fixed and swept, coerced) and the
    resolved ``config``."""

    key: str
    seed: int
    swept: dict
    overrides: dict
    config: object

    def label(self) -> str:
        return ", ".join([f"{k}={v!r}" for k, v in self.swept.items()] + [f"seed={self.seed}"])


def parse_spec(doc: Mapping, source: str = "spec") -> Spec:
    """A :class:`Spec` from a TOML document (a dict); :class:`SpecError` names what is
    wrong and how to write it."""
    unknown = [k for k in doc if k not in SPEC_KEYS]
    if unknown:
        raise SpecError(f"{source}: unknown key(s) {', '.join(map(repr, unknown))}; a spec has "
                        f"{', '.join(SPEC_KEYS)} (config fields go under [grid] or [fixed])")
    name = doc.get("experiment")
    if not isinstance(name, str):
        raise SpecError(f"{source}: experiment = \"NAME\" is required (see `biasfree list`)")
    preset = doc.get("preset", DEFAULT_PRESET)
    if not isinstance(preset, str):
        raise SpecError(f"{source}: preset must be a name such as \"tiny\", got {preset!r}")
    seeds = doc.get("seeds", [0])
    if (not isinstance(seeds, list) or not seeds
            or not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in seeds)):
        raise SpecError(f"{source}: seeds must be a non-empty list of integers >= 0, such as "
                        f"[0, 1, 2, 3], got {seeds!r}")
    if any(s >= 2**31 for s in seeds):
        raise SpecError(f"{source}: seeds must be below 2**31, got {max(seeds)}")
    if len(set(seeds)) != len(seeds):
        raise SpecError(f"{source}: seeds {seeds} lists a seed twice")
    grid, fixed = doc.get("grid", {}), doc.get("fixed", {})
    for table, what in ((grid, "grid"), (fixed, "fixed")):
        if not isinstance(table, dict):
            raise SpecError(f"{source}: [{what}] must be a table of FIELD = VALUE lines")
    for k, values in grid.items():
        if not isinstance(values, list) or not values:
            raise SpecError(f"{source}: grid.{k} must be a non-empty list of values, such as "
                            f"{k} = [{values!r}] (a single value goes under [fixed])")
        if len({json.dumps(v) for v in values}) != len(values):
            raise SpecError(f"{source}: grid.{k} = {values!r} lists a value twice")
    both = sorted(set(grid) & set(fixed))
    if both:
        raise SpecError(f"{source}: {', '.join(both)} is both swept ([grid]) and fixed ([fixed]); "
                        "keep one")
    return Spec(name, preset, tuple(seeds), {k: tuple(v) for k, v in grid.items()}, dict(fixed))


def read_spec(path) -> Spec:
    """Read and parse a spec file (see the module docstring)."""
    import tomllib

    path = Path(path)
    try:
        with path.open("rb") as fh:
            doc = tomllib.load(fh)
    except OSError as e:
        raise SpecError(f"cannot read sweep spec {path}: {e.strerror or e}") from None
    except tomllib.TOMLDecodeError as e:
        raise SpecError(f"sweep spec {path} is not valid TOML: {e}") from None
    return parse_spec(doc, str(path))


def point_key(experiment: str, config: Mapping, seed: int) -> str:
    """The folder name of a point: a hash of the experiment, the effective ``config`` (as
    ``result.json`` stores it), the seed and the biasfree version
    (:func:`biasfree.store.run_key`)."""
    from . import store

    doc = json.dumps(store.run_key(experiment, dict(config), seed), sort_keys=True)
    return hashlib.sha256(doc.encode()).hexdigest()[:16]


def plan_points(spec: Spec) -> list[Point]:
    """Every point of ``spec`` (grid in the file's order, seeds innermost), each config
    resolved and validated. Raises :class:`SpecError` (unknown experiment, preset, field
    or a bad value, with the config's own message) before anything runs."""
    from .experiments import get
    from .experiments.base import config_dict
    from .experiments.config import ConfigError, recorded_overrides, resolve_config

    try:
        exp = get(spec.experiment)
    except KeyError as e:
        raise SpecError(str(e.args[0])) from None
    fields = list(spec.grid)
    points = []
    for values in itertools.product(*spec.grid.values()):
        swept = dict(zip(fields, values, strict=True))
        overrides = {**spec.fixed, **swept}
        try:
            cfg = resolve_config(exp, spec.preset, overrides)
            recorded = recorded_overrides(exp, overrides)
        except ConfigError as e:
            where = ", ".join(f"{k}={v!r}" for k, v in swept.items())
            raise SpecError(f"{e}" + (f" (at grid point {where})" if where else "")) from None
        conf = config_dict(cfg)
        for seed in spec.seeds:
            points.append(Point(point_key(exp.name, conf, seed), seed, swept, recorded, cfg))
    return points


# ------------------------------------------------------------------ a task


def run_point(experiment: str, config, seed: int, preset: str, overrides: dict) -> dict:
    """Compute one point (on a Dask worker): the :class:`~biasfree.experiments.base.Result`,
    its run time and its figure rendered to bytes. Writes nothing: the client saves."""
    import io

    from .experiments import get
    from .experiments.base import run_experiment

    t0 = time.perf_counter()
    result = run_experiment(get(experiment), config, seed, preset=preset, overrides=overrides)
    elapsed = time.perf_counter() - t0
    from . import plotting

    fig = plotting.figure(result)
    rendered = {}
    for ext in ("png", "pdf"):
        buf = io.BytesIO()
        fig.savefig(buf, format=ext, dpi=130, bbox_inches="tight")
        rendered[ext] = buf.getvalue()
    plotting.plt.close(fig)
    return {"result": result, "elapsed_s": elapsed, "figure": rendered}


# ------------------------------------------------------------------ running


@dataclass
class Counts:
    """Progress of a sweep: ``total`` points, ``skipped`` (saved before), ``done``
    (computed now), ``failed``, ``running`` (on a worker now)."""

    total: int
    skipped: int = 0
    done: int = 0
    failed: int = 0
    running: int = 0

    @property
    def finished(self) -> int:
        return self.skipped + self.done + self.failed


@dataclass(frozen=True)
class Outcome:
    """What a sweep did: ``counts``, the ``table`` and ``summary`` paths, and the failed
    points' labels."""

    counts: Counts
    table: Path
    summary: Path | None
    failed: list[str]


@contextmanager
def dask_client(workers: int | None = None, scheduler: str | None = None,
                log: Callable[[str], None] = lambda _: None) -> Iterator:
    """A ``dask.distributed.Client``: on an existing cluster at ``scheduler``
    (``tcp://host:8786``), or on a new ``LocalCluster`` of ``workers`` single-threaded
    worker processes (default: the number of cores). Closed on exit."""
    try:
        from dask.distributed import Client, LocalCluster
    except ImportError:
        raise ImportError("biasfree sweep needs Dask: pip install 'biasfree[sweep]'") from None
    if scheduler is not None and workers is not None:
        raise ValueError("give either workers (a local cluster) or scheduler (an existing one)")
    cluster = None
    if scheduler is not None:
        try:
            client = Client(scheduler, timeout="10s")
        except OSError as e:
            raise ConnectionError(f"no Dask scheduler answers at {scheduler} ({e}); start one with "
                                  "`dask scheduler` and workers with `dask worker ADDRESS`") from None
    else:
        n = workers or os.cpu_count() or 1
        if n < 1:
            raise ValueError(f"workers={n}: need at least one worker")
        cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                               dashboard_address=":0", env=WORKER_ENV)
        client = Client(cluster)
    try:
        if _dashboard_up(client):
            log(f"Dask dashboard: {client.dashboard_link}")
        yield client
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def _dashboard_up(client) -> bool:
    """Whether the scheduler's dashboard answers with its pages (without bokeh where the
    scheduler runs it serves only a "Dask needs bokeh" note)."""
    import urllib.request

    if "dashboard" not in client.scheduler_info().get("services", {}):
        return False
    try:
        with urllib.request.urlopen(client.dashboard_link, timeout=2) as r:
            return r.status == 200 and b"needs bokeh" not in r.read(4096)
    except (OSError, ValueError):
        return False


def saved(out: Path, point: Point, experiment: str) -> bool:
    """Whether ``point`` has a complete, matching result under ``out/points``."""
    from . import store
    from .experiments.base import config_dict

    return store.reusable(out / POINTS / point.key, experiment, config_dict(point.config),
                          point.seed)[0]


def save_point(out: Path, point: Point, payload: dict) -> None:
    """Write a computed point atomically and forget any error recorded for it."""
    from . import store

    store.save(payload["result"], out / POINTS, payload["elapsed_s"], payload["figure"],
               name=point.key)
    (out / ERRORS / f"{point.key}.json").unlink(missing_ok=True)


def record_error(out: Path, point: Point, exc: BaseException, tb) -> None:
    """``out/errors/<key>.json``: the point, the exception and its traceback."""
    doc = {"point": point.key, "seed": point.seed, "swept": point.swept, "overrides": point.overrides,
           "error": f"{type(exc).__name__}: {exc}",
           "traceback": "".join(traceback.format_tb(tb)) if tb is not None else ""}
    data = json.dumps(doc, indent=2, default=repr).encode()
    from . import store

    store.atomic_write(out / ERRORS / f"{point.key}.json", lambda fh: fh.write(data))


def run_sweep(spec: Spec, out, *, workers: int | None = None, scheduler: str | None = None,
              force: bool = False, retries: int = RETRIES,
              progress: Callable[[Counts], None] = lambda _: None,
              log: Callable[[str], None] = lambda _: None, poll_s: float = 0.2) -> Outcome:
    """Run every point of ``spec`` not already saved under ``out`` (all of them with
    ``force``) on Dask, save each as it arrives, then write ``out/table.parquet`` and
    ``out/summary.png``. ``progress(counts)`` is called as points start and finish;
    ``log(line)`` with what a user should read (skips, the dashboard, failures). A
    failed point does not stop the sweep. On Ctrl-C the saved points stay and the
    pending tasks are cancelled."""
    out = Path(out)
    points = plan_points(spec)
    exp = spec.experiment
    todo = [p for p in points if force or not saved(out, p, exp)]
    counts = Counts(total=len(points), skipped=len(points) - len(todo))
    if counts.skipped:
        log(f"{counts.skipped} of {len(points)} points skipped: saved with the same config, seed and "
            "biasfree version" + ("" if force else " (--force recomputes them)"))
    progress(counts)
    failed = []
    if todo:
        from dask.distributed import as_completed

        n_local = None if scheduler is not None else min(workers or os.cpu_count() or 1, len(todo))
        with dask_client(n_local, scheduler, log) as client:
            run_id = uuid.uuid4().hex[:8]
            futures = {client.submit(run_point, exp, p.config, p.seed, spec.preset, p.overrides,
                                     key=f"{exp}-{p.key}-{run_id}", retries=retries,
                                     pure=False): p for p in todo}
            by_key = {f.key: p for f, p in futures.items()}
            pending = as_completed(futures)
            try:
                while not pending.is_empty():
                    batch = pending.next_batch(block=False)
                    for fut in batch:
                        p = by_key[fut.key]
                        if fut.status == "finished":
                            save_point(out, p, fut.result())
                            counts.done += 1
                        else:
                            exc = fut.exception()
                            record_error(out, p, exc, fut.traceback())
                            counts.failed += 1
                            failed.append(p.label())
                            log(f"point {p.label()} failed after {retries} retries: "
                                f"{type(exc).__name__}: {exc}")
                        del futures[fut]
                        fut.release()
                    processing = client.processing()
                    counts.running = sum(k in by_key for keys in processing.values() for k in keys)
                    progress(counts)
                    if not batch:
                        time.sleep(poll_s)
            finally:
                client.cancel(list(futures))  # the unfinished ones (Ctrl-C)
        counts.running = 0
        progress(counts)
    table = write_table(spec, points, out)
    summary = write_summary(out)
    return Outcome(counts, table, summary, failed)


# ------------------------------------------------------------------ the table


def _row(spec: Spec, point: Point, out: Path, reserved: set) -> dict:
    row = {**point.swept, "seed": point.seed, "point": point.key}
    folder = out / POINTS / point.key
    err_path = out / ERRORS / f"{point.key}.json"
    if (folder / "result.json").exists() and saved(out, point, spec.experiment):
        doc = json.loads((folder / "result.json").read_text())
        row |= {"status": "done", "error": None, "elapsed_s": float(doc["elapsed_s"]),
                "passed": bool(doc["passed"])}
        for k, v in doc["metrics"].items():
            row[f"metric.{k}" if k in reserved else k] = float(v)
        for k, c in doc["checks"].items():
            row[f"check.{k}.value"] = float(c["value"])
            row[f"check.{k}.passed"] = bool(c["passed"])
    elif err_path.exists():
        row |= {"status": "failed", "error": json.loads(err_path.read_text())["error"]}
    else:
        row |= {"status": "missing", "error": "not computed (the sweep was interrupted): rerun it"}
    return row


def table_frame(spec: Spec, points: list[Point], out) -> pandas.DataFrame:
    """The sweep's table (see the module docstring) from the points saved under ``out``."""
    import pandas as pd

    from . import store

    out = Path(out)
    reserved = set(spec.grid) | set(spec.fixed) | {"seed", "point", "status", "error", "elapsed_s",
                                                   "passed"}
    df = pd.DataFrame([_row(spec, p, out, reserved) for p in points])
    for k in ("status", "error", "elapsed_s", "passed"):
        if k not in df:
            df[k] = None
    df.attrs = {"experiment": spec.experiment, "preset": spec.preset, "grid": list(spec.grid),
                "fixed": json.loads(json.dumps(spec.fixed)), "seeds": list(spec.seeds),
                "biasfree": store.versions_of("biasfree")}
    return df


def write_table(spec: Spec, points: list[Point], out) -> Path:
    """Write ``out/table.parquet`` atomically; returns its path."""
    from . import store

    df = table_frame(spec, points, out)
    path = Path(out) / TABLE
    store.atomic_write(path, lambda fh: df.to_parquet(fh, index=False))
    return path


def write_summary(out) -> Path | None:
    """Write ``out/summary.png`` from the table (None when no point has a result)."""
    df = load_sweep(out)
    if not (df["status"] == "done").any():
        return None
    from . import store
    from .plotting.sweep import plt, summary_figure

    fig = summary_figure(df)
    path = Path(out) / SUMMARY
    store.atomic_write(path, lambda fh: fig.savefig(fh, format="png", dpi=110, bbox_inches="tight"))
    plt.close(fig)
    return path


def load_sweep(out) -> pandas.DataFrame:
    """A sweep's table, ``DIR/table.parquet``, as a pandas DataFrame: one row per point
    (swept fields, seed, metrics, checks; see :mod:`biasfree.sweep`)."""
    try:
        import pandas as pd
    except ImportError:
        raise ImportError("load_sweep needs pandas and pyarrow: pip install 'biasfree[sweep]'") from None
    path = Path(out) / TABLE
    if not path.exists():
        raise FileNotFoundError(f"no {TABLE} in {out}: run `biasfree sweep SPEC.toml --out {out}` first")
    return pd.read_parquet(path)
