"""Sphinx configuration: the pages of docs/ (MyST Markdown) and every module's docstrings.

``make docs`` builds it strict (``sphinx-build -W --keep-going -n``): a warning fails the
build, and with nitpicky mode so does a cross-reference (``:func:``, ``:class:``, ``:mod:``,
``:data:``) with no target.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import importlib.metadata
import inspect
import sys
import types
import typing

from sphinx.ext.autodoc.mock import mock
from sphinx.util import logging
from sphinx.util.inspect import stringify_signature
from sphinx.util.nodes import make_refnode

logger = logging.getLogger(__name__)

project = "biasfree"
author = "biasfree contributors"
copyright = "2025, biasfree contributors"
release = importlib.metadata.version("biasfree")
version = release

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
]

source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build"]

html_theme = "furo"
html_title = f"biasfree {release}"

# headings to level 3 get anchors, so a page may link to a section of another,
# ``[§2](theory.md#<the heading's slug>)``
myst_heading_anchors = 3

# -- autodoc ---------------------------------------------------------------------------------
# every object is documented once, in the module that defines it: a module's ``__all__`` may
# re-export names (app.sweep), and those are documented where they are defined
autodoc_default_options = {"members": True, "ignore-module-all": True}
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
# defaults as written in the source (``progress=_quiet``), not their repr
# (``<function _quiet at 0x...>``), which is no Python: Sphinx could not parse such a
# signature and would split it at every comma, breaking its type hints' links
autodoc_preserve_defaults = True

# Optional extras that autodoc must not need: a module imports them inside functions today,
# and a top-level import added later should not make the docs build need torch's 4 GB wheel.
autodoc_mock_imports = ["torch", "dask", "distributed", "pandas", "pyarrow", "sklearn"]

# -- strictness ------------------------------------------------------------------------------
nitpicky = True
# Names from outside biasfree. Their docs live elsewhere, and the build runs offline (no
# intersphinx inventories to download), so a reference to them has no target here. Only
# outside names are listed: a reference into biasfree with no target still fails the build.
# (Builtins such as int and None need no entry: Sphinx knows them.)
nitpick_ignore_regex = [
    # the standard library, as type hints render it
    ("py:.*", r"(builtins|collections|collections\.abc|typing|types|pathlib|dataclasses|math|enum"
              r"|tomllib|concurrent\.futures|contextlib|os|io|numbers|functools)(\..+)?"),
    # the array, autodiff, optimiser, solver and plotting libraries biasfree builds on
    ("py:.*", r"(numpy|np|jax|jnp|jaxlib|optax|diffrax|equinox|eqx|scipy|matplotlib|plt"
              r"|safetensors|typer|rich|pydantic|annotated_types)(\..+)?"),
    # jax.Array under the alias Array (core.layers, dynamics.trajectory), as signatures render it
    ("py:class", r"Array"),
    # optional extras (mocked above): PyTorch, Dask, pandas, pyarrow, scikit-learn
    ("py:.*", r"(torch|dask|distributed|pandas|pd|pyarrow|sklearn)(\..+)?"),
    # annotated_types' metadata in the configs' Annotated field hints (claims.base.config),
    # rendered bare in signatures: Ge(2), Interval(ge=0, le=1), doc("..."), ...
    ("py:class", r"(Ge|Gt|Le|Lt|Interval|MinLen|MaxLen|Len|MultipleOf|Predicate|Doc|doc)"),
]


# -- references through re-exports ------------------------------------------------------------
# biasfree re-exports names: ``biasfree.gd`` is ``biasfree.dynamics.gd.gd`` (the lazy top level),
# ``biasfree.theory.leaky_loss`` is ``biasfree.theory.leaky.leaky_loss``, and a docstring may
# name something its module imported (``:func:`whiten``` in a module that did
# ``from .moments import whiten``). Sphinx knows each object only under the name it is
# documented at, so such a reference is looked up the way Python would: the name is imported
# (absolute, or in the namespace of the module whose docstring holds it), and the reference
# goes to where that object is documented. A name that Python cannot find, or whose object
# is documented nowhere, stays unresolved and fails the build.

_MISSING = object()


def _import_path(path: str):
    """The object at dotted ``path`` (a module, then attributes), or ``_MISSING``."""
    parts = path.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        except Exception:  # a module that fails to import: leave the reference unresolved
            return _MISSING
        for attr in parts[i:]:
            try:
                obj = getattr(obj, attr)
            except Exception:
                return _MISSING
        return obj
    return _MISSING


def _lookup(target: str, modname: str | None, classname: str | None):
    """The object ``target`` names in the docstring of ``modname`` (class ``classname``)."""
    relative = target.startswith(".")
    name = target.lstrip(".")
    candidates = []
    if modname:
        scopes = [modname]
        if relative:  # ``.base.bind`` in biasfree.claims: biasfree.claims.base.bind, then up
            parts = modname.split(".")
            scopes += [".".join(parts[:i]) for i in range(len(parts) - 1, 0, -1)]
        for scope in scopes:
            if classname:
                candidates.append(f"{scope}.{classname}.{name}")
            candidates.append(f"{scope}.{name}")
    if not relative:
        candidates.append(name)
    for path in candidates:
        obj = _import_path(path)
        if obj is not _MISSING:
            return obj
    return _MISSING


def _documented_name(env, obj, last: str) -> str | None:
    """Where ``obj`` (named ``last`` in the reference) is documented (a key of the Python
    domain's objects), or None."""
    objects = env.get_domain("py").objects
    if isinstance(obj, types.ModuleType):
        name = obj.__name__
        return name if name in objects else None
    module, qualname = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
    if isinstance(module, str) and isinstance(qualname, str):
        name = f"{module}.{qualname}"
        return name if name in objects else None
    # data (a constant, a type alias): the one documented object that *is* it, under the same
    # name for numbers and strings (equal values may be one object: identity alone says nothing)
    value = obj is None or isinstance(obj, int | float | complex | str | bytes | bool)
    found = [name for name, entry in objects.items()
             if entry.objtype in ("data", "attribute") and (not value or name.rsplit(".", 1)[-1] == last)
             and _import_path(name) is obj]
    return found[0] if len(found) == 1 else None


PUBLIC = ("biasfree", "biasfree.data", "biasfree.nets", "biasfree.theory", "biasfree.expressivity",
          "biasfree.models", "biasfree.experiments", "biasfree.precision")
"""The modules whose names docs/reference/public.md documents as a user calls them
(``biasfree.train``, ``biasfree.data.make_dataset``): a reference goes there first."""


def _public_name(env, obj, last: str) -> str | None:
    """``obj``'s entry on the public page (``biasfree.train``, ``biasfree.data.whiten``), or None."""
    objects = env.get_domain("py").objects
    for module in PUBLIC:
        name = f"{module}.{last}"
        if name in objects and _import_path(name) is obj:
            return name
    return None


def _resolve_reexport(app, env, node, contnode):
    if node.get("refdomain") != "py":
        return None
    obj = _lookup(node["reftarget"], node.get("py:module"), node.get("py:class"))
    if obj is _MISSING:
        return None
    last = node["reftarget"].rsplit(".", 1)[-1]
    name = _public_name(env, obj, last) or _documented_name(env, obj, last)
    if name is None:
        return None
    entry = env.get_domain("py").objects[name]
    return make_refnode(app.builder, node["refdoc"], entry.docname, entry.node_id, contnode, name)


# -- type hints under TYPE_CHECKING -------------------------------------------------------------
# A module may import a name for its hints only (``if TYPE_CHECKING: from .sweep_spec import
# Point``, to avoid an import cycle). autodoc evaluates hints at run time, where that name is
# missing, and renders a bare ``Point`` that Sphinx cannot place (two classes are named Point).
# Before autodoc reads a signature, the module's guarded imports are run in its namespace (the
# optional extras mocked, as autodoc imports modules), so the hint evaluates to the class it
# means. An import that fails here is skipped and the hint stays a string.

_GUARDED_DONE: set[str] = set()


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _run_guarded_imports(app, obj, bound_method) -> None:
    modname = getattr(obj, "__module__", None)
    if not isinstance(modname, str) or not modname.startswith("biasfree") or modname in _GUARDED_DONE:
        return
    _GUARDED_DONE.add(modname)
    module = sys.modules.get(modname)
    try:
        tree = ast.parse(inspect.getsource(module))
    except (TypeError, OSError):
        return
    for node in tree.body:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for stmt in node.body:
                if isinstance(stmt, ast.Import | ast.ImportFrom):
                    code = compile(ast.Module(body=[stmt], type_ignores=[]), module.__file__, "exec")
                    try:
                        with mock(app.config.autodoc_mock_imports):  # as autodoc imports
                            exec(code, module.__dict__)
                    except ImportError:
                        pass


# -- dataclass fields with a default factory ------------------------------------------------------
# A dataclass's generated ``__init__`` shows such a field's default as ``<factory>``, which is
# no Python (the signature would not parse; see autodoc_preserve_defaults): the factory's call
# is shown instead, ``grid: dict = dict()`` (``...`` for a lambda).


# -- Typer's parameter metadata ------------------------------------------------------------------
# The command-line functions annotate parameters with Typer's ``Annotated[Path,
# typer.Option(help=...)]``, whose metadata renders as ``<typer.models.OptionInfo object at
# 0x...>``: no Python, so the signature would not parse. Such a signature is shown with its
# hints' Annotated metadata dropped (``out: Path = Path("results")``); docs/cli.md documents
# the options themselves.


def _plain_hints(obj, signature):
    try:
        sig = inspect.signature(obj)
        hints = typing.get_type_hints(obj, include_extras=False)
    except Exception:
        return signature
    params = [p.replace(annotation=hints.get(p.name, p.annotation)) for p in sig.parameters.values()]
    return stringify_signature(sig.replace(parameters=params), show_return_annotation=False)


def _parseable_signature(app, what, name, obj, options, signature, return_annotation):
    if not signature:
        return None
    if " object at 0x" in signature:
        signature = _plain_hints(obj, signature)
    if "<factory>" in signature and dataclasses.is_dataclass(obj):
        signature = _factory_defaults(obj, signature)
    return signature, return_annotation


def _factory_defaults(obj, signature):
    for f in dataclasses.fields(obj):
        if f.init and f.default_factory is not dataclasses.MISSING:
            name = getattr(f.default_factory, "__qualname__", "")
            call = f"{name}()" if name.replace(".", "").isidentifier() else "..."  # a lambda: ...
            signature = signature.replace("<factory>", call, 1)
    return signature


# -- every module has a reference page -------------------------------------------------------------
# docs/reference/*.md list the modules by hand (one heading each). A module added to the package
# and to no page would be missing from the site without a word; this makes it a warning, which
# the strict build turns into a failure that names the module.


def _check_every_module_documented(app, env) -> None:
    import pkgutil

    import biasfree

    documented = {name for name, entry in env.get_domain("py").objects.items() if entry.objtype == "module"}
    found = {"biasfree"} | {
        m.name for m in pkgutil.walk_packages(biasfree.__path__, "biasfree.")
    }
    for name in sorted(found - documented):
        logger.warning("module %s is on no page of docs/reference/: add an automodule for it", name)


# -- a docstring shown under its public name ------------------------------------------------------
# docs/reference/public.md shows ``biasfree.data.load_data``, whose docstring was written in
# ``biasfree.core.real_data`` and names its neighbours there (``:func:`whiten```). Its references
# are read in its own module: the docstring is wrapped in ``py:currentmodule`` of the module that
# defines the object, then of the module it is shown under, so a name is looked up where its
# author wrote it (and a reference that is wrong there still fails the build).


def _own_module_for_references(app, what, name, obj, options, lines) -> None:
    own = getattr(obj, "__module__", None)
    if what == "module" or not isinstance(own, str) or not own.startswith("biasfree") or not lines:
        return
    qualname = getattr(obj, "__qualname__", None)
    shown = name[: -len(qualname) - 1] if isinstance(qualname, str) and name.endswith(f".{qualname}") \
        else name.rsplit(".", 1)[0]
    if shown == own or not shown.startswith("biasfree"):
        return
    lines[:0] = [f".. py:currentmodule:: {own}", ""]
    lines.extend(["", f".. py:currentmodule:: {shown}"])


# -- every public name has its entry on the public page ----------------------------------------------
# docs/reference/public.md documents each name of ``biasfree.__all__`` as ``biasfree.NAME`` and each
# curated submodule's ``__all__`` as ``biasfree.SUB.NAME`` (or, for a name the top level also
# exports, as ``biasfree.NAME``), as equinox and optax present theirs. A name added to an
# ``__all__`` and to no entry is a warning, which the strict build turns into a failure.


def _check_every_public_name_documented(app, env) -> None:
    import biasfree

    objects = env.get_domain("py").objects
    for module in PUBLIC:
        mod = importlib.import_module(module)
        for name in mod.__all__:
            obj = getattr(mod, name)
            if isinstance(obj, types.ModuleType) or name == "__version__":
                continue
            entries = [f"{module}.{name}", *([f"biasfree.{name}"] if name in biasfree.__all__ else [])]
            if not any(e in objects for e in entries):
                logger.warning("public name %s.%s has no entry on docs/reference/public.md", module, name)


def setup(app):
    app.connect("env-check-consistency", _check_every_module_documented)
    app.connect("env-check-consistency", _check_every_public_name_documented)
    app.connect("autodoc-process-docstring", _own_module_for_references)
    app.connect("missing-reference", _resolve_reexport)
    app.connect("autodoc-process-signature", _parseable_signature)
    app.connect("autodoc-before-process-signature", _run_guarded_imports)
