"""Labels: columns of class labels held as codes (:class:`CodedLabels`, with :func:`factorise` and
:func:`same_labels`, the cheap ways to compare them), and demographic groups (ISO/IEC 19795-10): the group of
each class (:class:`GroupLabels`, what a groups file or a dataset gives; :func:`group_problem` checks a name)
and the groups on an estimator's training side (:class:`TrainingGroups`).

Plugins import these from :mod:`calibrate.contract.types`, which gathers every data type.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from calibrate.errors import DataError
from calibrate.contract.comparisons import DistanceMatrix, ImpostorDistances, _readonly


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
    its own instead: calibrate.saved.grouped.)"""

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
