"""Vectorised refits for the predicted FPR interval (``Estimator.simulate`` and
``Estimator.simulation_ranks``, calibrate.predicted.interval).

Each function computes, for B simulated galleries at once, exactly the thresholds that fitting the
estimator on each gallery gives: the same formulas on the same order statistics, gathered by index
arrays instead of one fit per gallery. They read only the ranks they declare, so the world draws
those and no others (calibrate.predicted.world.World.draw_galleries):

* class-interp: each class's order statistics around rank e n_c (and its smallest);
* generic-interp and auto: each class's lowest few distances (a generous margin over what lies
  below the pooled quantile, sized from the world), and for auto its quartiles and the ranks its
  leave-one-out quartiles read. The pooled quantile is correct when every class's largest drawn value
  lies at or above it (then no undrawn value can be below it); a gallery where that fails (rare by
  the margin) is handed back as a row of NaN, and the caller sees it at more ranks (World.widen).

The conformance kit checks the equality against real refits on whole galleries.
"""

from __future__ import annotations

import math

import numpy as np

from calibrate.statistics.gpd import exceedance_count, fit_lower_tail, monotone
from calibrate.statistics.standardise import IQR_TO_SD, from_working
from calibrate.statistics.order import interpolate_rank
from calibrate.predicted.world import sorted_unique

#: a partial draw holds each class's expected count below the pooled threshold times this, plus
#: MARGIN_SD standard deviations and MARGIN_FIXED values
MARGIN_FACTOR, MARGIN_SD, MARGIN_FIXED = 3.0, 6.0, 10
#: above this share of all values a partial draw saves little: draw whole galleries
PARTIAL_SHARE = 0.5


# ---- class-interp ---------------------------------------------------------------------------


