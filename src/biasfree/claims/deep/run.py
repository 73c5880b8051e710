"""The run of :mod:`biasfree.claims.deep`: its measurements and their checks against theory."""

from __future__ import annotations

import numpy as np

from ... import theory
from ...core.data import Dataset, symmetrize
from ...core.inits import pad_hidden, pair_up
from ...core.moments import whiten
from ...core.nets import effective_rank
from ...dynamics import GDConfig, Member, train
from ...expressivity.decomposition import net_function, odd_nonlinearity
from ...results import Result, at_least, at_most
from ..base import Progress, quiet
from ..checks import ROUND_OFF, crossing_time, numpy_gaussian
from . import MEMBERS, PAIRS, Config


def _teacher_data(cfg: Config, rng) -> Dataset:
    """Whitened symmetric Gaussian inputs, targets ``T x_raw`` with ``T = U diag(s) Vᵀ``."""
    s_T = np.asarray(cfg.s, float)
    U0, _ = np.linalg.qr(rng.normal(size=(s_T.size, s_T.size)))
    V0, _ = np.linalg.qr(rng.normal(size=(cfg.d, s_T.size)))
    X_raw = rng.normal(size=(cfg.n, cfg.d))
    X_raw, Y = symmetrize(X_raw, X_raw @ ((U0 * s_T) @ V0.T).T)
    X, _ = whiten(X_raw)
    return Dataset(np.asarray(X), np.asarray(Y))


