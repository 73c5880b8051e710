"""Which mechanism separates a staircase's timescales (docs/theory.md §11.5.4).

Data-induced separation (between directions: linear nets) gives one plateau per distinct
singular value of the data, whatever the width; init-induced separation (between units:
quadratic nets) gives one per unit that escapes at its own time, so the count follows the width
(and the init). The experiment: count the plateaus (:func:`~.staircase.find_plateaus`) while
the width varies at a fixed spectrum and init scale, then while the spectrum varies at a fixed
width. The count *follows* a factor when it is not the same at every value of that factor:

    follows = "spectrum" (width-constant, spectrum-varying) | "width" (the converse) |
              "both" | "neither".

The training is the caller's: ``run(width, spectrum) -> (t, loss)``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .. import _validate as v
from .staircase import find_plateaus


@dataclass(frozen=True)
class MechanismReport:
    """Plateau counts ``width_counts[i]`` at ``widths[i]`` (spectrum ``spectrum``) and
    ``spectrum_counts[j]`` at ``spectra[j]`` (width ``width``), and what the count follows."""

    widths: tuple
    width_counts: tuple[int, ...]
    spectrum: object
    spectra: tuple
    spectrum_counts: tuple[int, ...]
    width: int
    follows: str


def plateau_count_experiment(run: Callable, widths: Sequence[int], spectra: Sequence, *,
                             width: int, spectrum) -> MechanismReport:
    """Vary the width at the fixed ``spectrum``, then the spectrum over ``spectra`` at the fixed
    ``width``; ``run(width, spectrum)`` trains one net and returns its recorded ``(t, loss)``.
    Returns the :class:`MechanismReport` (module doc for ``follows``)."""
    v.callable_("run", run, "a function (width, spectrum) -> (t, loss) that trains one net")
    widths = tuple(v.integer("widths", w, 1) for w in widths)
    spectra = tuple(spectra)
    if len(widths) < 2 or len(spectra) < 2:
        raise ValueError("give at least two widths and two spectra: a count follows a factor only "
                         "if it can change with it")
    width = v.integer("width", width, 1)

    def count(w, sp) -> int:
        t, loss = run(w, sp)
        return len(find_plateaus(t, loss).plateaus)

    wc = tuple(count(w, spectrum) for w in widths)
    sc = tuple(count(width, sp) for sp in spectra)
    by_width, by_spectrum = len(set(wc)) > 1, len(set(sc)) > 1
    follows = {(False, True): "spectrum", (True, False): "width", (True, True): "both",
               (False, False): "neither"}[(by_width, by_spectrum)]
    return MechanismReport(widths, wc, spectrum, spectra, sc, width, follows)
