"""Local linear analysis (docs/theory.md §8): homogeneity and Euler's identity f(x) = J(x)x
at round-off for bias-free nets of depth 2–4 and several α, the bias term of biased nets,
the Jacobian against its closed form, the effective dimensions of exactly known spectra, a
layer type the module has never seen, and bad input.

Every tolerance is a round-off bound from ``tests/roundoff.py`` (γ_k |A||B| products), or
:func:`local_linear`'s own derived bound, whose derivation is its module docstring.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from roundoff import EPS, gamma

import biasfree as bf
from biasfree import expressivity as ex
from biasfree.core.layers import AbstractLayer
from biasfree.core.nets import hidden

pytestmark = pytest.mark.numerics  # round-off bounds: make test-portable reruns them

ALPHAS = (0.0, 0.2, 0.7, 1.0)


def _net(rng, widths, bias=False):
    Ws = [rng.normal(size=(o, i)) for i, o in zip(widths[:-1], widths[1:], strict=True)]
    return bf.from_arrays(Ws, [rng.normal(size=W.shape[0]) for W in Ws] if bias else None)


def _closed_jacobian(net, x, alpha):
    """J(x) = W_L D_{L-1} W_{L-1} … D_1 W_1, D_l = diag(σ_α'(z_l)) with σ_α'(z) = 1 (z > 0), α else."""
    J = np.asarray(net[0].W)
    for layer, h in zip(net[1:], hidden(net, x[None, :], alpha), strict=True):
        z = np.asarray(h)[0]  # σ_α(z) > 0 exactly when z > 0
        J = np.asarray(layer.W) @ (np.where(z > 0, 1.0, alpha)[:, None] * J)
    return J


@pytest.mark.parametrize("widths", [(5, 9, 3), (5, 9, 7, 3), (6, 8, 7, 6, 4)])
@pytest.mark.parametrize("alpha", ALPHAS)
def test_bias_free_nets_are_homogeneous_and_satisfy_euler_to_round_off(widths, alpha):
    rng = np.random.default_rng(len(widths) * 10 + int(10 * alpha))
    net, X = _net(rng, widths), rng.normal(size=(25, widths[0]))
    r = ex.local_linear(net, X, alpha)
    # the bounds are local_linear's derived worst cases γ_{K+3}(G(λx) + λG(x)) and γ_{3K+d+2}G(x)
    assert r.homogeneous and r.homogeneity_ratio <= 1.0, r.summary()
    assert r.euler_holds and r.euler_ratio <= 1.0, r.summary()
    assert r.homogeneity_gap <= r.homogeneity_bound and r.euler_residual <= r.euler_bound
    assert r.bias_fraction <= r.euler_bound**2 * widths[-1]  # energy of a residual at most the bound
    assert r.jacobians.shape == (25, widths[-1], widths[0]) and r.n_inputs == 25 and not r.has_bias
    # J against its closed form: two computations of the same products of |W|s, 2γ_K |W_L|…|W_1| entrywise
    K = sum(widths)
    for n in (0, 7, 24):
        absprod = np.abs(np.asarray(net[0].W))
        for layer in net[1:]:
            absprod = np.abs(np.asarray(layer.W)) @ absprod
        assert np.all(np.abs(r.jacobians[n] - _closed_jacobian(net, X[n], alpha)) <= 2 * gamma(K) * absprod)


def test_odd_and_even_fractions_split_the_energy_on_mirrored_inputs():
    rng = np.random.default_rng(3)
    net, Xp = _net(rng, (4, 16, 2)), rng.normal(size=(20, 4))
    r = ex.local_linear(net, np.vstack([Xp, -Xp]), 0.0)
    # on X = [X₊; −X₊] the cross term <f_odd·f_even> vanishes exactly up to the sums' round-off
    assert abs(r.odd_fraction + r.even_fraction - 1.0) <= gamma(200)
    assert 0.05 < r.even_fraction < 0.95  # a random ReLU net: both parts are present
    lin = ex.local_linear(net, np.vstack([Xp, -Xp]), 1.0)
    assert lin.even_fraction <= gamma(200) ** 2 and abs(lin.odd_fraction - 1.0) <= gamma(200)


@pytest.mark.parametrize("alpha", (0.0, 0.5))
def test_biased_net_has_a_bias_term_far_above_round_off_and_fails_homogeneity(alpha):
    rng = np.random.default_rng(11)
    net, X = _net(rng, (4, 12, 3), bias=True), rng.normal(size=(30, 4))
    r = ex.local_linear(net, X, alpha)
    assert r.has_bias and not r.homogeneous and not r.euler_holds
    assert r.homogeneity_ratio > 1e6 and r.euler_ratio > 1e6, r.summary()  # O(1) biases, not round-off
    assert r.bias_fraction > 1e-3
    # the bias term in closed form, two layers: b(x) = W_2 D(x) b_1 + b_2 (D = σ_α' at z = W_1x + b_1)
    W1, b1, W2, b2 = (np.asarray(a) for a in (net[0].W, net[0].b, net[1].W, net[1].b))
    Z = X @ W1.T + b1
    closed = (np.where(Z > 0, 1.0, alpha) * b1) @ W2.T + b2
    G = (np.abs(X) @ np.abs(W1).T + np.abs(b1)) @ np.abs(W2).T + np.abs(b2)
    K = sum(layer.n_in + layer.n_out + 2 for layer in net)
    # the measured bias term errs by local_linear's Euler bound γ_{3K+d+2}G, the closed form by γ_K G
    assert np.all(np.abs(r.bias_term - closed) <= (gamma(3 * K + 4 + 2) + gamma(K)) * G)


def _orthonormal(rng, d, r):
    return np.linalg.qr(rng.normal(size=(d, r)))[0]


@pytest.mark.parametrize("rank", (1, 3, 5))
def test_a_rank_r_projection_net_has_effective_dimension_r_under_every_measure(rank):
    """W₁ = [Qᵀ; −Qᵀ], W₂ = [Q, −Q]: at α = 0, f(x) = Q relu(Qᵀx) − Q relu(−Qᵀx) = QQᵀx, so
    J(x) = QQᵀ exactly, r singular values 1 and the rest 0, wherever it is evaluated."""
    rng = np.random.default_rng(rank)
    d = 7
    Q = _orthonormal(rng, d, rank)
    net = bf.from_arrays([np.vstack([Q.T, -Q.T]), np.hstack([Q, -Q])])
    r = ex.local_linear(net, rng.normal(size=(12, d)), 0.0)
    # Weyl: |σ̂_i − σ_i| ≤ δ = ‖Ĵ − QQᵀ‖_F ≤ ‖γ_K |Q||Q|ᵀ‖_F (J's round-off, here K = d + 2r);
    # Σσ̂² and Σσ̂⁴ then err by ≤ 3dδ and ≤ 15dδ, so PR = (Σσ²)²/Σσ⁴ by ≤ 25dδ for δ ≤ 1/d
    delta = gamma(d + 2 * rank) * np.linalg.norm(np.abs(Q) @ np.abs(Q).T)
    assert np.all(np.abs(r.participation_ratio - rank) <= 25 * d * delta)
    assert np.all(np.abs(r.frobenius_dimension - rank) <= 3 * d * delta)
    # entropy rank: the d − r zero values, computed as ≤ δ, add ≤ d·δ·(1 + |ln δ|) to the entropy
    assert np.all(np.abs(r.effective_rank - rank) <= 3 * rank * d * delta * (1 + abs(np.log(delta))))
    assert np.all(r.singular_values[:, rank:] <= delta)


def test_unequal_singular_values_give_the_participation_ratio_in_closed_form():
    """A linear net J = U diag(s) Vᵀ: PR = (Σs²)²/Σs⁴ (< the rank 3), Σσ² = Σs²."""
    rng = np.random.default_rng(5)
    s = np.array([3.0, 1.0, 0.5])
    U, V = _orthonormal(rng, 4, 3), _orthonormal(rng, 6, 3)
    net = bf.from_arrays([s[:, None] * V.T, U])
    r = ex.local_linear(net, rng.normal(size=(5, 6)), 1.0)
    pr = np.sum(s**2) ** 2 / np.sum(s**4)
    # σ̂ within δ = ‖γ_K |U||diag s||V|ᵀ‖_F of s (Weyl); PR's relative error ≤ 8δ/s_min for δ ≪ s_min
    delta = gamma(6 + 3 + 4) * np.linalg.norm(np.abs(U) @ (s[:, None] * np.abs(V).T))
    assert np.all(np.abs(r.participation_ratio - pr) <= 8 * pr * delta / s.min()) and pr < 3
    assert np.all(np.abs(r.frobenius_dimension - np.sum(s**2)) <= 4 * np.sum(s) * delta)
    assert np.allclose(ex.participation_ratio(np.array([[2.0, 2.0, 0.0], [0.0, 0.0, 0.0]])), [2.0, 0.0],
                       rtol=4 * EPS, atol=0)  # exact up to the few roundings of (8+8)²/(16+16)


@jax.tree_util.register_pytree_node_class
class _Circulant(AbstractLayer):
    """A bias-free 1-D circular convolution with kernel k, written only through the protocol
    (a pytree subclassing AbstractLayer, docs/theory.md §0): a layer type local_linear has
    never seen, as a conv layer is."""

    def tree_flatten(self):
        return (self.k,), self.n

    @classmethod
    def tree_unflatten(cls, n, leaves):
        return cls(leaves[0], n)

    def __init__(self, k, n):
        self.k, self.n = jnp.asarray(k), n

    @property
    def matrix(self):
        # (A h)_i = Σ_j k_j h_{i−j}: A[i, m] = k_{(i−m) mod n}, so column m is the kernel rolled by m
        return jnp.stack([jnp.roll(jnp.pad(self.k, (0, self.n - self.k.size)), m) for m in range(self.n)]).T

    bias = None

    def apply(self, H):
        return sum(self.k[j] * jnp.roll(H, j, axis=1) for j in range(self.k.size))

    linear = apply  # bias-free: the protocol's linear part is the whole map

    def scaled(self, factor):
        return _Circulant(factor * self.k, self.n)


def test_a_new_layer_type_goes_through_the_protocol_unchanged():
    rng = np.random.default_rng(8)
    n = 6
    conv = _Circulant(rng.normal(size=3), n)
    H = rng.normal(size=(4, n))
    # the dense matrix is the convolution: two sums of the same 3 taps, 2γ_3 |H||A|ᵀ apart
    A = conv.matrix
    assert np.all(np.abs(conv.apply(H) - H @ A.T) <= 2 * gamma(3) * np.abs(H) @ np.abs(A).T)
    net = (conv, bf.nets.Layer(rng.normal(size=(2, n))))
    r = ex.local_linear(net, rng.normal(size=(10, n)), 0.1)
    assert r.homogeneous and r.euler_holds, r.summary()  # the derived bounds, as for dense layers


def test_bad_input_is_refused_with_the_fix():
    rng = np.random.default_rng(0)
    net, X = _net(rng, (3, 4, 2)), rng.normal(size=(5, 3))
    with pytest.raises(ValueError, match="λ > 0"):
        ex.local_linear(net, X, 0.0, lambdas=(1.0, -2.0))
    with pytest.raises(ValueError, match="non-empty"):
        ex.local_linear(net, X, 0.0, lambdas=())
    with pytest.raises(ValueError, match="columns"):
        ex.local_linear(net, X[:, :2], 0.0)
    with pytest.raises(ValueError, match="pass at most 4 inputs"):
        ex.local_linear(net, X, 0.0, max_entries=24)
    with pytest.raises(ValueError, match="empty"):
        ex.local_linear(net, X[:0], 0.0)
    with pytest.raises(ValueError, match="alpha"):
        ex.local_linear(net, X, 1.5)
    with pytest.raises(TypeError, match="tuple of biasfree Layer"):
        ex.local_linear([np.eye(3)], X, 0.0)
    with pytest.raises(ValueError, match=">= 0"):
        ex.participation_ratio([1.0, -1.0])


def test_float32_bounds_scale_with_its_epsilon():
    rng = np.random.default_rng(9)
    net, X = _net(rng, (5, 8, 7, 3)), rng.normal(size=(20, 5))
    r32, r64 = ex.local_linear(net, X, 0.1, precision="float32"), ex.local_linear(net, X, 0.1)
    assert r32.jacobians.dtype == np.float32 and r32.homogeneous and r32.euler_holds, r32.summary()
    # the same γ_k with ε = 2^-23 instead of 2^-52: the bounds grow by 2^29, up to the γ's
    # 1/(1 − kε₃₂) ≈ 1 + kε₃₂ and the magnitudes |J||x| evaluated in float32 (<= kε₃₂ relative):
    # 1e-3 holds for chains up to k ~ 4000 terms, far above this net's (fan-ins <= 8, 20 points);
    # a bound that ignored the precision would be 2^29 off
    ratio = r32.euler_bound / r64.euler_bound
    assert 2.0**29 * (1 - 1e-3) <= ratio <= 2.0**29 * (1 + 1e-3)
