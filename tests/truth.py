"""The truth for ``analyse``, computed in PyTorch and independently of the package.

Nothing here imports biasfree: a user's torch module is trained beside its linear twin in
float64 by a loop written out below, with torch's own optimisers, and the three questions
``analyse`` answers are settled by measurement (docs/verdict.md; docs/theory.md §2, §6, §9, §10):

- **function now**: ``nonlinear_fraction = min_B <||f(x) − B x||²> / <||f(x)||²>``, f the
  module's own output on the data (its ``forward`` run, whatever its weights look like);
  for linear attention ``<(f − f_twin)²>/<f²>``, the distance to its twin's function;
- **training on** (from the given weights) and **history** (from the init): the net and its
  twin trained side by side, every step recorded, and the gap

      D = max_k |L(θ_k) − L̃(θ̃_k)| / L_ref,   L_ref = max(L(θ₀), ½<||y||²>),

  with L the half mean squared error on all the data (minibatch runs too) at every step
  k = 0..K. The twin (§2.4, §4.1, §6.3, §9.2): a dense or conv net of L weight layers keeps its
  layers, activations replaced by the identity, every weight × a, a = c^((L−1)/L),
  c = (1+α)/2; GD and heavy-ball momentum at lr × a² (κ = 1), Adam at lr × a with ε / a (κ = 0,
  the ε that makes the twin exact). Linear attention (§10.1, §10.2): ŷ = Σ_h (1/N) Σ_n (W_V[h]
  e_n)[D] (e_nᵀ W_KQ[h] e_q) and its twin W₂W₁z, z = vec((1/N) Σ_n y_n x_n x_qᵀ), W₁[h] = vec
  W_KQ[h, :D, :D], W₂[0, h] = W_V[h, D, D], trained by the same optimiser (a = 1).

A question's truth is *linear* when its number is at most 0.3% (:data:`PAPER_LEVEL`), *not* above;
:func:`decide` calls a number within a factor :data:`MARGIN` of 0.3% borderline (None), so a test
case is built to be decidable by a short measurement.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import torch
from torch import nn

PAPER_LEVEL = 3e-3
"""The paper's 0.3%: of L_ref for a gap, of <f²> for a function's nonlinear part."""
MARGIN = 2.0
"""A number within this factor of 0.3% is borderline: no case is built there."""
ACTIVATIONS = (nn.ReLU, nn.LeakyReLU, nn.Identity)
WEIGHTED = (nn.Linear, nn.Conv1d, nn.Conv2d)


def decide(value: float, level: float = PAPER_LEVEL) -> bool | None:
    """True (linear) at ≤ level/MARGIN, False (not) at ≥ level·MARGIN, None in between."""
    if value <= level / MARGIN:
        return True
    if value >= level * MARGIN:
        return False
    return None


# ----------------------------------------------------------------- answers


@dataclass(frozen=True)
class Answer:
    """One question's truth: ``value`` its deciding number (``what``), ``linear`` :func:`decide`
    of it (None: borderline, or a run too short to call a small gap final), ``exact`` whether it
    is at round-off (:data:`EXACT_GAP` of L_ref for a gap, :data:`EXACT_ENERGY` of <f²> for a
    function)."""

    value: float
    what: str
    linear: bool | None
    exact: bool

    def line(self) -> str:
        word = {True: "effectively linear", False: "not effectively linear", None: "borderline"}[self.linear]
        word = "exactly linear" if self.linear and self.exact else word
        return f"{word} ({self.what} = {self.value:.3g} against 0.3%)"


EXACT_GAP = 1e-10
"""A gap at float64 round-off: the package's exact level (docs/theory.md §6.2), K steps × γ_k."""
EXACT_ENERGY = 1e-20
"""A function linear to round-off: amplitude 1e-10, squared (docs/theory.md §6.2)."""


def function_answer(net: nn.Module, X: torch.Tensor) -> Answer:
    """The function now: its nonlinear fraction (attention: its distance to the twin's function)."""
    v = function_fraction(net, X)
    what = ("<(f − f_twin)²>/<f²>" if isinstance(net, MergedLinearAttention)
            else "nonlinear fraction min_B <||f − Bx||²>/<||f||²> of the module's own output")
    return Answer(v, what, decide(v), v <= EXACT_ENERGY)


def gap_answer(run: Run, *, final: bool = False) -> Answer:
    """A run's gap D. ``final``: the run stands for all later training (training on from the given
    weights), so a small gap counts only when the run has settled (:attr:`Run.settled`); a large one
    counts at once, since D is a maximum."""
    linear = decide(run.gap)
    if final and linear and not run.settled:
        linear = None
    return Answer(run.gap, f"gap max_k |L − L̃|/L_ref = max at step {run.step} of {len(run.loss) - 1}",
                  linear, run.gap <= EXACT_GAP)


