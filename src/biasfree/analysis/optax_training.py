"""``analyse(train=...)`` under any optax optimiser: the net and its linear twin trained in
lockstep, the twin's optimiser from :func:`~biasfree.dynamics.optimiser_twin.optimiser_twin`
(docs/theory.md §9), the gap measured at every step (or at ``n_records`` steps for long runs).

Where the twin is exact: docs/theory.md §9.4; elsewhere the gap is what it measures. Unlike
GD there is no gradient-flow curve to compare with: Adam's steps are not a time
discretisation of the flow, so ``predicted`` is NaN.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass

import jax
import numpy as np
import optax

from .. import _validate as validate
from ..core.data import Dataset
from ..dynamics.gd import record_steps
from ..dynamics.optimiser_twin import (
    HOMOGENEITY_RTOL,
    PROBE_RHOS,
    NotHomogeneousError,
    _name,
    measure_degree,
    optimiser_twin,
    probe_rhos,
)
from ..dynamics.optimisers import train
from ..dynamics.twin_training import PairedRun

EVERY_STEP_MAX = 5000
"""Runs of up to this many steps are recorded at every step (the gap's maximum over every
step); longer ones at ``OptaxConfig.n_records`` evenly spaced steps."""


NAMED: dict[str, Callable[..., Callable]] = {
    "sgd": lambda lr: lambda rho: optax.sgd(lr),
    "momentum": lambda lr: lambda rho: optax.sgd(lr, momentum=0.9),
    "nesterov": lambda lr: lambda rho: optax.sgd(lr, momentum=0.9, nesterov=True),
    "adam": lambda lr: lambda rho: optax.adam(lr, eps=1e-8 * rho),
    "rmsprop": lambda lr: lambda rho: optax.rmsprop(lr, eps=1e-8 * rho**2),
    "sign_sgd": lambda lr: lambda rho: optax.sign_sgd(lr),
    "lion": lambda lr, weight_decay=1e-3: lambda rho: optax.lion(lr, weight_decay=weight_decay * rho),
    "adamw": lambda lr, weight_decay=1e-4: lambda rho: optax.adamw(lr, eps=1e-8 * rho,
                                                                   weight_decay=weight_decay * rho),
    "muon": lambda lr: lambda rho: optax.contrib.muon(lr, eps=1e-8 * rho),
}
"""The optimisers by name (the CLI's ``--optimiser``, the optimisers claim's table): each a
factory of the step η (Lion and AdamW also of ``weight_decay``, default optax's) returning a
factory of ρ whose constants with gradient units are rescaled so that the twin is exact
(docs/theory.md §9.2): ε ×ρ (Adam, AdamW, Muon), RMSProp's ε inside the square root ×ρ²,
the decoupled decay ×ρ^{1+κ} = ×ρ (κ = 0); optax defaults otherwise (momentum 0.9, Adam's
β = (0.9, 0.999))."""


@dataclass(frozen=True)
class OptaxConfig:
    """Training by ``optimiser`` for ``analyse(train=...)``: an ``optax.GradientTransformation``
    or a factory ``rho -> GradientTransformation`` (exact twins for ε-type constants,
    :func:`~biasfree.dynamics.optimiser_twin.optimiser_twin`); ``steps`` K; ``batch_size``
    None (full batch) or points per step, drawn as mirror pairs when ``mirrored_batches``
    (the inputs must then be laid out ``[X₊; −X₊]``) with the PRNG seed ``seed``; ``degree``
    κ (None: measured); ``name`` for the verdict (default: the optimiser's); ``n_records``
    stored records when K > :data:`EVERY_STEP_MAX` (else every step); ``twin_note`` how κ was
    found (set by :func:`with_degree`)."""

    optimiser: object
    steps: int = 1000
    batch_size: int | None = None
    mirrored_batches: bool = True
    seed: int = 0
    degree: float | None = None
    name: str | None = None
    n_records: int = 1001
    twin_note: str = ""

    def __post_init__(self):
        if self.factory:
            validate.callable_("optimiser", self.optimiser, validate.OPTIMISER)
        object.__setattr__(self, "steps", validate.integer("steps", self.steps, 1))
        if self.batch_size is not None:
            object.__setattr__(self, "batch_size", validate.integer("batch_size", self.batch_size, 1))
        validate.flag("mirrored_batches", self.mirrored_batches)
        object.__setattr__(self, "seed", validate.seed(self.seed))
        if self.degree is not None:
            object.__setattr__(self, "degree", validate.real("degree", self.degree, scalar=True))
        object.__setattr__(self, "n_records", validate.integer("n_records", self.n_records, 2))

    @property
    def label(self) -> str:
        return self.name or _name(self.optimiser)

    @property
    def factory(self) -> bool:
        return not _is_transformation(self.optimiser)

    def make(self, rho: float):
        """The optimiser for gradients ×ρ (a plain optimiser: itself)."""
        return self.optimiser(rho) if self.factory else self.optimiser

    def record(self) -> dict:
        """What ``analysis.json`` stores (the optimiser by name)."""
        return {"optimiser": self.label, "steps": self.steps, "batch_size": self.batch_size,
                "mirrored_batches": self.mirrored_batches, "seed": self.seed, "degree": self.degree}


def as_optax_config(train) -> OptaxConfig | None:
    """``train`` as an :class:`OptaxConfig` when it is one, an optax optimiser (K = 1000 steps,
    full batch) or a factory ``rho -> optimiser``; None otherwise."""
    if isinstance(train, OptaxConfig):
        return train
    if _is_transformation(train):
        return OptaxConfig(train)
    return None


def _is_transformation(obj) -> bool:
    """Whether ``obj`` is an optax ``GradientTransformation`` (has ``init`` and ``update``)."""
    return hasattr(obj, "init") and hasattr(obj, "update")


def with_degree(cfg: OptaxConfig, alpha: float, depth: int) -> OptaxConfig:
    """``cfg`` with κ and ``twin_note`` set: κ measured
    (:func:`~biasfree.dynamics.optimiser_twin.measure_degree`) unless given. A plain
    optimiser that is not homogeneous (Adam with its ε = 1e-8 fixed) gets the κ of its
    updates on unit-size gradients, where ε is negligible (the refusal's κ at probe scale 1
    and the first of :data:`PROBE_RHOS`), rounded to an integer, and the note says the twin is
    then approximate; a factory that is not homogeneous is refused (its ρ-scaling is wrong)."""
    if cfg.degree is not None:
        return dataclasses.replace(cfg, twin_note=f"κ = {cfg.degree:g} as given")
    try:
        kappa = measure_degree(cfg.make, probe_rhos(alpha, depth), name=cfg.label)
        note = f"κ = {kappa:g} measured: the twin optimiser is exact (docs/theory.md §9)"
    except NotHomogeneousError as refused:
        kappa = refused.kappas[1.0, PROBE_RHOS[0]]  # unit-size gradients (ε negligible), ρ = 3
        if cfg.factory or not math.isfinite(kappa):
            raise
        kappa = float(round(kappa))
        note = (f"APPROXIMATE twin: {cfg.label} is not homogeneous in the gradients within round-off "
                f"(tolerance {HOMOGENEITY_RTOL:g}), κ = {kappa:g} from unit-size gradients; the measured gap "
                "includes the constant's effect "
                "(pass a factory, e.g. lambda rho: optax.adam(lr, eps=1e-8 * rho), for an exact twin)")
    return dataclasses.replace(cfg, degree=kappa, twin_note=note)


def train_optax(params, twin, alpha: float, X, Y, cfg: OptaxConfig,
                progress=None) -> tuple[PairedRun, np.ndarray]:
    """``params`` (slope ``alpha``) under ``cfg.optimiser`` beside ``twin`` (α = 1) under its
    twin optimiser of degree ``cfg.degree`` (:func:`with_degree`), on the same batches:
    ``(run, t)``, the record times ``t`` (η k when η is known, else k) and ``run`` as GD's
    :class:`~biasfree.dynamics.twin_training.PairedRun`, its gap in loss units (the caller
    divides by its reference loss) and the maximum over the records.
    Each run is one compiled loop of ``cfg.steps`` steps, so its time is bounded by them (no
    time budget applies); ``progress(k, 2K)`` is called before, between and after the two runs."""
    twin_opt = optimiser_twin(cfg.optimiser, alpha, len(params), cfg.degree)
    R = cfg.steps + 1 if cfg.steps <= EVERY_STEP_MAX else cfg.n_records
    key = None if cfg.batch_size is None else jax.random.PRNGKey(cfg.seed)
    data = Dataset(X, Y)
    kw = dict(steps=cfg.steps, batch_size=cfg.batch_size, mirrored_batches=cfg.mirrored_batches, key=key,
              n_records=R)
    report = progress or (lambda k, n: None)
    report(0, 2 * cfg.steps)
    net = train(params, data, cfg.make(1.0), alpha=alpha, **kw)
    report(cfg.steps, 2 * cfg.steps)
    tw = train(twin, data, twin_opt, alpha=1.0, **kw)
    report(2 * cfg.steps, 2 * cfg.steps)
    loss, twin_loss = np.asarray(net.loss), np.asarray(tw.loss)
    gaps = np.abs(loss - twin_loss)
    i = int(np.argmax(gaps))
    k = record_steps(cfg.steps, R, "linear")
    run = PairedRun(cfg.steps, k, loss, twin_loss, np.asarray(net.even_energy), float(gaps[i]), int(k[i]),
                    net.params, tw.params)
    return run, np.asarray(net.t)
