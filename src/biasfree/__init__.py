"""biasfree: when are bias-free ReLU networks effectively linear networks?

Networks of any depth and leaky slope α, symmetric data, gradient descent and true
gradient flow, closed-form theory, expressivity analysis and self-checking
experiments for Zhang, Saxe & Latham (TMLR 2025). biasfree computes in float64 by
default, without touching JAX's global settings (``jax_enable_x64`` stays as it was):
each public function runs under ``jax.enable_x64`` at its ``precision`` ("float64", or
"float32" on request; see :mod:`biasfree.precision`). The identities it checks hold to
round-off only in double precision.

The top level holds the entry points a user calls (``__all__``, docs/api.md); the rest
lives in named submodules: :mod:`biasfree.data`, :mod:`biasfree.nets`,
:mod:`biasfree.dynamics`, :mod:`biasfree.theory` (and its :mod:`~biasfree.margin`),
:mod:`biasfree.expressivity`, :mod:`biasfree.models`, :mod:`biasfree.experiments`,
:mod:`biasfree.precision`. The names that were top level before 0.2 still resolve here,
with a ``DeprecationWarning`` naming their new place (``_MOVED``).
"""

import functools
import importlib
import importlib.util
import warnings
from typing import TYPE_CHECKING

# The entry points, bound lazily: ``import biasfree`` loads neither JAX nor SciPy (the
# command line refuses bad input before they load, docs/cli.md); the first use of a name
# imports its module (``__getattr__``, from the imports below, read once from this file)
if TYPE_CHECKING:
    # analysis: a user's model and data -> a graded verdict
    from .analysis.analyse import analyse as analyse
    from .analysis.report import Analysis as Analysis
    from .analysis.report import save_analysis as save_analysis

    # training: gradient descent, gradient flow, any optax optimiser, ensembles
    from .dynamics import DivergenceError as DivergenceError
    from .dynamics import FlowConfig as FlowConfig
    from .dynamics import GDConfig as GDConfig
    from .dynamics import Member as Member
    from .dynamics import Runs as Runs
    from .dynamics import TrainConfig as TrainConfig
    from .dynamics import Trajectory as Trajectory
    from .dynamics import flow as flow
    from .dynamics import flow_ensemble as flow_ensemble
    from .dynamics import optimiser_twin as optimiser_twin
    from .dynamics import train as train

    # nets: the bias-free family, its inits and its linear twin
    from .nets import beta_eff as beta_eff
    from .nets import effective_units as effective_units
    from .nets import forward as forward
    from .nets import from_arrays as from_arrays
    from .nets import init_conv as init_conv
    from .nets import init_gaussian as init_gaussian
    from .nets import init_pairs as init_pairs
    from .nets import init_rank_one as init_rank_one
    from .nets import linear_twin as linear_twin
    from .nets import pair_up as pair_up

    # data: symmetric data sets, targets, real data
    from .data import Dataset as Dataset
    from .data import linear_target as linear_target
    from .data import load_data as load_data
    from .data import make_dataset as make_dataset
    from .data import sine_target as sine_target
    from .data import symmetrize as symmetrize

    # models: PyTorch, equinox and weight files in and out
    from .models import Model as Model
    from .models import from_torch as from_torch
    from .models import load_model as load_model
    from .models import save_model as save_model

    # experiments and precision
    from .experiments import run as run
    from .experiments import sweep as sweep
    from .precision import use_precision as use_precision

    # submodules
    from . import data as data
    from . import dynamics as dynamics
    from . import expressivity as expressivity
    from . import nets as nets
    from . import theory as theory
    from .theory import margin as margin

__all__ = [
    # analysis
    "analyse", "Analysis", "save_analysis",
    # training
    "train", "TrainConfig", "flow", "FlowConfig", "GDConfig", "Trajectory", "Member", "Runs", "flow_ensemble",
    "DivergenceError",
    # nets
    "init_gaussian", "init_pairs", "pair_up", "init_rank_one", "init_conv", "from_arrays", "forward",
    "linear_twin", "optimiser_twin", "beta_eff", "effective_units",
    # data
    "Dataset", "make_dataset", "symmetrize", "load_data", "sine_target", "linear_target",
    # models
    "load_model", "save_model", "from_torch", "Model",
    # experiments and precision
    "run", "sweep", "use_precision",
    # submodules
    "data", "dynamics", "expressivity", "margin", "nets", "theory",
    "__version__",
]

