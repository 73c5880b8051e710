"""What breaks the equivalence: biases, asymmetric data, a target with an even part.

docs/theory.md §1.3 and §5. Two-layer ReLU-family nets (slope α, c = (1 + α)/2) from the
same antisymmetric-pair init (§2.3), trained by GD on the paper's odd target
``y = wᵀx + sin(4 wᵀx)``. Each run is compared with

- its **linear twin**: ``√c·init`` (biases included, so a biased twin is affine), α = 1,
  step ``η c``, same step count (record j at twin time c t), on the same data;
  deviation ``D = max_t |L(t) - L_lin(c t)| / L(0)``;
- the **linear floor**: the least-squares residual ``min_B ½<||y - Bᵀx||²>`` on the
  training set (``numpy.linalg.lstsq``; with an intercept column for the biased net).
  No linear (or affine) net, however trained, ends below it.

Runs:

- **control**: bias-free, symmetric data (every x with -x), odd target. On a symmetric
  sample the odd and even parts of any function are orthogonal, the odd part of a
  bias-free two-layer net is linear, so its loss is ``≥`` the floor at every time
  (exact, §1.3); the pair init keeps it on the twin's curve to round-off.
- **biases**: the same pair weights plus Gaussian hidden biases: the net is no longer
  odd, the pairing is not preserved, and it can fit the sine.
- **asymmetric data**: bias-free, but the -x half of the inputs is dropped
  (:func:`biasfree.data.asymmetric_half`; stored twice, to the other runs' row count, which
  leaves the mean loss and its gradient unchanged).
- **even target**: bias-free, symmetric data, target plus ``|x_1|``: the even part of
  the net learns it, which no linear map can.
"""

from __future__ import annotations

from typing import Annotated

from annotated_types import Ge

from ..base import Alpha, Experiment, PairWidth, Positive, config

CLAIM = ("Biases, asymmetric data or an even target make a ReLU net leave the linear curve and beat "
         "the linear floor; the bias-free symmetric control cannot.")
PAPER_CLAIM = ("Claim 4 (consequences), what breaks it: biases, asymmetric data or an even target make"
               " a ReLU net leave the linear net's behaviour.")

CASES = ("control", "biases", "asymmetric_data", "even_target")


@config
class Config:
    """``d`` input size, ``n`` Gaussian draws (2n points once symmetrised), ``freq``
    the sine's frequency, ``width`` hidden units, ``alpha`` slope, ``scale`` std of
    the pair init, ``bias_scale`` std of the hidden biases, ``lr`` GD step η,
    ``steps`` GD steps, ``n_records`` records."""

    d: Annotated[int, Ge(1)] = 3
    n: int = 200
    freq: float = 4.0
    width: PairWidth = 64
    alpha: Alpha = 0.0
    scale: Positive = 0.05
    bias_scale: Positive = 0.05
    lr: Positive = 0.05
    steps: Annotated[int, Ge(1)] = 10000
    n_records: Annotated[int, Ge(1)] = 201

    def __post_init__(self):
        if self.n < self.d:
            raise ValueError(f"need n >= d draws, got d={self.d}, n={self.n}")


PRESETS = {
    "tiny": Config(n=100, width=32, steps=3000),
    "paper": Config(),
}

EXPERIMENT = Experiment("breaking", CLAIM, Config, PRESETS, PAPER_CLAIM)
