"""The symmetric-data fast path (losses.forward_mirrored): on inputs ``[X₊; -X₊]`` the
engine computes the first layer's product once, ``z₋ = -z₊``. It must give the general
path's trajectory to round-off.

Both arms run the same data: ``Dataset(X, Y)`` detects the mirror layout and stores
only X₊; ``Dataset(X, Y, mirror=False)`` keeps the general path. Sizes are tiny (d = 3,
N = 24) so each compiled loop costs little; tolerances are float64 round-off over the
run (quoted at each assertion).
"""

import jax
import numpy as np
import pytest
from roundoff import chain_length, flow_error_bound, forward_gap, gamma, grad_gap, trajectory_gap

import biasfree as bf
from biasfree.dynamics.losses import forward_mirrored, objective, objective_mirrored

pytestmark = pytest.mark.numerics  # round-off bounds: make test-portable reruns them

D, N_HALF = 3, 12

# the gradients as one compiled program each (per net shape), not dozens of eager operations
# compiled one by one (cold: 191 compilations in this file before, docs/performance.md)
GRAD = jax.jit(jax.grad(objective), static_argnames="loss")
GRAD_MIRRORED = jax.jit(jax.grad(objective_mirrored), static_argnames="loss")


def _leaves(tree):
    return [np.asarray(a) for a in jax.tree_util.tree_leaves(tree)]


def _net(rng, widths, scale=0.5, bias=False):
    Ws = [scale * rng.normal(size=(o, i)) for i, o in zip(widths[:-1], widths[1:], strict=True)]
    bs = [scale * rng.normal(size=(o,)) for o in widths[1:]] if bias else None
    return bf.from_arrays(Ws, bs)


