"""Convolutional layers (docs/theory.md §7): the fast ``apply`` against the dense Toeplitz
``matrix`` and against a SciPy correlation oracle, the odd part ``c W₂ A x``, pair
channels, the twin map, and bad input.

Round-off bounds (tests/roundoff.py): a computed sum of k products has error at most
``γ_k |x|ᵀ|y|`` whatever the summation order, so two computations of ``A x`` (a
convolution kernel and a matrix product, or SciPy) differ by at most ``2 γ_k |A||x|``
with k = n_in (the zero entries of A add exactly).
"""

import jax
import numpy as np
import pytest
from scipy import signal

import biasfree as bf
from biasfree.core.layers import check_net
from tests.roundoff import gamma, matmul_gap

pytestmark = pytest.mark.numerics  # round-off bounds: make test-portable reruns them

CASES = [((9,), 3, "same"), ((9,), 4, "same"), ((9,), 3, "valid"), ((6, 5), (3, 2), "same"),
         ((6, 5), (3, 3), "valid"), ((5, 5), (4, 4), "same")]


def _conv(rng, in_shape, kernel, padding, c_in=2, c_out=3, bias=False):
    ks = (kernel,) * len(in_shape) if isinstance(kernel, int) else kernel
    K = rng.normal(size=(c_out, c_in) + ks)
    return bf.nets.Conv(K, rng.normal(size=c_out) if bias else None, in_shape, padding)


