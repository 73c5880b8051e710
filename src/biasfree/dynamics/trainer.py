"""The one discrete-time training loop (docs/theory.md §0, §2.4, §9): every run by gradient
descent or any optax optimiser, alone or as an ensemble, with or without its linear twin
beside it, is this compiled program.

Step k draws a batch B_k (every point for full batches), takes ``g_k = ∇J_B(θ_k)`` of
``J_B(θ) = L_B(θ) + (λ/2)||θ||²`` (L_B the data loss on B_k, λ ``weight_decay``) and moves by
the optimiser's update::

    θ_{k+1} = θ_k + u_k,   (u_k, s_{k+1}) = optimiser.update(g_k, s_k, θ_k),  s_0 = optimiser.init(θ_0).

Gradient descent is ``optax.sgd(η)``: ``u_k = −η g_k`` (``p + (−η)·g`` is ``p − η·g`` in IEEE
arithmetic, so it is plain GD bitwise); with ``optimiser=None`` the loop builds it inside the
program from each member's η, so an ensemble's members may each have their own step.

With ``twin`` the linear twin θ̃ (α = 1, weights × c^{(L−1)/L}, §2.4, §4.1) takes its own steps
on the *same* batches, under the twin optimiser (GD: step η·k_t and decay λ/k_t, §2.7; any
other optimiser: :func:`~biasfree.dynamics.optimiser_twin.optimiser_twin`), and the loop
carries::

    gap = max_{k = 0..K} |L(θ_k) − L̃(θ̃_k)|       (loss units, full training data)

and the step where it occurs, so the gap does not depend on how often curves are recorded.

The loop is ``jit`` of ``lax.scan`` over record intervals with ``lax.fori_loop`` inside: no
Python runs per step, only the records are stored, and the largest loss over *every* step
(``Trajectory.loss_max``) and the first step whose loss is not finite (or grew 1e8-fold) are
carried through it. Records lie on the gradient-flow time axis ``t = η k``. With ``progress``
or ``time_budget`` the same program runs in chunks of records, ``progress(k, K)`` between
them; a run out of budget stops within one chunk and says how many steps it ran.

Symmetric inputs stored as ``[X₊; −X₊]`` (``Dataset.mirrored``) take
:func:`~biasfree.dynamics.losses.objective_mirrored`'s path (one X₊-sized product each way).
Minibatches: ``mirrored_batches`` draws ``batch_size/2`` mirror pairs per step, each batch itself
symmetric (§9.3); otherwise ``batch_size`` points at random; both without replacement within
a step, from ``fold_in(key, k)``.
"""

from __future__ import annotations

import functools
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from .. import _validate as validate
from ..core.data import Dataset, mirrored_half
from ..core.layers import check_net
from ..core.precision import precise
from ..core.twin import _slope_factor, _twin_params, _twin_scales
from . import run
from .batching import LAYOUTS, _layout, _over_members
from .diagnosis import DivergenceError, check_spike
from .optimiser_twin import _optimiser_twin
from .run import SPACINGS, RunConfig
from .trajectory import Trajectory

OBSERVABLES = ("all", "loss")
"""What a record holds: "all" (:func:`~biasfree.dynamics.trajectory.observe`: loss, β_eff,
even energy, singular values, conserved quantities) or "loss" (loss, test loss and even energy
only: no SVD per record, for long curves of large nets)."""

DIVERGED = 1e8
"""A step whose loss is not finite or exceeds ``DIVERGED · max(L(θ_0), 1)`` has diverged."""


def _is_transformation(obj) -> bool:
    """Whether ``obj`` is an optax ``GradientTransformation`` (has ``init`` and ``update``)."""
    return hasattr(obj, "init") and hasattr(obj, "update")


def optimiser_name(opt) -> str:
    """A readable name for an optimiser: "GD" for None, a factory's or an update function's own
    name (``def my_adam(rho): ...`` gives "my_adam"), else "optimiser" (a lambda, or optax's
    chained transformations, which carry no name)."""
    if opt is None:
        return "GD"
    fn = opt.update if _is_transformation(opt) else opt
    head = (getattr(fn, "__qualname__", "") or "").split(".<locals>")[0]
    return head if head and head not in ("<lambda>", "chain") else "optimiser"


