"""The inputs' second moments, measured once per :func:`~biasfree.analysis.analyse` call, and the
least-squares fits ``argmin_β Σ_n ||f_n − βᵀx_n||²`` that ``analyse`` needs (the odd part's linear
fit, the linear floor, the data set's floor) derived from them instead of one
``np.linalg.lstsq`` (an SVD-based solve of an N × d matrix) each: 60,000 × 784 took about 20 s
apiece on 2 cores.

**The fit.** Columns of X that are exactly zero (a border of raw pixels) get β = 0, as in the
minimum-norm solution lstsq returns. On the others, X_c, ``G = X_cᵀX_c/N`` is factored once
(Cholesky) and ``β = G⁻¹ X_cᵀF/N`` refined (at most :data:`REFINE` times) by ``β += G⁻¹ X_cᵀ(F − Xβ)/N``.
Normal equations square the condition number: a backward-stable factorisation of G (error
``E``, ``‖E‖ ≤ c d ε ‖G‖``, ε = 2⁻⁵³) leaves ``‖δβ‖/‖β‖ ≲ c d κ² ε`` with κ = κ(X_c) =
√(λ_max/λ_min)(G); each refinement step multiplies that part by ``c d κ² ε`` again (Björck,
*Numerical Methods for Least Squares Problems* §2.9), until what remains is the error of
evaluating the residual F − Xβ and X_cᵀr, ``≲ κ ε ‖β‖`` in β and ``≲ ε ‖X‖ ‖β‖`` in the fitted
values Xβ: lstsq's own level (its backward error is ε-sized, so its β is off by up to κ ε, and
more where the residual is large). The residual energies ``<||f − βᵀx||²>`` that the verdict
reads are minimum values, first-order insensitive to δβ. Used only while ``κ² ε ≤``
:data:`MAX_KAPPA2_EPS` (κ ≤ 9.5e4; bench_analyse large: κ about 1.5e4, κ² ε about 5e-8) and
every nonzero column is full rank; otherwise ``fit`` is ``np.linalg.lstsq`` itself.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.linalg as sl

EPS = float(np.finfo(np.float64).eps) / 2
"""Unit round-off of float64, 2⁻⁵³."""
MAX_KAPPA2_EPS = 1e-6
"""The normal equations are used while κ(X_c)² ε is at most this (module doc), lstsq beyond:
a refinement step then gains at least 3 digits even at the worst case's c d κ² ε (d ≤ 1000)."""
REFINE = 8
"""At most this many refinement steps (module doc); they stop once a step changes β by less
than κ ε ‖β‖, lstsq's own level (two or three at bench_analyse's sizes)."""


@dataclass(frozen=True)
class Moments:
    """``Sxx`` = XᵀX/N (as the package computes it everywhere), its ``eigh`` (``lam``
    ascending, ``W``), ``cols`` the nonzero columns of X, ``kappa`` κ(X_c) (inf: X_c rank
    deficient) and ``chol`` the Cholesky factor of Σ_xx on them (None: ``fit`` uses lstsq)."""

    Sxx: np.ndarray
    lam: np.ndarray
    W: np.ndarray
    cols: np.ndarray
    kappa: float
    chol: tuple | None

    @property
    def gram(self) -> bool:
        """Whether :meth:`fit` solves by the normal equations (else by lstsq)."""
        return self.chol is not None

    def fit(self, X, F) -> np.ndarray:
        """``np.linalg.lstsq(X, F, rcond=None)[0]`` (d, p) to round-off (module doc)."""
        if self.chol is None:
            return np.linalg.lstsq(X, F, rcond=None)[0]
        N, c = X.shape[0], self.cols
        beta = np.zeros((X.shape[1], F.shape[1]))
        beta[c] = sl.cho_solve(self.chol, (X.T @ F)[c] / N, check_finite=False)
        for _ in range(REFINE):  # on the residual: the factorisation's error shrinks by κ²ε a step
            step = sl.cho_solve(self.chol, (X.T @ (F - X @ beta))[c] / N, check_finite=False)
            beta[c] += step
            if np.linalg.norm(step) <= self.kappa * EPS * np.linalg.norm(beta):
                break
        return beta


def moments(X) -> Moments:
    """:class:`Moments` of the checked float inputs X (N, d): one XᵀX and one eigh."""
    N = X.shape[0]
    Sxx = X.T @ X / N
    lam, W = np.linalg.eigh(Sxx)
    cols = np.flatnonzero(np.any(X != 0, axis=0))
    Sc = Sxx[np.ix_(cols, cols)]
    ev = np.linalg.eigvalsh(Sc) if cols.size else np.zeros(1)
    kappa = float(np.sqrt(ev[-1] / ev[0])) if ev[0] > 0 else float("inf")
    chol = None
    if cols.size and kappa**2 * EPS <= MAX_KAPPA2_EPS:
        try:
            chol = sl.cho_factor(Sc, lower=True, check_finite=False)
        except np.linalg.LinAlgError:  # not positive definite after all: lstsq
            chol = None
    return Moments(Sxx, lam, W, cols, kappa, chol)


def linear_floor(m: Moments, X, Y) -> float:
    """``½ min_B <||y − Bx||²>`` (:func:`biasfree.theory.linear_floor`, no intercept) by ``m.fit``."""
    B = m.fit(X, Y)
    return float(0.5 * np.mean(np.sum((Y - X @ B) ** 2, axis=1)))
