"""A sweep's spec and its points: what to run, each point's config resolved and
validated, and the content-addressed key it is stored under.

A spec is a TOML file (read with :mod:`tomllib`)::

    experiment = "leaky-collapse"   # any registered experiment
    preset = "tiny"                 # the config every point starts from (default "paper")
    seeds = [0, 1, 2, 3]
    [grid]                          # cartesian product over config fields
    width = [40, 100]
    random_scale = [1e-4, 1e-2]
    [fixed]                         # optional overrides for every point
    n_records = 50

A *point* is (config overrides, seed). Every point's config is resolved and validated
(:func:`biasfree.claims.config.planned`, as ``biasfree run`` does) before any task
starts, so a bad spec fails at once with the config's own message.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field

from .. import store

DEFAULT_PRESET = "paper"  # as biasfree.claims.config.DEFAULT_PRESET
SPEC_KEYS = ("experiment", "preset", "seeds", "grid", "fixed")


class SpecError(ValueError):
    """A sweep spec that cannot run: unreadable, an unknown key, a bad grid or seeds, or a
    point whose config the experiment rejects."""



@dataclass(frozen=True)
class Spec:
    """A parsed sweep spec: ``experiment`` name, ``preset`` name, ``seeds``, ``grid``
    (field -> tuple of values, in the file's order) and ``fixed`` (field -> value)."""

    experiment: str
    preset: str = DEFAULT_PRESET
    seeds: tuple[int, ...] = (0,)
    grid: dict = field(default_factory=dict)
    fixed: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Point:
    """One task: its ``key`` (folder name under ``points/``), ``seed``, ``swept`` (grid
    field -> value) and ``planned`` (:class:`~biasfree.claims.config.Planned`: the resolved
    config, the recorded overrides, fixed and swept, and the config as ``result.json``
    stores it)."""

    key: str
    seed: int
    swept: dict
    planned: object

    def label(self) -> str:
        return ", ".join([f"{k}={v!r}" for k, v in self.swept.items()] + [f"seed={self.seed}"])


def parse_spec(doc: Mapping, source: str = "spec") -> Spec:
    """A :class:`Spec` from a TOML document (a dict); :class:`SpecError` names what is
    wrong and how to write it."""
    if not isinstance(doc, Mapping):
        raise TypeError(f"{source} must be a dict of a spec's keys ({', '.join(SPEC_KEYS)}), got "
                        f"{type(doc).__name__}; biasfree.experiments.read_spec(path) reads a spec file")
    unknown = [k for k in doc if k not in SPEC_KEYS]
    if unknown:
        raise SpecError(f"{source}: unknown key(s) {', '.join(map(repr, unknown))}; a spec has "
                        f"{', '.join(SPEC_KEYS)} (config fields go under [grid] or [fixed])")
    name = doc.get("experiment")
    if not isinstance(name, str):
        raise SpecError(f"{source}: experiment = \"NAME\" is required (see `biasfree list`)")
    preset = doc.get("preset", DEFAULT_PRESET)
    if not isinstance(preset, str):
        raise SpecError(f"{source}: preset must be a name such as \"tiny\", got {preset!r}")
    seeds = doc.get("seeds", [0])
    if (not isinstance(seeds, list) or not seeds
            or not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in seeds)):
        raise SpecError(f"{source}: seeds must be a non-empty list of integers >= 0, such as "
                        f"[0, 1, 2, 3], got {seeds!r}")
    if any(s >= 2**31 for s in seeds):
        raise SpecError(f"{source}: seeds must be below 2**31, got {max(seeds)}")
    if len(set(seeds)) != len(seeds):
        raise SpecError(f"{source}: seeds {seeds} lists a seed twice")
    grid, fixed = doc.get("grid", {}), doc.get("fixed", {})
    for table, what in ((grid, "grid"), (fixed, "fixed")):
        if not isinstance(table, dict):
            raise SpecError(f"{source}: [{what}] must be a table of FIELD = VALUE lines")
    for k, v in (*grid.items(), *fixed.items()):
        try:  # a point's key and the sweep's table store the values as JSON
            json.dumps(v)
        except TypeError as e:
            raise SpecError(f"{source}: {k} = {v!r} holds a value a spec cannot store ({e}); use plain "
                            "numbers, strings and lists (e.g. int(x) for a NumPy integer)") from None
    for k, values in grid.items():
        if not isinstance(values, list) or not values:
            raise SpecError(f"{source}: grid.{k} must be a non-empty list of values, such as "
                            f"{k} = [{values!r}] (a single value goes under [fixed])")
        if len({json.dumps(v) for v in values}) != len(values):
            raise SpecError(f"{source}: grid.{k} = {values!r} lists a value twice")
    both = sorted(set(grid) & set(fixed))
    if both:
        raise SpecError(f"{source}: {', '.join(both)} is both swept ([grid]) and fixed ([fixed]); "
                        "keep one")
    return Spec(name, preset, tuple(seeds), {k: tuple(v) for k, v in grid.items()}, dict(fixed))


def read_spec(path) -> Spec:
    """Read and parse a spec file (see the module docstring)."""
    from ..claims.config import read_toml

    return parse_spec(read_toml(path, "sweep spec", SpecError), str(path))


def point_key(experiment: str, config: Mapping, seed: int) -> str:
    """The folder name of a point: a hash of the experiment, the effective ``config`` (as
    ``result.json`` stores it), the seed and the biasfree version
    (:func:`biasfree.store.run_key`)."""
    doc = json.dumps(store.run_key(experiment, dict(config), seed), sort_keys=True)
    return hashlib.sha256(doc.encode()).hexdigest()[:16]


def plan_points(spec: Spec) -> list[Point]:
    """Every point of ``spec`` (grid in the file's order, seeds innermost), each config
    resolved and validated. Raises :class:`SpecError` (unknown experiment, preset, field
    or a bad value, with the config's own message) before anything runs."""
    from ..claims import get
    from ..claims.config import ConfigError, planned

    try:
        exp = get(spec.experiment)
    except KeyError as e:
        raise SpecError(str(e.args[0])) from None
    fields = list(spec.grid)
    points = []
    for values in itertools.product(*spec.grid.values()):
        swept = dict(zip(fields, values, strict=True))
        try:
            p = planned(exp, spec.preset, {**spec.fixed, **swept})
        except ConfigError as e:
            where = ", ".join(f"{k}={v!r}" for k, v in swept.items())
            hints = typing.get_type_hints(exp.config)  # a list-valued field swept value by value:
            lists = [k for k, v in swept.items() if typing.get_origin(hints.get(k)) is tuple
                     and not isinstance(v, list)]
            hint = (f"; [grid] takes one value per point, so a list-valued field needs a list of lists, "
                    f"e.g. {lists[0]} = [[0.0, 1.0], [0.5, 1.0]], or one list under [fixed]") if lists else ""
            raise SpecError(f"{e}" + (f" (at grid point {where})" if where else "") + hint) from None
        points += [Point(point_key(exp.name, p.recorded, seed), seed, swept, p) for seed in spec.seeds]
    return points