def worst(*answers: Answer | None) -> bool | None:
    """Linear only if every answer is; not if any is not; else None."""
    known = [a.linear for a in answers if a is not None]
    if any(v is False for v in known):
        return False
    return True if known and all(v is True for v in known) else None


# ----------------------------------------------------------------- measures


def nonlinear_fraction(F: torch.Tensor, X: torch.Tensor) -> float:
    """min_B <||f − Bx||²> / <||f||²>: the share of the outputs F (N, p) no linear map of the
    inputs X (N, d) reaches (least squares, QR-based)."""
    F = F.reshape(len(F), -1)
    B = torch.linalg.lstsq(X, F, driver="gelsd").solution
    R = F - X @ B
    return float((R**2).sum() / max(float((F**2).sum()), 1e-300))


def slope_of(net: nn.Module) -> float:
    """α of the net's activation modules (ReLU 0, LeakyReLU its slope, none: 1)."""
    slopes = {0.0 if isinstance(m, nn.ReLU) else float(m.negative_slope)
              for m in net.modules() if isinstance(m, nn.ReLU | nn.LeakyReLU)}
    if len(slopes) > 1:
        raise ValueError(f"different slopes {sorted(slopes)}")
    return slopes.pop() if slopes else 1.0


def weight_layers(net: nn.Module) -> list[nn.Module]:
    return [m for m in net.modules() if isinstance(m, WEIGHTED)]


def twin_scale(alpha: float, depth: int) -> float:
    """a = c^((L−1)/L), c = (1+α)/2: the twin's weights are the net's × a (§2.4, §4.1, §6.3)."""
    c = (1.0 + alpha) / 2.0
    return c ** ((depth - 1) / depth)


def dense_twin(net: nn.Sequential) -> nn.Sequential:
    """The linear twin of a bias-free ``nn.Sequential`` (dense or conv, pooling and flatten kept):
    the same layers with every activation replaced by the identity, each weight × a."""
    alpha, layers = slope_of(net), weight_layers(net)
    a = twin_scale(alpha, len(layers))
    mods = [nn.Identity() if isinstance(m, ACTIVATIONS) else copy.deepcopy(m) for m in _leaves(net)]
    twin = nn.Sequential(*mods)
    with torch.no_grad():
        for m in weight_layers(twin):
            m.weight.mul_(a)
    return twin


def _leaves(net: nn.Module) -> list[nn.Module]:
    return [m for m in net.modules() if not list(m.children())]


# ----------------------------------------------------------------- linear attention


class MergedLinearAttention(nn.Module):
    """Merged linear attention in the package's documented torch layout (docs/verdict.md
    "Attention models", §10.1): per head W_KQ, W_V (D+1, D+1); on tokens E (S, N+1, D+1),
    query last, ŷ = Σ_h (1/N) Σ_n (W_V[h] e_n)[D] (e_nᵀ W_KQ[h] e_q). ``softmax=True`` puts
    a softmax over the N context tokens around the scores (a user's other model whose weights
    look the same)."""

    def __init__(self, d: int, heads: int, softmax: bool = False):
        super().__init__()
        self.W_KQ = nn.Parameter(torch.zeros(heads, d + 1, d + 1, dtype=torch.float64))
        self.W_V = nn.Parameter(torch.zeros(heads, d + 1, d + 1, dtype=torch.float64))
        self.softmax = softmax

    def forward(self, E):
        C, q = E[:, :-1], E[:, -1]
        scores = torch.einsum("snd,hde,se->shn", C, self.W_KQ, q)
        if self.softmax:
            scores = torch.softmax(scores, dim=-1) * C.shape[1]
        values = torch.einsum("hd,snd->shn", self.W_V[:, -1, :], C)
        return (scores * values).sum(dim=(1, 2))[:, None] / C.shape[1]


def cubic_features(E: torch.Tensor) -> torch.Tensor:
    """z = vec((1/N) Σ_n y_n x_n x_qᵀ), entry i·D + j, on tokens E (S, N+1, D+1) (§10.2)."""
    C, xq = E[:, :-1], E[:, -1, :-1]
    m = torch.einsum("sn,sni->si", C[..., -1], C[..., :-1]) / C.shape[1]
    return (m[:, :, None] * xq[:, None, :]).reshape(len(E), -1)


