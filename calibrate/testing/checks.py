"""Backward-compatible home of the conformance checks, which now live in one module per kind:
``common.py`` (ComponentCase, CheckSkipped, the checks every kind gets), ``samples.py`` (the
``make_*`` generators) and ``datasets.py``, ``distances.py``, ``transforms.py``, ``estimators.py``,
``evaluators.py``, ``executors.py``, all in ``calibrate/testing/``.

Everything this module used to define publicly is re-exported, so ``from calibrate.testing.checks
import check_estimator_fit`` (or ``KIND_CHECKS``, ``ESTIMATOR_CHECKS``, ...) keeps working. New code
should import from :mod:`calibrate.testing` or from the kind's module.
"""

from __future__ import annotations

# the per-kind tuples under their old names, and the tables, for code that imported them from here
from calibrate.testing import KIND_CHECKS  # noqa: F401
from calibrate.testing import GENERIC_CHECKS  # noqa: F401
from calibrate.testing.datasets import CHECKS as DATASET_CHECKS  # noqa: F401
from calibrate.testing.distances import CHECKS as DISTANCE_CHECKS  # noqa: F401
from calibrate.testing.estimators import CHECKS as ESTIMATOR_CHECKS  # noqa: F401
from calibrate.testing.evaluators import CHECKS as EVALUATOR_CHECKS  # noqa: F401
from calibrate.testing.evaluators import RESERVED_FILES  # noqa: F401
from calibrate.testing.executors import CHECKS as EXECUTOR_CHECKS  # noqa: F401
from calibrate.testing.transforms import CHECKS as TRANSFORM_CHECKS  # noqa: F401

# the names in __all__
from calibrate.testing import checks_for
from calibrate.testing.common import (CheckSkipped, ComponentCase, check_init_stores_params, check_params_yaml_round_trip,
                     check_signature, check_unknown_keyword_rejected, normalise_kind)
from calibrate.testing.datasets import check_dataset_bad_files, check_dataset_deterministic, check_dataset_load
from calibrate.testing.distances import (check_distance_no_mutation, check_distance_order_independent, check_distance_output,
                        check_distance_rejects_bad_input, check_distance_self_zero, check_distance_symmetric)
from calibrate.testing.estimators import (check_estimator_degenerate_input, check_estimator_deterministic, check_estimator_fit,
                         check_estimator_genuine,
                         check_estimator_monotone, check_estimator_monotone_dense, check_estimator_no_shared_state, check_estimator_rejects_bad_input,
                         check_estimator_threshold_matches_table, check_model_compact, check_model_parameters,
                         check_model_rejects_bad_targets, check_model_state_round_trip)
from calibrate.testing.evaluators import (check_evaluator_deterministic, check_evaluator_outputs, check_evaluator_rejects_bad_input,
                         check_evaluator_results)
from calibrate.testing.executors import check_executor_map
from calibrate.testing.samples import SEED, TARGETS, make_evaluation_input, make_genuine, make_impostors, make_training_groups, make_score_matrix, make_sets
from calibrate.testing.transforms import (check_transform_ignores_invalid_entries, check_transform_monotone, check_transform_output,
                         check_transform_pure)

__all__ = [
    "CheckSkipped", "ComponentCase", "checks_for", "make_evaluation_input", "make_genuine", "make_impostors", "make_training_groups", "make_score_matrix",
    "make_sets", "normalise_kind", "SEED", "TARGETS",
    # each kind's checks, in KIND_CHECKS order, then the generic ones (as before the split)
    "check_dataset_load", "check_dataset_deterministic", "check_dataset_bad_files",
    "check_distance_output", "check_distance_symmetric", "check_distance_self_zero", "check_distance_order_independent",
    "check_distance_no_mutation", "check_distance_rejects_bad_input",
    "check_transform_output", "check_transform_monotone", "check_transform_ignores_invalid_entries",
    "check_transform_pure",
    "check_estimator_fit", "check_estimator_monotone", "check_estimator_monotone_dense",
    "check_estimator_threshold_matches_table",
    "check_estimator_deterministic", "check_estimator_no_shared_state", "check_estimator_rejects_bad_input",
    "check_estimator_degenerate_input", "check_estimator_genuine", "check_model_state_round_trip", "check_model_compact",
    "check_model_rejects_bad_targets", "check_model_parameters",
    "check_evaluator_results", "check_evaluator_outputs", "check_evaluator_deterministic",
    "check_evaluator_rejects_bad_input",
    "check_executor_map",
    "check_signature", "check_init_stores_params", "check_unknown_keyword_rejected", "check_params_yaml_round_trip",
]
