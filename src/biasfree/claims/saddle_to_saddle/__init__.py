"""Saddle to saddle across the paper's six two-layer architectures (Zhang, Saxe & Latham 2025;
docs/theory.md §11): each learns one effective unit per drop of its loss, and each plateau sits
at the loss of the best solution with that many units, at a time a closed form predicts.

Six panels, each trained by :func:`~biasfree.dynamics.trainer.train` (``observables="units"``:
the effective units of :func:`~biasfree.core.units.effective_units` at every log-spaced record)
from a balanced init *aligned* with the task's units, with amplitude ``scale`` (so each unit's
scalar equation is exact for GD, and the prediction is a closed form, not a fit):

- **linear FC** (data-induced): whitened inputs, targets ``y = β x`` with singular values
  ``strengths``; levels are reduced-rank regression's ``L_k``
  (:func:`~biasfree.theory.reduced_rank.reduced_rank_losses`), times Saxe's half times
  ``t_i = ln(s_i/a₀ − 1)/(2 s_i)`` (:func:`~biasfree.theory.modes.half_time`).
- **ReLU FC** (data-induced, conjectured): inputs on ``len(strengths)`` rays of a regular simplex
  (pairwise cos = −1/d: a unit aligned with one ray is off on the others), target ``c_h r`` on
  ray h; each unit is a linear mode on its ray with rate ``λ_h = p_h <r²>_h``.
- **separate linear attention** (data-induced *because every head starts at the same init*: a
  head's escape time goes as 1/(s·w₀), as a quadratic unit's does, so unequal inits would order
  the heads by init too; the paper puts attention with the quadratic net, among the nets whose
  count of nonzero units grows, docs/theory.md §11): the aligned rank-one heads of
  :mod:`~biasfree.claims.linear_attention` on Λ = diag(``eigs``); levels are principal-component
  regression's (:func:`~biasfree.theory.attention.plateau_losses`), times the scalar maps'
  (:func:`~biasfree.theory.attention.separate_gd`) within 3 standard errors of the sample.
- **linear conv** (data-induced): kernel ``k``, average pooling; the net is a two-layer linear
  net on the mean patch p̄, whose variance along mode h is ``λ_h = conv_spread^((k−1)/2 − h)``: Saxe's
  modes of input variance λ_h, rate λ_h s_h and drop ½ λ_h s_h² (at ``conv_spread`` = 1, p̄
  whitened, they would be linear FC's levels and times).
- **ReLU conv** (data-induced): single spikes ``r e_j`` (interior positions), target
  ``c₊ r`` for r > 0 and ``c₋ |r|`` for r < 0; the all-positive and all-negative kernels learn
  one each, each a linear mode of rate ``λ = p <r²> √k/S`` (S pooled positions).
- **quadratic** σ(z) = z² (init-induced): rays ``r e_h`` (the same radii on every ray) with equal
  targets ``r²``, units of init ``a₀ᵢ = quad_scale·quad_ratio^i`` (``b₀ = √2 a₀``): the unit with
  the largest init escapes first,
  at ``t = [1/x₀ − 1/x + F(x) − F(x₀)]/(2μA)`` (docs/theory.md §11.5, the balanced unit's ODE).

**Checks.** Per panel: every predicted level is found as a plateau
(:func:`~biasfree.theory.staircase.find_plateaus`) within how far the exact scalar GD map is
from that saddle at the plateau's two records (each unit's own map, not the prediction;
+ round-off; attention: + 3 standard errors of the sample's loss and the fit's optimism); every
unit's measured strength (its effective-unit magnitude; attention: the in-context map's
diagonal) crosses half its target at the predicted time, within the finite-η gap (the exact GD
map's half time against the flow's
closed form, + one step; attention: 3 standard errors of the sample through the maps) plus the
bracketing record interval; the effective units are 0 at init, at least i at drop i and all at
the end. Separate attention also: from the record at each intermediate plateau, ``analyse``'s
time to leave (:mod:`~biasfree.claims.saddle_to_saddle.leave`, docs/theory.md §11.7.13) brackets
the loss's half drop. Embedding identities (Theorem 1, two-layer dense
nets, :func:`~biasfree.analysis.saddles.embed`): the width-1 linear net at reduced rank 1 and
the ReLU net at its first ray, each embedded into one more unit, keep their function and a zero
gradient to round-off; a wrong split (output weights summing to 1.01 of the unit's) fails both.
"""

