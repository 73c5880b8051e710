"""The report reads each card's claim sentences from the result (``result.json``), not
from the live registry; a result saved before they were kept falls back to the registry."""

from __future__ import annotations

import json

import numpy as np
import pytest

from biasfree import store
from biasfree.app.report import claims_of, render
from biasfree.claims import REGISTRY
from biasfree.claims.base import Experiment, config
from biasfree.results import Result, at_most


def _result(claim: str = "", paper_claim: str = "") -> Result:
    return Result("toy-claims", 0, {"width": 2}, {"m": 1.0}, {"ok": at_most(0.0, 1.0, "Zero <= one.")},
                  {"w": np.arange(2.0)}, preset="tiny", claim=claim, paper_claim=paper_claim)


@config
class _Cfg:
    width: int = 2


@pytest.fixture
def registered(monkeypatch):
    monkeypatch.setitem(REGISTRY, "toy-claims", Experiment(
        "toy-claims", "the registry's claim", _Cfg, paper_claim="Claim 9: the registry's paper claim"))


def test_the_stored_claims_round_trip_and_win_over_the_registry(registered, tmp_path):
    store.save(_result("the stored claim", "Claim 1: the stored paper claim"), tmp_path, 0.0)
    doc = json.loads((tmp_path / "toy-claims" / "result.json").read_text())
    assert (doc["claim"], doc["paper_claim"]) == ("the stored claim", "Claim 1: the stored paper claim")
    res = store.load(tmp_path / "toy-claims")
    assert claims_of(res) == ("the stored claim", "Claim 1: the stored paper claim")
    page = render(tmp_path)
    assert "the stored claim" in page and "the stored paper claim" in page
    assert "registry" not in page


def test_an_old_result_without_claims_takes_them_from_the_registry(registered, tmp_path):
    store.save(_result("the stored claim", "Claim 1: the stored paper claim"), tmp_path, 0.0)
    path = tmp_path / "toy-claims" / "result.json"
    doc = json.loads(path.read_text())
    del doc["claim"], doc["paper_claim"]  # as files before the claims were kept
    path.write_text(json.dumps(doc))
    assert claims_of(store.load(tmp_path / "toy-claims")) == \
        ("the registry's claim", "Claim 9: the registry's paper claim")
    page = render(tmp_path)
    assert "the registry&#x27;s claim" in page and "<b>Claim 9.</b>" in page


def test_an_old_result_of_an_unknown_experiment_has_no_claim_line(tmp_path):
    store.save(_result(), tmp_path, 0.0)
    assert claims_of(store.load(tmp_path / "toy-claims")) == ("", "")
    assert "<b>Claim.</b>" not in render(tmp_path)
