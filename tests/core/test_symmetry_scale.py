"""The mirror tests in linear memory (biasfree.core.symmetry) against their O(N²·D) definitions,
and on a set whose pairwise array N²·D would not fit in any memory."""

import numpy as np
import pytest
from roundoff import EPS, gamma
from scipy.optimize import linear_sum_assignment
from scipy.spatial import cKDTree

from biasfree.core import symmetry as sym

_rng = np.random.default_rng(11)


def _old_violation(Z):
    """The definition as it was written before (N×N×D distances, k-d tree lower bound)."""
    order, mirror = np.lexsort(Z.T[::-1]), np.lexsort((-Z).T[::-1])
    ub = float(np.max(np.linalg.norm(Z[order] + Z[mirror], axis=1)))
    if ub == 0.0:
        return 0.0, 0.0, 0.0
    lb = float(np.max(cKDTree(Z).query(-Z, k=1)[0]))
    if ub <= lb or Z.shape[0] > sym.ASSIGNMENT_MAX:
        return ub, lb, ub
    D = np.linalg.norm(Z[:, None, :] + Z[None, :, :], axis=-1)
    rows, cols = linear_sum_assignment(D**2)
    return float(min(ub, np.max(D[rows, cols]))), lb, ub


def _cases():
    """(name, Z, generic): generic sets have distinct pairwise distances (one optimal pairing)."""
    X0 = _rng.normal(size=(15, 4))
    S = np.vstack([X0, -X0])[_rng.permutation(30)]
    I0 = _rng.integers(-1, 2, size=(12, 3)).astype(float)
    return [
        ("symmetric", S, True),
        ("duplicate without its mirror", np.vstack([S, S[:1]]), False),
        ("duplicate with its mirror", np.vstack([S, S[:1], -S[:1]]), True),
        ("near-symmetric", S + 1e-9 * _rng.normal(size=S.shape), True),
        ("asymmetric", _rng.normal(size=(25, 3)), True),
        ("asymmetric, one-sided", np.abs(_rng.normal(size=(25, 3))), True),
        ("integer grid, ties", np.vstack([I0, -I0, I0[:3]]), False),
        ("signed zeros", np.vstack([np.zeros((2, 2)), -np.zeros((1, 2)), [[1.0, -0.0]], [[-1.0, 0.0]]]),
         False),
    ]


@pytest.mark.parametrize("name, Z, generic", _cases(), ids=[c[0] for c in _cases()])
def test_pairing_order_is_lexsort_and_nearest_mirror_is_the_k_d_trees(name, Z, generic):
    for sign in (1.0, -1.0):  # the same permutation: both are the stable lexicographic order
        np.testing.assert_array_equal(sym._lex_order(Z, sign), np.lexsort((sign * Z).T[::-1]))
    dist, idx = sym.nearest_mirror(Z)
    ref = cKDTree(Z).query(-Z, k=1)[0]
    # both compute ||z_n + z_m|| directly (ties may pick another m at the same distance): the
    # two sums of D squares differ by γ_D relative, the square roots by half that, plus the
    # rounding of the D additions z_n + z_m (ε relative each)
    bound = (gamma(Z.shape[1]) + 2 * EPS) * np.maximum(ref, dist) + 1e-300  # 1e-300: 0 vs 0
    np.testing.assert_array_less(np.abs(dist - ref), bound)
    np.testing.assert_array_equal(dist, np.linalg.norm(Z + Z[idx], axis=1))


@pytest.mark.parametrize("name, Z, generic", _cases(), ids=[c[0] for c in _cases()])
def test_mirror_violation_keeps_its_definition(name, Z, generic):
    old, lb, ub = _old_violation(Z)
    v = sym.mirror_violation(Z)
    assert (v == 0.0) == (old == 0.0)
    scale = float(np.max(np.linalg.norm(Z, axis=1)))
    # a valid pairing's largest distance, at least the largest nearest-mirror distance
    assert lb - 4 * gamma(Z.shape[1]) * scale <= v <= ub
    if generic:  # one optimal assignment: the same pairs; distances computed directly in both
        assert v == pytest.approx(old, rel=0, abs=4 * gamma(Z.shape[1]) * scale)
    for tol in (0.0, 0.5 * lb, 0.5 * (lb + ub), ub, 2 * ub + 1e-12):  # the early exits keep the answer
        assert sym.is_symmetric(Z, tol=tol) == (v <= tol)
        if generic and tol not in (0.5 * (lb + ub), ub):  # away from v by far more than round-off
            assert sym.is_symmetric(Z, tol=tol) == (old <= tol)


