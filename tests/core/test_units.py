"""Effective units (docs/theory.md §11.1) on constructed solutions whose count is known: k
units built exactly, plus Gaussian noise at the init scale σ, for every family with a rule;
magnitudes on both sides of the threshold; and failing controls (no init scale: the noise
is counted or left unmerged; a net with no rule: an error naming the families)."""

import numpy as np
import pytest

from biasfree.core.attention import MergedAttention, SeparateAttention
from biasfree.core.conv import Conv, PooledDense
from biasfree.core.layers import Layer
from biasfree.core.units import FAMILIES, effective_units

SIGMA = 1e-3  # the init scale of the noise; learned units are O(1)


def _orth(rng, n, k):
    return np.linalg.qr(rng.normal(size=(n, n)))[0][:, :k]


def _noisy(rng, *arrays):
    return [a + SIGMA * rng.normal(size=np.shape(a)) for a in arrays]


@pytest.mark.parametrize("depth", [2, 3])
def test_linear_rank_is_the_number_of_directions_built(depth):
    """A balanced depth-L linear net along k = 2 directions plus init noise: rank 2, and only
    with the init bound; the round-off threshold alone counts the noise (failing control)."""
    rng = np.random.default_rng(depth)
    d, n, p, s = 6, 8, 5, np.array([2.0, 0.5])
    bases = [_orth(rng, d, 2)] + [_orth(rng, n, 2) for _ in range(depth - 1)] + [_orth(rng, p, 2)]
    root = np.diag(s ** (1 / depth))
    Ws = [bases[i + 1] @ root @ bases[i].T for i in range(depth)]
    net = tuple(Layer(W) for W in _noisy(rng, *Ws))
    res = effective_units(net, 1.0, init_scale=SIGMA)
    assert res.family == "linear" and res.count == 2, res
    assert res.magnitudes[1] > res.threshold > res.magnitudes[2]
    assert "init noise" in res.why
    assert effective_units(net, 1.0).count == min(d, p)  # round-off only: the noise counts


def test_linear_threshold_both_sides():
    """Exact singular values at 2τ and τ/2 of the init bound τ: one in, one out."""
    rng = np.random.default_rng(1)
    tau = effective_units((Layer(np.zeros((4, 5))), Layer(np.zeros((3, 4)))), 1.0,
                          init_scale=SIGMA).threshold
    U, V, R = _orth(rng, 3, 3), _orth(rng, 5, 3), _orth(rng, 4, 3)
    s = np.array([1.0, 2 * tau, tau / 2])
    net = (Layer(R @ np.diag(np.sqrt(s)) @ V.T), Layer(U @ np.diag(np.sqrt(s)) @ R.T))
    res = effective_units(net, 1.0, init_scale=SIGMA)
    assert res.count == 2 and np.isclose(res.threshold, tau)


def test_linear_with_bias_counts_the_affine_map():
    """A bias is a constant input: a zero linear part with a bias is one unit ([M | c])."""
    net = (Layer(np.zeros((3, 2)), b=np.array([1.0, 0, 0])), Layer(np.array([[1.0, 0, 0]])))
    assert effective_units(net, 1.0).count == 1
    assert effective_units((Layer(np.zeros((3, 2))), Layer(np.array([[1.0, 0, 0]]))), 1.0).count == 0


def _relu_units(rng, bias: bool):
    """Three kinks; unit 0 split into two aligned copies (×0.5 and ×2 on the input, Theorem 1's
    split), one unlearned unit (noise in and out, as a balanced run from a small init leaves it);
    plus a unit (−w₁) opposite to unit 1: a kink of its own."""
    d = 1 if bias else 4
    U = rng.normal(size=(3, d + bias))
    U /= np.linalg.norm(U, axis=1, keepdims=True)
    W = np.vstack([U[0] * 0.5, U[0] * 2, U[1], U[2], -U[1], np.zeros(d + bias)])
    v = np.array([1.0, 0.75, -1.0, 0.8, 0.6, 0.0])
    W, v = _noisy(rng, W, v)
    first = Layer(W[:, :d], b=W[:, d] if bias else None)
    return (first, Layer(v[None, :])), 4  # units: {0,1}, 2, 3, 4; unit 5 is noise


