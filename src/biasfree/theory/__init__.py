"""Closed-form and semi-analytical learning curves (docs/theory.md §2–3).

What the simulator (:mod:`biasfree.dynamics`) should produce, computed without it —
``train`` and ``theory`` never import each other; experiments and tests compare them.
Time is gradient-flow time ``t = η k`` throughout; loss is the mean half squared error.

- :mod:`.modes` — two-layer linear net, whitened inputs, aligned balanced init: the
  logistic mode strengths ``a_i(t) = s_i / (1 + (s_i/a_i0 - 1) e^{-2 s_i t})``, loss,
  half times, plateaus, final loss (Saxe et al. 2014; §3.1, §3.4).
- :mod:`.leaky` — leaky net <-> linear twin: weights ``√c``, time ``c t``, decay ``λ/c``;
  pair net <-> linear net at ``√(1+α)(W, v)``, learning rate ``η c``; closed-form
  leaky curves (§2.3–2.5, §3.2). c = (1 + α)/2.
- :mod:`.decay` — where a two-layer linear net with weight decay ends, ``β*(λ')`` (§2.7).
- :mod:`.deep` — depth-L balanced aligned modes, ``da/dt = L a^{2-2/L} (s - a)`` (§3.3), their
  exact GD map, and the would-be map of a deep pair net to a deep linear net (§4.1).
- :mod:`.riccati` — exact two-layer solution from balanced, unaligned init (matrix
  Riccati; Fukumizu 1998, Braun et al. 2022).
- :mod:`.reference` — :class:`Curve` with a ``reference`` field; the integrated linear
  network for non-whitened inputs (§3.5).
- :mod:`.population` — population loss for Gaussian inputs, linear and sine teachers.
- :mod:`.inits` — the balanced / aligned initialisations the closed forms assume.
- :mod:`.small_init` — small random init: the effective strength of the growing mode,
  half-loss times, and the log correction from the same raw init (§2.4).
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
    "deep_pair_time_factor",
    "deep_logit", "deep_loss", "deep_mode_strength", "deep_time_to", "effective_strength", "final_loss",
    "gd_mode_strength", "half_loss_time", "half_time", "imbalance", "is_whitened", "leaky_decay_to_linear",
    "leaky_effective_init", "leaky_half_time", "leaky_loss", "leaky_mode_strength",
    "leaky_time_to_linear", "leaky_to_linear", "linear_decay_to_leaky", "linear_floor",
    "linear_loss", "linear_lr_to_pair", "linear_net_ode", "linear_time_to_leaky", "linear_to_leaky",
    "linear_to_pair", "logistic", "mode_projections", "mode_strength", "moment_loss",
    "pair_lr_to_linear", "pair_to_linear", "plateaus", "raw_init_half_time_ratio", "population_even_energy",
    "population_loss_linear", "population_loss_sine", "population_loss_two_layer",
    "reference_curve", "riccati_gram", "sine_best_linear", "sine_linear_floor", "unaligned_loss",
    "unaligned_product",
]
