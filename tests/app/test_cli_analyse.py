"""`biasfree analyse` as the README's own-model line walks it (issue 40): ``--train`` with
``--optimiser adam --lr 1e-3`` trains as ``biasfree.analyse(train=optimiser)`` does (its
steps), and the data are named, never defaulted: a model file without ``--data`` is refused
before anything is computed, with the fix."""

import json

import jax
import numpy as np
import optax
import pytest
from figure_checks import texts_outside
from typer.testing import CliRunner

import biasfree as bf
from biasfree.analysis.attention_figure import attention_figure
from biasfree.app.cli import app

runner = CliRunner()
NET = bf.init_gaussian(jax.random.PRNGKey(0), (6, 12, 1), scale=0.01)  # a small random init


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A model, the init it "started from" and a symmetric linear data file."""
    d = tmp_path_factory.mktemp("own")
    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 6))
    X = np.concatenate([X, -X])
    np.savez(d / "d.npz", X=X, Y=X[:, :1] / 3)
    bf.save_model(NET, d / "m0.safetensors")
    bf.save_model(bf.init_gaussian(jax.random.PRNGKey(1), (6, 12, 1), scale=0.02), d / "m.safetensors")
    return d


def test_train_with_an_optimiser_and_lr_runs_the_apis_steps(files):
    """The README's line: --train --optimiser adam --lr 1e-3 (exit 2 before: '--lr goes with
    --train-steps K'). Its run is the Python API's train=optimiser: the same number of steps."""
    out = files / "A"
    res = runner.invoke(app, ["analyse", str(files / "m.safetensors"), "--alpha", "0", "--init",
                              str(files / "m0.safetensors"), "--data", str(files / "d.npz"), "--train",
                              "--optimiser", "adam", "--lr", "1e-3", "--out", str(out)])
    assert res.exit_code == 0, res.output
    doc = json.loads((out / "analysis.json").read_text())
    cli = doc["history"]["prediction"]["trained"]["config"]  # --init: rerun from m0 under Adam
    model, init = (bf.load_model(files / f, 0.0) for f in ("m.safetensors", "m0.safetensors"))
    with np.load(files / "d.npz") as f:
        data = (f["X"], f["Y"])
    api = bf.analyse(model, data, init=init,
                     train=lambda rho: optax.adam(1e-3, eps=1e-8 * rho)).history.prediction.trained
    assert cli["steps"] == api.steps_run > 1 and cli["optimiser"].startswith("adam")
    # the same Adam (η = 1e-3, ε × ρ) from the same init on the same data, one code path: the same
    # gap up to the JSON round trip (exact for a float) and run-to-run round-off of XLA (none seen)
    got = doc["history"]["prediction"]["trained"]["gap_to_twin"]
    np.testing.assert_allclose(got, api.gap_to_twin, rtol=1e-12, atol=0)


@pytest.mark.parametrize(("args", "want"), [
    (["--train", "--lr", "1e-3"], "--lr with --train needs an --optimiser"),
    (["--optimiser", "adam", "--lr", "1e-3"], "go with --train or --train-steps K"),
    (["--train", "--train-steps", "5", "--optimiser", "adam"], "not both"),
])
def test_train_options_that_do_not_go_together_exit_2_naming_the_fix(files, args, want):
    res = runner.invoke(app, ["analyse", str(files / "m.safetensors"), "--alpha", "0", "--data",
                              str(files / "d.npz"), *args, "--out", str(files / "B")])
    assert res.exit_code == 2 and want in res.output, res.output
    assert not (files / "B" / "analysis.json").exists()


def test_a_model_file_without_data_is_refused_naming_the_fix(files):
    """Before, the bundled digits were used silently and a 6-input net failed with 'the data
    have X (3594, 64)', which never said where those data came from."""
    res = runner.invoke(app, ["analyse", str(files / "m.safetensors"), "--alpha", "0", "--train",
                              "--out", str(files / "C")])
    assert res.exit_code == 2, res.output
    assert "analyse needs --data" in res.output and "--data d.npz" in res.output
    assert "digits" in res.output and "3594" not in res.output  # names the bundled option, ran nothing
    assert not (files / "C").exists()


@pytest.fixture(scope="module")
def attention_files(tmp_path_factory):
    """A merged linear-attention state dict (W_V, W_KQ, as safetensors.torch.save_file writes a
    module's) and flat label-mirrored sequences X (S, (N+1)(D+1)), Y (S, 1)."""
    from safetensors.numpy import save_file

    from biasfree.core.attention import init_attention
    from biasfree.core.icl_data import in_context_regression

    d = tmp_path_factory.mktemp("attention")
    att = init_attention(jax.random.PRNGKey(1), 3, 2, 8, 0.05)
    save_file({"attn.W_V": np.asarray(att.V), "attn.W_KQ": np.asarray(att.KQ)}, str(d / "att.safetensors"))
    seq = in_context_regression(jax.random.PRNGKey(0), 40, 8, 3)
    np.savez(d / "seq.npz", X=np.asarray(seq.X), Y=np.asarray(seq.Y))
    np.savez(d / "tokens.npz", X=np.asarray(seq.X)[:, :-1], Y=np.asarray(seq.Y))  # a column short
    np.savez(d / "other.npz", W_Z=np.zeros((2, 4, 4)))
    return d, att, seq


