"""What an experiment is and what it returns.

An experiment reproduces one claim of the paper: ``run(size, seed, progress)``
computes numbers and arrays (never plots or files) and returns a :class:`Result`
whose :class:`Check` entries compare simulation with theory, each stating its claim
in one sentence. Figures are drawn later from the result (``biasfree.plotting``), and
results are written by ``biasfree.store``: compute once, plot later.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, is_dataclass

import numpy as np

SIZES = ("tiny", "paper")
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
    """Everything one run produced: ``config`` (JSON-able dict), ``metrics``
    (name -> number), ``checks`` (name -> Check), ``arrays`` (name -> ndarray, for
    the figure and ``arrays.npz``), ``notes`` (free text for the report)."""

    experiment: str
    size: str
    seed: int
    config: dict
    metrics: dict[str, float]
    checks: dict[str, Check]
    arrays: dict[str, np.ndarray] = field(default_factory=dict)
    notes: str = ""

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks.values())

    def failed(self) -> list[str]:
        return [k for k, c in self.checks.items() if not c.passed]


@dataclass(frozen=True)
class Experiment:
    """A registered experiment: ``name`` (CLI name), ``claim`` (one line),
    ``run(size, seed, progress) -> Result``, its per-size ``configs``, and
    ``paper_claim``: which of the paper's claims it tests, in one line (for the report)."""

    name: str
    claim: str
    run: Callable[..., Result]
    configs: dict = field(default_factory=dict)
    paper_claim: str = ""


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


def check_size(size: str) -> None:
    if size not in SIZES:
        raise ValueError(f"unknown size {size!r}: choose one of {', '.join(SIZES)}")
