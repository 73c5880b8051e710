"""What lets analyse scale: the paired-net test, the blocked forward passes, the growth
estimate from one product and the ODE that keeps no states, each against its direct form."""

import jax
import numpy as np
import pytest
from roundoff import EPS, forward_gap, gamma
from scipy.integrate import solve_ivp

import biasfree as bf
from biasfree.analysis import regime as rg
from biasfree.analysis.structure import paired as _paired
from biasfree.core import blocks
from biasfree.core.nets import forward
from biasfree.nets import Layer
from biasfree.theory import reference

_rng = np.random.default_rng(5)


@pytest.mark.parametrize("half", [3, 800])  # 6 units (assignment path), 1600 (> 1500: the sort alone)
def test_paired_sees_pairs_and_a_perturbed_pair(half):
    net = bf.pair_up(bf.init_gaussian(jax.random.PRNGKey(half), (7, half, 3), 0.3))
    assert _paired(net)
    order = _rng.permutation(2 * half)  # the units in any order: still a mirror-symmetric multiset
    shuffled = (Layer(np.asarray(net[0].W)[order]), Layer(np.asarray(net[1].W)[:, order]))
    assert _paired(shuffled)
    W1 = np.array(net[0].W)
    W1[0, 0] += 1e-6 * np.max(np.abs(W1))  # one unit off its mirror, far above round-off (1e-10)
    assert not _paired((Layer(W1), net[1]))
    assert not _paired(bf.init_gaussian(jax.random.PRNGKey(1), (7, 2 * half, 3), 0.3))


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("widths", [(6, 9, 2), (5, 8, 7, 3)])
def test_blocked_outputs_are_forward_to_round_off(monkeypatch, bias, widths):
    monkeypatch.setattr(blocks, "BLOCK_ENTRIES", 40)  # 4 or 5 rows a block: many blocks and a tail
    net = bf.init_gaussian(jax.random.PRNGKey(2), widths, 0.7, bias=bias)
    X = _rng.normal(size=(23, widths[0]))
    Ws = [np.asarray(la.W) for la in net]
    bs = [np.asarray(la.b) for la in net] if bias else None
    F, Fm = blocks.outputs_and_mirror(net, X, 0.2)
    # two evaluations whose sums run in different orders (row blocks, fused programs): the
    # entrywise forward_gap bound; f(-X) the same (negated inputs round the same way)
    gap = forward_gap(Ws, X, bs) + 1e-300
    np.testing.assert_array_less(np.abs(F - np.asarray(forward(net, X, 0.2))), gap)
    np.testing.assert_array_less(np.abs(Fm - np.asarray(forward(net, -X, 0.2))), gap)
    np.testing.assert_array_equal(blocks.outputs(net, X, 0.2), F)  # the same program on the same blocks


def _growth_direct(params, X, Y, c, B):
    """The estimate as written in its docstring, with the N × m × d products per mode."""
    W1, W2 = np.asarray(params[0].W), np.asarray(params[1].W)
    N = X.shape[0]
    O, sig, R = np.linalg.svd(Y.T @ X / N, full_matrices=False)
    E, delta, bound_e, bound_d = [], [], [], []
    for i in np.nonzero(sig >= rg.MODE_CUT * sig[0])[0]:
        o, r = O[:, i], R[i]
        u, z = 0.5 * (W2.T @ o + W1 @ r), 0.5 * (W2.T @ o - W1 @ r)
        den = float(np.sum(u**2))
        kappa = (1 - c) / c * float(np.sum(u * np.abs(u))) / den
        A = float(o @ B @ r)
        g = max(1.0, float(np.sqrt(abs(A) / (2 * c * den))))
        rest_w, rest_v = W1 - np.outer(W1 @ r + z / g, r), W2.T - np.outer(W2.T @ o - z / g, o)
        rx = np.abs(X @ rest_w.T)
        ns = np.linalg.norm(rest_v, axis=1)
        b = (1 - c) * (rx @ (g * np.abs(u)) + (g * np.abs(np.outer(X @ r, u)) + rx) @ ns)
        E.append(0.25 * kappa**2 * A**2 * float(r @ (X.T @ X / N) @ r))
        delta.append(float(np.sqrt(np.mean(b**2))))
        # round-off of the two ways: ρᵀΣρ vs <(ρ·x)²>, sums of N·d products, γ_{N+2d}|X|²-relative;
        # |r_k·x| from w_k·x − a_k ρ·x vs from the rounded r_k: 2γ_{d+3} |x|(|w_k| + |a_k|) each,
        # carried into b by its weights, and the products g|ρ·x||u_k| ||s_k||: a few ε
        xn = np.linalg.norm(X, axis=1)
        bound_e.append(0.25 * kappa**2 * A**2 * 2 * gamma(N + 2 * X.shape[1]) * np.mean(xn**2))
        a = np.abs(W1 @ r + z / g)
        db = (1 - c) * (2 * gamma(X.shape[1] + 3) * np.outer(xn, np.linalg.norm(W1, axis=1) + a)
                        @ (g * np.abs(u) + ns) + 8 * EPS * b)
        bound_d.append(float(np.sqrt(np.mean(db**2))))
    return np.array(E), np.array(delta), np.array(bound_e), np.array(bound_d)


