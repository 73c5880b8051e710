"""One end of a Hessian's spectrum from its products ``v ↦ ∇²L v``: whole below a size, Lanczos above.

``λ = max_v vᵀHv / vᵀv`` (``which="LA"``, the largest algebraic) or ``min_v`` (``"SA"``, the
smallest) of a symmetric n × n ``H`` given by its products. Up to ``dense_up_to`` weights the
matrix is formed, by its caller (``matrix``) or as its n columns ``H e_i`` symmetrised
``½(H + Hᵀ)`` (the products' round-off is not symmetric), and LAPACK solves it
(``numpy.linalg.eigvalsh``, or ``eigh`` for the eigenvector too). Above, ARPACK's implicitly
restarted Lanczos (``scipy.sparse.linalg.eigsh``, k = 1) works on the products alone: its Ritz
value θ stops at a residual ``‖Hv − θv‖ ≤ tol·|θ|`` (``tol`` = 0: machine precision), and
``|θ − λ| ≤ ‖Hv − θv‖`` for a symmetric H. Its start ``v0`` and its number of Lanczos vectors
``ncv`` are the caller's (None: ARPACK's random start and its default).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .stage_budget import check

ENDS = {"LA": -1, "SA": 0}
"""``which`` → the index of that end in LAPACK's ascending eigenvalues."""


def extreme_eigenvalue(matvec: Callable[[np.ndarray], np.ndarray], n: int, which: str, *, dense_up_to: int,
                       matrix: Callable[[], np.ndarray] | None = None, tol: float = 0.0,
                       v0: np.ndarray | None = None, ncv: int | None = None, vector: bool = False):
    """The largest (``which="LA"``) or smallest (``"SA"``) eigenvalue of the symmetric n × n
    operator ``matvec`` (module doc): dense for ``n ≤ dense_up_to`` (from ``matrix()`` when
    given, else from n products), Lanczos above (``tol``, ``v0``, ``ncv`` as in ``eigsh``).
    Returns λ, or ``(λ, v)`` with its unit eigenvector when ``vector``."""
    if which not in ENDS:
        raise ValueError(f"which must be 'LA' (largest eigenvalue) or 'SA' (smallest), got {which!r}")
    if n <= dense_up_to:
        if matrix is not None:
            H = np.asarray(matrix())
        else:
            C = np.stack([matvec(e) for e in np.eye(n)], axis=1)
            H = 0.5 * (C + C.T)
        end = ENDS[which]
        if vector:
            lam, vec = np.linalg.eigh(H)
            return float(lam[end]), vec[:, end]
        return float(np.linalg.eigvalsh(H)[end])
    from scipy.sparse.linalg import LinearOperator, eigsh

    def product(v):  # within analyse's stage budget, checked at each product (stage_budget)
        check()
        return matvec(v)
    op = LinearOperator((n, n), matvec=product, dtype=float)
    out = eigsh(op, k=1, which=which, tol=tol, v0=v0, ncv=ncv, return_eigenvectors=vector)
    if vector:
        lam, vec = out
        return float(lam[0]), vec[:, 0]
    return float(out[0])
