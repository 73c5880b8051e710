"""Runs kept on disk: a :class:`~biasfree.dynamics.trajectory.Trajectory` or a
:class:`~biasfree.dynamics.ensemble.Runs` as one ``.safetensors`` file, never pickle.

Every array (losses, β_eff, singular values, the final and recorded parameters, solver
counters) is a tensor of the file, stored bit for bit, named by where it sits
(``nets/relu/params/0/W``); everything else (which object holds which field, ``method``,
a layer's static fields such as a conv's ``in_shape``) is one JSON document in the file's
metadata under :data:`KEY`. Loading rebuilds only the types listed in ``_types`` (the
trajectory, the runs and the package's own layer types), so a file cannot name code to run.
Arrays come back as NumPy arrays, as training returns them; a saved-then-loaded run equals
the original field by field, bitwise.
"""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
from pathlib import Path

import numpy as np

from ..core.layers import AbstractLayer

KEY = "biasfree.run"
"""The metadata entry holding the JSON structure."""
FORMAT = 1
"""The structure's version, stored beside it."""


def save_run(obj, path, types: dict[str, type]) -> Path:
    """Write ``obj`` (a Trajectory or Runs) to ``path`` (``.safetensors`` by convention)
    atomically (a temporary file beside it, then renamed); returns the path. ``types``: the
    run types it may hold by name (a Runs holds Trajectories), beside biasfree's layers."""
    from safetensors.numpy import save

    path = _path(path)
    tensors: dict[str, np.ndarray] = {}
    doc = {"format": FORMAT, "root": _encode(obj, "", tensors, _types(types))}
    data = save(tensors, metadata={KEY: json.dumps(doc)})
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.tmp-{os.getpid()}-")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


def load_run(path, kind: type, types: dict[str, type]):
    """The ``kind`` (Trajectory or Runs) saved at ``path`` by :func:`save_run` (a ValueError
    naming the loader to use for another kind); ``types`` as :func:`save_run` takes them."""
    from safetensors import SafetensorError, safe_open

    path = _path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no saved run at {path}: write one with traj.save(path) or runs.save(path)")
    try:
        with safe_open(str(path), framework="numpy") as f:
            meta = f.metadata() or {}
            tensors = {k: f.get_tensor(k) for k in f.keys()}
    except (SafetensorError, OSError, ValueError) as e:
        raise ValueError(f"{path} is not a safetensors file ({e}): give a file written by "
                         "traj.save(path) or runs.save(path)") from None
    if KEY not in meta:
        raise ValueError(f"{path} holds no saved run (no {KEY!r} metadata): give a file written by "
                         "traj.save(path) or runs.save(path); a model's weights load with bf.load_model")
    doc = json.loads(meta[KEY])
    if doc.get("format") != FORMAT:
        raise ValueError(f"{path} was saved in run format {doc.get('format')!r}; this biasfree reads "
                         f"format {FORMAT}: save it again with this version")
    held = doc["root"].get("type") if isinstance(doc["root"], dict) else None
    if held != kind.__name__:
        raise ValueError(f"{path} holds a {held}, not a {kind.__name__}: load it with "
                         f"bf.{held}.load(path)")
    obj = _decode(doc["root"], tensors, _types(types))
    return obj


def _path(path) -> Path:
    if not isinstance(path, str | os.PathLike):
        raise TypeError(f"path={path!r} must be a file's path (str or pathlib.Path), e.g. 'run.safetensors'")
    return Path(path)


def _types(runs: dict[str, type]) -> dict[str, type]:
    """The types a file may name: the run types ``runs`` (Trajectory, Runs: given by their own
    save and load, so this module imports neither) and every layer type of biasfree.core."""
    out, todo = {}, [AbstractLayer]
    while todo:
        cls = todo.pop()
        todo += cls.__subclasses__()
        if dataclasses.is_dataclass(cls) and cls.__module__.startswith("biasfree.core."):
            out[cls.__name__] = cls
    return out | runs


def _encode(x, key: str, tensors: dict, types: dict):
    """``x`` as JSON, its arrays put into ``tensors`` under keys that extend ``key``."""
    if x is None:
        return None
    if isinstance(x, bool | int | float | str):
        return {"value": x}
    if isinstance(x, np.ndarray | np.generic) or hasattr(x, "__array__"):
        while key in tensors:  # a member named "a/loss" beside one named "a": still one tensor each
            key += "'"
        tensors[key] = np.asarray(x, order="C")  # (np.ascontiguousarray would make a 0-d array 1-d)
        return {"scalar": key} if isinstance(x, np.generic) else {"array": key}
    if isinstance(x, tuple | list):
        return {type(x).__name__: [_encode(v, f"{key}/{i}", tensors, types) for i, v in enumerate(x)]}
    if isinstance(x, dict):
        if not all(isinstance(k, str) for k in x):
            raise TypeError(f"cannot save {key or 'the run'}: its dict keys must be names (str)")
        return {"dict": {k: _encode(v, f"{key}/{k}", tensors, types) for k, v in x.items()}}
    if dataclasses.is_dataclass(x) and type(x).__name__ in types:
        return {"type": type(x).__name__,
                "fields": {f.name: _encode(getattr(x, f.name), f"{key}/{f.name}".lstrip("/"), tensors, types)
                           for f in dataclasses.fields(x) if f.init}}
    raise TypeError(f"cannot save {key or 'the run'}: a {type(x).__name__} is not an array, number, "
                    "name, tuple, dict or biasfree layer")


def _decode(node, tensors: dict, types: dict):
    """The object :func:`_encode` described by ``node``, its arrays from ``tensors``."""
    if node is None:
        return None
    if "type" in node:
        if node["type"] not in types:
            raise ValueError(f"a saved run names the type {node['type']!r}, which biasfree does not "
                             "rebuild: give a file written by traj.save / runs.save")
        return types[node["type"]](**{k: _decode(v, tensors, types) for k, v in node["fields"].items()})
    (kind, body), = node.items()
    if kind == "value":
        return body
    if kind in ("array", "scalar"):
        return tensors[body] if kind == "array" else tensors[body][()]  # a NumPy scalar stays one
    if kind in ("tuple", "list"):
        items = [_decode(v, tensors, types) for v in body]
        return tuple(items) if kind == "tuple" else items
    return {k: _decode(v, tensors, types) for k, v in body.items()}  # "dict"
