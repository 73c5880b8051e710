"""Test-wide settings.

biasfree computes in float64 by itself (``biasfree.core.precision``), without touching
JAX's global ``jax_enable_x64``. The tests' own JAX arithmetic (building inputs,
subtracting two results before comparing them at 1e-14) must be float64 as well, so
the session runs with ``jax_enable_x64`` on; tests marked ``x64_off`` run with it off,
as a library user's program would (see tests/core/test_precision.py).

Compiled programs are kept in JAX's persistent compilation cache, ``.jax_cache/`` at
the repository root (created on first use, ignored by git; a ``JAX_COMPILATION_CACHE_DIR``
already set wins), so a second session, each pytest-xdist worker, the processes a test
starts and the Dask workers of the sweep tests load what another one compiled. Every
program is kept, however fast it compiled: the many small ones (eager operations,
short loops; a tenth of a second each or less) cost more to compile than to load (every
experiment's tiny run in one process, warm: 65 s of CPU with them kept, 70 s with only
those over 0.1 s; 153 s cold). The cache is not size-bounded (JAX's
default): a bounded cache keeps an access-time file per entry and scans them all on
every write, which fails with ``FileNotFoundError: ...-atime`` on any entry that an
unbounded process (``make run``, ``biasfree sweep``) wrote into the same folder, so
nothing more would be cached. Without the bound there is no lock: a process writes an
entry only if it is not there yet, so a clash needs two processes finishing the same
compilation within the same instant, and its worst case (a torn entry) is a warning and
a recompilation, never a wrong program (an entry that fails to decompress or load is
compiled afresh). Its keys
include the XLA flags and the CPU, so a run under a narrowed ``--xla_cpu_max_isa``
(``make test-portable``) compiles and keeps programs of its own.
"""

import gc
import os
from pathlib import Path

import jax
import pytest
from xdist_units import pytest_xdist_make_scheduler  # noqa: F401  (a hook: pytest finds it here)

CACHE_DIR = Path(__file__).resolve().parents[1] / ".jax_cache"
CACHE_SETTINGS = {  # also exported, so that the processes a test starts share the cache
    "jax_compilation_cache_dir": str(CACHE_DIR),
    "jax_persistent_cache_min_compile_time_secs": 0.0,  # every program (see above)
}


def _persistent_compilation_cache() -> None:
    for name, value in CACHE_SETTINGS.items():
        value = type(value)(os.environ.setdefault(name.upper(), str(value)))
        jax.config.update(name, value)


def pytest_configure(config):
    config.addinivalue_line("markers", "readme: runs the snippets of README.md and docs/*.md in fresh "
                            "processes (make test-readme)")
    config.addinivalue_line("markers", "xdist_group(name): tests that share one pytest-xdist worker")
    config.addinivalue_line("markers", "x64_off: run with JAX's default float32 (jax_enable_x64 off)")
    config.addinivalue_line("markers", "numerics: a round-off bound (make test-portable reruns the "
                            "whole suite with NumPy's, OpenBLAS's and XLA's CPU dispatch narrowed)")
    config.addinivalue_line("markers", "seeds: every experiment's tiny run at seeds 1-4 (make test-seeds)")
    _persistent_compilation_cache()


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups (--dist loadgroup)
def pytest_collection_modifyitems(config, items):
    """Each test file is one xdist group, so its module fixtures are built once, unless a
    test names a group of its own (the per-experiment runs of tests/claims/test_experiments.py),
    which lets the long experiment runs spread over the workers. Where pytest no longer lets
    xdist hand the groups to its scheduler (pytest 9.2), tests/xdist_units.py's scheduler forms
    the same units from the node ids."""
    for item in items:
        if item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(item.module.__name__))


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session):
    """Python's cyclic garbage collector, tuned for a session that traces thousands of JAX
    programs: what exists once the tests are collected (JAX, the test modules) lives for the
    session, so ``gc.freeze()`` takes it out of every later full collection, and a young
    collection runs every 50,000 allocations instead of 700 (tracing allocates many short-lived
    objects). On test_optimisers.py and test_train.py, warm cache, one process: time in the
    collector 3.5 -> 0.6 s of a 42 s run. No test depends on when a cycle is freed; a frozen
    object that later becomes cyclic garbage stays until the session ends."""
    gc.freeze()
    gc.set_threshold(50_000, 10, 10)


@pytest.fixture(scope="session", autouse=True)
def _x64_for_test_code():
    before = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    yield
    jax.config.update("jax_enable_x64", before)


@pytest.fixture(autouse=True)
def _x64_off_when_marked(request):
    if request.node.get_closest_marker("x64_off") is None:
        yield
        return
    with jax.enable_x64(False):
        yield
