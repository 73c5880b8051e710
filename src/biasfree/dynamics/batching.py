"""Ensembles: how many runs share the machine in one compiled call, and gradient flow's
ensemble (the discrete-time ensembles are :func:`~biasfree.dynamics.trainer.train`'s).

The members differ in their parameters (a leading axis B) and in α, η and λ (arrays of
length B); the data are shared. How B members share the machine, ``layout`` (timed by
benchmarks/bench_engine.py; numbers in docs/performance.md, "Ensembles"):

- "map": ``lax.map``, one member after another inside the program, each with the
  single run's own kernels; with several devices (on a CPU, one per core with
  ``XLA_FLAGS=--xla_force_host_platform_device_count=K`` set before JAX starts) the
  members are split over them by ``shard_map``, which runs them in parallel.
- "vmap": one batched program; batched matmuls. On XLA's CPU backend these run slower
  than the same runs one after another; on a GPU they are the natural choice.
- "auto" takes "vmap" on GPU/TPU and "map" on CPU, spread over every host device.

Spreading over host devices pays when the cores are free for it; on cores busy with
other work it can lose to one device.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from .. import _validate as validate
from ..core.data import Dataset
from ..core.layers import Params
from ..core.precision import precise
from . import run
from .flow import FLOW_STATIC, FlowConfig, check_flow, flow_solve, record_times
from .trajectory import Trajectory

LAYOUTS = ("auto", "map", "vmap")


def ensemble_layout(layout: str | None) -> tuple[str, int]:
    """``(layout, n_devices)`` for an ensemble (``layout`` checked by ``_batch``): see the module doc."""
    if layout in (None, "auto"):
        layout = "map" if jax.default_backend() == "cpu" else "vmap"
    return layout, (len(jax.devices()) if layout == "map" else 1)


def over_members(fn, members, shared, layout: str, n_dev: int):
    """``fn(member, shared)`` for every member along axis 0 of the pytree ``members``,
    stacked along axis 0; ``shared`` (data) is the same for all."""
    if layout == "vmap":
        return jax.vmap(lambda m: fn(m, shared))(members)

    def body(ms, sh):
        return jax.lax.map(lambda m: fn(m, sh), ms)

    B = jax.tree_util.tree_leaves(members)[0].shape[0]
    n_dev = min(n_dev, B)
    if n_dev == 1:
        return body(members, shared)
    pad = -B % n_dev  # repeat the last member so that every device gets as many
    if pad:
        members = jax.tree_util.tree_map(
            lambda a: jnp.concatenate([a, jnp.repeat(a[-1:], pad, axis=0)]), members)
    mesh = jax.sharding.Mesh(np.array(jax.devices()[:n_dev]), ("members",))
    spec = jax.sharding.PartitionSpec("members")
    out = jax.shard_map(body, mesh=mesh, in_specs=(spec, jax.sharding.PartitionSpec()),
                        out_specs=spec, check_vma=False)(members, shared)
    return jax.tree_util.tree_map(lambda a: a[:B], out) if pad else out


@partial(jax.jit, static_argnames=FLOW_STATIC + ("layout",))
def _flow_batch(params, data, alpha, weight_decay, ts, loss, pinv_X, rtol, atol, solver, max_steps,
                keep_params=False, mirrored=False, layout="map"):
    def one(m, sh):
        (p, a, w), (dat, t, pinv, rt, at) = m, sh
        return flow_solve(p, dat, a, w, t, loss, pinv, rt, at, solver, max_steps,
                          keep_params, mirrored)

    # one device: diffrax solves spread over host devices by shard_map hung (idle CPUs)
    # in the leaky-collapse experiment; cause not isolated (equinox's runtime checks use
    # host callbacks, a likely suspect). GD's loop is pure XLA and spreads.
    return over_members(one, (params, alpha, weight_decay), (data, ts, pinv_X, rtol, atol), layout, 1)


def _batch(params, data, cfg, batched_params, layout, **vectors):
    """Validate an ensemble's arguments (``cfg``'s type checked by the caller); ``(B, params
    with axis B, {name: (B,) array})``, each vector's None replaced by the config's value."""
    validate.flag("batched_params", batched_params)
    if layout is not None:
        validate.choice("layout", layout, LAYOUTS)
    rules = {"alpha": lambda v: validate.slope(v, "alpha", array_ok=True),
             "lr": lambda v: validate.positive("lr", v, why="every member's step size η"),
             "weight_decay": lambda v: validate.nonnegative("weight_decay", v, why="λ of (λ/2)||θ||²")}
    vectors = {k: np.asarray(rules[k](getattr(cfg, k) if v is None else v), dtype=float)
               for k, v in vectors.items()}
    for k, v in vectors.items():
        if v.ndim > 1 or v.size == 0:
            raise ValueError(f"{k} must be a scalar or a 1-D array of per-member values, got shape "
                             f"{v.shape}")
    run.check_params_data(params, data, cfg.loss, batched=batched_params)
    sizes = {k: v.size for k, v in vectors.items() if v.ndim > 0}
    if batched_params:
        sizes["params"] = jax.tree_util.tree_leaves(params)[0].shape[0]
    B = max(sizes.values(), default=1)
    bad = {k: n for k, n in sizes.items() if n not in (1, B)}
    if bad:
        raise ValueError(f"ensemble sizes disagree: {sizes}; every batched argument "
                         f"({', '.join(sizes)}) needs the same length B (or length 1)")
    out = {k: jnp.broadcast_to(jnp.asarray(v, dtype=float), (B,)) for k, v in vectors.items()}
    if not batched_params:
        params = jax.tree_util.tree_map(lambda a: jnp.broadcast_to(a, (B,) + a.shape), params)
    return B, params, out


@precise
def flow_ensemble(params: Params, data: Dataset, cfg: FlowConfig, *, alpha=None,
                  weight_decay=None, batched_params: bool = True, layout: str | None = None) -> Trajectory:
    """Many gradient-flow solves in one compiled call.

    ``params`` carry a leading ensemble axis B if ``batched_params`` (e.g. from
    ``jax.vmap(init)(keys)``), else are shared. ``alpha``, ``weight_decay``: arrays of length B
    (or scalars) overriding ``cfg``. Returns a Trajectory whose every array has a leading axis
    B. ``layout``: "auto" (default), "map" or "vmap", how the members share the machine (module
    doc). With "map" each member takes its own adaptive steps."""
    run.check_cfg(cfg, FlowConfig)
    B, params, v = _batch(params, data, cfg, batched_params, layout, alpha=alpha,
                          weight_decay=weight_decay)
    ts = jnp.asarray(record_times(cfg.t_max, cfg.n_records, cfg.spacing))
    final, obs, stats = _flow_batch(params, run.arrays(data), v["alpha"], v["weight_decay"], ts,
                                    cfg.loss, run.pinv(params, data), cfg.rtol, cfg.atol, cfg.solver,
                                    cfg.max_steps, cfg.keep_params, data.mirrored, ensemble_layout(layout)[0])
    traj = Trajectory(t=jnp.broadcast_to(ts, (B,) + ts.shape), params=final, stats=stats, method="flow",
                      **obs)
    check_flow(traj, cfg, data, v["alpha"], v["weight_decay"])
    return traj
