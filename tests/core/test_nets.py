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
from roundoff import EPS, forward_gap, gamma

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


def _mag(params, X):
    """``|X| |W_1|ᵀ … |W_L|ᵀ``: the net on absolute values, α = 1 (dominates |f|, |f_odd|,
    |f_even| and every partial sum of the closed forms below)."""
    M = np.abs(np.asarray(X, dtype=float))
    for layer in params:
        M = M @ np.abs(np.asarray(layer.W)).T
    return M


def _bound(params, X):
    """Entrywise round-off bound for comparing two float64 routes to the same bias-free
    net value f, f_odd = ½(f(x) − f(−x)), f_even = ½(f(x) + f(−x)) or their closed forms:
    each evaluation of f is within ½ roundoff.forward_gap of exact (any summation order),
    a closed form's products are the same sums in another order, within γ_k·_mag
    (k = Σ widths, the longest chain of sums), and combining <= 2 of them costs <= 3
    roundings (3ε·_mag). Two sides: 2·(forward_gap + γ_k _mag) + 6ε _mag. About 1e-15
    relative to _mag, so any O(1) error in an identity (a wrong c, a sign) fails."""
    k = sum(np.shape(layer.W)[1] for layer in params) + np.shape(params[-1].W)[0]
    mag = _mag(params, X)
    return 2 * (forward_gap([layer.W for layer in params], X) + gamma(k) * mag) + 6 * EPS * mag


def _lsq_bound(params, X, alpha):
    """Round-off bound on β_eff = X⁺ f_odd(X) against its exact value (entrywise, from a
    norm): the data error δF <= _bound reaches β through ||X⁺||₂, and the pseudo-inverse's
    own backward error γ_{N d}||X|| is amplified by κ(X) (Higham §20.1, first order):
    ||X⁺||₂·||δF||_F + γ_{Nd} κ(X) ||β||_F, with β the exact map's size ||X⁺ F||_F."""
    X = np.asarray(X, dtype=float)
    sv = np.linalg.svd(X, compute_uv=False)
    F = np.asarray(bf.nets.odd_part(params, X, alpha))
    beta = np.linalg.norm(np.linalg.pinv(X) @ F)
    return (np.linalg.norm(_bound(params, X)) / sv[-1]
            + gamma(X.shape[0] * X.shape[1]) * (sv[0] / sv[-1]) * beta)


# ------------------------------------------------------------------ §1.1 activation


@pytest.mark.parametrize("alpha", [0.0, 0.1, 0.5, 1.0])
def test_leaky_relu_is_c_z_plus_one_minus_c_abs_z(alpha):
    """σ_α(z) = c z + (1 - c)|z| with c = (1 + α)/2 (§1.1)."""
    z = _rng(0).normal(size=1000) * 3.0
    c = bf.nets.slope_factor(alpha)
    lhs = bf.nets.leaky_relu(z, alpha)
    rhs = c * z + (1 - c) * jnp.abs(z)
    # exact in real arithmetic; σ_α is one product (or max) and rhs c·z + (1−c)|z| three
    # roundings on terms <= |z| (c and 1 − c are exact or rounded once): <= 4ε|z|, entrywise
    np.testing.assert_array_less(np.abs(np.asarray(lhs) - np.asarray(rhs)), 4 * EPS * np.abs(z) + 1e-300)
    assert bf.nets.slope_factor(0.0) == 0.5 and bf.nets.slope_factor(1.0) == 1.0


@pytest.mark.parametrize("alpha", [0.0, 0.3, 1.0])
def test_leaky_relu_derivative_at_zero_is_alpha(alpha):
    """σ_α'(0) = α, PyTorch's convention; 1 for z > 0 and α for z < 0 (§0)."""
    grad = jax.vmap(jax.grad(lambda z: bf.nets.leaky_relu(z, alpha)))
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
        ours = jax.vmap(jax.grad(lambda x, a=alpha: bf.nets.leaky_relu(x, a)))(jnp.asarray(z))
        np.testing.assert_array_equal(np.asarray(ours), zt.grad.numpy())


# ------------------------------------------------------------------ §1.2 two layers


