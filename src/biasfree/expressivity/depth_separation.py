"""Deep bias-free nets express odd nonlinear functions (docs/theory.md §1.5).

The depth-3 ReLU example, hidden widths 4 then 2, ``g(x) = σ(σ(x1) - σ(x2)) - σ(σ(-x1) - σ(-x2))``,
is odd and positively 1-homogeneous but not linear (``g(1, 1) = 0 ≠ g(1, 0) + g(0, 1) = 1``).
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import numpy as np

from .. import _validate as validate
from ..core.data import Dataset
from ..core.inits import from_arrays, init_gaussian, pair_up
from ..core.layers import Params
from ..core.precision import precise
from ..dynamics import GDConfig, train
from ..dynamics.run import check_cfg, check_dataset, check_ends
from ..dynamics.trajectory import Trajectory
from .floors import DatasetFloor, dataset_floor

INITS = ("random", "pairs")


@precise
def depth3_example() -> Params:
    """The depth-3 bias-free ReLU net g of the module docstring, widths (2, 4, 2, 1).

    ``W1 = [e1; e2; -e1; -e2]`` gives ``h1 = (σ(x1), σ(x2), σ(-x1), σ(-x2))``;
    ``W2 = [[1, -1, 0, 0], [0, 0, 1, -1]]`` gives ``h2 = (σ(σ(x1) - σ(x2)), σ(σ(-x1) - σ(-x2)))``;
    ``W3 = [1, -1]`` outputs their difference. Use with α = 0 (ReLU).
    """
    W1 = [[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0], [0.0, -1.0]]
    W2 = [[1.0, -1.0, 0.0, 0.0], [0.0, 0.0, 1.0, -1.0]]
    W3 = [[1.0, -1.0]]
    return from_arrays([W1, W2, W3])


@dataclass(frozen=True)
class NetFit:
    """Result of :func:`fit_net`: the best restart's final ``params`` and
    ``trajectory``; its final ``train_loss`` and ``test_loss`` (None without a test
    set); ``floor``, the exact two-layer bias-free floor of the training set;
    ``restart_loss``, the final training loss of every restart. All in loss units,
    ½·MSE."""

    params: Params
    trajectory: Trajectory
    train_loss: float
    test_loss: float | None
    floor: DatasetFloor
    restart_loss: np.ndarray

    @property
    def margin(self) -> float:
        """``floor.value - train_loss``: positive when the net beat every two-layer
        bias-free net on its training set (divide by ``floor.power`` to normalise)."""
        return self.floor.value - self.train_loss


def layer_scales(widths, gain: float) -> tuple[float, ...]:
    """Per-layer init std ``gain / sqrt(n_in)`` for ``widths`` = (d, n_1, ..., p)."""
    return tuple(float(gain) / np.sqrt(n) for n in widths[:-1])


@precise
def init_batch(key, widths, *, init: str = "random", gain: float = 0.5, bias: bool = False,
               restarts: int = 1) -> Params:
    """``restarts`` initial nets stacked on a leading axis (for
    :func:`~biasfree.dynamics.trainer.train` with ``batched=True``).

    ``init``: "random" (Gaussian, std ``gain/sqrt(n_in)`` per layer, biases too if
    ``bias``) or "pairs" (a Gaussian net of half the hidden widths, then
    :func:`biasfree.core.inits.pair_up`: an odd net that computes a linear map at init).
    """
    validate.choice("init", init, INITS)
    restarts = validate.integer("restarts", restarts, 1)
    gain = validate.positive("gain", gain, scalar=True, why="the init std is gain/sqrt(n_in)")
    validate.flag("bias", bias)
    validate.key(key)
    widths = validate.layer_widths(widths)
    keys = jax.random.split(key, restarts)
    if init == "pairs":
        if bias or any(n % 2 for n in widths[1:-1]):
            raise ValueError("pair init needs a bias-free net with even hidden widths")
        half = (widths[0],) + tuple(n // 2 for n in widths[1:-1]) + (widths[-1],)
        scales = layer_scales(half, gain)
        return jax.vmap(lambda k: pair_up(init_gaussian(k, half, scales)))(keys)
    scales = layer_scales(widths, gain)
    return jax.vmap(lambda k: init_gaussian(k, widths, scales, bias=bias))(keys)


@precise
def fit_net(data: Dataset, key, widths, cfg: GDConfig, *, init: str = "random", gain: float = 0.5,
            bias: bool = False, restarts: int = 1) -> NetFit:
    """Train ``restarts`` nets of ``widths`` by full-batch GD on ``data``; keep the best.

    ``data`` a symmetric :class:`Dataset` (``Y`` the target on ``X``, mirror rows
    included); ``cfg`` a :class:`GDConfig` with MSE loss; init as in
    :func:`init_batch`. Restarts run in one compiled ensemble (one: a single run); the
    one with the lowest final training loss is returned with the exact two-layer
    floor of the training set (:func:`biasfree.expressivity.floors.dataset_floor`), so
    ``train_loss < floor.value`` shows the net uses more than a two-layer net can.
    """
    check_dataset(data)
    check_cfg(cfg, GDConfig)
    if cfg.loss != "mse":
        raise ValueError("cfg: fit_net compares MSE with the two-layer floor: use GDConfig(loss='mse')")
    widths = validate.layer_widths(widths)
    check_ends(f"widths={widths!r}", widths, data, "give widths (d, ..., p)")
    params = init_batch(key, widths, init=init, gain=gain, bias=bias, restarts=restarts)
    if restarts == 1:  # plain gd compiles faster than a one-member ensemble
        member = train(jax.tree_util.tree_map(lambda a: a[0], params), data, cfg)
        final = np.asarray(member.loss)[-1:]
    else:
        traj = train(params, data, cfg, batched=True)
        final = np.asarray(traj.loss)[:, -1]
        member = traj.member(int(np.argmin(final)))
    test = None if member.test_loss is None else float(np.asarray(member.test_loss)[-1])
    return NetFit(member.params, member, float(np.min(final)), test,
                  dataset_floor(data.X, data.Y, alpha=cfg.alpha), final)
