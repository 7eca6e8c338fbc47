"""The data of comparisons, as the stages hand it on: patterns (:class:`PatternSet`, the
:class:`SetCollection` a distance compares), matrices of comparisons (:class:`DistanceMatrix`), the training
distances per enrolled class an estimator fits (:class:`ImpostorDistances`, :class:`GenuineDistances`) and the
cohort comparisons a normaliser reads (:class:`CohortScores`).

All containers are frozen dataclasses over read-only numpy arrays; constructors validate shapes and
values so that a bad plugin or a bad file fails at the stage boundary, with a message that says
which stage produced what, instead of deep inside numpy later on.

Layout conventions
------------------
* A distance matrix is ``probe x gallery``. Each gallery column is one enrolled class (one
  enrollment pattern per class, the verification setting); probes carry class labels too.
* Entries that must not be used (failed comparisons, entries held out for the other half of a
  split) are marked ``False`` in ``valid``; their values are ignored.
* A class is *accepted* when ``distance <= threshold``.

Plugins import these from :mod:`calibrate.contract.types`, which gathers every data type.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from calibrate.errors import DataError

DistanceKind = Literal["distance", "similarity"]


def _as_labels(values, name: str, n: int | None = None) -> np.ndarray:
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise DataError(f"{name} must be one-dimensional, got shape {arr.shape}")
    if n is not None and arr.shape[0] != n:
        raise DataError(f"{name} has {arr.shape[0]} entries but {n} were expected")
    if arr.dtype.kind == "S":  # bytes (e.g. from an .npz): astype(str) would decode them as ASCII
        try:
            return np.char.decode(arr, "utf-8")
        except UnicodeDecodeError:
            raise DataError(f"{name} are bytes that are not UTF-8 text; store them as strings (a numpy str array)") from None
    return arr.astype(str)


def _readonly(arr: np.ndarray) -> np.ndarray:
    """A read-only array with ``arr``'s contents: ``arr`` itself when it is read-only and owns its data, or is a
    view of a read-only array that does (nothing can write it: a matrix built from another one's values shares
    them), else a copy."""
    if isinstance(arr, np.ndarray) and not arr.flags.writeable:
        owner = arr
        while isinstance(owner.base, np.ndarray):  # a view (e.g. a reshape) of a read-only array it came from
            owner = owner.base
        if owner.base is None and not owner.flags.writeable:
            return arr
    arr = np.array(arr, copy=True)
    arr.setflags(write=False)
    return arr


def _once(obj, name: str, compute):
    """``compute()``, kept on the frozen dataclass ``obj`` as ``name`` the first time it is asked for (the
    inputs are read-only arrays, so the result never goes stale)."""
    value = obj.__dict__.get(name)
    if value is None:
        value = compute()
        object.__setattr__(obj, name, value)
    return value


@dataclass(frozen=True)
class PatternSet:
    """Samples (rows of ``X``) with the class and the image set each belongs to.

    A *set* is identified by the pair (class label, set label); a set is the pattern compared by
    set-to-set distances such as the mutual subspace method. For single-sample patterns give
    every sample its own set label.
    """

    X: np.ndarray
    labels: np.ndarray
    sets: np.ndarray
    source: str = "<memory>"

    def __post_init__(self):
        X = np.asarray(self.X, dtype=np.float64)
        if X.ndim != 2:
            raise DataError(f"{self.source}: X must be a 2-D array (samples x features), got shape {X.shape}")
        if X.shape[0] == 0:
            raise DataError(f"{self.source}: no samples")
        if not np.all(np.isfinite(X)):
            bad = int(np.argwhere(~np.isfinite(X))[0][0])
            raise DataError(f"{self.source}: X contains NaN or infinite values (first at sample {bad}); clean or drop those samples")
        object.__setattr__(self, "X", _readonly(X))
        object.__setattr__(self, "labels", _readonly(_as_labels(self.labels, f"{self.source}: labels", X.shape[0])))
        object.__setattr__(self, "sets", _readonly(_as_labels(self.sets, f"{self.source}: sets", X.shape[0])))

    @property
    def classes(self) -> list[str]:
        return sorted(set(self.labels.tolist()))

    def groups(self) -> list[tuple[str, str, np.ndarray]]:
        """Every (class, set, sample indices), sorted by class then set label."""
        keys: dict[tuple[str, str], list[int]] = {}
        for i, key in enumerate(zip(self.labels.tolist(), self.sets.tolist())):
            keys.setdefault(key, []).append(i)
        return [(c, s, np.asarray(idx)) for (c, s), idx in sorted(keys.items())]


@dataclass(frozen=True)
class SetCollection:
    """Image sets handed to a distance: one 2-D array of samples per set, with its class."""

    samples: tuple[np.ndarray, ...]
    classes: np.ndarray
    ids: np.ndarray

    def __len__(self) -> int:
        return len(self.samples)


@dataclass(frozen=True)
class DistanceMatrix:
    """Probe x gallery comparisons with the class of every probe row and gallery column."""

    values: np.ndarray
    probe_classes: np.ndarray
    gallery_classes: np.ndarray
    valid: np.ndarray | None = None
    kind: DistanceKind = "distance"
    probe_ids: np.ndarray | None = None
    gallery_ids: np.ndarray | None = None
    source: str = "<memory>"

    def __post_init__(self):
        values = np.asarray(self.values, dtype=np.float64)
        if values.ndim != 2:
            raise DataError(f"{self.source}: a distance matrix must be 2-D (probes x gallery), got shape {values.shape}")
        p, g = values.shape
        probe = _as_labels(self.probe_classes, f"{self.source}: probe classes", p)
        gallery = _as_labels(self.gallery_classes, f"{self.source}: gallery classes", g)
        valid = np.ones(values.shape, bool) if self.valid is None else np.asarray(self.valid, bool)
        if valid.shape != values.shape:
            raise DataError(f"{self.source}: valid mask has shape {valid.shape}, values {values.shape}")
        if len(set(gallery.tolist())) != g:
            dup = [c for c in gallery.tolist() if (gallery == c).sum() > 1][0]
            raise DataError(f"{self.source}: gallery class {dup!r} appears more than once; "
                            "enroll exactly one pattern per class")
        finite = np.isfinite(values)
        if not finite.all() and (valid & ~finite).any():
            r, c = np.argwhere(valid & ~finite)[0]
            raise DataError(f"{self.source}: NaN or infinite value at probe row {r} ({probe[r]}), gallery column {c} "
                            f"({gallery[c]}); mark failed comparisons with the dataset's `missing:` value instead")
        object.__setattr__(self, "values", _readonly(values))
        object.__setattr__(self, "probe_classes", _readonly(probe))
        object.__setattr__(self, "gallery_classes", _readonly(gallery))
        object.__setattr__(self, "valid", _readonly(valid))
        for name, n in (("probe_ids", p), ("gallery_ids", g)):
            ids = getattr(self, name)
            ids = np.arange(n).astype(str) if ids is None else _as_labels(ids, f"{self.source}: {name}", n)
            object.__setattr__(self, name, _readonly(ids))

    @property
    def shape(self) -> tuple[int, int]:
        return self.values.shape

    def _class_codes(self) -> tuple[np.ndarray, np.ndarray]:
        """Integer codes of the probe and gallery classes (one table for both), computed once: masks compare
        integers, not fixed-width strings (whose cost grows with the longest label)."""
        def codes():
            p = self.probe_classes.size
            _, inverse = np.unique(np.concatenate([self.probe_classes, self.gallery_classes]), return_inverse=True)
            return inverse[:p].astype(np.int64), inverse[p:].astype(np.int64)

        return _once(self, "_codes", codes)

    def impostor_mask(self) -> np.ndarray:
        """The valid comparisons of a probe with another class's gallery column (read-only, computed once)."""
        def mask():
            p, g = self._class_codes()
            return _readonly(self.valid & (p[:, None] != g[None, :]))

        return _once(self, "_impostor_mask", mask)

    def genuine_mask(self) -> np.ndarray:
        p, g = self._class_codes()
        return self.valid & (p[:, None] == g[None, :])

    def impostors_only(self) -> "DistanceMatrix":
        """The same matrix with only its impostor comparisons valid (what transforms and estimators fit on)."""
        return DistanceMatrix(self.values, self.probe_classes, self.gallery_classes, self.impostor_mask(), self.kind,
                              self.probe_ids, self.gallery_ids, self.source)

    def score_range(self) -> tuple[float, float] | None:
        """(lowest, highest) valid value (no copy of the matrix), or None when none is valid: a calibration saves
        its training scores' range, which ``calibrate accept`` and ``evaluate`` hold new scores against."""
        if not self.valid.any():
            return None
        return (float(np.min(self.values, where=self.valid, initial=np.inf)),
                float(np.max(self.values, where=self.valid, initial=-np.inf)))

    def with_values(self, values: np.ndarray, kind: DistanceKind | None = None, source: str | None = None) -> "DistanceMatrix":
        return DistanceMatrix(values, self.probe_classes, self.gallery_classes, self.valid,
                              kind or self.kind, self.probe_ids, self.gallery_ids, source or self.source)

    def check_distances(self, stage: str) -> None:
        """Distances must be finite and non-negative wherever they are used."""
        if self.kind != "distance":
            raise DataError(f"{stage}: the scores are similarities (higher = more alike); add "
                            "`transform: {plugin: similarity-to-distance}` to the recipe")
        if self.values.size and self.values.min() < 0 and ((self.values < 0) & self.valid).any():
            r, c = np.argwhere(self.valid & (self.values < 0))[0]
            raise DataError(f"{stage}: negative distance {self.values[r, c]:.6g} at probe row {r} "
                            f"({self.probe_classes[r]}), gallery column {c} ({self.gallery_classes[c]}); distances must be "
                            "in [0, inf): if these scores are similarities (higher = more alike, e.g. a cosine), say "
                            "`kind: similarity`; otherwise choose a transform that maps them there")


