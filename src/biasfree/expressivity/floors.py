"""Floors: the least error a class of bias-free nets can reach on a target (docs/theory.md §1.3–1.4).

Errors are in the loss unit ½E||y - f||² (§0); ``power = ½E||y||²`` is the loss of f = 0
and ``F / power`` the unit-free normalised floor. Inputs ``X`` (N, d) are a sample of a
law symmetric about 0, targets are callables as in :mod:`biasfree.expressivity.decomposition`.
The floors, each defined in its docstring: :func:`odd_floor` (§1.3), :func:`homogeneous_floor`
(§1.4), their sum :func:`two_layer_floor`, and :func:`dataset_floor` (exact on a symmetric
training set); :func:`~biasfree.expressivity.characterise.characterise` turns them into a
verdict; closed forms for Gaussian inputs are in :mod:`biasfree.theory.floors`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from scipy import stats
from scipy.integrate import quad_vec

from .. import _validate as validate
from ..core.data import check_covariance
from ..core.precision import precise
from ..core.symmetry import _mirror_violation, nearest_mirror
from .decomposition import Decomposition, Function, compiled, energy, evaluate, odd_fit, odd_fit_of


@dataclass(frozen=True)
class Floor:
    """A floor ``½E||y - f*||²`` (loss units, §0) estimated by Monte Carlo.

    ``value`` ± ``se`` (standard error of the mean of the per-sample contributions)
    ± ``quad_error`` (a bound on the ray-quadrature error of ``value``, 0 when no
    quadrature was used); ``power`` = ``½E||y||²`` (the loss of f = 0) on the same sample;
    ``normalised = value / power`` ± ``normalised_se`` (delta method); ``n`` samples
    (directions); ``what`` names the floor.
    """

    value: float
    se: float
    power: float
    normalised: float
    normalised_se: float
    n: int
    what: str
    quad_error: float = 0.0

    @property
    def distance(self) -> float:
        """``sqrt(2 value) = sqrt(E||y - f*||²)``: the L2 distance from the target to the
        function class."""
        return float(np.sqrt(max(2.0 * self.value, 0.0)))

    @property
    def error(self) -> float:
        """``hypot(se, quad_error)``: the uncertainty of ``value`` to use in comparisons."""
        return float(np.hypot(self.se, self.quad_error))


def _floor(sq_err, sq_norm, what: str, quad_error: float = 0.0) -> Floor:
    """A :class:`Floor` from per-sample squared errors ``||y - f*||²``, squared target
    norms ``||y||²`` and the quadrature error bound of the squared errors: the loss
    unit's ½ is applied here, once."""
    c, P, quad_error = 0.5 * np.asarray(sq_err, float), 0.5 * np.asarray(sq_norm, float), 0.5 * quad_error
    n, mean_p, mean_c = c.size, float(P.mean()), float(c.mean())
    if mean_p <= 0.0:
        raise ValueError("target is zero on every sample: a floor relative to its power is undefined; "
                         "give a non-zero target")
    ratio = mean_c / mean_p
    se = float(c.std(ddof=1) / np.sqrt(n))
    rse = float(np.hypot((c - ratio * P).std(ddof=1) / np.sqrt(n), quad_error) / mean_p)
    return Floor(mean_c, se, mean_p, ratio, rse, n, what, float(quad_error))


SYMMETRY_FALSE_ALARM = 1e-6
"""Chance that :func:`check_symmetric_law` refuses a sample of a truly symmetric law."""


