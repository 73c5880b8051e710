"""The public API: a short curated top level bound by static imports, named submodules
for the rest, the names of 0.1 kept for a release with a warning naming their new place,
``bf.run`` and ``bf.sweep``; versioned and free of third-party modules."""

import ast
import dataclasses
import importlib
import inspect
import os
import re
import subprocess
import sys
import types
import warnings
from importlib.metadata import version
from pathlib import Path

import pytest

import biasfree as bf
from biasfree.claims.config import ConfigError


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
    # a bare environment, but the session's compiled-program cache, XLA flags and import path
    kept = {k: v for k, v in os.environ.items()
            if k.startswith(("JAX_COMPILATION", "JAX_PERSISTENT")) or k in ("PYTHONPATH", "XLA_FLAGS")}
    for x64, expected in ((None, "False"), ("1", "True")):
        env = {**kept, "PATH": ""} | ({"JAX_ENABLE_X64": x64} if x64 else {})
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                             timeout=120)
        assert out.returncode == 0, out.stderr[-2000:]
        assert out.stdout.strip() == expected, out.stdout  # the setting the process started with


# ------------------------------------------------------------------ the curated top level

ROOT = Path(__file__).resolve().parents[2]
INIT = ROOT / "src" / "biasfree" / "__init__.py"

OLD_NAMES = """
Analysis Characterisation Conv Dataset DatasetFloor Decomposition DivergenceError Floor FlowConfig
FlowStallError GDConfig Layer LocalLinear LossSpikeWarning Member Model NetFit OddFit OptaxConfig
PRECISIONS Params PooledDense RealData Runs SPIKE_FACTOR Trajectory TwoLayerFloor UnsupportedModelError
Whitened abs_target analyse asymmetric_half asymmetry beta_eff characterise check_data
conserved_quantities cross_covariance current_precision dataset_floor decompose depth depth3_example
end_to_end_linear even_part fit_net flow flow_ensemble forward forward_mirrored from_arrays from_equinox
from_state_dict from_torch gaussian_inputs gd gd_ensemble gd_members hidden homogeneity_gap
homogeneous_floor init_conv init_gaussian init_pairs init_rank_one input_covariance
is_positively_homogeneous is_symmetric label_data leaky_relu linear_target linear_twin load_data
load_model load_sweep local_linear loss_value make_dataset margin moment_data net_function objective
objective_mirrored observe odd_floor odd_nonlinearity odd_part one_hot optimiser_twin pair_up parse_spec
participation_ratio precise product_target ray_moments read_spec record_steps record_times run_sweep
save_analysis save_model scale_params sine_target slope_factor symmetrize teacher_matrix theory train
two_layer_floor use_precision whiten widths xor_target
""".split()
"""Every public top-level name of 0.1 (its lazy ``__all__``, ``__version__`` aside)."""

SUBMODULES = ("data", "nets", "expressivity", "theory", "margin", "models", "precision", "experiments")


def _statically_bound(tree: ast.Module) -> set[str]:
    """Names bound at module level by an import statement (``from .x import y as y``), also
    inside ``if TYPE_CHECKING:`` (the package's entry points, imported at their first use)."""
    body = [*tree.body, *(n for node in tree.body if isinstance(node, ast.If)
                          and getattr(node.test, "id", "") == "TYPE_CHECKING" for n in node.body)]
    return {a.asname or a.name for node in body if isinstance(node, ast.ImportFrom | ast.Import)
            for a in node.names}


def test_all_is_a_short_list_of_statically_imported_names():
    """About 40 entry points, each named by an import an editor or type checker can read
    (under ``if TYPE_CHECKING:``; ``__getattr__`` imports it at its first use from that same
    list, not from a table of its own); ``__all__`` is a literal list in the source."""
    tree = ast.parse(INIT.read_text(encoding="utf-8"))
    literal = next(ast.literal_eval(n.value) for n in tree.body if isinstance(n, ast.Assign)
                   and any(getattr(t, "id", None) == "__all__" for t in n.targets))
    assert literal == bf.__all__
    names = [n for n in bf.__all__ if n != "__version__"]
    assert len(names) <= 44, len(names)
    unbound = set(names) - _statically_bound(tree)
    assert not unbound, f"bound only dynamically: {sorted(unbound)}"