class _PerClassFlat:
    """Per-class values stored flat (CSR): ``values[offsets[i]:offsets[i+1]]`` are class ``classes[i]``'s."""

    classes: tuple[str, ...]
    values: np.ndarray
    offsets: np.ndarray

    def _check_flat(self, what: str) -> np.ndarray:
        """Check and freeze the CSR fields (finite, non-negative values; offsets matching the classes), naming
        ``what`` distances in the error; the offsets."""
        values = np.asarray(self.values, dtype=np.float64)
        offsets = np.asarray(self.offsets, dtype=np.int64)
        if offsets.shape != (len(self.classes) + 1,) or offsets[0] != 0 or offsets[-1] != values.size \
                or np.any(np.diff(offsets) < 0):
            raise DataError(f"{what} distances: offsets do not match the classes and values")
        if not np.all(np.isfinite(values)):
            raise DataError(f"{what} distances contain NaN or infinite values")
        if values.size and values.min() < 0:
            raise DataError(f"{what} distances contain negative values; distances must be in [0, inf)")
        object.__setattr__(self, "classes", tuple(str(c) for c in self.classes))
        object.__setattr__(self, "values", _readonly(values))
        object.__setattr__(self, "offsets", _readonly(offsets))
        return offsets

    def __len__(self) -> int:
        return len(self.classes)

    def counts(self) -> np.ndarray:
        return np.diff(self.offsets)

    def of(self, i: int) -> np.ndarray:
        return self.values[self.offsets[i]:self.offsets[i + 1]]


