"""True gradient flow ``dθ/dt = -∇J(θ)`` (docs/theory.md §0), integrated by diffrax.

An adaptive Runge–Kutta method (:data:`SOLVERS`) with PID step control and the early
stall check of :class:`~biasfree.dynamics.pacing.PacedPID`, saved at the record times in
``[0, t_max]``, on the same time axis as gradient descent (``t = η k``).
"""

from __future__ import annotations

from dataclasses import dataclass

import diffrax
import jax
import jax.numpy as jnp
import numpy as np

from .. import _validate as validate
from ..core.data import Dataset
from ..core.layers import Params
from ..core.precision import precise
from . import run
from .diagnosis import stall_error
from .pacing import PacedPID, stall_window
from .run import SPACINGS, RunConfig
from .trajectory import Trajectory

SOLVERS = {"tsit5": diffrax.Tsit5, "dopri5": diffrax.Dopri5, "dopri8": diffrax.Dopri8,
           "kvaerno5": diffrax.Kvaerno5}
"""The solvers :class:`FlowConfig` takes by name: diffrax's explicit Runge–Kutta methods (Tsit5,
Dopri5, Dopri8) and the implicit Kvaerno5 for stiff flows."""


@dataclass(frozen=True, kw_only=True)
class FlowConfig(RunConfig):
    """Gradient flow ``dθ/dt = -∇J(θ)`` solved by diffrax up to ``t_max``.

    ``rtol``/``atol`` the adaptive step-size tolerances, ``solver`` one of
    tsit5, dopri5, dopri8, kvaerno5; ``max_steps`` the solver's step budget (a solve
    that at its pace would need over 10× the steps left stops early with a
    :class:`~biasfree.dynamics.diagnosis.FlowStallError`, see :mod:`biasfree.dynamics.pacing`);
    ``alpha``, ``loss``, ``weight_decay``, ``n_records``, ``spacing``, ``keep_params`` as in
    :class:`~biasfree.dynamics.run.RunConfig`.
    """

    t_max: float = 10.0
    rtol: float = 1e-8
    atol: float = 1e-10
    solver: str = "tsit5"
    max_steps: int = 200_000

    def __post_init__(self):
        super().__post_init__()
        self._set_positive("t_max", "the flow is integrated over [0, t_max]")
        self._set_integer("max_steps", 1)
        validate.choice("solver", self.solver, tuple(SOLVERS))
        for name in ("rtol", "atol"):
            self._set_positive(name, "a solver tolerance, e.g. rtol=1e-8, atol=1e-10")


def record_times(t_max: float, n_records: int, spacing: str = "linear") -> np.ndarray:
    """Recording times in [0, t_max]; log spacing starts at ``t_max · 1e-4``."""
    t_max = validate.positive("t_max", t_max, scalar=True, why="records lie in [0, t_max]")
    n_records = validate.integer("n_records", n_records, 2)
    validate.choice("spacing", spacing, SPACINGS)
    if spacing == "log":
        return np.concatenate([[0.0], np.geomspace(t_max * 1e-4, t_max, n_records - 1)])
    return np.linspace(0.0, t_max, n_records)


def _vector_field(X, Y, alpha, weight_decay, loss, mirrored):
    """``-∇J(θ)`` as diffrax's ``f(t, θ, args)``."""
    grad = run.grad_fn(mirrored)

    def vector_field(t, p, args):
        g, _ = grad(p, X, Y, alpha, weight_decay, loss)
        return jax.tree_util.tree_map(jnp.negative, g)

    return vector_field


def _diffeqsolve(vector_field, y0, t0, t1, saveat, rtol, atol, solver, max_steps):
    """diffrax's adaptive solve, PID step control with the early stall check of
    :class:`~biasfree.dynamics.pacing.PacedPID` (a crawling solve ends long before ``max_steps``)."""
    controller = PacedPID(diffrax.PIDController(rtol=rtol, atol=atol), t1, max_steps,
                          stall_window(max_steps))
    return diffrax.diffeqsolve(
        diffrax.ODETerm(vector_field), SOLVERS[solver](), t0, t1, None, y0, saveat=saveat,
        stepsize_controller=controller, max_steps=max_steps, throw=False,
    )


def flow_solve(params, data, alpha, weight_decay, ts, loss, pinv_X, rtol, atol, solver,
               max_steps, keep_params=False, mirrored=False):
    """``(final θ, observables at ts, solver stats)`` (traceable; ``data`` as :func:`run.arrays`)."""
    field = _vector_field(data[0], data[1], alpha, weight_decay, loss, mirrored)
    sol = _diffeqsolve(field, params, ts[0], ts[-1], diffrax.SaveAt(ts=ts), rtol, atol,
                       solver, max_steps)
    obs = jax.vmap(lambda p: run.record(p, data, alpha, loss, pinv_X, mirrored=mirrored))(sol.ys)
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


