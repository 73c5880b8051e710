"""Expressivity (docs/theory.md §1.2–1.5): decomposition, floors, characterisation, depth.

Exact identities are tested at float64 round-off. Monte-Carlo floors are compared
with Gaussian closed forms within Z = 4 of their own standard errors (a false alarm
has probability ~6e-5 per assertion under the normal approximation), and each such
test also bounds the standard error, so that a broken estimator cannot pass by
reporting a huge error bar. Ray quadrature alone (no sampling error) is compared to
closed forms within its tolerance (relative 1e-8, asserted at 1e-7).
"""

import jax
import numpy as np
import pytest
from roundoff import EPS, abs_twin, forward_gap, gamma, lstsq_residual_gap
from scipy import stats

import biasfree as bf
from biasfree.core.nets import forward
from biasfree.expressivity import decomposition as ex
from biasfree.expressivity import floors
from biasfree.expressivity.characterise import EVEN_PART_LINEAR, ODD_PART, characterise
from biasfree.expressivity.depth_separation import depth3_example, fit_net, init_batch
from biasfree.theory import floors as closed

pytestmark = pytest.mark.numerics  # round-off bounds: make test-portable reruns them

Z = 4.0


def _rng(i):
    return np.random.default_rng(i)


def _net(rng, widths, bias=False):
    Ws = [rng.normal(size=(o, i)) for i, o in zip(widths[:-1], widths[1:], strict=True)]
    return bf.from_arrays(Ws, [rng.normal(size=W.shape[0]) for W in Ws] if bias else None)


def x1x2x3(X):
    return X[:, 0] * X[:, 1] * X[:, 2]


def _homogeneity_tol(params, X):
    """Bound on ``homogeneity_gap`` of a bias-free net at λ = 0.5, 2, 7: f(λX) and λf(X) agree
    in exact arithmetic; each evaluation is within half the forward_gap e of exact (scaled
    by λ), rounding λX moves the inputs by ε/2 relative (through L layers: L ε |f|_abs, |f|_abs
    the net on |θ|, |X|, linear), and λF rounds once: ``||e + (L+1) ε |f|_abs|| / ||F||``.
    A bias or a non-homogeneous activation gives O(1e-3) and more."""
    Ws = [np.asarray(la.W) for la in params]
    F = np.asarray(forward(params, X, 0.0))
    fabs = np.asarray(forward(abs_twin(params), np.abs(X), 1.0))
    return np.linalg.norm(forward_gap(Ws, X) + (len(Ws) + 1) * EPS * fabs) / np.linalg.norm(F)


# ------------------------------------------------------------- decomposition


@pytest.mark.parametrize("alpha", [0.0, 0.3, 1.0])
def test_two_layer_parts_are_linear_and_abs_sums(alpha):
    rng = _rng(0)
    params = _net(rng, (4, 7, 2))
    X = rng.normal(size=(50, 4))
    dec = ex.decompose(ex.net_function(params, alpha), X)
    W, V = np.asarray(params[0].W), np.asarray(params[1].W)
    c = (1 + alpha) / 2
    F, Fm = np.asarray(forward(params, X, alpha)), np.asarray(forward(params, -X, alpha))
    # (f - f₋)/2 + (f + f₋)/2 = f: four roundings of size <= ε(|f| + |f₋|)/2 each
    np.testing.assert_array_less(np.abs(dec.odd + dec.even - dec.values), 2 * EPS * (np.abs(F) + np.abs(Fm)))
    # each part is f(x) ± f(-x), both within the forward_gap e of exact, plus ε of the part;
    # the references c X(VW)ᵀ and (1-c)|XWᵀ|Vᵀ by NumPy: 2 γ_{d+h} of |X||W|ᵀ|V|ᵀ
    e = forward_gap([W, V], X)
    ref = 2 * gamma(W.shape[0] + W.shape[1]) * np.abs(X) @ np.abs(W).T @ np.abs(V).T
    np.testing.assert_array_less(np.abs(dec.odd - c * X @ (V @ W).T), e + c * ref + EPS * np.abs(dec.odd))
    np.testing.assert_array_less(np.abs(dec.even - (1 - c) * np.abs(X @ W.T) @ V.T),
                                 e + (1 - c) * ref + EPS * np.abs(dec.even))
    fit = ex.odd_nonlinearity(ex.net_function(params, alpha), X)
    # the odd part is linear: the fit of F_odd (off by <= ||e||) by a backward-stable lstsq
    # (4γ_{Nd}(||X||₂||β|| + ||F_odd||), Higham §20); β moves by that over σ_min(X), and the
    # fraction is its square over ||F_odd||². A nonlinear odd part gives O(0.01) (depth 3 below)
    N, d = X.shape
    beta = c * (V @ W).T
    r = np.linalg.norm(e) + 4 * gamma(N * d) * (np.linalg.norm(X, 2) * np.linalg.norm(beta)
                                                + np.linalg.norm(dec.odd))
    np.testing.assert_array_less(np.abs(fit.beta - beta),
                                 r / np.linalg.svd(X, compute_uv=False)[-1] + 2 * gamma(W.shape[0] + 1) * c
                                 * (np.abs(V) @ np.abs(W)).T)
    assert fit.fraction <= r**2 / np.sum(dec.odd**2)


