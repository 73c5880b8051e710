"""Checks at the boundary: pure functions that validate one argument and say the fix.

Every public function checks its inputs where they enter, once, with these helpers;
the numerical code behind them may then assume clean input. Each checker returns the
value converted (a float ``np.ndarray``, a ``float`` or an ``int``) or raises
``TypeError`` (wrong kind of object: a string, a bool, a dict, a non-integer width) or
``ValueError`` (right kind, wrong value: NaN, negative, wrong shape). Messages start
with the argument's name and say what to pass instead, e.g.
``"a0=-0.1 must be >= 0: a mode strength is a product of weights' norms"``.

:func:`mirror_violation` measures how far a data set is from the multiset symmetry
``{(x, y)} = {(-x, -y)}`` that the exact leaky <-> linear results rest on.

Why not jaxtyping + beartype (decided for issue 13; measured here with jaxtyping 0.3.11,
beartype 0.23.1, on a (10, 3) / (10, 2) / float signature):

- *Error messages.* For a row mismatch beartype raises ``TypeCheckError: ... parameter
  'Y'. Actual value: f64[9,2](numpy). Expected type: Float[ndarray, 'N p']`` plus a dump
  of all arguments; :func:`data` says ``X has 10 rows but Y has 9: one target per
  input``. The annotation names the parameter but never the fix ("whiten X", "build a
  balanced init with aligned_init"), so the hand-written message is needed anyway.
- *What it checks.* Shapes and dtypes only: ``t=nan`` passed the annotated function;
  integer arrays (which we accept as floats) were refused. Most of the bad inputs the
  fuzz found are values (NaN, negative times, ``a0 < 0``, ``y_power < Σ s²``) and
  preconditions (balance, whitening, mirror symmetry): value checks are needed anyway.
- *Cost.* Per call it is a wash (58 µs annotated vs 73 µs for these checks, against
  calls that take milliseconds), but it adds beartype as a runtime dependency for every
  user (jaxtyping itself already comes with equinox/diffrax), and ``import jaxtyping,
  beartype`` took 0.9 s cold.

So: hand-written, shared checkers here, applied at each public entry. Revisit if the
engine grows many array-in/array-out public functions whose only precondition is shape.
"""

from __future__ import annotations

import numbers
import os
from pathlib import Path

import numpy as np

SEED_MAX = 2**31
"""Seeds are integers in ``[0, SEED_MAX)``: every experiment accepts this range (JAX
``PRNGKey`` takes uint32; NumPy ``default_rng`` any non-negative int)."""


def _is_bool(x) -> bool:
    return isinstance(x, bool | np.bool_) or (isinstance(x, np.ndarray) and x.dtype == bool)


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
    required shape (``None`` entries free), ``nonempty`` refuse zero-size arrays."""
    a = _numeric(name, x, "an array of real numbers")
    if ndim is not None:
        allowed = (ndim,) if isinstance(ndim, int) else tuple(ndim)
        if a.ndim not in allowed:
            want = " or ".join(f"{k}-D" for k in allowed)
            raise ValueError(f"{name} must be {want}, got shape {a.shape}")
    if shape is not None:
        if a.ndim != len(shape) or any(s is not None and s != n for s, n in zip(shape, a.shape,
                                                                                 strict=True)):
            want = "(" + ", ".join("·" if s is None else str(s) for s in shape) + ")"
            raise ValueError(f"{name} must have shape {want}, got {a.shape}")
    if nonempty and a.size == 0:
        raise ValueError(f"{name} is empty (shape {a.shape}): pass at least one value")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name} contains NaN or infinite values: pass finite numbers")
    return a


def real(name: str, x, *, scalar: bool = False):
    """``x`` as finite float(s): a ``float`` if ``scalar``, else a float array."""
    a = _numeric(name, x, "a real number" if scalar else "a real number or an array of them")
    if scalar and a.ndim != 0:
        raise TypeError(f"{name} must be a single number, got an array of shape {a.shape}")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name}={x!r} must be finite (no NaN or inf)")
    return float(a) if scalar else a


def _bound(name, x, scalar, ok, rule, why):
    a = real(name, x, scalar=scalar)
    if not np.all(ok(np.asarray(a))):
        shown = x if np.ndim(x) == 0 else f"{np.asarray(x, float).ravel()[:4]}..."
        raise ValueError(f"{name}={shown!r} must be {rule}" + (f": {why}" if why else ""))
    return a


def positive(name: str, x, *, scalar: bool = False, why: str = ""):
    """``x`` finite and > 0 (``why``: the reason, appended to the message)."""
    return _bound(name, x, scalar, lambda a: a > 0, "> 0", why)


def nonnegative(name: str, x, *, scalar: bool = False, why: str = ""):
    """``x`` finite and >= 0."""
    return _bound(name, x, scalar, lambda a: a >= 0, ">= 0", why)


def unit_interval(name: str, x, *, scalar: bool = False, why: str = ""):
    """``x`` finite and in [0, 1]."""
    return _bound(name, x, scalar, lambda a: (a >= 0) & (a <= 1), "in [0, 1]", why)


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
    if not np.isfinite(float(x)) or float(x) != int(x):
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
    array of slopes (an ensemble). Traced values (inside a caller's ``jit``/``vmap``) pass
    unchecked: only their shape is known there."""
    import jax

    if isinstance(x, jax.core.Tracer):
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