def _stall_point(params, data: Dataset, t0: float, alpha: float, weight_decay: float, cfg: FlowConfig):
    """``(t, θ, pace, finished)`` where the solver stalls: re-solved from the last record
    reached (``t0``, ``params``), every step saved, for at most 4096 steps (the error path
    only); ``pace`` the time advanced per accepted step over the last 100 of them;
    ``finished``: that re-solve reached ``t_max`` (the budget, not a stall, was the limit)."""
    field = _vector_field(data.inputs, data.Y, alpha, weight_decay, cfg.loss, data.mirrored)
    sol = _diffeqsolve(field, params, t0, cfg.t_max, diffrax.SaveAt(steps=True), cfg.rtol,
                       cfg.atol, cfg.solver, min(cfg.max_steps, 4096))
    ts = np.asarray(sol.ts)
    i = int(np.sum(np.isfinite(ts))) - 1
    finished = bool(sol.result == diffrax.RESULTS.successful)
    if i < 0:
        return t0, params, 0.0, finished
    k = min(i, 100)  # the pace of the last accepted steps, where the solver crawls
    pace = (float(ts[i]) - float(ts[i - k] if k else t0)) / max(k, 1)
    return float(ts[i]), jax.tree_util.tree_map(lambda a: a[i], sol.ys), pace, finished


FLOW_STATIC = ("loss", "solver", "max_steps", "keep_params", "mirrored")
_flow_core = jax.jit(flow_solve, static_argnames=FLOW_STATIC)


def check_flow(traj: Trajectory, cfg: FlowConfig, data: Dataset, alphas=None, decays=None):
    """Raise :class:`~biasfree.dynamics.diagnosis.FlowStallError` when some member did not
    reach ``t_max`` (its stall re-solved and diagnosed), ``RuntimeError`` on a non-finite loss."""
    ok = np.asarray(traj.stats["ok"]).reshape(-1)
    if not ok.all():
        i = int(np.argmin(ok))
        stats = {k: np.asarray(v).reshape(-1)[i] for k, v in traj.stats.items()}
        alpha, wd = (float(np.broadcast_to(np.asarray(default if given is None else given), ok.shape)[i])
                     for default, given in ((cfg.alpha, alphas), (cfg.weight_decay, decays)))
        last = traj.params if ok.size == 1 else jax.tree_util.tree_map(lambda a: a[i], traj.params)
        stall = _stall_point(last, data, float(stats["t_reached"]), alpha, wd, cfg)
        raise stall_error(cfg, ok, stats, stall, data.X, alpha)
    if not np.all(np.isfinite(np.asarray(traj.loss))):
        raise RuntimeError(
            f"gradient flow produced a non-finite loss before t_max={cfg.t_max}: the flow "
            "blew up (e.g. a negative-curvature direction with large init, or data of "
            "extreme scale). Rescale the data or the init, or shorten t_max.")


@precise
def flow(params: Params, data: Dataset, cfg: FlowConfig) -> Trajectory:
    """Integrate gradient flow ``dθ/dt = −∇J(θ)``, ``J(θ) = L(θ) + (λ/2)||θ||²``, with diffrax's
    adaptive solvers (module doc): the continuous-time path beside the discrete one of
    :func:`~biasfree.dynamics.trainer.train`, on the same time axis.

    Arguments:

    - ``params``: the initial net θ(0) (a tuple of layers, e.g.
      :func:`~biasfree.core.inits.init_gaussian`).
    - ``data``: the :class:`~biasfree.core.data.Dataset` (inputs stored ``[X₊; −X₊]`` take the
      mirrored fast path).
    - ``cfg``: a :class:`FlowConfig`: slope ``alpha`` α, ``loss``, ``weight_decay`` λ, horizon
      ``t_max``, tolerances ``rtol``/``atol``, ``solver``, ``max_steps``, ``n_records`` records at
      ``spacing`` "linear" or "log" times in [0, t_max], ``keep_params``.

    Returns a :class:`~biasfree.dynamics.trajectory.Trajectory` recorded at times ``t``;
    ``stats`` holds the solver's step counts and ``t_reached``.

    Raises :class:`~biasfree.dynamics.diagnosis.FlowStallError` when the solver cannot reach
    ``t_max`` in ``max_steps`` steps, naming the cause (e.g. a ReLU kink) and a fix that works.

    Example::

        import jax, biasfree as bf
        key = jax.random.PRNGKey(0)
        data = bf.make_dataset(key, bf.sine_target(key, d=5)[0], n=200, d=5)
        traj = bf.flow(bf.init_gaussian(key, (5, 20, 1), scale=0.01), data,
                       bf.FlowConfig(alpha=0.0, t_max=20.0))
        traj.t, traj.loss        # the learning curve at 101 times in [0, 20]
    """
    run.check_cfg(cfg, FlowConfig)
    run.check_params_data(params, data, cfg.loss)
    ts = jnp.asarray(record_times(cfg.t_max, cfg.n_records, cfg.spacing))
    final, obs, stats = _flow_core(params, run.arrays(data), cfg.alpha, cfg.weight_decay, ts, cfg.loss,
                                   run.pinv(params, data), cfg.rtol, cfg.atol, cfg.solver,
                                   cfg.max_steps, cfg.keep_params, data.mirrored)
    traj = Trajectory(t=ts, params=final, stats=stats, method="flow", **obs)
    check_flow(traj, cfg, data)
    return traj
