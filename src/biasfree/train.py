"""Training engine: full-batch gradient descent and true gradient flow.

Gradient descent (THEORY.md §0): ``θ_{k+1} = θ_k - η ∇J(θ_k)`` with
``J(θ) = L(θ) + (λ/2)||θ||²``, compiled once with ``jit`` and ``lax.scan`` over record
intervals (``lax.fori_loop`` inside), so no Python runs per step and only the chosen
records are stored. Gradient flow: ``dθ/dt = -∇J(θ)`` integrated by diffrax with an
adaptive Runge–Kutta method. Both return a :class:`~biasfree.trajectory.Trajectory`
on the same time axis ``t = η k``.

Ensembles (many α, learning rates, weight decays, seeds or init scales) run in one
compiled call: :func:`gd_ensemble`, :func:`flow_ensemble` (layouts below).

Symmetric data: when ``data.mirrored`` (inputs ``[X₊; -X₊]``, see :class:`Dataset`),
every run differentiates :func:`~biasfree.losses.objective_mirrored`, which computes
the first layer's product once for both halves: the same trajectory to round-off at
about half the cost.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import diffrax
import jax
import jax.numpy as jnp
import numpy as np

from .data import Dataset
from .losses import check_loss, objective, objective_mirrored
from .nets import Params, beta_eff_is_exact, check_alpha
from .precision import precise
from .trajectory import Trajectory, observe

SPACINGS = ("linear", "log")
SOLVERS = {"tsit5": diffrax.Tsit5, "dopri5": diffrax.Dopri5, "dopri8": diffrax.Dopri8,
           "kvaerno5": diffrax.Kvaerno5}


class DivergenceError(RuntimeError):
    """Gradient descent left every bounded region: the step size is too large."""


def _check_common(alpha, loss, weight_decay, n_records, spacing):
    check_alpha(alpha)
    check_loss(loss)
    _check_decay(weight_decay)
    if n_records < 2:
        raise ValueError(f"n_records={n_records} must be >= 2 (the start and the end)")
    if spacing not in SPACINGS:
        raise ValueError(f"spacing={spacing!r}: choose 'linear' or 'log'")


def _check_decay(weight_decay) -> None:
    wd = np.asarray(weight_decay, dtype=float)
    if not np.all(np.isfinite(wd)) or np.any(wd < 0):
        raise ValueError(f"weight_decay={weight_decay!r} must be finite and >= 0")


def _check_int(name: str, value, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < minimum:
        raise ValueError(f"{name}={value!r} must be an integer >= {minimum}")


@dataclass(frozen=True)
class GDConfig:
    """Full-batch gradient descent.

    ``alpha`` slope α; ``lr`` step η; ``steps`` number of steps K (time t = ηK);
    ``loss`` "mse" or "logistic"; ``weight_decay`` λ; ``n_records`` records at
    ``spacing`` "linear" or "log" steps (step 0 and K always included);
    ``keep_params`` also stores the parameters at every record (``Trajectory.path``).
    """

    alpha: float = 0.0
    lr: float = 0.01
    steps: int = 1000
    loss: str = "mse"
    weight_decay: float = 0.0
    n_records: int = 101
    spacing: str = "linear"
    keep_params: bool = False

    def __post_init__(self):
        _check_common(self.alpha, self.loss, self.weight_decay, self.n_records, self.spacing)
        if not self.lr > 0 or not np.isfinite(self.lr):
            raise ValueError(f"learning rate lr={self.lr} must be a positive finite number")
        _check_int("steps", self.steps, 1)
        _check_int("n_records", self.n_records, 2)

    @property
    def t_max(self) -> float:
        return self.lr * self.steps


@dataclass(frozen=True)
class FlowConfig:
    """Gradient flow ``dθ/dt = -∇J(θ)`` solved by diffrax up to ``t_max``.

    ``rtol``/``atol`` the adaptive step-size tolerances, ``solver`` one of
    tsit5, dopri5, dopri8, kvaerno5; ``max_steps`` the solver's step budget;
    other fields as in :class:`GDConfig`.
    """

    alpha: float = 0.0
    t_max: float = 10.0
    loss: str = "mse"
    weight_decay: float = 0.0
    n_records: int = 101
    spacing: str = "linear"
    keep_params: bool = False
    rtol: float = 1e-8
    atol: float = 1e-10
    solver: str = "tsit5"
    max_steps: int = 200_000

    def __post_init__(self):
        _check_common(self.alpha, self.loss, self.weight_decay, self.n_records, self.spacing)
        if not (self.t_max > 0 and np.isfinite(self.t_max)):
            raise ValueError(f"t_max={self.t_max} must be a positive finite time")
        _check_int("max_steps", self.max_steps, 1)
        _check_int("n_records", self.n_records, 2)
        if self.solver not in SOLVERS:
            raise ValueError(f"solver={self.solver!r}: choose one of {', '.join(SOLVERS)}")
        if not (self.rtol > 0 and self.atol > 0):
            raise ValueError("rtol and atol must be > 0")


def record_steps(steps: int, n_records: int, spacing: str = "linear") -> np.ndarray:
    """Distinct integer steps ``0 = k_0 < ... < k_R = steps`` at which to record."""
    if spacing == "log":
        ks = np.geomspace(1, steps, max(n_records - 1, 1))
    else:
        ks = np.linspace(0, steps, n_records)
    return np.unique(np.concatenate([[0], np.round(ks).astype(np.int64), [steps]]))


def record_times(t_max: float, n_records: int, spacing: str = "linear") -> np.ndarray:
    """Recording times in [0, t_max]; log spacing starts at ``t_max · 1e-4``."""
    if spacing == "log":
        return np.concatenate([[0.0], np.geomspace(t_max * 1e-4, t_max, n_records - 1)])
    return np.linspace(0.0, t_max, n_records)


def _check_params_data(params: Params, data: Dataset):
    if not isinstance(data, Dataset):
        raise TypeError("data must be a biasfree.Dataset (see biasfree.make_dataset)")
    d, p = params[0].W.shape[-1], params[-1].W.shape[-2]
    if data.inputs.shape[1] != d:
        raise ValueError(f"network expects inputs of size d={d} but X has {data.inputs.shape[1]} columns")
    if data.Y.shape[1] != p:
        raise ValueError(f"network has {p} outputs but Y has {data.Y.shape[1]} columns")


def _pinv(params: Params, data: Dataset):
    """X⁺ for the least-squares β_eff (of X₊ alone when the inputs are mirrored)."""
    return None if beta_eff_is_exact(params) else jnp.linalg.pinv(data.inputs)


def _arrays(data: Dataset) -> tuple:
    """``(X or X₊, Y, X_test, Y_test)``: the arrays the compiled engine takes; with
    ``data.mirrored`` the first is the positive half X₊ only."""
    return (data.inputs, data.Y, data.X_test, data.Y_test)


def _grad_fn(mirrored: bool):
    """``∇J(θ)`` as a function of ``(params, X, Y, alpha, weight_decay, loss)``; with
    ``mirrored`` X is X₊ and the fast path of :func:`~biasfree.losses.objective_mirrored`
    halves the first layer's products."""
    return jax.grad(objective_mirrored if mirrored else objective)


