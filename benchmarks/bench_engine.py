"""Side-by-side timings of the training engine, reported as ratios measured in one run.

Workload (the issue's): a two-layer ReLU net, d = 20, width 500, N = 1024 symmetric
points, full-batch GD, float64, the same weights and data in every arm.

1. ours (jit + scan) against a PyTorch loop (nn.Linear(bias=False), LeakyReLU, SGD) at
   the same precision, float64 and float32 (skipped with a line if torch is missing:
   ``pip install -e '.[torch]'``);
2. the symmetric-data fast path against the general path;
3. an ensemble of B = 6 slopes against the same 6 runs one after another, at the
   headline size and at a small size (d 20, width 40, N 400) where per-step overhead
   dominates; the batched-GEMM layout (``vmap``) alongside;
4. ours in GFLOP/s (the FLOPs of the compiled fast-path step, as XLA's cost analysis
   counts them: only what runs) as a fraction of this machine's float64 matmul rate
   (2048³), measured in the same run, and the memory traffic a step (the step is
   bandwidth-bound: its GEMMs have an inner size d = 20);
5. the peak memory (RSS) of the paper-size headline experiment (a subprocess);
6. a conv arm: GD on a two-layer bias-free conv net (``bf.init_conv``: 512 Gaussian 8×8
   inputs, Conv2d 1→16, 3×3, 'same', ReLU, dense readout), ours against a plain PyTorch
   loop (``Conv2d(bias=False) → ReLU → Flatten → Linear(bias=False)``, the same init, loss
   and step, float64, ``torch.set_num_threads`` = the cores XLA uses), with the gap of the
   final weights and losses against a derived round-off bound (:func:`conv_roundoff_bound`):
   the two compute the same thing;
7. an optimiser arm, ``bf.train`` (the optax path) on the headline problem: ``optax.sgd(η)``
   against gradient descent (``bf.train(params, data, bf.GDConfig(...))``, the loop's own
   ``optax.sgd``) at the same η and steps (time ratio, goal ≤ 1.1, final loss bitwise),
   and ``optax.adam`` against a ``torch.optim.Adam`` loop (same ε, same init) at float64 and
   float32, the final losses' relative gap beside a first-order round-off estimate
   (:func:`adam_roundoff_bound`);
8. the loop a JAX user writes in ten lines (:func:`hand_loop`: ``jit`` + ``lax.scan`` +
   ``value_and_grad`` of the half-MSE, recording the loss at every step, on the data as
   given) against ``bf.train`` with its default records (101 records of every observable:
   loss, β_eff, even energy, singular values, conserved quantities) on the same problem
   (``vs_hand_loop``: hand/ours, goal ≥ 1.3), and the cost of those records over a run with 2
   (``record_overhead``: default/2-record time − 1, goal ≤ 0.10);
9. linear attention (``attention_arm.py``): merged attention trained through its linear twin
   on z against a PyTorch loop of the attention (``attention_twin_vs_torch_f64``, goal ≥ 3) and
   against our engine running the attention itself, D 8, N 32, 8 heads, 20,000 sequences.

Each arm is compiled and run once before it is timed; arms alternate and each ratio uses
the fastest of its repeats, which keeps ratios honest on a shared machine. Members of
an ensemble spread over host devices, so this script asks XLA for one CPU device per
core before JAX starts (a GPU machine ignores it). ``--json FILE`` writes the ratios.

Run: ``make bench`` (or ``.venv/bin/python benchmarks/bench_engine.py [--quick]
[--json FILE] [--only conv|attention]``; ``--only NAME`` runs that arm alone).
"""

from __future__ import annotations

import os

if "xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count="
                               f"{os.cpu_count() or 1}").strip()

import argparse  # noqa: E402
import dataclasses  # noqa: E402
import json  # noqa: E402
import resource  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402
from attention_arm import attention_arm  # noqa: E402  (this folder is on sys.path when run)
from bench_checks import NotAResult, finite_or_fail  # noqa: E402

import biasfree as bf  # noqa: E402
from biasfree import store  # noqa: E402


def timed(fn) -> float:
    t0 = time.perf_counter()
    jax.block_until_ready(fn())
    return time.perf_counter() - t0


def race(arms: dict, repeat: int, warm: bool = True) -> dict:
    """Fastest of ``repeat`` timings per arm, the arms alternating (each first run once
    to compile and warm up, unless ``warm`` is False)."""
    for fn in arms.values() if warm else ():
        jax.block_until_ready(fn())
    best = {k: float("inf") for k in arms}
    for _ in range(repeat):
        for k, fn in arms.items():
            best[k] = min(best[k], timed(fn))
    return best


