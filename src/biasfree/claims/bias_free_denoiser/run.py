"""The run of :mod:`biasfree.claims.bias_free_denoiser`: its measurements and their checks against theory."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ... import theory
from ...core.conv import Conv
from ...core.data import Dataset, symmetrize
from ...core.draws import normal
from ...core.inits import pair_up
from ...core.layers import Params
from ...core.nets import forward
from ...core.real_data import load_data
from ...core.twin import slope_factor
from ...dynamics import GDConfig, Member, train
from ...expressivity.local_linear import local_linear
from ...results import Result, at_most
from ..base import Progress, quiet
from ..checks import PAPER_LEVEL, twin_identity
from . import Config

SHAPE = (8, 8)


def _data(cfg: Config, seed: int):
    """Clean digits in [0, 1]: training images with σ ~ U[0, σ_max] noise, held-out images
    and one fixed noise direction per held-out image (scaled to each test σ)."""
    X = np.asarray(load_data("digits", symmetrize_data=False, seed=seed).X)
    rng = np.random.default_rng(seed)
    perm = rng.permutation(X.shape[0])
    train, test = X[perm[:cfg.n_train]], X[perm[cfg.n_train:cfg.n_train + cfg.n_test]]
    sig = rng.uniform(0.0, cfg.sigma_train_max, (cfg.n_train, 1))
    noisy = train + sig * rng.standard_normal(train.shape)
    return train, noisy, test, rng.standard_normal(test.shape)


def _conv_net(key, cfg: Config, bias: bool) -> Params:
    """1 → C → … → C → 1 channels, k×k 'same' kernels ~ N(0, 2/(C_in k²)) (He), biases 0."""
    ch, k = (1,) + (cfg.channels,) * (cfg.depth - 1) + (1,), cfg.kernel
    keys = jax.random.split(key, cfg.depth)
    return tuple(Conv(np.sqrt(2.0 / (ci * k**2)) * normal(kl, (co, ci, k, k)),
                      jnp.zeros(co) if bias else None, SHAPE)
                 for kl, ci, co in zip(keys, ch[:-1], ch[1:], strict=True))


def _two_layer(key, cfg: Config, channels: int) -> Params:
    """conv(1 → C₂) → σ_α → conv(C₂ → 1), bias-free, every weight ~ N(0, twin_scale²)."""
    k1, k2 = jax.random.split(key)
    k = cfg.kernel
    return (Conv(cfg.twin_scale * normal(k1, (channels, 1, k, k)), None, SHAPE),
            Conv(cfg.twin_scale * normal(k2, (1, channels, k, k)), None, SHAPE))


def span_filters(kernel: int) -> np.ndarray:
    """The k⁴ matrices ``T(e_u) T(e_v)`` (k⁴, 64, 64) whose span holds every end-to-end map
    of a two-layer linear conv net with k×k 'same' kernels (module doc of the package)."""
    E = jnp.eye(kernel * kernel).reshape(-1, 1, 1, kernel, kernel)
    T = np.asarray(Conv(E, None, SHAPE).matrix)  # (k², 64, 64)
    return np.einsum("uij,vjk->uvik", T, T).reshape(-1, T.shape[1], T.shape[2])


def span_least_squares(noisy, clean, kernel: int):
    """The least-squares filter M* = Σ_j θ_j M_j in the span of :func:`span_filters`:
    ``min_θ 1/(2N) Σ_n ||x_n − Σ_j θ_j M_j y_n||²``. Returns (M*, its loss)."""
    M = span_filters(kernel)
    Phi = np.einsum("jik,nk->nij", M, noisy).reshape(-1, M.shape[0])  # (N·64, k⁴)
    theta = np.linalg.lstsq(Phi, clean.reshape(-1), rcond=None)[0]
    Ms = np.einsum("j,jik->ik", theta, M)
    return Ms, 0.5 * float(np.mean(np.sum((clean - noisy @ Ms.T) ** 2, axis=1)))


def run(cfg: Config, seed: int = 0, progress: Progress = quiet) -> Result:
    a, sig = cfg.alpha, np.asarray(cfg.sigmas_test, dtype=float)
    k_deep, k_two, k_pair = jax.random.split(jax.random.PRNGKey(seed), 3)
    progress("data: digits, training noise σ ~ U[0, σ_max], held-out images and noise directions")
    clean, noisy, test, noise = _data(cfg, seed)

    progress(f"GD: bias-free and biased {cfg.depth}-layer conv denoisers ({cfg.steps} steps)")
    deep = train({"bias-free": Member(_conv_net(k_deep, cfg, bias=False), a),
                       "biased": Member(_conv_net(k_deep, cfg, bias=True), a)},
                      Dataset(noisy, clean), GDConfig(lr=cfg.lr, steps=cfg.steps, n_records=2))
    # only the first and last records: each record costs an SVD of every layer's Toeplitz matrix
    nets = {n: deep[n].params for n in ("bias-free", "biased")}
    # each net's output MSE over input MSE on the held-out images at each σ, (S,)
    err = {n: np.array([float(np.mean((np.asarray(forward(p, Z, a)) - test) ** 2) / np.mean((Z - test) ** 2))
                        for Z in (test + s * noise for s in sig)]) for n, p in nets.items()}

    progress("local linear analysis at noisy held-out images")
    nj = cfg.n_jacobian_images
    Xj = (test[None, :nj] + sig[:, None, None] * noise[None, :nj]).reshape(-1, test.shape[1])
    ll = {n: local_linear(p, Xj, a) for n, p in nets.items()}
    dims = {k: getattr(ll["bias-free"], k).reshape(sig.size, nj)
            for k in ("frobenius_dimension", "participation_ratio", "effective_rank")}
    dim_med = np.median(dims["frobenius_dimension"], axis=1)
    bt, fb = ll["biased"].bias_term.reshape(sig.size, nj, -1), np.asarray(forward(nets["biased"], Xj, a))
    bias_frac = np.sum(bt**2, axis=(1, 2)) / np.sum(fb.reshape(bt.shape) ** 2, axis=(1, 2))

    progress(f"two-layer conv denoiser on symmetrised images: random and pair init, {cfg.twin_steps} steps")
    data2 = Dataset(*symmetrize(noisy, clean))
    members = {"random": Member(_two_layer(k_two, cfg, cfg.twin_channels), a, twin=True),
               "pair": Member(pair_up(_two_layer(k_pair, cfg, cfg.twin_channels // 2)), a, twin=True)}
    two = train(members, data2, GDConfig(lr=cfg.twin_lr, steps=cfg.twin_steps,
                                              n_records=cfg.n_records, spacing="log"))
    c = float(slope_factor(a))
    M_ls, L_ls = span_least_squares(noisy, clean, cfg.kernel)
    L_wiener = float(theory.linear_floor(noisy, clean))
    p2, tw = two["random"].params, two.twin("random").params
    lin_net = c * np.asarray(p2[1].matrix) @ np.asarray(p2[0].matrix)
    lin_twin = np.asarray(tw[1].matrix) @ np.asarray(tw[0].matrix)
    L2, L2t = np.asarray(two["random"].loss), np.asarray(two.twin("random").loss)

    def dist(M):
        return float(np.linalg.norm(M - M_ls) / np.linalg.norm(M_ls))

    progress("checks")
    i_in = max(int(np.sum(sig <= cfg.sigma_train_max)) - 1, 0)  # the largest test σ in the training range
    # Self-checks: the exact identities (round-off bounds). The BF-CNN claims and the random-init gap
    # are findings at this scale, reported against their criteria, not checked (docs/theory.md §8.8).
    checks = {
        "bias_free_euler_identity": at_most(
            ll["bias-free"].euler_ratio, 1.0,
            "The bias-free denoiser computes f(y) = J(y)·y at every analysed input, elementwise within "
            "the derived round-off bound γ_{3K+d+2}·G(y) (docs/theory.md §8.7).", unit="× round-off bound"),
        "bias_free_homogeneity": at_most(
            ll["bias-free"].homogeneity_ratio, 1.0,
            "The bias-free denoiser is 1-homogeneous, f(λy) = λ f(y) (λ = 0.1, 3, 7), within the "
            "derived round-off bound γ_{K+3}(G(λy) + λG(y)) (§8.7).", unit="× round-off bound"),
        "pair_channels_equal_linear_twin": twin_identity(
            two, ["pair"], "The pair-channel two-layer conv denoiser (channels (k, −k), §7.2)"),
    }
    findings = {  # measured value, criterion (value must be <= it): reported, not checked
        "bf_over_biased_error_largest_sigma": (float(err["bias-free"][-1] / err["biased"][-1]), 1.0),
        "bf_error_largest_sigma": (float(err["bias-free"][-1]), 1.0),
        "dimension_increases": (float(np.sum(np.diff(dim_med) > 0)), 0.0),
        "two_layer_gap_over_paper_level": (two.twin_gap("random") / PAPER_LEVEL, 1.0),
    }
    metrics = {
        **{name: value for name, (value, _) in findings.items()},
        **{f"{name}_holds": float(value <= bound) for name, (value, bound) in findings.items()},
        "error_bias_free_largest_sigma": float(err["bias-free"][-1]),
        "error_biased_largest_sigma": float(err["biased"][-1]),
        "error_bias_free_train_max": float(err["bias-free"][i_in]),
        "error_biased_train_max": float(err["biased"][i_in]),
        "final_train_loss_bias_free": float(deep["bias-free"].loss[-1]),
        "final_train_loss_biased": float(deep["biased"].loss[-1]),
        "dimension_median_smallest_sigma": float(dim_med[0]),
        "dimension_median_largest_sigma": float(dim_med[-1]),
        "euler_ratio_bias_free": ll["bias-free"].euler_ratio,
        "euler_residual_bias_free": ll["bias-free"].euler_residual,
        "bias_term_fraction_biased": ll["biased"].bias_fraction,
        "euler_ratio_biased": ll["biased"].euler_ratio,
        "two_layer_gap_to_twin": two.twin_gap("random"), "pair_gap_to_twin": two.twin_gap("pair"),
        "two_layer_final_loss": float(L2[-1]), "twin_final_loss": float(L2t[-1]),
        "span_least_squares_loss": L_ls, "wiener_loss": L_wiener,
        "two_layer_excess_over_span_ls": float((L2[-1] - L_ls) / (L2[0] - L_ls)),
        "twin_excess_over_span_ls": float((L2t[-1] - L_ls) / (L2t[0] - L_ls)),
        "two_layer_filter_distance_to_span_ls": dist(lin_net),
        "twin_filter_distance_to_span_ls": dist(lin_twin),
        "two_layer_filter_distance_to_twin": float(np.linalg.norm(lin_net - lin_twin)
                                                   / np.linalg.norm(lin_twin)),
    }
    for s, e1, e2, d in zip(sig, err["bias-free"], err["biased"], dim_med, strict=True):
        metrics[f"error_bias_free_sigma_{s:g}"] = float(e1)
        metrics[f"error_biased_sigma_{s:g}"] = float(e2)
        metrics[f"dimension_median_sigma_{s:g}"] = float(d)
    j0 = sig.size - 1  # the examples panel: the first image at the largest σ
    arrays = {
        "sigmas": sig,
        "error_bias_free": err["bias-free"], "error_biased": err["biased"],
        **{f"dim_{k}": v for k, v in dims.items()}, "bias_fraction_biased": bias_frac,
        "t_deep": np.asarray(deep["bias-free"].t),
        "loss_deep": np.stack([np.asarray(deep[n].loss) for n in nets]),
        "t_two": np.asarray(two["random"].t),
        "loss_two": np.stack([L2, np.asarray(two["pair"].loss)]),
        "loss_two_twin": np.stack([L2t, np.asarray(two.twin("pair").loss)]),
        "span_ls_loss": np.asarray(L_ls), "wiener_loss": np.asarray(L_wiener),
        "examples_clean": test[:nj], "examples_noisy": Xj.reshape(sig.size, nj, -1),
        "examples_bias_free": np.asarray(forward(nets["bias-free"], Xj, a)).reshape(sig.size, nj, -1),
        "examples_biased": fb.reshape(sig.size, nj, -1),
        "jacobian_rows": ll["bias-free"].jacobians.reshape(sig.size, nj, 64, 64)[:, 0, 27],
        "example_sigma_index": np.asarray(j0),
    }
    notes = (f"Digits in [0, 1]; {cfg.n_train} training images with σ ~ U[0, {cfg.sigma_train_max:g}], "
             f"{cfg.n_test} held out, tested at σ = {', '.join(f'{s:g}' for s in sig)}. Direct output (the "
             f"net outputs the clean image). Deep denoisers: {cfg.depth} conv layers, {cfg.channels} "
             f"channels, {cfg.kernel}×{cfg.kernel} 'same', ReLU slope α = {a:g}, He init (biases 0), "
             f"plain full-batch GD η = {cfg.lr:g} × {cfg.steps} steps on ½·MSE summed over pixels. "
             f"Two-layer: {cfg.twin_channels} channels, init std {cfg.twin_scale:g}, GD η = "
             f"{cfg.twin_lr:g} × {cfg.twin_steps} on the symmetrised set ({2 * cfg.n_train} points); linear "
             f"filters: the least-squares filter in the span of the k⁴ = {cfg.kernel**4} products "
             "T(e_u)T(e_v) (reachable by the twin when channels ≥ k²) and the unrestricted Wiener-type "
             "least-squares filter.")
    return Result("bias-free-denoiser", seed, {}, metrics, checks, arrays, notes)
