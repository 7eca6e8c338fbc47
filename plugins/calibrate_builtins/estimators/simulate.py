"""Vectorised refits for the predicted FPR interval (``Estimator.simulate``, calibrate.prediction).

Each function computes, for B simulated galleries at once (a (B, N) array laid out like
``ImpostorDistances.values``, every class's distances ascending within its segment), exactly the
thresholds that fitting the estimator on each gallery gives: the same formulas on the same
order statistics, gathered by index arrays instead of one fit per gallery. The conformance kit
checks the equality against real refits. A gallery on which a formula would need a special case
the vectorised form does not cover (a zero robust scale) is handed back as None so that the
caller refits it.
"""

from __future__ import annotations

import math

import numpy as np

from calibrate.gpd import fit_lower_tail, monotone
from calibrate.standardise import IQR_TO_SD, from_working
from calibrate.stats import interpolate_rank


def _segments(offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    offsets = np.asarray(offsets, dtype=np.int64)
    return offsets[:-1], np.diff(offsets)


def class_interp(galleries: np.ndarray, offsets: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """class-interp: the paper's interpolation within each class's sorted distances (B, C, T)."""
    start, n = _segments(offsets)
    t = np.asarray(targets, dtype=np.float64)
    k = t[None, :] * n[:, None]  # (C, T) ranks
    nn = n[:, None]
    lo = np.clip(np.floor(k).astype(np.int64), 1, nn)
    hi = np.clip(np.ceil(k).astype(np.int64), 1, nn)
    frac = np.where(hi > lo, k - lo, 0.0)
    d_lo = galleries[:, start[:, None] + lo - 1]
    d_hi = galleries[:, start[:, None] + hi - 1]
    first = galleries[:, start][:, :, None]
    return np.where(k <= 1.0, k * first, d_lo + frac * (d_hi - d_lo))


def _lowest_sorted(values: np.ndarray, count: int) -> np.ndarray:
    """The ``count`` smallest of each row, ascending (B, count)."""
    count = int(min(max(count, 1), values.shape[1]))
    if count == values.shape[1]:
        return np.sort(values, axis=1)
    return np.sort(np.partition(values, count - 1, axis=1)[:, :count], axis=1)


def generic_interp(galleries: np.ndarray, offsets: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """generic-interp: the interpolation on every gallery's pooled distances, the same for all classes."""
    t = np.asarray(targets, dtype=np.float64)
    n_total = galleries.shape[1]
    k = t * n_total
    low = _lowest_sorted(galleries, int(math.ceil(float(k.max()))) + 1)
    out = np.empty((galleries.shape[0], t.size))
    for b in range(galleries.shape[0]):
        d = low[b]
        # interp_threshold on the pooled sample: only ranks up to ceil(max k) are read
        out[b] = np.where(k <= 1.0, k * d[0], interpolate_rank(d, np.minimum(k, d.size)))
    c = offsets.size - 1
    return np.broadcast_to(out[:, None, :], (out.shape[0], c, t.size)).copy()


def _quantile_index(n: np.ndarray, p: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """numpy's linear p-quantile of ascending samples of sizes n: (j, j1, h - j) per sample."""
    h = (n - 1) * p
    j = np.floor(h).astype(np.int64)
    return j, np.minimum(j + 1, n - 1), h - j


def _loo_index(n: np.ndarray, rank: np.ndarray, p: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For the element of 0-based ``rank`` in its class (sizes n, per element), the indices and weight of
    the linear p-quantile of its class with that element removed (as standardise's leave-one-out)."""
    h = (n - 2) * p
    j0 = np.floor(h).astype(np.int64)
    j1 = np.minimum(j0 + 1, n - 2)
    return j0 + (j0 >= rank), j1 + (j1 >= rank), h - j0


def pooled_shape(galleries: np.ndarray, offsets: np.ndarray, targets: np.ndarray, *, family: str, robust: bool,
                 jackknife: float, min_tail_count: float, tail_fraction: float | None, min_exceedances: int,
                 shape_bounds: tuple[float, float]) -> list[np.ndarray | None]:
    """auto (and znorm with ``pooled_shape: true, robust: true``): per gallery the (C, T) thresholds of the
    pooled standardised-score model, or None where a class's robust scale is 0 (the caller refits)."""
    if not robust or family != "lognormal":
        raise ValueError("the vectorised pooled-shape fit covers the robust log-normal configuration only")
    start, n = _segments(offsets)
    b_count, n_total = galleries.shape
    t = np.asarray(targets, dtype=np.float64)
    positive = np.where(galleries > 0, galleries, np.inf).min(axis=1)
    offset = np.where(galleries.min(axis=1) > 0, 0.0, 0.5 * positive)  # working_offset, per gallery
    y = np.log(galleries + offset[:, None])
    stats = {}
    for p in (0.25, 0.5, 0.75):
        j, j1, w = _quantile_index(n, p)
        a, b = y[:, start + j], y[:, start + j1]
        stats[p] = a + w * (b - a)
    m = stats[0.5]
    iqr = stats[0.75] - stats[0.25]
    degenerate = np.any(iqr <= 0, axis=1)
    s = np.where(iqr > 0, iqr, 1.0) / IQR_TO_SD
    seg = np.repeat(np.arange(n.size), n)
    if jackknife == 0:
        z = (y - m[:, seg]) / s[:, seg]
    else:
        n_el = n[seg]
        rank = np.arange(n_total) - start[seg]
        loo = {}
        for p in (0.25, 0.5, 0.75):
            i0, i1, w = _loo_index(n_el, rank, p)
            a, b = y[:, start[seg] + i0], y[:, start[seg] + i1]
            loo[p] = a + w * (b - a)
        lm = loo[0.5]
        ls = (loo[0.75] - loo[0.25]) / IQR_TO_SD
        degenerate |= np.any(ls <= 0, axis=1)
        mi = (1 - jackknife) * m[:, seg] + jackknife * lm
        si = np.maximum((1 - jackknife) * s[:, seg] + jackknife * ls, 0.5 * s[:, seg])
        z = (y - mi) / si
    switch = min_tail_count / n_total
    need_tail = bool(np.any(t < switch))
    from calibrate.gpd import exceedance_count

    k_tail = exceedance_count(n_total, tail_fraction, min_exceedances) + 1 if need_tail else 0
    lowest = _lowest_sorted(z, max(int(math.ceil(float(t.max()) * n_total)) + 1, k_tail, int(min_tail_count) + 1))
    out: list[np.ndarray | None] = []
    for g in range(b_count):
        if degenerate[g]:
            out.append(None)
            continue
        zs = lowest[g]
        q = interpolate_rank(zs, t * n_total)
        if need_tail:
            try:
                tail, _ = fit_lower_tail(zs, tail_fraction=tail_fraction, min_exceedances=min_exceedances,
                                         shape_bounds=shape_bounds, n=n_total)
            except Exception:  # noqa: BLE001 - the refit raises the same DataError; let it decide
                out.append(None)
                continue
            if tail.p_u > switch:
                at_switch = float(interpolate_rank(zs, np.array([switch * n_total]))[0])
                q = np.where(t < switch, np.minimum(tail.quantile(t), at_switch), q)
        yy = m[g][:, None] + s[g][:, None] * q[None, :]
        out.append(monotone(from_working(yy, family, float(offset[g])), t))
    return out


def stack(per_gallery: list[np.ndarray | None], offsets: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """(B, C, T) thresholds, NaN for the galleries the vectorised form left to a refit."""
    out = np.full((len(per_gallery), np.asarray(offsets).size - 1, np.asarray(targets).size), np.nan)
    for b, tau in enumerate(per_gallery):
        if tau is not None:
            out[b] = tau
    return out
