"""Embedded fixed points (biasfree.analysis.saddles, Theorem 1; docs/theory.md §11.4): each
construction keeps the function and the zero gradient to round-off, a linear net's zero-unit
embedding of its rank-k minimum is a saddle whose lowest Hessian eigenvalue is −σ₁ of the
residual's cross-covariance, and wrong embeddings and non-fixed points fail."""

import numpy as np
import pytest
from roundoff import gamma

from biasfree.analysis.saddles import check_embedding, embed, embedded_params, fixed_point
from biasfree.nets import Layer
from biasfree.theory import half_time
from biasfree.theory.reduced_rank import reduced_rank_losses, whitened_svd

N, D, P = 40, 4, 3


def _whitened(rng, n=N, d=D):
    Q, _ = np.linalg.qr(rng.standard_normal((n, d)))
    return np.sqrt(n) * Q  # XᵀX/N = I exactly up to round-off


def _top_k(X, Y, k):
    """``(params, s)``: the balanced best rank-k two-layer linear net of width k (W₁ = √s V_kᵀ,
    W₂ = U_k √s from the SVD of Σ_yx, the best map on whitened inputs) and Σ_yx's singular values."""
    U, s, Vt = np.linalg.svd(Y.T @ X / X.shape[0])
    return (Layer(np.sqrt(s[:k])[:, None] * Vt[:k]), Layer(U[:, :k] * np.sqrt(s[:k]))), s


def _random_dense(rng, X, widths, p, alpha, scale):
    """``(Ws, F)``: random matrices d → widths → p (entries N(0, scale²)) and the net's outputs
    F = f(X) at slope ``alpha`` (NumPy)."""
    Ws, n0 = [], X.shape[1]
    for w in widths + (p,):
        Ws.append(scale * rng.standard_normal((w, n0)))
        n0 = w
    h = X
    for W in Ws[:-1]:
        h = np.maximum(h @ W.T, alpha * (h @ W.T))
    return Ws, h @ Ws[-1].T


@pytest.fixture(scope="module")
def wide_linear():
    """Width 15 on d = p = 20, N = 60 whitened inputs, s = 3 … 0.5: the best rank-15 map, whose
    zero-unit embedding (width 16) has 640 weights, above DENSE_HESSIAN."""
    rng = np.random.default_rng(0)
    n, d = 60, 20
    X = _whitened(rng, n, d)
    Y = X @ (np.linalg.qr(rng.standard_normal((d, d)))[0] * np.linspace(3, 0.5, d)).T
    params, s = _top_k(X, Y, 15)
    return params, X, Y, s


@pytest.fixture(scope="module")
def linear():
    """A width-1 linear net at its global minimum, the best rank-1 map (balanced), on whitened
    inputs with three target modes s = (3, 1.5, 0.5) and a little unfit noise."""
    rng = np.random.default_rng(0)
    X = _whitened(rng)
    U = np.linalg.qr(rng.standard_normal((P, P)))[0]
    V = np.eye(D)[:, :P]
    s = np.array([3.0, 1.5, 0.5])
    noise = rng.standard_normal((N, P))
    noise -= X @ np.linalg.lstsq(X, noise, rcond=None)[0]  # orthogonal to x: Σ_yx unchanged
    Y = X @ (U * s @ V.T).T + 0.1 * noise
    params, sh = _top_k(X, Y, 1)
    return params, X, Y, sh