def test_decomposition_symmetries_and_per_point_functions():
    X = _rng(1).normal(size=(30, 3))

    def f(x):  # a plain Python function of one point
        return np.exp(x[0]) + x[1] * x[2] ** 2

    dec = ex.decompose(f, X, per_point=True)
    dec_m = ex.decompose(f, -X, per_point=True)
    np.testing.assert_array_equal(dec_m.odd, -dec.odd)
    np.testing.assert_array_equal(dec_m.even, dec.even)
    # f(±x) = e^{±x₀} ± x₁x₂²: exp and the product round <= 2ε of |f|_abs = e^{|x₀|} + |x₁x₂²| on
    # each side, the half-sum/difference once more, and the reference sinh/cosh (+ the sum) as
    # much again: 8ε |f|_abs, whatever the cancellation in sinh near 0
    fabs = np.exp(np.abs(X[:, 0])) + np.abs(X[:, 1] * X[:, 2] ** 2)
    odd_ref = np.sinh(X[:, 0]) + X[:, 1] * X[:, 2] ** 2
    np.testing.assert_array_less(np.abs(dec.odd[:, 0] - odd_ref), 8 * EPS * fabs)
    np.testing.assert_array_less(np.abs(dec.even[:, 0] - np.cosh(X[:, 0])), 8 * EPS * fabs)
    # squared: twice each point's relative error, and a mean of 30 terms on each side (2γ_30)
    rel = 2 * np.max(8 * EPS * fabs / np.cosh(X[:, 0])) + 2 * gamma(30)
    assert dec.even_energy == pytest.approx(np.mean(np.cosh(X[:, 0]) ** 2), rel=rel)


def test_evaluate_rejects_wrong_shapes():
    with pytest.raises(ValueError, match="per_point=True"):
        ex.evaluate(lambda x: x[0] * x[1], np.ones((5, 3)))


def test_homogeneity():
    rng = _rng(2)
    X = rng.normal(size=(40, 3))
    for widths in [(3, 6, 1), (3, 5, 4, 2), (3, 4, 4, 4, 1)]:
        for alpha in (0.0, 0.4):
            net = _net(rng, widths)
            f = ex.net_function(net, alpha)
            assert ex.homogeneity_gap(f, X) <= _homogeneity_tol(net, X)
            assert ex.is_positively_homogeneous(f, X)
    # λX rounds each of 3 inputs (ε/2), 2 products per side, λ³F once: <= 4ε per entry, γ_8
    assert ex.homogeneity_gap(x1x2x3, X, degree=3) <= gamma(8)
    # λ = 2 scales exactly: ||8F - 2F|| / ||2F|| = 3 up to two N-term norms and a ratio
    assert ex.homogeneity_gap(x1x2x3, X, scales=[2.0]) == pytest.approx(3.0, rel=2 * gamma(40) + 2 * EPS)
    biased = ex.net_function(_net(rng, (3, 6, 1), bias=True), 0.0)
    assert ex.homogeneity_gap(biased, X) > 1e-3


