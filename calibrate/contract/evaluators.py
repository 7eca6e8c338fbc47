"""Judging thresholds: a :class:`Fold` (one calibration/evaluation split with its fitted models and
threshold tables), the :class:`EvaluationInput` an evaluator receives (every fold, the targets, the
groups), what it receives from a sharded run instead (:class:`ShardedEvaluation`) and the :class:`Evaluator`
base class.

Plugins import these from :mod:`calibrate.contract.base`, which gathers the contract.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Callable, final

import numpy as np

from calibrate.contract.component import Component, optional, progress_name
from calibrate.contract.run_context import RunContext
from calibrate.contract.comparisons import DistanceMatrix, ImpostorDistances
from calibrate.contract.labels import GroupLabels
from calibrate.contract.results import EvaluationResult, TargetResult, ThresholdTable
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


@dataclass(frozen=True)
class ShardedEvaluation:
    """What a sharded run (calibrate.running.sharded) gives an evaluator instead of folds: no matrix of attempts is in
    one place, so it hands over what it counted shard by shard and the evaluation attempts pooled as an object that
    answers :class:`calibrate.statistics.verification.PooledScores`' questions (calibrate.statistics.binned_scores:
    its ``resolve`` makes a computation's answers exact, one pass over the shards at a time)."""

    targets: tuple[float, ...]
    plots: bool
    groups: GroupLabels | None
    #: per estimator its rows as the run counted them: false accepts and attempts summed over the shards, their
    #: Clopper-Pearson interval, the shares of classes over 2x and 10x the target, the training support, and the one
    #: pooled threshold admitting as many evaluation impostors (``fnr_one_threshold``, ``fnr_paired``,
    #: ``one_threshold``)
    results: dict[str, list[TargetResult]]
    #: the evaluation attempts as distances (calibrate.statistics.binned_scores.BinnedScores); its ``unit_bins`` are
    #: per enrolled class in the order of ``classes``
    attempts: Any
    #: the matcher's score kind, distance thresholds back in its scores (None for an infinite one), and its scores as
    #: distances (the run's transform)
    kind: str
    scores: Callable[[Any], list]
    to_distances: Callable[[np.ndarray], np.ndarray]
    #: every enrolled class by name (sorted), its impostor attempts, and per estimator its false accepts
    #: (targets x classes, in that order)
    classes: np.ndarray
    class_attempts: np.ndarray
    class_false_accepts: dict[str, np.ndarray]
    #: per estimator each class's thresholds in the matcher's scores (classes x targets, that order; None where the
    #: transform has no inverse)
    class_thresholds: dict[str, np.ndarray | None]
    #: per estimator and target, how many distinct (unordered) class pairs its false accepts come from
    false_accept_pairs: dict[str, list[int]]
    #: the training impostor distances: how many, the smallest and the share tied at it, the median per class
    training_impostors: int
    smallest: tuple[float, float]
    median_per_class: float
    #: per estimator and target: the share of classes whose threshold is at or below their smallest training
    #: distance, and whether every class has the same threshold
    at_floor: dict[str, list[float]]
    one_for_all: dict[str, list[bool]]
    #: a fold of a few classes, the ones cdf-fits.png shows (their training distances, models and thresholds); None
    sample: Fold | None = None
    #: per estimator its predicted FPR (calibrate.predicted.interval.Prediction), where the run predicted one; the
    #: evaluation impostors' probe identities' size (calibrate.predicted.clustering.unit_size)
    predictions: dict = field(default_factory=dict)
    unit_size: float | None = None
    seed: int = 0

    @property
    def labels(self) -> list[str]:
        return list(self.results)


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

    @final
    def evaluate_sharded(self, data: ShardedEvaluation, context: RunContext | None = None) -> EvaluationResult | None:
        context = context or RunContext()
        with context.stage(f"{progress_name(self)}: evaluating {len(data.labels)} estimator(s) (sharded)",
                           len(data.labels), "estimators"):
            return self._evaluate_sharded(data, context)

    @optional
    def _evaluate_sharded(self, data: ShardedEvaluation, context: RunContext) -> EvaluationResult | None:
        """Called once per sharded run (calibrate.running.sharded) with what it counted over the shards: as
        ``_evaluate``; rows given replace the run's own. Advances the stage ``evaluate_sharded`` opened. Default:
        None (the run's rows stand; no sections, files or figures of this evaluator)."""
        return None
