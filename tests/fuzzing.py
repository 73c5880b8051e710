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