@pytest.fixture(scope="module")
def relu():
    """A width-2 ReLU net at a fixed point by construction: random weights, targets
    Y = f(X) + r with r orthogonal to every column of the Jacobian ∂f/∂θ, so ∇L = −Jᵀr/N = 0
    with r ≠ 0 (no pre-activation within 0.02 of the kink)."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((30, 3))
    W1, W2 = rng.standard_normal((2, 3)), rng.standard_normal((1, 2))
    Z = X @ W1.T
    assert np.min(np.abs(Z)) > 0.02  # away from the kink: the Jacobian below is the gradient's
    dW1 = ((Z > 0) * W2[0])[:, :, None] * X[:, None, :]  # ∂f_n/∂W1[h, i] = a_h σ'(z_nh) x_ni
    J = np.hstack([dW1.reshape(30, 6), np.maximum(Z, 0)])
    Q = np.linalg.qr(J)[0]
    z = rng.standard_normal(30)
    Y = (np.maximum(Z, 0) @ W2.T) + (z - Q @ (Q.T @ z))[:, None]
    return (Layer(W1), Layer(W2)), X, Y


@pytest.mark.parametrize("construction", ["split", "zero", "linear"])
def test_linear_embeddings_are_fixed_points_with_the_same_function(linear, construction):
    params, X, Y, s = linear
    e = embed(params, X, Y, 1.0, construction, ratio=0.3)
    assert e.narrow.stationary and e.holds  # both bounds: the module's round-off (γ_K) bounds
    assert np.shape(e.params[0].W) == (2, D) and np.shape(e.params[1].W) == (P, 2)
    assert abs(e.wide.loss - reduced_rank_losses(X, Y)[1]) <= gamma(N + D + P) * e.wide.loss * 4


def test_zero_unit_of_a_linear_rank_one_minimum_is_a_saddle_at_the_next_mode(linear):
    """The new unit's Hessian block is [[0, −Gᵀ], [−G, 0]] with G = Σ_yx − β Σ_xx, decoupled from
    the narrow net's (PSD at its minimum): λ_min = −σ₁(G) = −s₂ on whitened inputs (§11.4), to
    the eigenvalue's round-off λ_tol plus the SVD's (γ_K of ||G||). Failing control: not −s₁,
    the mode already learned."""
    params, X, Y, s = linear
    e = embed(params, X, Y, 1.0, "zero")
    assert e.wide.saddle and not e.narrow.saddle
    tol = e.wide.lambda_tol + gamma(N + D) * s[0]
    assert abs(e.wide.lambda_min + s[1]) <= tol
    assert abs(e.wide.lambda_min + s[0]) > 1e6 * tol
    assert e.wide.escape_time(1e-3) == pytest.approx(np.log(1e3) / s[1], rel=1e-12)


def test_escape_time_from_the_saddle_is_measured(linear):
    """GD (η = 1e-3, NumPy) from the zero-unit saddle displaced by ε = 1e-4 along the Hessian's
    lowest eigenvector (w_H, a_H) = ε(v₂, u₂)/√2: the new unit's mode starts balanced and aligned
    at strength a₀ = ε²/2 and follows Saxe's logistic a(t) (the learned mode decouples on whitened
    inputs). The loss, L₁ − (s a − a²/2), is halfway to L₂ when a = s(1 − 1/√2), at
    t = [ln(s/a₀ − 1) − ln(√2 + 1)]/(2s) = Saxe's half time − ln(√2 + 1)/(2s), and Saxe's half
    time is ln(1/ε)/|λ_min| + ln(2s₂ − ε²)/(2s₂). GD's per-step rate ln(1 + 2ηs)/η differs from
    2s by ηs relative: tolerance η s₂ t + 2η (one step of crossing, one of rounding t)."""
    params, X, Y, s = linear
    e = embed(params, X, Y, 1.0, "zero")
    eps, lr = 1e-4, 1e-3
    theta = np.concatenate([np.asarray(e.params[0].W).ravel(), np.asarray(e.params[1].W).ravel()])
    theta = theta + eps * e.wide.direction
    W1, W2 = theta[:2 * D].reshape(2, D), theta[2 * D:].reshape(P, 2)
    levels = reduced_rank_losses(X, Y)
    half = 0.5 * (levels[1] + levels[2])
    Sxx, Syx = X.T @ X / N, Y.T @ X / N
    t_half = float(half_time(s[1], eps**2 / 2))
    t_pred = t_half - np.log(np.sqrt(2) + 1) / (2 * s[1])
    k = 0
    while 0.5 * np.mean(np.sum((Y - X @ (W2 @ W1).T) ** 2, 1)) > half and k < 3 * t_pred / lr:
        G = Syx - W2 @ W1 @ Sxx
        W1, W2 = W1 + lr * W2.T @ G, W2 + lr * G @ W1.T
        k += 1
    t_meas = k * lr
    assert abs(t_meas - t_pred) <= lr * s[1] * t_pred + 2 * lr, (t_meas, t_pred)
    shift = np.log(2 * s[1] - eps**2) / (2 * s[1])
    assert t_half - e.wide.escape_time(eps) == pytest.approx(shift, rel=1e-9)


@pytest.mark.parametrize("construction", ["split", "zero", "rescale"])
def test_relu_embeddings_are_fixed_points_with_the_same_function(relu, construction):
    params, X, Y = relu
    e = embed(params, X, Y, 0.0, construction, ratio=0.3, scale=2.0)
    assert e.narrow.stationary and e.holds
    assert e.wide.loss > 0.1  # the residual is not zero: the gradient's zero is not trivial
    assert np.isfinite(e.wide.lambda_min)


def test_a_point_that_is_not_a_fixed_point_is_refused_with_its_gradient(linear, relu):
    params, X, Y, _ = linear
    moved = (Layer(1.01 * np.asarray(params[0].W)), params[1])
    with pytest.raises(ValueError, match=r"not a fixed point: its relative gradient .* is \d"):
        embed(moved, X, Y, 1.0, "zero")
    fp = fixed_point(moved, X, Y, 1.0)
    assert fp.grad > 1e6 * fp.grad_tol and not fp.saddle
    rparams, RX, RY = relu
    with pytest.raises(ValueError, match="not a fixed point"):
        embed(rparams, RX, RY + 0.1, 0.0, "split")


def test_wrong_embeddings_fail_the_checks(linear, relu):
    """Failing controls: (1) linear, a new unit along the unlearned input direction with zero
    output keeps the function but not the zero gradient (∂L/∂a_H = −G w_H ≠ 0); (2) ReLU, a
    rescaled copy with c < 0 changes the function (σ(−z) ≠ −σ(z)); (3) ReLU, a "zero" unit with
    nonzero input weights keeps the function but ⟨r σ(w_H·x)⟩ ≠ 0; (4) ReLU, an unequal split
    of the input weights (w_j ± δ) is neither."""
    params, X, Y, _ = linear
    W1, W2 = (np.asarray(la.W) for la in params)
    Vt = np.linalg.svd(Y.T @ X / N)[2]
    wrong = (Layer(np.vstack([W1, Vt[1]])), Layer(np.hstack([W2, np.zeros((P, 1))])))
    e = check_embedding(params, wrong, X, Y, 1.0)
    assert e.function_gap <= e.function_tol and not e.wide.stationary and not e.holds
    rparams, RX, RY = relu
    e = check_embedding(rparams, embedded_params(rparams, "rescale", scale=-1.0), RX, RY, 0.0)
    assert e.function_gap > 1e6 * e.function_tol and not e.holds
    R1, R2 = (np.asarray(la.W) for la in rparams)
    rng = np.random.default_rng(3)
    zero_wrong = (Layer(np.vstack([R1, rng.standard_normal(3)])), Layer(np.hstack([R2, [[0.0]]])))
    e = check_embedding(rparams, zero_wrong, RX, RY, 0.0)
    assert e.function_gap <= e.function_tol and e.wide.grad > 1e6 * e.wide.grad_tol
    delta = 0.1 * rng.standard_normal(3)
    split_wrong = (Layer(np.vstack([R1[0] + delta, R1[1], R1[0] - delta])),
                   Layer(np.array([[0.5 * R2[0, 0], R2[0, 1], 0.5 * R2[0, 0]]])))
    e = check_embedding(rparams, split_wrong, RX, RY, 0.0)
    assert not e.holds and e.wide.grad > 1e6 * e.wide.grad_tol


def test_bad_arguments_are_refused_before_computing(linear):
    params, X, Y, _ = linear
    with pytest.raises(ValueError, match="choose one of"):
        embed(params, X, Y, 1.0, "copy")
    with pytest.raises(ValueError, match="alpha=1"):
        embed(params, X, Y, 0.0, "linear")
    with pytest.raises(ValueError, match="must be > 0"):
        embed(params, X, Y, 0.0, "rescale", scale=-1.0)
    with pytest.raises(ValueError, match="two-layer dense"):
        fixed_point(params[:1], X, Y, 1.0)
    with pytest.raises(ValueError, match="two-layer dense net .*Theorem 1's constructions"):
        embed(params + params[1:], X, Y, 1.0, "zero")  # three layers: fixed_point takes it, embed does not
    with pytest.raises(ValueError, match=r"narrow_params: W_2 has 2 inputs but W_1 has 1 outputs"):
        check_embedding((params[0], Layer(np.ones((P, 2)))), params, X, Y, 1.0)


def test_lanczos_above_the_dense_limit_gives_the_same_saddle(wide_linear):
    """Width 15 → 16 on d = p = 20 (640 weights > DENSE_HESSIAN): Lanczos on Hessian-vector
    products finds λ_min = −s₁₆ as §11.4.4 says, to λ_tol (which holds ARPACK's convergence, tol 0:
    machine precision relative to ||H||, saddles._lowest_eigenvalue)."""
    from biasfree.analysis.saddles import DENSE_HESSIAN

    params, X, Y, sh = wide_linear
    n, d, k = 60, 20, 15
    e = embed(params, X, Y, 1.0, "zero")
    assert (k + 1) * 2 * d > DENSE_HESSIAN >= k * 2 * d
    assert e.holds and e.wide.saddle
    assert abs(e.wide.lambda_min + sh[k]) <= e.wide.lambda_tol + gamma(n + d) * sh[0]


def test_lanczos_gives_the_same_bits_on_the_same_call(monkeypatch, wide_linear):
    """The same call, twice, gives bitwise the same λ_min and eigenvector above DENSE_HESSIAN (one
    code path: the rule for asserting bit equality). Lanczos starts from a seeded vector
    (``saddles.LANCZOS_SEED``); ARPACK's own random start moved λ_min in its last bits and flipped the
    eigenvector's sign between calls. Failing control: another seed, the same call, other bits."""
    from biasfree.analysis import saddles

    params, X, Y, _ = wide_linear
    wide = embedded_params(params, "zero")  # 640 weights: Lanczos
    a, b = (fixed_point(wide, X, Y, 1.0) for _ in range(2))
    assert a.lambda_min == b.lambda_min and np.array_equal(a.direction, b.direction)
    monkeypatch.setattr(saddles, "LANCZOS_SEED", saddles.LANCZOS_SEED + 1)
    c = fixed_point(wide, X, Y, 1.0)
    assert not np.array_equal(a.direction, c.direction)  # the start shows in the bits
    assert abs(c.lambda_min - a.lambda_min) <= a.lambda_tol  # the same eigenvalue all the same



