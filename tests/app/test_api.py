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
    code = ("import jax; before = jax.config.jax_enable_x64; import biasfree as bf; "
            "import numpy as np; bf.gd(bf.init_gaussian(jax.random.PRNGKey(0), (2, 2, 1), 0.1), "
            "bf.Dataset(np.ones((2, 2)), np.ones((2, 1))), bf.GDConfig(steps=2)); "
            "assert jax.config.jax_enable_x64 == before, 'changed'")
    cache = {k: v for k, v in os.environ.items() if k.startswith(("JAX_COMPILATION", "JAX_PERSISTENT"))}
    for env in ("0", "1"):  # a bare environment, but the session's compiled-program cache
        out = subprocess.run([sys.executable, "-c", code], env={**cache, "JAX_ENABLE_X64": env, "PATH": ""},
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr[-2000:]
