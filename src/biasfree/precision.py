"""Precision: float64 by default, float32 on request, never a global JAX setting.

The public home of :mod:`biasfree.core.precision` (re-exported; its docstring has the
whole story). :func:`use_precision` picks the precision for a block of calls,
:func:`current_precision` says which one is in force, :data:`PRECISIONS` lists them and
:func:`precise` wraps a function of your own the way biasfree's public functions are::

    import biasfree as bf
    with bf.use_precision("float32"):
        bf.precision.current_precision()  # "float32"
"""

from .core.precision import PRECISIONS as PRECISIONS
from .core.precision import current_precision as current_precision
from .core.precision import precise as precise
from .core.precision import use_precision as use_precision

__all__ = ["PRECISIONS", "current_precision", "precise", "use_precision"]
