"""Named ensembles: many gradient-descent runs, each a named :class:`Member`, trained by
:func:`~biasfree.dynamics.trainer.train` in as few compiled calls as their shapes allow, with
their linear twins on request.

With ``twin=True`` a member's *linear twin* (:meth:`Member.linear_twin`, docs/theory.md
§2.4, §2.7) runs the same number of steps, so twin record j is at twin time ``c t_j``. Its
loss is the member's exactly when the even part stays zero (pair or rank-one init on
symmetric data), approximately from a small random init.

Members are looked up by name, never by position::

    runs = train({"relu": Member(p, alpha=0.0, twin=True),
                  "linear": Member(p, alpha=1.0)}, data, GDConfig(lr=0.02, steps=500))
    runs["relu"].loss, runs.twin("relu").loss, runs.twin_gap("relu")
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .. import _validate as validate
from ..core.attention_twin import twin_slope
from ..core.layers import Params, check_net
from ..core.twin import slope_factor, twin_weights
from .trajectory import Trajectory


@dataclass(frozen=True)
class Member:
    """One named run: ``params`` (a net, unbatched), ``alpha`` slope α (None: 0, or 1 for an
    attention layer's twin from ``merged_to_twin``, whose map sets it), ``lr`` step η (None: the
    config's), ``weight_decay`` λ, ``twin`` also train its linear twin."""

    params: Params
    alpha: float | None = None
    lr: float | None = None
    weight_decay: float = 0.0
    twin: bool = False

    def __post_init__(self):
        check_net(self.params)
        a = twin_slope(self.params, self.alpha)  # None: a twin's layers set 1, any other net 0
        object.__setattr__(self, "alpha", validate.slope(0.0 if a is None else a))
        if self.lr is not None:
            validate.positive("lr", self.lr, scalar=True, why="Member lr is a gradient step (or None)")
        validate.nonnegative("weight_decay", self.weight_decay, scalar=True,
                             why="Member weight_decay is an L2 penalty")
        validate.flag("twin", self.twin)

    def linear_twin(self, lr: float) -> Member:
        """The twin: ``√c·params``, α = 1, step ``η c``, decay ``λ/c`` (§2.4, §2.7)."""
        c = float(slope_factor(self.alpha))
        lr = validate.positive("lr", lr, scalar=True, why="the member's GD step η (e.g. cfg.lr)")
        return Member(twin_weights(self.params, self.alpha, 2), 1.0, lr * c, self.weight_decay / c)


@dataclass(frozen=True)
class Runs:
    """Trajectories by name: ``runs[name]`` the member's, ``runs.twin(name)`` its linear
    twin's (members trained with ``twin=True``)."""

    nets: dict[str, Trajectory]
    twins: dict[str, Trajectory] = field(default_factory=dict)

    def __getitem__(self, name: str) -> Trajectory:
        try:
            return self.nets[name]
        except KeyError:
            raise KeyError(f"no member {name!r}; members: {', '.join(self.nets)}") from None

    def __iter__(self):
        return iter(self.nets)

    def __len__(self) -> int:
        return len(self.nets)

    def save(self, path) -> Path:
        """Write every member's trajectory and twin to ``path``, one ``.safetensors`` file
        (arrays as tensors, the names and the rest as JSON; never pickle), as
        :meth:`Trajectory.save <biasfree.dynamics.trajectory.Trajectory.save>` does.
        Returns the path; :meth:`load` reads it back."""
        from .run_files import save_run

        return save_run(self, path, {"Runs": Runs, "Trajectory": Trajectory})

    @staticmethod
    def load(path) -> Runs:
        """The runs :meth:`save` wrote to ``path``."""
        from .run_files import load_run

        return load_run(path, Runs, {"Runs": Runs, "Trajectory": Trajectory})

    def ordered(self, names) -> Runs:
        """The same runs, members in the order of ``names``."""
        return Runs({n: self.nets[n] for n in names}, {n: self.twins[n] for n in names if n in self.twins})

    def twin(self, name: str) -> Trajectory:
        if name not in self.twins:
            raise KeyError(f"member {name!r} was trained without its twin: pass Member(..., twin=True)")
        return self.twins[name]

    def twin_gap(self, name: str, *, test: bool = False) -> float:
        """``max_t |L(t) - L_twin(c t)| / L(0)``: how far the member's loss strays from
        its linear twin's, as a fraction of its initial loss (``test``: the held-out loss,
        for data with a test set)."""
        a, b = self[name], self.twin(name)
        if test and a.test_loss is None:
            raise ValueError(f"member {name!r} has no test loss: train on a Dataset with X_test, Y_test")
        L, Lt = (np.asarray(r.test_loss if test else r.loss) for r in (a, b))
        return float(np.max(np.abs(L - Lt)) / L[0])
