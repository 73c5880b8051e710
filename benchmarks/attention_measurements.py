"""Linear attention beyond the papers: measured, not claimed (issue 41, item 5; the numbers are
recorded in docs/theory.md §10.5). Nothing here is a check: each part prints what it measures.

(i)  The twin identity under other optimisers. Merged attention (D 3, N 8, 2 heads, 1,000
     sequences and their label mirrors, init 1e-2 on the twin's blocks) and its twin on z trained
     side by side by ``bf.train`` under Adam, sign descent (``optax.sign_sgd``) and Muon
     (``optax.contrib.muon``; it orthogonalises 2-D weights, so the twin's W₁ (H, D²), and passes
     the attention's 3-D (H, D+1, D+1) weights to AdamW): ``max_k |L_att − L_twin| / L_twin``,
     with the off-twin blocks' updates masked (``twin_mask``) and plain.
(ii) Softmax attention from a small init against its linear counterpart: ``ŷ = Σ_h Σ_n
     softmax_n(e_nᵀ W_h e_q) (v_hᵀ e_n)`` (a layer of the net family defined here, not in the
     package: softmax_n(s) = (1 + s_n − s̄)/N + O(s²), the linear layer's 1/N plus a mean-label
     term) trained by GD from the same init on the same data as the merged linear layer: the
     largest relative loss gap over the run, against init scale and context length N.
(iii) The separate model's staircase under Adam: rank-one heads (Λ = diag(1, 0.5, 0.25), N 16,
     8,000 sequences and mirrors) from the aligned init of the experiment, by GD (the paper's
     staircase) and by Adam: per intermediate plateau L_k (population value, §10.4), how long
     the loss dwells within a quarter of the gaps to its neighbours, in decades of time; a
     plateau counts as seen at ≥ 0.2 decades.

Run: ``python benchmarks/attention_measurements.py [--json FILE]`` (about a minute on 2 cores).
"""

from __future__ import annotations

import argparse

import jax
import jax.numpy as jnp
import numpy as np
import optax
import optax.contrib

import biasfree as bf
from biasfree import store
from biasfree.claims.linear_attention.run import aligned_heads
from biasfree.core.attention import MergedAttention, _attention_type, init_attention, tokens
from biasfree.core.attention_twin import merged_to_twin, twin_dataset, twin_mask
from biasfree.core.icl_data import in_context_regression
from biasfree.theory import attention as th

HIGHEST = jax.lax.Precision.HIGHEST


@_attention_type
class SoftmaxAttention(MergedAttention):
    """Merged attention with softmax over the N context tokens instead of 1/N (module doc, ii)."""

    def linear(self, H):
        E = tokens(H, self.n_ctx)
        C, q = E[:, :-1], E[:, -1]
        scores = jnp.einsum("snd,hde,se->shn", C, self.KQ, q, precision=HIGHEST)
        values = jnp.einsum("hd,snd->shn", self.V[:, -1, :], C, precision=HIGHEST)
        return jnp.sum(jax.nn.softmax(scores, axis=-1) * values, axis=(1, 2))[:, None]


def _masked(opt):
    return optax.chain(opt, optax.stateless(
        lambda u, p: jax.tree_util.tree_map(lambda a, m: a * m, u, twin_mask(p))))


def _gap(a, b) -> float:
    a, b = np.asarray(a.loss), np.asarray(b.loss)
    return float(np.max(np.abs(a - b) / b))


def optimisers(steps: int = 400) -> dict:
    """(i): the largest relative net–twin loss gap per optimiser, masked and plain."""
    D, N, H = 3, 8, 2
    data = in_context_regression(jax.random.PRNGKey(0), 1000, N, D)
    zd = twin_dataset(data, N)
    att = init_attention(jax.random.PRNGKey(1), D, H, N, 1e-2)
    twin = merged_to_twin(att)
    rec = dict(steps=steps, n_records=steps + 1, observables="loss")
    out = {}
    for name, make in {"adam": lambda: optax.adam(3e-3), "sign": lambda: optax.sign_sgd(1e-3),
                       "muon": lambda: optax.contrib.muon(3e-3)}.items():
        r_tw = bf.train(twin, zd, make(), alpha=1.0, **rec)
        r_m = bf.train((att,), data, _masked(make()), **rec)
        r_p = bf.train((att,), data, make(), **rec)
        out[name] = {"masked": _gap(r_m, r_tw), "plain": _gap(r_p, r_tw),
                     "loss": [float(r_tw.loss[0]), float(r_tw.loss[-1])]}
        print(f"(i) {name:5s} max |L_att − L_twin|/L_twin: masked {out[name]['masked']:.2g}, plain "
              f"{out[name]['plain']:.2g} (twin's loss {out[name]['loss'][0]:.3g} -> "
              f"{out[name]['loss'][1]:.3g})",
              flush=True)
    return out