def _obs(params, arrays, alpha, loss, pinv_X, keep_params=False, mirrored=False):
    X, Y, X_test, Y_test = arrays
    obs = observe(params, X, Y, alpha, loss, X_test, Y_test, pinv_X, mirrored=mirrored)
    obs["path"] = params if keep_params else None
    return obs


def _stack0(first, rest):
    return jax.tree_util.tree_map(lambda a, b: jnp.concatenate([a[None], b]), first, rest)


def _gd_run(params, data, alpha, lr, weight_decay, segments, loss, pinv_X, keep_params=False,
            mirrored=False):
    grad = _grad_fn(mirrored)

    def step(_, p):
        g = grad(p, data[0], data[1], alpha, weight_decay, loss)
        return jax.tree_util.tree_map(lambda a, b: a - lr * b, p, g)

    def segment(p, n):
        p = jax.lax.fori_loop(0, n, step, p)
        return p, _obs(p, data, alpha, loss, pinv_X, keep_params, mirrored)

    final, rest = jax.lax.scan(segment, params, segments)
    return final, _stack0(_obs(params, data, alpha, loss, pinv_X, keep_params, mirrored), rest)


_GD_STATIC = ("loss", "keep_params", "mirrored")
_gd_core = jax.jit(_gd_run, static_argnames=_GD_STATIC)


