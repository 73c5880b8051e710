"""A model is read by running it (issue 47, item 1; biasfree.analysis.verify): analyse runs a
torch or equinox module on the data and refuses, in one line naming the layout read, the
difference against its round-off bound and the likely cause, a reading whose output the
module's own forward does not reproduce; a module that is what its layers show passes at any
seed, conv nets with a folded batch norm included. Torch nets with biases that are exactly
zero are read as bias-free (issue 47, item 6); nonzero biases are kept."""

import functools

import equinox as eqx
import jax
import numpy as np
import pytest
from roundoff import EPS, gamma

import biasfree as bf
from biasfree.analysis import verify

torch = pytest.importorskip("torch")
nn = torch.nn
L = functools.partial(nn.Linear, bias=False)
pytestmark = pytest.mark.numerics  # round-off bounds: make test-portable reruns them


def _data(d=6, p=3, n=300, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    return X, X @ rng.normal(size=(d, p)) / np.sqrt(d)


class Net(nn.Module):
    """Two Linear layers and a ReLU module, as a user writes them; ``out`` applied in forward."""

    def __init__(self, d=6, m=8, p=3, out=None, transposed=False):
        super().__init__()
        self.fc1, self.act, self.fc2 = L(d, m), nn.ReLU(), L(m, p)
        self.out, self.transposed = out, transposed

    def forward(self, x):
        h = x @ self.fc1.weight if self.transposed else self.fc1(x)
        y = self.fc2(self.act(h))
        return y if self.out is None else self.out(y)


def _refusal(module, data, **kwargs) -> str:
    with pytest.raises(bf.models.UnsupportedModelError) as info:
        bf.analyse(module, data, **kwargs)
    msg = str(info.value)
    assert "\n" not in msg  # one line
    return msg


def _counted(module):
    """``module`` with a forward hook recording the shape and dtype of every input it is run on."""
    calls = []
    module.register_forward_hook(lambda mod, args, out: calls.append((tuple(args[0].shape), args[0].dtype)))
    return calls


# --------------------------------------------------------------- refusals


@pytest.mark.parametrize("fn, cause", [
    (lambda y: torch.softmax(y, dim=-1), "a softmax over the outputs"),
    (torch.tanh, "a tanh of the outputs"),
    (torch.abs, "an abs of the outputs"),
])
def test_a_function_in_forward_that_no_layer_shows_is_refused_naming_it(fn, cause):
    torch.manual_seed(0)
    msg = _refusal(Net(out=fn), _data())
    assert "fc1 (Linear 6→8) → ReLU → fc2 (Linear 8→3)" in msg  # the layout it expected
    assert "max |Δf|/M = " in msg and "> 2γ_K = " in msg and "‖Δf‖/‖f‖" in msg  # the size, with the bound
    assert f"likely cause: {cause} in forward" in msg, msg

    class Seq(nn.Sequential):  # an nn.Sequential whose forward is not its layers' composition
        def forward(self, x):
            return fn(super().forward(x))

    torch.manual_seed(1)
    assert f"likely cause: {cause}" in _refusal(Seq(L(6, 8), nn.ReLU(), L(8, 3)), _data())


@pytest.mark.parametrize("low", [-1.0, 0.0])
def test_a_clamp_inactive_at_the_given_weights_is_refused_at_scaled_rows(low):
    """A small init (weights × 1e-3) keeps every output inside clamp(−1, 1), so the given rows cannot
    tell the clamp from the layers (an audit's denoiser-style module read "effectively linear" while
    torch training it left its twin by 0.31 of L_ref); the rows scaled until the reading's outputs
    reach verify.LARGE make it bind, and it is named. Control: the same net without the clamp passes
    both runs (the bound scales with M)."""
    torch.manual_seed(0)
    X, Y = _data()
    for clamped in (True, False):
        net = Net(out=(lambda y: y.clamp(low, 1.0)) if clamped else None).double()
        with torch.no_grad():
            for w in net.parameters():
                w.mul_(1e-3)
        if clamped:
            msg = _refusal(net, (X, Y))
            assert f"a clamp of the outputs to [{low:g}, 1]" in msg, msg
            assert ("rows of the data × " in msg) == (low < 0)  # clamp(0, 1) binds on negative outputs
        else:
            assert bf.analyse(net, (X, Y), train=False).net is not None


def test_a_transposed_weight_is_refused_naming_it():
    torch.manual_seed(0)
    msg = _refusal(Net(d=6, m=6, transposed=True), _data())
    assert "likely cause: fc1's weight used transposed" in msg, msg


@pytest.mark.parametrize("factor, named", [
    (1 / 8, "a scaling by 1/8 in forward (a missing or extra 1/N, N = 8?)"),
    (3.0, "a scaling by 3 in forward"),
    (-1.0, "a sign flip"),
])
def test_an_extra_scale_is_refused_naming_it(factor, named):
    torch.manual_seed(0)
    msg = _refusal(Net(out=lambda y: y * factor), _data())
    assert f"likely cause: {named}" in msg, msg


def test_float32_arithmetic_inside_forward_is_refused_naming_it():
    """Outputs rounded to float32 (ε = 1.2e-7) are off by ~1e-8 of f, far above the float64
    bound 2γ_K = 1.3e-14 and within float32's 2γ_K(ε32) M: named as such."""
    torch.manual_seed(0)
    msg = _refusal(Net(out=lambda y: y.float().double()), _data())
    assert "likely cause: float32 arithmetic inside forward" in msg, msg


def test_a_relu_in_forward_without_a_module_is_refused_naming_it():
    class Functional(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1, self.fc2 = L(6, 8), L(8, 3)

        def forward(self, x):
            return self.fc2(torch.relu(self.fc1(x)))

    torch.manual_seed(0)
    msg = _refusal(Functional(), _data())
    assert "fc1 (Linear 6→8) → no activation → fc2" in msg
    assert "likely cause: a ReLU applied in forward" in msg


def test_a_forward_that_cannot_run_on_float64_rows_and_own_parameters_are_refused():
    class Float32Only(nn.Sequential):
        def forward(self, x):
            assert x.dtype == torch.float32, "float32 inputs only"
            return super().forward(x)

    msg = _refusal(Float32Only(L(6, 8), nn.ReLU(), L(8, 3)), _data())
    assert "failed (AssertionError: float32 inputs only)" in msg and "state_dict()" in msg

    class Raw(nn.Module):  # weights held as parameters of the module: no layer to read
        def __init__(self):
            super().__init__()
            self.fc1, self.act, self.fc2 = L(6, 8), nn.ReLU(), L(8, 3)
            self.scale = nn.Parameter(torch.ones(3))

    assert "'scale' (Raw): is a parameter of the module itself" in _refusal(Raw(), _data())


def test_the_bound_is_not_vacuous_a_change_of_five_gamma_k_is_refused():
    """With non-negative weights and inputs every pre-activation is >= 0, so f = M (the net on
    absolute values): the check is at its sharpest. K = (6 + 8) + (8 + 8) = 30 (verify's module
    doc). forward = fl(c · f) with c = 1 + 5γ_K differs from the package's f by at least
    (5γ_K − 2ε) M − 2γ_K M (1 + 5γ_K) > 2γ_K M / (1 − γ_K), the bound (the two computations'
    round-off at most 2γ_K M between them): refused. c = 1 passes."""
    g = gamma(30)
    assert verify.sum_length(bf.from_torch(Net()).params) == 30
    rng = np.random.default_rng(0)
    X = np.abs(rng.normal(size=(300, 6)))
    for c, refused in ((1.0, False), (1 + 5 * g, True)):
        net = Net(out=lambda y, c=c: y * c).double()
        with torch.no_grad():
            for w in net.parameters():
                w.abs_()
        if refused:
            msg = _refusal(net, (X, X[:, :3]))
            assert f"likely cause: a scaling by 1 + {5 * g:.3g}" in msg, msg  # fitted c: to its 3 digits
        else:
            bf.analyse(net, (X, X[:, :3]))
        assert 5 * g - 2 * EPS - 2 * g * (1 + 5 * g) > 2 * g / (1 - g)  # the margin of the docstring


# ------------------------------------------------ models that are what they show


def _dense(seed):
    torch.manual_seed(seed)
    return nn.Sequential(L(6, 9), nn.LeakyReLU(0.3), L(9, 9), nn.LeakyReLU(0.3), L(9, 3))


def _conv_bn(seed):
    """Conv, batch norm (eval, folded into the kernel), ReLU, conv, ReLU, batch norm, pooled readout."""
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed)
    bns = [nn.BatchNorm2d(4), nn.BatchNorm2d(3)]
    for bn in bns:
        with torch.no_grad():
            bn.weight.copy_(torch.rand(bn.num_features, generator=g) + 0.5)
            bn.running_var.copy_(torch.rand(bn.num_features, generator=g) * 3 + 0.1)
    return nn.Sequential(nn.Conv2d(2, 4, 3, padding=1, bias=False), bns[0], nn.ReLU(),
                         nn.Conv2d(4, 3, 3, padding="valid", bias=False), nn.ReLU(), bns[1],
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), L(3, 2)).eval()


