"""Registry of experiments, one module per claim of the paper.

Each module ``biasfree.experiments.<name>`` defines ``EXPERIMENT`` (an
:class:`~biasfree.experiments.base.Experiment`); modules are discovered, so adding
an experiment means adding a module. ``leaky-collapse`` is the headline.
"""

from __future__ import annotations

import importlib
import pkgutil

from .base import SIZES, Check, Experiment, Result, at_least, at_most

HEADLINE = "leaky-collapse"


def _discover() -> dict[str, Experiment]:
    found = {}
    for mod in pkgutil.iter_modules(__path__):
        if mod.name == "base" or mod.name.startswith("_"):
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


__all__ = ["HEADLINE", "REGISTRY", "SIZES", "Check", "Experiment", "Result", "at_least",
           "at_most", "get"]