def _pair(loss="mse", p=1):
    """The same symmetric set twice: mirrored (fast path) and general."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(N_HALF, D))
    Y = np.tanh(X @ rng.normal(size=(D, p))) + 0.3 * X[:, :1] ** 2
    if loss == "logistic":
        Y = np.sign(X @ rng.normal(size=(D, p)))
    Xs, Ys = bf.symmetrize(X, Y)
    fast, general = bf.Dataset(Xs, Ys), bf.Dataset(Xs, Ys, mirror=False)
    assert fast.mirrored and not general.mirrored
    return fast, general


def test_dataset_stores_half_and_keeps_full_view():
    fast, general = _pair()
    assert fast.inputs.shape == (N_HALF, D) and general.inputs.shape == (2 * N_HALF, D)
    np.testing.assert_array_equal(fast.X, general.X)  # X is the full set, rebuilt exactly
    np.testing.assert_array_equal(fast.Y, general.Y)
    X = np.asarray(general.X)
    perm = np.r_[1, 0, 2 : 2 * N_HALF]
    assert not bf.Dataset(X[perm], general.Y).mirrored  # pairs not in [X₊; -X₊] order: general
    assert not bf.Dataset(X[:-1], general.Y[:-1]).mirrored  # odd N


# (D, 4, 1): the zero-preactivation test's net, so the eager gradients' programs are shared
@pytest.mark.parametrize("widths,bias", [((D, 4, 1), False), ((D, 4, 1), True), ((D, 4, 3, 2), False),
                                         ((D, 4, 3, 2), True)])
def test_forward_and_gradient_match_general(widths, bias):
    """f and ∇J on [X₊; -X₊] from X₊ alone, any depth, with or without biases."""
    fast, general = _pair(p=widths[-1])
    params = _net(np.random.default_rng(1), widths, bias=bias)
    F_fast = forward_mirrored(params, fast.inputs, 0.3)
    F_gen = bf.forward(params, general.X, 0.3)
    # two evaluations of the same net, summed in any order: within forward_gap's layered
    # 2γ_k|W||h| bound (tests/roundoff.py), entrywise
    Ws, bs = [layer.W for layer in params], ([layer.b for layer in params] if bias else None)
    assert np.all(np.abs(np.asarray(F_fast) - np.asarray(F_gen)) <= forward_gap(Ws, general.X, bs))
    g_fast = GRAD_MIRRORED(params, fast.inputs, fast.Y, 0.3, 0.01, loss="mse")
    g_gen = GRAD(params, general.X, general.Y, 0.3, 0.01, loss="mse")
    # two computations of one gradient: within 2γ_k·3·(∇J on absolute values) entrywise
    # (roundoff.grad_gap; 3 for the mirrored formula's intermediates), ~1e-14 here, where a
    # wrong term in either path would be O(1e-2)
    gap = _leaves(grad_gap(params, general.X, general.Y, 0.01, factor=3))
    for a, b, e in zip(_leaves(g_fast), _leaves(g_gen), gap, strict=True):
        assert np.all(np.abs(a - b) <= e) and np.max(e) < 1e-12


def test_zero_preactivation_convention():
    """σ'(0) = α on both halves: a first-layer unit with zero weights (z = 0 on every
    point) gets the same gradient on both paths (the identity σ(-z) = σ(z) - (1+α)z
    differentiated naively would give -1 instead of -α there)."""
    fast, general = _pair()
    params = _net(np.random.default_rng(2), (D, 4, 1))
    W1 = np.asarray(params[0].W).copy()
    W1[0] = 0.0
    params = bf.from_arrays([W1, params[1].W])
    for alpha in (0.0, 0.3):
        g_fast = GRAD_MIRRORED(params, fast.inputs, fast.Y, alpha)
        g_gen = GRAD(params, general.X, general.Y, alpha)
        gap = _leaves(grad_gap(params, general.X, general.Y, factor=3))  # as above
        for a, b, e in zip(_leaves(g_fast), _leaves(g_gen), gap, strict=True):
            assert np.all(np.abs(a - b) <= e) and np.max(e) < 1e-12


@pytest.mark.parametrize("zero_row", [False, True])
def test_two_layer_derivatives_in_every_argument_and_mode(zero_row):
    """The two-layer fast path has its own JVP (one nonlinearity for both halves): its
    Jacobians in W₁, W₂, X₊ and α, forward and reverse mode, equal those of the general
    forward on [X₊; -X₊], a zero weight row included, and so do Hessian-vector products
    away from z = 0 (see losses._two_layer_mirrored for the choice at z = 0)."""
    rng = np.random.default_rng(5)
    X = rng.normal(size=(N_HALF, D))
    params = _net(rng, (D, 4, 2))
    W1, W2 = np.asarray(params[0].W).copy(), np.asarray(params[1].W)
    if zero_row:
        W1[1] = 0.0

    def fast(W1, W2, X, a):
        return forward_mirrored(bf.from_arrays([W1, W2]), X, a)

    def general(W1, W2, X, a):
        return bf.forward(bf.from_arrays([W1, W2]), jax.numpy.concatenate([X, -X]), a)

    args = (W1, W2, X, 0.3)
    # Jacobian entries are sums of products of W, X entries and σ' (<= 1): two computations
    # differ by <= 2γ_k·3·(the same Jacobian of the linear net on absolute values; ∂σ/∂α =
    # min(z, 0) is bounded by |z|, i.e. the α-column by |W₂||W₁||X|), k the chain length
    # and 3 the mirrored formula's magnitudes (roundoff.grad_gap)
    k = chain_length(params, 2 * N_HALF)
    absW1, absW2, absX = np.abs(W1), np.abs(W2), np.abs(X)

    def lin(W1, W2, X):  # the linear net on [|X₊|; |X₊|]: every term non-negative
        return bf.forward(bf.from_arrays([W1, W2]), jax.numpy.concatenate([X, X]), 1.0)

    # each derivative is jitted: one compiled program instead of one per eager primitive
    mags = jax.jit(jax.jacfwd(lin, argnums=(0, 1, 2)))(absW1, absW2, absX)
    bounds = [2 * gamma(k) * 3 * np.asarray(j) for j in mags]
    bounds.append(2 * gamma(k) * 3 * np.asarray(lin(absW1, absW2, absX)))
    for jac in (jax.jacfwd, jax.jacrev):
        for a, b, e in zip(_leaves(jax.jit(jac(fast, argnums=(0, 1, 2, 3)))(*args)),
                           _leaves(jax.jit(jac(general, argnums=(0, 1, 2, 3)))(*args)), bounds, strict=True):
            assert np.all(np.abs(a - b) <= e) and np.max(e) < 1e-12

    def loss(f):
        return lambda W1, W2: jax.numpy.sum(f(W1, W2, X, 0.3) ** 2)

    if zero_row:  # second derivatives at z = 0: a documented choice of one-sided slope
        return
    v = (rng.normal(size=W1.shape), rng.normal(size=W2.shape))
    hvp = [jax.jit(lambda W1, W2, v, f=f: jax.jvp(jax.grad(loss(f), argnums=(0, 1)), (W1, W2), v)[1])(
        W1, W2, v) for f in (fast, general)]
    # the HVP of Σf² away from kinks (σ'' = 0) is a sum of products of W, X, v and σ' (<= 1):
    # bounded term by term by the HVP of the linear net on |W|, |X| with |v|; twice the
    # chain (forward-over-reverse), 3 for the mirrored formula
    def lin_loss(W1, W2):
        return jax.numpy.sum(lin(W1, W2, absX) ** 2)

    mag = jax.jit(lambda W1, W2, v: jax.jvp(jax.grad(lin_loss, argnums=(0, 1)), (W1, W2), v)[1])(
        absW1, absW2, tuple(np.abs(u) for u in v))
    for a, b, m in zip(_leaves(hvp[0]), _leaves(hvp[1]), _leaves(mag), strict=True):
        e = 2 * gamma(2 * k) * 3 * np.abs(m)
        assert np.all(np.abs(a - b) <= e) and np.max(e) < 1e-9  # HVP entries ~20: a wrong term is O(1)


@pytest.mark.parametrize("loss", ["mse", "logistic"])
def test_gd_trajectory_matches_general(loss):
    """α in {0, 0.3, 1}, with weight decay: every recorded observable and the final
    parameters agree to round-off along 300 GD steps."""
    fast, general = _pair(loss)
    params = _net(np.random.default_rng(3), (D, 6, 1))
    for alpha in (0.0, 0.3, 1.0):
        cfg = bf.GDConfig(alpha=alpha, lr=0.05, steps=300, loss=loss, weight_decay=1e-2, n_records=11)
        a, b = bf.train(params, fast, cfg), bf.train(params, general, cfg)
        # T = 300 steps, each within 2γ_k·3 relative of the other path (chain length k,
        # 3 for the mirrored formula), carried to the records by the run's measured
        # sensitivity (roundoff.trajectory_gap; ~1e-11 here, where a wrong fast path is O(1e-2))
        gap = trajectory_gap(lambda p, cfg=cfg: _observed(bf.train(p, general, cfg)), params, cfg.steps,
                             chain_length(params, 2 * N_HALF), factor=3)
        for name, e in gap.items():
            got, want = (_leaves(a.params), _leaves(b.params)) if name == "params" else \
                ([np.asarray(getattr(a, name))], [np.asarray(getattr(b, name))])
            for x, y, ee in zip(got, want, e if name == "params" else [e], strict=True):
                assert np.all(np.abs(x - y) <= ee), f"{name} at alpha={alpha}: {np.max(np.abs(x - y))}"
                assert np.max(ee) < 1e-8, f"{name}: bound {np.max(ee):.2g} too loose to catch a wrong path"


def _observed(traj, names=("loss", "beta", "even_energy"), with_params=True) -> dict:
    """A run's recorded observables (and final parameters), as arrays (for trajectory_gap)."""
    out = {name: np.asarray(getattr(traj, name)) for name in names}
    if with_params:
        out["params"] = _leaves(traj.params)
    return out