@dataclass(frozen=True)
class ImpostorDistances(_PerClassFlat):
    """Training impostor distances per enrolled class, stored flat (CSR-like) for speed.

    ``values[offsets[i]:offsets[i+1]]`` are the distances between class ``classes[i]``'s
    enrollment pattern and the training patterns of other classes.
    """

    classes: tuple[str, ...]
    values: np.ndarray
    offsets: np.ndarray

    def __post_init__(self):
        offsets = self._check_flat("impostor")
        empty = [c for c, n in zip(self.classes, np.diff(offsets)) if n == 0]
        if empty:
            raise DataError(f"class {empty[0]!r} has no training impostor distances"
                            f"{f' (and {len(empty) - 1} more classes)' if len(empty) > 1 else ''}; "
                            "every enrolled class needs comparisons with other classes")

    @classmethod
    def from_lists(cls, per_class: dict[str, np.ndarray]) -> "ImpostorDistances":
        classes = tuple(per_class)
        arrays = [np.asarray(per_class[c], dtype=np.float64).ravel() for c in classes]
        offsets = np.concatenate([[0], np.cumsum([a.size for a in arrays])])
        values = np.concatenate(arrays) if arrays else np.empty(0)
        return cls(classes, values, offsets)

    @classmethod
    def from_matrix(cls, matrix: DistanceMatrix) -> "ImpostorDistances":
        matrix.check_distances("training distances")
        mask = matrix.impostor_mask()
        # column by column, rows in order: what the transposed mask selects in C order
        values = matrix.values.T[mask.T]
        offsets = np.concatenate([[0], np.cumsum(mask.sum(axis=0))])
        return cls(tuple(matrix.gallery_classes.tolist()), values, offsets)


    def sorted_within(self) -> np.ndarray:
        """``values`` with each class's segment sorted ascending, equal values (0.0 and -0.0 too) in their
        original order. Classes of one size are sorted together as the rows of one 2-D array: a loop over
        the distinct sizes (at most sqrt(2 N) of them), none over classes, and no sort of all N values
        by class and value (which costs several times more). Computed once (read-only)."""
        return _once(self, "_sorted_within", lambda: _readonly(self._sort_within()))

    def _sort_within(self) -> np.ndarray:
        counts = np.diff(self.offsets)
        out = np.empty_like(self.values)
        # values that compare equal are equal bit for bit, except 0.0 and -0.0: without a -0.0 the faster
        # unstable sort gives the very same array
        kind = "stable" if np.signbit(self.values[self.values == 0]).any() else "quicksort"
        order = np.argsort(counts, kind="stable")
        sizes = counts[order]
        bounds = np.flatnonzero(np.r_[True, sizes[1:] != sizes[:-1], True])
        for lo, hi in zip(bounds[:-1], bounds[1:]):
            n = int(sizes[lo])
            if n:
                idx = self.offsets[order[lo:hi]][:, None] + np.arange(n)[None, :]
                out[idx] = np.sort(self.values[idx], axis=1, kind=kind)
        return out

    def pooled(self) -> np.ndarray:
        return self.values


