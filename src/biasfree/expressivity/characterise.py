"""Can two-layer bias-free nets approximate a target? A verdict from the floors (docs/theory.md §1.4).

The verdict rests on the relative floors of the odd and even parts
(:func:`~biasfree.expressivity.floors.two_layer_floor`), each judged against ``tol`` with
``z`` standard errors of margin, and says which part is out of reach.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import _validate as validate
from ..core.precision import precise
from .decomposition import Function
from .floors import TwoLayerFloor, two_layer_floor

ODD_PART = "odd part (nonlinear odd component)"
EVEN_PART = "even part (not positively 1-homogeneous)"
EVEN_PART_LINEAR = "even part (a linear net, α = 1, has none)"


@dataclass(frozen=True)
class Characterisation:
    """Can two-layer bias-free nets approximate a target (§1.4)?

    ``verdict``: "unreachable" when some part's relative floor (relative to ½E||y||²) is
    significantly above ``tol`` (by ``z`` standard errors); "reachable" when every part's
    floor is below ``tol`` even ``z`` standard errors up; else "undetermined" (too few
    samples: the standard error is comparable to the floor, so neither is shown), with the
    reason in ``reason``. ``reachable``: True, False, or None when undetermined. ``distance``: L2 distance
    ``sqrt(2 F_total)`` from the target to the closure of the nets; ``relative_floor``
    ± ``relative_floor_se``: ``F_total / ½E||y||²``; ``out_of_reach``: the parts
    responsible; ``floors``: the :class:`TwoLayerFloor`.
    """

    reachable: bool | None
    distance: float
    relative_floor: float
    relative_floor_se: float
    out_of_reach: tuple[str, ...]
    floors: TwoLayerFloor
    verdict: str = ""
    reason: str = ""

    def summary(self) -> str:
        if self.reachable is None:
            return f"undetermined: {self.reason}"
        if self.reachable:
            return (f"approximable by two-layer bias-free nets (relative floor "
                    f"{self.relative_floor:.3g} ± {self.relative_floor_se:.2g})")
        return (f"not approximable: relative MSE floor {self.relative_floor:.4g} ± "
                f"{self.relative_floor_se:.2g} (L2 distance {self.distance:.4g}); out of reach: "
                + ", ".join(self.out_of_reach))


@precise
def characterise(target: Function, X, *, alpha=0.0, cov=None, radial=None, tol: float = 1e-6,
                 z: float = 3.0, per_point: bool = False) -> Characterisation:
    """Say whether two-layer bias-free nets approximate ``target`` and what is out of reach.

    ``target``, ``X`` (a sample of a radially symmetric law), ``alpha``, ``cov``, ``radial``,
    ``per_point``: as in :func:`two_layer_floor`; each part's relative floor is judged against
    ``tol`` with ``z`` standard errors of margin (the rules: :class:`Characterisation`).
    Approximable targets (§1.4) are linear + ``||x|| h(x/||x||)`` with h even (for α < 1).
    A floor above the target's own power (impossible: f = 0 reaches the power) by more
    than ``z`` standard errors is also "undetermined" (heavy tails or too few samples).
    """
    tol = validate.nonnegative("tol", tol, scalar=True)
    z = validate.nonnegative("z", z, scalar=True)
    fl = two_layer_floor(target, X, alpha=alpha, cov=cov, radial=radial, per_point=per_point)
    even_label = EVEN_PART_LINEAR if float(alpha) == 1.0 else EVEN_PART
    parts = ((ODD_PART, fl.odd), (even_label, fl.even))
    out = tuple(name for name, part in parts if part.normalised > tol + z * part.normalised_se)
    unsure = [(name, part) for name, part in parts
              if name not in out and part.normalised + z * part.normalised_se > tol]
    total = fl.total
    reachable: bool | None = not out
    reason = ""
    if not all(np.isfinite([total.normalised, total.normalised_se])) \
            or total.normalised > 1.0 + z * total.normalised_se:
        reachable = None
        reason = (f"the floor estimate {total.normalised:.3g} ± {total.normalised_se:.2g} exceeds the "
                  f"target's power (n={total.n}): heavy tails or too few samples; draw more points")
    elif unsure and not out:  # with a part out of reach the verdict stands: unreachable
        reachable = None
        reason = ("too few samples (n=" + str(total.n) + ", " + "; ".join(
            f"{name} floor {part.normalised:.3g} ± {part.normalised_se:.2g}" for name, part in unsure)
            + f", relative to tol {tol:g}); draw more points")
    verdict = {True: "reachable", False: "unreachable", None: "undetermined"}[reachable]
    return Characterisation(reachable, total.distance, total.normalised, total.normalised_se,
                            out, fl, verdict, reason)
