"""Training engine: full-batch gradient descent and true gradient flow.

Gradient descent (THEORY.md §0): ``θ_{k+1} = θ_k - η ∇J(θ_k)`` with
``J(θ) = L(θ) + (λ/2)||θ||²``, compiled once with ``jit`` and ``lax.scan`` over record
intervals (``lax.fori_loop`` inside), so no Python runs per step and only the chosen
records are stored. Gradient flow: ``dθ/dt = -∇J(θ)`` integrated by diffrax with an
adaptive Runge–Kutta method. Both return a :class:`~biasfree.dynamics.trajectory.Trajectory`
on the same time axis ``t = η k``.

Ensembles (many α, learning rates, weight decays, seeds or init scales) run in one
compiled call: :func:`gd_ensemble`, :func:`flow_ensemble` (layouts below).

Symmetric data: when ``data.mirrored`` (inputs ``[X₊; -X₊]``, see :class:`Dataset`),
every run differentiates :func:`~biasfree.dynamics.losses.objective_mirrored`, which computes
the first layer's product once for both halves: the same trajectory to round-off at
about half the cost.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from functools import partial

import diffrax
import jax
import jax.numpy as jnp
import numpy as np

from .. import _validate as validate
from ..core.data import Dataset
from ..core.layers import Params, check_net, is_net
from ..core.nets import beta_eff_is_exact, forward
from ..core.precision import precise
from .losses import LOSSES, check_labels, forward_mirrored, loss_value, sq_norm
from .pacing import PacedPID, stall_window
from .trajectory import Trajectory, observe

SPACINGS = ("linear", "log")
SOLVERS = {"tsit5": diffrax.Tsit5, "dopri5": diffrax.Dopri5, "dopri8": diffrax.Dopri8,
           "kvaerno5": diffrax.Kvaerno5}


class DivergenceError(RuntimeError):
    """Gradient descent left every bounded region: the step size is too large."""


class FlowStallError(RuntimeError):
    """Gradient flow could not reach ``t_max``: the adaptive solver spent its step budget
    (or its step size collapsed), typically chattering on a ReLU kink where the vector
    field is discontinuous. The message names the time, the unit and the data point."""


class LossSpikeWarning(RuntimeWarning):
    """Gradient descent's loss rose above ``SPIKE_FACTOR · L(0)`` between two records and
    came back: the recorded curve hides it (``Trajectory.loss_max`` holds the peak)."""


SPIKE_FACTOR = 10.0
"""A GD run warns (:class:`LossSpikeWarning`) when ``max_k L(θ_k) > SPIKE_FACTOR · L(θ_0)``."""


def _set(cfg, name: str, value) -> None:
    object.__setattr__(cfg, name, value)


def _check_common(cfg) -> None:
    """Validate (and normalise: plain floats and ints) the fields both configs share."""
    _set(cfg, "alpha", validate.slope(cfg.alpha, "alpha"))
    validate.choice("loss", cfg.loss, LOSSES)
    _set(cfg, "weight_decay", validate.nonnegative(
        "weight_decay", cfg.weight_decay, scalar=True,
        why="λ is the coefficient of (λ/2)||θ||²; pass 0 for none"))
    _set(cfg, "n_records", validate.integer("n_records", cfg.n_records, 2))
    validate.choice("spacing", cfg.spacing, SPACINGS)
    validate.flag("keep_params", cfg.keep_params)


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
        _check_common(self)
        _set(self, "lr", validate.positive("lr", self.lr, scalar=True,
                                           why="the step size η of θ ← θ - η∇J, e.g. 0.01"))
        _set(self, "steps", validate.integer("steps", self.steps, 1))

    @property
    def t_max(self) -> float:
        return self.lr * self.steps


@dataclass(frozen=True)
class FlowConfig:
    """Gradient flow ``dθ/dt = -∇J(θ)`` solved by diffrax up to ``t_max``.

    ``rtol``/``atol`` the adaptive step-size tolerances, ``solver`` one of
    tsit5, dopri5, dopri8, kvaerno5; ``max_steps`` the solver's step budget (a solve
    that at its pace would need over 10× the steps left stops early with a
    :class:`FlowStallError`, see :mod:`biasfree.dynamics.pacing`); other fields as in
    :class:`GDConfig`.
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
        _check_common(self)
        _set(self, "t_max", validate.positive("t_max", self.t_max, scalar=True,
                                              why="the flow is integrated over [0, t_max]"))
        _set(self, "max_steps", validate.integer("max_steps", self.max_steps, 1))
        validate.choice("solver", self.solver, tuple(SOLVERS))
        for name in ("rtol", "atol"):
            _set(self, name, validate.positive(name, getattr(self, name), scalar=True,
                                               why="a solver tolerance, e.g. rtol=1e-8, atol=1e-10"))