# ---------------------------------------------------------------- depth 3


def test_depth3_example_exact_values():
    g = depth3_example()
    assert bf.nets.widths(g) == (2, 4, 2, 1) and not any(layer.b is not None for layer in g)
    out = np.asarray(forward(g, np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]), 0.0))[:, 0]
    assert out.tolist() == [1.0, 0.0, 0.0]  # linear would force g(1,1) = g(1,0) + g(0,1) = 1
    X = _rng(3).normal(size=(200, 2))
    relu = lambda z: np.maximum(z, 0.0)  # noqa: E731
    formula = relu(relu(X[:, 0]) - relu(X[:, 1])) - relu(relu(-X[:, 0]) - relu(-X[:, 1]))
    np.testing.assert_array_equal(np.asarray(forward(g, X, 0.0))[:, 0], formula)
    np.testing.assert_array_equal(np.asarray(forward(g, -X, 0.0)), -np.asarray(forward(g, X, 0.0)))
    f = ex.net_function(g, 0.0)
    assert ex.homogeneity_gap(f, X) <= _homogeneity_tol(g, X)
    dec = ex.decompose(f, X)
    assert np.max(np.abs(dec.even)) == 0.0
    # the odd part is not linear: a two-layer net's fraction is round-off (bounded above);
    # measured 0.16 on this sample
    assert ex.odd_nonlinearity(f, X).fraction > 1e-6


# ------------------------------------------------------------------ floors


def _odd_fit_tol(X, F):
    """Bound on an odd floor that is 0 in exact arithmetic (odd part linear or zero): the odd
    part of F is off by <= ε|F| (one half-difference), and a backward-stable lstsq (Higham §20)
    misses an exact fit by ``4γ_{Nd}(||X||₂||β|| + ||F||)``: ½ (that + ε||F||)² / N."""
    r = EPS * np.linalg.norm(F) + lstsq_residual_gap(X, F)
    return 0.5 * r**2 / X.shape[0]


def test_linear_target_has_zero_floor_and_is_reachable():
    X = _rng(4).normal(size=(2000, 3))
    T = np.array([[1.0, -2.0, 0.5]])
    fl = floors.two_layer_floor(lambda X: X @ T.T, X)
    assert fl.odd.value <= _odd_fit_tol(X, X @ T.T) and fl.even.value == 0.0
    # linear is 1-homogeneous: 0 in exact arithmetic; what is left is the ray quadrature's own
    # error bound (quad_error, epsrel 1e-8) and the round-off of its N-ray means (4γ_N of the
    # power); a target the homogeneous fit misses gives O(1e-2) and more
    ad = fl.any_depth
    assert ad.normalised <= (ad.quad_error + 4 * gamma(X.shape[0]) * ad.power) / ad.power
    ch = characterise(lambda X: X @ T.T, X)
    # distance = √(2 floor): the odd part's exact least-squares floor (_odd_fit_tol), even part 0
    assert ch.reachable and ch.out_of_reach == () and ch.distance <= np.sqrt(2 * _odd_fit_tol(X, X @ T.T))


def test_x1x2x3_floor_is_one_and_odd_part_out_of_reach():
    n = 20_000
    X = _rng(5).normal(size=(n, 3))
    fl = floors.two_layer_floor(x1x2x3, X)
    # normalised floor = 1 - R² of a linear fit to a target orthogonal to linear maps;
    # R² ~ (d + 6)/n = 4.5e-4 (see test_trained_two_layer_net_stays_at_floor_on_x1x2x3)
    assert 0.995 <= fl.total.normalised <= 1.0
    assert abs(fl.total.value - 0.5) <= Z * fl.total.error and fl.total.se <= 0.025  # ½E y² = ½
    assert fl.even.value == 0.0  # odd target: no even part at all
    ch = characterise(x1x2x3, X)
    assert not ch.reachable and ch.out_of_reach == (ODD_PART,)
    assert "out of reach" in ch.summary()


