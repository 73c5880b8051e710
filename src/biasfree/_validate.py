"""Checks at the boundary: pure functions that validate one argument and say the fix.

Every public function checks its inputs where they enter, once, with these helpers;
the numerical code behind them may then assume clean input. Each checker returns the
value converted (a float ``np.ndarray``, a ``float`` or an ``int``) or raises
``TypeError`` (wrong kind of object: a string, a bool, a dict, a non-integer width) or
``ValueError`` (right kind, wrong value: NaN, negative, wrong shape). Messages start
with the argument's name and say what to pass instead, e.g.
``"a0=-0.1 must be >= 0: a mode strength is a product of weights' norms"``.

A public function may be called on traced values (inside the caller's ``jit``, ``grad`` or
``vmap``), where only shapes are known: the array and number checks here then check the
shape alone and return the tracer as it is. Callers never test for tracers themselves,
and the unchecked internals that the public functions call (and that run under ``jit``)
hold no checks at all.

Why not jaxtyping + beartype (decided for issue 13, measured with jaxtyping 0.3.11 and
beartype 0.23.1): their messages name the parameter and the expected shape but never the
fix; they check shapes and dtypes only, while most bad inputs the fuzz found are values
(NaN, negative times) and preconditions (balance, whitening, symmetry); and beartype would
be a runtime dependency for every user. Revisit if many public functions come to have
shape as their only precondition.
"""

from __future__ import annotations

import contextlib
import numbers
import os
import sys
from pathlib import Path

import numpy as np

SEED_MAX = 2**31
"""Seeds are integers in ``[0, SEED_MAX)``: every experiment accepts this range (JAX
``PRNGKey`` takes uint32; NumPy ``default_rng`` any non-negative int)."""


def _is_bool(x) -> bool:
    return isinstance(x, bool | np.bool_) or (isinstance(x, np.ndarray) and x.dtype == bool)


def _tracer(x) -> bool:
    """True if ``x`` is a JAX tracer (JAX not imported: it cannot be one, and stays unloaded)."""
    jax = sys.modules.get("jax")
    return jax is not None and isinstance(x, jax.core.Tracer)


def _numeric(name: str, x, what: str = "a number or an array of numbers") -> np.ndarray:
    """``x`` as a float array, or ``TypeError`` for strings, bools, None, objects, complex."""
    if x is None or isinstance(x, str | bytes | dict | set) or _is_bool(x):
        raise TypeError(f"{name}={x!r} must be {what}, not {type(x).__name__}")
    try:
        a = np.asarray(x)
    except (ValueError, TypeError) as e:  # ragged lists
        raise TypeError(f"{name} must be {what} (a rectangular array); got {type(x).__name__}: {e}") \
            from None
    if a.dtype == bool or a.dtype.kind not in "iuf":
        kind = "complex" if a.dtype.kind == "c" else "bool" if a.dtype == bool else str(a.dtype)
        raise TypeError(f"{name} must be {what} (real, float or int), got dtype {kind}")
    return a.astype(float)


def array_args(*names: str):
    """Decorator: the arguments ``names`` of the decorated function may be array-likes.
    A list or tuple of numbers (nested: ``X.tolist()``) becomes a float64 NumPy array
    before the call (a ragged one, or one of strings, is a ``TypeError`` naming the
    argument); NumPy and JAX arrays, tracers and ``None`` pass as they are, so their dtype
    and the caller's ``jit`` are kept. Apply it outside :func:`biasfree.core.precision.precise`
    so the conversion comes first and the precision cast then applies."""
    import functools
    import inspect

    def decorate(fn):
        params = list(inspect.signature(fn).parameters)
        where = {n: params.index(n) for n in names}

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            args = list(args)
            for n, i in where.items():
                if i < len(args) and isinstance(args[i], list | tuple):
                    args[i] = _numeric(n, args[i])
                elif isinstance(kwargs.get(n), list | tuple):
                    kwargs[n] = _numeric(n, kwargs[n])
            return fn(*args, **kwargs)

        return wrapper

    return decorate


def finite_array(name: str, x, *, ndim: int | tuple[int, ...] | None = None,
                 shape: tuple[int | None, ...] | None = None, nonempty: bool = True) -> np.ndarray:
    """``x`` as a finite float array; ``ndim`` the allowed number(s) of axes, ``shape`` the
    required shape (``None`` entries free), ``nonempty`` refuse zero-size arrays. A traced
    ``x`` gets the shape checks only and is returned as it is."""
    is_traced = _tracer(x)
    a = x if is_traced else _numeric(name, x, "an array of real numbers")
    if ndim is not None:
        allowed = (ndim,) if isinstance(ndim, int) else tuple(ndim)
        if a.ndim not in allowed:
            want = " or ".join(f"{k}-D" for k in allowed)
            raise ValueError(f"{name} must be {want}, got shape {a.shape}")
    if shape is not None and (a.ndim != len(shape)
                              or any(s not in (None, n) for s, n in zip(shape, a.shape, strict=True))):
        want = "(" + ", ".join("·" if s is None else str(s) for s in shape) + ")"
        raise ValueError(f"{name} must have shape {want}, got {a.shape}")
    if nonempty and a.size == 0:
        raise ValueError(f"{name} is empty (shape {a.shape}): pass at least one value")
    if not is_traced and not np.all(np.isfinite(a)):
        raise ValueError(f"{name} contains NaN or infinite values: pass finite numbers")
    return a


