"""Pacing a run against its budget: a step-size controller for gradient flow that notices a
stall early (:class:`PacedPID`), and the calls of a training run with a time budget
(:func:`next_steps`, :func:`cut`).

On a ReLU kink (α < 1) a flow that slides along the kink makes the error of every step of
order ``|jump|·Δt``, so diffrax's PID controller keeps ``Δt ~ rtol`` and the solver crawls
through the whole ``max_steps`` budget (docs/theory.md §3.5, "Sliding on a kink").
:class:`PacedPID` wraps the PID controller and, every ``window`` solver steps (accepted or
rejected, as ``max_steps`` counts them), projects the steps still needed from the pace of
that window::

    pace = (t - t_window_start) / window,      need = (t_end - t) / pace.

When ``need > STALL_MARGIN · (max_steps - n)`` (n the steps taken so far), the budget
cannot reach ``t_end`` even if the pace grew tenfold, and the solve ends with
``diffrax.RESULTS.dt_min_reached`` at once instead of after the whole budget (on the
tests' ReLU-kink case, after 2 000 of the default 200 000 steps).

What it can get wrong: a flow that later speeds up by more than ``STALL_MARGIN`` (a stiff
transient followed by slow dynamics) can be stopped although its budget would have
sufficed. A larger ``max_steps`` always lets such a flow run; with the default budget a
flow is stopped only if it needs over 2 000 000 steps at its current pace.

**A time budget** (``train(..., time_budget=T)``). The compiled loop cannot read a clock, so
the run is a sequence of calls, each sized to fit the time left ``r = T − elapsed``:

    call 1:  record 0 and 1 step           (it compiles the program: its time says nothing)
    call 2:  1 step                        (timed: s = its seconds per step, an upper bound)
    call j:  n_j = min(steps left, ⌊(r/2)/s⌋),  s then re-measured as the call's time / n_j

and the run stops when ``n_j = 0`` (less than two steps' time left) or every step ran. A call
planned at ``≤ r/2`` ends before the budget unless it runs over twice as slow as the one
before it, so the run ends within ``T`` plus one step (the first call's), plus the time to
compile the program (the first call's own), plus what a call slower than planned adds (at
``f`` times its measured pace, ``(f/2 − 1)·r ≤ (f/2 − 1)·T``). The ``r/2`` calls halve the time
left, so ``log2(T/s)`` calls or so reach it; a call ends at most ``pieces`` records on, so a run
that fits its budget makes about as many calls as one with ``progress`` (a twentieth of its
records each), two small ones more.
"""

from __future__ import annotations

import diffrax
import equinox as eqx
import jax.numpy as jnp

STALL_MARGIN = 10.0
"""A solve stops early when, at the pace of its last window, it needs more than
``STALL_MARGIN`` times the steps left in its budget. On the tests' ReLU-kink case the
ratio is about 30 at the first window (5e-7 time units a step at rtol = 1e-8); a smooth
flow that speeds up as it converges showed 2.1 in its first window with a budget of
twice the steps it took."""


def stall_window(max_steps: int) -> int:
    """Steps between two pace checks: ``max_steps / 20`` within [100, 1000]."""
    return int(min(1000, max(100, max_steps // 20)))


class PacedPID(diffrax.AbstractAdaptiveStepSizeController):
    """``pid`` (a :class:`diffrax.PIDController`) plus the early stall check of the
    module docstring, for a solve that must reach ``t_end`` within ``max_steps`` steps,
    checked every ``window`` steps."""

    pid: diffrax.PIDController
    t_end: object
    max_steps: int = eqx.field(static=True)
    window: int = eqx.field(static=True)

    rtol = property(lambda self: self.pid.rtol)
    atol = property(lambda self: self.pid.atol)
    norm = property(lambda self: self.pid.norm)

    def wrap(self, direction):
        return eqx.tree_at(lambda s: s.pid, self, self.pid.wrap(direction))

    def init(self, terms, t0, t1, y0, dt0, args, func, error_order):
        t_next, state = self.pid.init(terms, t0, t1, y0, dt0, args, func, error_order)
        return t_next, (state, jnp.asarray(0), jnp.asarray(t0, dtype=jnp.result_type(t_next)))

    def adapt_step_size(self, t0, t1, y0, y1_candidate, args, y_error, error_order, controller_state):
        state, n, t_mark = controller_state
        keep, next_t0, next_t1, jump, state, result = self.pid.adapt_step_size(
            t0, t1, y0, y1_candidate, args, y_error, error_order, state)
        n = n + 1
        lap = n % self.window == 0
        pace = (next_t0 - t_mark) / self.window
        need = (self.t_end - next_t0) / jnp.maximum(pace, jnp.finfo(jnp.result_type(pace)).tiny)
        stalled = lap & (need > STALL_MARGIN * (self.max_steps - n)) & (result == diffrax.RESULTS.successful)
        result = diffrax.RESULTS.where(stalled, diffrax.RESULTS.dt_min_reached, result)
        return keep, next_t0, next_t1, jump, (state, n, jnp.where(lap, next_t0, t_mark)), result


# ----------------------------------------------------------------- a training run's time budget


def next_steps(left_s: float, step_s: float | None, steps_left: int) -> int:
    """Steps of a budgeted run's next call (module doc): 1 while no step is timed (the compile
    call and the probe), else as many as fit half the ``left_s`` seconds at ``step_s`` seconds a
    step, at most ``steps_left``; 0 (stop) once the budget is spent."""
    if left_s <= 0 or steps_left <= 0:
        return 0
    if step_s is None:
        return 1
    return int(min(steps_left, left_s / 2 / max(step_s, 1e-12)))


def cut(ks, j: int, k: int, n: int, pieces: int) -> tuple[list[int], int, bool]:
    """The intervals of a call that runs from step ``k`` (records ``ks[j:]`` still to make) for
    ``n`` steps, in at most ``pieces`` intervals, each ended by a record: ``(lengths, kept,
    cut)``. The first ``kept`` intervals end at record steps; with ``cut`` one more ends at
    ``k + n`` inside an interval (its record is the run's last only if the budget stops it
    there). Fewer than ``n`` steps when ``pieces`` intervals end before ``k + n``."""
    lengths, kept, at = [], 0, k
    while j + kept < len(ks) and len(lengths) < pieces and ks[j + kept] <= k + n:
        lengths.append(int(ks[j + kept]) - at)
        at = int(ks[j + kept])
        kept += 1
    cut = len(lengths) < pieces and at < k + n
    if cut:
        lengths.append(k + n - at)
    return lengths, kept, cut
