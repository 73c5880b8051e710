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
``twin=(params, data)`` gives the twin its own data (a net whose twin reads other inputs, e.g.
linear attention's twin on the cubic feature z, docs/theory.md §10.2): the same rows as the
net's, one row per point, L̃ taken on it; a twin at α = 1 (c = 1) steps as the net does.

The program itself lives in :mod:`biasfree.dynamics.loop` (the only training loop): no
Python runs per step, only the records are stored, and the largest loss over *every* step
(``Trajectory.loss_max``) and the first step whose loss is not finite (or grew 1e8-fold) are
carried through it. Records lie on the gradient-flow time axis ``t = η k``. With ``progress``
or ``time_budget`` the same program runs in chunks of records, ``progress(k, K)`` between
them; with ``time_budget`` each chunk is sized by the measured time per step to fit half the
time left (:mod:`~biasfree.dynamics.pacing`), so a run stops within its budget plus one step
(plus the first chunk's compile time), its last record where it stopped, and says how many
steps it ran.

Symmetric inputs stored as ``[X₊; −X₊]`` (``Dataset.mirrored``) take
:func:`~biasfree.dynamics.losses.objective_mirrored`'s path (one X₊-sized product each way).
Minibatches: ``mirrored_batches`` draws ``batch_size/2`` mirror pairs per step, each batch itself
symmetric (§9.3); otherwise ``batch_size`` points at random; both without replacement within
a step, from ``fold_in(key, k)``.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable, Mapping

import jax
import jax.numpy as jnp
import numpy as np

from .. import _validate as validate
from ..core.attention_twin import check_twin_slope, twin_slope
from ..core.data import Dataset
from ..core.nets import widths
from ..core.precision import precise
from ..core.twin import TwinScales, twin_weights
from ..core.units import effective_units
from . import run
from . import train_config as config
from .batching import LAYOUTS, ensemble_layout
from .diagnosis import DivergenceError, check_spike
from .ensemble import Member, Runs
from .loop import DIVERGED, Job, Spec, drive
from .optimiser_twin import ApproximateTwinWarning, with_degree
from .train_config import (
    GDConfig,
    TrainConfig,
    check_vectors,
    config_from_keywords,
    optimiser_name,
    record_steps,
)
from .trajectory import Trajectory, with_units

OBSERVABLES = ("all", "loss", "units")
"""What a record holds: "all" (:func:`~biasfree.dynamics.trajectory.observe`: loss, β_eff,
even energy, singular values, conserved quantities), "loss" (loss, test loss and even energy
only: no SVD per record, for long curves of large nets) or "units" (those of "loss" and the
weights, from which ``Trajectory.units`` counts the effective units after the run: docs/theory.md §11.1)."""


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


def _divergence(state, records, n: int, job: Job, cfg: TrainConfig, what: str) -> None:
    """The one divergence error: the first step whose loss left every bound (the loop checks
    steps 0..K−1; the last record, step K), and a smaller step."""
    bad = np.asarray(state["bad"]).reshape(-1)
    L0s = np.asarray(state["L0"]).reshape(-1)
    last = [np.asarray(r["loss"]).reshape(bad.size, -1)[:, -1] for r in records.values()]  # net, twin
    with np.errstate(invalid="ignore"):
        end = np.any([~np.isfinite(x) | (x > DIVERGED * np.maximum(np.abs(L0s), 1.0)) for x in last], axis=0)
    bad = np.where((bad < 0) & end, np.broadcast_to(job.ks[..., n - 1], bad.shape), bad)
    if not (bad >= 0).any():
        return
    i = int(np.nonzero(bad >= 0)[0][0])
    who = "" if bad.size == 1 else f" (ensemble members {np.nonzero(bad >= 0)[0].tolist()})"
    L0 = float(L0s[i])
    eta = None if job.eta is None else float(np.broadcast_to(job.eta, bad.shape)[i])
    if cfg.gd:
        fix = (f"with lr={eta:g} the step is too large for this loss landscape (GD is stable only for "
               f"lr < 2/λ_max(Hessian)); try lr={eta / 4:g}")
    else:  # the rate it was built with: optax's scale(−η), else an inject_hyperparams state
        opt, p = cfg.make(1.0), job.member["params"]
        one = jax.tree_util.tree_map(lambda x: x[0], p) if np.ndim(state["bad"]) else p  # an ensemble's first
        lr = config.optax_learning_rate(opt)
        lr = _learning_rate(opt, one, None) if lr is None else lr
        fix = config.smaller_rate(cfg, lr)
    raise DivergenceError(
        f"{what} diverged{who} at step {int(bad[i])}: its loss (or its twin's) left every bound "
        f"(non-finite, or above {DIVERGED:g}·max(L(0), 1) with L(0) = {L0:.3g}); {fix}, or use gradient "
        "flow (biasfree.flow).")


# ----------------------------------------------------------------- the public call


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
      :class:`TrainConfig` holding all the settings below. An optax constructor left uncalled
      (``optax.adam``) is refused: call it, ``optax.adam(1e-3)``.
    - ``steps`` K; ``alpha`` slope α; ``lr`` GD's step η (the time axis' η for another optimiser);
      ``weight_decay`` λ of the coupled ``(λ/2)||θ||²`` (a decoupled decay belongs to the optimiser,
      e.g. ``optax.adamw``); for an ensemble ``alpha``, ``lr`` (GD only) and ``weight_decay`` may be
      arrays of length B. ``loss`` "mse" or "logistic".
    - ``batch_size`` None (full batch) or the points per step; ``mirrored_batches`` draws them as
      mirror pairs (inputs ``[X₊; −X₊]``), else at random; ``key`` the JAX key of the batches
      (default ``PRNGKey(seed)``, ``seed`` 0).
    - ``n_records`` records at ``spacing`` "linear" or "log" steps (0 and K always);
      ``keep_params`` also stores the weights at every record; ``observables`` "all", "loss" or
      "units" (:data:`OBSERVABLES`; "units" fills ``Trajectory.units``, docs/theory.md §11.1).
    - ``twin``: False, True (the linear twin of ``params``: weights × c^{(L−1)/L}, §2.4, §4.1), the
      twin's initial weights, or ``(weights, data)``: a linear twin on its own
      :class:`~biasfree.core.data.Dataset`, row n the same point as the net's row n (each batch takes
      the same rows; one run, not an ensemble); ``degree`` κ of the optimiser for its twin (None:
      measured, §9.2; not needed at α = 1, where the twin's updates are the net's); a plain
      optimiser that is not homogeneous (``optax.adam(lr)``, ε fixed) runs with κ from unit-size
      gradients and an ``ApproximateTwinWarning``, as ``analyse(train=...)`` notes it; a factory
      that is not homogeneous is refused (:func:`~biasfree.dynamics.optimiser_twin.with_degree`).
    - ``layout``: how an ensemble's members share the machine ("auto", "map", "vmap":
      :mod:`~biasfree.dynamics.batching`).
    - ``progress(k, K)``: called between chunks of records; ``time_budget``: seconds the run may
      take: it stops within them plus one step, plus the first chunk's compile time (chunks sized
      by the measured time per step, :mod:`~biasfree.dynamics.pacing`), its last record where it
      stopped (``stats["steps"]`` says how many steps ran).

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
    if not isinstance(optimiser, TrainConfig):  # a config carries its own α
        alpha = twin_slope(params, alpha)
    kw = dict(steps=steps, alpha=alpha, lr=lr, weight_decay=weight_decay, loss=loss,
              batch_size=batch_size, mirrored_batches=mirrored_batches, seed=seed, n_records=n_records,
              spacing=spacing, keep_params=keep_params, degree=degree, name=name)
    kw = check_vectors(kw)
    cfg = config_from_keywords(optimiser, kw)
    mapped = twin_slope(params, None) if run.slope_unset(cfg.alpha) else None  # a config's α left unset:
    if mapped is not None:  # a twin's layers are a linear net's, at the map's α
        cfg = cfg._with_alpha(mapped)
    validate.flag("batched", batched)
    validate.choice("observables", observables, OBSERVABLES)
    if layout is not None:
        validate.choice("layout", layout, LAYOUTS)
    if progress is not None:
        validate.callable_("progress", progress, "a function called as progress(k, K): k of K steps done")
    if time_budget is not None:
        time_budget = validate.positive("time_budget", time_budget, scalar=True, why="seconds of training")
    if isinstance(params, Mapping):
        if not params:
            raise ValueError("params: an empty mapping of members; give at least one {name: Member(net)}")
        if twin is not False or batched:
            raise ValueError("train: with named members ask for twins per member (Member(..., twin=True)) "
                             "and leave twin and batched unset")
        return train_members(params, data, cfg, layout=layout)
    return _train(params, data, cfg, kw, key=key, twin=twin, batched=batched, layout=layout,
                  observables=observables, progress=progress, time_budget=time_budget)


