"""Cohort statistics per attempt, and the fitted normalisation a calibration saves and applies.

The normaliser stage (calibrate.base.Normalizer) turns each attempt's distance d into a normalised
score z from two cohort sides (calibrate.types.CohortScores): its class's distances to an impostor
cohort (enrolled side) and its probe's distances to a cohort (probe side). Everything here is shared
by the run (calibrate.normalising) and by a saved calibration's ``accept``/``enroll``, so that both
compute the same numbers by the same path:

* :func:`attempt_statistics`: for each attempt, its cohort row with at most one member left out (the
  claimed class on the probe side; the attempt's own probe when the training impostors are the
  enrolled side's cohort), sorted ascending and handed to the normaliser in dense blocks of rows of
  equal length. The same cohort values therefore reach ``_statistics`` as the same sorted row, whether
  from a run's matrix or from scores given to ``Calibration.accept``: the statistics, hence the
  decisions, agree bit for bit.
* :func:`to_distance`: the fixed monotone map from z to the distance the estimators fit, exp(z).
* :class:`FittedNormalization`: the normaliser with every enrolled class's statistics (what a
  calibration saves), applied to new attempts given their probes' cohort distances.
* :func:`matrix_cohorts` (the rest of the gallery as the cohort of a training and an evaluation
  matrix; calibrate.normalising says how) and :func:`normalise_matrix` (every valid entry of a matrix
  normalised): what the run does to a fold, and what the conformance kit checks normalisers with.

Cost: O(attempts x cohort size) time, in blocks of :data:`BLOCK_VALUES` values of memory; a run
sorts each cohort row once.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .base import Normalizer, progress_name
from .errors import DataError
from .types import CohortScores, DistanceMatrix

#: cohort distances gathered per block of attempts (a few float64 arrays of this many values at once)
BLOCK_VALUES = 1 << 21
#: z beyond this is clipped before exp(z), so that the distance stays finite (exp(700) ~ 1e304)
Z_LIMIT = 700.0
#: where the enrolled side's cohort came from (saved with a calibration; ``enroll`` follows it)
ENROLLED_COHORTS = ("training impostors", "cohort file")


def to_distance(z: np.ndarray) -> np.ndarray:
    """The distance the estimators fit for normalised scores z: exp(z), in (0, inf), monotone."""
    return np.exp(np.clip(np.asarray(z, dtype=np.float64), -Z_LIMIT, Z_LIMIT))


def to_z(distance: np.ndarray) -> np.ndarray:
    """The normalised score of a normalised distance (thresholds in z units): log(distance)."""
    with np.errstate(divide="ignore"):
        return np.log(np.asarray(distance, dtype=np.float64))


def _sorted_rows(values: np.ndarray, usable: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(each row's usable values first, ascending; usable count per row; rank of each member in its row)."""
    keyed = np.where(usable, values, np.inf)
    order = np.argsort(keyed, axis=1, kind="stable")
    # one column of padding, so that a row's values after a member left out are a slice shifted by one
    ordered = np.concatenate([np.take_along_axis(keyed, order, axis=1), np.full((values.shape[0], 1), np.inf)], axis=1)
    rank = np.empty_like(order)
    np.put_along_axis(rank, order, np.broadcast_to(np.arange(values.shape[1]), order.shape), axis=1)
    return ordered, usable.sum(axis=1), rank