def record_steps(steps: int, n_records: int, spacing: str = "linear") -> np.ndarray:
    """Distinct integer steps ``0 = k_0 < ... < k_R = steps`` at which to record."""
    steps = validate.integer("steps", steps, 1)
    n_records = validate.integer("n_records", n_records, 2)
    validate.choice("spacing", spacing, SPACINGS)
    if spacing == "log":
        ks = np.geomspace(1, steps, max(n_records - 1, 1))
    else:
        ks = np.linspace(0, steps, n_records)
    return np.unique(np.concatenate([[0], np.round(ks).astype(np.int64), [steps]]))


def record_times(t_max: float, n_records: int, spacing: str = "linear") -> np.ndarray:
    """Recording times in [0, t_max]; log spacing starts at ``t_max · 1e-4``."""
    t_max = validate.positive("t_max", t_max, scalar=True, why="records lie in [0, t_max]")
    n_records = validate.integer("n_records", n_records, 2)
    validate.choice("spacing", spacing, SPACINGS)
    if spacing == "log":
        return np.concatenate([[0.0], np.geomspace(t_max * 1e-4, t_max, n_records - 1)])
    return np.linspace(0.0, t_max, n_records)


def _check_params_data(params: Params, data: Dataset, loss: str, batched: bool = False) -> None:
    """The run's network and data agree (shapes, finiteness) and suit the loss. With
    ``batched`` every leaf of ``params`` carries a leading ensemble axis."""
    if not isinstance(data, Dataset):
        raise TypeError(f"data={type(data).__name__}: pass a biasfree.Dataset (see "
                        "biasfree.Dataset(X, Y) or biasfree.make_dataset)")
    one = params
    if batched:
        if not is_net(params):
            check_net(params)  # raises the TypeError naming params
        if any(np.ndim(la.W) != 3 for la in params):
            raise ValueError("params: with batched_params=True every W needs a leading ensemble axis "
                             "(B, n_out, n_in), e.g. jax.vmap(init)(keys); pass batched_params=False "
                             "to share one network")
        sizes = {np.shape(x)[0] for x in jax.tree_util.tree_leaves(params)}
        if len(sizes) != 1:
            raise ValueError(f"params: the leading ensemble axes differ {sorted(sizes)}; every leaf "
                             "needs the same number of members B")
        if not all(np.all(np.isfinite(np.asarray(x))) for x in jax.tree_util.tree_leaves(params)):
            raise ValueError("params contains NaN or infinite values: initialise every member finitely")
        one = jax.tree_util.tree_map(lambda x: x[0], params)
    check_net(one, "params", X=data.inputs, x_name="data.X")
    p = np.shape(one[-1].W)[0]
    if data.Y.shape[1] != p:
        raise ValueError(f"params has {p} outputs but data.Y has {data.Y.shape[1]} columns: build the "
                         f"net with p = {data.Y.shape[1]} outputs")
    for name, Yv in (("data.Y", data.Y), ("data.Y_test", data.Y_test)):
        check_labels(Yv, loss, name)


