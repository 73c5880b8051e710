"""What bias-free nets can represent: odd/even decomposition, floors, the depth-3 example.

One concept a module: :mod:`.decomposition` (a function's odd and even parts, the best
odd fit, positive homogeneity), :mod:`.floors` (the loss no odd or homogeneous function
can go below, on a distribution or a data set), :mod:`.characterise` (a target's verdict
from those floors), :mod:`.local_linear` (``f(x) = J(x) x``: Jacobians, their effective
dimension) and :mod:`.depth_separation` (the target a depth-3 bias-free net fits and a
depth-2 one cannot). The names below are the public ones::

    import biasfree as bf
    floor = bf.expressivity.dataset_floor(data.X, data.Y)
"""

from .characterise import Characterisation as Characterisation
from .characterise import characterise as characterise
from .decomposition import Decomposition as Decomposition
from .decomposition import OddFit as OddFit
from .decomposition import decompose as decompose
from .decomposition import homogeneity_gap as homogeneity_gap
from .decomposition import is_positively_homogeneous as is_positively_homogeneous
from .decomposition import net_function as net_function
from .decomposition import odd_nonlinearity as odd_nonlinearity
from .depth_separation import NetFit as NetFit
from .depth_separation import depth3_example as depth3_example
from .depth_separation import fit_net as fit_net
from .floors import DatasetFloor as DatasetFloor
from .floors import Floor as Floor
from .floors import TwoLayerFloor as TwoLayerFloor
from .floors import dataset_floor as dataset_floor
from .floors import homogeneous_floor as homogeneous_floor
from .floors import odd_floor as odd_floor
from .floors import ray_moments as ray_moments
from .floors import two_layer_floor as two_layer_floor
from .local_linear import LocalLinear as LocalLinear
from .local_linear import local_linear as local_linear
from .local_linear import participation_ratio as participation_ratio

__all__ = [
    "Characterisation", "DatasetFloor", "Decomposition", "Floor", "LocalLinear", "NetFit", "OddFit",
    "TwoLayerFloor", "characterise", "dataset_floor", "decompose", "depth3_example", "fit_net",
    "homogeneity_gap", "homogeneous_floor", "is_positively_homogeneous", "local_linear", "net_function",
    "odd_floor", "odd_nonlinearity", "participation_ratio", "ray_moments", "two_layer_floor",
]