def _conv_biased(seed):
    """Conv with a bias, batch norm folded into it (kernel and bias), ReLU, Linear with a bias."""
    torch.manual_seed(seed)
    bn = nn.BatchNorm2d(4)
    with torch.no_grad():
        bn.weight.copy_(torch.rand(4) + 0.5)
        bn.running_var.copy_(torch.rand(4) * 3 + 0.1)
    return nn.Sequential(nn.Conv2d(2, 4, 3, padding=1), bn, nn.ReLU(), nn.Flatten(), nn.Linear(100, 2)).eval()


@pytest.mark.parametrize("seed", range(4))
def test_torch_dense_and_conv_nets_that_are_what_they_show_are_run_and_pass(seed):
    rng = np.random.default_rng(seed)
    dense, conv, biased = _dense(seed), _conv_bn(seed), _conv_biased(seed)
    for module, in_shape, n_in, rows in ((dense, None, 6, 300), (conv, (5, 5), 50, 40),
                                         (biased, (5, 5), 50, 300)):
        calls = _counted(module)
        model = bf.from_torch(module, in_shape=in_shape)
        X = rng.normal(size=(rows, n_in))
        verify.check_reading(module, model.params, model.alpha, X, names=model.names)  # passes
        verify.check_reading(model, model.params, model.alpha, X)  # a Model read from it: the same run
        shape = (min(rows, verify.ROWS), *((2, 5, 5) if in_shape else (6,)))
        # run in float64 on the rows, twice per check: as given and scaled to outputs of verify.LARGE
        assert calls == [(shape, torch.float64)] * 4
        assert module[0].weight.dtype == torch.float32  # the user's module is untouched


