"""Issue 49 item 3 (audit M3): Theorem 1's constructions as a public function for conv nets too
(biasfree.analysis.unit_embed): a ReLU conv net's kernels embed as a dense net's hidden units do,
the function unchanged and the gradient zero to round-off; a wrong embedding and a point that is
not a fixed point fail."""

import numpy as np
import pytest

from biasfree.analysis import saddles
from biasfree.analysis.unit_embed import UnitEmbedding, check_unit_embedding, embed_units
from biasfree.analysis.unit_stage import narrow_fixed_point, parts, relative_gradient
from biasfree.claims.saddle_to_saddle.run import conv_net, relu_conv_task


@pytest.fixture(scope="module")
def conv_point():
    """Two kernels of length 3 on spikes in inputs of length 7 (the saddle-to-saddle ReLU conv task,
    targets 1.0 r and 0.4 |r|), from a random start refined to its nearest fixed point (LM, then Newton)."""
    rng = np.random.default_rng(0)
    X, Y, _ = relu_conv_task(rng, 80, 7, 3, (1.0, 0.4))
    start = conv_net(0.5 * rng.normal(size=(2, 3)), 0.5 * rng.normal(size=(1, 2)), 7)
    U0, V0, rebuild = parts(start)
    Un, Vn = narrow_fixed_point(rebuild, U0, V0, X, Y, 0.0)
    net = rebuild(Un, Vn)
    g, tol = relative_gradient(net, X, Y, 0.0)
    assert g <= tol  # a fixed point to round-off
    return tuple(net), X, Y


@pytest.mark.parametrize("construction", ["split", "zero", "rescale"])
def test_a_conv_kernel_embeds_as_a_hidden_unit_does(conv_point, construction):
    net, X, Y = conv_point
    e = embed_units(net, X, Y, 0.0, construction, unit=0, ratio=0.3, scale=2.0)
    assert isinstance(e, UnitEmbedding) and e.holds
    assert np.shape(e.params[0].K)[0] == 3  # one more kernel
    assert e.function_gap <= e.function_tol and e.grad <= e.grad_tol


def test_on_a_dense_net_the_wide_net_is_saddles_own(conv_point):
    """The same algebra on (U, Vᵀ) as saddles.embed's on (W₁, W₂): the same wide weights, bitwise."""
    from biasfree.nets import Layer

    rng = np.random.default_rng(1)
    X = rng.normal(size=(40, 3))
    Y = np.maximum(X @ np.array([[1.0], [0.5], [-0.3]]), 0.0)
    U0, V0, rebuild = parts((Layer(rng.normal(size=(2, 3))), Layer(rng.normal(size=(1, 2)))))
    net = rebuild(*narrow_fixed_point(rebuild, U0, V0, X, Y, 0.0))
    ours = embed_units(net, X, Y, 0.0, "split", unit=1, ratio=0.25)
    theirs = saddles.embed(net, X, Y, 0.0, "split", unit=1, ratio=0.25)
    for a, b in zip(ours.params, theirs.params, strict=True):
        np.testing.assert_array_equal(np.asarray(a.W), np.asarray(b.W))
    assert ours.holds and theirs.holds


def test_a_wrong_embedding_and_a_point_that_is_not_fixed_fail(conv_point):
    net, X, Y = conv_point
    U, V, rebuild = parts(net)
    # split's copy with a moved kernel: the function changes and the gradient is no longer zero
    wrong = rebuild(np.vstack([U, U[:1] + 0.1]), np.vstack([0.5 * V[:1], V[1:], 0.5 * V[:1]]))
    bad = check_unit_embedding(net, wrong, X, Y, 0.0)
    assert not bad.holds and bad.function_gap > 100 * bad.function_tol and bad.grad > 100 * bad.grad_tol
    moved = rebuild(U + 0.05, V)
    with pytest.raises(ValueError, match="not a fixed point: its relative gradient"):
        embed_units(moved, X, Y, 0.0, "zero")
    with pytest.raises(ValueError, match="bias-free two-layer"):
        embed_units(net[:1], X, Y, 0.0, "zero")