def _pinv(params: Params, data: Dataset):
    """X⁺ for the least-squares β_eff (of X₊ alone when the inputs are mirrored)."""
    return None if beta_eff_is_exact(params) else jnp.linalg.pinv(data.inputs)


def _arrays(data: Dataset) -> tuple:
    """``(X or X₊, Y, X_test, Y_test)``: the arrays the compiled engine takes; with
    ``data.mirrored`` the first is the positive half X₊ only."""
    return (data.inputs, data.Y, data.X_test, data.Y_test)


def _objective_and_loss(params, X, Y, alpha, weight_decay, loss, mirrored):
    """``(J(θ), L(θ))``: the objective and, as auxiliary output, the data loss; with
    ``mirrored`` X is X₊ and :func:`~biasfree.dynamics.losses.forward_mirrored` halves the first
    layer's products (the same numbers as :func:`~biasfree.dynamics.losses.objective_mirrored`)."""
    F = forward_mirrored(params, X, alpha) if mirrored else forward(params, X, alpha)
    L = loss_value(F, Y, loss)
    return L + 0.5 * weight_decay * sq_norm(params), L


def _grad_fn(mirrored: bool):
    """``(∇J(θ), L(θ))`` as a function of ``(params, X, Y, alpha, weight_decay, loss)``: the
    data loss comes free with the gradient (one forward pass)."""
    g = jax.grad(_objective_and_loss, has_aux=True)
    return lambda p, X, Y, a, w, loss: g(p, X, Y, a, w, loss, mirrored)


def _obs(params, arrays, alpha, loss, pinv_X, keep_params=False, mirrored=False):
    """Observables at θ; a θ with a NaN/inf entry (a diverged GD step, a record the flow
    never reached) is replaced by zeros before any SVD (LAPACK would print "DLASCL
    illegal value") and its observables are NaN."""
    X, Y, X_test, Y_test = arrays
    leaves = jax.tree_util.tree_leaves(params)
    ok = jnp.all(jnp.stack([jnp.all(jnp.isfinite(a)) for a in leaves]))
    safe = jax.tree_util.tree_map(lambda a: jnp.where(ok, a, 0.0), params)
    obs = observe(safe, X, Y, alpha, loss, X_test, Y_test, pinv_X, mirrored=mirrored)
    obs = jax.tree_util.tree_map(lambda v: jnp.where(ok, v, jnp.nan), obs)
    obs["path"] = params if keep_params else None
    return obs


def _stack0(first, rest):
    return jax.tree_util.tree_map(lambda a, b: jnp.concatenate([a[None], b]), first, rest)


def _gd_run(params, data, alpha, lr, weight_decay, segments, loss, pinv_X, keep_params=False,
            mirrored=False):
    grad = _grad_fn(mirrored)

    def step(_, carry):
        p, peak = carry
        g, L = grad(p, data[0], data[1], alpha, weight_decay, loss)
        return jax.tree_util.tree_map(lambda a, b: a - lr * b, p, g), jnp.maximum(peak, L)

    def segment(carry, n):
        carry = jax.lax.fori_loop(0, n, step, carry)
        return carry, _obs(carry[0], data, alpha, loss, pinv_X, keep_params, mirrored)

    first = _obs(params, data, alpha, loss, pinv_X, keep_params, mirrored)
    (final, peak), rest = jax.lax.scan(segment, (params, first["loss"]), segments)
    obs = _stack0(first, rest)
    obs["loss_max"] = jnp.maximum(peak, obs["loss"][-1])  # max_k L(θ_k), k = 0..K
    return final, obs


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
                      params=final, stats=stats, method=method, path=obs["path"],
                      loss_max=obs["loss_max"])


