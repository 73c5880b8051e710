"""Config bounds written in the annotations (:func:`biasfree.claims.base.config`): each
field's rule is checked once, at construction (by pydantic), and every violation is named."""

from __future__ import annotations

import dataclasses
import re
from typing import Annotated

import pytest
from annotated_types import Ge, Gt, Interval, MinLen, Predicate, doc

from biasfree.claims import NAMES, get
from biasfree.claims.base import PairWidth, Positives, Slope, config, increasing, is_config, rules
from biasfree.claims.config import field_rows


@config
class Toy:
    """``width`` units, ``alpha`` slope, ``lr`` step, ``scales`` axis, ``n`` optional count,
    ``steps`` count, ``free`` unbounded."""

    width: PairWidth = 4
    alpha: Slope = 0.0
    lr: Annotated[float, Gt(0)] = 0.1
    scales: Positives = (1e-3, 1e-2)
    n: Annotated[int | None, Ge(20), doc("None: all")] = None
    steps: Annotated[int, Interval(ge=1, le=10)] = 3
    free: float = -3.0

    def __post_init__(self):
        if self.steps > self.width:
            raise ValueError(f"steps={self.steps} must be <= width={self.width}")


def test_defaults_pass_and_the_class_stays_a_frozen_dataclass():
    t = Toy()
    assert is_config(Toy) and dataclasses.is_dataclass(t)
    with pytest.raises(dataclasses.FrozenInstanceError):
        t.lr = 1.0


@pytest.mark.parametrize("kw, message", [
    ({"width": 3}, "width=3 must be even (pair init splits the units in two)"),
    ({"width": 0}, "width=0 must be >= 2 (pair init"),
    ({"alpha": 1.0}, "alpha=1.0 must be in [0, 1) (α = 1 is the linear twin itself)"),
    ({"lr": 0.0}, "lr=0.0 must be > 0"),
    ({"lr": float("nan")}, "lr=nan must be finite (no NaN or inf)"),  # refused for every float field
    ({"free": float("inf")}, "free=inf must be finite (no NaN or inf)"),  # unbounded fields too
    ({"scales": (1e-2, 1e-3)}, "scales=(0.01, 0.001) must be increasing"),
    ({"scales": (-1.0, 1.0)}, "scales[0]=-1.0 must be in (0, inf)"),
    ({"scales": (1.0, float("inf"))}, "scales[1]=inf must be finite (no NaN or inf)"),
    ({"scales": (1.0,)}, "scales=(1.0,) must be of length >= 2"),
    ({"n": 3}, "n=3 must be >= 20 (None: all)"),
    ({"steps": 11}, "steps=11 must be in [1, 10]"),
    ({"lr": None}, "field 'lr' expects float, got NoneType None"),  # None only where the type admits it
    ({"width": 4.0}, "field 'width' expects int, got float 4.0"),
    ({"width": True}, "field 'width' expects int, got bool True"),  # a bool is not a number
])
def test_each_broken_bound_is_named_with_its_rule_and_reason(kw, message):
    with pytest.raises(ValueError) as err:
        Toy(**kw)
    assert message in str(err.value)


def test_every_violation_is_named_at_once_and_before_the_class_rules():
    with pytest.raises(ValueError) as err:
        Toy(width=3, lr=-1.0, steps=9)  # steps > width too, but bounds come first
    assert str(err.value) == ("width=3 must be even (pair init splits the units in two); "
                              "lr=-1.0 must be > 0")
    with pytest.raises(ValueError, match="steps=9 must be <= width=4"):
        Toy(steps=9)  # within its bounds: the class's own rule runs


def test_optional_field_unset_passes_and_unbounded_fields_are_not_checked():
    assert Toy(n=None, free=-1e300).free == -1e300
    assert "free" not in rules(Toy) and rules(Toy)["n"] == ">= 20 (None: all)"
    assert rules(Toy)["scales"] == "each in (0, inf), of length >= 2, increasing"


def test_an_int_for_a_float_field_becomes_a_float_and_replace_checks_again():
    t = Toy(lr=1, scales=(1, 2))
    assert type(t.lr) is float and all(type(s) is float for s in t.scales)
    with pytest.raises(ValueError, match="lr=-1.0 must be > 0"):
        dataclasses.replace(t, lr=-1.0)


def test_a_predicate_reads_as_its_function_name():
    @config
    class Axis:
        x: Annotated[tuple[float, ...], MinLen(1), Predicate(increasing)] = (1.0,)

    assert rules(Axis) == {"x": "of length >= 1, increasing"}
    with pytest.raises(ValueError, match=r"x=\(2.0, 1.0\) must be increasing"):
        Axis(x=(2.0, 1.0))


@pytest.mark.parametrize("name, field, value, message", [
    ("leaky-collapse", "lr", float("inf"), "lr=inf must be finite"),
    ("breaking", "freq", float("nan"), "freq=nan must be finite"),
    ("breaking", "alpha", 2.0, "alpha=2.0 must be in [0, 1] (0 ReLU, 1 linear)"),
    ("even-part", "alpha", 5.0, "alpha=5.0 must be in [0, 1]"),
    ("robustness", "d", 0, "d=0 must be >= 1"),
    ("real-data", "n_images", 5000, "n_images=5000 must be <= 1797"),
    ("real-data", "n_records", 1, "n_records=1 must be >= 2"),
    ("deep", "sine_width", 0, "sine_width=0 must be >= 1"),
    ("leaky-collapse", "alphas", (1.0, 1.0), "at least one α < 1"),
    ("real-data", "test_fraction", 0.999, "both the training and the held-out set need"),
    ("even-part", "study_seeds", -1, "study_seeds=-1 must be >= 0"),
])
def test_values_that_crashed_a_run_are_refused_by_its_config(name, field, value, message):
    """Each of these once passed the config and crashed the run (exit 3, not 2)."""
    exp = get(name)
    with pytest.raises(ValueError, match=re.escape(message)):
        dataclasses.replace(exp.presets["tiny"], **{field: value})


@pytest.mark.parametrize("name", NAMES)
def test_every_experiment_shows_its_bounds_and_its_presets_keep_them(name):
    exp = get(name)
    assert all(dataclasses.replace(c) == c for c in exp.presets.values())  # built again: checked again
    rows = {r[0]: r[4] for r in field_rows(exp)}
    assert set(rows) == {f.name for f in dataclasses.fields(exp.config)}
    assert set(rules(exp.config)) <= set(rows) and any(rows.values()), "declare the fields' bounds"
