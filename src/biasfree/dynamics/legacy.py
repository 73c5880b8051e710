"""The training entry points of 0.1 (``gd``, ``gd_ensemble``, ``gd_members``, ``OptaxConfig``,
``train_optax``, ``train_with_twin``), kept for one release as thin wrappers of
:func:`~biasfree.dynamics.trainer.train`, each with a :class:`DeprecationWarning` that names
the call to use instead. None of them trains on its own."""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable, Mapping

import numpy as np

from ..core.data import Dataset
from ..core.layers import Params
from ..core.twin import twin_scales
from .run import check_cfg
from .train_config import GDConfig, TrainConfig, record_steps
from .trainer import train
from .trajectory import PairedRun, Trajectory


def deprecated(old: str, new: str) -> None:
    """Warn, at the caller's line, that ``old`` goes after this release, and name ``new``."""
    warnings.warn(f"{old} is deprecated and goes after biasfree 0.2: call {new}", DeprecationWarning,
                  stacklevel=3)


def gd(params: Params, data: Dataset, cfg: GDConfig, **kw) -> Trajectory:
    """Deprecated: ``biasfree.train(params, data, cfg)`` is the same gradient descent, bitwise."""
    deprecated("biasfree.gd(params, data, cfg)", "biasfree.train(params, data, cfg)")
    check_cfg(cfg, GDConfig)
    return train(params, data, cfg, **kw)


def gd_ensemble(params: Params, data: Dataset, cfg: GDConfig, *, alpha=None, lr=None, weight_decay=None,
                batched_params: bool = True, layout: str | None = None, **kw) -> Trajectory:
    """Deprecated: ``biasfree.train(params, data, cfg, alpha=..., lr=..., batched=True)`` runs the
    same ensemble (per-member α, η and λ as arrays of length B)."""
    deprecated("biasfree.gd_ensemble(params, data, cfg, ...)",
               "biasfree.train(params, data, cfg, alpha=..., lr=..., weight_decay=..., batched=True)")
    check_cfg(cfg, GDConfig)
    return train(params, data, cfg, alpha=_vector(alpha), lr=_vector(lr), weight_decay=_vector(weight_decay),
                 batched=batched_params, layout=layout, **kw)


def _vector(v):
    """A per-member value for :func:`train` (a scalar override becomes a length-1 array)."""
    return None if v is None else np.atleast_1d(np.asarray(v, dtype=float))


def gd_members(members: Mapping, data: Dataset, cfg: GDConfig, **kw):
    """Deprecated: ``biasfree.train(members, data, cfg)`` trains the same named members."""
    deprecated("biasfree.gd_members(members, data, cfg)", "biasfree.train(members, data, cfg)")
    check_cfg(cfg, GDConfig)
    return train(members, data, cfg, **kw)


def OptaxConfig(optimiser, steps: int = 1000, batch_size: int | None = None, mirrored_batches: bool = True,
                seed: int = 0, degree: float | None = None, name: str | None = None,
                n_records: int = 201) -> TrainConfig:
    """Deprecated: ``TrainConfig(optimiser=..., steps=...)`` is the one record of a discrete run."""
    deprecated("biasfree.OptaxConfig(optimiser, ...)", "biasfree.TrainConfig(optimiser=optimiser, steps=...)")
    return TrainConfig(optimiser=optimiser, steps=steps, batch_size=batch_size,
                       mirrored_batches=mirrored_batches, seed=seed, degree=degree, name=name,
                       n_records=n_records)


def train_with_twin(params: Params, twin: Params, X, Y, *, alpha: float, lr: float, time_scale: float,
                    steps: int, n_records: int = 201, loss: str = "mse", weight_decay: float = 0.0,
                    time_budget: float | None = None,
                    progress: Callable[[int, int], None] | None = None) -> PairedRun:
    """Deprecated: ``biasfree.train(params, Dataset(X, Y), GDConfig(...), twin=twin,
    observables="loss")`` trains the net and its twin side by side in one compiled loop."""
    deprecated("train_with_twin(...)", "biasfree.train(params, data, GDConfig(...), twin=twin)")
    if time_scale != twin_scales(alpha, len(params)).time:
        raise ValueError(f"time_scale={time_scale:g}: the twin's time scale is fixed by α and depth "
                         f"({twin_scales(alpha, len(params)).time:g}); train(..., twin=...) sets it")
    cfg = GDConfig(lr=lr, steps=steps, alpha=alpha, n_records=max(2, n_records), loss=loss,
                   weight_decay=weight_decay)
    traj = train(params, Dataset(X, Y), cfg, twin=twin, observables="loss", time_budget=time_budget,
                 progress=progress)
    return PairedRun.of(traj, record_steps(cfg.steps, cfg.n_records))


def train_optax(params, twin, alpha: float, X, Y, cfg: TrainConfig, progress=None):
    """Deprecated: ``biasfree.train(params, Dataset(X, Y), cfg, alpha=..., twin=twin,
    observables="loss")`` trains the net beside its twin in one loop; returns ``(run, t)`` as
    0.1 did (:class:`~biasfree.dynamics.trajectory.PairedRun` and the record times)."""
    deprecated("train_optax(params, twin, alpha, X, Y, cfg)",
               "biasfree.train(params, data, dataclasses.replace(cfg, alpha=alpha), twin=twin)")
    cfg = dataclasses.replace(cfg, alpha=alpha)
    traj = train(params, Dataset(X, Y), cfg, twin=twin, observables="loss", progress=progress)
    return PairedRun.of(traj, record_steps(cfg.steps, cfg.n_records)), np.asarray(traj.t)
