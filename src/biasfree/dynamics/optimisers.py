"""Training under any optax optimiser, full batch or minibatches (docs/theory.md §9).

Step k of a run draws a batch B_k (every point when ``batch_size`` is None), takes the
gradient ``g_k = ∇J_B(θ_k)`` of ``J_B(θ) = L_B(θ) + (λ/2)||θ||²`` (L_B the data loss on
B_k, λ ``weight_decay``: the coupled L2 of :func:`~biasfree.dynamics.gd.gd`) and moves by the
optimiser's update ``u_k = h(g_1, …, g_k; θ_k)``:

    θ_{k+1} = θ_k + u_k,   (u_k, s_{k+1}) = optimiser.update(g_k, s_k, θ_k),  s_0 = optimiser.init(θ_0).

Compiled once per optimiser like :func:`~biasfree.dynamics.gd.gd`, whose gradient and
record code it shares (``optax.sgd(η)`` runs the same operations: ``p + (−η)·g`` is
``p − η·g`` in IEEE arithmetic, so the two agree bitwise).

Batches: ``mirrored_batches`` draws ``batch_size/2`` mirror pairs ``(x₊, −x₊)`` per step
(inputs in the layout ``[X₊; −X₊]``), each batch itself symmetric (docs/theory.md §9.3);
otherwise ``batch_size`` points are drawn at random. Both draw without replacement within
a step, independently across steps, from ``fold_in(key, k)``: the batches depend on ``key``
and k only, not on the records.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import optax

from .. import _validate as validate
from ..core.data import Dataset, mirrored_half
from ..core.layers import Params
from ..core.precision import precise
from . import run
from .diagnosis import check_finite
from .gd import record_steps
from .run import RunConfig
from .trajectory import Trajectory


@dataclass(frozen=True, kw_only=True)
class _TrainSettings(RunConfig):
    """The validated keyword arguments of :func:`train` (RunConfig's fields and these)."""

    steps: int = 1000
    batch_size: int | None = None
    mirrored_batches: bool = True
    lr: float | None = None

    def __post_init__(self):
        super().__post_init__()
        self._set_integer("steps", 1)
        if self.batch_size is not None:
            self._set_integer("batch_size", 1)
        validate.flag("mirrored_batches", self.mirrored_batches)
        if self.lr is not None:
            self._set_positive("lr", "the step η that puts record k at time t = η k; None: t = k")


def _check_optimiser(optimiser) -> None:
    if not (hasattr(optimiser, "init") and hasattr(optimiser, "update")
            and callable(optimiser.init) and callable(optimiser.update)):
        raise TypeError(f"optimiser={optimiser!r} must be an optax.GradientTransformation (with init and "
                        "update), e.g. optax.adam(1e-3) or optax.sgd(0.01)")


def _check_batches(cfg: _TrainSettings, data: Dataset, key) -> None:
    if cfg.batch_size is None:
        if key is not None:
            raise ValueError("key: full-batch training draws nothing; pass batch_size for minibatches "
                             "or leave key=None")
        return
    if key is None:
        raise ValueError("key: minibatches are random; pass key=jax.random.PRNGKey(seed)")
    validate.key(key)
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


def _learning_rate(optimiser, params, lr):
    """η for the time axis: ``lr`` if given; else the ``learning_rate`` of an optimiser
    built with ``optax.inject_hyperparams`` when it stays the same over the first two
    steps (a schedule does not: then, as for any other optimiser, None)."""
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


def _batch_fn(arrays, batch_size, mirrored_batches, stored_mirrored):
    """``(k, key) -> (X_B, Y_B, mirrored)`` for step k (see module doc), or None (full batch)."""
    if batch_size is None:
        return None
    X, Y = arrays[0], arrays[1]
    if mirrored_batches:
        n = Y.shape[0] // 2

        def draw(k, key):
            i = jax.random.choice(jax.random.fold_in(key, k), n, (batch_size // 2,), replace=False)
            Yb = jnp.concatenate([Y[i], Y[n + i]])
            Xb = X[i] if stored_mirrored else jnp.concatenate([X[i], X[n + i]])
            return Xb, Yb
        return draw, stored_mirrored
    Xfull = jnp.concatenate([X, -X]) if stored_mirrored else X

    def draw(k, key):
        i = jax.random.choice(jax.random.fold_in(key, k), Y.shape[0], (batch_size,), replace=False)
        return Xfull[i], Y[i]
    return draw, False


def train_run(params, data, alpha, weight_decay, segments, key, pinv_X, *, optimiser, loss,
              keep_params=False, mirrored=False, batch_size=None, mirrored_batches=True):
    """``(θ_K, observables)``: ``segments[j]`` steps between records j and j + 1 (traceable
    but for the keyword arguments: the ``optimiser`` closed over, the rest static)."""
    batches = _batch_fn(data, batch_size, mirrored_batches, mirrored)
    grad = run.grad_fn(mirrored if batches is None else batches[1])

    def step(_, carry):
        p, s, peak, k = carry
        Xb, Yb = (data[0], data[1]) if batches is None else batches[0](k, key)
        g, L = grad(p, Xb, Yb, alpha, weight_decay, loss)
        u, s = optimiser.update(g, s, p)
        return optax.apply_updates(p, u), s, jnp.maximum(peak, L), k + 1

    def segment(carry, n):
        carry = jax.lax.fori_loop(0, n, step, carry)
        return carry, run.record(carry[0], data, alpha, loss, pinv_X, keep_params, mirrored)

    # record 0 is a segment of 0 steps, so the record is traced once, inside the loop (as gd)
    segments = jnp.concatenate([jnp.zeros((1,), jnp.asarray(segments).dtype), segments])
    first = (data[0], data[1]) if batches is None else batches[0](0, key)
    L_type = jax.eval_shape(lambda p: grad(p, *first, alpha, weight_decay, loss)[1], params)
    start = (params, optimiser.init(params), jnp.full((), -jnp.inf, L_type.dtype), jnp.zeros((), jnp.int32))
    (final, _, peak, _), obs = jax.lax.scan(segment, start, segments)
    if batches is None:
        obs["loss_max"] = jnp.maximum(peak, obs["loss"][-1])  # max_k L(θ_k), k = 0..K
    else:  # a batch loss is not L(θ_k): the largest recorded full-data loss
        obs["loss_max"] = jnp.max(obs["loss"])
    return final, obs


TRAIN_STATIC = ("loss", "keep_params", "mirrored", "batch_size", "mirrored_batches")
_COMPILED: OrderedDict = OrderedDict()
CACHE_SIZE = 8
"""Optimisers whose compiled loop is kept. An optimiser is a closure, so each one is its own
program; keeping every one (a static argument of one module-level ``jit``) leaked them all:
about 150 memory maps each (Muon's more), and a long session ran out of them ("LLVM
compilation error: Cannot allocate memory", then a crash). The least recently used is
dropped, with its executables."""


def _train_core(*args, optimiser, **kwargs):
    """``train_run`` compiled for ``optimiser``: one jitted function per optimiser, found by
    equality (a GradientTransformation is a NamedTuple of its two functions, rebuilt by
    every tree_map such as the precision cast of ``precise``, so not by identity)."""
    try:
        key = (hash(optimiser), optimiser)
    except TypeError:  # unhashable: found by identity, kept alive in its entry
        key = ("id", id(optimiser))
    hit = _COMPILED.get(key)
    if hit is None or (key[0] == "id" and hit[0] is not optimiser):
        hit = (optimiser, jax.jit(partial(train_run, optimiser=optimiser), static_argnames=TRAIN_STATIC))
        _COMPILED[key] = hit
        while len(_COMPILED) > CACHE_SIZE:
            _COMPILED.popitem(last=False)
    _COMPILED.move_to_end(key)
    return hit[1](*args, **kwargs)


@precise
def train(params: Params, data: Dataset, optimiser, *, steps: int, alpha: float = 0.0,
          batch_size: int | None = None, mirrored_batches: bool = True, key=None,
          lr: float | None = None, loss: str = "mse", weight_decay: float = 0.0,
          n_records: int = 101, spacing: str = "linear", keep_params: bool = False) -> Trajectory:
    """Train ``params`` on ``data`` with an optax ``optimiser`` for ``steps`` steps K:
    ``θ_{k+1} = θ_k + u_k``, ``u_k`` the optimiser's update of ``g_k = ∇J_B(θ_k)`` (module doc).

    ``alpha`` slope α; ``loss`` "mse" or "logistic"; ``weight_decay`` λ of the coupled
    ``(λ/2)||θ||²`` in J (a decoupled decay belongs to the optimiser, e.g. ``optax.adamw``);
    ``batch_size`` None (full batch) or the points per step; ``mirrored_batches`` draws
    them as mirror pairs (the data's inputs must be ``[X₊; −X₊]``), else at random;
    ``key`` the JAX key of the batches (required with ``batch_size``, refused without);
    ``n_records``, ``spacing``, ``keep_params`` as in :class:`~biasfree.dynamics.gd.GDConfig`.

    Returns the :class:`Trajectory` of :func:`~biasfree.dynamics.gd.gd`, recorded on the
    full data at steps k: at times ``t = η k`` when the step η is known (``lr``, or the
    constant ``learning_rate`` of an ``optax.inject_hyperparams`` optimiser), else
    ``t = k``; ``stats`` holds ``steps`` and ``lr`` (NaN when unknown). ``loss_max`` is
    ``max_k L(θ_k)`` over every step for full batches, the largest recorded loss with
    minibatches. Raises :class:`~biasfree.dynamics.diagnosis.DivergenceError` if the loss
    blows up. ``train(p, data, optax.sgd(η), steps=K, alpha=α)`` equals
    ``gd(p, data, GDConfig(lr=η, steps=K, alpha=α))`` bitwise.
    """
    _check_optimiser(optimiser)
    cfg = _TrainSettings(steps=steps, alpha=alpha, batch_size=batch_size, mirrored_batches=mirrored_batches,
                         lr=lr, loss=loss, weight_decay=weight_decay, n_records=n_records,
                         spacing=spacing, keep_params=keep_params)
    run.check_params_data(params, data, cfg.loss)
    _check_batches(cfg, data, key)
    eta = _learning_rate(optimiser, params, cfg.lr)
    ks = record_steps(cfg.steps, cfg.n_records, cfg.spacing)
    final, obs = _train_core(params, run.arrays(data), cfg.alpha, cfg.weight_decay, jnp.asarray(np.diff(ks)),
                             key, run.pinv(params, data), optimiser=optimiser, loss=cfg.loss,
                             keep_params=cfg.keep_params, mirrored=data.mirrored, batch_size=cfg.batch_size,
                             mirrored_batches=cfg.mirrored_batches)
    t = jnp.asarray(ks * (1.0 if eta is None else eta), dtype=obs["loss"].dtype)
    stats = {"steps": jnp.asarray(cfg.steps), "lr": jnp.asarray(np.nan if eta is None else eta)}
    traj = Trajectory(t=t, params=final, stats=stats, method="optax", **obs)
    check_finite(traj, np.nan if eta is None else eta, "training")
    return traj
