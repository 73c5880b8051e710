"""The paper's experiments from Python: :func:`run` one, :func:`sweep` one over a grid.

:func:`run` is ``biasfree run NAME`` in-process: the same registry
(:mod:`biasfree.claims`), the same config planning and checks
(:func:`biasfree.claims.config.planned`), the same run
(:func:`biasfree.claims.base.run_experiment`), but it returns the typed :class:`Result`
and writes nothing (draw it with :func:`figure`, save it with :func:`biasfree.store.save`).
:func:`sweep` is ``biasfree sweep SPEC``: a spec file (or a parsed :class:`Spec`) run on
Dask, each point saved as it arrives, the table read back by :func:`load_sweep`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping

from . import _validate as validate
from .app.sweep import Counts, Outcome, run_sweep
from .app.sweep_cluster import WORKER_TIMEOUT_S
from .app.sweep_spec import Spec, SpecError, parse_spec, read_spec
from .app.sweep_table import load_sweep
from .claims import figure, get, known
from .claims.base import run_experiment
from .claims.config import ConfigError, planned
from .results import Check, Result

__all__ = ["Check", "ConfigError", "Counts", "Outcome", "Result", "Spec", "SpecError", "figure", "load_sweep",
           "names", "parse_spec", "read_spec", "run", "run_sweep", "sweep"]


def names() -> tuple[str, ...]:
    """Every registered experiment's name, the headline (``leaky-collapse``) first, as
    ``biasfree list`` shows them (their claims: ``biasfree.claims.get(name).claim``)."""
    return known()


def run(name: str, *, preset: str | None = None, seed: int = 0,
        progress: Callable[[str], None] | None = None, **overrides) -> Result:
    """Run the experiment ``name`` once, in this process, and return its result.

    **Arguments:**

    - ``name``: a registered experiment (``names()``), e.g. ``"leaky-collapse"``.
    - ``preset``: the config to start from, ``"tiny"`` (seconds) or ``"paper"`` (minutes;
      the default, as for ``biasfree run``).
    - ``seed``: the random seed, an integer in ``[0, 2**31)``.
    - ``progress``: called with a short message as the run goes (default: silent).
    - ``**overrides``: config fields to change, ``width=40`` or ``alphas=[0.0, 1.0]``
      (lists become tuples), checked as ``--set`` is (``biasfree show NAME`` lists them).

    **Returns:** a :class:`Result`: ``metrics`` (name -> number), ``checks`` (name ->
    :class:`Check`, each comparing simulation with theory), ``passed`` (every check passed),
    ``arrays`` and the effective ``config``. Nothing is written: :func:`figure` draws it,
    :func:`biasfree.store.save` saves it as ``biasfree run`` would.

    **Raises:** before any work, a ``KeyError`` naming the known experiments for an
    unknown ``name``, a :class:`ConfigError` for an unknown preset or field or a value out
    of bounds (naming the valid ones), a ``ValueError``/``TypeError`` for a bad ``seed``.

    **Example:**::

        import biasfree as bf

        result = bf.run("leaky-collapse", preset="tiny", width=40)
        print(result.passed, result.metrics)
    """
    plan = planned(get(name), preset, overrides)  # every refusal here, before JAX runs anything
    seed = validate.seed(seed)
    if progress is not None:
        validate.callable_("progress", progress, "a function called with a short message, progress(msg)")
    return run_experiment(plan.experiment, plan.config, seed, progress or _quiet, preset=plan.preset,
                          overrides=plan.overrides, recorded=plan.recorded)


def _quiet(_: str) -> None:
    pass


def sweep(spec: str | os.PathLike | Mapping | Spec, out: str | os.PathLike, *, workers: int | None = None,
          scheduler: str | None = None, client=None, force: bool = False, figures: bool = False,
          group_size: int | None = None, worker_timeout_s: float = WORKER_TIMEOUT_S,
          progress: Callable[[Counts], None] = lambda _: None,
          log: Callable[[str], None] = lambda _: None) -> Outcome:
    """Run an experiment over a grid of config fields × seeds on Dask, resumably.

    Every point is planned and checked before any runs; each is saved once, under
    ``out/points/<key>/``, so a second call computes only the missing ones. Then
    ``out/table.parquet`` (read it with :func:`load_sweep`) and the summary figure are
    written. A point that crashes or fails a check does not stop the sweep, and neither
    raises: both are recorded and counted in the returned :class:`Outcome`. Another process
    sweeping into the same ``out`` is waited for, so each point is computed once.

    **Arguments:**

    - ``spec``: the sweep: a TOML file's path (``experiment``, ``preset``, ``seeds``,
      ``[grid]``, ``[fixed]``; docs/sweeps.md), that document as a dict, or a :class:`Spec`
      (:func:`read_spec`, :func:`parse_spec`).
    - ``out``: the folder the points, table and figures go to.
    - ``workers``: processes of a new local Dask cluster (default: one per core); or
    - ``scheduler``: the address of a running Dask scheduler (``"tcp://host:8786"``); or
    - ``client``: any ``distributed.Client`` (left open).
    - ``force``: recompute the points already saved.
    - ``figures``: also draw every point's figure (default: the summary only).
    - ``group_size``: points per Dask task (default: from the points and worker threads).
    - ``worker_timeout_s``: how long to wait for a worker before giving up (seconds, >= 0).
    - ``progress(counts)``: called as points start and finish (a :class:`Counts`).
    - ``log(line)``: called with what a user should read (skips, workers, failures).

    **Returns:** an :class:`Outcome`: ``counts`` (``done``, ``skipped``, ``crashed``,
    ``failed_checks``), the ``table`` path, the ``summary`` figure's path, the ``crashed``
    points, ``failed_checks`` (point -> the checks it failed) and ``passed`` (no crash, every
    check passed: what ``biasfree sweep`` exits 0 on).

    **Raises:** before any point runs, a :class:`SpecError` for an unreadable or bad spec,
    a ``ValueError``/``TypeError`` for bad arguments (a negative ``worker_timeout_s``, ...)
    or an ``out`` that is not a writable folder.

    **Example:**::

        import biasfree as bf

        spec = {"experiment": "leaky-collapse", "preset": "tiny", "seeds": [0, 1],
                "grid": {"width": [20, 40]}}
        outcome = bf.sweep(spec, "results/sweeps/width", workers=2)
        table = bf.experiments.load_sweep("results/sweeps/width")
    """
    if isinstance(spec, str | os.PathLike):
        spec = read_spec(spec)
    elif isinstance(spec, Mapping):
        spec = parse_spec(spec)
    elif not isinstance(spec, Spec):
        raise TypeError(f"spec={spec!r} must be a sweep spec: a TOML file's path, its document as a "
                        "dict, or a biasfree.experiments.Spec")
    return run_sweep(spec, out, workers=workers, scheduler=scheduler, client=client, force=force,
                     figures=figures, group_size=group_size, worker_timeout_s=worker_timeout_s,
                     progress=progress, log=log)
