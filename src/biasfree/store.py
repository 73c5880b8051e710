"""Results on disk: ``DIR/NAME/result.json``, ``arrays.npz``, ``figure.png``/``.pdf``
(or, for an experiment that crashed, ``DIR/NAME/error.json`` and ``traceback.txt``, with
the last result there kept in ``DIR/NAME/previous/``), and every file the package writes,
each atomically (:func:`atomic_write`, :func:`save_figure`).

An experiment's folder is replaced as a unit: its files are written into a temporary
folder beside it (``DIR/.NAME.tmp-PID-*``), which is then renamed into place (the old
folder is first renamed aside to ``DIR/.NAME.old-PID-*`` and deleted after). A crash or
a kill at any moment leaves either the old complete result or the new one, never a mix;
the next save cleans up what a killed process left behind. :func:`reusable` says whether
a saved result can be kept instead of recomputed. No pickle: JSON, and ``.npz`` loaded
with ``allow_pickle=False``.
"""

from __future__ import annotations

import errno
import io
import json
import os
import platform
import re
import shutil
import tempfile
import uuid
import zipfile
from functools import partial
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import numpy as np

from .results import Check, Result

RESULT_KEYS = ("experiment", "size", "seed", "config", "metrics", "checks", "versions",
               "elapsed_s")


def versions() -> dict[str, str]:
    """Versions of Python and the libraries a result depends on."""
    return {"python": platform.python_version()} | {pkg: versions_of(pkg) for pkg in (
        "biasfree", "jax", "jaxlib", "diffrax", "numpy", "scipy", "matplotlib")}


def versions_of(pkg: str) -> str:
    """The installed version of ``pkg``, or ``"not installed"``."""
    try:
        return version(pkg)
    except PackageNotFoundError:
        return "not installed"


def atomic_write(path: Path, write) -> None:
    """Call ``write(fh)`` on a temporary file beside ``path`` (``.NAME.tmp-PID-*``, removed on
    any exception, Ctrl-C included; after a kill, by :func:`clean_leftovers`), then move it
    into place."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.tmp-{os.getpid()}-")
    os.close(fd)
    try:
        _write_file(Path(tmp), write)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_json(path, doc) -> None:
    """Write ``doc`` as indented JSON to ``path`` atomically (:func:`atomic_write`), its folder
    made if missing: the benchmarks' ``--json FILE``."""
    text = (json.dumps(doc, indent=2) + "\n").encode()
    atomic_write(Path(path), lambda fh: fh.write(text))


FIGURE_EXTS = ("png", "pdf")
PREVIOUS = "previous"
"""The subfolder of a crash record that keeps the result the crashed rerun would have replaced."""


def render_figure(fig, exts=FIGURE_EXTS, dpi: int = 130) -> dict[str, bytes]:
    """``{ext: bytes}``: the matplotlib Figure ``fig`` rendered as each of ``exts`` (``"png"``,
    ``"pdf"``) at ``dpi``, cropped to its tight bounding box padded by ``savefig.pad_inches``:
    the one place a figure is rendered.

    The layout is done once for all formats: one draw without rendering, at ``dpi``, runs the
    figure's layout engine (constrained layout, if any) and fixes the box, then each format
    renders that box with the engine off (restored after). The PNG is pixel for pixel what
    ``savefig(bbox_inches="tight")`` draws; that call would repeat the layout draw for every
    format (two of the four draws of a PNG and a PDF). The PDF shares the PNG's box: its
    own text metrics can be a few points wider, which its padding absorbs."""
    from matplotlib import rcParams

    engine, fig_dpi = fig.get_layout_engine(), fig.dpi
    fig.dpi = dpi  # the layout and the box at the dpi rendered, as savefig does
    try:
        fig.draw_without_rendering()
        box = fig.get_tightbbox().padded(rcParams["savefig.pad_inches"])
        fig.set_layout_engine(None)  # no engine under the default rcParams: savefig draws once
        out = {}
        for ext in exts:
            buf = io.BytesIO()
            fig.savefig(buf, format=ext, dpi=dpi, bbox_inches=box)
            out[ext] = buf.getvalue()
        return out
    finally:
        fig.dpi = fig_dpi
        if engine is not None:
            fig.set_layout_engine(engine)


def save_figure(fig, stem, exts=FIGURE_EXTS, dpi: int = 130) -> list[Path]:
    """Write ``fig`` as ``STEM.EXT`` for each of ``exts`` (:func:`render_figure`), each file
    atomically; returns the paths written."""
    paths = [Path(f"{stem}.{ext}") for ext in exts]
    for path, data in zip(paths, render_figure(fig, exts, dpi).values(), strict=True):
        atomic_write(path, lambda fh, data=data: fh.write(data))
    return paths