def check_symmetric_law(X) -> None:
    """Refuse a sample ``X`` (N, d) whose law is visibly not symmetric about 0.

    Every floor here assumes p(x) = p(-x) (§1.3: odd and even functions orthogonal), so
    every odd moment vanishes. Test the first and third moments of each coordinate,
    ``z = |mean(x_j^k)| / (std(x_j^k)/√N)`` for k = 1, 3: under a symmetric law each z is
    asymptotically ``|N(0, 1)|``, so with the Bonferroni bound over the 2d tests a symmetric
    law is refused with probability at most :data:`SYMMETRY_FALSE_ALARM`. A symmetrised
    sample (every x with its -x) has z = 0 exactly."""
    N, d = X.shape
    z_max = float(stats.norm.isf(SYMMETRY_FALSE_ALARM / (4 * d)))
    for k, name in ((1, "mean"), (3, "third moment")):
        M = X**k
        with np.errstate(invalid="ignore", divide="ignore"):
            z = np.abs(M.mean(axis=0)) / (M.std(axis=0, ddof=1) / np.sqrt(N))
        z = np.where(np.isfinite(z), z, 0.0)
        j = int(np.argmax(z))
        if z[j] > z_max:
            raise ValueError(
                f"X: not a sample of a law symmetric about 0: the {name} of coordinate {j} is "
                f"{M[:, j].mean():.3g}, {z[j]:.3g} standard errors from 0 (limit {z_max:.3g}, a false alarm "
                f"rate of {SYMMETRY_FALSE_ALARM:g}); these floors assume p(x) = p(-x) (docs/theory.md §1.3) "
                "and do not cover this law: centre the inputs (X - X.mean(0)) or pass a symmetric sample "
                "(biasfree.symmetrize)")


def _check_radial(radial):
    if radial is not None and not all(hasattr(radial, a) for a in ("pdf", "isf", "moment")):
        raise TypeError(f"radial={radial!r} must be a frozen scipy.stats law of r = ||z|| (e.g. "
                        "scipy.stats.chi(d)), or None")
    return radial


def _checked(target, X, per_point, radial=None, *, compile_target=True):
    """``(target, X)`` checked; the target compiled once for X's shape (a floor evaluates
    it many times) unless it is a per-point function or ``compile_target`` is False."""
    validate.callable_("target", target)
    validate.flag("per_point", per_point)
    X = validate.finite_array("X", X, ndim=2)
    if X.shape[0] < X.shape[1] + 2:
        raise ValueError(f"X: need a sample of shape (N, d) with N > d + 1, got {X.shape}; draw more "
                         "points")
    check_symmetric_law(X)
    _check_radial(radial)
    return (target if per_point or not compile_target else compiled(target, X)), X


@precise
def odd_floor(target: Function, X, *, per_point: bool = False) -> Floor:
    """``F_odd = min_β ½E||y_odd - βᵀx||²`` for a symmetric input law, from a sample.

    ``X`` (N, d): independent draws from the law (*not* a symmetrised set: the odd
    part is computed exactly by also evaluating the target at ``-X``). β is the
    least-squares fit on the sample; its O(d/N) downward bias is below the standard
    error once N >> d². Any symmetric law (Gaussian or not) works.
    """
    target, X = _checked(target, X, per_point, compile_target=False)
    _, res, dec = odd_fit(target, X, per_point)
    return _floor(res, np.sum(dec.values**2, axis=1), "odd part outside linear maps")


class RayMoments(NamedTuple):
    """``A`` (n, p): ``E_r[g_j(r L u)²]``; ``B`` (n, p): ``E_r[r g_j(r L u)]``;
    ``error``: quad_vec's estimate of the largest absolute error of any entry."""

    A: np.ndarray
    B: np.ndarray
    error: float