# ----------------------------------------------------------- ensemble layouts
#
# How B members run in one compiled call (measured in benchmarks/bench_engine.py):
# - "map": ``lax.map``, one member after another inside the program, each with the
#   single run's own kernels; with several devices (on a CPU, one per core with
#   ``XLA_FLAGS=--xla_force_host_platform_device_count=K`` set before JAX starts) the
#   members are split over them by ``shard_map``, which runs them in parallel.
# - "vmap": one batched program; batched matmuls. On XLA's CPU backend these ran at
#   0.6-0.75x of the same runs one after another (PERFORMANCE.md); on a GPU they are
#   the natural choice.
# "auto" takes "vmap" on GPU/TPU and "map" on CPU, spread over every host device.
# Measured on 2 cores, B = 6, against 6 sequential runs: width 500, N 1024: 1.17-1.32x
# spread over 2 devices, 0.84-0.90x on one; width 40, N 400: 1.8x spread. (On a
# machine whose cores are busy with other work, spreading can lose: 0.8-0.9x.)
LAYOUTS = ("auto", "map", "vmap")


def _layout(layout: str | None) -> tuple[str, int]:
    """``(layout, n_devices)`` for an ensemble: see the comment above."""
    layout = "auto" if layout is None else layout
    if layout not in LAYOUTS:
        raise ValueError(f"layout={layout!r}: choose one of {', '.join(LAYOUTS)}")
    if layout == "auto":
        layout = "map" if jax.default_backend() == "cpu" else "vmap"
    return layout, (len(jax.devices()) if layout == "map" else 1)


def _over_members(fn, members, shared, layout: str, n_dev: int):
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


@partial(jax.jit, static_argnames=_GD_STATIC + ("layout", "n_dev"))
def _gd_batch(params, data, alpha, lr, weight_decay, segments, loss, pinv_X, keep_params=False,
              mirrored=False, layout="map", n_dev=1):
    def one(m, sh):
        (p, a, e, w), (dat, seg, pinv) = m, sh
        return _gd_run(p, dat, a, e, w, seg, loss, pinv, keep_params, mirrored)

    return _over_members(one, (params, alpha, lr, weight_decay), (data, segments, pinv_X),
                         layout, n_dev)


def _check_finite(traj: Trajectory, lrs, what: str):
    L = np.asarray(traj.loss).reshape(-1, np.shape(traj.loss)[-1])
    L0 = np.abs(L[:, :1]) + 1e-300
    bad = ~np.isfinite(L) | (L > 1e8 * np.maximum(L0, 1.0))
    if bad.any():
        members = np.nonzero(bad.any(axis=1))[0]
        i = int(members[0])
        j = int(np.argmax(bad[i]))
        t = float(np.asarray(traj.t).reshape(L.shape)[i, j])
        lr = float(np.broadcast_to(np.asarray(lrs), (L.shape[0],))[i])
        who = "" if L.shape[0] == 1 else f" (ensemble members {members.tolist()})"
        raise DivergenceError(
            f"{what} diverged{who}: the loss reached {L[i, j]:.3g} by t={t:.4g} "
            f"with lr={lr:g}. The step is too large for this loss landscape (GD is "
            f"stable only for lr < 2/λ_max(Hessian)); try lr={lr / 4:g}, or use "
            "gradient flow (biasfree.flow)."
        )


def _to_traj(t, final, obs, stats, method):
    return Trajectory(t=t, loss=obs["loss"], test_loss=obs["test_loss"], beta=obs["beta"],
                      even_energy=obs["even_energy"],
                      singular_values=obs["singular_values"], conserved=obs["conserved"],
                      params=final, stats=stats, method=method, path=obs["path"])


@precise
def gd(params: Params, data: Dataset, cfg: GDConfig) -> Trajectory:
    """Run full-batch gradient descent ``θ_{k+1} = θ_k - η ∇J(θ_k)`` (see module doc).

    ``params`` the initial network, ``data`` the training (and test) set, ``cfg`` a
    :class:`GDConfig`. Raises :class:`DivergenceError` if the loss blows up.
    """
    _check_params_data(params, data)
    ks = record_steps(cfg.steps, cfg.n_records, cfg.spacing)
    final, obs = _gd_core(params, _arrays(data), cfg.alpha, cfg.lr, cfg.weight_decay,
                          jnp.asarray(np.diff(ks)), cfg.loss, _pinv(params, data),
                          cfg.keep_params, data.mirrored)
    traj = _to_traj(jnp.asarray(cfg.lr * ks), final, obs, {"steps": jnp.asarray(cfg.steps)}, "gd")
    _check_finite(traj, cfg.lr, "gradient descent")
    return traj


