"""Precision as an explicit choice: float64 by default, float32 on request.

Importing biasfree changes no global JAX setting. Instead every public entry point
(training, data, nets, theory, experiments) is wrapped by :func:`precise`, which runs
it under JAX's scoped switch ``jax.enable_x64(...)``:

- ``"float64"`` (the default): arrays created and functions compiled inside the call
  are double precision, whatever ``jax_enable_x64`` says outside. The identities the
  tests check hold to round-off (unit round-off ε = 1.1e-16) only here.
- ``"float32"``: single precision (ε = 6.0e-8), about twice as fast for large sweeps
  where agreement to 1e-6 is plenty.

Choose per call with the keyword ``precision=`` of any wrapped function
(``bf.gd(params, data, cfg, precision="float32")``), or for a block of calls with the
context manager ``with bf.use_precision("float32"): ...``. Floating-point array arguments
(JAX or NumPy, also inside tuples, ``Params`` and ``Dataset``) are cast to the chosen
precision on the way in. Wrapped functions called from inside another inherit its
precision; called on traced values (inside the caller's ``jit``/``grad``), they run as
traced and return tracers.

Results are NumPy arrays of the chosen dtype (:func:`to_numpy`, at the outermost call):
with ``jax_enable_x64`` off in the caller's program, JAX arithmetic on a float64 JAX
array would be done in float32, while NumPy arithmetic on the result keeps every digit.
"""

from __future__ import annotations

import contextlib
import contextvars
import copy
import dataclasses
import functools

import jax
import numpy as np

from .._validate import traced

PRECISIONS = ("float64", "float32")
"""The precisions a public function runs at, the default first."""

_default = contextvars.ContextVar("biasfree_precision", default="float64")
_active = contextvars.ContextVar("biasfree_active_precision", default=None)


def check_precision(name) -> str:
    """Return ``name`` if it is one of :data:`PRECISIONS`, else raise ``ValueError``."""
    if name not in PRECISIONS:
        raise ValueError(f"precision={name!r}: choose 'float64' (the default) or 'float32'")
    return name


def current_precision() -> str:
    """The precision biasfree computes in right now: that of the enclosing wrapped call,
    else the one set by :func:`use_precision`, else ``"float64"``."""
    return _active.get() or _default.get()


@contextlib.contextmanager
def use_precision(name: str):
    """Run the biasfree calls in this block at ``name`` ("float64" or "float32")
    unless a call passes its own ``precision=``. JAX's global settings are untouched."""
    token = _default.set(check_precision(name))
    try:
        yield
    finally:
        _default.reset(token)


def _cast(x, dtype: np.dtype):
    if isinstance(x, jax.Array | np.ndarray) and np.issubdtype(x.dtype, np.floating) and x.dtype != dtype:
        return x.astype(dtype)
    return x


def to_numpy(out):
    """``out`` with every JAX array (in tuples, dicts, registered pytrees such as
    Trajectory and Dataset, and the fields of result dataclasses) replaced by a NumPy
    array of the same dtype (why: module doc). Random keys stay JAX."""

    def leaf(a):
        if isinstance(a, jax.Array):
            return a if jax.dtypes.issubdtype(a.dtype, jax.dtypes.prng_key) else np.asarray(a)
        if dataclasses.is_dataclass(a) and not isinstance(a, type):
            new = {f.name: to_numpy(getattr(a, f.name)) for f in dataclasses.fields(a)}
            if all(v is getattr(a, k) for k, v in new.items()):
                return a
            out = copy.copy(a)
            for k, v in new.items():
                object.__setattr__(out, k, v)  # frozen dataclasses too
            return out
        return a

    return jax.tree_util.tree_map(leaf, out)


def precise(fn):
    """Decorator: run ``fn`` at a chosen precision (module doc). Adds the keyword
    ``precision`` ("float64" or "float32"; default: inherited, else float64). The
    outermost call returns NumPy arrays (:func:`to_numpy`); nested and traced calls
    return what ``fn`` returns."""

    @functools.wraps(fn)
    def wrapper(*args, precision: str | None = None, **kwargs):
        active = _active.get()
        if precision is None:
            if active is not None:  # inside another wrapped call: same precision
                return fn(*args, **kwargs)
            precision = _default.get()
        else:
            check_precision(precision)
        if traced(args, kwargs):  # inside a caller's jit: run as traced
            return fn(*args, **kwargs)
        dtype = np.dtype(precision)
        token = _active.set(precision)
        try:
            with jax.enable_x64(precision == "float64"):  # casts to float64 need it too
                args, kwargs = jax.tree_util.tree_map(lambda x: _cast(x, dtype), (args, kwargs))
                return to_numpy(fn(*args, **kwargs))
        finally:
            _active.reset(token)

    wrapper.__doc__ = (fn.__doc__ or "") + (
        "\n\n    Runs at ``precision`` \"float64\" (default) or \"float32\" "
        "(:mod:`biasfree.core.precision`).")
    return wrapper


def eps(name: str | None = None) -> float:
    """Unit round-off of ``name`` (default: the current precision): 2^-53 or 2^-24."""
    return float(np.finfo(np.dtype(check_precision(name or current_precision()))).eps) / 2


def gamma(k: int, eps: float = float(np.finfo(np.float64).eps)) -> float:
    """``γ_k = k ε / (1 − k ε)``: the relative error bound of a computed sum of k products,
    whatever its order (Higham, *Accuracy and Stability*, §3.1), with ``eps`` = ε the
    dtype's machine epsilon (default float64's, 2.2e-16: twice the unit round-off
    :func:`eps`, so the bound is conservative by 2)."""
    return k * eps / (1 - k * eps)


def chain_length(params, n_points: int = 0) -> int:
    """``k`` for :func:`gamma` in one gradient (or Jacobian, HVP) of a layered net: the
    longest chain of sums an entry goes through, bounded by the forward sums (each layer's
    fan-in, + 1 with a bias), the backward ones (each fan-out, + 1), the sum over
    ``n_points`` data points and 4 for the residual, the 1/N, the ½ and the weight decay."""
    k = n_points + 4
    for layer in params:
        n_out, n_in = np.shape(layer.W)[-2:]
        k += n_in + n_out + 2 * (getattr(layer, "b", None) is not None)
    return k
