"""What :mod:`biasfree.analysis.stage` answers (docs/theory.md §11.7): :class:`Stage`, where a net
stands on its saddle-to-saddle staircase, with the predicted :class:`Staircase` from its init and
the :class:`Recorded` plateaus of a training curve; each prints its numbers and thresholds."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..core.layers import Params
from ..core.units import EffectiveUnits
from ..theory.plateau_times import PlateauPrediction
from .nearest import SOLVES
from .saddles import FixedPoint


@dataclass(frozen=True)
class EmbeddedPoint:
    """What every numerically embedded fixed point θ* reports (§11.7.6, §11.7.12): ``params`` the wide
    net, ``loss``, ``grad``/``grad_tol`` its relative gradient ‖∇L‖‖θ‖/(½⟨‖y‖²⟩) and round-off,
    ``function_gap``/``function_tol`` max ‖f_wide − f_narrow‖ and its round-off, ``rate`` the escape
    rate (λ* of a unit, c* of a head) and ``rate_tol`` its round-off."""

    params: object
    loss: float
    grad: float
    grad_tol: float
    function_gap: float
    function_tol: float
    rate: float
    rate_tol: float

    @property
    def stationary(self) -> bool:
        """The relative gradient is within its round-off bound."""
        return self.grad <= self.grad_tol


@dataclass(frozen=True)
class Staircase:
    """The data-induced staircase from the init (§11.5): ``prediction`` (times, levels,
    crossings), ``a0`` each mode's initial strength, ``s`` the modes, and ``passed`` how many
    drops the net's loss is past (loss ≤ crossing level)."""

    prediction: PlateauPrediction
    a0: np.ndarray
    s: np.ndarray
    passed: int


@dataclass(frozen=True)
class Recorded:
    """The staircase a recorded training curve went through (§11.3): ``plateaus``
    (:class:`~biasfree.theory.staircase.Staircase`, the rule of §11.3.1), each matched to the
    nearest of ``levels`` (``matches``: k units; the reduced-rank losses for a linear net, the
    embedded k-unit fixed points' losses for units), or ``note`` why none were found."""

    plateaus: object
    matches: tuple
    levels: np.ndarray
    note: str = ""


