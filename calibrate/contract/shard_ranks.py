"""Exact order statistics of values pooled over every shard of a sharded run (re-exported by calibrate.contract.sharded,
the public module): per-shard histograms of the values' order-preserving keys, then only the values in the bins that
hold the ranks wanted; and, for sets each shifted by a constant (auto's groups, group_shift.py), the ranks of their
union from the sets' own histograms (one pass where two would be needed: :func:`shifted_ranks`).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from calibrate.contract.packed import _key_values, order_keys
from calibrate.errors import DataError

#: order-preserving keys are binned on their top bits: 2^20 bins, about 1/256 of a binade each
_BIN_SHIFT = 44


def _named_histograms(training, arg, index):
    values_fn, values_arg = arg
    out = {}
    for name, values in values_fn(training, values_arg).items():
        out[name] = histogram(values)
    return out


def histogram(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(bins, counts) of the values' order keys: counted over the span of bins they use, not sorted."""
    bins = (order_keys(np.asarray(values, dtype=np.float64)) >> np.uint64(_BIN_SHIFT)).astype(np.int64)
    if not bins.size:
        return bins, bins
    low = int(bins.min())
    per_bin = np.bincount(bins - low)
    used = np.flatnonzero(per_bin)
    return used + low, per_bin[used].astype(np.int64)


def _in_bins(training, arg, index):
    values_fn, values_arg, bins = arg
    out = {}
    for name, values in values_fn(training, values_arg).items():
        if name in bins:
            values = np.asarray(values, dtype=np.float64)
            out[name] = values[np.isin(order_keys(values) >> np.uint64(_BIN_SHIFT), bins[name])]
    return out


def named_histograms(runner, values_fn: Callable, values_arg: Any) -> dict[str, tuple]:
    """One pass: per named value set of ``values_fn(training, values_arg)`` (a dict of arrays from each shard's
    :class:`ShardTraining`), the histogram of its values' order keys over every shard, as (bins, counts)."""
    hists = runner.map_training(_named_histograms, (values_fn, values_arg))
    merged: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for name in {n for h in hists for n in h}:
        bins = np.concatenate([h[name][0] for h in hists if name in h])
        counts = np.concatenate([h[name][1] for h in hists if name in h])
        uniq, inverse = np.unique(bins, return_inverse=True)
        merged[name] = (uniq, np.bincount(inverse, weights=counts, minlength=uniq.size).astype(np.int64))
    return merged


def bins_of(hist: tuple, ranks) -> np.ndarray:
    """The bins of a histogram (:func:`named_histograms`) holding each 0-based rank."""
    return hist[0][np.searchsorted(np.cumsum(hist[1]), np.asarray(ranks, dtype=np.int64) + 1)]


def gather_bins(runner, values_fn: Callable, values_arg: Any, bins: dict[str, np.ndarray]) -> dict:
    """One pass: per named set, every shard's values in the given bins of order keys, pooled and sorted."""
    gathered = runner.map_training(_in_bins, (values_fn, values_arg, {n: np.unique(b) for n, b in bins.items()}))
    return {name: np.sort(np.concatenate([g[name] for g in gathered if name in g] or [np.zeros(0)])) for name in bins}


def at_ranks(hist: tuple, values: np.ndarray, ranks) -> dict[int, float]:
    """{rank: value} of the pooled set whose histogram is ``hist`` and whose values in the bins holding ``ranks``
    (and only those bins) are ``values``, sorted (:func:`gather_bins`)."""
    bins, counts = hist
    cumulative = np.cumsum(counts)
    at = np.searchsorted(cumulative, np.asarray(ranks, dtype=np.int64) + 1)
    needed = np.unique(at)
    if values.size != int(counts[needed].sum()):
        raise DataError("the shards changed between two passes of the run (the counts differ); do not write into "
                        "the shards while a run reads them")
    # the gathered values are those of the needed bins, in bin order: where each needed bin starts among them
    start = dict(zip(needed.tolist(), (np.cumsum(counts[needed]) - counts[needed]).tolist()))
    return {int(r): float(values[start[b] + int(r) - int(cumulative[b] - counts[b])])
            for r, b in zip(np.asarray(ranks).tolist(), at.tolist())}


