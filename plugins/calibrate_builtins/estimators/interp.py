"""The paper's data-driven baselines: thresholds by linear interpolation of order statistics.

With the N training distances sorted, d_(1) <= ... <= d_(N), and target FPR e:

    tau(e) = (e N) d_(1)                                         if e <= 1/N
    tau(e) = d_(lo) + (N e - lo) / (hi - lo) (d_(hi) - d_(lo))   if e >  1/N,  lo = floor(eN), hi = ceil(eN)

When e N is an integer the second case is 0/0 and tau = d_(eN): the two order statistics
coincide, which is the limit of the formula from either side. Ties need no special case.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from calibrate.contract.base import Estimator, FittedModel, RunContext
from calibrate.contract.packed import packed
from calibrate.contract.statecheck import bad, declared_size, distances, field, flag, numbers
from calibrate.statistics.order import below_ties, interp_threshold, interp_thresholds_segments, interpolate_rank, rank_values, saved_pool_count  # noqa: F401 (re-exported)
from calibrate.statistics.order import lowest_segments, refuse_beyond
from calibrate.contract.types import ImpostorDistances

from .pooled import PooledSortedModel


class _SortedModel(FittedModel):
    """Per-class sorted training distances; generic models share one row for every class. ``counts`` (class-specific
    models as saved, ``compact``): each class's number of training distances, of which its segment holds the
    lowest, enough for every target up to the saved calibration's reach."""

    def __init__(self, classes, values: np.ndarray, offsets: np.ndarray, shared: bool, counts: np.ndarray | None = None):
        super().__init__(classes)
        self._values = np.asarray(values, dtype=np.float64)
        raw = np.asarray(offsets)
        if raw.ndim != 1 or not np.issubdtype(raw.dtype, np.number) or not np.all(np.isfinite(raw)) \
                or np.any(np.abs(raw) > self._values.size) or np.any(raw != np.round(raw)):
            raise ValueError(f"offsets must be whole numbers within the {self._values.size} values")
        self._offsets = raw.astype(np.int64)
        self._shared = shared
        if self._values.ndim != 1 or not np.all(np.isfinite(self._values)):
            raise ValueError("the sorted distances must be finite numbers")
        if not shared and (self._offsets.size != len(self.classes) + 1 or self._offsets[0] != 0
                           or self._offsets[-1] != self._values.size or np.any(np.diff(self._offsets) <= 0)):
            raise ValueError("offsets must run from 0 to the number of values, one non-empty segment per class")
        within = np.ones(max(self._values.size - 1, 0), dtype=bool)
        if not shared:
            within[self._offsets[1:-1] - 1] = False  # each class's segment ascends on its own
        if np.any(np.diff(self._values)[within] < 0):
            raise ValueError("each class's distances must be sorted ascending")
        self._counts = None if counts is None or shared else np.asarray(counts, dtype=np.int64)
        if self._counts is not None and (self._counts.shape != (len(self.classes),)
                                         or np.any(self._counts < np.diff(self._offsets))):
            raise ValueError("counts must hold, per class, at least as many distances as its segment keeps")

    def _row(self, i: int) -> np.ndarray:
        if self._shared:
            return self._values
        return self._values[self._offsets[i]:self._offsets[i + 1]]

    def _thresholds(self, targets: np.ndarray, rows: np.ndarray) -> np.ndarray:
        if self._shared:
            return np.tile(interp_threshold(self._values, targets), (len(rows), 1))
        if not len(rows):
            return np.empty((0, targets.size))
        if self._counts is not None:
            refuse_beyond(targets, np.diff(self._offsets), self._counts, "class-interp")
        return interp_thresholds_segments(self._values, self._offsets, np.asarray(rows), targets, self._counts)

    def order_statistic_pool(self) -> int | None:
        return int(self._values.size) if self._shared else None

    def order_statistic_thresholds(self, ranks: np.ndarray, rows: np.ndarray) -> np.ndarray:
        return np.tile(below_ties(self._values, ranks), (len(rows), 1))

    def parameters(self) -> list[dict[str, Any]]:
        return [{"class": c, "n_train": int(n)} for c, n in zip(self.classes, self.counts())]

    def counts(self) -> np.ndarray:
        """Each class's number of training distances (all of them, also where only the lowest are kept)."""
        if self._shared:
            return np.full(len(self.classes), self._values.size, dtype=np.int64)
        return np.diff(self._offsets) if self._counts is None else self._counts

    def compact(self, reach: float) -> FittedModel:
        """What a saved calibration keeps to answer every target up to ``reach``: a generic model, its pooled
        distances' lowest ``ceil(reach N) + 1`` (a PooledSortedModel, as a sharded run's); a class-specific one,
        each class's lowest ``ceil(reach n_c) + 1`` and n_c. The model itself when that is everything."""
        if self._shared:
            kept = saved_pool_count(self._values.size, reach)
            if kept >= self._values.size:
                return self
            return PooledSortedModel(self.classes, self._values[:kept].copy(), self._values.size)
        values, offsets, counts = lowest_segments(self._values, self._offsets, reach, self._counts)
        if values.size == self._values.size:
            return self
        return type(self)(self.classes, values, offsets, False, counts)

    def to_state(self) -> dict[str, Any]:
        state = {"classes": list(self.classes), "values": packed(self._values),
                 "offsets": self._offsets.tolist(), "shared": self._shared}
        if self._counts is not None:
            state["counts"] = self._counts.tolist()
        return state

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> "_SortedModel":
        """The model a saved state describes; the constructor checks the segments, this the types and that
        distances are >= 0 (calibrate.contract.statecheck); a state with ``n_pooled`` keeps only the pooled distances'
        lowest values (a compacted or a sharded run's generic model): a PooledSortedModel."""
        if isinstance(state, dict) and "n_pooled" in state:
            return PooledSortedModel.from_state(state)
        classes, shared = field(state, "classes"), flag(field(state, "shared"), "shared")
        counts = field(state, "counts", None)
        if counts is not None:
            if shared:
                raise bad("counts", "belongs to a class-specific model (shared false)")
            counts = numbers(counts, "counts", 1, size=len(classes) if isinstance(classes, list) else None,
                             integer=True)
        return cls(classes, distances(field(state, "values"), "values", at_most=declared_size(state)),
                   numbers(field(state, "offsets"), "offsets", integer=True), shared, counts)


