"""Data: symmetric data sets, targets, the symmetry measure, moments and real data.

The public home of :mod:`biasfree.core`'s data modules (this module re-exports them;
the code stays there): a :class:`Dataset` ``(X, Y)`` with one example a row; synthetic
inputs and labels (:func:`gaussian_inputs`, :func:`make_dataset` with a ``*_target``);
making a set symmetric (:func:`symmetrize`, every ``x`` with ``-x``) and measuring how far
it is (:func:`asymmetry`); the moments a linear net sees (:func:`whiten`,
:func:`input_covariance`, :func:`cross_covariance`); and real data from a file or a
bundled set (:func:`load_data`)::

    import biasfree as bf
    data = bf.data.make_dataset(jax.random.PRNGKey(0), bf.data.xor_target(), n=100, d=2)
    bf.data.asymmetry(data.X, data.Y)  # 0.0: make_dataset adds each point's mirror
"""

from .core.data import Dataset as Dataset
from .core.data import asymmetric_half as asymmetric_half
from .core.data import check_data as check_data
from .core.data import gaussian_inputs as gaussian_inputs
from .core.data import label_data as label_data
from .core.data import symmetrize as symmetrize
from .core.moments import Whitened as Whitened
from .core.moments import cross_covariance as cross_covariance
from .core.moments import input_covariance as input_covariance
from .core.moments import moment_data as moment_data
from .core.moments import whiten as whiten
from .core.real_data import RealData as RealData
from .core.real_data import load_data as load_data
from .core.real_data import one_hot as one_hot
from .core.symmetry import asymmetry as asymmetry
from .core.symmetry import is_symmetric as is_symmetric
from .core.targets import abs_target as abs_target
from .core.targets import linear_target as linear_target
from .core.targets import make_dataset as make_dataset
from .core.targets import product_target as product_target
from .core.targets import sine_target as sine_target
from .core.targets import teacher_matrix as teacher_matrix
from .core.targets import xor_target as xor_target

__all__ = [
    "Dataset", "RealData", "Whitened", "abs_target", "asymmetric_half", "asymmetry", "check_data",
    "cross_covariance", "gaussian_inputs", "input_covariance", "is_symmetric", "label_data",
    "linear_target", "load_data", "make_dataset", "moment_data", "one_hot", "product_target",
    "sine_target", "symmetrize", "teacher_matrix", "whiten", "xor_target",
]