def real(name: str, x, *, scalar: bool = False):
    """``x`` as finite float(s): a ``float`` if ``scalar``, else a float array (a traced ``x``:
    its shape checked, returned as it is)."""
    if _tracer(x):
        if scalar and np.ndim(x) != 0:
            raise TypeError(f"{name} must be a single number, got an array of shape {np.shape(x)}")
        return x
    a = _numeric(name, x, "a real number" if scalar else "a real number or an array of them")
    if scalar and a.ndim != 0:
        raise TypeError(f"{name} must be a single number, got an array of shape {a.shape}")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name}={x!r} must be finite (no NaN or inf)")
    return float(a) if scalar else a


def _bound(name, x, scalar, ok, rule, why):
    a = real(name, x, scalar=scalar)
    if not _tracer(a) and not np.all(ok(np.asarray(a))):
        shown = x if np.ndim(x) == 0 else f"{np.asarray(x, float).ravel()[:4]}..."
        raise ValueError(f"{name}={shown!r} must be {rule}" + (f": {why}" if why else ""))
    return a


def positive(name: str, x, *, scalar: bool = False, why: str = ""):
    """``x`` finite and > 0 (``why``: the reason, appended to the message)."""
    return _bound(name, x, scalar, lambda a: a > 0, "> 0", why)


def nonnegative(name: str, x, *, scalar: bool = False, why: str = ""):
    """``x`` finite and >= 0."""
    return _bound(name, x, scalar, lambda a: a >= 0, ">= 0", why)


def times(name: str, t, *, ndim: int | tuple[int, ...] | None = None) -> np.ndarray:
    """Gradient-flow times: finite, >= 0, at least one; returned as a float array."""
    a = finite_array(name, t, ndim=ndim)
    if np.any(a < 0):
        raise ValueError(f"{name} has negative times (min {a.min():g}): gradient-flow time "
                         "t = η k starts at 0")
    return a


def integer(name: str, x, minimum: int | None = None, maximum: int | None = None) -> int:
    """``x`` an integer (``int``, NumPy int, or an integer-valued float such as 4.0) in
    ``[minimum, maximum]``; bools and fractional values are refused."""
    if _is_bool(x) or isinstance(x, str | bytes) or not isinstance(x, numbers.Real):
        raise TypeError(f"{name}={x!r} must be an integer, not {type(x).__name__}")
    if not isinstance(x, numbers.Integral) and (not np.isfinite(float(x)) or float(x) != int(x)):
        raise TypeError(f"{name}={x!r} must be a whole number (got a fraction); pass e.g. "
                        f"{int(x) if np.isfinite(float(x)) else 1}")
    n = int(x)
    if minimum is not None and n < minimum:
        raise ValueError(f"{name}={n} must be >= {minimum}")
    if maximum is not None and n > maximum:
        raise ValueError(f"{name}={n} must be <= {maximum}")
    return n


def slope(x, name: str = "alpha", *, array_ok: bool = False):
    """A leaky slope α in [0, 1] (0 ReLU, 1 linear): a ``float``, or with ``array_ok`` a float
    array of slopes (an ensemble). The one check of α everywhere. Traced values (inside a
    caller's ``jit``/``vmap``) pass unchecked: only their shape is known there."""
    if _tracer(x):
        return x
    a = _numeric(name, x, "a leaky slope α in [0, 1] (a number)")
    if a.ndim and not array_ok:
        raise TypeError(f"{name} must be a single slope α in [0, 1], got an array of shape {a.shape}")
    if a.size == 0:
        raise ValueError(f"{name} is empty: give at least one slope α in [0, 1]")
    if not np.all(np.isfinite(a)) or np.any(a < 0.0) or np.any(a > 1.0):
        raise ValueError(f"{name}={x!r} is outside [0, 1]; use 0 for ReLU, 1 for a linear network, "
                         "or a value in between for leaky ReLU")
    return float(a) if a.ndim == 0 else a


