"""A sweep's files: its points, errors and timings, the table built from them, and the
summary figures.

Layout of a sweep folder ``DIR`` (written only by the client process, each file
atomically, :mod:`biasfree.store`):

- ``points/<key>/``: a computed point, ``result.json`` and ``arrays.npz`` (with
  ``figure.png``/``.pdf`` when the sweep ran with ``figures=True``);
- ``timing/<key>.json``: where the point's time went, ``compute_s`` (the experiment on
  its worker), ``io_s`` (its figure, if drawn, and saving it) and ``sched_s`` (its share
  of its task's scheduling: the worker's wait for the task, moving the result back);
- ``errors/<key>.json``: a point that failed, with its error and full traceback;
- ``table.parquet``: one row per point of the spec (see :func:`table_frame`);
- ``summary.png``: every metric against the first swept field; and for a
  ``linearity-map`` sweep ``contours.png``, the 0.3% contour in every slice.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas

    from .pipeline import Ran
    from .sweep_spec import Point, Spec

TABLE, SUMMARY, CONTOURS, POINTS, ERRORS, TIMING = ("table.parquet", "summary.png", "contours.png",
                                                    "points", "errors", "timing")
TIMES = ("compute_s", "io_s", "sched_s")
COLUMNS = ("seed", "point", "status", "error", "traceback", "elapsed_s", *TIMES, "passed")
"""The table's own columns (a metric of the same name is written ``metric.NAME``)."""


def saved(out: Path, point: Point, experiment: str) -> bool:
    """Whether ``point`` has a complete, matching result under ``out/points``."""
    from .. import store
    from ..results import config_dict

    return store.reusable(out / POINTS / point.key, experiment, config_dict(point.config),
                          point.seed)[0]


def _write_json(path: Path, doc: dict) -> None:
    from .. import store

    data = json.dumps(doc, indent=2, default=repr).encode()
    store.atomic_write(path, lambda fh: fh.write(data))


def save_point(out: Path, point: Point, ran: Ran, sched_s: float) -> None:
    """Write a computed point (:func:`biasfree.app.pipeline.save`, its ``elapsed_s`` the
    compute time) atomically, then its timing: ``compute_s``, ``sched_s``, and ``io_s``
    its ``render_s`` (the figure, on the worker) plus the save measured here; and forget
    any error recorded for it."""
    import time

    from .pipeline import save

    t0 = time.perf_counter()
    save(ran, out / POINTS, name=point.key, elapsed_s=ran.compute_s)
    io_s = ran.render_s + time.perf_counter() - t0
    _write_json(out / TIMING / f"{point.key}.json",
                {"compute_s": ran.compute_s, "io_s": io_s, "sched_s": sched_s})
    (out / ERRORS / f"{point.key}.json").unlink(missing_ok=True)


def record_error(out: Path, point: Point, error: str, tb: str, compute_s: float | None = None) -> None:
    """``out/errors/<key>.json``: the point, its error (``"TypeName: message"``), the
    traceback as text and the time it ran before it failed (None: its worker died)."""
    _write_json(out / ERRORS / f"{point.key}.json",
                {"point": point.key, "seed": point.seed, "swept": point.swept,
                 "overrides": point.overrides, "error": error, "traceback": tb, "compute_s": compute_s})


def _row(spec: Spec, point: Point, out: Path, reserved: set) -> dict:
    row = {**point.swept, "seed": point.seed, "point": point.key}
    err_path = out / ERRORS / f"{point.key}.json"
    if saved(out, point, spec.experiment):  # False when there is no result.json
        doc = json.loads((out / POINTS / point.key / "result.json").read_text())
        t_path = out / TIMING / f"{point.key}.json"
        timing = json.loads(t_path.read_text()) if t_path.exists() else {"compute_s": doc["elapsed_s"]}
        times = {k: float(timing.get(k, float("nan"))) for k in TIMES}
        row |= {"status": "done", "error": None, "traceback": None, **times,
                "elapsed_s": sum(v for v in times.values() if v == v),  # saved before timings: compute
                "passed": bool(doc["passed"])}
        for k, v in doc["metrics"].items():
            row[f"metric.{k}" if k in reserved else k] = float(v)
        for k, c in doc["checks"].items():
            row[f"check.{k}.value"] = float(c["value"])
            row[f"check.{k}.passed"] = bool(c["passed"])
    elif err_path.exists():
        err = json.loads(err_path.read_text())
        row |= {"status": "failed", "error": err["error"], "traceback": err.get("traceback"),
                "compute_s": err.get("compute_s")}
    else:
        row |= {"status": "missing", "error": "not computed (the sweep was interrupted): rerun it"}
    return row


def table_frame(spec: Spec, points: list[Point], out) -> pandas.DataFrame:
    """The sweep's table from the points saved under ``out``: one row per point, in grid
    order (seeds innermost), with the swept fields, ``seed``, ``point`` (the key),
    ``status`` ("done", "failed" or "missing"), ``error`` and ``traceback`` (failed
    points), ``compute_s``, ``io_s``, ``sched_s`` and their sum ``elapsed_s``, every
    metric, ``check.NAME.value`` / ``check.NAME.passed`` and ``passed``.
    ``DataFrame.attrs`` holds the experiment, preset, grid, fixed overrides and seeds."""
    import pandas as pd

    from .. import store

    out = Path(out)
    reserved = set(spec.grid) | set(spec.fixed) | set(COLUMNS)
    df = pd.DataFrame([_row(spec, p, out, reserved) for p in points])
    for k in COLUMNS[2:]:
        if k not in df:
            df[k] = None
    df.attrs = {"experiment": spec.experiment, "preset": spec.preset, "grid": list(spec.grid),
                "fixed": json.loads(json.dumps(spec.fixed)), "seeds": list(spec.seeds),
                "biasfree": store.versions_of("biasfree")}
    return df


def write_table(spec: Spec, points: list[Point], out) -> Path:
    """Write ``out/table.parquet`` atomically; returns its path."""
    from .. import store

    df = table_frame(spec, points, out)
    path = Path(out) / TABLE
    store.atomic_write(path, lambda fh: df.to_parquet(fh, index=False))
    return path


def load_sweep(out) -> pandas.DataFrame:
    """A sweep's table, ``DIR/table.parquet``, as a pandas DataFrame: one row per point
    (swept fields, seed, timings, metrics, checks; see :func:`table_frame`)."""
    try:
        import pandas as pd
    except ImportError:
        raise ImportError("load_sweep needs pandas and pyarrow: pip install 'biasfree[sweep]'") from None
    path = Path(out) / TABLE
    if not path.exists():
        raise FileNotFoundError(f"no {TABLE} in {out}: run `biasfree sweep SPEC.toml --out {out}` first")
    return pd.read_parquet(path)