def test_deep_gd_and_flow_match_general():
    """Depth 3 (only the first layer is halved) and gradient flow, with a test set."""
    fast, general = _pair()
    rng = np.random.default_rng(4)
    Xt, Yt = rng.normal(size=(7, D)), rng.normal(size=(7, 1))
    fast = bf.Dataset(fast.X, fast.Y, Xt, Yt)
    general = bf.Dataset(general.X, general.Y, Xt, Yt, mirror=False)
    params = _net(rng, (D, 4, 4, 1))
    cfg = bf.GDConfig(alpha=0.3, lr=0.05, steps=200, weight_decay=1e-2, n_records=5)
    a, b = bf.train(params, fast, cfg), bf.train(params, general, cfg)
    # as in the test above: T·2γ_k·3 relative per step, carried by the measured sensitivity;
    # the least-squares β_eff goes through X₊⁺ (fast) or X⁺ (general): the sensitivity run
    # includes it, and its own round-off is inside the final-evaluation term 2γ_k|β|·κ(X)
    # with κ(X) the inputs' condition number (N = 24, d = 3: O(1))
    kappa = float(np.linalg.cond(np.asarray(general.X)))
    names = ("loss", "test_loss", "beta", "even_energy")
    gap = trajectory_gap(lambda p: _observed(bf.train(p, general, cfg), names, with_params=False),
                         params, cfg.steps, chain_length(params, 2 * N_HALF), factor=3)
    for name, e in gap.items():
        e = e + 2 * gamma(2 * N_HALF) * kappa * np.abs(np.asarray(getattr(b, name)))
        assert np.all(np.abs(np.asarray(getattr(a, name)) - np.asarray(getattr(b, name))) <= e), name
        assert np.max(e) < 1e-8, f"{name}: bound {np.max(e):.2g} too loose to catch a wrong path"
    fcfg = bf.FlowConfig(alpha=0.3, t_max=2.0, n_records=3, rtol=1e-10, atol=1e-12, keep_params=True)
    a, b = bf.flow(params, fast, fcfg), bf.flow(params, general, fcfg)
    # the vector fields agree to round-off (test above), but round-off flips some of the
    # adaptive controller's accept/reject decisions, so the two solves take different
    # steps and differ by both solvers' global errors: per parameter at most
    # e = flow_error_bound(a) + flow_error_bound(b) (tests/roundoff.py; ~8e-8 here), and
    # the loss at record j, to first order, by ||∇L(θ_j)||₁ e
    e = flow_error_bound(a, fcfg.rtol, fcfg.atol) + flow_error_bound(b, fcfg.rtol, fcfg.atol)
    for x, y in zip(_leaves(a.path), _leaves(b.path), strict=True):
        assert np.all(np.abs(x - y) <= e)
    for j in range(len(a.t)):
        theta = jax.tree_util.tree_map(lambda p, j=j: p[j], a.path)
        g = GRAD(theta, general.X, general.Y, 0.3, fcfg.weight_decay, loss="mse")
        grad_l1 = sum(np.abs(x).sum() for x in _leaves(g))
        assert abs(float(a.loss[j]) - float(b.loss[j])) <= grad_l1 * e


