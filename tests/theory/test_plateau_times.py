"""Predicted plateau times (biasfree.theory.plateau_times, docs/theory.md §11.5) against
training, with a derived tolerance, and their failing controls.

*GD against flow* [derived, §11.5.3]. While a weight grows, GD multiplies it by 1 + ηR a step
where the flow multiplies it by e^{ηR} (R ≥ 0 its growth rate); ln(1 + x) ≥ x(1 − x/2), so GD
takes at least as long as the flow and at most 1/(1 − ηR/2) times as long: a time t predicted
for the flow is met by GD within t·(ηR/2)/(1 − ηR/2), R the largest per-weight growth rate on
the way (s for a two-layer linear mode, (s − a)a^{(L−2)/L} per layer for depth L, 2μA for a
quadratic unit). Add one record interval (the crossing is interpolated between two records) and
the other modes' distance from their plateaus at the predicted time, turned into time by the
curve's slope there.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.integrate import solve_ivp
from scipy.optimize import brentq

import biasfree as bf
from biasfree.claims.saddle_to_saddle.mechanisms import attention_run, linear_conv_run
from biasfree.claims.saddle_to_saddle.run import conv_net, linear_conv_task
from biasfree.theory import aligned_init, data_modes, deep_loss, linear_loss
from biasfree.theory.mechanisms import plateau_count_experiment
from biasfree.theory.plateau_times import (
    crossing_times,
    data_plateaus,
    quadratic_escape_time,
    quadratic_plateaus,
    quadratic_unit_time_to,
)
from biasfree.theory.staircase import find_plateaus, match_levels
from tests.roundoff import gamma
from tests.tasks import whitened_linear

S = np.array([4.0, 2.0, 1.0])


def _whitened_task(s, d=4, N=40):
    """Whitened inputs (XᵀX/N = I to round-off) and targets Y = X Bᵀ, B = U diag(s) Vᵀ."""
    return whitened_linear(N, d, s)


def _train_aligned(s, a0, lr, steps, depth=2):
    X, Y = _whitened_task(s)
    m = data_modes(X, Y)
    p = aligned_init(m.U, m.V, a0, depth=depth, width=4)
    tr = bf.train(p, bf.Dataset(X, Y), bf.GDConfig(alpha=1.0, lr=lr, steps=steps, n_records=steps + 1),
                  observables="loss")
    t, L = np.asarray(tr.t), np.asarray(tr.loss)
    return t[1:], L[1:], float(np.mean(np.sum(Y**2, 1)))


def _gd_tolerance(t_pred, rate, lr):
    x = lr * rate / 2
    return t_pred * x / (1 - x)


def test_linear_plateau_times_and_levels_match_gd_training():
    """Two-layer linear net, balanced aligned init a₀ = 1e-6, GD η = 0.01 on whitened data with
    s = (4, 2, 1): each drop crosses L_i + s_i²/8 at Saxe's half time ln(s_i/a₀ − 1)/(2s_i)
    within the module doc's tolerance, and the plateaus sit at the reduced-rank levels."""
    a0, lr = 1e-6, 0.01
    t, L, y_power = _train_aligned(S, a0, lr, 2000)
    pred = data_plateaus(S, a0, y_power)
    measured = crossing_times(t, L, pred.crossings)
    for i, (tm, tp) in enumerate(zip(measured, pred.times, strict=True)):
        # other modes off their plateaus at t_i (flow closed form), over the slope s³/4 there
        off = abs(float(linear_loss(tp, S, a0, y_power)) - pred.crossings[i])
        tol = _gd_tolerance(tp, S[i], lr) + lr + 2 * off / (S[i] ** 3 / 4)
        assert tp <= tm + lr and abs(tm - tp) <= tol, (i, tm, tp, tol)
    # each plateau matched, in order, to its reduced-rank level, nearer to it than half the gap to
    # the next level (the match is unambiguous; §11.3.2 bounds the distance more tightly)
    matches = match_levels(find_plateaus(t, L), pred.levels)
    assert [m.k for m in matches] == [0, 1, 2, 3]
    half_gaps = np.minimum(np.r_[np.inf, -np.diff(pred.levels)], np.r_[-np.diff(pred.levels), np.inf]) / 2
    assert all(abs(m.gap) < half_gaps[m.k] for m in matches)


