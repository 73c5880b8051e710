"""Plateaus of a loss curve (biasfree.theory.staircase) on curves whose answer is known, and the
plateau levels of reduced-rank regression (biasfree.theory.reduced_rank), docs/theory.md §11.3."""

import numpy as np
import pytest
from roundoff import EPS, gamma

from biasfree.theory import half_time, linear_loss, plateaus
from biasfree.theory.reduced_rank import reduced_rank_fit, reduced_rank_losses
from biasfree.theory.staircase import MIN_RECORDS, drop_times, find_plateaus, match_levels

S = np.array([4.0, 2.0, 1.0])
A0 = 1e-6
Y_POWER = float(np.sum(S**2)) + 1.0  # a unit of power no linear map fits: the last level is 0.5


def _saxe(n=400, t_max=30.0):
    t = np.geomspace(1e-2, t_max, n)
    return t, linear_loss(t, S, A0, Y_POWER)


def _chord_slopes(t, L):
    return np.abs(np.diff(L)) / np.diff(np.log(t))


def test_saxe_staircase_has_one_plateau_per_saddle_at_its_level():
    """Saxe's closed form from small aligned init, three modes: four plateaus (the saddles at
    rank 0, 1, 2 and the minimum), three drops, each containing its mode's half time, and each
    level within the bound §11.3 derives from the plateau's own slope: near a saddle the modes
    still to come grow as e^{2st} and the learned ones' error decays as e^{−4st}, so on a
    plateau |L − L_k| ≤ |dL/du| / (t r), r = min(2 s_k, s_{k+1}/2) (the slower rate of the
    two neighbours, valid while a < s/2 resp. a > s/2); |dL/du| at the level's records is
    bounded by the larger chord slope of the flattest interval and its neighbours."""
    t, L = _saxe()
    st = find_plateaus(t, L)
    assert len(st.plateaus) == 4 and len(st.drops) == 3
    for drop, th in zip(st.drops, half_time(S, A0), strict=True):
        assert drop.start < th < drop.end
    expected = plateaus(S, Y_POWER)
    g = _chord_slopes(t, L)
    for k, p in enumerate(st.plateaus):
        i = int(np.searchsorted(t, p.t_level)) - 1  # the flattest interval [t_i, t_{i+1}]
        slope = g[max(i - 1, 0): i + 2].max()
        rates = ([2 * S[k - 1]] if k else []) + ([S[k] / 2] if k < S.size else [])
        tol = slope / (t[i] * min(rates)) + gamma(8) * Y_POWER  # + round-off of the closed form
        assert abs(p.level - expected[k]) <= tol, (k, p.level, expected[k], tol)
    matches = match_levels(st, expected)
    assert [m.k for m in matches] == [0, 1, 2, 3]


def test_a_wrong_level_is_not_matched():
    """Failing control: levels shifted by half a gap are further from every plateau than the
    bound above, and a level list missing one saddle matches two plateaus to one level."""
    t, L = _saxe()
    st = find_plateaus(t, L)
    expected = plateaus(S, Y_POWER)
    matches = match_levels(st, np.delete(expected, 1))
    assert [m.k for m in matches] != list(range(len(st.plateaus)))
    assert abs(matches[1].gap) > 0.1 * (expected[0] - expected[1])


