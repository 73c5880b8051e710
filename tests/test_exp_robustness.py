"""Helpers of the robustness experiment: the decayed linear solution β*(λ') (§2.7).

``decayed_solution`` solves ``min_β ½ βᵀΣβ - bᵀβ + λ'||β||`` by a scalar root. Oracles:
the closed form for Σ = I (``β = (1 - λ'/||b||) b``), the stationarity condition
``Σβ - b + λ' β/||β|| = 0`` for a general Σ, and the zero solution when ``||b|| <= λ'``.
"""

import numpy as np
import pytest

from biasfree.experiments.robustness import Config, decayed_solution


def _spd(rng, d):
    A = rng.normal(size=(d, d))
    return A @ A.T / d + 0.5 * np.eye(d)


def test_identity_covariance_closed_form():
    b = np.array([3.0, -4.0])  # ||b|| = 5
    beta = decayed_solution(np.eye(2), b, 1.0)
    # shrinkage of the norm by λ' exactly: (1 - 1/5) b; brentq xtol 1e-15 relative
    np.testing.assert_allclose(beta, 0.8 * b, rtol=0, atol=1e-13)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_general_covariance_is_stationary(seed):
    rng = np.random.default_rng(seed)
    S, b = _spd(rng, 5), rng.normal(size=5)
    lam = 0.3 * np.linalg.norm(b)
    beta = decayed_solution(S, b, lam)
    grad = S @ beta - b + lam * beta / np.linalg.norm(beta)
    # root found to 1e-15 relative in ρ; gradient entries are O(||b||): 1e-12 is round-off
    assert np.max(np.abs(grad)) <= 1e-12 * np.linalg.norm(b)


def test_objective_is_minimal_against_perturbations():
    rng = np.random.default_rng(3)
    S, b, lam = _spd(rng, 4), rng.normal(size=4), 0.2

    def J(x):
        return 0.5 * x @ S @ x - b @ x + lam * np.linalg.norm(x)

    beta = decayed_solution(S, b, lam)
    for _ in range(50):
        # strictly convex objective: any step of size 1e-3 raises it (by >= ~λ_min·1e-6/2)
        assert J(beta + 1e-3 * rng.normal(size=4)) > J(beta)


def test_strong_decay_gives_zero():
    np.testing.assert_array_equal(decayed_solution(np.eye(3), np.array([0.1, 0.0, 0.0]), 0.5),
                                  np.zeros(3))


def test_config_rejects_records_off_the_flow_grid():
    with pytest.raises(ValueError, match="multiple of"):
        Config(lrs=(0.03, 0.1), t_max=40.0, n_records=51)
