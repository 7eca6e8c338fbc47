"""Cohort statistics per attempt, and the fitted normalisation a calibration saves and applies.

The normaliser stage (calibrate.contract.base.Normalizer) turns each attempt's distance d into a normalised
score z from two cohort sides (calibrate.contract.types.CohortScores): its class's distances to an impostor
cohort (enrolled side) and its probe's distances to a cohort (probe side). Everything here is shared
by the run (calibrate.normalisation.stage) and by a saved calibration's ``accept``/``enroll``, so that both
compute the same numbers by the same path:

* :func:`attempt_statistics`: for each attempt, its cohort row with at most one member left out (the
  claimed class on the probe side; the attempt's own probe when the training impostors are the enrolled
  side's cohort). A normaliser with a fast path (``Normalizer._statistics_left_out``, the built-ins) gets
  whole rows with their attempts, a block at a time; any other gets each row sorted and handed to
  ``_statistics`` in dense blocks of rows of equal length. Either way an attempt's statistics depend on
  its cohort's values only (the built-ins': exact, then rounded), whether they come from a run's matrix,
  a probe's row given once (:class:`ProbeCohorts`) or one row per attempt given to
  ``Calibration.accept``: the decisions agree bit for bit.
* :func:`to_distance`: the fixed monotone map from z to the distance the estimators fit, exp(z).
* :class:`FittedNormalization`: the normaliser with every enrolled class's statistics (what a
  calibration saves), applied to new attempts given their probes' cohort distances.
* :func:`matrix_cohorts` (the rest of the gallery as the cohort of a training and an evaluation
  matrix; calibrate.normalisation.stage says how) and :func:`normalise_matrix` (every valid entry of a matrix
  normalised): what the run does to a fold, and what the conformance kit checks normalisers with.

Cost: with a fast path O(cohort values + attempts) time (the built-ins: some 200 floating-point operations
a value), in blocks of :data:`BLOCK_VALUES` values of memory; without, O(attempts x cohort size), each row
sorted once.
"""

from __future__ import annotations

import hashlib
import json
import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from calibrate.contract.base import Normalizer, overrides, progress_name
from calibrate.errors import DataError
from calibrate.contract.types import CohortScores, DistanceMatrix

#: cohort distances gathered per block of attempts (a few float64 arrays of this many values at once)
BLOCK_VALUES = 1 << 18
#: z beyond this is clipped before exp(z), so that the distance stays finite (exp(700) ~ 1e304)
Z_LIMIT = 700.0
#: a spread at most this share of its row's level is none (see :func:`statistics_problem`)
SPREAD_FLOOR = 1e-9
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


# ---- what a normalisation was fitted with: each cohort side's record, and cohorts given later checked ------

#: a cohort row given later may have this share fewer scores than the fewest a fitted row had (failed
#: comparisons), besides the claimed class left out
FEWER_MEMBERS = 0.1
#: a given cohort's typical row spread may be this factor below the smallest or above the largest fitted one
SPREAD_FACTOR = 2.0


