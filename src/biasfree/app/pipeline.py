"""One run of one experiment, the one way: run → figure → save.

:func:`run_point` runs an experiment from its config and draws its figure
(``claims.figure(result)``); :func:`save` writes both as ``OUT/NAME/``. ``biasfree run``
calls both in one process; a sweep's Dask worker calls :func:`run_point` with
``render=True`` (the figure comes back as PNG and PDF bytes: workers write nothing) and
the sweep's client saves the point.
"""

from __future__ import annotations

import io
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .. import store
from .._figure import plt
from ..results import Result


@dataclass(frozen=True)
class Ran:
    """What :func:`run_point` made: the ``result``; its ``figure`` (a matplotlib Figure, or
    ``{"png": bytes, "pdf": bytes}`` when rendered, or None when not drawn); ``compute_s``
    the experiment's wall seconds and ``render_s`` the figure's."""

    result: Result
    figure: object
    compute_s: float
    render_s: float = 0.0


def run_point(exp, config, seed: int, progress: Callable[[str], None] | None = None, *,
              preset: str = "custom", overrides=None, figure: bool = True,
              render: bool = False) -> Ran:
    """Run experiment ``exp`` (a registered :class:`~biasfree.claims.base.Experiment`) from
    ``config`` at ``seed`` (:func:`biasfree.claims.base.run_experiment`, with the ``preset``
    and ``overrides`` to record), then, with ``figure``, draw its figure; with ``render``
    as PNG and PDF bytes (and the Figure closed). ``progress(message)`` hears the run's
    steps and ``"plotting"``. An exception of the run or the figure propagates: the caller
    records it as a crash."""
    from .. import claims

    say = progress or (lambda _msg: None)
    t0 = time.perf_counter()
    result = claims.run_experiment(exp, config, seed, say, preset=preset, overrides=overrides)
    compute_s = time.perf_counter() - t0
    if not figure:
        return Ran(result, None, compute_s)
    say("plotting")
    fig = claims.figure(result)
    if render:
        try:
            drawn = {ext: _rendered(fig, ext) for ext in store.FIGURE_EXTS}
        finally:
            plt.close(fig)
        fig = drawn
    return Ran(result, fig, compute_s, time.perf_counter() - t0 - compute_s)


def _rendered(fig, ext: str) -> bytes:
    buf = io.BytesIO()
    store.write_figure(fig, buf, ext)
    return buf.getvalue()


def save(ran: Ran, out, name: str | None = None, elapsed_s: float | None = None) -> list[Path]:
    """Write ``ran`` as ``out/<name>/`` (default: the experiment's name) atomically
    (:func:`biasfree.store.save`), with ``elapsed_s`` (default: compute and render time),
    and close its Figure; returns the paths written."""
    elapsed = ran.compute_s + ran.render_s if elapsed_s is None else elapsed_s
    paths = store.save(ran.result, out, elapsed, ran.figure, name=name)
    if ran.figure is not None and not isinstance(ran.figure, dict):
        plt.close(ran.figure)  # a run of many experiments keeps no figure open
    return paths
