"""The linear-attention arm of ``bench_engine.py`` (item 9 there; issue 41, item 7): training
merged linear attention through its exact linear twin (docs/theory.md §10.2) against a
PyTorch loop of the same attention model, and against our engine running the attention
itself.

Workload: in-context linear regression, D = 8, N = 32 context tokens, H = 8 heads, 20,000
sequences (10,000 and their label mirrors), merged key–query attention from a small init on
the twin's blocks (``init_attention(..., scale=1e-2)``), full-batch GD at η = ``LR`` for a fixed
number of steps, half-MSE, float64 everywhere, the same data and init in every arm:

- ``twin``: ``twin_dataset`` (z = vec((1/N) Σ_n y_n x_n x_qᵀ) once per sequence, on the host)
  and ``bf.train`` of the two-layer linear net (W₁ (H, D²), W₂ (1, H)) on z; its time includes
  building z;
- ``attention``: ``bf.train`` of the attention layer on the flat sequences (our engine: G =
  (1/N) Σ_n e_n e_nᵀ hoisted out of the loop, the heads folded into U = Σ_h v_h ⊗ W_h);
- ``torch``: the attention as one writes it in PyTorch, ``ŷ = (1/N) Σ_h Σ_n (v_hᵀ e_n)(e_nᵀ
  W_h e_q)``, pairwise ``torch.einsum`` products in the cheap order (``W_h e_q`` first, then the
  scores against the N tokens: S·H·(D+1)·(D+1+2N) multiply-adds forward; a three-operand einsum
  left to torch built an (S, N, H, D+1) tensor and ran ~10x slower), ``torch.optim.SGD``,
  ``torch.set_num_threads`` = the cores.

Keys: ``attention_twin_vs_torch_f64`` (torch/twin, goal ≥ 3), ``attention_twin_vs_ours_attention``
(attention/twin) and ``attention_loss_gap_f64`` (the final losses' relative gap, twin against
torch), beside its bound ``attention_loss_gap_bound``: ``steps · 2γ_k`` with k the longest chain
of sums in one step (N tokens, (D+1)² + (D+1) entries, H heads), the per-step relative
round-off carried through GD's map without growth (as the lockstep tolerance of the
linear-attention experiment, docs/theory.md §10.2).
"""

from __future__ import annotations

import os

import jax
import numpy as np
from bench_checks import finite_or_fail

import biasfree as bf
from biasfree.core.attention import init_attention
from biasfree.core.attention_twin import merged_to_twin, twin_dataset
from biasfree.core.icl_data import in_context_regression

SIZE = {"d": 8, "n_ctx": 32, "heads": 8, "n_seq": 10_000}
"""n_seq distinct sequences, 2·n_seq with their mirrors: 20,000 in all. At 80,000 the arm ran past
400 s alone on 2 cores (issue 48). At 20,000, ``bench_engine.py --only attention`` took 237
CPU-seconds (137 user, 100 system), so about 2 minutes on 2 idle cores; measured at load 18-24,
870 s wall, all losses finite and equal (twin, attention, torch 0.85598161104). Most of it is the
PyTorch loop. docs/performance.md's attention row is at 80,000."""
LR = 0.05
SCALE = 1e-2
GOAL = 3.0


def attention_problem(seed: int = 5):
    """``(data, attention layer)`` of the workload (module doc)."""
    k1, k2 = jax.random.split(jax.random.PRNGKey(seed))
    data = in_context_regression(k1, SIZE["n_seq"], SIZE["n_ctx"], SIZE["d"])
    att = init_attention(k2, SIZE["d"], SIZE["heads"], SIZE["n_ctx"], SCALE)
    return data, att


