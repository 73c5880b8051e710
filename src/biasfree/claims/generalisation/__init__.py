"""Generalisation: train *and test* loss of bias-free ReLU nets equal the linear net's,
time × (1+α)/2, on a noisy linear teacher with N comparable to d.

Data (docs/theory.md §2.1): n Gaussian draws ``x ~ N(0, I_d)`` plus their negatives
(N = 2n training points), targets ``y = Tx + ε``, ``ε ~ N(0, σ²)`` (mirrored with its
point), a unit teacher T (p = 1). n ≈ d, so the test loss first falls, then rises. Test
points are fresh draws (not symmetrised).

- **pair init** (§2.3): the leaky net *is* its linear twin ``√c·θ`` (step ηc), so train
  and test loss at time t equal the twin's at c t, to round-off.
- **population loss** (§2.6, arc-cosine kernel): ``R = ½ (||β_eff - T||² + σ²) + ½ E f_even²``,
  known exactly from the parameters; the test loss on n_test fresh points estimates it
  with standard error ``std(ℓ)/√n_test``.
- **random small init**: the gap to the twin is measured (train and test), and
  ``½ E f_even²`` says how much of the test-loss gap the even part explains.
- **gradient flow**: the twin integrated by ``theory.reference_curve`` gives ``β(t)``
  hence a predicted test curve ``R(β(t))``, independent of the GD simulator.
"""

from __future__ import annotations

from typing import Annotated

from annotated_types import Ge, Interval, MinLen, doc

from ..base import Experiment, PairWidth, Positive, config

CLAIM = ("Train and test loss of bias-free (leaky) ReLU nets on a noisy linear teacher equal the "
         "linear net's with time × (1+α)/2; test loss is the population loss of β_eff.")
PAPER_CLAIM = ("Claim 2 (dynamics), on held-out data: the linear equivalence with time × (1+α)/2 holds"
               " for the test loss too, not only the training loss.")

INITS = ("pair", "random")

SIGMAS = 5.0
"""A finite-sample check allows 5 standard errors (two-sided false alarm ≈ 6e-7 for one
Gaussian estimate)."""


@config
class Config:
    """``d`` input size, ``n`` Gaussian draws (N = 2n points), ``noise`` σ, ``n_test``
    fresh test points, ``width`` hidden units (even), ``alphas`` leaky slopes (< 1),
    ``scale`` init std, ``lr`` GD step η, ``t_max`` run length, ``n_records`` log-spaced records,
    ``flow_records`` records at which the gradient-flow reference is evaluated."""

    d: Annotated[int, Ge(1)] = 100
    n: Annotated[int, Ge(2)] = 60
    noise: Annotated[float, Ge(0)] = 0.5
    n_test: Annotated[int, Ge(100)] = 20000
    width: PairWidth = 100
    alphas: Annotated[tuple[Annotated[float, Interval(ge=0, lt=1)], ...], MinLen(1),
                      doc("α = 1 is the linear twin itself")] = (0.0, 0.5)
    scale: Positive = 1e-3
    lr: Positive = 0.02
    t_max: Positive = 200.0
    n_records: Annotated[int, Ge(1)] = 301
    flow_records: Annotated[int, Ge(1)] = 61


PRESETS = {
    "tiny": Config(d=20, n=15, n_test=4000, width=20, t_max=120.0, n_records=121,
                   flow_records=25),
    "paper": Config(),
}

EXPERIMENT = Experiment("generalisation", CLAIM, Config, PRESETS, PAPER_CLAIM)
