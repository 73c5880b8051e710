"""Linear attention and its exact linear twin (docs/theory.md §10): the forward identity, the
maps both ways, lockstep training under GD and Adam with their failing controls, and the
trainer's refusal of records that need a matrix. float64 throughout."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import biasfree as bf
from biasfree.core.attention import MergedAttention, SeparateAttention, init_attention
from biasfree.core.attention_twin import (
    in_context_map,
    merged_to_twin,
    off_twin,
    twin_dataset,
    twin_mask,
    twin_to_merged,
)
from biasfree.core.icl_data import _cubic_features, cubic_features, in_context_regression
from biasfree.core.layers import Layer

EPS = np.finfo(float).eps
D, N, H, S = 3, 8, 2, 150
STEPS = 200
LR = 0.02
K_SUM = N + D * D + H
"""The longest chain of sums in one prediction (G over N tokens, z·W over D² entries, H heads)."""
LOCKSTEP = STEPS * K_SUM * EPS / (1 - K_SUM * EPS)
"""K steps × γ_k: each step's loss is exact for weights perturbed by γ_k relative; GD's
logistic map carries a relative perturbation of the strength without growing it (the drop is
a sigmoid, not a saddle crossing in the twin's coordinates), so errors add at most linearly:
≈ 1e-12 for these sizes."""


@pytest.fixture(scope="module")
def problem():
    data = in_context_regression(jax.random.PRNGKey(0), S, N, D)
    att = init_attention(jax.random.PRNGKey(1), D, H, N, 0.05)
    return data, att, twin_dataset(data, N)


def test_data_layout_and_mirror(problem):
    data, _, zd = problem
    E = np.asarray(data.X).reshape(2 * S, N + 1, D + 1)
    assert np.all(E[:, -1, -1] == 0.0)  # the query's label slot
    assert np.array_equal(E[S:, :, :D], E[:S, :, :D]) and np.array_equal(E[S:, :, D], -E[:S, :, D])
    assert np.array_equal(np.asarray(data.Y)[S:], -np.asarray(data.Y)[:S])
    assert zd.mirrored  # z changes sign exactly under the label mirror


def test_cubic_feature_definition(problem):
    data, _, _ = problem
    E = np.asarray(data.X).reshape(2 * S, N + 1, D + 1)
    s = 7
    z = sum(E[s, n, D] * np.outer(E[s, n, :D], E[s, N, :D]) for n in range(N)) / N
    got = np.asarray(cubic_features(data.X, N))[s]
    np.testing.assert_allclose(got, z.ravel(), rtol=0, atol=10 * N * EPS * np.abs(z).max())


def test_forward_equals_twin_on_the_manifold(problem):
    data, att, zd = problem
    f = np.asarray(bf.forward((att,), data.X, 0.0))
    g = np.asarray(bf.forward(merged_to_twin(att), zd.X, 1.0))
    scale = np.max(np.abs(f))
    assert np.max(np.abs(f - g)) <= 4 * K_SUM * EPS * scale  # two orders of the same sums
    off = init_attention(jax.random.PRNGKey(1), D, H, N, 0.05, blocks="all")  # u, b ≠ 0
    assert off_twin(off) > 1e-3
    assert np.max(np.abs(np.asarray(bf.forward((off,), data.X, 0.0)) - g)) > 1e3 * 4 * K_SUM * EPS * scale


@pytest.mark.parametrize("heads", [1, 2, 5])  # D + 1 > 2H: GEMMs per head; else heads folded first
def test_forward_is_the_attention_sum(problem, heads):
    data, _, _ = problem
    att = init_attention(jax.random.PRNGKey(3), D, heads, N, 0.5, blocks="all")
    E = np.asarray(data.X).reshape(2 * S, N + 1, D + 1)
    V, KQ = np.asarray(att.V)[:, D, :], np.asarray(att.KQ)
    terms = np.einsum("hd,snd,sne,hef,sf->shn", V, E[:, :N], E[:, :N], KQ, E[:, N]) / N  # definition
    f = np.asarray(bf.forward((att,), data.X, 0.0))[:, 0]
    K = N + 3 * (D + 1) + heads  # the longest chain of sums in either order
    assert np.all(np.abs(f - terms.sum(axis=(1, 2))) <= 2 * K * EPS * np.abs(terms).sum(axis=(1, 2)))


def test_maps_both_ways(problem):
    _, att, _ = problem
    back = twin_to_merged(merged_to_twin(att), N)
    assert np.array_equal(np.asarray(back.KQ), np.asarray(att.KQ))
    assert np.array_equal(np.asarray(back.V), np.asarray(att.V))
    B = in_context_map(att)
    W1, W2 = merged_to_twin(att)
    np.testing.assert_allclose(B.ravel(), np.asarray(W2.W @ W1.W)[0], rtol=1e-15, atol=1e-18)


@pytest.mark.x64_off
def test_maps_keep_float64_outside_x64(problem):
    """With JAX's float32 default (a user's program), the maps still give float64 weights:
    ``jax.device_put`` of a float64 array there truncated the twin to float32, a relative
    function gap of 4.6e-8 at the bench's size that grew with the learned mode (the bench's
    twin-vs-attention loss gap of 6.8e-10 after 20 steps)."""
    data, att, zd = problem
    W1, W2 = merged_to_twin(att)
    assert np.asarray(W1.W).dtype == np.float64 and np.asarray(W2.W).dtype == np.float64
    back = twin_to_merged((W1, W2), N)
    assert np.asarray(back.KQ).dtype == np.float64 and np.array_equal(np.asarray(back.KQ), np.asarray(att.KQ))
    f = np.asarray(bf.forward((att,), data.X, 0.0))
    g = np.asarray(bf.forward((W1, W2), zd.X, 1.0))
    assert np.max(np.abs(f - g)) <= 4 * K_SUM * EPS * np.max(np.abs(f))  # as on the manifold above


def test_separate_is_merged_with_product(problem):
    data, _, _ = problem
    sep = init_attention(jax.random.PRNGKey(2), D, H, N, 0.3, rank=2, blocks="all")
    assert isinstance(sep, SeparateAttention)
    f = np.asarray(bf.forward((sep,), data.X, 0.0))
    g = np.asarray(bf.forward((sep.merged,), data.X, 0.0))
    np.testing.assert_allclose(f, g, rtol=0, atol=8 * K_SUM * EPS * np.abs(f).max())


def _curves(att, data, zd, opt, steps=STEPS, twin_opt=None):
    a = bf.train((att,), data, opt, steps=steps, n_records=steps + 1, observables="loss")
    t = bf.train(merged_to_twin(att), zd, twin_opt or opt, steps=steps, n_records=steps + 1,
                 observables="loss", alpha=1.0)
    return np.asarray(a.loss), np.asarray(t.loss), a.params[0]


def test_lockstep_gd(problem):
    data, att, zd = problem
    La, Lt, final = _curves(att, data, zd, optax.sgd(LR))
    assert La[-1] < 0.5 * La[0]  # it learned
    assert np.max(np.abs(La - Lt) / Lt) <= LOCKSTEP
    assert off_twin(final) <= 1e-15  # the mirror keeps u, b at 0 (round-off of the pair sums)


def test_without_mirror_the_blocks_drift():
    data = in_context_regression(jax.random.PRNGKey(0), S, N, D, mirror=False)
    att = init_attention(jax.random.PRNGKey(1), D, H, N, 0.05)
    r = bf.train((att,), data, optax.sgd(LR), steps=STEPS, n_records=2, observables="loss")
    assert off_twin(r.params[0]) > 1e-4  # measured 4e-3: the even terms no longer average out


def test_lockstep_adam_on_the_manifold(problem):
    """Adam with the off-twin blocks masked: the same Adam on (A, γ) both sides."""
    data, att, zd = problem
    masked = optax.chain(optax.adam(3e-3), optax.stateless(
        lambda u, p: jax.tree_util.tree_map(lambda a, m: a * m, u, twin_mask(p))))
    La, Lt, final = _curves(att, data, zd, masked, twin_opt=optax.adam(3e-3))
    assert La[-1] < 0.5 * La[0]
    assert np.max(np.abs(La - Lt) / Lt) <= LOCKSTEP
    assert off_twin(final) == 0.0


def test_plain_adam_leaves_the_manifold(problem):
    """Measured, the reason for the mask: the pair sums cancel to round-off (~1e-17), Adam
    divides by √v + ε and moves u, b by ~η, and u bᵀ is an extra head on z that grows."""
    data, att, zd = problem
    La, Lt, final = _curves(att, data, zd, optax.adam(3e-3))
    assert off_twin(final) > 1e-3
    assert np.max(np.abs(La - Lt) / Lt) > 1e3 * LOCKSTEP


@pytest.mark.parametrize("control", ["transposed map", "z without 1/N"])
def test_failing_controls(problem, control):
    data, att, zd = problem
    W1, W2 = merged_to_twin(att)
    if control == "transposed map":
        A = np.asarray(W1.W).reshape(H, D, D).transpose(0, 2, 1)
        twin, zd2 = (Layer(jnp.asarray(A.reshape(H, -1))), W2), zd
    else:
        twin = (W1, W2)
        zd2 = bf.Dataset(np.asarray(_cubic_features(jnp.asarray(data.X), N, per_token=1.0)), data.Y)
    La = np.asarray(bf.train((att,), data, optax.sgd(LR), steps=STEPS, n_records=STEPS + 1,
                             observables="loss").loss)
    lr = LR if control == "transposed map" else LR / N**2  # a stable step for the N-fold feature
    Lt = np.asarray(bf.train(twin, zd2, optax.sgd(lr), steps=STEPS, n_records=STEPS + 1,
                             observables="loss", alpha=1.0).loss)
    assert np.max(np.abs(La - Lt) / Lt) > 1e-3


def test_trainer_refuses_matrix_records(problem):
    data, att, _ = problem
    with pytest.raises(ValueError, match="observables='loss'"):
        bf.train((att,), data, optax.sgd(LR), steps=2)
    with pytest.raises(TypeError, match="not a linear map"):
        _ = att.matrix


def test_shape_checks():
    V = jnp.zeros((2, 4, 4))
    with pytest.raises(ValueError, match="KQ"):
        bf.train((MergedAttention(V, jnp.zeros((2, 3, 3)), n_ctx=4),),
                 in_context_regression(jax.random.PRNGKey(0), 4, 4, 3), optax.sgd(LR), steps=1,
                 observables="loss")


def _definition(att, X, include_query: bool) -> tuple[np.ndarray, np.ndarray]:
    """ŷ of a merged layer by its definition in NumPy float64 (the sum over the N context tokens,
    and over the query's own token with ``include_query``), and the sum of its terms' magnitudes."""
    E = np.asarray(X, float).reshape(len(X), N + 1, D + 1)
    C = E if include_query else E[:, :N]
    V, KQ = np.asarray(att.V, float)[:, D, :], np.asarray(att.KQ, float)
    ops = (V, C, C, KQ, E[:, N])
    f = np.einsum("hd,snd,sne,hef,sf->s", *ops) / N
    return f, np.einsum("hd,snd,sne,hef,sf->s", *(np.abs(a) for a in ops)) / N


K_TERM = 3 * (D + 1) + N + 1 + H + 5
"""The longest chain of operations in one term of ŷ (three contractions over D + 1, ≤ N + 1
tokens, H heads, four multiplications and the 1/N): any order of summing lies within γ_K Σ|terms|."""


@pytest.mark.parametrize("include_query", [False, True])
def test_forward_with_and_without_the_query_term(problem, include_query):
    """include_query=True sums over every token, the query's own included (Zhang et al.'s
    convention), still divided by N: the layer equals its definition to 2γ_K Σ|terms| (both orders
    of the same sums); the other setting differs by the query's term (off the manifold)."""
    data, _, _ = problem
    att = init_attention(jax.random.PRNGKey(3), D, H, N, 0.5, blocks="all", include_query=include_query)
    assert att.include_query is include_query
    f = np.asarray(bf.forward((att,), data.X, 0.0))[:, 0]
    want, size = _definition(att, data.X, include_query)
    gamma = K_TERM * EPS / 2 / (1 - K_TERM * EPS / 2)
    assert np.all(np.abs(f - want) <= 2 * gamma * size)
    other, _ = _definition(att, data.X, not include_query)  # the failing control: the query's term
    assert np.max(np.abs(f - other)) > 1e6 * np.max(2 * gamma * size)