def row_moments(values: np.ndarray, usable: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(count, mean, population std) of each row's usable values (NaN mean and std for an empty row). Each
    row is first brought near 1 by a power of two (exact), so that distances near 1e300 do not overflow."""
    values = np.asarray(values, dtype=np.float64)
    usable = np.asarray(usable, dtype=bool)
    count = usable.sum(axis=1)
    mean, std = np.full(count.shape, np.nan), np.full(count.shape, np.nan)
    step = max(1, BLOCK_VALUES // max(values.shape[1], 1))
    for start in range(0, values.shape[0], step):
        u = usable[start:start + step]
        x = np.where(u, values[start:start + step], 0.0)
        e = np.frexp(np.abs(x).max(axis=1, initial=0.0))[1]
        x = np.ldexp(x, -e[:, None])
        n = np.maximum(count[start:start + step], 1)
        m = x.sum(axis=1) / n
        v = np.where(u, (x - m[:, None]) ** 2, 0.0).sum(axis=1) / n
        ok = count[start:start + step] > 0
        mean[start:start + step] = np.where(ok, np.ldexp(m, e), np.nan)
        std[start:start + step] = np.where(ok, np.ldexp(np.sqrt(v), e), np.nan)
    return count, mean, std


def row_moments_left_out(values: np.ndarray, usable: np.ndarray, rows: np.ndarray,
                         left_out: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`row_moments` of each attempt's row (``rows``) without its member ``left_out`` (-1, or an unusable
    one: none), from the rows' own moments: removing x from n values of mean m and std s leaves the mean
    m - t s / (n - 1) and the std s sqrt(n / (n - 1) (1 - t**2 / (n - 1))), t = (x - m) / s (no overflow)."""
    values = np.asarray(values, dtype=np.float64)
    usable = np.asarray(usable, dtype=bool)
    count, mean, std = row_moments(values, usable)
    safe = np.where(left_out >= 0, left_out, 0)
    gone = (left_out >= 0) & usable[rows, safe]
    n, m, sd = count[rows], mean[rows], std[rows]
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(gone & (sd > 0), (values[rows, safe] - m) / sd, 0.0)
        rest = np.maximum(n - 1, 1)
        kept_mean = np.where(gone, m - t * sd / rest, m)
        kept_std = np.where(gone, sd * np.sqrt(np.maximum(n / rest * (1 - t * t / rest), 0.0)), sd)
    kept = n - gone
    return kept, np.where(kept > 0, kept_mean, np.nan), np.where(kept > 0, kept_std, np.nan)


def names_digest(names: Sequence[str]) -> str:
    """The SHA-256 of a cohort's member names, in no particular order."""
    return hashlib.sha256(json.dumps(sorted({str(n) for n in names})).encode("utf-8")).hexdigest()


def side_record(values: np.ndarray, usable: np.ndarray, names: Sequence[str]) -> dict[str, Any]:
    """What a cohort side was fitted with, from its rows (one per class or probe, distances where ``usable``)
    and its members' ``names``: how many members, a digest of their names, and how its non-empty rows
    looked (their lengths; the smallest, median and largest row mean and row spread)."""
    count, mean, std = row_moments(values, usable)
    kept = count >= 1
    if not kept.any():
        raise DataError("every cohort row is empty; a normaliser needs cohort distances")
    count, mean, std = count[kept], mean[kept], std[kept]
    return {"members": len(names), "names_sha256": names_digest(names), "rows": int(kept.sum()),
            "lengths": [int(count.min()), int(count.max())],
            "means": [float(np.min(mean)), float(np.median(mean)), float(np.max(mean))],
            "spreads": [float(np.min(std)), float(np.median(std)), float(np.max(std))]}


def members_mismatch(record: Mapping[str, Any], names: Sequence[str], what: str) -> str | None:
    """Why the members a cohort file names are not those of the cohort ``record`` describes (another count,
    or other names), or None."""
    members = int(record["members"])
    given = sorted({str(n) for n in names})
    if len(given) != members:
        return (f"{what} names {len(given)} cohort member(s), but the calibration was fitted with a cohort of "
                f"{members}: give the cohort it was fitted with")
    if names_digest(given) != record["names_sha256"]:
        return (f"{what} names {members} cohort members, but not those the calibration was fitted with (their "
                "names differ): give the cohort it was fitted with")
    return None


def rows_mismatch(record: Mapping[str, Any], values: np.ndarray, usable: np.ndarray, what: str,
                  rows: np.ndarray | None = None, left_out: np.ndarray | None = None) -> str | None:
    """Why cohort rows given later (distances where ``usable``; one per attempt, the claimed class left out;
    or, with ``rows`` and ``left_out``, one per probe, attempt a reading row ``rows[a]`` without column
    ``left_out[a]``) are not from the cohort ``record`` describes, or None. Either way each attempt's row
    is judged, as below.

    * A row's length must lie between the fewest a fitted row had, less one (the claimed class) and less
      :data:`FEWER_MEMBERS` of them (failed comparisons), and the most a fitted row had. A 2-member cohort
      is refused here.
    * The median of the rows' means must lie within the fitted rows' means widened by their whole range
      on each side (at least by the median fitted row spread): one probe's row is within the fitted range
      unless it is more extreme than every fitted probe. A negated or rescaled cohort moves far beyond.
    * The median of the rows' spreads must lie within the fitted rows' spreads, widened by
      :data:`SPREAD_FACTOR` either way.
    * Then each row alike, so that one probe's rows unlike the cohort (its lines negated, rescaled or
      shifted: all its attempts accepted) are not hidden by the others' median."""
    members = int(record["members"])
    lo, hi = (int(v) for v in record["lengths"])
    fewest = max(1, min(lo - 1, math.floor((1 - FEWER_MEMBERS) * lo)))
    count, mean, std = (row_moments(values, usable) if rows is None else
                        row_moments_left_out(values, usable, rows, left_out))
    off = np.flatnonzero((count < fewest) | (count > hi))
    if off.size:
        a = int(off[0])
        return (f"{what}: attempt {a + 1} gives {int(count[a])} cohort score(s), but the cohort the calibration was "
                f"fitted with ({members} members) gave each row {lo}-{hi} (so {fewest}-{hi} here, the claimed class "
                "left out): give each probe's scores against that cohort")
    kept = count >= 1
    if not kept.any():
        return None
    m_lo, _, m_hi = (float(v) for v in record["means"])
    s_lo, s_mid, s_hi = (float(v) for v in record["spreads"])
    widen = max(m_hi - m_lo, s_mid)
    typical_mean, typical_spread = float(np.median(mean[kept])), float(np.median(std[kept]))
    if not m_lo - widen <= typical_mean <= m_hi + widen:
        return (f"{what}: the cohort distances given are not like those the calibration was fitted with (their rows' "
                f"median mean is {typical_mean:.4g}; the fitted rows' means were {m_lo:.4g} to {m_hi:.4g}): give the "
                "probes' scores against the same cohort, on the same scale and in the same direction")
    if not s_lo / SPREAD_FACTOR <= typical_spread <= s_hi * SPREAD_FACTOR:
        return (f"{what}: the cohort distances given do not spread like those the calibration was fitted with "
                f"(their rows' median spread is {typical_spread:.4g}; the fitted rows' spreads were {s_lo:.4g} to "
                f"{s_hi:.4g}): give the probes' scores against the same cohort, on the same scale")
    far = kept & ~((m_lo - widen <= mean) & (mean <= m_hi + widen)
                   & (s_lo / SPREAD_FACTOR <= std) & (std <= s_hi * SPREAD_FACTOR))
    if far.any():
        a = int(np.flatnonzero(far)[0])
        return (f"{what}: attempt {a + 1}'s cohort distances are not like those the calibration was fitted with (their "
                f"mean is {mean[a]:.4g} and spread {std[a]:.4g}; the fitted rows' means were {m_lo:.4g} to {m_hi:.4g}, "
                f"their spreads {s_lo:.4g} to {s_hi:.4g}): give that probe's scores against the same cohort, on the "
                "same scale and in the same direction")
    return None


#: a share of the given rows beyond one end of the fitted rows' means (or spreads) above this is noted, from
#: :data:`DRIFT_ROWS` rows on: by chance one row in (fitted rows + 1) lies beyond each end
DRIFT_SHARE = 0.25
DRIFT_ROWS = 8


def rows_drift(record: Mapping[str, Any], values: np.ndarray, usable: np.ndarray) -> str | None:
    """A note when many cohort rows given later lie beyond the fitted rows' means or spreads, each within
    :func:`rows_mismatch`'s wider bounds: a cohort shifted or squeezed as a whole (by less than the fitted rows'
    range, 0.15 on the tests' lists gave a 24% FPR at a 5% target). Not an error: probes from other conditions
    move their cohort rows too, and T-norm removes a shift that the attempts' scores share."""
    count, mean, std = row_moments(values, usable)
    kept = count >= 1
    n = int(kept.sum())
    if n < DRIFT_ROWS:
        return None
    for name, v, (low, _, high) in (("mean", mean[kept], record["means"]), ("spread", std[kept], record["spreads"])):
        for side, share, bound in (("below the smallest", float(np.mean(v < low)), low),
                                   ("above the largest", float(np.mean(v > high)), high)):
            if share > DRIFT_SHARE:
                return (f"{100 * share:.0f}% of the {n:,} attempts' cohort rows given have a {name} {side} of the "
                        f"{int(record['rows']):,} rows the calibration was fitted with ({bound:.4g}), where about "
                        f"{100 / (int(record['rows']) + 1):.2g}% would by chance: unless the probes come from other "
                        "conditions that shift their attempts' scores alike, the cohort scores are not those the "
                        "calibration was fitted with (another cohort, matcher or scale) and the decisions are off "
                        "target; give the probes' scores against the cohort it was fitted with")
    return None


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


@dataclass
class FittedNormalization:
    """A normaliser with the enrolled side's statistics of every class: what a calibration saves.

    ``statistics[name][i]`` belongs to ``classes[i]`` (empty when the normaliser reads no enrolled side);
    ``enrolled_cohort`` says where the enrolled side's cohort came from (:data:`ENROLLED_COHORTS`);
    ``cohort``: per side read, what that side's cohort was at the fit (:func:`side_record`), against which
    cohorts given later are checked (None: saved before it was recorded).
    """

    normalizer: Normalizer
    plugin: str
    params: dict[str, Any]
    classes: tuple[str, ...]
    statistics: dict[str, np.ndarray] = field(default_factory=dict)
    enrolled_cohort: str = "training impostors"
    cohort: dict[str, dict[str, Any]] | None = None

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
                  probe_usable: np.ndarray | None = None, what: str = "the attempts", probe_rows: np.ndarray | None = None,
                  left_out: np.ndarray | None = None, describe: Callable[[int], str] | None = None) -> np.ndarray:
        """Normalised distances exp(z) of attempts on the classes at ``rows``, each with its probe's
        cohort distances: row a of ``probe_values`` where ``probe_usable``, or with ``probe_rows``, row
        ``probe_rows[a]`` without column ``left_out[a]`` (-1: none) (none of them when no probe side)."""
        d = np.asarray(distances, dtype=np.float64)
        probe = None
        if self.reads_probe:
            probe = attempt_statistics(self.normalizer, probe_values, probe_usable,
                                       np.arange(d.size) if probe_rows is None else probe_rows, left_out,
                                       describe=describe or (lambda r: f"{what}: attempt {r + 1}'s probe"))
        z = self.normalizer.normalize(d, self.class_statistics(rows), probe)
        bad = np.flatnonzero(~np.isfinite(z))
        if bad.size:
            a = int(bad[0])
            enrolled, at = self.class_statistics(rows), lambda stats: None if stats is None else {k: v[a] for k, v in
                                                                                                  stats.items()}
            raise DataError(f"{what}: normalising attempt {a + 1} " + normalising_refusal(
                self.normalizer, float(z[a]), float(d[a]), at(enrolled), at(probe)))
        return to_distance(z)

    def check_cohort(self, side: str, values: np.ndarray, usable: np.ndarray, what: str,
                     rows: np.ndarray | None = None, left_out: np.ndarray | None = None) -> None:
        """Cohort rows given for ``side`` (distances where ``usable``; per attempt, or per probe with ``rows`` and
        ``left_out``) checked against the cohort the normalisation was fitted with (:func:`rows_mismatch`):
        DataError on a mismatch; a warning on a drift (:func:`rows_drift`), and when the calibration holds no
        record of it (saved before it was recorded: decided as before, unchecked)."""
        if self.cohort is None:
            warnings.warn(f"{what}: this calibration was saved before calibrate recorded the cohort its normaliser "
                          "was fitted with, so the cohort given cannot be checked against it; run the recipe again "
                          "to record it", stacklevel=3)
            return
        if side not in self.cohort:
            return
        problem = rows_mismatch(self.cohort[side], values, usable, what, rows, left_out)
        if problem:
            raise DataError(problem)
        drift = rows_drift(self.cohort[side], values, usable)
        if drift:  # said without ``what``, so that the command line's two checks of one file give one note
            warnings.warn(drift, stacklevel=3)

    def check_members(self, side: str, names: Sequence[str], what: str) -> None:
        """The members a cohort file names for ``side`` checked against the fitted cohort's (:func:`members_mismatch`);
        nothing to check in a calibration saved before they were recorded (:meth:`check_cohort` says so)."""
        problem = None if self.cohort is None or side not in self.cohort else \
            members_mismatch(self.cohort[side], names, what)
        if problem:
            raise DataError(problem)

    def score_thresholds(self, tau: np.ndarray, transform: Any, kind: str) -> np.ndarray | None:
        """A normaliser reading the enrolled side only: each class's threshold in score units (its
        ``transform.score_thresholds`` of :meth:`distance_thresholds`; None without an inverse)."""
        d = self.distance_thresholds(tau)
        finite = np.isfinite(d)
        out = transform.score_thresholds(np.where(finite, d, 0.0), kind)
        if out is None:
            return None
        accept_none, accept_all = (np.inf, -np.inf) if kind == "similarity" else (-np.inf, np.inf)
        return np.where(finite, out, np.where(d < 0, accept_none, accept_all))

    def distance_thresholds(self, tau: np.ndarray) -> np.ndarray:
        """A normaliser reading the enrolled side only: per class, the largest distance (after the transform)
        that ``normalise`` accepts at the normalised threshold ``tau[class]`` (exp(z) <= tau), -inf when none
        is, inf when every one is. z depends on the distance and the class's saved statistics only and never
        decreases as the distance grows (the contract), so a distance is accepted exactly when it is at most
        this one: found by bisection over the floats' bit patterns (64 steps, every class at once)."""
        if self.reads_probe:
            raise DataError(f"normaliser {self.plugin} reads the probe's cohort scores: no threshold on the "
                            "distance alone exists")
        tau = np.asarray(tau, dtype=np.float64)
        stats = self.class_statistics(np.arange(len(self.classes)))

        def accepted(d: np.ndarray) -> np.ndarray:
            with np.errstate(all="ignore"):
                return to_distance(self.normalizer.normalize(d, stats, None)) <= tau

        top = np.finfo(np.float64).max
        lo = np.zeros(tau.shape, np.int64)  # the bits of 0.0: accepted where it is accepted at all
        hi = np.full(tau.shape, np.float64(top).view(np.int64))
        none, every = ~accepted(np.zeros(tau.shape)), accepted(np.full(tau.shape, top))
        for _ in range(64):
            mid = lo + (hi - lo) // 2
            ok = accepted(mid.view(np.float64))
            lo, hi = np.where(ok, mid, lo), np.where(ok, hi, mid)
        return np.where(none, -np.inf, np.where(every, np.inf, lo.view(np.float64)))

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
                                   self.enrolled_cohort, self.cohort)

    # ---- saved with a calibration ----------------------------------------------------------------

    def to_state(self) -> dict[str, Any]:
        state = {"plugin": self.plugin, "params": json.loads(json.dumps(self.params, default=str)),
                 "sides": list(self.sides), "enrolled_cohort": self.enrolled_cohort, "classes": list(self.classes),
                 "statistics": {k: v.tolist() for k, v in self.statistics.items()}}
        if self.cohort is not None:
            state["cohort"] = json.loads(json.dumps(self.cohort))
        return state

    @classmethod
    def from_state(cls, state: Mapping[str, Any], normalizer: Normalizer, where: str) -> "FittedNormalization":
        """Rebuilt from :meth:`to_state`, after calibrate.saved.json_format checked the structure; ``where`` names the
        file in errors."""
        sides = tuple(state["sides"])
        if sides != tuple(normalizer.sides):
            raise DataError(f"{where}: normalizer.sides is {list(sides)}, but normaliser {state['plugin']!r} reads "
                            f"{list(normalizer.sides)}; the file was written by another version of it: run again")
        stats = {k: np.asarray(v, dtype=np.float64) for k, v in state["statistics"].items()}
        if "enrolled" in sides and not stats:
            raise DataError(f"{where}: normalizer.statistics is empty, but {state['plugin']!r} reads the enrolled side")
        problem = statistics_problem(normalizer, stats)
        if problem is not None:
            i, stat, value, why = problem
            raise DataError(f"{where}: normalizer.statistics[{stat[:40]!r}] of class {str(state['classes'][i])[:60]!r} is "
                            f"{value:.4g} ({why}); the file is damaged: run the recipe again")
        cohort = state.get("cohort")
        if cohort is not None and set(cohort) != set(sides):
            raise DataError(f"{where}: normalizer.cohort describes the sides {sorted(cohort)}, but {state['plugin']!r} "
                            f"reads {list(sides)}; the file is damaged: run the recipe again")
        return cls(normalizer, state["plugin"], dict(state.get("params", {})), tuple(state["classes"]), stats,
                   state["enrolled_cohort"], None if cohort is None else {k: dict(v) for k, v in cohort.items()})


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
    cohort = state.get("cohort")
    if cohort is None:
        return
    if not isinstance(cohort, dict) or not cohort or not set(cohort) <= set(sides):
        raise bad("normalizer.cohort", "must map each cohort side read (enrolled, probe) to what it was fitted with")
    for side, record in cohort.items():
        _check_record(record, bad, f"normalizer.cohort.{side}")


