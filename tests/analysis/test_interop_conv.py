"""PyTorch conv nets in (docs/theory.md §7): ``from_torch`` maps Conv1d/Conv2d(bias=False),
ReLU/LeakyReLU, Flatten, Linear(bias=False), global average pooling and a bias-free eval
BatchNorm (folded) to the same function within derived round-off bounds; such a net goes
through ``analyse`` (API and CLI) as a dense one does; conv nets round-trip through weight
files bitwise; and every bad input is refused naming the layer and the fix."""

import functools
import json
import re

import numpy as np
import pytest
from roundoff import EPS, gamma
from typer.testing import CliRunner

import biasfree as bf
from biasfree.app.cli import app

torch = pytest.importorskip("torch")
nn = torch.nn
runner = CliRunner()
pytestmark = pytest.mark.numerics  # round-off bounds: make test-portable reruns them


def conv_gap(params, X, extra=0):
    """Entrywise bound on |ours − torch's| for a bias-free leaky-ReLU net given by its
    layers' matrices A_l (a conv's Toeplitz operator: the same products, zeros exact):
    tests/roundoff.forward_gap with each layer's sum length k = n_in + ``extra``.
    ``extra`` = 5 covers a folded batch-norm scale s (each side rounds s = γ/√(var + eps)
    and its product with K or the output in <= 5 more operations, 2·5ε relative, and
    2γ_{k+5} >= 2γ_k + 10ε)."""
    h = np.abs(np.asarray(X, dtype=float))
    e = np.zeros_like(h)
    for i, layer in enumerate(params):
        A = np.abs(np.asarray(layer.matrix, dtype=float))
        mag = h @ A.T
        e = e @ A.T + 2 * gamma(A.shape[1] + extra) * mag
        if i < len(params) - 1:
            e, h = e + EPS * mag, mag
    return e


def _images(n, shape, seed=0):
    return np.random.default_rng(seed).normal(size=(n, *shape))


def _torch_out(module, imgs):
    with torch.no_grad():
        return module(torch.from_numpy(imgs)).numpy()


def _conv2d_net(seed=0, C=3, hw=(6, 6), p=2, padding="same"):
    torch.manual_seed(seed)
    k = 3
    n = C * (hw[0] * hw[1] if padding in ("same", 1) else (hw[0] - k + 1) * (hw[1] - k + 1))
    return nn.Sequential(nn.Conv2d(1, C, k, padding=padding, bias=False), nn.ReLU(), nn.Flatten(),
                         nn.Linear(n, p, bias=False)).double()


def _sgd(module, imgs, Y, steps=5, lr=0.1):
    opt = torch.optim.SGD(module.parameters(), lr=lr)
    x, y = torch.from_numpy(np.array(imgs)), torch.from_numpy(np.array(Y))  # writable copies
    for _ in range(steps):
        opt.zero_grad()
        loss = 0.5 * ((module(x) - y) ** 2).sum(1).mean()
        loss.backward()
        opt.step()
    return module


def _check_equal(model, module, imgs, extra=0):
    X = imgs.reshape(len(imgs), -1)  # the flat channel-major input: Flatten of (C, H, W)
    ours, ref = np.asarray(model(X)), _torch_out(module, imgs)
    # both sum the same products in different orders: |diff| <= conv_gap (docstring)
    bound = conv_gap(model.params, X, extra)
    assert np.all(np.abs(ours - ref) <= bound), float(np.max(np.abs(ours - ref) / bound))
    return X


# ------------------------------------------------------------------ conversion


@pytest.mark.parametrize("padding", ["same", "valid", 1, 0])
def test_conv2d_relu_flatten_linear_equals_torch_untrained_and_trained(padding):
    module = _conv2d_net(padding=padding)
    imgs = _images(20, (1, 6, 6))
    model = bf.from_torch(module, in_shape=(6, 6))
    assert [type(layer).__name__ for layer in model.params] == ["Conv", "Layer"] and model.alpha == 0.0
    assert model.params[0].padding == ("same" if padding in ("same", 1) else "valid")
    assert model.names == ("0", "3")
    _check_equal(model, module, imgs)
    _sgd(module, imgs, np.random.default_rng(1).normal(size=(20, 2)))
    trained = bf.from_torch(module, in_shape=(6, 6))
    assert not np.array_equal(np.asarray(trained.params[0].K), np.asarray(model.params[0].K))
    _check_equal(trained, module, imgs)


