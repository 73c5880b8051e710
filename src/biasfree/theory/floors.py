"""Closed-form floors for Gaussian inputs x ~ N(0, I_d) (docs/theory.md §1.3–1.4).

Loss units as everywhere (½E||y - f||², §0); "normalised" floors are divided by ½E||y||².
The sample estimates these are checked against are in :mod:`biasfree.expressivity.floors`.
"""

from __future__ import annotations

from collections.abc import Callable

import jax.numpy as jnp
import numpy as np
from scipy.special import gammaln

from ..core.precision import precise
from .population import population_loss_sine, sine_linear_floor


def chi_moment(d: int, k: float) -> float:
    """``E[r^k]`` for r = ||x|| ~ chi_d: ``2^{k/2} Γ((d+k)/2) / Γ(d/2)``."""
    return float(np.exp(0.5 * k * np.log(2.0) + gammaln((d + k) / 2.0) - gammaln(d / 2.0)))


def sine_floor_closed_form(w, freq: float = 4.0) -> tuple[float, float]:
    """``(F_odd, ½E y²)`` for ``y = wᵀx + sin(a wᵀx)``, a = ``freq``, x ~ N(0, I), in
    loss units: ``F_odd = min_β R(β)`` and ``½E y² = R(0)`` of
    :func:`~biasfree.theory.population.population_loss_sine`.

    With σ = ||w|| (docs/theory.md §1.3): ``F_odd = ½[(1 - e^{-2a²σ²})/2 - a²σ² e^{-a²σ²}]``
    and ``½E y² = ½[σ² + 2aσ² e^{-a²σ²/2} + (1 - e^{-2a²σ²})/2]``.
    """
    w = np.asarray(w, dtype=float)
    return sine_linear_floor(w, freq=freq), float(population_loss_sine(np.zeros((w.size, 1)), w, freq=freq))


def product_homogeneous_floor(d: int, k: int = 3) -> float:
    """Normalised 1-homogeneous floor of ``y = x_1 ⋯ x_k`` (k distinct coordinates),
    x ~ N(0, I_d): y = r^k P(u) and E y² = 1, so along each ray the best r h(u) leaves
    ``1 - (E r^{k+1})² / (E r² E r^{2k})``; k = 3 gives ``2 / (d + 4)`` (2/7 in d = 3).
    A floor for bias-free nets of every depth."""
    return 1.0 - chi_moment(d, k + 1) ** 2 / (chi_moment(d, 2) * chi_moment(d, 2 * k))


@precise
def radial_square_target(d: int) -> Callable:
    """The even target ``y = (||x||² - d) / sqrt(2d)`` (zero mean, E y² = 1 under N(0, I_d))."""
    return lambda X: (jnp.sum(jnp.asarray(X) ** 2, axis=1, keepdims=True) - d) / np.sqrt(2.0 * d)


def radial_square_floor(d: int) -> float:
    """Normalised two-layer (and any-depth) bias-free floor of :func:`radial_square_target`:
    ``h = E[(r² - d) r] / (sqrt(2d) E r²)`` is constant, leaving
    ``1 - (E r³ - d E r)² / (2 d²)`` (0.8585 in d = 3)."""
    return 1.0 - (chi_moment(d, 3) - d * chi_moment(d, 1)) ** 2 / (2.0 * d**2)
