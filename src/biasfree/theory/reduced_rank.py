"""Reduced-rank regression: the best linear map of rank k, and its loss (docs/theory.md §11.3).

For inputs X (N, d), targets Y (N, p), ``Σ_xx = XᵀX/N``, ``Σ_yx = YᵀX/N``, the loss of a map β
(p, d) is ``L(β) = ½<||y − βx||²> = ½ tr Σ_yy − tr(β Σ_xy) + ½ tr(β Σ_xx βᵀ)``. In the whitened
metric ``β = M Σ_xx^{-1/2}`` it is ``½ tr Σ_yy − tr(M Cᵀ) + ½||M||_F²`` with
``C = Σ_yx Σ_xx^{-1/2} = U diag(s) Vᵀ``, so by Eckart–Young the best rank-k map is the
rank-k truncation of C, mapped back:

    β_k = U_k diag(s_k) V_kᵀ Σ_xx^{-1/2},   L_k = ½ (tr Σ_yy − Σ_{i≤k} s_i²).

A two-layer linear net of width k sits at β_k at its global minimum, and a wider one has a
saddle there (§11.4): β_k are the plateaus of its staircase. Truncating the least-squares map
``Σ_yx Σ_xx^{-1}`` in the plain metric instead is not optimal unless Σ_xx ∝ I.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .. import _validate as v

_CUT = 1e-12
"""Input directions with Σ_xx eigenvalue below this fraction of the largest are left out."""


WHITE = 1e-10
"""Inputs count as whitened when ‖Σ_xx − I‖₂ ≤ this (far above the round-off of XᵀX/N, far
below any difference that would move Saxe's times): then the closed-form drop times are exact
flow (:mod:`biasfree.analysis.stage`, :mod:`biasfree.analysis.deep_stage`)."""


def is_whitened(X) -> bool:
    """``‖XᵀX/N − I‖₂ ≤`` :data:`WHITE` for inputs ``X`` (N, d)."""
    X = np.asarray(X, float)
    return bool(np.linalg.norm(X.T @ X / X.shape[0] - np.eye(X.shape[1]), 2) <= WHITE)


class WhitenedSVD(NamedTuple):
    """The SVD ``C = Σ_yx Σ_xx^{-1/2} = U diag(s) Vᵀ`` (module doc) and ``isqrt`` = Σ_xx^{-1/2} on its
    range; it unpacks as ``U, s, Vt, isqrt``. Computed once by :func:`whitened_svd` and passed on
    (``svd=``) to what needs it again on the same data."""

    U: np.ndarray
    s: np.ndarray
    Vt: np.ndarray
    isqrt: np.ndarray


def whitened_svd(X, Y) -> WhitenedSVD:
    """:class:`WhitenedSVD` ``(U, s, Vt, Σ_xx^{-1/2})``: the SVD ``C = Σ_yx Σ_xx^{-1/2} = U diag(s) Vᵀ``
    (module doc), with Σ_xx^{-1/2} on its range (directions below ``_CUT`` of the largest eigenvalue
    left out)."""
    N = X.shape[0]
    lam, W = np.linalg.eigh(X.T @ X / N)
    keep = lam > _CUT * lam.max()
    isqrt = (W[:, keep] / np.sqrt(lam[keep])) @ W[:, keep].T  # Σ_xx^{-1/2} on its range
    U, s, Vt = np.linalg.svd(Y.T @ X / N @ isqrt, full_matrices=False)
    return WhitenedSVD(U, s, Vt, isqrt)


def numerical_rank(svd: WhitenedSVD, n: int) -> int:
    """The number of strengths ``s_i > s_1 · max(n, d, p) · ε`` of ``svd`` (of n samples, d inputs, p
    outputs): NumPy's ``matrix_rank`` rule, with the sample count n for the sums Σ_yx and Σ_xx are made
    of. A strength below it is round-off of the data's moments, not a mode the data teaches: a "best
    k-unit solution" past this rank is the rank-r one with units of strength ≈ 0 added, at a distance
    from a net that differs from the rank-r one's by those units' √s_i (≈ 1e-8), so counting them
    would let round-off pick the largest k (issue 49 audit)."""
    s = np.asarray(svd.s, float)
    if s.size == 0 or s[0] <= 0:
        return 0
    tol = s[0] * max(n, svd.U.shape[0], svd.Vt.shape[1]) * np.finfo(float).eps
    return int(np.sum(s > tol))


def reduced_rank_fit(X, Y, k: int) -> tuple[np.ndarray, float]:
    """``(β_k, L_k)``: the best map of rank ≤ k (p, d) and its loss ½<||y − β_k x||²> (module
    doc), computed from the map on the data."""
    X, Y = v.data(X, Y)
    k = v.integer("k", k, 0, min(X.shape[1], Y.shape[1]))
    U, s, Vt, isqrt = whitened_svd(X, Y)
    beta = (U[:, :k] * s[:k]) @ Vt[:k] @ isqrt
    return beta, float(0.5 * np.mean(np.sum((Y - X @ beta.T) ** 2, axis=1)))


def reduced_rank_losses(X, Y, *, svd: WhitenedSVD | None = None) -> np.ndarray:
    """``L_k = ½ (tr Σ_yy − Σ_{i≤k} s_i²)`` for k = 0..min(d, p) (module doc): the loss of the
    best linear map of each rank, the plateau levels of a two-layer linear net. ``svd``: the
    caller's :func:`whitened_svd` of (X, Y), not computed again."""
    X, Y = v.data(X, Y)
    s = (whitened_svd(X, Y) if svd is None else svd).s
    return 0.5 * (float(np.mean(np.sum(Y**2, axis=1))) - np.concatenate([[0.0], np.cumsum(s**2)]))


def kronecker_departure(Z, D: int) -> tuple[float, float]:
    """``(δ, tol)``: how far the second moment Σ_zz = ZᵀZ/S of features ``Z`` (S, D²), each row
    ``z = vec(M)`` of a D × D matrix (row-major, as attention's cubic features), is from a Kronecker
    product P ⊗ Q, relative: δ = min ‖Σ_zz − P ⊗ Q‖_F/‖Σ_zz‖_F (Van Loan & Pitsianis 1993: the
    rearranged R[(i,k),(j,l)] = Σ[(i,j),(k,l)] has P ⊗ Q ↔ rank 1, so δ is its singular values past
    the first). With δ = 0 the best rank-k matrix map in the metric Σ_zz is Eckart–Young's in the
    whitened metric (module doc), a closed form; otherwise it is a weighted low-rank approximation,
    which has none. ``tol`` = γ_{S+D²} tr Σ_zz/‖Σ_zz‖_F: Σ_zz's sums are off by γ_S ``|Z|ᵀ|Z|/S``, of
    Frobenius norm ≤ γ_S ⟨‖z‖²⟩ = γ_S tr Σ_zz (Cauchy–Schwarz over the rows), the SVD (backward stable)
    adds γ_{D²} of ‖R‖_F, and the trailing singular values' norm moves by at most that (Mirsky)."""
    Z = v.finite_array("Z", Z, ndim=2)
    D = v.integer("D", D, 1)
    if Z.shape[1] != D * D:
        raise ValueError(f"Z has {Z.shape[1]} columns but D = {D} needs D² = {D * D}: pass the features "
                         "vec(M) of D × D matrices")
    S = Z.shape[0]
    R = (Z.T @ Z / S).reshape(D, D, D, D).transpose(0, 2, 1, 3).reshape(D * D, D * D)
    s = np.linalg.svd(R, compute_uv=False)
    total = float(np.sqrt(np.sum(s**2)))
    u, k = np.finfo(float).eps / 2, S + D * D
    if total == 0:
        return 0.0, 0.0
    trace = float(np.mean(np.sum(Z**2, axis=1)))  # tr Σ_zz = ⟨‖z‖²⟩
    return float(np.sqrt(np.sum(s[1:] ** 2))) / total, k * u / (1 - k * u) * trace / total