def test_x1x2x3_any_depth_floor_is_two_sevenths():
    X = _rng(6).normal(size=(500, 3))
    h = floors.homogeneous_floor(x1x2x3, X)
    # y = r³ u1u2u3 and the ray factor is the same on every ray: 2/(d+4) exactly, up to the
    # quadrature's own bound (h.quad_error, on value) and round-off: each ray's 1 − (E r⁴)²/(E r²
    # E r⁶) = 2/7 cancels 5/7 (× 2.5 relative) of a few roundings, then means of n positive
    # terms (γ_n each): 2.5 γ_{n+10} of the value
    assert abs(h.normalised - 2 / 7) * h.power <= h.quad_error + 2.5 * gamma(X.shape[0] + 10) * h.value
    # three χ moments exp(k/2 log 2 + lgamma − lgamma), each within ~10 ulp (libm), their
    # ratio (3 more), then 1 − ratio (× 2.5): 2.5 γ_33
    assert closed.product_homogeneous_floor(3) == pytest.approx(2 / 7, rel=2.5 * gamma(33))


def test_abs_target_is_even_and_homogeneous():
    X = _rng(7).normal(size=(500, 4))
    f = bf.data.abs_target(0)
    ev = floors.homogeneous_floor(f, X, even_only=True)
    # |x₁| is even and 1-homogeneous: 0 up to the quadrature's bound and 4γ_N of the power
    assert abs(ev.value) <= ev.quad_error + 4 * gamma(X.shape[0]) * ev.power
    ch = characterise(f, X)
    # total = odd (|x₁| has none: the exact-fit bound) + even (ray quadrature: its quad_error and
    # 4γ_N of the power), relative to the power; a target out of reach gives O(0.1)
    tot = floors.two_layer_floor(f, X).total
    rel_tol = (tot.quad_error + 4 * gamma(X.shape[0]) * tot.power + _odd_fit_tol(X, f(X))) / tot.power
    assert ch.reachable and ch.relative_floor <= rel_tol
    # a linear net (alpha = 1) has no even part: |x1| is entirely out of its reach
    lin = characterise(f, X, alpha=1.0)
    assert lin.out_of_reach == (EVEN_PART_LINEAR,)
    # y odd part is 0 exactly (|x| is even to the bit), y = y_even: a ratio of two N-term means
    assert lin.relative_floor == pytest.approx(1.0, rel=2 * gamma(X.shape[0]) + 2 * EPS)


def test_sine_odd_floor_matches_closed_form():
    f, w = bf.sine_target(jax.random.PRNGKey(0), 3)
    X = _rng(8).normal(size=(20_000, 3))
    fl = floors.odd_floor(f, X)
    exact, power = closed.sine_floor_closed_form(np.asarray(w))
    assert fl.se <= 0.02 * exact
    assert abs(fl.value - exact) <= Z * fl.se
    assert abs(fl.power - power) <= Z * np.std(0.5 * np.asarray(f(X)) ** 2) / np.sqrt(len(X))
    # closed form of the brief, in loss units: ½[E sin²(4z) - (4||w|| e^{-8||w||²})²], z ~ N(0, ||w||²)
    s2 = float(np.sum(np.asarray(w) ** 2))
    # the same closed form in two codes: exp(-32 s2) carries 32 s2 ε from rounding its argument,
    # the terms a few ε more; relative to the result, scaled by the cancellation Σ|terms|/|result|
    terms = abs((1 - np.exp(-32 * s2)) / 2) + abs(16 * s2 * np.exp(-16 * s2))
    rel = gamma(int(np.ceil(32 * s2 + 16 * s2)) + 10) * terms / (2 * abs(exact))
    assert exact == pytest.approx(0.5 * ((1 - np.exp(-32 * s2)) / 2 - 16 * s2 * np.exp(-16 * s2)), rel=rel)


