"""What one training run shares, by gradient descent or by gradient flow (docs/theory.md §0).

The objective ``J(θ) = L(θ) + (λ/2)||θ||²`` and its gradient (through
:func:`~biasfree.dynamics.losses.objective_mirrored`'s path when ``data.mirrored``), the
settings both configs hold (:class:`RunConfig`), the argument checks of a run (a twin on data of
its own, :func:`check_twin_data`, included), and the
observables recorded at each record (:func:`~biasfree.dynamics.trajectory.observe`) on
the time axis ``t = η k``.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from .. import _validate as validate
from .._overflow import finite_forward
from ..core.data import Dataset
from ..core.layers import Params, check_net, is_net
from ..core.nets import _even_part, beta_eff_is_exact, forward_unchecked
from ..core.twin import check_leaky
from .losses import LOSSES, _forward_mirrored, _loss_value, check_labels, objective_and_loss
from .trajectory import _observe

SPACINGS = ("linear", "log")


class _DefaultSlope(float):
    """α = 0 (ReLU) as a config's default, told apart from a given 0: it is 0.0 in every use
    (arithmetic, comparison, hashing, JSON), and a net of an attention layer's twin
    (``merged_to_twin``) trains at 1 instead (the map sets it: :func:`biasfree.dynamics.trainer.train`)."""

    def __repr__(self) -> str:
        return "0.0"


DEFAULT_SLOPE = _DefaultSlope(0.0)
"""A :class:`RunConfig`'s ``alpha`` when none was given (module's ``_DefaultSlope``)."""


def slope_unset(alpha) -> bool:
    """Whether a config's ``alpha`` was left at :data:`DEFAULT_SLOPE` (copies of it included)."""
    return isinstance(alpha, _DefaultSlope)


@dataclass(frozen=True, kw_only=True)
class RunConfig:
    """The settings gradient descent and gradient flow share: ``alpha`` slope α (unset: 0, and 1
    for a net of an attention layer's twin, :data:`DEFAULT_SLOPE`); ``loss``
    "mse" or "logistic"; ``weight_decay`` λ; ``n_records`` records at ``spacing``
    "linear" or "log" times (the first and last always included); ``keep_params``
    also stores the parameters at every record (``Trajectory.path``)."""

    alpha: float = DEFAULT_SLOPE
    loss: str = "mse"
    weight_decay: float = 0.0
    n_records: int = 101
    spacing: str = "linear"
    keep_params: bool = False

    def __post_init__(self):
        if not slope_unset(self.alpha):  # the default is kept as itself: a twin's net reads it as 1
            self._set("alpha", validate.slope(self.alpha, "alpha"))
        validate.choice("loss", self.loss, LOSSES)
        self._set("weight_decay", validate.nonnegative(
            "weight_decay", self.weight_decay, scalar=True,
            why="λ is the coefficient of (λ/2)||θ||²; pass 0 for none"))
        self._set_integer("n_records", 2)
        validate.choice("spacing", self.spacing, SPACINGS)
        validate.flag("keep_params", self.keep_params)

    def _with_alpha(self, alpha: float):
        """``dataclasses.replace(self, alpha=alpha)`` for a slope the caller has checked, without a
        second check of every field (this config was checked where it was built)."""
        out = copy.copy(self)
        out._set("alpha", alpha)
        return out

    def _set(self, name: str, value) -> None:
        """Store a validated (normalised: plain floats and ints) value on the frozen config."""
        object.__setattr__(self, name, value)

    def _set_positive(self, name: str, why: str) -> None:
        self._set(name, validate.positive(name, getattr(self, name), scalar=True, why=why))

    def _set_integer(self, name: str, minimum: int) -> None:
        self._set(name, validate.integer(name, getattr(self, name), minimum))


def check_cfg(cfg, kind) -> None:
    if not isinstance(cfg, kind):
        raise TypeError(f"cfg={cfg!r} must be a biasfree.{kind.__name__} (e.g. "
                        f"{kind.__name__}(alpha=0.0)); build variants with dataclasses.replace")


def check_dataset(data) -> None:
    if not isinstance(data, Dataset):
        raise TypeError(f"data={type(data).__name__}: pass a biasfree.Dataset (see "
                        "biasfree.Dataset(X, Y) or biasfree.make_dataset)")