@precise
def ray_moments(g: Function, U, *, L=None, radial=None, per_point: bool = False,
                epsrel: float = 1e-8, name: str = "g") -> RayMoments:
    """Moments of ``g`` along the rays x = r L u, r ~ ``radial``, for each direction u.

    ``U`` (n, d) unit directions; ``L`` (d, d) maps isotropic z to x (identity if
    None); ``radial`` a frozen ``scipy.stats`` law of r = ||z|| (default chi_d, i.e.
    x ~ N(0, L Lᵀ)). One adaptive ``quad_vec`` integral over r for all directions and
    outputs at once, up to the law's 1 - 1e-30 quantile, relative tolerance ``epsrel``.
    Refuses (``ValueError``) a ``g`` whose moments do not converge (e.g. exp(x1²) under a
    Gaussian law): non-finite results, a quadrature error above 1e-4 of the largest
    moment, or non-negligible mass at the cut-off. ``name``: how errors call ``g``.
    """
    validate.callable_(name, g)
    validate.flag("per_point", per_point)
    U = validate.finite_array("U", U, ndim=2)
    if not np.allclose(np.linalg.norm(U, axis=1), 1.0, rtol=1e-8, atol=0.0):
        raise ValueError("U must hold unit directions (rows of norm 1): pass U / ||U|| row-wise")
    n, d = U.shape
    V = U if L is None else U @ validate.finite_array("L", L, shape=(d, d)).T
    radial = stats.chi(d) if _check_radial(radial) is None else radial
    epsrel = validate.positive("epsrel", epsrel, scalar=True)
    p = evaluate(g, V[:1], per_point=per_point, name=name).shape[1]

    def integrand(r):
        with np.errstate(over="ignore", invalid="ignore"):
            G = np.asarray(g(r * V), dtype=float) if not per_point else evaluate(g, r * V, per_point=True)
            G = G.reshape(n, -1)
            return radial.pdf(r) * np.concatenate([(G**2).ravel(), (r * G).ravel()])

    # beyond the 1 - 1e-30 quantile the law has no mass worth integrating (and a fast
    # growing target could overflow there)
    upper = float(radial.isf(1e-30))
    out, err = quad_vec(integrand, 0.0, upper if np.isfinite(upper) else np.inf,
                        epsrel=epsrel, epsabs=1e-14)
    grows = (f"{name}: its moments along rays x = r u do not converge (E||g(x)||² is infinite or too "
             "large for quadrature: the function grows faster than the input law decays, e.g. "
             "exp(x1²)); floors need a target of finite variance: rescale or bound it")
    if not np.all(np.isfinite(out)) or not err <= 1e-4 * max(float(np.max(np.abs(out))), 1e-300):
        raise ValueError(grows)
    lo, hi = radial.support()
    if not np.isfinite(hi) and np.isfinite(upper):  # the mass cut off beyond the quantile is negligible
        tail = np.abs(integrand(upper)) * upper
        if not np.all(tail <= 1e-6 * np.abs(out) + 1e-14):
            raise ValueError(grows)
    return RayMoments(out[: n * p].reshape(n, p), out[n * p:].reshape(n, p), float(err))


def _ray_residual(A, B, err, m2):
    """Per direction ``e(u) = Σ_j A_j - ||B||²/E r²`` (best ray-wise r h(u) removed) and
    a bound on its quadrature error given entry errors ≤ ``err``."""
    e = np.sum(A, axis=1) - np.sum(B**2, axis=1) / m2
    p = A.shape[1]
    bound = p * err + float(np.max(2.0 * np.sum(np.abs(B), axis=1) * err + p * err**2)) / m2
    return e, bound


def _ray_floors(target, X, cov, radial, per_point):
    """Per-direction residuals of the even part and of the whole target (one quadrature);
    ``X`` already checked (:func:`_checked`)."""
    d = X.shape[1]
    L = np.eye(d) if cov is None else np.linalg.cholesky(check_covariance(cov, d))
    Z = np.linalg.solve(L, X.T).T
    norms = np.linalg.norm(Z, axis=1, keepdims=True)
    if np.any(norms == 0.0):
        raise ValueError("X: a sample point is exactly 0: it has no direction; drop it")
    radial = stats.chi(d) if radial is None else radial
    m2 = float(radial.moment(2))

    def both(V):
        F, Fm = evaluate(target, V, per_point=per_point), evaluate(target, -V, per_point=per_point)
        return np.concatenate([0.5 * (F + Fm), F], axis=1)

    A, B, err = ray_moments(both, Z / norms, L=L, radial=radial, name="target")
    p = A.shape[1] // 2
    return (_ray_residual(A[:, :p], B[:, :p], err, m2), _ray_residual(A[:, p:], B[:, p:], err, m2),
            np.sum(A[:, p:], axis=1))


