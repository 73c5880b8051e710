"""What a training run records: the :class:`Trajectory` and its observables (and
:class:`PairedRun`, a run beside its twin read at its record steps).

Every trajectory, simulated by gradient descent or gradient flow, lives on the
gradient-flow time axis ``t = η k`` (docs/theory.md §0). Recorded at each time:

- ``loss``: the data loss (without the weight-decay term); ``test_loss`` on held-out data;
- ``beta``: ``β_eff`` (d, p), the linear map of the odd part (:func:`~biasfree.core.nets.beta_eff`);
- ``even_energy``: ``<||f_even(x)||²>`` over the training inputs (docs/theory.md §2.6);
- ``singular_values``: per layer, the singular values of ``W_l``;
- ``conserved``: per hidden layer l, per unit k,
  ``||W_l[k, :]||² + b_l[k]² - ||W_{l+1}[:, k]||²`` (conserved by gradient flow, §4.2);
- ``units`` (``observables="units"``): the effective units (:func:`~biasfree.core.units.effective_units`,
  docs/theory.md §11.1) at each record, counted from the recorded weights after the run.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from .. import _validate as validate
from ..core import units
from ..core.layers import Params, takes_net
from ..core.nets import _beta_eff, _even_part, beta_eff_is_exact, check_apply, forward_unchecked
from ..core.precision import precise
from .losses import _forward_mirrored, _loss_value, check_run_args, check_targets

Array = jax.Array

_take = jax.jit(lambda tree, i: jax.tree_util.tree_map(lambda a: a[i], tree))
"""Entry ``i`` of every leaf, compiled once per tree layout (an exact slice)."""


@dataclass(frozen=True)
class Trajectory:
    """Observables of one run (or of an ensemble, with a leading batch axis).

    ``t`` (T,), ``loss`` (T,), ``test_loss`` (T,) or None, ``beta`` (T, d, p),
    ``even_energy`` (T,), ``singular_values`` tuple of (T, k_l), ``conserved`` tuple of
    (T, n_l), ``params`` the final parameters, ``stats`` solver counters,
    ``method`` "gd", "flow" or "optax" (:func:`~biasfree.dynamics.trainer.train`),
    ``path`` the parameters at every record (leaves (T, ...)) when the config asked
    ``keep_params``, else None.

    ``loss_max`` (scalar; (B,) for an ensemble): the largest data loss of the run. For
    gradient descent ``max_k L(θ_k)`` over *every* step k = 0..K, carried inside the
    compiled loop, so a spike between two records shows here even when ``loss`` hides
    it (GD warns with :class:`~biasfree.dynamics.diagnosis.LossSpikeWarning` above
    ``SPIKE_FACTOR · L(0)``); for gradient flow, the largest recorded loss.

    A run trained with ``twin`` (:func:`~biasfree.dynamics.trainer.train`) also holds ``twin``,
    its linear twin's trajectory (record j at the net's time ``t_j``), and ``twin_gap``, the
    largest ``|L(θ_k) − L̃(θ̃_k)|`` over *every* step k = 0..K (loss units, full training data),
    reached at step ``twin_gap_step``. A run recorded with ``observables="loss"`` has ``beta``,
    ``singular_values`` and ``conserved`` None; one recorded with ``observables="units"`` also
    ``units``: ``{"count": (T,), "magnitudes": (T, m), "threshold": (T,)}`` (docs/theory.md §11.1).
    """

    t: Array
    loss: Array
    test_loss: Array | None
    beta: Array
    even_energy: Array
    singular_values: tuple
    conserved: tuple
    params: Params
    stats: dict = field(default_factory=dict)
    method: str = "gd"
    path: Params | None = None
    loss_max: Array | None = None
    twin: Trajectory | None = None
    twin_gap: Array | None = None
    twin_gap_step: Array | None = None
    units: dict | None = None

    def save(self, path) -> Path:
        """Write this trajectory to ``path``, one ``.safetensors`` file: every array as a
        tensor, bit for bit, the rest as JSON in its metadata; never pickle
        (:mod:`~biasfree.dynamics.run_files`). Returns the path; :meth:`load` reads it back."""
        from .run_files import save_run

        return save_run(self, path, {"Trajectory": Trajectory})

    @staticmethod
    def load(path) -> Trajectory:
        """The trajectory :meth:`save` wrote to ``path`` (arrays as NumPy arrays, equal bitwise)."""
        from .run_files import load_run

        return load_run(path, Trajectory, {"Trajectory": Trajectory})

    def member(self, i: int) -> Trajectory:
        """Member ``i`` of an ensemble trajectory."""
        if np.ndim(self.loss) != 2:
            raise ValueError("member: this trajectory is a single run (loss has shape "
                             f"{np.shape(self.loss)}); member(i) is for ensembles")
        B = np.shape(self.loss)[0]
        i = validate.integer("i", i, -B, B - 1)
        if any(isinstance(a, jax.Array) for a in jax.tree_util.tree_leaves(self)):
            return _take(self, i)  # inside a run: one program per layout, not one per leaf shape
        return jax.tree_util.tree_map(lambda a: a[i], self)  # NumPy (what users hold)

    def half_time(self, target_loss: float | None = None) -> float:
        """First time the loss falls to ``target_loss`` (default: halfway between its
        first and last recorded values), linearly interpolated between records.

        This is a *loss* midpoint, a model-free summary. It is not the mode half time
        ``t_1/2`` of :func:`biasfree.theory.half_time` (where ``a = s/2``, i.e. the
        fit part of the loss at a quarter of its start); compare like with like."""
        t, L = np.asarray(self.t), np.asarray(self.loss)
        if L.ndim != 1:
            raise ValueError(f"half_time: this is an ensemble trajectory (loss has shape {L.shape}); "
                             "call traj.member(i).half_time() for member i")
        target_loss = (0.5 * (L[0] + L[-1]) if target_loss is None
                       else validate.real("target_loss", target_loss, scalar=True))
        below = np.nonzero(L <= target_loss)[0]
        if below.size == 0 or below[0] == 0:
            return float("nan") if below.size == 0 else float(t[0])
        i = below[0]
        return float(t[i - 1] + (t[i] - t[i - 1]) * (L[i - 1] - target_loss) / (L[i - 1] - L[i]))


jax.tree_util.register_dataclass(
    Trajectory,
    data_fields=["t", "loss", "test_loss", "beta", "even_energy", "singular_values",
                 "conserved", "params", "stats", "path", "loss_max", "twin", "twin_gap", "twin_gap_step",
                 "units"],
    meta_fields=["method"],
)


def with_units(traj: Trajectory, alpha, keep: bool) -> Trajectory:
    """``traj`` with its effective units at every record, counted from its recorded weights with the
    init (record 0) setting the noise threshold (docs/theory.md §11.1); the weights are dropped
    again unless ``keep_params`` asked for them. An ensemble's magnitudes are padded with 0 to its
    widest member's (members of other slopes may follow other rules: rank, or units)."""
    path = jax.tree_util.tree_map(np.asarray, traj.path)
    one = np.ndim(traj.loss) == 1
    members = [path] if one else [jax.tree_util.tree_map(lambda a, i=i: a[i], path)
                                  for i in range(np.shape(traj.loss)[0])]
    alphas = np.broadcast_to(np.asarray(alpha, float), (len(members),))
    out = []
    for m, a in zip(members, alphas, strict=True):
        at = [jax.tree_util.tree_map(lambda x, j=j: x[j], m) for j in range(np.shape(traj.loss)[-1])]
        family, kind, parts = units.ingredients(at[0], float(a))  # checked once, at the init
        sigmas = units.init_scales(at[0], float(a), family, parts)
        res = [units.count(kind, units.ingredients(p, float(a), checked=True)[2], sigmas, family)
               for p in at]
        out.append({"count": np.array([r.count for r in res]),
                    "magnitudes": np.stack([r.magnitudes for r in res]),
                    "threshold": np.array([r.threshold for r in res])})
    width = max(o["magnitudes"].shape[-1] for o in out)  # members of other slopes count other things
    for o in out:
        o["magnitudes"] = np.pad(o["magnitudes"], ((0, 0), (0, width - o["magnitudes"].shape[-1])))
    counted = out[0] if one else {k: np.stack([o[k] for o in out]) for k in out[0]}
    return dataclasses.replace(traj, units=counted, path=traj.path if keep else None)



