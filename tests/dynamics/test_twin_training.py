"""Net and twin trained side by side: the mirrored path and the batched loop give the same
gap as the general, one-net-at-a-time path, to round-off."""

import numpy as np

from biasfree import Layer
from biasfree.dynamics.twin_training import gaps_batched, mirrored_half, train_with_twin

EPS = float(np.finfo(float).eps)


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
        # same sums in another order and first-layer product: each step's loss differs by a few
        # γ_N (N = 24 rows), grown over K = 50 steps by a condition factor ~10: 50 × 24 ε × 10 ≈ 3e-12
        tol = 50 * 24 * EPS * 10
        np.testing.assert_allclose(a.loss, b.loss, rtol=tol, atol=0)
        np.testing.assert_allclose(a.twin_loss, b.twin_loss, rtol=tol, atol=0)
        assert abs(a.gap_max - b.gap_max) <= tol * a.loss[0] and a.gap_step == b.gap_step


def test_batched_gaps_equal_one_at_a_time():
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
    alone = [train_with_twin(p, q, X, Y, alpha=0.0, lr=lr, time_scale=0.5, steps=k, n_records=2)
             for p, q, X, Y, lr, k in zip(nets, twins, Xs, Ys, lrs, steps, strict=True)]

    def stack(ps):
        return tuple(Layer(np.stack([np.asarray(p[i].W) for p in ps])) for i in range(2))

    for compact in (False, True):  # finished members dropped between chunks, or carried along
        gap, step, L0 = gaps_batched(stack(nets), stack(twins), np.stack(Xs), np.stack(Ys), alpha=0.0,
                                     lr=lrs, time_scale=0.5, steps=steps, chunk=16, compact=compact)
        for b, run in enumerate(alone):
            # the same GD on the same path; vmap may change the kernels' summation order: a few
            # γ_N per step over at most 65 steps, condition factor ~10
            tol = 65 * 24 * EPS * 10
            assert abs(gap[b] - run.gap_max) <= tol * run.loss[0]
            assert step[b] == run.gap_step and abs(L0[b] - run.loss[0]) <= 24 * EPS * 10 * run.loss[0]
