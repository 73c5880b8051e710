"""Reference learning curves for any inputs: exact where possible, integrated otherwise (§3.5).

A :class:`Curve` records what was predicted and *which reference* produced it:

- ``"riccati"`` — exact closed form (:mod:`.riccati`): two layers, whitened inputs
  (``XᵀX/N = I``), balanced init (aligned or not). Covers the logistic modes of §3.1.
- ``"ode"`` — the small equivalent linear network integrated numerically from the data's
  second moments ``Σ_xx``, ``Σ_yx`` and ``tr Σ_yy`` alone (:func:`linear_net_ode`,
  :func:`moment_loss`): any depth, any input covariance, any init, weight decay. Two layers
  by the stiff Rosenbrock-W solver of :mod:`biasfree.theory.stiff` (in ``Σ_xx``'s eigenbasis, an exact
  reduction), deeper nets by ``scipy.integrate.solve_ivp``'s DOP853.

Both work on the *linear twin* of a two-layer leaky net (docs/theory.md §2.4, §2.7), exact
only while its even part stays zero on the data; :func:`reference_curve` measures that and
marks a curve resting on a violated precondition ``APPROXIMATE`` (``exact`` False).
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass

import numpy as np
from scipy.integrate import DOP853

from .. import _validate as v
from ..core.blocks import _outputs_and_mirror
from ..core.layers import Params, check_net, takes_net
from ..core.precision import precise
from ..core.symmetry import _mirror_violation, max_row_norm
from ..core.twin import twin_weights, unchecked_slope_factor
from .inits import _imbalance
from .leaky import check_two_layer
from .modes import check_decay
from .riccati import _unaligned_product
from .stiff import CURVE_FAILED, STIFF_ATOL, STIFF_RTOL, two_layer_flow

REFERENCES = ("riccati", "ode")
"""The reference curves: the exact Riccati solution, or the integrated ODE."""
WHITENING_TOL = 1e-10
"""``max |XᵀX/N - I|`` up to which inputs count as whitened (the Riccati form's precondition)."""
BALANCE_TOL = 1e-10
"""Relative imbalance (:func:`~biasfree.theory.imbalance`) up to which an init counts as balanced."""
ODE_RTOL, ODE_ATOL = 1e-11, 1e-14
"""The default tolerances of :func:`linear_net_ode`'s ``solve_ivp`` (DOP853); the stiff
solver's are :data:`~biasfree.theory.stiff.STIFF_RTOL`, :data:`~biasfree.theory.stiff.STIFF_ATOL`."""
SOLVERS = ("auto", "ros34pw2", "dop853")
""":func:`linear_net_ode`'s solvers: ``"ros34pw2"`` the stiff two-layer solver of
:mod:`biasfree.theory.stiff`, ``"dop853"`` the explicit one (any depth), ``"auto"`` the first
for two layers."""
EVEN_TOL = 1e-20
"""Even-part energy at init, relative to the output energy, up to which it counts as zero
(round-off of a pair net is ~1e-32)."""


@dataclass(frozen=True)
class Curve:
    """A predicted learning curve on the gradient-flow time axis of the simulated net.

    ``t`` (T,) times, ``loss`` (T,) training loss, ``beta`` (T, d, p) the effective
    linear map ``β_eff(t)`` (``f(x) = β_effᵀ x``), ``reference`` which reference made it
    (one of :data:`REFERENCES`), ``alpha`` the slope of the predicted net, ``note`` the
    assumptions it rests on and what was measured to check them, in words, ``exact``
    whether every precondition of the mapping held (False: ``note`` says
    ``APPROXIMATE`` and by how much).
    """

    t: np.ndarray
    loss: np.ndarray
    beta: np.ndarray
    reference: str
    alpha: float = 1.0
    note: str = ""
    exact: bool = True

    def __post_init__(self):
        v.choice("reference", self.reference, REFERENCES)


def moment_loss(P, Sxx, Syx, y_power: float):
    """``L = ½ y_power - tr(P Σ_xy) + ½ tr(P Σ_xx Pᵀ)`` for products ``P`` (..., p, d),
    ``Sxx`` = Σ_xx (d, d), ``Syx`` = Σ_yx (p, d), ``y_power`` = tr Σ_yy: the mean half
    squared error of the linear map P on the data these moments came from."""
    Sxx = v.finite_array("Sxx", Sxx, ndim=2)
    d = Sxx.shape[0]
    Syx = v.finite_array("Syx", Syx, ndim=2)
    if Sxx.shape != (d, d) or Syx.shape[1] != d:
        raise ValueError(f"Sxx must be (d, d) and Syx (p, d) with the same d; got {Sxx.shape} and "
                         f"{Syx.shape}")
    P = v.finite_array("P", P, ndim=tuple(range(2, 8)))
    if P.shape[-2:] != Syx.shape:
        raise ValueError(f"P must have shape (..., p, d) = (..., {Syx.shape[0]}, {d}), got {P.shape}")
    y_power = v.nonnegative("y_power", y_power, scalar=True, why="the mean squared target tr Σ_yy")
    return _moment_loss(P, Sxx, Syx, y_power)


def _moment_loss(P, Sxx, Syx, y_power: float):
    """:func:`moment_loss` of checked float arrays, unchecked."""
    fit = np.einsum("...pd,...pd->...", P @ Sxx, P)  # P Σ_xx by BLAS (a 3-operand einsum loops in C)
    return 0.5 * float(y_power) - np.einsum("...pd,pd->...", P, Syx) + 0.5 * fit


def product(Ws):
    return functools.reduce(lambda P, W: W @ P, Ws)


@takes_net(bias_free=True)
def linear_net_ode(params: Params, Sxx, Syx, t, *, weight_decay: float = 0.0,
                   rtol: float | None = None, atol: float | None = None,
                   time_budget: float | None = None, solver: str = "auto") -> np.ndarray:
    """Products ``P(t) = W_L(t) ⋯ W_1(t)`` (T, p, d) of a bias-free *linear* net under
    gradient flow ``dW_l/dt = -(W_L⋯W_{l+1})ᵀ (P Σ_xx - Σ_yx) (W_{l-1}⋯W_1)ᵀ - λ W_l``.

    ``params`` the initial net (any depth), ``Sxx`` = Σ_xx (d, d), ``Syx`` = Σ_yx (p, d),
    ``t`` times (T,) ≥ 0, ``weight_decay`` λ, ``solver`` one of :data:`SOLVERS`, ``rtol``/``atol``
    its tolerances (None: :data:`ODE_RTOL`/:data:`ODE_ATOL` for DOP853,
    :data:`~biasfree.theory.stiff.STIFF_RTOL`/:data:`~biasfree.theory.stiff.STIFF_ATOL` for ROS34PW2).
    Memory O(parameters +
    T·p·d). ``time_budget``: seconds the integration may run (None: no limit); past it the
    solver stops after its current step and only the times reached are returned, ``P`` for
    ``t[t <= t_reached]`` in order. The flow is stiff for ill-conditioned Σ_xx (an explicit
    step is limited by λ_max(Σ_xx) Σ_l Π_{j≠l} ||W_j||², the horizon by the slowest mode): on
    raw pixels DOP853 needs thousands of steps, the stiff solver (two layers) a few hundred.
    """
    lam = check_decay(weight_decay)
    d, p = params[0].matrix.shape[1], params[-1].matrix.shape[0]
    Sxx = v.finite_array("Sxx", Sxx, ndim=2)
    Syx = v.finite_array("Syx", Syx, ndim=2)
    if Sxx.shape != (d, d) or Syx.shape != (p, d):
        raise ValueError(f"Sxx must be (d, d) = {(d, d)} and Syx (p, d) = {(p, d)} to match params "
                         f"(input dimension d, outputs p); got {Sxx.shape} and {Syx.shape}")
    scale = max(float(np.max(np.abs(Sxx))), 1e-300)
    if np.max(np.abs(Sxx - Sxx.T)) > 1e-10 * scale or np.linalg.eigvalsh(Sxx)[0] < -1e-10 * scale:
        raise ValueError("Sxx must be a second-moment matrix XᵀX/N: symmetric, positive semi-definite")
    solver = v.choice("solver", solver, SOLVERS)
    if solver == "ros34pw2" and len(params) != 2:
        raise ValueError(f"solver='ros34pw2' integrates two-layer nets; this one has {len(params)} layers: "
                         "use solver='dop853' (or 'auto')")
    rtol = None if rtol is None else v.positive("rtol", rtol, scalar=True)
    atol = None if atol is None else v.positive("atol", atol, scalar=True)
    if time_budget is not None:
        time_budget = v.positive("time_budget", time_budget, scalar=True, why="seconds of the ODE")
    t = np.atleast_1d(v.times("t", t, ndim=(0, 1)))
    return _linear_net_ode(params, Sxx, Syx, t, lam, rtol, atol, time_budget, solver)


def _solver(params: Params, solver: str = "auto") -> str:
    return ("ros34pw2" if len(params) == 2 else "dop853") if solver == "auto" else solver


def _linear_net_ode(params: Params, Sxx, Syx, t, lam: float, rtol: float | None = None,
                    atol: float | None = None, time_budget: float | None = None, solver: str = "auto",
                    stats: dict | None = None) -> np.ndarray:
    """:func:`linear_net_ode` unchecked: a bias-free net, float arrays ``Sxx`` (d, d) (a second-moment
    matrix), ``Syx`` (p, d) and times ``t`` (T,) >= 0, λ = ``lam``, tolerances, budget and solver
    checked; ``stats`` (a dict) receives the stiff solver's step counts."""
    stiff = _solver(params, solver) == "ros34pw2"
    rtol = (STIFF_RTOL if stiff else ODE_RTOL) if rtol is None else rtol
    atol = (STIFF_ATOL if stiff else ODE_ATOL) if atol is None else atol
    shapes = [np.shape(layer.matrix) for layer in params]
    splits = np.cumsum([int(np.prod(s)) for s in shapes])[:-1]

    def unpack(theta):
        return [c.reshape(s) for c, s in zip(np.split(theta, splits), shapes, strict=True)]

    def field(_, theta):
        Ws = unpack(theta)
        G = product(Ws) @ Sxx - Syx
        grads = []
        for l in range(len(Ws)):  # the products around layer l; none (not an identity) at the ends
            AG = product(Ws[l + 1:]).T @ G if l + 1 < len(Ws) else G
            AGB = AG @ product(Ws[:l]).T if l else AG
            grads.append((-AGB - lam * Ws[l]).ravel())
        return np.concatenate(grads)

    ts, inverse = np.unique(t, return_inverse=True)
    theta0 = np.concatenate([np.asarray(layer.matrix, float).ravel() for layer in params])
    if ts[-1] == 0.0:
        Ps = product(unpack(theta0))[None]
    elif stiff:
        W1, W2 = (np.asarray(layer.matrix, float) for layer in params)
        Ps = np.stack(two_layer_flow(W1, W2, Sxx, Syx, ts, lam, rtol, atol, time_budget, stats))
    else:
        Ps = np.stack(_integrate(field, theta0, ts, rtol, atol, lambda y: product(unpack(y)), time_budget))
    inverse = inverse.ravel()
    return Ps[inverse[inverse < len(Ps)]]


def _integrate(field, theta0, ts, rtol, atol, reduce, time_budget=None) -> list:
    """``[reduce(θ(t)) for t in ts]`` (ts sorted, ts[-1] > 0) for ``dθ/dt = field(t, θ)``, θ(0) =
    ``theta0``: the steps and dense output of ``solve_ivp(..., method="DOP853", t_eval=ts)``, the
    same numbers, but each state reduced as soon as it is interpolated instead of all T states
    kept (T × the parameters: 1.3 GB for a 784→1024→10 net at T = 201). Past ``time_budget``
    seconds it stops after the current step: the list then holds the first times only."""
    solver = DOP853(field, 0.0, theta0, float(ts[-1]), rtol=rtol, atol=atol)
    out, i = [], 0
    deadline = None if time_budget is None else time.monotonic() + time_budget
    while i < ts.size and (deadline is None or not out or time.monotonic() < deadline):
        message = solver.step()
        if solver.status == "failed":
            raise RuntimeError(f"the linear net's ODE failed at t = {solver.t:.6g} of {ts[-1]:g} "
                               f"({message}): " + CURVE_FAILED)
        k = int(np.searchsorted(ts, solver.t, side="right"))  # t_eval points up to this step's end
        if k > i:
            sol = solver.dense_output()
            for j in range(i, k, 8):  # a few at a time: the interpolant is elementwise in t
                out.extend(reduce(y) for y in sol(ts[j:min(j + 8, k)]).T)
            i = k
    return out


@precise
def reference_curve(params: Params, X, Y, t, *, alpha=1.0, weight_decay: float = 0.0,
                    method: str = "auto", symmetry_tol: float = 1e-9,
                    time_budget: float | None = None) -> Curve:
    """Predicted gradient-flow curve of ``params`` (slope ``alpha``) on data ``X`` (N, d),
    ``Y`` (N, p) at times ``t`` (T,), weight decay λ = ``weight_decay``.

    ``method``: ``"riccati"`` (exact; needs two layers, whitened X, balanced init),
    ``"ode"`` (numerical, always applicable) or ``"auto"`` (riccati when it applies, else
    ode). Leaky nets (α < 1, two layers) are mapped to their linear twin
    ``√c (W_1, W_2)``, time ``c t``, decay ``λ/c`` first: exact iff ``f_even ≡ 0`` along
    the flow, i.e. the even part is zero at init (measured, relative to the output
    energy, against :data:`EVEN_TOL`) *and* the data are mirror-symmetric as a multiset
    (:func:`biasfree.core.symmetry.mirror_violation` at most ``symmetry_tol`` times the
    largest row norm of ``[X, Y]``). The returned :class:`Curve` says which reference was
    used, what was measured, and is marked ``APPROXIMATE`` (``exact=False``) when a
    precondition failed. Biases are refused (the twin maps are for bias-free nets).
    ``time_budget``: seconds the ODE may run (None: no limit; :func:`linear_net_ode`); a curve
    cut short holds the times reached only (``t`` shorter than asked) and its note says so.
    """
    method = v.choice("method", method, ("auto",) + REFERENCES)
    X, Y = v.data(X, Y)
    check_net(params, bias_free=True, d=X.shape[1], p_out=Y.shape[1])
    t = np.atleast_1d(v.times("t", t, ndim=(0, 1)))
    alpha = v.slope(alpha)
    symmetry_tol = v.nonnegative("symmetry_tol", symmetry_tol, scalar=True)
    if time_budget is not None:
        time_budget = v.positive("time_budget", time_budget, scalar=True, why="seconds of the ODE")
    lam = check_decay(weight_decay)
    if alpha != 1.0:
        check_two_layer(params, "the leaky-linear map")
    return _reference_curve(params, X, Y, t, alpha=alpha, weight_decay=lam, method=method,
                            symmetry_tol=symmetry_tol, time_budget=time_budget)


@dataclass(frozen=True)
class Known:
    """What a caller (``analyse``) has already measured on the same net and data, so that
    ``_reference_curve`` does not measure it again: ``Sxx`` = XᵀX/N, and for a leaky net
    ``even`` = (<||f_even||²>, <||f||²>) at init and ``mirror`` = the mirror violation of [X, Y]
    (absolute, relative to the largest row norm); each computed as here, the same numbers."""

    Sxx: np.ndarray
    even: tuple[float, float] | None = None
    mirror: tuple[float, float] | None = None


def _reference_curve(params: Params, X, Y, t, *, alpha: float, weight_decay: float, method: str = "auto",
                     symmetry_tol: float = 1e-9, time_budget: float | None = None,
                     rtol: float | None = None, known: Known | None = None) -> Curve:
    """:func:`reference_curve` unchecked: a bias-free net of the data's ends, float arrays ``X`` (N, d),
    ``Y`` (N, p) and ``t`` (T,) >= 0, one slope ``alpha`` and the other arguments already checked;
    ``rtol`` the ODE's (None: its solver's default, atol 1e-3 rtol); ``known`` what need not be
    measured again (:class:`Known`)."""
    N = X.shape[0]
    notes, exact = [], True
    lin, t_lin, lam = params, t, weight_decay
    if alpha != 1.0:
        c = float(unchecked_slope_factor(alpha))
        lin = twin_weights(params, alpha, 2)  # leaky_to_linear, leaky_time_to_linear, ..._decay_...
        t_lin = c * t
        lam = lam / c
        if known is not None and known.even is not None:
            e0, energy = known.even
        else:
            F, Fm = _outputs_and_mirror(params, X, alpha)  # in row blocks: no N × width array
            e0 = float(np.mean(np.sum((0.5 * (F + Fm)) ** 2, axis=1)))
            energy = float(np.mean(np.sum(F**2, axis=1)))
        e_rel = e0 / energy if energy > 0 else 0.0
        if known is not None and known.mirror is not None:
            mv, mv_rel = known.mirror
        else:
            mv = _mirror_violation(X, Y)
            mv_rel = mv / max(max_row_norm(X, Y), 1e-300)
        head = f"leaky net mapped to its linear twin (c = {c:g}); "
        exact = not (e_rel > EVEN_TOL or mv_rel > symmetry_tol)
        if e_rel > EVEN_TOL:
            notes.append(head + f"APPROXIMATE: even-part energy {e0:.3g} at init ({e_rel:.3g} of the "
                                "output energy; docs/theory.md §2.6)")
        elif mv_rel > symmetry_tol:
            notes.append(head + f"APPROXIMATE: even part zero at init but the data are not "
                                f"mirror-symmetric (mirror violation {mv:.3g}, {mv_rel:.3g} of the "
                                f"largest row norm > symmetry_tol={symmetry_tol:g}), so the even "
                                "part grows during training; symmetrise the data "
                                "(biasfree.symmetrize) for an exact twin")
        else:
            notes.append(head + f"exact: even part zero at init (relative energy {e_rel:.1e}) and "
                                f"mirror-symmetric data (relative violation {mv_rel:.1e})")
    Sxx = X.T @ X / N if known is None else known.Sxx
    Syx, y_power = Y.T @ X / N, float(np.sum(Y**2) / N)
    w_err = float(np.max(np.abs(Sxx - np.eye(X.shape[1]))))  # _whitening_error(X), from Sxx
    # the imbalance (an h × h product) matters only where the closed form could apply
    closed = len(lin) == 2 and (w_err <= WHITENING_TOL or method == "riccati")
    gap = _imbalance(lin) if closed else float("nan")
    riccati_ok = len(lin) == 2 and w_err <= WHITENING_TOL and gap <= BALANCE_TOL
    if method == "riccati" and not riccati_ok:
        raise ValueError(f"method='riccati' needs two layers (got {len(lin)}), whitened inputs "
                         f"(max|XᵀX/N - I| = {w_err:.2e}, must be <= {WHITENING_TOL:g}) and a balanced "
                         f"init (relative imbalance {gap:.2e}, must be <= {BALANCE_TOL:g}); use "
                         "method='ode' (or whiten X, see biasfree.data.whiten)")
    if method == "riccati" or (method == "auto" and riccati_ok):
        P = _unaligned_product(t_lin, lin, Syx, lam)  # balanced: riccati_ok
        ref = "riccati"
        notes.append(f"exact closed form: whitened inputs (max|XᵀX/N - I| = {w_err:.1e} <= "
                     f"{WHITENING_TOL:g}), balanced two-layer init (imbalance {gap:.1e} <= "
                     f"{BALANCE_TOL:g})")
    else:
        stats: dict = {}
        rtol = rtol or (STIFF_RTOL if _solver(lin) == "ros34pw2" else ODE_RTOL)
        P = _linear_net_ode(lin, Sxx, Syx, t_lin, lam, rtol, 1e-3 * rtol, time_budget, stats=stats)
        ref = "ode"
        notes.append(f"numerical: linear-network gradient flow integrated by the stiff solver ROS34PW2 in "
                     f"Σ_xx's eigenbasis ({stats.get('r', Sxx.shape[0])} input directions with nonzero "
                     f"variance, all kept; {stats.get('steps', 0)} steps, rtol {rtol:g})"
                     if _solver(lin) == "ros34pw2" else
                     "numerical: linear-network gradient flow integrated by solve_ivp (DOP853)")
        if len(P) < t.size:  # the budget ran out: P holds the times up to the last one reached
            keep = t_lin <= np.sort(t_lin)[len(P) - 1]
            notes.append(f"CUT SHORT: the ODE's time_budget of {time_budget:g} s ran out at t = "
                         f"{float(np.max(t[keep])):.4g} of {float(np.max(t)):.4g} (stiff: ill-conditioned "
                         "inputs); call theory.reference_curve without time_budget for the whole curve")
            t = t[keep]
    loss = _moment_loss(P, Sxx, Syx, y_power)
    return Curve(t=t, loss=np.asarray(loss), beta=np.transpose(P, (0, 2, 1)), reference=ref,
                 alpha=alpha, note="; ".join(notes), exact=exact)
