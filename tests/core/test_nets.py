"""Expressivity identities of the network family (docs/theory.md §1.1, §1.2, §2.3).

Every identity here is exact in real arithmetic, so the tolerances are round-off
bounds in float64 (unit round-off 1.1e-16 times the size of the numbers involved).
Random weights and inputs come from a seeded NumPy generator (``rng``): eager
``jax.random`` compiles once per new shape, which would dominate the test time; the
initialisers themselves are tested with JAX keys.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import biasfree as bf
from biasfree.core import inits, nets
from biasfree.core.layers import Layer

pytestmark = pytest.mark.numerics  # round-off bounds: make test-portable reruns them


def _key(i):
    return jax.random.PRNGKey(i)


def _rng(i):
    return np.random.default_rng(i)


def _net(rng, widths, bias=False):
    """Gaussian N(0, 1) weights (and biases) for ``widths`` = (d, n_1, ..., p)."""
    Ws = [rng.normal(size=(n_out, n_in)) for n_in, n_out in zip(widths[:-1], widths[1:], strict=True)]
    bs = [rng.normal(size=W.shape[0]) for W in Ws] if bias else None
    return bf.from_arrays(Ws, bs)


def _relu_numpy(z):
    return np.maximum(z, 0.0)


# ------------------------------------------------------------------ §1.1 activation


@pytest.mark.parametrize("alpha", [0.0, 0.1, 0.5, 1.0])
def test_leaky_relu_is_c_z_plus_one_minus_c_abs_z(alpha):
    """σ_α(z) = c z + (1 - c)|z| with c = (1 + α)/2 (§1.1)."""
    z = _rng(0).normal(size=1000) * 3.0
    c = bf.slope_factor(alpha)
    lhs = bf.leaky_relu(z, alpha)
    rhs = c * z + (1 - c) * jnp.abs(z)
    # both sides are a few flops on |z| <= ~12: round-off 1e-14 absolute at most
    np.testing.assert_allclose(lhs, rhs, rtol=0, atol=1e-14)
    assert bf.slope_factor(0.0) == 0.5 and bf.slope_factor(1.0) == 1.0


@pytest.mark.parametrize("alpha", [0.0, 0.3, 1.0])
def test_leaky_relu_derivative_at_zero_is_alpha(alpha):
    """σ_α'(0) = α, PyTorch's convention; 1 for z > 0 and α for z < 0 (§0)."""
    grad = jax.vmap(jax.grad(lambda z: bf.leaky_relu(z, alpha)))
    z = jnp.array([-2.0, -1e-300, 0.0, -0.0, 1e-300, 3.0])
    np.testing.assert_array_equal(grad(z), [alpha, alpha, alpha, alpha, 1.0, 1.0])
    # a whole net: at W x = 0 exactly, the first layer's gradient uses slope α
    params = bf.from_arrays([np.zeros((2, 3)), np.ones((1, 2))])
    X = np.array([[1.0, -2.0, 0.5]])
    g = jax.grad(lambda p: jnp.sum(bf.forward(p, X, alpha)))(params)
    np.testing.assert_array_equal(g[0].W, alpha * np.tile(X, (2, 1)))


def test_leaky_relu_derivative_matches_torch():
    """The same gradients as torch.nn.LeakyReLU / ReLU, zeros included."""
    torch = pytest.importorskip("torch")
    z = np.array([-1.5, 0.0, 0.0, 2.0])
    for alpha in (0.0, 0.2, 1.0):
        act = torch.nn.ReLU() if alpha == 0.0 else torch.nn.LeakyReLU(alpha)
        zt = torch.tensor(z, dtype=torch.float64, requires_grad=True)
        act(zt).sum().backward()
        ours = jax.vmap(jax.grad(lambda x, a=alpha: bf.leaky_relu(x, a)))(jnp.asarray(z))
        np.testing.assert_array_equal(np.asarray(ours), zt.grad.numpy())


# ------------------------------------------------------------------ §1.2 two layers


@pytest.mark.parametrize("alpha", [0.0, 0.3, 1.0])
def test_two_layer_odd_part_is_linear_and_even_part_is_abs_sum(alpha):
    """f_odd(x) = c (Wᵀv)ᵀx and f_even(x) = (1-c) Σ_k v_k |w_kᵀx| (§1.2)."""
    rng = _rng(1)
    params = _net(rng, (4, 7, 1))
    W, v = params[0].W, params[1].W[0]
    X = rng.normal(size=(50, 4))
    c = bf.slope_factor(alpha)
    odd = bf.odd_part(params, X, alpha)[:, 0]
    even = bf.even_part(params, X, alpha)[:, 0]
    np.testing.assert_allclose(odd, c * X @ (W.T @ v), rtol=0, atol=1e-12)
    np.testing.assert_allclose(even, (1 - c) * jnp.abs(X @ W.T) @ v, rtol=0, atol=1e-12)
    # the decomposition reconstructs f exactly (up to one rounding)
    np.testing.assert_allclose(odd + even, bf.forward(params, X, alpha)[:, 0], rtol=0, atol=1e-12)
    # and beta_eff is the same linear map
    np.testing.assert_allclose(bf.beta_eff(params, alpha)[:, 0], c * W.T @ v, rtol=0, atol=1e-14)


@jax.jit
def _decomposition(params, X, alpha):
    return (bf.forward(params, X, alpha), bf.odd_part(params, X, alpha),
            bf.even_part(params, X, alpha), bf.odd_part(params, -X, alpha),
            bf.even_part(params, -X, alpha), X @ bf.beta_eff(params, alpha))


@settings(max_examples=20, deadline=None)
@given(
    alpha=st.floats(0.0, 1.0),
    shape=st.sampled_from([(1, 1, 1), (3, 5, 1), (4, 2, 3)]),  # few shapes: one compile each
    seed=st.integers(0, 2**32 - 1),
)
def test_two_layer_decomposition_property(alpha, shape, seed):
    """Property over random α, shapes and weights: f = f_odd + f_even, f_odd is odd and
    equals x ↦ β_effᵀx with β_eff = c W_1ᵀW_2ᵀ, f_even is even (§1.2)."""
    rng = _rng(seed)
    params = _net(rng, shape)
    X = rng.normal(size=(9, shape[0]))
    f, odd, even, odd_neg, even_neg, lin = _decomposition(params, X, alpha)
    tol = 1e-12  # inputs and weights are O(1), sums of <= 5 terms: round-off ~1e-14
    np.testing.assert_allclose(odd + even, f, rtol=0, atol=tol)
    np.testing.assert_allclose(odd_neg, -odd, rtol=0, atol=tol)
    np.testing.assert_allclose(even_neg, even, rtol=0, atol=tol)
    np.testing.assert_allclose(odd, lin, rtol=0, atol=tol)


# ------------------------------------------------------------------ any depth


@pytest.mark.parametrize("alpha", [0.0, 0.4])
def test_positive_homogeneity_depth_three(alpha):
    """f(λx) = λ f(x) for λ > 0 at depth 3, bias-free (§1.2)."""
    rng = _rng(2)
    params = _net(rng, (3, 6, 5, 2))
    X = rng.normal(size=(40, 3))
    f = bf.forward(params, X, alpha)
    for lam in (1e-3, 0.7, 5.0, 1e3):
        # relative round-off: |f| ~ O(1) * lam, a few dozen flops -> 1e-13 relative
        np.testing.assert_allclose(bf.forward(params, lam * X, alpha), lam * f, rtol=1e-13,
                                   atol=1e-13 * lam)


def test_homogeneity_fails_with_biases():
    """The same check detects a violation: with biases f(λx) ≠ λf(x)."""
    rng = _rng(3)
    params = _net(rng, (3, 6, 5, 2), bias=True)
    X = rng.normal(size=(40, 3))
    gap = jnp.max(jnp.abs(bf.forward(params, 2 * X, 0.0) - 2 * bf.forward(params, X, 0.0)))
    assert gap > 1e-2


def test_alpha_one_is_the_product_linear_map():
    """α = 1 is the identity activation: f(x) = W_L ... W_1 x at any depth."""
    rng = _rng(4)
    params = _net(rng, (3, 6, 5, 4, 2))
    X = rng.normal(size=(30, 3))
    P = bf.end_to_end_linear(params)
    assert P.shape == (2, 3)
    # products of O(1) matrices of size <= 6: entries O(10), round-off ~1e-14
    np.testing.assert_allclose(bf.forward(params, X, 1.0), X @ P.T, rtol=0, atol=1e-12)
    np.testing.assert_allclose(bf.even_part(params, X, 1.0), 0.0, rtol=0, atol=1e-12)


def test_alpha_zero_is_relu():
    """α = 0 is ReLU: compare with an independent NumPy forward pass, biases included."""
    rng = _rng(5)
    params = _net(rng, (3, 6, 5, 2), bias=True)
    X = rng.normal(size=(30, 3))
    H = X
    for layer in params[:-1]:
        H = _relu_numpy(H @ np.asarray(layer.W).T + np.asarray(layer.b))
    ref = H @ np.asarray(params[-1].W).T + np.asarray(params[-1].b)
    np.testing.assert_allclose(bf.forward(params, X, 0.0), ref, rtol=0, atol=1e-12)
    hs = bf.hidden(params, X, 0.0)
    assert [h.shape for h in hs] == [(30, 6), (30, 5)]
    assert float(jnp.min(hs[0])) >= 0.0


def test_init_gaussian_shapes_scales_and_errors():
    """Shapes follow widths; the scale multiplies a fixed draw (same key), per layer."""
    widths = (3, 6, 5, 2)
    unit = bf.init_gaussian(_key(6), widths, 1.0)
    assert bf.widths(unit) == widths and bf.depth(unit) == 3
    assert all(layer.b is None for layer in unit)
    per_layer = bf.init_gaussian(_key(6), widths, [0.5, 2.0, 0.0])
    for layer, ref, s in zip(per_layer, unit, [0.5, 2.0, 0.0], strict=True):
        np.testing.assert_allclose(layer.W, s * ref.W, rtol=1e-15, atol=0)
    biased = bf.init_gaussian(_key(6), widths, 1.0, bias=True)
    assert [layer.b.shape for layer in biased] == [(6,), (5,), (2,)]
    with pytest.raises(ValueError, match="at least one hidden layer"):
        bf.init_gaussian(_key(6), (3, 2), 1.0)
    with pytest.raises(ValueError, match="non-negative number or one per layer"):
        bf.init_gaussian(_key(6), widths, -1.0)


# ------------------------------------------------------------------ beta_eff routes


@pytest.mark.parametrize("alpha", [0.0, 0.5])
def test_beta_eff_closed_form_equals_least_squares_route(alpha):
    """Two-layer net: the closed form c W_1ᵀW_2ᵀ equals the least-squares fit of f_odd,
    obtained by forcing the least-squares route with zero biases (same function)."""
    rng = _rng(7)
    params = _net(rng, (4, 8, 2))
    X = rng.normal(size=(60, 4))
    closed = bf.beta_eff(params, alpha)
    zero_bias = tuple(Layer(layer.W, jnp.zeros(layer.W.shape[0])) for layer in params)
    lsq = bf.beta_eff(zero_bias, alpha, X)
    assert closed.shape == lsq.shape == (4, 2)
    # f_odd is exactly linear, so the fit has zero residual; pinv of a well-conditioned
    # (60, 4) Gaussian matrix loses at most a factor cond(X) ~ 3: 1e-12 is ample
    np.testing.assert_allclose(lsq, closed, rtol=0, atol=1e-12)


def test_beta_eff_deep_needs_inputs():
    params = _net(_rng(8), (3, 4, 4, 1))
    with pytest.raises(ValueError, match="least-squares fit.*pass inputs X"):
        bf.beta_eff(params, 0.0)


# ------------------------------------------------------------------ pair init at init


@pytest.mark.parametrize("alpha", [0.0, 0.5])
@pytest.mark.parametrize("widths", [(3, 4, 2), (3, 4, 3, 2), (2, 3, 3, 3, 1)])
def test_pair_net_computes_scaled_product(alpha, widths):
    """pair_up(W_1..W_L) computes (2c)^{L-1} W_L ... W_1 x exactly and is odd (§2.3)."""
    rng = _rng(9)
    half = _net(rng, widths)
    pair = bf.pair_up(half)
    assert bf.widths(pair) == (widths[0],) + tuple(2 * n for n in widths[1:-1]) + (widths[-1],)
    X = rng.normal(size=(25, widths[0]))
    L = len(widths) - 1
    expected = (2 * bf.slope_factor(alpha)) ** (L - 1) * X @ bf.end_to_end_linear(half).T
    np.testing.assert_allclose(bf.forward(pair, X, alpha), expected, rtol=0, atol=1e-12)
    np.testing.assert_allclose(bf.even_part(pair, X, alpha), 0.0, rtol=0, atol=1e-12)
    beta = (2 * bf.slope_factor(alpha)) ** (L - 1) * bf.end_to_end_linear(half).T
    np.testing.assert_allclose(bf.beta_eff(pair, alpha, X), beta, rtol=0, atol=1e-12)


def test_init_pairs_structure_and_errors():
    params = bf.init_pairs(_key(10), (3, 6, 4, 1), 0.5)
    W1, W2, W3 = (layer.W for layer in params)
    np.testing.assert_array_equal(W1[3:], -W1[:3])
    np.testing.assert_array_equal(W3[:, 2:], -W3[:, :2])
    np.testing.assert_array_equal(W2[:2, :3], W2[2:, 3:])
    np.testing.assert_array_equal(W2[:2, 3:], -W2[:2, :3])
    with pytest.raises(ValueError, match="pair init needs even hidden widths"):
        bf.init_pairs(_key(10), (3, 5, 1), 0.5)
    with pytest.raises(ValueError, match="pair_up needs a bias-free network"):
        bf.pair_up(_net(_rng(10), (3, 4, 1), bias=True))


# ------------------------------------------------------------------ rank-one init


@pytest.mark.parametrize("alpha", [0.0, 0.5])
def test_rank_one_init_is_balanced_zero_even_with_strength_scale(alpha):
    """init_rank_one: W_1[k] = v_k r, W_2[:, k] = v_k q, Σ v_k|v_k| = 0, every unit
    balanced, qᵀW_2W_1r = a_0 = scale; the net computes c a_0 q rᵀx, f_even = 0 (§2.5)."""
    d, a0 = 3, 0.3
    r_in, q_in = np.array([1.0, -0.3, 0.2]), np.array([0.6, 0.8])
    params = bf.init_rank_one(_key(11), d, 4, a0, direction=r_in, out_direction=q_in, p=2)
    W, W2 = params[0].W, params[1].W
    r = r_in / np.linalg.norm(r_in)
    v = W @ r  # v_k = w_kᵀ r since w_k = v_k r with ||r|| = 1
    np.testing.assert_allclose(W, v[:, None] * r[None, :], rtol=0, atol=1e-15)
    np.testing.assert_allclose(W2, q_in[:, None] * v[None, :], rtol=0, atol=1e-15)
    assert abs(float(jnp.sum(v * jnp.abs(v)))) <= 1e-15
    np.testing.assert_allclose(bf.conserved_quantities(params)[0], 0.0, rtol=0, atol=1e-15)
    np.testing.assert_allclose(float(q_in @ W2 @ W @ r), a0, rtol=1e-14)
    X = _rng(11).normal(size=(30, d))
    c = bf.slope_factor(alpha)
    np.testing.assert_allclose(bf.forward(params, X, alpha), c * a0 * np.outer(X @ r, q_in),
                               rtol=0, atol=1e-14)
    np.testing.assert_allclose(bf.even_part(params, X, alpha), 0.0, rtol=0, atol=1e-15)


def test_rank_one_init_errors():
    with pytest.raises(ValueError, match="even width"):
        bf.init_rank_one(_key(0), 3, 5, 0.1)
    with pytest.raises(ValueError, match="must be > 0"):
        bf.init_rank_one(_key(0), 3, 4, 0.0)


def test_from_arrays_checks_shapes():
    with pytest.raises(ValueError, match="shapes must chain"):
        bf.from_arrays([np.ones((4, 3)), np.ones((1, 5))])
    with pytest.raises(ValueError, match="bias 1 must have shape"):
        bf.from_arrays([np.ones((4, 3)), np.ones((1, 4))], [np.ones(3), None])
    p = bf.from_arrays([np.ones((4, 3)), np.ones((1, 4))])
    assert bf.widths(p) == (3, 4, 1)


# ------------------------------------------------------------------ padding and effective rank


def test_zero_padding_keeps_the_function_and_refuses_narrowing():
    rng = _rng(3)
    net = tuple(Layer(rng.normal(size=s)) for s in ((2, 3), (2, 2), (1, 2)))
    X = rng.normal(size=(6, 3))
    padded = inits.pad_hidden(net, 5)
    assert nets.widths(padded) == (3, 5, 5, 1)
    np.testing.assert_allclose(bf.forward(padded, X, 0.0), bf.forward(net, X, 0.0), rtol=1e-14, atol=1e-15)
    with pytest.raises(ValueError, match="below a hidden width"):
        inits.pad_hidden(net, 1)


def test_effective_rank_counts_equal_singular_values():
    np.testing.assert_allclose(nets.effective_rank([[2.0, 2.0, 2.0, 0.0], [5.0, 0.0, 0.0, 0.0]]),
                               [3.0, 1.0], rtol=1e-14)