def test_analyse_reads_an_attention_state_dict_and_flat_sequences(attention_files):
    """Before, the file was refused as a dense net ('W_KQ' is not a Linear weight)."""
    d, att, seq = attention_files
    res = runner.invoke(app, ["analyse", str(d / "att.safetensors"), "--data", str(d / "seq.npz"),
                              "--train-steps", "50", "--lr", "0.02", "--out", str(d / "A")])
    assert res.exit_code == 0, res.output
    doc = json.loads((d / "A" / "analysis.json").read_text())
    assert doc["net"]["kind"] == "merged" and doc["net"]["n_ctx"] == 8
    assert doc["verdict"]["level"] == "exactly linear"
    assert (d / "A" / "twin.safetensors").exists()  # the twin W₂W₁z, as for a dense net
    assert (d / "A" / "figure.png").stat().st_size > 0
    api = bf.analyse(att, seq, train=bf.GDConfig(lr=0.02, steps=50))
    fig = attention_figure(api)
    assert not texts_outside(fig)  # draws it: every answer's evidence inside the figure
    drawn = " ".join(" ".join(t.get_text() for t in fig.axes[2].texts).split())  # wrapped lines rejoined
    assert all(" ".join(e.line().split()) in drawn for e in api.verdict.training.evidence)
    # the same run from the same weights (read back bitwise from float64 safetensors), one code path:
    # the same gap up to the JSON round trip, exact for a float
    got = doc["prediction"]["trained"]["gap_to_twin"]
    np.testing.assert_allclose(got, api.prediction.trained.gap_to_twin, rtol=1e-12, atol=0)


@pytest.mark.parametrize("heads", [2, 1])
def test_a_file_of_the_authors_linear_weights_is_read_as_attention(attention_files, tmp_path, heads):
    """The linear-attention authors' nn.Linear names (kq.weight, value.weight, (H·(D+1), D+1)) in a
    file: the CLI and ``bf.analyse(path, …)`` read it as their attention (query summed, no 1/N), the
    same layer ``attention_from_state_dict`` reads from the arrays. Before, two heads were refused
    with the dense reader's error alone and one head was read as a 4 → 4 → 4 dense net ("pass
    alpha")."""
    from safetensors.numpy import save_file

    from biasfree.analysis.attention_import import attention_from_state_dict
    from biasfree.core.attention import init_attention

    d, _, seq = attention_files
    att = init_attention(jax.random.PRNGKey(3), 3, heads, 8, 0.05)
    V, KQ = np.asarray(att.V), np.asarray(att.KQ)
    arrays = {"kq.weight": np.ascontiguousarray(KQ.transpose(0, 2, 1).reshape(heads * 4, 4)),
              "value.weight": V.reshape(heads * 4, 4)}  # safetensors.numpy writes a view's buffer as is
    save_file(arrays, str(tmp_path / "authors.safetensors"))
    res = runner.invoke(app, ["analyse", str(tmp_path / "authors.safetensors"), "--data", str(d / "seq.npz"),
                              "--train-steps", "20", "--lr", "0.02", "--out", str(tmp_path / "A")])
    assert res.exit_code == 0, res.output
    doc = json.loads((tmp_path / "A" / "analysis.json").read_text())
    assert doc["net"]["kind"] == "merged" and doc["net"]["norm"] == "none"  # the authors' sum, no 1/N
    assert doc["net"]["heads"] == heads and doc["net"]["trained"]["include_query"] is True
    layer = attention_from_state_dict(arrays)
    cfg = bf.GDConfig(lr=0.02, steps=20)
    api, read = (bf.analyse(m, seq, train=cfg) for m in (str(tmp_path / "authors.safetensors"), layer))
    assert api.verdict.level == read.verdict.level == doc["verdict"]["level"]
    assert api.prediction.trained.gap_to_twin == read.prediction.trained.gap_to_twin  # one code path


@pytest.mark.parametrize(("args", "want"), [
    (["other.npz", "--data", "seq.npz"], "read in two layouts and fits neither: as a dense net"),
    (["att.safetensors", "--data", "tokens.npz"], "attention reads flat sequences: X (S, (N+1)(D+1))"),
    (["att.safetensors", "--data", "seq.npz", "--alpha", "0"], "--alpha does not apply to"),
])
def test_attention_refusals_name_the_layouts_read(attention_files, args, want):
    d, _, _ = attention_files
    res = runner.invoke(app, ["analyse", str(d / args[0]), *[a if not a.endswith(".npz") else str(d / a)
                                                             for a in args[1:]], "--out", str(d / "R")])
    assert res.exit_code == 2 and want in " ".join(res.output.split()), res.output
    if args[0] == "other.npz":  # both layouts named
        assert "W_V (H, D+1, D+1)" in " ".join(res.output.split()) and "bias-free linear layers" in res.output
    assert not (d / "R" / "analysis.json").exists()