@dataclass(frozen=True)
class Stage:
    """Where a net stands (module doc). ``units``: its effective units now. For a covered family
    (``fixed_point`` not None): ``params_star`` the k-unit fixed point θ* embedded in the net's
    width, ``level`` the reduced-rank loss L_k computed apart, ``distance`` ‖θ − θ*‖,
    ``unstable_distance`` ε = ‖P_E(θ − θ*)‖ along its unstable eigenspace E of dimension
    ``unstable_dim``, ``escape_time`` ``ln(1/ε)/|λ_min|`` (gradient-flow time t = η·steps; inf if not
    a saddle), ``drop_time`` the time to the next drop on whitened inputs (None otherwise).
    ``staircase`` with ``init`` (linear nets). ``notes``: what is not covered, and why."""

    family: str
    loss: float
    units: EffectiveUnits
    fixed_point: FixedPoint | None = None
    params_star: Params | None = None
    level: float | None = None
    distance: float | None = None
    unstable_distance: float | None = None
    unstable_dim: int = 0
    escape_time: float | None = None
    drop_time: float | None = None
    staircase: Staircase | None = None
    notes: tuple[str, ...] = ()
    recorded: Recorded | None = None
    """With a recorded loss curve (``analyse``'s rerun from ``init``): its plateaus matched to levels."""
    unit_point: EmbeddedPoint | None = None
    """(Leaky) ReLU dense and conv nets (§11.7.6): the embedded fixed point, its checks, the one-sided
    escape rate λ* (``fixed_point`` is then None: the Hessian is not defined on the kink)."""
    deep_point: object = None
    """Deep dense linear nets (§11.7.10): the :class:`~biasfree.analysis.deep_stage.DeepPoint`, whose
    saddle rule replaces λ_min's (``fixed_point`` is its gradient and Hessian check; the Hessian does not
    see an escape of order ε^L)."""
    head_point: EmbeddedPoint | None = None
    """Separate linear attention (§11.7.12): the :class:`~biasfree.analysis.attention_stage.HeadFixedPoint`,
    found numerically, whose escape coefficient c* (order ε³) decides the saddle."""
    k: int | None = None
    """Units of the nearest fixed point (§11.7.2: the k whose embedded point is nearest the net, not
    the count; None where none was built)."""
    candidates: tuple = ()
    """``((k, ‖θ − θ*_k‖, stationary), …)``: the embedded k-unit points compared, the nearest stationary
    one reported (§11.7.2; a k left out was ruled out by a lower bound on its distance, §11.7.6; a
    search that reached no fixed point is not one)."""
    init_known: bool = True
    """The init's scale was given (``init``): the count's threshold bounds the init noise. Without it
    the count is only the magnitudes above round-off, an upper bound (§11.1, "without an init")."""
    leave: object = None
    """Where the theory gives no drop time: the :class:`~biasfree.analysis.unit_leave.Leave` measured by GD
    from the net's weights to the drop level. (Leaky) ReLU dense and conv nets where a small member of a
    learned group may leave before the zero units' predicted drop (``copy_time`` < ``drop_time``, §11.7.6);
    two-layer dense linear nets on inputs that are not whitened (§11.7.3). None elsewhere."""
    at_least: bool = False
    """The init's noise bound is at or above some of the data's strengths (linear nets, §11.7.2), so a
    learned mode can read below it: the count is a lower bound, and the units line says "at least"."""

    @property
    def saddle(self) -> bool:
        """The fixed point is a saddle: zero gradient and λ_min < −λ_tol (or, for a ReLU net, the
        one-sided rate λ* > its round-off; for a deep linear net, s_{k+1} > its round-off with a free
        unit), each beyond round-off."""
        if self.deep_point is not None:
            return self.deep_point.saddle
        if self.unit_point is not None:
            return self.unit_point.saddle
        if self.head_point is not None:
            return self.head_point.saddle
        return self.fixed_point is not None and self.fixed_point.saddle

    @property
    def count_decided(self) -> bool:
        """The count tells learned units from init noise: the init's scale was given, or no magnitude
        is above round-off (§11.1, "without an init")."""
        return self.init_known or self.units.count == 0

    @property
    def learned(self) -> int | None:
        """The units learned so far: the k of the nearest fixed point, when one was found (:attr:`found`).
        The effective-unit count also holds units above init noise that are still growing toward the
        next drop (§11.1, "When the count moves": on a data-induced plateau every mode grows from the
        start, so the count reaches all of them before the first drop); None without a fixed point."""
        if not self.found:
            return None
        if self.unit_point is not None:
            return self.unit_point.k
        if self.head_point is not None:
            return self.head_point.k
        return self.units.count if self.k is None else self.k

    def _growing(self) -> str:
        """``"; k learned (…), m growing"`` where the count holds units beyond the nearest fixed point's."""
        k, n = self.learned, self.units.count
        if k is None or n <= k:
            return ""
        g = k if self.unit_point is None else max(self.unit_point.groups, k)  # groups merged into k units
        copies = f", whose copies make {g} groups not yet aligned" if g > k else ""
        growing = f", {n - g} above init noise and still growing" if n > g else ""
        return f"; {k} learned (the nearest fixed point's units{copies}){growing}"

    def units_line(self) -> str:
        """The effective units with their threshold (and, at a fixed point with fewer units, how many
        of them it has learned); without the init's scale (:attr:`count_decided` False), the
        magnitudes above round-off as an upper bound, and the fix."""
        u = self.units
        loss = f", loss {self.loss:.6g}" if np.isfinite(self.loss) else ""
        if self.count_decided:
            low = self.at_least  # the init's noise bound hides learned modes: a lower bound
            least, above = ("at least ", ", above some of the data's strengths") if low else ("", "")
            return (f"effective units {least}{u.count} ({u.family}; threshold {u.threshold:.3g}{above}"
                    f"{self._growing()}){loss}")
        above = u.magnitudes[u.magnitudes > u.threshold]
        what = (f"1 magnitude above round-off {u.threshold:.3g}, {above[0]:.3g}" if u.count == 1 else
                f"{u.count} magnitudes above round-off {u.threshold:.3g}, {above.min():.3g} to "
                f"{above.max():.3g}")
        return (f"effective units undecided ({u.family}; {what}: at most {u.count}; learned units and init "
                f"noise are not told apart without the init's scale: pass init= or --init){loss}")

    def nearest_line(self) -> str:
        """The distances that decided the nearest point: ``‖θ − θ*_k‖`` for each k compared."""
        if not self.candidates:
            return ""
        got, miss = (", ".join(f"{k}: {d:.3g}" for k, d, ok in self.candidates if ok is want)
                     for want in (True, False))
        left = [(k, b) for k, b, ok in self.candidates if ok is None]
        miss = f"; no fixed point reached at {miss}" if miss else ""
        if left:
            ks, bs = [k for k, _ in left], [b for _, b in left]
            cap = f"at most {2 * SOLVES if self.unit_point is not None else SOLVES} searches"
            miss += (f"; not solved ({cap}): {len(ks)} k in {min(ks)}…{max(ks)}, each at "
                     f"least {min(bs):.3g} to {max(bs):.3g} away")
        if self.head_point is not None:
            return f"nearest of ‖θ − θ*_n‖ with the n strongest heads, n = {got}{miss}"
        return f"nearest of ‖θ − θ*_k‖ at k = {got}{miss}"

    @property
    def covered(self) -> bool:
        """A nearest fixed point was built (else ``notes`` says why not)."""
        return self.fixed_point is not None or self.unit_point is not None or self.head_point is not None

    @property
    def found(self) -> bool:
        """A fixed point was found: the one built (``fixed_point``, else ``unit_point``) has its
        relative gradient within its round-off bound. Where the search ended above it, the numbers
        at where it stopped (loss, distance, λ, ε, times) depend on the search, not on the net:
        :meth:`lines` and the JSON leave them out and give the gradient against its bound."""
        point = next((p for p in (self.fixed_point, self.unit_point, self.head_point) if p is not None), None)
        return point is not None and point.stationary

    def lines(self) -> list[str]:
        """The answer in a few short lines (``analyse``'s summary and the CLI): the units, the nearest
        fixed point with its saddle test and time to leave, the distances that made it the nearest,
        then the staircase and the recorded curve where there are."""
        u = self.units
        out = [self.units_line()]
        fp, up, dp, hp = self.fixed_point, self.unit_point, self.deep_point, self.head_point
        kn = u.count if self.k is None else self.k
        if self.covered and not self.found:  # numbers depend on where the search stopped: not printed
            k, point, name, how = ((kn, fp, "fixed_point", "") if fp is not None else
                                   (up.k, up, "unit_point", " after Levenberg–Marquardt and Newton")
                                   if up is not None else
                                   (hp.k, hp, "head_point", " after Levenberg–Marquardt and Newton"))
            out.append(f"no {k}-unit fixed point near the net: its relative gradient {point.grad:.2g} stays "
                       f"above round-off {point.grad_tol:.2g}{how} (not on a plateau; numbers in .{name})")
        elif dp is not None:
            out.append(f"nearest fixed point: best {kn}-unit solution (balanced over {dp.depth} "
                       "layers), "
                       f"loss {fp.loss:.6g}, ‖θ − θ*‖ = {self.distance:.3g}; "
                       + (f"saddle of order {dp.depth}: s_{dp.k + 1} = {dp.s_next:.4g} (tol {dp.s_tol:.2g}), "
                          f"Hessian λ_min = {fp.lambda_min:.2g} (tol {fp.lambda_tol:.2g})" if self.saddle else
                          "not a saddle")
                       + ("" if self.drop_time is None else
                          f"; leaves in t ≈ {self.drop_time:.4g} (next mode from a₀ = {dp.a0:.3g}, §3.3's "
                          f"half time at depth {dp.depth})"))
        elif fp is not None:
            out.append(f"nearest fixed point: best {kn}-unit solution, loss {fp.loss:.6g}, ‖θ − θ*‖ = "
                       f"{self.distance:.3g}; "
                       + (f"saddle, λ_min = {fp.lambda_min:.4g} (tol {fp.lambda_tol:.2g})"
                          if self.saddle else "not a saddle"))
        elif up is not None:
            merged = f" ({up.groups} groups of aligned units merged)" if up.groups > up.k else ""
            out.append(f"nearest fixed point: {up.k} unit{'' if up.k == 1 else 's'} embedded{merged}, loss "
                       f"{up.loss:.6g}, ‖θ − θ*‖ = "
                       f"{up.distance:.3g}; "
                       + (f"saddle, one-sided rate λ* = {up.rate:.4g} (tol {up.rate_tol:.2g})"
                          if self.saddle else f"not a saddle of this width: every unit is in use (a new unit "
                          f"would grow at λ* = {up.rate:.4g})" if up.full and up.stationary
                          and up.rate > up.rate_tol else "not a saddle"))
        elif hp is not None:
            n = len(hp.heads)
            out.append(f"nearest fixed point: {n} head{'' if n == 1 else 's'} solved, the rest zero, loss "
                       f"{hp.loss:.6g}, ‖θ − θ*‖ = {hp.distance:.3g}; "
                       + (f"saddle of order 3, escape coefficient c* = {hp.rate:.4g} "
                          f"(tol {hp.rate_tol:.2g})" + self._leave_short()
                          if self.saddle else "not a saddle"))
        else:
            out.append(self.notes[0] if self.notes else "no fixed point")
        if self.covered and self.saddle and dp is None and hp is None:
            t = self.escape_time if self.drop_time is None else self.drop_time
            up = self.unit_point
            if t == 0 and up is not None and up.drop_level is not None and self.loss < up.drop_level:
                out[-1] += (f"; already past its drop: loss {self.loss:.6g} below the drop level "
                            f"L* − (3/8)λ*²/m = {up.drop_level:.6g}")
            elif t is None or not math.isfinite(t):  # ε = 0: nothing of the net lies along the escape
                out[-1] += ("; when it leaves is not predicted: ε = 0 (no zero unit has a part along the "
                            "escape direction; a copy that leaves its group, not modelled, can start it"
                            + (": measured on the next line)" if self.leave is not None else ")"))
            else:
                out[-1] += (f"; leaves in t ≈ {t:.4g} (ε = {self.unstable_distance:.3g}"
                            + (", next drop at ln(u*/a₀ − 1)/(2λ), a₀ = ε²/2" if self.drop_time is not None
                               else ", ln(1/ε)/rate")
                            + (f"; ε counts the zero units only: a small member of a learned group turned "
                               f"to ŵ* at once would be half learned at t ≈ {up.copy_time:.4g}, and the "
                               + ("time is measured on the next line, §11.7.6)" if self.leave is not None
                                  else "audits' drops came between about the two, §11.7.6)")
                               if up is not None and up.copy_time is not None and up.copy_time < t else ")"))
        if self.leave is not None:
            out.append(self.leave.line())
        if self.candidates and self.found:  # (a search that stopped short: its distance is left out)
            out.append(self.nearest_line())
        if self.staircase is not None:
            st = self.staircase
            out.append(f"staircase from init: levels {np.round(st.prediction.levels, 4).tolist()}, passed "
                       f"{st.passed} of {st.prediction.times.size} drops")
        if self.recorded is not None:
            out.append(self.recorded_line())
        return out

    def _leave_short(self) -> str:
        lv = self.head_point.leave
        if lv is None or not np.isfinite(lv.escape_time):
            return ""
        return f"; leaves in t ≈ {lv.escape_time:.4g} (head {lv.head}, a₀ = {lv.a0:.3g}, cubic blow-up)"

    def recorded_line(self) -> str:
        """The recorded curve's plateaus and the units k each matches."""
        r = self.recorded
        if r.plateaus is None:
            return f"recorded curve: {r.note}"
        got = ", ".join(f"{m.level:.4g} (k = {m.k}: {m.predicted:.4g})" for m in r.matches)
        return (f"recorded curve from init: {len(r.plateaus.plateaus)} plateaus, levels {got}"
                + (f"; {r.note}" if r.note else ""))

    def summary(self) -> str:
        """One line per answer, each with its numbers and thresholds."""
        u = self.units
        out = [f"effective units: {u.count} ({u.family}; magnitudes above {u.threshold:.3g}: {u.why}"
               f"{self._growing()})" if self.count_decided else self.units_line()]
        fp, dp = self.fixed_point, self.deep_point
        kn = u.count if self.k is None else self.k
        if dp is not None:
            out.append(f"nearest fixed point: the best {kn}-unit solution, balanced over {dp.depth} "
                       f"layers ({dp.sweeps} Procrustes sweeps), loss {fp.loss:.6g} "
                       f"(L_{kn} = {self.level:.6g}), "
                       f"distance ‖θ − θ*‖ = {self.distance:.3g}; gradient {fp.grad:.2g} vs round-off "
                       f"{fp.grad_tol:.2g}: " + ("stationary" if fp.stationary else "NOT stationary"))
            out.append(f"next mode s_{dp.k + 1} = {dp.s_next:.6g} (round-off {dp.s_tol:.2g}), a free unit in "
                       f"every hidden layer: {dp.room}; Hessian λ_min = {fp.lambda_min:.3g} (round-off "
                       f"{fp.lambda_tol:.2g}, blind to an escape of order ε^{dp.depth}): "
                       + (f"a saddle; next mode's strength a₀ = {dp.a0:.4g}" if self.saddle
                          else "not a saddle")
                       + ("" if self.escape_time is None else
                          f"; escape a₀^(−(L−2)/L)/((L−2)s) = {self.escape_time:.4g} (leading order), "
                          "next drop "
                          f"t(s/2) of §3.3 in {self.drop_time:.4g}"))
        elif fp is not None:
            out.append(f"nearest fixed point: the best {kn}-unit solution embedded, loss {fp.loss:.6g} "
                       f"(L_{kn} = {self.level:.6g}), distance ‖θ − θ*‖ = {self.distance:.3g}; gradient "
                       f"{fp.grad:.2g} vs round-off {fp.grad_tol:.2g}: "
                       + ("stationary" if fp.stationary else "NOT stationary"))
            out.append(f"λ_min = {fp.lambda_min:.6g} (round-off {fp.lambda_tol:.2g}): "
                       + (f"a saddle; ε = {self.unstable_distance:.3g} along its {self.unstable_dim}-dim "
                          f"unstable space; escape ln(1/ε)/|λ_min| = {self.escape_time:.4g} (leading order)"
                          + ("" if self.drop_time is None else
                             f", next drop ln(s/a₀ − 1)/(2s) at a₀ = ε²/2 in {self.drop_time:.4g}")
                          if self.saddle else "not a saddle"))
        up = self.unit_point
        if up is not None:
            out.append(f"nearest fixed point: the {up.k} strongest learned unit(s) as a narrow fixed point, "
                       "embedded "
                       f"(rescaled copies, zero units), loss {up.loss:.6g}, "
                       f"distance ‖θ − θ*‖ = {up.distance:.3g}; "
                       f"function change {up.function_gap:.2g} vs round-off {up.function_tol:.2g}; gradient "
                       f"{up.grad:.2g} vs round-off {up.grad_tol:.2g}: "
                       + ("stationary" if up.stationary else "NOT stationary"))
            out.append(f"one-sided escape rate λ* = max_ŵ ‖⟨r σ(ŵ·x)⟩‖ = {up.rate:.6g} (round-off "
                       f"{up.rate_tol:.2g}): " + (f"a saddle; ε = {up.eps:.3g}; escape ln(1/ε)/λ* = "
                                                  f"{up.escape_time:.4g} (leading order)" if up.saddle
                                                  else "not a saddle")
                       + ("" if up.drop_time is None else
                          f", next drop ln(u*/a₀ − 1)/(2λ*) at u* = λ*/m = {up.rate / up.m:.4g}, a₀ = ε²/2 "
                          f"in {up.drop_time:.4g}"))
        hp = self.head_point
        if hp is not None:
            out.append(f"nearest fixed point: heads {list(hp.heads)} solved as a {len(hp.heads)}-head layer "
                       f"(Levenberg–Marquardt, Newton), the rest zero, loss {hp.loss:.6g}, distance "
                       f"‖θ − θ*‖ = {hp.distance:.3g}; function change {hp.function_gap:.2g} vs round-off "
                       f"{hp.function_tol:.2g}; gradient {hp.grad:.2g} vs round-off {hp.grad_tol:.2g}: "
                       + ("stationary" if hp.stationary else "NOT stationary"))
            out.append(f"escape coefficient c* = max T(k, v, q) = {hp.rate:.6g} (round-off "
                       f"{hp.rate_tol:.2g}; "
                       "a zero head lowers the loss by c*ε³, Hessian blind): "
                       + ("a saddle" if hp.saddle else "not a saddle"))
            lv = hp.leave
            if lv is not None:
                out.append(f"time to leave (§11.7.13): head {lv.head} first; its cubic flow ẋ = ∇P(x) "
                           f"settles at c = {lv.rate:.6g}, effective strength a₀ = (c t*)^(−3) = {lv.a0:.4g} "
                           f"(ε₀ = {lv.eps:.3g}); blow-up t* = {lv.escape_time:.4g}, the half drop at most "
                           "2^(1/3)/(c ε₁) before it, ε₁ = (ΔL/c)^(1/3) for the next plateau's drop ΔL"
                           + (f"; {lv.note}" if lv.note else ""))
        if self.candidates:
            out.append(self.nearest_line())
        if self.recorded is not None:
            out.append(self.recorded_line())
        if self.staircase is not None:
            st = self.staircase
            out.append(f"staircase from init: levels {np.round(st.prediction.levels, 6).tolist()} at times "
                       f"{np.round(st.prediction.times, 4).tolist()}; passed {st.passed} of "
                       f"{st.prediction.times.size} drops (loss {self.loss:.6g})")
        return "\n".join(out + list(self.notes))
