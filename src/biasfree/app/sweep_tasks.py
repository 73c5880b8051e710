"""A sweep's tasks: points cut into groups, and the function a Dask worker runs on a
group (:func:`run_points`). It computes and returns; only the client writes."""

from __future__ import annotations

import math
import os
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .sweep_spec import Point

MAX_GROUP = 16
"""The most points in one task (fewer where the points are few for the workers)."""


def group_points(points: list[Point], n_threads: int, size: int | None = None) -> list[list[Point]]:
    """``points`` cut into consecutive groups of ``size`` (default: enough groups for
    about 4 per worker thread, at most :data:`MAX_GROUP` points each), one task each."""
    if size is None:
        size = min(MAX_GROUP, max(1, math.ceil(len(points) / (4 * max(n_threads, 1)))))
    if size < 1:
        raise ValueError(f"group size {size}: need at least 1 point a task")
    return [points[i:i + size] for i in range(0, len(points), size)]


def run_points(items: list[tuple], figures: bool = False) -> dict:
    """Compute a group of points on a Dask worker, one after another in this process (so
    the later ones reuse the first one's compiled programs). ``items``: ``(key, planned,
    seed)`` per point (:class:`~biasfree.claims.config.Planned`). Writes nothing: returns,
    per point, its ``key`` and what :func:`biasfree.app.pipeline.run_point` made
    (``ran``: the result, with ``figures`` its figure as PNG and PDF bytes, and the compute
    and render times; or the :class:`~biasfree.app.pipeline.Crash` of a point that raised,
    and the group goes on). Also the task's ``start`` and ``end`` (``time.time()``) and
    the ``worker``'s address, from which the client tells scheduling time from compute."""
    from .pipeline import run_point

    start = time.time()
    _use_compile_cache()
    done = [{"key": key, "ran": run_point(planned, seed, figure=figures, render=True)}
            for key, planned, seed in items]
    return {"points": done, "start": start, "end": time.time(), "worker": _worker_address()}


def _use_compile_cache() -> None:
    """Turn on JAX's persistent compilation cache where the worker's environment names
    one (:data:`~biasfree.app.sweep_cluster.COMPILE_CACHE`). JAX reads the variable when it
    is imported, which in a spawned local worker can be before the cluster's ``env`` is
    applied (the parent's main module is imported first): set the option itself."""
    from .sweep_cluster import COMPILE_CACHE

    path = os.environ.get(COMPILE_CACHE)
    if not path:
        return
    import jax

    if jax.config.jax_compilation_cache_dir != path:
        jax.config.update("jax_compilation_cache_dir", path)
        jax.config.update("jax_persistent_cache_min_compile_time_secs",
                          float(os.environ.get("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "1")))


def _worker_address() -> str:
    try:
        from distributed import get_worker

        return get_worker().address
    except (ImportError, ValueError):
        return "local"
