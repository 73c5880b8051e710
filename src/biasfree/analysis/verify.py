"""Read a model by running it: a live module's own output against the package's reading of it.

The adapters (:mod:`.torch_import`, :func:`~.interop.from_equinox`) read a module's layers,
its weights by name and structure. Its ``forward`` (equinox: ``__call__``) is the user's code
and can do what the layers do not show: a softmax over the outputs, a tanh, ``F.relu``
without an ``nn.ReLU`` module, a weight used transposed, a scaling such as a missing or
extra 1/N, the layers in another order. :func:`check_reading` runs the module on at most
:data:`ROWS` evenly spaced rows of the data, in float64 (torch: ``torch.func.functional_call``
with the parameters and buffers cast to float64 on the CPU, the user's module untouched;
equinox: the module with its arrays cast to float64, vmapped over the rows), and compares
its output f_mod with the package's forward f_read of the parameters read, entry by entry::

    |f_mod − f_read| ≤ 2 γ_K M / (1 − γ_K),   M = |A_L| (⋯ (|A_1| |x| + |b_1|) ⋯) + |b_L|,

with γ_K = Kε/(1 − Kε) (ε = 2.2e-16; Higham, *Accuracy and Stability of Numerical
Algorithms*, §3.1), A_l each layer's linear map, M the net on absolute weights, biases and
inputs at α = 1, and K = Σ_l (n_l + 8): n_l the longest sum in layer l (its fan-in: n_in for
a Linear, C_in·∏k for a convolution, S + C for the pooled readout, S positions and C
channels), and 8 for the roundings around it (the bias, σ_α's product α z, a folded
batch-norm scale γ/√(var + eps): its add, square root, division and two products, the
pooling's 1/S). Why: each of the two computations (torch's or equinox's kernels, and XLA's)
of the same net is within γ_K M of the exact one, whatever its summation order: layer by
layer ``|fl(A h + b) − (A h + b)| ≤ γ_{n_l+1} (|A| |h| + |b|)``, σ_α is 1-Lipschitz with
``|σ_α(z)| ≤ |z|``, and ``(1 + γ_j)(1 + γ_k) ≤ 1 + γ_{j+k}``; M is itself computed, hence
the 1/(1 − γ_K). The bound is worst case, not typical, so a module that is what its layers
show passes at any seed, and it is sharp to a few γ_K: an output changed by 5γ_K of M is
refused (tests/analysis/test_verify.py). A forward that is anything else is off by O(1) of
M on some entry. Where the reading's outputs on those rows stay below :data:`LARGE` the rows are
run again scaled by c so that they reach it: an operation inactive at the given weights (a
clamp to [−1, 1] of a small init's outputs) binds there, as it would once training grows the
outputs, and a reading that is the module passes at any c (the bound scales with M). The cost is
:data:`ROWS` rows through the net, three times per run: a fraction of a second at 784 → 2048 → 10
(docs/performance.md, ``benchmarks/bench_analyse.py``'s ``check_s``).

On a mismatch it refuses (:class:`~.model.UnsupportedModelError`, one line) naming the layout
read, the difference (``max |Δf|/M`` against 2γ_K, and ``‖Δf‖/‖f_read‖``), and the likely cause: the
first of these readings that explains f_mod within the same bound (4 times it for a fitted
scale; twice the row's largest for a function of the outputs, each of them 2-Lipschitz in
the row's max norm, plus 8ε of its value): a scale c (f_mod = c f_read, named as 1/N, N or
−1 when it is one), σ = ReLU applied in forward with no module, another leaky slope than the
modules' (two layers, where f is affine in α: fitted, and named), a square weight used
transposed (named), a softmax, log-softmax, clamp to [−1, 1] or [0, 1], tanh, sigmoid, abs or ReLU
of the outputs,
float32 arithmetic inside forward (ε = 1.2e-7); else a forward that is not the composition
of the listed layers.

Nothing to run: a weight file (``.safetensors``, ``.npz``), a state dict, a params tuple or a
:class:`~.model.Model` carries no forward, so it is read as it is: its shapes are checked,
nothing else can be verified.
"""

from __future__ import annotations

import sys

import jax
import jax.numpy as jnp
import numpy as np

from ..core.blocks import _outputs
from ..core.conv import Conv, PooledDense
from ..core.layers import Layer, Params
from ..core.precision import gamma
from .model import Model, UnsupportedModelError

