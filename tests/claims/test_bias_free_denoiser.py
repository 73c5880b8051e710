"""The bias-free-denoiser experiment's config validation and the span that defines its
least-squares linear filter: every two-layer linear conv net's end-to-end map lies in the
span of the k⁴ products T(e_u)T(e_v), with coefficients Θ = Σ_c K₂,c K₁,cᵀ. (Its tiny preset
runs, with every check, in test_experiments.)"""

import numpy as np
import pytest
from roundoff import gamma

from biasfree.claims import get
from biasfree.claims.bias_free_denoiser import Config
from biasfree.claims.bias_free_denoiser.run import span_filters, span_least_squares

pytestmark = pytest.mark.numerics


def test_registered_with_presets():
    exp = get("bias-free-denoiser")
    assert set(exp.presets) == {"tiny", "paper"} and exp.config is Config
    assert exp.paper_claim.startswith("Claim ")


@pytest.mark.parametrize("kw, match", [
    ({"twin_channels": 5}, "even"), ({"alpha": 1.0}, "alpha"), ({"kernel": 4}, "odd"),
    ({"sigmas_test": (0.05, 0.1, 0.15)}, "beyond"), ({"sigmas_test": (0.5, 0.3, 1.0)}, "increasing"),
    ({"n_train": 1700, "n_test": 200}, "1797"), ({"depth": 1}, "depth"), ({"lr": 0.0}, "lr"),
    ({"n_jacobian_images": 0}, "n_jacobian_images"),
])
def test_config_rejects_bad_values(kw, match):
    with pytest.raises(ValueError, match=match):
        Config(**kw)


def test_linear_conv_twin_lies_in_the_span():
    from biasfree.core.conv import Conv

    rng = np.random.default_rng(0)
    k, C = 3, 4
    K1, K2 = rng.standard_normal((C, 1, k, k)), rng.standard_normal((1, C, k, k))
    T1, T2 = np.asarray(Conv(K1, None, (8, 8)).matrix), np.asarray(Conv(K2, None, (8, 8)).matrix)
    theta = np.einsum("cu,cv->uv", K2[0].reshape(C, -1), K1[:, 0].reshape(C, -1)).reshape(-1)
    M = span_filters(k)
    via_span, direct = np.einsum("j,jik->ik", theta, M), T2 @ T1
    # two sums of the same exact products in different orders: the product T2 T1 sums 64 C
    # terms (γ_{64C} |T2||T1|), the span sums k⁴ coefficients of products of k² kernel entries
    # (γ_{k⁴+2} Σ_j |θ_j||M_j|, M_j exact 0/1 matrices)
    bound = gamma(64 * C) * np.abs(T2) @ np.abs(T1) + gamma(k**4 + 2) * np.einsum(
        "j,jik->ik", np.abs(theta), np.abs(M))
    np.testing.assert_array_less(np.abs(via_span - direct), bound + np.finfo(float).tiny)


def test_span_least_squares_is_the_best_filter_in_the_span():
    rng = np.random.default_rng(1)
    clean = rng.uniform(0, 1, (40, 64))
    noisy = clean + 0.2 * rng.standard_normal(clean.shape)
    Ms, L = span_least_squares(noisy, clean, 3)
    assert L == 0.5 * np.mean(np.sum((clean - noisy @ Ms.T) ** 2, axis=1))  # the same expression
    # any other filter of the span does worse: the identity (θ at the centre offsets) and a
    # perturbation of M* along one span direction
    M = span_filters(3)
    for other in (M[40], Ms + 1e-3 * M[7]):
        assert 0.5 * np.mean(np.sum((clean - noisy @ other.T) ** 2, axis=1)) > L