def check_ends(name: str, widths, data: Dataset, fix: str) -> None:
    """A net of ``widths`` (d, ..., p) takes the data's inputs and gives its targets' columns."""
    d, p = np.shape(data.inputs)[1], np.shape(data.Y)[1]
    if (widths[0], widths[-1]) != (d, p):
        raise ValueError(f"{name} maps {widths[0]} inputs to {widths[-1]} outputs but data has d = {d}, "
                         f"p = {p}: {fix}")


def check_params_data(params: Params, data: Dataset, loss: str, batched: bool = False) -> None:
    """The run's network and data agree (shapes, finiteness) and suit the loss. With
    ``batched`` every leaf of ``params`` carries a leading ensemble axis."""
    check_dataset(data)
    one = params
    if batched and is_net(params):  # not a net: check_net below raises the TypeError naming params
        if any(la.batch_ndim != 1 for la in params):
            raise ValueError("params: with batched=True every weight needs one leading ensemble "
                             "axis (B, n_out, n_in) for W, (B, C_out, C_in, *k) for a conv kernel, e.g. "
                             "jax.vmap(init)(keys); pass batched=False to share one network")
        sizes = {np.shape(x)[0] for x in jax.tree_util.tree_leaves(params)}
        if len(sizes) != 1:
            raise ValueError(f"params: the leading ensemble axes differ {sorted(sizes)}; every leaf "
                             "needs the same number of members B")
        if not all(np.all(np.isfinite(np.asarray(x))) for x in jax.tree_util.tree_leaves(params)):
            raise ValueError("params contains NaN or infinite values: initialise every member finitely")
        one = jax.tree_util.tree_map(lambda x: x[0], params)
    check_net(one, "params", X=data.inputs, x_name="data.X")
    p = one[-1].n_out
    if data.Y.shape[1] != p:
        raise ValueError(f"params has {p} outputs but data.Y has {data.Y.shape[1]} columns: build the "
                         f"net with p = {data.Y.shape[1]} outputs")
    check_labels(data.Y, loss, "data.Y")
    check_labels(data.Y_test, loss, "data.Y_test")


def own_twin_data(twin):
    """``(weights, data)`` of ``twin=(weights, data)`` (a twin on its own data), else None."""
    if isinstance(twin, tuple) and len(twin) == 2 and isinstance(twin[1], Dataset):
        return twin
    return None


def check_twin_data(data: Dataset, twin: tuple, loss: str, batched: bool) -> None:
    """A twin on its own data: one run, a linear net (α = 1) fitting that data, one row per
    point of the net's."""
    q, tdata = twin
    if batched:
        raise ValueError("twin=(params, data) trains one net beside one twin; train ensemble members "
                         "one call each")
    check_params_data(q, tdata, loss)
    if not all(layer.is_linear for layer in q):
        raise ValueError("twin=(params, data): the twin must be a linear net (dense or conv layers, "
                         "trained at α = 1), e.g. biasfree.core.attention_twin.merged_to_twin(layer)")
    n, m = np.shape(data.Y)[0], np.shape(tdata.Y)[0]
    if n != m:
        raise ValueError(f"twin=(params, data): the twin's data has {m} rows but the net's {n}; row n of "
                         "each must be the same point (e.g. attention_twin.twin_dataset(data, n_ctx))")


def check_forward(params: Params, data: Dataset, cfg: RunConfig, kw: dict | None, batched: bool) -> None:
    """The net's forward on the data does not overflow (:func:`~biasfree._overflow.finite_forward`),
    at the per-member slopes of ``kw`` (an ensemble's) or else the config's α."""
    alpha = (kw or {}).get("alpha")
    finite_forward(params, data.X, cfg.alpha if np.ndim(alpha) == 0 else alpha, forward_unchecked,
                   batched=batched)


def pinv(params: Params, data: Dataset):
    """X⁺ for the least-squares β_eff (of X₊ alone when the inputs are mirrored); only the
    structure of ``params`` is read, so an ensemble's batched params do."""
    return None if beta_eff_is_exact(params) else jnp.linalg.pinv(data.inputs)


def arrays(data: Dataset) -> tuple:
    """``(X or X₊, Y, X_test, Y_test)``: the arrays the compiled engine takes; with
    ``data.mirrored`` the first is the positive half X₊ only."""
    return (data.inputs, data.Y, data.X_test, data.Y_test)


