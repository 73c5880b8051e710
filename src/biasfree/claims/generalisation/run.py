"""The run of :mod:`biasfree.claims.generalisation`: its measurements and their checks against theory."""

from __future__ import annotations

import jax
import numpy as np

from ... import theory
from ...core.data import Dataset
from ...core.inits import init_gaussian, init_pairs
from ...core.nets import forward
from ...core.targets import linear_target, make_dataset, teacher_matrix
from ...core.twin import slope_factor
from ...dynamics import GDConfig, Member, Runs, train
from ...results import Result, at_most
from ...theory import population_loss_linear
from ..base import Progress, quiet
from ..checks import twin_identity
from . import INITS, SIGMAS, Config


def _name(init: str, alpha: float) -> str:
    return f"{init} α={alpha:g}"


def _members(key, cfg: Config) -> dict[str, Member]:
    """Pair and random init (one draw each, std ``scale``) for every α, with their twins."""
    k_pair, k_rand = jax.random.split(key)
    widths = (cfg.d, cfg.width, 1)
    nets = {"pair": init_pairs(k_pair, widths, cfg.scale), "random": init_gaussian(k_rand, widths, cfg.scale)}
    return {_name(init, a): Member(p, a, twin=True) for init, p in nets.items() for a in cfg.alphas}


def _curves(runs: Runs, name: str, twin: bool = False) -> dict[str, np.ndarray]:
    tr = runs.twin(name) if twin else runs[name]
    return {"loss": np.asarray(tr.loss), "test": np.asarray(tr.test_loss),
            "beta": np.asarray(tr.beta)[..., 0]}


def _random_population_gap(runs: Runs, T, data: Dataset, cfg: Config) -> dict[float, tuple]:
    """α -> (|test loss - R| / (5 s.e.), ½ E f_even², R) of the final random-init net,
    R from the arc-cosine kernel (the even part counts)."""
    out = {}
    for a in cfg.alphas:
        p = runs[_name("random", a)].params
        R, half_even2 = theory.population_loss_two_layer(p, T, cfg.noise, a)
        ell = 0.5 * (np.asarray(data.Y_test)[:, 0] - np.asarray(forward(p, data.X_test, a))[:, 0]) ** 2
        out[a] = (abs(ell.mean() - R) / (SIGMAS * ell.std() / np.sqrt(cfg.n_test)), half_even2, R)
    return out


def _flow_reference(members: dict[str, Member], data: Dataset, T, t, cfg: Config):
    """Population loss along gradient flow (solve_ivp on the data moments) of each pair
    net's width-m linear net ``√(1+α)·half`` (:func:`theory.pair_to_linear`) at time c t,
    at a log-spaced subset ``t_flow`` of the GD record times."""
    t_flow = t[np.unique(np.round(np.geomspace(1, len(t) - 1, cfg.flow_records)).astype(int))]
    pop = [population_loss_linear(theory.reference_curve(
        theory.pair_to_linear(members[_name("pair", a)].params, a), data.X, data.Y,
        float(slope_factor(a)) * t_flow, method="ode").beta, T, noise=cfg.noise) for a in cfg.alphas]
    return t_flow, np.stack(pop)


