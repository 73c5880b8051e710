"""One run of one experiment, the one way for ``biasfree run`` and sweeps: run → figure → save.

:func:`run_point` runs a planned experiment (:class:`~biasfree.claims.config.Planned`) at
a seed and draws its figure; an exception inside either is caught and returned as a
:class:`Crash` (a bug, not a result). :func:`save` writes either as ``OUT/NAME/``:

- a result: ``result.json``, ``arrays.npz``, ``figure.png``/``.pdf`` (:func:`biasfree.store.save`);
- a crash: ``error.json`` and ``traceback.txt`` (:func:`biasfree.store.save_crash`), the one
  crash-record format. ``error.json`` holds ``experiment``, ``seed``, ``preset``,
  ``overrides``, ``config`` (as ``result.json`` would), ``error`` (the exception's type
  name), ``message``, ``elapsed_s`` (seconds it ran before it raised; null when its
  worker died), ``exit_code`` (3, what ``biasfree run`` exits with) and ``versions``.

A sweep's Dask worker calls :func:`run_point` with ``render=True`` (it writes nothing) and
the sweep's client saves the point under ``DIR/points/<key>/``, crash or result alike.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .. import store
from .._figure import plt
from ..results import Result

CRASH_EXIT = 3
"""``biasfree run``'s exit status when an experiment crashed (kept in ``error.json``)."""


@dataclass(frozen=True)
class Ran:
    """What :func:`run_point` made: the ``result``; its ``figure`` (a matplotlib Figure, or
    ``{"png": bytes, "pdf": bytes}`` when rendered, or None when not drawn); ``compute_s``
    the experiment's wall seconds and ``render_s`` the figure's."""

    result: Result
    figure: object
    compute_s: float
    render_s: float = 0.0


@dataclass(frozen=True)
class Crash:
    """An experiment (or its figure) that raised: ``doc`` the ``error.json`` document (module
    doc) and ``traceback`` the full traceback as text. ``compute_s`` is ``doc["elapsed_s"]``."""

    doc: dict
    traceback: str

    @property
    def compute_s(self) -> float:
        return self.doc["elapsed_s"] or 0.0

    render_s = 0.0

    def line(self) -> str:
        """``Type: first line of the message``."""
        first = self.doc["message"].strip().splitlines()
        return f"{self.doc['error']}: {first[0]}" if first else self.doc["error"]


def crash(planned, seed: int, error: BaseException, tb: str, elapsed_s: float | None) -> Crash:
    """The :class:`Crash` of ``planned`` at ``seed``: ``error`` raised after ``elapsed_s``
    seconds (None: unknown, its worker died), ``tb`` its traceback."""
    return Crash({"experiment": planned.experiment.name, "seed": seed, "preset": planned.preset,
                  "overrides": planned.overrides, "config": planned.recorded, "error": type(error).__name__,
                  "message": str(error), "elapsed_s": elapsed_s, "exit_code": CRASH_EXIT}, tb)


def run_point(planned, seed: int, progress: Callable[[str], None] | None = None, *,
              figure: bool = True, render: bool = False) -> Ran | Crash:
    """Run ``planned`` (a :class:`~biasfree.claims.config.Planned`) at ``seed``
    (:func:`biasfree.claims.base.run_experiment`), then, with ``figure``, draw its figure;
    with ``render`` as PNG and PDF bytes (and the Figure closed). ``progress(message)``
    hears the run's steps and ``"plotting"``. An exception of the run or the figure is
    returned as a :class:`Crash`; Ctrl-C (KeyboardInterrupt) propagates."""
    from .. import claims

    say = progress or (lambda _msg: None)
    p = planned
    t0 = time.perf_counter()
    try:
        result = claims.run_experiment(p.experiment, p.config, seed, say, preset=p.preset,
                                       overrides=p.overrides, recorded=p.recorded)
        compute_s = time.perf_counter() - t0
        if not figure:
            return Ran(result, None, compute_s)
        say("plotting")
        fig = claims.figure(result)
        if render:
            drawn, fig = fig, None
            try:
                fig = store.render_figure(drawn)
            finally:
                plt.close(drawn)
    except Exception as e:  # noqa: BLE001 - a crash is recorded, not raised
        return crash(p, seed, e, traceback.format_exc(), time.perf_counter() - t0)
    return Ran(result, fig, compute_s, time.perf_counter() - t0 - compute_s)


def save(ran: Ran | Crash, out, name: str | None = None, elapsed_s: float | None = None) -> list[Path]:
    """Write ``ran`` as ``out/<name>/`` (default: the experiment's name) atomically, a
    result with ``elapsed_s`` (default: compute and render time) or a crash record (module
    doc), and close its Figure; returns the paths written."""
    if isinstance(ran, Crash):
        return store.save_crash(out, name or ran.doc["experiment"], ran.doc, ran.traceback)
    elapsed = ran.compute_s + ran.render_s if elapsed_s is None else elapsed_s
    paths = store.save(ran.result, out, elapsed, ran.figure, name=name)
    if ran.figure is not None and not isinstance(ran.figure, dict):
        plt.close(ran.figure)  # a run of many experiments keeps no figure open
    return paths
