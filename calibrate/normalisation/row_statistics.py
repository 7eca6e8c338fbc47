"""The normaliser's statistics of each attempt's cohort row, and the map from a normalised score to a distance.

Shared by the run (calibrate.normalisation.stage, calibrate.normalisation.cohort) and by a saved calibration's
``accept``/``enroll`` (calibrate.normalisation.fitted, calibrate.normalisation.decisions), so that both compute
the same numbers by the same path:

* :func:`attempt_statistics`: for each attempt, its cohort row with at most one member left out (the
  claimed class on the probe side; the attempt's own probe when the training impostors are the enrolled
  side's cohort). A normaliser with a fast path (``Normalizer._statistics_left_out``, the built-ins) gets
  whole rows with their attempts, a block at a time; any other gets each row sorted and handed to
  ``_statistics`` in dense blocks of rows of equal length. Either way an attempt's statistics depend on
  its cohort's values only (the built-ins': exact, then rounded), whether they come from a run's matrix,
  a probe's row given once (calibrate.normalisation.cohort.ProbeCohorts) or one row per attempt given to
  ``Calibration.accept``: the decisions agree bit for bit.
* :func:`statistics_problem` and :func:`statistics_refusal`: statistics that cannot normalise (not finite, no
  spread), and how a refusal says so; :func:`ragged_rows`: rows of different lengths as one padded array.
* :func:`to_distance`: the fixed monotone map from z to the distance the estimators fit, exp(z); :func:`to_z`
  its inverse.

Cost: with a fast path O(cohort values + attempts) time (the built-ins: some 200 floating-point operations
a value), in blocks of :data:`BLOCK_VALUES` values of memory; without, O(attempts x cohort size), each row
sorted once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from calibrate.contract.base import Normalizer, overrides, progress_name
from calibrate.errors import DataError

#: cohort distances gathered per block of attempts (a few float64 arrays of this many values at once)
BLOCK_VALUES = 1 << 18
#: z beyond this is clipped before exp(z), so that the distance stays finite (exp(700) ~ 1e304)
Z_LIMIT = 700.0
#: a spread at most this share of its row's level is none (see :func:`statistics_problem`)
SPREAD_FLOOR = 1e-9


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
                       describe: Callable[[int], str] | None = None) -> dict[str, np.ndarray]:
    """The normaliser's statistics for each attempt a: of cohort row ``rows[a]`` (of ``values``, where
    ``usable``), without member ``left_out[a]`` (-1, or an unusable member: none left out).

    A normaliser with a fast path (``Normalizer._statistics_left_out``, the built-ins) gets the rows as they
    are, a block of whole rows at a time with their attempts: O(row) per row and O(1) per attempt. Otherwise
    each row is sorted once and each distinct (row, member left out) reduced by ``_statistics``:
    O(attempts x cohort size). ``describe(row)`` names a row in errors (e.g. "cohort-tnorm: probe 'p1'
    (c1)"): a row with fewer than ``normalizer.min_members()`` usable distances (besides the one left out),
    or whose statistics cannot normalise (:func:`statistics_problem`), is a DataError."""
    values = np.asarray(values, dtype=np.float64)
    rows = np.asarray(rows)
    rows = rows if rows.dtype in (np.int32, np.int64) else rows.astype(np.int64)  # int32: half the memory
    left = np.full(rows.shape, -1, np.int32) if left_out is None else np.asarray(left_out)
    left = left if left.dtype in (np.int32, np.int64) else left.astype(np.int64)
    subject = describe or (lambda r: f"cohort row {r}")
    if overrides(normalizer, Normalizer, "_statistics_left_out"):
        return _left_out_statistics(normalizer, values, np.asarray(usable, dtype=bool), rows, left, subject)
    usable = np.asarray(usable, dtype=bool) & np.isfinite(values)
    rows, left = rows.astype(np.int64), left.astype(np.int64)  # row x (members + 1) below: no int32 overflow
    counts = usable.sum(axis=1)
    safe = np.where(left >= 0, left, 0)
    removed = (left >= 0) & usable[rows, safe] if rows.size else np.zeros(0, bool)
    _refuse_short(normalizer, counts[rows] - removed, rows, subject)
    n_members = values.shape[1]
    ordered, _, rank = _sorted_rows(values, usable)
    position = np.where(removed, rank[rows, safe] if rows.size else 0, n_members)  # n_members: none removed
    uniq, inverse = np.unique(rows * (n_members + 1) + position, return_inverse=True)
    u_rows, u_pos = uniq // (n_members + 1), uniq % (n_members + 1)
    u_count = counts[u_rows] - (u_pos < n_members)
    name = progress_name(normalizer)
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
                raise DataError(f"{name}: _statistics returned the statistics {sorted(stats)} for "
                                f"some rows and {sorted(out)} for others; return the same names for every row")
            problem = statistics_problem(normalizer, stats, _smallest_magnitude(block))
            if problem is not None:
                raise DataError(f"{subject(int(u_rows[part[problem[0]]]))} {statistics_refusal(normalizer, problem)}")
            for stat, v in stats.items():
                out.setdefault(stat, np.empty(uniq.size))[part] = v
    if not out:  # no attempts: the names are unknown, and nothing reads them
        return {}
    return {stat: v[inverse] for stat, v in out.items()}


def _row_runs(rows: np.ndarray, n_rows: int) -> tuple[list[tuple[int, int]], np.ndarray | None]:
    """(runs of ascending rows, as (start, stop), or none; a stable sort of the attempts by row, or None).
    A matrix's training then evaluation entries are two runs, each block of rows then a slice of each; more
    than 8 runs are sorted (radix for fewer than 65,536 rows)."""
    breaks = np.flatnonzero(rows[1:] < rows[:-1]) + 1 if rows.size > 1 else np.zeros(0, np.int64)
    if breaks.size > 7:
        return [], np.argsort(rows.astype(np.min_scalar_type(max(n_rows - 1, 0))), kind="stable")
    edges = [0, *breaks.tolist(), rows.size]
    return list(zip(edges[:-1], edges[1:])), None


def _refuse_short(normalizer: Normalizer, kept: np.ndarray, rows: np.ndarray, subject: Callable[[int], str]) -> None:
    """A DataError naming the first attempt's row that keeps fewer than ``min_members()`` cohort distances."""
    need = int(normalizer.min_members())
    short = np.flatnonzero(kept < need)
    if short.size:
        a = int(short[0])
        raise DataError(f"{subject(int(rows[a]))} has {int(kept[a])} usable cohort distance(s); {progress_name(normalizer)} "
                        f"needs at least {need}: give a larger cohort, or a normaliser setting that needs fewer (e.g. a "
                        "smaller top_k)")


def _left_out_statistics(normalizer: Normalizer, values: np.ndarray, usable: np.ndarray, rows: np.ndarray,
                         left: np.ndarray, subject: Callable[[int], str]) -> dict[str, np.ndarray]:
    """:func:`attempt_statistics` through the normaliser's ``statistics_left_out``: the attempts grouped by
    row, blocks of whole rows (at most :data:`BLOCK_VALUES` values, copied contiguous) with their attempts,
    each block's usable members (finite), members left out and counts worked out on the block alone."""
    name = progress_name(normalizer)
    n_rows = values.shape[0]
    runs, order = _row_runs(rows, n_rows)
    if order is not None:  # many runs: the sorted attempts, each row's from where its first one begins
        begins = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=n_rows))])
    per = max(1, BLOCK_VALUES // max(values.shape[1], 1))
    out = {}
    for r0 in range(0, n_rows, per):
        if order is not None:
            parts = [order[begins[r0]:begins[min(r0 + per, n_rows)]]]
        else:  # each run's slice of this block's rows (sought as the rows' own type: no copy of the run)
            bounds = np.array([r0, r0 + per], dtype=rows.dtype)
            parts = [slice(*(a + np.searchsorted(rows[a:b], bounds)).tolist()) for a, b in runs]
        sizes = [p.size if order is not None else p.stop - p.start for p in parts]
        if not sum(sizes):
            continue
        block = np.ascontiguousarray(values[r0:r0 + per])
        mask = np.ascontiguousarray(usable[r0:r0 + per]) & np.isfinite(block)
        local = np.concatenate([rows[p] for p in parts]) - r0
        gone = np.concatenate([left[p] for p in parts])
        gone = np.where((gone >= 0) & mask[local, np.maximum(gone, 0)], gone, -1)
        _refuse_short(normalizer, mask.sum(axis=1)[local] - (gone >= 0), local + r0, subject)
        stats = normalizer.statistics_left_out(block, mask, local, gone)
        if out and set(stats) != set(out):
            raise DataError(f"{name}: _statistics_left_out returned the statistics {sorted(stats)} for some rows "
                            f"and {sorted(out)} for others; return the same names for every row")
        problem = _left_out_problem(normalizer, stats, block, mask, local, gone)
        if problem is not None:
            raise DataError(f"{subject(int(local[problem[0]]) + r0)} {statistics_refusal(normalizer, problem)}")
        at = np.cumsum([0, *sizes])
        for stat, v in stats.items():
            if stat not in out:
                out[stat] = np.empty(rows.size)
            for k, p in enumerate(parts):
                out[stat][p] = v[at[k]:at[k + 1]]
    return out


def _left_out_problem(normalizer: Normalizer, stats: Mapping[str, np.ndarray], block: np.ndarray, mask: np.ndarray,
                      rows: np.ndarray, left: np.ndarray) -> tuple[int, str, float, str] | None:
    """:func:`statistics_problem` of attempts reading ``block``'s rows (``mask``) less the member left out. Each
    row's smallest |distance| only raises the level a spread is held against, so it is found (a partial sort)
    only for the attempts whose spreads the row's largest |distance| as the level would not clear."""
    problem = statistics_problem(normalizer, stats)
    if problem is not None:
        return problem
    spreads = [s for s in getattr(normalizer, "spreads", ()) if s in stats]
    if not spreads:
        return None
    largest = np.where(mask, np.abs(block), 0.0).max(axis=1, initial=0.0)[rows]
    doubt = np.flatnonzero(np.logical_or.reduce([~(stats[s] > SPREAD_FLOOR * largest) for s in spreads]))
    if not doubt.size:
        return None
    found = statistics_problem(normalizer, {k: v[doubt] for k, v in stats.items()},
                               _smallest_left_out(block, mask, rows[doubt], left[doubt]))
    return None if found is None else (int(doubt[found[0]]), *found[1:])


def _smallest_left_out(block: np.ndarray, mask: np.ndarray, rows: np.ndarray, left: np.ndarray) -> np.ndarray:
    """Per attempt, the smallest |value| of its row's usable values without the one left out (0 where they
    span 0): :func:`_smallest_magnitude` of the row the attempt reads."""
    def two_lowest(keyed: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        pair = np.partition(keyed, 1, axis=1)[:, :2] if keyed.shape[1] > 1 else \
            np.concatenate([keyed, np.full_like(keyed, np.inf)], axis=1)
        return pair[:, 0], np.argmin(keyed, axis=1), pair[:, 1]

    keyed = np.where(mask, block, np.inf)
    lo, lo_at, lo_next = two_lowest(keyed)
    low = np.where(left == lo_at[rows], lo_next[rows], lo[rows])
    if not (lo < 0).any():  # distances: no row spans 0, its smallest |value| is its smallest value
        return low
    hi, hi_at, hi_next = two_lowest(np.where(mask, -block, np.inf))
    high = -np.where(left == hi_at[rows], hi_next[rows], hi[rows])
    return np.where(low >= 0, low, np.where(high <= 0, -high, 0.0))


def _smallest_magnitude(block: np.ndarray) -> np.ndarray:
    """Per row of ascending values, the smallest |value| (0 where the row spans 0)."""
    first, last = block[:, 0], block[:, -1]
    return np.where(first >= 0, first, np.where(last <= 0, -last, 0.0))


def statistics_problem(normalizer: Normalizer, stats: Mapping[str, np.ndarray],
                       smallest: np.ndarray | float = 0.0) -> tuple[int, str, float, str] | None:
    """(the first row whose statistics cannot normalise, the statistic, its value, why), or None.

    Every statistic must be finite. A spread (``normalizer.spreads``, those among ``stats``) must exceed
    :data:`SPREAD_FLOOR` times the row's level: the largest of ``smallest`` (the row's smallest |distance|,
    where the rows are at hand) and the row's other statistics' magnitudes (its location, for the
    built-ins). A cohort whose distances are all equal has a spread of 0, or of a rounding residue some
    1e-16 to 1e-14 of the level (the mean of n equal values is not always that value): both are refused,
    while the coarsest spread a score file or a float32 matcher can carry (a step in the 8th digit) is 10x
    above the floor. There, z's own rounding error ((d - mean) / spread) stays below 1e-6."""
    for stat, v in stats.items():
        bad = np.flatnonzero(~np.isfinite(v))
        if bad.size:
            return int(bad[0]), stat, float(v[bad[0]]), "not finite"
    spreads = [s for s in getattr(normalizer, "spreads", ()) if s in stats]
    if not spreads:
        return None
    level = np.broadcast_to(np.asarray(smallest, dtype=np.float64), np.shape(stats[spreads[0]]))
    for stat, v in stats.items():
        if stat not in spreads:
            level = np.maximum(level, np.abs(v))
    for stat in spreads:
        v = stats[stat]
        bad = np.flatnonzero(~(v > SPREAD_FLOOR * level))
        if bad.size:
            i = int(bad[0])
            value = float(v[i])
            return i, stat, value, ("negative" if value < 0 else "0" if value == 0 else
                                    f"at most {SPREAD_FLOOR:g} x {float(level[i]):.4g}: rounding, not spread")
    return None


def statistics_refusal(normalizer: Normalizer, problem: tuple[int, str, float, str]) -> str:
    """A :func:`statistics_problem` of a cohort row, worded after the row's name, with the fix."""
    _, stat, value, why = problem
    name = progress_name(normalizer)
    if why == "not finite":
        return (f"has cohort distances whose {stat} is {value} (not finite): scores of this size overflow {name}'s "
                "statistics; rescale the scores")
    return (f"has cohort distances without spread ({stat} {value:.4g}, {why}); {name} divides by it: give cohort "
            "scores that differ (fix or remove cohort lines that are all equal), or a larger cohort (or top_k)")


def normalising_refusal(normalizer: Normalizer, z: float, distance: float, enrolled: Mapping[str, Any] | None,
                        probe: Mapping[str, Any] | None) -> str:
    """Why one attempt's z is not finite, for a refusal naming the attempt: what was observed (z, its distance, its
    sides' statistics) and the likely causes. Its statistics passed :func:`statistics_problem` (finite, the spreads
    it declares above the floor), so a cohort without spread is the cause only through a spread left undeclared."""
    shown = "; ".join(f"{side} statistics " + ", ".join(f"{k} {float(v):.4g}" for k, v in stats.items())
                      for side, stats in (("class", enrolled), ("probe", probe)) if stats is not None)
    checked = sorted({s for s in getattr(normalizer, "spreads", ()) for stats in (enrolled, probe) if stats and s in stats})
    return (f"gave {z} from distance {distance:.6g} ({shown}): the statistics are finite"
            + (f" and the spreads it declares ({', '.join(checked)}) passed the core's check, so this is not a cohort "
               "without spread" if checked else " (it declares none of them a spread, so none was checked)")
            + f"; {progress_name(normalizer)}'s _normalize gives no number for these values: it divides by a statistic "
            "that is 0 here and not named in its `spreads`, or computes something undefined here (a log or root of a "
            "negative, 0/0, inf - inf, an overflow)")


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
