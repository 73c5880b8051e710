"""What an experiment is and what it returns.

An experiment reproduces one claim of the paper. Its hyperparameters are a frozen,
validated ``Config`` dataclass with named ``presets`` (``tiny``: seconds, ``paper``:
minutes); ``run(cfg, seed, progress)`` computes numbers and arrays (never plots or
files) and returns a :class:`Result` whose :class:`Check` entries compare simulation
with theory, each stating its claim in one sentence. Figures are drawn later from the
result (``biasfree.plotting``), and results are written by ``biasfree.store``: compute
once, plot later. Configs from presets, files and ``--set`` overrides are resolved in
``biasfree.claims.config``.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, is_dataclass, replace

import numpy as np

SIZES = ("tiny", "paper")
"""The preset names every experiment defines (``--preset``; ``--size`` is an alias)."""
Progress = Callable[[str], None]


def _quiet(_: str) -> None:
    pass


@dataclass(frozen=True)
class Check:
    """``value`` compared with ``threshold`` (``"<="``: value must not exceed it;
    ``">="``: value must reach it). ``claim`` says in one sentence what passing shows;
    ``unit`` names what value and threshold are measured in (e.g. ``"fraction of L(0)"``,
    ``"z (standard errors)"``), so a reader can tell 0.003 of what."""

    value: float
    threshold: float
    claim: str
    op: str = "<="
    unit: str = ""

    def __post_init__(self):
        if self.op not in ("<=", ">="):
            raise ValueError(f"check op must be '<=' or '>=', got {self.op!r}")

    @property
    def passed(self) -> bool:
        v = float(self.value)
        if not math.isfinite(v):
            return False
        return v <= self.threshold if self.op == "<=" else v >= self.threshold

    def to_json(self) -> dict:
        return {"value": float(self.value), "threshold": float(self.threshold),
                "op": self.op, "passed": self.passed, "claim": self.claim, "unit": self.unit}


def at_most(value, threshold, claim: str, *, unit: str = "") -> Check:
    """A check that passes when ``value <= threshold`` (both in ``unit``)."""
    return Check(float(value), float(threshold), claim, "<=", unit)


def at_least(value, threshold, claim: str, *, unit: str = "") -> Check:
    """A check that passes when ``value >= threshold`` (both in ``unit``)."""
    return Check(float(value), float(threshold), claim, ">=", unit)


@dataclass(frozen=True)
class Result:
    """Everything one run produced: ``config`` (the effective config, a JSON-able dict),
    ``metrics`` (name -> number), ``checks`` (name -> Check), ``arrays`` (name ->
    ndarray, for the figure and ``arrays.npz``), ``notes`` (free text for the report),
    ``preset`` the named preset the config started from (``"custom"`` for a config built
    by hand) and ``overrides`` the fields set on top of it (both filled in by
    :func:`run_experiment`)."""

    experiment: str
    seed: int
    config: dict
    metrics: dict[str, float]
    checks: dict[str, Check]
    arrays: dict[str, np.ndarray] = field(default_factory=dict)
    notes: str = ""
    preset: str = "custom"
    overrides: dict = field(default_factory=dict)

    @property
    def size(self) -> str:
        """The preset's name (``result.json``'s ``size`` key; read-only alias)."""
        return self.preset

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks.values())

    def failed(self) -> list[str]:
        return [k for k, c in self.checks.items() if not c.passed]


@dataclass(frozen=True)
class Experiment:
    """A registered experiment: ``name`` (CLI name), ``claim`` (one line),
    ``run(cfg, seed, progress) -> Result``, ``config`` its frozen Config dataclass,
    ``presets`` (name -> Config: ``tiny``, ``paper``), and ``paper_claim``: which of the
    paper's claims it tests, in one line (for the report). ``configs`` is the old name
    of ``presets``, still accepted."""

    name: str
    claim: str
    run: Callable[..., Result]
    config: type | None = None
    presets: Mapping[str, object] = field(default_factory=dict)
    paper_claim: str = ""
    configs: Mapping[str, object] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self):
        if self.configs and not self.presets:
            object.__setattr__(self, "presets", self.configs)
        object.__setattr__(self, "configs", self.presets)
        # experiments compute in float64 (or float32 via precision=) whatever JAX's global
        # setting (biasfree.core.precision), and hand back NumPy arrays, so that figures drawn
        # later, outside that setting, keep every digit (imported here: base stays JAX-free)
        from ..core.precision import precise

        object.__setattr__(self, "run", _numpy_arrays(precise(self.run)))
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


def expect_config(cfg, config_cls) -> None:
    """Raise a clear TypeError unless ``cfg`` is a ``config_cls`` (the old API passed a
    size name)."""
    if not isinstance(cfg, config_cls):
        raise TypeError(f"run() takes a {config_cls.__module__}.{config_cls.__qualname__}, e.g. "
                        f"PRESETS['tiny'] or Config(...) (see `biasfree show`), got {cfg!r}")


def run_experiment(exp: Experiment, cfg, seed: int = 0, progress: Progress = _quiet, *,
                   preset: str = "custom", overrides: Mapping | None = None) -> Result:
    """Run ``exp`` from ``cfg`` and return its Result with the effective config, the
    ``preset`` it started from and the ``overrides`` recorded (what ``result.json``
    stores). The one entry point for the CLI and sweeps. ``seed`` is an integer in
    ``[0, 2**31)`` (:func:`biasfree._validate.seed`), the range every experiment accepts."""
    from .._validate import seed as check_seed

    result = exp.run(cfg, check_seed(seed), progress)
    return replace(result, config=config_dict(cfg), preset=preset,
                   overrides=config_dict(dict(overrides or {})))


def config_dict(cfg) -> dict:
    """A frozen-dataclass config as a JSON-able dict (tuples become lists)."""
    d = asdict(cfg) if is_dataclass(cfg) else dict(cfg)

    def clean(v):
        if isinstance(v, tuple | list):
            return [clean(x) for x in v]
        if isinstance(v, np.generic):
            return v.item()
        return v

    return {k: clean(v) for k, v in d.items()}
