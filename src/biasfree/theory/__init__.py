"""Closed-form and semi-analytical learning curves (docs/theory.md §2–3).

What the simulator (:mod:`biasfree.dynamics`) should produce, computed without it —
``train`` and ``theory`` never import each other; experiments and tests compare them.
Time is gradient-flow time ``t = η k`` throughout; loss is the mean half squared error.
One concept a module (each module's docstring gives its equations): :mod:`.modes`
(two-layer linear net, aligned balanced init), :mod:`.leaky` (leaky net <-> linear twin),
:mod:`.decay` (weight decay's end point), :mod:`.deep` (depth-L modes), :mod:`.riccati`
(unaligned balanced init), :mod:`.reference` (any inputs), :mod:`.population` (Gaussian
inputs), :mod:`.inits`, :mod:`.small_init`, :mod:`.margin`, :mod:`.orthogonal`, :mod:`.floors`.
"""

from .decay import decayed_solution
from .deep import (
    deep_gd_mode_strength,
    deep_half_time,
    deep_linear_to_pair,
    deep_logit,
    deep_loss,
    deep_mode_strength,
    deep_pair_half_to_linear,
    deep_pair_time_factor,
    deep_time_to,
)
from .inits import aligned_init, balanced_init, imbalance
from .leaky import (
    leaky_decay_to_linear,
    leaky_effective_init,
    leaky_half_time,
    leaky_loss,
    leaky_mode_strength,
    leaky_time_to_linear,
    leaky_to_linear,
    linear_decay_to_leaky,
    linear_lr_to_pair,
    linear_time_to_leaky,
    linear_to_leaky,
    linear_to_pair,
    pair_lr_to_linear,
    pair_to_linear,
)
from .modes import (
    Modes,
    data_modes,
    final_loss,
    gd_mode_strength,
    half_time,
    is_whitened,
    linear_floor,
    linear_loss,
    logistic,
    mode_projections,
    mode_strength,
    plateaus,
)
from .population import (
    population_even_energy,
    population_loss_linear,
    population_loss_sine,
    population_loss_two_layer,
    sine_best_linear,
    sine_linear_floor,
)
from .reference import REFERENCES, Curve, linear_net_ode, moment_loss, reference_curve
from .riccati import riccati_gram, unaligned_loss, unaligned_product
from .small_init import effective_strength, half_loss_time, raw_init_half_time_ratio

__all__ = [
    "Curve", "Modes", "REFERENCES", "aligned_init", "balanced_init", "data_modes", "decayed_solution",
    "deep_gd_mode_strength", "deep_half_time", "deep_linear_to_pair", "deep_pair_half_to_linear",
    "deep_pair_time_factor", "deep_logit", "deep_loss", "deep_mode_strength", "deep_time_to",
    "effective_strength", "final_loss", "gd_mode_strength", "half_loss_time", "half_time", "imbalance",
    "is_whitened", "leaky_decay_to_linear", "leaky_effective_init", "leaky_half_time", "leaky_loss",
    "leaky_mode_strength", "leaky_time_to_linear", "leaky_to_linear", "linear_decay_to_leaky", "linear_floor",
    "linear_loss", "linear_lr_to_pair", "linear_net_ode", "linear_time_to_leaky", "linear_to_leaky",
    "linear_to_pair", "logistic", "mode_projections", "mode_strength", "moment_loss", "pair_lr_to_linear",
    "pair_to_linear", "plateaus", "raw_init_half_time_ratio", "population_even_energy",
    "population_loss_linear", "population_loss_sine", "population_loss_two_layer", "reference_curve",
    "riccati_gram", "sine_best_linear", "sine_linear_floor", "unaligned_loss", "unaligned_product",
]
