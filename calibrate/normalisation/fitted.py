"""The fitted normalisation a calibration saves and applies, and the record of the cohort it was fitted with.

* :class:`FittedNormalization`: the normaliser with every enrolled class's statistics (what a calibration
  saves), applied to new attempts given their probes' cohort distances; its saved state (``to_state``,
  ``from_state``) and :func:`check_state`, the structure of a saved one checked as untrusted input;
* :func:`side_record`: what each cohort side was fitted with (members, a digest of their names, how its
  rows looked), against which cohorts given later are checked: :func:`members_mismatch`,
  :func:`rows_mismatch` (refused) and :func:`rows_drift` (noted), from :func:`row_moments`.

Each attempt's statistics come from calibrate.normalisation.row_statistics; the names here are also
importable from calibrate.normalisation.cohort (public).
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

from calibrate.contract.base import Normalizer
from calibrate.errors import DataError
from calibrate.normalisation.row_statistics import (BLOCK_VALUES, attempt_statistics, normalising_refusal,
                                                    statistics_problem, to_distance)


#: where the enrolled side's cohort came from (saved with a calibration; ``enroll`` follows it)
ENROLLED_COHORTS = ("training impostors", "cohort file")


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


def row_moments_left_out(values: np.ndarray, usable: np.ndarray, rows: np.ndarray, left_out: np.ndarray, *,
                         moments: tuple | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`row_moments` of each attempt's row (``rows``) without its member ``left_out`` (-1, or an unusable
    one: none), from the rows' own moments (``moments``: :func:`row_moments` of these rows, when the caller has
    them): removing x from n values of mean m and std s leaves the mean m - t s / (n - 1) and the std
    s sqrt(n / (n - 1) (1 - t**2 / (n - 1))), t = (x - m) / s (no overflow)."""
    values = np.asarray(values, dtype=np.float64)
    usable = np.asarray(usable, dtype=bool)
    count, mean, std = row_moments(values, usable) if moments is None else moments
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
                  rows: np.ndarray | None = None, left_out: np.ndarray | None = None, *,
                  moments: tuple | None = None) -> str | None:
    """Why cohort rows given later (distances where ``usable``; one per attempt, the claimed class left out;
    or, with ``rows`` and ``left_out``, one per probe, attempt a reading row ``rows[a]`` without column
    ``left_out[a]``) are not from the cohort ``record`` describes, or None. Either way each attempt's row
    is judged, as below. ``moments``: :func:`row_moments` of ``values``, when the caller has them.

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
    whole = row_moments(values, usable) if moments is None else moments
    count, mean, std = whole if rows is None else row_moments_left_out(values, usable, rows, left_out, moments=whole)
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


def rows_drift(record: Mapping[str, Any], values: np.ndarray, usable: np.ndarray, *,
               moments: tuple | None = None) -> str | None:
    """A note when many cohort rows given later lie beyond the fitted rows' means or spreads, each within
    :func:`rows_mismatch`'s wider bounds: a cohort shifted or squeezed as a whole (by less than the fitted rows'
    range, 0.15 on the tests' lists gave a 24% FPR at a 5% target). Not an error: probes from other conditions
    move their cohort rows too, and T-norm removes a shift that the attempts' scores share. ``moments``:
    :func:`row_moments` of ``values``, when the caller has them."""
    count, mean, std = row_moments(values, usable) if moments is None else moments
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
        moments = row_moments(values, usable)  # both checks read the rows' moments: one pass over the cohort
        problem = rows_mismatch(self.cohort[side], values, usable, what, rows, left_out, moments=moments)
        if problem:
            raise DataError(problem)
        drift = rows_drift(self.cohort[side], values, usable, moments=moments)
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
        """Rebuilt from :meth:`to_state`, after calibrate.saved.reading checked the structure; ``where`` names the
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
