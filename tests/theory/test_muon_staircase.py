"""Issue 49 item 9: the staircase under Muon (``optax.contrib.muon``) on the linear task of
benchmarks/staircase_optimisers.py (docs/theory.md §11.6). Muon orthogonalises each 2-D update by
Newton–Schulz, so every factor singular value of a weight grows by about η a step whatever its
gradient: mode i's strength a_i = b_i c_i reaches s_i/2 at k_i ∝ √s_i, the smaller mode first, the
ratio of successive half steps √(s_{i+1}/s_i) (one rate, as Rhee, Simon & Karkada 2026 report).
GD learns the larger first, at ratios near s_i/s_{i+1} = 2 (§3.1): the failing control."""

import inspect

import jax
import numpy as np
import optax
import optax.contrib
import pytest

import biasfree as bf
from biasfree.dynamics.train_config import record_steps
from biasfree.theory.plateau_times import mode_half_times

S = np.array([4.0, 2.0, 1.0, 0.5])
RECORDS = 400


def _rotation(rng, n):
    q, r = np.linalg.qr(rng.normal(size=(n, n)))
    return q * np.sign(np.diag(r))


def _half_steps(optimiser, steps: int, seed: int) -> np.ndarray:
    """The bench's linear task (whitened inputs, d = 4, N = 64, y = U diag(S) Vᵀ x for random
    rotations; width 8, init std 1e-3): each mode's half step, read from 400 log-spaced records."""
    rng = np.random.default_rng(seed)
    X = np.linalg.qr(rng.normal(size=(64, 4)))[0] * 8.0
    data = bf.Dataset(X, X @ (_rotation(rng, 4) @ np.diag(S) @ _rotation(rng, 4).T).T)
    net = bf.init_gaussian(jax.random.PRNGKey(seed), (4, 8, 4), scale=1e-3)
    run = bf.train(net, data, optimiser, steps=steps, alpha=1.0, n_records=RECORDS, spacing="log",
                   observables="loss", keep_params=True)
    t = record_steps(steps, RECORDS, "log").astype(float)
    return mode_half_times(t, run.path[0].W, run.path[1].W, data.X, data.Y, 1.0)


def _band() -> tuple[float, float]:
    """The factor on √(s_{i+1}/s_i) that one-rate growth allows. Newton–Schulz (optax's
    coefficients and steps, read from ``optax.contrib.muon``) maps a singular value x of the
    Frobenius-normalised update, x ∈ [0.05, 1], into [ν₋, ν₊] (computed here on a grid of 20,000
    points): each mode's rate is η ν with ν there, so the ratio of two modes' half steps moves by
    at most ν₊/ν₋ either way. Each half step is read within one record interval of the log grid,
    a factor ρ = (steps)^{1/(RECORDS − 2)}, ρ² on a ratio."""
    p = inspect.signature(optax.contrib.muon).parameters
    (a, b, c), n = p["ns_coeffs"].default, p["ns_steps"].default
    x = np.linspace(0.05, 1.0, 20_000)
    for _ in range(n):
        x = a * x + b * x**3 + c * x**5
    rho2 = 4000.0 ** (2.0 / (RECORDS - 2))
    return x.min() / x.max() / rho2, x.max() / x.min() * rho2


@pytest.mark.parametrize("seed", [0, 1])
def test_muon_learns_every_mode_at_one_rate_the_smaller_first(seed):
    lo, hi = _band()
    ratios = np.diff(np.log(_half_steps(optax.contrib.muon(2e-3), 4000, seed)))
    want = 0.5 * np.log(S[1:] / S[:-1])  # ln √(s_{i+1}/s_i) = ln(1/√2)
    assert np.all(np.isfinite(ratios))
    assert np.all(ratios - want >= np.log(lo)) and np.all(ratios - want <= np.log(hi))
    # the control: GD (η = 0.02, 1,500 steps) learns the larger mode first, at ratios outside the band
    gd = np.diff(np.log(_half_steps(optax.sgd(0.02), 1500, seed)))
    assert np.all(gd - want > np.log(hi))