@pytest.mark.filterwarnings("ignore:Using padding='same' with even kernel:UserWarning")  # torch's
def test_conv1d_leaky_even_kernel_and_pooled_readout_equal_torch():
    torch.manual_seed(2)
    module = nn.Sequential(nn.Conv1d(2, 4, 4, padding="same", bias=False), nn.LeakyReLU(0.2),
                           nn.Conv1d(4, 3, 3, padding="valid", bias=False), nn.LeakyReLU(0.2),
                           nn.Flatten(), nn.Linear(3 * 7, 2, bias=False)).double()
    imgs = _images(15, (2, 9))
    model = bf.from_torch(module, in_shape=9)
    assert model.alpha == pytest.approx(0.2) and bf.nets.widths(model.params) == (18, 36, 21, 2)
    _check_equal(model, module, imgs)
    pooled = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1, bias=False), nn.ReLU(),
                           nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 3, bias=False)).double()
    model = bf.from_torch(pooled, in_shape=(5, 4))
    assert isinstance(model.params[1], bf.nets.PooledDense) and model.params[1].in_shape == (5, 4)
    # the pooled readout averages S = 20 positions too: its matrix V ⊗ 1ᵀ/S has the same products
    _check_equal(model, pooled, _images(10, (1, 5, 4)), extra=2)


def _bn(C, nd, seed, negative=False):
    g = torch.Generator().manual_seed(seed)
    bn = (nn.BatchNorm1d if nd == 1 else nn.BatchNorm2d)(C).double()
    with torch.no_grad():
        bn.weight.copy_(torch.rand(C, generator=g, dtype=torch.float64) + 0.5)
        if negative:
            bn.weight[0] = -bn.weight[0]
        bn.running_var.copy_(torch.rand(C, generator=g, dtype=torch.float64) * 3 + 0.1)
    return bn.eval()


@pytest.mark.parametrize("where", ["after conv", "after relu", "pooled", "negative after conv"])
def test_bias_free_batch_norm_in_eval_mode_is_folded(where):
    torch.manual_seed(3)
    conv = nn.Conv2d(2, 4, 3, padding="same", bias=False)
    head = [nn.Flatten(), nn.Linear(4 * 25, 2, bias=False)]
    if where == "after conv":
        mods = [conv, _bn(4, 2, 0), nn.ReLU(), *head]
    elif where == "negative after conv":
        mods = [conv, _bn(4, 2, 0, negative=True), nn.ReLU(), *head]
    elif where == "after relu":
        mods = [conv, nn.ReLU(), _bn(4, 2, 0), nn.Conv2d(4, 3, 3, padding="same", bias=False), nn.ReLU(),
                nn.Flatten(), nn.Linear(3 * 25, 2, bias=False)]
    else:
        mods = [conv, nn.ReLU(), _bn(4, 2, 1), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                _bn(4, 1, 2), nn.Linear(4, 2, bias=False)]
    module = nn.Sequential(*mods).double().eval()
    model = bf.from_torch(module, in_shape=(5, 5))
    assert len(model.params) == len([m for m in mods if isinstance(m, nn.Conv2d | nn.Linear)])
    _check_equal(model, module, _images(12, (2, 5, 5)), extra=5 + 2 * (where == "pooled"))


def test_dense_batch_norm_folds_and_dense_nets_are_unchanged():
    torch.manual_seed(4)
    module = nn.Sequential(nn.Linear(5, 6, bias=False), _bn(6, 1, 0), nn.ReLU(),
                           nn.Linear(6, 2, bias=False)).double().eval()
    model = bf.from_torch(module)
    assert all(isinstance(layer, bf.nets.Layer) for layer in model.params)
    _check_equal(model, module, _images(10, (5,)), extra=5)


# ------------------------------------------------------------------ analyse


def _data(module, n=24, seed=5):
    imgs = _images(n, (1, 6, 6), seed)
    X = imgs.reshape(n, -1)
    X, Y = bf.symmetrize(X, X @ np.random.default_rng(seed).normal(size=(36, 2)) / 6)
    return np.asarray(X), np.asarray(Y)


