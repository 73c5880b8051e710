"""The even part ``<f_even²>`` during training, and how far a leaky net leaves its linear twin.

docs/theory.md §2.3–2.6. On symmetric data a two-layer bias-free net splits into a linear
odd part and an even part ``f_even(x) = (1 - c) Σ_k v_k |w_kᵀx|`` (c = (1 + α)/2). If
``f_even ≡ 0`` along training the net *is* its linear twin: ``√c·init`` trained with
step ``η c`` (time ``c t``). The deviation from the twin is measured as

    D = max_t |L_leaky(t) - L_lin(c t)| / L_leaky(0),

with ``L_lin`` the twin's loss from the same engine (same step count, step ``η c``, so
record j of each run sits at leaky time t and twin time c t).

Three initialisations at several scales σ (per-weight standard deviation), symmetric
Gaussian inputs, linear teacher ``y = s rᵀx`` (an odd target whose even part is zero):

- **pair** (§2.3): a Gaussian half-width net of std σ, paired by ``pair_up``; exact.
- **rank-one** (§2.5): balanced, zero-even, raw strength ``a0 = width σ²`` (the mean
  ``Σ_k v_k²`` of a Gaussian output layer of std σ); exact.
- **random**: Gaussian weights of std σ (the paper's setting); approximate. The same
  random directions are used at every σ (one unit-std draw, rescaled), so D(σ) is a
  smooth curve.

What the maths predicts for the random init (§2.6, derived here):

- ``t = 0``: ``L_leaky(0) - L_lin(0) = ½ <f_even(0)²>`` exactly (odd and even parts are
  orthogonal on a symmetric sample, and the twin computes the leaky net's odd part).
- **rich limit** σ → 0: the first, silent-alignment phase is linear and scale-free
  (f ≈ 0, so every unit grows like a linear unit along the teacher), so D tends to a
  σ-*independent* value D₀: the even part left after alignment is
  ``∝ Σ_k u_k |u_k|`` against the odd part's ``Σ_k u_k²`` (u_k the units' growing-mode
  amplitudes), a random ratio of order ``width^{-1/2}``; the loss deviation is of
  first order in it (the even term feeds back into the odd dynamics) plus its square
  (``½<f_even²>``), so D₀ ~ width^{-1/2} to width^{-1}. D₀ does not vanish with σ, it
  shrinks with width (checked in the width study, fitted exponent).
- **lazy** side: ``<f_even(0)²>`` grows as σ⁴ (expected value
  ``(1 - c)² width σ⁴ <||x||²>``), so D grows once this is no longer small.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..base import Experiment, require_positive

INITS = ("pair", "rank_one", "random")


@dataclass(frozen=True)
class Config:
    """``d`` input size, ``n`` Gaussian draws (2n points once symmetrised),
    ``s`` teacher singular value, ``width`` hidden units, ``alpha`` slope α,
    ``scales`` init scales σ (increasing), ``lr`` GD step η, ``horizon`` run length in
    leaky half times of the smallest scale, ``n_records`` records, ``study_widths``
    and ``study_seeds``: the rich-limit width study (random init at the smallest
    scale, one run per width and seed; empty to skip)."""

    d: int = 5
    n: int = 200
    s: float = 1.0
    width: int = 32
    alpha: float = 0.0
    scales: tuple[float, ...] = (1e-4, 1e-3, 1e-2, 3e-2, 0.1, 0.2, 0.3)
    lr: float = 0.05
    horizon: float = 2.5
    n_records: int = 301
    study_widths: tuple[int, ...] = (16, 32, 64, 128, 256)
    study_seeds: int = 16

    def __post_init__(self):
        require_positive(self, "s", "lr", "horizon", "n_records")
        if self.d < 1 or self.n < self.d:
            raise ValueError(f"need d >= 1 and n >= d draws, got d={self.d}, n={self.n}")
        if self.width < 2 or self.width % 2:
            raise ValueError(f"width={self.width} must be even and >= 2 (pair init)")
        sc = np.asarray(self.scales, dtype=float)
        if sc.size < 2 or np.any(sc <= 0) or np.any(np.diff(sc) <= 0):
            raise ValueError(f"scales={self.scales} must be >= 2 increasing positive numbers")
        if self.study_widths and (self.study_seeds < 2 or len(self.study_widths) < 2):
            raise ValueError("the width study needs >= 2 widths and >= 2 seeds (or "
                             "study_widths=() to skip it)")


PRESETS = {
    "tiny": Config(d=4, n=64, width=16, scales=(1e-4, 1e-2, 0.1, 0.3), n_records=201,
                   study_widths=()),
    "paper": Config(),
}

from . import run as _run  # noqa: E402  (run.py reads Config and the names above)

EXPERIMENT = Experiment(
    name="even-part",
    claim="Pair and rank-one inits keep f_even = 0 exactly; small random init leaves a "
          "width-set even part, and large init a growing one.",
    run=_run.run, config=Config, presets=PRESETS,
    paper_claim=("Claim 2 (dynamics), its condition: the linear equivalence is exact while the even part "
                 "f_even stays zero, and only approximate from small random init."))
