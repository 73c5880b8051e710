"""The compiled training program (docs/theory.md §0): the only training loop in the package.

One member's run is ``lax.scan`` over record intervals with ``lax.fori_loop`` inside (module
doc of :mod:`biasfree.dynamics.trainer`): each step draws its batch, takes the net's gradient
and the optimiser's update (``optax.sgd`` of the member's own η for gradient descent), and, with
a twin, the twin's on the same batch (on its own data: the same rows of it); the carry holds
the running maximum of the loss, of the net–twin gap and where it occurred, and the first step
whose loss left every bound. An
ensemble runs members side by side (``batching.over_members``). A run is one call of one
program, which builds the state and runs every record interval; or, with a progress callback or
a time budget, a small program builds the state and one program runs chunks of intervals of
one length, between which progress is reported; with a time budget each chunk is sized by the
measured time per step (:mod:`~biasfree.dynamics.pacing`), cutting an interval where it must.
Each program is compiled once per ``Spec`` (kept in a small LRU).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass, replace
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from threadpoolctl import ThreadpoolController

from . import pacing, run
from .batching import over_members

DIVERGED = 1e8
"""A step whose loss (the net's, or its twin's) is not finite or exceeds
``DIVERGED · max(L(θ_0), 1)`` has diverged."""


class Spec(NamedTuple):
    """The static part of a program: one compiled loop per distinct spec."""

    optimiser: object  # a GradientTransformation, or None: optax.sgd(member lr) built in the trace
    twin_optimiser: object  # likewise for the twin; unused without a twin
    loss: str
    keep_params: bool
    mirrored: bool
    batch_size: int | None
    mirrored_batches: bool
    twin: bool
    light: bool  # records hold the losses and even energy only
    ragged: bool  # every member has its own record steps (segments (B, R))
    layout: str | None  # None: one run; else how an ensemble's members share the machine
    n_dev: int
    stage: str  # "run": from the params, "start": only the initial state, "resume": from a state
    twin_data: bool = False  # the twin trains on its own data (shared["twin_data"], full layout)


def _rows_fn(n_rows: int, spec: Spec):
    """``(k, key) -> rows`` of step k's batch among the ``n_rows`` points in their full order
    (``[X₊; −X₊]`` for mirrored inputs): ``batch_size/2`` mirror pairs (i, n + i), or
    ``batch_size`` points at random; None for full batches."""
    if spec.batch_size is None:
        return None
    b = spec.batch_size
    if spec.mirrored_batches:
        n = n_rows // 2

        def rows(k, key):
            i = jax.random.choice(jax.random.fold_in(key, k), n, (b // 2,), replace=False)
            return jnp.concatenate([i, n + i])
        return rows
    return lambda k, key: jax.random.choice(jax.random.fold_in(key, k), n_rows, (b,), replace=False)


def _batch_fn(arrays, spec: Spec):
    """``(k, key) -> (X_B, Y_B)`` for step k (module doc), or None (full batch), and whether the
    batch's X is the positive half of mirrored inputs."""
    rows = _rows_fn(arrays[1].shape[0], spec)
    if rows is None:
        return None, spec.mirrored
    X, Y = arrays[0], arrays[1]
    if spec.mirrored_batches and spec.mirrored:  # the pairs' positive halves: rows i of X₊
        half = spec.batch_size // 2
        return (lambda k, key: (lambda r: (X[r[:half]], Y[r]))(rows(k, key))), True
    Xfull = jnp.concatenate([X, -X]) if spec.mirrored else X
    return (lambda k, key: (lambda r: (Xfull[r], Y[r]))(rows(k, key))), False


def _twin_batch_fn(arrays, spec: Spec):
    """The twin's own data (``spec.twin_data``, stored in full): the rows of the net's batch
    (the same draws, :func:`_rows_fn`), or None for full batches."""
    rows = _rows_fn(arrays[1].shape[0], spec)
    return None if rows is None else (lambda k, key: (lambda r: (arrays[0][r], arrays[1][r]))(rows(k, key)))