@pytest.mark.parametrize("include_query", [False, True])
def test_twin_identity_with_the_query_term(problem, include_query):
    """On the twin's manifold (u_h = b_h = 0) the query's term (1/N)(u_hᵀx_q)(x_qᵀA_h x_q) is 0:
    the layer is W₂W₁z with the same z and map either way (docs/theory.md §10.2); off it, not."""
    data, _, zd = problem
    att = init_attention(jax.random.PRNGKey(1), D, H, N, 0.05, include_query=include_query)
    f = np.asarray(bf.forward((att,), data.X, 0.0))
    g = np.asarray(bf.forward(merged_to_twin(att), zd.X, 1.0))
    scale = np.max(np.abs(f))
    assert np.max(np.abs(f - g)) <= 4 * K_SUM * EPS * scale  # two orders of the same sums
    back = twin_to_merged(merged_to_twin(att), N, include_query=include_query)
    assert back.include_query is include_query and np.array_equal(np.asarray(back.KQ), np.asarray(att.KQ))
    off = init_attention(jax.random.PRNGKey(1), D, H, N, 0.05, blocks="all", include_query=include_query)
    assert np.max(np.abs(np.asarray(bf.forward((off,), data.X, 0.0)) - g)) > 1e3 * 4 * K_SUM * EPS * scale


