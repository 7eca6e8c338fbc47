"""Judging thresholds: a :class:`Fold` (one calibration/evaluation split with its fitted models and
threshold tables), the :class:`EvaluationInput` an evaluator receives (every fold, the targets, the
groups) and the :class:`Evaluator` base class.

Plugins import these from :mod:`calibrate.contract.base`, which gathers the contract.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, final

import numpy as np

from calibrate.contract.component import Component, progress_name
from calibrate.contract.run_context import RunContext
from calibrate.contract.comparisons import DistanceMatrix, ImpostorDistances
from calibrate.contract.labels import GroupLabels
from calibrate.contract.results import EvaluationResult, ThresholdTable
from calibrate.contract.transforms import Transform
from calibrate.contract.estimators import FittedModel


@dataclass(frozen=True)
class Fold:
    """One calibration/evaluation split: thresholds fitted on ``train``, judged on ``test``."""

    name: str
    train: DistanceMatrix
    test: DistanceMatrix
    models: dict[str, FittedModel]
    tables: dict[str, ThresholdTable]
    #: the fitted transform from raw scores to these distances, and the raw scores' kind
    transform: "Transform | None" = None
    kind: str = "distance"
    #: the training impostor distances the estimators were fitted on (None: derive from ``train``)
    impostors: ImpostorDistances | None = None
    #: per estimator label, its predicted FPR (calibrate.predicted.interval.Prediction), from training data only
    predictions: dict = field(default_factory=dict)
    #: the fitted normaliser (calibrate.normalisation.cohort.FittedNormalization) when the recipe has ``normalizer:``:
    #: ``train`` and ``test`` then hold normalised distances exp(z), and thresholds are in those units
    normalization: Any = None
    #: the evaluation attempts as the dataset (or the distance stage) gave them: the matcher's own scores of kind
    #: ``kind``, before the transform and any normaliser, same entries as ``test``. One pooled threshold, the
    #: baseline every estimator is judged against, is set on them. None: ``test`` stands for them
    raw_test: DistanceMatrix | None = None
    #: (lowest, highest training comparison score on the matcher's own scale, genuine ones included; whether any
    #: was genuine), saved with the calibration for ``calibrate accept``/``evaluate`` to refuse scores on another
    #: scale; None: not known
    training_scores: tuple[float, float, bool] | None = None

    def matcher_scores(self) -> tuple[np.ndarray, float]:
        """(the evaluation attempts on the matcher's own scale, shaped as ``test``: ``raw_test``'s values, else
        ``test``'s; the sign that orients them as distances: -1 for similarity scores, whose negation is exact)."""
        raw = self.raw_test if self.raw_test is not None else self.test
        return raw.values, (-1.0 if raw.kind == "similarity" else 1.0)


@dataclass(frozen=True)
class EvaluationInput:
    """Everything an evaluator may look at: one fold, or several when enrollment rotates."""

    folds: tuple[Fold, ...]
    targets: tuple[float, ...]
    plots: bool = True
    #: the demographic group of the enrolled classes and of the probes' real classes, when the recipe or the
    #: dataset gives them (calibrate.contract.types.GroupLabels); None: no group figures
    groups: GroupLabels | None = None

    @property
    def labels(self) -> list[str]:
        return list(self.folds[0].models)


class Evaluator(Component, ABC):
    """Scores fitted estimators on evaluation data."""

    @final
    def evaluate(self, data: EvaluationInput, context: RunContext | None = None) -> EvaluationResult:
        for fold in data.folds:
            fold.test.check_distances(f"evaluation distances ({fold.name})")
        context = context or RunContext()
        # a stage counting estimators: ``_evaluate`` advances it as each estimator's results are ready
        with context.stage(f"{progress_name(self)}: evaluating {len(data.labels)} estimator(s)", len(data.labels),
                           "estimators"):
            return self._evaluate(data, context)

    @abstractmethod
    def _evaluate(self, data: EvaluationInput, context: RunContext) -> EvaluationResult:
        """Called once per run with every fold (fitted models, threshold tables, training and evaluation
        distances) and the targets: per estimator label one TargetResult per target in order (false accepts:
        evaluation impostor distances ``<= threshold``), or none; report sections; files (plain names ->
        bytes), and no pictures when ``data.plots`` is false. Advances the stage ``evaluate`` opened."""
