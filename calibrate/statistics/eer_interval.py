"""The equal error rate's confidence interval: a public core module (the ``fpr`` evaluator and ``calibrate evaluate``).

A 95% percentile bootstrap. Attempts are not independent: every genuine and impostor attempt claiming one enrolled
class shares that class's template, so the units resampled are the enrolled classes (each class's genuine and impostor
attempts together, with replacement, as the ``fpr`` evaluator's ``ratio_boot_*`` does). Data without classes (two
plain files of genuine and impostor scores, pyeer's form) resample attempts, the genuine and the impostor ones
separately: FEERCI's nonparametric EER interval (pypi.org/project/feerci), which treats every attempt as independent
and is narrower where attempts cluster. Neither pyeer nor bob.measure gives the EER an interval of sampling: pyeer's
``eer_low``/``eer_high`` (calibrate.statistics.verification.verification_metrics) say where the rates jump, and
bob.measure's ``confidence_for_indicator_variable`` is a Clopper-Pearson interval of one proportion.

Each replicate's EER is read on a grid of thresholds: 2 x :data:`GRID` levels spaced evenly in log FMR and in log FNMR
from a quarter of the EER to four times it (the order statistics there, and the threshold just below each, where a
resampled class's weight makes a rate jump), so a replicate's EER is within about 2% of its exact value (a replicate
whose EER leaves that window, which takes a class-level swing of 4x, is read at its edge). Attempts beyond the last
threshold are counted from each unit's total, so a pass reads only the attempts within the window. Per unit, the attempts between consecutive
thresholds are counted once; a replicate is then a weighted sum of those counts (units x bins), in blocks of about
2 million weights, so the cost is a pass over the attempts and replicates x units x bins multiply-adds.
"""

from __future__ import annotations

import math

import numpy as np

from calibrate.statistics.verification import PooledScores

#: replicates of the bootstrap
REPLICATES = 1000
#: thresholds per rate (FMR, FNMR) on the grid
GRID = 128
#: the grid spans the FMRs and FNMRs from eer / SPAN to eer x SPAN
SPAN = 4.0
#: weights (replicates x units) drawn at once
_BLOCK = 2_000_000
#: a dense units x bins table up to this many cells, a sparse one beyond
_DENSE = 4_000_000


def grid(pooled: PooledScores, eer: float, levels: int = GRID) -> np.ndarray:
    """The sorted thresholds (distances) a replicate's EER is read at: the impostor order statistics at FMRs and the
    genuine ones at FNMRs spaced evenly on a log scale from eer / SPAN to SPAN eer (within what the counts resolve),
    each with the threshold just below it."""
    ni, ng = pooled.n_impostors, pooled.n_genuine
    parts = []
    for at, n, genuine in ((pooled.impostor_at, ni, False), (pooled.genuine_at, ng, True)):
        lo = max(eer / SPAN, 0.5 / n)
        hi = min(max(eer * SPAN, 10.0 / n), 1.0)
        rates = np.geomspace(lo, max(hi, lo), levels)
        if genuine:  # FNMR f: the (ceil((1 - f) n))-th smallest genuine distance
            k = np.ceil(n * (1.0 - rates) - 1e-9).astype(np.int64) - 1
        else:
            k = np.ceil(n * rates - 1e-9).astype(np.int64) - 1
        values = np.asarray(at(np.clip(k, 0, n - 1)), dtype=np.float64)
        # and just below each: where a replicate's weights make a rate jump there, the closest FMR and FNMR can be
        # the last threshold before the jump
        parts += [values, np.nextafter(values, -np.inf)]
    return np.unique(np.concatenate(parts))


