"""Estimator ``anchored``: one pooled shape, each class located at its own nearest impostors.

auto standardises each class by the median and IQR of *all* its impostors. Where a class's impostor bulk moves
without its nearest impostors (or its genuine scores) moving, as on modern face embeddings, that spends the FPR
budget in the wrong places: a class far from the crowd gets a loose threshold for its few look-alikes, and one
amid the crowd a needlessly strict one (docs/genuine-cost.md: auto rejected 1.3-3.2x as many genuine users as
one pooled threshold at the same FPR on CFP). ``anchored`` locates each class at its k-th nearest impostor
instead, on the working scale ``y = log(d + c)`` (znorm.py's), and keeps auto's pooled calibration:

* anchor: ``a_c = y_(k)``, the class's k-th smallest training distance, ``k = clip(round(sqrt(n_c)), 3, max_rank)``
  (at most ``n_c - 1``): deep enough in the tail to be about the class's look-alikes, shallow enough to be
  estimated (its rank error is about sqrt(k));
* shrinkage: the anchor's sampling variance is ``sigma_c^2 = k (1 - k / n_c) slope_c^2``, with ``slope_c`` the
  spacing of the class's working-scale distances around rank k (an order statistic's delta-method variance);
  the anchors' spread between classes ``tau^2 = var(a) - mean(sigma^2)`` (0 at least); the location is
  ``m_c = w_c a_c + (1 - w_c) mean(a)`` with ``w_c = tau^2 / (tau^2 + sigma_c^2)`` (empirical Bayes): where
  classes have few distances, or do not differ, the thresholds approach one pooled threshold;
* every class's training distances are shifted by their location, ``z = y - m_c`` (scale 1), with the anchor
  of the distances at or below it left out of their own shift (``jackknife`` alpha of the leave-one-out anchor
  ``y_(k+1)``, as auto mixes its statistics: a new impostor does not move the anchor it is judged by);
* the shifted distances are pooled, and the threshold of class c at target e is ``m_c + z(e)`` mapped back, with
  ``z(e)`` auto's pooled quantile (empirical while at least 10 pooled values lie below it, a GPD tail below).

The fitted model is auto's (``ZnormModel``, pooled shape, scale 1) with the shrinkage's constants kept in its
``anchor`` state, so that ``enroll`` locates a new class as the fit would have.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from calibrate.contract.base import Estimator, FittedModel, RunContext
from calibrate.errors import DataError, ParameterError
from calibrate.statistics.gpd import monotone
from calibrate.statistics.standardise import (anchor_locations, anchor_ranks, anchor_statistics, anchored_classes,
                                   anchored_sorted, from_working, shrink_anchors, spacing_ranks, to_working,
                                   working_offset)
from calibrate.contract.types import ImpostorDistances

from .simulate import (PARTIAL_SHARE, _covered, _flat_lowest, _lowest_counts, _lowest_whole, _smallest,
                       pooled_expected, pooled_z_quantile)
from .znorm import ZnormModel, check_class_sizes, pooled_tail

#: the configuration of the fit (the working scale, the pooled quantile and its tail: auto's)
ANCHORED_CONFIG = {"family": "lognormal", "jackknife": 0.5, "max_rank": 20, "min_tail_count": 10.0,
                   "tail_fraction": 0.1, "min_exceedances": 30, "shape_bounds": (-1.0, 0.5)}


def fit_anchored(impostors: ImpostorDistances, *, family: str, jackknife: float, max_rank: int,
                 min_tail_count: float, tail_fraction: float, min_exceedances: int,
                 shape_bounds: tuple[float, float], who: str = "anchored", structure: str = "anchored") -> ZnormModel:
    """The fit of :data:`STRUCTURE` ``anchored`` (the module's), or of ``one``: every class at location 0 on the working
    scale, so that the pooled quantile of the log distances (with the GPD tail) is one threshold for everyone."""
    check_class_sizes(impostors, 3, who)
    if structure == "one":
        offset = working_offset(impostors.pooled(), family)
        m = np.zeros(len(impostors))
        anchor = {"structure": "one", "mean": 0.0, "between_var": 0.0, "max_rank": int(max_rank)}
        sorted_z = one_sorted(impostors, family, offset)
    else:
        offset, m, _, anchor = anchored_classes(impostors, family, jackknife, max_rank, f"estimator {who}")
        anchor = {"structure": "anchored", **anchor}
        sorted_z = anchored_sorted(impostors, family, jackknife, max_rank, f"estimator {who}")
    tail = pooled_tail(sorted_z, tail_fraction, min_exceedances, shape_bounds)
    counts = impostors.counts()
    return ZnormModel(impostors.classes, m, np.ones(counts.size), counts, family, offset, True, False, sorted_z, tail,
                      min_tail_count, anchor=anchor)


def one_sorted(impostors: ImpostorDistances, family: str, offset: float) -> np.ndarray:
    """The pooled working-scale distances, sorted (read-only; cached on the gallery)."""
    key = ("one-sorted", family, float(offset))
    cache = impostors.__dict__.setdefault("_standardised", {})
    if key not in cache:
        pooled = np.sort(to_working(impostors.values, family, offset))
        pooled.flags.writeable = False
        cache[key] = pooled
    return cache[key]


def enroll_anchored(model: ZnormModel, cls: str, distances: np.ndarray, who: str) -> ZnormModel:
    """``model`` with one class located at its own anchor, shrunk with the fitted mean and spread of the anchors;
    the pooled shape, the working offset and the other classes stay."""
    d = np.sort(np.asarray(distances, dtype=np.float64))
    if model.anchor.get("structure") == "one":
        loc = 0.0  # one pooled threshold: every class, a new one too, at the same location whatever its distances
    else:
        if d.size < 3:
            raise DataError(f"estimator {who}, class {cls!r}: {d.size} training distance(s); at least 3 are needed "
                            "to locate a class at its nearest impostors")
        with np.errstate(divide="ignore"):  # a 0 below the ranks the anchor reads is harmless (checked below)
            y = to_working(d, model.family, model.offset)
        n = np.array([y.size])
        k = anchor_ranks(n, model.anchor["max_rank"])
        a, _, variance = anchor_statistics(lambda r: y[r], k, n)
        if not (np.isfinite(a[0]) and np.isfinite(variance[0])):  # only the ranks the anchor reads (as the fit)
            raise DataError(f"estimator {who}, class {cls!r}: its nearest distances include 0, which cannot be placed "
                            "on this calibration's log scale (its working offset is 0); fit again with the new class")
        tau2 = model.anchor["between_var"]
        w = tau2 / (tau2 + float(variance[0])) if tau2 > 0 else 0.0
        loc = w * float(a[0]) + (1 - w) * model.anchor["mean"]
    state = model.to_state()
    if cls in model.classes:
        i = model.classes.index(cls)
        state["loc"][i], state["n"][i] = loc, int(d.size)
    else:
        state["classes"].append(cls)
        state["loc"].append(loc)
        state["scale"].append(1.0)
        state["n"].append(int(d.size))
    return type(model).from_state(state)


# ---- what a fit gives on many simulated galleries at once (calibrate.predicted.interval) ----------------------------

def anchored_ranks(counts: np.ndarray, targets: np.ndarray, world, *, max_rank: int, min_tail_count: float,
                   structure: str = "anchored", **_: object) -> list[np.ndarray] | None:
    """Each class's lowest values (a margin over its expected count below its threshold: e_max n_c anchored, the
    world's share below one pooled threshold for ``one``) and its anchor's ranks; None (whole galleries) when the
    GPD tail is needed (e N < min_tail_count) or a partial draw would hold most values anyway."""
    n_total = int(counts.sum())
    t = np.asarray(targets, dtype=np.float64)
    if np.any(t * n_total < min_tail_count) or np.any(counts < 4):
        return None
    if structure == "one":  # one threshold for everyone: each class's share below it is the world's, not the target
        lowest = _lowest_counts(counts, pooled_expected(counts, t, world))
    else:
        lowest = _lowest_counts(counts, counts * float(t.max()))
        k = anchor_ranks(counts, max_rank)
        _, hi = spacing_ranks(k, counts)
        lowest = np.minimum(np.maximum(lowest, hi + 1), counts)  # every rank an anchor reads, and one beyond
    if lowest.sum() > PARTIAL_SHARE * n_total:
        return None
    return [np.arange(r) for r in lowest]


def anchored_simulate(galleries, targets: np.ndarray, *, family: str, jackknife: float, max_rank: int,
                      min_tail_count: float, tail_fraction: float, min_exceedances: int,
                      shape_bounds: tuple[float, float], structure: str = "anchored",
                      shift: np.ndarray | None = None, **_: object) -> np.ndarray:
    """:func:`fit_anchored`'s thresholds on B simulated galleries at once (B, C, T); a row of NaN where a partial draw
    did not cover the pooled quantile (the caller sees that gallery at more ranks). ``shift``: per class, a fixed
    shift of its location (auto's matched structures, group_shift.py, held as fitted)."""
    if family != "lognormal":
        raise ValueError("the vectorised anchored fit covers the log-normal working scale only")
    counts = galleries.counts
    c_count, b_count = counts.size, galleries.replicates
    n_total = int(counts.sum())
    t = np.asarray(targets, dtype=np.float64)
    k = anchor_ranks(counts, max_rank)
    cls = np.arange(c_count)
    if galleries.full:
        d = galleries.values
        positive = np.where(d > 0, d, np.inf).min(axis=1)
        offset = np.where(d.min(axis=1) > 0, 0.0, 0.5 * positive)
        known = np.ones(b_count, dtype=bool)
    else:
        lowest = galleries.lowest_drawn()
        flat, col_cls, _ = _flat_lowest(galleries, lowest)  # (B, M): each class's lowest drawn values in turn
        offset, known = _flat_offset(flat, col_cls, lowest >= counts)

    def y_at(r: np.ndarray) -> np.ndarray:  # (B, C) at one 0-based rank per class
        return np.log(galleries.at(np.asarray(r)[:, None]) + offset[:, None, None])[:, :, 0]

    if structure == "one":
        m = m_low = np.zeros((b_count, c_count))
    else:
        with np.errstate(divide="ignore", invalid="ignore"):
            a, a_next, variance = anchor_statistics(y_at, k, counts)
        w, mean, _ = shrink_anchors(a, variance)
        m, m_low = anchor_locations(w, a, a_next, mean, jackknife)
    if shift is not None:
        m, m_low = m + shift[None, :], m_low + shift[None, :]
    if galleries.full:
        y = np.log(galleries.values + offset[:, None])
        seg = np.repeat(cls, counts)
        rank = np.arange(n_total) - galleries.offsets[:-1][seg]
        z = y - np.where(rank[None, :] < k[seg][None, :], m_low[:, seg], m[:, seg])
        lowest_z, need_tail, switch = _lowest_whole(z, t, n_total, tail_fraction, min_exceedances, min_tail_count)
        covered = np.ones(b_count, dtype=bool)
    else:
        col_rank = np.arange(col_cls.size) - np.searchsorted(col_cls, col_cls)  # rank within its class
        shift = np.where(col_rank[None, :] < k[col_cls][None, :], m_low[:, col_cls], m[:, col_cls])
        z_flat = np.log(flat + offset[:, None]) - shift
        largest = z_flat[:, np.cumsum(lowest) - 1]  # each class's largest drawn (its values ascend, and so do z)
        need = int(math.ceil(float(t.max()) * n_total)) + 1
        lowest_z = _smallest(z_flat, need)
        covered = _covered(lowest_z[:, need - 1], largest, lowest >= counts) & known
        need_tail, switch = False, 0.0
    ok = covered & np.all(np.isfinite(m), axis=1)
    out = np.full((b_count, c_count, t.size), np.nan)
    for g in np.flatnonzero(ok):
        qz = pooled_z_quantile(lowest_z[g], t, n_total, need_tail, switch, tail_fraction=tail_fraction,
                               min_exceedances=min_exceedances, shape_bounds=shape_bounds)
        if qz is not None:
            out[g] = monotone(from_working(m[g][:, None] + qz[None, :], family, float(offset[g])), t)
    return out


def _flat_offset(flat: np.ndarray, col_cls: np.ndarray, complete: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """simulate._partial_offset from the flat lowest values: per gallery the working offset a fit computes (0 without
    a zero distance, else half the smallest positive one) and whether it is known (a class drawn in part whose drawn
    values are all 0 might hide the smallest positive distance: the gallery is left to a refit)."""
    has_zero = np.any(flat <= 0, axis=1)
    positive = np.where(flat > 0, flat, np.inf)
    offset = np.where(has_zero, 0.5 * positive.min(axis=1), 0.0)
    starts = np.flatnonzero(np.r_[True, col_cls[1:] != col_cls[:-1]])
    class_has_positive = np.maximum.reduceat(np.isfinite(positive), starts, axis=1)  # (B, classes in order)
    known = ~has_zero | np.all(class_has_positive | complete[None, :], axis=1)
    return offset, known


class Anchored(Estimator):
    """One pooled shape, each class located at its own nearest impostors (shrunk toward the others where they are few).

    :param max_rank: the deepest rank an anchor may sit at (k = sqrt of a class's training distances, 3 to this).
    :param jackknife: how much a distance at or below its class's anchor is shifted by the anchor without it (1: fully).
    """

    model_class = ZnormModel
    #: a new class is located at its own anchor, shrunk with the fitted mean and spread of the anchors; the pooled
    #: shape stays as fitted
    enroll_mode = "pooled"

    def __init__(self, *, max_rank: int = 20, jackknife: float = 0.5):
        if isinstance(max_rank, bool) or not isinstance(max_rank, int) or max_rank < 3:
            raise ParameterError(f"max_rank must be a whole number >= 3, got {max_rank!r}")
        if not 0.0 <= jackknife <= 1.0:
            raise ParameterError(f"jackknife must be in [0, 1], got {jackknife!r}")
        self.max_rank, self.jackknife = max_rank, jackknife

    def _config(self) -> dict[str, Any]:
        return {**ANCHORED_CONFIG, "max_rank": self.max_rank, "jackknife": self.jackknife}

    def _fit(self, impostors: ImpostorDistances, context: RunContext) -> FittedModel:
        return fit_anchored(impostors, **self._config())

    def _enroll(self, model: FittedModel, cls: str, single: ImpostorDistances, context: RunContext) -> FittedModel:
        return enroll_anchored(model, cls, single.of(0), "anchored")

    def simulate(self, galleries, targets: np.ndarray) -> np.ndarray:
        return anchored_simulate(galleries, targets, **self._config())

    def simulation_ranks(self, counts: np.ndarray, targets: np.ndarray, world) -> list[np.ndarray] | None:
        return anchored_ranks(counts, targets, world, **self._config())

    def partitioned(self):
        """Sharded data, shard by shard: the shrinkage's constants from every shard's anchors first
        (partitioned_auto.py)."""
        from .partitioned_auto import AnchoredPartitioned

        return AnchoredPartitioned(self._config())