def test_duplicates_and_noise_read_as_before():
    X0 = _rng.normal(size=(40, 5))
    S = np.vstack([X0, -X0])
    assert sym.mirror_violation(S) == 0.0 and sym.asymmetry(S) == 0.0
    dup = np.vstack([S, S[:1]])
    assert sym.mirror_violation(dup) > 0.1 and sym.nearest_mirror(dup)[0].max() == 0.0
    noisy = S + 1e-8 * _rng.normal(size=S.shape)
    dist, idx = sym.nearest_mirror(noisy)
    np.testing.assert_array_equal(idx, np.r_[np.arange(40, 80), np.arange(40)])  # each its own mirror
    assert 1e-9 < dist.max() < 1e-7  # ||ξ_n + ξ_m|| ~ 1e-8 √(2·5): statistical, not round-off


def test_max_row_norm_is_the_stacked_norm():
    X, Y = _rng.normal(size=(37, 5)), _rng.normal(size=(37, 2))
    assert sym.max_row_norm(X, Y) == float(np.max(np.linalg.norm(np.hstack([X, Y]), axis=1)))
    assert sym.max_row_norm(X) == float(np.max(np.linalg.norm(X, axis=1)))


def test_gram_search_with_small_blocks_finds_the_same_mirrors(monkeypatch):
    Z = _rng.normal(size=(300, 6))
    ref = cKDTree(Z).query(-Z, k=1)[0]
    monkeypatch.setattr(sym, "BLOCK_ENTRIES", 1000)  # 3 rows a block
    monkeypatch.setattr(sym, "CANDIDATES_MAX", 1)  # the nearest is the one candidate here
    dist = sym.nearest_mirror(Z)[0]
    np.testing.assert_allclose(dist, ref, rtol=gamma(6) + 2 * EPS, atol=0)  # as above


def test_twenty_thousand_points_in_784_dimensions_need_no_pairwise_array():
    # N²·D = 20000² · 784 floats would be 2.5 TB: the O(N·D) code must simply finish (~2 s)
    X0 = _rng.normal(size=(10_000, 784))
    S = np.vstack([X0, -X0])
    assert sym.mirror_violation(S) == 0.0 and sym.asymmetry(S) == 0.0 and sym.is_symmetric(S)
    noisy = S + 1e-10 * _rng.normal(size=S.shape)
    dist, idx = sym.nearest_mirror(noisy)
    np.testing.assert_array_equal(idx, np.r_[np.arange(10_000, 20_000), np.arange(10_000)])
    assert dist.max() < 1e-8  # 1e-10 √(2·784) χ-ish: about 4e-9
    assert sym.mirror_violation(_rng.normal(size=(20_000, 784))) > 1.0  # asymmetric: the sort pairing


def test_asymmetry_over_sampled_points_is_their_mean_nearest_mirror():
    Z = np.abs(_rng.normal(size=(200, 5)))  # one-sided: every point is searched for its mirror
    dist = sym.nearest_mirror(Z)[0]
    power = np.mean(np.sum(Z**2, axis=1))
    rows = np.unique(np.linspace(0, 199, 40).round().astype(int))
    est = sym.asymmetry(Z[:, :3], Z[:, 3:], points=40)
    # the same distances (each computed directly as ||z_n + z_m||, rounded the same way): only
    # the means' sums differ in order, γ_200 relative
    assert abs(est - np.mean(dist[rows] ** 2) / power) <= 4 * gamma(200) * est
    assert sym.asymmetry(Z[:, :3], Z[:, 3:], points=200) == sym.asymmetry(Z[:, :3], Z[:, 3:])  # all N
    with pytest.raises(ValueError, match="points"):
        sym.asymmetry(Z, points=0)


@pytest.mark.parametrize("n", [40, 3000])  # below and above ASSIGNMENT_MAX: the assignment and the sort
def test_one_sort_gives_the_inputs_violation_too(n):
    """``asymmetry_and_violation(Z, points, d)`` reads the inputs' mirror violation off the sort of
    (x, y) rows: rows sorted by all columns are sorted by their first d, and rows tied there are equal
    there, so the pairs are of the same input values as X's own sort pairs, and each pair's norm is
    the same sum of the same numbers: equal to ``mirror_violation(X)`` and to the separate calls,
    bitwise. Cases: mirrored inputs with odd and even targets, duplicated inputs with different
    targets (the ties Y breaks), one mirror moved by 1e-3."""
    from biasfree.core.symmetry import asymmetry, asymmetry_and_violation, mirror_violation, stack_points

    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, 3))
    X[: n // 4] = X[n // 4: n // 2]  # duplicated inputs
    X = np.concatenate([X, -X])
    Y = rng.normal(size=(2 * n, 1))
    moved = X.copy()
    moved[5] += 1e-3
    for Xs in (X, moved):
        for Ys in (Y, np.concatenate([Y[:n], -Y[:n]]), np.concatenate([Y[:n], Y[:n]])):
            a, v, vx = asymmetry_and_violation(stack_points(Xs, Ys), 50, 3)
            assert (a, v) == (asymmetry(Xs, Ys, points=50), mirror_violation(Xs, Ys))
            assert vx == mirror_violation(Xs)