def _oracle(layer, H):
    """``scipy.signal.correlate`` of each (zero-padded) input channel with each kernel,
    summed over input channels, output laid out channel-major and flattened (torch's Flatten)."""
    K = np.asarray(layer.K)
    ks = K.shape[2:]
    out = []
    for h in np.asarray(H):
        x = h.reshape((K.shape[1],) + layer.in_shape)
        if layer.padding == "same":  # (k - 1)//2 zeros before, the rest after (torch, XLA)
            x = np.pad(x, [(0, 0)] + [((k - 1) // 2, k - 1 - (k - 1) // 2) for k in ks])
        z = np.stack([sum(signal.correlate(x[i], K[o, i], mode="valid", method="direct")
                          for i in range(K.shape[1])) for o in range(K.shape[0])])
        out.append(z.ravel())
    return np.array(out)


@pytest.mark.parametrize("in_shape,kernel,padding", CASES)
def test_apply_equals_matrix_and_scipy_correlation(in_shape, kernel, padding):
    rng = np.random.default_rng(0)
    layer = _conv(rng, in_shape, kernel, padding)
    H = rng.normal(size=(5, layer.n_in))
    A = np.asarray(layer.matrix)
    assert A.shape == (layer.n_out, layer.n_in)
    assert layer.out_layout == (3,) + (in_shape if padding == "same" else tuple(
        n - k + 1 for n, k in zip(in_shape, (kernel,) * len(in_shape) if isinstance(kernel, int)
                                  else kernel, strict=True)))
    Z = np.asarray(layer.apply(H))
    # two sums of the same n_in products in different orders: 2 γ_{n_in} |H||A|ᵀ
    bound = matmul_gap(H, A.T)
    assert np.all(np.abs(Z - H @ A.T) <= bound)
    assert np.all(np.abs(Z - _oracle(layer, H)) <= bound)
    # every matrix entry is one kernel weight or an exact 0 (the kernel is nonzero a.s.)
    assert set(np.unique(A[A != 0])) <= set(np.unique(np.asarray(layer.K)))


@pytest.mark.parametrize("in_shape,kernel,padding", CASES)
def test_gradients_equal_matrix_transpose_and_scipy_correlation(in_shape, kernel, padding):
    """The backward pass of ``linear`` (autodiff through im2col: the patches' transpose and the
    GEMM's): for Z = H Aᵀ and a cotangent G, ∂⟨G, Z⟩/∂H = G A, and ∂/∂K[o, i, u] is the
    correlation of the padded input channel i with G's channel o, summed over the points."""
    rng = np.random.default_rng(5)
    layer = _conv(rng, in_shape, kernel, padding)
    H = rng.normal(size=(4, layer.n_in))
    G = rng.normal(size=(4, layer.n_out))
    gK, gH = jax.grad(lambda K, H: (layer.with_weight(K).linear(H) * G).sum(), argnums=(0, 1))(layer.K, H)
    A = np.asarray(layer.matrix)
    # G A: sums of at most n_out products in any order, 2 γ_{n_out} |G||A| apart
    assert np.all(np.abs(np.asarray(gH) - G @ A) <= matmul_gap(G, A))
    K = np.asarray(layer.K)
    ks, out = K.shape[2:], layer.out_layout[1:]
    x = H.reshape((4, K.shape[1]) + layer.in_shape)
    if padding == "same":
        x = np.pad(x, [(0, 0), (0, 0)] + [((k - 1) // 2, k - 1 - (k - 1) // 2) for k in ks])
    g = G.reshape((4, K.shape[0]) + out)

    def corr(x, g):  # (C_out, C_in, *k): Σ_n correlate(x[n, i], g[n, o], "valid")
        return np.array([[sum(signal.correlate(x[n, i], g[n, o], mode="valid", method="direct")
                              for n in range(4)) for i in range(K.shape[1])] for o in range(K.shape[0])])

    # each entry a sum of N·∏out products: 2 γ_{N·∏out} times the same sum on absolute values
    bound = 2 * gamma(4 * int(np.prod(out))) * corr(np.abs(x), np.abs(g))
    assert np.all(np.abs(np.asarray(gK) - corr(x, g)) <= bound)


def test_bias_is_per_channel_and_torch_layout():
    """The bias b[o] is added at every position of channel o (channel-major flat layout)."""
    rng = np.random.default_rng(1)
    layer = _conv(rng, (4, 4), 3, "same", bias=True)
    H = rng.normal(size=(3, layer.n_in))
    Z = np.asarray(layer.apply(H)).reshape(3, 3, 16)
    Z0 = np.asarray(layer.linear(H)).reshape(3, 3, 16)
    # Z = Z0 + b: one rounded addition each, |error| <= ε|Z|
    np.testing.assert_allclose(Z - Z0, np.broadcast_to(layer.b[None, :, None], Z.shape), rtol=0,
                               atol=float(np.finfo(float).eps * np.max(np.abs(Z))) * 2)


def test_pooled_readout_is_mean_then_dense():
    rng = np.random.default_rng(2)
    pool = bf.nets.PooledDense(rng.normal(size=(2, 3)), None, (4, 5))
    H = rng.normal(size=(6, pool.n_in))
    direct = H.reshape(6, 3, 20).mean(axis=2) @ np.asarray(pool.V).T
    # sums of 20 then of 3 products, in other orders: within 2 γ_{60} |H||M|ᵀ
    bound = matmul_gap(H, np.asarray(pool.matrix).T)
    assert np.all(np.abs(np.asarray(pool.apply(H)) - direct) <= bound)
    assert np.all(np.abs(np.asarray(pool.apply(H)) - H @ np.asarray(pool.matrix).T) <= bound)


def _conv_net(rng, in_shape=(6, 6), c=3, p=2, readout="dense", bias=False):
    conv = _conv(rng, in_shape, 3, "same", c_in=2, c_out=c, bias=bias)
    if readout == "pool":
        return (conv, bf.nets.PooledDense(rng.normal(size=(p, c)), None, in_shape))
    return (conv, bf.nets.Layer(rng.normal(size=(p, conv.n_out))))


@pytest.mark.parametrize("readout", ["dense", "pool"])
@pytest.mark.parametrize("alpha", [0.0, 0.3])
def test_odd_part_is_c_W2_A_x(alpha, readout):
    """f_odd(x) = c W₂ A x for f(x) = W₂ σ_α(A x), A the convolution (§7)."""
    rng = np.random.default_rng(3)
    net = _conv_net(rng, readout=readout)
    X = rng.normal(size=(7, net[0].n_in))
    A, W2 = np.asarray(net[0].matrix), np.asarray(net[1].matrix)
    c = bf.nets.slope_factor(alpha)
    want = c * X @ (W2 @ A).T
    # each of the three computations sums n_in then n_h products: ≤ (γ_{n_in} + γ_{n_h})|W₂||A||x|
    # each; f_odd subtracts two of them, so 3× that bounds the difference
    bound = 3 * (gamma(A.shape[1]) + gamma(A.shape[0])) * (np.abs(X) @ (np.abs(W2) @ np.abs(A)).T)
    assert np.all(np.abs(np.asarray(bf.nets.odd_part(net, X, alpha)) - want) <= bound)
    # beta_eff is c AᵀW₂ᵀ for a two-layer bias-free net, through .matrix: two products of n_h
    # terms (XLA's and NumPy's kernels sum in different orders) and one scaling by c, each
    # within γ_{n_h+1} c|A|ᵀ|W₂|ᵀ of the exact value, so 2γ_{n_h+1} apart
    ref = c * A.T @ W2.T
    gap = np.abs(np.asarray(bf.beta_eff(net, alpha)) - ref)
    assert np.all(gap <= 2 * gamma(A.shape[0] + 1) * c * np.abs(A).T @ np.abs(W2).T)


@pytest.mark.parametrize("readout", ["dense", "pool"])
def test_pair_channels_make_the_net_linear(readout):
    """pair_up: channels (k, -k), readouts (v, -v): f_even ≡ 0 and f = 2c W₂ A x (§7)."""
    rng = np.random.default_rng(4)
    half = _conv_net(rng, readout=readout)
    pair = bf.pair_up(half)
    assert pair[0].c_out == 2 * half[0].c_out
    X = rng.normal(size=(7, half[0].n_in))
    A, W2 = np.asarray(half[0].matrix), np.asarray(half[1].matrix)
    Ap, W2p = np.asarray(pair[0].matrix), np.asarray(pair[1].matrix)
    H = np.abs(X) @ np.abs(Ap).T
    for alpha in (0.0, 0.4):
        c = bf.nets.slope_factor(alpha)
        # f(x) + f(-x) cancels sums of 2n_h terms of size |W₂ᵖ||σ(Aᵖx)|; Aᵖ(-x) = -(Aᵖx) exactly
        bound = 2 * gamma(Ap.shape[0]) * (H @ np.abs(W2p).T)
        assert np.all(np.abs(np.asarray(bf.nets.even_part(pair, X, alpha))) <= bound)
        want = 2 * c * X @ (W2 @ A).T
        bound = 3 * (gamma(Ap.shape[1]) + gamma(Ap.shape[0])) * (H @ np.abs(W2p).T)
        assert np.all(np.abs(np.asarray(bf.forward(pair, X, alpha)) - want) <= bound)


def test_init_conv_shapes_pairs_and_twin():
    key = jax.random.PRNGKey(0)
    net = bf.init_conv(key, (8, 8), (1, 4), 3, p=2, scale=0.5)
    assert [type(la).__name__ for la in net] == ["Conv", "Layer"]
    assert net[0].K.shape == (4, 1, 3, 3) and net[1].W.shape == (2, 4 * 64)
    assert bf.nets.widths(net) == (64, 256, 2)
    valid = bf.init_conv(key, (9,), (2, 3, 4), 4, padding="valid", readout="pool", bias=True)
    assert [la.out_layout for la in valid[:2]] == [(3, 6), (4, 3)] and valid[2].V.shape == (1, 4)
    assert valid[0].b.shape == (3,)
    pairs = bf.init_conv(key, (8, 8), (1, 4), 3, p=1, scale=0.5, pairs=True)
    np.testing.assert_array_equal(pairs[0].K[2:], -pairs[0].K[:2])
    np.testing.assert_array_equal(pairs[1].W[:, 128:], -pairs[1].W[:, :128])
    # linear twin: the same architecture, every weight times √c (exact: one product each)
    twin = bf.linear_twin(net, 0.2)
    assert type(twin[0]) is bf.nets.Conv and twin[0].in_shape == (8, 8)
    np.testing.assert_array_equal(twin[0].K, np.sqrt(0.6) * np.asarray(net[0].K))
    batch = bf.linear_twin(net, np.array([0.0, 1.0]))  # one twin per slope, on a leading axis
    assert batch[0].K.shape == (2, 4, 1, 3, 3) and batch[0].matrix.shape == (2, 256, 64)
    np.testing.assert_array_equal(bf.nets.scale_params(net, 2.0)[0].K, 2.0 * np.asarray(net[0].K))


def test_bad_input_errors_name_the_layer_and_fix():
    rng = np.random.default_rng(5)
    with pytest.raises(ValueError, match=r"conv layer 0: kernel \(5, 5\) is larger than its input "
                                         r"\(4, 4\) with padding='valid'.*padding='same'"):
        bf.init_conv(jax.random.PRNGKey(0), (4, 4), (1, 2), 5, padding="valid")
    big = bf.nets.Conv(rng.normal(size=(2, 1, 5)), None, (4,), "valid")
    with pytest.raises(ValueError, match=r"params\[0\]: kernel \(5,\) is larger than its input"):
        check_net((big, bf.nets.Layer(np.ones((1, 2)))))
    a = _conv(rng, (4, 4), 3, "same", c_in=1, c_out=2)
    b = bf.nets.Conv(rng.normal(size=(2, 8, 3)), None, (4,), "same")  # 32 inputs, like a's 32 outputs
    with pytest.raises(ValueError, match=r"layer 1 reads \(channels, \*spatial\) = \(8, 4\) but "
                                         r"layer 0 gives \(2, 4, 4\); match its input channels"):
        check_net((a, b, bf.nets.Layer(np.ones((1, 8)))))
    c = _conv(rng, (4, 4), 3, "same", c_in=1, c_out=3)
    with pytest.raises(ValueError, match="layer 1 takes 32 inputs but layer 0 has 48 outputs"):
        check_net((c, bf.nets.Layer(np.ones((1, 32)))))
    K = rng.normal(size=(2, 1, 3, 3))
    K[0, 0, 1, 1] = np.nan
    with pytest.raises(ValueError, match=r"params\[0\]\.K"):
        check_net((bf.nets.Conv(K, None, (4, 4)), bf.nets.Layer(np.ones((1, 32)))))
    with pytest.raises(ValueError, match=r"one bias per output channel, shape \(2,\)"):
        check_net((bf.nets.Conv(rng.normal(size=(2, 1, 3, 3)), np.ones(32), (4, 4)),
                   bf.nets.Layer(np.ones((1, 32)))))
    with pytest.raises(ValueError, match="padding"):
        bf.nets.Conv(rng.normal(size=(2, 1, 3)), None, (4,), "full")
    with pytest.raises(ValueError, match="in_shape"):
        bf.nets.Conv(rng.normal(size=(2, 1, 3)), None, (4, 4, 4))
    with pytest.raises(ValueError, match="pair init needs even hidden channel counts"):
        bf.init_conv(jax.random.PRNGKey(0), (4, 4), (1, 3), 3, pairs=True)
    with pytest.raises(ValueError, match="bias-free"):
        bf.pair_up(bf.init_conv(jax.random.PRNGKey(0), (4, 4), (1, 2), 3, bias=True))


@pytest.mark.parametrize("kernel", [3.0, None, "3"])
def test_init_conv_refuses_a_kernel_that_is_not_sizes(kernel):
    """A float or None once failed inside with "'float' object is not iterable"."""
    with pytest.raises(TypeError, match=f"kernel={kernel!r} must be an integer, or one per spatial axis"):
        bf.init_conv(jax.random.PRNGKey(0), (8,), (1, 2), kernel)