def test_dir_shows_all_and_dunders_only():
    extra = [n for n in dir(bf) if n not in bf.__all__ and not (n.startswith("__") and n.endswith("__"))]
    assert not extra, extra


def test_every_old_name_still_resolves_to_the_same_object():
    """Nothing of 0.1's top level is lost: each name is in ``__all__``, moved (with a
    warning, below) or one of the three training functions kept as they are."""
    gone = [n for n in OLD_NAMES if n not in bf.__all__ and n not in bf._MOVED and n not in bf._KEPT]
    assert not gone, gone
    assert set(bf._MOVED) | set(bf._KEPT) <= set(OLD_NAMES)


@pytest.mark.parametrize("name", sorted(bf._MOVED))
def test_a_moved_name_warns_naming_its_new_place_at_the_callers_line(name):
    home = importlib.import_module(f"biasfree.{bf._MOVED[name]}")
    with pytest.warns(DeprecationWarning, match=rf"biasfree\.{name} is deprecated: use "
                                                rf"biasfree\.{bf._MOVED[name]}\.{name} \(moved") as rec:
        obj = getattr(bf, name)
    assert obj is getattr(home, name)
    assert rec[0].filename == __file__  # stacklevel: the user's line, not biasfree's
    with pytest.warns(DeprecationWarning, match=name):
        exec(f"from biasfree import {name}", {})  # noqa: S102 - the from-import form warns too
    if hasattr(home, "__all__"):  # a curated submodule lists it (biasfree.dynamics has no list)
        assert name in home.__all__


@pytest.mark.parametrize("name", sorted(bf._KEPT))
def test_the_kept_training_functions_resolve_without_a_warning_from_the_package(name):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        obj = getattr(bf, name)
    assert obj is getattr(importlib.import_module(f"biasfree.{bf._KEPT[name]}"), name)
    assert name not in bf.__all__ and name not in dir(bf)


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="module 'biasfree' has no attribute 'nosuch'"):
        bf.nosuch  # noqa: B018


@pytest.mark.parametrize("module", SUBMODULES)
def test_each_submodule_lists_names_it_holds(module):
    mod = getattr(bf, module)
    assert mod is importlib.import_module(f"biasfree.{'theory.margin' if module == 'margin' else module}")
    if module == "margin":
        return  # a module of functions (biasfree.theory.margin), no curated list
    assert len(mod.__all__) == len(set(mod.__all__)) and mod.__all__, module
    missing = [n for n in mod.__all__ if not hasattr(mod, n)]
    assert not missing, (module, missing)
    if module != "theory":  # the thin re-export modules bind every name by an import
        tree = ast.parse(Path(mod.__file__).read_text(encoding="utf-8"))
        assert set(mod.__all__) <= _statically_bound(tree) | {
            n.name for n in tree.body if isinstance(n, ast.FunctionDef)}, module


def test_top_level_names_are_their_submodules_objects():
    assert bf.forward is bf.nets.forward and bf.Dataset is bf.data.Dataset
    assert bf.load_model is bf.models.load_model and bf.use_precision is bf.precision.use_precision
    assert bf.run is bf.experiments.run and bf.sweep is bf.experiments.sweep