def test_a_prediction_with_the_wrong_spectrum_fails():
    """Failing control: the same training against half times of s × 1.1 (or a₀ × 10) misses by
    more than the tolerance for every mode."""
    a0, lr = 1e-6, 0.01
    t, L, y_power = _train_aligned(S, a0, lr, 2000)
    for s_wrong, a_wrong in ((S * 1.1, a0), (S, 10 * a0)):
        pred = data_plateaus(s_wrong, a_wrong, y_power * 1.3)
        right = data_plateaus(S, a0, y_power)
        measured = crossing_times(t, L, right.crossings)
        tol = _gd_tolerance(pred.times, s_wrong, lr) + lr
        assert np.all(np.abs(measured - pred.times) > tol)


def test_deep_linear_plateau_times_match_gd_training():
    """Depth 3, a₀ = 1e-3: the half times ∫ du/(L u^{4/3}(s − u)) (§3.3) within the GD tolerance
    with R = s (s/2)^{1/3}, the largest per-layer rate up to a = s/2."""
    a0, lr, s = 1e-3, 0.005, np.array([2.0, 1.0])
    X, Y = _whitened_task(s)
    m = data_modes(X, Y)
    p = aligned_init(m.U, m.V, a0, depth=3, width=4)
    steps = 3000
    tr = bf.train(p, bf.Dataset(X, Y), bf.GDConfig(alpha=1.0, lr=lr, steps=steps, n_records=steps + 1),
                  observables="loss")
    t, L = np.asarray(tr.t)[1:], np.asarray(tr.loss)[1:]
    y_power = float(np.mean(np.sum(Y**2, 1)))
    pred = data_plateaus(s, a0, y_power, depth=3)
    measured = crossing_times(t, L, pred.crossings)
    two = data_plateaus(s, a0, y_power)  # the two-layer times: a different law, must not match
    for i in range(2):
        # the other mode off its plateau at t_i (flow, deep_loss) over the slope there,
        # (s/2) · L (s/2)^{2 − 2/L} (s/2) at a = s/2
        off = abs(float(deep_loss(pred.times[i], s, a0, 3, y_power)) - pred.crossings[i])
        slope = (s[i] / 2) ** 2 * 3 * (s[i] / 2) ** (4 / 3)
        tol = _gd_tolerance(pred.times[i], s[i] * (s[i] / 2) ** (1 / 3), lr) + lr + 2 * off / slope
        assert abs(measured[i] - pred.times[i]) <= tol, (i, measured[i], pred.times[i], tol)
        assert abs(measured[i] - two.times[i]) > tol


# ------------------------------------------------------------------ init-induced: quadratic units

def _unit_ode(mu, p_star):
    def f(_, y):
        a, b = y
        g = mu * (1 - a * b * b / p_star)
        return [g * b * b, 2 * g * a * b]
    return f


@pytest.mark.parametrize("a0, b0", [(1e-2, np.sqrt(2) * 1e-2), (1e-2, 3e-2), (1e-2, 0.5e-2), (-1e-2, 3e-2)])
def test_quadratic_escape_time_is_the_blow_up_of_the_unit_ode(a0, b0):
    """The small-init ODE (no saturation: p* = inf) integrated until a = 10⁶|a0|: its blow-up
    time is the closed form (C = 0, C > 0, C < 0 with a0 > κ, and a negative a0 with C > 0,
    which turns round and escapes). The time left above a = A is ∫_A^∞ da/(μ(2a² + C)) ≤
    2/(2μA) once 2a² + C ≥ a² (A ≥ √|C|), plus the integrator's rtol 1e-11, taken as 1e-8·t*."""
    mu = 3.0
    ts = quadratic_escape_time(mu, a0, b0)
    big = 1e6 * abs(a0)
    hit = lambda _, y: y[0] - big  # noqa: E731
    hit.terminal = True
    sol = solve_ivp(_unit_ode(mu, np.inf), (0, 10 * ts), [a0, b0], events=hit, rtol=1e-11, atol=1e-14)
    t_hit = float(sol.t_events[0][0])
    assert 0 <= ts - t_hit <= 2 / (2 * mu * big) + 1e-8 * ts
    # control: the escape time of twice the eigenvalue is half, and misses the ODE by far more
    assert abs(quadratic_escape_time(2 * mu, a0, b0) - t_hit) > 0.4 * ts


