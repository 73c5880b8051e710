"""Where is a bias-free net effectively linear? The gap to the linear twin over init
scale × width × α, with spread over inits, and the same map for a biased net.

docs/theory.md §2.4–2.6. On symmetric data a two-layer bias-free leaky ReLU net whose
even part stays zero *is* its linear twin: ``√c·init`` trained with step ``η c``
(c = (1 + α)/2). From a random Gaussian init the even part is small but not zero, and
the paper's "errors below 0.3%" is a statement at one point. This experiment maps the
gap

    ``D = max_t |L(t) - L_twin(c t)| / L(0)``

over a grid: init std σ (``scales``, rich σ²m ≪ s to lazy σ²m ≫ s), width m
(``widths``), slope α (``alphas``), ``n_inits`` Gaussian inits per cell. Data: the
paper's (``d`` Gaussian inputs and their negatives, whitened exactly; odd target
``y = wᵀx + sin(4 wᵀx)``). One unit-std init per draw is rescaled to every σ, so
D(σ) is a smooth curve per init. Every (σ, α, init) of one width is a member of *one*
compiled ensemble: the init draws (the map's "seeds") cost one compilation per
width, not one per seed.

- **Step.** Each member's step is ``η / max(1, σ² m)``: the loss Hessian grows as
  ≈ 2σ²m on the lazy side, so a fixed η would diverge there; the step count per width
  is set by the slowest (smallest σ, smallest α) member's predicted half-loss time.
- **Twins** are trained on :func:`~biasfree.core.moments.moment_data` (d points with the data's
  second moments, exact for a linear net), so the prediction costs almost nothing.
- **Control.** An antisymmetric-pair init (§2.3) per width, σ and α is in the same
  ensemble: its gap must be round-off, which shows the map measures the even part
  and nothing else (step, records, twin construction).
- **Biased contrast.** The same weights plus Gaussian biases of the same std σ, against
  the *same* twin (√c times the bias-free weights, step η c). This is what a user who
  assumes the bias-free theory for a net with biases would predict; the gap measures
  how far biases carry the net from it (biases let it fit the target's odd nonlinear
  part, which no bias-free two-layer net can, §1.2).

The one check is the pair control, to round-off (on symmetric data only). The t = 0
identity ``L(0) - L_twin(0) = ½<f_even(0)²>`` (§1.3, exact at fixed θ), the fitted
exponents of D in width and σ, and where the 0.3% contour lies are metrics.
"""

from __future__ import annotations

from typing import Annotated

from annotated_types import Ge, Gt, Interval, MinLen, MultipleOf, Predicate, doc

from ..base import Experiment, Positive, Positives, config, increasing

CLAIM = ("Where two-layer bias-free nets are effectively linear: the gap to the linear twin over init "
         "scale × width × α, with the 0.3% contour and spread over inits.")
PAPER_CLAIM = ("Claim 2's accuracy (\"errors below 0.3%\" from small random init) mapped over init "
               "scale, width and α instead of tested at one point.")


@config
class Config:
    """``d`` input size, ``n`` Gaussian draws (2n points once symmetrised), ``scales``
    init stds σ (increasing, per weight), ``widths`` hidden widths m (even, increasing),
    ``alphas`` slopes α < 1, ``n_inits`` Gaussian inits per cell (batched), ``lr`` GD
    step η (divided by max(1, σ²m) per member), ``horizon`` run length in units of the
    slowest member's predicted half-loss time, ``n_records`` records, ``biased`` also
    map the biased contrast, ``asymmetry`` ε: the mirror half's inputs are ``-x + ε ξ``
    (ξ standard Gaussian, targets kept ``-y(x)``) before whitening, 0 for exactly
    symmetric data (the theory's premise; the pair control is a check only there)."""

    d: Annotated[int, Ge(1)] = 10
    n: int = 200
    scales: Positives = (1e-4, 1e-3, 1e-2, 1e-1, 1.0)
    widths: Annotated[tuple[Annotated[int, Ge(2), MultipleOf(2)], ...], MinLen(2), Predicate(increasing),
                      doc("the pair control splits each in two")] = (24, 50, 100, 200, 400)
    alphas: Annotated[tuple[Annotated[float, Interval(ge=0, lt=1)], ...], MinLen(1),
                      doc("a linear net (α = 1) is its own twin")] = (0.0, 0.5)
    n_inits: Annotated[int, Ge(2), doc("the spread over inits; 8 for the paper preset")] = 8
    lr: Positive = 0.05
    horizon: Annotated[float, Gt(1), doc("past the slowest half time")] = 2.0
    n_records: Annotated[int, Ge(20), doc("to resolve the gap")] = 200
    biased: bool = True
    asymmetry: Annotated[float, Ge(0), doc("0: exactly symmetric data")] = 0.0

    def __post_init__(self):
        if self.n < self.d:
            raise ValueError(f"need n >= d draws, got d={self.d}, n={self.n}")


PRESETS = {
    "tiny": Config(d=4, n=40, scales=(1e-4, 1e-2, 1.0), widths=(8, 32), n_inits=3,
                   n_records=60),
    "paper": Config(),
}

EXPERIMENT = Experiment("linearity-map", CLAIM, Config, PRESETS, PAPER_CLAIM)