def _flow_solve(params, data, alpha, weight_decay, ts, loss, pinv_X, rtol, atol, solver,
                max_steps, keep_params=False, mirrored=False):
    grad = _grad_fn(mirrored)

    def vector_field(t, p, args):
        g = grad(p, data[0], data[1], alpha, weight_decay, loss)
        return jax.tree_util.tree_map(jnp.negative, g)

    sol = diffrax.diffeqsolve(
        diffrax.ODETerm(vector_field), SOLVERS[solver](), ts[0], ts[-1], None, params,
        saveat=diffrax.SaveAt(ts=ts),
        stepsize_controller=diffrax.PIDController(rtol=rtol, atol=atol),
        max_steps=max_steps, throw=False,
    )
    obs = jax.vmap(lambda p: _obs(p, data, alpha, loss, pinv_X, mirrored=mirrored))(sol.ys)
    obs["path"] = sol.ys if keep_params else None
    final = jax.tree_util.tree_map(lambda a: a[-1], sol.ys)
    stats = {"steps": sol.stats["num_steps"], "accepted": sol.stats["num_accepted_steps"],
             "rejected": sol.stats["num_rejected_steps"],
             "ok": sol.result == diffrax.RESULTS.successful}
    return final, obs, stats


_FLOW_STATIC = ("loss", "solver", "max_steps", "keep_params", "mirrored")
_flow_core = jax.jit(_flow_solve, static_argnames=_FLOW_STATIC)


@partial(jax.jit, static_argnames=_FLOW_STATIC + ("layout", "n_dev"))
def _flow_batch(params, data, alpha, weight_decay, ts, loss, pinv_X, rtol, atol, solver, max_steps,
                keep_params=False, mirrored=False, layout="map", n_dev=1):
    def one(m, sh):
        (p, a, w), (dat, t, pinv, rt, at) = m, sh
        return _flow_solve(p, dat, a, w, t, loss, pinv, rt, at, solver, max_steps,
                           keep_params, mirrored)

    return _over_members(one, (params, alpha, weight_decay), (data, ts, pinv_X, rtol, atol),
                         layout, n_dev)


def _check_flow(traj: Trajectory, cfg: FlowConfig):
    ok = np.asarray(traj.stats["ok"])
    if not ok.all():
        raise RuntimeError(
            f"gradient flow did not reach t_max={cfg.t_max}: the solver stopped after "
            f"{int(np.max(traj.stats['steps']))} steps (max_steps={cfg.max_steps}). Raise "
            "max_steps, loosen rtol/atol, or use solver='kvaerno5' for stiff problems."
        )
    L = np.asarray(traj.loss)
    if not np.all(np.isfinite(L)):
        raise RuntimeError(
            f"gradient flow produced a non-finite loss before t_max={cfg.t_max}: the flow "
            "blew up (e.g. a negative-curvature direction with large init, or data of "
            "extreme scale). Rescale the data or the init, or shorten t_max.")


@precise
def flow(params: Params, data: Dataset, cfg: FlowConfig) -> Trajectory:
    """Integrate gradient flow ``dθ/dt = -∇J(θ)`` with diffrax (see module doc).

    Adaptive steps to relative/absolute tolerance ``cfg.rtol``/``cfg.atol``; records
    at ``n_records`` times in [0, t_max]. ``stats`` holds the solver's step counts.
    """
    _check_params_data(params, data)
    ts = jnp.asarray(record_times(cfg.t_max, cfg.n_records, cfg.spacing))
    final, obs, stats = _flow_core(params, _arrays(data), cfg.alpha, cfg.weight_decay, ts, cfg.loss,
                                   _pinv(params, data), cfg.rtol, cfg.atol, cfg.solver,
                                   cfg.max_steps, cfg.keep_params, data.mirrored)
    traj = _to_traj(ts, final, obs, stats, "flow")
    _check_flow(traj, cfg)
    return traj


# ------------------------------------------------------------------- ensembles


