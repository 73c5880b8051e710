"""A sweep's files: its points, errors and timings, the table built from them, and the
summary figures.

Layout of a sweep folder ``DIR`` (written only by the client process, each file
atomically, :mod:`biasfree.store`):

- ``points/<key>/``: a computed point, ``result.json`` and ``arrays.npz`` (with
  ``figure.png``/``.pdf`` when the sweep ran with ``figures=True``), or, for a point that
  crashed, the crash record ``biasfree run`` writes (``error.json``, ``traceback.txt``:
  :mod:`biasfree.app.pipeline`);
- ``timing/<key>.json``: where the point's time went, ``compute_s`` (the experiment on
  its worker), ``io_s`` (its figure, if drawn, and saving it) and ``sched_s`` (its share
  of its task's scheduling: the worker's wait for the task, moving the result back);
- ``table.parquet``: one row per point of the spec (see :func:`table_frame`);
- ``summary.png``: every metric against the first swept field; and for a
  ``linearity-map`` sweep ``contours.png``, the 0.3% contour in every slice.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

from .. import store

if TYPE_CHECKING:
    import pandas

    from .pipeline import Crash, Ran
    from .sweep_spec import Point, Spec

TABLE, SUMMARY, CONTOURS, POINTS, TIMING = ("table.parquet", "summary.png", "contours.png", "points",
                                            "timing")
TIMES = ("compute_s", "io_s", "sched_s")
COLUMNS = ("seed", "point", "status", "error", "traceback", "elapsed_s", *TIMES, "passed", "failed_checks")
"""The table's own columns (a metric of the same name is written ``metric.NAME``)."""
DEPRECATED_METRICS = {"half_time_ratio_alpha0": "half_time_ratio_alpha_A at the smallest α A"}
"""Old metric name -> the one name its value has now: points saved before the rename still
carry the old one, which the table leaves out (one column per value)."""


def saved(out: Path, point: Point, experiment: str) -> bool:
    """Whether ``point`` has a complete, matching result under ``out/points``."""
    return store.reusable(out / POINTS / point.key, experiment, point.planned.recorded, point.seed)[0]


def save_point(out: Path, point: Point, ran: Ran | Crash, sched_s: float) -> None:
    """Write a computed point, or its crash record, as ``biasfree run`` does
    (:func:`biasfree.app.pipeline.save`, a result's ``elapsed_s`` its compute time)
    atomically under ``out/points/<key>/``, then a result's ``timing/<key>.json`` (module
    doc; ``io_s`` the worker's ``render_s`` plus the save measured here)."""
    import time

    from .pipeline import Crash, save

    t0 = time.perf_counter()
    save(ran, out / POINTS, name=point.key, elapsed_s=ran.compute_s)
    if not isinstance(ran, Crash):
        data = json.dumps({"compute_s": ran.compute_s, "io_s": ran.render_s + time.perf_counter() - t0,
                           "sched_s": sched_s}, indent=2, default=repr).encode()
        store.atomic_write(out / TIMING / f"{point.key}.json", lambda fh: fh.write(data))


def _row(spec: Spec, point: Point, out: Path, reserved: set, units: dict) -> dict:
    row = {**point.swept, "seed": point.seed, "point": point.key}
    folder = out / POINTS / point.key
    if saved(out, point, spec.experiment):  # False when there is no result.json
        doc = json.loads((folder / "result.json").read_text())
        t_path = out / TIMING / f"{point.key}.json"
        timing = json.loads(t_path.read_text()) if t_path.exists() else {"compute_s": doc["elapsed_s"]}
        times = {k: float(timing.get(k, float("nan"))) for k in TIMES}
        row |= {"status": "done", "error": None, "traceback": None, **times,
                "elapsed_s": sum(v for v in times.values() if v == v),  # saved before timings: compute
                "passed": bool(doc["passed"]), "failed_checks": ", ".join(
                    k for k, c in doc["checks"].items() if not c["passed"])}
        for k, v in doc["metrics"].items():
            if k not in DEPRECATED_METRICS:
                row[f"metric.{k}" if k in reserved else k] = float(v)
        for k, c in doc["checks"].items():
            row[f"check.{k}.value"] = float(c["value"])
            row[f"check.{k}.threshold"] = float(c["threshold"])
            row[f"check.{k}.passed"] = bool(c["passed"])
            units[k] = c.get("unit", "")
    elif (folder / "error.json").exists():
        err = json.loads((folder / "error.json").read_text())
        tb = folder / "traceback.txt"
        row |= {"status": "crashed", "error": f"{err['error']}: {err['message']}",
                "traceback": tb.read_text() if tb.exists() else None, "compute_s": err.get("elapsed_s")}
    else:
        row |= {"status": "missing", "error": "not computed (the sweep was interrupted): rerun it"}
    return row


