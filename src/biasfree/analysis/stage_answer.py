"""``analyse``'s stage answer (docs/theory.md §11.7.9): :func:`stage_answer` gives
:func:`~biasfree.analysis.stage.stage_of` whole for nets of at most :data:`ANALYSE_WEIGHTS` weights,
and above within a budget (:mod:`~biasfree.analysis.stage_budget`: :data:`STAGE_SECONDS` or
:data:`STAGE_SHARE` of the rest of the call, whichever is longer, and arrays of at most
:data:`STAGE_NUMBERS` numbers), the effective units alone where the search does not fit it; the
one-line refusal of a net with no effective-unit rule."""

from __future__ import annotations

import numpy as np

from ..core.attention import MergedAttention, SeparateAttention
from ..core.attention_twin import merged_to_twin
from ..core.units import effective_units
from .saddles import DENSE_HESSIAN
from .stage import stage_of
from .stage_budget import OverBudget, budget
from .stage_result import Stage

ANALYSE_WEIGHTS = DENSE_HESSIAN
"""``analyse`` builds the nearest fixed point of a net of at most this many weights whatever it costs
(the size up to which the Hessian is formed whole, §11.4.3: seconds at most, measured); above, within
the budget below."""
STAGE_SECONDS = 10.0
"""Seconds the nearest fixed point of a net above :data:`ANALYSE_WEIGHTS` weights may take at least
(its Levenberg–Marquardt searches, Newton steps and Lanczos products check the time)."""
STAGE_SHARE = 0.2
"""…or this fraction of the rest of ``analyse``'s call, where longer (issue 49: the new answers add
at most 20% at ``bench_analyse`` medium, docs/performance.md)."""
STAGE_NUMBERS = 2**25
"""The largest array a search above :data:`ANALYSE_WEIGHTS` weights may make (256 MiB in float64):
a narrow net's Jacobian has (N p) × (its weights) numbers, refused before it is made (at
bench_analyse medium, 784→1024→10 on 20,000 inputs, one unit's is 1.6e8)."""


def weights(params) -> int:
    """The number of trained weights of a net or an attention layer (its twin's for merged)."""
    if isinstance(params, MergedAttention | SeparateAttention):
        return sum(int(np.size(la.W)) for la in merged_to_twin(params))
    leaves = (getattr(la, n, None) for la in params for n in ("W", "K", "V", "b"))
    return sum(int(np.size(leaf)) for leaf in leaves if leaf is not None)


def stage_answer(params, X, Y, alpha: float, init=None, history=None, rest: float = 0.0) -> Stage | str:
    """What ``analyse`` reports (``Analysis.stage``): :func:`stage_of` (with the curve of
    ``history``'s measured rerun from ``init``, when there is one), within the module's budget above
    :data:`ANALYSE_WEIGHTS` weights (``rest``: the seconds the rest of the call took); where it does
    not fit, the effective units alone (loss NaN) with a note naming the budget and the call that
    builds it; the one-line refusal (a str, without a "stage: " of its own) for a net with no
    effective-unit rule."""
    try:
        n = weights(params)
        run = None if history is None or history.prediction is None else history.prediction.trained
        curve = None if run is None else (np.asarray(run.t), np.asarray(run.loss))
        if n <= ANALYSE_WEIGHTS:
            return stage_of(params, X, Y, alpha, init, curve=curve)
        seconds = max(STAGE_SECONDS, STAGE_SHARE * rest)
        try:
            with budget(seconds, STAGE_NUMBERS):
                return stage_of(params, X, Y, alpha, init, curve=curve)
        except OverBudget as e:
            units = effective_units(params, alpha, init=init)  # one Gram matrix: no pass over the data
            return Stage(units.family, float("nan"), units, init_known=init is not None, notes=(
                f"the nearest fixed point is not built: {e} (analyse's budget for nets above "
                f"{ANALYSE_WEIGHTS} weights, this one has {n}: the longer of {STAGE_SECONDS:g} s and "
                f"{STAGE_SHARE:.0%} of the rest of the call, arrays of at most {STAGE_NUMBERS:.3g} numbers); "
                "biasfree.analysis.stage.stage(model, data) builds it without a budget",))
    except ValueError as e:  # the callers print it after their own "stage: "
        return str(e)