def test_api_page_lists_exactly_all():
    """docs/api.md has one ``- `name`: ...`` line per name of ``__all__``, and its table of
    moved names names each with its new place."""
    text = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    listing, _, table = text.partition("## Moved")
    listed = re.findall(r"^- \[?`(\w+)`", listing, re.M)  # `name`, or [`name`](its reference entry)
    assert sorted(listed) == sorted(bf.__all__) and len(listed) == len(set(listed))
    rows = dict(re.findall(r"^\| `(\w+)` \| `biasfree\.([\w.]+)` \|", table, re.M))
    expected = {n: f"{home}.{n}" for n, home in bf._MOVED.items()}
    assert rows == expected


def test_src_uses_no_moved_name():
    """The package itself reaches each name at its home: no ``bf.NAME`` / ``biasfree.NAME``
    of a moved name in code, messages or docstrings."""
    moved = "|".join(sorted(bf._MOVED, key=len, reverse=True))
    pattern = re.compile(rf"\b(?:biasfree|bf)\.(?:{moved})\b")
    hits = [f"{p.relative_to(ROOT)}:{i}" for p in sorted((ROOT / "src" / "biasfree").rglob("*.py"))
            if p != INIT for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
            if pattern.search(line)]
    assert not hits, hits


# ------------------------------------------------------------------ bf.run and bf.sweep


def test_run_returns_a_result_whose_checks_pass():
    """The cheapest experiment at tiny (about 5 s), one field overridden as ``--set`` would."""
    heard = []
    result = bf.run("orthogonal-inputs", preset="tiny", seed=1, progress=heard.append, n_records=61)
    assert isinstance(result, bf.experiments.Result) and result.passed, result.failed()
    assert result.checks and result.metrics and heard
    assert result.experiment == "orthogonal-inputs" and result.preset == "tiny" and result.seed == 1
    assert result.overrides == {"n_records": 61} and result.config["n_records"] == 61


@pytest.mark.parametrize("call, exc, message", [
    (dict(name="nosuch"), KeyError, "unknown experiment 'nosuch'; known: leaky-collapse"),
    (dict(name="deep", preset="huge"), ConfigError, "unknown preset 'huge' for deep; choose one of tiny"),
    (dict(name="deep", nonsense=1), ConfigError, "deep has no field 'nonsense'. Valid fields"),
    (dict(name="deep", lr=-1.0), ConfigError, "lr=-1.0 must be > 0"),
    (dict(name="deep", lr="fast"), ConfigError, "field 'lr' expects float, got str"),
    (dict(name="deep", seed=-1), ValueError, "seed"),
])
def test_run_refuses_bad_input_before_any_work(monkeypatch, call, exc, message):
    def no_run(*args, **kwargs):
        raise AssertionError("the experiment ran")

    monkeypatch.setattr("biasfree.experiments.run_experiment", no_run)
    with pytest.raises(exc, match=re.escape(message)):
        bf.run(**call)


def test_no_experiment_has_a_field_that_runs_keywords_would_hide():
    from biasfree.claims import REGISTRY

    keywords = set(inspect.signature(bf.run).parameters) - {"overrides"}
    clashing = {e.name: f.name for e in REGISTRY.values() for f in dataclasses.fields(e.config)
                if f.name in keywords}
    assert not clashing, clashing


def test_sweep_refuses_bad_input_before_any_point_runs(tmp_path):
    spec = {"experiment": "orthogonal-inputs", "preset": "tiny", "seeds": [0]}
    with pytest.raises(TypeError, match="must be a sweep spec: a TOML file's path"):
        bf.sweep(3, tmp_path / "out")
    with pytest.raises(ValueError, match="not several"):
        bf.sweep(spec, tmp_path / "out", workers=1, scheduler="tcp://127.0.0.1:1")
    with pytest.raises(ValueError, match="workers"):
        bf.sweep(spec, tmp_path / "out", workers=0)
    with pytest.raises(bf.experiments.SpecError, match="unknown key"):
        bf.sweep({**spec, "seed": 3}, tmp_path / "out")
    with pytest.raises(bf.experiments.SpecError, match="cannot read sweep spec"):
        bf.sweep(tmp_path / "no.toml", tmp_path / "out")
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())
