"""`biasfree analyse` prints where the net stands (docs/theory.md §11.7) for dense, conv and
attention models read from torch files: effective units, the nearest embedded fixed point, the
saddle test and the time to leave; the same numbers as ``bf.analyse(...).stage``."""

import jax
import numpy as np
import pytest
from tasks import whitened_linear
from typer.testing import CliRunner

import biasfree as bf
from biasfree.app.cli import app

torch = pytest.importorskip("torch")
from safetensors.torch import save_file  # noqa: E402
from torch import nn  # noqa: E402

runner = CliRunner()


def _said(res) -> str:
    return " ".join(res.output.split())


def _analysed(tmp_path, seq, p0, X, Y, alpha: str) -> str:
    """``biasfree analyse`` of the torch module ``seq`` saved to a file, with its init ``p0`` and
    data (X, Y) from files: what it printed, on one line."""
    save_file(seq.state_dict(), str(tmp_path / "m.safetensors"))
    bf.save_model(p0, tmp_path / "m0.safetensors")
    np.savez(tmp_path / "d.npz", X=X, Y=Y)
    res = runner.invoke(app, ["analyse", str(tmp_path / "m.safetensors"), "--alpha", alpha, "--init",
                              str(tmp_path / "m0.safetensors"), "--data", str(tmp_path / "d.npz"),
                              "--out", str(tmp_path / "A")])
    assert res.exit_code == 0, res.output
    return _said(res)


def test_a_dense_relu_file_prints_its_units_fixed_point_and_escape(tmp_path):
    """The two-kink task of tests/analysis/test_stage_families.py: 1 unit, λ* = 0.05."""
    X = np.sqrt(2) * np.array([[1.0, 0], [-1, 0], [0, 1], [0, -1]])
    Y = (3 * np.maximum(X[:, 0], 0) + 0.1 * np.maximum(-X[:, 0], 0))[:, None]
    p0 = bf.init_gaussian(jax.random.PRNGKey(1), (2, 6, 1), scale=1e-3)
    net = bf.train(p0, bf.Dataset(X, Y), bf.GDConfig(alpha=0.0, lr=0.02, steps=1500, n_records=2),
                   observables="loss").params
    seq = nn.Sequential(nn.Linear(2, 6, bias=False), nn.ReLU(), nn.Linear(6, 1, bias=False)).double()
    with torch.no_grad():
        for i, la in zip((0, 2), net, strict=True):
            seq[i].weight.copy_(torch.from_numpy(np.array(la.W)))
    said = _analysed(tmp_path, seq, p0, X, Y, "0")
    api = bf.analyse(net, (X, Y), alpha=0.0, init=p0, train=False).stage
    assert "stage: effective units 1 (leaky;" in said
    assert f"one-sided rate λ* = {api.unit_point.rate:.4g}" in said and "λ* = 0.05 " in said
    assert f"leaves in t ≈ {api.drop_time:.4g}" in said


def test_a_torch_conv_file_prints_its_kernels(tmp_path):
    torch.manual_seed(0)
    module = nn.Sequential(nn.Conv2d(1, 2, 3, padding="same", bias=False), nn.ReLU(), nn.Flatten(),
                           nn.Linear(2 * 16, 1, bias=False)).double()
    save_file(module.state_dict(), str(tmp_path / "c.safetensors"))
    X = np.random.default_rng(0).normal(size=(20, 16))
    with torch.no_grad():
        Y = module(torch.from_numpy(X.reshape(-1, 1, 4, 4))).numpy()
    np.savez(tmp_path / "d.npz", X=X, Y=Y + 0.1)
    res = runner.invoke(app, ["analyse", str(tmp_path / "c.safetensors"), "--alpha", "0", "--in-shape", "4,4",
                              "--data", str(tmp_path / "d.npz"), "--out", str(tmp_path / "A")])
    assert res.exit_code == 0, res.output
    api = bf.analyse(bf.from_torch(module, in_shape=(4, 4)), (X, Y + 0.1), train=False).stage
    assert api.family == "conv" and api.covered
    # no init given: the count is the magnitudes above round-off, said to be undecided (§11.1)
    said = _said(res)
    assert f"stage: effective units undecided (conv; {api.units.count} magnitudes above round-off" in said
    assert "nearest fixed point:" in _said(res)


def test_an_attention_file_prints_its_heads(tmp_path):
    from safetensors.numpy import save_file as save_np

    from biasfree.core.attention import init_attention
    from biasfree.core.icl_data import in_context_regression

    att = init_attention(jax.random.PRNGKey(1), 2, 2, 8, 1e-3)
    save_np({"attn.W_V": np.asarray(att.V), "attn.W_KQ": np.asarray(att.KQ)},
            str(tmp_path / "att.safetensors"))
    seq = in_context_regression(jax.random.PRNGKey(0), 40, 8, 2)
    np.savez(tmp_path / "seq.npz", X=np.asarray(seq.X), Y=np.asarray(seq.Y))
    res = runner.invoke(app, ["analyse", str(tmp_path / "att.safetensors"), "--data",
                              str(tmp_path / "seq.npz"), "--out", str(tmp_path / "A")])
    assert res.exit_code == 0, res.output
    api = bf.analyse(att, seq, train=False).stage
    assert api.family == "attention-merged" and api.covered
    # init 1e-3 and no --init: the count is undecided, and the nearest point is the origin (§11.7.2)
    assert "nearest fixed point: best 0-unit solution" in _said(res) and api.k == 0 and api.saddle
    assert "stage: effective units undecided (attention-merged; 1 magnitude above round-off" in _said(res)


def test_a_deep_linear_torch_file_prints_its_order_l_saddle_and_drop(tmp_path):
    """A depth-3 linear net on plateau 1 (tests/analysis/test_deep_stage.py's task, docs/theory.md
    §11.7.10): 1 unit, a saddle of order 3 that the Hessian does not see, and the deep half time."""
    from biasfree.theory import aligned_init, data_modes

    X, Y = whitened_linear(40, 4, [4.0, 1.0, 0.25])
    m = data_modes(X, Y)
    p0 = aligned_init(m.U, m.V, 1e-4, depth=3, width=4)
    net = bf.train(p0, bf.Dataset(X, Y), bf.GDConfig(alpha=1.0, lr=0.01, steps=1000, n_records=2),
                   observables="loss").params
    seq = nn.Sequential(*(nn.Linear(a, b, bias=False) for a, b in ((4, 4), (4, 4), (4, 3)))).double()
    with torch.no_grad():
        for lin, la in zip(seq, net, strict=True):
            lin.weight.copy_(torch.from_numpy(np.array(la.W)))
    said = _analysed(tmp_path, seq, p0, X, Y, "1")
    api = bf.analyse(net, (X, Y), alpha=1.0, init=p0, train=False).stage
    assert "stage: effective units 1 (linear;" in said and "saddle of order 3: s_2 = 1 " in said
    assert f"leaves in t ≈ {api.drop_time:.4g}" in said and api.deep_point.saddle