@precise
@takes_net()
def conserved_quantities(params: Params) -> tuple[Array, ...]:
    """Per hidden unit, ``||incoming||² - ||outgoing||²`` (docs/theory.md §4.2). For a conv
    layer the unit is an output channel (its kernel and bias in, every weight reading the
    channel out), the group that the rescaling symmetry moves together (docs/theory.md §7)."""
    return _conserved(params)


def _conserved(params: Params) -> tuple:
    """:func:`conserved_quantities` unchecked. Per hidden unit (a conv's output channel): the
    squared norm of its incoming weight (torch's layout: units, inputs, kernel; summed over all
    but the first axis), minus that of the weights reading it (for a dense layer after a conv,
    its channel's columns), plus its bias squared."""
    out = []
    for inc, outg in zip(params[:-1], params[1:], strict=True):
        w, u = inc.weight, outg.weight
        q = jnp.sum(w**2, axis=tuple(range(1, np.ndim(w))))
        q_out = jnp.sum(u**2, axis=(0,) + tuple(range(2, np.ndim(u))))
        if q_out.shape[0] != q.shape[0]:
            q_out = jnp.sum(jnp.reshape(q_out, (q.shape[0], -1)), axis=1)
        q = q - q_out
        out.append(q if inc.b is None else q + inc.b**2)
    return tuple(out)