_MOVED: dict[str, str] = {
    **dict.fromkeys((
        "RealData", "Whitened", "abs_target", "asymmetric_half", "asymmetry", "check_data",
        "cross_covariance", "gaussian_inputs", "input_covariance", "is_symmetric", "label_data",
        "moment_data", "one_hot", "product_target", "teacher_matrix", "whiten", "xor_target"), "data"),
    **dict.fromkeys((
        "Conv", "Layer", "Params", "PooledDense", "depth", "end_to_end_linear", "even_part", "hidden",
        "leaky_relu", "odd_part", "scale_params", "slope_factor", "widths"), "nets"),
    **dict.fromkeys((
        "Characterisation", "DatasetFloor", "Decomposition", "Floor", "LocalLinear", "NetFit", "OddFit",
        "TwoLayerFloor", "characterise", "dataset_floor", "decompose", "depth3_example", "fit_net",
        "homogeneity_gap", "homogeneous_floor", "is_positively_homogeneous", "local_linear", "net_function",
        "odd_floor", "odd_nonlinearity", "participation_ratio", "ray_moments", "two_layer_floor"),
        "expressivity"),
    **dict.fromkeys(("SPIKE_FACTOR", "FlowStallError", "LossSpikeWarning", "record_steps", "record_times"),
                    "dynamics"),
    **dict.fromkeys(("forward_mirrored", "loss_value", "objective", "objective_mirrored"), "dynamics.losses"),
    **dict.fromkeys(("conserved_quantities", "observe"), "dynamics.trajectory"),
    **dict.fromkeys(("UnsupportedModelError", "from_equinox", "from_state_dict"), "models"),
    **dict.fromkeys(("PRECISIONS", "current_precision", "precise"), "precision"),
    **dict.fromkeys(("load_sweep", "parse_spec", "read_spec", "run_sweep"), "experiments"),
}
"""Names that were top level before 0.2 -> the module (under ``biasfree``) they live in now.
Each still resolves here for one release, with a ``DeprecationWarning`` naming that place."""

_HINTS = {"run_sweep": "; biasfree.sweep also takes a spec file's path"}

_KEPT = {"gd": "dynamics", "gd_ensemble": "dynamics", "gd_members": "dynamics",
         "OptaxConfig": "dynamics.legacy"}
"""Names kept out of ``__all__`` that resolve here without a warning from this module (their
own deprecation is their functions')."""


@functools.cache
def _entry_points() -> dict[str, tuple[str, str | None]]:
    """Each name of the ``if TYPE_CHECKING:`` imports above -> (its module under ``biasfree``,
    its attribute there, or None for a submodule): one list, read by editors and type
    checkers as imports and by :func:`__getattr__` as this table."""
    import ast  # here, as importlib's metadata below: `import biasfree` stays a few milliseconds
    from pathlib import Path

    tree = ast.parse(Path(__file__).read_text(encoding="utf-8"))
    block = next(n for n in tree.body
                 if isinstance(n, ast.If) and getattr(n.test, "id", "") == "TYPE_CHECKING")
    return {a.asname or a.name: (a.name, None) if node.module is None else (node.module, a.name)
            for node in block.body for a in node.names}


def __getattr__(name: str):
    """An entry point, imported at its first use (:func:`_entry_points`; kept here after);
    ``__version__``, from the installed metadata; a submodule, imported; a name moved out of
    the top level (``_MOVED``), with a ``DeprecationWarning`` pointing at the caller's line;
    the three of :data:`_KEPT`, silently."""
    if name == "__version__":
        from importlib import metadata

        try:
            version = metadata.version("biasfree")
        except metadata.PackageNotFoundError:  # a source tree that was never installed
            version = "0+unknown"
        globals()[name] = version
        return version
    entry = _entry_points().get(name)
    if entry is not None:
        module, attr = entry
        home = importlib.import_module(f"{__name__}.{module}")
        if attr is None:
            obj = home
        else:  # an attribute, or a submodule not yet imported (``from .theory import margin``)
            obj = getattr(home, attr) if hasattr(home, attr) else \
                importlib.import_module(f"{home.__name__}.{attr}")
        globals()[name] = obj
        return obj
    home = _MOVED.get(name)
    if home is not None:
        warnings.warn(f"biasfree.{name} is deprecated: use biasfree.{home}.{name} (moved from the top "
                      f"level in 0.2{_HINTS.get(name, '')})", DeprecationWarning, stacklevel=2)
    else:
        home = _KEPT.get(name)
        if home is None:
            if not name.startswith("__") and importlib.util.find_spec(f"{__name__}.{name}") is not None:
                return importlib.import_module(f"{__name__}.{name}")  # bf.models, bf.precision, ...
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{home}"), name)


def __dir__() -> list[str]:
    """``__all__`` and the module's dunder names: what a user should reach for."""
    return sorted({*__all__, *(n for n in globals() if n.startswith("__") and n.endswith("__"))})
