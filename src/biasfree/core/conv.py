"""Convolutional layers in the net family (docs/theory.md §7): a 1-D or 2-D convolution
and a global-average-pooled dense readout, both linear maps on flat hidden states.

Hidden states stay flat, (N, C·∏spatial), in channel-major order: entry ``c·S + s`` is
channel c at spatial position s (row-major over the spatial axes, S = ∏spatial), exactly
``torch.nn.Flatten`` of a (C, H, W) array. So a conv layer composes with dense layers: a
dense readout after a conv layer is "flatten, then dense".

:class:`Conv`, kernel ``K`` (C_out, C_in, k_1[, k_2]), bias ``b`` (C_out,) or ``None``:

    z[o, s] = Σ_{i, u} K[o, i, u] · h[i, s + u − pad] (+ b[o]),

a cross-correlation (no kernel flip, as ``torch.nn.Conv1d/2d``), stride 1; ``padding``
"same" pads ``pad = (k − 1)//2`` zeros before and ``k − 1 − pad`` after each spatial axis
(torch's and XLA's rule for even k too) so the output has the input's spatial shape;
"valid" pads none, output size ``n − k + 1``. Its :attr:`~Conv.matrix` is the dense
Toeplitz operator A (n_out, n_in), so every dense identity (twin map, ``end_to_end_linear``,
odd part, ranks) applies through it; :meth:`~Conv.apply` never builds it.

:class:`PooledDense`, weight ``V`` (n_out, C), is global average pooling followed by a
dense map: ``z = V · mean_s h[:, s] (+ b)``, matrix ``V ⊗ 1ᵀ/S``. Pooling is folded into
the layer, so no σ_α sits between pooling and readout (σ_α of a mean is not the mean of
σ_α): use it as the readout of a conv net.

Both are :class:`~.layers.WeightLayer` s (frozen dataclass pytrees): the arrays are leaves,
the shapes and padding static, so ``jit``, ``vmap`` and ``grad`` see only the weights; their
weights are in torch's layout, so scaling and channel pairing are the dense layer's.
"""

from __future__ import annotations

import itertools
import math
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from .. import _validate as validate
from .layers import Layer, WeightLayer, layer_type, static

Array = jax.Array
PADDINGS = ("same", "valid")


def spatial_shape(in_shape) -> tuple[int, ...]:
    """``in_shape`` as a tuple of 1 or 2 positive ints (TypeError / ValueError otherwise)."""
    if isinstance(in_shape, int | np.integer) and not isinstance(in_shape, bool):
        in_shape = (in_shape,)
    if not isinstance(in_shape, tuple | list) or len(in_shape) not in (1, 2):
        raise ValueError(f"in_shape={in_shape!r}: give the input's spatial shape, (length,) for a 1-D "
                         "or (height, width) for a 2-D convolution (Conv1d / Conv2d)")
    return tuple(validate.integer("in_shape", n, 1) for n in in_shape)


