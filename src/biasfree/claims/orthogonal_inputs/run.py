"""The run of :mod:`biasfree.claims.orthogonal_inputs`: its measurements and their checks against theory."""

from __future__ import annotations

import jax
import numpy as np

from ... import theory
from ...core.data import Dataset, orthogonal_data
from ...core.inits import balanced_units
from ...core.nets import forward
from ...dynamics import GDConfig, Member, record_steps, train
from ...results import Result, at_most
from ...theory.orthogonal import aligned_halves_init, alignment_directions, half_net_modes, half_targets
from ..base import Progress, quiet
from ..checks import ROUND_OFF
from . import ALIGN, Config


def sin_angle(A, B):
    """``sin ∠(a, b)`` row by row for A, B (..., d); 1 where either row is zero."""
    na, nb = np.linalg.norm(A, axis=-1), np.linalg.norm(B, axis=-1)
    cos = np.sum(A * B, axis=-1) / np.where(na * nb > 0, na * nb, 1.0)
    return np.where(na * nb > 0, np.sqrt(np.clip(1.0 - cos**2, 0.0, 1.0)), 1.0)


def _logit_slope(t, b, s, lo=0.1, hi=0.9):
    """Least-squares slope of ``ln(b/(s - b))`` over records with ``lo <= b/s <= hi``: the
    rate of a logistic ``db/dt = 2 b (s - b)`` is 2s."""
    sel = (b >= lo * s) & (b <= hi * s)
    if sel.sum() < 3:
        return float("nan")
    return float(np.polyfit(t[sel], np.log(b[sel] / (s - b[sel])), 1)[0])


def _quantiles(a, mask):
    """10/50/90 % quantiles over units (columns of ``mask``-selected units) per record
    (NaN where no unit is selected)."""
    if not np.any(mask):
        return np.full((a.shape[0], 3), np.nan)
    return np.quantile(a[:, mask], [0.1, 0.5, 0.9], axis=1).T


