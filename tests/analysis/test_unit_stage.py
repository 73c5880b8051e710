"""The unit stage's search (:mod:`biasfree.analysis.unit_stage`, docs/theory.md §11.7.6) computes
what it computed before, faster: the Jacobian unit by unit is the whole net's, the Newton terms are
the loss's gradient and Hessian, the rows Levenberg–Marquardt is given keep the norm, ``Jᵀr`` and
``JᵀJ`` it reads, a second search compiles and traces nothing, and the recorded curve's levels do
not solve again the narrow nets the stage solved. Each identity has a failing control."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from roundoff import gamma

from biasfree.analysis import unit_stage as us
from biasfree.analysis.lm_rotation import rotated
from biasfree.analysis.stage import stage_of
from biasfree.analysis.stationary import accumulations
from biasfree.core.conv import Conv, PooledDense
from biasfree.nets import Layer


def _nets(rng):
    """A dense ReLU net, a conv net with a dense readout, one with a pooled readout (α = 0.2)."""
    return {"dense": (Layer(rng.normal(size=(5, 6))), Layer(rng.normal(size=(2, 5)))),
            "conv": (Conv(rng.normal(size=(3, 1, 3)), None, (6,), "same"), Layer(rng.normal(size=(2, 18)))),
            "pooled": (Conv(rng.normal(size=(3, 1, 3)), None, (6,), "valid"),
                       PooledDense(rng.normal(size=(2, 3)), in_shape=(4,)))}


def _problem(name):
    rng = np.random.default_rng(3)
    params = _nets(rng)[name]
    X, Y = rng.normal(size=(40, 6)), rng.normal(size=(40, 2))
    U, V, rebuild = us.parts(params)
    th = jnp.asarray(np.concatenate([U.ravel(), V.ravel()]))
    kw = {"rebuild": rebuild, "shape": U.shape, "alpha": 0.2}
    return params, jnp.asarray(X), jnp.asarray(Y), th, kw


@pytest.mark.parametrize("name", ["dense", "conv", "pooled"])
def test_the_jacobian_unit_by_unit_is_the_whole_nets(name):
    params, X, Y, th, kw = _problem(name)
    with jax.enable_x64():
        J = np.asarray(us._jacobian(th, X, Y, **kw))
        whole = np.asarray(jax.jacfwd(lambda t: us._residuals(t, X, Y, **kw))(th))
        # the same products, the whole net's with exact zeros added: each entry a sum of at most K terms
        # (K = N + widths, stationary.accumulations) in another order, 2γ_K of the largest entry
        tol = 2 * gamma(accumulations(params, X.shape[0])) * np.max(np.abs(whole))
        assert J.shape == whole.shape and np.max(np.abs(J - whole)) <= tol
        # control: the Jacobian at a point one unit's weights away (θ with unit 0's rows doubled) fails
        n, a = kw["shape"]
        moved = np.asarray(th).copy()
        moved[:a] *= 2
        wrong = np.asarray(us._jacobian(jnp.asarray(moved), X, Y, **kw))
        assert np.max(np.abs(wrong - whole)) > 1e6 * tol


@pytest.mark.parametrize("name", ["dense", "conv", "pooled"])
def test_the_newton_terms_are_the_losss_gradient_and_hessian(name):
    params, X, Y, th, kw = _problem(name)
    with jax.enable_x64():
        g, H = (np.asarray(x) for x in us._newton_terms(th, X, Y, **kw))
        g0 = np.asarray(jax.grad(us._loss)(th, X, Y, **kw))
        H0 = np.asarray(jax.hessian(us._loss)(th, X, Y, **kw))
        J, r = (np.asarray(f(th, X, Y, **kw)) for f in (us._jacobian, us._residuals))
        # Jᵀr and JᵀJ + Σ r ∇²r against backprop: sums of N p products of chains of K, reordered;
        # 2γ of N p + K terms of the magnitudes |J|ᵀ|r| and |J|ᵀ|J| + |H| (the largest entry)
        k = gamma(Y.size + accumulations(params, X.shape[0]))
        assert np.max(np.abs(g - g0)) <= 2 * k * np.max(np.abs(J).T @ np.abs(r))
        tol = 2 * k * (np.max(np.abs(J).T @ np.abs(J)) + np.max(np.abs(H0)))
        assert np.max(np.abs(H - H0)) <= tol
        # control: Gauss–Newton alone (JᵀJ, without the units' own curvature Σ r ∇²r) fails
        assert np.max(np.abs(J.T @ J - H0)) > 1e6 * tol


def test_the_rotated_rows_keep_what_levenberg_marquardt_reads():
    rng = np.random.default_rng(4)
    m, P = 60, 7
    A, r0 = rng.normal(size=(m, P)), rng.normal(size=m)
    r0[0] = abs(r0[0])  # LAPACK's Householder then gives R₀₀ = −‖r‖: the flip is needed
    res, jac = rotated(lambda t: r0 + A @ t, lambda t: A)
    t = np.zeros(P)  # r = r0 there
    r, rt, Jt = r0 + A @ t, res(t), jac(t)
    assert rt.shape == (P + 1,) and Jt.shape == (P + 1, P) and np.all(rt[1:] == 0)
    # Householder QR of [r, J] is backward stable: [r, J] + Δ, ‖Δ‖_F ≤ γ_{m(P+1)} ‖[r, J]‖_F (Higham
    # Thm 19.4, a constant absorbed by the length m(P+1)); the products then differ by 2γ ‖·‖_F²
    size = np.linalg.norm(np.column_stack([r, A]))
    tol = 2 * gamma(m * (P + 1)) * size**2
    assert abs(rt[0] ** 2 - r @ r) <= tol
    assert np.max(np.abs(Jt.T @ rt - A.T @ r)) <= tol
    assert np.max(np.abs(Jt.T @ Jt - A.T @ A)) <= tol
    # control: without the sign flip, J̃ᵀr̃ is −Jᵀr
    unflipped = np.linalg.qr(np.column_stack([r, A]), mode="r")
    assert unflipped[0, 0] < 0 and np.max(np.abs(unflipped[:, 1:].T @ rt - A.T @ r)) > 1e6 * tol


def _small():
    """A 6-4-2 ReLU net at a small init on 60 mirrored points."""
    rng = np.random.default_rng(5)
    X = rng.normal(size=(30, 6))
    X = np.concatenate([X, -X])
    Y = np.tanh(X @ rng.normal(size=(6, 2)))
    return (Layer(rng.normal(size=(4, 6)) * 0.1), Layer(rng.normal(size=(2, 4)) * 0.1)), X, Y


def test_a_second_search_traces_and_compiles_nothing():
    """The residuals, Jacobian, Newton terms and ascent are compiled once per shape (a hashable
    rebuild, static): a second stage of the same net traces no function and compiles no program."""
    params, X, Y = _small()
    events = []

    def listen(event, duration, **_):
        events.append(event)
    jax.monitoring.register_event_duration_secs_listener(listen)
    try:
        first = stage_of(params, X, Y, 0.0)
        n_first = len(events)
        second = stage_of(params, X, Y, 0.0)
    finally:
        jax.monitoring.unregister_event_duration_listener(listen)
    traced = [e for e in events[n_first:] if e in ("/jax/core/compile/jaxpr_trace_duration",
                                                   "/jax/core/compile/backend_compile_duration")]
    assert n_first > 0 and traced == []  # control: the first stage traced and compiled
    assert second.unit_point.k == first.unit_point.k


def test_the_recorded_levels_reuse_the_stages_narrow_nets(monkeypatch):
    """With a curve, the levels of 0…L units are matched: the narrow nets the stage solved (its k
    strongest groups, and groups merged into k units) are reused, so no narrow net is solved twice
    from the same start, and the levels of 1…L units are among them."""
    params, X, Y = _small()
    calls = []
    real = us.narrow_fixed_point

    def counting(rebuild, U0, *args):
        calls.append(U0.tobytes())
        return real(rebuild, U0, *args)
    monkeypatch.setattr(us, "narrow_fixed_point", counting)
    t = np.linspace(0, 10, 200)
    st = stage_of(params, X, Y, 0.0, curve=(t, 1 / (1 + t)))
    L = len(st.recorded.levels) - 1
    assert L >= 2 and len(calls) == len(set(calls))
    first = set(calls)
    # control: with no solved nets given (a fresh dict), the levels alone solve all L again, each a
    # start the stage already solved from
    calls.clear()
    us.unit_levels(params, X, Y, 0.0, None, st.units.threshold, {})
    assert len(calls) == L + 1 and set(calls) <= first  # k = 0 … L (k = 0: nothing to solve)
