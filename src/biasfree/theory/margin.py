"""Hard-margin SVM without intercept, its KKT certificate, and direction/margin measures.

For inputs x_i (rows of ``X``) with labels ``y_i`` in {-1, +1}, the hard-margin SVM
through the origin is

    w_svm = argmin ||w||²  subject to  y_i wᵀx_i >= 1 for every i,

the direction that gradient descent on a linear model (or a linear net) with logistic
loss tends to on separable data (Soudry et al. 2018; Ji & Telgarsky 2019; docs/theory.md
§2.8). Its geometric margin is ``1 / ||w_svm||``.

The problem is convex, so ``w`` is optimal iff it is feasible and stationary (KKT):
``w = Σ_{active} μ_i y_i x_i`` with ``μ_i >= 0`` over the constraints with margin 1
(:func:`kkt_residual` certifies any ``w`` so).
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import minimize, nnls

from .. import _validate as validate

KKT_TOL = 1e-8
"""Certificate tolerance: SLSQP with ftol 1e-15 meets the constraints and stationarity to
~1e-14 relative; 1e-8 leaves six orders of magnitude for conditioning. Also the slack
within which a constraint counts as active."""


def _signed(X, y) -> np.ndarray:
    X = validate.finite_array("X", X, ndim=2)
    y = validate.finite_array("y", y).ravel()
    if y.shape != (X.shape[0],):
        raise ValueError(f"y: need inputs X (N, d) and labels y (N,), got shapes {X.shape} and {y.shape}")
    validate.labels("y", y, "a margin", "")
    return y[:, None] * X


def _direction(name: str, w, d: int) -> np.ndarray:
    w = validate.finite_array(name, w, shape=(d,))
    if not np.any(w):
        raise ValueError(f"{name} is the zero vector: a direction needs a non-zero w")
    return w


def _rows(name: str, B) -> np.ndarray:
    B = validate.finite_array(name, B, ndim=(1, 2, 3))
    if np.any(np.linalg.norm(B, axis=-1) == 0):
        raise ValueError(f"{name} has a zero row: a direction needs a non-zero β")
    return B


def hard_margin_svm(X, y) -> np.ndarray:
    """``w_svm = argmin ||w||² s.t. y_i wᵀx_i >= 1`` (no intercept), shape (d,).

    ``X`` (N, d) inputs, ``y`` (N,) labels in {-1, +1}. SLSQP starts from the
    least-squares direction rescaled to feasibility. Its own status is not trusted (at
    ftol 1e-15 it may stop with "positive directional derivative" at the optimum): the
    result is accepted if it meets the constraints; certify optimality with
    :func:`kkt_residual`. Raises ``ValueError`` if the constraints stay violated (the
    data are not separable by a hyperplane through the origin)."""
    Z = _signed(X, y)
    w0, *_ = np.linalg.lstsq(Z, np.ones(len(Z)), rcond=None)
    m0 = np.min(Z @ w0)
    w0 = w0 / m0 if m0 > 0 else w0
    res = minimize(lambda w: w @ w, w0, jac=lambda w: 2 * w, method="SLSQP",
                   constraints=[{"type": "ineq", "fun": lambda w: Z @ w - 1.0, "jac": lambda w: Z}],
                   options={"ftol": 1e-15, "maxiter": 1000})
    if np.min(Z @ res.x) < 1.0 - KKT_TOL:
        raise ValueError(f"hard-margin SVM failed ({res.message}): the data are not separable "
                         "by a hyperplane through the origin; use label_data with a margin")
    return res.x


def kkt_residual(X, y, w) -> float:
    """Relative KKT residual of ``w`` (d,) for the hard-margin SVM of ``X``, ``y``:

        max(1 - min_i y_i wᵀx_i,  min_{μ >= 0} ||w - Σ_{active} μ_i y_i x_i|| / ||w||),

    active meaning ``y_i wᵀx_i <= 1 + KKT_TOL`` (μ by ``scipy.optimize.nnls``). Zero
    exactly at the optimum; a feasible non-optimal ``w`` leaves a stationarity residual."""
    Z = _signed(X, y)
    w = _direction("w", w, Z.shape[1])
    m = Z @ w
    active = m <= 1.0 + KKT_TOL
    res = nnls(Z[active].T, w)[1] if active.any() else np.linalg.norm(w)  # none active: μ = 0
    return float(max(1.0 - np.min(m), res / np.linalg.norm(w)))


def cosine(B, w) -> np.ndarray:
    """``cos ∠(b, w)`` for every row ``b`` (last axis) of ``B`` and the vector ``w``."""
    B = _rows("B", B)
    w = validate.finite_array("w", w, ndim=1)
    if B.shape[-1] != w.shape[0]:
        raise ValueError(f"B rows have {B.shape[-1]} entries but w has {w.shape[0]}: give vectors of one "
                         "dimension")
    w = _direction("w", w, B.shape[-1])
    return (B @ w) / (np.linalg.norm(B, axis=-1) * np.linalg.norm(w))


def margin_ratio(B, X, y, w_svm) -> np.ndarray:
    """Normalised margin of each row ``β`` of ``B`` relative to the SVM's:
    ``min_i y_i βᵀx_i / ||β||  ÷  1/||w_svm||``; 1 exactly in the SVM direction, below
    1 for every other direction, negative while some point is misclassified."""
    Z = _signed(X, y)
    B = _rows("B", B)
    if B.shape[-1] != Z.shape[1]:
        raise ValueError(f"B rows have {B.shape[-1]} entries but X has d = {Z.shape[1]}: one β (d,) per row")
    w_svm = _direction("w_svm", w_svm, Z.shape[1])
    return np.min(B @ Z.T, axis=-1) / np.linalg.norm(B, axis=-1) * np.linalg.norm(w_svm)
