"""Net and twin trained side by side: the mirrored path and the batched loop give the same
gap as the general, one-net-at-a-time path, to round-off."""

import jax
import numpy as np
import pytest
from roundoff import chain_length, loss_eval_gap, trajectory_gap

from biasfree.dynamics.twin_training import gaps_batched, mirrored_half, train_with_twin
from biasfree.nets import Layer

pytestmark = pytest.mark.numerics  # round-off bounds: make test-portable reruns them


def _net(rng, widths, scale):
    return tuple(Layer(scale * rng.normal(size=(o, i))) for i, o in zip(widths[:-1], widths[1:], strict=True))


def _data(rng, n=12, d=3):
    X = rng.normal(size=(n, d))
    X = np.vstack([X, -X])
    return X, X[:, :1] + np.sin(2 * X[:, 1:2])


def test_mirrored_half_is_found_only_for_exact_mirrors():
    X, _ = _data(np.random.default_rng(0))
    assert np.array_equal(mirrored_half(X), X[:12])
    assert mirrored_half(X[np.r_[0:24:2, 1:24:2]]) is None  # the same multiset interleaved: general path
    Y = X.copy()
    Y[-1, 0] = np.nextafter(Y[-1, 0], 1.0)
    assert mirrored_half(Y) is None and mirrored_half(X[:5]) is None


def test_mirrored_path_trains_as_the_general_path():
    rng = np.random.default_rng(1)
    X, Y = _data(rng)
    order = np.r_[0:24:2, 1:24:2]  # interleaved: not [X₊; −X₊], so the general path runs
    for widths in ((3, 6, 1), (3, 5, 5, 1)):
        net = _net(rng, widths, 0.3)
        twin = tuple(Layer(0.5 * np.asarray(la.W)) for la in net)
        a, b = (train_with_twin(net, twin, X[o], Y[o], alpha=0.0, lr=0.05, time_scale=0.5, steps=50,
                                n_records=6) for o in (slice(None), order))
        # same sums in another order (and the mirrored path's σ(-z) = σ(z) - (1+α)z: factor 3):
        # trajectory_gap, 50 steps at γ of the gradient's chain length, amplified by the run's
        # measured sensitivity to its init (net and twin both moved); a path that trains
        # another function differs by O(L)
        def run(pq, o=order):
            r = train_with_twin(pq[0], pq[1], X[o], Y[o], alpha=0.0, lr=0.05, time_scale=0.5, steps=50,
                                n_records=6)
            return {"loss": r.loss, "twin_loss": r.twin_loss, "gap": np.asarray(r.gap_max)}
        tol = trajectory_gap(run, (net, twin), 50, chain_length(net, 24), factor=3)
        np.testing.assert_array_less(np.abs(a.loss - b.loss), tol["loss"] + 1e-300)
        np.testing.assert_array_less(np.abs(a.twin_loss - b.twin_loss), tol["twin_loss"] + 1e-300)
        assert abs(a.gap_max - b.gap_max) <= tol["gap"] and a.gap_step == b.gap_step


@pytest.mark.parametrize("decay", [0.0, 0.05, (0.0, 0.05, 0.01)])  # one λ, or one per member; twin λ/k_t
def test_batched_gaps_equal_one_at_a_time(decay):
    rng = np.random.default_rng(2)
    nets, twins, Xs, Ys = [], [], [], []
    lrs, steps = [0.05, 0.02, 0.08], [40, 65, 7]
    for _ in lrs:
        X, Y = _data(rng)
        net = _net(rng, (3, 6, 1), 0.2)
        nets.append(net)
        twins.append(tuple(Layer(np.sqrt(0.5) * np.asarray(la.W)) for la in net))
        Xs.append(X)
        Ys.append(Y)
    decays = np.broadcast_to(decay, (3,))
    alone = [train_with_twin(p, q, X, Y, alpha=0.0, lr=lr, time_scale=0.5, steps=k, n_records=2,
                             weight_decay=lam)
             for p, q, X, Y, lr, k, lam in zip(nets, twins, Xs, Ys, lrs, steps, decays, strict=True)]

    def stack(ps):
        return tuple(Layer(np.stack([np.asarray(p[i].W) for p in ps])) for i in range(2))

    tols = {}
    for compact in (False, True):  # finished members dropped between chunks, or carried along
        gap, step, L0 = gaps_batched(stack(nets), stack(twins), np.stack(Xs), np.stack(Ys), alpha=0.0,
                                     lr=lrs, time_scale=0.5, steps=steps, weight_decay=decay, chunk=16,
                                     compact=compact)
        for b, run in enumerate(alone):
            # the same GD on the same path; vmap may change the kernels' summation order:
            # trajectory_gap over this member's steps (mirrored path: factor 3), and for the
            # initial loss one evaluation, loss_eval_gap
            k = chain_length(nets[b], 24)
            def gap_run(pq, b=b):
                return np.asarray(train_with_twin(pq[0], pq[1], Xs[b], Ys[b], alpha=0.0, lr=lrs[b],
                                                  time_scale=0.5, steps=steps[b], n_records=2,
                                                  weight_decay=decays[b]).gap_max)
            if b not in tols:
                tols[b] = trajectory_gap(gap_run, (nets[b], twins[b]), steps[b], k, factor=3)
            tol = tols[b]
            assert abs(gap[b] - run.gap_max) <= tol
            path = jax.tree_util.tree_map(lambda a: np.asarray(a)[None], nets[b])
            l0_tol = loss_eval_gap(path, Xs[b], Ys[b], [run.loss[0]], k)[0]
            assert step[b] == run.gap_step and abs(L0[b] - run.loss[0]) <= l0_tol