def _patches(x, kernel_shape, padding):
    """im2col: (N, C_in, *in_shape) -> (N, ∏out_shape, C_in·∏k), row s of point n holding
    ``x_pad[i, s + u]`` at column (i, u) (u over the kernel axes, row-major): the order of
    ``K.reshape(C_out, -1)``. ∏k shifted slices of the (zero-padded) input, stacked; every
    entry is an input entry or 0, exactly."""
    if padding == "same":
        x = jnp.pad(x, [(0, 0), (0, 0)] + [((k - 1) // 2, k - 1 - (k - 1) // 2) for k in kernel_shape])
    out = tuple(n - k + 1 for n, k in zip(x.shape[2:], kernel_shape, strict=True))
    cols = [x[(..., *(slice(u, u + n) for u, n in zip(offset, out, strict=True)))]
            for offset in itertools.product(*(range(k) for k in kernel_shape))]
    P = jnp.moveaxis(jnp.stack(cols, axis=-1), 1, -2)  # (N, *out, C_in, taps)
    return jnp.reshape(P, (x.shape[0], math.prod(out), -1))


@partial(jax.jit, static_argnames=("in_shape", "padding"))
def _conv_flat(H, K, in_shape, padding):
    """Flat (N, C_in·∏in_shape) -> flat (N, C_out·∏out_shape) cross-correlation with ``K``, as
    im2col and one GEMM: patches P (N, S, C_in·∏k) of the input, ``Z[n] = K_flat · P[n]ᵀ``.

    On XLA:CPU at float64 this trains 5-8x faster than ``lax.conv_general_dilated`` (NCHW or
    NHWC), on inputs and on hidden states alike; on the loop-invariant inputs of a training
    run XLA computes the patches once, before the loop, and with positions as rows they are
    already in the layout the GEMM reads (docs/performance.md, "Convolutions")."""
    x = jnp.reshape(H, (H.shape[0], K.shape[1]) + tuple(in_shape))
    P = _patches(x, K.shape[2:], padding)
    z = jnp.einsum("nsj,oj->nos", P, jnp.reshape(K, (K.shape[0], -1)), precision=jax.lax.Precision.HIGHEST)
    return jnp.reshape(z, (H.shape[0], -1))


@partial(jax.jit, static_argnames=("in_shape", "padding", "batch_ndim"))
def _toeplitz(K, in_shape, padding, batch_ndim):
    """The (n_out, n_in) matrix of the convolution: it applied to the identity basis."""
    def one(K):
        return _conv_flat(jnp.eye(K.shape[1] * math.prod(in_shape), dtype=K.dtype), K, in_shape, padding).T
    for _ in range(batch_ndim):
        one = jax.vmap(one)
    return one(K)


@layer_type
class Conv(WeightLayer):
    """Stride-1 convolution (module doc), a layer of the net family.

    ``K`` kernel (C_out, C_in, k) for 1-D or (C_out, C_in, k_1, k_2) for 2-D (any leading
    ensemble axes, as from :meth:`scaled` with a (K,) factor); ``b`` per-output-channel
    bias (C_out,) or ``None`` (bias-free); ``in_shape`` the input's spatial shape,
    (n,) or (H, W); ``padding`` "same" or "valid". Inputs and outputs are flat,
    channel-major: (N, C_in·∏in_shape) -> (N, C_out·∏out_shape).
    """

    K: Array
    b: Array | None = None
    in_shape: tuple[int, ...] = static(())
    padding: str = static("same")

    def __post_init__(self):
        object.__setattr__(self, "in_shape", spatial_shape(self.in_shape))
        validate.choice("padding", self.padding, PADDINGS)

    # --- shapes (static: no array is touched) ---
    kernel_shape = property(lambda self: tuple(int(k) for k in np.shape(self.K)[-len(self.in_shape):]))
    batch_ndim = property(lambda self: np.ndim(self.K) - 2 - len(self.in_shape),
                          doc="Number of leading ensemble axes of ``K``.")
    c_in = property(lambda self: int(np.shape(self.K)[-1 - len(self.in_shape)]))
    c_out = property(lambda self: int(np.shape(self.K)[-2 - len(self.in_shape)]))
    in_layout = property(lambda self: (self.c_in,) + self.in_shape, doc="``(C_in, *in_shape)``.")
    out_layout = property(lambda self: (self.c_out,) + self.out_shape, doc="``(C_out, *out_shape)``.")
    n_in = property(lambda self: self.c_in * math.prod(self.in_shape))
    n_out = property(lambda self: self.c_out * math.prod(self.out_shape))

    @property
    def out_shape(self) -> tuple[int, ...]:
        """Output spatial shape: ``in_shape`` ("same") or ``n − k + 1`` per axis ("valid")."""
        if self.padding == "same":
            return self.in_shape
        return tuple(n - k + 1 for n, k in zip(self.in_shape, self.kernel_shape, strict=True))

    # --- the linear map ---
    def linear(self, H: Array) -> Array:
        """``H Aᵀ`` without the bias: (N, n_in) -> (N, n_out), by im2col and one GEMM
        (``_conv_flat``; one member: ``K`` without ensemble axes)."""
        return _conv_flat(H, self.K, self.in_shape, self.padding)

    @property
    def matrix(self) -> Array:
        """The dense Toeplitz operator A (n_out, n_in) (leading ensemble axes kept): the
        convolution of the identity basis, so each entry is one kernel weight or 0, exactly."""
        return _toeplitz(jnp.asarray(self.K), self.in_shape, self.padding, self.batch_ndim)

    @property
    def bias(self) -> Array | None:
        """The bias as an (n_out,) vector, ``b[o]`` at every position of channel o (or None)."""
        if self.b is None:
            return None
        return jnp.repeat(jnp.asarray(self.b), math.prod(self.out_shape), axis=-1)

    def check(self, name: str) -> None:
        """Kernel axes for ``in_shape``, an output position, one bias per output channel."""
        nd = len(self.in_shape)
        if np.ndim(self.K) != 2 + nd:
            raise ValueError(f"{name}.K must be (C_out, C_in{', k' * nd}) for a {nd}-D convolution on "
                             f"in_shape={self.in_shape}, got shape {np.shape(self.K)}")
        if self.padding == "valid" and any(k > n for k, n in zip(self.kernel_shape, self.in_shape,
                                                                  strict=True)):
            raise ValueError(f"{name}: kernel {self.kernel_shape} is larger than its input "
                             f"{self.in_shape} with padding='valid' (no output position); use a "
                             "smaller kernel or padding='same'")
        if self.b is not None and np.shape(self.b) != (self.c_out,):
            raise ValueError(f"{name}.b must be one bias per output channel, shape ({self.c_out},), "
                             f"got {np.shape(self.b)}")


@layer_type
class PooledDense(WeightLayer):
    """Global average pooling over the spatial positions, then a dense map (module doc).

    ``V`` (n_out, C) (leading ensemble axes allowed), ``b`` (n_out,) or ``None``,
    ``in_shape`` the spatial shape of the C input channels:
    ``z_j = Σ_c V[j, c] · (1/S) Σ_s h[c·S + s] + b_j``, S = ∏in_shape.
    """

    V: Array
    b: Array | None = None
    in_shape: tuple[int, ...] = static(())

    def __post_init__(self):
        object.__setattr__(self, "in_shape", spatial_shape(self.in_shape))

    in_layout = property(lambda self: (int(np.shape(self.V)[-1]),) + self.in_shape, doc="``(C, *in_shape)``.")
    n_in = property(lambda self: math.prod(self.in_layout))
    n_out = property(lambda self: int(np.shape(self.V)[-2]))

    def linear(self, H: Array) -> Array:
        S = math.prod(self.in_shape)
        return jnp.mean(jnp.reshape(H, (H.shape[0], -1, S)), axis=-1) @ self.V.T

    @property
    def matrix(self) -> Array:
        """``V ⊗ 1ᵀ/S`` (n_out, C·S): each V[j, c] spread over channel c's S positions."""
        S = math.prod(self.in_shape)
        return jnp.repeat(jnp.asarray(self.V), S, axis=-1) / S

    def paired(self, outputs: bool, inputs: bool) -> PooledDense:
        """Input channels doubled as ``[V, −V]`` (a readout; ``outputs`` is refused)."""
        if outputs:
            raise ValueError("pair_up: a PooledDense layer can only be the readout (the last layer)")
        return super().paired(False, inputs)

    def check(self, name: str) -> None:
        if np.ndim(self.V) != 2:
            raise ValueError(f"{name}.V must be (n_out, C), got shape {np.shape(self.V)}")


KINDS = {cls.__name__: cls for cls in (Layer, Conv, PooledDense)}
"""The layer types a weight file may name (:meth:`~.layers.WeightLayer.spec`)."""


def from_spec(spec: dict, weight) -> WeightLayer:
    """The bias-free layer that ``spec`` (as :meth:`~.layers.WeightLayer.spec` gives it:
    ``{"type": "Conv", "in_shape": [8, 8], "padding": "same"}``, ...) describes, with ``weight``;
    other keys of ``spec`` are ignored."""
    cls = KINDS.get(spec.get("type"))
    if cls is None:
        raise ValueError(f"unknown layer type {spec.get('type')!r}: name one of {', '.join(KINDS)}")
    shape = {k: tuple(spec[k]) if isinstance(spec[k], list) else spec[k] for k in cls._static if k in spec}
    return cls(weight, None, **shape)


def is_conv(params) -> bool:
    """True when some layer of ``params`` shares weights across positions (:class:`Conv`,
    :class:`PooledDense`): the dense-only results (§6.4's growth interval) do not apply."""
    return any(isinstance(layer, Conv | PooledDense) for layer in params)


def drop_zero_biases(params) -> tuple[tuple, int]:
    """``params`` with every bias that is exactly zero removed (such a layer computes the
    bias-free map), and how many were removed. Nonzero biases are kept."""
    zero = [layer.bias is not None and not np.any(np.asarray(layer.bias)) for layer in params]
    return tuple(la.without_bias() if z else la for la, z in zip(params, zero, strict=True)), sum(zero)