def test_lanczos_finds_a_minimums_flat_directions():
    """The stage of a 20-30-3 linear net (690 weights: Lanczos) on an exactly linear target: its
    nearest fixed point is the exact fit (rank 3) rotated into the 30 units, a minimum whose
    Hessian has a 0 eigenvalue hundreds of times over (its flat directions). Lanczos finds λ_min
    within λ_tol of the dense Hessian's; unshifted it stopped at ARPACK's 6901 iterations with
    ArpackNoConvergence. Failing control: the rank-2 saddle's dense λ_min is not it."""
    from biasfree.analysis import saddles
    from biasfree.analysis.stage import stage_of

    rng = np.random.default_rng(3)
    X = rng.normal(size=(200, 20))
    Y = X @ rng.normal(size=(20, 3))
    # near the exact fit (balanced, in 3 of the 30 units) so that it is the nearest fixed point (§11.7.2:
    # the 0.1-scale random net it was before stands nearest the origin, ‖θ‖ ≈ 2.6)
    U, s, Vt, isqrt = whitened_svd(X, Y)
    F1, F2 = np.zeros((30, 20)), np.zeros((3, 30))
    F1[:3], F2[:, :3] = np.sqrt(s)[:, None] * Vt @ isqrt, U * np.sqrt(s)
    net = (Layer(F1 + rng.normal(size=(30, 20)) * 0.05), Layer(F2 + rng.normal(size=(3, 30)) * 0.05))
    st = stage_of(net, X, Y, 1.0)
    assert st.k == 3 and st.units.count == 3 and st.fixed_point.stationary

    def dense(params):  # the whole Hessian's λ_min (eigh), the reference
        flat = np.concatenate([np.ravel(la.W) for la in params])
        return np.linalg.eigvalsh(np.asarray(saddles._hessian(flat, X, Y, 1.0, ((30, 20), (3, 30)))))[0]

    fp = st.fixed_point
    assert abs(fp.lambda_min - dense(st.params_star)) <= fp.lambda_tol  # both to round-off (Weyl)
    assert abs(fp.lambda_min) <= fp.lambda_tol and not st.saddle  # flat, not a saddle
    # the rank-2 solution with 28 zero units: a saddle
    W1, W2 = np.zeros((30, 20)), np.zeros((3, 30))
    W1[:2], W2[:, :2] = np.sqrt(s[:2])[:, None] * Vt[:2] @ isqrt, U[:, :2] * np.sqrt(s[:2])
    assert abs(dense((Layer(W1), Layer(W2))) - fp.lambda_min) > fp.lambda_tol


