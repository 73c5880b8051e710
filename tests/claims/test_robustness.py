"""The robustness experiment's own pieces (the decayed end point β*(λ') is tested in
tests/theory/test_theory.py): configs whose GD records would miss the flow's record times."""

import pytest

from biasfree.claims.robustness import Config


def test_config_rejects_records_off_the_flow_grid():
    with pytest.raises(ValueError, match="multiple of"):
        Config(lrs=(0.03, 0.1), t_max=40.0, n_records=51)


def test_config_rejects_runs_shorter_than_the_records():
    with pytest.raises(ValueError, match="n_records - 1"):
        Config(steps=10, n_records=51)