def test_a_unit_that_never_escapes():
    """C < 0 and a0 ≤ κ: b decays and a settles at κ; the closed form says inf."""
    assert quadratic_escape_time(3.0, 1e-2, 0.0) == np.inf
    assert quadratic_escape_time(3.0, -1e-2, 1e-2) == np.inf


def test_quadratic_unit_time_to_solves_the_saturating_ode():
    """Balanced unit with saturation: the closed form t(x) against the ODE's time to reach
    p = frac·p*, for three fractions; control: the blow-up time alone is late by O(1/(μA))."""
    mu, p_star, a0 = 3.0, 1.0, 1e-2
    fracs = np.array([0.1, 0.5, 0.9])
    pred = quadratic_unit_time_to(fracs, mu, p_star, a0)
    for f, tp in zip(fracs, pred, strict=True):
        ev = lambda _, y, f=f: y[0] * y[1] ** 2 - f * p_star  # noqa: E731
        ev.terminal = True
        sol = solve_ivp(_unit_ode(mu, p_star), (0, 2 * tp), [a0, np.sqrt(2) * a0], events=ev,
                        rtol=1e-11, atol=1e-14)
        assert abs(float(sol.t_events[0][0]) - tp) <= 1e-7 * tp  # rtol 1e-11 over ~1e3 steps
    assert quadratic_escape_time(mu, a0, np.sqrt(2) * a0) - pred[1] > 0.1 / (mu * (p_star / 2) ** (1 / 3))


def _fraction_at(t, mu, p_star, a0, top=1 - 1e-12):
    """The fraction of p* a balanced unit has reached at time t (≥ its half time), by
    inverting quadratic_unit_time_to; ``top`` when it is already past it."""
    g = lambda f: quadratic_unit_time_to(f, mu, p_star, a0) - t  # noqa: E731
    return top if g(top) <= 0 else brentq(g, 0.5, top, xtol=1e-14)


def _one_hot_data(d):
    """Points ±√d e_k: the features z_k² never overlap (z_j z_k = 0 for j ≠ k), so units along
    different e_k decouple exactly; <z_k²> = 1, <z_k⁴> = d."""
    E = np.sqrt(d) * np.eye(d)
    return np.vstack([E, -E])


def _train_quadratic(X, y, W1, a, lr, steps):
    """f(x) = Σ_h a_h (w_h·x)², loss ½<(y − f)²>, plain GD (jax), the loss at every step."""
    X, y = jnp.asarray(X), jnp.asarray(y)

    def loss(th):
        W, c = th
        return 0.5 * jnp.mean((y - ((X @ W.T) ** 2) @ c) ** 2)

    grad = jax.value_and_grad(loss)

    def step(th, _):
        val, g = grad(th)
        return jax.tree_util.tree_map(lambda p, q: p - lr * q, th, g), val

    _, Ls = jax.lax.scan(step, (jnp.asarray(W1), jnp.asarray(a)), None, length=steps + 1)
    return lr * np.arange(steps + 1), np.asarray(Ls)


