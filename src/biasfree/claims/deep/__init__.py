"""Deep bias-free ReLU nets (depth 3, 4) against deep linear nets (docs/theory.md §3.3–3.4, §4.1).

**Teacher part.** Whitened symmetric Gaussian inputs, a vector-output linear teacher
with distinct singular values (``Σ_yx = U diag(s) Vᵀ``), depth-L nets from small init.
A pair net (``pair_up``) computes ``f = (2c)^{L-1} W_L A ⋯ W_1 x`` (c = (1+α)/2); were
its blocks to stay antisymmetric it would be the deep linear net in time ``λ t``,
``λ_L = c^{2(L-1)/L}`` (§4.1). They do not (the middle layers grow a symmetric part, so
f_odd becomes nonlinear and learns faster), so the comparison is measured, not exact.

Members by name (one :func:`~biasfree.train` call per depth, log-spaced records):
``linear_aligned`` the deep linear net from balanced mode-aligned init
(``theory.aligned_init``), step ηλ, its records at linear time λt; ``relu_pair_aligned``
the ReLU pair net mapped from it (``theory.deep_linear_to_pair``, same function), step η;
``relu_gaussian`` a ReLU net from small Gaussian init; ``relu_pair_random`` a ReLU pair
net from small Gaussian halves; ``linear_twin_of_pair_random`` its would-be deep linear
twin (``theory.deep_pair_half_to_linear``), step ηλ. Measured per record: loss, mode
strengths ``a_i = u_iᵀ β_effᵀ v_i`` (β_eff the least-squares fit of the odd part),
per-layer singular values and effective rank, and the odd nonlinear energy from the
exact split (§4.1) ``2 L = ||Σ_yx - β_effᵀ||_F² + <||f_odd - β_effᵀx||²> + <||f_even||²>``.

**Sine part.** ``y = wᵀx + sin(4 wᵀx)`` on symmetric Gaussian inputs. A two-layer
bias-free net can never go below the least-squares linear floor
``min_β ½<(y - βᵀx)²>`` (§1.3); deeper nets can: measured, with the time they first cross it.
"""

from __future__ import annotations

from typing import Annotated

from annotated_types import Ge, Gt, MinLen, Predicate, doc

from ..base import Experiment, PairWidth, Positive, config, decreasing

CLAIM = ("Deep bias-free ReLU nets learn a linear teacher stage by stage like deep linear nets, but "
         "faster than the rescaled linear theory and with a nonlinear odd part; on the sine target "
         "they go below the two-layer floor.")
PAPER_CLAIM = ("Claim 3 (depth): deep bias-free ReLU nets express more than two-layer ones, yet share "
               "low-rank weights and stage-like learning with deep linear nets.")

MEMBERS = ("linear_aligned", "relu_pair_aligned", "relu_gaussian", "relu_pair_random",
           "linear_twin_of_pair_random")
LINEAR = ("linear_aligned", "linear_twin_of_pair_random")
"""The deep linear members: step ηλ, records at linear time λt."""
PAIRS = ("relu_pair_aligned", "relu_pair_random")


@config
class Config:
    """Teacher part: ``d`` inputs, ``s`` teacher singular values (distinct, decreasing;
    p = len(s) outputs), ``n`` Gaussian draws (N = 2n, whitened), ``width`` every hidden
    width (even), ``depths`` (≥ 3), ``a0`` initial mode strength of the aligned init,
    ``random_scales`` std of the Gaussian inits, one per depth (deeper nets need a larger
    std to leave the plateau within the horizon), ``lr`` GD step η of the ReLU nets (ηλ for
    linear ones), ``horizon`` run length in predicted ReLU transition times of the
    weakest mode, ``n_records`` log-spaced records.
    Sine part: ``sine_d``, ``sine_n`` draws, ``sine_width``, ``sine_depths`` (include 2),
    ``sine_scale`` init std, ``sine_lr``, ``sine_t_max``."""

    d: int = 8
    s: Annotated[tuple[Annotated[float, Gt(0)], ...], MinLen(2), Predicate(decreasing)] = (2.0, 1.2, 0.6)
    n: int = 200
    width: PairWidth = 16
    depths: Annotated[tuple[Annotated[int, Ge(3)], ...], MinLen(1), doc("depth 2 is leaky-collapse")] = (3, 4)
    a0: Positive = 1e-3
    random_scales: tuple[Annotated[float, Gt(0)], ...] = (0.03, 0.06)
    lr: Positive = 0.02
    horizon: Positive = 2.5
    n_records: Annotated[int, Ge(1)] = 300
    sine_d: int = 4
    sine_n: int = 200
    sine_width: Annotated[int, Ge(1)] = 64
    sine_depths: tuple[Annotated[int, Ge(2)], ...] = (2, 3, 4)
    sine_scale: Positive = 0.05
    sine_lr: Positive = 0.02
    sine_t_max: Positive = 400.0

    def __post_init__(self):
        p = len(self.s)
        if self.d < p or self.n < self.d:
            raise ValueError(f"need d >= p = {p} and n >= d, got d={self.d}, n={self.n}")
        if self.width < 2 * p:
            raise ValueError(f"width={self.width} must be >= 2p = {2 * p}")
        if 2 not in self.sine_depths:
            raise ValueError("sine_depths must include 2 (the two-layer reference)")
        if len(self.random_scales) != len(self.depths):
            raise ValueError(f"random_scales={self.random_scales} must hold one std per depth in "
                             f"{self.depths}")
        if self.a0 >= self.s[-1] / 2:
            raise ValueError(f"a0={self.a0} must lie in (0, s_min/2)")


PRESETS = {
    "tiny": Config(d=6, n=100, width=12, depths=(3,), random_scales=(0.03,), horizon=2.0, n_records=100,
                   sine_d=3, sine_n=100, sine_width=32, sine_depths=(2, 3), sine_lr=0.05,
                   sine_t_max=120.0),
    "paper": Config(),
}

EXPERIMENT = Experiment("deep", CLAIM, Config, PRESETS, PAPER_CLAIM)