def result_json(result: Result, elapsed_s: float) -> dict:
    """The ``result.json`` document (keys listed in docs/cli.md, "Output"; ``size`` is the
    preset's name, kept for readers of the older files, ``overrides`` the fields set on top
    of it, ``config`` the effective config, ``claim``/``paper_claim`` the sentences the
    result was judged against)."""
    return {
        "experiment": result.experiment, "size": result.preset, "seed": result.seed,
        "config": result.config, "preset": result.preset, "overrides": result.overrides,
        "claim": result.claim, "paper_claim": result.paper_claim,
        "metrics": {k: float(v) for k, v in result.metrics.items()},
        "checks": {k: c.to_json() for k, c in result.checks.items()},
        "versions": versions(), "elapsed_s": float(elapsed_s), "passed": result.passed,
        "notes": result.notes,
    }


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, someone else's
        pass
    return True


def clean_leftovers(out_dir, name: str) -> None:
    """Remove the temporary folders (or files, of :func:`atomic_write`) a killed save of
    ``name`` left in ``out_dir``; if it died between its two renames (old result aside, new
    not yet in place), put the old result back. Those of a save still running (its
    process alive) are left alone."""
    out_dir = Path(out_dir)
    if not out_dir.is_dir():
        return
    pattern = re.compile(rf"\.{re.escape(name)}\.(tmp|old)-(\d+)-")
    for p in sorted(out_dir.iterdir()):
        m = pattern.match(p.name)
        if not m:
            continue
        pid = int(m.group(2))
        if pid != os.getpid() and _pid_alive(pid):
            continue
        if m.group(1) == "old" and p.is_dir() and not (out_dir / name).exists():
            os.rename(p, out_dir / name)
        elif p.is_dir():
            shutil.rmtree(p, ignore_errors=True)
        else:
            p.unlink(missing_ok=True)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_file(path: Path, write) -> None:
    with open(path, "wb") as fh:
        write(fh)
        fh.flush()
        os.fsync(fh.fileno())
    os.chmod(path, 0o644)  # mkstemp makes 0600, open() 0666 less the umask; results are shared


def save(result: Result, out_dir, elapsed_s: float, figure=None, *, name: str | None = None
         ) -> list[Path]:
    """Write the result (and ``figure``, a matplotlib Figure, or already rendered bytes
    ``{"png": ..., "pdf": ...}``) as ``out_dir/<name>/`` (default name: the experiment's),
    replacing any folder there as a unit (see the module docstring); returns the paths
    written. If anything fails the old folder is left as it was."""
    doc = json.dumps(result_json(result, elapsed_s), indent=2, allow_nan=True).encode()
    arrays = {k: np.asarray(v) for k, v in result.arrays.items()}
    writers = {"result.json": lambda fh: fh.write(doc),
               "arrays.npz": lambda fh: np.savez_compressed(fh, **arrays)}
    if figure is not None:  # a dict: rendered elsewhere (a sweep's worker)
        rendered = figure if isinstance(figure, dict) else {}

        def write(fh, ext):  # a Figure is rendered by the first figure file's writer, in the save
            if not rendered:
                rendered.update(render_figure(figure))
            fh.write(rendered[ext])
        for ext in (figure if isinstance(figure, dict) else FIGURE_EXTS):
            writers[f"figure.{ext}"] = partial(write, ext=ext)
    return write_folder(out_dir, name or result.experiment, writers)


def save_crash(out_dir, name: str, doc: dict, traceback_text: str) -> list[Path]:
    """Record that experiment ``name`` raised instead of returning a result: ``doc`` (the
    experiment, seed, preset, overrides, config and the exception, JSON-able) as
    ``out_dir/<name>/error.json`` and the full traceback as ``traceback.txt``, replacing
    the folder as a unit like :func:`save`. The last result there (the folder's, or the
    one an earlier crash kept) is copied into ``<name>/previous/`` first, so a rerun that
    crashes loses nothing (``load(out_dir / name / "previous")`` reads it). Returns the
    paths written, the traceback last."""
    text = json.dumps({**doc, "versions": versions()}, indent=2, allow_nan=True,
                      default=str).encode()
    folder = Path(out_dir) / name
    last = folder if (folder / "result.json").exists() else folder / PREVIOUS
    kept = sorted(last.iterdir()) if (last / "result.json").exists() else []
    writers = {f"{PREVIOUS}/{f.name}": lambda fh, f=f: fh.write(f.read_bytes()) for f in kept if f.is_file()}
    return write_folder(out_dir, name, {**writers, "error.json": lambda fh: fh.write(text),
                                        "traceback.txt": lambda fh: fh.write(traceback_text.encode())})


