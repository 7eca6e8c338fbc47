"""The typed data that flows between pipeline stages: the one place plugins import it from.

All containers are frozen dataclasses over numpy arrays; constructors validate shapes and
values so that a bad plugin or a bad file fails at the stage boundary, with a message that says
which stage produced what, instead of deep inside numpy later on.

Where each type lives (this module gathers them; import them from here):

* :mod:`calibrate.contract.comparisons`: patterns and comparisons (``PatternSet``, ``SetCollection``,
  ``DistanceMatrix``, ``ImpostorDistances``, ``GenuineDistances``, ``CohortScores``) and the layout
  conventions (a distance matrix is ``probe x gallery``, one gallery column per enrolled class; unused
  entries ``False`` in ``valid``; a class is *accepted* when ``distance <= threshold``);
* :mod:`calibrate.contract.labels`: coded label columns (``CodedLabels``, ``factorise``, ``same_labels``) and
  demographic groups (``GroupLabels``, ``TrainingGroups``, ``UNLABELLED``, ``group_problem``);
* :mod:`calibrate.contract.results`: what fitting and evaluating give (``ThresholdTable``, ``TargetResult``,
  ``EvaluationResult``).
"""

from __future__ import annotations

from calibrate.errors import DataError  # noqa: F401  (re-exported: public API)
from calibrate.contract.comparisons import (  # noqa: F401  (re-exported: public API)
    CohortScores, DistanceKind, DistanceMatrix, GenuineDistances, ImpostorDistances, PatternSet, SetCollection)
from calibrate.contract.labels import (  # noqa: F401  (re-exported: public API)
    MAX_GROUP_NAME, MAX_GROUPS, UNLABELLED, CodedLabels, GroupLabels, TrainingGroups, factorise, group_problem,
    same_labels)
from calibrate.contract.results import EvaluationResult, TargetResult, ThresholdTable  # noqa: F401  (re-exported: public API)

#: every name this module had before its types moved to the modules above (``import *``, pydoc)
__all__ = ["CodedLabels", "CohortScores", "DataError", "DistanceKind", "DistanceMatrix", "EvaluationResult",
           "GenuineDistances", "GroupLabels", "ImpostorDistances", "MAX_GROUPS", "MAX_GROUP_NAME", "PatternSet",
           "SetCollection", "TargetResult", "ThresholdTable", "TrainingGroups", "UNLABELLED", "factorise",
           "group_problem", "same_labels"]
