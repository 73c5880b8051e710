"""Which layout of a stride-1 convolution trains fastest on XLA:CPU at float64 (issue 39 part 7).

The workload is the conv arm of ``bench_engine.py`` (its :func:`conv_problem`: 512 Gaussian
8×8 inputs, Conv2d 1→16 3×3 'same', ReLU, dense readout, full-batch GD at its step size).
Each candidate is one full GD run of ``--steps`` steps (forward, ``jax.grad``, update) under
``jit`` + ``lax.fori_loop`` with the inputs as an argument of the compiled program, the
same structure as ``bf.gd``'s loop. The candidates differ only in how the first layer's
pre-activations ``Z`` (N, C·S), channel-major, are computed:

- ``conv NCHW``: ``lax.conv_general_dilated`` on (N, C, H, W) with an OIHW kernel (the
  layer before this round);
- ``conv NHWC``: the same with NHWC / HWIO and a transpose to channel-major;
- ``im2col, in loop``: patches (N, C_in·k², S) from the padded input by k² slices (inside the
  loss, so every step unless XLA hoists them: the input is loop-invariant), then one GEMM;
- ``im2col, precomputed``: the same patches computed once before the loop;
- ``im2col (N·S, C_in·k²)``: precomputed patches laid out rows = positions, so ``P Kᵀ`` is one
  plain GEMM, then a transpose (N, S, C) -> (N, C, S);
- ``shift-add``: ``Z = Σ_t K[:, t] ⊗ (tap t of x)``, k² shifted copies of the input scaled and
  summed, which XLA fuses into one elementwise loop (C_in = 1: no GEMM has an inner size > 1);
- ``Toeplitz``: the dense (C·S, S) matrix built from K each step (a GEMM with a constant 0/1
  tensor), then ``X Aᵀ``;
- ``bf.gd`` (the engine, records included) with today's ``bf.Conv`` (im2col) and with the
  layer as it was before (``lax.conv``, :class:`ConvLax`), and the PyTorch loop of
  ``bench_engine``.

Each candidate's final loss is compared with the ``conv NCHW`` one (float64; a relative gap
of a few ε·√(fan-in)·steps is round-off). Arms alternate and each time is the best of
``--repeat``, so the ratios are side by side on a shared machine.

Run: ``.venv/bin/python benchmarks/conv_layouts.py [--steps 300] [--repeat 5] [--no-torch]``.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import bench_engine as be  # noqa: E402  (sets XLA_FLAGS before JAX starts, as make bench does)
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import biasfree as bf  # noqa: E402
from biasfree.core.layers import layer_type  # noqa: E402

jax.config.update("jax_enable_x64", True)
HI = jax.lax.Precision.HIGHEST
EPS = float(np.finfo(np.float64).eps)


def pad_same(x, ks):
    """(N, C, *spatial) zero-padded by (k − 1)//2 before and the rest after each axis."""
    return jnp.pad(x, [(0, 0), (0, 0)] + [((k - 1) // 2, k - 1 - (k - 1) // 2) for k in ks])


def patches(x, ks):
    """(N, C, H, W) 'same' -> (N, C·k1·k2, H·W): entry (i, u, v) of a column is
    x_pad[i, h + u, w + v], the order of K.reshape(C_out, -1)."""
    N, C, H, W = x.shape
    xp = pad_same(x, ks)
    cols = [xp[:, :, u:u + H, v:v + W] for u in range(ks[0]) for v in range(ks[1])]
    return jnp.stack(cols, axis=2).reshape(N, C * ks[0] * ks[1], H * W)


def shifts(S, ks):
    """The 0/1 tensor T (k1·k2, S, S): T[t, s_out, s_in] = 1 when s_in is tap t of s_out."""
    T = np.zeros((ks[0] * ks[1], S * S, S * S))
    for u in range(ks[0]):
        for v in range(ks[1]):
            for h in range(S):
                for w in range(S):
                    hh, ww = h + u - (ks[0] - 1) // 2, w + v - (ks[1] - 1) // 2
                    if 0 <= hh < S and 0 <= ww < S:
                        T[u * ks[1] + v, h * S + w, hh * S + ww] = 1.0
    return T


def first_layers(S, C, k):
    """name -> (prepare(X) run once outside the loop, z(K, Xrep) -> Z (N, C·S²))."""
    ks, N_in = (k, k), S * S

    def img(X):
        return X.reshape(X.shape[0], 1, S, S)

    def conv_nchw(K, X):
        z = jax.lax.conv_general_dilated(img(X), K, (1, 1), "SAME", precision=HI,
                                         dimension_numbers=("NCHW", "OIHW", "NCHW"))
        return z.reshape(X.shape[0], -1)

    def conv_nhwc(K, X):
        hwio = jnp.transpose(K, (2, 3, 1, 0))
        z = jax.lax.conv_general_dilated(X.reshape(-1, S, S, 1), hwio, (1, 1), "SAME",
                                         dimension_numbers=("NHWC", "HWIO", "NHWC"), precision=HI)
        return jnp.transpose(z, (0, 3, 1, 2)).reshape(X.shape[0], -1)

    def im2col(K, P):  # P (N, J, S²)
        return jnp.einsum("oj,njs->nos", K.reshape(C, -1), P, precision=HI).reshape(P.shape[0], -1)

    def im2col_loop(K, X):
        return im2col(K, patches(img(X), ks))

    def im2col_rows(K, P):  # P (N·S², J)
        Z = jnp.dot(P, K.reshape(C, -1).T, precision=HI).reshape(-1, N_in, C)
        return jnp.transpose(Z, (0, 2, 1)).reshape(Z.shape[0], -1)

    T = jnp.asarray(shifts(S, ks))

    def toeplitz(K, X):  # A[o, s, r] = Σ_t K[o, t] T[t, s, r]
        A = jnp.einsum("ot,tsr->osr", K.reshape(C, -1), T, precision=HI).reshape(C * N_in, N_in)
        return jnp.dot(X, A.T, precision=HI)

    def rows(X):
        P = patches(img(X), ks)
        return jnp.transpose(P, (0, 2, 1)).reshape(-1, P.shape[1])

    def shift_add(K, X):  # Σ_t K[:, t] ⊗ (tap t of x): one elementwise fusion, no GEMM (C_in = 1)
        xp = pad_same(img(X), ks)[:, 0]
        Kf = K.reshape(C, -1)
        z = sum(Kf[None, :, u * k + v, None, None] * xp[:, None, u:u + S, v:v + S]
                for u in range(k) for v in range(k))
        return z.reshape(X.shape[0], -1)

    ident = lambda X: X  # noqa: E731
    return {"shift-add": (ident, shift_add), "conv NCHW": (ident, conv_nchw), "conv NHWC": (ident, conv_nhwc),
            "im2col, in loop": (ident, im2col_loop),
            "im2col, precomputed": (lambda X: patches(img(X), ks), im2col),
            "im2col (N·S, C_in·k²)": (rows, im2col_rows),
            "Toeplitz": (ident, toeplitz)}


@layer_type
class ConvLax(bf.Conv):
    """``bf.Conv`` with the forward it had before this round, ``lax.conv_general_dilated``
    (NCH / NCHW, OIH / OIHW): the engine's "before" arm, run in the same process (a type of
    its own, so ``bf.gd`` compiles its own program)."""

    def linear(self, H):
        nd = len(self.in_shape)
        x = jnp.reshape(H, (H.shape[0], self.c_in) + self.in_shape)
        spec = ("NCH", "OIH", "NCH") if nd == 1 else ("NCHW", "OIHW", "NCHW")
        z = jax.lax.conv_general_dilated(x, self.K, (1,) * nd, self.padding.upper(), dimension_numbers=spec,
                                         precision=HI)
        return jnp.reshape(z, (H.shape[0], -1))


def trainer(z, steps, lr):
    """A jitted GD run: (K, W, Xrep, Y) -> (K, W, final loss), ReLU, loss ½ mean ||f − y||²."""
    def loss(p, Xr, Y):
        K, W = p
        H = jax.nn.relu(z(K, Xr))
        return 0.5 * jnp.mean(jnp.sum((jnp.dot(H, W.T, precision=HI) - Y) ** 2, axis=-1))

    g = jax.grad(loss)

    @jax.jit
    def run(K, W, Xr, Y):
        def step(_, p):
            return jax.tree_util.tree_map(lambda a, b: a - lr * b, p, g(p, Xr, Y))
        p = jax.lax.fori_loop(0, steps, step, (K, W))
        return p[0], p[1], loss(p, Xr, Y)

    return run


def hidden_layer(steps: int, repeat: int) -> None:
    """A second conv layer, C → C on the hidden states (not loop-invariant, so its patches are
    extracted every step, and their transpose runs in the backward pass): lax.conv against
    im2col for that layer, the first layer im2col in both."""
    S, C, k = be.CONV["side"], be.CONV["channels"], be.CONV["kernel"]
    data, params = be.conv_problem()
    X, Y = jnp.asarray(data.X), jnp.asarray(data.Y)
    K1 = jnp.asarray(params[0].K)
    K2 = jax.random.normal(jax.random.PRNGKey(7), (C, C, k, k)) / (k * np.sqrt(C))
    W = jnp.asarray(params[1].W)
    P = patches(X.reshape(-1, 1, S, S), (k, k))

    def nchw(K, H):
        z = jax.lax.conv_general_dilated(H.reshape(-1, C, S, S), K, (1, 1), "SAME",
                                         dimension_numbers=("NCHW", "OIHW", "NCHW"), precision=HI)
        return z.reshape(H.shape[0], -1)

    def cols(K, H):
        Q = patches(H.reshape(-1, C, S, S), (k, k))
        return jnp.einsum("oj,njs->nos", K.reshape(C, -1), Q, precision=HI).reshape(H.shape[0], -1)

    def rows(K, H):
        Q = patches(H.reshape(-1, C, S, S), (k, k))
        Q = jnp.transpose(Q, (0, 2, 1)).reshape(-1, Q.shape[1])
        Z = jnp.dot(Q, K.reshape(C, -1).T, precision=HI).reshape(H.shape[0], S * S, C)
        return jnp.transpose(Z, (0, 2, 1)).reshape(H.shape[0], -1)

    arms, finals = {}, {}
    for name, z2 in {"conv NCHW": nchw, "im2col, in loop": cols, "im2col (N·S, C_in·k²)": rows}.items():
        def loss(p, z2=z2):
            H = jnp.einsum("oj,njs->nos", p[0].reshape(C, -1), P, precision=HI)
            H = jax.nn.relu(H.reshape(P.shape[0], -1))
            H = jax.nn.relu(z2(p[1], H))
            return 0.5 * jnp.mean(jnp.sum((jnp.dot(H, p[2].T, precision=HI) - Y) ** 2, axis=-1))

        @jax.jit
        def run(p, loss=loss):
            g = jax.grad(loss)
            p = jax.lax.fori_loop(0, steps, lambda _, p: jax.tree_util.tree_map(
                lambda a, b: a - 1e-4 * b, p, g(p)), p)
            return loss(p)

        arms[name] = lambda run=run: run((K1, K2, W))
    best = be.race(arms, repeat)
    for name, fn in arms.items():
        finals[name] = float(fn())
    print(f"\nhidden conv layer {C}→{C} {k}×{k} 'same' on the first layer's output, {steps} GD steps:")
    print("| second layer | s / run | ms / step | vs conv NCHW | final loss, relative gap |")
    print("|---|---|---|---|---|")
    for name, t in best.items():
        print(f"| {name} | {t:.3f} | {1e3 * t / steps:.2f} | {best['conv NCHW'] / t:.2f}x | "
              f"{abs(finals[name] - finals['conv NCHW']) / abs(finals['conv NCHW']):.1e} |")


def main(steps: int, repeat: int, torch_ok: bool) -> None:
    S, C, k = be.CONV["side"], be.CONV["channels"], be.CONV["kernel"]
    data, params = be.conv_problem()
    X, Y = jnp.asarray(data.X), jnp.asarray(data.Y)
    K0, W0 = jnp.asarray(params[0].K), jnp.asarray(params[1].W)
    Xn = np.asarray(data.X)
    # the bench's 1/L step: L = (||H||_F + √taps·||W||_F·||X||_F)²/N at init
    H0 = np.asarray(jax.nn.relu(first_layers(S, C, k)["conv NCHW"][1](K0, X)))
    lr = 1 / ((np.linalg.norm(H0) + k * np.linalg.norm(W0) * np.linalg.norm(Xn)) ** 2 / Xn.shape[0])

    arms, finals = {}, {}
    for name, (prep, z) in first_layers(S, C, k).items():
        run = trainer(z, steps, lr)

        def arm(run=run, prep=prep):
            return run(K0, W0, prep(X), Y)[2]  # the precomputation is timed, once a run

        arms[name] = arm
    cfg = bf.GDConfig(alpha=0.0, lr=lr, steps=steps, n_records=2)
    before = (ConvLax(params[0].K, params[0].b, params[0].in_shape, params[0].padding),) + tuple(params[1:])
    arms["bf.gd, lax.conv layer (before)"] = lambda: bf.gd(before, data, cfg).loss
    arms["bf.gd (engine)"] = lambda: bf.gd(params, data, cfg).loss
    if torch_ok:
        import os

        import torch

        torch.set_num_threads(os.cpu_count() or 1)
        run_t = be.conv_torch(data, params, steps, lr)
        arms["PyTorch loop"] = lambda: run_t()[0]
    best = be.race(arms, repeat)
    for name, fn in arms.items():
        out = fn()
        finals[name] = float(out[-1] if np.ndim(out) else out)
    ref, t_ref = finals["conv NCHW"], best["conv NCHW"]
    t_torch = best.get("PyTorch loop")
    n_in = k * k  # fan-in of a first-layer output (C_in = 1)
    print(f"conv layouts: N={Xn.shape[0]}, {S}×{S}, Conv2d 1→{C} {k}×{k} 'same', ReLU, dense readout, "
          f"float64, {steps} GD steps, lr {lr:.3g}; best of {repeat}, arms alternating; "
          f"{len(jax.devices())} XLA device(s)")
    print(f"round-off scale of the final loss: steps·ε·√fan-in = {steps * EPS * math.sqrt(n_in):.1e} "
          "relative")
    print("| layout | s / run | ms / step | vs conv NCHW | vs PyTorch | final loss: relative gap to "
          "conv NCHW |")
    print("|---|---|---|---|---|---|")
    for name, t in best.items():
        vs_t = f"{t_torch / t:.2f}x" if t_torch else "-"
        print(f"| {name} | {t:.3f} | {1e3 * t / steps:.2f} | {t_ref / t:.2f}x | {vs_t} | "
              f"{abs(finals[name] - ref) / abs(ref):.1e} |")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--hidden", action="store_true", help="also time a second (hidden) conv layer")
    a = ap.parse_args()
    main(a.steps, a.repeat, not a.no_torch)
    if a.hidden:
        hidden_layer(a.steps, a.repeat)
