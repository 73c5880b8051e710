"""Expressivity: what two-layer bias-free nets cannot learn, and who can (docs/theory.md §1).

Three targets on Gaussian inputs x ~ N(0, I_d), d >= 3, symmetric training sets
(every draw x with its mirror -x, ``y = target(x)`` on both):

- ``x1x2x3``: odd and orthogonal to every linear function, so no two-layer bias-free
  net does better than f = 0 (normalised floor 1, §1.4);
- ``sine``: the paper's ``y = wᵀx + sin(4 wᵀx)``, odd, learned by two layers only
  through its linear projection (closed-form floor, §1.3);
- ``even``: ``(||x||² - d)/sqrt(2d)``, even but not 1-homogeneous (floor
  ``1 - (E r³ - d E r)²/(2d²)``, also the floor of bias-free nets of *every* depth).

Three nets per target, trained by full-batch GD from the same kind of Gaussian init:
two-layer bias-free ReLU, depth-3 bias-free ReLU, two-layer ReLU with biases.

Floors and losses are in the package's loss unit, ½E||y - f||² (docs/theory.md §0), and
reported normalised by the loss of f = 0, ½E y² (the ratio E(y - f)² / E y²): the
population two-layer floor by Monte Carlo over ``n_mc`` draws (odd part: least squares;
even part: ray quadrature), with standard errors; the 1-homogeneous floor (any depth);
and the exact floor of each training set (no sampling error: the training loss of a
two-layer bias-free net can never go below it). Test losses are over ``n_test`` fresh
draws, with their standard errors from the per-point losses. Statistical checks use
``z`` standard errors of the combined (independent) errors.
"""

from __future__ import annotations

from typing import Annotated

from annotated_types import Ge, doc

from ..base import Experiment, Positive, config

CLAIM = ("Two-layer bias-free ReLU nets cannot go below their computable floor (odd part linear, even "
         "part 1-homogeneous); depth-3 or biased nets can.")
PAPER_CLAIM = ("Claim 1 (expressivity): a two-layer bias-free (leaky) ReLU net expresses only linear "
               "odd functions, which sets a floor that depth or biases remove.")

TARGETS = ("x1x2x3", "sine", "even")
ARCHS = ("two_layer", "depth3", "biased")
ARCH_LABELS = {"two_layer": "2-layer bias-free", "depth3": "3-layer bias-free",
               "biased": "2-layer with biases"}


@config
class Config:
    """``d`` input size (>= 3); ``n_train`` Gaussian draws (2 n_train training points
    with mirrors); ``n_test`` fresh test draws; ``n_mc`` draws for the population
    floors; ``width`` hidden units per layer; GD ``lr`` η and ``steps``; ``gain``:
    init std ``gain/sqrt(fan_in)``; ``n_records``; ``grid`` × ``grid`` points per 2-D
    slice (x1, x2 in [-extent, extent], x3 = 1, other coordinates 0); ``z``: number
    of standard errors in statistical checks."""

    d: Annotated[int, Ge(3), doc("the x1 x2 x3 target")] = 3
    n_train: int = 200
    n_test: int = 20000
    n_mc: int = 10000
    width: Annotated[int, Ge(2)] = 40
    lr: Positive = 0.05
    steps: Annotated[int, Ge(1)] = 4000
    gain: Positive = 1.0
    n_records: Annotated[int, Ge(1)] = 60
    grid: Annotated[int, Ge(3)] = 41
    extent: Positive = 2.0
    z: Positive = 4.0

    def __post_init__(self):
        if min(self.n_train, self.n_test, self.n_mc) < 10 * self.d:
            raise ValueError("n_train, n_test and n_mc must each be >= 10 d")


PRESETS = {
    "tiny": Config(steps=2000),
    "paper": Config(d=4, n_train=1000, n_test=100_000, n_mc=100_000, width=64, lr=0.05,
                    steps=10_000, n_records=200, grid=81),
}

EXPERIMENT = Experiment("expressivity", CLAIM, Config, PRESETS, PAPER_CLAIM)
