"""The deep experiment's own pieces (the deep pair <-> linear map, the exact GD mode map,
padding and effective rank are tested in tests/theory/test_theory.py and tests/core/test_nets.py):
the five named members of one depth, and the pair block measure."""

import numpy as np
import pytest
from roundoff import EPS, abs_twin, forward_gap

import biasfree as bf
from biasfree import theory
from biasfree.claims.deep import MEMBERS, PRESETS
from biasfree.claims.deep.run import _block_symmetric_part, _teacher_data, _teacher_members

pytestmark = pytest.mark.numerics  # round-off bounds: make test-portable reruns them


def test_members_are_the_five_named_nets_with_the_same_function_at_init():
    """Each linear member runs at step ηλ; the aligned pair net computes what the aligned
    linear net does, and the random pair net what its would-be linear twin does."""
    cfg = PRESETS["tiny"]
    rng = np.random.default_rng(0)
    data = _teacher_data(cfg, rng)
    modes = theory.data_modes(data.X, data.Y)
    members = _teacher_members(cfg, rng, modes, 3, 0.05)
    assert tuple(members) == MEMBERS
    lam = theory.deep_pair_time_factor(3)
    for name, m in members.items():
        assert (m.alpha, m.lr) == ((1.0, cfg.lr * lam) if name.startswith("linear") else (0.0, None))
    X = np.asarray(data.X)
    for relu, lin in (("relu_pair_aligned", "linear_aligned"),
                      ("relu_pair_random", "linear_twin_of_pair_random")):
        # two nets, each evaluated to within forward_gap of its exact output, and the map between
        # them rounds each weight once per layer (a scale by 2^{±1/2}-type factors): L ε relative
        # per layer product, 2 L ε |f|_abs with |f|_abs the linear net on |θ|, |X|. A wrong map
        # (a missing factor, a sign) is off by O(|f|).
        P, Q = members[relu].params, members[lin].params
        bound = (forward_gap([la.W for la in P], X) + forward_gap([la.W for la in Q], X)
                 + 2 * len(Q) * EPS * np.asarray(bf.forward(abs_twin(Q), np.abs(X), 1.0)))
        gap = np.abs(np.asarray(bf.forward(P, X, 0.0)) - np.asarray(bf.forward(Q, X, 1.0)))
        np.testing.assert_array_less(gap, bound)


def test_block_symmetric_part():
    A = np.array([[1.0, 2.0], [0.0, 1.0]])
    assert _block_symmetric_part(np.block([[A, -A], [-A, A]])) == 0.0
    # ||A|| / ||A||: the same code on the same entries twice, then a division: at most ε
    assert _block_symmetric_part(np.block([[A, 0 * A], [0 * A, A]])) == pytest.approx(1.0, rel=2 * EPS)