def _teacher_members(cfg: Config, rng, modes, L: int, scale: float) -> dict[str, Member]:
    """The five named nets of one depth (module doc); linear ones step ηλ."""
    H, p = cfg.width, modes.s.size
    lr_lin = cfg.lr * theory.deep_pair_time_factor(L)
    aligned = theory.aligned_init(modes.U, modes.V, cfg.a0, depth=L, width=H // 2)
    half = numpy_gaussian(rng, (cfg.d,) + (H // 2,) * (L - 1) + (p,), scale)
    return {"linear_aligned": Member(pad_hidden(aligned, H), alpha=1.0, lr=lr_lin),
            "relu_pair_aligned": Member(theory.deep_linear_to_pair(aligned), alpha=0.0),
            "relu_gaussian": Member(numpy_gaussian(rng, (cfg.d,) + (H,) * (L - 1) + (p,), scale), alpha=0.0),
            "relu_pair_random": Member(pair_up(half), alpha=0.0),
            "linear_twin_of_pair_random": Member(pad_hidden(theory.deep_pair_half_to_linear(half), H),
                                                 alpha=1.0, lr=lr_lin)}


def _block_symmetric_part(W) -> float:
    """``||A_11 + A_12|| / ||A_11||`` of a pair net's middle layer: 0 while it keeps the pair form."""
    h = W.shape[0] // 2
    return float(np.linalg.norm(W[:h, :h] + W[:h, h:]) / np.linalg.norm(W[:h, :h]))


def _plateau_gaps(loss, r, plateaus) -> list:
    """Per plateau k: the most plateau-like record (mode k learned, mode k+1 not started,
    ``r = a/s``) and the loss's relative gap to the §3.4 plateau there, with that purity."""
    out = []
    for k in range(1, r.shape[1]):
        score = np.minimum(r[:, k - 1], 1.0 - r[:, k])
        j = int(np.argmax(score))
        out.append((abs(loss[j] - plateaus[k]) / plateaus[k], float(score[j])))
    return out


def _measure(tr, alpha: float, t, data: Dataset, modes, plateaus) -> dict:
    """One member's loss, mode strengths, even and odd-nonlinear energies (the identity of the
    module doc, and directly at the final parameters), effective ranks, and transition times
    on the ReLU time axis ``t`` (a linear member's record j, at its own time λ t_j, sits at t_j)."""
    s = modes.s
    loss, beta, even = np.asarray(tr.loss), np.asarray(tr.beta), np.asarray(tr.even_energy)
    a = theory.mode_projections(beta, modes)
    lin_misfit = np.sum((modes.U @ np.diag(s) @ modes.V.T - np.swapaxes(beta, -1, -2)) ** 2, axis=(-2, -1))
    odd_nl = 2 * loss - lin_misfit - even  # exact identity (module doc)
    return dict(loss=loss, a=a, even=even, odd_nl=odd_nl, odd_energy=np.sum(beta**2, axis=(-2, -1)) + odd_nl,
                direct=odd_nonlinearity(net_function(tr.params, alpha), data.X).residual,
                t_half=np.array([crossing_time(t, a[:, i], s[i] / 2) for i in range(s.size)]),
                erank=np.stack([effective_rank(np.asarray(sv)) for sv in tr.singular_values], axis=-1),
                plateau_gap=np.asarray(_plateau_gaps(loss, a / s, plateaus)))


def _teacher_depth(cfg: Config, rng, data: Dataset, modes, plateaus, L: int, scale: float) -> dict:
    """All five members of depth L, run and measured; the exact GD map and flow of the modes."""
    lam = theory.deep_pair_time_factor(L)
    s = modes.s
    members = _teacher_members(cfg, rng, modes, L, scale)
    t_half_th = np.array([float(theory.deep_half_time(si, cfg.a0, L)) for si in s])
    steps = int(np.ceil(cfg.horizon * t_half_th[-1] / lam / cfg.lr))  # horizon in ReLU time
    runs = train(members, data, GDConfig(lr=cfg.lr, steps=steps, n_records=cfg.n_records,
                                              spacing="log"))
    t = np.asarray(runs["relu_pair_aligned"].t)  # ReLU time; linear members sit at λ t
    ks = np.rint(t / cfg.lr).astype(np.int64)
    return dict(lam=lam, t=t, steps=steps, t_half_th=t_half_th,
                members={k: _measure(runs[k], m.alpha, t, data, modes, plateaus) for k, m in members.items()},
                a_map=theory.deep_gd_mode_strength(ks, s, cfg.a0, L, cfg.lr * lam),
                a_flow=theory.deep_mode_strength(lam * t, s, cfg.a0, L),
                drift={(k, li): _block_symmetric_part(np.asarray(runs[k].params[li].W))
                       for k in PAIRS for li in range(1, L - 1)})


def _teacher_part(cfg: Config, rng, progress) -> dict:
    data = _teacher_data(cfg, rng)
    modes = theory.data_modes(data.X, data.Y)
    plateaus = theory.plateaus(modes.s, modes.y_power)
    out = {"s": modes.s, "plateaus": plateaus, "y_power": modes.y_power, "depths": {}}
    for L, scale in zip(cfg.depths, cfg.random_scales, strict=True):
        progress(f"teacher, depth {L}: five named nets")
        out["depths"][L] = _teacher_depth(cfg, rng, data, modes, plateaus, L, scale)
    return out


def _sine_part(cfg: Config, rng, progress) -> dict:
    """Two-layer and deep ReLU nets on ``y = wᵀx + sin(4wᵀx)``: loss against the lstsq
    linear floor (the two-layer limit on a symmetric sample)."""
    w = rng.uniform(-0.5, 0.5, size=cfg.sine_d)
    X = rng.normal(size=(cfg.sine_n, cfg.sine_d))
    z = X @ w
    X, Y = symmetrize(X, (z + np.sin(4.0 * z))[:, None])
    data = Dataset(np.asarray(X), np.asarray(Y))
    progress(f"sine target, depths {cfg.sine_depths}")
    nets = {L: numpy_gaussian(rng, (cfg.sine_d,) + (cfg.sine_width,) * (L - 1) + (1,), cfg.sine_scale)
            for L in cfg.sine_depths}
    runs = train({f"depth_{L}": Member(p, alpha=0.0) for L, p in nets.items()}, data,
                      GDConfig(lr=cfg.sine_lr, steps=int(np.ceil(cfg.sine_t_max / cfg.sine_lr)),
                               n_records=cfg.n_records, spacing="log"))
    out = {"floor": theory.linear_floor(data.X, data.Y), "y_power": float(np.mean(np.asarray(Y) ** 2)),
           "runs": {}}
    for L in cfg.sine_depths:
        tr = runs[f"depth_{L}"]
        out["runs"][L] = dict(t=np.asarray(tr.t), loss=np.asarray(tr.loss), even=np.asarray(tr.even_energy),
                              odd_nl=odd_nonlinearity(net_function(tr.params, 0.0), data.X).fraction)
    return out


def run(cfg: Config, seed: int = 0, progress: Progress = quiet) -> Result:
    rng = np.random.default_rng(seed)
    teacher = _teacher_part(cfg, rng, progress)
    sine = _sine_part(cfg, rng, progress)
    progress("checks")
    metrics, arrays = (a | b for a, b in zip(_teacher_summary(teacher), _sine_summary(sine), strict=True))
    return Result("deep", seed, {}, metrics, _checks(cfg, teacher, sine), arrays,
                  _notes(cfg, metrics))


def _checks(cfg: Config, teacher: dict, sine: dict) -> dict:
    s, y_power = teacher["s"], teacher["y_power"]
    D = teacher["depths"]
    map_gap = max(float(np.max(np.abs(d["members"]["linear_aligned"]["a"] - d["a_map"]) / s))
                  for d in D.values())
    # linear member: its time is λ t; GD vs flow within the first-order step error
    half_err = max(float(np.max(np.abs(d["members"]["linear_aligned"]["t_half"] * d["lam"] / d["t_half_th"]
                                       - 1))) for d in D.values())
    half_tol = max(cfg.lr * d["lam"] * float(s[0]) ** (2 - 2 / L) for L, d in D.items())
    odd_even = max(float(np.max(d["members"][k]["even"])) for d in D.values() for k in PAIRS) / y_power
    ident = max(abs(m["direct"] - m["odd_nl"][-1])
                for d in D.values() for m in d["members"].values()) / y_power
    two_min = float(np.min(sine["runs"][2]["loss"]) / sine["floor"])
    return {
        "deep_linear_gd_exact_mode_map": at_most(
            map_gap, ROUND_OFF,
            "The deep linear net from balanced aligned init follows the exact GD mode map "
            "a ← a(1 + η(s - a)a^{(L-2)/L})^L to round-off (max gap / s).",
            unit="fraction of s (mode strength)"),
        "deep_linear_half_times_match_flow": at_most(
            half_err, half_tol,
            "Its transition times match the gradient-flow closed form of §3.3 (quadrature) "
            "within the first-order step error η s₁^{2-2/L} (max relative gap).",
            unit="relative error of t½"),
        "pair_nets_stay_exactly_odd": at_most(
            odd_even, ROUND_OFF**2,
            "Deep ReLU pair nets keep f(-x) = -f(x) on symmetric data (even energy / <||y||²> "
            "at round-off²), although their middle blocks lose antisymmetry.",
            unit="fraction of <‖y‖²>"),
        "odd_nonlinear_energy_identity": at_most(
            ident, ROUND_OFF,
            "The odd nonlinear energy from the identity 2L = ||Σ_yx - β_effᵀ||² + <||f_odd - "
            "β_effᵀx||²> + <||f_even||²> equals the direct measurement at the final "
            "parameters (difference / <||y||²>, round-off).",
            unit="fraction of <‖y‖²>"),
        "two_layer_never_below_linear_floor": at_least(
            two_min, 1.0 - ROUND_OFF,
            "On the symmetric sine data the two-layer ReLU loss never goes below the "
            "least-squares linear floor (min_t L / floor ≥ 1 up to round-off, §1.3).",
            unit="ratio to the linear floor"),
    }


def _teacher_summary(teacher: dict) -> tuple[dict, dict]:
    s = teacher["s"]
    metrics = {f"s_{i + 1}": float(v) for i, v in enumerate(s)}
    arrays = {"s": s, "plateaus": teacher["plateaus"]}
    for L, D in teacher["depths"].items():
        lam, M = D["lam"], D["members"]
        for i in range(s.size):
            # a linear member's record j sits at λ t_j, so its crossing on the t axis is its
            # own time / λ: the mapped prediction for the ReLU net
            metrics[f"L{L}_t_half_theory_mode_{i + 1}"] = float(D["t_half_th"][i] / lam)
            for name in MEMBERS:
                metrics[f"L{L}_t_half_{name}_mode_{i + 1}"] = float(M[name]["t_half"][i])
            metrics[f"L{L}_relu_pair_over_rescaled_linear_t_half_mode_{i + 1}"] = float(
                M["relu_pair_aligned"]["t_half"][i] / M["linear_aligned"]["t_half"][i])
        for name, m in M.items():
            metrics[f"L{L}_{name}_max_odd_nonlinear_fraction"] = float(
                np.max(m["odd_nl"] / np.maximum(m["odd_energy"], 1e-300)))
            metrics[f"L{L}_{name}_max_even_energy_over_y_power"] = float(
                np.max(m["even"]) / teacher["y_power"])
            metrics[f"L{L}_{name}_final_loss"] = float(m["loss"][-1])
            for k, (gap, purity) in enumerate(m["plateau_gap"]):
                metrics[f"L{L}_{name}_plateau_{k + 1}_rel_gap"] = float(gap)
                metrics[f"L{L}_{name}_plateau_{k + 1}_purity"] = float(purity)
            for li in range(L):
                metrics[f"L{L}_{name}_final_erank_layer_{li + 1}"] = float(m["erank"][-1, li])
            arrays |= {f"L{L}_{k}_{name}": m[k]
                       for k in ("loss", "a", "even", "odd_nl", "odd_energy", "erank")}
        metrics[f"L{L}_pair_vs_linear_max_mode_gap_over_s"] = float(
            np.max(np.abs(M["relu_pair_aligned"]["a"] - M["linear_aligned"]["a"]) / s))
        metrics[f"L{L}_pair_random_vs_twin_max_mode_gap_over_s"] = float(
            np.max(np.abs(M["relu_pair_random"]["a"] - M["linear_twin_of_pair_random"]["a"]) / s))
        for (name, li), v in D["drift"].items():
            metrics[f"L{L}_{name}_final_block_symmetric_part_layer_{li + 1}"] = v
        metrics[f"L{L}_time_factor_lambda"] = lam
        arrays |= {f"L{L}_t": D["t"], f"L{L}_a_flow": D["a_flow"], f"L{L}_lam": np.asarray(lam)}
    return metrics, arrays


def _sine_summary(sine: dict) -> tuple[dict, dict]:
    floor = sine["floor"]
    metrics = {"sine_linear_floor": floor, "sine_y_power": sine["y_power"]}
    arrays = {"sine_depths": np.asarray(list(sine["runs"])), "sine_floor": np.asarray(floor)}
    for L, R in sine["runs"].items():
        below = np.nonzero(R["loss"] < floor)[0]
        metrics[f"sine_L{L}_min_loss_over_floor"] = float(np.min(R["loss"]) / floor)
        metrics[f"sine_L{L}_first_time_below_floor"] = float(R["t"][below[0]]) if below.size else float("nan")
        metrics[f"sine_L{L}_final_odd_nonlinear_fraction"] = float(R["odd_nl"])
        metrics[f"sine_L{L}_max_even_energy"] = float(np.max(R["even"]))
        arrays[f"sine_L{L}_t"], arrays[f"sine_L{L}_loss"] = R["t"], R["loss"]
    return metrics, arrays


def _notes(cfg: Config, m: dict) -> str:
    parts = []
    for L in cfg.depths:
        r = [m[f"L{L}_relu_pair_over_rescaled_linear_t_half_mode_{i + 1}"] for i in
             range(len(cfg.s))]
        parts.append(f"L = {L}: ReLU pair net's transition times / deep-linear prediction at λt "
                     f"(λ = {m[f'L{L}_time_factor_lambda']:.3f}) = "
                     + ", ".join(f"{v:.2f}" for v in r)
                     + f"; middle-block symmetric part "
                     f"{m[f'L{L}_relu_pair_aligned_final_block_symmetric_part_layer_2']:.2f}")
    sine = "; ".join(f"depth {L}: min L/floor = {m[f'sine_L{L}_min_loss_over_floor']:.3f}"
                     for L in cfg.sine_depths)
    return ("Deep ReLU nets are not deep linear nets in rescaled time: " + "; ".join(parts)
            + f". Sine target vs the two-layer (linear) floor: {sine}.")
