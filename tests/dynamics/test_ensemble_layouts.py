"""Ensemble layouts (biasfree.dynamics.batching.LAYOUTS): every member of an ensemble is the single run with
its own α, learning rate and weight decay, whichever way the members share the machine.

- "map" runs each member with the single run's kernels: bit-for-bit equal results.
- "vmap" batches them: equal to round-off (batched reductions may sum in another order).
- Several host devices (``XLA_FLAGS=--xla_force_host_platform_device_count=2``, set
  before JAX starts, so in a fresh process): members split over the devices by
  ``shard_map``, an odd B padded and trimmed; still bit-for-bit the single runs.
"""

import os
import subprocess
import sys

import jax
import numpy as np
import pytest

import biasfree as bf

pytestmark = pytest.mark.numerics  # round-off bounds: make test-portable reruns them

D, N_HALF, WIDTH, B = 3, 10, 5, 3


def _setup():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(N_HALF, D))
    data = bf.Dataset(*bf.symmetrize(X, np.tanh(X @ rng.normal(size=(D, 1)))))
    Ws = [0.5 * rng.normal(size=(B, WIDTH, D)), 0.5 * rng.normal(size=(B, 1, WIDTH))]
    batch = tuple(bf.nets.Layer(jax.numpy.asarray(W)) for W in Ws)  # leading axis B
    alphas, lrs, wds = np.array([0.0, 0.3, 1.0]), np.array([0.05, 0.1, 0.02]), np.array([0.0, 1e-2, 0.0])
    return data, batch, alphas, lrs, wds


def _singles(data, batch, alphas, lrs, wds, steps):
    out = []
    for i in range(B):
        p = jax.tree_util.tree_map(lambda a, i=i: a[i], batch)
        cfg = bf.GDConfig(alpha=float(alphas[i]), lr=float(lrs[i]), weight_decay=float(wds[i]),
                          steps=steps, n_records=4)
        out.append(bf.train(p, data, cfg))
    return out


@pytest.mark.parametrize("layout", ["map", "vmap"])
def test_ensemble_members_are_single_runs(layout):
    data, batch, alphas, lrs, wds = _setup()
    cfg = bf.GDConfig(steps=100, n_records=4)
    ens = bf.train(batch, data, cfg, alpha=alphas, lr=lrs, weight_decay=wds, batched=True, layout=layout)
    for i, one in enumerate(_singles(data, batch, alphas, lrs, wds, 100)):
        if layout == "map":
            np.testing.assert_array_equal(ens.loss[i], one.loss)
            np.testing.assert_array_equal(ens.beta[i], one.beta)
        else:  # vmap batches the sums (another order): trajectory_gap over the 100 steps at γ of
            # the gradient's chain length, × the run's measured sensitivity to its init (factor 3:
            # the mirrored path on symmetric data); a member mixed up with another is off by O(1)
            from roundoff import chain_length, trajectory_gap  # here: the 2-device script imports this module

            p = jax.tree_util.tree_map(lambda a, i=i: a[i], batch)
            cfg_i = bf.GDConfig(alpha=float(alphas[i]), lr=float(lrs[i]), weight_decay=float(wds[i]),
                                steps=100, n_records=4)

            def run(q, cfg_i=cfg_i):
                r = bf.train(q, data, cfg_i)
                return {"loss": np.asarray(r.loss), "beta": np.asarray(r.beta)}
            tol = trajectory_gap(run, p, 100, chain_length(p, 2 * N_HALF), factor=3)
            np.testing.assert_array_less(np.abs(ens.loss[i] - one.loss), tol["loss"] + 1e-300)
            np.testing.assert_array_less(np.abs(ens.beta[i] - one.beta), tol["beta"] + 1e-300)


def test_bad_layout_names_the_choices():
    data, batch, alphas, _, _ = _setup()
    with pytest.raises(ValueError, match="map"):
        bf.train(batch, data, bf.GDConfig(steps=2, n_records=2), alpha=alphas, batched=True, layout="packed")


_TWO_DEVICES = """
import jax, numpy as np
import biasfree as bf
from tests.dynamics.test_ensemble_layouts import _setup, _singles, B
assert len(jax.devices()) == 2, jax.devices()
data, batch, alphas, lrs, wds = _setup()
ens = bf.train(batch, data, bf.GDConfig(steps=100, n_records=4), alpha=alphas, lr=lrs,
               weight_decay=wds, batched=True, layout="map")
for i, one in enumerate(_singles(data, batch, alphas, lrs, wds, 100)):
    np.testing.assert_array_equal(ens.loss[i], one.loss)
    np.testing.assert_array_equal(ens.params[0].W[i], one.params[0].W)
fl = bf.flow_ensemble(batch, data, bf.FlowConfig(t_max=0.5, n_records=2), alpha=alphas)
for i in range(B):
    p = jax.tree_util.tree_map(lambda a: a[i], batch)
    one = bf.flow(p, data, bf.FlowConfig(alpha=float(alphas[i]), t_max=0.5, n_records=2))
    np.testing.assert_array_equal(fl.loss[i], one.loss)
print("ok")
"""


def test_members_split_over_two_host_devices():
    flags = f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count=2".strip()
    env = dict(os.environ, XLA_FLAGS=flags,  # the parent's flags kept (make test-portable's ISA)
               PYTHONPATH=os.pathsep.join([os.getcwd(), os.environ.get("PYTHONPATH", "")]),
               JAX_ENABLE_X64="1")
    out = subprocess.run([sys.executable, "-c", _TWO_DEVICES], env=env, capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stderr[-3000:]