def table_frame(spec: Spec, points: list[Point], out) -> pandas.DataFrame:
    """The sweep's table from the points saved under ``out``: one row per point, in grid
    order (seeds innermost), with the swept fields, ``seed``, ``point`` (the key),
    ``status`` ("done", "crashed" or "missing"), ``error`` and ``traceback`` (crashed
    points), ``compute_s``, ``io_s``, ``sched_s`` and their sum ``elapsed_s``, every
    metric (not the :data:`DEPRECATED_METRICS`), ``check.NAME.value`` /
    ``check.NAME.threshold`` / ``check.NAME.passed``, ``passed`` (every check of the point
    passed) and ``failed_checks`` (the names of those that failed, ", "-separated; "" when
    none did, None for a point with no result). ``DataFrame.attrs`` holds
    the experiment, preset, grid, fixed overrides, seeds and ``check_units`` (check -> unit)."""
    import pandas as pd

    out = Path(out)
    reserved = set(spec.grid) | set(spec.fixed) | set(COLUMNS)
    units: dict = {}
    df = pd.DataFrame([_row(spec, p, out, reserved, units) for p in points])
    for k in COLUMNS[2:]:
        if k not in df:
            df[k] = None
    df.attrs = {"experiment": spec.experiment, "preset": spec.preset, "grid": list(spec.grid),
                "fixed": json.loads(json.dumps(spec.fixed)), "seeds": list(spec.seeds), "check_units": units,
                "biasfree": store.versions_of("biasfree")}
    return df


def write_table(spec: Spec, points: list[Point], out) -> Path:
    """Write ``out/table.parquet`` atomically; returns its path."""
    return save_table(table_frame(spec, points, out), out)


def save_table(df: pandas.DataFrame, out) -> Path:
    """Write the table ``df`` (:func:`table_frame`) as ``out/table.parquet`` atomically; returns its path."""
    path = Path(out) / TABLE
    store.atomic_write(path, lambda fh: df.to_parquet(fh, index=False))
    return path


def failed_checks(df) -> dict[str, list[str]]:
    """``{point key: [names of its failed checks]}`` for every point of a sweep table
    (:func:`table_frame`) that has a result and failed a check, in the table's order."""
    if "failed_checks" not in df:  # a table written before the column
        return {}
    return {key: names.split(", ") for key, names in zip(df["point"], df["failed_checks"], strict=True)
            if isinstance(names, str) and names}


def load_sweep(out) -> pandas.DataFrame:
    """A sweep's table, ``DIR/table.parquet``, as a pandas DataFrame: one row per point
    (swept fields, seed, timings, metrics, checks; see :func:`table_frame`)."""
    try:
        import pandas as pd
    except ImportError:
        raise ImportError("load_sweep needs pandas and pyarrow: pip install 'biasfree[sweep]'") from None
    if not isinstance(out, str | os.PathLike):
        raise TypeError(f"out={out!r} must be a sweep's folder (a path)")
    path = Path(out) / TABLE
    if not path.exists():
        raise FileNotFoundError(f"no {TABLE} in {out}: run `biasfree sweep SPEC.toml --out {out}` first")
    return pd.read_parquet(path)
