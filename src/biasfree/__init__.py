"""biasfree: when are bias-free ReLU networks effectively linear networks?

Networks of any depth and leaky slope α, symmetric data, gradient descent and true
gradient flow, closed-form theory, expressivity analysis and self-checking
experiments for Zhang, Saxe & Latham (TMLR 2025). biasfree computes in float64 by
default, without touching JAX's global settings (``jax_enable_x64`` stays as it was):
each public function runs under ``jax.enable_x64`` at its ``precision`` ("float64", or
"float32" on request; see :mod:`biasfree.precision`). The identities it checks hold to
round-off only in double precision.
"""

from . import theory
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
    product_target,
    sine_target,
    symmetrize,
    teacher_matrix,
    whiten,
    xor_target,
)
from .datasets import RealData, asymmetry, load_data, one_hot
from .depth_separation import NetFit, depth3_example, fit_net
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
    DivergenceError,
    FlowConfig,
    GDConfig,
    flow,
    flow_ensemble,
    gd,
    gd_ensemble,
    record_steps,
    record_times,
)
from .trajectory import Trajectory, conserved_quantities, observe

__version__ = "0.1.0"
