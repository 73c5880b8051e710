"""Training conv nets (docs/theory.md §7): pair channels stay exactly linear under GD and
follow the linear conv twin (weights × √c, lr × c) to round-off; the mirrored fast path,
ensembles and gradient flow take conv layers.

Round-off of a trajectory: each step's gradient is a sum of n products computed in a
different order on the two paths, relative error ≤ γ_n; at a stable step size GD does not
amplify a perturbation (it contracts the learned directions and keeps the others), so K
steps differ by at most K γ_n times the size of the parameters / losses involved.
"""

import dataclasses

import jax
import numpy as np
import pytest

import biasfree as bf
from tests.roundoff import gamma

pytestmark = pytest.mark.numerics  # round-off bounds: make test-portable reruns them

LENGTH, C, STEPS = 8, 4, 300


@pytest.fixture(scope="module")
def sym_data():
    """Symmetric 1-D signals [X₊; -X₊] (12 of length 8), a linear teacher plus a |·| part."""
    rng = np.random.default_rng(0)
    Xp = rng.normal(size=(6, LENGTH))
    Yp = Xp @ rng.normal(size=(LENGTH, 1)) / np.sqrt(LENGTH) + 0.3 * np.abs(Xp[:, :1])
    return bf.Dataset(*bf.symmetrize(Xp, Yp))


def _n(net):
    return max(max(la.n_in, la.n_out) for la in net)


@pytest.mark.parametrize("alpha", [0.0, 0.5])
def test_pair_channels_train_like_the_linear_conv_twin(sym_data, alpha):
    """Pair channels: f_even ≡ 0 before and after GD, the pairing kept, and the run equals
    the linear twin's (√c · weights, α = 1) with lr × c (§7, §2.3–2.4)."""
    pair = bf.init_conv(jax.random.PRNGKey(1), (LENGTH,), (1, C), 3, scale=0.3, pairs=True)
    c, eta = bf.nets.slope_factor(alpha), 0.05
    cfg = bf.GDConfig(alpha=alpha, lr=eta, steps=STEPS, n_records=31)
    leaky = bf.train(pair, sym_data, cfg)
    twin = bf.train(bf.linear_twin(pair, alpha), sym_data, dataclasses.replace(cfg, alpha=1.0, lr=eta * c))
    L = np.asarray(leaky.loss)
    assert L[-1] < 0.5 * L[0]  # it learns, so agreement is not trivial
    bound = STEPS * gamma(_n(pair)) * L[0]  # K γ_n × the loss scale (module doc)
    assert np.max(np.abs(L - np.asarray(twin.loss))) <= bound
    K, Kt = np.asarray(leaky.params[0].K), np.asarray(twin.params[0].K)
    theta = np.max(np.abs(Kt))
    assert np.max(np.abs(np.sqrt(c) * K - Kt)) <= STEPS * gamma(_n(pair)) * theta
    # the pairing is kept: the sign-flipped partners get sign-flipped gradients each step
    assert np.max(np.abs(K[C // 2:] + K[:C // 2])) <= STEPS * gamma(_n(pair)) * np.max(np.abs(K))
    # f_even ≡ 0 at every record: a cancellation of O(|f|) sums, so ⟨f_even²⟩ ≤ (γ_n |f|)² × K²
    E = np.asarray(leaky.even_energy)
    F = np.max(np.abs(np.asarray(bf.forward(leaky.params, sym_data.X, alpha))))
    assert E[0] <= (gamma(_n(pair)) * F) ** 2 and np.max(E) <= (STEPS * gamma(_n(pair)) * F) ** 2
    assert np.max(np.abs(np.asarray(bf.nets.even_part(leaky.params, sym_data.X, alpha)))) <= \
        STEPS * gamma(_n(pair)) * F


def test_mirrored_path_equals_general_path(sym_data):
    """A random (unpaired) conv net with a pooled readout: the mirrored fast path (one
    convolution for both halves) gives the general path's run to round-off."""
    net = bf.init_conv(jax.random.PRNGKey(2), (LENGTH,), (1, C), 3, scale=0.5, readout="pool")
    full = bf.Dataset(sym_data.X, sym_data.Y, mirror=False)
    assert sym_data.mirrored and not full.mirrored
    cfg = bf.GDConfig(alpha=0.2, lr=0.05, steps=100, n_records=11)
    a, b = bf.train(net, sym_data, cfg), bf.train(net, full, cfg)
    L = np.asarray(a.loss)
    assert np.max(np.abs(L - np.asarray(b.loss))) <= 100 * gamma(_n(net)) * L[0]  # K γ_n L(0)
    assert np.max(np.abs(np.asarray(a.params[0].K) - np.asarray(b.params[0].K))) <= \
        100 * gamma(_n(net)) * np.max(np.abs(np.asarray(a.params[0].K)))


def test_conv_ensemble_equals_single_runs(sym_data):
    """train(batched=True) over a leading axis of conv kernels (from jax.vmap(init_conv)) and
    over α: each member equals its own single run, to round-off."""
    keys = jax.random.split(jax.random.PRNGKey(3), 2)
    batch = jax.vmap(lambda k: bf.init_conv(k, (LENGTH,), (1, C), 3, scale=0.5))(keys)
    assert batch[0].K.shape == (2, C, 1, 3) and batch[0].batch_ndim == 1
    cfg = bf.GDConfig(alpha=0.0, lr=0.05, steps=50, n_records=6)
    alphas = np.array([0.0, 0.5])
    ens = bf.train(batch, sym_data, cfg, alpha=alphas, batched=True, layout="map")
    for i in range(2):
        one = jax.tree_util.tree_map(lambda x, i=i: x[i], batch)
        single = bf.train(one, sym_data, dataclasses.replace(cfg, alpha=float(alphas[i])))
        L = np.asarray(single.loss)
        assert np.max(np.abs(np.asarray(ens.loss[i]) - L)) <= 50 * gamma(_n(one)) * L[0]  # K γ_n L(0)
    with pytest.raises(ValueError, match="leading ensemble axis"):
        bf.train(one, sym_data, cfg, batched=True)


def test_flow_conserves_per_channel_balance(sym_data):
    """Gradient flow on a conv net: ||k_c||² − ||readout columns of channel c||² is
    conserved per channel (the rescaling symmetry of §4.2 moves whole channels, §7)."""
    net = bf.init_conv(jax.random.PRNGKey(4), (LENGTH,), (1, C), 3, scale=0.5)
    rtol = atol = 1e-9
    tr = bf.flow(net, sym_data, bf.FlowConfig(alpha=0.3, t_max=2.0, n_records=3, rtol=rtol, atol=atol))
    q = np.asarray(tr.conserved[0])
    assert q.shape == (3, C)
    assert float(tr.loss[-1]) < float(tr.loss[0])
    # the solver's local error per step ≤ rtol|θ| + atol, summed over its accepted steps
    theta = max(float(np.max(np.abs(np.asarray(x)))) for x in jax.tree_util.tree_leaves(tr.params))
    bound = int(tr.stats["accepted"]) * (rtol * theta + atol) * 4 * theta  # d(θ²) = 2θ dθ, two terms
    assert np.max(np.abs(q - q[0])) <= bound