def _check_spike(traj: Trajectory, lrs) -> None:
    """Warn when the loss rose above ``SPIKE_FACTOR · L(0)`` between records."""
    peak = np.asarray(traj.loss_max).reshape(-1)
    L = np.asarray(traj.loss).reshape(peak.size, -1)
    spiked = peak > SPIKE_FACTOR * L[:, 0]
    if spiked.any():
        i = int(np.argmax(spiked))
        lr = float(np.broadcast_to(np.asarray(lrs), peak.shape)[i])
        who = "" if peak.size == 1 else f" (ensemble members {np.nonzero(spiked)[0].tolist()})"
        warnings.warn(
            f"gradient descent{who}: the loss spiked to {peak[i]:.3g} = {peak[i] / L[i, 0]:.3g}·L(0) "
            f"between records (the recorded curve peaks at {np.nanmax(L[i]):.3g}) with lr={lr:g}; "
            f"the step overshoots (more than {SPIKE_FACTOR:g}·L(0)). Lower lr (e.g. lr={lr / 4:g}) "
            "for a run that follows gradient flow; Trajectory.loss_max holds the peak.",
            LossSpikeWarning, stacklevel=4)  # the caller of gd, past the precision wrapper


@precise
def gd(params: Params, data: Dataset, cfg: GDConfig) -> Trajectory:
    """Run full-batch gradient descent ``θ_{k+1} = θ_k - η ∇J(θ_k)`` (see module doc).

    ``params`` the initial network, ``data`` the training (and test) set, ``cfg`` a
    :class:`GDConfig`. Raises :class:`DivergenceError` if the loss blows up.
    """
    _check_cfg(cfg, GDConfig)
    _check_params_data(params, data, cfg.loss)
    ks = record_steps(cfg.steps, cfg.n_records, cfg.spacing)
    final, obs = _gd_core(params, _arrays(data), cfg.alpha, cfg.lr, cfg.weight_decay,
                          jnp.asarray(np.diff(ks)), cfg.loss, _pinv(params, data),
                          cfg.keep_params, data.mirrored)
    traj = _to_traj(jnp.asarray(cfg.lr * ks), final, obs, {"steps": jnp.asarray(cfg.steps)}, "gd")
    _check_finite(traj, cfg.lr, "gradient descent")
    _check_spike(traj, cfg.lr)
    return traj


def _flow_solve(params, data, alpha, weight_decay, ts, loss, pinv_X, rtol, atol, solver,
                max_steps, keep_params=False, mirrored=False):
    grad = _grad_fn(mirrored)

    def vector_field(t, p, args):
        g, _ = grad(p, data[0], data[1], alpha, weight_decay, loss)
        return jax.tree_util.tree_map(jnp.negative, g)

    sol = _diffeqsolve(vector_field, params, ts[0], ts[-1], diffrax.SaveAt(ts=ts), rtol, atol,
                       solver, max_steps)
    obs = jax.vmap(lambda p: _obs(p, data, alpha, loss, pinv_X, mirrored=mirrored))(sol.ys)
    obs["path"] = sol.ys if keep_params else None
    # gradient flow does not raise J between records; the recorded peak is L's peak
    # (without weight decay; with it L alone may rise a little between records)
    obs["loss_max"] = jnp.max(obs["loss"])
    last = jnp.sum(jnp.isfinite(sol.ts)) - 1  # the last record reached (T - 1 on success)
    final = jax.tree_util.tree_map(lambda a: a[last], sol.ys)
    stats = {"steps": sol.stats["num_steps"], "accepted": sol.stats["num_accepted_steps"],
             "rejected": sol.stats["num_rejected_steps"], "t_reached": sol.ts[last],
             "ok": sol.result == diffrax.RESULTS.successful}
    return final, obs, stats


def _diffeqsolve(vector_field, y0, t0, t1, saveat, rtol, atol, solver, max_steps):
    """diffrax's adaptive solve, PID step control with the early stall check of
    :class:`~biasfree.dynamics.pacing.PacedPID` (a crawling solve ends long before ``max_steps``)."""
    controller = PacedPID(diffrax.PIDController(rtol=rtol, atol=atol), t1, max_steps,
                          stall_window(max_steps))
    return diffrax.diffeqsolve(
        diffrax.ODETerm(vector_field), SOLVERS[solver](), t0, t1, None, y0, saveat=saveat,
        stepsize_controller=controller, max_steps=max_steps, throw=False,
    )