@pytest.mark.parametrize("alpha", [0.0, 0.3, 1.0])
def test_two_layer_odd_part_is_linear_and_even_part_is_abs_sum(alpha):
    """f_odd(x) = c (Wᵀv)ᵀx and f_even(x) = (1-c) Σ_k v_k |w_kᵀx| (§1.2)."""
    rng = _rng(1)
    params = _net(rng, (4, 7, 1))
    W, v = params[0].W, params[1].W[0]
    X = rng.normal(size=(50, 4))
    c = bf.nets.slope_factor(alpha)
    odd = bf.nets.odd_part(params, X, alpha)[:, 0]
    even = bf.nets.even_part(params, X, alpha)[:, 0]
    tol = _bound(params, X)[:, 0]  # round-off of two routes to the same value (see _bound)
    assert np.all(np.abs(odd - c * X @ (W.T @ v)) <= tol)
    assert np.all(np.abs(even - (1 - c) * jnp.abs(X @ W.T) @ v) <= tol)
    # the decomposition reconstructs f exactly in real arithmetic
    assert np.all(np.abs(odd + even - bf.forward(params, X, alpha)[:, 0]) <= tol)
    # and beta_eff is the same linear map: c (Wᵀv), a sum of n = 7 products rounded in any
    # order either side plus the product by c: 2(γ_7 + ε) c |W|ᵀ|v|
    assert np.all(np.abs(bf.beta_eff(params, alpha)[:, 0] - c * W.T @ v)
                  <= 2 * (gamma(7) + EPS) * c * np.abs(W).T @ np.abs(v))


@jax.jit
def _decomposition(params, X, alpha):
    return (bf.forward(params, X, alpha), bf.nets.odd_part(params, X, alpha),
            bf.nets.even_part(params, X, alpha), bf.nets.odd_part(params, -X, alpha),
            bf.nets.even_part(params, -X, alpha), X @ bf.beta_eff(params, alpha))


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
    tol = _bound(params, X)  # two float64 routes to the same exact value (see _bound)
    assert np.all(np.abs(odd + even - f) <= tol)
    assert np.all(np.abs(odd_neg + odd) <= tol)
    assert np.all(np.abs(even_neg - even) <= tol)
    assert np.all(np.abs(odd - lin) <= tol)


# ------------------------------------------------------------------ any depth


@pytest.mark.parametrize("alpha", [0.0, 0.4])
def test_positive_homogeneity_depth_three(alpha):
    """f(λx) = λ f(x) for λ > 0 at depth 3, bias-free (§1.2)."""
    rng = _rng(2)
    params = _net(rng, (3, 6, 5, 2))
    X = rng.normal(size=(40, 3))
    f = bf.forward(params, X, alpha)
    for lam in (1e-3, 0.7, 5.0, 1e3):
        # exact in real arithmetic; λX is rounded once (ε relative, passed on through the
        # net on absolute values: ε·_mag(λX)), then two evaluations and λ·f one more rounding
        lhs, rhs = np.asarray(bf.forward(params, lam * X, alpha)), lam * np.asarray(f)
        assert np.all(np.abs(lhs - rhs) <= _bound(params, lam * X) + 2 * EPS * _mag(params, lam * X))


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
    P = bf.nets.end_to_end_linear(params)
    assert P.shape == (2, 3)
    # exact in real arithmetic: the same sums of products in another order (see _bound)
    tol = _bound(params, X)
    assert np.all(np.abs(np.asarray(bf.forward(params, X, 1.0)) - X @ np.asarray(P).T) <= tol)
    assert np.all(np.abs(np.asarray(bf.nets.even_part(params, X, 1.0))) <= tol)


