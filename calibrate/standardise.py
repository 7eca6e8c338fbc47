"""Per-class location and scale on a working scale, and standardised scores (a public core module).

The working scale is ``y = d`` (``family: gaussian``) or ``y = log(d + c)`` (``lognormal``; ``c`` is 0
unless some distance is 0). Location and scale are mean/sd or, robustly, median/(IQR / 1.349); with
``jackknife`` alpha the statistics that standardise a score are ``(1 - alpha) full + alpha leave-it-out``.
Shared by the ``znorm`` and ``auto`` estimators and the reference world (calibrate.world).
"""

from __future__ import annotations

import numpy as np

from .errors import DataError
from .stats import interpolate_rank
from .types import ImpostorDistances


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
                        where: str) -> tuple[float, list[float], list[float], list[np.ndarray]]:
    """(working offset, per-class locations, scales and standardised scores) of a gallery's training
    distances (:func:`standardise` per class); ``where`` prefixes a class's error."""
    offset = working_offset(impostors.pooled(), family)
    locs, scales, zs = [], [], []
    for i, c in enumerate(impostors.classes):
        y = to_working(impostors.of(i), family, offset)
        try:
            z, m, s = standardise(y, robust, jackknife)
        except DataError as exc:
            raise DataError(f"{where}, class {c!r}: {exc}") from None
        locs.append(m)
        scales.append(s)
        zs.append(z)
    return offset, locs, scales, zs