@dataclass(frozen=True, kw_only=True)
class TrainConfig(RunConfig):
    """One discrete-time run (module doc): the record :func:`train` takes, and the one the
    claims, the sweeps, ``analyse(train=...)`` and the CLI build.

    ``optimiser`` None (gradient descent at step ``lr``), an ``optax.GradientTransformation``,
    or a factory ``rho -> GradientTransformation`` (the optimiser for gradients ×ρ, whose twin
    is then exact: :func:`~biasfree.dynamics.optimiser_twin.optimiser_twin`); ``lr`` GD's step η,
    or for any other optimiser the η that puts record k at time ``t = η k`` (None: read from an
    ``optax.inject_hyperparams`` optimiser, else ``t = k``); ``steps`` K; ``batch_size`` None
    (full batch) or the points per step, as mirror pairs when ``mirrored_batches`` (inputs laid
    out ``[X₊; −X₊]``), from the PRNG ``seed``; ``degree`` κ of the optimiser for its twin (None:
    measured); ``name`` how results call the optimiser (None: :func:`optimiser_name`);
    ``alpha``, ``loss``, ``weight_decay`` (λ of the coupled ``(λ/2)||θ||²``), ``n_records``,
    ``spacing``, ``keep_params`` as in :class:`~biasfree.dynamics.run.RunConfig`.
    """

    optimiser: object = None
    lr: float | None = None
    steps: int = 1000
    batch_size: int | None = None
    mirrored_batches: bool = True
    seed: int = 0
    degree: float | None = None
    name: str | None = None

    def __post_init__(self):
        super().__post_init__()
        if self.optimiser is not None and not _is_transformation(self.optimiser):
            validate.callable_("optimiser", self.optimiser, validate.OPTIMISER)
        if self.optimiser is None and self.lr is None:
            raise ValueError("lr: gradient descent (optimiser=None) needs its step η, e.g. "
                             "TrainConfig(lr=0.01), or pass an optax optimiser")
        if self.lr is not None:
            self._set_positive("lr", "the step η of θ ← θ − η∇J (GD), or the η that puts record k at "
                               "t = η k; e.g. 0.01")
        self._set_integer("steps", 1)
        if self.batch_size is not None:
            self._set_integer("batch_size", 1)
        validate.flag("mirrored_batches", self.mirrored_batches)
        self._set("seed", validate.seed(self.seed))
        if self.degree is not None:
            self._set("degree", validate.real("degree", self.degree, scalar=True))
        if self.name is not None and not isinstance(self.name, str):
            raise TypeError(f"name={self.name!r} must be a string such as 'adam', or None")

    @property
    def gd(self) -> bool:
        """Plain gradient descent at step ``lr`` (the loop builds ``optax.sgd``)."""
        return self.optimiser is None

    @property
    def factory(self) -> bool:
        """``optimiser`` is a factory of ρ (not a GradientTransformation)."""
        return self.optimiser is not None and not _is_transformation(self.optimiser)

    @property
    def label(self) -> str:
        return self.name or ("GD" if self.gd else optimiser_name(self.optimiser))

    @property
    def t_max(self) -> float:
        """``η K`` (K when η is unknown)."""
        return (self.lr or 1.0) * self.steps

    def make(self, rho: float = 1.0):
        """The optimiser for gradients ×ρ (a plain optimiser: itself; GD: ``optax.sgd(lr)``)."""
        if self.gd:
            return optax.sgd(self.lr)
        return self.optimiser(rho) if self.factory else self.optimiser

    def record(self) -> dict:
        """What a saved result stores (the optimiser by name)."""
        return {"optimiser": self.label, "lr": self.lr, "steps": self.steps, "batch_size": self.batch_size,
                "mirrored_batches": self.mirrored_batches, "seed": self.seed, "degree": self.degree}


@dataclass(frozen=True, kw_only=True)
class GDConfig(TrainConfig):
    """Full-batch gradient descent ``θ_{k+1} = θ_k − η ∇J(θ_k)``: a :class:`TrainConfig` with
    ``optimiser=None``; ``lr`` step η (default 0.01); ``steps`` K (time t = ηK); the other
    fields as there."""

    lr: float = 0.01

    def __post_init__(self):
        if self.optimiser is not None:
            raise ValueError("GDConfig is gradient descent: for another optimiser use "
                             "TrainConfig(optimiser=..., steps=...)")
        super().__post_init__()


def record_steps(steps: int, n_records: int, spacing: str = "linear") -> np.ndarray:
    """Distinct integer steps ``0 = k_0 < ... < k_R = steps`` at which to record."""
    steps = validate.integer("steps", steps, 1)
    n_records = validate.integer("n_records", n_records, 2)
    validate.choice("spacing", spacing, SPACINGS)
    ks = np.geomspace(1, steps, n_records - 1) if spacing == "log" else np.linspace(0, steps, n_records)
    return np.unique(np.concatenate([[0], np.round(ks).astype(np.int64), [steps]]))


# ----------------------------------------------------------------- the compiled program


class _Spec(NamedTuple):
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
    first: bool  # the chunk starts the run (builds the state, records step 0)