from __future__ import annotations

from typing import Annotated

from annotated_types import Ge, Gt, Interval, MinLen, Predicate

from ..base import Experiment, Positive, config, decreasing

CLAIM = ("Linear, ReLU, attention, linear-conv, ReLU-conv and quadratic two-layer nets trained from a "
         "small aligned init learn one effective unit per drop: each plateau sits at the loss of the "
         "best k-unit solution and each drop comes at its closed-form time, and Theorem 1's embedded "
         "fixed points keep the function and a zero gradient to round-off.")
PAPER_CLAIM = ("Claim of the unifying paper (Zhang, Saxe & Latham, Saddle-to-Saddle Dynamics Explains "
               "a Simplicity Bias Across Neural Network Architectures, ICLR 2026, arXiv 2512.20607): "
               "nets from small init pass near embedded fixed points of narrower nets one after "
               "another, adding one unit (rank, kink, kernel, head) per stage.")

_Strengths = Annotated[tuple[Annotated[float, Gt(0)], ...], MinLen(2), Predicate(decreasing)]


@config
class Config:
    """``strengths``: the FC targets' singular values (linear) and ray slopes (ReLU), decreasing;
    ``conv_kernel`` k and ``conv_n`` input length (linear conv: ``strengths[:k]``, its mean patch's
    variances falling by ``conv_spread`` per mode; ReLU conv:
    the first two strengths, c₊ and c₋); ``quad_units`` and ``quad_ratio`` (the quadratic units'
    init ratio); ``eigs`` Λ and ``n_ctx``, ``n_seq`` of the attention panel; ``n`` points per
    dense task; ``scale`` the init amplitude (a₀ of a mode, the largest quadratic unit's a₀, the
    heads' w₀ is ``att_scale``); GD steps ``lr``, ``steps`` (``att_lr``, ``att_steps`` for
    attention; ``quad_lr``, ``quad_steps`` for the quadratic net), ``records`` log-spaced."""

    strengths: _Strengths = (2.0, 1.0, 0.5)
    conv_kernel: Annotated[int, Ge(2)] = 3
    conv_n: Annotated[int, Ge(5)] = 9
    conv_spread: Annotated[float, Ge(1)] = 2 ** 0.5
    quad_units: Annotated[int, Ge(2)] = 3
    quad_ratio: Annotated[float, Interval(gt=0, lt=1)] = 0.5
    quad_scale: Positive = 0.1
    eigs: _Strengths = (1.0, 0.5, 0.25)
    n_ctx: Annotated[int, Ge(1)] = 16
    n_seq: Annotated[int, Ge(2)] = 8000
    n: Annotated[int, Ge(8)] = 600
    scale: Positive = 1e-6
    att_scale: Positive = 0.05
    lr: Positive = 0.1
    steps: Annotated[int, Ge(10)] = 2000
    att_lr: Positive = 0.1
    att_steps: Annotated[int, Ge(10)] = 4500
    quad_lr: Positive = 0.1
    quad_steps: Annotated[int, Ge(10)] = 1000
    records: Annotated[int, Ge(20)] = 300

    def __post_init__(self):
        if self.conv_n < 2 * self.conv_kernel - 1:
            raise ValueError(f"conv_n={self.conv_n} must be at least 2·conv_kernel − 1 = "
                             f"{2 * self.conv_kernel - 1}: a spike needs an interior position every "
                             "kernel offset sees")
        if self.conv_kernel > len(self.strengths):
            raise ValueError(f"conv_kernel={self.conv_kernel} needs as many strengths (one per mode of "
                             f"the linear conv's mean patch), got {len(self.strengths)}")


PRESETS = {
    "tiny": Config(strengths=(2.0, 0.5), conv_kernel=2, conv_n=5, quad_units=2, eigs=(1.0, 0.5),
                   n_ctx=8, n_seq=2000, n=120, scale=1e-4, att_scale=0.04, lr=0.1, steps=1500,
                   att_lr=0.2, att_steps=1500, quad_lr=0.1, quad_steps=600, records=120),
    "paper": Config(),
}

EXPERIMENT = Experiment("saddle-to-saddle", CLAIM, Config, PRESETS, PAPER_CLAIM)
"""The run of :mod:`biasfree.claims.saddle_to_saddle`: six architectures' staircases against their
predicted levels and times, their effective units, and Theorem 1's embedding identities."""