@pytest.mark.parametrize("n_drops", [1, 2, 3])
def test_logistic_staircases_in_log_time(n_drops):
    """L(u) = 0.1 + Σ_k h_k σ((u_k − u)/w), drops at u_k = 0, 3, 6 of width w = 0.2: n_drops
    drops, each containing u_k, and plateau levels 0.1 + Σ_{j>k} h_j to within 2 w |dL/du|
    (a logistic tail T = h σ(−x/w) has |dT/du| = T(1 − σ)/w ≥ T/(2w) beyond its centre)."""
    w, h = 0.2, np.array([1.0, 0.5, 0.25])[:n_drops]
    centres = np.array([0.0, 3.0, 6.0])[:n_drops]
    u = np.linspace(-4, centres[-1] + 4, 300)
    L = 0.1 + np.sum(h[:, None] / (1 + np.exp((u[None] - centres[:, None]) / w)), axis=0)
    t = np.exp(u)
    st = find_plateaus(t, L)
    assert len(st.drops) == n_drops and len(st.plateaus) == n_drops + 1
    for drop, c in zip(st.drops, centres, strict=True):
        assert drop.start < np.exp(c) < drop.end
    g = _chord_slopes(t, L)
    for k, p in enumerate(st.plateaus):
        i = int(np.searchsorted(t, p.t_level)) - 1
        assert abs(p.level - (0.1 + h[k:].sum())) <= 2 * w * g[max(i - 1, 0): i + 2].max() + gamma(4)


def test_uniform_descent_in_log_time_has_no_plateau():
    """L = 1 − u/U falls at the mean rate everywhere: twice τ, so no plateau, one drop."""
    t = np.geomspace(1e-3, 1e3, 50)
    st = find_plateaus(t, 1 - np.log(t / t[0]) / np.log(t[-1] / t[0]))
    assert st.plateaus == () and len(st.drops) == 1


def test_roundoff_noise_makes_no_plateau_or_drop():
    """A constant curve with noise at round-off (4ε relative) is one plateau; Saxe's curve with
    the same noise has the same staircase as without."""
    rng = np.random.default_rng(0)
    t = np.geomspace(1e-2, 10, 200)
    flat = find_plateaus(t, 2.0 * (1 + 4 * EPS * rng.uniform(-1, 1, t.size)))
    assert len(flat.plateaus) == 1 and flat.drops == ()
    t, L = _saxe()
    noisy = find_plateaus(t, L * (1 + 4 * EPS * rng.uniform(-1, 1, t.size)))
    clean = find_plateaus(t, L)
    assert len(noisy.plateaus) == len(clean.plateaus) and len(noisy.drops) == len(clean.drops)


def test_a_real_drop_is_not_noise():
    """Failing control of the noise allowance: a drop of 10⁶ round-offs is found."""
    t = np.geomspace(1e-2, 10, 200)
    u = np.log(t)
    L = 2.0 - 2e6 * EPS / (1 + np.exp(-(u - np.log(0.3)) / 0.05))
    st = find_plateaus(t, L, noise=4 * EPS * 2.0)
    assert len(st.drops) == 1


def _one_drop(n):
    u = np.linspace(-4, 4, n)
    return np.exp(u), 0.1 + 1 / (1 + np.exp(u / 0.2))


def test_too_short_and_too_coarse_curves_say_how_many_records():
    """Fewer than MIN_RECORDS records, or a drop between two consecutive records, is refused
    with the number of records needed; that many records resolve the drop (a record inside it).
    Saxe's curve at 6 records puts its first drops in one interval; at 8-20 its three drops
    merge into one two-interval drop: no rule can see a drop between records (§11.3)."""
    t, L = _saxe(n=MIN_RECORDS - 1)
    with pytest.raises(ValueError, match=f"needs at least {MIN_RECORDS}"):
        find_plateaus(t, L)
    t, L = _saxe(n=6)
    with pytest.raises(ValueError, match="too coarse"):
        find_plateaus(t, L)
    with pytest.raises(ValueError, match="too coarse") as err:
        find_plateaus(*_one_drop(6))
    need = int(str(err.value).split("record at least ")[1].split()[0])
    st = find_plateaus(*_one_drop(need))  # as many as the message asks for: resolved
    assert len(st.drops) == 1 and len(st.plateaus) == 2
    with pytest.raises(ValueError, match="strictly increasing"):
        find_plateaus(t[::-1], L)


