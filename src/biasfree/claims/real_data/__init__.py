"""Real data: on symmetrised, whitened handwritten digits a two-layer ReLU net from small
init follows its linear twin at half speed.

Data: scikit-learn's bundled 8×8 digits (no download; the ``datasets`` extra), pixels
/16, one-hot targets (p = 10). A random ``test_fraction`` of the images is held out; the
training images are symmetrised ((x, y) and (-x, -y), §2.1) and whitened with
``whiten(rank="auto")``, which drops the directions of pixels that are always zero
(the rank deficiency that makes plain whitening fail); the held-out images get the same
map. Nobody generated these data: no teacher, no Gaussian inputs.

What is exact and what is measured:

- **pair init** (§2.3): ``f_even ≡ 0`` on symmetric data, so the ReLU net *is* its
  linear twin ``√c·θ`` (α = 1, step ηc, c = (1+α)/2 = 1/2): training and test loss equal
  the twin's at time c t to round-off, for GD at any step.
- **odd part** (§1.2): every two-layer bias-free net's odd part is exactly linear, so
  after training the odd part outside its best linear fit is round-off.
- **whitening**: ``XᵀX/N = I`` on the kept directions, to the round-off of an
  eigendecomposition of condition κ = λ_1/λ_r.
- **random small init** (§2.6): the even part is small, not zero; the gap
  ``max_t |L(t) - L_twin(c t)| / L(0)`` is measured (the paper reports < 0.3% on its
  synthetic data) along with the odd/even split of the trained net, the gap to the
  *predicted* curve (the twin's gradient flow, ``theory.reference_curve``, ODE) and
  the held-out accuracy of net and twin.
"""

from __future__ import annotations

from typing import Annotated

import numpy as np
from annotated_types import Ge, Interval, Le, doc

from ..base import Experiment, PairWidth, Positive, Slope, config

CLAIM = ("On symmetrised, whitened handwritten digits a two-layer ReLU net from small init is its "
         "linear twin at half speed: exact for pair init, within a measured gap for random init.")
PAPER_CLAIM = ("Claim 2 (dynamics: a leaky net is a linear net at time × (1+α)/2) and claim 1 (the odd"
               " part is linear), on real data nobody generated: symmetrised, whitened digits.")

EPS = float(np.finfo(float).eps)


@config
class Config:
    """``n_images`` digits used (None: all 1797), ``test_fraction`` held out, ``width``
    hidden units (even), ``alpha`` slope (< 1), ``scale`` init std, ``n_random`` random
    inits, ``lr`` GD step η, ``t_max`` run length, ``n_records`` log-spaced records,
    ``flow_records`` times at which the gradient-flow prediction is evaluated."""

    n_images: Annotated[int | None, Ge(20), Le(1797), doc("None: all 1797, the digits there are")] = None
    test_fraction: Annotated[float, Interval(gt=0, lt=1)] = 0.25
    width: PairWidth = 200
    alpha: Slope = 0.0
    scale: Positive = 1e-3
    n_random: Annotated[int, Ge(1)] = 2
    lr: Positive = 0.2
    t_max: Positive = 150.0
    n_records: Annotated[int, Ge(2)] = 151
    flow_records: Annotated[int, Ge(2)] = 41

    def __post_init__(self):
        n = 1797 if self.n_images is None else self.n_images
        n_test = round(self.test_fraction * n)  # as the run splits
        if not 1 <= n_test <= n - 1:
            raise ValueError(f"test_fraction={self.test_fraction} of {n} images holds out {n_test}: "
                             "both the training and the held-out set need at least one image")


PRESETS = {
    "tiny": Config(n_images=300, width=40, n_random=2, t_max=120.0, n_records=101, flow_records=21),
    "paper": Config(),
}

EXPERIMENT = Experiment("real-data", CLAIM, Config, PRESETS, PAPER_CLAIM)