def headline(d=20, width=500, n_half=512, seed=0, mirror=True):
    key = jax.random.PRNGKey(seed)
    target, _ = bf.sine_target(key, d)
    data = bf.make_dataset(key, target, n_half, d, whitened=True)
    if not mirror:
        data = bf.Dataset(data.X, data.Y, mirror=False)
    params = bf.init_gaussian(jax.random.PRNGKey(1), (d, width, 1), 0.01)
    return data, params


MATMUL_N = 2048


def matmul_arm():
    """One float64 MATMUL_N³ matmul (2n³ FLOPs), as an arm of :func:`race`."""
    with jax.enable_x64(True):
        a = jax.random.normal(jax.random.PRNGKey(0), (MATMUL_N, MATMUL_N), dtype=jnp.float64)
        f = jax.jit(lambda x: x @ x)

        def run():
            with jax.enable_x64(True):
                return f(a)

    return run


def step_cost(data, params) -> tuple[float, float]:
    """``(FLOPs, bytes)`` of one compiled GD step (gradient and update) on ``data``, as
    XLA's cost analysis counts them for the program it runs: only what is executed (the
    fast path's halved products included), elementwise work counted too."""
    from biasfree.dynamics.run import grad_fn

    grad = grad_fn(data.mirrored)
    with jax.enable_x64(True):
        step = jax.jit(lambda p, X, Y: jax.tree_util.tree_map(
            lambda a, b: a - 0.01 * b, p, grad(p, X, Y, 0.0, 0.0, "mse")[0]))
        cost = step.lower(params, data.inputs, data.Y).compile().cost_analysis()
    cost = cost[0] if isinstance(cost, list) else cost
    return float(cost["flops"]), float(cost["bytes accessed"])


# ------------------------------------------------------------------ PyTorch reference


def torch_arm(data, params, steps, lr, dtype: str, optim: str = "SGD", **opt_kw):
    """The same training in a plain PyTorch loop, ``torch.optim.<optim>(lr=lr, **opt_kw)``
    (plain SGD is our GD); ``run()`` trains from ``params`` and returns the final loss."""
    import torch

    tdt = {"float64": torch.float64, "float32": torch.float32}[dtype]
    dev = "cuda" if torch.cuda.is_available() and jax.default_backend() == "gpu" else "cpu"
    X = torch.tensor(np.asarray(data.X), dtype=tdt, device=dev)
    Y = torch.tensor(np.asarray(data.Y), dtype=tdt, device=dev)
    W1, W2 = (np.asarray(layer.W) for layer in params)
    d, h = W1.shape[1], W1.shape[0]

    def run():
        net = torch.nn.Sequential(torch.nn.Linear(d, h, bias=False), torch.nn.LeakyReLU(0.0),
                                  torch.nn.Linear(h, 1, bias=False)).to(dev, tdt)
        with torch.no_grad():
            net[0].weight.copy_(torch.tensor(W1))
            net[2].weight.copy_(torch.tensor(W2))
        opt = getattr(torch.optim, optim)(net.parameters(), lr=lr, **opt_kw)
        for _ in range(steps):
            opt.zero_grad(set_to_none=True)
            loss = 0.5 * ((net(X) - Y) ** 2).sum(dim=1).mean()
            loss.backward()
            opt.step()
        if dev == "cuda":
            torch.cuda.synchronize()
        with torch.no_grad():
            return float(0.5 * ((net(X) - Y) ** 2).sum(dim=1).mean())

    return run


# ------------------------------------------------------------------ conv arm (issue 21 item 6)

CONV = {"N": 512, "side": 8, "channels": 16, "kernel": 3}


def conv_problem(seed: int = 3):
    """The conv arm's workload: N Gaussian 8×8 single-channel inputs (flat, (N, 64)),
    targets from a teacher of the same architecture, and a student from ``bf.init_conv``:
    C channels, 3×3 kernel, 'same' padding, dense readout, bias-free, weights ~ N(0, 1/fan-in).
    The data are not mirror-symmetric: ours runs its general path, the same work as torch's."""
    N, S, C, k = CONV["N"], CONV["side"], CONV["channels"], CONV["kernel"]
    scales = (1 / k, 1 / np.sqrt(C * S * S))
    with jax.enable_x64(True):
        X = np.asarray(jax.random.normal(jax.random.PRNGKey(seed), (N, S * S), dtype=jnp.float64))
        teacher = bf.init_conv(jax.random.PRNGKey(seed + 1), (S, S), (1, C), k, 1, scales)
        Y = np.asarray(bf.forward(teacher, X, 0.0))
        params = bf.init_conv(jax.random.PRNGKey(seed + 2), (S, S), (1, C), k, 1, scales)
    return bf.Dataset(X, Y, mirror=False), params