def _stall_point(params, data: Dataset, t0: float, alpha: float, weight_decay: float, cfg: FlowConfig):
    """``(t, θ, pace, finished)`` where the solver stalls: re-solved from the last record
    reached (``t0``, ``params``), every step saved, for at most 4096 steps (the error path
    only); ``pace`` the time advanced per accepted step over the last 100 of them;
    ``finished``: that re-solve reached ``t_max`` (the budget, not a stall, was the limit)."""
    grad = _grad_fn(data.mirrored)
    X, Y = data.inputs, data.Y

    def vector_field(t, p, args):
        g, _ = grad(p, X, Y, alpha, weight_decay, cfg.loss)
        return jax.tree_util.tree_map(jnp.negative, g)

    sol = _diffeqsolve(vector_field, params, t0, cfg.t_max, diffrax.SaveAt(steps=True), cfg.rtol,
                       cfg.atol, cfg.solver, min(cfg.max_steps, 4096))
    ts = np.asarray(sol.ts)
    i = int(np.sum(np.isfinite(ts))) - 1
    finished = bool(sol.result == diffrax.RESULTS.successful)
    if i < 0:
        return t0, params, 0.0, finished
    k = min(i, 100)  # the pace of the last accepted steps, where the solver crawls
    pace = (float(ts[i]) - float(ts[i - k] if k else t0)) / max(k, 1)
    return float(ts[i]), jax.tree_util.tree_map(lambda a: a[i], sol.ys), pace, finished


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


KINK_REL = 1e-3
"""A pre-activation ``z = w·h`` with ``|z| < KINK_REL · ||w|| ||h||`` sits on a ReLU kink."""


def _nearest_kink(params, X, alpha):
    """``(rel, z, layer, unit, point)`` of the hidden pre-activation closest to its kink,
    relative to ``||w_k|| ||h_n||`` (a cosine), at the network ``params`` on inputs ``X``."""
    H = np.asarray(X, dtype=float)
    best = (np.inf, np.nan, -1, -1, -1)
    for li, layer in enumerate(params[:-1]):
        with np.errstate(all="ignore"):  # some BLAS builds flag spurious matmul warnings
            best, H = _kink_layer(li, layer, H, alpha, best)
    return best


def _kink_layer(li, layer, H, alpha, best):
    """One layer of :func:`_nearest_kink`: the updated best and the next activations."""
    W = np.asarray(layer.W, dtype=float)
    b = None if layer.b is None else np.asarray(layer.b, dtype=float)
    Z = H @ W.T + (0.0 if b is None else b)
    Hn = np.sqrt(np.sum(H**2, axis=1, keepdims=True) + (0.0 if b is None else 1.0))
    Wn = np.sqrt(np.sum(W**2, axis=1) + (0.0 if b is None else b**2))
    rel = np.abs(Z) / np.maximum(Hn * Wn[None, :], 1e-300)
    n, k = np.unravel_index(np.argmin(rel), rel.shape)
    if rel[n, k] < best[0]:
        best = (float(rel[n, k]), float(Z[n, k]), li + 1, int(k), int(n))
    return best, np.where(Z > 0, Z, alpha * Z)


