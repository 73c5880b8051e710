"""The shared harness of the fuzz suites (test_fuzz_theory, test_fuzz_api,
test_fuzz_engine): a bad argument must be refused with a TypeError or ValueError that
biasfree raised itself and whose message names the argument."""

import traceback

import pytest


def name(fn) -> str:
    """A readable test id for ``fn``."""
    return getattr(fn, "__qualname__", getattr(fn, "__name__", repr(fn)))


def raised_inside_biasfree(exc: BaseException) -> bool:
    """The innermost frame that raised ``exc`` belongs to the biasfree package."""
    frames = traceback.extract_tb(exc.__traceback__)
    return bool(frames) and "/biasfree/" in frames[-1].filename.replace("\\", "/")


def assert_refused(fn, base: dict, arg: str, bad, *, data_arg: bool = False) -> None:
    """``fn(**base)`` with ``arg`` replaced by ``bad`` raises a clear error from biasfree,
    naming ``arg`` (or, for a data argument, ``X`` or ``Y``)."""
    with pytest.raises((TypeError, ValueError)) as info:
        fn(**{**base, arg: bad})
    exc = info.value
    assert raised_inside_biasfree(exc), f"raw library error for {arg}={bad!r}: {exc!r}"
    msg = str(exc)
    named = arg in msg or (data_arg and ("X" in msg or "Y" in msg))
    assert named, f"message does not name {arg!r}: {exc}"


def as_lists(value, kind=list):
    """``value`` with every NumPy/JAX array argument turned into nested Python ``kind``
    (``list`` or ``tuple``), inside tuples/lists of arguments too (``data=(X, Y)``); other
    values (keys, nets, configs, callables) are kept."""
    import numpy as np

    if isinstance(value, np.ndarray) or type(value).__module__.startswith("jax"):
        return _retype(np.asarray(value).tolist(), kind)
    if type(value) in (tuple, list):  # plain containers only (not a net's NamedTuple layers)
        items = [as_lists(v, kind) for v in value]
        return type(value)(items) if any(a is not b for a, b in zip(items, value, strict=True)) else value
    return value


def has_arrays(base: dict) -> bool:
    """Whether some argument of ``base`` (other than a key) is, or holds, a NumPy/JAX array:
    the calls :func:`assert_takes_lists` can vary."""
    return any(as_lists(v) is not v for k, v in base.items() if k != "key")


def _retype(nested, kind):
    return kind(_retype(v, kind) for v in nested) if isinstance(nested, list) else nested


def _leaves(out):
    import dataclasses

    import jax
    import numpy as np

    if dataclasses.is_dataclass(out) and not isinstance(out, type):
        out = [getattr(out, f.name) for f in dataclasses.fields(out)]
    leaves = jax.tree_util.tree_leaves(out)
    return [np.asarray(x) for x in leaves if isinstance(x, np.ndarray | np.generic | float | int)
            or type(x).__module__.startswith("jax")]


def assert_takes_lists(fn, base: dict) -> None:
    """``fn`` called with its array arguments as nested lists, then as nested tuples, returns
    what it returns for the arrays: converted by biasfree's validators (the same float64
    values, so the same code path: equal results), never an AttributeError from inside."""
    import numpy as np

    expected = _leaves(fn(**base))
    for kind in (list, tuple):
        args = {k: v if k == "key" else as_lists(v, kind) for k, v in base.items()}  # a key is no data
        got = _leaves(fn(**args))
        assert len(got) == len(expected), f"{kind.__name__} inputs changed the result's structure"
        for a, b in zip(got, expected, strict=True):
            np.testing.assert_array_equal(a, b, err_msg=f"{kind.__name__} inputs changed a result")


def jax_arrays_in(out, where: str = "result") -> list[str]:
    """Where ``out`` (tuples, dicts, registered pytrees, dataclass fields, recursively)
    still holds a JAX array (other than a random key): issue 19 wants NumPy float64 in
    the user's hands, which stays float64 under their arithmetic with JAX's defaults."""
    import dataclasses

    import jax

    found = []
    if isinstance(out, jax.Array):
        if not jax.dtypes.issubdtype(out.dtype, jax.dtypes.prng_key):
            found.append(where)
    elif dataclasses.is_dataclass(out) and not isinstance(out, type):
        for f in dataclasses.fields(out):
            found += jax_arrays_in(getattr(out, f.name), f"{where}.{f.name}")
    elif isinstance(out, tuple | list):
        for i, v in enumerate(out):
            found += jax_arrays_in(v, f"{where}[{i}]")
    elif isinstance(out, dict):
        for k, v in out.items():
            found += jax_arrays_in(v, f"{where}[{k!r}]")
    return found
