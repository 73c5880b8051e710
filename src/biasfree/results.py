"""What a run returns: :class:`Result`, its :class:`Check` entries, and configs as JSON.

A check compares a measured ``value`` with a ``threshold`` and says in one sentence what
passing shows; a result holds a run's config, metrics, checks and arrays. These types are
shared by the claims (which make them), the store (which writes and reads them) and the
report (which shows them), so they live below all three.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, is_dataclass

import numpy as np


@dataclass(frozen=True)
class Check:
    """``value`` compared with ``threshold`` (``"<="``: value must not exceed it;
    ``">="``: value must reach it). ``claim`` says in one sentence what passing shows;
    ``unit`` names what value and threshold are measured in (e.g. ``"fraction of L(0)"``,
    ``"z (standard errors)"``), so a reader can tell 0.003 of what; ``name`` names the
    measured quantity where a list of checks is shown (the evidence of a verdict). The one
    check type of the claims and of :func:`biasfree.analyse`'s verdicts."""

    value: float
    threshold: float
    claim: str
    op: str = "<="
    unit: str = ""
    name: str = ""

    def __post_init__(self):
        if self.op not in ("<=", ">="):
            raise ValueError(f"check op must be '<=' or '>=', got {self.op!r}")

    @property
    def passed(self) -> bool:
        v = float(self.value)
        return math.isfinite(v) and (v <= self.threshold if self.op == "<=" else v >= self.threshold)

    def line(self) -> str:
        """``name = value (op threshold: ok|FAILS)``."""
        mark = "ok" if self.passed else "FAILS"
        return f"{self.name} = {float(self.value):.3g} ({self.op} {self.threshold:.3g}: {mark})"

    def to_json(self) -> dict:
        doc = {"value": float(self.value), "threshold": float(self.threshold),
               "op": self.op, "passed": self.passed, "claim": self.claim, "unit": self.unit}
        return doc | ({"name": self.name} if self.name else {})


def at_most(value, threshold, claim: str, *, unit: str = "") -> Check:
    """A check that passes when ``value <= threshold`` (both in ``unit``)."""
    return Check(float(value), float(threshold), claim, "<=", unit)


def at_least(value, threshold, claim: str, *, unit: str = "") -> Check:
    """A check that passes when ``value >= threshold`` (both in ``unit``)."""
    return Check(float(value), float(threshold), claim, ">=", unit)


@dataclass(frozen=True)
class Result:
    """Everything one run produced: ``config`` (the effective config, a JSON-able dict,
    filled in once by :func:`biasfree.claims.base.run_experiment`: a claim's run passes ``{}``),
    ``metrics`` (name -> number), ``checks`` (name -> Check), ``arrays`` (name ->
    ndarray, for the figure and ``arrays.npz``), ``notes`` (free text for the report),
    ``preset`` the named preset the config started from (``"custom"`` for a config built
    by hand), ``overrides`` the fields set on top of it, and the experiment's ``claim`` and
    ``paper_claim`` sentences (all four filled in by
    :func:`biasfree.claims.base.run_experiment`, and kept in ``result.json``)."""

    experiment: str
    seed: int
    config: dict
    metrics: dict[str, float]
    checks: dict[str, Check]
    arrays: dict[str, np.ndarray] = field(default_factory=dict)
    notes: str = ""
    preset: str = "custom"
    overrides: dict = field(default_factory=dict)
    claim: str = ""
    paper_claim: str = ""

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks.values())

    def failed(self) -> list[str]:
        return [k for k, c in self.checks.items() if not c.passed]


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
