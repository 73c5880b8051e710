"""make test's work units (tests/xdist_units.py): a test file runs on one pytest-xdist worker,
each experiment's tiny run is a unit of its own."""

import collections
import os
import subprocess
import sys
from pathlib import Path

from xdist_units import xdist_unit

TESTS = Path(__file__).resolve().parent


def test_a_unit_is_the_group_else_the_file_else_the_test_alone():
    assert xdist_unit("tests/core/test_nets.py::test_x[0]@tests.core.test_nets") == "tests.core.test_nets"
    assert xdist_unit("tests/core/test_nets.py::test_x[a@b]") == "tests/core/test_nets.py"  # '@' in an id
    assert xdist_unit("tests/core/test_nets.py::test_x[1]") == "tests/core/test_nets.py"
    run = ("tests/claims/test_experiments.py::"
           "test_tiny_run_passes_every_check_and_keeps_the_output_contract[deep]")
    assert xdist_unit(run) == run
    assert xdist_unit("tests/claims/test_experiments.py::test_report_shows_every_figure_and_check") \
        == "tests/claims/test_experiments.py"
    assert xdist_unit("tests/claims/test_seeds.py::test_tiny_checks_hold_at_every_seed[deep-1]") \
        == "tests/claims/test_seeds.py::test_tiny_checks_hold_at_every_seed[deep-1]"


def test_each_test_file_runs_on_one_worker_under_loadgroup(tmp_path):
    """Two files of six tests, two workers, ``--dist loadgroup`` with this suite's scheduler: each
    file's tests on one worker. On pytest 9.2 with xdist 3.8's own scheduler they alternated."""
    (tmp_path / "conftest.py").write_text("from xdist_units import pytest_xdist_make_scheduler  # noqa\n")
    for name in ("a", "b"):
        (tmp_path / f"test_{name}.py").write_text(
            "import os, time, pytest\n"
            "@pytest.mark.parametrize('i', range(6))\n"
            "def test_one(i, tmp_path_factory):\n"
            "    time.sleep(0.05)\n"
            f"    with open({str(tmp_path / 'ran.txt')!r}, 'a') as f:\n"
            f"        f.write('{name} ' + os.environ['PYTEST_XDIST_WORKER'] + '\\n')\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2",
                           "--dist", "loadgroup", "--rootdir", str(tmp_path), str(tmp_path)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    workers = collections.defaultdict(set)
    for line in (tmp_path / "ran.txt").read_text().split("\n")[:-1]:
        name, worker = line.split()
        workers[name].add(worker)
    assert set(workers) == {"a", "b"}
    assert all(len(w) == 1 for w in workers.values()), dict(workers)