@validate.array_args("X", "Y", "X_test", "Y_test", "pinv_X")
@precise
def observe(params: Params, X, Y, alpha, loss: str, X_test=None, Y_test=None,
            pinv_X=None, mirrored: bool = False) -> dict:
    """All recorded observables at one parameter point θ = ``params`` (module docstring).

    ``X`` (N, d), ``Y`` (N, p) training data; ``alpha`` slope α; ``loss`` "mse" or
    "logistic" (the data loss L); ``X_test``, ``Y_test`` optional held-out data for the
    test loss; ``pinv_X`` (d, N) = X⁺, reused for the least-squares ``β_eff`` of nets
    that are not two-layer bias-free (for those ``β_eff = c W_1ᵀ W_2ᵀ`` exactly).

    ``mirrored``: ``X`` is only the positive half X₊ (n, d) of the inputs ``[X₊; -X₊]``
    (``Y`` still (2n, p)), and ``pinv_X`` is X₊⁺. Then ``f(X₊)`` and ``f(-X₊)`` come from
    one :func:`~biasfree.dynamics.losses.forward_mirrored`, ``f_even(±x₊) = (f(x₊) + f(-x₊))/2``,
    ``f_odd(±x₊) = ±(f(x₊) - f(-x₊))/2`` and, since ``[X₊; -X₊]⁺ = [X₊⁺, -X₊⁺]/2``, the
    least-squares ``β_eff = X₊⁺ f_odd(X₊)``: the same numbers as the general path, to
    round-off.
    """
    validate.flag("mirrored", mirrored)
    p = check_run_args(params, X, Y, alpha, loss, mirrored=mirrored)
    if (X_test is None) != (Y_test is None):
        raise ValueError("X_test, Y_test: give both (the held-out set) or neither")
    if X_test is not None:
        check_apply(params, X_test, alpha, "X_test")
        check_targets(Y_test, np.shape(X_test)[0], p, loss, "Y_test")
    if pinv_X is not None:
        validate.finite_array("pinv_X", pinv_X, ndim=2)
        want = (np.shape(X)[1], np.shape(X)[0])
        if np.shape(pinv_X) != want:
            raise ValueError(f"pinv_X has shape {np.shape(pinv_X)}; it must be X⁺ of shape {want} "
                             "(np.linalg.pinv(X)), or None")
    return _observe(params, X, Y, alpha, loss, X_test, Y_test, pinv_X, mirrored)


def _observe(params: Params, X, Y, alpha, loss: str, X_test=None, Y_test=None, pinv_X=None,
             mirrored: bool = False) -> dict:
    """:func:`observe` unchecked (what the compiled loops record)."""
    if mirrored:
        F = _forward_mirrored(params, X, alpha)
        n = X.shape[0]
        fe = 0.5 * (F[:n] + F[n:])
        if beta_eff_is_exact(params):
            beta = _beta_eff(params, alpha)
        else:
            P = jnp.linalg.pinv(X) if pinv_X is None else pinv_X
            beta = P @ (0.5 * (F[:n] - F[n:]))
    else:
        F = forward_unchecked(params, X, alpha)
        beta = _beta_eff(params, alpha, X, pinv_X)
        fe = _even_part(params, X, alpha)
    return {"loss": _loss_value(F, Y, loss), "beta": beta, "even_energy": jnp.mean(jnp.sum(fe**2, axis=-1)),
            "singular_values": tuple(jnp.linalg.svd(layer.matrix, compute_uv=False) for layer in params),
            "conserved": _conserved(params), "test_loss": None if X_test is None
            else _loss_value(forward_unchecked(params, X_test, alpha), Y_test, loss)}


@dataclass(frozen=True)
class PairedRun:
    """``steps`` run (≤ asked), ``k`` (R,) record steps, ``loss``/``twin_loss``/``even_energy``
    (R,) at them; ``gap_max`` max over every step of ``|L − L̃|`` (loss units, not divided by
    L(0)) at step ``gap_step``; ``params``/``twin`` the final weights."""

    steps: int
    k: np.ndarray
    loss: np.ndarray
    twin_loss: np.ndarray
    even_energy: np.ndarray
    gap_max: float
    gap_step: int
    params: Params
    twin: Params

    @classmethod
    def of(cls, traj: Trajectory, ks: np.ndarray) -> PairedRun:
        """The paired record of a :func:`~biasfree.dynamics.trainer.train` run with ``twin``,
        recorded at steps ``ks``."""
        n = np.shape(traj.loss)[-1]
        return cls(int(np.asarray(traj.stats["steps"])), np.asarray(ks)[:n], np.asarray(traj.loss),
                   np.asarray(traj.twin.loss), np.asarray(traj.even_energy), float(traj.twin_gap),
                   int(traj.twin_gap_step), traj.params, traj.twin.params)
