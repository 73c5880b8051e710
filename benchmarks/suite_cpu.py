"""Where the test suite's CPU time goes: a pytest plugin that records, per test, the CPU seconds
of the pytest process and of the child processes it reaped during the test (``getrusage``), and
the programs XLA compiled (JAX's ``backend_compile_duration`` events); run as a script, it ranks
the files and the tests of a recorded run (docs/performance.md, "Fourth round").

Measure cold, in one process (the CPU seconds of a cold run are what sets ``make test``'s wall
time on 2 cores; wall time on the shared machine is not a measurement)::

    PYTHONPATH=src:benchmarks JAX_COMPILATION_CACHE_DIR=$(mktemp -d) \\
    XLA_FLAGS="--xla_backend_optimization_level=0 --xla_cpu_use_fusion_emitters=false \\
      --xla_cpu_parallel_codegen_split_count=1" \\
    /usr/bin/time -v .venv/bin/python -m pytest -q -p no:cacheprovider -p suite_cpu -n 0 \\
      -m "not readme and not seeds"
    .venv/bin/python benchmarks/suite_cpu.py results/suite_cpu.json

``SUITE_CPU_OUT`` names the JSON file (default ``results/suite_cpu.json``). A Dask worker or a
subprocess is charged to the test that reaps it.
"""

from __future__ import annotations

import collections
import json
import os
import resource
import sys
from pathlib import Path

import pytest

_stats: dict = {}
_current = {"id": None}


def _cpu() -> tuple[float, float]:
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, kids.ru_utime + kids.ru_stime


def _listen(event: str, duration: float, **_) -> None:
    test = _current["id"]
    if test is not None and event.endswith("backend_compile_duration"):
        row = _stats.setdefault(test, {})
        row["compilations"] = row.get("compilations", 0) + 1


def pytest_configure(config):
    import jax.monitoring

    jax.monitoring.register_event_duration_secs_listener(_listen)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    _current["id"] = item.nodeid
    own0, kids0 = _cpu()
    yield
    own, kids = _cpu()
    _stats.setdefault(item.nodeid, {}).update(own=own - own0, children=kids - kids0)
    _current["id"] = None


def pytest_sessionfinish(session):
    own, kids = _cpu()
    out = Path(os.environ.get("SUITE_CPU_OUT", "results/suite_cpu.json"))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"session": {"own": own, "children": kids}, "tests": _stats}))


def rank(path: str, top: int = 20) -> None:
    """Print the session's CPU seconds, then the ``top`` files and tests by CPU seconds."""
    doc = json.loads(Path(path).read_text())
    tests = {k: (v.get("own", 0.0) + v.get("children", 0.0), v.get("compilations", 0))
             for k, v in doc["tests"].items()}
    s = doc["session"]
    print(f"session: {s['own'] + s['children']:.1f} CPU-s ({s['own']:.1f} pytest + {s['children']:.1f} "
          f"children), {len(tests)} tests, {sum(c for _, c in tests.values())} compilations")
    files = collections.defaultdict(lambda: [0.0, 0, 0])
    for k, (cpu, n) in tests.items():
        f = files[k.split("::")[0]]
        f[0], f[1], f[2] = f[0] + cpu, f[1] + n, f[2] + 1
    print("CPU-s  compilations  tests  file")
    for name, (cpu, n, m) in sorted(files.items(), key=lambda x: -x[1][0])[:top]:
        print(f"{cpu:6.1f} {n:6d} {m:5d}  {name}")
    print("CPU-s  compilations  test")
    for name, (cpu, n) in sorted(tests.items(), key=lambda x: -x[1][0])[:top]:
        print(f"{cpu:6.1f} {n:6d}  {name}")


if __name__ == "__main__":
    rank(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 20)