def grad_fn(mirrored: bool):
    """``(∇J(θ), L(θ))`` as a function of ``(params, X, Y, alpha, weight_decay, loss)``: the
    data loss comes free with the gradient (one forward pass)."""
    g = jax.grad(objective_and_loss, has_aux=True)
    return lambda p, X, Y, a, w, loss: g(p, X, Y, a, w, loss, mirrored)


def loss_fn(mirrored: bool):
    """``L(θ)`` as a function of ``(params, X, Y, alpha, loss)`` (``mirrored``: X is X₊)."""
    return lambda p, X, Y, a, loss: _loss_value(
        _forward_mirrored(p, X, a) if mirrored else forward_unchecked(p, X, a), Y, loss)


def _finite(params):
    """``(ok, safe)``: whether every weight is finite, and the weights with a non-finite θ
    replaced by zeros (a diverged step's record is NaN, computed on zeros: no SVD of NaNs)."""
    leaves = jax.tree_util.tree_leaves(params)
    ok = jnp.all(jnp.stack([jnp.all(jnp.isfinite(a)) for a in leaves]))
    return ok, jax.tree_util.tree_map(lambda a: jnp.where(ok, a, 0.0), params)


def record_losses(params, arrays, alpha, loss, mirrored=False):
    """The light record: the loss, the test loss and ``<||f_even||²>`` (no β, SVD or conserved
    quantities), NaN at a non-finite θ."""
    X, Y, X_test, Y_test = arrays
    ok, safe = _finite(params)
    if mirrored:
        F = _forward_mirrored(safe, X, alpha)
        n = X.shape[0]
        fe = 0.5 * (F[:n] + F[n:])
    else:
        F, fe = forward_unchecked(safe, X, alpha), _even_part(safe, X, alpha)
    obs = {"loss": _loss_value(F, Y, loss), "even_energy": jnp.mean(jnp.sum(fe**2, axis=-1)),
           "test_loss": None if X_test is None
           else _loss_value(forward_unchecked(safe, X_test, alpha), Y_test, loss)}
    return jax.tree_util.tree_map(lambda v: jnp.where(ok, v, jnp.nan), obs)


def record(params, arrays, alpha, loss, pinv_X, keep_params=False, mirrored=False):
    """Observables at θ; a θ with a NaN/inf entry (a diverged GD step, a record the flow
    never reached) is replaced by zeros before any SVD (LAPACK would print "DLASCL
    illegal value") and its observables are NaN."""
    X, Y, X_test, Y_test = arrays
    ok, safe = _finite(params)
    obs = _observe(safe, X, Y, alpha, loss, X_test, Y_test, pinv_X, mirrored)
    obs = jax.tree_util.tree_map(lambda v: jnp.where(ok, v, jnp.nan), obs)
    obs["path"] = params if keep_params else None
    return obs


def check_twin(params: Params, data: Dataset, twin, loss: str, batched: bool, observables: str) -> None:
    """The run's twin, once: ``twin=(weights, data)`` (its own data, :func:`check_twin_data`), a
    given twin's layers of the data's input and output sizes, ``twin=True`` only for a leaky
    (or linear) net, and no twin nor β_eff records for a layer that is not a linear map
    (attention: its twin runs on its own data)."""
    own = own_twin_data(twin)
    if own is not None:
        check_twin_data(data, own, loss, batched)
    if not all(layer.is_linear for layer in params) and (observables == "all" or
                                                         (twin is not False and own is None)):
        raise ValueError("train: an attention layer is not a linear map, so neither the records of "
                         "observables='all' (β_eff, singular values) nor twin=True apply to it; pass "
                         "observables='loss' and its linear twin on its own data, "
                         "twin=(merged_to_twin(layer), twin_dataset(data, n_ctx)) "
                         "(biasfree.core.attention_twin)")
    if twin is True:
        check_leaky(params)
    if own is None and twin is not False and twin is not None and twin is not True:  # an ensemble's too
        check_net(jax.tree_util.tree_map(lambda x: x[0], twin) if batched else twin, "twin",
                  d=np.shape(data.inputs)[1], p_out=np.shape(data.Y)[1])