@pytest.mark.parametrize("bias", [False, True], ids=["bias-free", "1-D with bias"])
def test_relu_kinks_merge_aligned_units(bias):
    rng = np.random.default_rng(2)
    net, k = _relu_units(rng, bias)
    res = effective_units(net, 0.0, init_scale=SIGMA)
    assert res.family == "leaky" and res.count == k, res
    # failing control: without the init scale the split copies' noise keeps them apart, and the
    # noise unit counts
    assert effective_units(net, 0.0).count == k + 2


def test_relu_opposite_pair_with_opposite_readouts_is_two_units_not_zero():
    """``v σ(wᵀx) − v σ(−wᵀx) = v wᵀx``: two directions, two units (the pair's linear map)."""
    w = np.array([[1.0, 2.0], [-1.0, -2.0]])
    res = effective_units((Layer(w), Layer(np.array([[1.0, -1.0]]))), 0.0)
    assert res.count == 2


def test_quadratic_units_merge_up_to_sign():
    """σ(z) = z² is even: w and −w are one unit, magnitude |Σ v_i ‖w_i‖²|."""
    rng = np.random.default_rng(3)
    U = _orth(rng, 5, 3).T
    W = np.vstack([U[0], -2 * U[0], U[1], 0 * U[2]])
    v = np.array([1.0, 0.5, -1.0, 0.0])
    Wn, vn = _noisy(rng, W, v)
    net = (Layer(Wn, activation="quadratic"), Layer(vn[None, :]))
    res = effective_units(net, init_scale=SIGMA)
    assert res.family == "quadratic" and res.count == 2, res
    # merged: 1·1² + 0.5·2² = 3. The noise δ moves v_i‖w_i‖² by at most 2|v_i|‖w_i‖‖δw_i‖ + ‖w_i‖²|δv_i|
    # to first order (rows 0, 1), plus second-order terms ≤ (|v_i| + |δv_i|)‖δw_i‖² + 2‖w_i‖‖δw_i‖|δv_i|
    w, dw, dv = np.linalg.norm(W, axis=1), np.linalg.norm(Wn - W, axis=1), np.abs(vn - v)
    first = sum(2 * abs(v[i]) * w[i] * dw[i] + w[i] ** 2 * dv[i] for i in (0, 1))
    second = sum((abs(v[i]) + dv[i]) * dw[i] ** 2 + 2 * w[i] * dw[i] * dv[i] for i in (0, 1))
    assert abs(res.magnitudes[0] - 3.0) <= first + second + 1e-12
    assert effective_units(net).count == 4  # control: without σ the copies stay apart, the noise counts


def _conv_net(rng, relu: bool):
    """Channels 0, 1 with proportional kernels, channel 2 its own, channel 3 noise."""
    K = rng.normal(size=(3, 2, 3))
    K = np.stack([K[0], 3 * K[0], K[1], np.zeros((2, 3))])
    V = np.array([[1.0, 0.5, -1.0, 0.0], [0.5, 1.0, 1.0, 0.0]])
    K, V = _noisy(rng, K, V)
    return (Conv(K, in_shape=(6,)), PooledDense(V, in_shape=(6,)))


def test_conv_kernels():
    rng = np.random.default_rng(4)
    net = _conv_net(rng, True)
    relu = effective_units(net, 0.0, init_scale=SIGMA)
    assert relu.family == "conv" and relu.count == 2, relu
    lin = effective_units(net, 1.0, init_scale=SIGMA)  # rank of Σ_c V_c K_cᵀ: p = 2 at most
    assert lin.family == "conv-linear" and lin.count == 2, lin
    assert effective_units(net, 0.0).count == 4  # control: the noise channel and the copy count