def _interp_ranks(counts: np.ndarray, targets: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(k, lo, hi, frac) of the paper's interpolation in each class (C x T; lo, hi 1-based)."""
    n = np.asarray(counts, dtype=np.int64)[:, None]
    k = np.asarray(targets, dtype=np.float64)[None, :] * n
    lo = np.clip(np.floor(k).astype(np.int64), 1, n)
    hi = np.clip(np.ceil(k).astype(np.int64), 1, n)
    return k, lo, hi, np.where(hi > lo, k - lo, 0.0)


def class_interp_ranks(counts: np.ndarray, targets: np.ndarray) -> list[np.ndarray]:
    _, lo, hi, _ = _interp_ranks(counts, targets)
    return lowest_and(np.ones(len(counts), dtype=np.int64), np.concatenate([lo - 1, hi - 1], axis=1))


def class_interp(galleries, targets: np.ndarray) -> np.ndarray:
    """class-interp: the paper's interpolation within each class's sorted distances (B, C, T)."""
    k, lo, hi, frac = _interp_ranks(galleries.counts, targets)
    d_lo, d_hi = galleries.at(lo - 1), galleries.at(hi - 1)
    first = galleries.at(np.zeros((k.shape[0], 1), dtype=np.int64))
    return np.where(k <= 1.0, k * first, d_lo + frac * (d_hi - d_lo))


# ---- the lowest values of each class ------------------------------------------------------------


def _lowest_counts(counts: np.ndarray, expected: np.ndarray) -> np.ndarray:
    """Per class how many of its lowest values to draw, given how many are expected below the pooled threshold."""
    x = np.maximum(np.asarray(expected, dtype=np.float64), 0.0)
    want = np.ceil(MARGIN_FACTOR * x + MARGIN_SD * np.sqrt(x) + MARGIN_FIXED).astype(np.int64)
    return np.minimum(want, counts)


def _padded_lowest(galleries, lowest: np.ndarray, values: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(B, C, R) each class's ``lowest[c]`` lowest values padded with +inf to R = max(lowest), and the
    (B, C) largest drawn value of each class (``values``: the same layout already transformed)."""
    r = int(lowest.max())
    ranks = np.minimum(np.arange(r)[None, :], lowest[:, None] - 1)
    v = galleries.at(ranks) if values is None else values
    pad = np.arange(r)[None, :] >= lowest[:, None]
    v = np.where(pad[None, :, :], np.inf, v)
    return v, v[:, np.arange(lowest.size), lowest - 1]


def _flat_lowest(galleries, lowest: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(B, M) every class's ``lowest[c]`` lowest drawn values side by side (M = sum of lowest, classes in order), the
    (M,) class of each column, and the (B, C) largest of them per class: what :func:`_padded_lowest` gives without
    padding every class to the longest (a partial draw where a few classes reach far is M values, not C x max)."""
    keys = galleries.keys
    cls = np.searchsorted(galleries.offsets, keys, side="right") - 1
    rank = keys - galleries.offsets[cls]
    take = rank < lowest[cls]
    last = np.flatnonzero(take & (rank == lowest[cls] - 1))  # each class's last taken value, classes in order
    return galleries.values[:, take], cls[take], galleries.values[:, last]


def _lowest_whole(z: np.ndarray, t: np.ndarray, n_total: int, tail_fraction: float, min_exceedances: int,
                  min_tail_count: float) -> tuple[np.ndarray, bool, float]:
    """(each whole gallery's lowest standardised scores, as many as the targets ``t`` and the GPD tail read;
    whether a target lies below the tail's switch; the switch) for :func:`pooled_z_quantile`."""
    switch = min_tail_count / n_total
    need_tail = bool(np.any(t < switch))
    k_tail = exceedance_count(n_total, tail_fraction, min_exceedances) + 1 if need_tail else 0
    return (_smallest(z, max(int(math.ceil(float(t.max()) * n_total)) + 1, k_tail, int(min_tail_count) + 1)),
            need_tail, switch)


def _smallest(values: np.ndarray, count: int) -> np.ndarray:
    """The ``count`` smallest of each row, ascending (B, count)."""
    count = int(min(max(count, 1), values.shape[1]))
    if count == values.shape[1]:
        return np.sort(values, axis=1)
    return np.sort(np.partition(values, count - 1, axis=1)[:, :count], axis=1)


def _covered(pooled_kth: np.ndarray, largest: np.ndarray, complete: np.ndarray) -> np.ndarray:
    """Per gallery: whether every class not drawn whole has its largest drawn value at or above the
    pooled value, so that no undrawn value lies below it."""
    partial = ~complete
    if not partial.any():
        return np.ones(pooled_kth.shape[0], dtype=bool)
    return np.all(largest[:, partial] >= pooled_kth[:, None], axis=1)


# ---- generic-interp ---------------------------------------------------------------------------


def pooled_expected(counts: np.ndarray, targets: np.ndarray, world) -> np.ndarray:
    """Per class, how many of its values the world puts below one pooled threshold at the largest target (a class's
    share there is its own, not the target: classes amid the crowd hold many times their share)."""
    n_total = int(counts.sum())
    e = min(1.0, float(np.max(targets)))
    tau = world.pooled_quantile(min(1.0, e + 1.0 / n_total))
    return counts * world.class_fpr(np.full((counts.size, 1), tau))[:, 0]


def generic_interp_ranks(counts: np.ndarray, targets: np.ndarray, world) -> list[np.ndarray] | None:
    lowest = _lowest_counts(counts, pooled_expected(counts, targets, world))
    if lowest.sum() > PARTIAL_SHARE * int(counts.sum()):
        return None
    return [np.arange(r) for r in lowest]


def generic_interp(galleries, targets: np.ndarray) -> np.ndarray:
    """generic-interp: the interpolation on every gallery's pooled distances, the same for all classes."""
    t = np.asarray(targets, dtype=np.float64)
    counts = galleries.counts
    n_total = int(counts.sum())
    k = t * n_total
    need = int(math.ceil(float(k.max()))) + 1
    b_count = galleries.replicates
    ok = np.ones(b_count, dtype=bool)
    if galleries.full:
        low = _smallest(galleries.values, need)
    else:
        lowest = galleries.lowest_drawn()
        flat, _, largest = _flat_lowest(galleries, lowest)
        low = _smallest(flat, need)
        ok = _covered(low[:, min(need, low.shape[1]) - 1], largest, lowest >= counts)
    out = np.full((b_count, t.size), np.nan)
    for b in np.flatnonzero(ok):
        d = low[b]
        out[b] = np.where(k <= 1.0, k * d[0], interpolate_rank(d, np.minimum(k, d.size)))
    return np.broadcast_to(out[:, None, :], (b_count, counts.size, t.size)).copy()


# ---- auto (znorm's pooled shape, robust, log-normal) ------------------------------------------------


def _quantile_index(n: np.ndarray, p: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """numpy's linear p-quantile of ascending samples of sizes n: (j, j1, h - j) per sample."""
    h = (n - 1) * p
    j = np.floor(h).astype(np.int64)
    return j, np.minimum(j + 1, n - 1), h - j


def _loo_index(n: np.ndarray, rank: np.ndarray, p: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For the element of 0-based ``rank`` in its class (sizes n), the indices and weight of the linear
    p-quantile of its class with that element removed (as standardise's leave-one-out)."""
    h = (n - 2) * p
    j0 = np.floor(h).astype(np.int64)
    j1 = np.minimum(j0 + 1, n - 2)
    return j0 + (j0 >= rank), j1 + (j1 >= rank), h - j0


_PS = (0.25, 0.5, 0.75)


def _partial_offset(d_low: np.ndarray, complete: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per gallery (B) the working offset a fit computes (0 without a zero distance, else half the smallest
    positive one), from each class's lowest drawn values ``d_low`` (B, C, R), and whether it is known: the
    smallest positive value of a class lies among its lowest drawn ones unless all of those are 0 and the
    class was not drawn whole (then the gallery is left to a refit)."""
    has_zero = np.any(d_low[:, :, 0] <= 0, axis=1)
    positive = np.where(d_low > 0, d_low, np.inf).min(axis=2)  # (B, C) each class's smallest positive drawn
    offset = np.where(has_zero, 0.5 * positive.min(axis=1), 0.0)
    known = ~has_zero | np.all(np.isfinite(positive) | complete[None, :], axis=1)
    return offset, known


def pooled_shape_ranks(counts: np.ndarray, targets: np.ndarray, world, *, min_tail_count: float,
                       **_: object) -> list[np.ndarray] | None:
    """Each class's lowest values (a margin over e_max n_c), its quartiles' ranks and the ranks its
    leave-one-out quartiles read for those lowest values; None (whole galleries) when the GPD tail is
    needed (e N < min_tail_count) or the lowest values reach the lower quartile. (Where the world draws
    zeros, a gallery's working offset is read from its classes' lowest values: :func:`_partial_offset`.)"""
    n_total = int(counts.sum())
    t = np.asarray(targets, dtype=np.float64)
    if np.any(t * n_total < min_tail_count) or np.any(counts < 4):
        return None
    lowest = _lowest_counts(counts, counts * float(t.max()))
    j0_low = np.floor((counts - 2) * 0.25).astype(np.int64)
    if np.any(lowest - 1 > j0_low) or lowest.sum() > PARTIAL_SHARE * n_total:
        return None
    extra = []
    for p in _PS:
        j, j1, _ = _quantile_index(counts, p)
        i0, i1, _ = _loo_index(counts, np.zeros(counts.size, dtype=np.int64), p)
        extra += [j, j1, i0, i1]
    return lowest_and(lowest, np.stack(extra, axis=1))


def lowest_and(lowest: np.ndarray, extra: np.ndarray) -> list[np.ndarray]:
    """Per class its ``lowest[c]`` lowest ranks and the ranks in row c of ``extra`` (C x E), sorted and unique, all
    classes at once (a loop over classes costs about as much as a chunk of the draw at a few thousand classes)."""
    lowest = np.asarray(lowest, dtype=np.int64)
    c_count, e_count = extra.shape
    width = np.int64(max(int(lowest.max(initial=0)), int(extra.max(initial=0)) + 1))
    cls = np.repeat(np.arange(c_count), lowest)
    low = np.arange(cls.size) - np.repeat(np.cumsum(lowest) - lowest, lowest)
    keys = sorted_unique(np.concatenate([cls * width + low, (np.arange(c_count)[:, None] * width + extra).ravel()]))
    split = np.searchsorted(keys, np.arange(1, c_count) * width)
    return [r - c * width for c, r in enumerate(np.split(keys, split))]


def pooled_shape(galleries, targets: np.ndarray, *, family: str, robust: bool,
                 jackknife: float, min_tail_count: float, tail_fraction: float | None, min_exceedances: int,
                 shape_bounds: tuple[float, float], shift: np.ndarray | None = None, **_: object) -> np.ndarray:
    """auto (and znorm with ``pooled_shape: true, robust: true, family: lognormal``): per gallery the (C, T)
    thresholds of the pooled standardised-score model; a row of NaN where a class's robust scale is 0, or
    (partial draws) where the drawn lowest values did not cover the pooled quantile: the caller refits.
    ``shift``: per class, a fixed shift of its standardised scores (auto's matched structures, group_shift.py)."""
    if not robust or family != "lognormal":
        raise ValueError("the vectorised pooled-shape fit covers the robust log-normal configuration only")
    counts = galleries.counts
    c_count = counts.size
    b_count = galleries.replicates
    n_total = int(counts.sum())
    t = np.asarray(targets, dtype=np.float64)
    known = np.ones(b_count, dtype=bool)
    if galleries.full:
        d = galleries.values
        positive = np.where(d > 0, d, np.inf).min(axis=1)
        offset = np.where(d.min(axis=1) > 0, 0.0, 0.5 * positive)  # working_offset, per gallery
    else:
        lowest = galleries.lowest_drawn()
        d_low = galleries.at(np.minimum(np.arange(int(lowest.max()))[None, :], lowest[:, None] - 1))
        offset, known = _partial_offset(d_low, lowest >= counts)
    cls = np.arange(c_count)

    def y_at(r: np.ndarray) -> np.ndarray:  # (B, C, R) log(d + offset) at 0-based ranks (C, R)
        return np.log(galleries.at(r) + offset[:, None, None])

    def quantile(idx: tuple) -> np.ndarray:  # (B, C) from (j, j1, w) per class
        j, j1, w = idx
        a, b = y_at(j[:, None])[:, :, 0], y_at(j1[:, None])[:, :, 0]
        return a + w * (b - a)

    q = {p: quantile(_quantile_index(counts, p)) for p in _PS}
    m = q[0.5]
    iqr = q[0.75] - q[0.25]
    bad = np.any(iqr <= 0, axis=1)
    s = np.where(iqr > 0, iqr, 1.0) / IQR_TO_SD
    if galleries.full:
        y = np.log(galleries.values + offset[:, None])
        seg = np.repeat(cls, counts)
        rank = np.arange(n_total) - galleries.offsets[:-1][seg]
        start = galleries.offsets[:-1][seg]
        if jackknife == 0:
            z = (y - m[:, seg]) / s[:, seg]
        else:
            loo = {}
            for p in _PS:
                i0, i1, w = _loo_index(counts[seg], rank, p)
                a, b = y[:, start + i0], y[:, start + i1]
                loo[p] = a + w * (b - a)
            ls = (loo[0.75] - loo[0.25]) / IQR_TO_SD
            bad |= np.any(ls <= 0, axis=1)
            mi = (1 - jackknife) * m[:, seg] + jackknife * loo[0.5]
            si = np.maximum((1 - jackknife) * s[:, seg] + jackknife * ls, 0.5 * s[:, seg])
            z = (y - mi) / si
        if shift is not None:
            z = z - shift[seg][None, :]
        lowest_z, need_tail, switch = _lowest_whole(z, t, n_total, tail_fraction, min_exceedances, min_tail_count)
        covered = np.ones(b_count, dtype=bool)
    else:
        y_low = np.log(d_low + offset[:, None, None])  # (B, C, R): each class's lowest values (the last repeated)
        if jackknife == 0:
            z_low = (y_low - m[:, :, None]) / s[:, :, None]
        else:
            loo = {p: quantile(_loo_index(counts, np.zeros(c_count, dtype=np.int64), p)) for p in _PS}
            ls = (loo[0.75] - loo[0.25]) / IQR_TO_SD
            bad |= np.any(ls <= 0, axis=1)
            mi = (1 - jackknife) * m + jackknife * loo[0.5]
            si = np.maximum((1 - jackknife) * s + jackknife * ls, 0.5 * s)
            z_low = (y_low - mi[:, :, None]) / si[:, :, None]
        if shift is not None:
            z_low = z_low - shift[None, :, None]
        padded, largest = _padded_lowest(galleries, lowest, z_low)
        need = int(math.ceil(float(t.max()) * n_total)) + 1
        lowest_z = _smallest(padded.reshape(b_count, -1), need)
        covered = _covered(lowest_z[:, need - 1], largest, lowest >= counts) & known
        need_tail, switch = False, 0.0
    out = np.full((b_count, c_count, t.size), np.nan)
    for g in np.flatnonzero(~bad & covered):
        qz = pooled_z_quantile(lowest_z[g], t, n_total, need_tail, switch, tail_fraction=tail_fraction,
                               min_exceedances=min_exceedances, shape_bounds=shape_bounds)
        if qz is not None:
            yy = m[g][:, None] + s[g][:, None] * (qz[None, :] + (0.0 if shift is None else shift[:, None]))
            out[g] = monotone(from_working(yy, family, float(offset[g])), t)
    return out


def pooled_z_quantile(zs: np.ndarray, t: np.ndarray, n_total: int, need_tail: bool, switch: float, *,
                      tail_fraction: float, min_exceedances: int, shape_bounds: tuple[float, float]
                      ) -> np.ndarray | None:
    """One simulated gallery's pooled quantile at the targets ``t`` from its lowest standardised values ``zs`` (of
    ``n_total``), as ZnormModel.z_quantiles reads it: interpolated, with the GPD tail below ``switch`` when
    ``need_tail``; None where the tail cannot be fitted (the caller refits that gallery whole)."""
    qz = interpolate_rank(zs, t * n_total)
    if not need_tail:
        return qz
    try:
        tail, _ = fit_lower_tail(zs, tail_fraction=tail_fraction, min_exceedances=min_exceedances,
                                 shape_bounds=shape_bounds, n=n_total)
    except Exception:  # noqa: BLE001 - the refit decides (it raises the same DataError or not)
        return None
    if tail.p_u > switch:
        at_switch = float(interpolate_rank(zs, np.array([switch * n_total]))[0])
        qz = np.where(t < switch, np.minimum(tail.quantile(t), at_switch), qz)
    return qz