def layer_widths(x) -> tuple[int, ...]:
    """Layer sizes ``(d, n_1, ..., p)``: a sequence of at least 3 whole numbers >= 1
    (4.0 is 4; 4.5, True and "4" are refused, never rounded)."""
    if isinstance(x, str | bytes) or not isinstance(x, tuple | list | np.ndarray):
        raise TypeError(f"widths={x!r} must be a tuple of layer sizes (d, n_1, ..., p), "
                        f"not {type(x).__name__}")
    w = tuple(integer(f"widths[{i}]", n, 1) for i, n in enumerate(x))
    if len(w) < 3:
        raise ValueError(f"widths={x!r}: give (d, n_1, ..., p) with at least one hidden layer "
                         "(depth L >= 2) and every size >= 1")
    return w


OPTIMISER = ("an optax.GradientTransformation, e.g. optax.adam(1e-3), or a factory of one from "
             "the learning-rate scale ρ, e.g. lambda rho: optax.adam(1e-3 * rho)")
"""What an optimiser argument may be, as :func:`callable_` says it."""


def optimiser(name: str, opt):
    """``opt`` an optax ``GradientTransformation`` (it has ``init`` and ``update``) or a factory
    ``rho -> GradientTransformation``: a callable of one argument ρ. An optax constructor left
    uncalled (``optax.adam``) is callable with one argument too, but that argument is its
    learning rate, so the factory would train at ``learning_rate = ρ = 1``; it is refused, as is
    any callable that cannot take ρ alone. A constructor is told by what it is, not by calling
    it: a function of optax's own modules (``optax.adam``, ``inject_hyperparams(optax.adam)``,
    a ``functools.partial`` of one), or one whose first parameter is ``learning_rate``."""
    import functools
    import inspect

    if hasattr(opt, "init") and hasattr(opt, "update"):
        return opt
    callable_(name, opt, OPTIMISER)
    base = opt
    while isinstance(base, functools.partial):
        base = base.func
    label = getattr(base, "__name__", None) or type(base).__name__
    try:
        sig = inspect.signature(opt)
    except (TypeError, ValueError):  # a builtin without a signature: called as a factory
        sig = None
    first = next(iter(sig.parameters), None) if sig is not None else None
    module = getattr(base, "__module__", None) or ""
    of_optax = module == "optax" or module.startswith("optax.")
    if of_optax or first == "learning_rate":
        shown = f"optax.{label}" if of_optax else label
        eps = ", eps=1e-8 * rho" if sig is not None and "eps" in sig.parameters else ""
        raise TypeError(f"{name}={shown} is an optimiser's constructor, not an optimiser (as a factory of ρ "
                        f"it would train at learning rate ρ = 1): call it, e.g. {shown}(1e-3), or pass a "
                        f"factory of ρ, e.g. lambda rho: {shown}(1e-3{eps})")
    if sig is not None:
        try:
            sig.bind(1.0)
        except TypeError:
            raise TypeError(f"{name}={label}{sig} cannot be called with the one argument ρ of a factory: "
                            f"pass {OPTIMISER}") from None
    return opt


def callable_(name: str, f, what: str = "a function of the inputs X (N, d) -> (N,) or (N, p)"):
    """``f`` callable, else ``TypeError`` saying it must be ``what``."""
    if not callable(f):
        raise TypeError(f"{name}={f!r} must be {what}, not {type(f).__name__}")
    return f


def flag(name: str, x) -> bool:
    """A ``bool`` (or NumPy bool); 0/1, strings and None are refused."""
    if not isinstance(x, bool | np.bool_):
        raise TypeError(f"{name}={x!r} must be True or False, not {type(x).__name__}")
    return bool(x)


def seed(x, name: str = "seed") -> int:
    """A random seed: an integer in ``[0, 2**31)`` (:data:`SEED_MAX`), the range every
    experiment accepts."""
    return integer(name, x, 0, SEED_MAX - 1)


def choice(name: str, x, options) -> str:
    """``x`` one of ``options`` (strings)."""
    if not isinstance(x, str) or x not in options:
        raise ValueError(f"{name}={x!r}: choose one of {', '.join(map(str, options))}")
    return x


def traced(*trees) -> bool:
    """True if a leaf of ``trees`` is a JAX tracer (inside a caller's ``jit``/``vmap`` only
    shapes are known, so value checks are skipped)."""
    import jax

    return any(isinstance(x, jax.core.Tracer) for x in jax.tree_util.tree_leaves(trees))


def key(x):
    """A JAX PRNG key: ``jax.random.PRNGKey(seed)`` (uint32 (2,)) or ``jax.random.key(seed)``."""
    import jax

    if traced(x):
        return x
    arr = isinstance(x, jax.Array | np.ndarray)
    if not (arr and (x.ndim == 0 if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key)
                     else x.dtype == np.uint32 and x.shape == (2,))):
        raise TypeError(f"key={x!r} must be a JAX random key: pass jax.random.PRNGKey(seed) "
                        "(an integer seed is not a key)")
    return x