def train_members(members: Mapping[str, Member], data: Dataset, cfg, *, layout: str | None = None) -> Runs:
    """Gradient descent of every named member (and of the twins asked for) with the shared
    settings of ``cfg`` (a :class:`~biasfree.dynamics.train_config.GDConfig`: steps, records, loss);
    :func:`~biasfree.dynamics.trainer.train` with a mapping of members calls this. Members whose
    parameters have the same shapes share one compiled ensemble run; each gets its own α, η and
    λ; a twin (:meth:`Member.linear_twin`) is one more member, recorded on its own time axis
    ``c t``. Returns :class:`Runs` keyed by the same names."""
    bad = [k for k, m in members.items() if not isinstance(m, Member)]
    if bad:
        raise TypeError(f"members {bad} are not biasfree.Member records: wrap each net as "
                        "Member(params, ...)")
    if not cfg.gd:
        raise ValueError("members: named members train by gradient descent (each its own η); pass a "
                         "GDConfig, or train each net with train(params, data, optimiser)")
    run.check_dataset(data)
    for name, m in members.items():
        run.check_ends(f"members[{name!r}]", widths(m.params), data, "build the net for the data")
    jobs = {(name, False): m for name, m in members.items()}
    jobs |= {(name, True): m.linear_twin(cfg.lr if m.lr is None else m.lr)
             for name, m in members.items() if m.twin}
    groups: dict[tuple, list] = {}
    for key, m in jobs.items():
        leaves, tree = jax.tree_util.tree_flatten(tuple(m.params))  # conv shapes and padding are in tree
        groups.setdefault((tree, tuple(np.shape(x) for x in leaves)), []).append(key)
    out: dict[tuple, Trajectory] = {}
    for keys in groups.values():
        ms = [jobs[k] for k in keys]
        params = jax.tree_util.tree_map(lambda *a: np.stack([np.asarray(x) for x in a]),
                                        *[m.params for m in ms])
        vectors = {"alpha": np.array([m.alpha for m in ms], dtype=float),
                   "lr": np.array([cfg.lr if m.lr is None else m.lr for m in ms], dtype=float),
                   "weight_decay": np.array([m.weight_decay for m in ms], dtype=float)}
        tr = _train(params, data, cfg, vectors, batched=True, layout=layout)
        out |= {k: tr.member(i) for i, k in enumerate(keys)}
    return Runs({n: out[(n, False)] for n in members},
                {n: out[(n, True)] for n, m in members.items() if m.twin})


