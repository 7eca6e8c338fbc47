"""How false accepts cluster by probe, measured on the training data (issue 40), and what it adds to an interval.

The reference world (calibrate.predicted.world) draws every distance independently given its class. Real impostor
distances are not independent: a probe identity close to many classes (a "wolf"), or a look-alike pair seen in
several images of one identity, puts many of the low distances on one probe. The count of distances below a
threshold then varies more than binomially, both in the training sample (so a threshold fitted to it errs more
than the world's galleries say) and in an evaluation (so the measured FPR varies more than Binomial(n, p)).

Measured here, from the training matrix itself. Each probe identity (``DistanceMatrix.probe_classes``: its images
together) is a unit u with n_u training impostor distances, K_u of them below the estimator's own thresholds at a
level e. If the units are a sample from the probes a deployment meets, the count K = sum K_u has the
cluster-robust variance ``U / (U - 1) sum (K_u - p n_u)^2`` (p = K / N), which is ``phi K`` with phi = 1 without
clustering. The heterogeneity between units is ``cv2 = (phi - 1) / (p s)``, s = sum n_u^2 / N the units' size: the
squared coefficient of variation of the units' own rates, which does not depend on how many images a unit holds.
It grows toward the tail (look-alikes dominate there), so it is measured at log-spaced levels from the smallest
target up to LEVEL_TOP where at least MIN_COUNT distances lie below, and ``log cv2`` is fitted as a line in
``log e`` whose slope is held in [-1, 0] (cv2 at most inversely proportional to the level: the excess count
``phi - 1`` never grows toward the tail); the fit, not the noisy count at each target, is what a target reads, so
the interval moves smoothly with the target. Each level's cv2 enters the fit with a margin for its own sampling
error (:func:`margin`, from the identities that hold that level's false accepts): a small sample of probes
rarely holds the rare identities that dominate the tail, and then measures the least clustering exactly where
its thresholds err the most.

What it adds. (1) The threshold: the relative variance of the training count at a threshold grows from 1 / K to
``1 / K + cv2 sum n_u^2 / N^2``, so each target's replicates (achieved FPR over the world's galleries, which hold
the first term) are spread further by the second, read at ``max(e, CHECK_SUPPORT / N)`` (below that the world's
tail, fitted to the lowest pooled values, carries the estimate): their log is stretched about its median so its
variance grows by that much (:func:`widen`). (2) The evaluation: the count of false accepts among n attempts is
taken as overdispersed by ``1 + cv2 p s_eval``, s_eval the evaluation's own units' size (its probe identities'
attempts, a layout and no outcome: :func:`unit_size`), a negative binomial instead of the binomial
(calibrate.predicted.interval_result.measured_interval).

What it assumes: the probes a deployment meets are new identities drawn like the training's. Where they are the
training's own identities (other images of the same people), a wolf in the training is a wolf in the evaluation
too, the two errors partly cancel, and the interval (and a confidence bound) is wider than it needs to be.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

#: clustering is measured at log-spaced levels from the smallest target up to this FPR, LEVEL_STEPS of them
LEVEL_TOP, LEVEL_STEPS = 0.05, 8
#: distances below the thresholds a level needs before its clustering is measured
MIN_COUNT = 20
#: the slope of log cv2 in log e assumed when only one level can be measured (its most: phi - 1 constant)
ONE_LEVEL_SLOPE = -1.0


@dataclass(frozen=True, eq=False)
class ProbeUnits:
    """The training impostor distances grouped by probe identity: each distance's unit (``unit``, in ImpostorDistances
    order), or the training matrix and each of its rows' unit (``matrix``, ``of_row``: its gallery columns are the
    classes, in order), which spares a pass that lists every distance's unit (9.6 million at 1,680 classes)."""

    sizes: np.ndarray
    unit: np.ndarray | None = None
    matrix: Any = None
    of_row: np.ndarray | None = None

    @property
    def count(self) -> int:
        return int(self.sizes.size)

    @property
    def concentration(self) -> float:
        """sum n_u^2 / N^2: 1 / U for units of one size (the variance of a mean over units per unit of cv2)."""
        n = self.sizes.astype(np.float64)
        return float(np.sum(n * n) / n.sum() ** 2)

    @property
    def size(self) -> float:
        """sum n_u^2 / N: the units' size as the count's overdispersion sees it."""
        n = self.sizes.astype(np.float64)
        return float(np.sum(n * n) / n.sum())

    def candidates(self, impostors: Any, top: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(distance, class, unit) of every training impostor distance at or below its class's ``top``."""
        if self.unit is not None:
            counts = impostors.counts()
            seg = np.repeat(np.arange(counts.size, dtype=np.int32), counts)
            near = impostors.values <= top[seg]
            return impostors.values[near], seg[near], self.unit[near]
        m = self.matrix
        rows, cols = np.nonzero(m.impostor_mask() & (m.values <= top[None, :]))
        return m.values[rows, cols], cols, self.of_row[rows]


def probe_units(train: Any, impostors: Any) -> ProbeUnits | None:
    """The probe identities of a training DistanceMatrix's impostor distances (None without a matrix, or when they do not
    line up with ``impostors``: the units are then unknown)."""
    if train is None or not hasattr(train, "impostor_mask"):
        return None
    mask = train.impostor_mask()
    per_row = mask.sum(axis=1)
    if int(per_row.sum()) != impostors.values.size or len(train.gallery_classes) != len(impostors.classes):
        return None
    _, of_row = np.unique(np.asarray(train.probe_classes), return_inverse=True)
    sizes = np.bincount(of_row.ravel(), weights=per_row)
    keep = sizes > 0
    of_row = ((np.cumsum(keep) - 1)[of_row.ravel()]).astype(np.int32)  # units without distances dropped
    return ProbeUnits(sizes[keep].astype(np.int64), matrix=train, of_row=of_row)


def units_of(identity: np.ndarray) -> ProbeUnits | None:
    """:class:`ProbeUnits` from each training impostor distance's probe identity (ImpostorDistances order; any labels
    or codes); None with fewer than two identities."""
    _, unit = np.unique(np.asarray(identity), return_inverse=True)
    sizes = np.bincount(unit.ravel())
    return ProbeUnits(sizes.astype(np.int64), unit=unit.ravel().astype(np.int32)) if sizes.size >= 2 else None


def unit_size(matrices: Sequence[Any]) -> float | None:
    """sum m_u^2 / sum m_u over the impostor attempts of the evaluation matrices, by probe identity (its attempts in
    every matrix together): the evaluation's units' size. None without attempts."""
    counts: dict[str, float] = {}
    for m in matrices:
        per_row = m.impostor_mask().sum(axis=1)
        labels, of_row = np.unique(np.asarray(m.probe_classes), return_inverse=True)
        for label, n in zip(labels.tolist(), np.bincount(of_row, weights=per_row, minlength=labels.size).tolist()):
            counts[label] = counts.get(label, 0.0) + n
    m_u = np.array([v for v in counts.values() if v > 0])
    return float(np.sum(m_u * m_u) / m_u.sum()) if m_u.size else None


@dataclass
class Clustering:
    """How the training false accepts cluster by probe, at one estimator's thresholds (module docstring)."""

    units: int
    #: the training units' size (sum n^2 / N) and concentration (sum n^2 / N^2)
    size: float
    concentration: float
    #: the levels measured, the training count below each, and cv2 there (NaN where too few lie below)
    levels: np.ndarray
    counts: np.ndarray
    measured: np.ndarray
    #: the line log cv2 = intercept + slope log e fitted to the measured cv2 times their :func:`margin`s
    #: (intercept None: no level could be measured)
    intercept: float | None
    slope: float
    #: the interval's level, at which the heterogeneity's own sampling error is allowed for (:func:`margin`)
    level: float = 0.9

    def cv2(self, e: np.ndarray) -> np.ndarray:
        """The units' heterogeneity at levels ``e``, its sampling error allowed for (0 where nothing could be
        measured)."""
        e = np.asarray(e, dtype=np.float64)
        if self.intercept is None:
            return np.zeros(e.shape)
        return np.exp(self.intercept + self.slope * np.log(e))

    def threshold_variance(self, e: np.ndarray, training: int) -> np.ndarray:
        """The relative variance clustering adds to a threshold's achieved FPR at targets ``e``, fitted on ``training``
        distances (module docstring, (1))."""
        from calibrate.predicted.world_tail import CHECK_SUPPORT

        e = np.asarray(e, dtype=np.float64)
        return self.cv2(np.maximum(e, CHECK_SUPPORT / max(int(training), 1))) * self.concentration

    def summary(self, targets: np.ndarray, training: int) -> dict[str, Any]:
        t = np.asarray(targets, dtype=np.float64)
        return {"units": self.units, "unit_size": self.size, "cv2": [float(x) for x in self.cv2(t)],
                "threshold_variance": [float(x) for x in self.threshold_variance(t, training)],
                "levels": self.levels.tolist(), "level_counts": self.counts.tolist(),
                "level_cv2": [float(x) if np.isfinite(x) else None for x in self.measured]}


def margin(units: int, level: float) -> float:
    """What a heterogeneity measured on ``units`` units that hold false accepts is multiplied by for its own sampling
    error: a variance estimated from U units is at most (U - 1) / chi2_{(1 - level) / 2}(U - 1) times the truth with
    probability (1 + level) / 2 (normal units; heavier-tailed ones err more). It is the units that hold the level's
    false accepts that inform it: a tail held by a few identities is known from a few (1.6x at 30, 1.2x at 200)."""
    from scipy.special import chdtri

    df = max(float(units) - 1.0, 1.0)
    return float(df / chdtri(df, (1 + level) / 2))


def levels_for(targets: Sequence[float]) -> np.ndarray:
    """The targets and LEVEL_STEPS log-spaced levels from the smallest up to LEVEL_TOP, ascending."""
    t = np.asarray(targets, dtype=np.float64)
    lo, hi = float(t.min()), max(LEVEL_TOP, float(t.max()))
    grid = np.exp(np.linspace(math.log(lo), math.log(hi), LEVEL_STEPS)) if hi > lo else np.array([lo])
    return np.unique(np.concatenate([t, grid]))


def measure(units: ProbeUnits, impostors: Any, thresholds: np.ndarray, levels: np.ndarray,
            level: float = 0.9) -> Clustering:
    """:class:`Clustering` from the units' counts below ``thresholds`` (classes x levels, non-decreasing along a row)."""
    tau = np.asarray(thresholds, dtype=np.float64)
    top = np.where(np.isnan(tau[:, -1]), -np.inf, tau[:, -1])
    v, s, u = units.candidates(impostors, top)  # only these can lie below any level's threshold
    n_u = units.sizes.astype(np.float64)
    n = float(n_u.sum())
    big_u = units.count
    k_all, cv2, held = np.zeros(levels.size), np.full(levels.size, np.nan), np.ones(levels.size)
    for j in range(levels.size):
        k_u = np.bincount(u[v <= tau[s, j]], minlength=big_u).astype(np.float64)
        k = float(k_u.sum())
        k_all[j] = k
        if k < MIN_COUNT or big_u < 2 or k >= n:
            continue
        p = k / n
        phi = big_u / (big_u - 1) * float(np.sum((k_u - p * n_u) ** 2)) / (k * (1 - p))
        cv2[j] = (phi - 1) / (p * units.size)
        held[j] = margin(np.count_nonzero(k_u), level)
    ok = np.isfinite(cv2) & (cv2 > 0)
    intercept, slope = None, ONE_LEVEL_SLOPE
    if np.isfinite(cv2).any() and not ok.any():
        intercept, slope = -np.inf, 0.0  # measured, and no unit is more alike than chance: no clustering
    elif ok.sum() == 1:
        x, y = math.log(levels[ok][0]), math.log(cv2[ok][0] * held[ok][0])
        intercept = y - slope * x
    elif ok.sum() >= 2:
        x, y = np.log(levels[ok]), np.log(cv2[ok] * held[ok])
        w = np.sqrt(k_all[ok])
        xm, ym = np.average(x, weights=w), np.average(y, weights=w)
        slope = float(np.clip(np.sum(w * (x - xm) * (y - ym)) / max(np.sum(w * (x - xm) ** 2), 1e-300), -1.0, 0.0))
        intercept = float(ym - slope * xm)
    return Clustering(big_u, units.size, units.concentration, levels, k_all, cv2, intercept, slope, level)


def clustering_of(units: ProbeUnits | None, impostors: Any, model: Any, targets: Sequence[float],
                  level: float = 0.9) -> Clustering | None:
    """How the training false accepts cluster at ``model``'s own thresholds (None without units)."""
    if units is None or units.count < 2:
        return None
    levels = levels_for(targets)
    with np.errstate(all="ignore"):
        tau = np.asarray(model._thresholds(levels, model.all_rows()), dtype=np.float64)
    tau = np.maximum.accumulate(np.where(np.isnan(tau), -np.inf, tau), axis=1)
    return measure(units, impostors, tau, levels, level)


def widen(replicates: np.ndarray, variance: np.ndarray) -> np.ndarray:
    """Replicates (B x T, achieved FPR) whose log, per column, is stretched about its median so that its variance
    grows by ``variance[j]`` (robust: the 5-95% range / 3.29 as its standard deviation); a column without spread gets
    normal scores of that variance by rank. Zeros and NaN stay."""
    reps = np.array(replicates, dtype=np.float64, copy=True)
    for j in range(reps.shape[1]):
        add = float(variance[j])
        col = reps[:, j]
        ok = np.isfinite(col) & (col > 0)
        if add <= 0 or ok.sum() < 2:
            continue
        y = np.log(col[ok])
        centre = float(np.median(y))
        sd = float(np.diff(np.quantile(y, [0.05, 0.95]))[0]) / 3.29
        if sd > 1e-9:
            y = centre + (y - centre) * math.sqrt(1.0 + add / (sd * sd))
        else:
            from scipy.special import ndtri

            rank = np.argsort(np.argsort(y, kind="stable"), kind="stable")
            y = y + math.sqrt(add) * ndtri((rank + 0.5) / y.size)
        col[ok] = np.exp(np.minimum(y, 0.0))  # an FPR is at most 1
        reps[:, j] = col
    return reps
