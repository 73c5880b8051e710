"""The one record of a discrete-time run (:class:`TrainConfig`; gradient descent's is
:class:`GDConfig`), the steps a run records at, and a readable name for an optimiser: what
:func:`~biasfree.dynamics.trainer.train`, ``analyse(train=...)``, the claims and the CLI share;
how ``train``'s keywords (:func:`config_from_keywords`) and ``analyse``'s ``train=``
(:func:`as_train_config`) become one. A config says itself whether it is the plain GD the
flow's theory covers (:attr:`TrainConfig.plain_gd`) and at which steps it records
(:meth:`TrainConfig.recorded`)."""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
import optax

from .. import _validate as validate
from ..core.data import mirrored_half
from .run import SPACINGS, RunConfig


def is_transformation(obj) -> bool:
    """Whether ``obj`` is an optax ``GradientTransformation`` (has ``init`` and ``update``)."""
    return hasattr(obj, "init") and hasattr(obj, "update")


OPTAX_NAMES = {"scale_by_adam": "adam", "scale_by_rms": "rmsprop", "scale_by_lion": "lion",
               "scale_by_sign": "sign_sgd", "scale_by_rss": "adagrad", "scale_by_muon": "muon",
               "scale_by_amsgrad": "amsgrad", "scale_by_adamax": "adamax", "scale_by_belief": "adabelief",
               "scale_by_novograd": "novograd", "scale_by_lamb": "lamb", "scale_by_yogi": "yogi",
               "trace": "sgd with momentum", "identity": "sgd"}
"""The optimiser each of optax's core transformations makes (``optax.adam`` is
``chain(scale_by_adam(...), scale(-lr))``); another ``scale_by_X`` is called X."""
_PLUMBING = {"chain", "named_chain", "partition", "with_extra_args_support", "scale",
             "scale_by_learning_rate",
             "add_decayed_weights", "inject_hyperparams", "masked", "multi_transform", "set_to_zero",
             "identity", "trace", "wrapped_transform", "apply_if_finite", "clip", "clip_by_global_norm",
             "init_empty_state", "tree_map_params"}


def _optax_parts(fn, seen: set, found: list) -> list:
    """The names of the optax functions ``fn`` is built of, in the order its closures hold them."""
    if hasattr(fn, "init") and hasattr(fn, "update"):
        fn = fn.update
    if id(fn) in seen or not callable(fn):
        return found
    seen.add(id(fn))
    if (getattr(fn, "__module__", "") or "").startswith("optax"):
        found.append((getattr(fn, "__qualname__", "") or "").split(".<locals>")[0])
    for cell in getattr(fn, "__closure__", None) or ():
        try:
            held = cell.cell_contents
        except ValueError:  # an empty cell
            continue
        items = (held.values() if isinstance(held, dict) else held if isinstance(held, tuple | list)
                 else (held,))
        for item in items:  # named_chain holds (name, transformation) pairs
            item = item[1] if isinstance(item, tuple) and len(item) == 2 else item
            if callable(item) or hasattr(item, "update"):
                _optax_parts(item, seen, found)
    return found


def optax_name(opt) -> str | None:
    """optax's own name for a transformation it built (``optax.adam(1e-3)`` → "adam",
    ``optax.adamw`` → "adamw", ``optax.sgd(lr, momentum=0.9)`` → "sgd with momentum",
    ``inject_hyperparams(optax.adam)(...)`` → "adam"), read from the functions its update is
    made of (optax keeps no name on the object); None when it is not optax's."""
    parts = _optax_parts(opt, set(), [])
    core = [p for p in parts if p not in _PLUMBING]
    if core:
        name = OPTAX_NAMES.get(core[0], core[0].removeprefix("scale_by_"))
        return "adamw" if name == "adam" and "add_decayed_weights" in parts else name
    for marker in ("trace", "identity"):  # sgd: a trace (momentum) or nothing before scale(-lr)
        if marker in parts:
            return OPTAX_NAMES[marker]
    return None


