"""A sweep's summary reads at a glance: the checks first, against their thresholds, then the
metrics, at most 12 panels unless asked for all, each under a readable title; a metric has
one name; a local cluster closes without Dask's warnings."""

import logging

import numpy as np
import pandas as pd
import pytest

from biasfree._figure import plt
from biasfree.app.sweep_figure import MAX_PANELS, readable, summary_figure
from biasfree.app.sweep_table import DEPRECATED_METRICS

distributed = pytest.importorskip("distributed", reason="the [sweep] extra (make test installs it)")


def _table(n_checks=3, n_metrics=20):
    rng = np.random.default_rng(0)
    rows = []
    for w in (40, 80, 160):
        for seed in (0, 1):
            row = {"width": w, "seed": seed, "status": "done"}
            row |= {f"metric_{i}_alpha_{i / 10:g}": rng.normal() for i in range(n_metrics)}
            for i in range(n_checks):
                row |= {f"check.claim_{i}.value": rng.uniform(0, 2), f"check.claim_{i}.threshold": 1.0}
                row[f"check.claim_{i}.passed"] = row[f"check.claim_{i}.value"] <= 1.0
            rows.append(row)
    df = pd.DataFrame(rows)
    df.attrs = {"experiment": "toy", "preset": "tiny", "grid": ["width"], "seeds": [0, 1],
                "check_units": {f"claim_{i}": "fraction of L(0)" for i in range(n_checks)}}
    return df


def _titles(fig):
    return [ax.get_title() for ax in fig.axes if ax.axison]


def test_checks_come_first_against_their_thresholds_and_at_most_12_panels_by_default():
    df = _table()
    fig = summary_figure(df)
    titles = _titles(fig)
    assert len(titles) == MAX_PANELS == 12
    for i, t in enumerate(titles[:3]):  # the checks, each with its unit and how many points pass
        n_fail = int((~df[f"check.claim_{i}.passed"]).sum())
        assert t.startswith(f"check: claim {i} (fraction of L(0))\n")
        verdict = t.split("\n", 1)[1].replace("\n", " ")
        if n_fail == 0:
            assert verdict == "✓ every point passes"
        else:  # how many, and where: the widths of the failing points
            where = ", ".join(str(w) for w in sorted(set(df["width"][~df[f"check.claim_{i}.passed"]])))
            assert verdict == f"✗ {n_fail} of 6 fail (red ×), at width = {where}", verdict
        dashes = [ln for ln in fig.axes[i].get_lines() if ln.get_linestyle() == "--"]
        assert len(dashes) == 1 and np.all(dashes[0].get_ydata() == 1.0)  # the threshold
    assert titles[3] == "metric 0, α = 0" and all("_" not in t for t in titles)
    assert "12 of 23 panels" in fig._suptitle.get_text() and "--all-panels" in fig._suptitle.get_text()
    plt.close(fig)
    fig = summary_figure(df, all_panels=True)
    assert len(_titles(fig)) == 23 and "of 23 panels" not in fig._suptitle.get_text()
    plt.close(fig)


def test_a_failing_check_comes_first_with_a_cross_at_each_failing_point_and_the_count_on_top():
    """Issue 48 item 1: which checks failed, at which points, at a glance. A failing check is
    drawn before the passing ones (so --all-panels is never needed to see it), each failing
    point is a red cross (a non-finite value at the top edge), and the title counts them."""
    df = _table(n_checks=2, n_metrics=2)
    df["check.claim_0.passed"] = True  # claim_0 passes everywhere; claim_1 fails at two points
    df["check.claim_1.value"] = [0.5, 0.5, 3.0, 0.5, np.inf, 0.5]
    df["check.claim_1.passed"] = df["check.claim_1.value"] <= 1.0
    df["passed"] = df["check.claim_1.passed"]
    fig = summary_figure(df)
    first, second = fig.axes[0], fig.axes[1]
    assert first.get_title().startswith("check: claim 1") and second.get_title().startswith("check: claim 0")
    assert "✗ 2 of 6 fail (red ×; 1 not finite, × at the top edge), at width = 80, 160" in \
        first.get_title().replace("\n", " ")
    crosses = [ln for ln in first.get_lines() if ln.get_marker() == "x"]
    at = [(list(ln.get_xdata()), list(ln.get_ydata())) for ln in crosses]
    assert at == [([80.0], [3.0]), ([160.0], [0.97])]  # at its value; the inf at 97% of the height
    assert not [ln for ln in second.get_lines() if ln.get_marker() == "x"]
    sup = fig._suptitle.get_text()
    assert "6 of 6 points done, 2 with failed checks" in sup and "failed checks: claim_1 (at 2 points)" in sup
    plt.close(fig)


def test_readable_names_say_alpha_sigma_and_units():
    assert readable("half_loss_steps_alpha_0.5") == "half loss steps, α = 0.5 (steps)"
    assert readable("sweep_ratio_scale_1.0e-05") == "sweep ratio, σ = 1.0e-05"
    assert readable("prediction_gap_max", "fraction of L(0)") == "prediction gap max (fraction of L(0))"


def test_the_old_duplicate_metric_name_is_left_out_of_tables():
    assert "half_time_ratio_alpha0" in DEPRECATED_METRICS


def test_a_local_cluster_closes_without_dask_warnings(caplog, capfd):
    """A worker process that takes 6 s to exit (as one that ran JAX may on a loaded machine)
    is waited for, not killed with "Worker process still alive ... killing"."""
    import atexit
    import time

    from biasfree.app.sweep_cluster import dask_client

    def slow_exit():
        atexit.register(time.sleep, 6.0)

    with caplog.at_level(logging.WARNING, logger="distributed"), dask_client(workers=1) as client:
        client.wait_for_workers(1, timeout=60)
        client.run(slow_exit)
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    err = capfd.readouterr().err
    assert not warnings, warnings
    assert "still alive" not in err and "WARNING" not in err, err