class UnitBins:
    """Per unit, its attempts in each bin of ``thresholds`` (columns: ``d <= t_0``, then ``t_{b-1} < d <= t_b``, last
    ``d > t_{B-1}``), gathered a block of attempts at a time: a dense table up to a few million cells, a scipy sparse
    one beyond. Attempts beyond the last threshold may be left out of :meth:`add` and counted from each unit's total
    (:meth:`totals`)."""

    def __init__(self, thresholds: np.ndarray, n_units: int):
        self.thresholds, self.n, self.width = thresholds, n_units, thresholds.size + 1
        self.dense = np.zeros((n_units, self.width)) if n_units * self.width <= _DENSE else None
        self.cells: list[np.ndarray] = []
        self.counts: list[np.ndarray] = []
        self.total: np.ndarray | None = None

    def add(self, values: np.ndarray, units: np.ndarray) -> None:
        """Attempts (distances) of the given units (codes below ``n_units``)."""
        codes = units.astype(np.int64) * self.width + np.searchsorted(self.thresholds, values, side="left")
        if self.dense is not None:
            self.dense += np.bincount(codes, minlength=self.n * self.width).reshape(self.n, self.width)
        else:
            cells, counts = np.unique(codes, return_counts=True)
            self.cells.append(cells)
            self.counts.append(counts.astype(np.float64))

    def totals(self, counts: np.ndarray) -> None:
        """Every unit's number of attempts (added to any given before): those :meth:`add` did not see are beyond the
        last threshold."""
        counts = np.asarray(counts, dtype=np.float64)
        self.total = counts if self.total is None else self.total + counts

    def table(self):
        """units x bins, dense (numpy) or sparse (scipy CSR)."""
        if self.dense is not None:
            out = self.dense
            if self.total is not None:
                out[:, -1] += self.total - out.sum(axis=1)
            return out
        from scipy.sparse import csr_matrix

        cells = np.concatenate(self.cells) if self.cells else np.zeros(0, np.int64)
        counts = np.concatenate(self.counts) if self.counts else np.zeros(0)
        rows, cols = cells // self.width, cells % self.width
        if self.total is not None:
            seen = np.bincount(rows, weights=counts, minlength=self.n)
            rows = np.concatenate([rows, np.arange(self.n)])
            cols = np.concatenate([cols, np.full(self.n, self.width - 1)])
            counts = np.concatenate([counts, self.total - seen])
        return csr_matrix((counts, (rows, cols)), shape=(self.n, self.width))  # duplicates summed


def bin_counts(values: np.ndarray, units: np.ndarray | None, thresholds: np.ndarray, n_units: int):
    """Per unit (rows) the attempts in each bin of ``thresholds`` (:class:`UnitBins`); ``units`` None: one row of every
    attempt (to resample attempts)."""
    if units is None:
        width = thresholds.size + 1
        return np.bincount(np.searchsorted(thresholds, values, side="left"), minlength=width)[None, :].astype(np.float64)
    bins = UnitBins(thresholds, n_units)
    bins.add(values, units)
    return bins.table()


def replicate_eers(impostor_counts, genuine_counts, weights: np.ndarray) -> np.ndarray:
    """The EER of each replicate (rows of ``weights``, one weight per unit) from the units' bin counts
    (:func:`bin_counts`, units x bins): at the grid threshold where FMR and FNMR are closest (the stricter on a tie),
    their mean, as calibrate.statistics.verification.eer. NaN for a replicate without impostor or genuine attempts."""
    def total(counts) -> np.ndarray:
        return np.asarray(counts.T @ weights.T).T  # replicates x bins (works for a dense or a sparse table)

    return eers_of(total(impostor_counts), total(genuine_counts))


def eers_of(impostors: np.ndarray, genuine: np.ndarray) -> np.ndarray:
    """The EER of each replicate (rows) from its attempts per bin (replicates x bins), as :func:`replicate_eers`."""
    imp = np.cumsum(impostors, axis=1)
    gen = np.cumsum(genuine, axis=1)
    n_imp, n_gen = imp[:, -1:], gen[:, -1:]
    with np.errstate(invalid="ignore", divide="ignore"):
        fmr = imp[:, :-1] / n_imp
        fnmr = 1.0 - gen[:, :-1] / n_gen
    gap = fnmr - fmr  # non-increasing along the thresholds
    last = np.clip((gap >= 0).sum(axis=1) - 1, 0, gap.shape[1] - 1)
    after = np.minimum(last + 1, gap.shape[1] - 1)
    rows = np.arange(gap.shape[0])
    pick = np.where(np.abs(gap[rows, after]) < np.abs(gap[rows, last]), after, last)
    out = (fmr[rows, pick] + fnmr[rows, pick]) / 2.0
    out[(n_imp[:, 0] <= 0) | (n_gen[:, 0] <= 0)] = np.nan
    return out