def _record(p, arrays, alpha, loss, pinv_X, spec: Spec):
    if spec.light:  # the losses, and the weights when asked (keep_params)
        obs = run.record_losses(p, arrays, alpha, loss, spec.mirrored)
        return obs | {"path": p} if spec.keep_params else obs
    return run.record(p, arrays, alpha, loss, pinv_X, spec.keep_params, spec.mirrored)


def _optimisers(m: dict, spec: Spec):
    """The net's optimiser and the twin's (None without a twin)."""
    opt = optax.sgd(m["lr"]) if spec.optimiser is None else spec.optimiser
    if not spec.twin:
        return opt, None
    return opt, optax.sgd(m["twin_lr"]) if spec.twin_optimiser is None else spec.twin_optimiser


def _start(m: dict, sh: dict, spec: Spec) -> dict:
    """One member's initial state from ``m["params"]`` (and ``m["twin"]``): the weights, the
    optimisers' states and the carry of :func:`_one` (module doc)."""
    arrays, p = sh["data"], m["params"]
    draw, grad_mirrored = _batch_fn(arrays, spec)
    first = (arrays[0], arrays[1]) if draw is None else draw(0, sh["key"])
    L_type = jax.eval_shape(lambda p: run.grad_fn(grad_mirrored)(p, *first, m["alpha"], m["decay"],
                                                                  spec.loss)[1], p)
    neg = jnp.full((), -jnp.inf, L_type.dtype)
    opt, twin_opt = _optimisers(m, spec)
    st = {"p": p, "s": opt.init(p), "peak": neg, "L0": jnp.zeros((), L_type.dtype),
          "bad": jnp.full((), -1, jnp.int32), "k": jnp.zeros((), jnp.int32)}
    if spec.twin:
        st |= {"q": m["twin"], "sq": twin_opt.init(m["twin"]), "gap": neg,
               "gap_step": jnp.zeros((), jnp.int32)}
    return st


def _one(m: dict, sh: dict, spec: Spec):
    """One member's record intervals: ``m`` its own values (params and twin's, or the state of an
    earlier chunk; α, η, λ, twin's, maybe data and record steps), ``sh`` what all members share.
    Returns ``(state, records)``: a record at the end of every interval (an interval of 0 steps
    records the state as it is)."""
    arrays = sh["data"]
    segments = m["segments"] if spec.ragged else sh["segments"]
    key, pinv_X = sh["key"], sh["pinv"]
    draw, grad_mirrored = _batch_fn(arrays, spec)
    grad = run.grad_fn(grad_mirrored)
    alpha, decay = m["alpha"], m["decay"]
    opt, twin_opt = _optimisers(m, spec)

    # the twin's data: the net's, or its own (spec.twin_data: stored in full, the same rows per batch)
    own = spec.twin_data
    tw_arrays, tw_spec = (sh["twin_data"], spec._replace(mirrored=False)) if own else (arrays, spec)
    tw_draw = _twin_batch_fn(tw_arrays, spec) if own else None
    tw_grad = run.grad_fn(False) if own else grad
    tw_pinv = sh["twin_pinv"] if own else pinv_X

    def losses(p, q):
        """Full-data losses of net and twin (minibatch runs: the gap's measure)."""
        return (run.loss_fn(spec.mirrored)(p, arrays[0], arrays[1], alpha, spec.loss),
                run.loss_fn(tw_spec.mirrored)(q, tw_arrays[0], tw_arrays[1], 1.0, spec.loss))

    def step(_, st):
        Xb, Yb = (arrays[0], arrays[1]) if draw is None else draw(st["k"], key)
        g, L = grad(st["p"], Xb, Yb, alpha, decay, spec.loss)
        new = dict(st)
        new["L0"] = jnp.where(st["k"] == 0, L, st["L0"])
        bound = DIVERGED * jnp.maximum(jnp.abs(new["L0"]), 1.0)
        bad = ~jnp.isfinite(L) | (L > bound)
        if spec.twin:
            Xq, Yq = ((Xb, Yb) if not own else (tw_arrays[0], tw_arrays[1]) if tw_draw is None
                      else tw_draw(st["k"], key))
            gq, Lq = tw_grad(st["q"], Xq, Yq, 1.0, m["twin_decay"], spec.loss)
            Lf, Lqf = (L, Lq) if draw is None else losses(st["p"], st["q"])
            gap = jnp.abs(Lf - Lqf)
            worse = gap > st["gap"]
            new["gap"] = jnp.where(worse, gap, st["gap"])
            new["gap_step"] = jnp.where(worse, st["k"], st["gap_step"])
            u, new["sq"] = twin_opt.update(gq, st["sq"], st["q"])
            new["q"] = optax.apply_updates(st["q"], u)
            bad = bad | ~jnp.isfinite(Lq) | (Lq > bound)  # a twin that blows up is no twin
        u, new["s"] = opt.update(g, st["s"], st["p"])
        new["p"] = optax.apply_updates(st["p"], u)
        new["bad"] = jnp.where((st["bad"] < 0) & bad, st["k"], st["bad"])
        new["peak"] = jnp.maximum(st["peak"], L)
        new["k"] = st["k"] + 1
        return new

    def segment(st, n):
        st = jax.lax.fori_loop(0, n, step, st)
        rec = {"net": _record(st["p"], arrays, alpha, spec.loss, pinv_X, spec)}
        if spec.twin:
            rec["twin"] = _record(st["q"], tw_arrays, 1.0, spec.loss, tw_pinv, tw_spec)
        return st, rec

    return jax.lax.scan(segment, _start(m, sh, spec) if spec.stage == "run" else m["state"], segments)