def conv_torch(data, params, steps: int, lr: float, record: bool = False):
    """The same GD in a plain PyTorch loop: ``Conv2d(bias=False) → ReLU → Flatten →
    Linear(bias=False)``, float64, ``torch.optim.SGD`` at ``lr``, loss ½·mean_n ||f(x_n) − y_n||²
    (ours), the init weights copied. ``run()`` returns (final loss, K, W₂), and with ``record``
    also the per-step magnitudes of :func:`conv_magnitudes` (an untimed run)."""
    import torch

    S, C, k = CONV["side"], CONV["channels"], CONV["kernel"]
    X = torch.tensor(np.asarray(data.X)).reshape(-1, 1, S, S)
    Y = torch.tensor(np.asarray(data.Y))
    K0, W0 = np.asarray(params[0].K), np.asarray(params[1].W)

    def run():
        net = torch.nn.Sequential(torch.nn.Conv2d(1, C, k, padding="same", bias=False), torch.nn.ReLU(),
                                  torch.nn.Flatten(), torch.nn.Linear(C * S * S, 1, bias=False)
                                  ).to(torch.float64)
        with torch.no_grad():
            net[0].weight.copy_(torch.tensor(K0))
            net[3].weight.copy_(torch.tensor(W0))
        opt = torch.optim.SGD(net.parameters(), lr=lr)
        mags = []
        for _ in range(steps):
            opt.zero_grad(set_to_none=True)
            loss = 0.5 * ((net(X) - Y) ** 2).sum(dim=1).mean()
            loss.backward()
            if record:
                mags.append(conv_magnitudes(net[0].weight.detach(), net[3].weight.detach(), X, Y))
            opt.step()
        with torch.no_grad():
            out = (float(0.5 * ((net(X) - Y) ** 2).sum(dim=1).mean()), net[0].weight.numpy().copy(),
                   net[3].weight.numpy().copy())
        if record:
            out += (mags, conv_magnitudes(net[0].weight.detach(), net[3].weight.detach(), X, Y))
        return out

    return run


