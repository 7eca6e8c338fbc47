"""What a draw from the reference world gives an estimator's ``simulate`` (calibrate.contract.base.Estimator):
:class:`Galleries`, B simulated galleries known at every rank or only at the ranks the estimators asked for, and
:class:`DrawPlan`, where a partial draw (calibrate.predicted.world.World.draw_galleries) puts its values;
:func:`sorted_unique`, the distinct ranks by one sort.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def sorted_unique(values: np.ndarray) -> np.ndarray:
    """The distinct values, ascending: ``np.unique`` by one sort (numpy 2.4's hashing ``np.unique`` takes 0.2-0.6 s on
    the 140,000 ranks of a partial draw at 1,680 classes; a sort takes 1 ms)."""
    v = np.sort(np.asarray(values).ravel())
    if v.size < 2:
        return v
    keep = np.empty(v.size, dtype=bool)
    keep[0] = True
    np.not_equal(v[1:], v[:-1], out=keep[1:])
    return v[keep]


class Galleries:
    """B simulated galleries, as an estimator's ``simulate`` reads them (calibrate.contract.base.Estimator).

    Each class's distances are known at some of its ranks: all of them (``full``), or only those the
    estimators asked for (``Estimator.simulation_ranks``: e.g. a class's lowest few and its quartiles),
    drawn jointly with the law of sorted samples (so a rank's value is exactly what a full gallery
    would hold there). :meth:`at` gathers values by 0-based rank within each class.
    """

    def __init__(self, counts: np.ndarray, keys: np.ndarray, values: np.ndarray, full: bool,
                 uniforms: np.ndarray | None = None):
        self.counts = np.asarray(counts, dtype=np.int64)
        self.offsets = np.concatenate([[0], np.cumsum(self.counts)])
        #: sorted global positions (class offset + rank) of the drawn values, and the values (B x len(keys))
        self.keys, self.values, self.full = keys, values, full
        #: the sorted uniforms the values were made from (a partial draw keeps them, so that it can be seen at more
        #: ranks: :func:`fill_between`), or None
        self.uniforms = uniforms

    @property
    def replicates(self) -> int:
        return int(self.values.shape[0])

    def at(self, ranks: np.ndarray) -> np.ndarray:
        """(B, C, R) the distances at 0-based ``ranks`` (C x R, each within its class's count), ascending
        ranks giving ascending values. KeyError when a rank was not drawn."""
        ranks = np.asarray(ranks, dtype=np.int64)
        if ranks.ndim != 2 or ranks.shape[0] != self.counts.size:
            raise ValueError(f"ranks must be (classes, R) = ({self.counts.size}, R); got shape {ranks.shape}")
        if np.any(ranks < 0) or np.any(ranks >= self.counts[:, None]):
            raise KeyError("a rank lies outside its class's count")
        wanted = self.offsets[:-1, None] + ranks
        if self.full:
            return self.values[:, wanted]
        idx = np.searchsorted(self.keys, wanted)
        idx = np.minimum(idx, self.keys.size - 1)
        if not np.array_equal(self.keys[idx], wanted):
            raise KeyError("a rank that was not drawn was asked for: declare it in simulation_ranks")
        return self.values[:, idx]

    def lowest_drawn(self) -> np.ndarray:
        """Per class, how many of its lowest values were drawn (ranks 0, 1, ... without a gap)."""
        if self.full:
            return self.counts.copy()
        cls = np.searchsorted(self.offsets, self.keys, side="right") - 1
        rank = self.keys - self.offsets[cls]
        # within a class the drawn ranks ascend and are unique: rank == position in the class's list
        # exactly along the leading run
        first = np.searchsorted(cls, np.arange(self.counts.size))
        position = np.arange(self.keys.size) - first[cls]
        return np.bincount(cls[rank == position], minlength=self.counts.size).astype(np.int64)

    def gallery(self, b: int) -> np.ndarray:
        """Gallery b's values in ImpostorDistances layout (full galleries only)."""
        if not self.full:
            raise KeyError("a partial gallery has no full value list")
        return self.values[b]

    def restricted(self, ranks: list[np.ndarray]) -> "Galleries":
        """These (full) galleries seen only at ``ranks`` (one 0-based array per class): what a partial draw
        of those ranks gives (the conformance kit compares simulate on it with fit on the full ones)."""
        keys = sorted_unique(np.concatenate([o + np.asarray(r, dtype=np.int64)
                                             for o, r in zip(self.offsets[:-1], ranks)]))
        return Galleries(self.counts, keys, self.values[:, keys], False)


@dataclass(frozen=True, eq=False)
class DrawPlan:
    """Where a partial draw (World.draw_galleries) puts its values: per class m sorted, unique ranks k_1 < ... < k_m
    (1-based) of its n, drawn as the m + 1 Gamma increments k_1, k_2 - k_1, ..., n + 1 - k_m of the partial sums S of
    n + 1 exponentials; the increments of all classes lie side by side in one row per gallery."""

    counts: np.ndarray
    #: (M,) ascending global positions (class offset + 0-based rank) of the drawn values, and each one's class
    keys: np.ndarray
    cls: np.ndarray
    #: (M + C,) the Gamma shapes of the increments, classes in order
    shapes: np.ndarray
    #: (M,) the column of each drawn value's partial sum S_(k_i) and of its class's S_(n+1)
    value_cols: np.ndarray
    total_cols: np.ndarray
    #: (C,) the column of the sum before each class's first increment (-1: none)
    before_cols: np.ndarray

    @classmethod
    def of(cls, counts: np.ndarray, ranks: list[np.ndarray]) -> "DrawPlan":
        counts = np.asarray(counts, dtype=np.int64)
        if len(ranks) != counts.size:
            raise ValueError("one array of ranks per class is needed")
        sizes = np.array([np.size(r) for r in ranks], dtype=np.int64)
        flat = (np.concatenate([np.asarray(r, dtype=np.int64).ravel() for r in ranks]) if counts.size else
                np.zeros(0, dtype=np.int64))
        of_class = np.repeat(np.arange(counts.size), sizes)
        if np.any(sizes == 0) or np.any(flat < 0) or np.any(flat >= counts[of_class]):
            raise ValueError("every class needs at least one rank, within its count")
        keys = np.concatenate([[0], np.cumsum(counts)])[:-1][of_class] + flat
        return cls.of_keys(counts, keys if np.all(np.diff(keys) > 0) else sorted_unique(keys))

    @classmethod
    def of_keys(cls, counts: np.ndarray, keys: np.ndarray) -> "DrawPlan":
        """The plan of a draw at ``keys``: ascending, unique global positions (class offset + 0-based rank), at
        least one in every class."""
        counts = np.asarray(counts, dtype=np.int64)
        offsets = np.concatenate([[0], np.cumsum(counts)])
        of_class = np.searchsorted(offsets, keys, side="right") - 1
        sizes = np.bincount(of_class, minlength=counts.size).astype(np.int64)
        starts = np.cumsum(sizes + 1) - (sizes + 1)  # each class's first increment
        within = np.arange(keys.size) - np.repeat(np.cumsum(sizes) - sizes, sizes)
        value_cols = starts[of_class] + within
        last = starts + sizes  # each class's S_(n+1)
        ends = np.empty(keys.size + counts.size, dtype=np.int64)  # the 1-based rank each increment ends at
        ends[value_cols] = keys - offsets[:-1][of_class] + 1
        ends[last] = counts + 1
        begins = np.empty_like(ends)
        begins[1:] = ends[:-1]
        begins[starts] = 0
        return cls(counts, keys.astype(np.int64), of_class, (ends - begins).astype(np.float64), value_cols,
                   last[of_class], starts - 1)

    @property
    def drawn(self) -> int:
        return int(self.keys.size)


def fill_between(counts: np.ndarray, keys: np.ndarray, uniforms: np.ndarray, wider: np.ndarray,
                 rng: np.random.Generator) -> np.ndarray:
    """The sorted uniforms of galleries drawn at ``keys`` (B x len(keys)), seen also at ``wider`` (ascending global
    positions, a superset of ``keys``): (B x len(wider)), the drawn ones kept. Exact in law: given a class's uniforms at
    1-based ranks a < b, those in between are sorted uniforms on (U_a, U_b), and the ones at ranks a < j_1 < ... < j_p
    < b are U_a + (U_b - U_a) T_l / T, T_l the partial sums of Gamma(j_1 - a), ..., Gamma(b - j_p) and T their sum
    (a class's rank 0 has U = 0 and its rank n + 1 has U = 1)."""
    counts = np.asarray(counts, dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(counts)])
    b_count, c_count = uniforms.shape[0], counts.size
    cls = np.searchsorted(offsets, wider, side="right") - 1
    old = np.zeros(wider.size, dtype=bool)
    old[np.searchsorted(wider, keys)] = True
    # each class's positions as a sequence: its rank 0, the wider ranks, its rank n + 1 (1-based ranks)
    length = wider.size + 2 * c_count
    sizes = np.bincount(cls, minlength=c_count)
    first = np.cumsum(sizes + 2) - (sizes + 2)
    at = first[cls] + 1 + (np.arange(wider.size) - np.repeat(np.cumsum(sizes) - sizes, sizes))
    rank = np.empty(length, dtype=np.int64)
    rank[first] = 0
    rank[first + sizes + 1] = counts + 1
    rank[at] = wider - offsets[cls] + 1
    known = np.ones(length, dtype=bool)
    known[at[~old]] = False
    u = np.empty((b_count, length))
    u[:, first] = 0.0
    u[:, first + sizes + 1] = 1.0
    u[:, at[old]] = uniforms
    step = np.diff(rank, prepend=0).astype(np.float64)
    step[first] = 0.0
    g = np.zeros((b_count, length))
    draw = ~known | np.r_[False, ~known[:-1]]  # the steps into and out of each unknown position
    g[:, draw] = rng.standard_gamma(step[draw], size=(b_count, int(draw.sum())))
    np.cumsum(g, axis=1, out=g)
    index = np.arange(length)
    lo = np.maximum.accumulate(np.where(known, index, 0))
    hi = np.minimum.accumulate(np.where(known, index, length - 1)[::-1])[::-1]
    new = ~known
    lo, hi = lo[new], hi[new]
    frac = (g[:, new] - g[:, lo]) / (g[:, hi] - g[:, lo])
    u[:, new] = u[:, lo] + (u[:, hi] - u[:, lo]) * frac
    out = u[:, at]
    np.clip(out, 0.0, np.nextafter(1.0, 0.0), out=out)
    return out
