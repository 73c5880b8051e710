"""Fixtures shared by the analysis tests (a module's own fixture of the same name overrides one
here: test_saddles.py's ``linear`` is a net at its minimum, not these data)."""

from __future__ import annotations

import numpy as np
import pytest


@pytest.fixture(scope="module")
def linear():
    """Mirror-symmetric inputs, an odd linear target (test_questions.py's data; used by
    test_analyse_decide and test_measure_step)."""
    rng = np.random.default_rng(0)
    Xp = rng.normal(size=(100, 10))
    X = np.vstack([Xp, -Xp])
    return X, (X @ rng.normal(size=10) / np.sqrt(10))[:, None]
