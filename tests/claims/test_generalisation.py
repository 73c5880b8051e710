"""The population loss of a two-layer net for Gaussian inputs (generalisation experiment):
arc-cosine kernel against one-dimensional quadrature, the linear limit, and Monte Carlo."""

import numpy as np
import pytest
from roundoff import gamma
from scipy.integrate import quad
from scipy.stats import norm

from biasfree.core.inits import pair_up
from biasfree.core.layers import Layer
from biasfree.theory import population_loss_two_layer as population_loss

pytestmark = pytest.mark.numerics  # round-off bounds: make test-portable reruns them


def _abs_product_moment(rho: float) -> tuple[float, float]:
    """E|u||v| for unit-variance normals with correlation ρ, by quadrature over u of the
    closed form E|a + bZ| = b√(2/π) e^{-a²/2b²} + a(1 - 2Φ(-a/b)), v = ρu + √(1-ρ²)Z.
    The integrand is even in u, so 2∫_0^∞: smooth there (the kink of |u| at 0 is an end
    point), where QUADPACK's error estimate holds. Returns (moment, that estimate)."""
    b = np.sqrt(1 - rho**2)

    def inner(u):
        a = rho * u
        return abs(u) * (b * np.sqrt(2 / np.pi) * np.exp(-a**2 / (2 * b**2))
                         + a * (1 - 2 * norm.cdf(-a / b)))

    value, err = quad(lambda u: inner(u) * norm.pdf(u), 0, np.inf, epsabs=1e-13, epsrel=1e-12)
    return 2 * value, 2 * err


def _net(rng, d, m, scale=0.7):
    return (Layer(scale * rng.normal(size=(m, d))), Layer(scale * rng.normal(size=(1, m))))


def test_population_loss_matches_quadrature():
    """R = ½(||β - T||² + σ²) + ½(1-c)² Σ v_k v_l ||w_k|| ||w_l|| E|u||v|, every pair's
    moment by quadrature: agreement within the quadrature's error estimate and round-off."""
    rng = np.random.default_rng(0)
    d, m, alpha, noise = 4, 3, 0.3, 0.4
    net = _net(rng, d, m)
    T = rng.normal(size=(1, d))
    W, v = net[0].W, net[1].W[0]
    c = (1 + alpha) / 2
    nw = np.linalg.norm(W, axis=1)
    pairs = [(k, j) for k in range(m) for j in range(m) if k != j]
    moments = {kj: _abs_product_moment(W[kj[0]] @ W[kj[1]] / (nw[kj[0]] * nw[kj[1]])) for kj in pairs}
    weight = {(k, j): abs(v[k] * v[j]) * nw[k] * nw[j] for k, j in pairs}
    even2 = sum(v[k] * v[j] * nw[k] * nw[j] * moments[k, j][0] for k, j in pairs) + np.sum(v**2 * nw**2)
    beta = c * W.T @ v
    expected = 0.5 * (np.sum((beta - T[0]) ** 2) + noise**2) + 0.5 * (1 - c) ** 2 * even2
    R, half_even2 = population_loss(net, T, noise, alpha)
    # quadrature: each moment within QUADPACK's estimate e_kj (smooth integrand, above), weighted
    # by |v_k v_j| ||w_k|| ||w_l||; round-off: both sides sum m² terms of a few products and a
    # libm arcsin/sqrt/exp each (≤ 2 ulp), so γ_{2m²+10} of the sum of |terms|. A wrong kernel
    # (2/π in place of the arc-cosine form) is off by ~1e-3, far above both.
    quad_err = 0.5 * (1 - c) ** 2 * sum(weight[kj] * moments[kj][1] for kj in pairs)
    even_size = sum(weight[kj] * moments[kj][0] for kj in pairs) + np.sum(v**2 * nw**2)
    size = 0.5 * (np.sum((np.abs(beta) + np.abs(T[0])) ** 2) + noise**2) + 0.5 * (1 - c) ** 2 * even_size
    roundoff = gamma(2 * m * m + 10) * size
    assert abs(R - expected) <= quad_err + roundoff
    assert abs(half_even2 - 0.5 * (1 - c) ** 2 * even2) <= quad_err + roundoff


def test_pair_net_population_loss_is_linear():
    """A pair net has f_even ≡ 0: R = ½(||β - T||² + σ²) to round-off."""
    rng = np.random.default_rng(1)
    net = pair_up(_net(rng, 5, 4))
    T = rng.normal(size=(1, 5))
    R, half_even2 = population_loss(net, T, 0.3, 0.0)
    beta = 0.5 * net[0].W.T @ net[1].W[0]
    # the (2m)² kernel terms cancel in ± pairs (E|u||v| is even in ρ): what is left is their
    # round-off, γ_k of Σ|v_k v_l| ||w_k|| ||w_l|| = (Σ|v| ||w||)², k = (2m)² terms + ~10 roundings
    # of each kernel value (arcsin, √); a non-cancelling kernel leaves O(1)
    W, v = np.asarray(net[0].W), np.asarray(net[1].W[0])
    m2 = W.shape[0] ** 2
    even_tol = 0.5 * 0.25 * 2 * gamma(m2 + 10) * np.sum(np.abs(v) * np.linalg.norm(W, axis=1)) ** 2
    assert half_even2 <= even_tol
    # ½||β - T||²: β = ½Wᵀv by two codes (2 γ_{m+1}), a d-term sum of squares (γ_{d+1})
    mag = np.sum((0.5 * np.abs(W).T @ np.abs(v) + np.abs(T[0])) ** 2) + 0.09
    lin_tol = 2 * gamma(W.shape[0] + W.shape[1] + 4) * mag
    assert abs(R - 0.5 * (np.sum((beta - T[0]) ** 2) + 0.09)) <= even_tol + lin_tol


def test_population_loss_against_monte_carlo():
    """A ReLU net on 4·10⁵ Gaussian draws: the sample mean of ½(y - f)² lies within 5
    standard errors of R."""
    rng = np.random.default_rng(2)
    d, noise = 3, 0.5
    net = _net(rng, d, 6)
    T = rng.normal(size=(1, d))
    X = rng.normal(size=(400_000, d))
    y = X @ T[0] + noise * rng.normal(size=X.shape[0])
    f = np.maximum(X @ net[0].W.T, 0.0) @ net[1].W[0]
    ell = 0.5 * (y - f) ** 2
    R, _ = population_loss(net, T, noise, 0.0)
    assert abs(ell.mean() - R) <= 5 * ell.std() / np.sqrt(ell.size)
