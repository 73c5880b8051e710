"""The route a value takes through the package, measured (issue 47, "walk target"): every call of
a package function one of whose arguments holds the value (the value itself, or a record, tuple,
mapping or closure that carries it: the config under its later names, ``given``, ``cfg``, a
``Run``, a ``Plan``, the loop's ``Spec``), in the order the calls happen, profiled with
``sys.setprofile``; and the modules that route enters, with each return to a module it had left.

A method of the value itself (``cfg.gd``, ``cfg.label``, ``cfg.recorded()``), and every call it
makes, is the value read where it stands, not passed on: no step of the route (``Call.own``,
kept to be shown).
"""

from __future__ import annotations

import dataclasses
import inspect
import sys
import types
from pathlib import Path

DEPTH = 4
"""How deep :func:`holds` looks inside records for the value: Predicted → Plan → Run → TrainConfig
→ its optimiser is four steps."""


@dataclasses.dataclass(frozen=True)
class Call:
    """One call on the route: ``module`` (path under biasfree/), ``function``, the ``names`` the
    value has there (the arguments that hold it) and ``own`` (a method of the value itself)."""

    module: str
    function: str
    names: tuple[str, ...]
    own: bool = False

    def __str__(self):
        return f"{self.module}:{self.function}({', '.join(self.names)})"


def holds(x, value, depth: int = DEPTH) -> bool:
    """Whether ``x`` is ``value`` or carries it: a dataclass's or named tuple's field, an item of a
    tuple, list or dict, or a closure's cell, at most ``depth`` levels down."""
    if _same(x, value):
        return True
    if depth == 0 or x is None or isinstance(x, (str, bytes, int, float, bool, type)):
        return False
    if dataclasses.is_dataclass(x):
        parts = [getattr(x, f.name, None) for f in dataclasses.fields(x)]
    elif isinstance(x, (tuple, list)):
        parts = list(x) if len(x) <= 64 else []
    elif isinstance(x, dict):
        parts = list(x.values()) if len(x) <= 64 else []
    elif isinstance(x, (types.FunctionType, types.MethodType)):
        fn = getattr(x, "__func__", x)
        parts = [c.cell_contents for c in (fn.__closure__ or ()) if _filled(c)]
        if isinstance(x, types.MethodType):
            parts.append(x.__self__)
    else:
        return False
    return any(holds(p, value, depth - 1) for p in parts)


def _same(x, value) -> bool:
    """``x`` is ``value``, or a copy of a tuple whose items are the same objects (an optax
    optimiser is a named tuple of its two functions: a ``tree_map`` over the arguments, as
    :func:`~biasfree.core.precision.precise` makes, builds it anew around them)."""
    if x is value:
        return True
    return (isinstance(value, tuple) and type(x) is type(value) and len(x) == len(value)
            and all(a is b for a, b in zip(x, value, strict=True)))


def _filled(cell) -> bool:
    try:
        cell.cell_contents  # noqa: B018 (an empty cell raises)
    except ValueError:
        return False
    return True


def _arguments(frame) -> list[tuple[str, object]]:
    """The arguments a call was given (the first locals at its call event)."""
    code = frame.f_code
    n = code.co_argcount + code.co_kwonlyargcount
    n += bool(code.co_flags & inspect.CO_VARARGS) + bool(code.co_flags & inspect.CO_VARKEYWORDS)
    f_locals = frame.f_locals
    return [(name, f_locals[name]) for name in code.co_varnames[:n] if name in f_locals]


def route(call, value, start, src: str | None = None) -> tuple[list[Call], object]:
    """``(the calls, call()'s result)``: every call of a function under the folder ``src`` (None:
    the biasfree package imported) that holds ``value`` in an argument (:func:`holds`), from the
    first call of the function ``start`` on, in order."""
    if src is None:
        import biasfree

        src = str(Path(biasfree.__file__).parent)
    codes = {start.__code__}
    seen: list[Call] = []
    on = [False]

    inside: list = []  # the frames of the value's own methods now running (their calls are its own too)

    def profile(frame, event, arg):
        if event == "return" and inside and frame is inside[-1]:
            inside.pop()
        if event != "call":
            return
        code = frame.f_code
        if not on[0]:
            on[0] = code in codes
            if not on[0]:
                return
        if not code.co_filename.startswith(src):
            return
        args = _arguments(frame)
        names = tuple(n for n, v in args if holds(v, value))
        if not names:
            return
        own = bool(inside) or (args[0][0] == "self" and names == ("self",))
        if own:
            inside.append(frame)
        seen.append(Call(str(Path(code.co_filename).relative_to(src)), code.co_name, names, own))

    sys.setprofile(profile)
    try:
        out = call()
    finally:
        sys.setprofile(None)
    return seen, out


def until(calls: list[Call], module: str) -> list[Call]:
    """The calls up to and including the first into ``module`` (the route's end)."""
    for i, c in enumerate(calls):
        if c.module == module:
            return calls[:i + 1]
    raise AssertionError(f"the route never reaches {module}: {[str(c) for c in calls]}")


def stays(modules: list[str]) -> tuple[list[str], list[str]]:
    """``(the modules in the order entered, one per stay; the returns: each module entered again
    after the route had left it for another)``."""
    order: list[str] = []
    for m in modules:
        if not order or order[-1] != m:
            order.append(m)
    returns = [m for i, m in enumerate(order) if m in order[:i]]
    return order, returns