def test_analyse_runs_a_conv_net_given_as_its_model():
    """A conv net reaches analyse as bf.from_torch(module, in_shape=...): the module it was read
    from is run there, and a forward that differs is refused."""

    class Doubled(nn.Sequential):
        def forward(self, x):
            return 2 * super().forward(x)

    torch.manual_seed(0)
    good = _conv_bn(0)
    bad = Doubled(*good)
    X = np.random.default_rng(0).normal(size=(40, 50))
    X, Y = np.vstack([X, -X]), np.vstack([X[:, :2], -X[:, :2]])
    calls = _counted(good)
    bf.analyse(bf.from_torch(good, in_shape=(5, 5)), (X, Y))
    assert len(calls) == 2  # one check: the rows as given and scaled
    msg = _refusal(bf.from_torch(bad, in_shape=(5, 5)), (X, Y))
    assert "Conv2d 2→4, 3x3, 'same' on 5x5" in msg and "likely cause: a scaling by 2 in forward" in msg


class _Counted(eqx.nn.MLP):
    """An MLP whose __call__ is the MLP's, counting its traces."""

    def __call__(self, x, *, key=None):
        _Counted.runs += 1
        return super().__call__(x, key=key)


class _Softmax(eqx.nn.MLP):
    def __call__(self, x, *, key=None):
        return jax.nn.softmax(super().__call__(x, key=key))


