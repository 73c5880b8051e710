"""What an experiment is and what it returns: its frozen ``Config`` class (:func:`config`,
bounds checked by pydantic at construction), its registry record (:class:`Experiment`) and
:func:`run_experiment`, the one way to run one. ``run(cfg, seed, progress)`` computes numbers
and arrays (never plots or files) and returns a :class:`Result` whose :class:`~biasfree.results.Check` entries
compare simulation with theory, each stating its claim in one sentence; ``figure(result)``
draws it later. Configs from presets, files and ``--set`` are resolved in ``biasfree.claims.config``.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import math
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from types import ModuleType
from typing import Annotated

import numpy as np
import pydantic
import pydantic.dataclasses
from annotated_types import Doc, Ge, Gt, Interval, Le, Lt, MinLen, MultipleOf, Predicate, doc

from ..results import Result, config_dict

SIZES = ("tiny", "paper")
"""The preset names every experiment defines (``--preset``; ``tiny``: seconds, ``paper``: minutes)."""
Progress = Callable[[str], None]


def quiet(_: str) -> None:
    """The progress callback that says nothing (every run's default)."""


# ------------------------------------------------------------------ configs


def config(cls):
    """``cls`` as a frozen, strict pydantic dataclass: construction (and
    ``dataclasses.replace``) checks each field's type (an int is a float, a bool is not a
    number, a list is not a tuple; NaN and inf are refused) and the bounds in its annotation, written with
    annotated_types: ``lr: Annotated[float, Gt(0)]``, ``width: Annotated[int, Ge(2),
    MultipleOf(2)]``; a tuple's elements are bounded inside it, ``tuple[Annotated[float,
    Gt(0)], ...]``, its length and order outside (``MinLen``, ``Predicate``); ``doc("...")``
    is the reason the message gives. One ``ValueError`` names every field out of bounds
    (``_message``); rules that tie fields together stay in the class's own
    ``__post_init__``, which runs after."""
    made = pydantic.dataclasses.dataclass(  # every float finite: no NaN or inf reaches a run
        frozen=True, config=pydantic.ConfigDict(strict=True, allow_inf_nan=False))(cls)
    init = made.__init__

    @functools.wraps(init)
    def __init__(self, *args, **kwargs):
        try:
            init(self, *args, **kwargs)
        except pydantic.ValidationError as e:
            raise ValueError(_message(made, e)) from None

    made.__init__ = __init__
    made.__biasfree_config__ = True
    return made


def is_config(cls) -> bool:
    """Whether ``cls`` was made by :func:`config`."""
    return isinstance(cls, type) and getattr(cls, "__biasfree_config__", False)


@functools.cache
def bounds(cls) -> dict[str, tuple[tuple, tuple]]:
    """Field name -> ``(its Annotated metadata, its tuple elements' metadata)``, for the
    fields of config class ``cls`` that carry any."""
    hints = typing.get_type_hints(cls, include_extras=True)
    out = {}
    for f in dataclasses.fields(cls):
        hint = hints[f.name]
        outer = hint.__metadata__ if typing.get_origin(hint) is Annotated else ()
        args = typing.get_args(hint.__origin__ if outer else hint)
        inner = args[0].__metadata__ if args and typing.get_origin(args[0]) is Annotated else ()
        if outer or inner:
            out[f.name] = (outer, inner)
    return out


def _rule(c) -> str:
    """``> 0``, ``in [0, 1)``, ``even``: bound ``c`` as a message reads it."""
    if isinstance(c, Interval):
        lo = f"[{c.ge}" if c.ge is not None else f"({c.gt}" if c.gt is not None else "(-inf"
        hi = f"{c.le}]" if c.le is not None else f"{c.lt})" if c.lt is not None else "inf)"
        return f"in {lo}, {hi}"
    for kind, text in ((Gt, "> {}"), (Ge, ">= {}"), (Lt, "< {}"), (Le, "<= {}"),
                       (MultipleOf, "a multiple of {}"), (MinLen, "of length >= {}")):
        if isinstance(c, kind):
            return "even" if c == MultipleOf(2) else text.format(dataclasses.astuple(c)[0])
    return c.func.__name__.replace("_", " ")  # a Predicate: its function's name


def _why(meta) -> str:
    return "".join(f" ({m.documentation})" for m in meta if isinstance(m, Doc))


def _rules(meta) -> list[str]:
    return [_rule(c) for c in meta if not isinstance(c, Doc)]


def rules(cls) -> dict[str, str]:
    """Field name -> its bounds as ``biasfree show`` prints them (``"even (pair init splits
    the units in two)"``, ``"each in [0, 1], of length >= 2"``), for the fields of config
    class ``cls`` that carry any."""
    return {name: ", ".join([f"each {r}" for r in _rules(inner)] + _rules(outer)) + _why(outer + inner)
            for name, (outer, inner) in bounds(cls).items()}


_BOUND_KEYS = {"greater_than": "gt", "greater_than_equal": "ge", "less_than": "lt",
               "less_than_equal": "le", "multiple_of": "multiple_of", "too_short": "min_length"}
"""pydantic's error type -> the annotated_types attribute holding the bound it broke."""


def _message(cls, error: pydantic.ValidationError) -> str:
    """pydantic's errors as one line: ``width=3 must be even (pair init splits the units
    in two); scales[0]=-1.0 must be in (0, inf); field 'lr' expects float, got str 'a'``."""
    hints, known = typing.get_type_hints(cls), bounds(cls)
    errors = error.errors(include_url=False)
    items = {e["loc"][0] for e in errors if len(e["loc"]) > 1}
    out = []
    for e in errors:
        kind, loc, ctx, value = e["type"], e["loc"], e.get("ctx") or {}, e.get("input")
        if not loc:  # the class's own __post_init__
            out.append(str(ctx.get("error", e["msg"])))
            continue
        name = str(loc[0]) + "".join(f"[{i}]" for i in loc[1:])
        if kind == "too_short" and loc[0] in items:
            continue  # pydantic counts the elements that passed: the element's error says it
        outer, inner = known.get(loc[0], ((), ()))
        meta = inner if len(loc) > 1 else outer
        key = _BOUND_KEYS.get(kind)
        broken = [c for c in meta if (key is not None and getattr(c, key, None) == ctx.get(key))
                  or (kind == "predicate_failed" and isinstance(c, Predicate))]
        if broken:
            out.append(f"{name}={value!r} must be {_rule(broken[0])}{_why(outer + inner)}")
        elif kind == "finite_number":
            out.append(f"{name}={value!r} must be finite (no NaN or inf)")
        elif kind.endswith("_type") and loc[0] in hints:
            hint = hints[loc[0]]
            want = type_name(typing.get_args(hint)[0] if len(loc) > 1 else hint)
            if typing.get_origin(hint) is tuple and len(loc) == 1:
                want = f"a list such as [0.0, 0.5] ({want})"
            out.append(f"field {name!r} expects {want}, got {type(value).__name__} {value!r}")
        else:
            out.append(f"{name}: {e['msg']}")
    return "; ".join(out)


def type_name(hint) -> str:
    """``int``, ``float``, ``tuple[float, ...]``: a type annotation as a user reads it."""
    return hint.__name__ if isinstance(hint, type) else str(hint).replace("typing.", "")


def increasing(v) -> bool:
    """Strictly increasing: a ``Predicate`` for tuple fields (a sweep's axis)."""
    return bool(np.all(np.diff(np.asarray(v, dtype=float)) > 0))


def decreasing(v) -> bool:
    """Strictly decreasing: a ``Predicate`` for tuple fields (singular values)."""
    return increasing(-np.asarray(v, dtype=float))


PairWidth = Annotated[int, Ge(2), MultipleOf(2), doc("pair init splits the units in two")]
"""Hidden units of a net that a pair init (or a pair run) splits in two: even, >= 2."""
Slope = Annotated[float, Interval(ge=0, lt=1), doc("α = 1 is the linear twin itself")]
"""A leaky slope below 1."""
Alpha = Annotated[float, Interval(ge=0, le=1), doc("0 ReLU, 1 linear")]
"""A leaky slope of the family, 1 included."""
Positive = Annotated[float, Gt(0)]
"""A positive number."""
Positives = Annotated[tuple[Annotated[float, Interval(gt=0, lt=math.inf)], ...], MinLen(2),
                      Predicate(increasing)]
"""At least two increasing positive numbers: an init-scale or step-size axis."""


# ------------------------------------------------------------------ the registry's record


@dataclass(frozen=True)
class Experiment:
    """One claim, as the registry (``biasfree.claims.REGISTRY``) lists it: ``name`` (CLI
    name), ``claim`` (one sentence), ``config`` its :func:`config` class, ``presets``
    (name -> Config: ``tiny``, ``paper``), ``paper_claim`` (which of the paper's claims it
    tests, in one line), ``run(cfg, seed, progress) -> Result`` and ``figure(result) ->
    matplotlib Figure``. A claim package's record leaves ``run`` and ``figure`` out: the
    registry binds them to its ``run.py`` and ``figure.py`` (:func:`bind`), imported at the
    first call, so listing the claims and checking their configs loads no JAX. Run it
    with :func:`run_experiment`."""

    name: str
    claim: str
    config: type
    presets: Mapping[str, object] = field(default_factory=dict)
    paper_claim: str = ""
    run: Callable[..., Result] | None = None
    figure: Callable[[Result], object] | None = None

    def __post_init__(self):
        if not is_config(self.config):
            raise TypeError(f"{self.name}: config={self.config!r} is not a config class; make it with "
                            "@biasfree.claims.base.config (a frozen dataclass with bounds)")
        wrong = [k for k, v in self.presets.items() if not isinstance(v, self.config)]
        if wrong:
            raise TypeError(f"{self.name}: presets {wrong} are not {self.config.__qualname__} instances")


class _Deferred:
    """``package``'s ``module.py``'s function ``module``, imported at the first call."""

    def __init__(self, package: ModuleType, module: str):
        self.package, self.module = package, module
        self.__doc__ = f"``{package.__name__}.{module}.{module}``, imported at the first call."

    def __call__(self, *args, **kwargs):
        return getattr(importlib.import_module(f"{self.package.__name__}.{self.module}"), self.module)(
            *args, **kwargs)

    def __repr__(self) -> str:
        return f"<{self.package.__name__}.{self.module}.{self.module}>"

    def __reduce__(self):  # a module is pickled as its import (a sweep sends records to workers)
        return _deferred, (self.package.__name__, self.module)


def _deferred(package: str, module: str) -> _Deferred:
    return _Deferred(importlib.import_module(package), module)


def bind(package: ModuleType) -> Experiment:
    """A claim package's ``EXPERIMENT`` with ``run`` and ``figure`` (where it leaves them
    out) its ``run.py``'s ``run`` and ``figure.py``'s ``figure``."""
    exp = package.EXPERIMENT
    return replace(exp, run=exp.run or _Deferred(package, "run"),
                   figure=exp.figure or _Deferred(package, "figure"))


def run_experiment(exp: Experiment, cfg, seed: int = 0, progress: Progress = quiet, *,
                   preset: str = "custom", overrides: Mapping | None = None,
                   recorded: dict | None = None) -> Result:
    """Run ``exp`` from ``cfg`` (an ``exp.config``; a TypeError before any work otherwise)
    in float64 (:mod:`biasfree.core.precision`) and return its Result with NumPy arrays
    and what ``result.json`` stores: the effective config (``recorded``, computed here if
    not given), the ``preset`` it started from, the ``overrides`` recorded and the
    experiment's ``claim`` and ``paper_claim``. The one entry point for the CLI and sweeps
    (:mod:`biasfree.app.pipeline`). ``seed`` is an integer in ``[0, 2**31)``
    (:func:`biasfree._validate.seed`)."""
    from .._validate import seed as check_seed
    from ..core.precision import precise

    if not isinstance(cfg, exp.config):
        raise TypeError(f"run() takes a {exp.config.__module__}.{exp.config.__qualname__}, e.g. "
                        f"PRESETS['tiny'] or Config(...) (see `biasfree show`), got {cfg!r}")
    result = precise(exp.run)(cfg, check_seed(seed), progress)
    return replace(result, arrays={k: np.asarray(v) for k, v in result.arrays.items()},
                   config=config_dict(cfg) if recorded is None else recorded, preset=preset,
                   overrides=config_dict(dict(overrides or {})), claim=exp.claim,
                   paper_claim=exp.paper_claim)