def optax_learning_rate(opt) -> float | None:
    """The learning rate η an optax alias was built with: ``optax.adam(η)`` is
    ``chain(scale_by_adam(...), scale(−η))``, and ``scale``'s update holds ``step_size = −η``;
    ``|step_size|`` of the first such ``scale`` found in the closures of ``opt.update``. None when
    there is none (a schedule, ``inject_hyperparams``, an optimiser not built by optax)."""
    todo, seen = [opt], set()
    while todo:
        fn = todo.pop()
        fn = fn.update if hasattr(fn, "init") and hasattr(fn, "update") else fn
        if id(fn) in seen or not callable(fn):
            continue
        seen.add(id(fn))
        code = getattr(fn, "__code__", None)
        cells = dict(zip(code.co_freevars, fn.__closure__ or (), strict=True)) if code is not None else {}
        for name, cell in cells.items():
            try:
                held = cell.cell_contents
            except ValueError:  # an empty cell
                continue
            if (name == "step_size" and (getattr(fn, "__qualname__", "") or "").startswith("scale.")
                    and np.ndim(held) == 0 and not callable(held)):
                return abs(float(held))
            items = (held.values() if isinstance(held, dict) else held if isinstance(held, tuple | list)
                     else (held,))
            todo.extend(i[1] if isinstance(i, tuple) and len(i) == 2 else i for i in items)
    return None


def smaller_rate(cfg, lr: float | None) -> str:
    """The advice of a diverged optax run: its optimiser at a quarter of the learning rate ``lr``
    it was built with (None: unknown, a schedule), as optax would be called for it."""
    if lr is None:
        return (f"the step of {cfg.label} is too large; build it with a quarter of its learning rate "
                "(a schedule, or a rate not held in optax's scale(−η), so none is read from it here)")
    name = optimiser_name(cfg.optimiser).split(" ")[0]  # "sgd with momentum" is optax.sgd's
    example = f" (e.g. optax.{name}({lr / 4:g}, ...))" if hasattr(optax, name) else ""
    return (f"{cfg.label} was built with learning rate {lr:g}, too large a step here; build it with "
            f"learning rate {lr / 4:g}{example}")


def check_update(opt, params, label: str) -> None:
    """Refuse, before the run, an optimiser whose ``update`` fails on the net's weights or whose
    updates are not shaped like them (the loop adds ``u`` to ``θ`` leaf by leaf); its shapes are
    traced only (``jax.eval_shape``), nothing runs."""
    def first(p):
        return opt.update(jax.tree_util.tree_map(jnp.zeros_like, p), opt.init(p), p)[0]

    label = "optimiser" if label == "optimiser" else f"optimiser {label}"
    try:
        u = jax.eval_shape(first, params)
    except Exception as e:  # noqa: BLE001 - the optimiser is the caller's code: say which failed
        why = (str(e).strip().splitlines() or [""])[0][:160]
        raise TypeError(f"{label}: its init/update fails on the net's weights ({type(e).__name__}: "
                        f"{why}); give an optax.GradientTransformation whose update(grads, state, params) "
                        "returns (updates, state)") from None
    want = [np.shape(a) for a in jax.tree_util.tree_leaves(params)]
    got = [np.shape(b) for b in jax.tree_util.tree_leaves(u)]
    if jax.tree_util.tree_structure(u) != jax.tree_util.tree_structure(params) or got != want:
        raise TypeError(f"{label}: its update returns {len(got)} arrays of shapes {got[:4]} where "
                        f"the weights have {len(want)} of shapes {want[:4]}; return updates shaped like the "
                        "weights (one per weight, as optax's do)")


