"""The layer protocol, the one linear-twin map, the one symmetry measure, the one label check."""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import biasfree as bf
from biasfree import _validate as validate
from biasfree.core.conv import drop_zero_biases, from_spec
from biasfree.core.layers import AbstractLayer, check_net, is_dense, scale_params
from biasfree.core.nets import effective_rank
from biasfree.core.symmetry import asymmetry, is_symmetric, mirror_violation
from biasfree.core.twin import linear_twin, slope_factor, unchecked_slope_factor

_rng = np.random.default_rng(3)
NET = (bf.nets.Layer(_rng.normal(size=(4, 3)), _rng.normal(size=4)), bf.nets.Layer(_rng.normal(size=(2, 4))))


def test_a_dense_layer_is_a_layer_by_type_and_its_matrix_is_w():
    layer = NET[0]
    assert isinstance(layer, AbstractLayer) and layer.matrix is layer.W and layer.bias is layer.b
    assert (layer.n_in, layer.n_out, layer.has_bias, NET[1].has_bias) == (3, 4, True, False)
    H = _rng.normal(size=(5, 3))
    # the same two operations in the same order: bitwise
    np.testing.assert_array_equal(layer.apply(H), H @ layer.W.T + layer.b)


def test_an_object_with_a_w_attribute_is_not_a_layer():
    class Duck:
        W, b = np.eye(2), None

    with pytest.raises(TypeError, match="params must be a non-empty tuple of biasfree Layer"):
        check_net((Duck(), Duck()))


def test_a_layer_built_from_a_list_is_refused_at_the_boundary_with_the_fix():
    """check_net once read the list's numbers as leaves and passed it; forward then failed
    inside with "'list' object has no attribute 'T'"."""
    net = (bf.nets.Layer([[1.0, 2.0, 3.0]] * 4), bf.nets.Layer(np.ones((2, 4))))
    with pytest.raises(TypeError, match=r"params\[0\]\.W is a list: build the layer from an array"):
        bf.forward(net, np.ones((5, 3)), 0.3)


def test_check_net_returns_the_matrices_and_checks_depth_bias_and_sizes():
    Ws = check_net(NET)
    assert [W.shape for W in Ws] == [(4, 3), (2, 4)]
    for kwargs, message in [(dict(depth=3), "exactly 3"), (dict(bias_free=True), "has biases"),
                            (dict(d=5), "dimension 3 but the data have d = 5"),
                            (dict(p_out=1), "2 outputs but the targets have p = 1")]:
        with pytest.raises(ValueError, match=message):
            check_net(NET, **kwargs)


def test_the_linear_twin_scales_every_weight_by_root_c_one_slope_or_many():
    alphas = np.array([0.0, 0.3, 1.0])
    one = linear_twin(NET, 0.3)
    many = linear_twin(NET, alphas)
    c = (1 + 0.3) / 2
    for layer, twin in zip(NET, one, strict=True):  # √c·W, one multiplication: exact to 1 ulp of it
        np.testing.assert_array_equal(twin.W, np.sqrt(c) * layer.W)
    for k, a in enumerate(alphas):  # member k of the batch is the single-slope twin, bitwise
        for single, batched in zip(linear_twin(NET, a), many, strict=True):
            np.testing.assert_array_equal(batched.W[k], single.W)
            np.testing.assert_array_equal(batched.b[k] if single.b is not None else 0,
                                          single.b if single.b is not None else 0)
    assert slope_factor(0.0) == 0.5 and slope_factor(1.0) == 1.0
    # a batch of nets, one per slope, is scaled member by member
    batch = scale_params(tuple(bf.nets.Layer(np.stack([la.W] * 3)) for la in NET),
                         np.sqrt(slope_factor(alphas)))
    np.testing.assert_array_equal(batch[1].W, many[1].W)
    with pytest.raises(ValueError, match="outside"):
        linear_twin(NET, 1.5)