def test_radial_even_target_floor_matches_closed_form():
    X = _rng(9).normal(size=(300, 3))
    fl = floors.two_layer_floor(closed.radial_square_target(3), X)
    # every ray sees the same r-profile: the ray quadrature alone gives the closed form
    # (normalised, E y² = 1, so in loss units ½ of it), within the quadrature's bound and the
    # round-off of a mean of n positive terms and a few more roundings (γ_{n+10})
    exact = 0.5 * closed.radial_square_floor(3)
    for floor in (fl.even, fl.any_depth):
        assert abs(floor.value - exact) <= floor.quad_error + gamma(X.shape[0] + 10) * exact
    assert fl.odd.value <= _odd_fit_tol(X, closed.radial_square_target(3)(X))  # even target: odd part 0


def test_floor_is_invariant_under_the_gaussian_covariance_map():
    rng = _rng(10)
    Zs = rng.normal(size=(400, 3))
    L = np.array([[1.0, 0.0, 0.0], [0.5, 2.0, 0.0], [-0.3, 0.2, 0.7]])

    def f(X):
        return np.abs(X[:, 0] - X[:, 1]) * X[:, 2] ** 2 / (1 + X[:, 0] ** 2) + X[:, 0] ** 3

    a = floors.two_layer_floor(f, Zs @ L.T, cov=L @ L.T)
    b = floors.two_layer_floor(lambda Z: f(Z @ L.T), Zs)
    # the same floor by two routes: within both quadrature bounds, plus the round-off of the
    # directions (x = Lz, then L⁻¹x: κ(L) γ_3 relative) through a target of degree ≤ 3 in r
    # (its squared error moves by ≤ 2·3 times that, relative to the power)
    for fa, fb in ((a.even, b.even), (a.any_depth, b.any_depth)):
        shift = 6 * np.linalg.cond(L) * gamma(3) * max(fa.power, fb.power)
        assert abs(fa.value - fb.value) <= fa.quad_error + fb.quad_error + shift


def test_other_radial_laws():
    """r ~ U[1 - δ, 1 + δ], y = x1² x2² = r⁴ P(u): on every ray the best k r leaves
    ``1 - (E r⁵)² / (E r² E r⁸)`` of the power (≈ 3δ²), with E r^k from the uniform law."""
    delta = 1e-3
    X = _rng(11).normal(size=(300, 3))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    radial = stats.uniform(loc=1 - delta, scale=2 * delta)
    h = floors.homogeneous_floor(lambda X: X[:, 0] ** 2 * X[:, 1] ** 2, X, radial=radial, even_only=True)

    def m(k):
        return ((1 + delta) ** (k + 1) - (1 - delta) ** (k + 1)) / ((k + 1) * 2 * delta)

    exact = 1 - m(5) ** 2 / (m(2) * m(8))
    # not round-off: 3δ² is the leading term, the next is O(δ⁴), a relative O(δ²) = 1e-6 with
    # a coefficient of order 1-10; plus the round-off of `exact` below relative to 3δ² (3e-7)
    assert exact == pytest.approx(3 * delta**2, rel=1e-5)
    # each m(k) is a difference of (1 ± δ)^{k+1} ≈ 1, each power (k+1)ε off: ε/δ relative; the
    # ratio of 3 of them then 1 - ratio: 5ε/δ absolute on the normalised floor, × the power
    assert abs(h.normalised - exact) * h.power <= h.quad_error + 5 * EPS / delta * h.power


# ------------------------------------------------------------ exact set floor


def _floor_gap(X, F, L):
    """Bound on the gap between two round-off evaluations of a least-squares floor
    ``L = ½<||F - Xβ̂||²>`` (two solvers, or a solver and a net that realises β̂): each residual
    is within ``r = 4γ_{Nd}(||X||₂||β|| + ||F||)`` (backward-stable lstsq, Higham §20) of
    exact, and ``|ΔL| <= √(2L) ||Δr|| / √N`` (Cauchy–Schwarz), twice for the two sides."""
    return 2 * np.sqrt(2 * L) * lstsq_residual_gap(X, F) / np.sqrt(X.shape[0])


