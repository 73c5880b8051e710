"""A budget for the nearest fixed point that ``analyse`` builds (docs/theory.md §11.7.9): seconds
and the size of the largest array. The searches check it where they loop (each residual and
Jacobian of Levenberg–Marquardt, each Newton step, each Hessian–vector product, each sweep, each
candidate) and stop with :class:`OverBudget` once the time has passed; an array larger than the
budget's is refused before it is made. Outside a :func:`budget` block the checks do nothing: a
direct call of :func:`biasfree.analysis.stage.stage` runs to its end."""

from __future__ import annotations

import contextlib
import contextvars
import time

_LIMIT: contextvars.ContextVar = contextvars.ContextVar("stage_budget", default=None)


class OverBudget(Exception):
    """The stage's search ran past its budget; ``str`` says which part and the numbers."""


@contextlib.contextmanager
def budget(seconds: float, numbers: int):
    """Within the block, :func:`check` raises past ``seconds`` from now and :func:`fits` for an
    array of more than ``numbers`` entries."""
    token = _LIMIT.set((time.monotonic() + seconds, seconds, numbers))
    try:
        yield
    finally:
        _LIMIT.reset(token)


def check() -> None:
    """Raise :class:`OverBudget` once the block's seconds have passed (outside a block: nothing)."""
    limit = _LIMIT.get()
    if limit is not None and time.monotonic() >= limit[0]:
        raise OverBudget(f"its search ran past the time budget of {limit[1]:.3g} s")


def left() -> float | None:
    """Seconds left in the block (outside a block: None)."""
    limit = _LIMIT.get()
    return None if limit is None else limit[0] - time.monotonic()


def fits(numbers: int, what: str) -> None:
    """Raise :class:`OverBudget` if an array ``what`` of ``numbers`` entries is larger than the
    block's limit (outside a block: nothing)."""
    limit = _LIMIT.get()
    if limit is not None and numbers > limit[2]:
        raise OverBudget(f"{what} would hold {numbers:.3g} numbers, more than the {limit[2]:.3g} allowed")
