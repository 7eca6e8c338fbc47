"""calibrate.contract.base and calibrate.contract.types are the documented import paths of the plugin contract
(docs/plugins.md); their code lives in smaller modules (issue 33: component, run_context, datasets, transforms,
estimators, evaluators; comparisons, labels, results), and the two keep every name a plugin imported from them
before the split, under their former names (calibrate.base, calibrate.types) too, and list them for pydoc."""

from __future__ import annotations

import importlib
import pydoc

import pytest

#: the public names each module had before the split (what a plugin written against it may import)
BEFORE = {
    "calibrate.contract.base": (
        "CONTRACT_MARK", "CohortScores", "Component", "DataError", "Dataset", "Distance", "DistanceMatrix",
        "EvaluationInput", "EvaluationResult", "Evaluator", "Estimator", "Executor", "FittedModel", "Fold",
        "GenuineDistances", "GroupLabels", "ImpostorDistances", "NULL_TASK", "Normalizer", "ParameterError",
        "PatternSet", "RunContext", "ScoreSplit", "SetCollection", "Task", "ThresholdTable", "TrainingGroups",
        "Transform", "check_target", "map_reporting", "merge_class_state", "optional", "overrides", "progress_name"),
    "calibrate.contract.types": (
        "CodedLabels", "CohortScores", "DataError", "DistanceKind", "DistanceMatrix", "EvaluationResult",
        "GenuineDistances", "GroupLabels", "ImpostorDistances", "MAX_GROUPS", "MAX_GROUP_NAME", "PatternSet",
        "SetCollection", "TargetResult", "ThresholdTable", "TrainingGroups", "UNLABELLED", "factorise",
        "group_problem", "same_labels"),
}
FORMER = {"calibrate.contract.base": "calibrate.base", "calibrate.contract.types": "calibrate.types"}


@pytest.mark.parametrize("name", sorted(BEFORE))
def test_the_documented_modules_keep_every_name_they_had(name):
    module = importlib.import_module(name)
    former = importlib.import_module(FORMER[name])
    for attr in BEFORE[name]:
        value = getattr(module, attr)  # AttributeError names what is missing
        assert getattr(former, attr) is value, f"{FORMER[name]}.{attr}"
        home = getattr(value, "__module__", None)
        if isinstance(value, type) and home.startswith("calibrate.contract."):
            # one object, wherever it is defined: isinstance checks and pickles agree across import paths
            assert getattr(importlib.import_module(home), attr) is value
    assert set(module.__all__) == set(BEFORE[name])


def test_pydoc_on_the_documented_modules_still_shows_their_classes():
    base = pydoc.render_doc("calibrate.contract.base", renderer=pydoc.plaintext)
    types = pydoc.render_doc("calibrate.contract.types", renderer=pydoc.plaintext)
    for shown in ("class Estimator(", "class FittedModel(", "class RunContext(", "class ScoreSplit(", "    optional("):
        assert shown in base, shown
    for shown in ("class ImpostorDistances(", "class DistanceMatrix(", "class GroupLabels(", "class TargetResult("):
        assert shown in types, shown


def test_the_contract_tables_name_the_documented_import_path():
    from calibrate.contract.base import Estimator
    from calibrate.contract.sharded import PartitionedFitter
    from calibrate.testing.contract_docs import import_path

    assert Estimator.__module__ == "calibrate.contract.estimators"
    assert import_path(Estimator) == "calibrate.contract.base.Estimator"
    assert import_path(PartitionedFitter) == "calibrate.contract.sharded.PartitionedFitter"
