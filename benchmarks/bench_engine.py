"""Side-by-side timings of the training engine, reported as ratios measured in one run.

Workload (the issue's): a two-layer ReLU net, d = 20, width 500, N = 1024 symmetric
points, full-batch GD, float64, the same weights and data in every arm.

1. ours (jit + scan) against a PyTorch loop (nn.Linear(bias=False), LeakyReLU, SGD) at
   the same precision, float64 and float32 (skipped with a line if torch is missing:
   ``pip install -e '.[bench]'``);
2. the symmetric-data fast path against the general path;
3. an ensemble of B = 6 slopes against the same 6 runs one after another, at the
   headline size and at a small size (d 20, width 40, N 400) where per-step overhead
   dominates; the batched-GEMM layout (``vmap``) alongside;
4. ours in GFLOP/s (the FLOPs of the compiled fast-path step, as XLA's cost analysis
   counts them: only what runs) as a fraction of this machine's float64 matmul rate
   (2048³), measured in the same run, and the memory traffic a step (the step is
   bandwidth-bound: its GEMMs have an inner size d = 20);
5. the peak memory (RSS) of the paper-size headline experiment (a subprocess).

Each arm is compiled and run once before it is timed; arms alternate and each ratio uses
the fastest of its repeats, which keeps ratios honest on a shared machine. Members of
an ensemble spread over host devices, so this script asks XLA for one CPU device per
core before JAX starts (a GPU machine ignores it). ``--json FILE`` writes the ratios.

Run: ``make bench`` (or ``.venv/bin/python benchmarks/bench_engine.py [--quick]
[--json FILE]``).
"""

from __future__ import annotations

import os

if "xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count="
                               f"{os.cpu_count() or 1}").strip()

import argparse  # noqa: E402
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

import biasfree as bf  # noqa: E402


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


def torch_arm(data, params, steps, lr, dtype: str):
    """The same GD in a plain PyTorch loop; returns (run, final loss of one run)."""
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
        opt = torch.optim.SGD(net.parameters(), lr=lr)
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


def main(quick: bool, json_path: str | None, rss: bool) -> dict:
    steps = 300 if quick else 3000
    repeat = 2 if quick else 3
    lr = 0.02
    out: dict[str, float] = {}
    print(f"machine: {jax.default_backend()} backend, {len(jax.devices())} JAX device(s), "
          f"{os.cpu_count()} CPU cores; steps={steps}, best of {repeat}")

    data, params = headline()
    general, _ = headline(mirror=False)
    cfg = bf.GDConfig(alpha=0.0, lr=lr, steps=steps, n_records=2)

    # -- 2. symmetric fast path vs general path (and our float32)
    # the matmul rate is an arm of the same race, so that both see the same machine load
    t = race({"sym": lambda: bf.gd(params, data, cfg).loss,
              "gen": lambda: bf.gd(params, general, cfg).loss,
              "sym32": lambda: bf.gd(params, data, cfg, precision="float32").loss,
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
        print("[torch] skipped: PyTorch is not installed (pip install -e '.[bench]')")
    if torch is not None:
        for dt, key in (("float64", "vs_torch_f64"), ("float32", "vs_torch_f32")):
            run_t = torch_arm(data, params, steps, lr, dt)
            L_torch = run_t()  # also its warm-up; ours is compiled above (sym, sym32)
            def ours_fn(dt=dt):
                return bf.gd(params, data, cfg, precision=dt).loss

            tt = race({"ours": ours_fn, "torch": run_t}, max(1, repeat - 1), warm=False)
            L_ours = float(bf.gd(params, data, cfg, precision=dt).loss[-1])
            out[key] = tt["torch"] / tt["ours"]
            print(f"[torch] {dt}: ours {tt['ours']:.2f}s, PyTorch loop {tt['torch']:.2f}s "
                  f"({torch.get_num_threads()} threads) -> ours {out[key]:.2f}x faster; final "
                  f"loss ours {L_ours:.10g} vs torch {L_torch:.10g}")

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
            return [bf.gd(p, dat, c).loss for p, c in zip(members, cfgs, strict=True)]

        te = race({"ens": lambda dat=dat, batch=batch, ecfg=ecfg: bf.gd_ensemble(
                       batch, dat, ecfg, alpha=alphas).loss,
                   "vmap": lambda dat=dat, batch=batch, ecfg=ecfg: bf.gd_ensemble(
                       batch, dat, ecfg, alpha=alphas, layout="vmap").loss,
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

    print("ratios:", json.dumps({k: round(v, 3) for k, v in out.items()}))
    if json_path:
        Path(json_path).parent.mkdir(parents=True, exist_ok=True)
        Path(json_path).write_text(json.dumps(out, indent=2) + "\n")
    return out


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer steps (seconds, noisier ratios)")
    ap.add_argument("--json", metavar="FILE", help="write the ratios to FILE (stable keys)")
    ap.add_argument("--no-rss", action="store_true", help="skip the paper-size memory run")
    args = ap.parse_args()
    main(args.quick, args.json, rss=not args.no_rss)