def test_lockstep_gd_with_the_query_term(problem):
    """The query's term adds (1/N) x_q(x_qᵀA_h x_q) to u_h's gradient, which has no y: on mirrored
    data it cancels pair by pair as the rest, so GD stays on the twin at every step."""
    data, _, zd = problem
    att = init_attention(jax.random.PRNGKey(1), D, H, N, 0.05, include_query=True)
    La, Lt, final = _curves(att, data, zd, optax.sgd(LR))
    assert La[-1] < 0.5 * La[0]
    assert np.max(np.abs(La - Lt) / Lt) <= LOCKSTEP + K_SUM * EPS  # one more token in G's sum
    assert off_twin(final) <= 1e-15


@pytest.mark.x64_off
def test_attention_computes_in_float64_outside_x64(problem):
    """apply, linear and merged compute in float64 on float64 inputs whatever JAX's default
    (before: float32, 9.8e-8 relative off): equal to the NumPy float64 definition within
    2γ_K Σ|terms|, where float32 would be ~1e8 times further."""
    data, _, _ = problem
    X = np.asarray(data.X, np.float64)
    gamma = K_TERM * EPS / 2 / (1 - K_TERM * EPS / 2)
    att = init_attention(jax.random.PRNGKey(3), D, H, N, 0.5, blocks="all")
    for f in (att.apply(X), att.linear(X)):
        assert np.asarray(f).dtype == np.float64
        want, size = _definition(att, X, False)
        assert np.all(np.abs(np.asarray(f)[:, 0] - want) <= 2 * gamma * size)
    sep = init_attention(jax.random.PRNGKey(2), D, H, N, 0.3, rank=2, blocks="all")
    m = sep.merged
    assert np.asarray(m.KQ).dtype == np.float64
    K, Q = np.asarray(sep.K, float), np.asarray(sep.Q, float)
    # K_hᵀQ_h: r = 2 terms per entry, within γ_2 of its magnitudes' sum
    np.testing.assert_array_less(np.abs(np.asarray(m.KQ) - np.einsum("hrd,hre->hde", K, Q)),
                                 2 * 2 * EPS * np.einsum("hrd,hre->hde", np.abs(K), np.abs(Q)) + 1e-300)
    want, size = _definition(m, X, False)
    assert np.all(np.abs(np.asarray(sep.apply(X))[:, 0] - want) <= 4 * gamma * size)  # + the merge's γ_2


