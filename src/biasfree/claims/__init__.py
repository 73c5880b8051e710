"""The registry of experiments, one package per claim of the paper.

Each package ``biasfree.claims.<name>/`` holds one claim: ``__init__.py`` its frozen
``Config``, ``PRESETS`` (``tiny``, ``paper``), claim sentences and ``EXPERIMENT`` (an
:class:`~biasfree.claims.base.Experiment`), ``run.py`` its ``run(cfg, seed, progress)``
and ``figure.py`` its ``figure(result)``. :data:`REGISTRY` lists the packages explicitly,
the headline (``leaky-collapse``) first: adding an experiment means adding a folder and
a line below. The packages import no JAX (their ``run.py`` and ``figure.py`` are imported
at the first call: :func:`~.base.bind`). To run one from Python with overrides::

    exp = get("leaky-collapse")
    cfg = resolve_config(exp, "tiny", {"width": 40})
    result = run_experiment(exp, cfg, seed=0, preset="tiny", overrides={"width": 40})
"""

from __future__ import annotations

from dataclasses import replace

from ..results import Check, Result, at_least, at_most
from . import (
    bias_free_denoiser,
    breaking,
    conv_collapse,
    deep,
    even_part,
    expressivity,
    generalisation,
    leaky_collapse,
    linear_attention,
    linearity_map,
    max_margin,
    optimisers,
    orthogonal_inputs,
    real_data,
    robustness,
    saddle_conjectures,
    saddle_to_saddle,
    verdict_calibration,
)
from .base import SIZES, Experiment, bind, run_experiment
from .config import ConfigError, field_lines, resolve_config

HEADLINE = "leaky-collapse"

REGISTRY: dict[str, Experiment] = {e.name: e for e in map(bind, (
    leaky_collapse, bias_free_denoiser, breaking, conv_collapse, deep, even_part, expressivity,
    generalisation, linearity_map, max_margin, optimisers, orthogonal_inputs, real_data, robustness,
    verdict_calibration, linear_attention, saddle_to_saddle, saddle_conjectures))}
"""Experiment name -> its record, the headline first (tests add toys to it)."""

NAMES: tuple[str, ...] = tuple(REGISTRY)
"""Every packaged experiment's name, the headline first."""


def known() -> tuple[str, ...]:
    """Every registered experiment's name (the toys a test adds included)."""
    return tuple(REGISTRY)


def check_name(name: str) -> str:
    """``name`` if it is an experiment's; else a KeyError listing the known names."""
    if name not in REGISTRY:
        raise KeyError(f"unknown experiment {name!r}; known: {', '.join(REGISTRY)} "
                       "(see `biasfree list`)")
    return name


def get(name: str) -> Experiment:
    """The experiment called ``name``; a clear error lists the known names."""
    return REGISTRY[check_name(name)]


def declared_fields(name: str) -> tuple[tuple[str, str, str], ...]:
    """``(field, type, default)`` as text for each field of experiment ``name``'s ``Config``
    (``("width", "int", "200")``)."""
    return field_lines(get(name).config)


def figure(result: Result):
    """The matplotlib Figure of ``result``, drawn by its experiment's ``figure(result)``
    (a LookupError for an experiment the registry does not know). A result saved before
    results carried their claim sentence gets the registry's."""
    exp = REGISTRY.get(result.experiment)
    if exp is None or exp.figure is None:
        raise LookupError(f"experiment {result.experiment!r} has no figure: register it in "
                          "biasfree.claims.REGISTRY with a figure.py defining figure(result)")
    return exp.figure(result if result.claim else replace(result, claim=exp.claim))


__all__ = ["HEADLINE", "NAMES", "REGISTRY", "SIZES", "Check", "ConfigError", "Experiment", "Result",
           "at_least", "at_most", "check_name", "declared_fields", "figure", "get", "known",
           "resolve_config", "run_experiment"]