def attention_twin(model: MergedLinearAttention) -> nn.Sequential:
    """The two-layer linear net W₂W₁z of §10.2: W₁[h] = vec A_h (A_h = W_KQ[h, :D, :D]),
    W₂[0, h] = γ_h = W_V[h, D, D]."""
    H, D1, _ = model.W_KQ.shape
    D = D1 - 1
    twin = nn.Sequential(nn.Linear(D * D, H, bias=False), nn.Linear(H, 1, bias=False)).double()
    with torch.no_grad():
        twin[0].weight.copy_(model.W_KQ[:, :D, :D].reshape(H, D * D))
        twin[1].weight.copy_(model.W_V[:, D, D].reshape(1, H))
    return twin


# ----------------------------------------------------------------- optimisers


@dataclass(frozen=True)
class Optimiser:
    """What trains both: ``kind`` "gd", "momentum" (heavy ball, torch's SGD) or "adam"
    (torch's Adam, ``eps``), step ``lr``; the twin's is :meth:`twin` (§9.2)."""

    kind: str
    lr: float
    momentum: float = 0.9
    eps: float = 1e-8

    def build(self, params) -> torch.optim.Optimizer:
        if self.kind == "gd":
            return torch.optim.SGD(params, lr=self.lr)
        if self.kind == "momentum":
            return torch.optim.SGD(params, lr=self.lr, momentum=self.momentum)
        if self.kind == "adam":
            return torch.optim.Adam(params, lr=self.lr, eps=self.eps)
        raise ValueError(self.kind)

    def twin(self, a: float) -> Optimiser:
        """The twin's optimiser for weights × a (gradients × 1/a, §9.1): an update homogeneous of
        degree κ in the gradients is scaled by a^(1+κ) (κ = 1: GD, momentum; κ = 0: Adam, whose
        ε, with the units of a gradient, becomes ε/a)."""
        if self.kind == "adam":
            return Optimiser("adam", self.lr * a, eps=self.eps / a)
        return Optimiser(self.kind, self.lr * a * a, momentum=self.momentum)


# ----------------------------------------------------------------- training


@dataclass
class Run:
    """Net and twin trained side by side: ``loss``, ``twin_loss`` (K+1,) on all the data at
    θ_0..θ_K; ``ref`` L_ref; ``gap`` D and its ``step``; the trained ``net`` and ``twin``."""

    loss: torch.Tensor
    twin_loss: torch.Tensor
    ref: float
    net: nn.Module
    twin: nn.Module

    @property
    def gap(self) -> float:
        return float(((self.loss - self.twin_loss).abs() / self.ref).max())

    @property
    def step(self) -> int:
        return int((self.loss - self.twin_loss).abs().argmax())

    @property
    def settled(self) -> bool:
        """The last fifth of the run moved both losses by less than 1e-4 of L_ref: the run reached
        its plateau, so the gap would not grow much by running on."""
        K = len(self.loss) - 1
        k = (4 * K) // 5
        return all(abs(float(L[-1] - L[k])) <= 1e-4 * self.ref for L in (self.loss, self.twin_loss))


def _loss(model, X, Y):
    """L = (1/2N) Σ_n ||y_n − f(x_n)||² (the package's loss unit, docs/theory.md §0)."""
    return 0.5 * ((model(X) - Y) ** 2).sum(dim=1).mean()


