"""calibrate's built-in plugins, registered through the ``calibrate`` entry-point group exactly
as a third-party plugin package registers its own.

One folder per stage, each holding its kind's components and the hook that registers them:
datasets/, distances/, transforms/, normalizers/, estimators/ (ncx2/ for the paper's grid),
evaluators/, executors/.
Each folder's hook imports its modules inside the hook, so that nothing heavy is imported before
the plugins are listed.
"""

from __future__ import annotations

from .datasets import calibrate_register_datasets
from .distances import calibrate_register_distances
from .estimators import calibrate_register_estimators
from .evaluators import calibrate_register_evaluators
from .executors import calibrate_register_executors
from .normalizers import calibrate_register_normalizers
from .transforms import calibrate_register_transforms

__all__ = ["calibrate_register_datasets", "calibrate_register_distances", "calibrate_register_transforms",
           "calibrate_register_estimators", "calibrate_register_evaluators", "calibrate_register_executors",
           "calibrate_register_normalizers"]
