"""The typed recipe: :class:`Recipe` and its components (:class:`ComponentSpec`), the sections' keys and
the defaults a recipe leaves out. Reading and checking a recipe into one, in full before any computation,
is calibrate.recipe.validation (load_recipe, parse_recipe).

A recipe::

    version: 1
    data: {plugin: score-matrix, path: scores.csv, kind: similarity, missing: -1}
                                           # `groups: groups.csv` under data: (any dataset): class,group per line;
                                           # `impostors: same-group` beside it: calibrate against same-group impostors
    distance: {plugin: euclidean}          # only for pattern datasets
    transform: {plugin: similarity-to-distance}
    normalizer: {plugin: snorm}            # optional: Z/T/S/AS-norm with cohort scores (docs/normalisation.md)
    estimators:
      - {plugin: class-interp}
      - {plugin: ncx2-grid, name: ncx2-wide, dim: [5, 40]}
    evaluation:
      targets: [0.005, 0.0025, 0.001, 0.0005]
      enrollment: staggered                # image sets: which set of each class is enrolled: an index,
                                           # a set label, or staggered (default; class i enrolls set i mod n)
      rotate: false                        # image sets: rotate enrollment over every set
      evaluators: [{plugin: fpr}]
    output: results/                       # or {dir: results/, plots: true}
    seed: 0
    executor: {plugin: processes}          # serial (default), processes, dask
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from calibrate.contract.types import GroupLabels
from calibrate.predicted.interval import PredictionSettings
from calibrate.recipe.protocol import Protocol
from calibrate.contract.registry import ComponentInfo

RECIPE_VERSION = 1
DEFAULT_TARGETS = (0.005, 0.0025, 0.001, 0.0005)
#: used when a recipe names no estimator (see docs/estimators.md for why)
DEFAULT_ESTIMATORS: tuple[dict, ...] = ({"plugin": "auto"},)
#: the default enrollment: class number i (sorted) enrolls its set i mod n. Enrolling the same set
#: position for every class confounds enrollment with whatever the position means (a session, an
#: illumination), so that enrollment-vs-enrollment distances differ from query-vs-enrollment ones.
DEFAULT_ENROLLMENT = "staggered"
DEFAULT_EVALUATORS: tuple[dict, ...] = ({"plugin": "fpr"},)
TOP_LEVEL = ("version", "data", "distance", "transform", "normalizer", "estimators", "evaluation", "output", "seed",
             "executor")
EVALUATION_KEYS = ("targets", "evaluators", "enrollment", "rotate", "prediction")
OUTPUT_KEYS = ("dir", "plots", "save_calibration")


@dataclass(frozen=True)
class ComponentSpec:
    """One chosen component: which plugin, under which label, with checked parameters."""

    kind: str
    info: ComponentInfo
    label: str
    params: dict[str, Any]
    where: str
    #: estimators only: thresholds whose achieved FPR exceeds the target with probability at most
    #: 1 - confidence (``calibrate.predicted.interval``); None: the estimator's own thresholds
    confidence: float | None = None

    def build(self):
        return self.info.factory(**self.params)


#: the transform a recipe without ``transform:`` uses, by the kind of score the data hold
DEFAULT_TRANSFORMS = {"distance": "identity", "similarity": "similarity-to-distance"}
#: an estimator's label (its `name:`, by default its plugin name) names files and columns
MAX_LABEL = 64
LABEL_PATTERN = re.compile(rf"[A-Za-z0-9][A-Za-z0-9._-]{{0,{MAX_LABEL - 1}}}")


@dataclass(frozen=True)
class Recipe:
    source: str
    base_dir: Path
    data: ComponentSpec
    distance: ComponentSpec | None
    #: None when the recipe gives no ``transform:`` and the data's kind is known only after loading
    transform: ComponentSpec | None
    estimators: tuple[ComponentSpec, ...]
    evaluators: tuple[ComponentSpec, ...]
    targets: tuple[float, ...]
    protocol: Protocol
    output_dir: Path
    plots: bool = True
    save_calibration: bool = True
    seed: int = 0
    executor: ComponentSpec | None = None
    raw: dict = field(default_factory=dict)
    #: one transform per kind of score, for a recipe without ``transform:``
    default_transforms: dict[str, ComponentSpec] = field(default_factory=dict)
    #: what the recipe left out and the run filled in (said in the report's notes)
    defaults: tuple[str, ...] = ()
    #: the predicted FPR intervals (``evaluation.prediction``)
    prediction: PredictionSettings = field(default_factory=PredictionSettings)
    #: the normaliser stage (``normalizer:``, calibrate.normalisation.stage), or None: distances go to the estimators as they are
    normalizer: ComponentSpec | None = None
    #: the demographic groups of the classes (``data: {groups: FILE}``, calibrate.recipe.groups), or None
    groups: GroupLabels | None = None
    #: calibrate against same-group impostors only (``data: {impostors: same-group}``, ISO/IEC 19795-10)
    same_group: bool = False
    #: no ``executor:`` given: heavy work (``RunContext.map(spread=True)``) also uses a process forked beside the run
    #: on the machine's other core (calibrate.running.beside.spread_map); ``{plugin: serial}`` keeps to one process
    spread: bool = False

    def transform_for(self, kind: str) -> ComponentSpec:
        """The recipe's transform, or the default for data of this ``kind`` (distance or similarity)."""
        if self.transform is not None:
            return self.transform
        return self.default_transforms[kind]

    def default_note(self, kind: str) -> str | None:
        """The note saying which transform was chosen for a recipe without one, or None."""
        if not self.default_transforms:  # the recipe names its transform
            return None
        name = DEFAULT_TRANSFORMS[kind]
        why = ("higher scores are more alike, so d = (largest training score) - s"
               if kind == "similarity" else "the scores are distances already")
        return f"no `transform:` given: the data are {kind} scores, so `{name}` was used ({why})"