def layer_widths(x, name: str = "widths", *, min_len: int = 3) -> tuple[int, ...]:
    """Layer sizes ``(d, n_1, ..., p)``: a sequence of at least ``min_len`` whole numbers >= 1
    (4.0 is 4; 4.5, True and "4" are refused, never rounded)."""
    if isinstance(x, str | bytes) or not isinstance(x, tuple | list | np.ndarray):
        raise TypeError(f"{name}={x!r} must be a tuple of layer sizes (d, n_1, ..., p), "
                        f"not {type(x).__name__}")
    w = tuple(integer(f"{name}[{i}]", n, 1) for i, n in enumerate(x))
    if len(w) < min_len:
        raise ValueError(f"{name}={x!r}: give (d, n_1, ..., p) with at least one hidden layer "
                         "(depth L >= 2) and every size >= 1")
    return w


def callable_(name: str, f):
    """``f`` callable, else ``TypeError``."""
    if not callable(f):
        raise TypeError(f"{name}={f!r} must be a function of the inputs X (N, d) -> (N,) or (N, p), "
                        f"not {type(f).__name__}")
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


def params(name: str, p, *, depth: int | None = None, bias_free: bool = False,
           d: int | None = None, p_out: int | None = None) -> list[np.ndarray]:
    """A network ``p`` (a sequence of layers with ``.W`` (n_out, n_in) and ``.b``): checks
    each ``W`` is a finite 2-D array, consecutive layers chain, and optionally the
    ``depth``, no biases, the input dimension ``d`` and the output dimension ``p_out``.
    Returns the weight matrices as float arrays."""
    if not isinstance(p, tuple | list) or not p or not all(hasattr(layer, "W") for layer in p):
        raise TypeError(f"{name} must be a non-empty tuple of biasfree Layer(W, b) (e.g. from "
                        f"biasfree.init_gaussian or biasfree.from_arrays), got {type(p).__name__}")
    Ws = [finite_array(f"{name}[{i}].W", layer.W, ndim=2) for i, layer in enumerate(p)]
    for i in range(1, len(Ws)):
        if Ws[i].shape[1] != Ws[i - 1].shape[0]:
            raise ValueError(f"{name}: layer {i} takes {Ws[i].shape[1]} inputs but layer {i - 1} "
                             f"has {Ws[i - 1].shape[0]} outputs; consecutive widths must agree")
    if depth is not None and len(Ws) != depth:
        raise ValueError(f"{name} has {len(Ws)} layers; this needs exactly {depth}")
    if bias_free and any(getattr(layer, "b", None) is not None for layer in p):
        raise ValueError(f"{name} has biases; this result holds for bias-free nets only (drop b)")
    if d is not None and Ws[0].shape[1] != d:
        raise ValueError(f"{name} takes inputs of dimension {Ws[0].shape[1]} but the data have "
                         f"d = {d}; build the net for the data")
    if p_out is not None and Ws[-1].shape[0] != p_out:
        raise ValueError(f"{name} has {Ws[-1].shape[0]} outputs but the targets have p = {p_out}")
    return Ws