@pytest.mark.parametrize("trained", [False, True])
def test_conv_net_goes_through_analyse_api_and_cli(tmp_path, trained):
    module = _conv2d_net(seed=6)
    X, Y = _data(module)
    if trained:
        _sgd(module, X.reshape(-1, 1, 6, 6), Y)
    model = bf.from_torch(module, in_shape=(6, 6))
    res = bf.analyse(model, (X, Y))
    assert res.net.depth == 2 and res.net.widths == (36, 108, 2) and res.net.alpha == 0.0
    # two-layer bias-free: the odd part is c·W₂A x exactly (§7): odd part linear to round-off
    assert res.net.odd_nonlinear_fraction <= 1e-20
    loc = res.local
    assert loc.n_used == 48 and loc.homogeneity_ratio <= 1.0 and loc.euler_ratio <= 1.0
    doc = res.to_json()
    assert doc["local_linear"]["judged"] is False and doc["verdict"]["level"] == res.verdict.level
    with pytest.raises(ValueError, match=r"layer 0 \(Conv2d\).*in_shape=\(H, W\)"):
        bf.analyse(module, (X, Y))  # a torch module does not say its input's spatial shape
    # the CLI: the converted net saved with its layer types, the same analysis
    path = bf.save_model(model.params, tmp_path / "conv.safetensors", alpha=model.alpha)
    np.savez(tmp_path / "data.npz", X=X, Y=Y)
    out = tmp_path / "A"
    cli = runner.invoke(app, ["analyse", str(path), "--data", str(tmp_path / "data.npz"), "--out", str(out)])
    assert cli.exit_code == 0, cli.output
    assert "local linearity at 48 of 48 inputs" in cli.output
    saved = json.loads((out / "analysis.json").read_text())
    assert saved["verdict"]["level"] == res.verdict.level and saved["net"]["widths"] == [36, 108, 2]
    assert saved["local_linear"]["euler_ratio"] <= 1.0
    twin = bf.load_model(out / "twin.safetensors")  # the conv twin, saved with its layer types
    assert isinstance(twin.params[0], bf.nets.Conv) and twin.alpha == 1.0


# ------------------------------------------------------------------ files


@pytest.mark.parametrize("suffix", [".safetensors", ".npz"])
def test_conv_and_pooled_nets_round_trip_bitwise(tmp_path, suffix):
    import jax

    for readout, padding, shape in (("dense", "valid", (6, 5)), ("pool", "same", (7,))):
        params = bf.init_conv(jax.random.PRNGKey(1), shape, (2, 3, 4), 3, p=2, padding=padding,
                              readout=readout)
        path = bf.save_model(params, tmp_path / f"{readout}{suffix}", alpha=0.1)
        model = bf.load_model(path)
        assert model.alpha == 0.1
        for a, b in zip(model.params, params, strict=True):
            assert type(a) is type(b) and a.in_layout == b.in_layout
            assert getattr(a, "padding", None) == getattr(b, "padding", None)
            for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b), strict=True):
                np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def test_torch_conv_state_dict_loads_with_in_shape(tmp_path):
    from safetensors.torch import save_file

    module = _conv2d_net(seed=7, padding="valid")
    save_file(module.state_dict(), str(tmp_path / "m.safetensors"))
    with pytest.raises(bf.models.UnsupportedModelError, match=r"'0.weight'.*convolution.*in_shape"):
        bf.load_model(tmp_path / "m.safetensors", alpha=0.0)
    model = bf.load_model(tmp_path / "m.safetensors", alpha=0.0, in_shape=(6, 6), padding="valid")
    direct = bf.from_torch(module, in_shape=(6, 6))
    for a, b in zip(model.params, direct.params, strict=True):  # the same arrays, the same layers
        assert type(a) is type(b)
        for x, y in zip(jax_leaves(a), jax_leaves(b), strict=True):
            np.testing.assert_array_equal(x, y)
    with pytest.raises(ValueError, match="does not take the .* check in_shape and padding"):
        bf.load_model(tmp_path / "m.safetensors", alpha=0.0, in_shape=(6, 6), padding="same")
    dense = nn.Sequential(L(4, 3), nn.ReLU(), L(3, 1))
    save_file(dense.state_dict(), str(tmp_path / "d.safetensors"))
    with pytest.raises(ValueError, match="no convolution.*leave it out"):
        bf.load_model(tmp_path / "d.safetensors", alpha=0.0, in_shape=(2, 2))
    path = bf.save_model(direct.params, tmp_path / "ours.safetensors")  # stores its own shapes
    with pytest.raises(ValueError, match="stores its layers' shapes.*leave in_shape out"):
        bf.load_model(path, alpha=0.0, in_shape=(6, 6))


