"""Test-wide settings.

biasfree computes in float64 by itself (``biasfree.precision``), without touching
JAX's global ``jax_enable_x64``. The tests' own JAX arithmetic (building inputs,
subtracting two results before comparing them at 1e-14) must be float64 as well, so
the session runs with ``jax_enable_x64`` on; tests marked ``x64_off`` run with it off,
as a library user's program would (see tests/test_precision.py).
"""

import jax
import pytest


def pytest_configure(config):
    config.addinivalue_line("markers", "x64_off: run with JAX's default float32 (jax_enable_x64 off)")


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
