"""The training entry points of 0.1, kept for one release as thin wrappers of
:func:`~biasfree.dynamics.trainer.train`, each with a :class:`DeprecationWarning` that names
the call to use instead. None of them trains on its own."""

from __future__ import annotations

import warnings
from collections.abc import Mapping

import numpy as np

from ..core.data import Dataset
from ..core.layers import Params
from .run import check_cfg
from .train_config import GDConfig
from .trainer import train
from .trajectory import Trajectory


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
