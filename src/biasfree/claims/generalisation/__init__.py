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

from dataclasses import dataclass

from ..base import Experiment, require_positive

CLAIM = ("Train and test loss of bias-free (leaky) ReLU nets on a noisy linear teacher equal the "
         "linear net's with time × (1+α)/2; test loss is the population loss of β_eff.")
PAPER_CLAIM = ("Claim 2 (dynamics), on held-out data: the linear equivalence with time × (1+α)/2 holds"
               " for the test loss too, not only the training loss.")

INITS = ("pair", "random")

SIGMAS = 5.0
"""A finite-sample check allows 5 standard errors (two-sided false alarm ≈ 6e-7 for one
Gaussian estimate)."""


@dataclass(frozen=True)
class Config:
    """``d`` input size, ``n`` Gaussian draws (N = 2n points), ``noise`` σ, ``n_test``
    fresh test points, ``width`` hidden units (even), ``alphas`` leaky slopes (< 1),
    ``scale`` init std, ``lr`` GD step η, ``t_max`` run length, ``n_records`` log-spaced records,
    ``flow_records`` records at which the gradient-flow reference is evaluated."""

    d: int = 100
    n: int = 60
    noise: float = 0.5
    n_test: int = 20000
    width: int = 100
    alphas: tuple[float, ...] = (0.0, 0.5)
    scale: float = 1e-3
    lr: float = 0.02
    t_max: float = 200.0
    n_records: int = 301
    flow_records: int = 61

    def __post_init__(self):
        require_positive(self, "n_records", "flow_records")
        if self.d < 1 or self.n < 2 or self.n_test < 100:
            raise ValueError(f"need d >= 1, n >= 2 draws and n_test >= 100, got d={self.d}, "
                             f"n={self.n}, n_test={self.n_test}")
        if self.width < 2 or self.width % 2:
            raise ValueError(f"width={self.width} must be even and >= 2 (pair init)")
        if any(not 0 <= a < 1 for a in self.alphas) or not self.alphas:
            raise ValueError(f"alphas={self.alphas} must be non-empty slopes in [0, 1) "
                             "(α = 1 is the linear twin itself)")
        if not (self.noise >= 0 and self.scale > 0 and self.lr > 0 and self.t_max > 0):
            raise ValueError("noise >= 0, scale > 0, lr > 0 and t_max > 0 are required")


PRESETS = {
    "tiny": Config(d=20, n=15, n_test=4000, width=20, t_max=120.0, n_records=121,
                   flow_records=25),
    "paper": Config(),
}

EXPERIMENT = Experiment("generalisation", CLAIM, f"{__name__}.run", Config, PRESETS, PAPER_CLAIM)
