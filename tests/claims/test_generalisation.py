"""The population loss of a two-layer net for Gaussian inputs (generalisation experiment):
arc-cosine kernel against one-dimensional quadrature, the linear limit, and Monte Carlo."""

import numpy as np
import pytest
from scipy.integrate import quad
from scipy.stats import norm

from biasfree.core.inits import pair_up
from biasfree.core.layers import Layer
from biasfree.theory import population_loss_two_layer as population_loss

pytestmark = pytest.mark.numerics  # round-off bounds: make test-portable reruns them


def _abs_product_moment(rho: float) -> float:
    """E|u||v| for unit-variance normals with correlation ρ, by quadrature over u of the
    closed form E|a + bZ| = b√(2/π) e^{-a²/2b²} + a(1 - 2Φ(-a/b)), v = ρu + √(1-ρ²)Z."""
    b = np.sqrt(1 - rho**2)

    def inner(u):
        a = rho * u
        return abs(u) * (b * np.sqrt(2 / np.pi) * np.exp(-a**2 / (2 * b**2))
                         + a * (1 - 2 * norm.cdf(-a / b)))

    return quad(lambda u: inner(u) * norm.pdf(u), -np.inf, np.inf, epsabs=1e-13, epsrel=1e-12)[0]


def _net(rng, d, m, scale=0.7):
    return (Layer(scale * rng.normal(size=(m, d))), Layer(scale * rng.normal(size=(1, m))))


def test_population_loss_matches_quadrature():
    """R = ½(||β - T||² + σ²) + ½(1-c)² Σ v_k v_l ||w_k|| ||w_l|| E|u||v|, every pair's
    moment by quadrature: agreement to 1e-9 relative."""
    rng = np.random.default_rng(0)
    d, m, alpha, noise = 4, 3, 0.3, 0.4
    net = _net(rng, d, m)
    T = rng.normal(size=(1, d))
    W, v = net[0].W, net[1].W[0]
    c = (1 + alpha) / 2
    nw = np.linalg.norm(W, axis=1)
    even2 = sum(v[k] * v[j] * nw[k] * nw[j] * _abs_product_moment(W[k] @ W[j] / (nw[k] * nw[j]))
                for k in range(m) for j in range(m) if k != j) + np.sum(v**2 * nw**2)
    beta = c * W.T @ v
    expected = 0.5 * (np.sum((beta - T[0]) ** 2) + noise**2) + 0.5 * (1 - c) ** 2 * even2
    R, half_even2 = population_loss(net, T, noise, alpha)
    assert abs(R - expected) <= 1e-9 * expected
    assert abs(half_even2 - 0.5 * (1 - c) ** 2 * even2) <= 1e-9 * half_even2


def test_pair_net_population_loss_is_linear():
    """A pair net has f_even ≡ 0: R = ½(||β - T||² + σ²) to round-off."""
    rng = np.random.default_rng(1)
    net = pair_up(_net(rng, 5, 4))
    T = rng.normal(size=(1, 5))
    R, half_even2 = population_loss(net, T, 0.3, 0.0)
    beta = 0.5 * net[0].W.T @ net[1].W[0]
    assert half_even2 <= 1e-28
    assert abs(R - 0.5 * (np.sum((beta - T[0]) ** 2) + 0.09)) <= 1e-14


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
