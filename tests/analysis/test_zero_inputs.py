"""Issue 47 (Speed, bench_analyse large ≤ 30 s): ``analyse`` leaves out of its big products what
cannot change their value. Inputs that are 0 on every row (a zero border of pixels) in the net's
split (f(X), f(−X) and ‖∇L‖·‖θ‖), in the growth estimate and in the mirror search; and the twin's
sharpness is taken on d rows with the sample's Σ_xx and Σ_yx (``measure_step.moment_rows``).
Each is checked against the computation it replaces, with a control that shows the check can
fail."""

import jax
import numpy as np
import pytest

import biasfree as bf
from biasfree.analysis import measure_step as ms
from biasfree.analysis import measurements as me
from biasfree.analysis import regime as rg
from biasfree.analysis import verdict as vd
from biasfree.core.data import unchecked_dataset
from biasfree.nets import Layer

EPS = float(np.finfo(float).eps)


def _bordered(rng, n=64, live=6, border=(3, 2)):
    """Inputs of small integers with ``border`` columns of 0 on each side, and their mirrors."""
    Xp = rng.integers(-3, 4, size=(n // 2, live)).astype(float)
    X = np.vstack([Xp, -Xp])
    return np.hstack([np.zeros((n, border[0])), X, np.zeros((n, border[1]))])


def test_the_split_on_the_inputs_that_are_not_zero_is_the_split_on_all_of_them_bitwise():
    """Dyadic data and weights (small integers, weights in multiples of 1/8, N a power of 2) make
    every product, sum and mean exact whatever its order, so the narrowed pass and the pass over
    all columns (``_outputs_mirror_gradient`` on the full arrays, the code before) must agree
    to the bit; W₁'s columns at the border are not 0, and ‖θ‖ still counts them."""
    rng = np.random.default_rng(0)
    X = _bordered(rng)
    W1 = rng.integers(-8, 9, size=(5, X.shape[1])) / 8.0
    W2 = rng.integers(-8, 9, size=(2, 5)) / 8.0
    Y = rng.integers(-2, 3, size=(X.shape[0], 2)).astype(float)
    net = (Layer(W1), Layer(W2))
    assert ms.reduced(net, X).tolist() == list(range(3, 9))
    got = me.split(net, X, 0.0, None, Y)
    F, Fm, g, _ = me._outputs_mirror_gradient(net, X, Y, 0.0)
    np.testing.assert_array_equal(got.outputs, np.asarray(F))
    assert got.grad == rg.gradient_times_weights(g, net)
    assert got.even == me.split(net, X, 0.0).even  # without Y: the same f(X), f(−X)
    # control: ‖θ‖ of the narrowed net alone (the border's weights dropped) is another number
    assert got.grad != rg.gradient_times_weights(g, ms.narrow(net, ms.reduced(net, X)))


def test_the_growth_estimate_does_not_read_w1_at_inputs_that_are_zero():
    """The estimate with the border left out equals the one on the arrays with those columns
    deleted (the same code path after the cut: bitwise); moving W₁'s border columns changes
    nothing, moving a live one does (the control)."""
    rng = np.random.default_rng(1)
    X = _bordered(rng, n=80) * 0.5
    keep = ms.reduced((Layer(np.ones((1, X.shape[1]))),), X)
    w = rng.normal(size=keep.size)
    Y = (X[:, keep] @ w + np.sin(X[:, keep] @ w))[:, None]
    W1, W2 = 0.05 * rng.normal(size=(6, X.shape[1])), 0.05 * rng.normal(size=(1, 6))
    B = np.linalg.lstsq(X, Y, rcond=None)[0].T
    full = rg.growth_even_energy((Layer(W1), Layer(W2)), X, Y, 0.5, B)
    cut = rg.growth_even_energy((Layer(W1[:, keep]), Layer(W2)), X[:, keep], Y, 0.5, B[:, keep])
    assert (full.energy, full.low, full.high) == (cut.energy, cut.low, cut.high)
    border = W1.copy()
    border[:, 0] += 1.0
    assert rg.growth_even_energy((Layer(border), Layer(W2)), X, Y, 0.5, B).energy == full.energy
    live = W1.copy()
    live[:, keep[0]] += 0.1
    assert rg.growth_even_energy((Layer(live), Layer(W2)), X, Y, 0.5, B).energy != full.energy


@pytest.mark.parametrize("mirrored", [False, True])
def test_moment_rows_carry_the_datas_moments_and_a_linear_nets_sharpness(mirrored):
    """d rows with the sample's Σ_xx and Σ_yx: the moments agree to the QR's backward error, and a
    bias-free linear net's λ_max(∇²L) (the whole 36 × 36 Hessian, below DENSE_BELOW weights)
    to the eigenvalue's; a ReLU net's does not (its loss reads more than two moments)."""
    rng = np.random.default_rng(2)
    Xp = rng.normal(size=(200, 10))
    X = np.vstack([Xp, -Xp]) if mirrored else Xp
    Y = np.hstack([X @ rng.normal(size=(10, 1)), np.tanh(X[:, :1])])
    data = unchecked_dataset(X, Y)
    assert data.mirrored == mirrored
    small = ms.moment_rows(data)
    Xs, Ys = np.asarray(small.X), np.asarray(small.Y)
    R, d = X.shape
    assert Xs.shape == (d, d) and not small.mirrored
    # Householder QR: X + ΔX = Q R_X with ‖ΔX‖_F ≤ γ_{cRd}‖X‖_F (Higham, Thm 19.4), c ≈ 1; the
    # moments' error ≤ 2‖ΔX‖‖X‖/R (+ Y's), bounded here with c = 8
    tol = 2 * 8 * R * d * EPS * np.linalg.norm(X) * max(np.linalg.norm(X), np.linalg.norm(Y)) / R
    assert np.max(np.abs(Xs.T @ Xs / d - X.T @ X / R)) <= tol
    assert np.max(np.abs(Ys.T @ Xs / d - Y.T @ X / R)) <= tol
    net = bf.init_gaussian(jax.random.PRNGKey(0), (10, 3, 2), 0.7)
    assert sum(np.size(la.W) for la in net) <= ms.DENSE_BELOW
    lam = ms.sharpness(net, data, 1.0)
    # each Hessian entry is linear in Σ_xx, Σ_yx with coefficients of order the weights' squares,
    # so ‖ΔH‖₂ ≤ 2d·max|ΔΣ|·(Σ‖W‖² + 1) and each eigenvalue moves by at most that (Weyl), plus the
    # eigensolver's ε‖H‖ on each side
    size = sum(float(np.sum(np.asarray(la.W) ** 2)) for la in net)
    assert abs(ms.sharpness(net, small, 1.0) - lam) <= 2 * d * tol * (size + 1) + 4 * 36 * EPS * lam
    # control: the ReLU net on the same rows reads another loss
    relu = ms.sharpness(net, data, 0.0)
    assert abs(ms.sharpness(net, small, 0.0) - relu) > 1e-3 * relu


def test_the_split_takes_the_growth_estimate_from_its_own_pass_over_the_rows():
    """``split(..., grow=plan)`` computes §6.4's sums from the first layer's product it makes
    anyway (on the narrowed columns); ``growth_even_energy`` makes its own. The two differ only
    by the products' rounding, bounded here entry by entry (γ_k = kε/(1 − kε)): |δP| ≤ γ_d |x|·|ρ|,
    |δH| ≤ γ_d |x|·|w|, so |δb| ≤ (1 − c)[Σ_k (|δH_k| + |δP||a_k|) wr_k + wg|δP|] + γ_{m+1} b (b's
    terms are ≥ 0) and each sum of squares within Σ_n (2|s_n||δs_n| + δs_n²) + γ_N Σ_n s_n², twice
    (each side's own error). The estimate then moves by at most those relative amounts."""
    rng = np.random.default_rng(3)
    X = _bordered(rng, n=128, live=6) * 0.5
    keep = ms.reduced((Layer(np.ones((1, X.shape[1]))),), X)
    w = rng.normal(size=keep.size)
    Y = (X[:, keep] @ w + np.sin(X[:, keep] @ w))[:, None]
    net = (Layer(0.05 * rng.normal(size=(7, X.shape[1]))), Layer(0.05 * rng.normal(size=(1, 7))))
    B, c = np.linalg.lstsq(X, Y, rcond=None)[0].T, 0.5
    plan = rg.growth_plan(net, X, Y, c, B)
    assert plan is not None and len(plan.modes) == 1
    got = me.split(net, X, 0.0, None, Y, plan).growth
    want = rg.growth_even_energy(net, X, Y, c, B)
    # the bound of the docstring, from the arrays themselves
    (N, d), m = X.shape, net[0].W.shape[0]
    gam = [k * EPS / (1 - k * EPS) for k in (d, m + 1, N)]
    W1, Rho = np.asarray(net[0].W), plan.Rho
    A, WR, WG, omc = plan.arrays
    P, H = X @ Rho, X @ W1.T
    dP, dH = gam[0] * np.abs(X) @ np.abs(Rho), gam[0] * np.abs(X) @ np.abs(W1.T)
    b = omc * (np.sum(np.abs(H[:, None, :] - P[:, :, None] * A[None]) * WR[None], axis=-1) + WG * np.abs(P))
    db = omc * (np.sum((dH[:, None, :] + dP[:, :, None] * np.abs(A)[None]) * WR[None], axis=-1)
                + WG * dP) + gam[1] * b
    rel_p = np.max(2 * (np.sum(2 * np.abs(P) * dP + dP**2, axis=0) / np.sum(P**2, axis=0) + gam[2]))
    rel_b = np.max(2 * (np.sum(2 * b * db + db**2, axis=0) / np.sum(b**2, axis=0) + gam[2]))
    assert abs(got.energy - want.energy) <= rel_p * want.energy
    assert abs(got.high - want.high) <= (rel_p + rel_b) * want.high
    assert got.modes[0][2:4] == want.modes[0][2:4]  # the sign groups: from the weights alone
    # control: another slope's plan gives another estimate
    assert abs(me.split(net, X, 0.0, None, Y, rg.growth_plan(net, X, Y, 0.6, B)).growth.energy
               - want.energy) > rel_p * want.energy


def test_the_data_context_reads_the_mirror_and_the_floor_as_the_public_calls_do():
    """The data context searches mirrors on X's nonzero columns (the border adds exactly 0 to every
    ‖z_n + z_m‖) and hands the inputs' mirror violation to the floor instead of measuring it again:
    the violation is mirror_violation(X)'s up to two norms' rounding over d terms (γ_d of twice the
    largest row), the asymmetry asymmetry(X, Y)'s up to 4γ_d relative, and the floor is
    _dataset_floor's on the same fit bitwise (its value does not read the violation). The control:
    one mirror dropped, the violation is no longer 0 and there is no exact floor."""
    from biasfree.analysis import function_now as now
    from biasfree.core.symmetry import asymmetry, mirror_violation
    from biasfree.expressivity.floors import _dataset_floor

    rng = np.random.default_rng(4)
    X = _bordered(rng, n=64) + 0.0
    Y = np.tanh(X[:, 3:5]) + X[:, 4:5]  # odd in x, so the mirrored set is symmetric as (x, y) too
    d = X.shape[1]
    for rows, symmetric in ((slice(None), True), (slice(1, None), False)):
        Xs, Ys = X[rows], Y[rows]
        ctx = now.data_context(Xs, Ys, 0.0, "arrays")
        scale = float(np.max(np.linalg.norm(Xs, axis=1)))
        want = mirror_violation(Xs)
        assert (want == 0.0) == symmetric
        assert abs(ctx.report.mirror_violation_inputs * scale - want) <= 2 * d * EPS * 2 * scale
        a = asymmetry(Xs, Ys, points=2000)
        assert abs(ctx.report.asymmetry - a) <= 4 * d * EPS * a
        if symmetric:
            tol = vd.NEAR_SYMMETRIC * scale
            assert ctx.floor == _dataset_floor(Xs, Ys, 0.0, tol, ctx.moments.fit).value
        else:
            assert ctx.floor is None