def _folders(out_dir) -> list[Path]:
    """The folders under ``out_dir`` by name, but the hidden ones (a save in progress or a
    killed one's leftovers)."""
    root = Path(out_dir)
    return sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")) \
        if root.is_dir() else []


def load_crashes(out_dir) -> list[dict]:
    """The ``error.json`` documents of every crashed experiment under ``out_dir`` (folders
    with no ``result.json``), by folder name; unreadable ones are returned as
    ``{"experiment": NAME, "message": why}``."""
    out = []
    for folder in _folders(out_dir):
        path = folder / "error.json"
        if (folder / "result.json").exists() or not path.exists():
            continue
        try:
            doc = json.loads(path.read_text())
            if not isinstance(doc, dict):
                raise ValueError("not a JSON object")
        except (OSError, ValueError) as e:
            doc = {"experiment": folder.name, "message": f"error.json unreadable ({e})"}
        out.append(doc)
    return out


def write_folder(out_dir, name: str, writers: dict) -> list[Path]:
    """``out_dir/<name>/`` holding one file per ``writers`` entry (file name -> ``write(fh)``),
    written into a temporary folder and renamed into place over any old folder (module
    docstring); if anything fails the old folder is left as it was. Saves of the same folder
    by several processes at once each succeed, the last one's files winning (``_swap_in``)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    clean_leftovers(out_dir, name)
    folder = out_dir / name
    tmp = Path(tempfile.mkdtemp(dir=out_dir, prefix=f".{name}.tmp-{os.getpid()}-"))
    aside: list[Path] = []
    try:
        for f, write in writers.items():
            if (tmp / f).parent != tmp:  # a subfolder such as previous/, shared like the folder
                (tmp / f).parent.mkdir(exist_ok=True)
                os.chmod((tmp / f).parent, 0o755)
            _write_file(tmp / f, write)
        os.chmod(tmp, 0o755)  # mkdtemp makes 0700; results are meant to be shared
        _fsync_dir(tmp)
        _swap_in(tmp, folder, aside)
        _fsync_dir(out_dir)
    except BaseException:
        if aside and not folder.exists() and aside[0].exists():
            os.rename(aside[0], folder)  # put the old result back
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        for old in aside:
            shutil.rmtree(old, ignore_errors=True)
    return [folder / f for f in writers]


SWAP_TRIES = 1000
"""How many times ``_swap_in`` moves another save's folder aside before it gives up."""


def _swap_in(tmp: Path, folder: Path, aside: list) -> None:
    """Rename ``tmp`` to ``folder``, first renaming any folder there aside (appended to
    ``aside``, removed by the caller). Another process saving the same folder at the same
    moment can move it aside first (our rename then finds nothing: FileNotFoundError) or put
    its own in place between our two renames (ENOTEMPTY): either way, try again, so every
    concurrent save succeeds and one complete folder is left."""
    for _ in range(SWAP_TRIES):
        if folder.exists():
            old = folder.parent / f".{folder.name}.old-{os.getpid()}-{uuid.uuid4().hex[:8]}"
            try:
                os.rename(folder, old)
                aside.append(old)
            except FileNotFoundError:  # another save moved it aside first
                pass
        try:
            os.rename(tmp, folder)
            return
        except OSError as e:  # another save's folder went in after ours went aside
            if e.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                raise
    raise OSError(f"{folder}: another process kept replacing it; {SWAP_TRIES} tries to put this save "
                  "in place failed")


class CorruptResult(ValueError):
    """A saved result that cannot be read: ``path`` the bad file, ``reason`` in words."""

    def __init__(self, path, reason: str):
        super().__init__(f"{path}: {reason}; rerun the experiment with --force")
        self.path, self.reason = Path(path), reason


def _read_doc(path: Path) -> dict:
    try:
        doc = json.loads(path.read_text())
    except UnicodeDecodeError as e:
        raise CorruptResult(path, f"not text ({e.reason})") from None
    except json.JSONDecodeError as e:
        raise CorruptResult(path, f"not valid JSON, truncated or corrupted ({e.msg} at line "
                                  f"{e.lineno})") from None
    if not isinstance(doc, dict):
        raise CorruptResult(path, "not a JSON object")
    missing = [k for k in RESULT_KEYS if k not in doc]
    if missing:
        raise CorruptResult(path, f"missing keys {missing}: not a complete biasfree result")
    wrong = [f"{k} is {type(doc[k]).__name__}, not {t.__name__}" for k, t in _DOC_TYPES.items()
             if k in doc and not isinstance(doc[k], t)]
    if wrong:  # a hand-edited file: each page and table reads these as their types
        raise CorruptResult(path, f"malformed ({'; '.join(wrong)})")
    return doc


