"""Runs can be kept (issue 48 item 10): a Trajectory and a Runs saved to one .safetensors file
and loaded back equal the originals field by field, bitwise (the arrays' bytes are stored as
they are: no arithmetic on the way), and a file that is not one is refused in one line.
Never pickle: the file is a safetensors header (JSON) and raw tensors."""

from __future__ import annotations

import dataclasses
import json
import struct

import jax
import numpy as np
import pytest

import biasfree as bf
from biasfree.core.conv import Conv
from biasfree.dynamics.trajectory import Trajectory


def _same(a, b, where="run") -> list[str]:
    """Where ``a`` and ``b`` differ: types, dataclass fields, containers, and arrays by dtype,
    shape and bytes (so -0.0 vs 0.0 and NaN payloads count)."""
    if isinstance(a, np.ndarray | np.generic) or isinstance(b, np.ndarray | np.generic):
        ok = (type(a) is type(b) and a.dtype == b.dtype and np.shape(a) == np.shape(b)
              and a.tobytes(order="C") == b.tobytes(order="C"))
        return [] if ok else [where]
    if type(a) is not type(b):
        return [f"{where}: {type(a).__name__} vs {type(b).__name__}"]
    if dataclasses.is_dataclass(a):
        return [d for f in dataclasses.fields(a) for d in _same(getattr(a, f.name), getattr(b, f.name),
                                                                  f"{where}.{f.name}")]
    if isinstance(a, tuple | list):
        if len(a) != len(b):
            return [f"{where}: length {len(a)} vs {len(b)}"]
        return [d for i, (x, y) in enumerate(zip(a, b, strict=True)) for d in _same(x, y, f"{where}[{i}]")]
    if isinstance(a, dict):
        if list(a) != list(b):
            return [f"{where}: keys {list(a)} vs {list(b)}"]
        return [d for k in a for d in _same(a[k], b[k], f"{where}[{k!r}]")]
    return [] if a == b else [f"{where}: {a!r} vs {b!r}"]


@pytest.fixture(scope="module")
def trained():
    key = jax.random.PRNGKey(0)
    target, _ = bf.sine_target(key, d=4)
    data = bf.make_dataset(key, target, n=40, d=4, n_test=10)
    params = bf.init_gaussian(jax.random.PRNGKey(1), (4, 6, 1), 0.3)
    cfg = bf.GDConfig(lr=0.02, steps=40, n_records=5, keep_params=True)
    traj = bf.train(params, data, cfg, twin=True)  # a twin, a test loss, the recorded parameters
    runs = bf.train({"relu": bf.Member(params, alpha=0.0, twin=True), "leaky": bf.Member(params, alpha=0.5)},
                    data, bf.GDConfig(lr=0.02, steps=40, n_records=5))
    return traj, runs


def test_a_trajectory_round_trips_bitwise(trained, tmp_path):
    traj, _ = trained
    path = traj.save(tmp_path / "run.safetensors")
    back = Trajectory.load(path)
    assert traj.twin is not None and traj.path is not None and traj.test_loss is not None
    assert _same(traj, back) == []
    assert back.method == "gd" and back.half_time() == traj.half_time()
    # the control: one bit of one recorded loss flipped is seen
    bad = np.array(back.loss)
    bad.view(np.uint64)[2] ^= 1
    assert _same(traj, dataclasses.replace(back, loss=bad)) == ["run.loss"]


def test_named_runs_round_trip_with_their_names_order_and_twins(trained, tmp_path):
    _, runs = trained
    back = bf.Runs.load(runs.save(tmp_path / "runs.safetensors"))
    assert list(back) == ["relu", "leaky"] and list(back.twins) == ["relu"]
    assert _same(runs, back) == []
    assert back.twin_gap("relu") == runs.twin_gap("relu")


def test_conv_layers_keep_their_static_fields(tmp_path):
    """A layer's non-array fields (a conv's in_shape and padding) travel in the JSON."""
    rng = np.random.default_rng(0)
    conv = Conv(rng.normal(size=(2, 1, 3, 3)), None, (5, 5), "valid")
    t = np.linspace(0.0, 1.0, 3)
    traj = Trajectory(t, t**2, None, np.zeros((3, 25, 1)), t, (t[:, None],), (), (conv,),
                      {"steps": np.int64(7)}, "flow")
    back = Trajectory.load(traj.save(tmp_path / "conv.safetensors"))
    assert _same(traj, back) == [] and back.params[0].in_shape == (5, 5) and back.params[0].padding == "valid"


def test_the_file_is_safetensors_with_json_and_no_pickle(trained, tmp_path):
    traj, _ = trained
    raw = traj.save(tmp_path / "run.safetensors").read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]  # safetensors: header length, then the JSON header
    header = json.loads(raw[8:8 + n])
    doc = json.loads(header["__metadata__"]["biasfree.run"])
    assert doc["root"]["type"] == "Trajectory" and doc["root"]["fields"]["method"] == {"value": "gd"}
    assert header["loss"]["dtype"] == "F64" and header["params/0/W"]["shape"] == [6, 4]


def test_files_that_are_not_a_saved_run_are_refused_in_one_line(trained, tmp_path):
    traj, runs = trained
    cases = []
    with pytest.raises(ValueError) as e:  # the other kind
        Trajectory.load(runs.save(tmp_path / "runs.safetensors"))
    cases.append((e.value, "holds a Runs, not a Trajectory: load it with bf.Runs.load(path)"))
    net = bf.init_gaussian(jax.random.PRNGKey(0), (3, 4, 1), 1.0)
    weights = bf.save_model(net, tmp_path / "w.safetensors")
    with pytest.raises(ValueError) as e:  # a model's weights
        Trajectory.load(weights)
    cases.append((e.value, "holds no saved run"))
    (tmp_path / "junk.safetensors").write_bytes(b"not a safetensors file")
    with pytest.raises(ValueError) as e:
        bf.Runs.load(tmp_path / "junk.safetensors")
    cases.append((e.value, "is not a safetensors file"))
    for err, text in cases:
        assert text in str(err) and "\n" not in str(err), str(err)
    with pytest.raises(FileNotFoundError, match="no saved run at .*: write one with traj.save"):
        Trajectory.load(tmp_path / "missing.safetensors")
    with pytest.raises(TypeError, match="path=3 must be a file's path"):
        traj.save(3)
