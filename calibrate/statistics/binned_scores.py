"""Pooled attempts that are not in one place (a sharded run's evaluation attempts): the questions
:class:`calibrate.statistics.verification.PooledScores` answers, answered from reductions over the shards.

The genuine attempts (about one per probe) are held whole, sorted. The impostor attempts are held as the histogram of
their order-preserving keys (2^20 bins, 1/256 of a binade each: calibrate.contract.packed.order_keys), with the values
of some bins (*resolved*) and the exact count at or below some thresholds (*counted*). A count is exact at a threshold
in a bin that holds no attempt, in a resolved bin, or where it was counted; an order statistic is exact in a resolved
bin; elsewhere both are interpolated linearly within their bin (off by at most the bin's count, or its width), and
``interpolated`` counts those answers.

:meth:`BinnedScores.resolve` makes a computation (any code written against PooledScores' methods) exact: it runs it
while recording the bins and thresholds it reads, has the run's passes over the shards (a :class:`Resolver`) gather
the values of those bins, in the order first read and within ``gather_values`` values in all, and runs it again until
it reads no new bin or the budget is spent; then one more pass counts what is left exactly (thresholds in bins not
resolved, per-unit bins, and the AUC's pairs where the bins holding genuine attempts were not all gathered: the
genuine attempts are then sent to every shard) and the computation runs a last time on the exact answers.
"""

from __future__ import annotations

from typing import Any, Callable, Protocol

import numpy as np

from calibrate.contract.packed import _key_values, order_keys
from calibrate.errors import DataError

#: order-preserving keys are binned on their top bits (calibrate.contract.sharded's bins)
BIN_SHIFT = 44
#: impostor values :meth:`BinnedScores.resolve` gathers into the run's process at most (8 bytes each)
GATHER_VALUES = 4_000_000


class Resolver(Protocol):
    """What :meth:`BinnedScores.resolve` asks of the run (a pass over the shards each)."""

    def gather(self, bins: np.ndarray) -> np.ndarray:
        """Every impostor value in the given bins (in any order)."""

    def finish(self, thresholds: np.ndarray, auc: bool, units: list[np.ndarray]) -> tuple[np.ndarray, Any, list]:
        """(the impostor attempts at or below each threshold; with ``auc``, :meth:`BinnedScores.auc_counts`'s pair
        of counts, else None; per array of ``units``, the (impostor, genuine) tables of each unit's attempts in each bin
        of those thresholds, as calibrate.statistics.eer_interval.bin_counts makes them)."""


