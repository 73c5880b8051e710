"""Registry of experiments, one module per claim of the paper.

Each module ``biasfree.experiments.<name>`` defines a frozen ``Config``, its
``PRESETS`` (``tiny``, ``paper``), ``run(cfg, seed, progress)`` and ``EXPERIMENT`` (an
:class:`~biasfree.experiments.base.Experiment`); modules are discovered, so adding
an experiment means adding a module. ``leaky-collapse`` is the headline. To run one
from Python with overrides::

    exp = get("leaky-collapse")
    cfg = resolve_config(exp, "tiny", {"width": 40})
    result = run_experiment(exp, cfg, seed=0, preset="tiny", overrides={"width": 40})
"""

from __future__ import annotations

import importlib
import pkgutil

from .base import SIZES, Check, Experiment, Result, at_least, at_most, run_experiment
from .config import ConfigError, resolve_config

HEADLINE = "leaky-collapse"


def _discover() -> dict[str, Experiment]:
    found = {}
    for mod in pkgutil.iter_modules(__path__):
        if mod.name in ("base", "config") or mod.name.startswith("_"):
            continue
        exp = getattr(importlib.import_module(f"{__name__}.{mod.name}"), "EXPERIMENT", None)
        if isinstance(exp, Experiment):
            found[exp.name] = exp
    head = {HEADLINE: found.pop(HEADLINE)} if HEADLINE in found else {}
    return head | dict(sorted(found.items()))


REGISTRY: dict[str, Experiment] = _discover()


def get(name: str) -> Experiment:
    """The experiment called ``name``; a clear error lists the known names."""
    try:
        return REGISTRY[name]
    except KeyError:
        raise KeyError(
            f"unknown experiment {name!r}; known: {', '.join(REGISTRY)} (see `biasfree list`)"
        ) from None


__all__ = ["HEADLINE", "REGISTRY", "SIZES", "Check", "ConfigError", "Experiment", "Result",
           "at_least", "at_most", "get", "resolve_config", "run_experiment"]
