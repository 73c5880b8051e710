"""An experiment's effective config: a named preset, then a TOML file, then ``--set``.

:func:`resolve_config` starts from one of an experiment's ``presets`` (``tiny``, ``paper``) of
its frozen ``Config`` (:func:`biasfree.claims.base.config`) and applies overrides: TOML
literals from ``--set`` (:func:`parse_set`) or a TOML file (:func:`read_config_file`).
Every mistake raises :class:`ConfigError` naming the problem and the fix; an unknown field
lists the valid ones with their types and defaults.
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
import typing
from collections.abc import Iterable, Mapping
from pathlib import Path

from ..results import config_dict
from .base import Experiment, rules, type_name

DEFAULT_PRESET = "paper"


class ConfigError(ValueError):
    """Bad input for a config: unknown preset or field, a value of the wrong type, a
    value the config's validation rejects, or an unreadable config file."""


# ------------------------------------------------------------------ fields


def field_default(f: dataclasses.Field):
    """``f``'s default (its factory's value), or ``dataclasses.MISSING``."""
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return dataclasses.MISSING


def field_lines(config_cls) -> tuple[tuple[str, str, str], ...]:
    """``(name, type, default)`` as text for each field: ``("width", "int", "200")``."""
    hints = typing.get_type_hints(config_cls)
    return tuple((f.name, type_name(hints[f.name]),
                  "(required)" if (d := field_default(f)) is dataclasses.MISSING else repr(d))
                 for f in dataclasses.fields(config_cls))


# ------------------------------------------------------------------ parsing


def parse_set(item: str) -> tuple[str, object]:
    """``"FIELD=VALUE"`` (or ``"NAME.FIELD=VALUE"``, for experiment NAME only) ->
    ``(key, value)`` with VALUE parsed as a TOML literal: ``40``, ``0.01``, ``[0.0, 1.0]``,
    ``"sine"``, ``true``."""
    key, eq, text = item.partition("=")
    key, text = key.strip(), text.strip()
    if not eq or not key or not text:
        raise ConfigError(f"--set expects FIELD=VALUE (e.g. --set width=200), got {item!r}")
    try:
        value = tomllib.loads("x = " + text)["x"]
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(
            f"--set {key}: {text!r} is not a TOML value ({e}); write numbers as 40 or 0.01, lists "
            "as [0.0, 0.5, 1.0] (quote the whole argument in the shell), strings as \"text\"") from None
    if isinstance(value, dict):
        raise ConfigError(f"--set {key}: a table is not a field value; give a number, a list, "
                          "a string or a boolean")
    return key, value


def parse_sets(items: Iterable[str] | None) -> dict[str, object]:
    """Several ``--set`` items in order (a later one wins)."""
    return dict(parse_set(s) for s in (items or ()))


def read_config_file(path) -> dict:
    """A TOML config file as a dict.

    Top-level ``FIELD = VALUE`` pairs apply to every experiment run; a table
    ``[NAME]`` holds fields for experiment NAME only; an optional top-level
    ``preset = "tiny"`` picks the preset (``--preset`` on the command line wins)::

        preset = "tiny"
        width = 40

        [leaky-collapse]
        alphas = [0.0, 0.5, 1.0]
    """
    return read_toml(path, "config file", ConfigError)


def read_toml(path, what: str, error: type[Exception]) -> dict:
    """The TOML file at ``path`` as a dict; an unreadable file or bad TOML raises ``error``
    naming ``what`` it is (``"config file"``, ``"sweep spec"``), the path and the cause."""
    if not isinstance(path, str | os.PathLike):
        raise TypeError(f"{what}: path={path!r} must be a path to a TOML file")
    path = Path(path)
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except OSError as e:
        raise error(f"cannot read {what} {path}: {e.strerror or e}") from None
    except UnicodeDecodeError as e:  # TOML is UTF-8
        raise error(f"{what} {path} is not UTF-8 text (byte {e.start}: {e.reason}); save it as UTF-8") \
            from None
    except tomllib.TOMLDecodeError as e:
        raise error(f"{what} {path} is not valid TOML: {e}") from None


def overrides_for(name: str, *sources: Mapping[str, object]) -> dict[str, object]:
    """The overrides that apply to experiment ``name``, from config-file dicts and
    ``--set`` dicts in order of precedence (later wins): plain ``FIELD`` keys, ``NAME.FIELD``
    keys and ``[NAME]`` tables (take a file's ``preset`` key out first)."""
    out: dict[str, object] = {}
    for src in sources:
        for key, value in src.items():
            if isinstance(value, dict):  # a [NAME] table
                if key == name:
                    out.update(value)
                continue
            scope, dot, fld = key.rpartition(".")
            if not dot:
                out[key] = value
            elif scope == name:
                out[fld] = value
    return out


def unknown_scopes(names: Iterable[str], *sources: Mapping[str, object]) -> list[str]:
    """Names used as ``[NAME]`` tables or ``NAME.FIELD`` keys that are not among
    ``names`` (most likely a typo)."""
    names = set(names)
    scopes = {key if isinstance(value, dict) else key.rpartition(".")[0]
              for src in sources for key, value in src.items()}
    return sorted(s for s in scopes if s and s not in names)


# ------------------------------------------------------------------ resolving


def _tuples(value):
    """TOML's lists as tuples (a config's sequences are tuples), nested ones too."""
    return tuple(map(_tuples, value)) if isinstance(value, list) else value