def _edges(bins: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The smallest and the largest value of each bin."""
    b = np.asarray(bins, dtype=np.uint64)
    return (_key_values(b << np.uint64(BIN_SHIFT)),
            _key_values(((b + np.uint64(1)) << np.uint64(BIN_SHIFT)) - np.uint64(1)))


class BinnedScores:
    """The impostor and genuine attempts of an evaluation as distances (module docstring): ``genuine`` every genuine
    attempt; ``bins`` and ``counts`` the histogram of the impostor attempts' order keys (bin = key >> BIN_SHIFT);
    ``resolver`` the run's passes (None: interpolated answers only); ``d_prime``: the decidability index, computed
    by the run on the matcher's own scores."""

    def __init__(self, genuine, bins, counts, resolver: Resolver | None = None, d_prime: float = float("nan"),
                 gather_values: int = GATHER_VALUES):
        self.genuine = np.sort(np.asarray(genuine, dtype=np.float64).ravel())
        order = np.argsort(np.asarray(bins, dtype=np.int64), kind="stable")
        self._bins = np.asarray(bins, dtype=np.int64)[order]
        self._counts = np.asarray(counts, dtype=np.int64)[order]
        if np.any(np.diff(self._bins) == 0) or np.any(self._counts <= 0):
            raise ValueError("the histogram's bins must be distinct and hold attempts")
        self._through = np.cumsum(self._counts)
        self._before = np.concatenate([[0], self._through])  # attempts in the bins before position j
        self._lo, self._hi = _edges(self._bins)
        self._values: dict[int, np.ndarray] = {}
        self._index: tuple[np.ndarray, np.ndarray] | None = None  # the gathered values laid out (_resolved)
        self._counted: dict[float, int] = {}
        self._auc: tuple[int, int] | None = None
        self._units: dict[bytes, tuple] = {}
        self._resolver, self._d_prime, self.gather_values = resolver, float(d_prime), int(gather_values)
        self._planning = False
        self._asked_bins: dict[int, None] = {}
        self._asked_thresholds: dict[float, None] = {}
        self._asked_units: dict[bytes, np.ndarray] = {}
        self._asked_auc = False
        #: answers interpolated within a bin since the last :meth:`resolve` (0: every answer was exact)
        self.interpolated = 0

    # ---- PooledScores' questions ----------------------------------------------------------------------

    @property
    def n_impostors(self) -> int:
        return int(self._through[-1]) if self._through.size else 0

    @property
    def n_genuine(self) -> int:
        return int(self.genuine.size)

    def accepted_genuine(self, t) -> np.ndarray:
        return np.searchsorted(self.genuine, np.asarray(t, dtype=np.float64), side="right")

    def genuine_at(self, ranks):
        return self.genuine[ranks]

    def fmr(self, t) -> np.ndarray:
        return self.accepted_impostors(t) / max(self.n_impostors, 1)

    def fnmr(self, t) -> np.ndarray:
        return 1.0 - self.accepted_genuine(t) / max(self.n_genuine, 1)

    def d_prime(self) -> float:
        return self._d_prime

    def _resolved(self) -> tuple[np.ndarray, np.ndarray]:
        """(per histogram position, where its gathered values start in the second array, -1 where none were; every
        gathered value, bins in order, each bin's sorted: so sorted as a whole)."""
        if self._index is None:
            start = np.full(self._bins.size, -1, dtype=np.int64)
            parts, at = [], 0
            for j in np.flatnonzero(np.isin(self._bins, np.fromiter(self._values, dtype=np.int64))).tolist():
                start[j] = at
                parts.append(self._values[int(self._bins[j])])
                at += parts[-1].size
            values = np.concatenate(parts) if parts else np.empty(0)
            for j in np.flatnonzero(start >= 0).tolist():  # each bin's values a view of the whole: held once
                b = int(self._bins[j])
                self._values[b] = values[start[j]:start[j] + self._values[b].size]
            self._index = (start, values)
        return self._index

    def accepted_impostors(self, t, record: bool = True) -> np.ndarray:
        """How many impostor attempts ``d <= t`` accepts (exact where it can be: module docstring)."""
        t = np.asarray(t, dtype=np.float64)
        flat = t.ravel()
        if not self._bins.size:
            return np.zeros(t.shape, dtype=np.int64)
        b = (order_keys(flat) >> np.uint64(BIN_SHIFT)).astype(np.int64)
        pos = np.searchsorted(self._bins, b)
        out = self._before[pos].copy()
        inside = np.flatnonzero((pos < self._bins.size) & (self._bins[np.minimum(pos, self._bins.size - 1)] == b))
        if not inside.size:
            return out.reshape(t.shape)
        j, v = pos[inside], flat[inside]
        start, values = self._resolved()
        got = start[j] >= 0
        out[inside[got]] += np.searchsorted(values, v[got], side="right") - start[j[got]]
        rest = np.flatnonzero(~got)
        if rest.size:
            known = np.array([self._counted.get(x, -1) for x in v[rest].tolist()], dtype=np.int64)
            counted = known >= 0
            out[inside[rest[counted]]] = known[counted]
            left = rest[~counted]
            if left.size:
                jl = j[left]
                lo, hi = self._lo[jl], self._hi[jl]
                with np.errstate(invalid="ignore", divide="ignore"):
                    frac = np.where(np.isfinite(hi - lo) & (hi > lo), (v[left] - lo) / (hi - lo), 1.0)
                out[inside[left]] += np.rint(np.clip(frac, 0.0, 1.0) * self._counts[jl]).astype(np.int64)
                if record:
                    if not self._planning:
                        self.interpolated += int(left.size)
                    self._asked_bins.update(dict.fromkeys(self._bins[jl].tolist()))
                    self._asked_thresholds.update(dict.fromkeys(v[left].tolist()))
        return out.reshape(t.shape)

    def impostor_at(self, ranks):
        """The impostor distances at 0-based ``ranks`` (exact in a resolved bin)."""
        r = np.asarray(ranks, dtype=np.int64)
        flat = r.ravel()
        if flat.size and (flat.min() < 0 or flat.max() >= self.n_impostors):
            raise IndexError(f"rank outside 0..{self.n_impostors - 1}")
        j = np.searchsorted(self._through, flat, side="right")  # the bin holding each rank
        within = flat - self._before[j]
        start, values = self._resolved()
        got = start[j] >= 0
        out = np.empty(flat.size)
        out[got] = values[start[j[got]] + within[got]]
        left = np.flatnonzero(~got)
        if left.size:
            jl = j[left]
            lo, hi = self._lo[jl], self._hi[jl]
            out[left] = lo + (within[left] + 0.5) / self._counts[jl] * (hi - lo)
            self._asked_bins.update(dict.fromkeys(self._bins[jl].tolist()))
            if not self._planning:
                self.interpolated += int(left.size)
        return float(out[0]) if r.ndim == 0 else out.reshape(r.shape)

    def auc_counts(self) -> tuple[int, int]:
        """(sum over genuine attempts of the impostor attempts beyond it, of those tied with it): exact where every bin
        holding both a genuine attempt (or the float just below one) and impostor attempts is resolved, or once a pass
        of :meth:`resolve` counted them against every genuine attempt; else from the histogram (ties taken as none)."""
        if self._auc is not None:
            return self._auc
        g = self.genuine
        below = np.nextafter(g, -np.inf)
        both = np.concatenate([g, below])
        held = self._held(both)
        start = self._resolved()[0]
        if np.all(start[held] >= 0):
            right = self.accepted_impostors(g, record=False)
            return int((self.n_impostors - right).sum()), int((right - self.accepted_impostors(below, record=False)).sum())
        self._asked_bins.update(dict.fromkeys(self._bins[held].tolist()))  # gathered if the budget allows
        self._asked_auc = True
        if not self._planning:
            self.interpolated += 1
        return int((self.n_impostors - self.accepted_impostors(g, record=False)).sum()), 0

    def _held(self, values: np.ndarray) -> np.ndarray:
        """The histogram positions (distinct) of the bins that hold impostor attempts and some of ``values``."""
        b = np.unique((order_keys(values) >> np.uint64(BIN_SHIFT)).astype(np.int64))
        pos = np.searchsorted(self._bins, b)
        inside = (pos < self._bins.size) & (self._bins[np.minimum(pos, self._bins.size - 1)] == b)
        return pos[inside]

    def unit_bins(self, thresholds: np.ndarray) -> tuple | None:
        """Per unit (enrolled class, by name), its impostor and genuine attempts in each bin of ``thresholds``
        (calibrate.statistics.eer_interval.bin_counts' tables): counted by the pass of :meth:`resolve`; None until
        then (and while it plans)."""
        thresholds = np.asarray(thresholds, dtype=np.float64)
        key = thresholds.tobytes()
        if key not in self._units:
            self._asked_units[key] = thresholds.copy()
            return None
        return self._units[key]

    # ---- making a computation exact ----------------------------------------------------------------------

    def _plan(self, compute: Callable) -> None:
        self._asked_bins, self._asked_thresholds, self._asked_units, self._asked_auc = {}, {}, {}, False
        self._planning = True
        try:
            compute(self)
        finally:
            self._planning = False

    def resolve(self, compute: Callable[["BinnedScores"], Any], rounds: int = 4) -> Any:
        """``compute(self)`` with its answers made exact (module docstring); without a resolver, as it is."""
        if self._resolver is None:
            return compute(self)
        budget = self.gather_values - sum(v.size for v in self._values.values())
        count_of = dict(zip(self._bins.tolist(), self._counts.tolist()))
        for _ in range(rounds):
            self._plan(compute)
            take, total = [], 0
            for b in self._asked_bins:
                if b in self._values or b not in count_of:
                    continue
                if total + count_of[b] <= budget:
                    take.append(b)
                    total += count_of[b]
            if not take:
                break
            self._take(take, count_of)
            budget -= total
        self._plan(compute)
        pending = [v for v, b in zip(self._asked_thresholds, self._threshold_bins(self._asked_thresholds))
                   if b not in self._values and v not in self._counted]
        units = [t for k, t in self._asked_units.items() if k not in self._units]
        want_auc = self._asked_auc and self._auc is None
        if pending or units or want_auc:
            counts, auc, tables = self._resolver.finish(np.array(pending, dtype=np.float64), want_auc, units)
            self._counted.update(zip(pending, np.asarray(counts, dtype=np.int64).tolist()))
            if want_auc:
                self._auc = (int(auc[0]), int(auc[1]))
            for t, table in zip(units, tables):
                self._units[t.tobytes()] = table
        self.interpolated = 0
        return compute(self)

    def _take(self, take: list[int], count_of: dict) -> None:
        """The values of the bins ``take`` gathered over the shards (one pass), each bin's sorted."""
        keys = np.sort(order_keys(np.asarray(self._resolver.gather(np.array(take, dtype=np.int64)), dtype=np.float64)))
        values, of_bin = _key_values(keys), (keys >> np.uint64(BIN_SHIFT)).astype(np.int64)
        del keys
        starts = np.searchsorted(of_bin, take, side="left")
        ends = np.searchsorted(of_bin, take, side="right")
        for b, a, e in zip(take, starts.tolist(), ends.tolist()):
            if e - a != count_of[b]:
                raise DataError("the shards changed between two passes of the run (an evaluation histogram's "
                                "counts differ); do not write into the shards while a run reads them")
            self._values[b] = values[a:e]
        self._index = None

    def _threshold_bins(self, values) -> list[int]:
        v = np.fromiter(values, dtype=np.float64)
        return (order_keys(v) >> np.uint64(BIN_SHIFT)).astype(np.int64).tolist() if v.size else []
