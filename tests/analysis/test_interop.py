"""Models in (docs/theory.md §0 conventions): PyTorch, equinox, state dicts and weight files
convert to the same function to round-off in float64, read α from the model, and
anything outside the bias-free (leaky) ReLU family is refused naming the layer."""

import functools

import equinox as eqx
import jax
import numpy as np
import pytest
from roundoff import EPS, forward_gap
from safetensors.numpy import save_file

import biasfree as bf

pytestmark = pytest.mark.numerics  # round-off bounds: make test-portable reruns them


def _X(d, n=40, seed=0):
    return np.random.default_rng(seed).normal(size=(n, d))


# ---------------------------------------------------------------- equinox


@pytest.mark.parametrize("act, alpha", [
    (jax.nn.relu, 0.0),
    (jax.nn.leaky_relu, 0.01),  # jax's default negative_slope
    (functools.partial(jax.nn.leaky_relu, negative_slope=0.3), 0.3),
    (lambda z: z, 1.0),
])
def test_equinox_mlp_converts_exactly(act, alpha):
    mlp = eqx.nn.MLP(5, 3, 8, 2, activation=act, use_bias=False, use_final_bias=False,
                     key=jax.random.PRNGKey(0))
    model = bf.models.from_equinox(mlp)
    # α read off the activation (a probe and a ratio): two roundings, 2ε α (exact 0 for ReLU)
    assert model.alpha == pytest.approx(alpha, rel=2 * EPS, abs=0)
    assert bf.nets.widths(model.params) == (5, 8, 8, 3)
    X = _X(5)
    # the same float64 products, summed by other kernels (vmap of matvecs vs one matmul):
    # within forward_gap; plus 2ε α|z| per layer if α itself is 2ε off (bounded by the same
    # |W||h| magnitudes: a 4ε relative term, within forward_gap's 2γ_k since k >= 5)
    Ws = [np.asarray(la.W) for la in model.params]
    np.testing.assert_array_less(np.abs(np.asarray(jax.vmap(mlp)(X)) - np.asarray(model(X))),
                                 2 * forward_gap(Ws, X) + 1e-300)


def test_equinox_refuses_bias_and_other_activations():
    key = jax.random.PRNGKey(0)
    with pytest.raises(bf.models.UnsupportedModelError, match=r"layers\[0\].*bias.*use_bias=False"):
        bf.models.from_equinox(eqx.nn.MLP(5, 3, 8, 2, key=key))
    with pytest.raises(bf.models.UnsupportedModelError, match=r"layers\[2\].*bias.*use_final_bias=False"):
        bf.models.from_equinox(eqx.nn.MLP(5, 3, 8, 2, use_bias=False, key=key))
    with pytest.raises(bf.models.UnsupportedModelError, match=r"activation after layers\[0\].*tanh"):
        bf.models.from_equinox(eqx.nn.MLP(5, 3, 8, 2, activation=jax.nn.tanh, use_bias=False,
                                   use_final_bias=False, key=key))
    with pytest.raises(bf.models.UnsupportedModelError, match="final_activation"):
        bf.models.from_equinox(eqx.nn.MLP(5, 3, 8, 2, final_activation=jax.nn.relu, use_bias=False,
                                   use_final_bias=False, key=key))


# ------------------------------------------------------- state dicts and files


def _weights(seed=0, shapes=((30, 64), (20, 30), (10, 20))):
    rng = np.random.default_rng(seed)
    return [rng.normal(size=s) for s in shapes]


def test_state_dict_orders_names_naturally_and_checks_shapes():
    Ws = _weights(shapes=[(4, 3)] + [(4, 4)] * 10 + [(2, 4)])
    names = [f"{2 * i}.weight" for i in range(len(Ws))]  # "10.weight" sorts before "2.weight" as text
    mapping = dict(sorted(zip(names, Ws, strict=True)))
    model = bf.models.from_state_dict(mapping, alpha=0.0)
    assert model.names == tuple(names)
    X = _X(3)
    np.testing.assert_array_equal(np.asarray(model(X)), np.asarray(bf.forward(bf.from_arrays(Ws), X, 0.0)))
    with pytest.raises(ValueError, match="does not take the"):
        bf.models.from_state_dict({"0.weight": Ws[0], "2.weight": Ws[0]}, alpha=0.0)


_W0, _W2 = np.ones((3, 2)), np.ones((1, 3))


@pytest.mark.parametrize("mapping, match", [
    ({"0.weight": _W0, "0.bias": np.ones(3), "2.weight": _W2}, r"layer 0 \('0.bias'\).*bias"),
    ({"0.weight": np.ones((3, 2, 3, 3)), "2.weight": _W2}, "'0.weight'.*convolution"),
    ({"0.weight": _W0, "1.weight": np.ones(3), "2.weight": _W2}, "'1.weight'.*normalisation"),
    ({"0.weight": _W0, "1.running_mean": np.ones(3), "2.weight": _W2}, "'1.running_mean'"),
])
def test_state_dict_refuses_what_is_not_a_bias_free_linear_layer(mapping, match):
    with pytest.raises(bf.models.UnsupportedModelError, match=match):
        bf.models.from_state_dict(mapping, alpha=0.0)


