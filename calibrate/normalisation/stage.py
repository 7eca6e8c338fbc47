"""The normaliser stage of a run (recipe key ``normalizer:``): between the transform and the estimators.

    dataset -> distance -> transform -> normaliser -> estimators -> evaluators -> outputs

Where the cohort comes from. A dataset that reads cohort files (``Dataset.cohort_sides``, e.g.
``score-list`` with ``cohort_enrolled:`` / ``cohort_probes:``) gives the cohort scores of its training and
evaluation probes. Otherwise the rest of the gallery serves, from the comparison matrices themselves
(:func:`matrix_cohorts`):

* the enrolled side of class j is column j's *training* impostor distances (the probes the estimators
  fit on), never an evaluation probe's; a training attempt (i, j) leaves probe i out of class j's side
  (``CohortScores.leave_out``), as a new probe is not part of the cohort it is normalised with;
* the probe side of probe i is its row: its distances to every enrolled class other than its own and
  the claimed one. When training and evaluation entries are two halves of one matrix (a score file split
  per class), the row is the whole row, so that training and evaluation probes have cohorts of one size (calibrate.normalisation.cohort.matrix_cohorts).

The transform fitted on the training impostors maps the cohort scores as it maps the attempts; the
enrolled side's statistics of every class are computed once (nothing left out) and serve the
evaluation attempts and the saved calibration alike (calibrate.normalisation.cohort).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from calibrate.contract.base import RunContext, Transform
from calibrate.normalisation.cohort import (FittedNormalization, _columns_of, matrix_cohorts,
                                             normalise_fold as normalise_matrices, side_record)
from calibrate.errors import RecipeError
from calibrate.contract.types import CohortScores, DistanceMatrix

#: a dataset's cohort files, by side, as the messages name them (score-list's keys)
SIDE_WORDS = {"enrolled": "the enrolled side (bob's Z-norm scores: models x Z-probes)",
              "probe": "the probe side (bob's T-norm scores: T-models x probes)"}


def check_normalizer(spec: Any, dataset: Any, dataset_name: str, source: str) -> None:
    """What the recipe's shape decides (so that ``calibrate validate`` refuses what a run would): cohort
    files without a normaliser, a normaliser on the sharded path, a side the cohort files do not give."""
    given = dataset.cohort_sides()
    if spec is None:
        if given:
            raise RecipeError(f"dataset {dataset_name!r} is given cohort files ({' and '.join(given)} side), which only "
                              "a normaliser reads; add `normalizer: {plugin: snorm}` (see `calibrate plugins`) or "
                              "remove the cohort files", source=source, where="data")
        return
    if dataset.sharded:
        raise RecipeError(f"dataset {dataset_name!r} is read shard by shard, and the sharded path does not normalise "
                          "scores (a probe's cohort spans every shard); remove `normalizer:` or read the scores whole "
                          "(e.g. `plugin: score-list`)", source=source, where="normalizer")
    missing = [s for s in spec.info.factory.sides if given is not None and s not in given]
    if missing:
        raise RecipeError(f"normalizer {spec.info.name!r} reads {SIDE_WORDS[missing[0]]}, which the cohort files of "
                          f"dataset {dataset_name!r} do not give (they give {' and '.join(given)}); add that file "
                          "under `data:` (score-list: `cohort_enrolled:` or `cohort_probes:`), or choose a normaliser "
                          "that reads the sides given", source=source, where="normalizer.plugin")


def _transformed(transform: Transform, matrix: DistanceMatrix) -> DistanceMatrix:
    out = transform.apply(matrix)
    out.check_distances(f"cohort distances ({matrix.source})")
    return out


def normalise_fold(spec: Any, train: DistanceMatrix, test: DistanceMatrix, train_d: DistanceMatrix,
                   test_d: DistanceMatrix, transform: Transform, cohorts: tuple[CohortScores | None, CohortScores | None],
                   context: RunContext) -> tuple[DistanceMatrix, DistanceMatrix, FittedNormalization]:
    """(normalised training distances, normalised evaluation distances, the fitted normalisation) of one
    fold; ``train``/``test`` are the raw matrices, ``cohorts`` the dataset's (None: the rest of the gallery)."""
    normalizer = spec.build()
    if cohorts[0] is None:  # the rest of the gallery: the matrices' own distances, already through the transform
        train_c, test_c = matrix_cohorts(train, test, (train_d, test_d))
    else:
        done: dict[int, DistanceMatrix] = {}  # a side both cohorts share transformed once

        def transformed(matrix: DistanceMatrix) -> DistanceMatrix:
            if id(matrix) not in done:
                done[id(matrix)] = _transformed(transform, matrix)
            return done[id(matrix)]

        train_c, test_c = (c.map(transformed) for c in cohorts)
    classes = train_d.gallery_classes.tolist()
    n_train, n_test = int(train_d.valid.sum()), int(test_d.valid.sum())
    with context.stage(f"{spec.info.name}: normalising {n_train + n_test:,} comparisons", n_train + n_test,
                       "comparisons") as task:  # a line at the interval (the heartbeat), counted when both are done
        train_n, test_n, stats = normalise_matrices(normalizer, train_d, test_d, train_c, test_c)
        task.advance(n_train + n_test)
    fitted = FittedNormalization(normalizer, spec.info.name, dict(spec.params), tuple(classes), stats,
                                 "training impostors" if train_c.leave_out else "cohort file",
                                 fitted_cohort(normalizer, train_c, train_d, classes))
    return train_n, test_n, fitted


def fitted_cohort(normalizer: Any, cohort: CohortScores, train: DistanceMatrix, classes: list[str]) -> dict:
    """What each side read was fitted with (calibrate.normalisation.cohort.side_record): the probe side's rows of the probes
    with a training attempt, the enrolled side's columns of the enrolled classes."""
    out = {}
    if "probe" in normalizer.sides:
        side = cohort.probes
        rows = np.flatnonzero(train.valid.any(axis=1))
        out["probe"] = side_record(side.values[rows], side.impostor_mask()[rows], side.gallery_classes.tolist())
    if "enrolled" in normalizer.sides:
        side = cohort.enrolled
        columns = _columns_of(side, classes)
        out["enrolled"] = side_record(side.values[:, columns].T, side.impostor_mask()[:, columns].T,
                                      side.probe_ids.tolist())
    return out


def normalised_note(fitted: FittedNormalization) -> str:
    """The run's note: what was normalised, and what the thresholds are then."""
    cohort = ("the rest of the gallery (class j: its training impostors; probe i: its other classes)"
              if fitted.enrolled_cohort == "training impostors" else "the dataset's cohort files")
    raw = ("a threshold maps to no single raw score, since a decision depends on the probe's cohort scores "
           "(calibrate accept --cohort, Calibration.accept(probe_cohort_scores=...))" if fitted.reads_probe else
           "z depends on the score and the class's saved cohort statistics only, so each class's threshold is also one "
           "raw score (calibrate threshold, Calibration.threshold())")
    return (f"scores were normalised by {fitted.describe()} before the estimators, with {cohort} as the cohort: "
            "thresholds (thresholds.csv, calibration.json) are on the normalised distance exp(z), z the normalised "
            f"score (thresholds.csv's score_threshold column is z); {raw}")