def attempt_statistics(normalizer: Normalizer, values: np.ndarray, usable: np.ndarray, rows: np.ndarray,
                       left_out: np.ndarray | None = None, *,
                       describe: Callable[[int, int], str] | None = None) -> dict[str, np.ndarray]:
    """The normaliser's statistics for each attempt a: of cohort row ``rows[a]`` (of ``values``, where
    ``usable``), without member ``left_out[a]`` (-1, or an unusable member: none left out).

    Attempts with the same row and member left out are computed once. ``describe(row, count)`` words
    the error for a row with fewer than ``normalizer.min_members()`` usable distances."""
    values = np.asarray(values, dtype=np.float64)
    usable = np.asarray(usable, dtype=bool) & np.isfinite(values)
    rows = np.asarray(rows, dtype=np.int64)
    n_members = values.shape[1]
    left = np.full(rows.shape, -1, np.int64) if left_out is None else np.asarray(left_out, dtype=np.int64)
    ordered, counts, rank = _sorted_rows(values, usable)
    safe = np.where(left >= 0, left, 0)
    removed = (left >= 0) & usable[rows, safe] if rows.size else np.zeros(0, bool)
    position = np.where(removed, rank[rows, safe] if rows.size else 0, n_members)  # n_members: none removed
    uniq, inverse = np.unique(rows * (n_members + 1) + position, return_inverse=True)
    u_rows, u_pos = uniq // (n_members + 1), uniq % (n_members + 1)
    u_count = counts[u_rows] - (u_pos < n_members)
    need = int(normalizer.min_members())
    short = np.flatnonzero(u_count < need)
    if short.size:
        r, n = int(u_rows[short[0]]), int(u_count[short[0]])
        raise DataError(describe(r, n) if describe else f"cohort row {r} has {n} usable distances; "
                        f"{progress_name(normalizer)} needs at least {need}")
    out: dict[str, np.ndarray] = {}
    for count in np.unique(u_count).tolist():
        which = np.flatnonzero(u_count == count)
        step = max(1, BLOCK_VALUES // max(count, 1))
        k = np.arange(count)
        for start in range(0, which.size, step):
            part = which[start:start + step]
            whole = ordered[u_rows[part], :count + 1]
            # before the member left out, its row as sorted; from it on, shifted by one (a sorted row stays sorted)
            block = np.where(k[None, :] < u_pos[part, None], whole[:, :count], whole[:, 1:])
            stats = normalizer.statistics(block)
            if out and set(stats) != set(out):
                raise DataError(f"{progress_name(normalizer)}: _statistics returned the statistics {sorted(stats)} for "
                                f"some rows and {sorted(out)} for others; return the same names for every row")
            for name, v in stats.items():
                out.setdefault(name, np.empty(uniq.size))[part] = v
    if not out:  # no attempts: the names are unknown, and nothing reads them
        return {}
    return {name: v[inverse] for name, v in out.items()}


def ragged_rows(rows: Sequence[Any], what: str) -> tuple[np.ndarray, np.ndarray]:
    """(values, usable) of a padded 2-D array from one 1-D sequence of numbers per attempt."""
    arrays = []
    for i, row in enumerate(rows):
        try:
            a = np.asarray(row, dtype=np.float64).ravel()
        except (TypeError, ValueError):
            raise DataError(f"{what} of attempt {i + 1} must be numbers") from None
        if not np.all(np.isfinite(a)):
            bad = int(np.flatnonzero(~np.isfinite(a))[0])
            raise DataError(f"{what} of attempt {i + 1}: value {bad + 1} is {float(a[bad])}; every cohort score "
                            "must be a finite number")
        arrays.append(a)
    width = max((a.size for a in arrays), default=0)
    values = np.zeros((len(arrays), width))
    usable = np.zeros((len(arrays), width), dtype=bool)
    for i, a in enumerate(arrays):
        values[i, :a.size], usable[i, :a.size] = a, True
    return values, usable


@dataclass
class FittedNormalization:
    """A normaliser with the enrolled side's statistics of every class: what a calibration saves.

    ``statistics[name][i]`` belongs to ``classes[i]`` (empty when the normaliser reads no enrolled side);
    ``enrolled_cohort`` says where the enrolled side's cohort came from (:data:`ENROLLED_COHORTS`).
    """

    normalizer: Normalizer
    plugin: str
    params: dict[str, Any]
    classes: tuple[str, ...]
    statistics: dict[str, np.ndarray] = field(default_factory=dict)
    enrolled_cohort: str = "training impostors"

    def __post_init__(self):
        self.classes = tuple(str(c) for c in self.classes)
        self.statistics = {k: np.asarray(v, dtype=np.float64) for k, v in self.statistics.items()}
        for name, v in self.statistics.items():
            if v.shape != (len(self.classes),):
                raise DataError(f"normaliser {self.plugin}: statistic {name!r} has {v.size} values for "
                                f"{len(self.classes)} classes")

    @property
    def sides(self) -> tuple[str, ...]:
        return tuple(self.normalizer.sides)

    @property
    def reads_probe(self) -> bool:
        return "probe" in self.sides

    def describe(self) -> str:
        """One phrase for notes and reports: which normaliser, which sides."""
        sides = " and ".join({"enrolled": "the enrolled class's", "probe": "the probe's"}[s] for s in self.sides)
        return f"`{self.plugin}` ({sides} cohort scores)"

    def class_statistics(self, rows: np.ndarray) -> dict[str, np.ndarray] | None:
        """The enrolled side's statistics of the classes at ``rows`` (one per attempt), or None."""
        if "enrolled" not in self.sides:
            return None
        return {name: v[rows] for name, v in self.statistics.items()}

    def normalise(self, distances: np.ndarray, rows: np.ndarray, probe_values: np.ndarray | None = None,
                  probe_usable: np.ndarray | None = None, what: str = "the attempts") -> np.ndarray:
        """Normalised distances exp(z) of attempts on the classes at ``rows``, each with its probe's
        cohort distances (row a of ``probe_values`` where ``probe_usable``; none when no probe side)."""
        d = np.asarray(distances, dtype=np.float64)
        probe = None
        if self.reads_probe:
            probe = attempt_statistics(self.normalizer, probe_values, probe_usable, np.arange(d.size),
                                       describe=lambda r, n: f"{what}: attempt {r + 1}'s probe has {n} cohort "
                                       f"score(s); {self.plugin} needs at least {self.normalizer.min_members()}: "
                                       "give more cohort scores per probe")
        z = self.normalizer.normalize(d, self.class_statistics(rows), probe)
        bad = np.flatnonzero(~np.isfinite(z))
        if bad.size:
            raise DataError(f"{what}: normalising attempt {int(bad[0]) + 1} gave {float(z[bad[0]])} (a cohort whose "
                            f"distances are all equal has no spread); {self.plugin} needs cohort scores that differ")
        return to_distance(z)

    def with_class(self, cls: str, statistics: Mapping[str, np.ndarray]) -> "FittedNormalization":
        """These statistics with class ``cls``'s added (or replaced), from a one-row statistics mapping."""
        classes = list(self.classes)
        stats = {k: np.asarray(v, dtype=np.float64).copy() for k, v in self.statistics.items()}
        one = {k: float(np.asarray(v, dtype=np.float64).ravel()[0]) for k, v in statistics.items()}
        if stats and set(one) != set(stats):
            raise DataError(f"normaliser {self.plugin}: statistics {sorted(one)} for class {cls!r}, {sorted(stats)} "
                            "for the others")
        if cls in classes:
            i = classes.index(cls)
            for k in stats:
                stats[k][i] = one[k]
        else:
            classes.append(cls)
            stats = {k: np.append(stats.get(k, np.empty(0)), one[k]) for k in one}
        return FittedNormalization(self.normalizer, self.plugin, self.params, tuple(classes), stats,
                                   self.enrolled_cohort)

    # ---- saved with a calibration ----------------------------------------------------------------

    def to_state(self) -> dict[str, Any]:
        return {"plugin": self.plugin, "params": json.loads(json.dumps(self.params, default=str)),
                "sides": list(self.sides), "enrolled_cohort": self.enrolled_cohort, "classes": list(self.classes),
                "statistics": {k: v.tolist() for k, v in self.statistics.items()}}

    @classmethod
    def from_state(cls, state: Mapping[str, Any], normalizer: Normalizer, where: str) -> "FittedNormalization":
        """Rebuilt from :meth:`to_state`, after calibrate.artifact checked the structure; ``where`` names the
        file in errors."""
        sides = tuple(state["sides"])
        if sides != tuple(normalizer.sides):
            raise DataError(f"{where}: normalizer.sides is {list(sides)}, but normaliser {state['plugin']!r} reads "
                            f"{list(normalizer.sides)}; the file was written by another version of it: run again")
        stats = {k: np.asarray(v, dtype=np.float64) for k, v in state["statistics"].items()}
        if "enrolled" in sides and not stats:
            raise DataError(f"{where}: normalizer.statistics is empty, but {state['plugin']!r} reads the enrolled side")
        return cls(normalizer, state["plugin"], dict(state.get("params", {})), tuple(state["classes"]), stats,
                   state["enrolled_cohort"])


def check_state(state: Any, bad: Callable[[str, str], Exception]) -> None:
    """The structure of a saved ``normalizer`` entry (untrusted input); ``bad(where, what)`` builds the error."""
    if not isinstance(state, dict):
        raise bad("normalizer", f"must be a mapping, got {type(state).__name__}")
    if not isinstance(state.get("plugin"), str) or not state["plugin"]:
        raise bad("normalizer.plugin", "must be a component name")
    if not isinstance(state.get("params", {}), dict):
        raise bad("normalizer.params", "must be a mapping")
    sides = state.get("sides")
    if not isinstance(sides, list) or not sides or not all(s in ("enrolled", "probe") for s in sides) \
            or len(set(sides)) != len(sides):
        raise bad("normalizer.sides", "must list the cohort sides read (enrolled, probe)")
    if state.get("enrolled_cohort") not in ENROLLED_COHORTS:
        raise bad("normalizer.enrolled_cohort", f"must be one of {', '.join(ENROLLED_COHORTS)}")
    classes = state.get("classes")
    if not isinstance(classes, list):
        raise bad("normalizer.classes", "must be a list of class names")
    stats = state.get("statistics")
    if not isinstance(stats, dict):
        raise bad("normalizer.statistics", "must be a mapping of names to one number per class")
    for name, values in stats.items():
        if not isinstance(values, list) or len(values) != len(classes) or not all(
                isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in values):
            raise bad(f"normalizer.statistics[{str(name)[:40]!r}]", f"must hold {len(classes)} finite numbers, one per "
                                                                   "class")


def class_statistics(normalizer: Normalizer, enrolled: DistanceMatrix, classes: Sequence[str]) -> dict[str, np.ndarray]:
    """The enrolled side's statistics of ``classes`` (in that order) from ``enrolled`` (cohort members x
    classes; each column's impostor entries), with nothing left out: what a calibration saves."""
    columns = _columns_of(enrolled, classes)
    usable = enrolled.impostor_mask()
    return attempt_statistics(normalizer, enrolled.values.T, usable.T, columns,
                              describe=_describe_class(normalizer, enrolled))


def _columns_of(side: DistanceMatrix, classes: Sequence[str]) -> np.ndarray:
    """The column of ``side`` labelled with each of ``classes``; DataError naming the source and the first absent."""
    position = {c: j for j, c in enumerate(side.gallery_classes.tolist())}
    missing = [c for c in classes if c not in position]
    if missing:
        raise DataError(f"{side.source}: class {missing[0][:60]!r}{f' (and {len(missing) - 1} more)' if len(missing) > 1 else ''} "
                        "has no comparison with the cohort; the enrolled side needs every enrolled class's scores "
                        "against the cohort (bob's Z-norm file: the class as claimed_id)")
    return np.array([position[c] for c in classes], dtype=np.int64)


def _describe_class(normalizer: Normalizer, enrolled: DistanceMatrix) -> Callable[[int, int], str]:
    def describe(row: int, n: int) -> str:
        return (f"{enrolled.source}: class {enrolled.gallery_classes[row][:60]!r} has {n} usable impostor cohort "
                f"distance(s); {progress_name(normalizer)} needs at least {normalizer.min_members()}: give a larger "
                "cohort, or a normaliser setting that needs fewer (e.g. a smaller top_k)")
    return describe


# ---- matrices: the rest of the gallery as the cohort, and whole matrices normalised ----------------------

def same_rows(train: DistanceMatrix, test: DistanceMatrix) -> bool:
    """Whether the training and evaluation matrices are two masks over one matrix (one file split per class)."""
    return (train.shape == test.shape and np.array_equal(train.probe_ids, test.probe_ids)
            and np.array_equal(train.probe_classes, test.probe_classes)
            and np.array_equal(train.gallery_classes, test.gallery_classes)
            and np.array_equal(train.values, test.values, equal_nan=True))


def matrix_cohorts(train: DistanceMatrix, test: DistanceMatrix) -> tuple[CohortScores, CohortScores]:
    """The rest of the gallery as the cohort (see the module): (training cohort, evaluation cohort), raw scores."""
    enrolled = DistanceMatrix(train.values, train.probe_classes, train.gallery_classes, train.impostor_mask(),
                              train.kind, train.probe_ids, train.gallery_ids,
                              source=f"{train.source}: training impostors as the enrolled cohort")
    if same_rows(train, test):
        whole = DistanceMatrix(np.where(train.valid, train.values, test.values), train.probe_classes,
                               train.gallery_classes, train.valid | test.valid, train.kind, train.probe_ids,
                               train.gallery_ids, source=f"{train.source}: the probes' rows as their cohort")
        probes_train = probes_test = whole
    else:
        probes_train, probes_test = train, test
    return (CohortScores(enrolled, probes_train, leave_out=True, source=train.source),
            CohortScores(enrolled, probes_test, leave_out=False, source=test.source))


def _aligned(side: DistanceMatrix, matrix: DistanceMatrix, what: str) -> None:
    """A cohort side whose rows are the attempts' probes must list them in the matrix's order."""
    if side.shape[0] != matrix.shape[0] or not np.array_equal(side.probe_ids, matrix.probe_ids):
        raise DataError(f"{side.source}: the {what} cohort's rows ({side.shape[0]}) are not the probes of "
                        f"{matrix.source} ({matrix.shape[0]}) in their order; a dataset gives one cohort row per probe")


def _probe_side(normalizer: Normalizer, matrix: DistanceMatrix, side: DistanceMatrix, rows: np.ndarray,
                cols: np.ndarray) -> dict[str, np.ndarray]:
    """Each attempt's probe statistics: its row of ``side`` without the claimed class's column."""
    _aligned(side, matrix, "probe")
    position = {c: k for k, c in enumerate(side.gallery_classes.tolist())}
    member = np.array([position.get(c, -1) for c in matrix.gallery_classes.tolist()], dtype=np.int64)

    def describe(row: int, n: int) -> str:
        return (f"{side.source}: probe {side.probe_ids[row][:60]!r} ({side.probe_classes[row][:60]}) has {n} usable "
                f"cohort distance(s) once its own and the claimed class are left out; {progress_name(normalizer)} "
                f"needs at least {normalizer.min_members()}: give a larger cohort, or a normaliser setting that needs "
                "fewer (e.g. a smaller top_k)")

    return attempt_statistics(normalizer, side.values, side.impostor_mask(), rows, member[cols], describe=describe)


def normalise_matrix(normalizer: Normalizer, matrix: DistanceMatrix, cohort: CohortScores,
                     classes: dict[str, np.ndarray]) -> DistanceMatrix:
    """``matrix`` (distances) with every valid entry replaced by its normalised distance exp(z); ``classes``:
    the enrolled side's statistics per gallery class (for attempts that leave nothing out)."""
    rows, cols = np.nonzero(matrix.valid)
    enrolled = probe = None
    if "enrolled" in normalizer.sides:
        if cohort.leave_out:
            side = cohort.enrolled
            _aligned(side, matrix, "enrolled")
            columns = _columns_of(side, matrix.gallery_classes.tolist())
            enrolled = attempt_statistics(normalizer, side.values.T, side.impostor_mask().T, columns[cols], rows,
                                          describe=_describe_class(normalizer, side))
        else:
            enrolled = {name: v[cols] for name, v in classes.items()}
    if "probe" in normalizer.sides:
        probe = _probe_side(normalizer, matrix, cohort.probes, rows, cols)
    z = normalizer.normalize(matrix.values[rows, cols], enrolled, probe)
    bad = np.flatnonzero(~np.isfinite(z))
    if bad.size:
        r, c = rows[bad[0]], cols[bad[0]]
        raise DataError(f"{matrix.source}: normalising probe {matrix.probe_ids[r][:60]!r} claiming class "
                        f"{matrix.gallery_classes[c][:60]!r} gave {float(z[bad[0]])}: its cohort distances have no spread "
                        f"(all equal); {progress_name(normalizer)} needs cohort scores that differ (a larger cohort, or "
                        "a larger top_k)")
    out = np.zeros(matrix.shape)
    out[rows, cols] = to_distance(z)
    return matrix.with_values(out, kind="distance", source=f"{matrix.source}, normalised")
