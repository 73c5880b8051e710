"""biasfree: when are bias-free ReLU networks effectively linear networks?

Networks of any depth and leaky slope α, symmetric data, gradient descent and true
gradient flow, closed-form theory, expressivity analysis and self-checking
experiments for Zhang, Saxe & Latham (TMLR 2025). biasfree computes in float64 by
default, without touching JAX's global settings (``jax_enable_x64`` stays as it was):
each public function runs under ``jax.enable_x64`` at its ``precision`` ("float64", or
"float32" on request; see :mod:`biasfree.core.precision`). The identities it checks hold to
round-off only in double precision.

The package's top level is lazy (PEP 562): ``import biasfree`` loads no JAX; each public
name below imports its module on first use (``bf.gd``, ``from biasfree import gd``), so
the command line can refuse bad arguments before the engine loads. ``__all__`` and
``dir(biasfree)`` list every public name, loaded or not.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import sys
import types

_SUBMODULES = {"margin": "theory.margin", "theory": "theory"}
"""Public submodules (name -> module), reached as ``biasfree.theory``, ``biasfree.margin``."""

_EXPORTS: dict[str, tuple[str, ...]] = {
    "analysis.analyse": ("analyse",),
    "analysis.report": ("Analysis", "save_analysis"),
    "core.data": ("Dataset", "asymmetric_half", "check_data", "gaussian_inputs", "label_data",
        "symmetrize"),
    "core.moments": ("Whitened", "cross_covariance", "input_covariance", "moment_data", "whiten"),
    "core.targets": ("abs_target", "linear_target", "make_dataset", "product_target", "sine_target",
        "teacher_matrix", "xor_target"),
    "core.symmetry": ("asymmetry", "is_symmetric"),
    "core.real_data": ("RealData", "load_data", "one_hot"),
    "expressivity.depth_separation": ("NetFit", "depth3_example", "fit_net"),
    "dynamics.ensemble": ("Member", "Runs"),
    "dynamics.legacy": ("gd", "gd_ensemble", "gd_members"),
    "expressivity.decomposition": ("Decomposition", "OddFit", "decompose", "homogeneity_gap",
        "is_positively_homogeneous", "net_function", "odd_nonlinearity"),
    "expressivity.characterise": ("Characterisation", "characterise"),
    "expressivity.local_linear": ("LocalLinear", "local_linear", "participation_ratio"),
    "expressivity.floors": ("DatasetFloor", "Floor", "TwoLayerFloor", "dataset_floor", "homogeneous_floor",
        "odd_floor", "ray_moments", "two_layer_floor"),
    "analysis.interop": ("Model", "UnsupportedModelError", "from_equinox", "from_state_dict", "from_torch",
        "load_model", "save_model"),
    "dynamics.losses": ("forward_mirrored", "loss_value", "objective", "objective_mirrored"),
    "core.layers": ("Layer", "Params", "scale_params"),
    "core.inits": ("from_arrays", "init_conv", "init_gaussian", "init_pairs", "init_rank_one", "pair_up"),
    "core.conv": ("Conv", "PooledDense"),
    "core.nets": ("beta_eff", "depth", "end_to_end_linear", "even_part", "forward", "hidden", "leaky_relu",
        "odd_part", "widths"),
    "core.twin": ("linear_twin", "slope_factor"),
    "core.precision": ("PRECISIONS", "current_precision", "precise", "use_precision"),
    "app.sweep": ("load_sweep", "parse_spec", "read_spec", "run_sweep"),
    "dynamics.batching": ("flow_ensemble",),
    "dynamics.diagnosis": ("SPIKE_FACTOR", "DivergenceError", "FlowStallError", "LossSpikeWarning"),
    "dynamics.flow": ("FlowConfig", "flow", "record_times"),
    "dynamics.trainer": ("GDConfig", "TrainConfig", "record_steps", "train"),
    "dynamics.optimiser_twin": ("optimiser_twin",),
    "analysis.optax_training": ("OptaxConfig",),
    "dynamics.trajectory": ("Trajectory", "conserved_quantities", "observe"),
}
"""Module (under ``biasfree``) -> the public names it defines."""

_HOME = {name: mod for mod, names in _EXPORTS.items() for name in names}


def __getattr__(name: str):
    """Import the module that defines ``name`` and bind every public name of it here."""
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{_SUBMODULES[name]}")
    mod = _HOME.get(name)
    if mod is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = importlib.import_module(f"{__name__}.{mod}")
    globals().update({n: getattr(module, n) for n in _EXPORTS[mod]})
    return globals()[name]


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


class _Package(types.ModuleType):
    """Keeps a public function bound over the submodule of the same name
    (``biasfree.analyse`` is the function; the module stays ``sys.modules["biasfree.analyse"]``):
    importing a submodule sets it as an attribute of the package, which would shadow the
    function once the module loads."""

    def __setattr__(self, name: str, value) -> None:
        if isinstance(value, types.ModuleType) and name in _HOME:
            return  # __getattr__ binds the function on first use
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


try:
    __version__ = importlib.metadata.version("biasfree")
except importlib.metadata.PackageNotFoundError:  # a source tree that was never installed
    __version__ = "0+unknown"

__all__ = [*_HOME, *_SUBMODULES, "__version__"]  # every name of _EXPORTS and _SUBMODULES
