"""The work units of ``--dist loadgroup`` (make test): a test file is one unit, so that its module
fixtures (a Dask cluster, trained nets) and its traced programs are built on one worker, except
the tests of :data:`UNITS_OF_THEIR_OWN`, each a unit, so that the long experiment runs spread over
the workers. tests/conftest.py marks every test with its group and registers the scheduler below.

pytest-xdist 3.8 hands a test's ``xdist_group`` to its scheduler by appending it to the test's node
id (``path::name@group``), which pytest 9.2 no longer lets a plugin change
(pytest-dev/pytest-xdist#1386): the groups were lost without a word, every test became a unit of
its own, and each test file's fixtures and programs were built on both workers (17% more CPU on
test_sweep.py, test_optimisers.py and test_train.py; docs/performance.md, "Fifth round"). The
scheduler here takes the group where xdist could append it and the test file where it could not."""

from __future__ import annotations

import pytest

UNITS_OF_THEIR_OWN = ("tests/claims/test_experiments.py::test_tiny_run_passes_every_check",
                      "tests/claims/test_seeds.py::")
"""Node id prefixes of the tests that are each a work unit of their own where the groups cannot
reach the scheduler: each experiment's tiny run and each run at a seed."""


def xdist_unit(nodeid: str) -> str:
    """The work unit of the test ``nodeid``: the group xdist appended to it (``path::name@group``),
    else the test itself if it is one of :data:`UNITS_OF_THEIR_OWN`, else its test file."""
    _, at, group = nodeid.rpartition("@")
    if at and "]" not in group:  # an '@' inside a parameter id is no group (xdist's own rule)
        return group
    return nodeid if nodeid.startswith(UNITS_OF_THEIR_OWN) else nodeid.split("::", 1)[0]


@pytest.hookimpl(optionalhook=True, tryfirst=True)  # before xdist's own (the first answer wins)
def pytest_xdist_make_scheduler(config, log):
    """xdist's load-scope scheduler with :func:`xdist_unit`'s units under ``--dist loadgroup``;
    xdist's own scheduler otherwise."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ByUnit(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return xdist_unit(nodeid)

    return ByUnit(config, log)