def test_dataset_floor_is_exact_and_tight():
    rng = _rng(12)
    X0 = rng.normal(size=(300, 3))
    X = np.asarray(bf.symmetrize(X0))
    f, _ = bf.sine_target(jax.random.PRNGKey(1), 3)
    Y = np.asarray(f(X)) + np.abs(X[:, :1])  # odd + even
    dsf = floors.dataset_floor(X, Y)
    # the same least-squares floor on the set and on its half: _floor_gap
    Fodd = np.asarray(f(X))
    odd_gap = _floor_gap(X, Fodd, dsf.odd)
    half = floors.odd_floor(lambda X: np.asarray(f(X)), X0).value
    assert dsf.odd == pytest.approx(half, rel=0, abs=odd_gap)
    # every two-layer bias-free net, any alpha, stays above the odd floor on this set
    for alpha in (0.0, 0.5):
        for seed in range(5):
            p = _net(_rng(100 + seed), (3, 8, 1))
            F = np.asarray(forward(p, X, alpha))
            loss = 0.5 * np.mean((Y - F) ** 2)
            # no net beats the floor: up to the floor's _floor_gap and the loss's N-term mean
            assert loss >= dsf.value - _floor_gap(X, Y, dsf.value) - gamma(X.shape[0]) * loss
            # orthogonality on a symmetric set: the loss splits exactly into odd + even parts
            Fo, Fe = ex.decompose(ex.net_function(p, alpha), X).odd, ex.decompose(
                ex.net_function(p, alpha), X).even
            Yo, Ye = ex.decompose(lambda Z: np.asarray(f(Z)) + np.abs(Z[:, :1]), X).odd, \
                ex.decompose(lambda Z: np.asarray(f(Z)) + np.abs(Z[:, :1]), X).even
            split = 0.5 * np.mean((Yo - Fo) ** 2) + 0.5 * np.mean((Ye - Fe) ** 2)
            # each residual part is off by <= 2ε(|Y| + |F|) (half-sums), squares by 2|r| that, and
            # three N-term means (γ_N each) of the losses
            mag = np.abs(Y) + np.abs(F)
            tol = np.mean(np.abs(Y - F) * 4 * EPS * mag) + 3 * gamma(X.shape[0]) * (loss + split)
            assert loss == pytest.approx(split, rel=0, abs=tol)
    # tight: the pair net v σ(βᵀx) - v σ(-βᵀx) = βᵀx reaches the odd floor exactly
    beta = np.linalg.lstsq(X, 0.5 * (Y - np.asarray(f(-X)) - np.abs(X[:, :1])), rcond=None)[0]
    pair = bf.from_arrays([np.vstack([beta.T, -beta.T]), [[1.0, -1.0]]])
    odd_only = Y - np.abs(X[:, :1])
    # the pair net realises β̂ (its evaluation within forward_gap e) on odd_only (ε(|Y| + |x₁|)):
    # _floor_gap plus √(2L)·rms(e + ε(|Y| + |x₁|))
    e = forward_gap([np.vstack([beta.T, -beta.T]), np.array([[1.0, -1.0]])], X)
    extra = np.sqrt(2 * dsf.odd) * np.sqrt(np.mean((e + EPS * (np.abs(Y) + np.abs(X[:, :1]))) ** 2))
    assert 0.5 * np.mean((odd_only - np.asarray(forward(pair, X, 0.0))) ** 2) == pytest.approx(
        dsf.odd, rel=0, abs=odd_gap + extra)
    # α = 1: the linear floor is odd floor + even energy; two floors, one sum: _floor_gap + ε
    lin = floors.dataset_floor(X, Y, alpha=1.0).value
    assert lin == pytest.approx(dsf.odd + dsf.even, rel=2 * EPS, abs=_floor_gap(X, Y, lin) + odd_gap)
    with pytest.raises(ValueError, match="not symmetric"):
        floors.dataset_floor(X0, Y[:300])


