"""The 0.1 training entry points kept for one release (biasfree.dynamics.legacy): each warns
with a DeprecationWarning naming the call to use, and returns bitwise what that call does."""

import jax
import numpy as np
import optax
import pytest

import biasfree as bf
from biasfree.dynamics.legacy import train_with_twin
from biasfree.dynamics.trajectory import PairedRun

D, N_HALF = 3, 10


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(N_HALF, D))
    return bf.Dataset(*bf.symmetrize(X, np.tanh(X @ rng.normal(size=(D, 1)))))


def _net(seed, widths=(D, 4, 1)):
    rng = np.random.default_rng(seed)
    shapes = zip(widths[:-1], widths[1:], strict=True)
    return bf.from_arrays([0.5 * rng.normal(size=(o, i)) for i, o in shapes])


def _assert_same(a, b):
    """Every array of two results (Trajectories, PairedRuns: any pytree) equal bitwise."""
    la, lb = jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)
    assert len(la) == len(lb)
    for x, y in zip(la, lb, strict=True):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


CFG = bf.GDConfig(alpha=0.3, lr=0.05, steps=40, n_records=5)


def test_gd_warns_and_is_train(data):
    net = _net(1)
    with pytest.warns(DeprecationWarning, match=r"biasfree\.train\(params, data, cfg\)"):
        old = bf.gd(net, data, CFG)
    _assert_same(old, bf.train(net, data, CFG))


def test_gd_ensemble_warns_and_is_train_batched(data):
    batch = jax.tree_util.tree_map(lambda *a: np.stack(a), _net(2), _net(3))
    alphas, lrs, wds = np.array([0.0, 0.5]), np.array([0.05, 0.02]), np.array([0.0, 0.01])
    with pytest.warns(DeprecationWarning, match=r"biasfree\.train\(.*batched=True\)"):
        old = bf.gd_ensemble(batch, data, CFG, alpha=alphas, lr=lrs, weight_decay=wds)
    _assert_same(old, bf.train(batch, data, CFG, alpha=alphas, lr=lrs, weight_decay=wds, batched=True))
    net = _net(4)  # shared params, one override: batched_params=False is train's default
    with pytest.warns(DeprecationWarning, match=r"biasfree\.train"):
        old = bf.gd_ensemble(net, data, CFG, alpha=[0.0, 1.0], batched_params=False)
    _assert_same(old, bf.train(net, data, CFG, alpha=np.array([0.0, 1.0])))


def test_gd_members_warns_and_is_train_of_members(data):
    members = {"a": bf.Member(_net(5), alpha=0.2, twin=True), "b": bf.Member(_net(6), alpha=0.0, lr=0.02)}
    with pytest.warns(DeprecationWarning, match=r"biasfree\.train\(members, data, cfg\)"):
        old = bf.gd_members(members, data, CFG)
    new = bf.train(members, data, CFG)
    assert sorted(old) == sorted(new) == sorted(members)
    for name in members:
        _assert_same(old[name], new[name])
    _assert_same(old.twin("a"), new.twin("a"))


def test_train_with_twin_warns_and_is_train_with_twin(data):
    net = _net(7)
    twin = bf.linear_twin(net, 0.0)
    X, Y = np.asarray(data.X), np.asarray(data.Y)
    new_call = r"biasfree\.train\(params, data, GDConfig\(\.\.\.\), twin=twin\)"
    with pytest.warns(DeprecationWarning, match=new_call):
        old = train_with_twin(net, twin, X, Y, alpha=0.0, lr=0.05, time_scale=0.5, steps=40, n_records=5,
                              weight_decay=0.01)
    cfg = bf.GDConfig(alpha=0.0, lr=0.05, steps=40, n_records=5, weight_decay=0.01)
    traj = bf.train(net, bf.Dataset(X, Y), cfg, twin=twin, observables="loss")
    new = PairedRun.of(traj, bf.dynamics.record_steps(40, 5))
    assert isinstance(old, PairedRun)
    for field in ("steps", "gap_max", "gap_step"):
        assert getattr(old, field) == getattr(new, field), field
    for field in ("k", "loss", "twin_loss", "even_energy", "params", "twin"):
        _assert_same(getattr(old, field), getattr(new, field))
    with pytest.warns(DeprecationWarning), pytest.raises(ValueError, match="time_scale=0.3.*twin=..."):
        train_with_twin(net, twin, X, Y, alpha=0.0, lr=0.05, time_scale=0.3, steps=40)


def test_optax_config_warns_and_is_a_train_config():
    opt = optax.adam(1e-2)
    new_call = r"biasfree\.TrainConfig\(optimiser=optimiser, steps=\.\.\.\)"
    with pytest.warns(DeprecationWarning, match=new_call):
        old = bf.OptaxConfig(opt, steps=30, batch_size=4, seed=2, name="adam")
    assert old == bf.TrainConfig(optimiser=opt, steps=30, batch_size=4, seed=2, name="adam", n_records=201)
    assert isinstance(old, bf.TrainConfig)


def test_train_optax_warns_and_equals_the_trainer():
    """0.1's train_optax (now in dynamics.legacy): a thin wrapper of train(..., twin=...)."""
    import jax
    import optax

    from biasfree.dynamics.legacy import train_optax

    key = jax.random.PRNGKey(0)
    data = bf.make_dataset(key, bf.sine_target(key, d=3)[0], n=20, d=3)
    net = bf.pair_up(bf.init_gaussian(key, (3, 4, 1), scale=0.1))
    cfg = bf.TrainConfig(optimiser=lambda rho: optax.adam(1e-3, eps=1e-8 * rho), steps=20, n_records=5)
    twin = bf.linear_twin(net, 0.0)
    with pytest.warns(DeprecationWarning, match=r"biasfree\.train\(params, data"):
        run, t = train_optax(net, twin, 0.0, data.X, data.Y, cfg)
    new = bf.train(net, bf.Dataset(data.X, data.Y), cfg, twin=twin, observables="loss")
    assert np.array_equal(run.loss, new.loss) and np.array_equal(run.twin_loss, new.twin.loss)
    assert run.gap_max == float(new.twin_gap) and np.array_equal(t, new.t)
