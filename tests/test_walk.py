"""The walk target (issue 47, item 5): following ``train=optax.adam(1e-3)`` from ``analyse`` to the
training loop, measured by profiling the calls that are handed the config (:mod:`route`: the
optimiser itself, or a record that carries it: the ``TrainConfig``, a ``Run``, a ``Plan``, a
``Predicted``, the loop's ``Spec``). The route must not return to a module it has left (on
today's main it went back to train_config twice, to optimiser_twin and to the trainer), and it
takes at most 20 calls, the issue's target: 20 are measured (24 before the config was made final
in one place, analyse, and ``predict`` was handed the GD run's (η, K) instead of the config; 22
before the κ policy was one function, ``with_degree``, not two, and the batch check the config's
own); :data:`CALLS` holds the count where it is, and it may only fall."""

from __future__ import annotations

import importlib
import sys

import jax
import numpy as np
import optax
import pytest
from route import route, stays, until

import biasfree as bf
from biasfree.analysis import analyse as analyse_module

LOOP = "dynamics/loop.py"
CALLS = 20
"""The most calls on the route (a cap that may only fall, as test_layout's ``PRIVATE_IMPORTS``):
24 on main until the config reached its final form in analyse (α beside κ: ``plan.config`` was
handed it to set α) and ``predict`` was handed the GD run's (η, K) and record steps, the only
part of the config it read; 22 until ``twin_degree`` was folded into ``with_degree`` (its only
caller: the one κ policy) and the batch check became ``TrainConfig.check_batches`` (the
config's fit to the data). The issue's target is 20."""


@pytest.fixture(scope="module")
def walked():
    """The calls handed the config in ``bf.analyse(net, data, alpha=0.0, train=optax.adam(1e-3))``
    on a two-layer dense net (no init=), up to and including the loop's ``drive``, and every call."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 4))
    X = np.concatenate([X, -X])
    Y = X @ rng.normal(size=(4, 2))
    net = bf.init_gaussian(jax.random.PRNGKey(0), (4, 8, 2), 0.1)
    adam = optax.adam(1e-3)
    calls, res = route(lambda: bf.analyse(net, (X, Y), alpha=0.0, train=adam), adam,
                       analyse_module.analyse.__wrapped__)
    assert res.prediction.trained is not None  # the run measured as asked: the route reached the loop
    steps = [c for c in calls if not c.own]
    return until(steps, LOOP), calls


def test_the_config_goes_one_way_from_analyse_to_the_loop(walked):
    path, _ = walked
    order, returns = stays([c.module for c in path])
    lines = "\n".join(str(c) for c in path)
    # the tracer followed the config through its bundles: every stage of the pipeline is on it
    assert order[0] == "analysis/analyse.py" and order[-1] == LOOP, order
    for stage in ("analysis/plan.py", "analysis/predicted.py", "analysis/measured.py", "dynamics/trainer.py"):
        assert stage in order, (stage, order)
    assert returns == [], f"returns to {returns} on the route {order}:\n{lines}"


def test_the_route_is_no_longer_than_it_was_measured(walked):
    path, _ = walked
    lines = "\n".join(str(c) for c in path)
    assert len(path) <= CALLS, f"{len(path)} calls on the route (at most {CALLS}):\n{lines}"


def test_the_value_read_where_it_stands_is_no_step(walked):
    """A method of the config (``cfg.gd``, ``cfg.label`` and what it calls) is the config read, not
    handed on: seen, and kept off the route."""
    _, calls = walked
    own = {(c.module, c.function) for c in calls if c.own}
    assert ("dynamics/train_config.py", "gd") in own and ("dynamics/train_config.py", "label") in own, own


_CONTROL = {
    "a.py": ('"""a"""\nfrom . import b\n\n\ndef start(v):\n    v.name()\n    b.one(v)\n'
             '    return b.two(b.Box(v))\n\n\ndef back(box):\n    return box\n'),
    "b.py": ('"""b"""\nfrom dataclasses import dataclass\n\n\nclass Value:\n    def name(self):\n'
             '        return one(self)\n\n\n@dataclass(frozen=True)\nclass Box:\n    v: object\n\n\n'
             'def one(v):\n    return v\n\n\ndef two(box):\n    from . import a\n    return a.back(box)\n'),
}


def test_the_count_sees_a_return(tmp_path, monkeypatch):
    """Control: a synthetic route a → b → b (the value in a bundle) → a again is counted with one
    return, to a; the bundle is followed; the value's own method (and what it calls) is seen and
    kept off the route; and counting stays alone sees a return."""
    pkg = tmp_path / "walkpkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text('"""x"""\n')
    for name, text in _CONTROL.items():
        (pkg / name).write_text(text)
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        a, b = importlib.import_module("walkpkg.a"), importlib.import_module("walkpkg.b")
        v = b.Value()
        calls, _ = route(lambda: a.start(v), v, a.start, str(pkg))
    finally:
        for m in ("walkpkg.a", "walkpkg.b", "walkpkg"):
            sys.modules.pop(m, None)
    assert [(c.module, c.function, c.own) for c in calls] == [
        ("a.py", "start", False), ("b.py", "name", True), ("b.py", "one", True), ("b.py", "one", False),
        ("b.py", "two", False), ("a.py", "back", False)], [str(c) for c in calls]
    order, returns = stays([c.module for c in calls if not c.own])
    assert order == ["a.py", "b.py", "a.py"] and returns == ["a.py"]
    assert stays(["x", "y", "y", "z"]) == (["x", "y", "z"], [])  # staying in a module is no return
    assert stays(["x", "y", "x", "y"])[1] == ["x", "y"]
