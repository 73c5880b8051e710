"""The one record of a discrete-time run (:class:`TrainConfig`; gradient descent's is
:class:`GDConfig`), the steps a run records at, and a readable name for an optimiser: what
:func:`~biasfree.dynamics.trainer.train`, ``analyse(train=...)``, the claims and the CLI share."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import optax

from .. import _validate as validate
from .run import SPACINGS, RunConfig


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