def test_twin_map_trains_at_slope_one_only(problem):
    """merged_to_twin's layers are a linear net's: the map sets the slope (bf.train with no α, a
    Member with none and a config whose α was left at its default train at 1, equal to the run at
    alpha=1.0 bitwise: the same code path), and bf.train refuses another, given, which would
    silently train a ReLU net on z (before: a 0.52 of L(0) gap, no warning)."""
    _, att, zd = problem
    twin = merged_to_twin(att)
    for kw in ({"alpha": 0.0}, {"alpha": np.array([1.0, 0.5])}):
        with pytest.raises(ValueError, match=r"linear twin \(merged_to_twin\).*pass alpha=1\.0"):
            bf.train(twin, zd, optax.sgd(LR), steps=2, observables="loss", **kw)
    with pytest.raises(ValueError, match="pass alpha=1.0"):
        bf.train({"twin": bf.Member(twin, alpha=0.0)}, zd, bf.GDConfig(lr=LR, steps=2))
    named = [bf.train({"twin": bf.Member(twin, **kw)}, zd, bf.GDConfig(lr=LR, steps=2))["twin"].loss
             for kw in ({}, {"alpha": 1.0})]  # a Member of the twin's layers: α from the map too
    np.testing.assert_array_equal(*named)
    assert bf.Member(bf.init_gaussian(jax.random.PRNGKey(0), (3, 2, 1), 0.1)).alpha == 0.0  # a plain net: 0
    r = bf.train(twin, zd, optax.sgd(LR), steps=2, observables="loss", alpha=1.0)
    assert isinstance(r.params[0], Layer) and np.all(np.isfinite(r.loss))
    d = bf.train(twin, zd, optax.sgd(LR), steps=2, observables="loss")  # α from the map
    np.testing.assert_array_equal(d.loss, r.loss)
    net = bf.init_gaussian(jax.random.PRNGKey(0), (zd.X.shape[1], 3, 1), 0.3)
    relu = [bf.train(net, zd, optax.sgd(LR), steps=2, observables="loss", **kw).loss
            for kw in ({}, {"alpha": 0.0})]
    np.testing.assert_array_equal(*relu)  # a plain net keeps the default slope (the map sets only its own)
    # a config's α left unset: 1 for the twin (bitwise the config at 1.0), 0 for a plain net; given 0: refused
    cfgs = [bf.GDConfig(lr=LR, steps=2), bf.GDConfig(lr=LR, steps=2, alpha=1.0)]
    np.testing.assert_array_equal(*[bf.train(twin, zd, c, observables="loss").loss for c in cfgs])
    adam = [bf.TrainConfig(optimiser=optax.adam(1e-3), steps=2, **kw) for kw in ({}, {"alpha": 1.0})]
    np.testing.assert_array_equal(*[bf.train(twin, zd, c, observables="loss").loss for c in adam])
    with pytest.raises(ValueError, match="pass alpha=1.0"):
        bf.train(twin, zd, bf.GDConfig(lr=LR, steps=2, alpha=0.0))
    plain = [bf.train(net, zd, bf.GDConfig(lr=LR, steps=2, **kw), observables="loss").loss
             for kw in ({}, {"alpha": 0.0})]
    np.testing.assert_array_equal(*plain)
    assert bf.GDConfig() == bf.GDConfig(alpha=0.0) and repr(bf.GDConfig().alpha) == "0.0"  # 0 in every use


