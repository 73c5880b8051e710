"""Levenberg–Marquardt on fewer rows (docs/theory.md §11.7.6): the residuals r(θ) (m) and their
Jacobian J(θ) (m, P), m > P + 1, rotated to P + 1 rows by an orthonormal basis of [r, J], from which
MINPACK's LM reads the same ‖r‖, Jᵀr and JᵀJ, so it takes the same steps at a fraction of the cost
(:func:`~biasfree.analysis.unit_stage.narrow_fixed_point`)."""

from __future__ import annotations

import numpy as np


def rotated(res, jac):
    """``(res̃, jac̃)``: the residuals r(θ) (m) and Jacobian J(θ) (m, P), m > P + 1, rotated to P + 1
    rows, ``r̃ = Qᵀr = (‖r‖, 0, …, 0)``, ``J̃ = QᵀJ``, with Q(θ) (m, P + 1) an orthonormal basis of
    [r, J] whose first column is r/‖r‖ (the R of its Householder QR). Levenberg–Marquardt reads its
    problem only through ‖r‖, ``J̃ᵀr̃ = Jᵀr`` and ``J̃ᵀJ̃ = JᵀJ`` (its QR of J̃ is R's), so it takes
    the same steps in exact arithmetic, on P + 1 rows instead of m: MINPACK's unblocked QR of the
    m rows was 77% of the search (py-spy), LAPACK's blocked one costs a fraction. Only the norm
    at a step it rejects is needed, so the rotation is built at the points where it asks for J,
    where r̃ matches the ``(‖r‖, 0, …)`` it was given there."""
    from scipy.linalg import lapack

    def res_rot(t):
        r = res(t)
        out = np.zeros(t.size + 1)
        out[0] = np.linalg.norm(r)
        return out

    def jac_rot(t):
        A = np.asfortranarray(np.column_stack([res(t), jac(t)]))
        qr, _, _, info = lapack.dgeqrf(A, overwrite_a=True)
        if info != 0:
            raise RuntimeError(f"LAPACK dgeqrf failed (info {info}) on the {A.shape} Jacobian")
        R = np.triu(qr[:t.size + 1])
        if R[0, 0] < 0:  # Q's first column is then −r/‖r‖: flip it (and R's first row)
            R[0] = -R[0]
        return R[:, 1:]
    return res_rot, jac_rot
