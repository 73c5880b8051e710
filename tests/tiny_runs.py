"""Every experiment's tiny run, once per test session: ``biasfree run NAME --preset tiny`` into
one folder that every pytest-xdist worker shares, under a file lock per experiment.
tests/claims/test_experiments.py checks the runs (exit code, output contract, report); a test
file that needs an experiment's tiny result (tests/claims/test_optimisers_claim.py) loads it
from there instead of computing it a second time."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

from filelock import FileLock, Timeout
from typer.testing import CliRunner

from biasfree.app.cli import app

runner = CliRunner()

OPTIMISED = {"bias-free-denoiser"}
"""Tiny runs whose compiled programs spend their time running, not compiling: each runs as
the command in a process of its own, compiled at XLA's optimisation level 1 instead of the
suite's level 0 (make test's TEST_XLA_FLAGS). At level 0 the denoiser's conv training runs
about six times slower (its two-layer run 4 -> 24 s warm): its tiny run took 37-62 s of CPU in
the suite at level 0, 21-29 s in its own process (docs/performance.md, "Third round")."""

_LEVEL = re.compile(r"--xla_backend_optimization_level=\S+")


def _invoke(name: str, out, seed: int = 0) -> dict:
    """``biasfree run NAME --preset tiny --seed SEED --out OUT``: its exit code and output."""
    args = ["run", name, "--preset", "tiny", "--seed", str(seed), "--out", str(out)]
    if name not in OPTIMISED:
        res = runner.invoke(app, args)
        return {"exit_code": res.exit_code, "stdout": res.stdout, "output": res.output[-3000:]}
    flags = _LEVEL.sub("", os.environ.get("XLA_FLAGS", "")).split()  # the others kept (test-portable's ISA)
    env = {**os.environ, "XLA_FLAGS": " ".join(flags + ["--xla_backend_optimization_level=1"])}
    proc = subprocess.run([sys.executable, "-c", "from biasfree.app.cli import app; app()", *args],
                          env=env, capture_output=True, text=True, timeout=600)
    return {"exit_code": proc.returncode, "stdout": proc.stdout,
            "output": (proc.stdout + proc.stderr)[-3000:]}


def shared_folder(tmp_path_factory, worker_id):
    """One folder for the whole session: xdist workers' temp folders share a parent."""
    base = tmp_path_factory.getbasetemp()
    out = (base.parent if worker_id != "master" else base) / "tiny-results"
    out.mkdir(exist_ok=True)
    return out


def tiny_run(out, name: str, wait: bool = True) -> dict | None:
    """``biasfree run NAME --preset tiny --out OUT`` once per session (:data:`OPTIMISED` ones in
    a process of their own): its exit code and output (``None`` if ``wait`` is false and
    another worker is running it now)."""
    record = out / f".{name}.run.json"
    try:
        with FileLock(str(out / f".{name}.lock"), timeout=-1 if wait else 0):
            if not record.exists():
                record.write_text(json.dumps(_invoke(name, out)))
    except Timeout:
        return None
    return json.loads(record.read_text())


def run_at_seed(out, name: str, seed: int) -> dict:
    """``biasfree run NAME --preset tiny --seed SEED`` into ``OUT/seed-SEED`` (no lock: one test
    runs each experiment at each seed, tests/claims/test_seeds.py): its exit code and output."""
    folder = out / f"seed-{seed}"
    folder.mkdir(parents=True, exist_ok=True)
    return _invoke(name, folder, seed)
