"""Base classes for the plugin kinds: the one place plugins import them from.

Conventions (after scikit-learn and scipy.stats):

* Components take explicit keyword parameters in ``__init__`` (no ``**kwargs``), store them
  under the same names, validate them there (raise :class:`~calibrate.errors.ParameterError`)
  and do no work. The recipe loader reads the signature to check recipes before any computation.
* Public methods validate their input and call a private ``_method`` that computes.
* Everything a stage needs from the run (progress reporting, notes for the report, random
  seeds) comes in a :class:`RunContext`.

The contract, in code: every member of a kind's base class (and of :class:`FittedModel`) is one of

* *required*: an abstract method (``@abstractmethod``) or an annotated class attribute without a
  value (``model_class``); a component must define it;
* *optional*: a method marked :func:`optional`, or an annotated class attribute with a default
  (``#:`` comment above it); a component may override it, and the docstring says when the core
  calls it, what it must return and what the default does (``Default:``);
* *provided*: a method marked ``typing.final`` (``fit``, ``load``, ``apply``, ...), which the core
  calls and a component must not override (override the private ``_method`` it calls instead).

docs/plugins.md's contract tables are generated from these declarations
(``python -m calibrate.testing.contract_docs --write docs/plugins.md``), and the conformance kit's
``check_contract`` refuses a component that overrides a provided method, misspells an optional one
or gives a declared attribute a value outside its annotation.

Where each part lives (this module gathers them; import them from here):

* :mod:`calibrate.contract.component`: the contract's marks (:func:`optional`, :func:`overrides`,
  ``CONTRACT_MARK``), :class:`Component` (what every kind shares), ``progress_name``, ``check_target``;
* :mod:`calibrate.contract.run_context`: :class:`RunContext` (progress, notes, seed, executor),
  ``map_reporting`` and the :class:`Executor` base class;
* :mod:`calibrate.contract.datasets`: :class:`Dataset`, the :class:`ScoreSplit` a score dataset loads, and
  :class:`Distance`;
* :mod:`calibrate.contract.transforms`: :class:`Transform` and :class:`Normalizer` (scores to distances, and
  distances normalised by cohort statistics);
* :mod:`calibrate.contract.estimators`: :class:`Estimator`, the :class:`FittedModel` it returns,
  ``merge_class_state``;
* :mod:`calibrate.contract.evaluators`: :class:`Fold`, :class:`EvaluationInput`, :class:`ShardedEvaluation` and
  :class:`Evaluator`.

The data these receive and return are in :mod:`calibrate.contract.types` (also importable from here).
"""

from __future__ import annotations

from calibrate.errors import DataError, ParameterError  # noqa: F401  (re-exported: public API)
from calibrate.contract.progress import NULL_TASK, Task  # noqa: F401  (re-exported: public API)
from calibrate.contract.types import (  # noqa: F401  (re-exported: public API)
    CohortScores, DistanceMatrix, EvaluationResult, GenuineDistances, GroupLabels, ImpostorDistances, PatternSet,
    SetCollection, ThresholdTable, TrainingGroups)
from calibrate.contract.component import (  # noqa: F401  (re-exported: public API)
    CONTRACT_MARK, Component, check_target, optional, overrides, progress_name)
from calibrate.contract.run_context import Executor, RunContext, map_reporting  # noqa: F401  (re-exported: public API)
from calibrate.contract.datasets import Dataset, Distance, ScoreSplit  # noqa: F401  (re-exported: public API)
from calibrate.contract.transforms import Normalizer, Transform  # noqa: F401  (re-exported: public API)
from calibrate.contract.estimators import Estimator, FittedModel, merge_class_state  # noqa: F401  (re-exported: public API)
from calibrate.contract.evaluators import EvaluationInput, Evaluator, Fold, ShardedEvaluation  # noqa: F401  (re-exported: public API)

#: every name this module had before its classes moved to the modules above (``import *``, pydoc)
__all__ = ["CONTRACT_MARK", "CohortScores", "Component", "DataError", "Dataset", "Distance", "DistanceMatrix",
           "EvaluationInput", "EvaluationResult", "Evaluator", "Estimator", "Executor", "FittedModel", "Fold",
           "GenuineDistances", "GroupLabels", "ImpostorDistances", "NULL_TASK", "Normalizer", "ParameterError",
           "PatternSet", "RunContext", "ScoreSplit", "SetCollection", "Task", "ThresholdTable", "TrainingGroups",
           "Transform", "check_target", "map_reporting", "merge_class_state", "optional", "overrides",
           "progress_name"]