def test_quadratic_unit_times_match_gd_training_init_induced():
    """Three balanced quadratic units, one per feature e_k of equal strength c = 1 (the data
    give no separation: μ = c·d the same for all), output weights a₀ = 0.02, 0.005, 0.00125:
    three drops, each crossing its level at the unit's own half time t(2^{−1/3}) within the GD
    tolerance R = 2μA (A = (p*/2)^{1/3}); the order and the times follow the init."""
    d, c, lr, steps = 3, 1.0, 0.01, 14000
    X = _one_hot_data(d)
    y = c * np.sum(X**2, 1)
    a0 = np.array([0.02, 0.005, 0.00125])
    W1 = np.diag(np.sqrt(2) * a0)  # w_k = b_k e_k, balanced b² = 2a²
    t, L = _train_quadratic(X, y, W1, a0, lr, steps)
    t, L = t[1:], L[1:]
    mu, p_star, m4 = c * d, c, d
    A = (p_star / 2) ** (1 / 3)
    qp = quadratic_plateaus(np.full(d, mu), m4, a0, float(np.mean(y**2)))
    pred = qp.times
    # units 1..k fitted, the rest at p = 0: ½<(y − f)²> = Σ_{j>k} ½ m4 c²
    # (round-off: <y²> a mean of 6 squares of d·c, then cumulative sums of d terms: γ_8 · ½<y²>·2)
    assert np.allclose(qp.levels, 0.5 * m4 * c**2 * np.arange(d, -1, -1.0), rtol=0, atol=gamma(8) * d * d)
    measured = crossing_times(t, L, qp.crossings)
    slope = m4 * (c / 2) * 6 * mu * A**4 * 2 ** (-4 / 3)  # |dL/dt| at p = p*/2
    for k in range(d):
        # the other units off their plateaus at t_k: later ones ≤ the blow-up solution, earlier
        # ones past frac f where t(f) ≤ t_k
        later = sum(m4 * c * 2 * (a0[j] / (1 - 2 * mu * a0[j] * pred[k])) ** 3 for j in range(k + 1, d))
        earlier = sum(0.5 * m4 * (c - p_star * _fraction_at(pred[k], mu, p_star, a0[j])) ** 2
                      for j in range(k))
        tol = _gd_tolerance(pred[k], 2 * mu * A, lr) + lr + 2 * (later + earlier) / slope
        assert abs(measured[k] - pred[k]) <= tol, (k, measured[k], pred[k], tol)
        # controls: a rate 10% off, and the linear-unit law ln(p*/p₀)/(2μ), miss by more than tol
        assert abs(measured[k] - quadratic_unit_time_to(0.5, 1.1 * mu, 1.1 * p_star, a0[k])) > tol
        assert abs(measured[k] - np.log(p_star / (2 * a0[k] ** 3)) / (2 * mu)) > tol
    assert len(find_plateaus(t, L).plateaus) == d + 1


# --------------------------------------------------------------- which mechanism: width or spectrum

def _linear_run(width, s):
    X, Y = _whitened_task(np.asarray(s, dtype=float), d=3, N=30)
    p = bf.init_gaussian(jax.random.PRNGKey(width), (3, width, 3), 1e-3)
    steps = 1500
    tr = bf.train(p, bf.Dataset(X, Y), bf.GDConfig(alpha=1.0, lr=0.01, steps=steps, n_records=300,
                                                   spacing="log"), observables="loss")
    return np.asarray(tr.t), np.asarray(tr.loss)


def _quadratic_run(width, c):
    """``width`` units, unit k along feature e_k (k < 3) with its own init scale, targets
    Σ_k c_k z_k²: the features are the data's spectrum, the inits the units'."""
    d = 3
    X = _one_hot_data(d)
    y = (X**2) @ np.asarray(c, dtype=float)
    a0 = np.array([0.02, 0.005, 0.00125])[:width]
    W1 = np.zeros((width, d))
    W1[np.arange(width), np.arange(width)] = np.sqrt(2) * a0
    return _train_quadratic(X, y, W1, a0, 0.01, 14000)


def test_linear_plateau_count_follows_the_spectrum_not_the_width():
    """Two-layer linear nets from small random init: widths 3, 4, 6 at s = (4, 2, 1) give four
    plateaus each; at width 4 the spectra (4, 4, 4), (4, 4, 1), (4, 2, 1) give 2, 3, 4."""
    rep = plateau_count_experiment(_linear_run, [3, 4, 6], [(4, 4, 4), (4, 4, 1), (4, 2, 1)],
                                   width=4, spectrum=(4, 2, 1))
    assert rep.width_counts == (4, 4, 4) and rep.spectrum_counts == (2, 3, 4)
    assert rep.follows == "spectrum"


