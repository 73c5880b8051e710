"""How robust the leaky = linear equivalence is: weight decay, large init, large steps.

docs/theory.md §2.7 and §5, two-layer bias-free ReLU-family nets (slope α, c = (1 + α)/2) on
symmetric Gaussian inputs with a linear teacher. Each leaky net is compared with its
linear twin (``√c·init``, α = 1, step ``η c``, decay ``λ / c``; same step count, so
record j sits at leaky time t and twin time c t); deviation
``D = max_t |L_leaky(t) - L_lin(c t)| / L_leaky(0)``.

- **Weight decay λ** (§2.7): the twin's decay is λ/c. Pair init: exact. Small random
  init: close, measured. The leaky net's ``β_eff`` must end at the decayed linear
  solution ``β*(λ/c) = argmin_β ½<(y - βᵀx)²> + (λ/c) ||β||``, not ``β*(λ)``
  (:func:`biasfree.theory.decayed_solution`).
- **Large init** (§5, lazy regime): at ``t = 0`` the loss gap to the twin is exactly
  ``½<f_even(0)²>`` (odd/even orthogonality on symmetric data), which grows as σ⁴; the
  pair identity does not care about scale.
- **Large learning rate** (§5): GD leaves gradient flow (diffrax, rtol 1e-10) by a gap
  that grows with η, to first order (Euler's global error is O(η)); the pair identity
  holds for GD at every η.
"""

from __future__ import annotations

from typing import Annotated

from annotated_types import Ge

from ..base import Alpha, Experiment, PairWidth, Positive, Positives, config

CLAIM = ("Weight decay maps to λ/c exactly for pairs; large init and large steps break the random-init"
         " equivalence, never the pair identity.")
PAPER_CLAIM = ("Claim 4 (consequences), robustness: weight decay keeps the linear equivalence (as "
               "λ/c); large init and large steps are what strain it.")

INITS = ("pair", "random")
"""The two members of every run: antisymmetric-pair init (exact twin) and Gaussian init."""


@config
class Config:
    """``d`` input size, ``n`` Gaussian draws (2n points), ``s`` teacher strength,
    ``width`` hidden units, ``alpha`` slope, ``small_scale`` / ``large_scale`` init
    std σ, ``weight_decay`` λ, ``lr`` step η of the weight-decay and large-init runs,
    ``steps`` and ``large_steps`` their lengths, ``lrs`` the learning-rate sweep (increasing) over ``t_max``,
    ``n_records`` records per run (``t_max/η`` must be a multiple of n_records - 1 so
    that GD records sit exactly on the flow's record times), ``rtol``/``atol`` the
    gradient-flow tolerances."""

    d: Annotated[int, Ge(1)] = 5
    n: Annotated[int, Ge(1)] = 200
    s: Positive = 1.0
    width: PairWidth = 32
    alpha: Alpha = 0.0
    small_scale: Positive = 1e-3
    large_scale: float = 0.3
    weight_decay: float = 0.1
    lr: Positive = 0.05
    steps: int = 8000
    large_steps: int = 1000
    lrs: Positives = (0.0125, 0.025, 0.05, 0.1, 0.2, 0.4, 0.8)
    t_max: Positive = 40.0
    n_records: Annotated[int, Ge(2)] = 51
    rtol: Positive = 1e-10
    atol: Positive = 1e-12

    def __post_init__(self):
        if min(self.steps, self.large_steps) < self.n_records - 1:
            raise ValueError("steps and large_steps must be >= n_records - 1 (one compiled "
                             "program serves every run only if all record the same count)")
        if self.large_scale <= self.small_scale:
            raise ValueError("need 0 < small_scale < large_scale")
        for eta in self.lrs:
            k = self.t_max / eta
            if abs(k - round(k)) > 1e-9 * k or round(k) % (self.n_records - 1):
                raise ValueError(
                    f"t_max/η = {k:g} for η = {eta:g} must be an integer multiple of "
                    f"n_records - 1 = {self.n_records - 1}, so GD records land on the flow's "
                    "record times; pick t_max and lrs accordingly (e.g. powers of two)")


PRESETS = {
    "tiny": Config(d=4, n=64, width=16, lrs=(0.025, 0.1, 0.4), steps=3000, large_steps=600,
                   n_records=101),
    "paper": Config(),
}

EXPERIMENT = Experiment("robustness", CLAIM, Config, PRESETS, PAPER_CLAIM)