def test_weights_as_strings_refused(problem):
    data, _, _ = problem
    with pytest.raises(TypeError, match=r"model\.V='abc' must be an array of real numbers, not str"):
        bf.analyse(MergedAttention("abc", "def", n_ctx=N), data)


DIVISOR = {"n": N, "none": 1, "n+1": N + 1}
"""The normaliser c of each ``norm`` for this N (core/attention.py module doc)."""


@pytest.mark.parametrize("norm", ["none", "n+1"])
def test_forward_with_each_normaliser(problem, norm):
    """norm divides the context sum by c = 1 (the authors' code's default) or N + 1 (their
    vary_len): the layer equals its definition with 1/c to 2γ_K Σ|terms|; read with 1/N it is
    N/c times off (the failing control)."""
    data, _, _ = problem
    att = init_attention(jax.random.PRNGKey(3), D, H, N, 0.5, blocks="all", include_query=True, norm=norm)
    assert att.norm == norm and att.divisor == DIVISOR[norm]
    f = np.asarray(bf.forward((att,), data.X, 0.0))[:, 0]
    want, size = _definition(att, data.X, True)
    want, size = want * N / DIVISOR[norm], size * N / DIVISOR[norm]  # the definition with 1/c
    # the rescaling by N/c adds one rounding to the definition's chain: K_TERM + 1
    gamma = (K_TERM + 1) * EPS / 2 / (1 - (K_TERM + 1) * EPS / 2)
    assert np.all(np.abs(f - want) <= 2 * gamma * size)
    default, _ = _definition(att, data.X, True)  # the failing control: the sum divided by N
    assert np.max(np.abs(f - default)) > 1e6 * np.max(2 * gamma * size)