def test_quadratic_plateau_count_follows_the_width_not_the_spectrum():
    """Quadratic units with separated inits: widths 1, 2, 3 at equal features c = (1, 1, 1)
    give 2, 3, 4 plateaus; at width 3 the spectra (1, 1, 1) and (2, 1, 1.5) both give 4."""
    rep = plateau_count_experiment(_quadratic_run, [1, 2, 3], [(1, 1, 1), (2, 1, 1.5)],
                                   width=3, spectrum=(1, 1, 1))
    assert rep.width_counts == (2, 3, 4) and rep.spectrum_counts == (4, 4)
    assert rep.follows == "width"


def test_quadratic_plateaus_order_units_by_init_not_by_rate():
    """A unit with half the rate but 10× the init leaves first (t ≈ 1/(2μa₀): 1/(2·3·0.01) <
    1/(2·6·0.001)); control: with equal inits the order is the rates'."""
    mu, m4 = np.array([6.0, 3.0]), 3.0
    y_power = float(np.sum(mu**2 / m4))
    first = quadratic_plateaus(mu, m4, [1e-3, 1e-2], y_power)
    tol = gamma(4) * y_power  # a few roundings of numbers ≤ y_power
    assert abs(first.levels[1] - (0.5 * y_power - 0.5 * 9 / 3)) <= tol  # unit 2 (μ = 3) first
    same = quadratic_plateaus(mu, m4, 1e-3, y_power)
    assert abs(same.levels[1] - (0.5 * y_power - 0.5 * 36 / 3)) <= tol


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="descending"):
        data_plateaus([1.0, 2.0], 1e-3, 10.0)
    with pytest.raises(ValueError, match="a0 < s/2"):
        data_plateaus([1.0], 0.6, 10.0)
    with pytest.raises(ValueError, match="two widths and two spectra"):
        plateau_count_experiment(_linear_run, [3], [(1,), (2,)], width=3, spectrum=(1,))
    with pytest.raises(ValueError, match="choose 'merged', 'separate' or 'aligned'"):
        attention_run("rank-two")
    with pytest.raises(ValueError, match="at most D = 2"):
        attention_run("aligned")(3, (1.0, 0.5))
    with pytest.raises(ValueError, match="below Σ μ_h²"):
        quadratic_plateaus([3.0], 3.0, 1e-2, 1.0)
    with pytest.raises(ValueError, match="frac must be below 1"):
        quadratic_unit_time_to(1.0, 3.0, 1.0, 1e-2)


def _relu_run(seed):
    def run(width, s):
        X, Y = _whitened_task(np.asarray(s, dtype=float), d=3, N=30)
        p = bf.init_gaussian(jax.random.PRNGKey(width + 100 * seed), (3, width, 3), 1e-3)
        tr = bf.train(p, bf.Dataset(X, Y), bf.GDConfig(alpha=0.0, lr=0.01, steps=6000, n_records=300,
                                                       spacing="log"), observables="loss")
        return np.asarray(tr.t), np.asarray(tr.loss)
    return run


def test_relu_plateau_count_measured():
    """[measured, §11.5.4] Two-layer ReLU nets, init std 1e-3, the linear task above, t ≤ 60,
    five init seeds: widths 3, 6, 12 at s = (4, 2, 1), spectra (4, 4, 4), (4, 4, 1), (4, 2, 1)
    at width 6. The count changes with the spectrum in every seed and never with the width
    alone; in some seeds it changes with the width too (follows "both"), so the ReLU count is not
    the linear net's one-per-distinct-s."""
    reps = [plateau_count_experiment(_relu_run(seed), [3, 6, 12], [(4, 4, 4), (4, 4, 1), (4, 2, 1)],
                                     width=6, spectrum=(4, 2, 1)) for seed in range(5)]
    follows = [r.follows for r in reps]
    # the spectrum changes the count in every seed (a robust outcome: (4, 4, 4) against (4, 2, 1));
    # whether the width changes it too sits at a plateau-detection margin in some seeds (measured
    # 3 of 5 "spectrum", 2 "both"), so that split is reported in §11.5.4, not asserted
    assert all(f in ("spectrum", "both") for f in follows), follows


