"""verdict-calibration's families beyond the grid: nets whose verdict the grid does not
exercise, each with its own confusion table (docs/theory.md §6).

Each family (one function below) is a list of :class:`Point`: a net handed to
:func:`biasfree.analyse` as it is (``params``), on its data, and the truth run that decides
whether it is linear: the net beside its twin (weights × the twin scale, step × k_t, weight
decay λ/k_t; §2.4, §2.7) from ``params``, with analyse's default step and horizon (at most
``max_steps``), gap measured at every GD step (:func:`~biasfree.dynamics.trainer.train` with ``twin``).
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from ...core.conv import Conv
from ...core.data import Dataset, symmetrize
from ...core.inits import init_conv, pair_up
from ...core.layers import Params
from ...dynamics.trainer import GDConfig, train
from ..checks import numpy_gaussian
from . import FAMILIES, Config


@dataclass(frozen=True)
class Point:
    """One net of a family: ``label`` where it sits (``key`` the same for a metric name),
    ``params`` the net given to analyse and the truth run's start, data ``X``, ``Y``,
    ``decay`` the truth run's weight decay λ; trained nets also carry ``init`` (the weights
    training started from) and ``history_gap`` (the gap to the twin measured on the way, fraction of L₀)."""

    label: str
    key: str
    params: Params
    X: np.ndarray
    Y: np.ndarray
    decay: float = 0.0
    init: Params | None = None
    history_gap: float = float("nan")


def reference_loss(L0, Y) -> np.ndarray:
    """``L₀ = max(L(θ₀), ½⟨‖y‖²⟩)``, the unit of every gap: L(θ₀) for an init that has learned
    nothing yet (the paper's L(0)), the zero function's loss for a net that already fits
    (a trained net's L(θ₀) is near 0 and would blow any gap up)."""
    Y = np.asarray(Y, float)
    return np.maximum(np.asarray(L0, float), 0.5 * np.mean(np.sum(Y**2, axis=-1), axis=-1))


def _numpy(params: Params) -> Params:
    return jax.tree_util.tree_map(np.asarray, params)


def trained(cfg: Config, rng, X, Y, setup) -> list[Point]:
    """Two-layer nets trained from N(0, σ²) (``trained_scales``) for ``trained_fractions`` of
    analyse's default horizon (``setup``: the truth setup of the init), beside the init's twin.
    Two truths: training *continued* from the trained weights (what analyse's training answer
    predicts), and the gap on the way from the init (``history_gap``: what
    ``analyse(..., init=...)`` answers)."""
    out = []
    for m in cfg.family_widths:
        for s in cfg.trained_scales:
            init = numpy_gaussian(rng, (cfg.d, m, 1), s)
            twin, _, lr, steps, _ = setup(init, X, Y)
            for frac in cfg.trained_fractions:
                k = max(1, int(round(frac * steps)))
                run = train(init, Dataset(X, Y), GDConfig(lr=lr, steps=k, n_records=2), twin=twin,
                            observables="loss")
                out.append(Point(f"width {m}, σ {s:g}, {k} steps ({frac:.0%} of the horizon)",
                                 f"w{m}_std{s:.0e}_steps{k}", _numpy(run.params), X, Y, init=init,
                                 history_gap=float(run.twin_gap / reference_loss(run.loss[0], Y))))
    return out


def pairs(cfg: Config, rng, X, Y) -> list[Point]:
    """Antisymmetric pairs of width m (m/2 Gaussian units of std σ, each with its sign-flipped
    partner) for σ in ``pair_scales``: f_even ≡ 0 along GD on symmetric data, so they are
    exactly their twin at any scale (§2.3), truth at round-off."""
    return [Point(f"width {m}, σ {s:g}", f"w{m}_std{s:.0e}",
                  _numpy(pair_up(numpy_gaussian(rng, (cfg.d, m // 2, 1), s))), X, Y)
            for m in cfg.family_widths for s in cfg.pair_scales]


def depth3(cfg: Config, rng, X, Y) -> list[Point]:
    """Depth-3 bias-free nets (both hidden layers of width m) of std σ in ``depth3_scales``
    (no exact twin, §4.1)."""
    return [Point(f"width {m}, σ {s:g}", f"w{m}_std{s:.0e}", numpy_gaussian(rng, (cfg.d, m, m, 1), s), X, Y)
            for m in cfg.family_widths for s in cfg.depth3_scales]


def weight_decay(cfg: Config, rng, X, Y) -> list[Point]:
    """Two-layer nets of std ``decay_scale`` whose truth runs with weight decay λ in ``decays``
    (the twin's λ/c, §2.7); analyse sees the init alone."""
    return [Point(f"width {m}, λ {lam:g}", f"w{m}_decay{lam:.0e}",
                  numpy_gaussian(rng, (cfg.d, m, 1), cfg.decay_scale), X, Y, decay=float(lam))
            for m in cfg.family_widths for lam in cfg.decays]


def conv_data(rng, shape: tuple[int, ...], n: int, kernel: int):
    """``n`` Gaussian signals of spatial ``shape`` (flat, one channel) and the scalar teacher
    ``y = Σ_s φ((κ⋆x)_s) / √S`` over the S positions, φ(u) = u + sin 4u, κ a unit-norm Gaussian
    kernel ("same" padding), symmetrised: ([X; −X], [Y; −Y]). One output, so one strong
    mode: the truth runs' horizon is set by it, not by the weak modes a per-position
    target would add (the edges, the sine)."""
    kappa = rng.normal(size=(1, 1) + (kernel,) * len(shape))
    X = rng.normal(size=(n, int(np.prod(shape))))
    U = np.asarray(Conv(jnp.asarray(kappa / np.linalg.norm(kappa)), None, tuple(shape), "same").linear(X))
    Y = np.sum(U + np.sin(4.0 * U), axis=1, keepdims=True) / np.sqrt(U.shape[1])
    return tuple(np.asarray(a) for a in symmetrize(X, Y))


def conv(cfg: Config, key, X, Y, shape: tuple[int, ...]) -> list[Point]:
    """Two-layer conv nets (1 → C channels, ``conv_kernel`` wide, dense readout to every
    position) of std σ in ``conv_scales``, C in ``conv_channels`` (:func:`~biasfree.init_conv`);
    the twin is the linear conv net (§7.1)."""
    settings = [(C, s) for C in cfg.conv_channels for s in cfg.conv_scales]
    keys = jax.random.split(key, len(settings))
    return [Point(f"C {C}, σ {s:g}", f"C{C}_std{s:.0e}",
                  _numpy(init_conv(k, shape, (1, C), cfg.conv_kernel, Y.shape[1], s)), X, Y)
            for k, (C, s) in zip(keys, settings, strict=True)]


def build(cfg: Config, seed: int, X, Y, setup) -> dict[str, list[Point]]:
    """Every family of ``cfg.families`` (the symmetric data ``X``, ``Y`` of the grid for the
    dense ones; its own signals for each conv family), drawn from ``seed``."""
    out, dense = {}, {"pairs-large-init": pairs, "depth3": depth3, "weight-decay": weight_decay}
    for i, name in enumerate(FAMILIES):
        if name not in cfg.families:
            continue
        rng = np.random.default_rng([seed, 100 + i])
        if name == "trained":
            out[name] = trained(cfg, rng, X, Y, setup)
        elif name in dense:
            out[name] = dense[name](cfg, rng, X, Y)
        else:
            shape = (cfg.conv_length,) if name == "conv1d" else (cfg.conv_image, cfg.conv_image)
            Xc, Yc = conv_data(rng, shape, cfg.conv_n, cfg.conv_kernel)
            out[name] = conv(cfg, jax.random.PRNGKey(int(rng.integers(2**31))), Xc, Yc, shape)
    return out