def _check_flow(traj: Trajectory, cfg: FlowConfig, data: Dataset, alphas=None, decays=None):
    ok = np.asarray(traj.stats["ok"]).reshape(-1)
    if not ok.all():
        i = int(np.argmin(ok))
        stats = {k: np.asarray(v).reshape(-1)[i] for k, v in traj.stats.items()}
        alpha = float(np.broadcast_to(np.asarray(cfg.alpha if alphas is None else alphas), ok.shape)[i])
        who = "" if ok.size == 1 else f" (ensemble members {np.nonzero(~ok)[0].tolist()})"
        last = traj.params if ok.size == 1 else jax.tree_util.tree_map(lambda a: a[i], traj.params)
        wd = float(np.broadcast_to(np.asarray(cfg.weight_decay if decays is None else decays),
                                   ok.shape)[i])
        t_rec = float(stats["t_reached"])
        t_r, at, pace, finished = _stall_point(last, data, t_rec, alpha, wd, cfg)
        steps, rej = int(stats["steps"]), int(stats["rejected"])
        if finished:
            raise FlowStallError(
                f"gradient flow{who} ran out of steps: at its pace max_steps={cfg.max_steps} solver "
                f"steps could not reach t_max = {cfg.t_max:g} (stopped after {steps}, {rej} rejected; "
                f"last record t = {t_rec:.6g}); the flow is smooth but slow or stiff there. Raise "
                "max_steps (restarted from that record it finished within the same budget), or try "
                "solver='kvaerno5'.")
        rel, z, layer, unit, point = (_nearest_kink(at, data.X, alpha) if alpha < 1
                                      else (np.inf, np.nan, -1, -1, -1))
        head = (f"gradient flow{who} stalled at t = {t_r:.6g} of t_max = {cfg.t_max:g}: there it "
                f"advanced {pace:.2g} time units an accepted step, so t_max would take "
                f"~{(cfg.t_max - t_r) / max(pace, 1e-300):.2g} more steps; "
                + (f"stopped after {steps} of max_steps={cfg.max_steps} ({rej} rejected) instead of "
                   "spending them all" if steps < cfg.max_steps else
                   f"all max_steps={cfg.max_steps} solver steps spent ({rej} rejected)"))
        if rel < KINK_REL:
            loose = 1e-4 if cfg.rtol < 1e-4 else min(10 * cfg.rtol, 1e-2)
            raise FlowStallError(
                f"{head}, on a ReLU kink: the pre-activation of layer-{layer} unit {unit} on data "
                f"point {point} is {z:.2g} ({rel:.1g} of its scale). With α = {alpha:g} the vector "
                f"field is discontinuous there and the flow slides along the kink, so no adaptive "
                f"solver (kvaerno5 and dopri8 included) can meet rtol={cfg.rtol:g} at useful step "
                f"sizes, and more max_steps only waste time. Loosen the tolerance to "
                f"FlowConfig(rtol={loose:g}, atol={loose / 100:g}) so the solver steps across it, use "
                f"gd with a small lr (same time axis t = lr·k, e.g. lr={min(1e-3, cfg.t_max / 1e3):g}), or "
                "use α = 1 or a pair init (init_pairs) where the field is smooth.")
        raise FlowStallError(
            f"{head}; no pre-activation is near a kink (closest {rel:.2g} of its scale), so the "
            "flow is stiff or fast here. Raise max_steps, try solver='kvaerno5' (stiff "
            "problems), loosen rtol/atol, or shorten t_max.")
    L = np.asarray(traj.loss)
    if not np.all(np.isfinite(L)):
        raise RuntimeError(
            f"gradient flow produced a non-finite loss before t_max={cfg.t_max}: the flow "
            "blew up (e.g. a negative-curvature direction with large init, or data of "
            "extreme scale). Rescale the data or the init, or shorten t_max.")


def _check_cfg(cfg, kind) -> None:
    if not isinstance(cfg, kind):
        raise TypeError(f"cfg={cfg!r} must be a biasfree.{kind.__name__} (e.g. "
                        f"{kind.__name__}(alpha=0.0)); build variants with dataclasses.replace")


