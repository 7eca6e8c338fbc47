"""What fitting and evaluating give: the thresholds of a fitted model per class and target FPR
(:class:`ThresholdTable`), how an estimator did at one target (:class:`TargetResult`) and what an evaluator
found (:class:`EvaluationResult`).

Plugins import these from :mod:`calibrate.contract.types`, which gathers every data type.
"""

from __future__ import annotations

import math

from dataclasses import dataclass, field

import numpy as np

from calibrate.errors import DataError
from calibrate.contract.comparisons import _readonly


@dataclass(frozen=True)
class ThresholdTable:
    """Thresholds per class and target FPR: ``values[i, k]`` for ``classes[i]``, ``targets[k]``."""

    estimator: str
    classes: tuple[str, ...]
    targets: tuple[float, ...]
    values: np.ndarray

    def __post_init__(self):
        values = np.asarray(self.values, dtype=np.float64)
        if values.shape != (len(self.classes), len(self.targets)):
            raise DataError(f"estimator {self.estimator}: threshold table has shape {values.shape}, "
                            f"expected {(len(self.classes), len(self.targets))}")
        object.__setattr__(self, "values", _readonly(values))


@dataclass(frozen=True)
class TargetResult:
    """How one estimator did at one target FPR on the evaluation data.

    Judged on both axes: ``ratio`` (achieved FPR / target) and ``fnr`` against ``fnr_one_threshold``, the FNR
    of the one pooled threshold (the same for every class) that admits the same share of this evaluation's
    impostor attempts as the estimator did (calibrate.statistics.verification.one_threshold; None when not measured);
    ``fnr_cost`` is their ratio (above 1: the estimator turns away more genuine users than one threshold
    would at the FPR it achieved)."""

    target_fpr: float
    fpr: float
    ratio: float
    false_accepts: int
    impostor_attempts: int
    fnr: float | None
    extra: dict = field(default_factory=dict)
    fnr_one_threshold: float | None = None

    @property
    def fnr_cost(self) -> float | None:
        """``fnr / fnr_one_threshold``; None when either is unknown or one threshold rejects no genuine attempt."""
        if self.fnr is None or self.fnr_one_threshold is None or not self.fnr_one_threshold > 0:
            return None
        return self.fnr / self.fnr_one_threshold

    @property
    def hter(self) -> float | None:
        """bob.measure's half total error rate at the estimator's thresholds, ``(fpr + fnr) / 2``; None when either is
        unknown."""
        if self.fnr is None or self.fpr is None or not (math.isfinite(self.fpr) and math.isfinite(self.fnr)):
            return None
        return (self.fpr + self.fnr) / 2.0

    def as_dict(self) -> dict:
        out = {"target_fpr": self.target_fpr, "fpr": self.fpr, "ratio": self.ratio,
               "false_accepts": self.false_accepts, "impostor_attempts": self.impostor_attempts,
               "fnr": self.fnr, "fnr_one_threshold": self.fnr_one_threshold, "fnr_cost": self.fnr_cost,
               "hter": self.hter}
        out.update(self.extra)
        return out


@dataclass(frozen=True)
class EvaluationResult:
    """What one evaluator found: per estimator label, one result per target; optional report
    sections (markdown) and files (name -> bytes) to write beside report.md; ``summary``: figures of
    the run as a whole (e.g. ``verification``), each key a top-level entry of results.json."""

    evaluator: str
    estimators: dict[str, list[TargetResult]] = field(default_factory=dict)
    sections: list[str] = field(default_factory=list)
    files: dict[str, bytes] = field(default_factory=dict)
    summary: dict = field(default_factory=dict)
