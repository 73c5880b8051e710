"""Registry of experiments, one folder per claim of the paper.

Each package ``biasfree.claims.<name>/`` holds one claim: ``__init__.py`` its frozen
``Config``, ``PRESETS`` (``tiny``, ``paper``), claim sentences and ``EXPERIMENT`` (an
:class:`~biasfree.claims.base.Experiment`), ``run.py`` its ``run(cfg, seed, progress)``
and ``figure.py`` its ``figure(result)``. Packages are discovered, so adding an
experiment means adding a folder. ``leaky-collapse`` is the headline. To run one
from Python with overrides::

    exp = get("leaky-collapse")
    cfg = resolve_config(exp, "tiny", {"width": 40})
    result = run_experiment(exp, cfg, seed=0, preset="tiny", overrides={"width": 40})

The folder ``claims/<module>/`` defines the experiment ``<module>`` with dashes for
underscores (``leaky_collapse`` -> ``leaky-collapse``), so :data:`NAMES` and
:func:`declared_fields` are known without importing any experiment (nor JAX): the
command line refuses an unknown name or field before the engine loads. ``REGISTRY``
imports every experiment on first use; :func:`figure` draws a result's figure.
"""

from __future__ import annotations

import ast
import functools
import importlib
import pkgutil
from collections.abc import Iterable, Mapping
from dataclasses import replace
from pathlib import Path

from ..results import Check, Result, at_least, at_most
from .base import SIZES, Experiment, run_experiment
from .config import (
    DEFAULT_PRESET,
    ConfigError,
    check_scopes,
    overrides_for,
    resolve_config,
    unknown_field_error,
)

HEADLINE = "leaky-collapse"


def _modules() -> dict[str, str]:
    """Experiment name -> package name, from the folders alone (nothing imported)."""
    mods = [m.name for m in pkgutil.iter_modules(__path__) if m.ispkg and not m.name.startswith("_")]
    found = {m.replace("_", "-"): m for m in sorted(mods)}
    head = {HEADLINE: found.pop(HEADLINE)} if HEADLINE in found else {}
    return head | found


_MODULES = _modules()
NAMES: tuple[str, ...] = tuple(_MODULES)
"""Every experiment's name, the headline first (read from the module files; no import)."""


def _load(name: str) -> Experiment:
    """Import experiment ``name``'s module and return its EXPERIMENT."""
    mod = _MODULES[name]
    exp = getattr(importlib.import_module(f"{__name__}.{mod}"), "EXPERIMENT", None)
    if not isinstance(exp, Experiment):
        raise TypeError(f"{__name__}.{mod} defines no EXPERIMENT (an Experiment); a module "
                        "that is not an experiment is named with a leading underscore")
    if exp.name != name:
        raise ValueError(f"{__name__}.{mod} defines experiment {exp.name!r}; its folder must "
                         f"be named {exp.name.replace('-', '_')!r} (see this module's doc)")
    return exp


def __getattr__(name: str):
    if name == "REGISTRY":  # imports every experiment (and JAX): only when asked for
        globals()["REGISTRY"] = {name: _load(name) for name in NAMES}
        return globals()["REGISTRY"]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def known() -> tuple[str, ...]:
    """Every experiment's name: the registry's once loaded (tests add toys to it), else
    :data:`NAMES` (no import)."""
    return tuple(globals()["REGISTRY"]) if "REGISTRY" in globals() else NAMES


def check_name(name: str) -> str:
    """``name`` if it is an experiment's; else a KeyError listing the known names (no import)."""
    if name not in known():
        raise KeyError(f"unknown experiment {name!r}; known: {', '.join(known())} "
                       "(see `biasfree list`)")
    return name


def get(name: str) -> Experiment:
    """The experiment called ``name``; a clear error lists the known names."""
    check_name(name)
    return globals()["REGISTRY"][name] if "REGISTRY" in globals() else _load(name)


def declared_fields(name: str) -> tuple[tuple[str, str, str], ...]:
    """``(field, type, default)`` as text for each field of experiment ``name``'s ``Config``
    (``("width", "int", "200")``): from the class once the registry is loaded, else read
    from the claim's ``__init__.py`` (the class body's annotated names) without importing it. A
    test checks both ways agree for every experiment."""
    check_name(name)
    if "REGISTRY" in globals():
        from .config import field_lines

        cls = globals()["REGISTRY"][name].config
        return field_lines(cls) if cls is not None else ()
    return _source_fields(name)


@functools.cache
def _source_fields(name: str) -> tuple[tuple[str, str, str], ...]:
    path = Path(__file__).with_name(_MODULES[name]) / "__init__.py"
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.ClassDef) and node.name == "Config":
            return tuple((s.target.id, _source_type(s.annotation),
                          "(required)" if s.value is None else ast.unparse(s.value))
                         for s in node.body
                         if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name))
    return ()


def _source_type(node: ast.expr) -> str:
    """A field's annotation as :func:`~.config.field_lines` writes it: ``T`` for
    ``Annotated[T, ...]`` and for a bounded alias of :mod:`.base` (``Positive`` is ``float``)."""
    from . import base
    from .config import type_name

    if isinstance(node, ast.Subscript) and ast.unparse(node.value) == "Annotated":
        return ast.unparse(node.slice.elts[0])
    alias = getattr(base, ast.unparse(node), None)
    return type_name(alias.__origin__) if hasattr(alias, "__metadata__") else ast.unparse(node)


def precheck(names: Iterable[str], preset: str | None = None,
             file_doc: Mapping[str, object] | None = None,
             sets: Mapping[str, object] | None = None) -> None:
    """What :func:`~.config.plan` would refuse that can be known without importing any
    experiment (nor JAX): the preset's name, overrides aimed at unknown experiments or at
    ones not being run, and unknown field names (:func:`declared_fields`). Value and type
    errors need the Config classes and are left to :func:`~.config.plan`."""
    names = list(names)
    file_doc = dict(file_doc or {})
    file_preset = file_doc.pop("preset", None)
    chosen = preset or (file_preset if isinstance(file_preset, str) else None) or DEFAULT_PRESET
    if chosen not in SIZES:
        raise ConfigError(f"unknown preset {chosen!r} for {names[0]}; choose one of {', '.join(SIZES)}")
    sets = dict(sets or {})
    check_scopes(names, known(), file_doc, sets)
    for name in names:
        lines = declared_fields(name)
        unknown = [k for k in overrides_for(name, file_doc, sets) if k not in {n for n, *_ in lines}]
        if unknown:
            raise unknown_field_error(name, unknown, lines)


def figure(result: Result):
    """The matplotlib Figure of ``result``, drawn by ``claims/<module>/figure.py``'s
    ``figure(result)``; an experiment without that module is a LookupError (no fallback).
    A result saved before results carried their claim sentence gets the registry's."""
    if not result.claim and result.experiment in known():
        result = replace(result, claim=get(result.experiment).claim)
    path = f"{__name__}.{result.experiment.replace('-', '_')}.figure"
    try:
        mod = importlib.import_module(path)
    except ModuleNotFoundError as e:
        if not path.startswith(str(e.name)):
            raise
        raise LookupError(f"experiment {result.experiment!r} has no figure: add {path.replace('.', '/')}.py "
                          "defining figure(result) -> matplotlib Figure") from None
    return mod.figure(result)


__all__ = ["HEADLINE", "NAMES", "REGISTRY", "SIZES", "Check", "ConfigError", "Experiment", "Result",
           "at_least", "at_most", "check_name", "declared_fields", "figure", "get", "known", "precheck",
           "resolve_config", "run_experiment"]