def _program(member: dict, shared: dict, spec: Spec):
    fn = _start if spec.stage == "start" else _one
    if spec.layout is None:
        return fn(member, shared, spec)
    return over_members(lambda m, sh: fn(m, sh, spec), member, shared, spec.layout, spec.n_dev)


_COMPILED: OrderedDict = OrderedDict()
CACHE_SIZE = 8
"""Programs kept. An optax optimiser is a closure, so each one is its own program; keeping every
one leaked them all (about 150 memory maps each, Muon's more: "LLVM compilation error: Cannot
allocate memory" in a long session). The least recently used is dropped, with its executables."""


def _compiled(spec: Spec):
    """The jitted program of ``spec``, found by equality (a GradientTransformation is a
    NamedTuple of its two functions, rebuilt by every tree_map such as the precision cast of
    ``precise``, so not by identity); an unhashable spec is found by identity."""
    try:
        key = (hash(spec), spec)
    except TypeError:
        key = ("id", id(spec.optimiser), id(spec.twin_optimiser), spec._replace(
            optimiser=None, twin_optimiser=None))
    hit = _COMPILED.get(key)
    if hit is None:
        hit = (spec, jax.jit(partial(_program, spec=spec)))
        _COMPILED[key] = hit
        while len(_COMPILED) > CACHE_SIZE:
            _COMPILED.popitem(last=False)
    _COMPILED.move_to_end(key)
    return hit[1]


# ----------------------------------------------------------------- driving the program


