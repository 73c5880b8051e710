"""Your own data: files and bundled data sets in, symmetrised, with their asymmetry measured.

Shapes follow docs/theory.md §0: inputs ``X`` (N, d), targets ``Y`` (N, p). A set is
*symmetric* (§2.1) when every pair (x, y) has its mirror (-x, -y) in the set; the
equivalence with a linear net rests on it, so its
:func:`~biasfree.core.symmetry.asymmetry` is measured rather than assumed.

Sources (:func:`load_data`):

- ``.npz`` with arrays ``X`` (N, d) and ``Y`` (N, p) or (N,), loaded with
  ``allow_pickle=False``;
- ``.csv`` of numbers (an optional header row is skipped), the last ``y_columns``
  columns being the targets;
- the name of a data set that ships inside scikit-learn (no network): ``digits``
  (8×8 images, 64 pixels scaled to [0, 1], 10 classes), ``iris``, ``wine``,
  ``breast_cancer`` (classification) and ``diabetes`` (regression). Install with
  ``pip install 'biasfree[datasets]'``.

Classification targets are one-hot (``target="onehot"``, p = number of classes) or the
class index as a number (``target="value"``, p = 1, a regression target).
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .. import _validate as validate
from .data import Dataset, symmetrize
from .symmetry import asymmetry

TARGETS = ("onehot", "value")
# name -> (scikit-learn loader, kind, input scale)
_BUNDLED = {
    "digits": ("load_digits", "classification", 1.0 / 16.0),
    "iris": ("load_iris", "classification", 1.0),
    "wine": ("load_wine", "classification", 1.0),
    "breast_cancer": ("load_breast_cancer", "classification", 1.0),
    "diabetes": ("load_diabetes", "regression", 1.0),
}
NAMES = tuple(_BUNDLED)


@dataclass(frozen=True)
class RealData:
    """A loaded data set: ``X`` (N, d), ``Y`` (N, p), where it came from (``source``),
    whether it was symmetrised here (``symmetrised``; then N is twice the raw count),
    the :func:`asymmetry` of the data as given (``raw_asymmetry``), the target kind
    (``target``: "onehot", "value" or "given") and a one-line ``description``.
    ``X, Y = data`` unpacks; ``data.dataset`` is the :class:`~biasfree.Dataset`."""

    X: np.ndarray
    Y: np.ndarray
    source: str
    symmetrised: bool
    raw_asymmetry: float
    target: str = "given"
    description: str = ""

    def __post_init__(self):
        validate.data(self.X, self.Y, y_1d=False)

    def __iter__(self):
        return iter((self.X, self.Y))

    @property
    def dataset(self) -> Dataset:
        return Dataset(self.X, self.Y)

    @property
    def asymmetry(self) -> float:
        """:func:`asymmetry` of ``(X, Y)`` as returned (0 once symmetrised)."""
        return asymmetry(self.X, self.Y)


def one_hot(labels, n_classes: int | None = None) -> np.ndarray:
    """Integer class labels (N,) -> one-hot targets (N, n_classes)."""
    labels = validate.finite_array("labels", labels, ndim=1)
    if np.any(labels != np.round(labels)) or labels.min() < 0:
        raise ValueError("labels: one_hot needs a 1-D array of non-negative integer class labels")
    labels = labels.astype(int)
    need = int(labels.max()) + 1
    k = need if n_classes is None else validate.integer("n_classes", n_classes, need)
    return np.eye(k)[labels]


def _bundled(name: str, target: str):
    loader_name, kind, scale = _BUNDLED[name]
    try:
        import sklearn.datasets as skd
    except ImportError:  # pragma: no cover - exercised only without the extra
        raise ImportError(
            f"data set {name!r} ships with scikit-learn, which is not installed: "
            "pip install 'biasfree[datasets]' (or scikit-learn)") from None
    bunch = getattr(skd, loader_name)()
    X = np.asarray(bunch.data, dtype=float) * scale
    y = np.asarray(bunch.target)
    if kind == "regression":
        return (X, y.astype(float)[:, None], "value",
                f"{name}: {X.shape[0]} samples, {X.shape[1]} features, regression")
    Y = one_hot(y.astype(int)) if target == "onehot" else y.astype(float)[:, None]
    desc = (f"{name}: {X.shape[0]} samples, {X.shape[1]} features"
            + (" (pixels / 16, in [0, 1])" if name == "digits" else "")
            + f", {int(y.max()) + 1} classes, {'one-hot' if target == 'onehot' else 'class index'}"
            " targets")
    return X, Y, target, desc


def _read_npz(path: Path):
    with np.load(validate.npz_archive(path), allow_pickle=False) as z:
        missing = [k for k in ("X", "Y") if k not in z.files]
        if missing:
            raise ValueError(f"{path} holds arrays {z.files}; a data file needs 'X' (N, d) and "
                             f"'Y' (N, p): missing {missing}")
        kinds = {k: z[k].dtype for k in ("X", "Y") if z[k].dtype.kind not in "biuf"}
        if kinds:  # strings; complex, whose imaginary part a cast would drop with only a warning
            raise ValueError(f"{path}: X and Y must hold real numbers, got dtype "
                             + ", ".join(f"{k} {t}" for k, t in kinds.items()))
        X, Y = np.asarray(z["X"], dtype=float), np.asarray(z["Y"], dtype=float)
    return X, (Y[:, None] if Y.ndim == 1 else Y)


def _read_csv(path: Path, y_columns: int):
    try:  # utf-8-sig: a byte-order mark (Excel's "CSV UTF-8") is not part of the first cell
        with open(path, newline="", encoding="utf-8-sig") as fh:
            rows = [r for r in csv.reader(fh) if r and any(c.strip() for c in r)]
    except UnicodeDecodeError as e:
        raise ValueError(f"{path} is not UTF-8 text (byte {e.start}: {e.reason}); save it as UTF-8") \
            from None
    if not rows:
        raise ValueError(f"{path} is empty")
    try:
        [float(c) for c in rows[0]]
    except ValueError:
        rows = rows[1:]  # a header row
    try:
        A = np.array([[float(c) for c in r] for r in rows], dtype=float)
    except ValueError as e:
        raise ValueError(f"{path}: every cell after the header must be a number ({e})") from None
    if A.ndim != 2 or A.shape[1] <= y_columns:
        raise ValueError(f"{path}: need rows of equal length with more than y_columns = "
                         f"{y_columns} columns (the last {y_columns} are the targets)")
    return A[:, :-y_columns], A[:, -y_columns:]


def load_data(path_or_name, *, target: str = "onehot", symmetrize_data: bool | None = None,
              y_columns: int = 1, n: int | None = None, seed: int = 0) -> RealData:
    """Load a data set from a file or by name (module docstring) as float64 ``X``, ``Y``.

    ``target`` "onehot" (classes as one-hot rows) or "value" (a regression target,
    p = 1) for the bundled classification sets; ``y_columns`` the number of target
    columns at the end of a ``.csv``; ``n`` keeps a random subset of n raw rows
    (drawn with ``seed``) before symmetrising.

    ``symmetrize_data``: True appends the mirror points ``(-x, -y)`` (§2.1), False keeps
    the data as given, None (default) symmetrises the bundled sets (their raw features
    are one-sided, e.g. pixel intensities) and keeps a file as given, so that its
    asymmetry is measured rather than removed. The raw asymmetry is in
    ``raw_asymmetry`` either way.
    """
    if not (isinstance(path_or_name, str) or hasattr(path_or_name, "__fspath__")):
        raise TypeError(f"path_or_name={path_or_name!r} must be a file path or a bundled data set name "
                        f"({', '.join(NAMES)})")
    validate.choice("target", target, TARGETS)
    if symmetrize_data is not None:
        validate.flag("symmetrize_data", symmetrize_data)
    seed = validate.seed(seed)
    n = None if n is None else validate.integer("n", n, 1)
    if isinstance(y_columns, bool) or not isinstance(y_columns, int) or y_columns < 1:
        raise ValueError(f"y_columns={y_columns!r} must be an integer >= 1")
    key = str(path_or_name)
    path = Path(key)
    if key in _BUNDLED:
        X, Y, kind, desc = _bundled(key, target)
        default_sym, source = True, f"bundled:{key}"
    elif path.suffix == ".npz" or path.suffix == ".csv":
        if not path.exists():
            raise FileNotFoundError(f"data file {path} does not exist")
        if not path.is_file():
            raise ValueError(f"data file {path} is a folder, not a file: give the file's path")
        X, Y = _read_npz(path) if path.suffix == ".npz" else _read_csv(path, y_columns)
        kind, default_sym, source = "given", False, str(path)
        desc = None  # after the shapes are checked: a 1-D X has no X.shape[1]
    else:
        raise ValueError(
            f"path_or_name: unknown data {key!r}: give a .npz file (arrays X, Y), a .csv file (targets "
            f"in the last column(s)), or one of the bundled data sets: {', '.join(NAMES)}")
    validate.data(X, Y, y_1d=False)
    desc = desc or f"{path.name}: {X.shape[0]} rows, {X.shape[1]} inputs, {Y.shape[1]} targets"
    if n is not None:
        if not 1 <= int(n) <= X.shape[0]:
            raise ValueError(f"n={n} must be between 1 and the {X.shape[0]} rows available")
        keep = np.sort(np.random.default_rng(seed).choice(X.shape[0], int(n), replace=False))
        X, Y = X[keep], Y[keep]
    raw = asymmetry(X, Y)
    sym = default_sym if symmetrize_data is None else bool(symmetrize_data)
    if sym:
        X, Y = (np.asarray(a) for a in symmetrize(X, Y))
        desc += "; symmetrised (x, y) -> also (-x, -y)"
    return RealData(np.asarray(X, dtype=float), np.asarray(Y, dtype=float), source, sym, raw,
                    kind, desc)