def test_cli_reads_a_torch_conv_state_dict_with_in_shape(tmp_path):
    from safetensors.torch import save_file

    module = _conv2d_net(seed=8, padding="valid")
    save_file(module.state_dict(), str(tmp_path / "m.safetensors"))
    X, Y = _data(module, n=10)
    np.savez(tmp_path / "data.npz", X=X, Y=Y)
    args = ["analyse", str(tmp_path / "m.safetensors"), "--alpha", "0", "--data", str(tmp_path / "data.npz")]
    res = runner.invoke(app, [*args, "--in-shape", "6,6,valid", "--out", str(tmp_path / "A")])
    assert res.exit_code == 0, res.output
    doc = json.loads((tmp_path / "A" / "analysis.json").read_text())
    assert doc["net"]["widths"] == [36, 48, 2]  # 3 channels of 4×4 after a 'valid' 3×3 kernel
    want = bf.analyse(bf.from_torch(module, in_shape=(6, 6)), (X, Y))
    assert doc["verdict"]["level"] == want.verdict.level
    for bad, match in (([], "convolution.*in_shape"), (["--in-shape", "6,6"], "check in_shape and padding"),
                       (["--in-shape", "6,x"], "--in-shape '6,x'")):
        res = runner.invoke(app, [*args, *bad, "--out", str(tmp_path / "B")])
        assert res.exit_code == 2 and re.search(match, " ".join(res.output.split())), res.output


def jax_leaves(layer):
    import jax

    return [np.asarray(x) for x in jax.tree_util.tree_leaves(layer)]


# ------------------------------------------------------------------ refusals

C2 = functools.partial(nn.Conv2d, bias=False)
L = functools.partial(nn.Linear, bias=False)
HEAD = (nn.Flatten(), L(2 * 16, 1))


def _bn_shift(kind):
    bn = nn.BatchNorm2d(2).eval()
    with torch.no_grad():
        if kind == "beta":
            bn.bias.fill_(0.1)
        else:
            bn.running_mean.fill_(0.2)
    return bn


