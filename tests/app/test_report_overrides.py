"""The report card shows the config each result ran with: the preset and every field
that differs from it (issue 22 item 6), so a check failed at a user's own settings is
not read as the preset failing."""

from __future__ import annotations

import numpy as np
import pytest
from toys import toy_experiment
from typer.testing import CliRunner

from biasfree.app.cli import app
from biasfree.app.report import render
from biasfree.claims import REGISTRY
from biasfree.claims.base import config
from biasfree.results import Result, at_most, config_dict

runner = CliRunner()


@config
class Cfg:
    width: int = 3
    lr: float = 0.1


def _run(cfg: Cfg, seed: int = 0, progress=None) -> Result:
    # passes at the preset's width, fails at a width above 3: a failure at a user's setting
    return Result("toy-card", seed, config_dict(cfg), {"width": float(cfg.width)},
                  {"small": at_most(cfg.width, 3, "The toy's width is at most 3.")}, {"w": np.arange(2)})


@pytest.fixture
def toy(monkeypatch):
    monkeypatch.setitem(REGISTRY, "toy-card", toy_experiment("toy-card", "a toy for the report card", _run,
                                                             Cfg, {"tiny": Cfg(2), "paper": Cfg()}))


def test_card_lists_the_fields_that_differ_from_the_preset(toy, tmp_path):
    res = runner.invoke(app, ["run", "toy-card", "--preset", "tiny", "--set", "width=5", "--set", "lr=0.1",
                              "--out", str(tmp_path)])
    assert res.exit_code == 1, res.output  # the check fails at width 5
    page = render(tmp_path)
    # width differs from the tiny preset (2); lr = 0.1 was set but equals the preset's: not listed
    assert "preset <code>tiny</code> with 1 field(s) changed: <code>width = 5</code> (preset: 2)" in page
    assert "lr = 0.1" not in page and "The checks judge these settings, not the preset" in page
    assert "at 1 changed field(s)" in page  # the contents say so too


def test_card_of_a_preset_run_says_no_field_changed(toy, tmp_path):
    assert runner.invoke(app, ["run", "toy-card", "--preset", "tiny", "--out", str(tmp_path)]).exit_code == 0
    page = render(tmp_path)
    assert "preset <code>tiny</code>, no field changed." in page and "changed field(s)" not in page
