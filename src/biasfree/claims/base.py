"""What an experiment is and what it returns.

An experiment reproduces one claim of the paper. Its hyperparameters are a frozen,
validated ``Config`` dataclass (:func:`config`: each field's bounds are written in its
annotation and checked here, once) with named ``presets`` (``tiny``: seconds, ``paper``:
minutes); ``run(cfg, seed, progress)`` computes numbers and arrays (never plots or
files) and returns a :class:`Result` whose :class:`Check` entries compare simulation
with theory, each stating its claim in one sentence. Figures are drawn later from the
result (``biasfree.claims.figure``), and results are written by ``biasfree.store``: compute
once, plot later. Configs from presets, files and ``--set`` overrides are resolved in
``biasfree.claims.config``.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import math
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Annotated

import numpy as np
from annotated_types import Doc, Ge, Gt, Interval, Le, Lt, MinLen, MultipleOf, Predicate, doc

from ..results import Result, config_dict

SIZES = ("tiny", "paper")
"""The preset names every experiment defines (``--preset``)."""
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


# ------------------------------------------------------------------ configs


def config(cls):
    """``@dataclass(frozen=True)`` whose construction first checks every field's bounds,
    written in its annotation with `annotated_types <https://github.com/annotated-types>`_:
    ``lr: Annotated[float, Gt(0)]``, ``width: Annotated[int, Ge(2), MultipleOf(2)]``. On a
    tuple field ``Gt``, ``Ge``, ``Lt``, ``Le``, ``Interval`` and ``MultipleOf`` bound each
    element, ``MinLen`` the length and ``Predicate`` the whole tuple; ``doc("...")`` is the
    reason the message gives. One ``ValueError`` names every field out of bounds; rules that
    tie fields together stay in the class's own ``__post_init__``, which runs after."""
    own = cls.__dict__.get("__post_init__")

    def __post_init__(self):
        bad = [f"{name}={getattr(self, name)!r} {rule}" for name, rule in violations(self)]
        if bad:
            raise ValueError("; ".join(bad))
        if own is not None:
            own(self)

    cls.__post_init__ = __post_init__
    return dataclass(frozen=True)(cls)


@functools.cache
def bounds(cls) -> dict[str, tuple[tuple, bool]]:
    """Field name -> ``(its Annotated metadata, whether its type admits None)``, for the
    fields of config class ``cls`` that carry any."""
    hints = typing.get_type_hints(cls, include_extras=True)
    return {f.name: (h.__metadata__, type(None) in typing.get_args(h.__origin__))
            for f in dataclasses.fields(cls)
            if typing.get_origin(h := hints.get(f.name)) is Annotated}


def _rule(c) -> str:
    """``> 0``, ``in [0, 1)``, ``a multiple of 2``: bound ``c`` as a message reads it."""
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


def rules(cls) -> dict[str, str]:
    """Field name -> its bounds as ``biasfree show`` prints them (``"even (pair init splits
    the units in two)"``), for the fields of config class ``cls`` that carry any."""
    return {name: ", ".join(_rule(c) for c in meta if not isinstance(c, Doc)) + _why(meta)
            for name, (meta, _) in bounds(cls).items()}


def _holds(c, v) -> bool:
    """Whether value ``v`` keeps bound ``c`` (a tuple: each element, but for a length or a
    predicate); a value that cannot be compared (a string, None) does not."""
    try:
        if isinstance(c, MinLen):
            return len(v) >= c.min_length
        if isinstance(c, Predicate):
            return bool(c.func(v))
        if isinstance(v, tuple):
            return all(_holds(c, x) for x in v)
        if isinstance(c, Interval):
            return all(_holds(part, v) for part in c)
        ops = {Gt: lambda b: v > b, Ge: lambda b: v >= b, Lt: lambda b: v < b,
               Le: lambda b: v <= b, MultipleOf: lambda m: v % m == 0}
        return bool(ops[type(c)](dataclasses.astuple(c)[0]))
    except TypeError:
        return False


def violations(cfg) -> list[tuple[str, str]]:
    """``(field, "must be ...")`` for each bound of :func:`bounds` that ``cfg`` breaks."""
    out = []
    for name, (meta, optional) in bounds(type(cfg)).items():
        v = getattr(cfg, name)
        if v is None and optional:  # ``int | None`` left unset
            continue
        for c in meta:
            if not isinstance(c, Doc) and not _holds(c, v):
                each = "each " if isinstance(v, tuple) and not isinstance(c, MinLen | Predicate) else ""
                out.append((name, f"must {each}be {_rule(c)}{_why(meta)}"))
    return out


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
Positive = Annotated[float, Gt(0)]
Positives = Annotated[tuple[float, ...], Interval(gt=0, lt=math.inf), MinLen(2), Predicate(increasing)]
"""At least two increasing positive numbers: an init-scale or step-size axis."""


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


