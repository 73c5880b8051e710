"""Every experiment's tiny run, once per test session: ``biasfree run NAME --preset tiny`` into
one folder that every pytest-xdist worker shares, under a file lock per experiment.
tests/claims/test_experiments.py checks the runs (exit code, output contract, report); a test
file that needs an experiment's tiny result (tests/claims/test_optimisers_claim.py) loads it
from there instead of computing it a second time."""

from __future__ import annotations

import json

from filelock import FileLock, Timeout
from typer.testing import CliRunner

from biasfree.app.cli import app

runner = CliRunner()


def shared_folder(tmp_path_factory, worker_id):
    """One folder for the whole session: xdist workers' temp folders share a parent."""
    base = tmp_path_factory.getbasetemp()
    out = (base.parent if worker_id != "master" else base) / "tiny-results"
    out.mkdir(exist_ok=True)
    return out


def tiny_run(out, name: str, wait: bool = True) -> dict | None:
    """``biasfree run NAME --preset tiny --out OUT`` once per session: its exit code and output
    (``None`` if ``wait`` is false and another worker is running it now)."""
    record = out / f".{name}.run.json"
    try:
        with FileLock(str(out / f".{name}.lock"), timeout=-1 if wait else 0):
            if not record.exists():
                res = runner.invoke(app, ["run", name, "--preset", "tiny", "--out", str(out)])
                record.write_text(json.dumps({"exit_code": res.exit_code, "stdout": res.stdout,
                                              "output": res.output[-3000:]}))
    except Timeout:
        return None
    return json.loads(record.read_text())
