"""``analyse``'s stage answer (docs/theory.md §11.7.9): :func:`stage_answer` gives
:func:`~biasfree.analysis.stage.stage_of` for nets small enough that the nearest fixed point is
cheap (:data:`ANALYSE_WEIGHTS`), the effective units alone above, and the one-line refusal of a
net with no effective-unit rule."""

from __future__ import annotations

import numpy as np

from ..core.attention import MergedAttention, SeparateAttention
from ..core.attention_twin import merged_to_twin
from ..core.units import effective_units
from .saddles import DENSE_HESSIAN
from .stage import stage_of
from .stage_result import Stage

ANALYSE_WEIGHTS = DENSE_HESSIAN
"""``analyse`` builds the nearest fixed point only for nets of at most this many weights (the size
up to which the Hessian is formed whole, §11.4.3); above, it reports the effective units alone
(measured: ≤ 20% of ``analyse``'s time at ``bench_analyse`` medium, docs/performance.md)."""


def weights(params) -> int:
    """The number of trained weights of a net or an attention layer (its twin's for merged)."""
    if isinstance(params, MergedAttention | SeparateAttention):
        return sum(int(np.size(la.W)) for la in merged_to_twin(params))
    leaves = (getattr(la, n, None) for la in params for n in ("W", "K", "V", "b"))
    return sum(int(np.size(leaf)) for leaf in leaves if leaf is not None)


def stage_answer(params, X, Y, alpha: float, init=None, history=None) -> Stage | str:
    """What ``analyse`` reports (``Analysis.stage``): :func:`stage_of` for nets of at most
    :data:`ANALYSE_WEIGHTS` weights (with the curve of ``history``'s measured rerun from ``init``,
    when there is one), else the effective units alone (loss NaN: a pass over the data would cost
    as much as the rest, measured at bench_analyse medium) with a note; the one-line refusal
    (a str, without a "stage: " of its own) for a net with no effective-unit rule."""
    try:
        n = weights(params)
        if n <= ANALYSE_WEIGHTS:
            run = None if history is None or history.prediction is None else history.prediction.trained
            curve = None if run is None else (np.asarray(run.t), np.asarray(run.loss))
            return stage_of(params, X, Y, alpha, init, curve=curve)
        units = effective_units(params, alpha, init=init)  # one Gram matrix: no pass over the data
        return Stage(units.family, float("nan"), units, init_known=init is not None, notes=(
            f"the nearest fixed point is not built by analyse above {ANALYSE_WEIGHTS} weights (this net has "
            f"{n}): call biasfree.analysis.stage.stage(model, data) for it",))
    except ValueError as e:  # the callers print it after their own "stage: "
        return str(e)
