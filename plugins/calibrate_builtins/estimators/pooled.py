"""A saved pooled sample: what a pooled model (auto's standardised scores, generic-interp's distances) keeps
of it, in memory (``FittedModel.compact``: its lowest ``ceil(reach N) + 1`` values, reach
:func:`calibrate.statistics.order.saved_reach`) or by a sharded run (partitioned.py, :func:`kept_count`), and its size N.
Such a model answers targets up to that reach and names it for larger ones. The values are a JSON list or a
packed array in the model's state (calibrate.contract.packed), or a ``.npy`` file beside a partitioned calibration's
parts."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from calibrate.contract.base import FittedModel
from calibrate.errors import CalibrationError
from calibrate.contract.packed import MAX_COUNT, is_packed, packed
from calibrate.files.untrusted import npy_array, plain_name
from calibrate.contract.statecheck import bad, field, number, numbers, within
from calibrate.statistics.order import SAVED_REACH, below_ties, interpolate_rank, refuse_beyond, saved_pool_count

#: a sharded run keeps at least this many of the pooled sample's lowest values
SHARDED_POOL = 100_000


def kept_count(n_total: int, targets) -> int:
    """How many of a pooled sample's ``n_total`` lowest values a sharded run's pooled model keeps (the run's own
    thresholds read them): enough for every target up to the largest of ``targets`` and 1%, at least
    :data:`SHARDED_POOL`."""
    reach = max([SAVED_REACH, *(float(t) for t in targets)])
    return max(saved_pool_count(n_total, reach), min(n_total, SHARDED_POOL))


def load_pooled(state: dict[str, Any], at_most: int | None = None) -> np.ndarray:
    """The pooled sample's kept values as saved (``at_most``: the size the state says the sample has; a packed array
    declaring more is refused before it is inflated)."""
    pooled = field(state, "pooled")
    if isinstance(pooled, dict) and not is_packed(pooled):  # a file beside the calibration's parts; "root": the loader's
        name = pooled.get("file")
        if not plain_name(name) or not str(name).endswith(".npy"):
            raise CalibrationError(f"the pooled sample's file {str(name)[:80]!r} is not a plain .npy name in the "
                                   "calibration's folder; the calibration is damaged: run the recipe again")
        values = npy_array(Path(state["root"]) / name, "the pooled sample", "run the recipe again", mmap=True,
                           error=CalibrationError)
        if values.ndim != 1 or values.dtype != np.float64:
            raise CalibrationError(f"{name}: the pooled sample must be a 1-D float64 array, got {values.dtype} "
                                   f"{values.shape}; run the recipe again")
        return values
    return numbers(pooled, "pooled", at_most=at_most)


def pooled_file(state: dict[str, Any]) -> str | None:
    """The name of the ``.npy`` file a (checked) state's pooled sample is in, None when the state holds it."""
    pooled = state["pooled"]
    return pooled.get("file") if isinstance(pooled, dict) and not is_packed(pooled) else None


def checked_pooled(state: dict[str, Any], what: str, low: float) -> tuple[np.ndarray, int]:
    """(the pooled sample's kept lowest values, its full size n_pooled), checked: at least one value, all
    finite, >= ``low``, ascending, and no more of them than n_pooled."""
    n_pooled = int(number(field(state, "n_pooled"), "n_pooled", 1, integer=True))
    declared = field(state, "pooled")
    declared = declared.get("count") if is_packed(declared) else None
    if isinstance(declared, int) and n_pooled < declared <= MAX_COUNT:  # before a packed array is inflated
        raise bad("n_pooled", f"is {n_pooled}: must be at least the {declared:,} pooled values kept")
    values = load_pooled(state, n_pooled)
    if values.size == 0 or not np.all(np.isfinite(values)) or np.any(values < low) or np.any(np.diff(values) < 0):
        raise bad("pooled", f"must hold the pooled {what}' lowest values: finite, ascending"
                            f"{'' if low == -math.inf else ', >= ' + format(low, 'g')}")
    if values.size > n_pooled:
        raise bad("n_pooled", f"is {n_pooled}: must be at least the {values.size:,} pooled values kept")
    return values, n_pooled


class PooledSortedModel(FittedModel):
    """generic-interp's model as saved (``compact``) or fitted shard by shard: the pooled training distances'
    lowest values out of ``n_pooled`` (pooled.py); one threshold for every class (the paper's interpolation
    formula at rank e N)."""

    def __init__(self, classes, lowest, n_pooled: int, pooled_file: str | None = None):
        super().__init__(classes)
        self.lowest, self.n_pooled, self.pooled_file = lowest, int(n_pooled), pooled_file

    def _thresholds(self, targets: np.ndarray, rows: np.ndarray) -> np.ndarray:
        refuse_beyond(targets, len(self.lowest), self.n_pooled, "generic-interp")
        k = np.asarray(targets, dtype=np.float64) * self.n_pooled
        one = np.where(k <= 1.0, k * float(self.lowest[0]), interpolate_rank(self.lowest, k))
        return np.tile(one, (len(rows), 1))

    def order_statistic_pool(self) -> int | None:
        return self.n_pooled

    def order_statistic_thresholds(self, ranks: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """The fitted model's (interp._SortedModel's): the k-th smallest pooled distance, or one float step below
        it when tied with the next; a rank beyond the kept values is refused."""
        refuse_beyond(ranks, len(self.lowest), self.n_pooled, "generic-interp", ranks=True)
        return np.tile(below_ties(self.lowest, ranks), (len(rows), 1))

    def parameters(self) -> list[dict[str, Any]]:
        return [{"class": c, "n_train": self.n_pooled} for c in self.classes]

    def to_state(self) -> dict[str, Any]:
        return {"classes": list(self.classes), "n_pooled": self.n_pooled,
                "pooled": {"file": self.pooled_file} if self.pooled_file else packed(self.lowest)}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> "PooledSortedModel":
        lowest, n_pooled = checked_pooled(state, "distances", 0.0)
        within(lowest, "pooled")  # the file's own transform and training scores bound every distance
        return cls(field(state, "classes"), lowest, n_pooled, pooled_file(state))
