"""Sphinx configuration: the pages of docs/ (MyST Markdown) and every module's docstrings.

``make docs`` builds it strict (``sphinx-build -W --keep-going -n``): a warning fails the
build, and with nitpicky mode so does a cross-reference (``:func:``, ``:class:``, ``:mod:``,
``:data:``) with no target.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import types

from sphinx.util.nodes import make_refnode

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

nitpicky = True

# -- autodoc ---------------------------------------------------------------------------------
# every object is documented once, in the module that defines it: a module's ``__all__`` may
# re-export names (app.sweep), and those are documented where they are defined
autodoc_default_options = {"members": True, "ignore-module-all": True}
autodoc_member_order = "bysource"
autodoc_typehints = "signature"

# Optional extras that autodoc must not need: a module imports them inside functions today,
# and a top-level import added later should not make the docs build need torch's 4 GB wheel.
autodoc_mock_imports = ["torch", "dask", "distributed", "pandas", "pyarrow", "sklearn"]

# -- strictness ------------------------------------------------------------------------------
nitpicky = True
# Names from outside biasfree. Their docs live elsewhere, and the build runs offline (no
# intersphinx inventories to download), so a reference to them has no target here. Only
# outside names are listed: a reference into biasfree with no target still fails the build.
nitpick_ignore_regex = [
    # the standard library and builtins, as type hints render them
    ("py:.*", r"(builtins|collections|collections\.abc|typing|types|pathlib|dataclasses|math|enum"
              r"|tomllib|concurrent\.futures|contextlib|os|io|numbers|functools)(\..+)?"),
    ("py:.*", r"(int|float|complex|str|bytes|bool|None|NoneType|object|type|tuple|list|dict|set"
              r"|frozenset|slice|range|Ellipsis|Exception|ValueError|TypeError|RuntimeError"
              r"|UserWarning|Path|Callable|Mapping|Sequence|Iterable|Iterator|Any|Literal|Annotated)"),
    # the array, autodiff, optimiser, solver and plotting libraries biasfree builds on
    ("py:.*", r"(numpy|np|jax|jnp|jaxlib|optax|diffrax|equinox|eqx|scipy|matplotlib|plt"
              r"|safetensors|typer|rich|pydantic|annotated_types)(\..+)?"),
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


def _documented_name(env, obj) -> str | None:
    """Where ``obj`` is documented (a key of the Python domain's objects), or None."""
    objects = env.get_domain("py").objects
    if isinstance(obj, types.ModuleType):
        name = obj.__name__
        return name if name in objects else None
    module, qualname = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
    if isinstance(module, str) and isinstance(qualname, str):
        name = f"{module}.{qualname}"
        return name if name in objects else None
    # data (a constant, a type alias): the one documented object that *is* it. Numbers and
    # strings are left out: equal values may be one object, so identity says nothing
    if obj is None or isinstance(obj, int | float | complex | str | bytes | bool):
        return None
    found = [name for name, entry in objects.items()
             if entry.objtype in ("data", "attribute") and _import_path(name) is obj]
    return found[0] if len(found) == 1 else None


def _resolve_reexport(app, env, node, contnode):
    if node.get("refdomain") != "py":
        return None
    obj = _lookup(node["reftarget"], node.get("py:module"), node.get("py:class"))
    if obj is _MISSING:
        return None
    name = _documented_name(env, obj)
    if name is None:
        return None
    entry = env.get_domain("py").objects[name]
    return make_refnode(app.builder, node["refdoc"], entry.docname, entry.node_id, contnode, name)


def setup(app):
    app.connect("missing-reference", _resolve_reexport)