def test_trained_two_layer_net_stays_at_floor_on_x1x2x3():
    """Zero-learning corollary (§1.4) on a finite set.

    Exact: the training loss never goes below the set's odd floor. Statistical: that
    floor is 1 - R² of the least-squares fit of y = x1x2x3 by a linear map on n
    draws; y is orthogonal to linear maps, so sqrt(n) β̂ -> N(0, E[x xᵀ y²]) =
    N(0, 3 I₃) and R² ≈ ||β̂||² ≈ 3 χ²₃ / n. ε = 3 χ²₃.isf(1e-6) / n bounds R² except
    with probability ~1e-6 (asymptotically): 0.092 for n = 1000.
    """
    n = 1000
    X = bf.symmetrize(bf.data.gaussian_inputs(jax.random.PRNGKey(2), n, 3))
    data = bf.Dataset(X, bf.data.product_target()(X))
    fit = fit_net(data, jax.random.PRNGKey(3), (3, 20, 1), bf.GDConfig(lr=0.05, steps=600, n_records=30))
    eps = 3 * stats.chi2(3).isf(1e-6) / n
    power = fit.floor.power
    curve = np.asarray(fit.trajectory.loss) / power  # same unit as the floor: no factor
    # the floor (a least-squares residual) and each loss (an N-term mean) to round-off
    floor_tol = (_floor_gap(np.asarray(X), np.asarray(data.Y), fit.floor.value) / power
                 + gamma(2 * n) * np.max(curve))
    assert np.min(curve) >= fit.floor.normalised - floor_tol
    assert fit.floor.normalised >= 1 - eps
    assert fit.train_loss / power >= 1 - eps
    assert fit.margin <= floor_tol * power


def test_depth3_net_beats_the_two_layer_floor_on_an_odd_target():
    n = 150
    X = bf.symmetrize(bf.data.gaussian_inputs(jax.random.PRNGKey(4), n, 3))
    data = bf.Dataset(X, bf.data.product_target()(X))
    fit = fit_net(data, jax.random.PRNGKey(5), (3, 16, 16, 1), bf.GDConfig(lr=0.05, steps=800, n_records=10),
                  gain=1.0, restarts=2)
    # exact comparison on the training set, no tolerance needed: no two-layer bias-free
    # net gets below fit.floor.value (measured: train loss = 0.31 x floor, restarts 0.35, 0.31)
    assert fit.train_loss < fit.floor.value
    assert fit.restart_loss.shape == (2,) and fit.train_loss == np.min(fit.restart_loss)
    odd = ex.odd_nonlinearity(ex.net_function(fit.params, 0.0), np.asarray(X))
    # a two-layer net's fraction is round-off (bounded above); measured 0.79 here
    assert odd.fraction > 1e-6


def test_pair_init_is_odd_and_linear_at_init():
    p = jax.tree_util.tree_map(lambda a: a[0], init_batch(jax.random.PRNGKey(6), (3, 8, 6, 1), init="pairs"))
    X = _rng(13).normal(size=(40, 3))
    f = ex.net_function(p, 0.0)
    dec = ex.decompose(f, X)
    # f is odd and linear in exact arithmetic: f(x) and -f(-x) are within the forward_gap e of
    # each other, so |f_even| <= e/2; the odd part's linear fit misses by <= ||e|| plus the
    # backward-stable lstsq's 4γ_{Nd}(||X||₂||β|| + ||F_odd||), squared over ||F_odd||²
    e = forward_gap([np.asarray(la.W) for la in p], X)
    np.testing.assert_array_less(np.abs(dec.even), 0.5 * e + 1e-300)
    beta = np.linalg.lstsq(X, dec.odd, rcond=None)[0]
    r = np.linalg.norm(e) + 4 * gamma(X.size) * (np.linalg.norm(X, 2) * np.linalg.norm(beta)
                                                 + np.linalg.norm(dec.odd))
    assert ex.odd_nonlinearity(f, X).fraction <= r**2 / np.sum(dec.odd**2)
    with pytest.raises(ValueError, match="even hidden widths"):
        init_batch(jax.random.PRNGKey(6), (3, 7, 1), init="pairs")
