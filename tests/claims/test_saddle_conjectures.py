"""The saddle-conjectures experiment (issue 49 item 7): what a grid of plateau counts follows, the
layer-structure ratios on changes whose answer is known, and the derived linear-control check with
its failing controls (a wrong spectrum, records too coarse to resolve the staircase)."""

import numpy as np
import pytest

from biasfree.claims import get
from biasfree.claims.saddle_conjectures import run as sc
from biasfree.theory.layer_structure import layer_structure, participation


@pytest.mark.parametrize(("grid", "answer"), [
    ([[2, 3, 4], [2, 3, 4]], "spectrum"),          # rows: widths, columns: spectra
    ([[2, 2, 2], [3, 3, 3]], "width"),
    ([[2, 3, 4], [3, 3, 4]], "both"),
    ([[3, 3, 3], [3, 3, 3]], "neither"),
    ([[2, np.nan, 4], [2, 3, np.nan]], "spectrum"),  # unresolved counts say nothing
    ([[2, np.nan], [np.nan, 3]], "neither"),          # no row or column with two resolved counts
])
def test_follows_reads_the_grid(grid, answer):
    assert sc.follows(grid) == answer


def test_spectrum_has_k_distinct_values():
    for k in (1, 2, 3):
        s = sc.spectrum((4.0, 2.0, 1.0), k)
        assert s.size == 3 and np.unique(s).size == k and s[0] == 4.0


def test_participation_counts_equal_weights():
    assert participation(np.ones(7)) == pytest.approx(7, rel=1e-15)  # (7)²/7, exact to round-off
    assert participation([0.0, 3.0, 0.0]) == 1.0
    assert participation(np.zeros(3)) == 0.0


def test_layer_structure_tells_sparse_from_low_rank():
    rng = np.random.default_rng(0)
    m, n, p = 12, 3, 3
    W0, R0 = 1e-3 * rng.normal(size=(m, n)), 1e-3 * rng.normal(size=(p, m))
    # sparse: unit h < 3 learns direction e_h alone (the quadratic net's change)
    W, R = W0.copy(), R0.copy()
    W[:3] += 2 * np.eye(3)
    R[:, :3] += 2 * np.eye(3)
    sparse = layer_structure(W0, W, R0, R)
    # round-off: D is W0 + 2I − W0, exact to ε‖W0‖ ~ 1e-19 on entries of 2
    assert sparse["directions"] == pytest.approx(3, rel=1e-12)
    assert sparse["units"] == pytest.approx(3, rel=1e-12)
    assert sparse["spread"] == pytest.approx(1, rel=1e-12)
    # low rank: every unit learns one direction, equally (rank one, m units)
    g = np.ones(m)
    low = layer_structure(W0, W0 + np.outer(g, [1.0, 0, 0]), R0, R0 + np.outer([1.0, 0, 0], g))
    assert low["directions"] == pytest.approx(1, rel=1e-12)
    assert low["units"] == pytest.approx(m, rel=1e-12)
    assert low["spread"] == pytest.approx(m, rel=1e-12)
    # control: the sparse change is not read as low rank, nor the low-rank one as sparse
    assert abs(sparse["spread"] - low["spread"]) > 1


def test_layer_structure_refuses_mismatched_shapes():
    with pytest.raises(ValueError, match="share a shape"):
        layer_structure(np.zeros((3, 2)), np.zeros((3, 2)), np.zeros((1, 4)), np.zeros((1, 4)))


def _records(cfg):
    from biasfree.dynamics.train_config import record_steps

    steps = record_steps(int(round(cfg.horizon / cfg.lr)), cfg.records, "log")
    return steps, steps * cfg.lr


def test_the_control_staircase_has_one_plateau_per_distinct_value_and_its_controls_fail():
    """The exact GD staircase of aligned modes at the tiny preset's records: 1 + k plateaus for k
    distinct values. Failing controls: checked against another spectrum's 1 + k it mismatches;
    six log-spaced records merge the staircase's drops and miss the count (a refused curve, NaN,
    is a mismatch too)."""
    cfg = get("saddle-conjectures").presets["tiny"]
    steps, t = _records(cfg)
    a0 = cfg.widths[-1] * cfg.init_scale**2 / 2
    for k in cfg.distinct:
        s = sc.spectrum(cfg.top, k)
        assert sc._control_count(s, a0, cfg.lr, steps, t) == 1 + k
    wrong = sc._control_count(sc.spectrum(cfg.top, 1), a0, cfg.lr, steps, t)
    assert wrong != 1 + cfg.distinct[-1]
    coarse = np.unique(np.geomspace(1, steps[-1], 6).astype(np.int64))
    assert sc._control_count(sc.spectrum(cfg.top, 2), a0, cfg.lr, coarse, coarse * cfg.lr) != 1 + 2


def test_control_mismatches_counts_cells_off_the_exact_curve():
    exact = np.array([[2.0, 3.0], [2.0, 3.0]])
    assert sc.control_mismatches(exact.copy(), exact) == 0
    # failing controls: one cell a plateau short, one cell refused by the rule (NaN)
    assert sc.control_mismatches(exact - np.array([[0, 1], [0, 0]]), exact) == 1
    assert sc.control_mismatches(np.where([[True, False], [True, True]], exact, np.nan), exact) == 1


def test_resolvable_cells_are_those_whose_exact_staircase_shows_one_plus_k():
    cfg = get("saddle-conjectures").presets["tiny"]  # distinct = (1, 2)
    assert sc.resolvable(cfg, [[2.0, 3.0], [2.0, 2.0]]).tolist() == [[True, True], [True, False]]


def test_config_refuses_a_width_below_d():
    from biasfree.claims.config import ConfigError, resolve_config

    with pytest.raises((ConfigError, ValueError), match="width >= d"):
        resolve_config(get("saddle-conjectures"), "tiny", {"widths": [1, 6]})


def test_mirrored_inputs_are_whitened_pairs_and_odd_n_is_refused():
    X = sc._inputs(np.random.default_rng(0), 8, 2, True)
    assert np.array_equal(X[4:], -X[:4])
    # XᵀX/n = I to round-off: an orthonormal basis scaled by √(n/2), sums of 8 products (8ε ~ 2e-15)
    assert np.allclose(X.T @ X / 8, np.eye(2), atol=1e-14)
    from biasfree.claims.config import ConfigError, resolve_config

    with pytest.raises((ConfigError, ValueError), match="must be even"):
        resolve_config(get("saddle-conjectures"), "tiny", {"mirrored": True, "n": 15})