def test_growth_estimate_from_one_product_is_the_direct_formula(monkeypatch):
    monkeypatch.setattr(rg, "BLOCK_ENTRIES", 100)  # 10 rows a block
    X = _rng.normal(size=(90, 5))
    Y = np.tanh(X @ _rng.normal(size=(5, 3))) + 0.1 * _rng.normal(size=(90, 3))
    net = (Layer(0.2 * _rng.normal(size=(10, 5))), Layer(0.2 * _rng.normal(size=(3, 10))))
    B = bf.theory.data_modes(X, Y, 0.0, whiten=True).B
    est = rg.growth_even_energy(net, X, Y, 0.6, B)
    E, d, dE, dd = _growth_direct(net, X, Y, 0.6, B)
    assert abs(est.energy - E.sum()) <= dE.sum() + 4 * EPS * E.sum()
    root, droot = np.sqrt(E), dE / (2 * np.sqrt(E))  # |Δ√E| <= ΔE / (2√E) to first order
    slack = droot + dd
    assert abs(est.high - np.sum((root + d) ** 2)) <= np.sum(2 * (root + d) * slack + slack**2) * (1 + 1e-6)
    assert abs(est.low - np.sum(np.maximum(root - d, 0) ** 2)) <= np.sum(2 * (root + d) * slack + slack**2)


def test_the_ode_without_stored_states_is_solve_ivp_at_t_eval(monkeypatch):
    Ws = [0.3 * _rng.normal(size=(6, 4)), 0.3 * _rng.normal(size=(5, 6)), 0.3 * _rng.normal(size=(2, 5))]
    X, Y = _rng.normal(size=(50, 4)), _rng.normal(size=(50, 2))
    t = np.r_[np.linspace(0, 4, 61), 1.5]
    P = reference.linear_net_ode(tuple(Layer(W) for W in Ws), X.T @ X / 50, Y.T @ X / 50, t)
    seen = []  # the states the solver interpolates, as solve_ivp(t_eval) would return them

    def keep(field, theta0, ts, rtol, atol, reduce, time_budget=None):
        sol = solve_ivp(field, (0.0, ts[-1]), theta0, method="DOP853", t_eval=ts, rtol=rtol, atol=atol)
        seen.append(np.stack([reduce(y) for y in sol.y.T]))
        return list(seen[-1])

    monkeypatch.setattr(reference, "_integrate", keep)
    P_ivp = reference.linear_net_ode(tuple(Layer(W) for W in Ws), X.T @ X / 50, Y.T @ X / 50, t)
    # the same DOP853 steps and dense output in the same order, the same numbers to the bit
    np.testing.assert_array_equal(P, P_ivp)


def test_a_time_budget_cuts_the_curve_where_it_ran_out(monkeypatch):
    Ws = (Layer(0.3 * _rng.normal(size=(6, 4))), Layer(0.3 * _rng.normal(size=(2, 6))))
    X, Y = _rng.normal(size=(50, 4)), _rng.normal(size=(50, 2))
    t = np.r_[np.linspace(0, 40, 81), 1.5]  # unsorted, one time twice
    full = reference.linear_net_ode(Ws, X.T @ X / 50, Y.T @ X / 50, t)
    clock = iter(range(10**6))  # a clock that ticks one second per reading: the cut is deterministic
    monkeypatch.setattr(reference.time, "monotonic", lambda: float(next(clock)))
    cut = reference.linear_net_ode(Ws, X.T @ X / 50, Y.T @ X / 50, t, time_budget=4.0)
    keep = t <= np.sort(t)[len(cut) - 1]
    assert 0 < len(cut) < t.size and keep.sum() == len(cut)
    np.testing.assert_array_equal(cut, full[keep])  # the same steps, stopped early: the same bits
    clock = iter(range(10**6))
    curve = bf.theory.reference_curve(Ws, X, Y, t, alpha=0.3, time_budget=4.0)
    assert "CUT SHORT" in curve.note and 0 < curve.t.size == curve.loss.size < t.size
    assert bf.theory.reference_curve(Ws, X, Y, t, alpha=0.3).t.size == t.size  # no budget: the whole
    with pytest.raises(ValueError, match="time_budget"):
        reference.linear_net_ode(Ws, X.T @ X / 50, Y.T @ X / 50, t, time_budget=0.0)


def test_analyse_cuts_a_stiff_curve_at_its_budget_and_says_so(monkeypatch):
    from biasfree.analysis import predicted
    from biasfree.analysis.figure import figure

    rng = np.random.default_rng(3)
    X = rng.normal(size=(40, 4)) * np.array([5.0, 1.0, 0.3, 0.1])  # not whitened: the ODE path
    X, Y = bf.symmetrize(X, X @ rng.normal(size=(4, 2)))
    net = bf.init_gaussian(jax.random.PRNGKey(0), (4, 12, 2), 0.1)
    # train=False: the prediction alone (an undecided one is otherwise measured by default, and
    # the fake clock below, which time.monotonic reads everywhere, would spend that run's budget too)
    whole = bf.analyse(net, (X, Y), alpha=0.2, train=False)
    clock = iter(range(10**6))  # one second per reading: the budget of 3 s ends after a step or two
    monkeypatch.setattr(reference.time, "monotonic", lambda: float(next(clock)))
    monkeypatch.setattr(predicted, "CURVE_BUDGET", 3.0)
    cut = bf.analyse(net, (X, Y), alpha=0.2, train=False)
    assert 0 < cut.prediction.t.size == cut.prediction.loss.size < whole.prediction.t.size
    assert "CUT SHORT" in cut.prediction.note
    np.testing.assert_array_equal(cut.prediction.loss, whole.prediction.loss[:cut.prediction.t.size])
    assert cut.verdict.level == whole.verdict.level  # the verdict does not rest on the curve
    figure(cut)  # a figure of the shorter curve draws
    clock = iter(range(10**6))
    trained = bf.analyse(net, (X, Y), alpha=0.2, train=bf.GDConfig(lr=0.01, steps=200, n_records=21))
    assert np.isfinite(trained.prediction.trained.gap_to_prediction)  # over the times the curve reached
