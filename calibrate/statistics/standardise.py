"""Per-class location and scale on a working scale, and standardised scores (a public core module).

The working scale is ``y = d`` (``family: gaussian``) or ``y = log(d + c)`` (``lognormal``; ``c`` is 0
unless some distance is 0). Location and scale are mean/sd or, robustly, median/(IQR / 1.349); with
``jackknife`` alpha the statistics that standardise a score are ``(1 - alpha) full + alpha leave-it-out``.
Shared by the ``znorm`` and ``auto`` estimators and the reference world (calibrate.predicted.world).
"""

from __future__ import annotations

import numpy as np

from calibrate.errors import DataError
from calibrate.statistics.order import interpolate_rank
from calibrate.contract.types import ImpostorDistances


IQR_TO_SD = 1.3489795003921634  # 2 Phi^{-1}(0.75)


def working_offset(pooled: np.ndarray, family: str) -> float:
    """``c`` of ``y = log(d + c)``: 0 if all distances are positive, else half the smallest positive one."""
    if family != "lognormal":
        return 0.0
    pooled = np.asarray(pooled, dtype=np.float64)
    if pooled.min() > 0:
        return 0.0
    positive = pooled[pooled > 0]
    if positive.size == 0:
        raise DataError("every training distance is 0; a log-normal model cannot be fitted (use family: gaussian)")
    return 0.5 * float(positive.min())


def to_working(d: np.ndarray, family: str, offset: float) -> np.ndarray:
    d = np.asarray(d, dtype=np.float64)
    return np.log(d + offset) if family == "lognormal" else d


def from_working(y: np.ndarray, family: str, offset: float) -> np.ndarray:
    y = np.asarray(y, dtype=np.float64)
    d = np.exp(y) - offset if family == "lognormal" else y
    return np.maximum(d, 0.0)


def _quantile_sorted(xs: np.ndarray, p: float) -> float:
    """numpy's default (linear) quantile of an ascending sample."""
    h = (xs.size - 1) * p
    j = int(np.floor(h))
    j1 = min(j + 1, xs.size - 1)
    return float(xs[j] + (h - j) * (xs[j1] - xs[j]))


def location_scale(y: np.ndarray, robust: bool) -> tuple[float, float]:
    """(location, scale): mean/sd, or median/(IQR / 1.349); a zero robust scale falls back to the sd."""
    y = np.sort(np.asarray(y, dtype=np.float64))
    sd = float(y.std(ddof=1)) if y.size > 1 else 0.0
    if not robust:
        return float(y.mean()), sd
    iqr = _quantile_sorted(y, 0.75) - _quantile_sorted(y, 0.25)
    return _quantile_sorted(y, 0.5), (iqr / IQR_TO_SD if iqr > 0 else sd)


def _loo_quantile(ys: np.ndarray, p: float) -> np.ndarray:
    """For every rank r, the linear p-quantile of the ascending ``ys`` with element r removed."""
    n = ys.size
    h = (n - 2) * p
    j0 = int(np.floor(h))
    frac = h - j0
    j1 = min(j0 + 1, n - 2)
    r = np.arange(n)
    i0 = j0 + (j0 >= r)
    i1 = j1 + (j1 >= r)
    return ys[i0] + frac * (ys[i1] - ys[i0])


def loo_location_scale(y: np.ndarray, robust: bool) -> tuple[np.ndarray, np.ndarray]:
    """Leave-one-out location and scale for every element of ``y`` (vectorised, O(n log n))."""
    y = np.asarray(y, dtype=np.float64)
    n = y.size
    order = np.argsort(y, kind="stable")
    ys = y[order]
    if robust:
        m = _loo_quantile(ys, 0.5)
        s = (_loo_quantile(ys, 0.75) - _loo_quantile(ys, 0.25)) / IQR_TO_SD
        # a zero robust scale falls back to the sd, as in location_scale
        s_fallback = None
        if np.any(s <= 0):
            s_fallback = loo_location_scale(y, False)[1][order]
            s = np.where(s > 0, s, s_fallback)
    else:
        total, total2 = ys.sum(), np.square(ys).sum()
        m = (total - ys) / (n - 1)
        var = (total2 - np.square(ys) - (n - 1) * np.square(m)) / (n - 2)
        s = np.sqrt(np.maximum(var, 0.0))
    out_m, out_s = np.empty(n), np.empty(n)
    out_m[order], out_s[order] = m, s
    return out_m, out_s