def optimiser_name(opt) -> str:
    """A readable name for an optimiser (issue 40): "GD" for None; else optax's own name
    (:func:`optax_name`) of the transformation, or of what a factory ``rho -> optimiser`` builds
    at ρ = 1; else the factory's ``__name__`` (``def my_opt(rho): ...`` gives "my_opt"); else
    "optimiser". ``TrainConfig(name=...)`` overrides all of these."""
    if opt is None:
        return "GD"
    own = ""
    if not is_transformation(opt):
        own = getattr(opt, "__name__", "") or ""
        own = "" if own == "<lambda>" or "<locals>" in own else own
        try:
            opt = opt(1.0)
        except Exception:  # a factory that refuses ρ = 1 is refused later, with its own message
            return own or "optimiser"
        if not is_transformation(opt):
            return own or "optimiser"
    return optax_name(opt) or own or "optimiser"


MAX_STEPS = 2**31 - 1
"""The most steps a run takes: the compiled loop counts steps (and the step of a divergence, and
of the largest net–twin gap) in int32."""


def _made(opt, rho, label: str):
    """``opt``, what a factory built at ρ, checked to be a ``GradientTransformation``."""
    if not is_transformation(opt):
        who = "" if label == "optimiser" else f" {label}"
        raise TypeError(f"optimiser: the factory{who} returned {type(opt).__name__} {opt!r:.60} at ρ = "
                        f"{rho:g}, not an optax.GradientTransformation; return one, e.g. "
                        "lambda rho: optax.adam(1e-3, eps=1e-8 * rho)")
    return opt


@dataclass(frozen=True, kw_only=True)
class TrainConfig(RunConfig):
    """One discrete-time run (module doc): the record :func:`~biasfree.dynamics.trainer.train`
    takes, and the one the claims, the sweeps, ``analyse(train=...)`` and the CLI build.

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
        if self.optimiser is not None:
            validate.optimiser("optimiser", self.optimiser)
        if self.optimiser is None and self.lr is None:
            raise ValueError("lr: gradient descent (optimiser=None) needs its step η, e.g. "
                             "TrainConfig(lr=0.01), or pass an optax optimiser")
        if self.lr is not None:
            self._set_positive("lr", "the step η of θ ← θ − η∇J (GD), or the η that puts record k at "
                               "t = η k; e.g. 0.01")
        self._set_integer("steps", 1)
        if self.steps > MAX_STEPS:
            raise ValueError(f"steps={self.steps} is more than the {MAX_STEPS} steps the compiled loop "
                             "counts (int32); pass at most that (time_budget=seconds stops a long run early)")
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
        return self.optimiser is not None and not is_transformation(self.optimiser)

    @property
    def plain_gd(self) -> bool:
        """Full-batch GD on the MSE without weight decay: the discretisation of the flow that
        :mod:`~biasfree.analysis.stationary`'s and the converged bound's arguments cover."""
        return self.gd and self.batch_size is None and self.weight_decay == 0 and self.loss == "mse"

    def recorded(self) -> np.ndarray:
        """The steps the run records at: :func:`record_steps` of ``steps``, ``n_records`` and
        ``spacing``."""
        return record_steps(self.steps, self.n_records, self.spacing)

    @property
    def label(self) -> str:
        return self.name or ("GD" if self.gd else optimiser_name(self.optimiser))

    @property
    def t_max(self) -> float:
        """``η K`` (K when η is unknown)."""
        return (self.lr or 1.0) * self.steps

    def check_batches(self, data) -> None:
        """Refuse a ``batch_size`` that does not fit ``data`` (a Dataset): above its N points, or,
        for mirrored batches, odd or on inputs not laid out as [X₊; −X₊]."""
        if self.batch_size is None:
            return
        N, b = np.shape(data.Y)[0], self.batch_size
        if b > N:
            raise ValueError(f"batch_size={b} exceeds the {N} training points; pass at most {N} "
                             "(or batch_size=None for full batches)")
        if self.mirrored_batches:
            if not (data.mirrored or mirrored_half(np.asarray(data.X)) is not None):
                raise ValueError("mirrored_batches=True needs symmetric inputs in the layout [X₊; -X₊] "
                                 "(build them with bf.symmetrize(X, Y)); pass mirrored_batches=False "
                                 "(biasfree analyse: --random-batches) for plain random batches")
            if b % 2:
                raise ValueError(f"batch_size={b}: mirrored batches hold whole pairs (x, -x); pass an even "
                                 f"batch_size such as {b + 1 if b + 1 <= N else b - 1}")

    def make(self, rho: float = 1.0):
        """The optimiser for gradients ×ρ (a plain optimiser: itself; GD: ``optax.sgd(lr)``)."""
        if self.gd:
            return optax.sgd(self.lr)
        return _made(self.optimiser(rho), rho, self.label) if self.factory else self.optimiser

    def vectors(self, kw: dict) -> dict:
        """Per-member α, η, λ: the keywords' arrays (length B or 1, checked by the caller,
        :func:`check_vectors`) or the config's own value."""
        out = {}
        for k in VECTOR_RULES:
            v = kw.get(k)
            v = getattr(self, k) if v is None or np.ndim(v) == 0 else v
            out[k] = np.asarray(np.nan if v is None else v, dtype=float)
        return out

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