def test_reduced_rank_fit_is_the_best_rank_k_map_in_the_whitened_metric():
    """L_k from the map on the data equals ½(tr Σ_yy − Σ_{i≤k} s_i²) (a different computation),
    within round-off: the loss is a mean of N sums of p squares of residuals that are sums of d
    products, off by γ_{N+p+d} (|y|² + |β||x|·…) ≤ 4 γ_K ½<|y|²> for these well-scaled data.
    Failing control: the rank-k truncation of the least-squares map in the plain metric is worse
    (Σ_xx ≠ I here) by far more than round-off."""
    rng = np.random.default_rng(1)
    N, d, p = 50, 4, 3
    X = rng.standard_normal((N, d)) @ np.diag([3.0, 1.0, 0.5, 0.2])
    Y = X @ rng.standard_normal((d, p)) + 0.2 * rng.standard_normal((N, p))
    levels = reduced_rank_losses(X, Y)
    ref = 0.5 * np.mean(np.sum(Y**2, 1))
    tol = 4 * gamma(N + p + d) * ref * np.linalg.cond(X) ** 2  # the whitening's condition number
    for k in range(p + 1):
        beta, Lk = reduced_rank_fit(X, Y, k)
        assert np.linalg.matrix_rank(beta) == k
        assert abs(Lk - levels[k]) <= tol
    B = np.linalg.lstsq(X, Y, rcond=None)[0].T
    U, s, Vt = np.linalg.svd(B)
    plain = (U[:, :1] * s[:1]) @ Vt[:1]
    L_plain = 0.5 * np.mean(np.sum((Y - X @ plain.T) ** 2, 1))
    assert L_plain - levels[1] > 1e3 * tol


def test_trained_linear_net_plateaus_sit_at_reduced_rank_losses():
    """A two-layer linear net (width 4) trained by plain GD (NumPy here, nothing of biasfree's
    trainer) from a small random init on three modes: four plateaus, matched in order to the
    losses of the best rank-0..3 maps, each within the slope bound of the Saxe test above, its
    rates r = min(2 s_k, s_{k+1}/2) (whitened s) turned into GD's per-step rates ln(1 + η r)/η."""
    rng = np.random.default_rng(2)
    N, d, p, H, lr, steps = 60, 3, 3, 4, 0.02, 3000
    X = rng.standard_normal((N, d))
    Q = np.linalg.qr(rng.standard_normal((3, 3)))[0]
    Y = X @ np.diag([3.0, 1.5, 0.6]) @ Q + 0.1 * rng.standard_normal((N, p))
    Sxx, Syx = X.T @ X / N, Y.T @ X / N
    W1, W2 = 1e-4 * rng.standard_normal((H, d)), 1e-4 * rng.standard_normal((p, H))
    L = np.empty(steps)
    for k in range(steps):
        L[k] = 0.5 * np.mean(np.sum((Y - X @ (W2 @ W1).T) ** 2, 1))
        G = Syx - W2 @ W1 @ Sxx
        W1, W2 = W1 + lr * W2.T @ G, W2 + lr * G @ W1.T
    t = lr * np.arange(steps)
    st = find_plateaus(t, L)
    levels = reduced_rank_losses(X, Y)
    assert [m.k for m in match_levels(st, levels)] == [0, 1, 2, 3]
    lam, V = np.linalg.eigh(Sxx)
    s = np.linalg.svd(Syx @ (V / np.sqrt(lam)) @ V.T, compute_uv=False)
    tp, g = t[1:], _chord_slopes(t[1:], L[1:])
    for k, pl in enumerate(st.plateaus):
        i = int(np.searchsorted(tp, pl.t_level)) - 1
        rates = ([2 * s[k - 1]] if k else []) + ([s[k] / 2] if k < s.size else [])
        r = np.log1p(lr * min(rates)) / lr
        tol = g[max(i - 1, 0): i + 2].max() / (tp[i] * r) + gamma(N + d + p) * levels[0]
        assert abs(pl.level - levels[k]) <= tol, (k, pl.level, levels[k], tol)