def data(X, Y, *, y_1d: bool = True):
    """Inputs ``X`` (N, d) and targets ``Y`` (N, p): finite, non-empty, the same number of
    rows; a 1-D Y is read as (N, 1) if ``y_1d``, else refused. Returned as float arrays
    (traced arguments get the shape checks only and are returned as they are)."""
    if not traced(X, Y):
        X = _numeric("X", X, "an array of inputs (N, d)")
        Y = _numeric("Y", Y, "an array of targets (N, p)")
        if Y.ndim == 1 and y_1d:
            Y = Y[:, None]
    xs, ys = np.shape(X), np.shape(Y)
    if len(xs) != 2:
        raise ValueError(f"inputs X must have shape (N, d), got {xs}; reshape 1-D x to (N, 1)")
    if len(ys) != 2:
        raise ValueError(f"targets Y must have shape (N, p), got {ys}; use Y[:, None] for p = 1")
    if 0 in (xs[0], xs[1], ys[1]):
        raise ValueError(f"X, Y: the data set is empty (X {xs}, Y {ys}): "
                         "give at least one row, one input and one target column")
    if xs[0] != ys[0]:
        raise ValueError(f"X has {xs[0]} rows but Y has {ys[0]}: one target per input")
    if not traced(X, Y):
        for name, A in (("X", X), ("Y", Y)):
            bad = ~np.isfinite(A)
            if bad.any():
                raise ValueError(f"{name} holds {int(bad.sum())} NaN/inf values (first in row "
                                 f"{int(np.argwhere(bad)[0][0])}); drop or impute those rows "
                                 "before training")
    return X, Y


def labels(name: str, Y, what: str = "the logistic loss",
           alternative: str = " or use loss='mse' for real-valued targets") -> None:
    """Refuse targets ``Y`` that are not all ±1, which ``what`` needs (``alternative``: the
    other way out, appended to the message); traced values pass."""
    if Y is None or traced(Y):
        return
    Ya = np.asarray(Y)
    bad = Ya[np.abs(Ya) != 1.0]
    if bad.size:
        raise ValueError(f"{name}: {what} needs labels y = ±1 (each -1 or +1), but {name} holds e.g. "
                         f"{bad.ravel()[:3].tolist()}; pass sign labels (np.sign({name}), or 2y - 1 "
                         "for {0, 1} labels)"
                         + alternative)


def _path(name: str, path) -> Path:
    if not isinstance(path, str | os.PathLike):
        raise TypeError(f"{name}={path!r} must be a path")
    return Path(path)


def writable_folder(name: str, path) -> Path:
    """A folder that exists or can be created, and into which a file can be written:
    created (with its parents) and probed with a temporary file now, so a bad path is
    refused before any computation. The folders created for the probe are removed again,
    so a command refused later leaves nothing behind; whatever writes there creates them."""
    path = _path(name, path)
    if path.exists() and not path.is_dir():
        raise ValueError(f"{name}={str(path)!r} is a file, not a folder: choose a folder path")
    created, error = [], None
    try:
        created = [p for p in (*reversed(path.parents), path) if not p.exists()]
        path.mkdir(parents=True, exist_ok=True)
        probe = path / f".biasfree-write-test-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as e:
        error = e
    for p in reversed(created):
        with contextlib.suppress(OSError):
            p.rmdir()
    if error is not None:
        raise ValueError(f"{name}={str(path)!r} is not a writable folder ({error.strerror or error}): "
                         "choose a folder you can create and write to") from None
    return path


def existing_file(name: str, path) -> Path:
    """A path to a readable file that exists (a model, a spec, a config), else ``ValueError``."""
    path = _path(name, path)
    if not path.exists():
        raise ValueError(f"{name}={str(path)!r} does not exist: check the path")
    if not path.is_file():
        raise ValueError(f"{name}={str(path)!r} is not a file: give the path of a file")
    if not os.access(path, os.R_OK):
        raise ValueError(f"{name}={str(path)!r} is not readable (permission denied)")
    return path


def npz_archive(path: Path) -> Path:
    """``path`` an ``.npz`` (a zip of ``.npy`` arrays): NumPy reads any other file as a pickle
    and, with pickles refused, says so, which misleads (nothing is ever unpickled)."""
    import zipfile

    if not zipfile.is_zipfile(path):
        raise ValueError(f"{path} is not an .npz archive (a zip of .npy arrays): save one with "
                         "numpy.savez, or check the file's name and format")
    return path


def results_folder(name: str, path) -> Path:
    """An existing folder of results that can be written to (a report goes in it)."""
    path = _path(name, path)
    if not path.is_dir():
        what = "is a file, not a folder" if path.exists() else "does not exist"
        raise ValueError(f"{name}={str(path)!r} {what}, so it holds no results: give the folder "
                         "`biasfree run --out` wrote")
    return writable_folder(name, path)