# ------------------------------------------------- train's keywords as a config


def config_from_keywords(optimiser, kw: dict) -> TrainConfig:
    """The run's :class:`TrainConfig` from :func:`~biasfree.dynamics.trainer.train`'s keywords:
    ``optimiser`` itself when it is one (keywords then set only
    per-member vectors), else built from the optimiser and the keywords."""
    given = {k: v for k, v in kw.items() if v is not None}
    if not (optimiser is None or isinstance(optimiser, TrainConfig) or is_transformation(optimiser)):
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
    if optimiser is None and np.ndim(given.get("lr")) > 0:  # per-member steps: each member's η is its own
        scalar["lr"] = float(np.max(given["lr"]))  # the config's one η: the longest horizon t = ηK
    return TrainConfig(optimiser=optimiser, **scalar)


VECTOR_RULES = {"alpha": lambda v: validate.slope(v, "alpha", array_ok=True),
                 "lr": lambda v: validate.positive("lr", v, why="every member's step size η"),
                 "weight_decay": lambda v: validate.nonnegative("weight_decay", v, why="λ of (λ/2)||θ||²")}


def check_vectors(kw: dict) -> dict:
    """``kw`` with its per-member arrays of α, η, λ checked: 1-D, not empty, their values valid
    (scalars go to the config, checked there)."""
    out = dict(kw)
    for k, rule in VECTOR_RULES.items():
        v = kw.get(k)
        if v is not None:
            try:  # a ragged list or a string: refused here, before NumPy reads its shape
                np.asarray(v, dtype=float)
            except (TypeError, ValueError):
                raise ValueError(f"{k}={v!r} must be a number or a 1-D array of per-member values "
                                 "(one per ensemble member)") from None
        if v is not None and np.ndim(v) > 0:
            if np.ndim(v) > 1 or np.size(v) == 0:
                raise ValueError(f"{k} must be a scalar or a 1-D array of per-member values, got shape "
                                 f"{np.shape(v)}")
            out[k] = rule(v)
    return out


# ------------------------------------------------- analyse's train= as a config


def as_train_config(train) -> TrainConfig | None:
    """``train`` as a :class:`~biasfree.dynamics.train_config.TrainConfig` when it is one, an optax
    optimiser or a factory ``rho -> optimiser`` (K = 1000 steps, full batch, 201 records);
    None for None, False and True (the caller's default GD)."""
    if isinstance(train, TrainConfig):
        return train
    if train is None or isinstance(train, bool):
        return None
    if is_transformation(train) or callable(train):
        return TrainConfig(optimiser=train, n_records=201)
    raise TypeError(f"train={train!r} must be None, True (default training), an optax optimiser, a factory "
                    "rho -> optimiser or a biasfree.TrainConfig(optimiser=..., steps=...)")