def _dots(jaxpr):
    """Every ``dot_general`` of a jaxpr and of the jaxprs inside it: ``(lhs shape, rhs shape,
    ((lhs contracting, rhs contracting), batch))``."""
    out = []
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "dot_general":
            out.append((eqn.invars[0].aval.shape, eqn.invars[1].aval.shape, eqn.params["dimension_numbers"]))
        for v in eqn.params.values():
            for sub in v if isinstance(v, (tuple, list)) else (v,):
                inner = getattr(sub, "jaxpr", sub)
                if hasattr(inner, "eqns"):
                    out.extend(_dots(inner))
    return out


def _grad_dots(params, X_half, Y, alpha):
    """The products of the training loop's gradient (``run.grad_fn``, mirrored) at slope
    ``alpha`` as the loop passes it: the twin's the Python number 1.0, the net's an array."""
    from biasfree.dynamics import run

    g = run.grad_fn(True)
    return _dots(jax.make_jaxpr(lambda p: g(p, X_half, Y, alpha, 0.0, "mse"))(params).jaxpr)


N_ROWS, WIDTH = 12, 7  # a width no other axis has, so that an (n, width) product is told apart


def test_twin_step_has_no_width_sized_product():
    """The linear twin (α = 1, given as the number 1.0, as the loop and its records pass it)
    is trained without the net's (n, d)·(d, width) products: its f is [o; −o], o = X₊(W₂W₁)ᵀ,
    so its gradient's products are p/width of the net's (docs/performance.md, "Session 8").
    On main the twin ran the net's formula with e = 0·relu(X₊W₁ᵀ)W₂ᵀ: an (n, width) product
    forward and one backward, the same cost as the net. Control: the net (α an array) has them."""
    rng = np.random.default_rng(6)
    X, params = rng.normal(size=(N_ROWS, D)), _net(rng, (D, WIDTH, 2))
    Y = rng.normal(size=(2 * N_ROWS, 2))

    def wide(dots):  # products whose output holds an (n, width) block, or whose sum runs over both
        return [s for s in dots if {N_ROWS, WIDTH} <= set(s[0]) | set(s[1])]

    assert wide(_grad_dots(params, X, Y, 1.0)) == []
    assert len(wide(_grad_dots(params, X, Y, jax.numpy.asarray(0.3)))) >= 2  # control: forward, gradient