# ------------------------------------- width or spectrum: conv and attention (the claim's tasks)

def test_linear_conv_plateau_count_follows_the_spectrum_not_the_width():
    """A linear conv net with a pooled readout is a two-layer linear net on its mean patch
    (§11.7.7), so its count is data-induced: on the saddle-to-saddle claim's task (kernel 2,
    mean patch whitened), random init std 1e-2, three init seeds: 2, 3, 5 channels at s = (2, ½)
    give 3 plateaus each, s = (2, 2) and (2, ½) at 3 channels give 2 and 3. Control: below the
    rank (1 and 2 channels) the width limits the count, and the experiment says so."""
    for seed in range(3):
        rep = plateau_count_experiment(linear_conv_run(seed), [2, 3, 5], [(2.0, 2.0), (2.0, 0.5)],
                                       width=3, spectrum=(2.0, 0.5))
        assert rep.width_counts == (3, 3, 3) and rep.spectrum_counts == (2, 3), (seed, rep)
        assert rep.follows == "spectrum"
    low = plateau_count_experiment(linear_conv_run(0), [1, 2], [(2.0, 2.0), (2.0, 0.5)], width=1,
                                   spectrum=(2.0, 0.5))
    assert low.width_counts == (2, 3) and low.follows != "spectrum", low


def _attention(kind, **kw):
    """The claim's in-context task at N = 8, 500 sequences (mirrored), GD η = 0.1; each
    (width, Λ) trained once (the experiment asks for the shared one twice)."""
    return functools.cache(attention_run(kind, n_seq=500, **kw))


def test_merged_attention_has_one_drop_whatever_the_width_or_spectrum():
    """Merged linear attention is a two-layer linear net on the cubic features with one output
    (§10.2–10.3): its end-to-end map has rank ≤ 1, so one drop, two plateaus, at every width and
    spectrum (follows "neither"). Random init std 0.05, three init seeds, 1 and 3 heads at
    Λ = (1, ½), Λ = (1, 1) and (1, ½) at 3 heads, 600 steps."""
    for seed in range(3):
        rep = plateau_count_experiment(_attention("merged", seed=seed, steps=600), [1, 3],
                                       [(1.0, 1.0), (1.0, 0.5)], width=3, spectrum=(1.0, 0.5))
        assert rep.width_counts == (2, 2) and rep.spectrum_counts == (2, 2), (seed, rep)
        assert rep.follows == "neither"


def test_separate_attention_heads_split_equal_eigenvalues_by_their_inits():
    """Separate rank-one heads are init-induced (§11.5.4: t ∝ 1/(s w₀)). The claim's aligned heads,
    head h on component h, 2,000 steps, three data seeds. Inits w₀ = 0.1·½^h: Λ = (1, 1) and (1, ½)
    at 2 heads both give 3 plateaus, the equal eigenvalues split by the inits: the count does not
    follow the spectrum (1 and 2 heads at Λ = (1, ½): 2, 3; follows "width"). Control: at one
    w₀ = 0.1 (the claim's setting) the same two heads learn equal eigenvalues together, 2 plateaus
    at Λ = (1, 1) against 3 at (1, ½): the count follows the spectrum too ("both")."""
    for data_seed in range(3):
        args = ([1, 2], [(1.0, 1.0), (1.0, 0.5)])
        kw = dict(init=0.1, steps=2000, data_seed=data_seed)
        at = dict(width=2, spectrum=(1.0, 0.5))
        rep = plateau_count_experiment(_attention("aligned", ratio=0.5, **kw), *args, **at)
        assert rep.width_counts == (2, 3) and rep.spectrum_counts == (3, 3), (data_seed, rep)
        assert rep.follows == "width"
        same = plateau_count_experiment(_attention("aligned", ratio=1.0, **kw), *args, **at)
        assert same.width_counts == (2, 3) and same.spectrum_counts == (2, 3), (data_seed, same)
        assert same.follows == "both"