@pytest.mark.parametrize("widths", [(16,), (20, 20)])
def test_one_shift_rule_at_every_depth_and_its_bound_in_lambda_tol(monkeypatch, widths):
    """Above DENSE_HESSIAN a two-layer net (640 weights) and a depth-3 one (860) take the same rule
    (saddles._lowest_eigenvalue): Lanczos at ARPACK's own tolerance (tol 0) on H + cI, c = 2h with h
    the bound on ‖H‖₂ (S² ms‖x‖ + R̂ rms‖r‖ rms‖x‖, recomputed here from the layer norms), and λ_tol
    = (γ_K + u) h √n plus the solver's 12 u h. The shifted Ritz value θ = c + λ_min is then at least
    max|λ(H)| (the dense eigh of the formed Hessian; Weyl's λ_tol of slack), so the relative stop is an
    absolute one. On main the deep rule differed (c = h, tol λ_tol/(2c), no solver term): this fails."""
    from biasfree.analysis import saddles
    from biasfree.analysis.stationary import EPS as U
    from biasfree.analysis.stationary import accumulations, layer_norms
    from biasfree.analysis.stationary import gamma as gamma_u

    rng = np.random.default_rng(5)
    X, Y = rng.standard_normal((50, 20)), rng.standard_normal((50, 20))
    Ws, F = _random_dense(rng, X, widths, 20, 0.0, 0.3)
    params = tuple(Layer(W) for W in Ws)
    seen = []
    real = saddles.extreme_eigenvalue

    def spy(matvec, n, which, **kw):
        out = real(matvec, n, which, **kw)
        seen.append((kw.get("tol", 0.0), out[0]))
        return out

    monkeypatch.setattr(saddles, "extreme_eigenvalue", spy)
    fp = fixed_point(params, X, Y, 0.0)
    n = sum(W.size for W in Ws)
    assert n > saddles.DENSE_HESSIAN and len(seen) == 1
    w, L, R = layer_norms(params), len(Ws), F - Y
    rx, rr = np.sqrt(np.mean(np.sum(X**2, 1))), np.sqrt(np.mean(np.sum(R**2, 1)))
    S2 = sum(np.prod(np.delete(w, i)) ** 2 for i in range(L))
    Rh = np.sqrt(sum(np.prod(np.delete(w, [i, k])) ** 2 for i in range(L) for k in range(L) if i != k))
    h = S2 * rx**2 + Rh * rr * rx
    tol, theta = seen[0]
    assert tol == 0.0
    # h here is the package's formula in another order: each within γ_m of the exact, m ≤ 2L² + 4
    # operations in a chain (test-portable's kernels once put them 5.8e-11 apart, at h = 8.3e4)
    hm = 2 * gamma_u(2 * L * L + 4)
    # θ − λ_min is c = 2h up to the rounding of θ − c (u|θ|, θ ≤ 3h) and c's own h (2h·hm)
    assert abs((theta - fp.lambda_min) - 2 * h) <= 3 * U * h + 2 * h * hm
    want = (gamma_u(accumulations(params, 50)) + U) * h * np.sqrt(n) + 12 * U * h
    assert fp.lambda_tol == pytest.approx(want, rel=hm)
    flat = np.concatenate([W.ravel() for W in Ws])
    lam = np.linalg.eigvalsh(np.asarray(saddles._hessian(flat, X, Y, 0.0, tuple(W.shape for W in Ws))))
    assert theta >= max(abs(lam[0]), abs(lam[-1])) - fp.lambda_tol
    assert abs(fp.lambda_min - lam[0]) <= 2 * fp.lambda_tol  # Lanczos and eigh, each within λ_tol (Weyl)


