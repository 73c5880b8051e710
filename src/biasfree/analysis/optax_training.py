"""``analyse(train=...)`` under any optax optimiser: the optimisers by name (the CLI's
``--optimiser``), the twin optimiser's degree κ (measured, or given) with a note on how it was
found, and what ``train=`` may be. The net and its twin train side by side in the one loop
(:func:`~biasfree.dynamics.trainer.train` with ``twin``), the twin's optimiser from
:func:`~biasfree.dynamics.optimiser_twin.optimiser_twin` (docs/theory.md §9), the gap
measured at every step.

Where the twin is exact: docs/theory.md §9.4; elsewhere the gap is what it measures. Unlike
GD there is no gradient-flow curve to compare with: Adam's steps are not a time
discretisation of the flow, so ``predicted`` is NaN.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import numpy as np
import optax

from ..core.data import Dataset
from ..dynamics.legacy import deprecated
from ..dynamics.optimiser_twin import (
    HOMOGENEITY_RTOL,
    PROBE_RHOS,
    NotHomogeneousError,
    measure_degree,
    probe_rhos,
)
from ..dynamics.train_config import TrainConfig, is_transformation, record_steps
from ..dynamics.trainer import train
from ..dynamics.twin_training import PairedRun
from .verdict import FLOW, Dynamics

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


def OptaxConfig(optimiser, steps: int = 1000, batch_size: int | None = None, mirrored_batches: bool = True,
                seed: int = 0, degree: float | None = None, name: str | None = None,
                n_records: int = 201) -> TrainConfig:
    """Deprecated: ``TrainConfig(optimiser=..., steps=...)`` is the one record of a discrete run."""
    deprecated("biasfree.OptaxConfig(optimiser, ...)", "biasfree.TrainConfig(optimiser=optimiser, steps=...)")
    return TrainConfig(optimiser=optimiser, steps=steps, batch_size=batch_size,
                       mirrored_batches=mirrored_batches, seed=seed, degree=degree, name=name,
                       n_records=n_records)


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


def plain_gd(cfg: TrainConfig) -> bool:
    """Full-batch GD on the MSE without weight decay: the discretisation of the flow that
    :mod:`~biasfree.analysis.stationary`'s and the converged bound's arguments cover."""
    return cfg.gd and cfg.batch_size is None and cfg.weight_decay == 0 and cfg.loss == "mse"


def dynamics_of(given: TrainConfig | None, cfg: TrainConfig | None) -> Dynamics:
    """The training a prediction is for, and how to measure it: gradient flow without a training
    config (measured by ``train=True``); GD at the config's step (``train=True`` when the user
    asked for the default, else the ``GDConfig`` given); any other optimiser by its name (its
    twin is exact, but no closed form predicts it: measured by ``train=`` that optimiser)."""
    if cfg is None:
        return FLOW
    if cfg.gd:
        if given is None:
            return Dynamics(f"GD at lr={cfg.lr:.3g}", "True", True, "--train")
        plain = plain_gd(cfg)  # minibatches, weight decay or another loss: not the flow of the MSE
        extra = ("" if plain else
                 f" (batch {cfg.batch_size}, weight decay {cfg.weight_decay:g}, {cfg.loss} loss)")
        return Dynamics(f"GD at lr={cfg.lr:.3g}{extra}", f"GDConfig(lr={cfg.lr:g}, steps={cfg.steps})", plain,
                        f"--train-steps {cfg.steps} --lr {cfg.lr:g}")
    name = cfg.label
    cli = (f"--train-steps {cfg.steps} --optimiser {name}" + (f" --lr {cfg.lr:g}" if cfg.lr else "")
           if name in NAMED else "")
    return Dynamics(name, name, False, cli)


def with_degree(cfg: TrainConfig, alpha: float, depth: int) -> tuple[TrainConfig, str]:
    """``(cfg with κ set, a note on how κ was found)``: κ measured
    (:func:`~biasfree.dynamics.optimiser_twin.measure_degree`) unless given. A plain
    optimiser that is not homogeneous (Adam with its ε = 1e-8 fixed) gets the κ of its
    updates on unit-size gradients, where ε is negligible (the refusal's κ at probe scale 1
    and the first of :data:`~biasfree.dynamics.optimiser_twin.PROBE_RHOS`), rounded to an integer,
    and the note says the twin is then approximate; a factory that is not homogeneous is refused
    (its ρ-scaling is wrong)."""
    if cfg.degree is not None:
        return cfg, f"κ = {cfg.degree:g} as given"
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
    return dataclasses.replace(cfg, degree=kappa), note


def train_optax(params, twin, alpha: float, X, Y, cfg: TrainConfig, progress=None):
    """Deprecated: ``biasfree.train(params, Dataset(X, Y), cfg, alpha=..., twin=twin,
    observables="loss")`` trains the net beside its twin in one loop; returns ``(run, t)`` as
    0.1 did (:class:`~biasfree.dynamics.twin_training.PairedRun` and the record times)."""
    deprecated("train_optax(params, twin, alpha, X, Y, cfg)",
               "biasfree.train(params, data, dataclasses.replace(cfg, alpha=alpha), twin=twin)")
    cfg = dataclasses.replace(cfg, alpha=alpha)
    traj = train(params, Dataset(X, Y), cfg, twin=twin, observables="loss", progress=progress)
    return PairedRun.of(traj, record_steps(cfg.steps, cfg.n_records)), np.asarray(traj.t)