def test_alpha_zero_is_relu():
    """α = 0 is ReLU: compare with an independent NumPy forward pass, biases included."""
    rng = _rng(5)
    params = _net(rng, (3, 6, 5, 2), bias=True)
    X = rng.normal(size=(30, 3))
    H = X
    for layer in params[:-1]:
        H = _relu_numpy(H @ np.asarray(layer.W).T + np.asarray(layer.b))
    ref = H @ np.asarray(params[-1].W).T + np.asarray(params[-1].b)
    # two evaluations of the same biased net (XLA and NumPy kernels): roundoff.forward_gap
    Ws, bs = [layer.W for layer in params], [layer.b for layer in params]
    assert np.all(np.abs(np.asarray(bf.forward(params, X, 0.0)) - ref) <= forward_gap(Ws, X, bs))
    hs = bf.nets.hidden(params, X, 0.0)
    assert [h.shape for h in hs] == [(30, 6), (30, 5)]
    assert float(jnp.min(hs[0])) >= 0.0


def test_init_gaussian_shapes_scales_and_errors():
    """Shapes follow widths; the scale multiplies a fixed draw (same key), per layer."""
    widths = (3, 6, 5, 2)
    unit = bf.init_gaussian(_key(6), widths, 1.0)
    assert bf.nets.widths(unit) == widths and bf.nets.depth(unit) == 3
    assert all(layer.b is None for layer in unit)
    per_layer = bf.init_gaussian(_key(6), widths, [0.5, 2.0, 0.0])
    for layer, ref, s in zip(per_layer, unit, [0.5, 2.0, 0.0], strict=True):
        # s times the same draw, one rounding each side (<= ε/2 relative each): ε
        np.testing.assert_allclose(layer.W, s * ref.W, rtol=EPS, atol=0)
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
    # f_odd is exactly linear, so the fit has zero residual: the gap is the pseudo-inverse's
    # round-off (_lsq_bound, κ(X) ~ 3 here) plus the closed form's 2γ_8 c|W_1|ᵀ|W_2|ᵀ
    c = bf.nets.slope_factor(alpha)
    W1, W2 = np.abs(np.asarray(params[0].W)), np.abs(np.asarray(params[1].W))
    tol = _lsq_bound(params, X, alpha) + 2 * (gamma(8) + EPS) * c * W1.T @ W2.T
    assert np.all(np.abs(np.asarray(lsq) - np.asarray(closed)) <= tol)


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
    assert bf.nets.widths(pair) == (widths[0],) + tuple(2 * n for n in widths[1:-1]) + (widths[-1],)
    X = rng.normal(size=(25, widths[0]))
    L = len(widths) - 1
    expected = (2 * bf.nets.slope_factor(alpha)) ** (L - 1) * X @ bf.nets.end_to_end_linear(half).T
    # exact in real arithmetic: two routes to the same value (_bound on the pair net, whose
    # absolute-value net dominates (2c)^{L-1}|W_L|…|W_1||x|), + ε for the power's product
    tol = _bound(pair, X) + EPS * _mag(pair, X)
    assert np.all(np.abs(np.asarray(bf.forward(pair, X, alpha)) - expected) <= tol)
    assert np.all(np.abs(np.asarray(bf.nets.even_part(pair, X, alpha))) <= tol)
    beta = (2 * bf.nets.slope_factor(alpha)) ** (L - 1) * bf.nets.end_to_end_linear(half).T
    # β_eff: the closed form (L = 2) or the least-squares fit (_lsq_bound), against the
    # product's own round-off 2γ_k (2c)^{L-1}|W_L|…|W_1| (k = Σ widths)
    k = sum(widths)
    tol_b = _lsq_bound(pair, X, alpha) + 2 * (gamma(k) + EPS) * _mag(half, np.eye(widths[0])) * 2 ** (L - 1)
    assert np.all(np.abs(np.asarray(bf.beta_eff(pair, alpha, X)) - np.asarray(beta)) <= tol_b)


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
    # exact in real arithmetic. r = r_in/||r_in|| has ||r||² = 1 within γ_{d+2} (norm, sqrt,
    # division), so v = W r = v_true ||r||² is within γ_{2d+3}|v| and v rᵀ within γ_{2d+4}|v||r|
    # of W (the init's own product v_k r_j: one more ε)
    V, R = np.abs(np.asarray(v)), np.abs(r)
    assert np.all(np.abs(np.asarray(W) - v[:, None] * r[None, :]) <= gamma(2 * d + 5) * np.outer(V, R))
    # W_2 = q vᵀ with q = q_in (||q_in|| = 1 exactly in reals, so q = q_in within γ_4)
    assert np.all(np.abs(np.asarray(W2) - q_in[:, None] * v[None, :])
                  <= gamma(2 * d + 9) * np.outer(np.abs(q_in), V))
    # Σ v|v| = 0 and per-unit balance ||w_k||² − ||v_k||² = 0: sums of width (or d + p)
    # squares of size <= Σv² = a0 (the init's rescaling adds γ_4 on each side): γ_{n+4} a0
    n = W.shape[0]
    assert abs(float(jnp.sum(v * jnp.abs(v)))) <= gamma(2 * d + n + 9) * float(np.sum(V**2))
    Q = np.asarray(bf.dynamics.trajectory.conserved_quantities(params)[0])
    assert np.all(np.abs(Q) <= gamma(2 * d + 2 + 9) * 2 * V**2 * np.sum(R**2))
    # qᵀW_2W_1r = (qᵀq)(vᵀv)(rᵀr) = a0: three products of sums, each γ_{n+d+p}, on a0
    np.testing.assert_allclose(float(q_in @ W2 @ W @ r), a0, rtol=gamma(3 * (n + d + 2) + 9))
    X = _rng(11).normal(size=(30, d))
    c = bf.nets.slope_factor(alpha)
    # exact in real arithmetic: the two routes (_bound), plus the init's own error in W, W_2
    # (γ_{2d+9} relative, as above, reaching f through the absolute-value net)
    tol = _bound(params, X) + 2 * gamma(2 * d + 9) * _mag(params, X)
    assert np.all(np.abs(np.asarray(bf.forward(params, X, alpha)) - c * a0 * np.outer(X @ r, q_in)) <= tol)
    assert np.all(np.abs(np.asarray(bf.nets.even_part(params, X, alpha))) <= tol)


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
    assert bf.nets.widths(p) == (3, 4, 1)


