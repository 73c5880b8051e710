"""Optimisers beyond GD: which of them keep a bias-free ReLU net on its linear twin.

docs/theory.md §9. A two-layer pair net θ (:func:`~biasfree.core.inits.pair_up` of a small
Gaussian init) on symmetric data with odd targets has the loss of its linear twin √c·θ
(c = (1 + α)/2), and the twin's gradients are the net's times ρ = 1/√c. An optimiser whose
update is homogeneous of degree κ in the gradients (constants such as Adam's ε rescaled by
ρ: a *factory* ``rho -> optimiser``) then trains the twin in lockstep when chained with
``optax.scale(c^{(1+κ)/2})``: :func:`~biasfree.dynamics.optimiser_twin.optimiser_twin`,
κ measured by :func:`~biasfree.dynamics.optimiser_twin.measure_degree`. Every run is
:func:`~biasfree.dynamics.trainer.train` in float64, explicit PRNG keys.

**Checked (exact, §9.2–9.3).** For SGD, heavy-ball momentum, Nesterov, Adam (ε ×ρ), sign
descent, Lion (decoupled decay ×ρ), AdamW (ε and decay ×ρ), and SGD and Adam on mirrored
minibatches (every batch whole pairs (x, −x), the same key for net and twin): the net and
its twin agree at every step (every step is recorded) in loss and in the final weights
(twin ÷ √c), within a round-off bound derived, run by run, from the run's conditioning
(the bound of tests/dynamics/test_optimisers.py): every computed step is an exact step
from weights and data perturbed entrywise by at most 2γ_k relative (γ_k = kε/(1 − kε),
k the longest chain of sums in one gradient, Higham §3.1), and a perturbation at any step
moves an observable by at most the run's measured response to the same relative
perturbation ``rel`` of the init and of the data (two more runs):
``b = K · 2γ_k (|Δ_init| + |Δ_data|) / rel + 2γ_k |obs|`` per record and per weight, and
the net–twin gap must be ≤ 2b (both runs) at every record and weight. The check's value is
the largest gap ÷ 2b. Each check has its **control**, reported beside it (a metric and a
bar of the figure, not a check): the twin trained by the net's own optimiser, without the
rescaling (scale 1 instead of c^{(1+κ)/2}, ε and decay unscaled: Adam at step η instead of
η√c, SGD at η instead of ηc), or, for the minibatch checks, the same batch size drawn at
random instead of in mirror pairs (net and twin on the same random batches).

**Muon** (``optax.contrib.muon``, ε ×ρ) is exact in exact arithmetic, but the pair manifold
repels under it once the gradients are small (§9.2, §9.4). Its gap, its bound and its final
⟨f_even²⟩ are *measured*, not checked: the first-order bound assumes a stable map, and the
jiggled-init run that sizes it grows in the same unstable direction, so the bound says
nothing there. Adam with ε left unscaled (``degree=0`` given) is measured too.

**Measured, not checked (no threshold from theory):**

- *Random small init* (Gaussian, not paired): ``D = max_k |L(θ_k) − L_twin(θ'_k)| / L(θ_0)``
  over every recorded step, net vs √c·θ under the twin optimiser, for SGD, momentum, Adam,
  Lion and Muon, per init std, width and init (keys ``fold_in``).
- *Minibatches*: D from the pair init, SGD and Adam, mirrored vs random batches, per batch size.
- *Stage-like learning* on a second data set: whitened symmetric Gaussian inputs, a linear
  teacher ``U diag(modes_s) Vᵀ`` with well-separated strengths, a ReLU net from small
  Gaussian init and its twin, under GD, Adam and Muon (sizes: the ``modes_*`` fields). Mode
  strength ``a_i(k) = u_iᵀ β_eff(k)ᵀ v_i`` (β_eff the least-squares linear fit of the net's
  outputs; modes from the sample's Σ_yx, strengths s_i, decreasing). *Half time* of mode i:
  the first step at which a_i reaches s_i/2 (cubic spline through the records). *Plateau
  rule*: an intermediate plateau lies between modes i and i+1 when, at the first record
  where a_i ≥ 0.9 s_i, a_{i+1} ≤ 0.1 s_{i+1} still (mode i is learnt before mode i+1
  starts); the count is over i = 1…p−1 (the initial plateau before mode 1 is not counted).
"""

from __future__ import annotations

import math
from typing import Annotated

from annotated_types import Ge, Gt, Interval, MinLen, MultipleOf, Predicate, doc

from ..base import Experiment, PairWidth, Positive, Slope, config, decreasing

CLAIM = ("A two-layer bias-free ReLU pair net on symmetric data follows its linear twin to round-off "
         "under SGD, heavy-ball and Nesterov momentum, Adam and AdamW (ε and decay rescaled), sign "
         "descent, Lion, and SGD and Adam on mirrored minibatches, once the twin's optimiser is "
         "chained with the step scale c^((1+κ)/2) for its degree κ.")
PAPER_CLAIM = ("Claim 2 beyond gradient descent (docs/theory.md §9): the pair-init equivalence of a "
               "two-layer bias-free ReLU net with its linear twin holds for any optimiser homogeneous "
               "in the gradients, with the step rescaled by c^((1+κ)/2).")

IDENTITY = ("sgd", "momentum", "nesterov", "adam", "sign_sgd", "lion", "adamw", "mirrored_sgd",
            "mirrored_adam")