def test_the_hessian_bound_holds_at_any_depth_and_needs_its_residual_term():
    """stationary.hessian_bound h = S² ms‖x‖ + R̂ rms‖r‖ rms‖x‖ (the one bound on ‖H‖₂ that the
    stationary test and fixed_point's λ_tol and Lanczos shift use) is ≥ max|λ(H)| of the dense Hessian
    (saddles.hessian_eigh) at random two- and three-layer nets of each slope, up to the eigenvalues'
    round-off (γ_K + u) h √n. Failing control: at the origin of a two-layer net H = [[0, −Σ_xyᵀ],
    [−Σ_yx, 0]] has ‖H‖₂ = σ₁(Σ_yx) > 0, which the Gauss–Newton part alone (R := 0) gives as 0."""
    from biasfree.analysis.saddles import hessian_eigh
    from biasfree.analysis.stationary import EPS as U
    from biasfree.analysis.stationary import accumulations, hessian_bound
    from biasfree.analysis.stationary import gamma as gamma_u

    rng = np.random.default_rng(1)
    X, Y = rng.standard_normal((40, 4)), 5 * rng.standard_normal((40, 2))
    for widths in ((6,), (5, 4)):
        for alpha in (0.0, 0.3, 1.0):
            Ws, F = _random_dense(rng, X, widths, 2, alpha, 0.5)
            params = tuple(Layer(W) for W in Ws)
            h = hessian_bound(params, X, F - Y)
            lam = hessian_eigh(params, X, Y, alpha)[0]
            n = sum(W.size for W in Ws)
            assert max(-lam[0], lam[-1]) <= h * (1 + (gamma_u(accumulations(params, 40)) + U) * np.sqrt(n))
    zero = (Layer(np.zeros((3, 4))), Layer(np.zeros((2, 3))))
    top = float(hessian_eigh(zero, X, Y, 1.0)[0][-1])
    sigma = float(np.linalg.svd(Y.T @ X / 40, compute_uv=False)[0])
    # each side's Σ_yx off by γ_N |Y|ᵀ|X|/N, of 2-norm ≤ γ_N rms‖y‖ rms‖x‖ (Cauchy–Schwarz), eigh/SVD γ_{d+p}
    rms = np.sqrt(np.mean(np.sum(X**2, 1)) * np.mean(np.sum(Y**2, 1)))
    assert abs(top - sigma) <= 2 * gamma(40 + 4 + 2) * rms
    assert hessian_bound(zero, X, -Y) >= sigma and hessian_bound(zero, X, 0 * Y) == 0.0 < sigma


