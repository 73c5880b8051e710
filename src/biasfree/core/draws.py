"""Gaussian draws that share one compiled program across shapes.

``jax.random.normal(key, shape)`` compiles a program per shape (about 0.1 s each: threefry
and the inverse error function), and a small run draws many shapes (data, each layer's
weights, noise). With JAX's partitionable threefry (``jax_threefry_partitionable``, its
default), entry i of a draw (row-major) depends on the key and i only, so a flat draw of
any length n ≥ size holds the same numbers in its first ``size`` entries. :func:`normal`
draws the next power-of-two length (at least 64) and cuts it to shape: one program per
length class instead of one per shape, and the numbers of ``jax.random.normal``
(tests/core/test_draws.py). The cut is made on the host, a round trip that is cheap for the
small draws whose compilation dominates; a draw of more than MAX_SIZE numbers, whose own
compilation is a small part of its cost, is ``jax.random.normal`` itself.
"""

from __future__ import annotations

import math

import jax
import numpy as np

from .. import _validate as validate

MIN_LENGTH = 64
MAX_SIZE = 1 << 20  # 8 MiB of float64


def flat_length(size: int) -> int:
    """The length drawn for ``size`` numbers: the next power of two, at least MIN_LENGTH."""
    return max(MIN_LENGTH, 1 << max(size - 1, 0).bit_length())


def normal(key, shape: tuple[int, ...], dtype=float) -> jax.Array:
    """``z ~ N(0, I)`` of ``shape``: the numbers of ``jax.random.normal(key, shape, dtype)``
    (the same counters and formula, compiled for another length, so equal up to the last bits
    that two compilations may round differently; bit for bit on this machine's XLA).

    A cut :func:`flat_length` draw (module doc); inside a caller's ``jit`` or ``vmap`` (``key``
    traced), with non-partitionable threefry or for more than MAX_SIZE numbers,
    ``jax.random.normal`` itself.
    """
    shape = tuple(int(s) for s in shape)
    size = math.prod(shape)
    if validate.traced(key) or not jax.config.jax_threefry_partitionable or size > MAX_SIZE:
        return jax.random.normal(key, shape, dtype)
    flat = np.asarray(jax.random.normal(key, (flat_length(size),), dtype))
    return jax.device_put(flat[:size].reshape(shape))  # jnp.asarray would compile a copy per shape