class GenericInterp(Estimator):
    """One threshold for every class, from all classes' training impostor distances pooled.

    Enrolling a class (``Calibration.enroll``) gives it the pooled threshold as fitted: its own
    distances are not added to the pool (refit to let them count).
    """

    model_class = _SortedModel
    enroll_mode = "pooled"

    def _enroll(self, model: FittedModel, cls: str, single: ImpostorDistances, context: RunContext) -> FittedModel:
        classes = list(model.classes) + ([] if cls in model.classes else [cls])
        if isinstance(model, PooledSortedModel):  # a saved (compacted) model: its kept lowest values
            return PooledSortedModel(classes, model.lowest, model.n_pooled, model.pooled_file)
        return _SortedModel(classes, model._values, model._offsets, shared=True)

    def simulate(self, galleries, targets: np.ndarray) -> np.ndarray:
        from .simulate import generic_interp

        return generic_interp(galleries, targets)

    def simulation_ranks(self, counts: np.ndarray, targets: np.ndarray, world) -> list[np.ndarray] | None:
        from .simulate import generic_interp_ranks

        return generic_interp_ranks(counts, targets, world)

    def _fit(self, impostors: ImpostorDistances, context: RunContext) -> FittedModel:
        pooled = np.sort(impostors.pooled())
        return _SortedModel(impostors.classes, pooled, np.array([0, pooled.size]), shared=True)

    def partitioned(self):
        """Fitting sharded data shard by shard, with the same thresholds (calibrate/contract/sharded.py)."""
        from .partitioned import GenericInterpPartitioned

        return GenericInterpPartitioned()


class ClassInterp(Estimator):
    """A threshold per class from that class's own training impostor distances.

    Enrolling a class gives exactly the thresholds a full fit would (per class).
    """

    model_class = _SortedModel
    enroll_mode = "per-class"

    def _enroll(self, model: FittedModel, cls: str, single: ImpostorDistances, context: RunContext) -> FittedModel:
        rows = {c: model._row(i) for i, c in enumerate(model.classes)}
        counts = dict(zip(model.classes, model.counts().tolist()))
        rows[cls] = np.sort(single.of(0))
        counts[cls] = rows[cls].size
        values = np.concatenate(list(rows.values()))
        offsets = np.concatenate([[0], np.cumsum([r.size for r in rows.values()])])
        # a saved (compacted) model's classes keep their lowest distances and counts; the new class all of its own
        return _SortedModel(list(rows), values, offsets, shared=False,
                            counts=None if model._counts is None else np.array(list(counts.values())))

    def simulate(self, galleries, targets: np.ndarray) -> np.ndarray:
        from .simulate import class_interp

        return class_interp(galleries, targets)

    def simulation_ranks(self, counts: np.ndarray, targets: np.ndarray, world) -> list[np.ndarray] | None:
        from .simulate import class_interp_ranks

        return class_interp_ranks(counts, targets)

    def _fit(self, impostors: ImpostorDistances, context: RunContext) -> FittedModel:
        values = impostors.sorted_within()
        return _SortedModel(impostors.classes, values, impostors.offsets, shared=False)