def attention_torch(data, att, steps: int, lr: float):
    """A function running ``steps`` GD steps of the attention in PyTorch (float64) and
    returning the final loss (the loss after the last step)."""
    import torch

    N, D = SIZE["n_ctx"], SIZE["d"]
    E = torch.tensor(np.asarray(data.X, np.float64)).reshape(-1, N + 1, D + 1)
    C, q = E[:, :N].contiguous(), E[:, N].contiguous()
    Y = torch.tensor(np.asarray(data.Y, np.float64))[:, 0]
    V0, KQ0 = np.asarray(att.V, np.float64), np.asarray(att.KQ, np.float64)

    def predict(V, KQ):  # pairwise products in the cheap order: W_h e_q first (no (S, N, H, D+1) tensor)
        scores = torch.einsum("snd,shd->shn", C, torch.einsum("hde,se->shd", KQ, q))  # e_nᵀ W_h e_q
        values = torch.einsum("snd,hd->shn", C, V[:, D, :])  # v_hᵀ e_n, the label row of W_h^V
        return (scores * values).sum(dim=(1, 2)) / N

    def run() -> float:
        V, KQ = (torch.tensor(a, requires_grad=True) for a in (V0, KQ0))
        opt = torch.optim.SGD([V, KQ], lr=lr)
        for _ in range(steps):
            opt.zero_grad()
            loss = 0.5 * ((predict(V, KQ) - Y) ** 2).mean()
            loss.backward()
            opt.step()
        with torch.no_grad():
            return float(0.5 * ((predict(V, KQ) - Y) ** 2).mean())
    return run


def attention_arm(steps: int, repeat: int, race, gamma, torch_ok: bool) -> tuple[dict, list[str]]:
    """The arm (module doc): ``race`` and ``gamma`` are bench_engine's. Returns (keys, lines)."""
    data, att = attention_problem()
    N, D, H = SIZE["n_ctx"], SIZE["d"], SIZE["heads"]
    rec = dict(steps=steps, lr=LR, n_records=2, observables="loss")

    def twin():
        zd = twin_dataset(data, N)  # z once per sequence: part of the fast path's cost
        return bf.train(merged_to_twin(att), zd, None, alpha=1.0, **rec).loss

    def ours_attention():
        return bf.train((att,), data, None, **rec).loss

    arms = {"twin": twin, "attention": ours_attention}
    if torch_ok:
        import torch

        torch.set_num_threads(os.cpu_count() or 1)  # XLA's CPU client runs one thread per core
        arms["torch"] = attention_torch(data, att, steps, LR)
    t = race(arms, repeat)
    L_twin, L_att = float(twin()[-1]), float(ours_attention()[-1])
    L0 = float(bf.train((att,), data, None, **(rec | {"steps": 1})).loss[0])
    L_t = arms["torch"]() if torch_ok else None
    finite_or_fail("attention", initial=L0, twin=L_twin, attention=L_att,
                   **({"torch": L_t} if torch_ok else {}))  # before any ratio
    out = {"attention_twin_vs_ours_attention": t["attention"] / t["twin"],
           "attention_ours_loss_gap_f64": abs(L_att - L_twin) / L_twin}
    k = N + (D + 1) ** 2 + (D + 1) + H
    out["attention_loss_gap_bound"] = steps * 2 * gamma(k)
    size = f"D={D}, N={N}, H={H}, {2 * SIZE['n_seq']} sequences, GD {steps} steps at η={LR}, float64"
    lines = [f"[attention] {size}: twin on z {t['twin']:.2f}s (z built inside), our engine on the attention "
             f"{t['attention']:.2f}s -> twin {out['attention_twin_vs_ours_attention']:.2f}x; loss "
             f"{L0:.6g} -> twin {L_twin:.12g}, attention {L_att:.12g} (relative gap "
             f"{out['attention_ours_loss_gap_f64']:.2g}, bound steps·2γ_k "
             f"{out['attention_loss_gap_bound']:.2g})"]
    if torch_ok:
        out["attention_twin_vs_torch_f64"] = t["torch"] / t["twin"]
        out["attention_twin_vs_torch_goal"] = GOAL
        out["attention_loss_gap_f64"] = abs(L_t - L_twin) / L_twin
        ok = "within" if out["attention_loss_gap_f64"] <= out["attention_loss_gap_bound"] else "OUTSIDE"
        lines.append(f"[attention] PyTorch loop of the attention {t['torch']:.2f}s "
                     f"({torch.get_num_threads()} threads) -> twin "
                     f"{out['attention_twin_vs_torch_f64']:.2f}x "
                     f"faster (goal >= {GOAL:g}), our attention {t['torch'] / t['attention']:.2f}x; "
                     "final loss "
                     f"torch {L_t:.12g}: relative gap to the twin {out['attention_loss_gap_f64']:.2g}, {ok} "
                     "the bound")
    return out, lines