def test_separate_attention_plateaus_sit_at_pcr_losses():
    """The separate rank-one-head attention model's GD curve (§10.4 closed form, Λ = diag(1,
    0.5, 0.25), N = 16, w₀ = 0.05): four plateaus, matched in order to the PCR losses
    L_k = ½(tr Λ − Σ_{i≤k} s_i²/a_i) (theory.attention.plateau_losses), each closer to its own
    level than half the distance to the next one (so the match is unambiguous)."""
    from biasfree.theory.attention import components, plateau_losses, separate_gd, separate_loss

    cov, n_ctx, lr, steps = np.diag([1.0, 0.5, 0.25]), 16, 0.1, 6000
    _, _, s, a = components(cov, n_ctx)
    loss = separate_loss(separate_gd(steps, s, a, 0.05, lr), cov, n_ctx)
    st = find_plateaus(lr * np.arange(steps + 1), loss)
    levels = plateau_losses(cov, n_ctx)
    matches = match_levels(st, levels)
    assert [m.k for m in matches] == [0, 1, 2, 3]
    half_gaps = np.minimum(np.r_[np.inf, -np.diff(levels)], np.r_[-np.diff(levels), np.inf]) / 2
    assert all(abs(m.gap) < half_gaps[m.k] for m in matches)


# --- noisy curves (§11.3.1: the pair-noise bound, the estimate of σ, rises apart from drops) ---

W_STEP = 0.2  # logistic width in log-time of every synthetic step below


def _steps(u, centres, heights, floor):
    """L(u) = floor + Σ_k h_k σ((c_k − u)/w): a drop of h_k > 0 (a rise if h_k < 0) at u = c_k."""
    c, h = np.asarray(centres, float)[:, None], np.asarray(heights, float)[:, None]
    return floor + np.sum(h / (1 + np.exp((u[None] - c) / W_STEP)), axis=0)


def _premise(st, e):
    """The bounds below stand on the errors being inside the rule's allowance: every pair within
    2δ (probability ≥ 1 − α, module doc) and every record within δ (probability ≥ 1 − √(2α),
    the union bound over T records of P(|e| > kσ) ≤ e^{−k²/2}). Checked on the draw, not
    assumed."""
    assert np.ptp(e) <= 2 * st.noise and np.max(np.abs(e)) <= st.noise


def _check_levels(st, u, closed, truth):
    """Each plateau's level is the mean of its window's records: within δ of the closed form's
    mean there (|mean e| ≤ max|e| ≤ δ), and that mean within the closed form's largest distance
    from the plateau's true level over the window, which spans at most W + max Δu around t_level."""
    half = (st.window + np.max(np.diff(u))) / 2
    for p, level in zip(st.plateaus, truth, strict=True):
        edge = np.log(p.t_level) + np.array([-half, half])
        dev = np.max(np.abs(closed(edge) - level))
        assert abs(p.level - level) <= st.noise + dev, (p.level, level, st.noise, dev)


def _check_times(st, t, L, closed):
    """drop_times interpolates between the records j−1, j on either side of the midpoint m of two
    levels. Those records are within δ of the closed form, which is monotone between the
    plateaus: so u_{j−1} ≤ u(m ∓ δ) and u_j ≥ u(m ± δ), the crossing lies within one record
    interval Δu of the closed form's own crossings of m − δ and m + δ (found by brentq)."""
    from scipy.optimize import brentq

    u = np.log(t)
    du = np.max(np.diff(u))
    for k, tc in enumerate(drop_times(t, L, st)):
        a, b = st.plateaus[k], st.plateaus[k + 1]
        m = 0.5 * (a.level + b.level)
        lo, hi = np.log(a.t_level), np.log(b.t_level)
        at = [brentq(lambda x, y=y: closed(np.array([x]))[0] - y, lo, hi)
              for y in (m - st.noise, m + st.noise)]
        assert min(at) - du <= np.log(tc) <= max(at) + du, (k, np.log(tc), at, du)