def _check_record(record: Any, bad: Callable[[str, str], Exception], where: str) -> None:
    """The structure of one side's saved :func:`side_record` at ``where`` (untrusted input)."""
    def whole(v: Any) -> bool:
        return isinstance(v, int) and not isinstance(v, bool) and v >= 1

    def numbers(v: Any) -> bool:
        return (isinstance(v, list) and len(v) == 3 and all(isinstance(x, (int, float)) and not isinstance(x, bool)
                                                             and math.isfinite(x) for x in v) and v[0] <= v[1] <= v[2])

    if not isinstance(record, dict):
        raise bad(where, "must be a mapping")
    for key in ("members", "rows"):
        if not whole(record.get(key)):
            raise bad(f"{where}.{key}", "must be a positive whole number")
    digest = record.get("names_sha256")
    if not isinstance(digest, str) or len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
        raise bad(f"{where}.names_sha256", "must be 64 hexadecimal digits")
    lengths = record.get("lengths")
    if not isinstance(lengths, list) or len(lengths) != 2 or not all(whole(v) for v in lengths) \
            or not lengths[0] <= lengths[1]:
        raise bad(f"{where}.lengths", "must be the fewest and the most distances of a row, at least 1")
    for key in ("means", "spreads"):
        if not numbers(record.get(key)) or (key == "spreads" and record[key][0] < 0):
            raise bad(f"{where}.{key}", "must be three finite ascending numbers (smallest, median, largest)"
                      + (", not negative" if key == "spreads" else ""))


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
    enrolled = probe = None
    if "enrolled" in normalizer.sides:
        if cohort.leave_out:
            side = cohort.enrolled
            _aligned(side, matrix, "enrolled")
            columns = _columns_of(side, matrix.gallery_classes.tolist())
            enrolled = attempt_statistics(normalizer, side.values.T, side.impostor_mask().T, columns[cols], rows,
                                          describe=_describe_class(side))
        else:
            return _normalised(normalizer, matrix, rows, cols, classes,
                               _probe_side(normalizer, cohort.probes, [(matrix, rows, cols)])[0]
                               if "probe" in normalizer.sides else None, by_class=True)
    if "probe" in normalizer.sides:
        probe = _probe_side(normalizer, cohort.probes, [(matrix, rows, cols)])[0]
    return _normalised(normalizer, matrix, rows, cols, enrolled, probe)


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