def test_net_gradient_sums_rows_along_the_last_axis():
    """The net's gradient ∂L/∂W₁ = (∂L/∂Aᵀ)X₊ is a product whose sum over the n rows runs
    along the left operand's last axis (Aᵀ = W₁X₊ᵀ is formed transposed): the form XLA's CPU
    dot runs at full rate (15–17 ms CPU against 35 ms at 5,000 × 400 × 256, docs/performance.md,
    "Session 8"). On main A = X₊W₁ᵀ, and its gradient (∂L/∂A)ᵀX₊ contracted the first axis of
    both operands; no product of the new gradient does that over the rows."""
    rng = np.random.default_rng(7)
    X, params = rng.normal(size=(N_ROWS, D)), _net(rng, (D, WIDTH, 2))
    Y = rng.normal(size=(2 * N_ROWS, 2))
    dots = _grad_dots(params, X, Y, jax.numpy.asarray(0.3))
    over_rows = [(a, b, dn) for a, b, dn in dots if a[dn[0][0][0]] == N_ROWS] if dots else []
    assert over_rows, "the gradient sums over the rows somewhere (the check reads the products)"
    for a, _, ((lc, _), _) in over_rows:
        assert tuple(lc) == (len(a) - 1,), f"a product sums the {N_ROWS} rows along axis {lc} of {a}"


@pytest.mark.parametrize("loss", ["mse", "logistic"])
def test_twin_trajectory_matches_general(loss):
    """Net and twin side by side (``twin=True``), with weight decay: the twin's fast path at
    α = 1 (no nonlinearity) gives the general path's twin, loss and gap to round-off along
    300 GD steps, as the net's path does (test above)."""
    fast, general = _pair(loss)
    params = _net(np.random.default_rng(8), (D, 6, 1))
    cfg = bf.GDConfig(alpha=0.2, lr=0.05, steps=300, loss=loss, weight_decay=1e-2, n_records=11)

    def seen(traj):
        return {"loss": np.asarray(traj.twin.loss), "gap": np.asarray(traj.twin_gap),
                "params": _leaves(traj.twin.params)}

    a, b = seen(bf.train(params, fast, cfg, twin=True)), seen(bf.train(params, general, cfg, twin=True))
    # as test_gd_trajectory_matches_general: 300 steps, each within 2γ_k·3 relative of the
    # other path, carried to the records by the run's measured sensitivity (~1e-11 here, where
    # a twin run at another slope or a dropped term is O(1e-2))
    gap = trajectory_gap(lambda p: seen(bf.train(p, general, cfg, twin=True)), params, cfg.steps,
                         chain_length(params, 2 * N_HALF), factor=3)
    for name, e in gap.items():
        got, want, ee = (a[name], b[name], e) if name == "params" else ([a[name]], [b[name]], [e])
        for x, y, bound in zip(got, want, ee, strict=True):
            assert np.all(np.abs(x - y) <= bound), f"{name}: {np.max(np.abs(x - y))}"
            assert np.max(bound) < 1e-8, f"{name}: bound {np.max(bound):.2g} too loose to catch a wrong path"