"""The checked pair identities (``mirrored_*``: minibatches of mirror pairs)."""
MEASURED = ("muon", "adam_unscaled_eps")
"""Pair-init runs measured beside them, not checked (module doc)."""
SWEEP = ("sgd", "momentum", "adam", "lion", "muon")
"""Optimisers of the random-init sweep."""
BATCHED = ("sgd", "adam")
"""Optimisers of the minibatch sweep."""
MODES = ("sgd", "adam", "muon")
"""Optimisers of the stage-like-learning part."""
LABELS = {"sgd": "SGD (GD)", "momentum": "momentum", "nesterov": "Nesterov", "adam": "Adam",
          "sign_sgd": "sign descent", "lion": "Lion", "adamw": "AdamW", "muon": "Muon",
          "mirrored_sgd": "SGD, mirrored batches", "mirrored_adam": "Adam, mirrored batches",
          "adam_unscaled_eps": "Adam, ε unscaled"}

_Scales = Annotated[tuple[Annotated[float, Interval(gt=0, lt=math.inf)], ...], MinLen(1)]
"""At least one positive, finite number (init scales)."""
_Strengths = Annotated[tuple[Annotated[float, Gt(0)], ...], MinLen(1), Predicate(decreasing)]
"""At least one positive number, strictly decreasing (singular values)."""
_Counts = Annotated[tuple[Annotated[int, Ge(1)], ...], MinLen(1)]
"""At least one whole number, each at least 1 (widths)."""


@config
class Config:
    """Pair-identity data: ``d`` inputs, ``n`` Gaussian draws (2n symmetric points), a linear
    teacher with singular values ``teacher_s``; pair net of ``width`` hidden units from
    Gaussian halves of std ``scale``; slope ``alpha``; ``steps`` steps, each recorded.
    Steps: ``lr_sgd``, ``lr_sign`` (sign descent), ``lr_momentum`` (momentum and Nesterov,
    β = 0.9), ``lr_adam`` (Adam, AdamW), ``lr_lion``, ``lr_muon``; ``decay`` the decoupled
    weight decay of AdamW and Lion. Minibatches: ``batch_size`` (even) of the checks,
    ``batch_sizes`` of the measured sweep. Random-init sweep: ``sweep_scales`` init stds,
    ``sweep_widths``, ``sweep_inits`` inits each, ``sweep_steps`` steps. Stage-like part:
    ``modes_d`` inputs, ``modes_n`` draws, teacher strengths ``modes_s`` (decreasing),
    ``modes_width``, init std ``modes_scale``, ``modes_steps`` steps, ``modes_records``
    evenly spaced records."""

    d: Annotated[int, Ge(1)] = 3
    n: Annotated[int, Ge(2)] = 20
    teacher_s: _Strengths = (2.0, 1.0)
    width: PairWidth = 8
    scale: Positive = 0.1
    alpha: Slope = 0.0
    steps: Annotated[int, Ge(2), doc("every step is recorded")] = 300
    lr_sgd: Positive = 0.05
    lr_sign: Positive = 0.005
    lr_momentum: Positive = 0.02
    lr_adam: Positive = 0.01
    lr_lion: Positive = 0.003
    lr_muon: Positive = 0.01
    decay: Annotated[float, Ge(0)] = 0.01
    batch_size: Annotated[int, Ge(2), MultipleOf(2), doc("mirrored batches hold whole pairs (x, −x)")] = 8
    batch_sizes: Annotated[tuple[Annotated[int, Ge(2)], ...], MinLen(1)] = (4, 8, 16, 32)
    sweep_scales: _Scales = (1e-1, 1e-2, 1e-3)
    sweep_widths: _Counts = (8, 32, 128)
    sweep_inits: Annotated[int, Ge(1)] = 3
    sweep_steps: Annotated[int, Ge(1)] = 1500
    modes_d: Annotated[int, Ge(1)] = 6
    modes_n: Annotated[int, Ge(2)] = 100
    modes_s: Annotated[_Strengths, MinLen(2)] = (3.0, 1.0, 0.3)
    modes_width: Annotated[int, Ge(1)] = 32
    modes_scale: Positive = 1e-3
    modes_steps: Annotated[int, Ge(2)] = 4000
    modes_records: Annotated[int, Ge(10), doc("to find the half times")] = 801

    def __post_init__(self):
        if len(self.teacher_s) > self.d or self.n < self.d:
            raise ValueError(f"teacher_s: need len(teacher_s) <= d and n >= d, got {len(self.teacher_s)} "
                             f"singular values, d={self.d}, n={self.n}")
        if len(self.modes_s) > self.modes_d or self.modes_n < self.modes_d:
            raise ValueError(f"modes_s: need len(modes_s) <= modes_d and modes_n >= modes_d, got "
                             f"{len(self.modes_s)}, modes_d={self.modes_d}, modes_n={self.modes_n}")
        for b in (self.batch_size, *self.batch_sizes):
            if b % 2 or b > 2 * self.n:
                raise ValueError(f"batch_sizes: {b} must be even (mirrored batches hold whole pairs) "
                                 f"and at most the 2n = {2 * self.n} points")


PRESETS = {
    # tiny: the stage-like part on the pair part's shapes (d = 3, N = 40, width 8, p = 3,
    # steps + 1 records) and one width and batch size, so that it reuses their compiled
    # programs: XLA compiles (~0.5 s each) are most of a run's time
    "tiny": Config(teacher_s=(2.0, 1.0, 0.5), batch_sizes=(8,), sweep_scales=(1e-1, 1e-3),
                   sweep_widths=(8,), sweep_inits=1, sweep_steps=1000, modes_d=3, modes_n=20,
                   modes_width=8, modes_steps=1500, modes_records=301),
    "paper": Config(),
}

EXPERIMENT = Experiment("optimisers", CLAIM, Config, PRESETS, PAPER_CLAIM)