@precise
def flow(params: Params, data: Dataset, cfg: FlowConfig) -> Trajectory:
    """Integrate gradient flow ``dθ/dt = -∇J(θ)`` with diffrax (see module doc).

    Adaptive steps to relative/absolute tolerance ``cfg.rtol``/``cfg.atol``; records
    at ``n_records`` times in [0, t_max]. ``stats`` holds the solver's step counts and
    ``t_reached``. Raises :class:`FlowStallError` when the solver cannot reach ``t_max``
    in ``max_steps`` steps, naming the cause (e.g. a ReLU kink) and a fix that works.
    """
    _check_cfg(cfg, FlowConfig)
    _check_params_data(params, data, cfg.loss)
    ts = jnp.asarray(record_times(cfg.t_max, cfg.n_records, cfg.spacing))
    final, obs, stats = _flow_core(params, _arrays(data), cfg.alpha, cfg.weight_decay, ts, cfg.loss,
                                   _pinv(params, data), cfg.rtol, cfg.atol, cfg.solver,
                                   cfg.max_steps, cfg.keep_params, data.mirrored)
    traj = _to_traj(ts, final, obs, stats, "flow")
    _check_flow(traj, cfg, data)
    return traj


# ------------------------------------------------------------------- ensembles


def _batch(params, data, cfg, batched_params, layout, **vectors):
    """Validate an ensemble's arguments; ``(B, params with axis B, {name: (B,) array})``."""
    _check_cfg(cfg, type(cfg))
    validate.flag("batched_params", batched_params)
    if layout is not None:
        validate.choice("layout", layout, LAYOUTS)
    rules = {"alpha": lambda v: validate.slope(v, "alpha", array_ok=True),
             "lr": lambda v: validate.positive("lr", v, why="every member's step size η"),
             "weight_decay": lambda v: validate.nonnegative("weight_decay", v, why="λ of (λ/2)||θ||²")}
    vectors = {k: np.asarray(rules[k](v), dtype=float) for k, v in vectors.items()}
    for k, v in vectors.items():
        if v.ndim > 1 or v.size == 0:
            raise ValueError(f"{k} must be a scalar or a 1-D array of per-member values, got shape "
                             f"{v.shape}")
    _check_params_data(params, data, cfg.loss, batched=batched_params)
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
    _check_cfg(cfg, GDConfig)
    a = cfg.alpha if alpha is None else alpha
    e = cfg.lr if lr is None else lr
    w = cfg.weight_decay if weight_decay is None else weight_decay
    B, params, v = _batch(params, data, cfg, batched_params, layout, alpha=a, lr=e, weight_decay=w)
    v["wd"] = v.pop("weight_decay")
    one = jax.tree_util.tree_map(lambda x: x[0], params)
    ks = record_steps(cfg.steps, cfg.n_records, cfg.spacing)
    lay, n_dev = _layout(layout)
    final, obs = _gd_batch(params, _arrays(data), v["alpha"], v["lr"], v["wd"],
                           jnp.asarray(np.diff(ks)), cfg.loss, _pinv(one, data),
                           cfg.keep_params, data.mirrored, lay, n_dev)
    t = v["lr"][:, None] * jnp.asarray(ks)[None, :]
    traj = _to_traj(t, final, obs, {"steps": jnp.full((B,), cfg.steps)}, "gd")
    _check_finite(traj, v["lr"], "gradient descent")
    _check_spike(traj, v["lr"])
    return traj


@precise
def flow_ensemble(params: Params, data: Dataset, cfg: FlowConfig, *, alpha=None,
                  weight_decay=None, batched_params: bool = True, layout: str | None = None) -> Trajectory:
    """Many gradient-flow solves in one compiled call (see :func:`gd_ensemble` for the
    batching rules and ``layout``). With "map" each member takes its own adaptive steps."""
    _check_cfg(cfg, FlowConfig)
    a = cfg.alpha if alpha is None else alpha
    w = cfg.weight_decay if weight_decay is None else weight_decay
    B, params, v = _batch(params, data, cfg, batched_params, layout, alpha=a, weight_decay=w)
    v["wd"] = v.pop("weight_decay")
    one = jax.tree_util.tree_map(lambda x: x[0], params)
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
    _check_flow(traj, cfg, data, v["alpha"], v["wd"])
    return traj
