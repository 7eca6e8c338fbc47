"""The typed data that flows between pipeline stages.

All containers are frozen dataclasses over numpy arrays; constructors validate shapes and
values so that a bad plugin or a bad file fails at the stage boundary, with a message that says
which stage produced what, instead of deep inside numpy later on.

Layout conventions
------------------
* A distance matrix is ``probe x gallery``. Each gallery column is one enrolled class (one
  enrollment pattern per class, the verification setting); probes carry class labels too.
* Entries that must not be used (failed comparisons, entries held out for the other half of a
  split) are marked ``False`` in ``valid``; their values are ignored.
* A class is *accepted* when ``distance <= threshold``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
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
class ThresholdTable:
    """Thresholds per class and target FPR: ``values[i, k]`` for ``classes[i]``, ``targets[k]``."""

    estimator: str
    classes: tuple[str, ...]
    targets: tuple[float, ...]
    values: np.ndarray

    def __post_init__(self):
        values = np.asarray(self.values, dtype=np.float64)
        if values.shape != (len(self.classes), len(self.targets)):
            raise DataError(f"estimator {self.estimator}: threshold table has shape {values.shape}, "
                            f"expected {(len(self.classes), len(self.targets))}")
        object.__setattr__(self, "values", _readonly(values))


@dataclass(frozen=True)
class TargetResult:
    """How one estimator did at one target FPR on the evaluation data.

    Judged on both axes: ``ratio`` (achieved FPR / target) and ``fnr`` against ``fnr_one_threshold``, the FNR
    of the one pooled threshold (the same for every class) that admits the same share of this evaluation's
    impostor attempts as the estimator did (calibrate.statistics.verification.one_threshold; None when not measured);
    ``fnr_cost`` is their ratio (above 1: the estimator turns away more genuine users than one threshold
    would at the FPR it achieved)."""

    target_fpr: float
    fpr: float
    ratio: float
    false_accepts: int
    impostor_attempts: int
    fnr: float | None
    extra: dict = field(default_factory=dict)
    fnr_one_threshold: float | None = None

    @property
    def fnr_cost(self) -> float | None:
        """``fnr / fnr_one_threshold``; None when either is unknown or one threshold rejects no genuine attempt."""
        if self.fnr is None or self.fnr_one_threshold is None or not self.fnr_one_threshold > 0:
            return None
        return self.fnr / self.fnr_one_threshold

    def as_dict(self) -> dict:
        out = {"target_fpr": self.target_fpr, "fpr": self.fpr, "ratio": self.ratio,
               "false_accepts": self.false_accepts, "impostor_attempts": self.impostor_attempts,
               "fnr": self.fnr, "fnr_one_threshold": self.fnr_one_threshold, "fnr_cost": self.fnr_cost}
        out.update(self.extra)
        return out


@dataclass(frozen=True)
class EvaluationResult:
    """What one evaluator found: per estimator label, one result per target; optional report
    sections (markdown) and files (name -> bytes) to write beside report.md; ``summary``: figures of
    the run as a whole (e.g. ``verification``), each key a top-level entry of results.json."""

    evaluator: str
    estimators: dict[str, list[TargetResult]] = field(default_factory=dict)
    sections: list[str] = field(default_factory=list)
    files: dict[str, bytes] = field(default_factory=dict)
    summary: dict = field(default_factory=dict)



class CodedLabels:
    """A column of labels, one per comparison, held as codes into its distinct labels (``names``, sorted): what
    the score-list commands (``calibrate fit``, ``evaluate``, ``accept``) hand to ``calibrate.fit``,
    ``Calibration.accept`` and ``calibrate.saved.assess``, so that a file of millions of comparisons costs a small
    integer per label, not a fixed-width string each (4 bytes a character, as long as the longest label).

    It behaves as the 1-D array of its labels where that is cheap: indexing with an array, a slice or a mask
    gives a CodedLabels over the same names, an integer gives the label (str); ``==`` and ``!=`` with another
    CodedLabels compare codes. numpy (``np.asarray``, ``astype``) gets the labels themselves, so code that does not
    know the type still gets the right answer, at the cost it always had; :func:`factorise` and
    :func:`same_labels` are the cheap ways in."""

    __slots__ = ("codes", "names")
    __hash__ = None  # type: ignore[assignment]  (== is elementwise)
    ndim = 1

    def __init__(self, codes, names):
        self.names = np.asarray(names, dtype=str).reshape(-1)
        self.codes = np.asarray(codes).reshape(-1)
        if not self.codes.size:
            self.codes = self.codes.astype(np.int32)
        if self.codes.dtype.kind not in "iu":
            raise DataError(f"label codes must be integers, got {self.codes.dtype}")
        if self.names.size > 1 and not np.all(self.names[1:] > self.names[:-1]):
            raise DataError("the names of coded labels must be distinct and sorted")
        if self.codes.size and (int(self.codes.min()) < 0 or int(self.codes.max()) >= self.names.size):
            raise DataError(f"label codes must be in 0..{self.names.size - 1}")

    @classmethod
    def of(cls, codes, labels) -> "CodedLabels":
        """From codes into ``labels`` (distinct, in any order, e.g. a file's order of first appearance)."""
        names = np.asarray(labels, dtype=str).reshape(-1)
        order = np.argsort(names, kind="stable")
        rank = np.empty(order.size, np.int64)
        rank[order] = np.arange(order.size)
        small = np.int32 if names.size < 2 ** 31 else np.int64
        return cls(rank.astype(small)[np.asarray(codes, dtype=np.int64)], names[order])

    @property
    def shape(self) -> tuple[int]:
        return self.codes.shape

    @property
    def size(self) -> int:
        return int(self.codes.size)

    def __len__(self) -> int:
        return int(self.codes.size)

    def __getitem__(self, key):
        if isinstance(key, (int, np.integer)):
            return str(self.names[self.codes[key]])
        return CodedLabels(self.codes[key], self.names)

    def __array__(self, dtype=None, copy=None):
        out = self.names[self.codes]
        return out if dtype is None else out.astype(dtype)

    def astype(self, dtype) -> np.ndarray:
        return np.asarray(self).astype(dtype)

    def tolist(self) -> list:
        names = self.names.tolist()  # one str per distinct label, shared by the list
        return [names[k] for k in self.codes.tolist()]

    def __eq__(self, other):  # type: ignore[override]
        return same_labels(self, other)

    def __ne__(self, other):  # type: ignore[override]
        return ~same_labels(self, other)

    def __repr__(self) -> str:
        return f"CodedLabels({self.size} labels, {self.names.size} distinct)"


def factorise(labels) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(labels as str, return_inverse=True)``: the distinct labels, sorted, and each one's index into
    them; for :class:`CodedLabels` without touching a string per label."""
    if not isinstance(labels, CodedLabels):
        names, inverse = np.unique(np.asarray(labels).astype(str), return_inverse=True)
        return names, inverse.reshape(-1)
    used = np.bincount(labels.codes, minlength=labels.names.size) > 0
    if used.all():
        return labels.names, labels.codes
    remap = (np.cumsum(used) - 1).astype(labels.codes.dtype)
    return labels.names[used], remap[labels.codes]


def same_labels(a, b) -> np.ndarray:
    """Elementwise ``a == b`` of two label columns (arrays or :class:`CodedLabels`) as str; codes are compared
    when both are coded, through one table of their names when those differ."""
    if isinstance(a, CodedLabels) and isinstance(b, CodedLabels):
        if a.names is b.names or (a.names.shape == b.names.shape and np.array_equal(a.names, b.names)):
            return a.codes == b.codes
        if not a.names.size or not b.names.size:
            return np.zeros(np.broadcast_shapes(a.codes.shape, b.codes.shape), bool)
        position = np.searchsorted(a.names, b.names)  # each of b's names in a's (or -1 when a has none)
        found = np.minimum(position, max(a.names.size - 1, 0))
        b_in_a = np.where((position < a.names.size) & (a.names[found] == b.names), position, -1)
        return a.codes == b_in_a[b.codes]
    if isinstance(a, CodedLabels) or isinstance(b, CodedLabels):
        coded, other = (a, b) if isinstance(a, CodedLabels) else (b, a)
        other = np.asarray(other).astype(str)
        if other.ndim == 0:  # one label against the column
            return coded.codes == (np.flatnonzero(coded.names == other)[:1].tolist() or [-1])[0]
        return np.asarray(coded) == other
    return np.asarray(a).astype(str) == np.asarray(b).astype(str)

#: the group of a class that a groups file does not name
UNLABELLED = "unlabelled"
#: the most distinct groups one groups file may name (a report table per group beyond it is unreadable)
MAX_GROUPS = 100


#: the longest group name (a report table's column header)
MAX_GROUP_NAME = 200


def group_problem(name: str) -> str | None:
    """What is wrong with a group name (None when it is fine): it names a report's columns and a picture's legend."""
    if not name:
        return "is empty; name every group"
    if name == UNLABELLED:
        return "is the name given to classes without a group; leave such classes out of the groups file"
    if len(name) > MAX_GROUP_NAME:
        return f"is {len(name):,} characters long (at most {MAX_GROUP_NAME}); name groups briefly"
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in name):
        return "holds a control character (a line break, a tab, NUL); name groups with printable text"
    return None


@dataclass(frozen=True)
class GroupLabels:
    """The demographic group of classes (ISO/IEC 19795-10): of each enrolled class, and of each probe through
    its real class. ``classes[i]`` is in group ``groups[i]``; a class not listed is :data:`UNLABELLED`.

    Read by the core from a recipe's ``data: {groups: FILE}`` (CSV with header ``class,group``) or the
    commands' ``--groups FILE``, or given by a dataset (``ScoreSplit.groups``)."""

    classes: tuple[str, ...]
    groups: tuple[str, ...]
    source: str = "<memory>"

    def __post_init__(self):
        classes = tuple(str(c) for c in self.classes)
        groups = tuple(str(g) for g in self.groups)
        if len(classes) != len(groups):
            raise DataError(f"{self.source}: {len(classes)} classes but {len(groups)} groups")
        if len(set(classes)) != len(classes):
            seen: set[str] = set()
            dup = next(c for c in classes if c in seen or seen.add(c))
            raise DataError(f"{self.source}: class {dup[:60]!r} is listed twice; give each class one group")
        for g in set(groups):
            problem = group_problem(g)
            if problem is not None:
                raise DataError(f"{self.source}: group {g[:60]!r} {problem}")
        if len(set(groups)) > MAX_GROUPS:
            raise DataError(f"{self.source}: {len(set(groups)):,} distinct groups; at most {MAX_GROUPS} can be "
                            "reported (a group is a demographic category such as a sex or an age band, not a class)")
        object.__setattr__(self, "classes", classes)
        object.__setattr__(self, "groups", groups)

    @classmethod
    def from_mapping(cls, mapping, source: str = "<memory>") -> "GroupLabels":
        items = list(dict(mapping).items())
        return cls(tuple(c for c, _ in items), tuple(g for _, g in items), source)

    @property
    def names(self) -> tuple[str, ...]:
        """The distinct groups, sorted (:data:`UNLABELLED` is never one)."""
        return tuple(sorted(set(self.groups)))

    def group_of(self, cls: str) -> str:
        return dict(zip(self.classes, self.groups)).get(str(cls), UNLABELLED)

    def codes(self, classes) -> np.ndarray:
        """Each of ``classes``' index into :attr:`names`; ``len(names)`` for a class without a group."""
        names = self.names
        index = {g: k for k, g in enumerate(names)}
        of = {c: index[g] for c, g in zip(self.classes, self.groups)}
        shape = classes.shape if isinstance(classes, CodedLabels) else np.shape(classes)
        unique, inverse = factorise(classes)
        table = np.array([of.get(u, len(names)) for u in unique.tolist()], dtype=np.int64)
        return table[inverse].reshape(shape) if unique.size else np.zeros(shape, dtype=np.int64)


@dataclass(frozen=True)
class TrainingGroups:
    """The demographic groups on an estimator's training side (``Estimator.fit(..., groups=)``), aligned with its
    :class:`ImpostorDistances`: ``of_class[i]`` is class i's group (an index into ``names``; ``len(names)`` for a
    class without one) and ``of_impostor[j]`` the group of the probe behind ``impostors.values[j]`` (the same
    codes). (A run calibrating against same-group impostors, ``data: {impostors: same-group}``, fits each group on
    its own instead: calibrate.running.grouped.)"""

    names: tuple[str, ...]
    of_class: np.ndarray
    of_impostor: np.ndarray

    def __post_init__(self):
        names = tuple(str(n) for n in self.names)
        of_class = np.asarray(self.of_class, dtype=np.int64)
        of_impostor = np.asarray(self.of_impostor, dtype=np.int64)
        for what, codes in (("of_class", of_class), ("of_impostor", of_impostor)):
            if codes.ndim != 1 or (codes.size and (codes.min() < 0 or codes.max() > len(names))):
                raise DataError(f"training groups: {what} must be group codes in 0..{len(names)} (one dimension)")
        object.__setattr__(self, "names", names)
        object.__setattr__(self, "of_class", _readonly(of_class))
        object.__setattr__(self, "of_impostor", _readonly(of_impostor))

    @classmethod
    def of_matrix(cls, labels: "GroupLabels", matrix: DistanceMatrix) -> "TrainingGroups":
        """The groups of :meth:`ImpostorDistances.from_matrix` ``(matrix)``'s classes and impostor distances."""
        names = labels.names
        probe = labels.codes(matrix.probe_classes)
        mask = matrix.impostor_mask()
        of_impostor = np.broadcast_to(probe[:, None], mask.shape).T[mask.T]  # column by column, as from_matrix
        return cls(names, labels.codes(matrix.gallery_classes), of_impostor)

    def check(self, impostors: "ImpostorDistances", where: str) -> None:
        if self.of_class.size != len(impostors) or self.of_impostor.size != impostors.values.size:
            raise DataError(f"{where}: the training groups give {self.of_class.size} classes and "
                            f"{self.of_impostor.size} impostor distances, the impostors {len(impostors)} and "
                            f"{impostors.values.size}")

    def same_group(self, impostors: "ImpostorDistances") -> np.ndarray:
        """Per impostor distance: whether its probe is of its class's (labelled) group."""
        own = np.repeat(self.of_class, impostors.counts())
        return (self.of_impostor == own) & (own < len(self.names))

    def take(self, index: np.ndarray) -> "TrainingGroups":
        """The groups of impostor distances picked by ``index`` (flat, in the order of a new gallery of the same
        classes)."""
        return TrainingGroups(self.names, self.of_class, self.of_impostor[np.asarray(index)])


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