@pytest.mark.parametrize("seed", range(3))
def test_equinox_mlps_are_run_and_a_custom_call_is_refused(seed):
    kw = dict(in_size=6, out_size=3, width_size=8, depth=2, activation=jax.nn.relu, use_bias=False,
              use_final_bias=False, key=jax.random.PRNGKey(seed))
    X = np.random.default_rng(seed).normal(size=(300, 6))
    _Counted.runs = 0
    mlp = _Counted(**kw)
    model = bf.models.from_equinox(mlp)
    verify.check_reading(mlp, model.params, model.alpha, X)
    assert _Counted.runs == 2  # one trace of the vmapped call per run: the rows as given and scaled
    for given in (_Softmax(**kw), bf.models.from_equinox(_Softmax(**kw))):
        msg = _refusal(given, _data())
        assert "layers[0].weight (Linear 6→8) → ReLU" in msg
        assert "likely cause: a softmax over the outputs" in msg


# ------------------------------------------------------------------ biases


def _zeroed(module):
    with torch.no_grad():
        for mod in module.modules():
            if getattr(mod, "bias", None) is not None and isinstance(mod, nn.Linear | nn.Conv2d):
                mod.bias.zero_()
    return module


def test_torch_biases_exactly_zero_are_dropped_and_nonzero_ones_kept():
    torch.manual_seed(0)
    biased = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))
    free = nn.Sequential(L(6, 8), nn.ReLU(), L(8, 3))
    free.load_state_dict({k: v for k, v in biased.state_dict().items() if k.endswith("weight")})
    X, Y = _data()
    X, Y = np.vstack([X, -X]), np.vstack([Y, -Y])
    kept = bf.from_torch(biased)  # nonzero biases: kept, as a params tuple with biases is
    np.testing.assert_array_equal(np.asarray(kept.params[0].b), biased[0].bias.detach().double().numpy())
    assert bf.analyse(biased, (X, Y)).net.has_bias
    zero = bf.analyse(_zeroed(biased), (X, Y))  # exactly zero: the bias-free net
    ref = bf.analyse(free, (X, Y))
    assert not zero.net.has_bias and zero.verdict.level == ref.verdict.level
    assert zero.net.output_energy == ref.net.output_energy and zero.verdict.text == ref.verdict.text
    torch.manual_seed(1)
    conv = _zeroed(nn.Sequential(nn.Conv2d(1, 2, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(32, 2)))
    assert all(layer.b is None for layer in bf.from_torch(conv, in_shape=(4, 4)).params)


def test_dropout_in_eval_mode_is_the_identity_and_in_training_mode_refused():
    """nn.Dropout is the identity in eval mode: the net reads as the one without it (the same weights,
    bitwise the same reading), and running it passes; in training mode it drops units at random, so it
    is refused naming model.eval()."""
    torch.manual_seed(0)
    plain = nn.Sequential(L(6, 8), nn.ReLU(), L(8, 3)).double()
    drop = nn.Sequential(plain[0], nn.ReLU(), nn.Dropout(0.5), plain[2]).double()
    X, Y = _data()
    read = bf.from_torch(drop.eval())
    for a, b in zip(read.params, bf.from_torch(plain).params, strict=True):
        np.testing.assert_array_equal(np.asarray(a.W), np.asarray(b.W))
    verify.check_reading(drop, read.params, read.alpha, X, names=read.names)  # passes
    with pytest.raises(bf.models.UnsupportedModelError, match=r"Dropout\(p=0.5\) in training mode.*eval\(\)"):
        bf.from_torch(drop.train())


@pytest.mark.parametrize("held, used", [(0.2, 0.1), (0.0, 0.3)])
def test_a_leaky_slope_in_forward_other_than_the_modules_is_named(held, used):
    """The module holds LeakyReLU(held) (or ReLU) but forward calls F.leaky_relu(·, used): at two layers
    f is affine in the slope, so the slope forward used is fitted and named (an audit got the generic
    cause). Control: forward using the module's own slope passes."""

    class Leaky(nn.Module):
        def __init__(self, slope):
            super().__init__()
            self.fc1, self.act, self.fc2 = L(6, 8), nn.LeakyReLU(held), L(8, 3)
            self.slope = slope

        def forward(self, x):
            return self.fc2(nn.functional.leaky_relu(self.fc1(x), self.slope))

    torch.manual_seed(0)
    msg = _refusal(Leaky(used).double(), _data())
    assert f"likely cause: a leaky slope {used:g} in forward" in msg and f"modules show {held:g}" in msg, msg
    net = Leaky(held).double()
    read = bf.from_torch(net)
    verify.check_reading(net, read.params, read.alpha, _data()[0], names=read.names)  # passes
