"""Weight decay: where a two-layer linear net with L2 decay ends (docs/theory.md §2.7).

A two-layer linear net ``f(x) = W_2 W_1 x`` (one output) trained on the mean half
squared error with decay λ' on both layers minimises
``½<(y - βᵀx)²> + (λ'/2)(||W_1||² + ||W_2||²)`` over factorisations of ``β = W_1ᵀW_2ᵀ``.
The factorisation penalty ``½(||W_1||² + ||W_2||²)`` of a rank-one product is at least
``||β||``, with equality when balanced, so the end point is

    β*(λ') = argmin_β ½ βᵀΣ_xx β - Σ_xyᵀβ + λ' ||β||,

i.e. ``β = (Σ_xx + (λ'/ρ) I)⁻¹ Σ_xy`` with ``ρ = ||β||`` (zero when ``||Σ_xy|| <= λ'``).
A leaky net with decay λ has the end point of its linear twin, ``β*(λ/c)``
(:func:`~biasfree.theory.leaky_decay_to_linear`).
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import brentq

from .. import _validate as validate


def decayed_solution(Sxx, sxy, decay: float) -> np.ndarray:
    """``β*(λ') = argmin_β ½ βᵀΣ_xx β - Σ_xyᵀβ + λ' ||β||`` (module doc), shape (d,).

    ``Sxx`` = Σ_xx = <x xᵀ> (d, d) positive definite, ``sxy`` = Σ_xy = <x y> (d,),
    ``decay`` = λ' >= 0 the decay of the linear net. Zero if ``||Σ_xy|| <= λ'``; else
    ``ρ = ||β||`` is the root of ``||(Σ_xx + (λ'/ρ) I)⁻¹ Σ_xy|| - ρ`` (scipy brentq on
    the bracket (0, ||Σ_xx⁻¹ Σ_xy||], to 1e-15 relative).
    """
    sxy = validate.finite_array("sxy", sxy).ravel()
    Sxx = validate.finite_array("Sxx", Sxx, ndim=2)
    if Sxx.shape != (sxy.size, sxy.size):
        raise ValueError(f"Sxx must be ({sxy.size}, {sxy.size}) to match sxy, got {Sxx.shape}")
    if not np.allclose(Sxx, Sxx.T):
        raise ValueError("Sxx must be symmetric (Σ_xx = XᵀX/N)")
    decay = validate.nonnegative("decay", decay, scalar=True, why="a weight decay λ'")
    if np.linalg.norm(sxy) <= decay:
        return np.zeros_like(sxy)
    lam, Q = np.linalg.eigh(Sxx)
    if not lam[0] > 0:
        raise ValueError("Sxx must be positive definite (inputs of full rank); whiten or drop "
                         "null directions first (biasfree.data.whiten(X, rank='auto'))")
    b = Q.T @ sxy

    def norm_gap(rho):
        return np.linalg.norm(b / (lam + decay / rho)) - rho

    rho_max = float(np.linalg.norm(b / lam))
    rho = brentq(norm_gap, 1e-12 * rho_max, rho_max, xtol=1e-15 * rho_max, rtol=1e-15)
    return Q @ (b / (lam + decay / rho))
