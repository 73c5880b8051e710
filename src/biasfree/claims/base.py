"""What an experiment is and what it returns.

An experiment reproduces one claim of the paper. Its hyperparameters are a frozen,
validated ``Config`` dataclass with named ``presets`` (``tiny``: seconds, ``paper``:
minutes); ``run(cfg, seed, progress)`` computes numbers and arrays (never plots or
files) and returns a :class:`Result` whose :class:`Check` entries compare simulation
with theory, each stating its claim in one sentence. Figures are drawn later from the
result (``biasfree.claims.figure``), and results are written by ``biasfree.store``: compute
once, plot later. Configs from presets, files and ``--set`` overrides are resolved in
``biasfree.claims.config``.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

import numpy as np

from ..results import Result, config_dict

SIZES = ("tiny", "paper")
"""The preset names every experiment defines (``--preset``; ``--size`` is an alias)."""
Progress = Callable[[str], None]


def _quiet(_: str) -> None:
    pass


@dataclass(frozen=True)
class Experiment:
    """A registered experiment: ``name`` (CLI name), ``claim`` (one line),
    ``run(cfg, seed, progress) -> Result`` or the name of the module that defines it
    (imported at the first run: a claim's ``run.py`` imports its package, not the other
    way round), ``config`` its frozen Config dataclass,
    ``presets`` (name -> Config: ``tiny``, ``paper``), and ``paper_claim``: which of the
    paper's claims it tests, in one line (for the report). ``run`` is wrapped: it refuses a
    ``cfg`` that is not a ``config`` (a clear TypeError, before any work), computes in
    float64 (:mod:`biasfree.core.precision`) and hands back NumPy arrays."""

    name: str
    claim: str
    run: Callable[..., Result] | str
    config: type | None = None
    presets: Mapping[str, object] = field(default_factory=dict)
    paper_claim: str = ""

    def __post_init__(self):
        # experiments compute in float64 (or float32 via precision=) whatever JAX's global
        # setting (biasfree.core.precision), and hand back NumPy arrays, so that figures drawn
        # later, outside that setting, keep every digit (imported here: base stays JAX-free)
        from ..core.precision import precise

        run = _imported(self.run) if isinstance(self.run, str) else self.run
        object.__setattr__(self, "run", _numpy_arrays(precise(_typed(run, self.config))))
        if self.config is not None:
            wrong = [k for k, v in self.presets.items() if not isinstance(v, self.config)]
            if wrong:
                raise TypeError(f"{self.name}: presets {wrong} are not {self.config.__qualname__} "
                                "instances")


def require_positive(cfg, *names: str) -> None:
    """For a config's ``__post_init__``: a ValueError naming every field among ``names``
    that is not ``> 0``."""
    bad = [f"{n}={getattr(cfg, n)!r}" for n in names if not getattr(cfg, n) > 0]
    if bad:
        raise ValueError(f"{', '.join(bad)} must be > 0")


def _numpy_arrays(run):
    """``run`` whose Result's ``arrays`` are NumPy arrays (as :class:`Result` documents)."""

    @functools.wraps(run)
    def wrapper(*args, **kwargs):
        result = run(*args, **kwargs)
        if isinstance(result, Result):
            result = replace(result, arrays={k: np.asarray(v) for k, v in result.arrays.items()})
        return result

    return wrapper


def _imported(module: str):
    """``module``'s ``run``, imported at the first call."""

    def run(*args, **kwargs):
        return importlib.import_module(module).run(*args, **kwargs)

    run.__doc__ = f"``{module}.run``, imported at the first call."
    return run


def _typed(run, config_cls):
    """``run`` that raises a clear TypeError unless its ``cfg`` is a ``config_cls``."""
    if config_cls is None:
        return run

    @functools.wraps(run)
    def wrapper(cfg, *args, **kwargs):
        if not isinstance(cfg, config_cls):
            raise TypeError(f"run() takes a {config_cls.__module__}.{config_cls.__qualname__}, e.g. "
                            f"PRESETS['tiny'] or Config(...) (see `biasfree show`), got {cfg!r}")
        return run(cfg, *args, **kwargs)

    return wrapper


def run_experiment(exp: Experiment, cfg, seed: int = 0, progress: Progress = _quiet, *,
                   preset: str = "custom", overrides: Mapping | None = None) -> Result:
    """Run ``exp`` from ``cfg`` and return its Result with what ``result.json`` stores: the
    effective config, the ``preset`` it started from, the ``overrides`` recorded and the
    experiment's ``claim`` and ``paper_claim``. The one entry point for the CLI and sweeps.
    ``seed`` is an integer in ``[0, 2**31)`` (:func:`biasfree._validate.seed`)."""
    from .._validate import seed as check_seed

    result = exp.run(cfg, check_seed(seed), progress)
    return replace(result, config=config_dict(cfg), preset=preset,
                   overrides=config_dict(dict(overrides or {})), claim=exp.claim,
                   paper_claim=exp.paper_claim)