def _train(params, data, cfg: TrainConfig, kw: dict | None = None, *, key=None, twin=False, batched=False,
           layout=None, observables="all", progress=None, time_budget=None, segments=None):
    """:func:`train` once the call's own arguments are checked: checks the run's net and data (once),
    a given twin (:func:`~.run.check_twin_data`), the optimiser's update (``check_update``)."""
    run.check_params_data(params, data, cfg.loss, batched=batched)
    run.check_forward(params, data, cfg, kw, batched)
    run.check_twin(params, data, twin, cfg.loss, batched, observables)
    if not cfg.gd:  # analyse checks it where it reads train=
        config.check_update(cfg.make(1.0), jax.tree_util.tree_map(lambda x: x[0], params) if batched
                            else params, cfg.label)
    return run_checked(params, data, cfg, kw, key=key, twin=twin, batched=batched, layout=layout,
                observables=observables, progress=progress, time_budget=time_budget, segments=segments)


def run_checked(params, data, cfg: TrainConfig, kw: dict | None = None, *, key=None, twin=False,
                batched=False, layout=None, observables="all", progress=None, time_budget=None, segments=None,
                stop=None, twin_optimiser=None):
    """``_train`` with the net, the data, a given twin and the optimiser's update checked by the
    caller (``analyse`` checks them once, then runs this): the settings' fit to the data and to each
    other, the job, the run. ``segments`` (B, R−1): each member's own steps between records (an
    ensemble whose members run different step counts; internal). ``stop(state, last record)``:
    asked between calls, True ends the run there (one net; :func:`~biasfree.dynamics.loop.drive`).
    ``twin_optimiser``: an optax run's, built with κ by the caller (:func:`~.optimiser_twin.with_degree`)."""
    cfg.check_batches(data)
    if cfg.batch_size is not None:
        key = jax.random.PRNGKey(cfg.seed) if key is None else validate.key(key)
    elif key is not None:
        raise ValueError("key: full-batch training draws nothing; pass batch_size for minibatches "
                         "or leave key=None")
    vec = cfg.vectors(kw or {})
    check_twin_slope(params, vec["alpha"])  # an attention layer's twin is a linear net: α = 1 only
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
    if ensemble and run.own_twin_data(twin) is not None:
        raise ValueError(f"twin=(params, data) trains one net beside one twin, but the run is an ensemble "
                         f"({sizes}); train each member in its own call")
    depth = len(params)
    if ensemble:  # every per-member value gets its leading axis B
        vec = {k: np.broadcast_to(v, (B,)) for k, v in vec.items()}
        if not batched:
            params = jax.tree_util.tree_map(lambda a: jnp.broadcast_to(a, (B,) + np.shape(a)), params)
    twin_params, own = None, run.own_twin_data(twin)
    if twin is True:  # weights × c^((L−1)/L): √c at depth 2 (§2.4), the odd-part twin beyond (§4.1)
        twin_params = twin_weights(params, vec["alpha"], depth)
    elif own is not None:
        twin_params = own[0]
    elif twin is not False and twin is not None:
        twin_params = twin
    if twin_params is not None and not cfg.gd and np.ptp(vec["alpha"]) > 0:
        raise ValueError("twin: an optax optimiser's twin depends on α; train members of one α together")
    optimiser = None if cfg.gd else cfg.make(1.0)
    if cfg.gd:  # η before the twin's optimiser, from which the config goes on to the loop
        eta = vec["lr"]
    else:
        e = _learning_rate(optimiser, jax.tree_util.tree_map(lambda x: x[0], params) if ensemble else params,
                           cfg.lr)
        eta = None if e is None else (np.full((B,), e) if ensemble else np.asarray(e))
    if twin_params is None or cfg.gd:
        twin_optimiser = None
    elif twin_optimiser is None:  # built here as analyse builds it once: the one κ policy, with_degree
        _, twin_optimiser, note = with_degree(cfg, float(np.ravel(vec["alpha"])[0]), depth)  # one α (checked)
        if note.startswith("APPROXIMATE"):
            warnings.warn(note, ApproximateTwinWarning, stacklevel=6)  # the caller of train
    if segments is None:
        ks = record_steps(cfg.steps, cfg.n_records, cfg.spacing)
    else:
        ks = np.concatenate([np.zeros((B, 1), np.int64), np.cumsum(segments, axis=-1)], axis=-1)
    member = {"params": params, "alpha": vec["alpha"], "decay": vec["weight_decay"]}
    if cfg.gd:
        member["lr"] = vec["lr"]
    if twin_params is not None:
        time_scale = TwinScales.unchecked(vec["alpha"], depth).time
        member |= {"twin": twin_params, "twin_decay": vec["weight_decay"] / time_scale}
        if cfg.gd:
            member["twin_lr"] = vec["lr"] * time_scale
    member = {k: v if k in ("params", "twin") else jnp.asarray(np.asarray(v, float))
              for k, v in member.items()}
    lay, n_dev = ensemble_layout(layout) if ensemble else (None, 1)
    units = observables == "units"  # the weights at every record: the count is made after the run
    if units:  # a net with no rule is refused before training (the error names those with one)
        for a in np.unique(vec["alpha"]):
            effective_units(jax.tree_util.tree_map(lambda x: x[0], params) if ensemble else params, float(a))
    spec = Spec(optimiser, twin_optimiser, cfg.loss, cfg.keep_params or units, data.mirrored, cfg.batch_size,
                 cfg.mirrored_batches, twin_params is not None, observables != "all", segments is not None,
                 lay, n_dev, "run", own is not None)
    shared = {"data": run.arrays(data), "key": key,
              "pinv": None if observables != "all" else run.pinv(params, data)}
    if own is not None:  # stored in full (no mirrored path): its rows are the net's rows
        t = own[1]
        full = Dataset(t.X, t.Y, t.X_test, t.Y_test, mirror=False) if t.mirrored else t
        shared |= {"twin_data": run.arrays(full),
                   "twin_pinv": None if observables != "all" else run.pinv(twin_params, full)}
    job = Job(member, shared, np.diff(ks, axis=-1), ks, eta)
    state, records, job = drive(job, spec, progress, time_budget, stop)  # job.ks: the records made
    n = job.ks.shape[-1]
    _divergence(state, records, n, job, cfg, "gradient descent" if cfg.gd else f"training by {cfg.label}")
    traj = _trajectory(state, records, n, job, cfg, spec)
    return with_units(traj, vec["alpha"], cfg.keep_params) if units else traj


def _trajectory(state, records, n: int, job: Job, cfg: TrainConfig, spec: Spec) -> Trajectory:
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
    if job.step_seconds is not None:  # a paced run's seconds a step once compiled (loop.drive)
        stats["step_seconds"] = jnp.asarray(job.step_seconds)
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


__all__ = ["GDConfig", "TrainConfig", "optimiser_name", "record_steps", "train"]