def standardise(y: np.ndarray, robust: bool, jackknife: float) -> tuple[np.ndarray, float, float]:
    """The class's standardised scores and its (full-sample) location and scale.

    The statistics that standardise score i are ``(1 - jackknife) * full + jackknife * leave-i-out``.
    """
    m, s = location_scale(y, robust)
    if not s > 0 and y.size and np.isfinite(y).all() and y.min() < y.max():
        # distances so small (or large) that their spread under- or overflows: the statistics are
        # computed on the distances times an exact power of two, then scaled back
        shift = -int(np.frexp(np.max(np.abs(y)))[1])
        m, s = (np.ldexp(v, -shift) for v in location_scale(np.ldexp(y, shift), robust))
    if not s > 0:
        raise DataError(f"all {y.size} training distances are equal; a scale cannot be estimated"
                        if y.size and y.min() == y.max() else
                        f"the spread of the {y.size} training distances is not a positive finite number; "
                        "check them for infinities")
    if jackknife == 0:
        return (y - m) / s, m, s
    lm, ls = loo_location_scale(y, robust)
    mi = (1 - jackknife) * m + jackknife * lm
    si = np.maximum((1 - jackknife) * s + jackknife * ls, 0.5 * s)  # guard degenerate leave-one-out scales
    return (y - mi) / si, m, s


