"""The public API: curated, versioned, and free of third-party modules."""

import os
import subprocess
import sys
import types
from importlib.metadata import version

import biasfree as bf


def test_all_lists_existing_names_and_no_foreign_module():
    assert len(bf.__all__) == len(set(bf.__all__))
    missing = [n for n in bf.__all__ if not hasattr(bf, n)]
    assert not missing, missing
    modules = [n for n in bf.__all__ if isinstance(getattr(bf, n), types.ModuleType)]
    assert all(getattr(bf, n).__name__.startswith("biasfree.") for n in modules), modules
    assert "jax" not in dir(bf) and "np" not in dir(bf)


def test_version_comes_from_the_installed_metadata():
    assert bf.__version__ == version("biasfree")


def test_import_leaves_jax_x64_as_it_was():
    """Importing biasfree, and training with it, leaves ``jax_enable_x64`` as the user's
    environment set it (off by default, on with JAX_ENABLE_X64=1), each in a fresh process
    (the one such check: tests/core/test_precision.py relies on it)."""
    code = ("import jax; before = jax.config.jax_enable_x64; import biasfree as bf; "
            "assert jax.config.jax_enable_x64 == before, 'import changed jax_enable_x64'; "
            "import numpy as np; bf.train(bf.init_gaussian(jax.random.PRNGKey(0), (2, 2, 1), 0.1), "
            "bf.Dataset(np.ones((2, 2)), np.ones((2, 1))), bf.GDConfig(steps=2)); "
            "assert jax.config.jax_enable_x64 == before, 'train changed jax_enable_x64'; print(before)")
    # a bare environment, but the session's compiled-program cache and import path
    kept = {k: v for k, v in os.environ.items()
            if k.startswith(("JAX_COMPILATION", "JAX_PERSISTENT")) or k == "PYTHONPATH"}
    for x64, expected in ((None, "False"), ("1", "True")):
        env = {**kept, "PATH": ""} | ({"JAX_ENABLE_X64": x64} if x64 else {})
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                             timeout=120)
        assert out.returncode == 0, out.stderr[-2000:]
        assert out.stdout.strip() == expected, out.stdout  # the setting the process started with