def _batch(params, batched_params: bool, **vectors):
    sizes = {k: np.size(v) for k, v in vectors.items() if v is not None and np.ndim(v) > 0}
    if batched_params:
        sizes["params"] = jax.tree_util.tree_leaves(params)[0].shape[0]
    B = max(sizes.values(), default=1)
    bad = {k: n for k, n in sizes.items() if n not in (1, B)}
    if bad:
        raise ValueError(f"ensemble sizes disagree: {sizes}; every batched argument needs "
                         f"the same length (or length 1)")
    out = {k: jnp.broadcast_to(jnp.asarray(v, dtype=float), (B,)) for k, v in vectors.items()}
    if "wd" in out:
        _check_decay(out["wd"])
    if not batched_params:
        params = jax.tree_util.tree_map(lambda a: jnp.broadcast_to(a, (B,) + a.shape), params)
    return B, params, out


@precise
def gd_ensemble(params: Params, data: Dataset, cfg: GDConfig, *, alpha=None, lr=None,
                weight_decay=None, batched_params: bool = True, layout: str | None = None) -> Trajectory:
    """Many gradient-descent runs in one compiled call.

    ``params`` carry a leading ensemble axis B if ``batched_params`` (e.g. from
    ``jax.vmap(init)(keys)``), else are shared. ``alpha``, ``lr``, ``weight_decay``:
    arrays of length B (or scalars) overriding ``cfg``. Returns a Trajectory whose
    every array has a leading axis B (``t`` is (B, T): ``t = η_b k``). ``layout``:
    "auto" (default), "map" or "vmap", how the members share the machine (see
    :data:`LAYOUTS`); on a CPU with several host devices "map" runs members in parallel.
    """
    a = cfg.alpha if alpha is None else alpha
    e = cfg.lr if lr is None else lr
    w = cfg.weight_decay if weight_decay is None else weight_decay
    check_alpha(a)
    if np.any(np.asarray(e) <= 0):
        raise ValueError(f"learning rates must be > 0, got {e}")
    B, params, v = _batch(params, batched_params, alpha=a, lr=e, wd=w)
    one = jax.tree_util.tree_map(lambda x: x[0], params)
    _check_params_data(one, data)
    ks = record_steps(cfg.steps, cfg.n_records, cfg.spacing)
    lay, n_dev = _layout(layout)
    final, obs = _gd_batch(params, _arrays(data), v["alpha"], v["lr"], v["wd"],
                           jnp.asarray(np.diff(ks)), cfg.loss, _pinv(one, data),
                           cfg.keep_params, data.mirrored, lay, n_dev)
    t = v["lr"][:, None] * jnp.asarray(ks)[None, :]
    traj = _to_traj(t, final, obs, {"steps": jnp.full((B,), cfg.steps)}, "gd")
    _check_finite(traj, v["lr"], "gradient descent")
    return traj


@precise
def flow_ensemble(params: Params, data: Dataset, cfg: FlowConfig, *, alpha=None,
                  weight_decay=None, batched_params: bool = True, layout: str | None = None) -> Trajectory:
    """Many gradient-flow solves in one compiled call (see :func:`gd_ensemble` for the
    batching rules and ``layout``). With "map" each member takes its own adaptive steps."""
    a = cfg.alpha if alpha is None else alpha
    w = cfg.weight_decay if weight_decay is None else weight_decay
    check_alpha(a)
    B, params, v = _batch(params, batched_params, alpha=a, wd=w)
    one = jax.tree_util.tree_map(lambda x: x[0], params)
    _check_params_data(one, data)
    ts = jnp.asarray(record_times(cfg.t_max, cfg.n_records, cfg.spacing))

    lay, _ = _layout(layout)
    # one device: diffrax solves spread over host devices by shard_map hung (idle CPUs)
    # in the leaky-collapse experiment; cause not isolated (equinox's runtime checks use
    # host callbacks, a likely suspect). GD's loop is pure XLA and spreads.
    n_dev = 1
    final, obs, stats = _flow_batch(params, _arrays(data), v["alpha"], v["wd"], ts, cfg.loss,
                                    _pinv(one, data), cfg.rtol, cfg.atol, cfg.solver,
                                    cfg.max_steps, cfg.keep_params, data.mirrored, lay, n_dev)
    traj = _to_traj(jnp.broadcast_to(ts, (B,) + ts.shape), final, obs, stats, "flow")
    _check_flow(traj, cfg)
    return traj