def select_ranks(runner, values_fn: Callable, values_arg: Any,
                 ranks: Callable[[dict[str, int]], dict[str, list[int]]]) -> tuple[dict[str, int], dict[str, dict]]:
    """Exact order statistics of values pooled over every shard: ``values_fn(training, values_arg)`` gives each
    shard's named value sets (a dict of arrays, from its :class:`ShardTraining`); ``ranks(n)``, given each set's
    pooled count, the 0-based ranks wanted of each. Returns (the counts, per set {rank: value}), the very floats
    ``np.sort`` of the pooled set holds there. Two passes: histograms of the values' order keys
    (:func:`named_histograms`), then only the values in the bins holding a wanted rank (:func:`gather_bins`)."""
    merged = named_histograms(runner, values_fn, values_arg)
    n = {name: int(c.sum()) for name, (_, c) in merged.items()}
    wanted = {name: sorted({int(r) for r in rs}) for name, rs in ranks(n).items() if rs}
    for name, rs in wanted.items():
        if any(not 0 <= r < n.get(name, 0) for r in rs):
            raise ValueError(f"select_ranks: a rank of {name!r} outside 0..{n.get(name, 0) - 1}")
    gathered = gather_bins(runner, values_fn, values_arg,
                           {name: bins_of(merged[name], rs) for name, rs in wanted.items()})
    return n, {name: at_ranks(merged[name], gathered[name], rs) for name, rs in wanted.items()}


def _shifted_in_range(training, arg, index):
    values_fn, values_arg, shifts, brackets = arg
    sets = values_fn(training, values_arg)
    w = np.concatenate([np.asarray(sets[name], dtype=np.float64) - shift for name, shift in shifts.items()])
    return [(int(np.count_nonzero(w < lo)), w[(w >= lo) & (w <= hi)]) for lo, hi in brackets]


def _shifted_union(training, arg):
    values_fn, values_arg, shifts = arg
    sets = values_fn(training, values_arg)
    return {"union": np.concatenate([np.asarray(sets[name], dtype=np.float64) - shift
                                     for name, shift in shifts.items()])}


def _value(key: int) -> float:
    return float(_key_values(np.array([key], dtype=np.uint64))[0])


def _key(value: float) -> int:
    return int(order_keys(np.array([value]))[0])


def shifted_ranks(runner, values_fn: Callable, values_arg: Any, hists: dict[str, tuple], shifts: dict[str, float],
                  ranks) -> dict[int, float]:
    """{rank: value} of the union of the named sets each less its shift (``values - shifts[name]``, computed so on
    every shard), from the sets' own histograms (``hists``, :func:`named_histograms` of the unshifted sets) and one
    pass: each rank is bracketed between two values from the histograms (a bin's width, and one more for the
    subtraction's rounding), and every shard returns how many shifted values lie below the bracket and those within.
    A bracket that misses (where bins are finer than the rounding, near 0) is done again by :func:`select_ranks` on
    the shifted values (two passes more); the values are exact either way."""
    names = list(shifts)
    cum = {n: (hists[n][0], np.cumsum(hists[n][1])) for n in names if n in hists and hists[n][0].size}

    def count(t: float, margin: int) -> int:  # bins through x's bin (+ margin), every set: a bound on count(w <= t)
        total = 0
        for name, (bins, c) in cum.items():
            b = (_key(t + shifts[name]) >> _BIN_SHIFT) + margin
            at = int(np.searchsorted(bins, b, side="right"))
            total += int(c[at - 1]) if at else 0
        return total

    low = min(_value(int(b[0]) << _BIN_SHIFT) - shifts[n] for n, (b, _) in cum.items()) if cum else 0.0
    high = max(_value(((int(b[-1]) + 1) << _BIN_SHIFT) - 1) - shifts[n] for n, (b, _) in cum.items()) if cum else 0.0
    k_low, k_high = _key(low - abs(low) - 1.0), _key(high + abs(high) + 1.0)

    def search(ok) -> float:  # the largest key in [k_low, k_high] where ok holds (ok is monotone: true then false)
        a, b = k_low, k_high
        while a < b:
            mid = (a + b + 1) // 2
            if ok(_value(mid)):
                a = mid
            else:
                b = mid - 1
        return _value(a)

    brackets = []
    for r in ranks:
        lo = search(lambda t: count(t, 1) <= r)           # surely fewer than r + 1 shifted values below lo
        hi = search(lambda t: count(t, -2) < r + 1)       # the next value up surely has r + 1 at or below it
        brackets.append((lo, float(np.nextafter(hi, np.inf))))
    parts = runner.map_training(_shifted_in_range, (values_fn, values_arg, shifts, brackets))
    out = {}
    for j, r in enumerate(ranks):
        below = sum(p[j][0] for p in parts)
        inside = np.sort(np.concatenate([p[j][1] for p in parts]))
        if below <= r < below + inside.size:
            out[int(r)] = float(inside[r - below])
    missed = [int(r) for r in ranks if int(r) not in out]
    if missed:
        out.update(select_ranks(runner, _shifted_union, (values_fn, values_arg, shifts), lambda n: {"union": missed})[1]
                   ["union"])
    return out