@pytest.mark.parametrize("mods, match", [
    ([C2(1, 2, 3, stride=2), nn.ReLU(), *HEAD], r"layer 0 \(Conv2d\): stride=\(2, 2\).*stride=1"),
    ([C2(1, 2, 3, padding=2, dilation=2), nn.ReLU(), *HEAD], r"layer 0 \(Conv2d\): dilation"),
    ([C2(2, 2, 3, padding=1, groups=2), nn.ReLU(), *HEAD], r"layer 0 \(Conv2d\): groups=2.*groups=1"),
    ([C2(1, 2, 3, padding=1, padding_mode="circular"), nn.ReLU(), *HEAD], r"layer 0.*padding_mode"),
    ([C2(1, 2, 3, padding=2), nn.ReLU(), *HEAD], r"layer 0 \(Conv2d\): padding=\(2, 2\).*'same'"),
    ([C2(1, 2, 5), nn.ReLU(), *HEAD], r"layer 0 \(Conv2d\): kernel \(5, 5\) is larger.*\(4, 4\)"),
    ([C2(1, 2, 3, padding=1), nn.ReLU(), C2(3, 2, 3, padding=1), *HEAD],
     r"layer 2 \(Conv2d\): takes 3 input channels but the layer before gives 2"),
    ([C2(1, 2, 3, padding=1), nn.ReLU(), nn.Flatten(), L(30, 1)], r"layer 3 \(Linear\): takes 30 input"),
    ([C2(1, 2, 3, padding=1), nn.ReLU(), L(4, 1)], r"layer 2 \(Linear\).*nn.Flatten\(\) before it"),
    ([C2(1, 2, 3, padding=1), nn.MaxPool2d(2), *HEAD], r"layer 1 \(MaxPool2d\): MaxPool2d is not supported"),
    ([C2(1, 2, 3, padding=1), nn.ReLU(), nn.Dropout(), *HEAD], r"layer 2 \(Dropout\)"),
    ([nn.Conv3d(1, 2, 3, bias=False), nn.ReLU(), *HEAD], r"layer 0 \(Conv3d\).*Conv1d or Conv2d"),
    ([nn.Conv1d(1, 2, 3, bias=False), nn.ReLU(), *HEAD], r"layer 0 \(Conv1d\): is 1-D.*\(4, 4\)"),
    ([C2(1, 2, 3, padding=1), nn.ReLU(), nn.Flatten(), C2(2, 2, 3), *HEAD], r"layer 3 \(Conv2d\).*flat"),
    ([C2(1, 2, 3, padding=1), nn.ReLU(), nn.Flatten(0), L(32, 1)], r"layer 2 \(Flatten\).*start_dim=1"),
    ([C2(1, 2, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(2), *HEAD], r"layer 2.*output_size=2"),
    ([C2(1, 2, 3, padding=1), nn.AdaptiveAvgPool2d(1), nn.ReLU(), nn.Flatten(), L(2, 1)],
     r"layer 2 \(ReLU\): an activation after AdaptiveAvgPool"),
    ([C2(1, 2, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), L(1, 1)], r"layer 3 \(Linear\).*Flatten"),
    ([C2(1, 2, 3, padding=1), _bn_shift("beta"), nn.ReLU(), *HEAD], r"layer 1 \(BatchNorm2d\): has a shift"),
    ([C2(1, 2, 3, padding=1), _bn_shift("mean"), nn.ReLU(), *HEAD], r"layer 1 \(BatchNorm2d\).*running_mean"),
    ([C2(1, 2, 3, padding=1), nn.BatchNorm2d(2), nn.ReLU(), *HEAD], r"layer 1 \(BatchNorm2d\).*training"),
    ([C2(1, 2, 3, padding=1), nn.BatchNorm2d(2, track_running_stats=False).eval(), nn.ReLU(), *HEAD],
     r"layer 1 \(BatchNorm2d\).*track_running_stats"),
    ([C2(1, 2, 3, padding=1), nn.BatchNorm2d(3).eval(), nn.ReLU(), *HEAD], r"layer 1.*num_features=3"),
    ([C2(1, 2, 3, padding=1), nn.ReLU(), nn.BatchNorm1d(2).eval(), *HEAD], r"layer 2 \(BatchNorm1d\).*2-D"),
    ([C2(1, 2, 3, padding=1), nn.ReLU(), nn.LeakyReLU(0.1), *HEAD], "two activations in a row"),
    ([C2(1, 2, 3, padding=1), nn.ReLU(), C2(2, 2, 3, padding=1), nn.LeakyReLU(0.1), *HEAD], "mixed slopes"),
    ([C2(1, 2, 3, padding=1), nn.ReLU(), *HEAD, nn.ReLU()], r"layer 4.*after the last Linear"),
    ([nn.ReLU(), C2(1, 2, 3, padding=1), nn.ReLU(), *HEAD], r"layer 0.*before the first Conv2d"),
])
def test_conv_refusals_name_the_layer_and_the_fix(mods, match):
    with pytest.raises(bf.models.UnsupportedModelError, match=match):
        bf.from_torch(nn.Sequential(*mods), in_shape=(4, 4))


def test_negative_batch_norm_scale_before_an_activation_and_in_shape_misuse():
    bn = _bn(2, 2, 0, negative=True)
    seq = nn.Sequential(C2(1, 2, 3, padding=1), nn.ReLU(), bn, nn.ReLU(), *HEAD)
    with pytest.raises(bf.models.UnsupportedModelError,
                       match=r"layer 2 \(BatchNorm2d\): has a negative scale"):
        bf.from_torch(seq, in_shape=(4, 4))
    conv = nn.Sequential(C2(1, 2, 3, padding=1), nn.ReLU(), *HEAD)
    with pytest.raises(ValueError, match=r"layer 0 \(Conv2d\) needs the input's spatial shape"):
        bf.from_torch(conv)
    with pytest.raises(ValueError, match="in_shape=.*give the input's spatial shape"):
        bf.from_torch(conv, in_shape=(4, 4, 4))
    with pytest.raises(ValueError, match="no convolution.*leave it out"):
        bf.from_torch(nn.Sequential(L(4, 3), nn.ReLU(), L(3, 1)), in_shape=(2, 2))
