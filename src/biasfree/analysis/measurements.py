"""What ``analyse`` measures of one net on the data, and how it reads the data it is given:
the split of the net's function into energies (docs/theory.md §1.2: f, f_even, the best
linear fit of f_odd and its remainder) and the local linear analysis (§8) at a few inputs."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from ..core.blocks import BLOCK_ENTRIES, _outputs_and_mirror
from ..core.data import Dataset
from ..core.layers import Params
from ..core.nets import net_after_first
from ..core.real_data import RealData, load_data
from ..expressivity.decomposition import Decomposition, OddFit, energy, odd_fit_of
from ..expressivity.local_linear import MAX_ENTRIES, Identities, _local_linear
from .measure_step import narrow, reduced
from .regime import GrowthEstimate, GrowthPlan, gradient_times_weights, growth_from_sums, growth_sums
from .report import LocalReport

LOCAL_INPUTS = 64
"""The local linear analysis (§8) looks at most at this many inputs, evenly spaced rows."""


@dataclass(frozen=True)
class Split:
    """Energies ⟨‖·‖²⟩ of f, f_even, the best linear fit of f_odd and its remainder; β of that fit;
    f(X) kept for the loss."""

    energy: float
    even: float
    odd_linear: float
    odd_nonlinear: float
    odd_fraction_nonlinear: float
    beta: np.ndarray
    outputs: np.ndarray | None = None  # f(X), kept for the loss at init
    grad: float | None = None  # ‖∇_θ L‖·‖θ‖ when split was given Y (regime.gradient_norm's number)
    growth: GrowthEstimate | None = None  # regime.growth_even_energy's, when split was given a plan

    @property
    def even_fraction(self) -> float:
        return self.even / self.energy if self.energy else 0.0


def split(params: Params, X, alpha, fit=None, Y=None, grow: GrowthPlan | None = None) -> Split:
    """Energies of f, of f_even, of the best linear fit of f_odd and of its remainder; ``fit``
    the least-squares solver (:func:`~biasfree.expressivity.decomposition.odd_fit_of`); with
    targets ``Y`` also the gradient norm of the loss (:func:`biasfree.analysis.regime.gradient_norm`),
    from the same pass over the rows (the first layer's product, N × width, made once a block), on
    X's columns that are not 0 everywhere (:func:`~biasfree.analysis.measure_step.reduced`: f does not
    read W₁'s other columns and its gradient there is 0; ‖θ‖ still counts them); with ``grow`` (and
    ``Y``) also the growth estimate from the same products
    (:func:`~biasfree.analysis.regime.growth_sums`, ``Split.growth``)."""
    grad = growth = None
    keep = reduced(params, X)
    P, XP = (params, X) if keep is None else (narrow(params, keep), np.asarray(X)[:, keep])
    if Y is None:
        F, Fm = _outputs_and_mirror(P, XP, alpha)  # in row blocks: no N × width array
    else:
        rows = None if grow is None else (grow.Rho if keep is None else grow.Rho[keep], *grow.arrays)
        F, Fm, g, sums = _outputs_mirror_gradient(P, XP, Y, alpha, rows)
        grad = gradient_times_weights(g, params)
        growth = None if grow is None else growth_from_sums(grow, *sums, X.shape[0])
    beta, res, dec = odd_fit_of(X, Decomposition(F, 0.5 * (F - Fm), 0.5 * (F + Fm)), fit)
    fit = OddFit(beta, float(np.mean(res)), dec.odd_energy)
    return Split(energy(F), energy(dec.even), energy(np.asarray(X) @ fit.beta), fit.residual,
                  fit.fraction, fit.beta, F, grad, growth)


@jax.jit
def _block(params: Params, Xb, Yb, a, N, grow):
    """``(f, f(−x), ∇_θ of the block's share (1/2N) Σ ||y − f(x)||², growth sums)`` on one row
    block, the first layer's product shared as in :func:`biasfree.core.blocks.outputs_and_mirror`
    and, with ``grow`` = ``(ρ's, *GrowthPlan.arrays)``, with :func:`~biasfree.analysis.regime.growth_sums`
    (a bias-free first layer: its product is H = X W₁ᵀ; else None)."""
    first = params[0]

    def share(p):
        Z = p[0].apply(Xb)
        F = net_after_first(p, Z, a)
        Zm = -jax.lax.stop_gradient(Z) if first.bias is None else p[0].apply(-Xb)
        out = (F, jax.lax.stop_gradient(net_after_first(p, Zm, a)), jax.lax.stop_gradient(Z))
        return 0.5 * jnp.sum((Yb - F) ** 2) / N, out

    (_, (F, Fm, Z)), g = jax.value_and_grad(share, has_aux=True)(params)
    return F, Fm, g, None if grow is None else growth_sums(Z, Xb @ grow[0], *grow[1:])


def _outputs_mirror_gradient(params: Params, X, Y, alpha, grow=None):
    """``(f(X), f(−X), ∇_θ L, growth sums or None)`` in the row blocks of
    :func:`~biasfree.core.blocks._outputs` and :func:`~biasfree.analysis.regime.gradient_norm` (the
    same blocks, the gradient summed in the same order): one pass instead of three (four with
    ``grow``, :func:`_block`'s)."""
    N = X.shape[0]
    step = max(1, BLOCK_ENTRIES // max(layer.n_out for layer in params))
    p = params[-1].n_out
    F, Fm = np.empty((N, p)), np.empty((N, p))
    a, grad, sums = jnp.asarray(alpha, float), None, None
    for i in range(0, N, step):
        f, fm, part, more = _block(tuple(params), X[i:i + step], Y[i:i + step], a, N, grow)
        F[i:i + step], Fm[i:i + step] = np.asarray(f), np.asarray(fm)
        grad = part if grad is None else jax.tree_util.tree_map(jnp.add, grad, part)
        if more is not None:
            more = tuple(np.asarray(x) for x in more)
            sums = more if sums is None else tuple(s + x for s, x in zip(sums, more, strict=True))
    return F, Fm, grad, sums


def data_arrays(data):
    """``(X, Y, source)`` from what ``analyse`` takes as data (module doc of :mod:`.analyse`)."""
    if isinstance(data, str) or hasattr(data, "__fspath__"):
        try:
            data = load_data(data)
        except ValueError as e:
            raise ValueError(f"data: {e}") from None
    if isinstance(data, RealData):
        return data.X, data.Y, data.source
    if isinstance(data, Dataset):
        return np.asarray(data.X), np.asarray(data.Y), "Dataset"
    if isinstance(data, tuple) and len(data) == 2:
        return data[0], data[1], "arrays"
    raise TypeError(f"data: give (X, Y), a biasfree Dataset, a load_data result, a file or a data "
                    f"set name; got {type(data).__name__}")


def local_report(params: Params, X, alpha) -> LocalReport | None:
    """The local linear analysis (§8) at up to :data:`LOCAL_INPUTS` evenly spaced rows of X
    (fewer when their Jacobians would exceed ``MAX_ENTRIES`` numbers; None when one does)."""
    N, d, p = X.shape[0], X.shape[1], params[-1].n_out
    n = min(N, LOCAL_INPUTS, MAX_ENTRIES // (p * d))
    if n == 0:
        return None
    rows = np.unique(np.linspace(0, N - 1, n).round().astype(int))
    r = _local_linear(params, X[rows], alpha)
    shared = {f.name: getattr(r, f.name) for f in dataclasses.fields(Identities)}
    return LocalReport(**shared, n_used=int(rows.size), n_total=N, rows=rows,
                       participation_ratio=r.participation_ratio,
                       participation_ratio_median=float(np.median(r.participation_ratio)),
                       effective_rank_median=float(np.median(r.effective_rank)),
                       frobenius_dimension_median=float(np.median(r.frobenius_dimension)),
                       max_dimension=int(r.singular_values.shape[1]))