def class_interval(impostor_counts, genuine_counts, seed=0, level: float = 0.95,
                   replicates: int = REPLICATES) -> tuple[float | None, float | None]:
    """(low, high): the ``level`` percentile interval of the EER over ``replicates`` draws of the units (rows of the
    :func:`bin_counts` tables, which hold the same units in the same order) with replacement."""
    n_units = impostor_counts.shape[0]
    rng = np.random.default_rng(seed)
    chunk = max(1, min(replicates, _BLOCK // max(n_units, 1)))
    eers = []
    for start in range(0, replicates, chunk):
        r = min(chunk, replicates - start)
        draws = rng.integers(0, n_units, size=(r, n_units))
        weights = np.bincount((draws + (np.arange(r) * n_units)[:, None]).ravel(),
                              minlength=r * n_units).reshape(r, n_units).astype(np.float64)
        eers.append(replicate_eers(impostor_counts, genuine_counts, weights))
    return _percentiles(np.concatenate(eers), level)


def attempt_interval(pooled: PooledScores, thresholds: np.ndarray, seed=0, level: float = 0.95,
                     replicates: int = REPLICATES) -> tuple[float | None, float | None]:
    """(low, high) with every attempt its own unit: the genuine and the impostor attempts each resampled (a multinomial
    draw over the bins of ``thresholds`` is that resample), as FEERCI does."""
    rng = np.random.default_rng(seed)
    imp = pooled_bins(pooled.accepted_impostors, pooled.n_impostors, thresholds)
    gen = pooled_bins(pooled.accepted_genuine, pooled.n_genuine, thresholds)
    return _percentiles(eers_of(rng.multinomial(pooled.n_impostors, imp / imp.sum(), size=replicates).astype(np.float64),
                                rng.multinomial(pooled.n_genuine, gen / gen.sum(), size=replicates).astype(np.float64)),
                        level)


def pooled_bins(accepted, n: int, thresholds: np.ndarray) -> np.ndarray:
    """Every attempt's bin of ``thresholds`` counted (:func:`bin_counts` with ``units`` None, one row) from the counts
    ``accepted(t)`` of attempts ``d <= t`` and their number ``n``."""
    at = np.asarray(accepted(thresholds), dtype=np.int64)
    return np.diff(np.concatenate([[0], at, [n]])).astype(np.float64)


def _percentiles(eers: np.ndarray, level: float) -> tuple[float | None, float | None]:
    eers = eers[np.isfinite(eers)]
    if not eers.size:
        return None, None
    a = (1.0 - level) / 2.0
    return float(np.quantile(eers, a)), float(np.quantile(eers, 1.0 - a))


def stacked(tables: list):
    """The units of several :func:`bin_counts` tables (dense or sparse) one after the other."""
    if any(not isinstance(t, np.ndarray) for t in tables):
        from scipy.sparse import vstack

        return vstack(tables, format="csr")
    return np.vstack(tables)


def eer_interval(pooled: PooledScores, eer: float, impostor_units: np.ndarray | None = None,
                 genuine_units: np.ndarray | None = None, n_units: int = 0, seed=0, level: float = 0.95,
                 replicates: int = REPLICATES) -> tuple[float | None, float | None]:
    """(low, high): the ``level`` bootstrap interval of the EER (see the module docstring) of ``pooled``'s attempts,
    whose units (codes below ``n_units``) are given in the same order; None for both: every attempt is its own
    unit (:func:`attempt_interval`). ``eer``: the point estimate (it places the grid). (None, None) without both
    kinds of attempt."""
    if not pooled.n_impostors or not pooled.n_genuine or not math.isfinite(eer):
        return None, None
    thresholds = grid(pooled, eer)
    if impostor_units is None:
        return attempt_interval(pooled, thresholds, seed, level, replicates)
    return class_interval(bin_counts(pooled.impostors, impostor_units, thresholds, n_units),
                          bin_counts(pooled.genuine, genuine_units, thresholds, n_units), seed, level, replicates)


def with_interval(metrics: dict, low: float | None, high: float | None, units: str, level: float = 0.95) -> dict:
    """``metrics`` (calibrate.statistics.verification.verification_metrics) with the interval's fields after
    ``eer_high``: ``eer_ci_low``/``eer_ci_high``, ``eer_ci_level`` and ``eer_ci_units`` (what was resampled)."""
    out = {}
    for key, value in metrics.items():
        out[key] = value
        if key == "eer_high":
            out.update({"eer_ci_low": low, "eer_ci_high": high, "eer_ci_level": level, "eer_ci_units": units})
    return out