def test_the_slope_factor_is_one_formula_checked_or_not():
    """c = (1 + α)/2 is written once (core.twin.unchecked_slope_factor): the checked
    slope_factor and the analyse internals that must not check α again (function_now's
    measure_net, measure_step.schedule; tests/dynamics/test_checks_once.py) read it there."""
    from biasfree.analysis import function_now, measure_step

    alphas = np.array([0.0, 0.01, 0.3, 1.0])
    np.testing.assert_array_equal(unchecked_slope_factor(alphas), slope_factor(alphas))  # one expression
    # exact: one addition and one halving, the same roundings as the formula written here
    assert [unchecked_slope_factor(a) for a in alphas] == [(1 + a) / 2 for a in alphas]
    for module in (measure_step, function_now):  # the analyse internals use the public unchecked name
        assert module.unchecked_slope_factor is unchecked_slope_factor
    # control: unchecked means no check, so a slope outside [0, 1] passes here and is refused there
    assert unchecked_slope_factor(1.5) == 1.25
    with pytest.raises(ValueError, match="outside"):
        slope_factor(1.5)


def test_effective_rank_of_the_zero_matrix_is_zero():
    assert effective_rank([0.0, 0.0]) == 0.0
    np.testing.assert_array_equal(effective_rank([[0.0, 0.0], [1.0, 0.0]]), [0.0, 1.0])


def test_the_symmetry_measures_agree_on_symmetric_and_asymmetric_sets():
    X0 = _rng.normal(size=(6, 3))
    X = np.vstack([X0, -X0])
    assert mirror_violation(X) == 0.0 and asymmetry(X) == 0.0 and is_symmetric(X)
    Xa = np.vstack([X, X0[:1]])  # one point without a second mirror
    assert mirror_violation(Xa) > 0.1 and not is_symmetric(Xa)
    noisy = X + 1e-6 * _rng.normal(size=X.shape)
    mv = mirror_violation(noisy)
    scale = np.max(np.linalg.norm(noisy, axis=1))
    # asymmetry is a mean of squared nearest-mirror distances, each at most the violation
    # (relative to the mean power, hence <= N (mv/scale)^2): the bound analyse relies on
    assert 0 < asymmetry(noisy) <= noisy.shape[0] * (mv / scale) ** 2


def test_the_label_check_names_the_argument_and_the_fix():
    validate.labels("y", np.array([1.0, -1.0]))
    message = r"^y: a margin needs labels y = ±1 \(each -1 or \+1\), but y holds e.g. \[0.0\].*2y - 1"
    with pytest.raises(ValueError, match=message):
        validate.labels("y", np.array([1.0, 0.0]), "a margin", "")


def test_every_layer_type_flattens_w_then_b_and_derives_the_rest_from_its_weight():
    rng = np.random.default_rng(4)
    dense = bf.nets.Layer(rng.normal(size=(3, 2)), rng.normal(size=3))
    conv = bf.nets.Conv(rng.normal(size=(2, 1, 3)), np.zeros(2), (5,), "valid")
    pool = bf.nets.PooledDense(rng.normal(size=(1, 2)), None, (3,))
    paths = [jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_leaves_with_path((dense, conv, pool))]
    assert paths == ["[0].W", "[0].b", "[1].K", "[1].b", "[2].V"]
    for layer in (dense, conv, pool):
        assert isinstance(layer, AbstractLayer) and layer.weight is jax.tree_util.tree_leaves(layer)[0]
        back = from_spec(json.loads(json.dumps(layer.spec())), layer.weight)  # a weight file's round trip
        assert jax.tree_util.tree_structure(back) == jax.tree_util.tree_structure(layer.without_bias())
        assert back.weight is layer.weight and back.bias is None
        w2 = 2 * layer.weight
        moved = layer.with_weight(w2)
        assert moved.weight is w2 and moved.b is layer.b and moved.spec() == layer.spec()
    assert [la.spec() for la in (dense, conv, pool)] == [
        {"type": "Layer"}, {"type": "Conv", "in_shape": [5], "padding": "valid"},
        {"type": "PooledDense", "in_shape": [3]}]
    with pytest.raises(ValueError, match="unknown layer type 'Dense'"):
        from_spec({"type": "Dense"}, dense.W)
    # the zero conv bias is dropped, the nonzero dense one kept
    kept, dropped = drop_zero_biases((dense, conv, pool))
    assert dropped == 1 and kept[0] is dense and kept[1].b is None and kept[1].K is conv.K
    # a middle dense layer pairs as the block [[W, −W], [−W, W]]: copies and sign flips, bitwise
    np.testing.assert_array_equal(dense.paired(outputs=True, inputs=True).W,
                                  jnp.block([[dense.W, -dense.W], [-dense.W, dense.W]]))
    assert is_dense((dense, dense)) and not is_dense((conv, dense)) and not is_dense(dense)
