"""Two-layer ReLU on orthogonal inputs and their negatives, with odd *and* even targets.

The setting of Boursier et al. (2022), made symmetric (docs/theory.md §2.9): n orthonormal
directions q_i (columns of a random orthogonal Q, d ≥ n), inputs ``±ρ q_i`` with
``ρ = √n``, targets y_i at ``+ρ q_i`` and y'_i at ``-ρ q_i``, odd part
``o_i = (y_i - y'_i)/2``, even part ``e_i = (y_i + y'_i)/2``, both non-zero. N = 2n
points, loss ``(1/2N) Σ (y - f)²``, ReLU (α = 0) throughout. What §2.9 derives and this
experiment checks:

1. *Early alignment*: from small balanced init each unit's direction tends to a
   computable ``D_k`` (:func:`~biasfree.theory.orthogonal.alignment_directions`).
2. *Independent half-nets*: if ``|o_i| > |e_i|`` for every pair, the units with v_k > 0
   learn the points ``p_i = s_i ρ q_i`` (targets ``t⁺_i = |o_i| + e_i``), those with
   v_k < 0 the points ``-p_i`` (``t⁻_i = e_i - |o_i|``): two linear nets with
   ``s± = ρ||t±||/N``, the strength following the logistic ``d(σ²a)/dt = 2 σ²a (s± - σ²a)``
   and GD the exact map ``a ← a (1 + η (ρ/N)(||t±|| - ρ a))²``; *not* the odd-target
   linear twin (rate ``2ρ||o||/N``).
3. *An empty half-net*: a random init whose output weights share one sign has no unit
   for one half; that half is predicted by the zero curve, and exactly
   ``ã⁻ = (σ²/ρ) Σ_i f(-p_i) t⁻_i/||t⁻|| <= 0`` at every step (checked, never raises).

Runs (named members of one :func:`~biasfree.train` call per data set): ``full``
target from small random balanced init (``random``) and from the aligned half-net init
(``aligned``); ``odd`` target alone from the same random init, with its linear twin
(``√c·init``, step ηc, c = 1/2); ``mixed`` target (some pairs with same-sign targets)
from two random inits (``random``, ``random_b``), for the general alignment rule.
"""

from __future__ import annotations

from typing import Annotated

from annotated_types import Ge, Interval, doc

from ..base import Experiment, Positive, config

CLAIM = ("On orthogonal inputs and their negatives with odd and even targets, ReLU units align to "
         "derived directions and the net learns as two independent linear half-nets, not as linear "
         "nets for the odd and even parts.")
PAPER_CLAIM = ("Claim 4 (consequences): known ReLU behaviour on orthogonal inputs (early alignment, "
               "Boursier et al. 2022) is explained by independent linear half-nets.")

ALIGN = {"full": "full", "odd": "odd", "mixed": "mixed", "mixed_b": "mixed"}
"""The runs of ``_runs`` whose units' alignment is checked, with their data sets."""


@config
class Config:
    """``n`` orthogonal directions (2n points), ``d`` ≥ n input size, ``width`` units,
    ``scale`` std of the random init's input weights (output ``|v_k| = ||w_k||``),
    ``even_ratio`` κ < 1: ``e_i = κ |o_i| u_i`` with u_i from -1/2 to 1 in the rank
    order of ``|o_i|`` (so ``|e_i| < |o_i|``, the half-net directions differ from β*, and by
    Chebyshev's sum inequality ``Σ|o_i|e_i ≥ κ/4 Σ o_i² > 0``: the positive half is faster),
    ``lr`` GD step η, ``t_max`` run length (gradient-flow time), ``n_records`` records
    (GD runs in that many segments), ``early`` the early phase: records where
    ``max |f| <= early · min |y|``."""

    n: Annotated[int, Ge(2)] = 12
    d: int = 16
    width: Annotated[int, Ge(2)] = 200
    scale: Positive = 1e-4
    even_ratio: Annotated[float, Interval(gt=0, lt=1), doc(
        "so that both parts are non-zero and each pair's targets have opposite signs")] = 0.6
    lr: Positive = 0.02
    t_max: Positive = 60.0
    n_records: Annotated[int, Ge(3)] = 241
    early: Annotated[float, Interval(gt=0, lt=1)] = 0.1

    def __post_init__(self):
        if self.d < self.n:
            raise ValueError(f"need n orthogonal directions in d >= n dimensions, got n={self.n}, "
                             f"d={self.d}")


PRESETS = {
    "tiny": Config(n=6, d=8, width=40, t_max=40.0, n_records=121),
    "paper": Config(),
}

EXPERIMENT = Experiment("orthogonal-inputs", CLAIM, Config, PRESETS, PAPER_CLAIM)