# ------------------------------------------- init-induced? a linear conv channel's own init

def _mode_vectors(K, W, U, V):
    """Mode i's hidden vector h_i = W₁v_i + W₂ᵀu_i of the net on the mean patch (W₁ = K, W₂ = W)."""
    return [K @ V[:, i] + W.T @ U[:, i] for i in range(V.shape[1])]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_linear_conv_mode_escapes_from_all_channels_not_from_one(seed):
    """A linear conv net is a linear net on its mean patch p̄ (§11.7.7), and its channels are
    the hidden units of that net. A channel's init does not set a time of its own: mode i grows
    from its hidden vector h_i = W₁v_i + W₂ᵀu_i, a sum over channels (a₀ = ¼‖h_i‖² = Σ_c a₀_c,
    §3.1), and once modes j < i are learned W₂ᵀW₂ ≈ W₁W₁ᵀ ≈ Σ_j s_j ĥ_jĥ_jᵀ damps h_i's part along
    ĥ_j at rate s_j − s_i, so mode i leaves from a₀ᵢ = ¼‖P_i h_i‖², P_i the projector off the
    earlier ĥ_j (§11.5.4). Kernel 2, s = (2, ½), 4 channels of random init std 1e-3, GD η = 0.01:
    the crossings within §11.5.3's tolerance plus the damped part's remainder; controls: §3.1's
    unprojected a₀ for the second mode, and every channel's own a₀ for it, miss."""
    s, n, C, lr, steps = np.array([2.0, 0.5]), 5, 4, 0.01, 2500
    X, Y, _, U, V = linear_conv_task(np.random.default_rng(0), 120, n, s)
    rng = np.random.default_rng(seed)
    K, W = 1e-3 * rng.normal(size=(C, 2)), 1e-3 * rng.normal(size=(2, C))
    tr = bf.train(conv_net(K, W, n), bf.Dataset(X, Y, mirror=False), None, alpha=1.0, lr=lr, steps=steps,
                  n_records=steps + 1, observables="loss")
    t, L = np.asarray(tr.t)[1:], np.asarray(tr.loss)[1:]
    y_power = float(np.mean(np.sum(Y**2, 1)))
    h = _mode_vectors(K, W, U, V)
    e0 = h[0] / np.linalg.norm(h[0])
    perp = h[1] - (h[1] @ e0) * e0
    a0 = np.array([0.25 * h[0] @ h[0], 0.25 * perp @ perp])
    pred = data_plateaus(s, a0, y_power)
    measured = crossing_times(t, L, pred.crossings)
    for i in range(2):
        tp = pred.times[i]
        off = abs(float(linear_loss(tp, s, a0, y_power)) - pred.crossings[i])
        tol = _gd_tolerance(tp, s[i], lr) + lr + 2 * off / (s[i] ** 3 / 4)
        if i == 1:  # h₁'s part along ĥ₀, damped at rate s₀ − s₁ from mode 0's half time on
            par = 0.25 * (h[1] @ e0) ** 2 * np.exp(-2 * (s[0] - s[1]) * (tp - pred.times[0]))
            tol += np.log1p(par / a0[1]) / (2 * s[1])
        assert abs(measured[i] - tp) <= tol, (i, measured[i], tp, tol)
    unprojected = data_plateaus(s, [a0[0], 0.25 * h[1] @ h[1]], y_power).times[1]
    assert abs(measured[1] - unprojected) > tol, (measured[1], unprojected, tol)
    for c in range(C):
        hc = K[c] @ V[:, 1] + W[:, c] @ U[:, 1]  # channel c's own share of h₁
        own = data_plateaus(s, [a0[0], 0.25 * hc**2], y_power).times[1]
        assert abs(measured[1] - own) > tol, (c, measured[1], own, tol)
