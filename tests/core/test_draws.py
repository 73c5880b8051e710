"""Gaussian draws cut from a flat draw (biasfree.core.draws): the numbers of
``jax.random.normal``, one compiled program per length class."""

import jax
import jax.monitoring
import numpy as np
import pytest

from biasfree.core.draws import MIN_LENGTH, flat_length, normal

# two compilations of the same element-wise formula (bits -> uniform, exact; then
# sqrt(2)·erfinv) may differ only where one contracts a multiply-add into an FMA: at most one
# rounding per Horner step of erfinv's polynomial (<= 24 terms in float64, fewer in float32)
# plus log1p and the sqrt(2) scaling, each eps relative at Horner's condition number (< 2 for
# these coefficients): <= 2 (24 + 4) eps = 56 eps, so 64 eps. A draw from a wrong counter
# differs by O(1).
ULPS = 64


def _close(a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape
    np.testing.assert_array_less(np.abs(a - b), ULPS * np.finfo(a.dtype).eps * np.abs(b)
                                 + np.finfo(a.dtype).tiny)


@pytest.mark.numerics
@pytest.mark.parametrize("shape", [(1,), (5, 3), (4, 6, 2), (65,), (0, 3)])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_normal_is_jax_random_normal(shape, dtype):
    key = jax.random.PRNGKey(3)
    _close(normal(key, shape, dtype), jax.random.normal(key, shape, dtype))
    # new-style typed keys too
    typed = jax.random.key(3)
    _close(normal(typed, shape, dtype), jax.random.normal(typed, shape, dtype))


def test_shapes_of_one_length_class_share_the_flat_draw():
    key = jax.random.PRNGKey(11)
    flat = np.asarray(normal(key, (24,)))
    # the same program (flat length 64) cut three ways: bit for bit
    np.testing.assert_array_equal(np.asarray(normal(key, (6, 4))), flat.reshape(6, 4))
    np.testing.assert_array_equal(np.asarray(normal(key, (2, 3, 4))), flat.reshape(2, 3, 4))
    np.testing.assert_array_equal(np.asarray(normal(key, (5,))), flat[:5])
    assert [flat_length(n) for n in (0, 1, 64, 65, 1000)] == [MIN_LENGTH, MIN_LENGTH, 64, 128, 1024]


def test_new_shapes_of_a_known_length_class_trace_nothing():
    key = jax.random.PRNGKey(2)
    normal(key, (9, 7))  # flat length 64, float64 (the session's default dtype)
    traced = []

    def listen(event, duration, **_):
        if event == "/jax/core/compile/jaxpr_trace_duration":
            traced.append(duration)

    jax.monitoring.register_event_duration_secs_listener(listen)
    try:
        for shape in [(3, 5), (8, 8), (2, 2, 2), (33,)]:
            normal(key, shape)
        assert traced == []
        jax.random.normal(key, (2, 1, 3, 1, 5))  # the failure mode avoided: a new shape traces
        assert traced
    finally:
        jax.monitoring.unregister_event_duration_listener(listen)


@pytest.mark.numerics
def test_under_jit_and_vmap_it_is_jax_random_normal():
    key = jax.random.PRNGKey(4)
    _close(jax.jit(lambda k: normal(k, (5, 3)))(key), normal(key, (5, 3)))
    keys = jax.random.split(key, 3)
    _close(jax.vmap(lambda k: normal(k, (4,)))(keys), jax.vmap(lambda k: jax.random.normal(k, (4,)))(keys))