def test_biases_that_are_exactly_zero_are_dropped_from_state_dicts_files_and_equinox(tmp_path):
    """docs/verdict.md: "Biases that are exactly zero are dropped", as from_torch does; a state dict of
    nn.Linear(bias=True) layers with zeroed biases, its file and the CLI's loader read as the same net
    (bitwise the same outputs: one code path); a bias 1e-300 away from 0 is still refused."""
    Ws = _weights(shapes=((4, 3), (2, 4)))
    zero = {"0.weight": Ws[0], "0.bias": np.zeros(4), "2.weight": Ws[1], "2.bias": np.zeros(2)}
    plain = bf.models.from_state_dict({"0.weight": Ws[0], "2.weight": Ws[1]}, alpha=0.0)
    X = _X(3)
    read = bf.models.from_state_dict(zero, alpha=0.0)
    np.testing.assert_array_equal(np.asarray(read(X)), np.asarray(plain(X)))
    np.savez(tmp_path / "zero.npz", **zero)
    np.testing.assert_array_equal(np.asarray(bf.load_model(tmp_path / "zero.npz", alpha=0.0)(X)),
                                  np.asarray(plain(X)))
    with pytest.raises(bf.models.UnsupportedModelError, match=r"layer 2 \('2.bias'\).*nonzero bias"):
        bf.models.from_state_dict(zero | {"2.bias": np.array([0.0, 1e-300])}, alpha=0.0)
    key = jax.random.PRNGKey(0)
    mlp = eqx.nn.MLP(3, 2, 4, 1, activation=jax.nn.relu, key=key)
    zeros = [np.zeros(np.shape(la.bias)) for la in mlp.layers]
    mlp = eqx.tree_at(lambda m: [la.bias for la in m.layers], mlp, zeros)
    read = bf.models.from_equinox(mlp)
    assert all(la.b is None for la in read.params)


@pytest.mark.parametrize("mapping", [{0: _W0, 1: _W2}, {0: _W0, "2.weight": _W2},
                                     {None: _W0, "2.weight": _W2}])
def test_state_dict_keys_that_are_not_names_are_refused_by_name(mapping):
    """All-int keys once failed in the natural sort, mixed keys in JAX's key sort: neither said why."""
    with pytest.raises(TypeError, match="mapping keys must be weight names such as '0.weight', got"):
        bf.models.from_state_dict(mapping, alpha=0.0)


@pytest.mark.parametrize("padding", [1, 0, None])
def test_state_dict_conv_padding_as_torch_numbers_is_refused_with_the_names_to_use(padding):
    """torch writes padding as a number; it was "'int' object is not iterable"."""
    conv = {"0.weight": np.ones((2, 1, 3)), "1.weight": np.ones((1, 16))}
    with pytest.raises(TypeError, match=f"padding={padding!r}: give 'same' or 'valid'"):
        bf.models.from_state_dict(conv, alpha=0.0, in_shape=(8,), padding=padding)


def test_save_model_refuses_a_path_under_a_file_naming_it(tmp_path):
    (tmp_path / "f").write_text("")
    with pytest.raises(ValueError, match="path.parent=.* is a file, not a folder"):  # was FileExistsError
        bf.save_model(bf.from_arrays([_W0, _W2]), tmp_path / "f" / "m.npz")
    assert bf.save_model(bf.from_arrays([_W0, _W2]), tmp_path / "new" / "m.npz").exists()  # made


def test_a_file_named_npz_that_is_not_one_is_not_called_a_pickle(tmp_path):
    """NumPy reads a non-zip file as a pickle and, refused, talked of 'pickled (object) data'
    and allow_pickle: wrong, and a push toward unsafe loading."""
    bad = tmp_path / "model.npz"
    bad.write_text("not an archive")
    for load in (lambda: bf.load_model(bad, alpha=0.0), lambda: bf.load_data(bad)):
        with pytest.raises(ValueError, match="is not an .npz archive") as err:
            load()
        assert "pickle" not in str(err.value)
    np.savez(bad, **{"0.weight": _W0, "1.weight": _W2, "biasfree.layers": np.array('["a", "b"]')})
    with pytest.raises(ValueError, match="biasfree.layers must be a JSON list of layer objects"):
        bf.load_model(bad, alpha=0.0)  # once AttributeError: 'str' object has no attribute 'get'


