"""Cohorts per attempt: probes' scores against the cohort given once (:class:`ProbeCohorts`), and the
cohorts of a run's matrices normalised.

The normaliser stage (calibrate.contract.base.Normalizer) turns each attempt's distance d into a normalised
score z from two cohort sides (calibrate.contract.types.CohortScores): its class's distances to an impostor
cohort (enrolled side) and its probe's distances to a cohort (probe side). Here:

* :class:`ProbeCohorts`: each probe's scores against the cohort models once, for any number of attempts
  (``calibrate accept --cohort``, ``Calibration.accept``);
* :func:`class_statistics`: the enrolled side's statistics of every class (what a calibration saves);
* :func:`matrix_cohorts` (the rest of the gallery as the cohort of a training and an evaluation
  matrix; calibrate.normalisation.stage says how), :func:`normalise_matrix` (every valid entry of a matrix
  normalised) and :func:`normalise_fold` (both matrices of a fold, one pass over each cohort side): what the
  run does to a fold, and what the conformance kit checks normalisers with.

Each attempt's statistics come from calibrate.normalisation.row_statistics (:func:`attempt_statistics`, the
map :func:`to_distance`); the fitted normalisation a calibration saves and applies, with the record of the
cohort it was fitted with and the checks of cohorts given later, is calibrate.normalisation.fitted. This
module is public (calibrate.PUBLIC_MODULES): the names of both are importable from it as well.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from calibrate.contract.base import Normalizer
from calibrate.errors import DataError
from calibrate.contract.types import CohortScores, DistanceMatrix
from calibrate.normalisation.fitted import (  # noqa: F401  (re-exported: public API)
    DRIFT_ROWS, DRIFT_SHARE, ENROLLED_COHORTS, FEWER_MEMBERS, SPREAD_FACTOR, FittedNormalization, check_state,
    members_mismatch, names_digest, row_moments, row_moments_left_out, rows_drift, rows_mismatch, side_record)
from calibrate.normalisation.row_statistics import (  # noqa: F401  (re-exported: public API)
    BLOCK_VALUES, SPREAD_FLOOR, Z_LIMIT, attempt_statistics, normalising_refusal, ragged_rows, statistics_problem,
    statistics_refusal, to_distance, to_z)


@dataclass
class ProbeCohorts:
    """Probes' scores against the cohort models, each probe's once, for any number of attempts: what
    ``calibrate accept --cohort`` reads from a T-norm file, and ``Calibration.accept(..., probe_cohort_scores=
    ProbeCohorts(...))`` takes instead of one row per attempt (memory: probes x models, not attempts x models).

    * ``scores[i, k]``: probe row i against cohort model ``models[k]``, in score units; NaN: no comparison;
    * ``probes[a]``: attempt a's row of ``scores``;
    * ``probe_classes[i]`` (optional): row i's own class; the cohort model of that name, if any, is not part
      of its cohort (as in a run);
    * ``labels[i]`` (optional): how messages name row i (e.g. its probe's label).

    An attempt's cohort is its row's scores, less the model named like its claimed class (a run leaves it
    out). Rows are checked (shapes, indices) when built; scores when an attempt is decided."""

    scores: Any
    models: Sequence[str]
    probes: Any
    probe_classes: Sequence[str] | None = None
    labels: Sequence[str] | None = None

    def __post_init__(self):
        try:
            self.scores = np.asarray(self.scores, dtype=np.float64)
            self.probes = np.asarray(self.probes)
        except (TypeError, ValueError):
            raise DataError("ProbeCohorts: scores must be a 2-D array of numbers and probes one row index per "
                            "attempt") from None
        self.models = np.asarray([str(m) for m in self.models], dtype=object)
        if self.scores.ndim != 2 or self.scores.shape[1] != self.models.size:
            raise DataError(f"ProbeCohorts: scores has shape {self.scores.shape}, but {self.models.size} cohort "
                            "model(s) are named; give one row per probe and one column per model")
        if len(set(self.models.tolist())) != self.models.size:
            raise DataError("ProbeCohorts: a cohort model is named twice; give each model once")
        if self.probes.ndim != 1 or (self.probes.size and not np.issubdtype(self.probes.dtype, np.integer)):
            raise DataError("ProbeCohorts: probes must hold one whole-number row index per attempt")
        self.probes = self.probes.astype(np.int64)
        if self.probes.size and (self.probes.min() < 0 or self.probes.max() >= self.scores.shape[0]):
            raise DataError(f"ProbeCohorts: probes holds row indices outside 0..{self.scores.shape[0] - 1}")
        if np.isinf(self.scores).any():
            raise DataError("ProbeCohorts: scores holds an infinite value; every cohort score must be a finite "
                            "number (NaN: no comparison)")
        for name in ("probe_classes", "labels"):
            given = getattr(self, name)
            if given is not None:
                given = np.asarray([str(v) for v in given], dtype=object)
                if given.size != self.scores.shape[0]:
                    raise DataError(f"ProbeCohorts: {name} names {given.size} rows, scores has "
                                    f"{self.scores.shape[0]}; give one per row")
                setattr(self, name, given)

    def usable(self) -> np.ndarray:
        """Where a row's score is part of its cohort: a comparison, with another model than the row's own."""
        usable = ~np.isnan(self.scores)
        if self.probe_classes is not None:
            position = {m: k for k, m in enumerate(self.models.tolist())}
            own = np.array([position.get(c, -1) for c in self.probe_classes.tolist()], dtype=np.int64)
            mine = np.flatnonzero(own >= 0)
            usable[mine, own[mine]] = False
        return usable

    def left_out(self, claimed: Sequence[str], codes: np.ndarray | None = None) -> np.ndarray:
        """Per attempt, the column of the model named like its claimed class (-1: none). ``claimed`` names the
        classes and ``codes`` (optional) each attempt's index into them; else ``claimed`` holds one name per
        attempt (found by binary search among the models' names)."""
        if codes is not None:
            position = {m: k for k, m in enumerate(self.models.tolist())}
            table = np.array([position.get(str(c), -1) for c in claimed], dtype=np.int64)
            return table[np.asarray(codes, dtype=np.int64)]
        names = np.asarray(claimed, dtype=str)
        out = np.full(names.size, -1, dtype=np.int64)
        if not self.models.size:
            return out
        models = self.models.astype(str)
        order = np.argsort(models)
        ordered = models[order]
        for at in range(0, names.size, 1 << 18):  # blocks: the names compared are copies
            part = names[at:at + (1 << 18)]
            k = np.minimum(np.searchsorted(ordered, part), models.size - 1)
            out[at:at + part.size] = np.where(ordered[k] == part, order[k], -1)
        return out

    def describe(self, what: str) -> Callable[[int], str]:
        """How messages name a row: its label, or its index."""
        if self.labels is not None:
            return lambda row: f"{what}: probe {self.labels[row][:60]!r}"
        return lambda row: f"{what}: probe row {row}"


def class_statistics(normalizer: Normalizer, enrolled: DistanceMatrix, classes: Sequence[str]) -> dict[str, np.ndarray]:
    """The enrolled side's statistics of ``classes`` (in that order) from ``enrolled`` (cohort members x
    classes; each column's impostor entries), with nothing left out: what a calibration saves."""
    columns = _columns_of(enrolled, classes)
    usable = enrolled.impostor_mask()
    return attempt_statistics(normalizer, enrolled.values.T, usable.T, columns,
                              describe=_describe_class(enrolled))


def _columns_of(side: DistanceMatrix, classes: Sequence[str]) -> np.ndarray:
    """The column of ``side`` labelled with each of ``classes``; DataError naming the source and the first absent."""
    position = {c: j for j, c in enumerate(side.gallery_classes.tolist())}
    missing = [c for c in classes if c not in position]
    if missing:
        raise DataError(f"{side.source}: class {missing[0][:60]!r}{f' (and {len(missing) - 1} more)' if len(missing) > 1 else ''} "
                        "has no comparison with the cohort; the enrolled side needs every enrolled class's scores "
                        "against the cohort (bob's Z-norm file: the class as claimed_id)")
    return np.array([position[c] for c in classes], dtype=np.int64)


def _describe_class(enrolled: DistanceMatrix) -> Callable[[int], str]:
    return lambda row: f"{enrolled.source}: class {enrolled.gallery_classes[row][:60]!r}"


# ---- matrices: the rest of the gallery as the cohort, and whole matrices normalised ----------------------

def same_rows(train: DistanceMatrix, test: DistanceMatrix) -> bool:
    """Whether the training and evaluation matrices are two masks over one matrix (one file split per class)."""
    return (train.shape == test.shape and np.array_equal(train.probe_ids, test.probe_ids)
            and np.array_equal(train.probe_classes, test.probe_classes)
            and np.array_equal(train.gallery_classes, test.gallery_classes)
            and np.array_equal(train.values, test.values, equal_nan=True))


def matrix_cohorts(train: DistanceMatrix, test: DistanceMatrix,
                   distances: tuple[DistanceMatrix, DistanceMatrix] | None = None) -> tuple[CohortScores, CohortScores]:
    """The rest of the gallery as the cohort (see the module): (training cohort, evaluation cohort), raw scores;
    or with ``distances`` (``train`` and ``test`` through the fitted transform), those distances: the transform
    maps each valid entry on its own (``Transform._apply``), so they are the numbers the cohort's own pass
    through it would give, without that pass and its copies."""
    train_v, test_v = (train, test) if distances is None else distances
    enrolled = DistanceMatrix(train_v.values, train.probe_classes, train.gallery_classes, train.impostor_mask(),
                              train_v.kind, train.probe_ids, train.gallery_ids,
                              source=f"{train.source}: training impostors as the enrolled cohort")
    if same_rows(train, test):
        whole = DistanceMatrix(np.where(train.valid, train_v.values, test_v.values), train.probe_classes,
                               train.gallery_classes, train.valid | test.valid, train_v.kind, train.probe_ids,
                               train.gallery_ids, source=f"{train.source}: the probes' rows as their cohort")
        probes_train = probes_test = whole
    else:
        probes_train, probes_test = train_v, test_v
    return (CohortScores(enrolled, probes_train, leave_out=True, source=train.source),
            CohortScores(enrolled, probes_test, leave_out=False, source=test.source))


def _aligned(side: DistanceMatrix, matrix: DistanceMatrix, what: str) -> None:
    """A cohort side whose rows are the attempts' probes must list them in the matrix's order."""
    if side.shape[0] != matrix.shape[0] or not np.array_equal(side.probe_ids, matrix.probe_ids):
        raise DataError(f"{side.source}: the {what} cohort's rows ({side.shape[0]}) are not the probes of "
                        f"{matrix.source} ({matrix.shape[0]}) in their order; a dataset gives one cohort row per probe")


def _probe_side(normalizer: Normalizer, side: DistanceMatrix, parts: Sequence[tuple[DistanceMatrix, np.ndarray, np.ndarray]]
                ) -> list[dict[str, np.ndarray]]:
    """Each attempt's probe statistics, per (matrix, rows, cols) of ``parts`` (matrices whose probes are the
    rows of ``side``): its row of ``side`` without the claimed class's column; one pass over ``side``."""
    for matrix, _, _ in parts:
        _aligned(side, matrix, "probe")
    position = {c: k for k, c in enumerate(side.gallery_classes.tolist())}

    def describe(row: int) -> str:
        return (f"{side.source}: probe {side.probe_ids[row][:60]!r} ({side.probe_classes[row][:60]}), its own and the "
                "claimed class left out,")

    members = [np.array([position.get(c, -1) for c in m.gallery_classes.tolist()], dtype=cols.dtype)[cols]
               for m, _, cols in parts]
    stats = attempt_statistics(normalizer, side.values, side.impostor_mask(), np.concatenate([r for _, r, _ in parts]),
                               np.concatenate(members), describe=describe)
    return _split_attempts(stats, [r.size for _, r, _ in parts])


def _split_attempts(stats: dict[str, np.ndarray], sizes: Sequence[int]) -> list[dict[str, np.ndarray]]:
    """Statistics of consecutive groups of attempts, ``sizes`` of them in turn."""
    edges = np.cumsum([0, *sizes])
    return [{k: v[lo:hi] for k, v in stats.items()} for lo, hi in zip(edges[:-1], edges[1:])]


def _normalised(normalizer: Normalizer, matrix: DistanceMatrix, rows: np.ndarray, cols: np.ndarray,
                enrolled: dict[str, np.ndarray] | None, probe: dict[str, np.ndarray] | None,
                by_class: bool = False) -> DistanceMatrix:
    """``matrix`` with the entries at (rows, cols) replaced by their normalised distances exp(z), computed a
    block of :data:`BLOCK_VALUES` entries at a time (no full-size temporaries); ``enrolled`` per entry, or with
    ``by_class`` per column."""
    out = np.zeros(matrix.shape)
    for start in range(0, rows.size, BLOCK_VALUES):
        r, c = rows[start:start + BLOCK_VALUES], cols[start:start + BLOCK_VALUES]
        part = slice(start, start + r.size)
        side = None if enrolled is None else {k: v[c] if by_class else v[part] for k, v in enrolled.items()}
        z = normalizer.normalize(matrix.values[r, c], side, None if probe is None else
                                 {k: v[part] for k, v in probe.items()})
        bad = np.flatnonzero(~np.isfinite(z))
        if bad.size:
            a = int(bad[0])
            i, j = r[a], c[a]
            raise DataError(f"{matrix.source}: normalising probe {matrix.probe_ids[i][:60]!r} claiming class "
                            f"{matrix.gallery_classes[j][:60]!r} " + normalising_refusal(
                                normalizer, float(z[a]), float(matrix.values[i, j]),
                                None if side is None else {k: v[a] for k, v in side.items()},
                                None if probe is None else {k: v[start + a] for k, v in probe.items()}))
        out[r, c] = to_distance(z)
    return matrix.with_values(out, kind="distance", source=f"{matrix.source}, normalised")


def normalise_matrix(normalizer: Normalizer, matrix: DistanceMatrix, cohort: CohortScores,
                     classes: dict[str, np.ndarray]) -> DistanceMatrix:
    """``matrix`` (distances) with every valid entry replaced by its normalised distance exp(z); ``classes``:
    the enrolled side's statistics per gallery class (for attempts that leave nothing out)."""
    rows, cols = np.nonzero(matrix.valid)
    enrolled, by_class = None, False
    if "enrolled" in normalizer.sides and cohort.leave_out:
        side = cohort.enrolled
        _aligned(side, matrix, "enrolled")
        columns = _columns_of(side, matrix.gallery_classes.tolist())
        enrolled = attempt_statistics(normalizer, side.values.T, side.impostor_mask().T, columns[cols], rows,
                                      describe=_describe_class(side))
    elif "enrolled" in normalizer.sides:
        enrolled, by_class = classes, True
    probe = _probe_side(normalizer, cohort.probes, [(matrix, rows, cols)])[0] if "probe" in normalizer.sides else None
    return _normalised(normalizer, matrix, rows, cols, enrolled, probe, by_class=by_class)


def _entries(matrix: DistanceMatrix) -> tuple[np.ndarray, np.ndarray]:
    """(rows, columns) of the valid entries, row by row, as int32 where they fit (half of np.nonzero's memory)."""
    rows, cols = np.nonzero(matrix.valid)
    small = max(matrix.shape) < 2 ** 31
    return (rows.astype(np.int32), cols.astype(np.int32)) if small else (rows, cols)


def normalise_fold(normalizer: Normalizer, train: DistanceMatrix, test: DistanceMatrix, train_c: CohortScores,
                   test_c: CohortScores) -> tuple[DistanceMatrix, DistanceMatrix, dict[str, np.ndarray]]:
    """(``train`` normalised, ``test`` normalised, every gallery class's enrolled-side statistics): what
    :func:`class_statistics` and :func:`normalise_matrix` of each give, with one pass over each cohort side:
    the classes' statistics and the training attempts' leave-one-out ones together, and the training and
    evaluation attempts' probe statistics together when both read one probe cohort (one matrix split in two)."""
    classes = train.gallery_classes.tolist()
    (tr_rows, tr_cols), (te_rows, te_cols) = _entries(train), _entries(test)
    stats: dict[str, np.ndarray] = {}
    enrolled: list[dict[str, np.ndarray] | None] = [None, None]
    if "enrolled" in normalizer.sides:
        side = train_c.enrolled
        columns = _columns_of(side, classes)
        if train_c.leave_out:
            _aligned(side, train, "enrolled")
            both = attempt_statistics(normalizer, side.values.T, side.impostor_mask().T,
                                      np.concatenate([columns.astype(tr_cols.dtype), columns[tr_cols].astype(tr_cols.dtype)]),
                                      np.concatenate([np.full(columns.size, -1, tr_rows.dtype), tr_rows]),
                                      describe=_describe_class(side))
            stats, enrolled[0] = _split_attempts(both, [columns.size, tr_rows.size])
        else:
            stats = class_statistics(normalizer, side, classes)
            enrolled[0] = stats
        enrolled[1] = stats
    probe: list[dict[str, np.ndarray] | None] = [None, None]
    if "probe" in normalizer.sides:
        parts = [(train, tr_rows, tr_cols), (test, te_rows, te_cols)]
        if train_c.probes is test_c.probes:
            probe = _probe_side(normalizer, train_c.probes, parts)
        else:
            probe = [_probe_side(normalizer, c.probes, [part])[0] for c, part in zip((train_c, test_c), parts)]
    return (_normalised(normalizer, train, tr_rows, tr_cols, enrolled[0], probe[0],
                        by_class=enrolled[0] is stats),
            _normalised(normalizer, test, te_rows, te_cols, enrolled[1], probe[1], by_class=True), stats)