@pytest.mark.parametrize("norm", ["none", "n+1"])
def test_twin_identity_with_each_normaliser(problem, norm):
    """The twin's feature carries the layer's 1/c, z = vec((1/c) Σ_n y_n x_n x_qᵀ), and the map is
    the same (docs/theory.md §10.2): model == twin on the data at round-off. The failing control:
    the twin on the default feature (1/N), the wrong normaliser, is N/c times off."""
    data, _, _ = problem
    att = init_attention(jax.random.PRNGKey(1), D, H, N, 0.05, include_query=True, norm=norm)
    zd = twin_dataset(data, N, norm=norm)
    f = np.asarray(bf.forward((att,), data.X, 0.0))
    g = np.asarray(bf.forward(merged_to_twin(att), zd.X, 1.0))
    scale = np.max(np.abs(f))
    bound = 4 * (K_SUM + 1) * EPS * scale  # two orders of the same sums (+ the query's token in G)
    assert np.max(np.abs(f - g)) <= bound
    back = twin_to_merged(merged_to_twin(att), N, include_query=True, norm=norm)
    assert back.norm == norm and np.array_equal(np.asarray(back.KQ), np.asarray(att.KQ))
    wrong = np.asarray(bf.forward(merged_to_twin(att), twin_dataset(data, N).X, 1.0))
    assert np.max(np.abs(f - wrong)) > 1e3 * bound  # measured |1 − c/N| max|f|: 0.875, 0.125
    with pytest.raises(ValueError, match=r"norm='N': choose one of n, none, n\+1"):
        twin_dataset(data, N, norm="N")
    with pytest.raises(ValueError, match=r"model\.norm='N': choose one of n, none, n\+1"):
        bf.analyse(MergedAttention(att.V, att.KQ, n_ctx=N, norm="N"), data)


@pytest.mark.parametrize("norm", ["none", "n+1"])
def test_lockstep_gd_with_each_normaliser(problem, norm):
    """With 1/c in z and the same map, the loss is one function of (A, γ) on both sides, so GD
    moves them in lockstep at round-off. The failing control is the other way to carry 1/c: the
    default z (1/N) with W₁ scaled by N/c computes the same function at t = 0 but GD steps A by
    (c/N)² as far (docs/theory.md §10.2), and the curves part."""
    data, _, _ = problem
    att = init_attention(jax.random.PRNGKey(1), D, H, N, 0.05, include_query=True, norm=norm)
    zd = twin_dataset(data, N, norm=norm)
    lr = LR * DIVISOR[norm] / N  # the escape from the plateau as fast as at c = N (rate ∝ lr N/c)
    La, Lt, final = _curves(att, data, zd, optax.sgd(lr))
    assert La[-1] < 0.5 * La[0]  # it learned
    assert np.max(np.abs(La - Lt) / Lt) <= LOCKSTEP + K_SUM * EPS  # one more token in G's sum
    assert off_twin(final) <= 1e-15
    W1, W2 = merged_to_twin(att)
    scaled = (Layer(W1.W * (N / DIVISOR[norm])), W2)
    Ls = np.asarray(bf.train(scaled, twin_dataset(data, N), optax.sgd(lr), steps=STEPS, n_records=STEPS + 1,
                             observables="loss", alpha=1.0).loss)
    assert abs(Ls[0] - La[0]) / La[0] <= 4 * (K_SUM + 2) * EPS  # the same function at t = 0 …
    assert np.max(np.abs(La - Ls) / Ls) > 1e-3  # … not the same training