@dataclass(frozen=True)
class GenuineDistances(_PerClassFlat):
    """Training genuine distances per enrolled class, flat as :class:`ImpostorDistances` (a class may have none):
    ``values[offsets[i]:offsets[i+1]]`` are class ``classes[i]``'s own probes compared with its enrollment, from the
    training data only. What an estimator may use to judge, before any evaluation, what its thresholds cost
    genuine users (``Estimator._fit_genuine``)."""

    classes: tuple[str, ...]
    values: np.ndarray
    offsets: np.ndarray

    def __post_init__(self):
        self._check_flat("genuine")

    @classmethod
    def from_matrix(cls, matrix: DistanceMatrix, classes=None) -> "GenuineDistances":
        """The genuine entries (a probe of the column's class) of each gallery column, in the order of ``classes``
        (default: the matrix's gallery columns); a class without a column or a genuine entry has none."""
        p, g = matrix._class_codes()
        genuine = matrix.valid & (p[:, None] == g[None, :])
        names = list(matrix.gallery_classes.tolist()) if classes is None else [str(c) for c in classes]
        column = {c: j for j, c in enumerate(matrix.gallery_classes.tolist())}
        parts = []
        for c in names:
            j = column.get(c)
            parts.append(np.empty(0) if j is None else matrix.values[genuine[:, j], j])
        return cls.from_lists(dict(zip(names, parts)))

    @classmethod
    def from_lists(cls, per_class: dict) -> "GenuineDistances":
        classes = tuple(per_class)
        arrays = [np.asarray(per_class[c], dtype=np.float64).ravel() for c in classes]
        offsets = np.concatenate([[0], np.cumsum([a.size for a in arrays])]).astype(np.int64)
        return cls(classes, np.concatenate(arrays) if arrays else np.empty(0), offsets)


@dataclass(frozen=True)
class CohortScores:
    """What the normaliser stage reads besides the attempts themselves: comparisons of the enrolled
    classes and of the attempts' probes with an impostor cohort (calibrate.contract.base.Normalizer).

    Both sides are probe x gallery matrices, so that their labels, validity masks and the transform
    work as for any comparison matrix, and an entry whose row class equals its column class is never
    part of a cohort (it is not an impostor comparison):

    * ``enrolled``: cohort members (rows) x enrolled classes (columns). Column j's impostor entries are
      class j's side: bob's Z-norm scores (models x Z-probes), transposed.
    * ``probes``: the attempts' probes (rows, one per row of the matrix being normalised, in its order)
      x cohort models (columns). Row i's impostor entries, less the claimed class's column when the
      cohort holds it, are probe i's side of an attempt: bob's T-norm scores (T-models x probes), transposed.
    * ``leave_out``: the enrolled side's rows are the attempts' own probes (the training impostors
      serve as the cohort): attempt (i, j) leaves row i out of class j's side, as a new probe is not
      in the cohort it is normalised with.

    Raw scores (the dataset's kind) when a dataset gives them; the run applies the fitted transform.
    A side the normaliser does not read may be None.
    """

    enrolled: DistanceMatrix | None = None
    probes: DistanceMatrix | None = None
    leave_out: bool = False
    source: str = "<memory>"

    def __post_init__(self):
        for name in ("enrolled", "probes"):
            side = getattr(self, name)
            if side is not None and not isinstance(side, DistanceMatrix):
                raise DataError(f"{self.source}: cohort side {name!r} must be a DistanceMatrix, got {type(side).__name__}")
        if self.enrolled is None and self.probes is None:
            raise DataError(f"{self.source}: cohort scores hold neither the enrolled side nor the probe side")

    def map(self, function) -> "CohortScores":
        """The same cohort with ``function(matrix)`` applied to each side (e.g. the fitted transform)."""
        return CohortScores(None if self.enrolled is None else function(self.enrolled),
                            None if self.probes is None else function(self.probes), self.leave_out, self.source)
