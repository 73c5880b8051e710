"""The even part ``<f_even²>`` during training, and how far a leaky net leaves its linear twin.

docs/theory.md §2.3–2.6. On symmetric data a two-layer bias-free net splits into a linear
odd part and an even part ``f_even(x) = (1 - c) Σ_k v_k |w_kᵀx|`` (c = (1 + α)/2); if
``f_even ≡ 0`` along training the net *is* its linear twin (``√c·init``, step ``η c``).
The deviation is

    ``D = max_t |L_leaky(t) - L_lin(c t)| / L_leaky(0)``,

record j of each run at leaky time t and twin time c t. Three inits at several scales σ
(per-weight std), symmetric Gaussian inputs, linear teacher ``y = s rᵀx``:

- **pair** (§2.3): a Gaussian half-width net of std σ, paired by ``pair_up``; exact.
- **rank-one** (§2.5): balanced, zero-even, raw strength ``a0 = width σ²``; exact.
- **random**: Gaussian weights of std σ (the paper's setting; one unit-std draw
  rescaled, so D(σ) is a smooth curve); approximate. §2.6 predicts, and the checks
  test: ``L_leaky(0) - L_lin(0) = ½ <f_even(0)²>`` exactly; D levels off at a
  σ-independent D₀ as σ → 0 (rich limit), which shrinks with width (the width study's
  fitted exponent); D grows on the lazy side with ``<f_even(0)²> ∝ σ⁴``.
"""

from __future__ import annotations

from typing import Annotated

from annotated_types import Ge

from ..base import Alpha, Experiment, PairWidth, Positive, Positives, config

CLAIM = ("Pair and rank-one inits keep f_even = 0 exactly; small random init leaves a width-set even "
         "part, and large init a growing one.")
PAPER_CLAIM = ("Claim 2 (dynamics), its condition: the linear equivalence is exact while the even part"
               " f_even stays zero, and only approximate from small random init.")

INITS = ("pair", "rank_one", "random")


@config
class Config:
    """``d`` input size, ``n`` Gaussian draws (2n points once symmetrised),
    ``s`` teacher singular value, ``width`` hidden units, ``alpha`` slope α,
    ``scales`` init scales σ (increasing), ``lr`` GD step η, ``horizon`` run length in
    leaky half times of the smallest scale, ``n_records`` records, ``study_widths``
    and ``study_seeds``: the rich-limit width study (random init at the smallest
    scale, one run per width and seed; empty to skip)."""

    d: Annotated[int, Ge(1)] = 5
    n: int = 200
    s: Positive = 1.0
    width: PairWidth = 32
    alpha: Alpha = 0.0
    scales: Positives = (1e-4, 1e-3, 1e-2, 3e-2, 0.1, 0.2, 0.3)
    lr: Positive = 0.05
    horizon: Positive = 2.5
    n_records: Annotated[int, Ge(1)] = 301
    study_widths: tuple[int, ...] = (16, 32, 64, 128, 256)
    study_seeds: Annotated[int, Ge(0)] = 16

    def __post_init__(self):
        if self.n < self.d:
            raise ValueError(f"need n >= d draws, got d={self.d}, n={self.n}")
        if self.study_widths and (self.study_seeds < 2 or len(self.study_widths) < 2):
            raise ValueError("the width study needs >= 2 widths and >= 2 seeds (or "
                             "study_widths=() to skip it)")


PRESETS = {
    "tiny": Config(d=4, n=64, width=16, scales=(1e-4, 1e-2, 0.1, 0.3), n_records=201,
                   study_widths=()),
    "paper": Config(),
}

EXPERIMENT = Experiment("even-part", CLAIM, Config, PRESETS, PAPER_CLAIM)