def train_pair(net: nn.Module, twin: nn.Module, X, Y, opt: Optimiser, steps: int, *, Z=None,
               batch: int | None = None, mirrored: bool = True, seed: int = 0,
               perturb: float = 0.0) -> Run:
    """Train copies of ``net`` on (X, Y) and of ``twin`` on (Z or X, Y) by ``opt`` and its twin
    optimiser for ``steps`` steps (minibatches of ``batch`` rows: mirror pairs i, i + N/2 of data
    laid out [X₊; −X₊] when ``mirrored``, else any rows; both draw the same batches), recording
    each full-data loss before each step and after the last. ``perturb`` multiplies every weight
    of the net by 1 ± perturb (random signs) before the twin is taken from it (the run's own
    sensitivity, for a round-off tolerance)."""
    net = copy.deepcopy(net)
    if perturb:
        g = torch.Generator().manual_seed(1)
        with torch.no_grad():
            for p in net.parameters():
                p.mul_(1 + perturb * (2 * torch.randint(0, 2, p.shape, generator=g) - 1).to(p.dtype))
        twin = rebuild_twin(net, twin)
    else:
        twin = copy.deepcopy(twin)
    Zt = X if Z is None else Z
    ref = max(float(_loss(net, X, Y).detach()), 0.5 * float((Y**2).sum(dim=1).mean()))
    a = _twin_factor(net, twin)
    o_net, o_twin = opt.build(net.parameters()), opt.twin(a).build(twin.parameters())
    gen = torch.Generator().manual_seed(seed)
    n = len(X)
    L, Lt = torch.empty(steps + 1, dtype=torch.float64), torch.empty(steps + 1, dtype=torch.float64)
    for k in range(steps + 1):
        if batch is None and k < steps:  # full batch: the step's own forward gives L(θ_k)
            for model, o, inputs, rec in ((net, o_net, X, L), (twin, o_twin, Zt, Lt)):
                o.zero_grad()
                loss = _loss(model, inputs, Y)
                loss.backward()
                rec[k] = loss.detach()
                o.step()
            continue
        with torch.no_grad():
            L[k], Lt[k] = _loss(net, X, Y), _loss(twin, Zt, Y)
        if k == steps:
            break
        if mirrored:
            half = torch.randperm(n // 2, generator=gen)[: batch // 2]
            rows = torch.cat([half, half + n // 2])
        else:
            rows = torch.randperm(n, generator=gen)[:batch]
        for model, o, inputs in ((net, o_net, X), (twin, o_twin, Zt)):
            o.zero_grad()
            _loss(model, inputs[rows], Y[rows]).backward()
            o.step()
    return Run(L, Lt, ref, net, twin)


def rebuild_twin(net: nn.Module, like: nn.Module) -> nn.Module:
    """The twin of ``net`` of the same kind as ``like``: attention's or a dense/conv one."""
    if isinstance(net, MergedLinearAttention):
        return attention_twin(net)
    return dense_twin(net)


def _twin_factor(net, twin) -> float:
    if isinstance(net, MergedLinearAttention):
        return 1.0
    return twin_scale(slope_of(net), len(weight_layers(net)))


def relative_sensitivity(run: Run, rerun: Run, rel: float) -> float:
    """max_k (|ΔL_k| + |ΔL̃_k|) / rel between a run and its rerun from weights × (1 ± rel): how
    much a relative error committed at the start moves the losses, per unit."""
    return float(((run.loss - rerun.loss).abs() + (run.twin_loss - rerun.twin_loss).abs()).max()) / rel


def attention_tokens(X: torch.Tensor, d: int) -> torch.Tensor:
    """Flat sequences (S, (N+1)(D+1)) as tokens (S, N+1, D+1)."""
    return X.reshape(len(X), -1, d + 1)


def attention_function_gap(model: MergedLinearAttention, E: torch.Tensor) -> float:
    """<(f − f_twin)²>/<f²> of the module's own output against its twin's function (§10.2)."""
    with torch.no_grad():
        f, g = model(E), attention_twin(model)(cubic_features(E))
    return float(((f - g) ** 2).mean() / max(float((f**2).mean()), 1e-300))


def function_fraction(net: nn.Module, X: torch.Tensor) -> float:
    """The nonlinear fraction of the module's own output (its forward run) on X; attention:
    its distance to the twin's function."""
    if isinstance(net, MergedLinearAttention):
        return attention_function_gap(net, X)
    with torch.no_grad():
        return nonlinear_fraction(net(X), X.reshape(len(X), -1))


def mirror(X: torch.Tensor, Y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """[X; −X], [Y; −Y]: every point with its mirror (§2.1)."""
    return torch.cat([X, -X]), torch.cat([Y, -Y])


def pair_init(W1: torch.Tensor, W2: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Antisymmetric pairs (§2.3): hidden units (w, v) and (−w, −v)."""
    return torch.cat([W1, -W1]), torch.cat([W2, -W2], dim=1)


def in_context_data(n_seq: int, n_ctx: int, d: int, *, mirror: bool, seed: int = 0):
    """In-context linear regression (§10.1) as flat sequences X (S, (N+1)(D+1)) and targets Y
    (S, 1): per sequence a task w ~ N(0, I), tokens (x_n, wᵀx_n), the query (x_q, 0), target
    wᵀx_q; with ``mirror`` every sequence is followed (second half) by its copy with every label
    and the target negated."""
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(n_seq, d, generator=g, dtype=torch.float64)
    x = torch.randn(n_seq, n_ctx + 1, d, generator=g, dtype=torch.float64)
    y = torch.einsum("snd,sd->sn", x, w)
    labels = y.clone()
    labels[:, -1] = 0.0
    X = torch.cat([x, labels[..., None]], dim=-1).reshape(n_seq, -1)
    Y = y[:, -1:].clone()
    if mirror:
        E = X.reshape(n_seq, n_ctx + 1, d + 1).clone()
        E[..., -1] *= -1.0
        X, Y = torch.cat([X, E.reshape(n_seq, -1)]), torch.cat([Y, -Y])
    return X, Y
