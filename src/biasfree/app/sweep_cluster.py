"""The Dask side of a sweep: which cluster it runs on (:func:`dask_client`: the caller's
client, a scheduler's address or a local cluster made here), waiting a bounded time for
workers (:func:`wait_for_workers`), and what happens to them while it runs (:class:`WorkerWatch`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

WORKER_ENV = {"XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1",
              "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
"""Environment of local worker processes: one thread each, so N workers use N cores
instead of fighting over them."""
COMPILE_CACHE = "JAX_COMPILATION_CACHE_DIR"
"""The environment variable that gives JAX a persistent compilation cache: worker
processes that share it compile a program once between them, with the same bits
(docs/sweeps.md). A local cluster's workers share ``DIR/.jax-cache`` unless it is set; on a cluster
of your own, start ``dask worker`` with it set to a folder every worker can write."""
WORKER_TIMEOUT_S = 60.0
"""How long a sweep waits for its first worker (and, mid-sweep, for any worker once all
have left) before it gives up with :class:`NoWorkers`."""


class NoWorkers(ConnectionError):
    """The cluster has no worker and none joined within the wait."""


@contextmanager
def dask_client(workers: int | None = None, scheduler: str | None = None, client=None,
                log: Callable[[str], None] = lambda _: None, compile_cache=None) -> Iterator:
    """A ``dask.distributed.Client``: ``client`` itself (left open), one on an existing
    cluster at ``scheduler`` (``tcp://host:8786``), or one on a new ``LocalCluster`` of
    ``workers`` single-threaded worker processes (default: the number of cores) whose
    JAX compilation cache is ``compile_cache`` (a folder; :data:`COMPILE_CACHE` wins
    when it is set). The ones made here are closed on exit."""
    if sum(x is not None for x in (workers, scheduler, client)) > 1:
        raise ValueError("give one of workers (a local cluster), scheduler (an address) or client")
    if client is not None:
        yield client
        return
    try:
        from dask.distributed import Client, LocalCluster
    except ImportError:
        raise ImportError("biasfree sweep needs Dask: pip install 'biasfree[sweep]'") from None
    cluster = None
    if scheduler is not None:
        try:
            made = Client(scheduler, timeout="10s")
        except (OSError, ValueError) as e:  # ValueError: not an address ('myhost', 'http://…')
            raise ConnectionError(f"no Dask scheduler answers at {scheduler} ({e}); give its address "
                                  "as tcp://HOST:8786 (the scheduler's port, not the dashboard's), or "
                                  "start one with `dask scheduler` and workers with "
                                  "`dask worker ADDRESS`") from None
    else:
        n = workers or os.cpu_count() or 1
        if n < 1:
            raise ValueError(f"workers={n}: need at least one worker")
        env = dict(WORKER_ENV)
        if compile_cache is not None and COMPILE_CACHE not in os.environ:
            env |= {COMPILE_CACHE: str(compile_cache), "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0"}
        cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                               dashboard_address=":0", env=env)
        made = Client(cluster)
    try:
        if _dashboard_up(made):
            log(f"Dask dashboard: {made.dashboard_link}")
        yield made
    finally:
        made.close(timeout=CLOSE_TIMEOUT_S)
        if cluster is not None:
            _close_cluster(cluster)


CLOSE_TIMEOUT_S = 30.0
"""Seconds a local cluster's worker process may take to exit once asked: one that has run
JAX takes seconds to unwind on a loaded machine, past the nanny's own 4 s, after which it
was killed with a "Worker process still alive ... killing" warning on stderr."""


def _close_cluster(cluster) -> None:
    """Close a local cluster made here: each nanny asks its worker process to exit and
    waits up to :data:`CLOSE_TIMEOUT_S` (not Dask's 4 s) before killing it, then the
    scheduler and the cluster close."""
    nannies = list(cluster.workers.values())

    async def close_workers():
        import asyncio

        await asyncio.gather(*(n.close(timeout=CLOSE_TIMEOUT_S) for n in nannies), return_exceptions=True)

    try:
        cluster.sync(close_workers)
    finally:
        cluster.close(timeout=CLOSE_TIMEOUT_S)


def _dashboard_up(client) -> bool:
    """Whether the scheduler's dashboard answers with its pages (without bokeh where the
    scheduler runs it serves only a "Dask needs bokeh" note)."""
    import urllib.request

    if "dashboard" not in client.scheduler_info(n_workers=0).get("services", {}):
        return False
    try:
        with urllib.request.urlopen(client.dashboard_link, timeout=2) as r:
            return r.status == 200 and b"needs bokeh" not in r.read(4096)
    except (OSError, ValueError):
        return False


def wait_for_workers(client, timeout_s: float) -> int:
    """The number of worker threads once at least one worker is there; :class:`NoWorkers`
    naming the scheduler and the fix if none joins within ``timeout_s`` seconds."""
    try:
        client.wait_for_workers(1, timeout=timeout_s)
    except TimeoutError:
        address = getattr(client.scheduler, "address", "the scheduler")
        raise NoWorkers(f"no Dask worker joined {address} within {timeout_s:g} s: start workers "
                        f"with `dask worker {address} --nthreads 1` (or wait longer with "
                        "--worker-timeout SECONDS)") from None
    return sum(client.nthreads().values())


class WorkerWatch:
    """Logs what happens to the cluster's workers while a sweep runs: ``poll()`` compares
    the scheduler's workers and their running tasks with the last poll and writes one
    line per event through ``log``: a worker that left (lost, killed, or restarted by its
    nanny, which comes back under a new address) with the points it was running, a
    worker that joined, and a lost point seen running again (Dask's retry).
    ``points_of(task_key)`` names a task's points. Raises :class:`NoWorkers` once no
    worker has been there for ``timeout_s`` seconds."""

    def __init__(self, client, points_of: Callable[[str], list[str] | None],
                 log: Callable[[str], None], timeout_s: float = WORKER_TIMEOUT_S):
        self.client, self.points_of, self.log, self.timeout_s = client, points_of, log, timeout_s
        self.workers = set(client.nthreads())
        self.running: dict[str, set] = {}
        self.lost: set = set()
        self.empty_since: float | None = None

    def poll(self) -> int:
        """Check the cluster once; returns the number of the sweep's points running now."""
        workers = set(self.client.nthreads())
        processing = {w: {k for k in keys if self.points_of(k) is not None}
                      for w, keys in self.client.processing().items()}
        for w in sorted(self.workers - workers):
            keys = self.running.get(w, set())
            self.lost |= keys
            where = f"; it was running point(s) {self._ids(keys)}, which Dask retries" if keys else ""
            self.log(f"worker {w} left the cluster (lost, killed or restarted by its nanny){where}")
        for w in sorted(workers - self.workers):
            self.log(f"worker {w} joined the cluster ({len(workers)} worker(s) now)")
        for w, keys in processing.items():
            again = keys & self.lost
            if again:
                self.lost -= again
                self.log(f"retrying point(s) {self._ids(again)} on worker {w}")
        self.workers, self.running = workers, processing
        now = time.monotonic()
        if workers:
            self.empty_since = None
        elif self.empty_since is None:
            self.empty_since = now
        elif now - self.empty_since > self.timeout_s:
            raise NoWorkers(f"every Dask worker left and none came back within {self.timeout_s:g} s; "
                            "the finished points are saved: restart workers and rerun the sweep")
        return sum(len(self.points_of(k) or []) for keys in processing.values() for k in keys)

    def forget(self, key: str) -> None:
        """A task that finished: no longer lost or retried."""
        self.lost.discard(key)

    def _ids(self, keys) -> str:
        return ", ".join(p for k in sorted(keys) for p in (self.points_of(k) or []))
