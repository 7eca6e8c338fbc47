"""What a normalised calibration adds to ``Calibration.accept`` and ``Calibration.enroll``: the scores and
their cohort scores through the fitted transform, then the saved normalisation (calibrate.normalisation.cohort).

A run normalises each attempt's distance d into z with its class's statistics (saved with the
calibration) and its probe's (from the probe's cohort scores, which ``accept`` is given): the decision is
``exp(z) <= threshold``, computed by the same functions as in the run, so it is the run's decision.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from calibrate.contract.base import Transform
from calibrate.normalisation.cohort import FittedNormalization, ProbeCohorts, attempt_statistics, ragged_rows, to_distance
from calibrate.errors import CalibrationError, DataError
from calibrate.contract.types import DistanceMatrix

_OTHER = "\0probe"  # the probe class of scores given without their probes' classes
#: attempts decided per block (their distances, statistics and z: a few arrays of this many values)
BLOCK = 1 << 18


def distances_of(transform: Transform, kind: str, values: np.ndarray, usable: np.ndarray, what: str) -> np.ndarray:
    """Raw scores (rows x columns, used where ``usable``) through the fitted transform, as distances."""
    matrix = DistanceMatrix(values, np.full(values.shape[0], _OTHER), np.array([f"\0m{k}" for k in range(values.shape[1])]),
                            usable, kind, source=what)
    out = transform.apply(matrix)
    out.check_distances(what)
    return np.where(usable, out.values, np.nan)


def _probe_rows(transform: Transform, kind: str, rows: Any, n: int, what: str) -> tuple[np.ndarray, np.ndarray]:
    """(distances, usable) of one cohort row per attempt, given in score units."""
    if rows is None:
        raise CalibrationError(f"{what} is needed: this calibration's normaliser reads the probe's cohort scores (one "
                               "row of scores against the cohort models per attempt); pass probe_cohort_scores=..., or "
                               "on the command line --cohort FILE")
    if isinstance(rows, np.ndarray) and rows.ndim == 2:
        rows = list(rows)
    try:
        count = len(rows)
    except TypeError:
        raise CalibrationError(f"{what} must hold one sequence of cohort scores per attempt") from None
    if count != n:
        raise CalibrationError(f"{what} holds {count} row(s) for {n} attempt(s); give one row of cohort scores per "
                               "attempt (its probe against the cohort, without the claimed class)")
    try:
        values, usable = ragged_rows(rows, what)
    except DataError as exc:
        raise CalibrationError(str(exc)) from None
    return distances_of(transform, kind, values, usable, what), usable


def normalised_distances(fitted: FittedNormalization, transform: Transform, kind: str, scores: np.ndarray,
                         rows: np.ndarray, probe_cohort_scores: Any, classes: Any = None) -> np.ndarray:
    """exp(z) of each attempt (``scores`` in score units on the classes at ``rows`` of ``classes``), as the
    run computes it. ``probe_cohort_scores``: one row per attempt, or a :class:`ProbeCohorts` (each probe's
    row once, decided a block of attempts at a time)."""
    if isinstance(probe_cohort_scores, ProbeCohorts):
        return _by_probe(fitted, transform, kind, scores, rows, probe_cohort_scores, classes)
    one = np.ones((scores.size, 1), dtype=bool)
    d = distances_of(transform, kind, scores[:, None], one, "the attempts' scores")[:, 0]
    values = usable = None
    if fitted.reads_probe:
        values, usable = _probe_rows(transform, kind, probe_cohort_scores, scores.size, "probe_cohort_scores")
    elif probe_cohort_scores is not None:
        raise CalibrationError(f"normaliser {fitted.plugin} reads no probe cohort scores; leave out probe_cohort_scores")
    try:
        if values is not None:  # first: a rescaled cohort is named as such, not as the spreads it lost
            fitted.check_cohort("probe", values, usable, "probe_cohort_scores")
        return fitted.normalise(d, rows, values, usable, what="probe_cohort_scores")
    except DataError as exc:
        raise CalibrationError(str(exc)) from None


def probe_distances(transform: Transform, kind: str, cohorts: ProbeCohorts, what: str) -> tuple[np.ndarray, np.ndarray]:
    """(distances, usable) of a :class:`ProbeCohorts`' rows, through the fitted transform (kept with them for the
    next call with the same transform: the command line checks the rows, then decides on them)."""
    key = (id(transform), kind)
    kept = getattr(cohorts, "_distances", None)
    if kept is None or kept[0] != key or kept[1] is not transform:
        usable = cohorts.usable()
        kept = (key, transform, distances_of(transform, kind, np.where(usable, cohorts.scores, 0.0), usable, what), usable)
        cohorts._distances = kept
    return kept[2], kept[3]


def _by_probe(fitted: FittedNormalization, transform: Transform, kind: str, scores: np.ndarray, rows: np.ndarray,
              cohorts: ProbeCohorts, classes: Any) -> np.ndarray:
    """:func:`normalised_distances` from each probe's row once: the rows through the transform and checked
    against the fitted cohort once, then the attempts a block at a time (their probe statistics with the
    claimed class left out, computed from the row: O(1) per attempt for the built-ins)."""
    what = "probe_cohort_scores"
    if not fitted.reads_probe:
        raise CalibrationError(f"normaliser {fitted.plugin} reads no probe cohort scores; leave out probe_cohort_scores")
    if cohorts.probes.size != scores.size:
        raise CalibrationError(f"{what} names a probe row for {cohorts.probes.size} attempt(s), but {scores.size} "
                               "attempt(s) are decided; give one probe row per attempt")
    try:
        values, usable = probe_distances(transform, kind, cohorts, what)
        left = cohorts.left_out(fitted.classes if classes is None else classes, rows)
        checked = getattr(cohorts, "_checked", None)  # by check_cohort_file, for these very attempts
        if checked is None or checked[0] is not fitted or not np.array_equal(checked[1], left):
            fitted.check_cohort("probe", values, usable, what, cohorts.probes, left)
        out = np.empty(scores.size)
        for start in range(0, scores.size, BLOCK):
            part = slice(start, start + BLOCK)
            s = scores[part]
            d = distances_of(transform, kind, s[:, None], np.ones((s.size, 1), dtype=bool), "the attempts' scores")[:, 0]
            out[part] = fitted.normalise(d, rows[part], values, usable, what=what, probe_rows=cohorts.probes[part],
                                         left_out=left[part], describe=cohorts.describe(what))
        return out
    except DataError as exc:
        raise CalibrationError(str(exc)) from None


def check_cohort_file(fitted: FittedNormalization, transform: Transform, kind: str, cohorts: ProbeCohorts,
                      claimed: Any, what: str) -> None:
    """A cohort file given on the command line (``what`` names it), read as :class:`ProbeCohorts` for attempts
    claiming ``claimed`` (one class name per attempt), checked against the cohort the normalisation was
    fitted with: its members by name, and each attempt's row as ``accept`` checks them (under the file's
    name). A calibration saved before the cohort was recorded is not checked here (``accept`` warns)."""
    if fitted.cohort is None or not fitted.reads_probe:
        return
    fitted.check_members("probe", cohorts.models.tolist(), what)
    values, usable = probe_distances(transform, kind, cohorts, what)
    left = cohorts.left_out(claimed)
    fitted.check_cohort("probe", values, usable, what, cohorts.probes, left)
    cohorts._checked = (fitted, left)  # accept does not check the same attempts again


def enrolled_inputs(fitted: FittedNormalization, transform: Transform, kind: str, cls: str, impostor_scores: np.ndarray,
                    cohort_scores: Any, impostor_cohort_scores: Any) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """(normalised training impostor distances of a new class, its enrolled-side statistics): what
    ``Calibration.enroll`` gives the estimator and adds to the saved normalisation. Without
    ``cohort_scores``, a calibration whose enrolled cohort was the training impostors uses the class's impostor
    scores as its cohort, each leaving itself out (as the run does)."""
    normalizer = fitted.normalizer
    one = np.ones((1, impostor_scores.size), dtype=bool)
    d = distances_of(transform, kind, impostor_scores[None, :], one, f"impostor scores of class {cls!r}")[0]
    stats: dict[str, np.ndarray] = {}
    enrolled = None
    if "enrolled" in fitted.sides:
        if cohort_scores is None and fitted.enrolled_cohort != "training impostors":
            raise CalibrationError(f"class {cls!r}: this calibration's enrolled side came from a cohort file; pass "
                                   "cohort_scores=... (the class's scores against that cohort)")
        leave_out = cohort_scores is None
        cohort = d if leave_out else _cohort_row(transform, kind, cohort_scores, cls)
        usable = np.ones((1, cohort.size), dtype=bool)
        if not leave_out and fitted.enrolled_cohort == "cohort file":
            _checked(fitted, "enrolled", cohort[None, :], usable, f"class {cls!r}: cohort_scores")
        stats = attempt_statistics(normalizer, cohort[None, :], usable, np.zeros(1, np.int64),
                                   describe=lambda r: f"class {cls!r}")
        enrolled = (attempt_statistics(normalizer, cohort[None, :], usable, np.zeros(d.size, np.int64),
                                       np.arange(d.size), describe=lambda r: f"class {cls!r}") if leave_out
                    else {k: np.repeat(v, d.size) for k, v in stats.items()})
    probe = None
    if fitted.reads_probe:
        values, usable = _probe_rows(transform, kind, impostor_cohort_scores, d.size, "impostor_cohort_scores")
        _checked(fitted, "probe", values, usable, "impostor_cohort_scores")
        probe = attempt_statistics(normalizer, values, usable, np.arange(d.size),
                                   describe=lambda r: f"impostor_cohort_scores: impostor score {r + 1}'s probe")
    z = normalizer.normalize(d, enrolled, probe)
    if not np.all(np.isfinite(z)):
        raise CalibrationError(f"class {cls!r}: normalising its impostor scores gave non-finite values (a cohort "
                               "whose scores are all equal); give cohort scores that differ")
    return to_distance(z), stats


def _checked(fitted: FittedNormalization, side: str, values: np.ndarray, usable: np.ndarray, what: str) -> None:
    """FittedNormalization.check_cohort, its refusal as a CalibrationError."""
    try:
        fitted.check_cohort(side, values, usable, what)
    except DataError as exc:
        raise CalibrationError(str(exc)) from None


def _cohort_row(transform: Transform, kind: str, scores: Any, cls: str) -> np.ndarray:
    try:
        values = np.asarray(scores, dtype=np.float64).ravel()
    except (TypeError, ValueError):
        raise CalibrationError(f"class {cls!r}: cohort_scores must be numbers") from None
    if values.size == 0 or not np.all(np.isfinite(values)):
        raise CalibrationError(f"class {cls!r}: cohort_scores must be a non-empty list of finite numbers")
    return distances_of(transform, kind, values[None, :], np.ones((1, values.size), bool), f"cohort scores of {cls!r}")[0]