@pytest.mark.parametrize("n", [200, 400, 2000])
def test_a_noisy_drop_has_the_same_staircase_at_every_density(n):
    """The audit's curve: L = 1/(1 + t⁵) on 10⁻²..10² plus N(0, 10⁻⁶) errors, σ estimated from
    the curve. At 200, 400 and 2,000 records: two plateaus (1 and 0) and one drop, never a
    "too coarse" refusal (today's main asks for 399 records at 200, 800 at 400). Where the drop
    starts is bounded from the rule (§11.3.1) with g = L + τu of the closed form: the start
    lies between j₀, the first record past g's peak p with g < g_p − 4δ, and the first record
    before p with g > g_{j₀} − 2δ; its end between the mirror records around g's trough.
    Levels and the half-drop time within the bounds of _check_levels and _check_times."""
    rng = np.random.default_rng(0)
    t = np.logspace(-2, 2, n)
    u = np.log(t)
    exact, e = 1 / (1 + t**5), 1e-3 * rng.standard_normal(n)
    st = find_plateaus(t, exact + e)
    _premise(st, e)
    assert len(st.plateaus) == 2 and len(st.drops) == 1 and st.rises == ()
    g = exact + st.threshold * u
    p = int(np.argmax(np.where(u < 0, g, -np.inf)))
    j0 = p + int(np.argmax(g[p:] < g[p] - 4 * st.noise))
    lo = int(np.argmax(g > g[j0] - 2 * st.noise))
    q = int(np.argmin(np.where(u > 0, g, np.inf)))
    i0 = q - int(np.argmax(g[q::-1] > g[q] + 4 * st.noise))
    hi = n - 1 - int(np.argmax(g[::-1] < g[i0] + 2 * st.noise))
    d = st.drops[0]
    assert lo <= np.searchsorted(t, d.start) <= j0 and i0 <= np.searchsorted(t, d.end) <= hi
    _check_levels(st, u, lambda x: 1 / (1 + np.exp(5 * x)), [1.0, 0.0])
    _check_times(st, t, exact + e, lambda x: 1 / (1 + np.exp(5 * x)))


def test_a_noisy_two_step_staircase():
    """Drops of 1 and 0.5 at u = 0 and 3 over a floor of 0.1, 500 log-spaced records on
    u ∈ [−4, 7], errors N(0, 10⁻⁶): three plateaus at 1.6, 0.6, 0.1 and two drops, each around
    its centre, levels and half-drop times within the bounds above."""
    rng = np.random.default_rng(1)
    u = np.linspace(-4, 7, 500)
    t = np.exp(u)

    def closed(x):
        return _steps(x, [0.0, 3.0], [1.0, 0.5], 0.1)

    e = 1e-3 * rng.standard_normal(u.size)
    st = find_plateaus(t, closed(u) + e)
    _premise(st, e)
    assert len(st.plateaus) == 3 and len(st.drops) == 2 and st.rises == ()
    for d, c in zip(st.drops, [0.0, 3.0], strict=True):
        assert d.start < np.exp(c) < d.end
    _check_levels(st, u, closed, [1.6, 0.6, 0.1])
    _check_times(st, t, closed(u) + e, closed)


@pytest.mark.parametrize("sigma", [0.0, 1e-3])
def test_a_rise_is_not_a_drop(sigma):
    """A drop of 0.8 at u = −2 then a rise of 0.4 at u = 2 (levels 1, 0.2, 0.6), exact and with
    errors N(0, σ²): one drop and one rise, each its own size to within 2δ + the closed form's
    distance from its levels at the records bounding it; three plateaus at their levels. Today's
    main counts the rise as a second drop of negative size."""
    rng = np.random.default_rng(2)
    u = np.linspace(-5, 5, 500)
    t = np.exp(u)

    def closed(x):
        return _steps(x, [-2.0, 2.0], [0.8, -0.4], 0.6)

    e = sigma * rng.standard_normal(u.size)
    st = find_plateaus(t, closed(u) + e)
    _premise(st, e)
    assert len(st.drops) == 1 and len(st.rises) == 1 and len(st.plateaus) == 3
    assert st.drops[0].end <= st.rises[0].start
    for ch, size, lv in ((st.drops[0], 0.8, (1.0, 0.2)), (st.rises[0], 0.4, (0.2, 0.6))):
        ends = closed(np.log([ch.start, ch.end]))
        tol = 2 * st.noise + abs(ends[0] - lv[0]) + abs(ends[1] - lv[1])
        assert abs(ch.size - size) <= tol, (ch, size, tol)
    _check_levels(st, u, closed, [1.0, 0.2, 0.6])


