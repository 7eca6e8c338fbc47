"""Order statistics and binomial intervals shared by the core and the plugins (a public core module).

* ``interpolate_rank`` / ``interp_threshold``: the paper's linear interpolation between order statistics;
* ``rank_values`` / ``below_ties``: the k-th smallest value and the tie rule of the order-statistic bound;
* ``clopper_pearson``: the exact binomial interval of k successes in n trials;
* ``saved_reach`` / ``saved_pool_count`` / ``lowest_segments`` / ``refuse_beyond``: how far a saved calibration
  answers, how much of a sample it keeps for that (``FittedModel.compact``), and the refusal beyond.
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


def interp_threshold(sorted_distances: np.ndarray, targets: np.ndarray, n: int | None = None) -> np.ndarray:
    """The paper's interpolation formula for every target (``sorted_distances`` ascending); ``n``: the sample's
    size when ``sorted_distances`` are only its lowest values (a saved model's, enough for the targets)."""
    d = np.asarray(sorted_distances, dtype=np.float64)
    k = np.asarray(targets, dtype=np.float64) * (d.size if n is None else int(n))
    return np.where(k <= 1.0, k * d[0], interpolate_rank(d, k))


def interp_thresholds_segments(values: np.ndarray, offsets: np.ndarray, rows: np.ndarray,
                               targets: np.ndarray, counts: np.ndarray | None = None) -> np.ndarray:
    """:func:`interp_threshold` for many classes at once, (len(rows), T): class i's ascending distances are
    ``values[offsets[i]:offsets[i + 1]]`` (non-empty); no loop over classes. ``counts``: each class's sample size
    when its segment holds only its lowest values (enough for the targets: :func:`refuse_beyond`)."""
    v = np.asarray(values, dtype=np.float64)
    rows = np.asarray(rows, dtype=np.int64)
    start = np.asarray(offsets, dtype=np.int64)[rows][:, None]
    n = (np.asarray(offsets, dtype=np.int64)[rows + 1][:, None] - start if counts is None
         else np.asarray(counts, dtype=np.int64)[rows][:, None])
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


#: a saved calibration answers target FPRs up to REACH_FACTOR times its largest target, and at least up to this
#: rate (:func:`saved_reach`; FittedModel.compact keeps only the training values those targets read)
SAVED_REACH = 0.01
#: ... how far above its largest target a saved calibration answers: a deployment may loosen its target tenfold
#: without refitting
REACH_FACTOR = 10.0


def saved_reach(targets: Sequence[float]) -> float:
    """The largest target FPR a saved calibration answers: :data:`REACH_FACTOR` times its largest target, at least
    :data:`SAVED_REACH`, at most 1 (1: every target, the model saved whole)."""
    return float(min(1.0, max([SAVED_REACH, *(REACH_FACTOR * float(t) for t in targets)])))


def saved_pool_count(n_total: int, reach: float) -> int:
    """How many of a sample's ``n_total`` lowest values a saved model keeps to answer every target up to ``reach``:
    the paper's interpolation at e reads ranks up to ``ceil(e n)``, and the tie rule of an order statistic one
    more (:func:`rank_values`), so ``ceil(reach n) + 1`` (all of them when that is more)."""
    return int(min(n_total, math.ceil(reach * n_total) + 1))


def lowest_segments(values: np.ndarray, offsets: np.ndarray, reach: float, counts: np.ndarray | None = None
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(kept values, their offsets, each segment's full size) of ascending segments ``values[offsets[i]:offsets[i +
    1]]`` cut to their lowest :func:`saved_pool_count` values each: what a class-specific model keeps of its
    classes' sorted training distances to answer every target up to ``reach`` (no loop over segments).
    ``counts``: the segments' full sizes when they already hold only their lowest values."""
    off = np.asarray(offsets, dtype=np.int64)
    held = np.diff(off)
    n = held if counts is None else np.asarray(counts, dtype=np.int64)
    kept = np.minimum(held, np.ceil(reach * n).astype(np.int64) + 1)
    starts = np.repeat(off[:-1], kept)
    within = np.arange(int(kept.sum()), dtype=np.int64) - np.repeat(np.r_[0, np.cumsum(kept)[:-1]], kept)
    return (np.asarray(values, dtype=np.float64)[starts + within],
            np.r_[0, np.cumsum(kept)].astype(np.int64), n)


def segment_reach(kept: np.ndarray, n: np.ndarray) -> float:
    """The largest target FPR every segment of ``kept`` lowest values out of ``n`` answers (1 when all are kept)."""
    kept, n = np.asarray(kept, dtype=np.int64), np.asarray(n, dtype=np.int64)
    partial = kept < n
    return float(((kept[partial] - 1) / n[partial]).min()) if partial.any() else 1.0


def refuse_beyond(targets: np.ndarray, kept: np.ndarray, n: np.ndarray, who: str, *, ranks: bool = False) -> None:
    """A model that keeps, per segment (a class, or the pooled sample), only its lowest ``kept`` of ``n`` values
    refuses a target whose threshold reads beyond them (rank ``ceil(e n)`` above ``kept``; with ``ranks``,
    ``targets`` are 1-based order statistics read with their tie rule, rank k + 1 above ``kept``), with a
    ParameterError naming what it answers and the fix (a saved calibration refuses sooner, at the reach it states:
    ``Calibration.reach``)."""
    from calibrate.errors import ParameterError

    kept, n = np.atleast_1d(np.asarray(kept, dtype=np.int64)), np.atleast_1d(np.asarray(n, dtype=np.int64))
    partial = kept < n
    if not partial.any():
        return
    t = np.asarray(targets, dtype=np.float64)
    need = (np.broadcast_to(t[None, :] + 1, (int(partial.sum()), t.size)) if ranks
            else np.ceil(t[None, :] * n[partial][:, None]))
    if np.any(need > kept[partial][:, None]):
        where = (f"the pooled sample's lowest {int(kept[0])} of {int(n[0])} values" if n.size == 1
                 else f"each class's lowest training distances ({int(kept.sum())} of {int(n.sum())})")
        raise ParameterError(f"{who}: this saved calibration keeps {where}, enough for target FPRs up to "
                             f"{segment_reach(kept, n):.4g}; fit again with the larger target among its targets (a "
                             "recipe's `evaluation: targets`, `calibrate fit --fpr`, `calibrate.fit(targets=...)`)")