def data(X, Y, *, x_name: str = "X", y_name: str = "Y") -> tuple[np.ndarray, np.ndarray]:
    """Inputs ``X`` (N, d) and targets ``Y`` (N, p) (a 1-D Y is read as (N, 1)): finite,
    non-empty, with the same number of rows."""
    X = finite_array(x_name, X, ndim=2)
    Y = finite_array(y_name, Y, ndim=(1, 2))
    if Y.ndim == 1:
        Y = Y[:, None]
    if X.shape[0] != Y.shape[0]:
        raise ValueError(f"{x_name} has {X.shape[0]} rows but {y_name} has {Y.shape[0]}: one target "
                         "per input")
    return X, Y


def mirror_violation(X, Y=None) -> float:
    """How far the points ``z_n = (x_n, y_n)`` are from a mirror-symmetric multiset.

    Returns ``v = max_n ||z_n + z_π(n)||`` for a one-to-one pairing ``π`` of the points with
    mirrors (Euclidean norm over the stacked row ``[x, y]``): ``v = 0`` exactly when every
    point's mirror ``-z`` is present as often as the point itself (a duplicated point
    without a duplicated mirror is a violation, which a nearest-mirror test misses), and
    ``v`` is at least the largest distance from a point to its nearest mirror. The pairing
    is the one sorting gives (exact for symmetric data), improved by an optimal
    assignment (``scipy.optimize.linear_sum_assignment``) when that is not tight and
    N <= 1500. ``X`` (N, d), ``Y`` (N, p), (N,) or None. Pure; no tolerance: compare ``v``
    with the data's scale yourself (``v / max_n ||z_n||``).
    """
    from scipy.optimize import linear_sum_assignment
    from scipy.spatial import cKDTree

    if Y is None:
        Z = finite_array("X", X, ndim=2)
    else:
        Xa, Ya = data(X, Y)
        Z = np.hstack([Xa, Ya])
    order = np.lexsort(Z.T[::-1])
    mirror = np.lexsort((-Z).T[::-1])
    ub = float(np.max(np.linalg.norm(Z[order] + Z[mirror], axis=1)))
    if ub == 0.0:
        return 0.0
    lb = float(np.max(cKDTree(Z).query(-Z, k=1)[0]))
    if ub <= lb or Z.shape[0] > 1500:
        return ub
    D = np.linalg.norm(Z[:, None, :] + Z[None, :, :], axis=-1)
    rows, cols = linear_sum_assignment(D**2)
    return float(min(ub, np.max(D[rows, cols])))


def writable_folder(name: str, path) -> Path:
    """A folder that exists or can be created, and into which a file can be written:
    created (with its parents) and probed with a temporary file now, so a bad path is
    refused before any computation. Folders created for the probe are removed again if
    it fails."""
    if isinstance(path, str | os.PathLike):
        path = Path(path)
    else:
        raise TypeError(f"{name}={path!r} must be a path")
    if path.exists() and not path.is_dir():
        raise ValueError(f"{name}={str(path)!r} is a file, not a folder: choose a folder path")
    created = []
    probe = None
    try:
        for parent in (*reversed(path.parents), path):
            if not parent.exists():
                parent.mkdir()
                created.append(parent)
        probe = path / f".biasfree-write-test-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as e:
        for p in reversed(created):
            try:
                p.rmdir()
            except OSError:
                pass
        reason = e.strerror or str(e)
        raise ValueError(f"{name}={str(path)!r} is not a writable folder ({reason}): choose a folder "
                         "you can create and write to") from None
    return path


def existing_file(name: str, path) -> Path:
    """A path to a readable file that exists (a model, a spec, a config), else ``ValueError``."""
    if not isinstance(path, str | os.PathLike):
        raise TypeError(f"{name}={path!r} must be a path")
    path = Path(path)
    if not path.exists():
        raise ValueError(f"{name}={str(path)!r} does not exist: check the path")
    if not path.is_file():
        raise ValueError(f"{name}={str(path)!r} is not a file: give the path of a file")
    if not os.access(path, os.R_OK):
        raise ValueError(f"{name}={str(path)!r} is not readable (permission denied)")
    return path


def results_folder(name: str, path) -> Path:
    """An existing folder of results that can be written to (a report goes in it)."""
    if not isinstance(path, str | os.PathLike):
        raise TypeError(f"{name}={path!r} must be a path")
    path = Path(path)
    if not path.is_dir():
        what = "is a file, not a folder" if path.exists() else "does not exist"
        raise ValueError(f"{name}={str(path)!r} {what}, so it holds no results: give the folder "
                         "`biasfree run --out` wrote")
    return writable_folder(name, path)