def resolve_config(exp: Experiment, preset: str | None = None,
                   overrides: Mapping[str, object] | None = None):
    """``exp``'s ``preset`` config (default ``paper``) with ``overrides`` (field -> parsed
    value) applied: lists become tuples, then each value is checked and coerced once, by the
    config class itself (:func:`~.base.config`: an int becomes a float where the field is one,
    a bool is never a number). Raises :class:`ConfigError` on an unknown preset or field (listing the
    valid ones), a value of the wrong type or out of bounds, or one the config's own
    ``__post_init__`` rejects."""
    preset = preset or DEFAULT_PRESET
    if preset not in exp.presets:
        raise ConfigError(f"unknown preset {preset!r} for {exp.name}; choose one of "
                          f"{', '.join(exp.presets) or '(none defined)'}")
    base = exp.presets[preset]
    overrides = dict(overrides or {})
    unknown = [k for k in overrides if k not in {f.name for f in dataclasses.fields(exp.config)}]
    if unknown:
        rows = "\n".join(f"  {n}: {t} = {d}" for n, t, d in field_lines(exp.config))
        raise ConfigError(f"{exp.name} has no field {', '.join(map(repr, unknown))}. Valid fields "
                          f"(name: type = default):\n{rows}\n(see `biasfree show {exp.name}`)")
    if not overrides:
        return base
    try:
        return dataclasses.replace(base, **{k: _tuples(v) for k, v in overrides.items()})
    except (ValueError, TypeError) as e:
        raise ConfigError(f"invalid config for {exp.name}: {e}") from None


@dataclasses.dataclass(frozen=True)
class Planned:
    """One experiment ready to run: its resolved ``config``, the ``preset`` it started
    from, the ``overrides`` applied and ``recorded``, the config as ``result.json`` stores
    it (:func:`~biasfree.results.config_dict`, computed once: it is also the key a saved
    result is reused by). ``overrides`` are recorded as the config holds them (coerced)."""

    experiment: Experiment
    config: object
    preset: str
    overrides: dict
    recorded: dict


def planned(exp: Experiment, preset: str | None = None,
            overrides: Mapping[str, object] | None = None) -> Planned:
    """``exp`` resolved (:func:`resolve_config`) and ready to run."""
    preset = preset or DEFAULT_PRESET
    cfg = resolve_config(exp, preset, overrides)
    recorded = config_dict(cfg)
    return Planned(exp, cfg, preset, {k: recorded[k] for k in overrides or {}}, recorded)


def plan(experiments: Iterable[Experiment], preset: str | None = None,
         file_doc: Mapping[str, object] | None = None,
         sets: Mapping[str, object] | None = None, known: Iterable[str] | None = None
         ) -> list[Planned]:
    """Resolve every experiment's config before anything runs, so bad input fails at once
    (configs are light: no experiment code runs).

    ``preset``: the command line's ``--preset`` (wins over the file's ``preset`` key;
    default ``paper``); ``file_doc``: a config file (:func:`read_config_file`);
    ``sets``: ``--set`` overrides (:func:`parse_sets`), applied after the file's;
    ``known``: every experiment name (see :func:`check_scopes`)."""
    experiments = list(experiments)
    file_doc = dict(file_doc or {})
    file_preset = file_doc.pop("preset", None)
    if file_preset is not None and not isinstance(file_preset, str):
        raise ConfigError(f"config file: preset must be a name such as \"tiny\", got {file_preset!r}")
    preset = preset or file_preset or DEFAULT_PRESET
    sets = dict(sets or {})
    names = [e.name for e in experiments]
    check_scopes(names, known if known is not None else names, file_doc, sets)
    if len(experiments) > 1:  # an unscoped FIELD reaches every experiment run
        unscoped = [k for k in sets if "." not in k] + [k for k, v in file_doc.items()
                                                         if not isinstance(v, dict)]
        for k in unscoped:
            lacking = [e.name for e in experiments
                       if e.config is None or k not in {f.name for f in dataclasses.fields(e.config)}]
            if lacking:
                raise ConfigError(f"{k!r} is not a field of {', '.join(lacking)}, and a FIELD=VALUE without "
                                  "a NAME. applies to every experiment run; scope it to one: "
                                  "NAME.FIELD=VALUE (--set) or a [NAME] table")
    return [planned(exp, preset, overrides_for(exp.name, file_doc, sets)) for exp in experiments]


def check_scopes(names: Iterable[str], known: Iterable[str], file_doc: Mapping[str, object],
                 sets: Mapping[str, object]) -> None:
    """Refuse overrides aimed at the wrong experiment: a ``[NAME]`` table or ``NAME.FIELD``
    key whose NAME is not among ``known`` (a typo), and a ``--set NAME.FIELD=VALUE`` (in
    ``sets``) for a known experiment that is not among ``names``, the ones being run. (A
    config file's tables for other experiments are allowed: one file may serve several
    runs.)"""
    names, known = list(names), list(known)
    stray = unknown_scopes(known, file_doc, sets)
    if stray:
        raise ConfigError(f"overrides for unknown experiment(s) {', '.join(stray)} (known: "
                          f"{', '.join(known)}); check the [NAME] tables and NAME.FIELD keys")
    idle = unknown_scopes(names, sets)
    if idle:
        keys = [k for k in sets if k.rpartition(".")[0] in idle]
        raise ConfigError(f"--set {', '.join(keys)}: {', '.join(idle)} is not being run (running: "
                          f"{', '.join(names)}); add it to the names to run or drop the --set")


def field_rows(exp: Experiment) -> list[tuple[str, str, object, dict[str, object], str]]:
    """``(name, type, Config() default, {preset: value}, bounds)`` for each field of ``exp``
    (bounds as :func:`~.base.rules` writes them; ``""`` for a field without any)."""
    hints, bounds = typing.get_type_hints(exp.config), rules(exp.config)
    return [(f.name, type_name(hints[f.name]), field_default(f),
             {p: getattr(c, f.name) for p, c in exp.presets.items()}, bounds.get(f.name, ""))
            for f in dataclasses.fields(exp.config)]