@precise
def homogeneous_floor(target: Function, X, *, even_only: bool = False, cov=None, radial=None,
                      per_point: bool = False) -> Floor:
    """Floor of positively 1-homogeneous approximation for radially symmetric inputs.

    ``F = ½ E_u[E_r||g(ru)||² - ||E_r[r g(ru)]||² / E[r²]]`` with g = y (the floor of
    bias-free nets of every depth, all positively 1-homogeneous) or, with
    ``even_only``, g = y_even (the part of the even target no even 1-homogeneous
    function, hence no two-layer net, fits). Directions u come from the sample ``X``
    (N, d) of x ~ N(0, ``cov``), or of x = L r u with r ~ ``radial``, a frozen scipy
    law of ||L⁻¹x|| (Σ = L Lᵀ); r is integrated by quadrature (:func:`ray_moments`).
    ``power`` is ``½E||y||²``, ray-integrated on the same directions.
    """
    validate.flag("even_only", even_only)
    target, X = _checked(target, X, per_point, radial)
    (even, even_err), (full, full_err), power = _ray_floors(target, X, cov, radial, per_point)
    if even_only:
        return _floor(even, power, "even part outside even 1-homogeneous functions", even_err)
    return _floor(full, power, "target outside positively 1-homogeneous functions", full_err)


@dataclass(frozen=True)
class TwoLayerFloor:
    """Floors of two-layer bias-free nets with unlimited width (§1.3–1.4): ``odd`` (odd
    part outside linear maps), ``even`` (even part out of reach), ``total = odd +
    even`` (one sample, errors combined); ``any_depth``, the 1-homogeneous floor that
    binds bias-free nets of every depth (:func:`homogeneous_floor`); slope ``alpha``."""

    odd: Floor
    even: Floor
    total: Floor
    any_depth: Floor
    alpha: float


@precise
def two_layer_floor(target: Function, X, *, alpha=0.0, cov=None, radial=None,
                    per_point: bool = False) -> TwoLayerFloor:
    """The least loss ``½E||y - f||²`` any two-layer bias-free net ``vᵀσ_α(W x)`` can reach.

    ``X`` (N, d): independent draws of a radially symmetric law (x ~ N(0, ``cov``) by
    default; see :func:`homogeneous_floor`). Per sample n the contribution is
    ``½||y_odd(x_n) - β̂ᵀx_n||²`` (least squares on the sample) plus, for α < 1, ½ the
    ray-integrated even residual ``e(u_n) = E_r||y_even(r u_n)||² - ||E_r[r y_even]||²/E r²``
    or, for α = 1 (``alpha``: a linear net), ``½||y_even(x_n)||²``. Normalised by
    ``½E||y||²`` on the same sample. x1 x2 x3 under N(0, I) gives ``total.normalised = 1``.
    """
    alpha = validate.slope(alpha)
    target, X = _checked(target, X, per_point, radial)
    _, res, dec = odd_fit(target, X, per_point)
    power = np.sum(dec.values**2, axis=1)
    (even, even_err), (full, full_err), ray_power = _ray_floors(target, X, cov, radial, per_point)
    if float(alpha) == 1.0:
        even, even_err, even_what = np.sum(dec.even**2, axis=1), 0.0, "even part (a linear net has none)"
    else:
        even_what = "even part outside even 1-homogeneous functions"
    return TwoLayerFloor(
        _floor(res, power, "odd part outside linear maps"),
        _floor(even, power, even_what, even_err),
        _floor(res + even, power, "two-layer bias-free floor", even_err),
        _floor(full, ray_power, "target outside positively 1-homogeneous functions", full_err),
        float(alpha))