def _chunks(n_segments: int, chunked: bool) -> list[tuple[int, int]]:
    """Record intervals per compiled call: all at once, or ~20 calls of equal length (the last
    padded with empty intervals, so that one program serves every call)."""
    if not chunked:
        return [(0, n_segments)]
    size = max(1, -(-n_segments // 20))
    return [(a, a + size) for a in range(0, n_segments, size)]


@dataclass(frozen=True)
class Job:
    """A validated run: what the driver needs besides the spec."""

    member: dict
    shared: dict
    segments: np.ndarray  # (R−1,) or (B, R−1) steps between records
    ks: np.ndarray  # (R,) or (B, R) record steps
    eta: np.ndarray | None  # (B,) or scalar: the time axis' η (None: t = k)
    step_seconds: float | None = None  # a paced run's seconds a step, compiling left out (drive sets it)


def drive(job: Job, spec: Spec, progress, time_budget, stop=None):
    """Run the program over every record interval, in chunks when asked; ``(state, records,
    job)`` with the job's ``ks`` the steps of the records made (all of them, unless the budget
    ran out or ``stop`` said so: then its first ones and the step where the run stopped).

    ``stop(state, last) -> bool`` (one net, not an ensemble): asked between calls, with the
    loop's state and the last record made (``{"net": {...}, "twin": {...}}``, each observable at
    that step); True ends the run there, as a spent budget does (the caller's test of whether
    the answer is already decided, ``biasfree.analysis.measured``).

    The BLAS behind LAPACK runs on one thread meanwhile (:data:`BLAS_THREADS`)."""
    with _blas_limit():
        state, recs, ks, step_s = _calls(job, spec, progress, time_budget, stop)
        jax.block_until_ready((state, recs))  # the program runs asynchronously: inside the limit
    axis = 0 if spec.layout is None else 1
    records = recs[0] if len(recs) == 1 else jax.tree_util.tree_map(
        lambda *xs: jnp.concatenate(xs, axis=axis), *recs)
    n = jax.tree_util.tree_leaves(records["net"]["loss"])[0].shape[axis]
    return state, records, replace(job, ks=job.ks[..., :n] if ks is None else ks, step_seconds=step_s)


_CONTROLLER = []


def _blas_limit():
    """``threadpool_limits(BLAS_THREADS, user_api="blas")`` from one ThreadpoolController, made at
    the first run: making one scans every loaded library, about 7 ms a run (10 s of ``make
    test``'s CPU, profiled with py-spy)."""
    if not _CONTROLLER or not _CONTROLLER[0].select(user_api="blas").lib_controllers:
        _CONTROLLER[:] = [ThreadpoolController()]  # (again while it finds no BLAS loaded)
    return _CONTROLLER[0].limit(limits=BLAS_THREADS, user_api="blas")


BLAS_THREADS = 1
"""BLAS threads while a program runs. A record's singular values are a LAPACK call inside the
compiled loop; with OpenBLAS's default of one thread per core its threads, spinning after each
call, compete with XLA's own, and each record cost about 15 ms on the 2-core machine (99
records nearly doubled a 3000-step run) against under 1 ms on one thread, with the same
singular values bitwise (docs/performance.md, "The one training loop")."""


def _last(rec: dict, n: int, axis: int) -> dict:
    """Record ``n − 1`` of a call's records."""
    return jax.tree_util.tree_map(lambda x: jax.lax.index_in_dim(x, n - 1, axis=axis, keepdims=False), rec)


def _calls(job: Job, spec: Spec, progress, time_budget, stop=None):
    """The compiled calls of :func:`drive`: ``(final state, [records of each call], record
    steps, seconds a step)`` (the steps None: the job's first records, as many as were made; the
    seconds None unless paced by a time budget).

    The intervals are the job's with one of 0 steps in front (record 0). Run in one call, one
    program builds the state and runs them; in chunks, a small program builds the state and one
    program runs every chunk (all of one length, :func:`_chunks`). With a time budget the
    chunks are sized by the measured time per step instead (:func:`_paced`), except for an
    ensemble whose members record at their own steps (internal), whose budget is checked
    between chunks of records."""
    seg = job.segments
    seg = np.concatenate([np.zeros(seg.shape[:-1] + (1,), seg.dtype), seg], axis=-1)
    R = seg.shape[-1]
    chunked = progress is not None or time_budget is not None or stop is not None
    start, recs = time.monotonic(), []
    axis = 0 if spec.layout is None else 1  # the record axis (an ensemble's is behind its members')
    K = int(np.max(job.ks[..., -1]))
    member, shared, state = dict(job.member), dict(job.shared), None
    if chunked:
        state = _compiled(spec._replace(stage="start"))(member, shared)
        member = {k: v for k, v in member.items() if k not in ("params", "twin")}
        spec = spec._replace(stage="resume")
        if time_budget is not None and not spec.ragged:
            return _paced(job, spec, member, shared, state, progress, time_budget, start, stop)
    for a, b in _chunks(R, chunked):
        part = seg[..., a:min(b, R)]
        pad = (b - a) - part.shape[-1]
        if pad:
            part = np.concatenate([part, np.zeros(part.shape[:-1] + (pad,), part.dtype)], axis=-1)
        if spec.ragged:
            member["segments"] = jnp.asarray(part)
        else:
            shared["segments"] = jnp.asarray(part)
        state, rec = _compiled(spec)(member if state is None else member | {"state": state}, shared)
        if pad:  # drop the records of the padding's empty intervals
            n = b - a - pad
            rec = jax.tree_util.tree_map(lambda x, n=n: jax.lax.slice_in_dim(x, 0, n, axis=axis), rec)
        recs.append(rec)
        done = min(b, R)  # records made so far
        if chunked:  # the call runs asynchronously: wait for it before reporting or timing it
            jax.block_until_ready(state)
        k = int(np.max(job.ks[..., done - 1]))
        if progress is not None and k > 0:  # not for a chunk that only recorded step 0
            progress(k, K)
        if time_budget is not None and time.monotonic() - start > time_budget and done < R:
            break
        if stop is not None and done < R and stop(state, _last(rec, b - a - pad, axis)):
            break
    return state, recs, None, None


def _paced(job: Job, spec: Spec, member: dict, shared: dict, state, progress, budget: float,
           start: float, stop=None):
    """The calls of a run with a time budget (one shared record schedule), from the initial
    ``state``: each runs the steps :func:`~biasfree.dynamics.pacing.next_steps` fits in the
    time left, cut into intervals by :func:`~biasfree.dynamics.pacing.cut` (at most as many as a
    chunk of :func:`_chunks`, padded with empty ones: one program serves every call). The records
    of intervals that end at record steps are kept; a run the budget stops inside an interval
    ends with the record of where it stopped. ``(state, records, record steps, seconds a step)``,
    the last measured after the first call (which compiles the program; None if it was the only one)."""
    ks = np.asarray(job.ks)
    R, K = ks.size, int(ks[-1])
    pieces = max(2, _chunks(R, True)[0][1])  # two at least: the first call is record 0 and a step
    axis = 0 if spec.layout is None else 1
    program = _compiled(spec)
    recs, made, j, k, step_s, n = [], [], 0, 0, None, 1  # the first call: record 0 and one step
    while True:
        lengths, kept, cut = pacing.cut(ks, j, k, n, pieces)
        n = sum(lengths)  # fewer when the call's intervals end before k + n
        part = np.zeros(pieces, np.int64)
        part[:len(lengths)] = lengths
        shared["segments"] = jnp.asarray(part)
        t0 = time.monotonic()
        state, rec = program(member | {"state": state}, shared)
        jax.block_until_ready(state)
        if j:  # the first call (j = 0) compiles the program: its time is no step's
            step_s = (time.monotonic() - t0) / n
        made.extend(ks[j:j + kept].tolist())
        j, k = j + kept, k + n
        n = pacing.next_steps(budget - (time.monotonic() - start), step_s, K - k)  # 0: stop here
        if n and stop is not None and stop(state, _last(rec, kept + cut, axis)):
            n = 0  # decided: the run ends here, as a spent budget ends it
        keep = kept + (cut and n == 0)  # stopped inside an interval: its record is the last
        if keep > kept:
            made.append(k)
        if keep:
            recs.append(jax.tree_util.tree_map(lambda x, m=keep: jax.lax.slice_in_dim(x, 0, m, axis=axis),
                                               rec))
        if progress is not None and k > 0:
            progress(k, K)
        if n == 0:
            return state, recs, np.asarray(made, dtype=ks.dtype), step_s