@pytest.mark.parametrize("suffix", [".safetensors", ".npz"])
def test_files_round_trip_with_alpha(tmp_path, suffix):
    params = bf.from_arrays(_weights())
    path = bf.save_model(params, tmp_path / f"m{suffix}", alpha=0.25)
    model = bf.load_model(path)
    assert model.alpha == 0.25 and model.names == ("0.weight", "2.weight", "4.weight")
    for a, b in zip(model.params, params, strict=True):
        np.testing.assert_array_equal(np.asarray(a.W), np.asarray(b.W))
    assert bf.load_model(path, alpha=0.5).alpha == 0.5  # the argument wins over the file


def test_plain_safetensors_file_needs_alpha(tmp_path):
    Ws = _weights()
    save_file({"0.weight": Ws[0].astype(np.float32), "2.weight": Ws[1].astype(np.float32),
               "4.weight": Ws[2].astype(np.float32)}, str(tmp_path / "m.safetensors"))
    model = bf.load_model(tmp_path / "m.safetensors")
    assert model.alpha is None
    with pytest.raises(ValueError, match="α.*unknown"):
        model(_X(64))
    with pytest.raises(ValueError, match="unknown model format"):
        bf.load_model(_touch(tmp_path / "m.pt"))
    with pytest.raises(FileNotFoundError):
        bf.load_model(tmp_path / "missing.npz")


def _touch(path):
    path.write_bytes(b"")
    return path


# ----------------------------------------------------------------- PyTorch


def test_torch_sequential_converts_exactly_and_reads_alpha(tmp_path):
    torch = pytest.importorskip("torch")
    nn = torch.nn
    torch.manual_seed(0)
    cases = [
        (nn.Sequential(nn.Linear(6, 9, bias=False), nn.ReLU(), nn.Linear(9, 2, bias=False)), 0.0),
        (nn.Sequential(nn.Linear(6, 9, bias=False), nn.LeakyReLU(0.3), nn.Linear(9, 9, bias=False),
                       nn.LeakyReLU(0.3), nn.Linear(9, 2, bias=False)), 0.3),
        (nn.Sequential(nn.Linear(6, 9, bias=False), nn.Identity(), nn.Linear(9, 2, bias=False)), 1.0),
        (nn.Sequential(nn.Linear(6, 9, bias=False), nn.Linear(9, 2, bias=False)), 1.0),
    ]
    X = _X(6)
    for module, alpha in cases:
        module = module.double()
        model = bf.from_torch(module)
        assert model.alpha == alpha
        with torch.no_grad():
            ref = module(torch.from_numpy(X)).numpy()
        # float64 in both, the same products summed by torch's and XLA's kernels: forward_gap
        Ws = [np.asarray(la.W) for la in model.params]
        np.testing.assert_array_less(np.abs(np.asarray(model(X)) - ref), forward_gap(Ws, X) + 1e-300)
    # the state dict saved by safetensors.torch reads back without torch's help
    from safetensors.torch import save_file as torch_save

    torch_save(cases[0][0].state_dict(), str(tmp_path / "m.safetensors"))
    again = bf.load_model(tmp_path / "m.safetensors", alpha=0.0)
    np.testing.assert_array_equal(np.asarray(again(X)), np.asarray(bf.from_torch(cases[0][0])(X)))


@pytest.mark.filterwarnings("ignore:Complex modules:UserWarning")  # torch's, on building the complex net
def test_torch_refusals_name_the_layer():
    torch = pytest.importorskip("torch")
    nn = torch.nn
    L = functools.partial(nn.Linear, bias=False)
    bad = [
        (nn.Sequential(L(4, 3), nn.Tanh(), L(3, 1)), r"layer 1 \(Tanh\): Tanh is not supported"),
        (nn.Sequential(L(4, 3), nn.GELU(), L(3, 1)), r"layer 1 \(GELU\)"),
        (nn.Sequential(L(4, 3), nn.ReLU(), L(3, 3), nn.LeakyReLU(0.1), L(3, 1)), "mixed slopes"),
        (nn.Sequential(L(4, 3), nn.ReLU(), L(3, 1), nn.ReLU()), r"layer 3.*after the last Linear"),
        (nn.Sequential(L(4, 3), nn.LeakyReLU(1.5), L(3, 1)), r"layer 1 \(LeakyReLU\).*outside"),
        # complex weights: their imaginary part was dropped, with only torch's warning
        (nn.Sequential(L(4, 3), nn.ReLU(), L(3, 1)).to(torch.complex64), "'0.weight': holds complex"),
    ]
    for module, match in bad:
        with pytest.raises(bf.models.UnsupportedModelError, match=match):
            bf.from_torch(module)
    with pytest.raises(bf.models.UnsupportedModelError, match=r"1 Linear layer\(s\).*at least two"):
        bf.from_torch(L(4, 3))  # one layer given alone
    with pytest.raises(TypeError, match="torch.nn.Module"):
        bf.from_torch([L(4, 3), L(3, 1)])
