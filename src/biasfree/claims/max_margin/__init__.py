"""Logistic loss on separable symmetric data: leaky nets inherit the linear max-margin bias.

docs/theory.md §2.8: with the logistic loss (``ℓ(-y, -f) = ℓ(y, f)``) a two-layer
antisymmetric-pair leaky net (slope α, c = (1 + α)/2) on symmetric data *is* its linear
twin (``√c·init``, α = 1, step ``η c``) step for step, so it inherits the linear net's
implicit bias: ``β_eff(t)/||β_eff(t)||`` tends, like 1/log t, to the direction of the
hard-margin SVM without intercept

    w_svm = argmin ||w||²  subject to  y_i wᵀx_i >= 1 for every i

(``w_svm`` and its KKT certificate: :mod:`biasfree.theory.margin`).

Data: Gaussian inputs, labels ``sign(w*ᵀx)`` keeping only ``|w*ᵀx| >= margin``
(:func:`biasfree.data.label_data`), then symmetrised (labels are odd in x). Members, by
name: ``pair_alpha_{α}`` (antisymmetric-pair init, with its linear twin) and
``random_alpha_{α}`` (Gaussian init), one of each per slope. Records are log-spaced.
"""

from __future__ import annotations

from typing import Annotated

from annotated_types import Ge, Interval, MinLen

from ..base import Experiment, PairWidth, Positive, config

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


@config
class Config:
    """``d`` input size, ``n`` Gaussian draws before the margin filter (then
    symmetrised), ``margin`` the label margin, ``width`` hidden units, ``alphas`` the
    slopes, ``scale`` init std, ``lr`` GD step η, ``steps`` GD steps, ``n_records``
    log-spaced records."""

    d: Annotated[int, Ge(2)] = 10
    n: Annotated[int, Ge(2)] = 20
    margin: Annotated[float, Ge(0)] = 0.1
    width: PairWidth = 64
    alphas: Annotated[tuple[Annotated[float, Interval(ge=0, lt=1)], ...], MinLen(1)] = (0.0, 0.5)
    scale: Positive = 0.01
    lr: Positive = 4.0
    steps: Annotated[int, Ge(1)] = 300_000
    n_records: Annotated[int, Ge(1)] = 80

    def __post_init__(self):
        if len(set(self.alphas)) != len(self.alphas):
            raise ValueError(f"alphas={self.alphas}: give each slope once (members are named by it)")


PRESETS = {
    "tiny": Config(d=5, n=10, width=16, steps=3000, n_records=40),
    "paper": Config(),
}

EXPERIMENT = Experiment("max-margin", CLAIM, Config, PRESETS, PAPER_CLAIM)
