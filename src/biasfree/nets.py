"""Networks: the bias-free (leaky) ReLU family, its inits and its linear twin.

The public home of :mod:`biasfree.core`'s network modules (this module re-exports them;
the code stays there). A net is a plain pytree, a tuple of layers (:class:`Layer`,
dense; :class:`Conv` and :class:`PooledDense`, convolutional), evaluated by
:func:`forward` at a leaky slope α (0 ReLU, 1 linear). Inits: :func:`init_gaussian`,
:func:`init_pairs` (each unit with its negation, so the net starts as a linear one),
:func:`init_rank_one`, :func:`init_conv`, and :func:`from_arrays` for weights you have.
What a net computes: :func:`odd_part` and :func:`even_part`, :func:`beta_eff` (its
end-to-end linear map on the data), :func:`linear_twin` (the linear net whose
gradient flow a pair-init leaky net follows exactly, time scaled by
:func:`slope_factor`) and :func:`effective_units` (how many units a solution uses,
docs/theory.md §11.1). :func:`with_activation` makes the quadratic net σ(z) = z² (§11.2)::

    import jax, biasfree as bf
    net = bf.nets.init_pairs(jax.random.PRNGKey(0), (3, 8, 1), 0.1)
    bf.nets.forward(net, X, alpha=0.2)
"""

from .core.conv import Conv as Conv
from .core.conv import PooledDense as PooledDense
from .core.inits import from_arrays as from_arrays
from .core.inits import init_conv as init_conv
from .core.inits import init_gaussian as init_gaussian
from .core.inits import init_pairs as init_pairs
from .core.inits import init_rank_one as init_rank_one
from .core.inits import pair_up as pair_up
from .core.layers import Layer as Layer
from .core.layers import Params as Params
from .core.layers import scale_params as scale_params
from .core.nets import beta_eff as beta_eff
from .core.nets import depth as depth
from .core.nets import end_to_end_linear as end_to_end_linear
from .core.nets import even_part as even_part
from .core.nets import forward as forward
from .core.nets import hidden as hidden
from .core.nets import leaky_relu as leaky_relu
from .core.nets import odd_part as odd_part
from .core.nets import widths as widths
from .core.nets import with_activation as with_activation
from .core.twin import linear_twin as linear_twin
from .core.twin import slope_factor as slope_factor
from .core.units import EffectiveUnits as EffectiveUnits
from .core.units import effective_units as effective_units

__all__ = [
    "Conv", "EffectiveUnits", "Layer", "Params", "PooledDense", "beta_eff", "depth", "effective_units",
    "end_to_end_linear", "even_part", "forward", "from_arrays", "hidden", "init_conv", "init_gaussian",
    "init_pairs", "init_rank_one", "leaky_relu", "linear_twin", "odd_part", "pair_up", "scale_params",
    "slope_factor", "widths", "with_activation",
]
