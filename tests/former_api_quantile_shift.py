# A third-party estimator written against the documented API before the core was grouped into packages
# (issue 33): examples/plugin-example/calibrate_example_plugin/quantile_shift.py as it was at 580351c, kept
# verbatim below this comment, so that tests/test_former_names.py can prove such a plugin still passes the kit.
"""Estimator ``quantile-shift``: a class's empirical quantile shifted towards the pooled one.

For target FPR e, with q_c(e) the empirical e-quantile of class c's training impostor distances
and q(e) that of all classes' distances pooled (numpy's "linear" quantile)::

    tau_c(e) = (1 - weight) * q_c(e) + weight * q(e)

weight 0 is a per-class threshold, weight 1 a generic one. Both quantiles are non-decreasing in
e, so tau_c is too. It is a deliberately simple shrinkage estimator for the example.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from calibrate.base import Estimator, FittedModel, RunContext
from calibrate.errors import ParameterError
from calibrate.types import ImpostorDistances


class QuantileShiftModel(FittedModel):
    """Sorted per-class and pooled training distances, and the weight."""

    def __init__(self, classes, per_class: list, pooled, weight: float):
        super().__init__(classes)
        self._per_class = [np.sort(np.asarray(v, dtype=np.float64)) for v in per_class]
        self._pooled = np.sort(np.asarray(pooled, dtype=np.float64))
        self._weight = float(weight)

    def _thresholds(self, targets: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
        rows = np.arange(len(self.classes)) if rows is None else rows
        pooled = np.quantile(self._pooled, targets)
        own = np.stack([np.quantile(self._per_class[int(i)], targets) for i in rows])
        return (1.0 - self._weight) * own + self._weight * pooled[None, :]

    def parameters(self) -> list[dict[str, Any]]:
        return [{"class": c, "n_train": int(v.size), "weight": self._weight} for c, v in zip(self.classes, self._per_class)]

    def to_state(self) -> dict[str, Any]:
        return {"classes": list(self.classes), "per_class": [v.tolist() for v in self._per_class],
                "pooled": self._pooled.tolist(), "weight": self._weight}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> "QuantileShiftModel":
        return cls(state["classes"], state["per_class"], state["pooled"], state["weight"])


class QuantileShift(Estimator):
    """Per-class empirical quantile shifted towards the pooled quantile by `weight`.

    :param weight: 0 = per-class quantile, 1 = pooled (generic) quantile.
    """

    model_class = QuantileShiftModel

    def __init__(self, *, weight: float = 0.5):
        if not 0.0 <= weight <= 1.0:
            raise ParameterError(f"weight must be in [0, 1], got {weight}")
        self.weight = weight

    def _fit(self, impostors: ImpostorDistances, context: RunContext) -> FittedModel:
        per_class = [impostors.of(i) for i in range(len(impostors))]
        return QuantileShiftModel(impostors.classes, per_class, impostors.pooled(), self.weight)
