"""optimisers beyond the generic tiny run: its config refuses bad input, the plateau rule
and the identity ratio behave as the module doc says on hand-made inputs, and the tiny run
holds what the claim says (each pair identity within its derived round-off bound, each
control off by orders of magnitude, bounds tight enough to catch a broken identity), what
its notes say is measured (Muon and unscaled-ε Adam off the twin, random batches off,
GD stage-like), and a figure that labels each bar by its check."""

import dataclasses

import numpy as np
import pytest
from roundoff import EPS
from tiny_runs import shared_folder, tiny_run

from biasfree import store
from biasfree.claims.optimisers import IDENTITY, MODES, PRESETS, Config
from biasfree.claims.optimisers.figure import figure
from biasfree.claims.optimisers.run import _identity, count_plateaus


@pytest.mark.parametrize("field, value, match", [
    ("batch_size", 7, "batch_size"),
    ("batch_sizes", (5,), "even"),
    ("batch_sizes", (4, 50), "at most the 2n"),
    ("teacher_s", (1.0, 2.0), "decreasing"),
    ("modes_s", (1.0,), "length"),
    ("width", 3, "even"),
    ("n", 2, "n >= d"),
    ("alpha", 1.0, "alpha"),
    ("sweep_scales", (0.0,), "sweep_scales"),
    ("steps", 1, "steps"),
])
def test_config_refuses_bad_values(field, value, match):
    with pytest.raises(ValueError, match=match):
        dataclasses.replace(PRESETS["tiny"], **{field: value})


def test_presets_are_configs():
    assert set(PRESETS) == {"tiny", "paper"} and all(isinstance(c, Config) for c in PRESETS.values())


def test_plateau_rule():
    """Sequential modes (each learnt before the next starts) give p − 1 plateaus; modes learnt
    together give 0; a mode that never reaches 0.9 s_i counts no plateau after it."""
    t = np.linspace(0, 1, 200)[:, None]
    s = np.array([3.0, 1.0, 0.3])
    sigmoid = lambda c, w: 1 / (1 + np.exp(-(t - c) / w))  # noqa: E731
    staged = s * sigmoid(np.array([0.2, 0.5, 0.8]), 0.02)
    together = s * sigmoid(np.array([0.5, 0.5, 0.5]), 0.02)
    stalled = staged * np.array([0.8, 1.0, 1.0])  # mode 1 stops at 0.8 s_1
    assert count_plateaus(staged, s) == 2
    assert count_plateaus(together, s) == 0
    assert count_plateaus(stalled, s) == 1


def test_identity_ratio_catches_a_gap_above_the_bound():
    """The check's value is gap ÷ (2 × bound), record by record: a twin off by 10 bounds at
    one record reads 5, however small the bound is against L(0)."""
    L = np.linspace(1.0, 0.1, 11)
    b = np.full(11, 1e-13)
    base = {"loss": L, "twin_loss": L.copy(), "params": np.ones(4), "twin_params": np.ones(4),
            "bound_loss": b, "bound_params": np.full(4, 1e-13), "even": np.zeros(11)}
    assert _identity(base)["ratio"] == 0.0
    off = dict(base, twin_loss=L + np.where(np.arange(11) == 7, 1e-12, 0.0))
    # L + 1e-12 rounds (L <= 1: by at most ulp(1)/2 = EPS/2), the difference back is exact
    # (Sterbenz): ≤ (EPS/2)/1e-12 ≈ 1.1e-4 relative; then the decimals 1e-12 and 1e-13 as
    # floats and one division by 2·1e-13 or L(0) (≤ 2ε together)
    rel = 0.5 * EPS / 1e-12 + 2 * EPS
    assert _identity(off)["ratio"] == pytest.approx(5.0, rel=rel)
    assert _identity(off)["gap"] == pytest.approx(1e-12, rel=rel)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory, worker_id):
    """The experiment's tiny result: the session's one tiny run (tests/tiny_runs.py, which
    tests/claims/test_experiments.py checks), loaded, not computed a second time."""
    out = shared_folder(tmp_path_factory, worker_id)
    tiny_run(out, "optimisers")
    return store.load(out / "optimisers")


@pytest.mark.numerics
def test_tiny_pair_identities_hold_and_controls_miss(tiny):
    """Every listed optimiser's check passes; its control misses by more than 1e-3, and by
    more than the bound: the check (largest gap ÷ 2·bound per record, ≥ control gap ÷ the
    largest 2·bound in loss alone) would fail on the control, so the bound is tight enough to
    catch a broken identity."""
    m = tiny.metrics
    for name in IDENTITY:
        check = tiny.checks[f"{name}_pair_identity"]
        assert check.passed, (name, check)
        assert m[f"{name}_bound"] < m[f"{name}_control_gap"], name
        assert m[f"{name}_control_gap"] > 1e-3, name
        assert m[f"{name}_learnt"] < 0.5, f"{name}: the net must learn, so agreement is not trivial"
    assert set(tiny.checks) == {f"{n}_pair_identity" for n in IDENTITY}


@pytest.mark.numerics
def test_tiny_measured_parts(tiny):
    """Measured, not checked (module doc): Muon leaves its twin (f_even grown far above
    round-off), unscaled-ε Adam misses the bound, random batches miss by far, and GD learns
    the well-separated teacher stage by stage (half times in the order of the strengths,
    p − 1 plateaus) for the ReLU net and its twin. (The tiny sweep's one batch size is the
    checked mirrored_* runs' own, whose results it reuses: their round-off is the check's.)"""
    m, cfg = tiny.metrics, PRESETS["tiny"]
    assert "muon_pair_identity" not in tiny.checks
    assert m["muon_ratio"] > 1 and m["muon_even_final"] > 1e-12
    assert m["adam_unscaled_eps_ratio"] > 1
    for name in ("sgd", "adam"):
        for b in cfg.batch_sizes:
            assert m[f"batches_{name}_random_{b}_gap"] > 1e-3
    p = len(cfg.modes_s)
    for who in ("relu", "twin"):
        t = [m[f"stages_sgd_{who}_half_step_mode{i + 1}"] for i in range(p)]
        assert np.all(np.diff(t) > 0), t
        assert m[f"stages_sgd_{who}_plateaus"] == p - 1
    for name in MODES:
        assert np.all(np.isfinite(tiny.arrays["modes_t_half"][MODES.index(name)])), name
    assert "Muon" in tiny.notes and "measured" in tiny.notes


def test_figure_labels_each_bar_by_its_check(tiny):
    """Panel (a) says "holds" for each passed check; a failed one reads "does not hold"."""
    import matplotlib.pyplot as plt

    from biasfree.results import config_dict

    res = dataclasses.replace(tiny, config=config_dict(PRESETS["tiny"]), preset="tiny")
    texts = [t.get_text() for t in figure(res).axes[0].texts]
    assert sum(t.startswith("holds") for t in texts) == len(IDENTITY)
    plt.close("all")
    bad = dict(res.checks)
    bad["adam_pair_identity"] = dataclasses.replace(bad["adam_pair_identity"], value=2.0)
    texts = [t.get_text() for t in figure(dataclasses.replace(res, checks=bad)).axes[0].texts]
    assert sum(t.startswith("does not hold ✗") for t in texts) == 1
    plt.close("all")