def pooled_quantile(sorted_z: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """Linear interpolation between order statistics at rank e N (clamped to the sample's range)."""
    z = np.asarray(sorted_z, dtype=np.float64)
    return interpolate_rank(z, np.asarray(targets, dtype=np.float64) * z.size)


def standardise_classes(impostors: ImpostorDistances, family: str, robust: bool, jackknife: float,
                        where: str, offset: float | None = None) -> tuple[float, list[float], list[float], list[np.ndarray]]:
    """(working offset, per-class locations, scales and standardised scores) of a gallery's training
    distances (:func:`standardise` per class); ``where`` prefixes a class's error; ``offset``: the working
    offset to use (a shard of a sharded gallery uses the whole gallery's), by default the distances' own.

    Robustly, classes of one size are standardised together as the rows of one array (the same
    operations, element by element, as :func:`standardise` on each: the same numbers to the bit), a
    loop over the distinct sizes rather than over classes; a class :func:`standardise` treats
    specially (a zero robust scale, fewer than 3 distances) is handed to it."""
    key = (family, bool(robust), float(jackknife), offset)
    cache = impostors.__dict__.setdefault("_standardised", {})  # the inputs are read-only arrays
    if key not in cache:
        cache[key] = _standardise_all(impostors, family, robust, jackknife, where, offset)
    offset, locs, scales, zs = cache[key]
    return offset, list(locs), list(scales), list(zs)


def pooled_sorted(impostors: ImpostorDistances, family: str, robust: bool, jackknife: float, where: str) -> np.ndarray:
    """Every class's standardised scores pooled and sorted (read-only): auto's pooled shape and the reference
    world's are the same array, computed once per gallery."""
    key = ("sorted", family, bool(robust), float(jackknife), None)
    cache = impostors.__dict__.setdefault("_standardised", {})
    if key not in cache:
        pooled = np.sort(np.concatenate(standardise_classes(impostors, family, robust, jackknife, where)[3]))
        pooled.flags.writeable = False
        cache[key] = pooled
    return cache[key]


def _standardise_all(impostors: ImpostorDistances, family: str, robust: bool, jackknife: float, where: str,
                     offset: float | None) -> tuple[float, list[float], list[float], list[np.ndarray]]:
    offset = working_offset(impostors.pooled(), family) if offset is None else offset
    counts = impostors.counts()
    locs, scales = np.empty(counts.size), np.empty(counts.size)
    z_all = np.empty(impostors.values.size)
    y_all = to_working(impostors.values, family, offset)
    order = np.argsort(counts, kind="stable")
    sizes = counts[order]
    bounds = np.flatnonzero(np.r_[True, sizes[1:] != sizes[:-1], True])
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        cls = order[lo:hi]
        idx = impostors.offsets[cls][:, None] + np.arange(int(sizes[lo]))[None, :]
        rows = y_all[idx]
        z, m, sc, plain = (_standardise_rows(rows, jackknife) if robust and sizes[lo] >= 3 else
                           (np.empty_like(rows), np.empty(cls.size), np.empty(cls.size), np.zeros(cls.size, bool)))
        for r in np.flatnonzero(~plain):
            try:
                z[r], m[r], sc[r] = standardise(rows[r], robust, jackknife)
            except DataError as exc:
                raise DataError(f"{where}, class {impostors.classes[cls[r]]!r}: {exc}") from None
        z_all[idx], locs[cls], scales[cls] = z, m, sc
    z_all.flags.writeable = False
    bounds = impostors.offsets
    return offset, locs.tolist(), scales.tolist(), [z_all[bounds[i]:bounds[i + 1]] for i in range(counts.size)]


def _quantile_rows(ys: np.ndarray, p: float) -> np.ndarray:
    """:func:`_quantile_sorted` of every row of an array of ascending rows."""
    h = (ys.shape[1] - 1) * p
    j = int(np.floor(h))
    j1 = min(j + 1, ys.shape[1] - 1)
    return ys[:, j] + (h - j) * (ys[:, j1] - ys[:, j])


def _loo_rows(y: np.ndarray, ys: np.ndarray, p: float) -> np.ndarray:
    """For every element of ``y`` (rows are classes, ``ys`` the same rows sorted), the linear p-quantile of its
    row with it removed, as :func:`_loo_quantile` gives it at the element's rank. That quantile reads one of
    three pairs of order statistics, by where the rank lies against j0 and j1; elements are placed by value,
    and where equal values straddle j0 or j1 the pairs read equal values, so the bits are the same."""
    n = ys.shape[1]
    h = (n - 2) * p
    j0 = int(np.floor(h))
    j1 = min(j0 + 1, n - 2)
    frac = h - j0
    low = ys[:, j0 + 1] + frac * (ys[:, j1 + 1] - ys[:, j0 + 1])  # rank <= j0
    mid = ys[:, j0] + frac * (ys[:, j1 + 1] - ys[:, j0])  # j0 < rank <= j1
    high = ys[:, j0] + frac * (ys[:, j1] - ys[:, j0])  # rank > j1
    out = np.empty_like(y)  # filled in place: a nested np.where allocates three matrices (2.7x slower)
    out[...] = high[:, None]
    np.copyto(out, mid[:, None], where=y <= ys[:, j1, None])
    np.copyto(out, low[:, None], where=y <= ys[:, j0, None])
    return out


def _standardise_rows(y: np.ndarray, jackknife: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """:func:`standardise` (robust) of every row (class) of ``y`` at once: (z, locations, scales, plain),
    ``plain`` False for the rows it treats specially (a robust scale that is not positive), which the
    caller standardises one by one; all of them when 0.0 and -0.0 both occur (equal values that are not
    the same bits: which one a sort puts first matters there)."""
    plain = np.zeros(y.shape[0], dtype=bool)
    if np.signbit(y[y == 0]).any():
        return np.empty_like(y), np.empty(y.shape[0]), np.empty(y.shape[0]), plain
    ys = np.sort(y, axis=1)
    m = _quantile_rows(ys, 0.5)
    s = (_quantile_rows(ys, 0.75) - _quantile_rows(ys, 0.25)) / IQR_TO_SD
    plain = s > 0
    if jackknife == 0:
        with np.errstate(divide="ignore", invalid="ignore"):  # rows that are not plain are recomputed by the caller
            return (y - m[:, None]) / s[:, None], m, s, plain
    ls = (_loo_rows(y, ys, 0.75) - _loo_rows(y, ys, 0.25)) / IQR_TO_SD
    plain &= ~np.any(ls <= 0, axis=1)
    mi = (1 - jackknife) * m[:, None] + jackknife * _loo_rows(y, ys, 0.5)
    si = np.maximum((1 - jackknife) * s[:, None] + jackknife * ls, 0.5 * s[:, None])
    with np.errstate(divide="ignore", invalid="ignore"):
        return (y - mi) / si, m, s, plain


# ---- each class located at its own nearest impostors (the ``anchored`` estimator's standardisation) -------

#: the deepest rank a class's anchor may sit at by default
ANCHOR_MAX_RANK = 20


def anchor_ranks(counts, max_rank: int = ANCHOR_MAX_RANK) -> np.ndarray:
    """k per class (1-based): ``clip(round(sqrt(n)), 3, max_rank)``, at most ``n - 1`` (so that the anchor left out
    of its own distances, ``y_(k+1)``, exists)."""
    n = np.asarray(counts, dtype=np.int64)
    k = np.clip(np.rint(np.sqrt(n)).astype(np.int64), 3, int(max_rank))
    return np.minimum(k, n - 1)


def spacing_ranks(k: np.ndarray, n: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(lo, hi) 1-based ranks around each anchor for its local spacing: k -+ ceil(sqrt(k)), within [1, n]."""
    j = np.ceil(np.sqrt(k)).astype(np.int64)
    return np.maximum(k - j, 1), np.minimum(k + j, n)


def anchor_statistics(y_at, k: np.ndarray, n: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(anchor y_(k), leave-one-out anchor y_(k+1), the anchor's sampling variance k (1 - k / n) slope^2) per class;
    ``y_at(r)`` gives the working-scale values at 0-based ranks ``r`` (one per class), in any leading shape; the
    slope is the class's spacing around rank k (an order statistic's delta-method variance)."""
    lo, hi = spacing_ranks(k, n)
    a, a_next = y_at(k - 1), y_at(k)
    slope = (y_at(hi - 1) - y_at(lo - 1)) / np.maximum(hi - lo, 1)
    return a, a_next, k * (1.0 - k / n) * slope ** 2


def shrink_anchors(a: np.ndarray, variance: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(weights w_c, the anchors' mean, their spread between classes tau^2 = var(a) - mean(sigma^2), at least 0),
    over the last axis (classes): empirical Bayes, ``w_c = tau^2 / (tau^2 + sigma_c^2)``."""
    mean = a.mean(axis=-1, keepdims=True)
    tau2 = np.maximum(a.var(axis=-1, keepdims=True) - variance.mean(axis=-1, keepdims=True), 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        w = np.where(tau2 > 0, tau2 / (tau2 + variance), 0.0)
    return w, mean, tau2


def anchor_locations(w, a, a_next, mean, jackknife: float):
    """(m_c, the shift of the distances at or below the anchor): ``w a + (1 - w) mean`` and its mix with the
    leave-one-out anchor's."""
    m = w * a + (1.0 - w) * mean
    return m, (1.0 - jackknife) * m + jackknife * (w * a_next + (1.0 - w) * mean)


def anchored_classes(impostors: ImpostorDistances, family: str, jackknife: float, max_rank: int, where: str,
                     offset: float | None = None, prior: tuple[float, float] | None = None
                     ) -> tuple[float, np.ndarray, np.ndarray, dict]:
    """(working offset, per-class locations m_c, every training distance shifted by its class's location in the
    gallery's value order (read-only), the shrinkage's constants {mean, between_var, max_rank}): each class located
    at its k-th nearest impostor, shrunk toward the others (the ``anchored`` estimator and its reference world).
    ``offset`` and ``prior`` (the anchors' mean and spread between classes): those of a whole gallery of which
    these classes are a part (a shard: :func:`anchor_terms` of every shard gives them), by default these classes'
    own. Cached on the gallery per configuration, as :func:`standardise_classes` is."""
    key = ("anchored", family, float(jackknife), int(max_rank), offset, prior)
    cache = impostors.__dict__.setdefault("_standardised", {})
    if key in cache:
        return cache[key]
    offset, a, a_next, variance, k, y = _anchor_parts(impostors, family, max_rank, where, offset)
    if prior is None:
        w, mean, tau2 = shrink_anchors(a, variance)
    else:
        mean, tau2 = np.array([prior[0]]), np.array([prior[1]])
        with np.errstate(invalid="ignore", divide="ignore"):
            w = np.where(tau2 > 0, tau2 / (tau2 + variance), 0.0)
    m, m_low = anchor_locations(w, a, a_next, mean, jackknife)
    counts = impostors.counts()
    start = impostors.offsets[:-1]
    seg = np.repeat(np.arange(counts.size), counts)
    rank = np.arange(y.size) - start[seg]
    z = y - np.where(rank < k[seg], m_low[seg], m[seg])
    z.flags.writeable = False
    m.flags.writeable = False
    constants = {"mean": float(mean[0]), "between_var": float(tau2[0]), "max_rank": int(max_rank)}
    cache[key] = (offset, m, z, constants)
    return cache[key]


def _anchor_parts(impostors: ImpostorDistances, family: str, max_rank: int, where: str, offset: float | None):
    counts = impostors.counts()
    if np.any(counts < 3):
        small = impostors.classes[int(np.argmax(counts < 3))]
        raise DataError(f"{where}: class {small!r} has {int(counts.min())} training distance(s); at least 3 are needed "
                        "to locate a class at its nearest impostors")
    offset = working_offset(impostors.pooled(), family) if offset is None else offset
    y = to_working(impostors.sorted_within(), family, offset)
    start = impostors.offsets[:-1]
    k = anchor_ranks(counts, max_rank)
    a, a_next, variance = anchor_statistics(lambda r: y[start + r], k, counts)
    if not (np.all(np.isfinite(a)) and np.all(np.isfinite(variance))):
        raise DataError(f"{where}: a class's nearest training distances are not finite on the log scale")
    return offset, a, a_next, variance, k, y


def anchor_terms(impostors: ImpostorDistances, family: str, max_rank: int, where: str, offset: float
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Each class's anchor and its sampling variance with the whole gallery's working ``offset``: what the shrinkage's
    constants are computed from (:func:`shrink_anchors` over every class's, in the gallery's class order)."""
    return _anchor_parts(impostors, family, max_rank, where, offset)[1:4:2]


def anchored_sorted(impostors: ImpostorDistances, family: str, jackknife: float, max_rank: int, where: str) -> np.ndarray:
    """:func:`anchored_classes`' shifted distances pooled and sorted (read-only): the ``anchored`` estimator's pooled
    shape and its reference world's are one array, computed once per gallery."""
    key = ("anchored-sorted", family, float(jackknife), int(max_rank))
    cache = impostors.__dict__.setdefault("_standardised", {})
    if key not in cache:
        pooled = np.sort(anchored_classes(impostors, family, jackknife, max_rank, where)[2])
        pooled.flags.writeable = False
        cache[key] = pooled
    return cache[key]