# ------------------------------------------------------------------ padding and effective rank


def test_zero_padding_keeps_the_function_and_refuses_narrowing():
    rng = _rng(3)
    net = tuple(Layer(rng.normal(size=s)) for s in ((2, 3), (2, 2), (1, 2)))
    X = rng.normal(size=(6, 3))
    padded = inits.pad_hidden(net, 5)
    assert nets.widths(padded) == (3, 5, 5, 1)
    # zero units add exact zeros to every sum: two evaluations of the same net in another
    # blocking (roundoff.forward_gap of the unpadded net)
    gap = forward_gap([layer.W for layer in net], X)
    assert np.all(np.abs(np.asarray(bf.forward(padded, X, 0.0)) - np.asarray(bf.forward(net, X, 0.0))) <= gap)
    with pytest.raises(ValueError, match="below a hidden width"):
        inits.pad_hidden(net, 1)


def test_effective_rank_counts_equal_singular_values():
    # p = σ/Σσ exact here (1/3 rounded once), h = −Σ p ln p: 3 terms, each ln within a few
    # ulps (libm: <= 1 ulp) of ln 3 ~ 1.1, then exp: rel. error <= (γ_3 + 3ε)·h + ε ~ 1.3e-15
    np.testing.assert_allclose(nets.effective_rank([[2.0, 2.0, 2.0, 0.0], [5.0, 0.0, 0.0, 0.0]]),
                               [3.0, 1.0], rtol=(gamma(3) + 3 * EPS) * np.log(3) + 2 * EPS)


@pytest.mark.parametrize("alpha", [[0.3, 0.2], np.zeros(4), np.zeros((16, 1))])
def test_one_net_takes_one_slope(alpha):
    """An array α once broadcast: over the hidden units (length 4 = width), over the rows
    (16 × 1), or failed inside NumPy or JAX with a shape error."""
    net, X = bf.from_arrays([np.ones((4, 3)), np.ones((1, 4))]), np.ones((16, 3))
    for call in (lambda: bf.forward(net, X, alpha), lambda: bf.expressivity.net_function(net, alpha)(X),
                 lambda: bf.nets.odd_part(net, X, alpha)):
        with pytest.raises(TypeError, match="alpha must be a single slope"):
            call()