ROWS = 256
"""At most this many rows of the data, evenly spaced (first and last included), are run."""
LARGE = 1e4
"""The second run scales the rows so that the reading's largest output is this (when it is less):
past where a clamp or saturation in forward binds for any output a net is trained to."""
EPS32 = float(np.finfo(np.float32).eps)
EPS = float(np.finfo(np.float64).eps)


def live(model) -> str | None:
    """``"torch"`` for a ``torch.nn.Module``, ``"equinox"`` for an ``eqx.Module``, else None
    (nothing to run). Neither library is imported here: a module of one means it is loaded."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(model, torch.nn.Module):
        return "torch"
    eqx = sys.modules.get("equinox")
    if eqx is not None and isinstance(model, eqx.Module):
        return "equinox"
    return None


def rows(n: int) -> np.ndarray:
    """The indices of the rows run: ``min(n, ROWS)`` evenly spaced in [0, n − 1]."""
    return np.unique(np.linspace(0, n - 1, min(n, ROWS)).round().astype(int))


def sum_length(params: Params) -> int:
    """K of the module doc: Σ_l (n_l + 8), n_l the longest sum in layer l."""
    k = 0
    for layer in params:
        if isinstance(layer, Conv):
            n = layer.c_in * int(np.prod(layer.kernel_shape))
        elif isinstance(layer, PooledDense):
            n = int(np.prod(layer.in_shape)) + layer.in_layout[0]
        else:
            n = layer.n_in
        k += n + 8
    return k


def layout(params: Params, alpha: float, names=()) -> str:
    """The net read, as a refusal names it: ``fc1 (Linear 6→8) → ReLU → fc2 (Linear 8→1)``."""
    act = {0.0: "ReLU", 1.0: "no activation"}.get(float(alpha), f"LeakyReLU({alpha:g})")
    parts = []
    for i, layer in enumerate(params):
        name = names[i] if i < len(names) else f"layer {i}"
        if isinstance(layer, Conv):
            k = "x".join(map(str, layer.kernel_shape))
            desc = (f"Conv{len(layer.in_shape)}d {layer.c_in}→{layer.c_out}, {k}, '{layer.padding}' on "
                    f"{'x'.join(map(str, layer.in_shape))}")
        elif isinstance(layer, PooledDense):
            desc = f"average pool, Linear {layer.in_layout[0]}→{layer.n_out}"
        else:
            desc = f"Linear {layer.n_in}→{layer.n_out}"
        parts.append(f"{name} ({desc}{' + bias' if layer.bias is not None else ''})")
    return f" → {act} → ".join(parts)


def _in_layout(params: Params) -> tuple[int, ...]:
    first = params[0]
    return tuple(first.in_layout) if isinstance(first, Conv | PooledDense) else (first.n_in,)


def _run_torch(module, X: np.ndarray, shape: tuple[int, ...]):
    import torch
    from torch.func import functional_call

    state = {n: t.detach().to("cpu", torch.float64) if t.is_floating_point() else t.detach().cpu()
             for named in (module.named_parameters(), module.named_buffers()) for n, t in named}
    x = torch.from_numpy(np.ascontiguousarray(X.reshape((-1, *shape))))
    with torch.no_grad():
        out = functional_call(module, state, (x,))
    if not isinstance(out, torch.Tensor):
        return f"forward returns {type(out).__name__}, not one tensor"
    return out.detach().cpu().double().numpy()


def _run_equinox(model, X: np.ndarray):
    import equinox as eqx

    m = jax.tree_util.tree_map(lambda a: jnp.asarray(a, jnp.float64) if eqx.is_inexact_array(a) else a, model)
    xs = jnp.asarray(X[:, 0] if getattr(model, "in_size", None) == "scalar" else X, jnp.float64)
    return np.asarray(jax.vmap(lambda x: m(x))(xs), dtype=float)


def _net(params, X, alpha):
    """(f_read, M, 2γ_K M/(1 − γ_K)) on ``X``: the reading, its absolute net, the bound."""
    g = gamma(sum_length(params))
    M = _outputs(jax.tree_util.tree_map(jnp.abs, params), np.abs(X), 1.0)
    return _outputs(params, X, alpha), M, 2 * g * M / (1 - g)


def _near_int(x: float) -> int | None:
    n = round(x)
    return int(n) if n >= 2 and abs(x - n) <= 1e-9 * x else None


def _scale_name(c: float) -> str:
    if c == -1.0 or abs(c + 1.0) <= 1e-9:
        return "a sign flip, −f (forward negates the layers' output)"
    sign = "−" if c < 0 else ""
    if (n := _near_int(1.0 / abs(c))) is not None:
        return f"a scaling by {sign}1/{n} in forward (a missing or extra 1/N, N = {n}?)"
    if (n := _near_int(abs(c))) is not None:
        return f"a scaling by {sign}{n} in forward (a missing or extra factor N = {n}?)"
    value = f"1 + {c - 1:.3g}" if abs(c - 1) < 1e-4 else f"{c:.6g}"
    return f"a scaling by {value} in forward that no layer shows"


_OUTPUT_FUNCTIONS = (
    ("a softmax over the outputs", lambda f: np.asarray(jax.nn.softmax(f, axis=-1))),
    ("a log-softmax over the outputs", lambda f: np.asarray(jax.nn.log_softmax(f, axis=-1))),
    ("a clamp of the outputs to [-1, 1] (clamp, hardtanh)", lambda f: np.clip(f, -1.0, 1.0)),
    ("a clamp of the outputs to [0, 1] (clamp, hardsigmoid-like)", lambda f: np.clip(f, 0.0, 1.0)),
    ("a tanh of the outputs", np.tanh),
    ("a sigmoid of the outputs", lambda f: np.asarray(jax.nn.sigmoid(f))),
    ("an abs of the outputs", np.abs),
    ("a ReLU after the last layer", lambda f: np.maximum(f, 0.0)),
)


_ORDER = "Give a module whose forward is its layers in order (an nn.Sequential, an eqx.nn.MLP)"


def _cause(f_mod, params, alpha, X, names, f, M, tol) -> tuple[str, str]:
    """The likely cause of a mismatch and its fix (module doc): the first reading that
    explains ``f_mod``."""
    if f_mod.shape != f.shape:
        return (f"forward returns shape {f_mod.shape} on {X.shape[0]} rows where the layers give {f.shape}, "
                "so it is not the composition of the listed layers"), _ORDER
    ff = float(np.vdot(f, f))
    if ff > 0:
        c = float(np.vdot(f, f_mod)) / ff
        if c != 0 and np.all(np.abs(f_mod - c * f) <= 4 * abs(c) * tol):
            return _scale_name(c), "Fold the factor into the last layer's weight, or drop it from forward"
    if alpha != 0.0:
        f0 = _outputs(params, X, 0.0)
        if np.all(np.abs(f_mod - f0) <= tol):
            return ("a ReLU applied in forward (torch.relu, F.relu, jax.nn.relu) between the layers, where "
                    "no activation module shows one"), "Put nn.ReLU() modules between the layers"
    if len(params) == 2:  # f(a) = f(0) + a (f(1) − f(0)) at two layers: the slope forward used, fitted
        f0, f1 = _outputs(params, X, 0.0), _outputs(params, X, 1.0)
        d = f1 - f0
        dd = float(np.vdot(d, d))
        a = float(np.vdot(f_mod - f0, d)) / dd if dd > 0 else None
        if a is not None and 0.0 <= a <= 1.0 and abs(a - alpha) > 1e-12:
            fa, _, tol_a = _net(params, X, a)
            if np.all(np.abs(f_mod - fa) <= 4 * tol_a):
                return (f"a leaky slope {a:.6g} in forward (F.leaky_relu(·, {a:.6g})) where the modules show "
                        f"{alpha:g}"), "Apply the activation modules the net holds, or hold the slope it uses"
    for i, layer in enumerate(params):
        if type(layer) is Layer and layer.W.shape[0] == layer.W.shape[1]:
            turned = params[:i] + (Layer(layer.W.T, layer.b),) + params[i + 1:]
            ft, _, tol_t = _net(turned, X, alpha)
            if np.all(np.abs(f_mod - ft) <= tol_t):
                name = names[i] if i < len(names) else f"layer {i}"
                return (f"{name}'s weight used transposed in forward (h Wᵀ read, h W computed)",
                        f"Store {name}'s weight as forward uses it (its transpose), called as nn.Linear does")
    row_tol = 2 * np.max(tol, axis=-1, keepdims=True)  # each function is 2-Lipschitz in the row's max norm
    for what, g in _OUTPUT_FUNCTIONS:
        gf = g(f)
        if np.all(np.abs(f_mod - gf) <= row_tol + 8 * EPS * np.abs(gf)):
            return (f"{what} in forward, which no layer shows",
                    "Analyse the layers' output (the logits): leave the function out of forward")
    k = sum_length(params) + 1
    if np.all(np.abs(f_mod - f) <= 2 * gamma(k, EPS32) * M):
        return ("float32 arithmetic inside forward (a .float() cast or float32 constants)",
                "Keep forward in its inputs' dtype")
    return ("a nonlinearity in forward that the layers do not show (a softmax, tanh, abs, ...), or a forward "
            "that is not the composition of the listed layers in their order"), _ORDER


def check_reading(model, params: Params, alpha: float, X, *, what: str = "model", names=()) -> None:
    """Run ``model`` (a torch or equinox module, or a :class:`~.model.Model` read from one:
    its ``origin``; anything else has nothing to run: returns) on
    :func:`rows` of ``X`` (N, n_in, flat; a conv net's rows reshaped to ``(C, *in_shape)``) and
    refuse, in one line (module doc), a reading ``params`` at slope ``alpha`` (names ``names``,
    biases that are exactly zero dropped or not) whose output it does not reproduce within
    the round-off bound 2γ_K M."""
    if isinstance(model, Model):  # read here from a live module (from_torch, from_equinox): that one
        model = model.origin
    kind = live(model)
    if kind is None:
        return
    with jax.enable_x64(True):  # float64 whatever the caller's setting (analyse's already is)
        _check(model, kind, params, alpha, X, what, names)


def _check(model, kind, params, alpha, X, what, names) -> None:
    """The rows as given, then the same rows × c where the reading's outputs reach :data:`LARGE`
    (module doc): an operation in forward that is inactive at the given weights (a clamp, a
    saturation) is seen where training can take the outputs."""
    Xs = np.asarray(X, dtype=float)[rows(np.shape(X)[0])]
    f = _compare(model, kind, params, alpha, Xs, what, names, "")
    top = float(np.max(np.abs(f), initial=0.0))
    if 0 < top < LARGE:
        c = LARGE / top
        _compare(model, kind, params, alpha, c * Xs, what, names, f" × {c:.3g} (outputs up to {LARGE:g})")


def _compare(model, kind, params, alpha, Xs, what, names, scaled: str) -> np.ndarray:
    """Refuse (module doc) unless the module's output on ``Xs`` is the reading's within 2γ_K M;
    the reading's output. ``scaled`` says how the rows were scaled, for the message."""
    source = f"{kind}:{type(model).__name__}"
    try:
        out = _run_torch(model, Xs, _in_layout(params)) if kind == "torch" else _run_equinox(model, Xs)
    except Exception as e:  # noqa: BLE001 - any failure of the user's forward: refused, named
        msg = str(e).strip().splitlines()[0] if str(e).strip() else ""
        raise UnsupportedModelError(
            f"{what} ({source}): running it on {len(Xs)} rows of the data, float64 inputs of shape (N, "
            f"{', '.join(map(str, _in_layout(params)))}), failed ({type(e).__name__}: {msg}), so its "
            f"reading {layout(params, alpha, names)} cannot be checked. Give a module whose forward takes "
            "such inputs, or its state_dict() to biasfree.models.from_state_dict (read, not run)") from None
    f, M, tol = _net(params, Xs, alpha)
    if isinstance(out, str):
        cause, fix = out, _ORDER
    else:
        f_mod = out.reshape(len(Xs), -1) if out.size == f.size else out
        if f_mod.shape == f.shape and np.all(np.abs(f_mod - f) <= tol):
            return f
        cause, fix = _cause(f_mod, params, alpha, Xs, names, f, M, tol)
    g = gamma(sum_length(params))
    if isinstance(out, str) or f_mod.shape != f.shape:
        size = ""
    else:
        d = np.abs(f_mod - f)
        worst = float(np.max(d / np.where(M > 0, M, np.nan), initial=0.0, where=M > 0))
        worst = np.inf if np.any(d[M == 0] > 0) else worst
        rel = float(np.linalg.norm(d) / np.linalg.norm(f)) if np.any(f) else np.inf
        size = (f"max |Δf|/M = {worst:.3g} > 2γ_K = {2 * g:.2g} (K = {sum_length(params)}, M = the net on "
                f"absolute weights and inputs), ‖Δf‖/‖f‖ = {rel:.3g}; ")
    raise UnsupportedModelError(
        f"{what} ({source}): running it on {len(Xs)} rows of the data{scaled} does not give the net read "
        f"from its layers, {layout(params, alpha, names)}: {size}likely cause: {cause}. {fix}")