_DOC_TYPES = {"experiment": str, "seed": int, "config": dict, "metrics": dict, "checks": dict,
              "versions": dict, "notes": str, "preset": str, "overrides": dict, "claim": str,
              "paper_claim": str}
"""The type of each key of ``result.json`` that a reader relies on."""


def load(folder) -> Result:
    """Read a saved result back (arrays included, without pickle). Raises
    ``FileNotFoundError`` if there is none and :class:`CorruptResult` (a ``ValueError``
    naming the file) if ``result.json`` or ``arrays.npz`` cannot be read."""
    folder = Path(folder)
    path = folder / "result.json"
    if not path.exists():
        raise FileNotFoundError(f"no result.json in {folder}: run `biasfree run` first")
    doc = _read_doc(path)
    arrays = {}
    npz = folder / "arrays.npz"
    if npz.exists():
        try:
            with np.load(npz, allow_pickle=False) as z:
                arrays = {k: z[k] for k in z.files}
        except (OSError, ValueError, zipfile.BadZipFile, EOFError) as e:
            raise CorruptResult(npz, f"unreadable ({type(e).__name__}: {e})") from None
    try:
        checks = {k: Check(float(c["value"]), float(c["threshold"]), str(c["claim"]),
                           c.get("op", "<="), c.get("unit", ""))  # files before units have none
                  for k, c in doc["checks"].items()}
        return Result(doc["experiment"], doc["seed"], doc["config"],
                      {k: float(v) for k, v in doc["metrics"].items()}, checks, arrays,
                      doc.get("notes", ""),
                      preset=doc.get("preset", doc["size"]),  # files before presets: size only
                      overrides=doc.get("overrides", {}),
                      claim=doc.get("claim", ""),  # files before the claims were kept: ""
                      paper_claim=doc.get("paper_claim", ""))
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise CorruptResult(path, f"malformed ({type(e).__name__}: {e})") from None


def run_key(experiment: str, config: dict, seed: int) -> dict:
    """What a saved result must match to be reused: experiment, effective config (as
    ``result.json`` stores it), seed and the ``biasfree`` version."""
    return {"experiment": experiment, "config": json.loads(json.dumps(config)), "seed": seed,
            "biasfree": versions_of("biasfree")}


def reusable(folder, experiment: str, config: dict, seed: int) -> tuple[bool, str]:
    """Whether the result saved in ``folder`` was computed by the same experiment, from the
    same effective ``config`` and ``seed``, by the same ``biasfree`` version (and is
    complete), with the reason in words."""
    folder = Path(folder)
    key = run_key(experiment, config, seed)
    try:
        doc = json.loads((folder / "result.json").read_text())
    except FileNotFoundError:
        return False, "no saved result"
    except (OSError, ValueError) as e:
        return False, f"saved result.json unreadable ({e})"
    if not (folder / "arrays.npz").exists():
        return False, "saved result has no arrays.npz"
    saved = {"experiment": doc.get("experiment"), "config": doc.get("config"),
             "seed": doc.get("seed"), "biasfree": doc.get("versions", {}).get("biasfree")}
    if saved["config"] != key["config"]:
        cfg = saved["config"] if isinstance(saved["config"], dict) else {}
        diff = [f"{k} {cfg.get(k, '(absent)')!r} -> {v!r}" for k, v in key["config"].items()
                if cfg.get(k, object()) != v] + [f"{k} (no longer a field)" for k in cfg
                                                 if k not in key["config"]]
        return False, "config differs: " + "; ".join(diff)
    for k in ("experiment", "seed", "biasfree"):
        if saved[k] != key[k]:
            return False, f"{'biasfree version' if k == 'biasfree' else k} differs: saved " \
                          f"{saved[k]!r}, now {key[k]!r}"
    return True, (f"saved result has the same config, seed {seed} and biasfree "
                  f"{key['biasfree']}")


RESULT_FILES = ("result.json", "arrays.npz", "figure.png", "figure.pdf")


def load_all(out_dir, skipped: list | None = None) -> list[tuple[Result, dict]]:
    """Every saved result under ``out_dir`` with its raw JSON document.

    A result that cannot be read (truncated or corrupted ``result.json`` or ``arrays.npz``,
    or a folder holding result files but no ``result.json``) raises
    :class:`CorruptResult`, unless a list ``skipped`` is given: then it is left out and
    its :class:`CorruptResult` appended to ``skipped``."""
    found = []
    for folder in _folders(out_dir):
        path = folder / "result.json"
        try:
            if not path.exists():
                if any((folder / f).exists() for f in RESULT_FILES):
                    raise CorruptResult(path, "missing (the folder holds other result files): "
                                              "incomplete result")
                continue  # not a result folder
            found.append((load(folder), _read_doc(path)))
        except CorruptResult as e:
            if skipped is None:
                raise
            skipped.append(e)
    return found
