"""Every experiment's tiny checks hold at seeds 1–4, not only at seed 0 (which
tests/claims/test_experiments.py runs in ``make test``): issue 48, where linear-attention's
``merged_loss_after`` failed at seed 1 every time (its tolerance was 3 of the sample's own standard
errors; over 300 data draws it missed the converged loss at 4, the population spread at none).
Five seeds: a tolerance of k standard errors of a Gaussian deviation fails at one seed with
probability 2Φ(−k), 0.27% at k = 3, so a check failing at one of five is more likely wrong about
its own spread than unlucky, and is looked at. Marker ``seeds``: 64 runs, 13.7 min in one
process (6.4 CPU-min; measured on the shared 2-core machine under a load of 12-18), so it runs in
its own tier, ``make test-seeds`` (``.ci/run``), not in ``make test``."""

import pytest
from tiny_runs import OPTIMISED, run_at_seed

from biasfree import store
from biasfree.claims import REGISTRY

SEEDS = (1, 2, 3, 4)

DOES_NOT_HOLD: dict[tuple[str, int], str] = {}
"""(experiment, seed) pairs at which a claim measurably does not hold, each with its numbers: an
expected failure, strict (the test fails once it passes, so the entry goes when the claim is mended).
Empty since issue 48's verdict-calibration seed 2 (``gap_below_high_end``: measured 20.5% of L(0)
against the first-order high end 16.3%) was mended by the sign-group growth term (docs/theory.md §6.4)."""

pytestmark = pytest.mark.seeds


def _cases():
    for name in REGISTRY:
        for seed in SEEDS:
            # one worker per experiment, its programs compiled once for the four seeds; a run in a
            # process of its own (OPTIMISED, the denoiser: 45-75 s each) compiles anyway, so its
            # seeds spread over the workers
            group = f"seeds-{name}-{seed}" if name in OPTIMISED else f"seeds-{name}"
            marks = [pytest.mark.xdist_group(group)]
            if (name, seed) in DOES_NOT_HOLD:
                marks.append(pytest.mark.xfail(strict=True, reason=DOES_NOT_HOLD[name, seed]))
            yield pytest.param(name, seed, marks=marks, id=f"{name}-{seed}")


@pytest.mark.parametrize(("name", "seed"), list(_cases()))
def test_tiny_checks_hold_at_every_seed(tmp_path_factory, name, seed):
    out = tmp_path_factory.mktemp(f"{name}-seeds")
    run = run_at_seed(out, name, seed)
    folder = out / f"seed-{seed}" / name
    assert (folder / "result.json").exists(), run["output"]
    res = store.load(folder)
    assert res.seed == seed
    failed = {k: f"{c.value:.4g} vs {c.threshold:.4g}" for k, c in res.checks.items() if not c.passed}
    assert not failed and run["exit_code"] == 0, f"{name} at seed {seed}: {failed}\n{run['output']}"
