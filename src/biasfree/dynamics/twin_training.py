"""A net beside its linear twin: the record of such a run (:class:`PairedRun`), the deprecated
0.1 entry point :func:`train_with_twin` (now ``train(..., twin=...)``, one compiled loop with
everything else), and two measures of how far training moved the weights."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..core.data import Dataset
from ..core.layers import Params
from ..core.twin import twin_scales
from .legacy import deprecated
from .train_config import GDConfig, record_steps
from .trainer import train
from .trajectory import Trajectory


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


def relative_movement(before: Params, after: Params) -> tuple[float, ...]:
    """Per layer ``‖A_l(T) − A_l(0)‖_F / ‖A_l(0)‖_F``, A_l the layer's matrix (∞ for a layer that
    started at 0)."""
    def one(a, b):
        A = np.asarray(a.matrix)
        n0 = float(np.linalg.norm(A))
        return float(np.linalg.norm(np.asarray(b.matrix) - A)) / n0 if n0 > 0 else float("inf")
    return tuple(one(a, b) for a, b in zip(before, after, strict=True))


def row_alignment(W1, directions) -> float:
    """Share of the first layer's energy in the span of ``directions`` (d, r),
    orthonormal columns: ``‖W₁ D‖_F² / ‖W₁‖_F²`` (r/d on average for random rows, 1 when
    every row lies in the span)."""
    W1 = np.asarray(W1, float)
    tot = float(np.sum(W1**2))
    return float(np.sum((W1 @ directions) ** 2) / tot) if tot > 0 else 0.0
