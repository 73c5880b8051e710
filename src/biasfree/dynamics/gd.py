"""Full-batch gradient descent (docs/theory.md §0): ``θ_{k+1} = θ_k - η ∇J(θ_k)`` with
``J(θ) = L(θ) + (λ/2)||θ||²``.

Compiled once with ``jit`` and ``lax.scan`` over record intervals (``lax.fori_loop``
inside), so no Python runs per step and only the chosen records are stored; the largest
loss over *every* step is carried through the loop (``Trajectory.loss_max``). Records lie
on the gradient-flow time axis ``t = η k``.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from .. import _validate as validate
from ..core.data import Dataset
from ..core.layers import Params
from ..core.precision import precise
from . import run
from .diagnosis import check_finite, check_spike
from .run import SPACINGS, RunConfig
from .trajectory import Trajectory


@dataclass(frozen=True, kw_only=True)
class GDConfig(RunConfig):
    """Full-batch gradient descent: ``lr`` step η; ``steps`` number of steps K (time
    t = ηK); ``alpha``, ``loss``, ``weight_decay``, ``n_records``, ``spacing`` (steps 0
    and K always recorded), ``keep_params`` as in :class:`~biasfree.dynamics.run.RunConfig`.
    """

    lr: float = 0.01
    steps: int = 1000

    def __post_init__(self):
        super().__post_init__()
        self._set_positive("lr", "the step size η of θ ← θ - η∇J, e.g. 0.01")
        self._set_integer("steps", 1)

    @property
    def t_max(self) -> float:
        return self.lr * self.steps


def record_steps(steps: int, n_records: int, spacing: str = "linear") -> np.ndarray:
    """Distinct integer steps ``0 = k_0 < ... < k_R = steps`` at which to record."""
    steps = validate.integer("steps", steps, 1)
    n_records = validate.integer("n_records", n_records, 2)
    validate.choice("spacing", spacing, SPACINGS)
    ks = np.geomspace(1, steps, n_records - 1) if spacing == "log" else np.linspace(0, steps, n_records)
    return np.unique(np.concatenate([[0], np.round(ks).astype(np.int64), [steps]]))


def gd_run(params, data, alpha, lr, weight_decay, segments, loss, pinv_X, keep_params=False,
           mirrored=False):
    """``(θ_K, observables)``: ``segments[j]`` steps between records j and j + 1 (traceable)."""
    grad = run.grad_fn(mirrored)

    def step(_, carry):
        p, peak = carry
        g, L = grad(p, data[0], data[1], alpha, weight_decay, loss)
        return jax.tree_util.tree_map(lambda a, b: a - lr * b, p, g), jnp.maximum(peak, L)

    def segment(carry, n):
        carry = jax.lax.fori_loop(0, n, step, carry)
        return carry, run.record(carry[0], data, alpha, loss, pinv_X, keep_params, mirrored)

    # record 0 is a segment of 0 steps, so the record (SVDs and all) is traced and compiled
    # once, inside the loop, not again before it (the GD program compiles faster)
    segments = jnp.concatenate([jnp.zeros((1,), jnp.asarray(segments).dtype), segments])
    L_type = jax.eval_shape(lambda p: grad(p, data[0], data[1], alpha, weight_decay, loss)[1], params)
    (final, peak), obs = jax.lax.scan(segment, (params, jnp.full((), -jnp.inf, L_type.dtype)), segments)
    obs["loss_max"] = jnp.maximum(peak, obs["loss"][-1])  # max_k L(θ_k), k = 0..K
    return final, obs


GD_STATIC = ("loss", "keep_params", "mirrored")
_gd_core = jax.jit(gd_run, static_argnames=GD_STATIC)


@precise
def gd(params: Params, data: Dataset, cfg: GDConfig) -> Trajectory:
    """Run full-batch gradient descent ``θ_{k+1} = θ_k - η ∇J(θ_k)`` (see module doc).

    ``params`` the initial network, ``data`` the training (and test) set, ``cfg`` a
    :class:`GDConfig`. Raises :class:`~biasfree.dynamics.diagnosis.DivergenceError` if
    the loss blows up; warns with :class:`~biasfree.dynamics.diagnosis.LossSpikeWarning`
    when it spiked between records.
    """
    run.check_cfg(cfg, GDConfig)
    run.check_params_data(params, data, cfg.loss)
    ks = record_steps(cfg.steps, cfg.n_records, cfg.spacing)
    final, obs = _gd_core(params, run.arrays(data), cfg.alpha, cfg.lr, cfg.weight_decay,
                          jnp.asarray(np.diff(ks)), cfg.loss, run.pinv(params, data),
                          cfg.keep_params, data.mirrored)
    traj = Trajectory(t=jnp.asarray(cfg.lr * ks), params=final, stats={"steps": jnp.asarray(cfg.steps)},
                      method="gd", **obs)
    check_finite(traj, cfg.lr, "gradient descent")
    check_spike(traj, cfg.lr)
    return traj
