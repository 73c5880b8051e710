"""biasfree: when are bias-free ReLU networks effectively linear networks?

Networks of any depth and leaky slope α, symmetric data, gradient descent and true
gradient flow, closed-form theory, expressivity analysis and self-checking
experiments for Zhang, Saxe & Latham (TMLR 2025). biasfree computes in float64 by
default, without touching JAX's global settings (``jax_enable_x64`` stays as it was):
each public function runs under ``jax.enable_x64`` at its ``precision`` ("float64", or
"float32" on request; see :mod:`biasfree.precision`). The identities it checks hold to
round-off only in double precision.
"""

from . import margin, theory
from .analyse import Analysis, analyse, save_analysis
from .data import (
    Dataset,
    Whitened,
    abs_target,
    asymmetric_half,
    check_data,
    cross_covariance,
    gaussian_inputs,
    input_covariance,
    is_symmetric,
    label_data,
    linear_target,
    make_dataset,
    moment_data,
    product_target,
    sine_target,
    symmetrize,
    teacher_matrix,
    whiten,
    xor_target,
)
from .datasets import RealData, asymmetry, load_data, one_hot
from .depth_separation import NetFit, depth3_example, fit_net
from .ensemble import Member, Runs, gd_members
from .expressivity import (
    Decomposition,
    OddFit,
    decompose,
    homogeneity_gap,
    is_positively_homogeneous,
    net_function,
    odd_nonlinearity,
)
from .floors import (
    Characterisation,
    DatasetFloor,
    Floor,
    TwoLayerFloor,
    characterise,
    dataset_floor,
    homogeneous_floor,
    odd_floor,
    ray_moments,
    two_layer_floor,
)
from .interop import (
    Model,
    UnsupportedModelError,
    from_equinox,
    from_state_dict,
    from_torch,
    load_model,
    save_model,
)
from .losses import forward_mirrored, loss_value, objective, objective_mirrored
from .nets import (
    Layer,
    Params,
    beta_eff,
    depth,
    end_to_end_linear,
    even_part,
    forward,
    from_arrays,
    hidden,
    init_gaussian,
    init_pairs,
    init_rank_one,
    leaky_relu,
    odd_part,
    pair_up,
    scale_params,
    slope_factor,
    widths,
)
from .precision import PRECISIONS, current_precision, precise, use_precision
from .sweep import load_sweep
from .train import (
    SPIKE_FACTOR,
    DivergenceError,
    FlowConfig,
    FlowStallError,
    GDConfig,
    LossSpikeWarning,
    flow,
    flow_ensemble,
    gd,
    gd_ensemble,
    record_steps,
    record_times,
)
from .trajectory import Trajectory, conserved_quantities, observe


def _installed_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("biasfree")
    except PackageNotFoundError:  # a source tree that was never installed
        return "0+unknown"


__version__ = _installed_version()

__all__ = [
    "abs_target", "analyse", "Analysis", "asymmetric_half", "asymmetry", "beta_eff", "Characterisation",
    "characterise", "check_data", "conserved_quantities", "cross_covariance", "current_precision",
    "Dataset", "dataset_floor", "DatasetFloor", "decompose", "Decomposition", "depth", "depth3_example",
    "DivergenceError",
    "FlowStallError", "LossSpikeWarning", "SPIKE_FACTOR", "end_to_end_linear", "even_part", "fit_net",
    "Floor", "flow", "flow_ensemble",
    "FlowConfig", "forward", "forward_mirrored", "from_arrays", "from_equinox", "from_state_dict",
    "from_torch", "gaussian_inputs", "gd", "gd_ensemble", "gd_members", "GDConfig", "hidden",
    "homogeneity_gap", "homogeneous_floor", "init_gaussian", "init_pairs", "init_rank_one",
    "input_covariance", "is_positively_homogeneous", "is_symmetric", "label_data", "Layer",
    "leaky_relu", "linear_target", "load_data", "load_model", "load_sweep", "loss_value",
    "make_dataset", "margin", "Member", "Model", "moment_data", "net_function", "NetFit", "objective",
    "objective_mirrored", "observe", "odd_floor", "odd_nonlinearity", "odd_part", "OddFit", "one_hot",
    "pair_up", "Params", "precise", "PRECISIONS", "product_target", "ray_moments", "RealData",
    "record_steps", "record_times", "Runs", "save_analysis", "save_model", "scale_params",
    "sine_target", "slope_factor", "symmetrize", "teacher_matrix", "theory", "Trajectory",
    "two_layer_floor", "TwoLayerFloor", "UnsupportedModelError", "use_precision", "whiten", "Whitened",
    "widths", "xor_target",
]
__all__ += ["__version__"]
