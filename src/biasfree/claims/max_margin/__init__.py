"""Logistic loss on separable symmetric data: leaky nets inherit the linear max-margin bias.

docs/theory.md §2.8: with the logistic loss (``ℓ(-y, -f) = ℓ(y, f)``) a two-layer
antisymmetric-pair leaky net (slope α, c = (1 + α)/2) on symmetric data *is* its linear
twin (``√c·init``, α = 1, step ``η c``) step for step, so it inherits the linear net's
implicit bias: ``β_eff(t)/||β_eff(t)||`` tends, like 1/log t, to the direction of the
hard-margin SVM without intercept

    w_svm = argmin ||w||²  subject to  y_i wᵀx_i >= 1 for every i

(``w_svm`` and its KKT certificate: :mod:`biasfree.theory.margin`).

Data: Gaussian inputs, labels ``sign(w*ᵀx)`` keeping only ``|w*ᵀx| >= margin``
(:func:`biasfree.label_data`), then symmetrised (labels are odd in x). Members, by
name: ``pair_alpha_{α}`` (antisymmetric-pair init, with its linear twin) and
``random_alpha_{α}`` (Gaussian init), one of each per slope. Records are log-spaced.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..base import Experiment, require_positive

CLAIM = ("With logistic loss on separable symmetric data, leaky nets equal linear nets and converge in"
         " direction to the hard-margin SVM.")
PAPER_CLAIM = ("Claim 4 (consequences), implicit bias: leaky nets inherit the linear net's max-margin "
               "(hard-margin SVM) direction under logistic loss.")

TARGET_COS = 0.99
"""The issue's success level for direction convergence (cos between β_eff and w_svm)."""
INITS = ("pair", "random")


def member_name(init: str, alpha: float) -> str:
    """``pair_alpha_0``, ``random_alpha_0.5``, …: the name of one run (also in metric and
    array keys)."""
    return f"{init}_alpha_{alpha:g}"


@dataclass(frozen=True)
class Config:
    """``d`` input size, ``n`` Gaussian draws before the margin filter (then
    symmetrised), ``margin`` the label margin, ``width`` hidden units, ``alphas`` the
    slopes, ``scale`` init std, ``lr`` GD step η, ``steps`` GD steps, ``n_records``
    log-spaced records."""

    d: int = 10
    n: int = 20
    margin: float = 0.1
    width: int = 64
    alphas: tuple[float, ...] = (0.0, 0.5)
    scale: float = 0.01
    lr: float = 4.0
    steps: int = 300_000
    n_records: int = 80

    def __post_init__(self):
        require_positive(self, "lr", "steps", "n_records")
        if self.d < 2 or self.n < 2:
            raise ValueError(f"need d >= 2 and n >= 2, got d={self.d}, n={self.n}")
        if self.width < 2 or self.width % 2:
            raise ValueError(f"width={self.width} must be even and >= 2 (pair init)")
        if not self.alphas or any(not 0 <= a < 1 for a in self.alphas):
            raise ValueError(f"alphas={self.alphas}: give leaky slopes in [0, 1)")
        if len(set(self.alphas)) != len(self.alphas):
            raise ValueError(f"alphas={self.alphas}: give each slope once (members are named by it)")
        if self.margin < 0 or self.scale <= 0:
            raise ValueError("margin must be >= 0 and scale > 0")


PRESETS = {
    "tiny": Config(d=5, n=10, width=16, steps=3000, n_records=40),
    "paper": Config(),
}

EXPERIMENT = Experiment("max-margin", CLAIM, f"{__name__}.run", Config, PRESETS, PAPER_CLAIM)