def test_attention_heads():
    """Separate rank-one heads on two components: B of rank 2; merged: its twin has one head."""
    rng = np.random.default_rng(5)
    D, H = 3, 3
    E = _orth(rng, D, 2).T
    V = np.zeros((H, D + 1, D + 1))
    K = np.zeros((H, 1, D + 1))
    Q = np.zeros((H, 1, D + 1))
    V[:2, D, D] = 1.0
    K[:2, 0, :D], Q[:2, 0, :D] = E, E * np.array([[1.0], [0.5]])
    V, K, Q = _noisy(rng, V, K, Q)
    sep = SeparateAttention(V, K, Q, n_ctx=4)
    res = effective_units(sep, init_scale=SIGMA)
    assert res.family == "attention-separate" and res.count == 2, res
    merged = effective_units(MergedAttention(V, np.asarray(sep.merged.KQ), n_ctx=4), init_scale=SIGMA)
    assert merged.family == "attention-merged" and merged.count == 1
    zero = MergedAttention(SIGMA * rng.normal(size=V.shape), SIGMA * rng.normal(size=V.shape), n_ctx=4)
    assert effective_units(zero, init_scale=SIGMA).count == 0


@pytest.mark.parametrize("net, alpha", [
    ((Layer(np.ones((3, 2))), Layer(np.ones((3, 3)))), None),
    ((Layer(np.ones((3, 2))), Layer(np.ones((3, 3))), Layer(np.ones((1, 3)))), 0.0),
    ((Layer(np.ones((3, 2)), activation="quadratic"), Layer(np.ones((3, 3)), activation="quadratic"),
      Layer(np.ones((1, 3)))), 0.0),
    ("not a net", 0.0),
], ids=["no alpha", "deep relu", "deep quadratic", "not a net"])
def test_no_rule_names_the_families_that_have_one(net, alpha):
    with pytest.raises((ValueError, TypeError)) as err:
        effective_units(net, alpha)
    msg = str(err.value)
    assert "\n" not in msg
    if err.type is ValueError:
        assert all(rule in msg for rule in FAMILIES.values()), msg
    else:
        assert "alpha" in msg


def test_init_must_match():
    net = (Layer(np.ones((3, 2))), Layer(np.ones((1, 3))))
    with pytest.raises(ValueError, match="trained from"):
        effective_units(net, 1.0, init=(Layer(np.ones((4, 2))), Layer(np.ones((1, 4)))))
    with pytest.raises(TypeError, match="not both"):
        effective_units(net, 1.0, init=net, init_scale=0.1)


def test_init_noise_is_the_rms_of_the_drawn_entries():
    """``init=``: each factor's σ is the RMS of its drawn entries: a separate layer's Γ is
    diagonal (its off-diagonal zeros are not noise), a linear net's constant row [0, 1] is exact.
    An init counts no unit."""
    import jax

    from biasfree.core.attention import init_attention
    from biasfree.core.units import ingredients, init_scales
    sep = init_attention(jax.random.PRNGKey(0), 3, 3, 4, 1e-3, rank=1)
    family, _, parts = ingredients(sep, None)
    gamma = np.asarray(sep.V)[:, 3, 3]
    assert init_scales(sep, None, family, parts)[1] == np.sqrt(np.mean(gamma**2))
    assert effective_units(sep, init=sep).count == 0
    rng = np.random.default_rng(6)
    net = (Layer(rng.normal(size=(3, 2)), b=rng.normal(size=3)), Layer(rng.normal(size=(1, 3))))
    family, _, parts = ingredients(net, 1.0)
    sig = init_scales(net, 1.0, family, parts)
    assert sig[0] == np.sqrt(np.mean(np.hstack([net[0].W, net[0].b[:, None]]) ** 2))
    assert effective_units(net, 1.0, init=net).count == 0