def _problem(cfg: Config, rng) -> dict:
    """Directions Q, odd target o, even part e (ranked with |o|: Σ|o|e > 0), a mixed even
    part (|e_i| > |o_i| for about 1/3 of pairs), the three data sets, the inits and β* = Qo/||o||."""
    n, d, m = cfg.n, cfg.d, cfg.width
    Q, _ = np.linalg.qr(rng.normal(size=(d, n)))
    o = rng.choice([-1.0, 1.0], size=n) * (0.5 + rng.uniform(size=n))
    u = np.empty(n)
    u[np.argsort(np.abs(o))] = np.linspace(-0.5, 1.0, n)
    e = cfg.even_ratio * np.abs(o) * u
    e_mix = 1.5 * o * rng.uniform(-1.0, 1.0, size=n)
    targets = {"full": (o + e, e - o), "odd": (o, -o), "mixed": (o + e_mix, e_mix - o)}
    inits = {k: balanced_units(cfg.scale * rng.normal(size=(m, d)), rng.choice([-1.0, 1.0], size=m))
             for k in ("random", "random_b")}
    mags = np.abs(rng.normal(size=(2, m // 2))) + 0.1  # a±(0) = the random init's, in expectation
    mags *= np.sqrt(m * d * cfg.scale**2 / 2 / np.sum(mags**2, axis=1, keepdims=True))
    inits["aligned"] = aligned_halves_init(Q, o, e, mags)
    return dict(Q=Q, o=o, e=e, targets=targets, inits=inits, beta_star=Q @ o / np.linalg.norm(o),
                data={k: orthogonal_data(Q, *y) for k, y in targets.items()})


INIT_OF = {"full": "random", "odd": "random", "mixed": "random", "mixed_b": "random_b"}
"""The init each run of :data:`ALIGN` starts from (``_runs``)."""


def refuse_large_init(cfg: Config, P: dict) -> None:
    """Refuse, in one line before any training, an init whose output already leaves the early
    phase at t = 0: the alignment check reads the records with ``max |f| <= early · min |y|``
    (``alignment_check``), and with none it has nothing to test (issue 48: an IndexError at
    ``scale=0.05, width=6, n=3``). At init ``f(x) = Σ_k v_k relu(w_k·x)`` with every weight ∝
    ``scale``, so ``max |f|`` ∝ scale² for the same draw and the largest scale that keeps t = 0 in
    the early phase is ``scale · √(early · min |y| / max |f|)``."""
    worst = None
    for run, data in ALIGN.items():
        W, v = (np.asarray(la.W, float) for la in P["inits"][INIT_OF[run]])
        X = np.asarray(P["data"][data].X, float)
        f_max = float(np.max(np.abs(np.maximum(X @ W.T, 0.0) @ v[0])))
        limit = cfg.early * float(np.min(np.abs(np.concatenate(P["targets"][data]))))
        if f_max > limit and (worst is None or limit / f_max < worst[2] / worst[1]):
            worst = (data, f_max, limit)
    if worst is not None:
        data, f_max, limit = worst
        raise ValueError(f"scale={cfg.scale:g} is not a small init here (width={cfg.width}, n={cfg.n}): "
                         f"the net's output at init, max |f| = {f_max:.3g} on the {data} targets, already "
                         f"exceeds early·min|y| = {limit:.3g}, so no record lies in the early phase the "
                         f"alignment check tests; set scale below {cfg.scale * np.sqrt(limit / f_max):.2g} "
                         "(|f| grows as scale²) or raise early")


def _outputs(path, X, alpha):
    """f on X along a path (leaves (T, ...)): (T, N)."""
    return np.asarray(jax.vmap(lambda p: forward(p, X, alpha)[:, 0])(path))


def _runs(cfg: Config, P: dict, steps: int) -> dict:
    """GD with parameters kept at every record; returns (path, outputs) by run name."""
    gd = GDConfig(lr=cfg.lr, steps=steps, n_records=cfg.n_records, keep_params=True)
    I, D = P["inits"], P["data"]
    full = train({"random": Member(I["random"]), "aligned": Member(I["aligned"])}, D["full"], gd)
    odd = train({"random": Member(I["random"], twin=True)}, D["odd"], gd)
    mixed = train({"random": Member(I["random"]), "random_b": Member(I["random_b"])}, D["mixed"], gd)
    trs = {"full": (full["random"], D["full"], 0.0), "aligned": (full["aligned"], D["full"], 0.0),
           "odd": (odd["random"], D["odd"], 0.0), "odd_twin": (odd.twin("random"), D["odd"], 1.0),
           "mixed": (mixed["random"], D["mixed"], 0.0), "mixed_b": (mixed["random_b"], D["mixed"], 0.0)}
    return {k: (tr.path, _outputs(tr.path, data.X, a)) for k, (tr, data, a) in trs.items()}


def _half_nets(cfg: Config, P: dict, F_full, F_aligned, ks, t) -> dict:
    """Half-net strengths ``ã± = σ² a±`` of the random and aligned runs, the exact GD map
    (:func:`~biasfree.theory.gd_mode_strength`) from the aligned start and, for the random
    run, from the first record t1 with ``ã± >= 0.05 s±`` (alignment over, f still small;
    NaN if a half never gets there), their logit slopes, and the predicted outputs. A half
    with no unit in the random init (every v_k of the other sign) is predicted by the
    zero-init curve ``ã = 0``, a fixed point (module doc, item 3); no slope is fitted."""
    n = cfg.n
    rho = np.sqrt(n)
    s_half, tp, tm = half_targets(P["o"], P["e"])
    *s_pm, sig2 = half_net_modes(P["o"], P["e"])
    s_pm = np.asarray(s_pm)
    pos = np.where(s_half > 0, np.arange(n), np.arange(n) + n)  # the points p_i = s_i ρ q_i
    neg = np.where(s_half > 0, np.arange(n) + n, np.arange(n))
    unit_t = (tp / np.linalg.norm(tp), tm / np.linalg.norm(tm))

    def strengths(F):  # (T, N) -> (T, 2): ã± = σ²/ρ Σ_i f(±p_i) t±_i / ||t±||
        return sig2 * np.stack([F[:, pos] @ unit_t[0], F[:, neg] @ unit_t[1]], axis=1) / rho

    a_rand, a_al = strengths(F_full), strengths(F_aligned)
    a_map = np.stack([theory.gd_mode_strength(ks, s_pm[h], a_al[0, h], cfg.lr) for h in range(2)], axis=1)
    v0 = np.asarray(P["inits"]["random"][1].W)[0]
    units = np.array([np.sum(v0 > 0), np.sum(v0 < 0)])  # units of the + and - halves
    pred = np.full_like(a_rand, np.nan)
    for h in range(2):
        if units[h] == 0:  # an empty half-net: zero init, a fixed point
            pred[:, h] = 0.0
            continue
        reached = a_rand[:, h] >= 0.05 * s_pm[h]
        if np.any(reached):  # else the half never learned within t_max: no prediction
            j1 = int(np.argmax(reached))
            pred[j1:, h] = theory.gd_mode_strength(ks[j1:] - ks[j1], s_pm[h], a_rand[j1, h], cfg.lr)
    F_pred = np.full((len(t), 2 * n), np.nan)
    F_pred[:, pos] = rho / sig2 * pred[:, :1] * unit_t[0]
    F_pred[:, neg] = rho / sig2 * pred[:, 1:] * unit_t[1]
    return dict(s_pm=s_pm, tp=tp, tm=tm, s_half=s_half, a_rand=a_rand, a_al=a_al, pred=pred, F_pred=F_pred,
                aligned_gap=float(np.max(np.abs(a_al - a_map) / s_pm)), units=units,
                slopes=np.array([_logit_slope(t, a_rand[:, h], s_pm[h]) if units[h] else np.nan
                                 for h in range(2)]))


def alignment_check(path, F, Q, y, y_neg, cfg):
    """Measured ``sin ∠(w_k(t), D_k)`` against the frozen-residual bound, one run.

    Bound (:func:`~biasfree.theory.orthogonal.alignment_directions`): ``w_k = τ D_k + err``
    with ``||err|| <= B'_k + τ Δ(t)``, where ``B'_k = B_k + η max|v_k| ||G_max||`` (one GD
    step of chatter at a crossing or a stuck coordinate) and
    ``Δ(t) = (ρ/N) ||max_{t'<=t} |f(±ρ q_i)| ||`` (how far residuals drifted from the
    targets). With ``||w_k|| >= τ(||D_k|| - Δ) - B'_k`` this gives
    ``sin∠ <= (B'_k + τ_max Δ)/||w_k||``, ``τ_max = (||w_k|| + B'_k)/(||D_k|| - Δ)``.
    ``path`` leaves (T, ...), ``F`` (T, N). Returns arrays over (records, units); only
    early records count.
    """
    n = Q.shape[1]
    rho, N = np.sqrt(n), 2 * n
    W, v = np.asarray(path[0].W), np.asarray(path[1].W)[:, 0]  # (T, m, d), (T, m)
    D, B = alignment_directions(W[0], np.sign(v[0]), Q, y, y_neg)
    gmax = (rho / N) * np.linalg.norm(np.maximum(np.abs(y), np.abs(y_neg)))
    Bp = B[None] + cfg.lr * np.maximum.accumulate(np.abs(v), axis=0) * gmax
    Fb = np.abs(F)
    drift = (rho / N) * np.linalg.norm(np.maximum.accumulate(np.maximum(Fb[:, :n], Fb[:, n:]), axis=0),
                                       axis=1)
    nw = np.linalg.norm(W, axis=-1)
    nD = np.linalg.norm(D, axis=-1)[None]
    margin = nD - drift[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        tau = np.where(margin > 0, (nw + Bp) / margin, np.inf)
        bound = np.minimum((Bp + tau * drift[:, None]) / nw, 1.0)
    early = np.max(Fb, axis=1) <= cfg.early * np.min(np.abs(np.concatenate([y, y_neg])))
    return {"sin": sin_angle(W, D[None]), "bound": bound, "early": early, "grows": nD[0] > 0,
            "sign_flips": int(np.sum(np.sign(v) != np.sign(v[0]))), "D": D}


def _alignment(cfg: Config, P: dict, R: dict) -> dict:
    """Per run of :data:`ALIGN`: the check arrays and their summaries (max ratio sin∠/bound
    over early records and growing units where the bound is below 1 and below 1/2, the
    fraction of informative bounds, the median angle at the end of the early phase)."""
    out = {}
    for k, data in ALIGN.items():
        a = alignment_check(*R[k], P["Q"], *P["targets"][data], cfg)
        E, g = a["early"], a["grows"]
        bd, sn = a["bound"][E][:, g], a["sin"][E][:, g]
        a["ratio"], a["ratio_tight"] = (float(np.max(sn[bd < lim] / bd[bd < lim])) if np.any(bd < lim)
                                        else np.inf for lim in (1.0, 0.5))  # inf: the bound says nothing
        a["informative"] = float(np.mean(bd < 0.1)) if bd.size else np.nan  # NaN: no growing unit
        a["j_end"] = int(np.nonzero(E)[0][-1])
        a["end_sin"] = float(np.median(a["sin"][a["j_end"]][g])) if np.any(g) else np.nan
        out[k] = a
    return out


def _parts(F, n):
    """Odd and even parts of f on the pairs: ``((f(ρq) - f(-ρq))/2, (f(ρq) + f(-ρq))/2)``."""
    return 0.5 * (F[..., :n] - F[..., n:]), 0.5 * (F[..., :n] + F[..., n:])


def _loss(F, data: Dataset):  # mean half squared error along a path of outputs F (T, N)
    return 0.5 * np.mean((np.asarray(data.Y)[:, 0] - F) ** 2, axis=-1)


def run(cfg: Config, seed: int = 0, progress: Progress = quiet) -> Result:
    progress("data and initialisations")
    P = _problem(cfg, np.random.default_rng(seed))
    refuse_large_init(cfg, P)
    steps = int(np.ceil(cfg.t_max / cfg.lr))
    ks = record_steps(steps, cfg.n_records)
    t = cfg.lr * ks
    progress("GD: full, odd (with its linear twin) and mixed targets")
    R = _runs(cfg, P, steps)
    progress("alignment, half-nets, odd and even parts")
    H = _half_nets(cfg, P, R["full"][1], R["aligned"][1], ks, t)
    align = _alignment(cfg, P, R)
    G = _gaps(cfg, P, R, H)
    return Result("orthogonal-inputs", seed, {}, _metrics(P, R, H, G, align),
                  _checks(cfg, H, align), _arrays(cfg, P, R, H, G, align, t), _notes(cfg, H, G))


def _gaps(cfg: Config, P: dict, R: dict, H: dict) -> dict:
    """Odd and even parts of the full-target run against the odd-target linear twin and the
    half-net prediction (relative to max|o|, max|e|), and the losses."""
    n, o, e = cfg.n, P["o"], P["e"]
    odd_full, even_full = _parts(R["full"][1], n)
    odd_pred, even_pred = _parts(H["F_pred"], n)
    odd_relu, _ = _parts(R["odd"][1], n)
    odd_twin = R["odd_twin"][1][:, :n]  # linear twin: record j sits at twin time c t_j
    o_max, e_max = np.max(np.abs(o)), np.max(np.abs(e))
    D = P["data"]
    return dict(s_odd=float(np.linalg.norm(o) / np.sqrt(n)),  # 2ρ||o||/N = ||Σ_yx|| of the odd target
                odd_full=odd_full, even_full=even_full, odd_pred=odd_pred, even_pred=even_pred,
                odd_twin=odd_twin,
                odd_twin_gap=float(np.max(np.abs(odd_full - odd_twin)) / o_max),
                oddonly_twin_gap=float(np.max(np.abs(odd_relu - odd_twin)) / o_max),
                odd_pred_gap=float(np.nanmax(np.abs(odd_full - odd_pred)) / o_max),
                even_pred_gap=float(np.nanmax(np.abs(even_full - even_pred)) / e_max),
                L_full=_loss(R["full"][1], D["full"]), L_al=_loss(R["aligned"][1], D["full"]),
                L_pred=_loss(H["F_pred"], D["full"]), L_odd=_loss(R["odd"][1], D["odd"]),
                L_twin=_loss(R["odd_twin"][1], D["odd"]),
                L_mix=_loss(R["mixed"][1], D["mixed"]))


def _checks(cfg: Config, H: dict, align: dict) -> dict:
    s_pm, slopes, live = H["s_pm"], H["slopes"], H["units"] > 0  # halves that have units
    empty = "" if live.all() else (f" (the {'+' if live[1] else '-'} half has no unit in this init: "
                                   "it is the zero curve, a fixed point, and has no rate to fit)")
    return {
        "aligned_init_is_two_linear_nets": at_most(
            H["aligned_gap"], ROUND_OFF,
            "Units already on their final active sets: ReLU GD on orthogonal ± inputs equals "
            "two independent linear nets, one per half, via the exact map "
            "ã ← ã(1 + η(s± - ã))², ã = σ²a (max gap / s±, round-off).",
            unit="fraction of s±"),
        "early_alignment_within_frozen_residual_bound": at_most(
            max(a["ratio"] for a in align.values()), 1.0,
            "From small balanced random init every unit's direction matches the derived "
            "limit D_k (frozen residual, piecewise-linear coordinates) within the derived "
            "bound, on the full, odd-only and mixed targets (max sin∠ / bound, early phase).",
            unit="ratio sin∠ / bound"),
        "half_nets_learn_at_rate_2s": at_most(
            float(np.max(np.abs(slopes[live] / (2 * s_pm[live]) - 1))), cfg.lr * float(np.max(s_pm)),
            "From random init the two halves' logits ln(σ²a/(s - σ²a)) grow at the half-net "
            "rates 2s± = 2ρ||t±||/N (not at the odd twin's 2ρ||o||/N) within the first-order "
            f"GD step error η s{empty}.",
            unit="relative error of the rate"),
    } | ({} if live.all() else {"empty_half_never_learns": at_most(
        float(np.max(H["a_rand"][:, ~live] / s_pm[~live])), 0.0,
        "With every output weight of one sign, f has that sign everywhere, so the half with "
        "no unit keeps a strength ã <= 0 at every record: it stays on (or below) its zero-init "
        "curve, a fixed point, and never learns its targets (exact: a sum of same-signed terms).",
        unit="max over records of ã / s of the empty half")})


def _metrics(P: dict, R: dict, H: dict, G: dict, align: dict) -> dict:
    Q, beta_star = P["Q"], P["beta_star"]
    s_odd = G["s_odd"]  # the ReLU twin's rate is 2c s_odd = s_odd
    D_mix = align["mixed"]["D"]

    def sin_beta_end(k):
        return float(np.median(sin_angle(np.asarray(R[k][0][0].W)[align[k]["j_end"]], beta_star[None])))

    def rank_ratio(k):  # σ₂/σ₁ of the final W_1
        sv = np.linalg.svd(np.asarray(R[k][0][0].W)[-1], compute_uv=False)
        return float(sv[1] / sv[0])

    m = {"s_plus": float(H["s_pm"][0]), "s_minus": float(H["s_pm"][1]), "s_odd": float(s_odd),
         "units_plus": float(H["units"][0]), "units_minus": float(H["units"][1]),
         "empty_halves": float(np.sum(H["units"] == 0)),
         "rate_half_plus": float(H["slopes"][0]), "rate_half_minus": float(H["slopes"][1]),
         "rate_odd_twin": float(s_odd),
         "odd_part_gap_to_odd_linear_twin": G["odd_twin_gap"],
         "odd_only_target_gap_to_linear_twin": G["oddonly_twin_gap"],
         "odd_part_gap_to_half_nets_from_t1": G["odd_pred_gap"],
         "even_part_gap_to_half_nets_from_t1": G["even_pred_gap"],
         "final_loss_over_L0_full": float(G["L_full"][-1] / G["L_full"][0]),
         "final_loss_over_L0_mixed": float(G["L_mix"][-1] / G["L_mix"][0]),
         "D_odd_target_max_sin_to_beta_star": float(np.max(sin_angle(align["odd"]["D"], beta_star[None]))),
         "distinct_predicted_directions_mixed": len({tuple(np.round(r / np.linalg.norm(r), 8))
                                                     for r in D_mix if np.linalg.norm(r) > 0}),
         "sign_flips_of_v": float(sum(a["sign_flips"] for a in align.values())),
         "sin_half_direction_plus_to_beta_star": float(sin_angle(Q @ (H["s_half"] * H["tp"]), beta_star)),
         "sin_half_direction_minus_to_beta_star": float(sin_angle(Q @ (H["s_half"] * H["tm"]), beta_star)),
         "W_sv2_over_sv1_final_full": rank_ratio("full"), "W_sv2_over_sv1_final_odd": rank_ratio("odd"),
         "median_sin_to_beta_star_end_of_alignment_full": sin_beta_end("full"),
         "median_sin_to_beta_star_end_of_alignment_odd": sin_beta_end("odd")}
    for k, a in align.items():
        m[f"alignment_max_ratio_{k}"] = a["ratio"]
        m[f"alignment_informative_fraction_{k}"] = a["informative"]
        m[f"alignment_bound_ratio_where_bound_below_half_{k}"] = a["ratio_tight"]
        m[f"alignment_median_sin_end_{k}"] = a["end_sin"]
    return m


def _arrays(cfg: Config, P: dict, R: dict, H: dict, G: dict, align: dict, t) -> dict:
    s_pm, o, beta_star = H["s_pm"], P["o"], P["beta_star"]
    arrays = {
        "t": t, "loss_full": G["L_full"], "loss_aligned": G["L_al"], "loss_half_nets": G["L_pred"],
        "loss_odd": G["L_odd"], "loss_odd_twin": G["L_twin"],
        "strength_random": H["a_rand"] / s_pm, "strength_aligned": H["a_al"] / s_pm,
        "strength_pred": H["pred"] / s_pm,
        "odd_full": G["odd_full"], "odd_twin": G["odd_twin"], "odd_pred": G["odd_pred"], "odd_target": o,
        "even_full": G["even_full"], "even_pred": G["even_pred"], "even_target": P["e"],
        "s_pm": s_pm, "s_odd": np.asarray(G["s_odd"]),
    }
    for k, a in align.items():
        arrays[f"sin_D_{k}"] = _quantiles(a["sin"], a["grows"])
        arrays[f"bound_{k}"] = _quantiles(a["bound"], a["grows"])
        arrays[f"early_{k}"] = a["early"].astype(float)
    for k in ("full", "odd"):
        arrays[f"sin_beta_{k}"] = _quantiles(sin_angle(np.asarray(R[k][0][0].W), beta_star[None, None]),
                                             np.ones(cfg.width, bool))
    return arrays


def _notes(cfg: Config, H: dict, G: dict) -> str:
    s_pm = H["s_pm"]
    return (f"ReLU, n = {cfg.n} orthogonal directions in d = {cfg.d}, ρ = √n, width {cfg.width}, balanced "
            f"init std {cfg.scale:g}, GD η = {cfg.lr:g}. Half-net rates 2s± = "
            f"{2 * s_pm[0]:.4f}, {2 * s_pm[1]:.4f}; the odd linear twin's rate 2c·s_odd = "
            f"{G['s_odd']:.4f}. The odd part does not follow the odd-target linear twin "
            f"(gap {G['odd_twin_gap']:.3g} of max|o|); it follows the two half-nets (gap "
            f"{G['odd_pred_gap']:.3g} from t1). With the odd target alone the gap to the twin is "
            f"{G['oddonly_twin_gap']:.3g}.")
