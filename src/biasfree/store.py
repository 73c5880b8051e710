"""Results on disk: ``DIR/NAME/result.json``, ``arrays.npz``, ``figure.png``/``.pdf``.

Every file is written to a temporary name in the same folder and moved into place
with ``os.replace``, so a crash never leaves a half-written result. No pickle:
JSON, and ``.npz`` loaded with ``allow_pickle=False``.
"""

from __future__ import annotations

import json
import os
import platform
import tempfile
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import numpy as np

from .experiments.base import Check, Result

RESULT_KEYS = ("experiment", "size", "seed", "config", "metrics", "checks", "versions",
               "elapsed_s")


def versions() -> dict[str, str]:
    """Versions of Python and the libraries a result depends on."""
    out = {"python": platform.python_version()}
    for pkg in ("biasfree", "jax", "jaxlib", "diffrax", "numpy", "scipy", "matplotlib"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = "not installed"
    return out


def atomic_write(path: Path, write) -> None:
    """Call ``write(fh)`` on a temporary file beside ``path``, then move it into place."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)  # mkstemp makes 0600; results are meant to be shared
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def result_json(result: Result, elapsed_s: float) -> dict:
    """The ``result.json`` document (keys in DESIGN.md's output contract)."""
    return {
        "experiment": result.experiment, "size": result.size, "seed": result.seed,
        "config": result.config,
        "metrics": {k: float(v) for k, v in result.metrics.items()},
        "checks": {k: c.to_json() for k, c in result.checks.items()},
        "versions": versions(), "elapsed_s": float(elapsed_s), "passed": result.passed,
        "notes": result.notes,
    }


def save(result: Result, out_dir, elapsed_s: float, figure=None) -> list[Path]:
    """Write the result (and ``figure``, a matplotlib Figure) under
    ``out_dir/<experiment>/``; returns the paths written."""
    folder = Path(out_dir) / result.experiment
    doc = json.dumps(result_json(result, elapsed_s), indent=2, allow_nan=True).encode()
    paths = [folder / "result.json", folder / "arrays.npz"]
    atomic_write(paths[0], lambda fh: fh.write(doc))
    arrays = {k: np.asarray(v) for k, v in result.arrays.items()}
    atomic_write(paths[1], lambda fh: np.savez_compressed(fh, **arrays))
    if figure is not None:
        for ext in ("png", "pdf"):
            p = folder / f"figure.{ext}"
            atomic_write(p, lambda fh, ext=ext: figure.savefig(fh, format=ext, dpi=130,
                                                          bbox_inches="tight"))
            paths.append(p)
    return paths


def load(folder) -> Result:
    """Read a saved result back (arrays included, without pickle)."""
    folder = Path(folder)
    path = folder / "result.json"
    if not path.exists():
        raise FileNotFoundError(f"no result.json in {folder}: run `biasfree run` first")
    doc = json.loads(path.read_text())
    missing = [k for k in RESULT_KEYS if k not in doc]
    if missing:
        raise ValueError(f"{path} is missing keys {missing}: not a biasfree result")
    arrays = {}
    if (folder / "arrays.npz").exists():
        with np.load(folder / "arrays.npz", allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
    checks = {k: Check(c["value"], c["threshold"], c["claim"], c.get("op", "<="),
                       c.get("unit", ""))  # files written before units existed have none
              for k, c in doc["checks"].items()}
    return Result(doc["experiment"], doc["size"], doc["seed"], doc["config"], doc["metrics"],
                  checks, arrays, doc.get("notes", ""))


def load_all(out_dir) -> list[tuple[Result, dict]]:
    """Every saved result under ``out_dir`` with its raw JSON document."""
    found = []
    for path in sorted(Path(out_dir).glob("*/result.json")):
        found.append((load(path.parent), json.loads(path.read_text())))
    return found
