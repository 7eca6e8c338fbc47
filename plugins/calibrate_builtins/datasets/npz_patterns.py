"""Dataset ``npz-patterns``: feature vectors with class and set labels from a NumPy ``.npz``.

The file is untrusted: the arrays' headers are read first (shapes, types, sizes against the
machine's budget), then the labels and sets, which are checked (the loader's label rules, at least
two classes, a class with a second set to query with), and only then X, the large array.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from calibrate.contract.base import Dataset, RunContext
from calibrate.errors import DataError
from calibrate.files.untrusted import label_problem, memory_budget, npz_arrays, npz_headers
from calibrate.contract.types import PatternSet

_FIX = "save it with numpy.savez"
#: what X may hold: booleans, integers, real floats (complex, strings and records have no distance)
_NUMERIC = frozenset("biuf")


class NpzPatterns(Dataset):
    """Patterns from an .npz with arrays X (samples x features), labels and sets (one per sample).

    :param path: the .npz file; relative to the recipe.
    """

    produces = "patterns"
    default_distance = "euclidean"  # between set means

    def __init__(self, *, path: Path):
        self.path = path

    def _headers(self) -> int:
        """Check the arrays' names, shapes and X's type from their headers; the number of samples."""
        heads = npz_headers(Path(self.path), "the patterns file", _FIX)
        missing = [k for k in ("X", "labels", "sets") if k not in heads]
        if missing:
            raise DataError(f"{self.path}: missing array(s) {', '.join(missing)}; the file needs X (samples x features), "
                            f"labels and sets (one entry per sample); it has {', '.join(heads) or 'nothing'}")
        (shape, dtype) = heads["X"]
        if dtype.kind not in _NUMERIC:
            raise DataError(f"{self.path}: X holds {dtype} values, not real numbers; {_FIX} of a float array "
                            "(samples x features)")
        if len(shape) != 2:
            raise DataError(f"{self.path}: X must be a 2-D array (samples x features), got shape {shape}")
        for key in ("labels", "sets"):
            if heads[key][0] != (shape[0],):
                raise DataError(f"{self.path}: {key} has shape {heads[key][0]} but X has {shape[0]} samples; "
                                f"{key} needs one entry per sample")
        if shape[0] * shape[1] * 8 > memory_budget():
            raise DataError(f"{self.path}: X is {shape[0]:,} x {shape[1]:,} values ({shape[0] * shape[1] * 8 / 2**30:.1f} "
                            f"GiB as float64), more than this machine's budget of {memory_budget() / 2**30:.1f} GiB "
                            "for one input; reduce the features or the samples")
        return shape[0]

    def check(self) -> None:
        """The arrays' names, shapes and X's type, from their headers (the arrays are read by the run)."""
        self._headers()

    def _labels(self) -> tuple[np.ndarray, np.ndarray]:
        """labels and sets as strings, checked before X is read."""
        small = npz_arrays(Path(self.path), "the patterns file", _FIX, names=("labels", "sets"))
        labels, sets = (_strings(small[k], f"{self.path}: {k}") for k in ("labels", "sets"))
        for k, label in enumerate(labels.tolist()):
            if (problem := label_problem(label)) is not None:
                raise DataError(f"{self.path}: labels[{k}] {label[:40]!r} {problem}; a class label must be a non-empty "
                                "string without NUL")
        classes = np.unique(labels)
        if classes.size < 2:
            raise DataError(f"{self.path}: labels name {classes.size} class; verification needs at least 2 classes "
                            "(each is an impostor for the others)")
        if len(set(zip(labels.tolist(), sets.tolist()))) == classes.size:
            raise DataError(f"{self.path}: every class has a single set, so none is left to query with after "
                            "enrollment; give classes a second set label in sets")
        return labels, sets

    def _load(self, context: RunContext) -> PatternSet:
        self._headers()
        labels, sets = self._labels()
        X = npz_arrays(Path(self.path), "the patterns file", _FIX, names=("X",))["X"]
        return PatternSet(X, labels, sets, source=str(self.path))


def _strings(arr: np.ndarray, name: str) -> np.ndarray:
    """One-dimensional labels as str (bytes decoded as UTF-8)."""
    if arr.dtype.kind == "S":
        try:
            return np.char.decode(arr, "utf-8")
        except UnicodeDecodeError:
            raise DataError(f"{name} are bytes that are not UTF-8 text; store them as strings (a numpy str array)") from None
    return arr.astype(str)