def test_a_quadratic_net_is_refused_not_read_as_linear():
    """σ(z) = z² is in the net family (§11.2) but not in these constructions: on main an exact
    quadratic fit (loss 0) came back as loss 6.11, not stationary, and embed answered the linear
    net's saddle with the activation dropped from the wide net. Now each entry point refuses it,
    naming the families built; the same weights as a linear net still run (the control)."""
    from biasfree.analysis import saddles
    rng = np.random.default_rng(0)
    X = rng.standard_normal((40, 3))
    Y = np.sum(X**2, 1, keepdims=True)
    quad = (Layer(np.eye(3), activation="quadratic"), Layer(np.ones((1, 3))))
    calls = (lambda p: saddles.fixed_point(p, X, Y, 1.0), lambda p: saddles.hessian_eigh(p, X, Y, 1.0),
             lambda p: saddles.embed(p, X, Y, 1.0, "zero"),
             lambda p: saddles.check_embedding(p, p, X, Y, 1.0))
    for call in calls:
        with pytest.raises(ValueError, match=r"activation='quadratic'.*\(leaky\) ReLU and linear nets"):
            call(quad)
    with pytest.raises(ValueError, match=r"activation='quadratic'"):
        saddles.embedded_params(quad, "zero")
    lin = tuple(Layer(la.W) for la in quad)
    assert saddles.fixed_point(lin, X, Y, 1.0).loss > 0  # the linear reading runs, and misses Σx²
