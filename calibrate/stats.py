"""Order statistics and binomial intervals shared by the core and the plugins (a public core module).

* ``interpolate_rank`` / ``interp_threshold``: the paper's linear interpolation between order statistics;
* ``rank_values`` / ``below_ties``: the k-th smallest value and the tie rule of the order-statistic bound;
* ``clopper_pearson``: the exact binomial interval of k successes in n trials;
* ``saved_reach`` / ``saved_pool_count``: how much of a pooled sample a saved calibration keeps
  (``FittedModel.compact``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np


def interpolate_rank(sorted_values: np.ndarray, ranks: np.ndarray) -> np.ndarray:
    """Linear interpolation between order statistics at 1-based ``ranks`` (clamped to [1, N])."""
    d = np.asarray(sorted_values, dtype=np.float64)
    n = d.size
    k = np.asarray(ranks, dtype=np.float64)
    lo = np.clip(np.floor(k).astype(np.int64), 1, n)
    hi = np.clip(np.ceil(k).astype(np.int64), 1, n)
    frac = np.where(hi > lo, k - lo, 0.0)
    return d[lo - 1] + frac * (d[hi - 1] - d[lo - 1])


def interp_threshold(sorted_distances: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """The paper's interpolation formula for every target (``sorted_distances`` ascending)."""
    d = np.asarray(sorted_distances, dtype=np.float64)
    k = np.asarray(targets, dtype=np.float64) * d.size
    return np.where(k <= 1.0, k * d[0], interpolate_rank(d, k))


def interp_thresholds_segments(values: np.ndarray, offsets: np.ndarray, rows: np.ndarray,
                               targets: np.ndarray) -> np.ndarray:
    """:func:`interp_threshold` for many classes at once, (len(rows), T): class i's ascending distances are
    ``values[offsets[i]:offsets[i + 1]]`` (non-empty); no loop over classes."""
    v = np.asarray(values, dtype=np.float64)
    rows = np.asarray(rows, dtype=np.int64)
    start = np.asarray(offsets, dtype=np.int64)[rows][:, None]
    n = (np.asarray(offsets, dtype=np.int64)[rows + 1][:, None] - start)
    k = np.asarray(targets, dtype=np.float64)[None, :] * n
    lo = np.clip(np.floor(k).astype(np.int64), 1, n)
    hi = np.clip(np.ceil(k).astype(np.int64), 1, n)
    frac = np.where(hi > lo, k - lo, 0.0)
    d_lo, d_hi = v[start + lo - 1], v[start + hi - 1]
    return np.where(k <= 1.0, k * v[start], d_lo + frac * (d_hi - d_lo))


def rank_values(sorted_values: np.ndarray, ranks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the k-th smallest value for each 1-based rank k, clipped to the sample; whether the next value is
    tied with it)."""
    v = np.asarray(sorted_values, dtype=np.float64)
    k = np.clip(np.asarray(ranks, dtype=np.int64), 1, v.size)
    out = v[k - 1].copy()
    return out, (k < v.size) & (v[np.minimum(k, v.size - 1)] == out)


def below_ties(sorted_values: np.ndarray, ranks: np.ndarray) -> np.ndarray:
    """The k-th smallest value for each 1-based rank k, or just below it (one float step) when the next
    value is tied with it: ``distance <= threshold`` then accepts at most k of the values, never a whole
    tie group beyond k (the order-statistic bound counts k)."""
    out, tied = rank_values(sorted_values, ranks)
    out[tied] = np.nextafter(out[tied], -np.inf)
    return out


def tied_floor(values: np.ndarray) -> tuple[float, float]:
    """The smallest of ``values`` and the share of them equal to it: no threshold under
    ``distance <= threshold`` can accept a share of impostors between 0 and that share."""
    v = np.asarray(values, dtype=np.float64).ravel()
    if v.size == 0:
        return float("nan"), 0.0
    smallest = float(v.min())
    return smallest, float(np.count_nonzero(v == smallest)) / v.size


def tie_message(smallest: float, tied: float, below: list[float]) -> str:
    """Why targets under the share of tied smallest distances cannot be met (one sentence)."""
    return (f"{100 * tied:.3g}% of the training impostor distances equal the smallest one ({smallest:.6g}); "
            f"at target(s) {', '.join(f'{100 * t:.3g}%' for t in sorted(below, reverse=True))} no threshold "
            "can be on target, since `distance <= threshold` accepts all of these ties or none of them: "
            "a matcher with finer scores (or a transform that keeps them apart) is needed there")


def _beta_ppf():
    """The beta quantile function ``(q, a, b) -> x`` that ``scipy.stats.beta.ppf`` evaluates (Boost's), taken
    from scipy.special so that a run does not import scipy.stats (about 0.3 s) for four intervals."""
    try:
        from scipy.special._ufuncs import _beta_ppf
    except ImportError:  # pragma: no cover - private in scipy; the public route computes the same
        from scipy.stats import beta

        return beta.ppf
    return _beta_ppf


def clopper_pearson(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """Exact binomial interval for k successes in n trials."""
    if n == 0:
        return float("nan"), float("nan")
    ppf = _beta_ppf()  # the arguments are always valid (0 < q < 1, a, b >= 1): beta.ppf's checks are not needed
    a = (1 - level) / 2
    low = 0.0 if k == 0 else float(ppf(a, k, n - k + 1))
    high = 1.0 if k == n else float(ppf(1 - a, k + 1, n - k))
    return low, high


#: a saved model answers target FPRs up to the calibration's largest target, and at least up to this rate
#: (FittedModel.compact: pooled models keep only the lowest values of their pooled sample)
SAVED_REACH = 0.01
#: ... and a saved pooled sample keeps at least this many of its lowest values (about 2 MB of JSON), so
#: that a gallery of up to this many training distances answers every target
SAVED_POOL = 100_000


def saved_reach(targets: Sequence[float]) -> float:
    """The largest target FPR a saved calibration must answer: its largest target, at least :data:`SAVED_REACH`."""
    return float(max([SAVED_REACH, *(float(t) for t in targets)]))


def saved_pool_count(n_total: int, reach: float) -> int:
    """How many of a pooled sample's ``n_total`` lowest values a saved model keeps to answer every target up
    to ``reach`` (a pooled quantile at e reads ranks up to ``ceil(e N) + 1``): at least :data:`SAVED_POOL`."""
    return int(min(n_total, max(math.ceil(reach * n_total) + 1, SAVED_POOL)))