@dataclass(frozen=True)
class DatasetFloor:
    """Exact lower bound on the training loss ``½<||Y - f||²>`` of every two-layer
    bias-free net on a symmetric data set: ``loss >= value``. ``odd = min_β
    ½<||Y_odd - Xβ||²>``, ``even = ½<||Y_even||²>``, ``power = ½<||Y||²>`` (the loss of
    f = 0); ``value = odd`` for α < 1, ``odd + even`` for α = 1.

    ``exact``: the inputs were verified mirror-symmetric as a multiset (each x's mirror
    -x present as often as x itself), so the bound holds exactly; ``violation`` is the
    measured :func:`~biasfree.core.symmetry.mirror_violation` of X and ``note`` says which.
    When a point is repeated without its mirror, odd and even functions are no longer
    orthogonal on the set and nets can go below ``value``: then ``exact`` is False and
    the value is APPROXIMATE."""

    value: float
    odd: float
    even: float
    power: float
    exact: bool = True
    violation: float = 0.0
    note: str = ""

    @property
    def normalised(self) -> float:
        return self.value / self.power


@precise
def dataset_floor(X, Y, *, alpha=0.0, tol: float = 1e-9) -> DatasetFloor:
    """The two-layer floor on a *symmetric* training set, exactly (no sampling error).

    On a set where every x has its mirror -x, odd and even functions of x are
    orthogonal in the sample mean, so for a two-layer bias-free net (``f_odd = βᵀx``)
    ``½<||Y - f||²> = ½<||Y_odd - βᵀx||²> + ½<||Y_even - f_even||²> >= min_β ½<||Y_odd - Xβ||²>``,
    where ``Y_odd(x) = (Y(x) - Y(-x))/2`` pairs each row with its mirror (found within
    ``tol``). ``alpha`` = 1 adds the even energy (a linear net has no even part).

    The bound is called exact only when X is symmetric as a *multiset*
    (:func:`~biasfree.core.symmetry.mirror_violation` <= ``tol``; else APPROXIMATE: :class:`DatasetFloor`).
    """
    alpha = validate.slope(alpha)
    X, Y = validate.data(X, Y)
    return _dataset_floor(X, Y, alpha, validate.nonnegative("tol", tol, scalar=True))


def _dataset_floor(X, Y, alpha: float, tol: float, fit=None, violation: float | None = None) -> DatasetFloor:
    """:func:`dataset_floor` of checked float arrays ``X`` (N, d), ``Y`` (N, p), unchecked; ``fit``
    the least-squares solver of :func:`~.decomposition.odd_fit_of`; ``violation`` X's
    :func:`~biasfree.core.symmetry.mirror_violation` where the caller has measured it."""
    dist, partner = nearest_mirror(X)
    if np.max(dist) > tol:
        raise ValueError(
            f"X is not symmetric: row {int(np.argmax(dist))} has no mirror -x within {tol}; "
            "build the set with biasfree.symmetrize (the exact floor needs every pair)"
        )
    dec = Decomposition(Y, 0.5 * (Y - Y[partner]), 0.5 * (Y + Y[partner]))
    odd = float(0.5 * np.mean(odd_fit_of(X, dec, fit)[1]))
    even = 0.5 * dec.even_energy
    value = odd + even if float(alpha) == 1.0 else odd
    violation = _mirror_violation(X) if violation is None else violation
    exact = violation <= tol
    note = (f"exact: X is mirror-symmetric as a multiset (mirror violation {violation:.2g} <= tol {tol:g})"
            if exact else
            f"APPROXIMATE: every x has a mirror within tol {tol:g}, but not as often as x itself "
            f"(multiset mirror violation {violation:.3g}); odd and even functions are not orthogonal "
            "on this set, so a net can go below this value. Symmetrise the set (biasfree.symmetrize) "
            "for an exact bound")
    return DatasetFloor(value, odd, even, 0.5 * energy(Y), bool(exact),
                        float(violation), note)
