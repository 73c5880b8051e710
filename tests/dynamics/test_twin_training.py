"""Net and twin trained side by side (``train(..., twin=...)``): the mirrored path and the
ensemble loop (members with their own step counts) give the same gap as the general,
one-net-at-a-time path, to round-off."""

import jax
import numpy as np
import pytest
from roundoff import chain_length, loss_eval_gap, trajectory_gap

import biasfree as bf
from biasfree.core.data import mirrored_half
from biasfree.dynamics.trainer import _train
from biasfree.dynamics.trajectory import PairedRun
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


def _paired(net, twin, X, Y, *, lr, steps, n_records, weight_decay=0.0) -> PairedRun:
    """Net (α = 0) and twin trained side by side on (X, Y), as a :class:`PairedRun`."""
    cfg = bf.GDConfig(alpha=0.0, lr=lr, steps=steps, n_records=n_records, weight_decay=weight_decay)
    traj = bf.train(net, bf.Dataset(X, Y), cfg, twin=twin, observables="loss")
    return PairedRun.of(traj, bf.dynamics.record_steps(steps, n_records))


def test_mirrored_path_trains_as_the_general_path():
    rng = np.random.default_rng(1)
    X, Y = _data(rng)
    order = np.r_[0:24:2, 1:24:2]  # interleaved: not [X₊; −X₊], so the general path runs
    for widths in ((3, 6, 1), (3, 5, 5, 1)):
        net = _net(rng, widths, 0.3)
        twin = tuple(Layer(0.5 * np.asarray(la.W)) for la in net)
        a, b = (_paired(net, twin, X[o], Y[o], lr=0.05, steps=50, n_records=6) for o in (slice(None), order))
        # same sums in another order (and the mirrored path's σ(-z) = σ(z) - (1+α)z: factor 3):
        # trajectory_gap, 50 steps at γ of the gradient's chain length, amplified by the run's
        # measured sensitivity to its init (net and twin both moved); a path that trains
        # another function differs by O(L)
        def run(pq, o=order):
            r = _paired(pq[0], pq[1], X[o], Y[o], lr=0.05, steps=50, n_records=6)
            return {"loss": r.loss, "twin_loss": r.twin_loss, "gap": np.asarray(r.gap_max)}
        tol = trajectory_gap(run, (net, twin), 50, chain_length(net, 24), factor=3)
        np.testing.assert_array_less(np.abs(a.loss - b.loss), tol["loss"] + 1e-300)
        np.testing.assert_array_less(np.abs(a.twin_loss - b.twin_loss), tol["twin_loss"] + 1e-300)
        assert abs(a.gap_max - b.gap_max) <= tol["gap"] and a.gap_step == b.gap_step


@pytest.mark.parametrize("decay", [0.0, 0.05, (0.0, 0.05, 0.01)])  # one λ, or one per member; twin λ/k_t
def test_ensemble_gaps_with_own_step_counts_equal_one_at_a_time(decay):
    """An ensemble whose members run their own step counts (trainer._train's ``segments``, as
    the verdict calibration's truth runs them) measures each member's gap over exactly its
    own steps: the gap, its step, L(0) and the records of each member alone."""
    rng = np.random.default_rng(2)
    X, Y = _data(rng)
    nets, twins = [], []
    lrs, steps = [0.05, 0.02, 0.08], [40, 65, 7]
    for _ in lrs:
        net = _net(rng, (3, 6, 1), 0.2)
        nets.append(net)
        twins.append(tuple(Layer(np.sqrt(0.5) * np.asarray(la.W)) for la in net))
    decays = np.broadcast_to(decay, (3,))
    alone = [_paired(p, q, X, Y, lr=lr, steps=k, n_records=3, weight_decay=lam)
             for p, q, lr, k, lam in zip(nets, twins, lrs, steps, decays, strict=True)]

    def stack(ps):
        return tuple(Layer(np.stack([np.asarray(p[i].W) for p in ps])) for i in range(2))

    segments = np.stack([np.diff(bf.dynamics.record_steps(k, 3)) for k in steps])  # each member's own records
    vectors = {"alpha": np.zeros(3), "lr": np.asarray(lrs), "weight_decay": np.asarray(decays, float)}
    # twin=True: the trainer builds each member's twin √c·θ (α = 0: the twins above)
    ens = _train(stack(nets), bf.Dataset(X, Y), bf.GDConfig(lr=1.0, steps=max(steps)), vectors,
                 twin=True, batched=True, observables="loss", segments=segments)
    gap, step = np.asarray(ens.twin_gap), np.asarray(ens.twin_gap_step)
    L0 = np.asarray(ens.loss)[:, 0]
    np.testing.assert_array_equal(np.asarray(ens.stats["steps"]), steps)
    for b, run in enumerate(alone):
        # the same GD on the same path; vmap may change the kernels' summation order:
        # trajectory_gap over this member's steps (mirrored path: factor 3), and for the
        # initial loss one evaluation, loss_eval_gap
        k = chain_length(nets[b], 24)

        def gap_run(pq, b=b):
            r = _paired(pq[0], pq[1], X, Y, lr=lrs[b], steps=steps[b], n_records=3, weight_decay=decays[b])
            return {"gap": np.asarray(r.gap_max), "loss": r.loss, "twin_loss": r.twin_loss}
        tol = trajectory_gap(gap_run, (nets[b], twins[b]), steps[b], k, factor=3)
        assert abs(gap[b] - run.gap_max) <= tol["gap"]
        np.testing.assert_array_less(np.abs(np.asarray(ens.loss)[b] - run.loss), tol["loss"] + 1e-300)
        np.testing.assert_array_less(np.abs(np.asarray(ens.twin.loss)[b] - run.twin_loss),
                                     tol["twin_loss"] + 1e-300)
        path = jax.tree_util.tree_map(lambda a: np.asarray(a)[None], nets[b])
        l0_tol = loss_eval_gap(path, X, Y, [run.loss[0]], k)[0]
        assert step[b] == run.gap_step and abs(L0[b] - run.loss[0]) <= l0_tol


def test_an_ensemble_takes_its_twins_batched():
    """The twins' weights given with the members' leading axis (as the verdict calibration's
    truth runs pass them) train as the twins the trainer builds itself: bitwise the same run."""
    rng = np.random.default_rng(3)
    X, Y = _data(rng)
    nets = [_net(rng, (3, 6, 1), 0.2) for _ in range(2)]
    batch = tuple(Layer(np.stack([np.asarray(n[i].W) for n in nets])) for i in range(2))
    twins = bf.linear_twin(batch, np.zeros(2))
    cfg = bf.GDConfig(alpha=0.0, lr=0.05, steps=20, n_records=3)
    vectors = {"lr": np.array([0.05, 0.02])}
    built = _train(batch, bf.Dataset(X, Y), cfg, vectors, twin=True, batched=True, observables="loss")
    given = _train(batch, bf.Dataset(X, Y), cfg, vectors, twin=twins, batched=True, observables="loss")
    for a, b in zip(jax.tree_util.tree_leaves(built), jax.tree_util.tree_leaves(given), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