def conv_magnitudes(K, W2, X, Y) -> dict:
    """At weights (K, W₂) of ``f(x) = W₂ relu(conv_K(x))`` on (X, Y) (torch, float64), what
    :func:`conv_roundoff_bound` needs: ``gabs`` = ||the gradient evaluated on absolute values||₂
    (|K|, |W₂|, |x|, relu(z) → |K|*|x| ≥ |z|, relu' → 1, residual → |W₂||h| + |y|), ``ell_abs`` the
    loss so evaluated, ``grad`` = ||∇ℓ||₂, ``L_gn`` = (||H||_F + √taps·||W₂||_F·||X||_F)²/N ≥ the
    norm of the Gauss–Newton term JᵀJ/N (||conv_dK x||₂ ≤ √taps·||dK||_F·||x||₂, taps = k²), and
    ``rho`` = √taps·||r||₂·||X||_F/N ≥ the norm of the residual term (1/N)Σ r_n ∇²f_n."""
    import torch

    N, taps = X.shape[0], K.shape[2] * K.shape[3]
    K, W2 = K.clone().requires_grad_(True), W2.clone().requires_grad_(True)
    H = torch.relu(torch.nn.functional.conv2d(X, K, padding="same")).flatten(1)
    r = H @ W2.T - Y
    grad = torch.autograd.grad(0.5 * (r**2).sum(dim=1).mean(), (K, W2))
    with torch.no_grad():
        Ha = torch.nn.functional.conv2d(X.abs(), K.abs(), padding="same").flatten(1)
        ra = Ha @ W2.abs().T + Y.abs()
        back = (ra @ W2.abs()).reshape(N, K.shape[0], X.shape[2], X.shape[3])
        gabs = torch.cat([(ra.T @ Ha / N).reshape(-1),
                          torch.nn.grad.conv2d_weight(X.abs(), K.shape, back, padding=K.shape[2] // 2)
                          .reshape(-1) / N])
        Xf = X.norm()
        return {"gabs": float(gabs.norm()), "ell_abs": float(0.5 * (ra**2).sum(dim=1).mean()),
                "grad": float(torch.cat([g.reshape(-1) for g in grad]).norm()),
                "L_gn": float((H.norm() + taps**0.5 * W2.norm() * Xf) ** 2 / N),
                "rho": float(taps**0.5 * r.norm() * Xf / N)}


def conv_roundoff_bound(mags: list, final: dict, lr: float) -> tuple[float, float]:
    """``(B_θ, B_ℓ)``: bounds on ||θ_ours − θ_torch||₂ after the T recorded steps and on the
    gap of the final losses, when both run the same GD in float64 with any summation order.

    One step from the same iterate: every update entry is one expression of sums and
    products whose longest chain has ``k = taps·C_in + C·S² + 1 + N·S² + 3`` terms (conv,
    readout, residual, the K-gradient's sum over points and positions, ×1/N, ×η, the
    subtraction), so two kernels differ by ``δ_t = 2γ_k·η·gabs_t`` (Higham §3.1: γ_k times the
    expression on absolute values). A gap e_t already there grows by at most ||I − η∇²ℓ||,
    ≤ ``a_t = 1 + η·rho_t`` while η·L_gn ≤ 2 (the Gauss–Newton part is PSD with norm ≤ L_gn), else
    ``1 + η(L_gn + rho)``: ``B_{t+1} = a_t B_t + δ_t``, B_0 = 0 (the init is copied exactly). It
    assumes no ReLU pre-activation sits within round-off of 0 (a flip there is not bounded).
    Losses: ``B_ℓ = ||∇ℓ||·B_θ + (L_gn + rho)/2·B_θ² + 2γ_{k_ℓ}·ell_abs``, k_ℓ = taps + C·S² + N + 3."""
    N, S, C, taps = CONV["N"], CONV["side"], CONV["channels"], CONV["kernel"] ** 2
    k = taps + C * S * S + 1 + N * S * S + 3
    B = 0.0
    for m in mags:
        a = 1 + lr * m["rho"] if lr * m["L_gn"] <= 2 else 1 + lr * (m["L_gn"] + m["rho"])
        B = a * B + 2 * gamma(k) * lr * m["gabs"]
    B_loss = (final["grad"] * B + (final["L_gn"] + final["rho"]) / 2 * B**2
              + 2 * gamma(taps + C * S * S + N + 3) * final["ell_abs"])
    return B, B_loss


def gamma(k: int, dtype=np.float64) -> float:
    """``γ_k = kε/(1 − kε)`` in ``dtype`` (Higham's bound on a sum of k products)."""
    eps = float(np.finfo(dtype).eps)
    return k * eps / (1 - k * eps)


def conv_arm(steps: int, repeat: int) -> tuple[float, str]:
    """Ours against PyTorch on the conv workload: (time ratio torch/ours, the report line)."""
    import torch

    torch.set_num_threads(os.cpu_count() or 1)  # XLA's CPU client runs one thread per core
    data, params = conv_problem()
    mags0 = conv_magnitudes(torch.tensor(np.asarray(params[0].K)), torch.tensor(np.asarray(params[1].W)),
                            torch.tensor(np.asarray(data.X)).reshape(-1, 1, CONV["side"], CONV["side"]),
                            torch.tensor(np.asarray(data.Y)))
    lr = 1.0 / mags0["L_gn"]  # the classical 1/L step with L the Gauss–Newton bound at init
    cfg = bf.GDConfig(alpha=0.0, lr=lr, steps=steps, n_records=2)
    run_t = conv_torch(data, params, steps, lr)
    run_t()  # warm-up; ours is compiled by race's warm-up
    tt = race({"ours": lambda: bf.train(params, data, cfg).loss, "torch": run_t}, repeat)
    ours = bf.train(params, data, cfg)
    L_t, K_t, W_t, mags, final = conv_torch(data, params, steps, lr, record=True)()
    finite_or_fail("conv", ours=float(ours.loss[-1]), torch=L_t)
    dtheta = max(float(np.max(np.abs(np.asarray(ours.params[0].K) - K_t))),
                 float(np.max(np.abs(np.asarray(ours.params[1].W) - W_t))))
    dloss = abs(float(ours.loss[-1]) - L_t)
    B, B_loss = conv_roundoff_bound(mags, final, lr)
    ok = "within" if dtheta <= B and dloss <= B_loss else "OUTSIDE"
    line = (f"[conv] GD {steps} steps, N={CONV['N']} 8×8 inputs, Conv2d 1→{CONV['channels']} 3×3 'same' → "
            f"ReLU → dense readout, float64, lr {lr:.3g}: ours {tt['ours']:.2f}s, PyTorch loop "
            f"{tt['torch']:.2f}s ({torch.get_num_threads()} threads) -> ours {tt['torch'] / tt['ours']:.2f}x "
            f"faster; final loss {float(ours.loss[0]):.4g} -> {L_t:.6g}; max|Δθ| {dtheta:.2g} (bound "
            f"{B:.2g}), |Δloss| {dloss:.2g} (bound {B_loss:.2g}): {ok} the round-off bound")
    return tt["torch"] / tt["ours"], line


# ------------------------------------------------------------------ optimiser arm: bf.train (optax)

ADAM = {"lr": 1e-3, "eps": 1e-8}
"""Adam of the optimiser arm: ``optax.adam(lr, eps=eps)`` and ``torch.optim.Adam(lr=lr,
eps=eps)``, both with β = (0.9, 0.999), ε added to √v̂ (the same update rule)."""


def adam_response(data, params, steps: int, adam, rel: float = 1e-7) -> float:
    """``(|ΔL_init| + |ΔL_data|) / rel``: how far our float64 run under ``adam`` (one optax object,
    so one compiled program) ends in loss from where it ends unperturbed when
    the init, then the data (X₊ and Y₊, mirrored again), are scaled entrywise by
    ``1 ± rel`` (random signs) for the whole run. :func:`adam_roundoff_bound` scales it."""
    rng = np.random.default_rng(0)

    def jiggle(a):
        return np.asarray(a) * (1 + rel * rng.choice([-1.0, 1.0], size=np.shape(a)))

    def final(p, d):
        return float(bf.train(p, d, adam, steps=steps, n_records=2).loss[-1])

    half = np.asarray(data.Y).shape[0] // 2
    moved_data = bf.Dataset(*bf.symmetrize(jiggle(data.inputs), jiggle(np.asarray(data.Y)[:half])))
    base = final(params, data)
    by_init = final(jax.tree_util.tree_map(jiggle, params), data)
    return (abs(by_init - base) + abs(final(params, moved_data) - base)) / rel


def adam_roundoff_bound(loss: float, response: float, steps: int, k: int, dtype) -> float:
    """A first-order estimate of how far two correct ``steps``-step Adam runs in ``dtype``
    (any summation order) may end apart in loss: each computed step is an exact step from
    weights and data perturbed entrywise by at most 2γ_k relative (Higham §3.5; Adam's own
    few operations an entry add O(ε), inside γ_k), and such a perturbation at any step moves
    the final loss by at most the run's measured response to the same relative perturbation
    kept for the whole run (:func:`adam_response`): ``steps · 2γ_k · response + 2γ_k·|L|``.
    Adam is not contractive (it divides by √v̂, so small gradients get steps of size η), so
    the response, not a contraction factor, carries the amplification; first order only."""
    g = 2 * gamma(k, dtype)
    return steps * g * response + g * abs(loss)


def hand_loop(data, params, steps: int, lr: float):
    """The ten-line loop a JAX user writes: full-batch GD on ½·MSE of a bias-free two-layer ReLU
    net, ``jit`` + ``lax.scan`` + ``value_and_grad``, the loss of every step stacked. Returns
    an arm of :func:`race` (float64; the data as given, ``[X₊; −X₊]`` in full)."""
    with jax.enable_x64(True):
        X, Y = jnp.asarray(np.asarray(data.X)), jnp.asarray(np.asarray(data.Y))
        W1, W2 = (jnp.asarray(np.asarray(la.W)) for la in params)

        def loss(p):
            return 0.5 * jnp.mean(jnp.sum((jax.nn.relu(X @ p[0].T) @ p[1].T - Y) ** 2, axis=1))

        @jax.jit
        def fit(p):
            def step(p, _):
                L, g = jax.value_and_grad(loss)(p)
                return jax.tree_util.tree_map(lambda a, b: a - lr * b, p, g), L
            return jax.lax.scan(step, p, None, length=steps)

    def run():
        with jax.enable_x64(True):
            return fit((W1, W2))[1]
    return run


def hand_loop_arm(data, params, cfg: bf.GDConfig, repeat: int) -> tuple[dict, str]:
    """``bf.train`` with its default records against :func:`hand_loop`, and the records' cost."""
    default = dataclasses.replace(cfg, n_records=bf.GDConfig().n_records)
    hand = hand_loop(data, params, cfg.steps, cfg.lr)
    t = race({"hand": hand, "ours": lambda: bf.train(params, data, default).loss,
              "two": lambda: bf.train(params, data, cfg).loss}, repeat)
    L_hand, L_ours = float(hand()[-1]), float(bf.train(params, data, default).loss[-1])
    finite_or_fail("hand loop", hand=L_hand, ours=L_ours)
    out = {"vs_hand_loop": t["hand"] / t["ours"], "record_overhead": t["ours"] / t["two"] - 1.0}
    return out, (f"[hand loop] jit+scan+value_and_grad {t['hand']:.2f}s, bf.train with {default.n_records} "
                 f"records {t['ours']:.2f}s -> ours {out['vs_hand_loop']:.2f}x (goal >= 1.3); with 2 records "
                 f"{t['two']:.2f}s: records cost {100 * out['record_overhead']:.1f}% (goal <= 10%); final "
                 f"loss hand {L_hand:.12g} (the loss before the last step) vs ours {L_ours:.12g}")


def optimiser_arm(data, params, cfg: bf.GDConfig, repeat: int, torch_ok: bool) -> tuple[dict, list[str]]:
    """``bf.train`` (optax) on the headline problem: ``optax.sgd`` against GD (``bf.train`` with
    the GDConfig) at the same η and steps (``train_sgd_vs_gd``: time ratio train/gd, goal ≤ 1.1),
    and, with torch,
    ``optax.adam`` against a ``torch.optim.Adam`` loop at float64 and float32
    (``adam_vs_torch_f64``/``_f32``: torch/ours), final losses against
    :func:`adam_roundoff_bound`. Returns (ratios and measured gaps, report lines)."""
    out, lines = {}, []
    steps = cfg.steps
    sgd = optax.sgd(cfg.lr)

    def train_sgd():
        return bf.train(params, data, sgd, steps=steps, n_records=2).loss

    t = race({"gd": lambda: bf.train(params, data, cfg).loss, "train": train_sgd}, repeat)
    out["train_sgd_vs_gd"] = t["train"] / t["gd"]
    L_tr, L_gd = float(train_sgd()[-1]), float(bf.train(params, data, cfg).loss[-1])
    finite_or_fail("optax sgd", train=L_tr, gd=L_gd)
    same = "bitwise" if L_tr == L_gd else f"relative gap {abs(L_tr - L_gd) / abs(L_gd):.2g}"
    lines.append(f"[optax] train(optax.sgd({cfg.lr})) {t['train']:.2f}s vs gd {t['gd']:.2f}s, {steps} steps "
                 f"-> {out['train_sgd_vs_gd']:.3f} of gd's time (goal <= 1.1); final loss {L_tr:.17g} vs "
                 f"{L_gd:.17g}: {same}")
    if not torch_ok:
        return out, lines

    import torch

    adam = optax.adam(ADAM["lr"], eps=ADAM["eps"])
    d, width = params[0].W.shape[1], params[0].W.shape[0]
    N = np.asarray(data.Y).shape[0]
    k = d + width + N + 4  # z = W₁x, readout, − y, W₂ᵀr, the sum over points, ×1/N, Adam's update
    response = adam_response(data, params, steps, adam)  # also compiles ours at float64
    for dt, key in (("float64", "adam_vs_torch_f64"), ("float32", "adam_vs_torch_f32")):
        def ours(dt=dt):
            return bf.train(params, data, adam, steps=steps, n_records=2, precision=dt).loss

        run_t = torch_arm(data, params, steps, ADAM["lr"], dt, "Adam", eps=ADAM["eps"])
        L_ours, L_t = float(ours()[-1]), run_t()  # also the warm-ups
        finite_or_fail(f"optax adam {dt}", ours=L_ours, torch=L_t)
        tt = race({"ours": ours, "torch": run_t}, max(1, repeat - 1), warm=False)
        out[key] = tt["torch"] / tt["ours"]
        gap = abs(L_ours - L_t) / abs(L_t)
        bound = adam_roundoff_bound(L_t, response, steps, k, np.dtype(dt)) / abs(L_t)
        out[key.replace("vs_torch", "loss_gap")] = gap
        lines.append(f"[optax] adam(lr={ADAM['lr']}, eps={ADAM['eps']}) {dt}: ours {tt['ours']:.2f}s, "
                     f"torch.optim.Adam loop {tt['torch']:.2f}s ({torch.get_num_threads()} threads) -> ours "
                     f"{out[key]:.2f}x faster; final loss ours {L_ours:.12g} vs torch {L_t:.12g}: "
                     f"relative gap {gap:.2g}, round-off estimate {bound:.2g} (response {response:.3g}, "
                     f"k {k}): {'within' if gap <= bound else 'OUTSIDE'}")
    return out, lines


def write_json(out: dict, json_path: str | None) -> None:
    print("ratios:", json.dumps({k: float(f"{v:.4g}") for k, v in out.items()}))  # the gaps are ~1e-16
    if json_path:
        store.write_json(json_path, out)


def main(quick: bool, json_path: str | None, rss: bool, only: str | None = None) -> dict:
    steps = 300 if quick else 3000
    repeat = 2 if quick else 3
    lr = 0.02
    out: dict[str, float] = {}
    print(f"machine: {jax.default_backend()} backend, {len(jax.devices())} JAX device(s), "
          f"{os.cpu_count()} CPU cores; steps={steps}, best of {repeat}")
    if only == "conv":  # the conv arm alone (item 6), at the size and repeats of the full run
        out["vs_torch_conv_f64"], line = conv_arm(300, max(1, repeat - 1))
        print(line)
        write_json(out, json_path)
        return out

    if only == "attention":  # item 9 alone
        try:
            import torch  # noqa: F401
            torch_ok = True
        except ImportError:
            torch_ok = False
        att_out, att_lines = attention_arm(20 if quick else 200, max(1, repeat - 1), race, gamma, torch_ok)
        out.update(att_out)
        print("\n".join(att_lines))
        write_json(out, json_path)
        return out

    data, params = headline()
    general, _ = headline(mirror=False)
    cfg = bf.GDConfig(alpha=0.0, lr=lr, steps=steps, n_records=2)

    # -- 2. symmetric fast path vs general path (and our float32)
    # the matmul rate is an arm of the same race, so that both see the same machine load
    t = race({"sym": lambda: bf.train(params, data, cfg).loss,
              "gen": lambda: bf.train(params, general, cfg).loss,
              "sym32": lambda: bf.train(params, data, cfg, precision="float32").loss,
              "matmul": matmul_arm()}, repeat)
    out["symmetric_speedup"] = t["gen"] / t["sym"]
    print(f"[symmetric] GD {steps} steps, N=1024, d=20, width 500, float64: fast path "
          f"{t['sym']:.2f}s, general path {t['gen']:.2f}s -> {out['symmetric_speedup']:.2f}x; "
          f"float32 fast path {t['sym32']:.2f}s")

    # -- 4. GFLOP/s against the machine's matmul rate
    rate = 2 * MATMUL_N**3 / t["matmul"] / 1e9
    flops, moved = step_cost(data, params)
    ours = flops * steps / t["sym"] / 1e9
    out["matmul_fraction"] = ours / rate
    print(f"[flops] ours {ours:.1f} GFLOP/s ({flops / 1e6:.1f} MFLOP a step as XLA counts the fast path's "
          f"program) vs float64 matmul 2048³ {rate:.1f} GFLOP/s -> {out['matmul_fraction']:.2f} of the "
          f"matmul rate; {moved / 1e6:.1f} MB moved a step, {moved * steps / t['sym'] / 1e9:.0f} GB/s")

    # -- 1. PyTorch at the same precision
    try:
        import torch
    except ImportError:
        torch = None
        print("[torch] skipped: PyTorch is not installed (pip install -e '.[torch]')")
    if torch is not None:
        for dt, key in (("float64", "vs_torch_f64"), ("float32", "vs_torch_f32")):
            run_t = torch_arm(data, params, steps, lr, dt)
            L_torch = run_t()  # also its warm-up; ours is compiled above (sym, sym32)
            def ours_fn(dt=dt):
                return bf.train(params, data, cfg, precision=dt).loss

            tt = race({"ours": ours_fn, "torch": run_t}, max(1, repeat - 1), warm=False)
            L_ours = float(bf.train(params, data, cfg, precision=dt).loss[-1])
            finite_or_fail(f"torch {dt}", ours=L_ours, torch=L_torch)
            out[key] = tt["torch"] / tt["ours"]
            print(f"[torch] {dt}: ours {tt['ours']:.2f}s, PyTorch loop {tt['torch']:.2f}s "
                  f"({torch.get_num_threads()} threads) -> ours {out[key]:.2f}x faster; final "
                  f"loss ours {L_ours:.10g} vs torch {L_torch:.10g}")
        out["vs_torch_conv_f64"], line = conv_arm(300, max(1, repeat - 1))  # a few hundred steps
        print(line)

    # -- 8. the hand-written JAX loop, and what the default records cost
    hl_out, hl_line = hand_loop_arm(data, params, cfg, repeat)
    out.update(hl_out)
    print(hl_line)

    # -- 7. bf.train (optax): SGD against gd, Adam against torch.optim.Adam
    opt_out, opt_lines = optimiser_arm(data, params, cfg, repeat, torch is not None)
    out.update(opt_out)
    print("\n".join(opt_lines))

    # -- 9. linear attention: the twin on z against PyTorch and against our attention
    att_out, att_lines = attention_arm(20 if quick else 200, max(1, repeat - 1), race, gamma,
                                       torch is not None)
    out.update(att_out)
    print("\n".join(att_lines))

    # -- 3. ensembles vs sequential runs
    B = 6
    alphas = np.linspace(0.0, 1.0, B)
    for label, (d, width, n_half, n_steps) in {
            "": (20, 500, 512, 300 if quick else 1000),
            "_small": (20, 40, 200, 500 if quick else 5000)}.items():
        dat, _ = headline(d, width, n_half)
        keys = jax.random.split(jax.random.PRNGKey(2), B)
        batch = jax.vmap(lambda k, d=d, width=width: bf.init_gaussian(k, (d, width, 1), 0.01))(keys)
        members = [jax.tree_util.tree_map(lambda a, i=i: a[i], batch) for i in range(B)]
        ecfg = bf.GDConfig(lr=lr, steps=n_steps, n_records=2)
        cfgs = [bf.GDConfig(alpha=float(a), lr=lr, steps=n_steps, n_records=2) for a in alphas]

        def sequential(dat=dat, members=members, cfgs=cfgs):
            return [bf.train(p, dat, c).loss for p, c in zip(members, cfgs, strict=True)]

        te = race({"ens": lambda dat=dat, batch=batch, ecfg=ecfg: bf.train(
                       batch, dat, ecfg, alpha=alphas, batched=True).loss,
                   "vmap": lambda dat=dat, batch=batch, ecfg=ecfg: bf.train(
                       batch, dat, ecfg, alpha=alphas, batched=True, layout="vmap").loss,
                   "seq": sequential}, repeat)
        out["ensemble_vs_sequential" + label] = te["seq"] / te["ens"]
        print(f"[ensemble{label}] B={B} slopes, d={d}, width {width}, N={2 * n_half}, {n_steps} "
              f"steps: ensemble {te['ens']:.2f}s (layout auto, {len(jax.devices())} device(s)), "
              f"{B} sequential runs {te['seq']:.2f}s -> {out['ensemble_vs_sequential' + label]:.2f}x;"
              f" vmap layout {te['vmap']:.2f}s -> {te['seq'] / te['vmap']:.2f}x")

    # -- 5. peak memory of the paper-size headline
    if rss:
        exe = Path(sys.executable).parent / "biasfree"
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.perf_counter()
            res = subprocess.run([str(exe), "run", "leaky-collapse", "--preset", "paper", "--out", tmp],
                                 capture_output=True, text=True)
            wall = time.perf_counter() - t0
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # KiB -> MiB
        status = "ok" if res.returncode == 0 else f"exit {res.returncode}: {res.stderr[-300:]}"
        print(f"[memory] biasfree run leaky-collapse --preset paper: peak RSS {peak:.0f} MiB, "
              f"{wall:.0f}s ({status})")
        out["headline_peak_rss_mib"] = peak

    write_json(out, json_path)
    return out


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer steps (seconds, noisier ratios)")
    ap.add_argument("--json", metavar="FILE", help="write the ratios to FILE (stable keys)")
    ap.add_argument("--no-rss", action="store_true", help="skip the paper-size memory run")
    ap.add_argument("--only", choices=["conv", "attention"],
                    help="run one arm alone: conv (item 6, needs torch) or attention (item 9)")
    args = ap.parse_args()
    try:
        main(args.quick, args.json, rss=not args.no_rss, only=args.only)
    except NotAResult as e:  # a non-finite run: one line, exit 1, no ratios and no --json written
        print(f"error: {e}", file=sys.stderr)
        sys.exit(1)