def _batch_fn(arrays, spec: _Spec):
    """``(k, key) -> (X_B, Y_B)`` for step k (module doc), or None (full batch), and whether the
    batch's X is the positive half of mirrored inputs."""
    if spec.batch_size is None:
        return None, spec.mirrored
    X, Y, b = arrays[0], arrays[1], spec.batch_size
    if spec.mirrored_batches:
        n = Y.shape[0] // 2

        def draw(k, key):
            i = jax.random.choice(jax.random.fold_in(key, k), n, (b // 2,), replace=False)
            Yb = jnp.concatenate([Y[i], Y[n + i]])
            return (X[i] if spec.mirrored else jnp.concatenate([X[i], X[n + i]])), Yb
        return draw, spec.mirrored
    Xfull = jnp.concatenate([X, -X]) if spec.mirrored else X

    def draw(k, key):
        i = jax.random.choice(jax.random.fold_in(key, k), Y.shape[0], (b,), replace=False)
        return Xfull[i], Y[i]
    return draw, False


def _record(p, arrays, alpha, loss, pinv_X, spec: _Spec):
    if spec.light:
        return run.record_losses(p, arrays, alpha, loss, spec.mirrored)
    return run.record(p, arrays, alpha, loss, pinv_X, spec.keep_params, spec.mirrored)


def _one(m: dict, sh: dict, spec: _Spec):
    """One member's chunk: ``m`` its own values (params or state, α, η, λ, twin's, maybe data and
    record steps), ``sh`` what all members share. Returns ``(state, records)``."""
    arrays = sh["data"]
    segments = m["segments"] if spec.ragged else sh["segments"]
    key, pinv_X = sh["key"], sh["pinv"]
    draw, grad_mirrored = _batch_fn(arrays, spec)
    grad = run.grad_fn(grad_mirrored)
    alpha, decay = m["alpha"], m["decay"]
    opt = optax.sgd(m["lr"]) if spec.optimiser is None else spec.optimiser
    if spec.twin:
        twin_opt = optax.sgd(m["twin_lr"]) if spec.twin_optimiser is None else spec.twin_optimiser

    def losses(p, q):
        """Full-data losses of net and twin (minibatch runs: the gap's measure)."""
        f = run.loss_fn(spec.mirrored)
        return f(p, arrays[0], arrays[1], alpha, spec.loss), f(q, arrays[0], arrays[1], 1.0, spec.loss)

    def step(_, st):
        Xb, Yb = (arrays[0], arrays[1]) if draw is None else draw(st["k"], key)
        g, L = grad(st["p"], Xb, Yb, alpha, decay, spec.loss)
        new = dict(st)
        if spec.twin:
            gq, Lq = grad(st["q"], Xb, Yb, 1.0, m["twin_decay"], spec.loss)
            Lf, Lqf = (L, Lq) if draw is None else losses(st["p"], st["q"])
            gap = jnp.abs(Lf - Lqf)
            worse = gap > st["gap"]
            new["gap"] = jnp.where(worse, gap, st["gap"])
            new["gap_step"] = jnp.where(worse, st["k"], st["gap_step"])
            u, new["sq"] = twin_opt.update(gq, st["sq"], st["q"])
            new["q"] = optax.apply_updates(st["q"], u)
        u, new["s"] = opt.update(g, st["s"], st["p"])
        new["p"] = optax.apply_updates(st["p"], u)
        new["L0"] = jnp.where(st["k"] == 0, L, st["L0"])
        bad = ~jnp.isfinite(L) | (L > DIVERGED * jnp.maximum(jnp.abs(new["L0"]), 1.0))
        new["bad"] = jnp.where((st["bad"] < 0) & bad, st["k"], st["bad"])
        new["peak"] = jnp.maximum(st["peak"], L)
        new["k"] = st["k"] + 1
        return new

    def segment(st, n):
        st = jax.lax.fori_loop(0, n, step, st)
        rec = {"net": _record(st["p"], arrays, alpha, spec.loss, pinv_X, spec)}
        if spec.twin:
            rec["twin"] = _record(st["q"], arrays, 1.0, spec.loss, pinv_X, spec)
        return st, rec

    if spec.first:  # build the state; record 0 is a segment of 0 steps, traced once inside the loop
        p = m["params"]
        first = (arrays[0], arrays[1]) if draw is None else draw(0, key)
        L_type = jax.eval_shape(lambda p: grad(p, *first, alpha, decay, spec.loss)[1], p)
        neg = jnp.full((), -jnp.inf, L_type.dtype)
        st = {"p": p, "s": opt.init(p), "peak": neg, "L0": jnp.zeros((), L_type.dtype),
              "bad": jnp.full((), -1, jnp.int32), "k": jnp.zeros((), jnp.int32)}
        if spec.twin:
            st |= {"q": m["twin"], "sq": twin_opt.init(m["twin"]), "gap": neg,
                   "gap_step": jnp.zeros((), jnp.int32)}
        segments = jnp.concatenate([jnp.zeros((1,), jnp.asarray(segments).dtype), segments])
    else:
        st = m["state"]
    return jax.lax.scan(segment, st, segments)


def _program(member: dict, shared: dict, spec: _Spec):
    if spec.layout is None:
        return _one(member, shared, spec)
    return _over_members(lambda m, sh: _one(m, sh, spec), member, shared, spec.layout, spec.n_dev)


_COMPILED: OrderedDict = OrderedDict()
CACHE_SIZE = 8
"""Programs kept. An optax optimiser is a closure, so each one is its own program; keeping every
one leaked them all (about 150 memory maps each, Muon's more: "LLVM compilation error: Cannot
allocate memory" in a long session). The least recently used is dropped, with its executables."""


def _compiled(spec: _Spec):
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


def _learning_rate(optimiser, params, lr):
    """η for the time axis: ``lr`` if given; else the ``learning_rate`` of an optimiser built with
    ``optax.inject_hyperparams`` when it stays the same over the first two steps (a schedule
    does not: then, as for any other optimiser, None)."""
    if lr is not None:
        return lr
    state = optimiser.init(params)
    hp = getattr(state, "hyperparams", None)
    if not isinstance(hp, dict) or "learning_rate" not in hp or np.ndim(hp["learning_rate"]) != 0:
        return None
    zeros = jax.tree_util.tree_map(jnp.zeros_like, params)
    seen = [float(hp["learning_rate"])]
    for _ in range(2):  # the state after step k holds the rate of step k (a schedule's moves at k = 1)
        _, state = optimiser.update(zeros, state, params)
        seen.append(float(state.hyperparams["learning_rate"]))
    return seen[0] if len(set(seen)) == 1 and seen[0] > 0 else None


def _chunks(n_segments: int, chunked: bool) -> list[tuple[int, int]]:
    """Record intervals per compiled call: all at once, or ~20 calls of equal length (the last
    padded with empty intervals, so one program serves every call after the first)."""
    if not chunked:
        return [(0, n_segments)]
    size = max(1, -(-n_segments // 20))
    return [(a, a + size) for a in range(0, n_segments, size)]


@dataclass(frozen=True)
class _Job:
    """A validated run: what the driver needs besides the spec."""

    member: dict
    shared: dict
    segments: np.ndarray  # (R−1,) or (B, R−1) steps between records
    ks: np.ndarray  # (R,) or (B, R) record steps
    eta: np.ndarray | None  # (B,) or scalar: the time axis' η (None: t = k)


def _drive(job: _Job, spec: _Spec, progress, time_budget):
    """Run the program over every record interval, in chunks when asked; ``(state, records,
    recorded)`` with ``recorded`` the number of records made (R unless the budget ran out)."""
    seg = job.segments
    R1 = seg.shape[-1]
    chunked = progress is not None or time_budget is not None
    start, recs, state = time.monotonic(), [], None
    axis = 0 if spec.layout is None else 1  # the record axis (an ensemble's is behind its members')
    K = int(np.max(job.ks[..., -1]))
    for a, b in _chunks(R1, chunked):
        part = seg[..., a:min(b, R1)]
        pad = (b - a) - part.shape[-1]
        if pad:
            part = np.concatenate([part, np.zeros(part.shape[:-1] + (pad,), part.dtype)], axis=-1)
        s = spec._replace(first=state is None)
        member = dict(job.member)
        if state is not None:
            member = {k: v for k, v in member.items() if k not in ("params", "twin")}
            member["state"] = state
        shared = dict(job.shared)
        if spec.ragged:
            member["segments"] = jnp.asarray(part)
        else:
            shared["segments"] = jnp.asarray(part)
        state, rec = _compiled(s)(member, shared)
        if pad:  # drop the records of the padding's empty intervals
            keep = part.shape[-1] - pad + (1 if s.first else 0)
            rec = jax.tree_util.tree_map(lambda x, n=keep: jax.lax.slice_in_dim(x, 0, n, axis=axis), rec)
        recs.append(rec)
        done = min(b, R1)
        if progress is not None:
            progress(int(np.max(job.ks[..., done])), K)
        if time_budget is not None and time.monotonic() - start > time_budget and done < R1:
            break
    records = jax.tree_util.tree_map(lambda *xs: jnp.concatenate(xs, axis=axis), *recs)
    n = jax.tree_util.tree_leaves(records["net"]["loss"])[0].shape[axis]
    return state, records, n


def _divergence(state, job: _Job, cfg: TrainConfig, what: str) -> None:
    """The one divergence error: the first step whose loss left every bound, and a smaller step."""
    bad = np.asarray(state["bad"]).reshape(-1)
    if not (bad >= 0).any():
        return
    i = int(np.nonzero(bad >= 0)[0][0])
    who = "" if bad.size == 1 else f" (ensemble members {np.nonzero(bad >= 0)[0].tolist()})"
    L0 = float(np.asarray(state["L0"]).reshape(-1)[i])
    eta = None if job.eta is None else float(np.broadcast_to(job.eta, bad.shape)[i])
    if eta is not None and np.isfinite(eta):
        fix = (f"with lr={eta:g} the step is too large for this loss landscape (GD is stable only for "
               f"lr < 2/λ_max(Hessian)); try lr={eta / 4:g}")
    else:
        fix = (f"the step of {cfg.label} is too large; build it with a quarter of its learning rate "
               "(e.g. optax.adam(2.5e-4) for optax.adam(1e-3))")
    raise DivergenceError(
        f"{what} diverged{who} at step {int(bad[i])}: its loss left every bound (non-finite, or above "
        f"{DIVERGED:g}·max(L(0), 1) with L(0) = {L0:.3g}); {fix}, or use gradient flow (biasfree.flow).")


# ----------------------------------------------------------------- the public call


def _check_batches(cfg: TrainConfig, data: Dataset) -> None:
    if cfg.batch_size is None:
        return
    N = np.shape(data.Y)[0]
    b = cfg.batch_size
    if b > N:
        raise ValueError(f"batch_size={b} exceeds the {N} training points; pass at most {N} "
                         "(or batch_size=None for full batches)")
    if cfg.mirrored_batches:
        if not (data.mirrored or mirrored_half(np.asarray(data.X)) is not None):
            raise ValueError("mirrored_batches=True needs symmetric inputs in the layout [X₊; -X₊] "
                             "(build them with bf.symmetrize(X, Y)); pass mirrored_batches=False "
                             "(biasfree analyse: --random-batches) for plain random batches")
        if b % 2:
            raise ValueError(f"batch_size={b}: mirrored batches hold whole pairs (x, -x); pass an even "
                             f"batch_size such as {b + 1 if b + 1 <= N else b - 1}")


_FIELDS = ("steps", "alpha", "lr", "weight_decay", "loss", "batch_size", "mirrored_batches", "seed",
           "n_records", "spacing", "keep_params", "degree", "name")


def _config(optimiser, kw: dict) -> TrainConfig:
    """The run's :class:`TrainConfig`: ``optimiser`` itself when it is one (keywords then set only
    per-member vectors), else built from the optimiser and the keywords."""
    given = {k: v for k, v in kw.items() if v is not None}
    if not (optimiser is None or isinstance(optimiser, TrainConfig) or _is_transformation(optimiser)):
        validate.callable_("optimiser", optimiser, validate.OPTIMISER + ", or a biasfree.TrainConfig")
    for k in ("alpha", "lr", "weight_decay"):
        if k in given:
            try:
                np.asarray(given[k], dtype=float)
            except (TypeError, ValueError):
                raise ValueError(f"{k}={given[k]!r} must be a number or a 1-D array of per-member values "
                                 "(one per ensemble member)") from None
    if isinstance(optimiser, TrainConfig):
        clash = [k for k in given if k not in ("alpha", "lr", "weight_decay")
                 or np.ndim(given[k]) == 0]
        if clash:
            raise TypeError(f"train: pass {', '.join(clash)} in the TrainConfig, not beside it (e.g. "
                            f"dataclasses.replace(cfg, {clash[0]}=...)); only per-member arrays of alpha, "
                            "lr and weight_decay go beside a config")
        return optimiser
    if "steps" not in given:
        raise TypeError("train: steps is required, e.g. train(params, data, optax.sgd(0.01), steps=1000)")
    scalar = {k: v for k, v in given.items() if np.ndim(v) == 0}
    return TrainConfig(optimiser=optimiser, **scalar)


_VECTOR_RULES = {"alpha": lambda v: validate.slope(v, "alpha", array_ok=True),
                 "lr": lambda v: validate.positive("lr", v, why="every member's step size η"),
                 "weight_decay": lambda v: validate.nonnegative("weight_decay", v, why="λ of (λ/2)||θ||²")}


def _check_vectors(kw: dict) -> dict:
    """``kw`` with its per-member arrays of α, η, λ checked (scalars go to the config, checked there)."""
    return {k: _VECTOR_RULES[k](v) if k in _VECTOR_RULES and v is not None and np.ndim(v) > 0 else v
            for k, v in kw.items()}


def _vectors(cfg: TrainConfig, kw: dict) -> dict:
    """Per-member α, η, λ: the keywords' arrays (length B or 1, checked by the caller) or the
    config's value."""
    out = {}
    for k in _VECTOR_RULES:
        v = kw.get(k)
        v = getattr(cfg, k) if v is None or np.ndim(v) == 0 else v
        v = np.asarray(np.nan if v is None else v, dtype=float)
        if v.ndim > 1 or v.size == 0:
            raise ValueError(f"{k} must be a scalar or a 1-D array of per-member values, got shape {v.shape}")
        out[k] = v
    return out


def _member_order(fn):
    """Named members come back in the caller's order (the precision wrapper's tree_map sorts a
    mapping's keys)."""
    @functools.wraps(fn)
    def keeping(params, *args, **kwargs):
        out = fn(params, *args, **kwargs)
        return out.ordered(list(params)) if isinstance(params, Mapping) else out
    return keeping


@_member_order
@precise
def train(params, data: Dataset, optimiser=None, *, steps: int | None = None, alpha=None, lr=None,
          weight_decay=None, loss: str | None = None, batch_size: int | None = None,
          mirrored_batches: bool | None = None, key=None, seed: int | None = None,
          n_records: int | None = None, spacing: str | None = None, keep_params: bool | None = None,
          degree: float | None = None, name: str | None = None, twin=False, batched: bool = False,
          layout: str | None = None, observables: str = "all",
          progress: Callable[[int, int], None] | None = None, time_budget: float | None = None):
    """Train a net (or an ensemble, or named members) by gradient descent or any optax optimiser,
    optionally beside its linear twin (module doc).

    Arguments:

    - ``params``: the initial net (a tuple of layers, e.g. :func:`~biasfree.core.inits.init_gaussian`);
      with ``batched=True`` every weight has a leading member axis B (``jax.vmap(init)(keys)``);
      or a mapping ``{name: Member}`` of named members (returns :class:`~biasfree.dynamics.ensemble.Runs`).
    - ``data``: the :class:`~biasfree.core.data.Dataset` (training and optional test set).
    - ``optimiser``: None (gradient descent at step ``lr``), an ``optax.GradientTransformation``
      (``optax.sgd(η)`` is GD), a factory ``rho -> GradientTransformation``, or a
      :class:`TrainConfig` holding all the settings below.
    - ``steps`` K; ``alpha`` slope α; ``lr`` GD's step η (the time axis' η for another optimiser);
      ``weight_decay`` λ of the coupled ``(λ/2)||θ||²`` (a decoupled decay belongs to the optimiser,
      e.g. ``optax.adamw``); for an ensemble ``alpha``, ``lr`` (GD only) and ``weight_decay`` may be
      arrays of length B. ``loss`` "mse" or "logistic".
    - ``batch_size`` None (full batch) or the points per step; ``mirrored_batches`` draws them as
      mirror pairs (inputs ``[X₊; −X₊]``), else at random; ``key`` the JAX key of the batches
      (default ``PRNGKey(seed)``, ``seed`` 0).
    - ``n_records`` records at ``spacing`` "linear" or "log" steps (0 and K always);
      ``keep_params`` also stores the weights at every record; ``observables`` "all" or "loss"
      (:data:`OBSERVABLES`).
    - ``twin``: False, True (the linear twin of ``params``: weights × c^{(L−1)/L}, §2.4, §4.1) or the
      twin's initial weights; ``degree`` κ of the optimiser for its twin (None: measured, §9.2).
    - ``layout``: how an ensemble's members share the machine ("auto", "map", "vmap":
      :mod:`~biasfree.dynamics.batching`).
    - ``progress(k, K)``: called between chunks of records; ``time_budget``: seconds after which
      the run stops at the end of a chunk (``stats["steps"]`` says how many steps ran).

    Returns a :class:`~biasfree.dynamics.trajectory.Trajectory` recorded on the full data at steps
    k, at times ``t = η k`` (``t = k`` when η is unknown; ``stats["lr"]`` NaN); an ensemble's
    arrays have a leading axis B. With ``twin``, ``traj.twin`` is the twin's trajectory and
    ``traj.twin_gap`` / ``traj.twin_gap_step`` the largest ``|L − L̃|`` over *every* step and where.
    Raises :class:`~biasfree.dynamics.diagnosis.DivergenceError` naming the step where the loss
    blew up; full-batch GD warns with
    :class:`~biasfree.dynamics.diagnosis.LossSpikeWarning` when it spiked between records.

    Example::

        import jax, optax, biasfree as bf
        key = jax.random.PRNGKey(0)
        data = bf.make_dataset(key, bf.sine_target(key, d=5)[0], n=200, d=5)
        adam = lambda rho: optax.adam(1e-3, eps=1e-8 * rho)  # ε ×ρ: the twin is exact (§9.2)
        run = bf.train(bf.pair_up(bf.init_gaussian(key, (5, 10, 1), scale=0.01)), data, adam,
                       steps=500, twin=True)
        run.twin_gap / run.loss[0]       # ~1e-16: Adam's pair net is its linear twin
    """
    kw = dict(steps=steps, alpha=alpha, lr=lr, weight_decay=weight_decay, loss=loss, batch_size=batch_size,
              mirrored_batches=mirrored_batches, seed=seed, n_records=n_records, spacing=spacing,
              keep_params=keep_params, degree=degree, name=name)
    cfg = _config(optimiser, kw)
    kw = _check_vectors(kw)
    validate.flag("batched", batched)
    validate.choice("observables", observables, OBSERVABLES)
    if layout is not None:
        validate.choice("layout", layout, LAYOUTS)
    if progress is not None:
        validate.callable_("progress", progress, "a function called as progress(k, K): k of K steps done")
    if time_budget is not None:
        time_budget = validate.positive("time_budget", time_budget, scalar=True, why="seconds of training")
    if isinstance(params, Mapping):
        from .ensemble import train_members  # named members: grouped into ensemble calls of this loop
        if not params:
            raise ValueError("params: an empty mapping of members; give at least one {name: Member(net)}")
        if twin is not False or batched:
            raise ValueError("train: with named members ask for twins per member (Member(..., twin=True)) "
                             "and leave twin and batched unset")
        return train_members(params, data, cfg, layout=layout)
    return _train(params, data, cfg, kw, key=key, twin=twin, batched=batched, layout=layout,
                  observables=observables, progress=progress, time_budget=time_budget)


def _train(params, data, cfg: TrainConfig, kw: dict | None = None, *, key=None, twin=False, batched=False,
           layout=None, observables="all", progress=None, time_budget=None, segments=None):
    """:func:`train` once the call's own arguments are checked: checks the run's net and data
    (once) and a given twin, then :func:`_run`."""
    run.check_params_data(params, data, cfg.loss, batched=batched)
    if twin is not False and twin is not None and twin is not True:  # an ensemble's: member by member
        check_net(jax.tree_util.tree_map(lambda x: x[0], twin) if batched else twin, "twin")
    return _run(params, data, cfg, kw, key=key, twin=twin, batched=batched, layout=layout,
                observables=observables, progress=progress, time_budget=time_budget, segments=segments)


def _run(params, data, cfg: TrainConfig, kw: dict | None = None, *, key=None, twin=False, batched=False,
         layout=None, observables="all", progress=None, time_budget=None, segments=None):
    """:func:`_train` with the net, the data and a given twin checked by the caller (``analyse``
    checks its net and data once, then runs this): the settings' fit to the data and to each
    other, the job, the run. ``segments`` (B, R−1): each member's own steps between records (an
    ensemble whose members run different step counts; internal)."""
    _check_batches(cfg, data)
    if cfg.batch_size is not None:
        key = jax.random.PRNGKey(cfg.seed) if key is None else (validate.key(key), key)[1]
    elif key is not None:
        raise ValueError("key: full-batch training draws nothing; pass batch_size for minibatches "
                         "or leave key=None")
    vec = _vectors(cfg, kw or {})
    sizes = {k: v.size for k, v in vec.items() if v.ndim > 0}
    if batched:
        sizes["params"] = jax.tree_util.tree_leaves(params)[0].shape[0]
    if segments is not None:
        sizes["segments"] = np.shape(segments)[0]
    B = max(sizes.values(), default=1)
    bad = {k: n for k, n in sizes.items() if n not in (1, B)}
    if bad:
        raise ValueError(f"ensemble sizes disagree: {sizes}; every batched argument "
                         f"({', '.join(sizes)}) needs the same length B (or length 1)")
    if not cfg.gd and vec["lr"].ndim > 0:
        raise ValueError("lr: per-member steps are for gradient descent; an optax optimiser holds its own "
                         "learning rate (pass one lr, the time axis' η, or None)")
    ensemble = bool(sizes)
    depth = len(params)
    if ensemble:  # every per-member value gets its leading axis B
        vec = {k: np.broadcast_to(v, (B,)) for k, v in vec.items()}
        if not batched:
            params = jax.tree_util.tree_map(lambda a: jnp.broadcast_to(a, (B,) + np.shape(a)), params)
    twin_params = None
    if twin is True:  # weights × c^((L−1)/L): √c at depth 2 (§2.4), the odd-part twin beyond (§4.1)
        twin_params = _twin_params(params, vec["alpha"], depth)
    elif twin is not False and twin is not None:
        twin_params = twin
    if twin_params is not None and not cfg.gd and np.ptp(vec["alpha"]) > 0:
        raise ValueError("twin: an optax optimiser's twin depends on α; train members of one α together")
    optimiser = None if cfg.gd else cfg.make(1.0)
    twin_optimiser = (None if twin_params is None or cfg.gd else
                      _optimiser_twin(cfg.optimiser, float(np.ravel(vec["alpha"])[0]), depth, cfg.degree))
    if cfg.gd:
        eta = vec["lr"]
    else:
        one = jax.tree_util.tree_map(lambda x: x[0], params) if ensemble else params
        e = _learning_rate(optimiser, one, cfg.lr)
        eta = None if e is None else (np.full((B,), e) if ensemble else np.asarray(e))
    if segments is None:
        ks = record_steps(cfg.steps, cfg.n_records, cfg.spacing)
    else:
        ks = np.concatenate([np.zeros((B, 1), np.int64), np.cumsum(segments, axis=-1)], axis=-1)
    member = {"params": params, "alpha": vec["alpha"], "decay": vec["weight_decay"]}
    if cfg.gd:
        member["lr"] = vec["lr"]
    if twin_params is not None:
        time_scale = _twin_scales(_slope_factor(vec["alpha"]), depth).time
        member |= {"twin": twin_params, "twin_decay": vec["weight_decay"] / time_scale}
        if cfg.gd:
            member["twin_lr"] = vec["lr"] * time_scale
    member = {k: v if k in ("params", "twin") else jnp.asarray(np.asarray(v, float))
              for k, v in member.items()}
    lay, n_dev = _layout(layout) if ensemble else (None, 1)
    spec = _Spec(optimiser, twin_optimiser, cfg.loss, cfg.keep_params, data.mirrored, cfg.batch_size,
                 cfg.mirrored_batches, twin_params is not None, observables == "loss", segments is not None,
                 lay, n_dev, True)
    shared = {"data": run.arrays(data), "key": key,
              "pinv": None if observables == "loss" else run.pinv(params, data)}
    job = _Job(member, shared, np.diff(ks, axis=-1), ks, eta)
    state, records, n = _drive(job, spec, progress, time_budget)
    _divergence(state, job, cfg, "gradient descent" if cfg.gd else f"training by {cfg.label}")
    return _trajectory(state, records, n, job, cfg, spec)


def _trajectory(state, records, n: int, job: _Job, cfg: TrainConfig, spec: _Spec) -> Trajectory:
    """The :class:`Trajectory` of a finished (or budget-stopped) run."""
    ks = job.ks[..., :n]
    steps_run = ks[..., -1]
    eta = job.eta
    obs = dict(records["net"])
    t = ks * 1.0 if eta is None else float(eta) * ks if np.ndim(eta) == 0 else eta[:, None] * ks
    t = jnp.asarray(t, dtype=obs["loss"].dtype)  # member b's record j at t = η_b k_j
    last = (lambda x: x[..., -1]) if spec.layout is None else (lambda x: x[:, -1])
    L_last = last(obs["loss"])
    if spec.batch_size is None:
        obs["loss_max"] = jnp.maximum(state["peak"], L_last)  # max_k L(θ_k), k = 0..K
    else:  # a batch loss is not L(θ_k): the largest recorded full-data loss
        obs["loss_max"] = jnp.max(obs["loss"], axis=-1)
    stats = {"steps": jnp.asarray(steps_run), "lr": jnp.asarray(np.nan if eta is None else eta)}
    method = "gd" if cfg.gd else "optax"
    if spec.layout is not None:
        stats = {k: jnp.broadcast_to(v, np.shape(obs["loss"])[:1]) for k, v in stats.items()}
    twin = gap = gap_step = None
    if spec.twin:
        tw = dict(records["twin"])
        end = jnp.abs(L_last - last(tw["loss"]))  # the gap at step K (the loop measured 0..K−1)
        later = end > state["gap"]
        gap = jnp.where(later, end, state["gap"])
        gap_step = jnp.where(later, jnp.asarray(steps_run), state["gap_step"])
        tw["loss_max"] = jnp.max(tw["loss"], axis=-1)
        twin = Trajectory(t=t, params=state["q"], stats=stats, method=method,
                          **_complete(tw))
    traj = Trajectory(t=t, params=state["p"], stats=stats, method=method, twin=twin,
                      twin_gap=gap, twin_gap_step=gap_step, **_complete(obs))
    if cfg.gd and spec.batch_size is None:
        check_spike(traj, np.nan if eta is None else eta)
    return traj


def _complete(obs: dict) -> dict:
    """Observables with every Trajectory field (a light record has no β, SVDs or conserved)."""
    out = {"test_loss": None, "beta": None, "singular_values": None, "conserved": None, "path": None}
    return out | obs


__all__ = ["GDConfig", "TrainConfig", "record_steps", "train"]