def softmax_gap(scales=(1e-3, 1e-2, 1e-1, 0.3), contexts=(8, 32), steps: int = 600, lr: float = 0.02) -> dict:
    """(ii): the largest relative loss gap, softmax against linear attention, per (N, scale)."""
    D, H = 3, 2
    out = {}
    for N in contexts:
        data = in_context_regression(jax.random.PRNGKey(2), 1000, N, D)
        for scale in scales:
            lin = init_attention(jax.random.PRNGKey(3), D, H, N, scale)
            soft = SoftmaxAttention(lin.V, lin.KQ, n_ctx=N)
            rec = dict(steps=steps, lr=lr, n_records=steps + 1, observables="loss")
            r_l, r_s = bf.train((lin,), data, None, **rec), bf.train((soft,), data, None, **rec)
            out[f"N{N}_scale{scale:g}"] = g = {"gap": _gap(r_s, r_l), "final_linear": float(r_l.loss[-1]),
                                               "final_softmax": float(r_s.loss[-1])}
            print(f"(ii) N={N:2d} scale {scale:<6g}: max relative loss gap softmax vs linear {g['gap']:.3g}; "
                  f"final losses {g['final_linear']:.4g} (linear), {g['final_softmax']:.4g} (softmax)",
                  flush=True)
    return out


def _dwell(t, L, levels) -> list[float]:
    """Decades of time the loss stays within a quarter of the gaps around each intermediate
    plateau ``levels[k]``, k = 1..D−1."""
    out = []
    for k in range(1, len(levels) - 1):
        half = 0.25 * min(levels[k - 1] - levels[k], levels[k] - levels[k + 1])
        inside = np.nonzero(np.abs(L - levels[k]) <= half)[0]
        inside = inside[t[inside] > 0]
        out.append(0.0 if inside.size < 2 else float(np.log10(t[inside[-1]] / t[inside[0]])))
    return out


def staircase(steps: int = 4500) -> dict:
    """(iii): dwell on each intermediate plateau, GD against Adam, from the aligned init."""
    eigs = np.array([1.0, 0.5, 0.25])
    D, N = eigs.size, 16
    cov = np.diag(eigs)
    data = in_context_regression(jax.random.PRNGKey(4), 8000, N, D, cov)
    levels = th.plateau_losses(cov, N)
    init = (aligned_heads(0.05, D, N),)
    out = {}
    for name, opt, lr in (("gd", None, 0.1), ("adam_1e-3", optax.adam(1e-3), None),
                          ("adam_1e-2", optax.adam(1e-2), None)):
        run = bf.train(init, data, opt, steps=steps, lr=lr, n_records=300, spacing="log", observables="loss")
        t, L = np.asarray(run.t), np.asarray(run.loss)
        dw = _dwell(t, L, levels)
        out[name] = {"dwell_decades": dw, "plateaus_seen": int(sum(d >= 0.2 for d in dw)),
                     "final": float(L[-1]), "L_D": float(levels[-1])}
        print(f"(iii) {name:9s}: dwell on plateaus L_1..L_{D - 1} "
              f"{', '.join(f'{d:.2f}' for d in dw)} decades -> {out[name]['plateaus_seen']} of {D - 1} "
              f"intermediate plateaus seen; final loss {L[-1]:.4g} (L_D {levels[-1]:.4g})", flush=True)
    return out


def main(json_path: str | None) -> dict:
    out = {"optimisers": optimisers(), "softmax": softmax_gap(), "staircase": staircase()}
    if json_path:
        store.write_json(json_path, out)
    return out


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", metavar="FILE", help="write the measurements to FILE")
    main(ap.parse_args().json)