def run(cfg: Config, seed: int = 0, progress: Progress = quiet) -> Result:
    k_teacher, k_data, k_init = jax.random.split(jax.random.PRNGKey(seed), 3)
    alphas = np.asarray(cfg.alphas, float)

    progress("data")
    T = np.asarray(teacher_matrix(k_teacher, cfg.d, [1.0]))
    data = make_dataset(k_data, linear_target(T), cfg.n, cfg.d, n_test=cfg.n_test, noise=cfg.noise)

    progress("GD: pair and random inits for every α, and their linear twins")
    members = _members(k_init, cfg)
    steps = int(np.ceil(cfg.t_max / cfg.lr))
    runs = train(members, data, GDConfig(lr=cfg.lr, steps=steps, n_records=cfg.n_records,
                                              spacing="log"))
    t = np.asarray(runs[_name("pair", alphas[0])].t)
    nets = {(i, a, tw): _curves(runs, _name(i, a), tw) for i in INITS for a in alphas for tw in (False, True)}

    progress("population loss of β_eff and of the final nets")
    pop = {k: population_loss_linear(v["beta"][..., None], T, noise=cfg.noise) for k, v in nets.items()}
    linear = [k for k in nets if k[0] == "pair" or k[2]]  # linear functions: pair nets and every twin
    pop_gap_lin = max(float(np.max(np.abs(nets[k]["test"] - pop[k]) / pop[k])) for k in linear)
    final = _random_population_gap(runs, T, data, cfg)

    progress("gradient-flow reference (linear twin, solve_ivp)")
    t_flow, pop_flow = _flow_reference(members, data, T, t, cfg)
    j_flow = np.searchsorted(t, t_flow)  # t_flow is a subset of the GD record times
    gd_vs_flow = max(float(np.max(np.abs(pop["pair", a, False][j_flow] - pop_flow[i])))
                     for i, a in enumerate(alphas)) / float(pop["pair", alphas[0], False][0])

    progress("checks")
    checks = {
        "pair_init_train_and_test_equal_linear_twin": twin_identity(
            runs, [_name("pair", a) for a in alphas], "With antisymmetric-pair init, leaky nets", test=True),
        "test_loss_equals_population_loss_of_beta": at_most(
            pop_gap_lin, SIGMAS * np.sqrt(2.0 / cfg.n_test),  # relative s.e.: std(ℓ)/mean(ℓ) = √2
            "For linear-function nets (pair init, twins) the test loss at every record "
            "equals ½(||β_eff - T||² + σ²) within 5 standard errors of the n_test sample "
            "(relative, 5√(2/n_test)).",
            unit="relative error (fraction of the population loss)"),
        "random_init_population_loss_with_even_part": at_most(
            max(v[0] for v in final.values()), 1.0,
            "For small random init the final test loss equals ½(||β_eff - T||² + σ²) + "
            "½E f_even² (arc-cosine kernel) within 5 standard errors (value: gap / 5 s.e.).",
            unit="multiples of 5 standard errors"),
    }
    metrics = {"lstsq_train_floor": theory.linear_floor(data.X, data.Y), "noise": cfg.noise,
               "population_loss_of_teacher": 0.5 * cfg.noise**2, "t_max": float(t[-1]), "steps": steps,
               "pair_population_loss_gd_vs_flow_over_R0": gd_vs_flow}
    for a in alphas:
        metrics |= _alpha_metrics(runs, nets, final, t, a)
    arrays = {"alphas": alphas, "t": t, "t_flow": t_flow, "population_loss_flow": pop_flow}
    for i in INITS:
        for tw, suffix in ((False, ""), (True, "_twin")):
            arrays[f"loss_{i}{suffix}"] = np.stack([nets[i, a, tw]["loss"] for a in alphas])
            arrays[f"test_loss_{i}{suffix}"] = np.stack([nets[i, a, tw]["test"] for a in alphas])
        arrays[f"population_loss_{i}"] = np.stack([pop[i, a, False] for a in alphas])
        arrays[f"even_energy_{i}"] = np.stack([np.asarray(runs[_name(i, a)].even_energy) for a in alphas])
    notes = (f"d = {cfg.d}, N = {2 * cfg.n} symmetric points (n = {cfg.n} draws), σ = {cfg.noise:g}, "
             f"width {cfg.width}, init std {cfg.scale:g}, GD η = {cfg.lr:g}; members: pair and random "
             f"init for α = {list(cfg.alphas)}, each beside its linear twin.")
    return Result("generalisation", seed, {}, metrics, checks, arrays, notes)


def _alpha_metrics(runs: Runs, nets: dict, final: dict, t, a: float) -> dict[str, float]:
    """Per-α metrics: train and test gaps to the twin, best (early-stopping) test loss
    and its time × c, final test loss, the random init's even part."""
    c = float(slope_factor(a))
    out = {}
    for i in INITS:
        n, Lt = _name(i, a), nets[i, a, False]["test"]
        j = int(np.argmin(Lt))
        out |= {f"{i}_train_gap_to_twin_alpha_{a:g}": runs.twin_gap(n),
                f"{i}_test_gap_to_twin_alpha_{a:g}": runs.twin_gap(n, test=True),
                f"{i}_best_test_time_x_c_alpha_{a:g}": float(t[j] * c),
                f"{i}_best_test_loss_alpha_{a:g}": float(Lt[j]),
                f"{i}_final_test_loss_alpha_{a:g}": float(Lt[-1])}
    twin_test = nets["random", a, True]["test"]
    out[f"twin_best_test_time_alpha_{a:g}"] = float(t[np.argmin(twin_test)] * c)
    out[f"random_final_half_even_energy_alpha_{a:g}"] = float(final[a][1])
    out[f"random_final_test_loss_gap_to_twin_alpha_{a:g}"] = float(nets["random", a, False]["test"][-1]
                                                                   - twin_test[-1])
    out[f"random_max_even_energy_alpha_{a:g}"] = float(np.max(runs[_name("random", a)].even_energy))
    return out