def test_a_noisy_too_coarse_curve_gets_a_count_that_resolves_it():
    """One drop (w = 0.2) at 6 records over u ∈ [−4, 4], errors N(0, 10⁻⁶): refused as too
    coarse, naming the noise and noise=; the count it asks for, drawn afresh with the same
    noise, gives two plateaus and one drop. The same check for the exact curve is
    test_too_short_and_too_coarse_curves_say_how_many_records."""
    rng = np.random.default_rng(3)

    def curve(n):
        u = np.linspace(-4, 4, n)
        return np.exp(u), 0.1 + 1 / (1 + np.exp(u / W_STEP)) + 1e-3 * rng.standard_normal(n)

    with pytest.raises(ValueError, match="too coarse.*noise=") as err:
        find_plateaus(*curve(6))
    need = int(str(err.value).split("record at least ")[1].split()[0])
    st = find_plateaus(*curve(need))
    assert len(st.drops) == 1 and len(st.plateaus) == 2


def test_noise_larger_than_the_drop_finds_no_drop_and_says_so():
    """Failing control of the noise allowance: a drop of 0.01 under errors of σ = 0.01 (2δ ≈ 8σ
    at 500 records) is no drop, and the summary says so with D and 2δ; the same drop under
    σ = 10⁻⁴ is found. Saying the noisy curve is exact (noise=0) finds changes that are noise."""
    rng = np.random.default_rng(4)
    u = np.linspace(-4, 4, 500)
    t, L = np.exp(u), 0.5 + 0.01 / (1 + np.exp(u / W_STEP))
    loud = find_plateaus(t, L + 1e-2 * rng.standard_normal(u.size))
    assert loud.drops == () and loud.rises == () and len(loud.plateaus) == 1
    assert loud.summary().startswith("no drop or rise beyond the noise")
    quiet = find_plateaus(t, L + 1e-4 * rng.standard_normal(u.size))
    assert len(quiet.drops) == 1 and len(quiet.plateaus) == 2
    noisy = L + 1e-2 * rng.standard_normal(u.size)
    told_exact = find_plateaus(t, noisy, noise=0)
    assert len(told_exact.rises) >= 1  # the curve has no rise: this one is noise


def test_the_noise_estimate_reads_sigma_off_pure_noise_and_zero_off_an_exact_line():
    """noise_level on N(0, σ²) at 2,000 records: σ̂/σ − 1 within ±4 s/√m (s = _SQ, m ≈ T: the
    estimate is raised by 2 s/√m on purpose, and ±2 s/√m is its own sampling spread); on an
    exact straight line in log-time it is 0 (the pseudo-residuals vanish), on an exact
    staircase below 1e-3 of its smallest step."""
    from biasfree.theory.staircase import _SQ, noise_level

    rng = np.random.default_rng(5)
    t = np.geomspace(1e-2, 1e2, 2000)
    sig = noise_level(t, 0.5 + 1e-3 * rng.standard_normal(t.size)) / 1e-3
    assert abs(sig - 1) <= 4 * _SQ / np.sqrt(t.size - 2), sig
    assert noise_level(t, 1 - np.log(t) / 10) <= gamma(4)
    assert noise_level(*_saxe()) < 1e-3 * 0.5