@pytest.fixture(scope="module")
def quadratic_point():
    """A two-unit quadratic net (σ(z) = z²) fitting y = (x·e₁)² + 0.5 (x·e₂)² on 60 Gaussian points in
    3-D, from a perturbed start refined to its fixed point (here the exact fit, loss 0 up to round-off)."""
    from biasfree.analysis.unit_stage import Rebuild

    rng = np.random.default_rng(2)
    X = rng.normal(size=(60, 3))
    Y = (X[:, :1] ** 2 + 0.5 * X[:, 1:2] ** 2)
    rebuild = Rebuild(activation="quadratic")
    U0 = np.array([[1.0, 0.1, 0.0], [0.1, 0.8, 0.1]])
    V0 = np.array([[0.9], [0.4]])
    net = rebuild(*narrow_fixed_point(rebuild, U0, V0, X, Y, 0.0))
    assert net[0].activation == "quadratic"
    return tuple(net), X, Y


@pytest.mark.parametrize("construction", ["split", "zero", "rescale"])
def test_a_quadratic_unit_embeds_with_a_degree_two_rescale(quadratic_point, construction):
    net, X, Y = quadratic_point
    e = embed_units(net, X, Y, 0.0, construction, unit=1, ratio=0.4, scale=1.7)
    assert e.holds and e.params[0].activation == "quadratic" and np.shape(e.params[0].W)[0] == 3
    if construction == "rescale":  # the control: a degree-1 rescale (outputs / c, as for σ_α) changes f
        U, V, rebuild = parts(net)
        W1, W2 = saddles.embedded_weights(U, V.T, "rescale", 1, 0.4, 1.7, degree=1)
        bad = check_unit_embedding(net, rebuild(W1, W2.T), X, Y, 0.0)
        assert not bad.holds and bad.function_gap > 100 * bad.function_tol
    with pytest.raises(ValueError, match="quadratic net embeds by"):
        embed_units(net, X, Y, 1.0, "linear")


@pytest.fixture(scope="module")
def head_point():
    """Separate attention (D = 2, N = 8, 3 heads of rank 1) trained by GD from init std 1e-2 on
    anisotropic in-context regression, then moved to its nearest embedded fixed point (the
    attention stage's head_fixed_point: one head learned, two zero heads)."""
    import dataclasses

    import jax
    import jax.numpy as jnp

    from biasfree.analysis.attention_stage import head_fixed_point
    from biasfree.core.attention import init_attention
    from biasfree.core.icl_data import in_context_regression

    seq = in_context_regression(jax.random.PRNGKey(0), 100, 8, 2, cov=np.diag([4.0, 0.25]))
    X, Y = np.asarray(seq.X, float), np.asarray(seq.Y, float)
    lay = init_attention(jax.random.PRNGKey(1), 2, 3, 8, 1e-2, rank=1)

    def loss(w):
        return 0.5 * jnp.mean((dataclasses.replace(lay, **w).apply(jnp.asarray(X)) - Y) ** 2)
    vg = jax.jit(jax.value_and_grad(loss))
    w = {k: jnp.asarray(getattr(lay, k), jnp.float64) for k in ("V", "K", "Q")}
    for _ in range(1500):
        w = jax.tree.map(lambda a, b: a - 0.02 * b, w, vg(w)[1])
    hp = head_fixed_point(dataclasses.replace(lay, **w), X, Y, 1)
    assert hp.stationary
    return hp.params, X, Y, hp.heads[0]


@pytest.mark.parametrize("construction", ["split", "zero"])
def test_a_head_embeds_as_theorem_one_says(head_point, construction):
    from biasfree.analysis.unit_embed import embed_heads

    layer, X, Y, h = head_point
    e = embed_heads(layer, X, Y, construction, head=h, ratio=0.3)
    assert e.holds and np.shape(e.params[0].V)[0] == 4


def test_a_wrong_head_copy_fails_and_a_moved_layer_is_refused(head_point):
    import dataclasses

    from biasfree.analysis.attention_stage import features, function_change
    from biasfree.analysis.attention_stage import relative_gradient as head_gradient
    from biasfree.analysis.unit_embed import embed_heads

    layer, X, Y, h = head_point
    V, K, Q = (np.asarray(a, float) for a in (layer.V, layer.K, layer.Q))
    V2 = np.concatenate([V, 0.5 * V[h:h + 1]])
    V2[h] *= 0.5
    wrong = dataclasses.replace(layer, V=V2, K=np.concatenate([K, 1.1 * K[h:h + 1]]),
                                Q=np.concatenate([Q, Q[h:h + 1]]))
    feats = features(layer, X)
    gap, ftol = function_change(wrong, layer, X, feats)
    g, tol, _ = head_gradient(wrong, X, Y, feats)
    assert gap > 100 * ftol and g > 100 * tol
    moved = dataclasses.replace(layer, K=K + 0.05)
    with pytest.raises(ValueError, match="not a fixed point"):
        embed_heads(moved, X, Y, "zero")
