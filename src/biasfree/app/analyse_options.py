"""The training options of ``biasfree analyse`` → the ``train=`` of :func:`biasfree.analyse`.

``--train`` alone: GD at the step and horizon analyse picks from the data (``True``);
``--train-steps K [--lr η]``: GD for K steps at η; ``--optimiser NAME [--lr η]`` with either:
that optax optimiser (its twin by :func:`biasfree.optimiser_twin`) for K steps, or for
:data:`TRAIN_STEPS` (those of ``biasfree.analyse(train=optimiser)``) with ``--train``. Options
that do not go together, or a value out of range, are refused by :func:`check_options` with a
``ValueError`` that names the fix, before JAX is imported (this module imports no JAX: its
names are checked against the trainer's by tests/app/test_cli_failures.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .. import _validate as validate

if TYPE_CHECKING:
    from ..dynamics.train_config import TrainConfig

TRAIN_STEPS = 1000
"""Steps of ``analyse --train --optimiser NAME``: those of ``biasfree.analyse(train=optimiser)``
(``TrainConfig``'s default ``steps``)."""
DEFAULT_LR = 0.01
"""η of ``--train-steps`` or of an ``--optimiser`` when ``--lr`` is not given."""
OPTIMISERS = ("sgd", "momentum", "nesterov", "adam", "rmsprop", "sign_sgd", "lion", "adamw", "muon")
"""The names of ``--optimiser`` besides gd: those of ``biasfree.dynamics.optimiser_twin.NAMED``."""


def check_options(train: bool, train_steps: int, optimiser: str, batch_size: int | None,
                  random_batches: bool, lr: float | None, time_budget: float,
                  t_max: float | None, alpha: float | None) -> None:
    """Refuse options that do not go together or values out of range (module doc): a
    ``ValueError`` naming the option and the fix. Needs no JAX."""
    if train and train_steps:
        raise ValueError("give --train (default steps) or --train-steps K, not both")
    if train and optimiser == "gd" and lr is not None:
        raise ValueError("--lr with --train needs an --optimiser (e.g. --optimiser adam --lr 1e-3): "
                         "--train picks GD's step from the data; for GD at step η give --train-steps K "
                         "--lr η")
    if (optimiser != "gd" or batch_size is not None) and not (train or train_steps):
        raise ValueError("--optimiser and --batch-size go with --train or --train-steps K (e.g. "
                         "--train --optimiser adam --lr 1e-3)")
    if optimiser == "gd" and batch_size is not None:
        raise ValueError("--batch-size needs an --optimiser (sgd for plain minibatch SGD)")
    if random_batches and batch_size is None:
        raise ValueError("--random-batches goes with --batch-size B")
    if optimiser not in ("gd", *OPTIMISERS):
        raise ValueError(f"--optimiser {optimiser!r}: choose gd or one of {', '.join(OPTIMISERS)}")
    if lr is not None:
        validate.positive("--lr", lr, scalar=True, why="the step η, e.g. --lr 1e-3")
    validate.positive("--time-budget", time_budget, scalar=True, why="seconds of training, e.g. 120")
    if t_max is not None:
        validate.positive("--t-max", t_max, scalar=True, why="the horizon of the predicted curve")
    if alpha is not None:
        validate.slope(alpha, "--alpha")


def train_option(train: bool, train_steps: int, optimiser: str, batch_size: int | None,
                 random_batches: bool, lr: float | None, n_records: int) -> TrainConfig | bool | None:
    """The ``train=`` the options ask for (module doc): a config, ``True`` or ``None`` (no
    training). The options were checked by :func:`check_options`."""
    from ..dynamics.optimiser_twin import NAMED
    from ..dynamics.train_config import GDConfig, TrainConfig

    step = DEFAULT_LR if lr is None else lr
    if optimiser != "gd":
        return TrainConfig(optimiser=NAMED[optimiser](step), steps=train_steps or TRAIN_STEPS,
                           batch_size=batch_size, name=optimiser, n_records=n_records,
                           mirrored_batches=not random_batches)
    if train_steps:
        return GDConfig(lr=step, steps=train_steps, n_records=n_records)
    return True if train else None
