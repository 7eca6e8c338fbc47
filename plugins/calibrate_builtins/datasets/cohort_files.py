"""Cohort files of dataset ``score-list``, for the normaliser stage (``normalizer:`` in a recipe).

Two files, in bob's layout and in the score lists' own format (4-column, 5-column or CSV, read by the
same reader with the same ``missing:`` marker):

* ``cohort_enrolled``: the enrolled side, bob's Z-norm scores (models x Z-probes): one line per
  enrolled class and cohort probe, ``claimed_id`` the enrolled class, ``real_id`` and ``test_label``
  the cohort probe's class and label. Every enrolled class needs its lines.
* ``cohort_probes``: the probe side, bob's T-norm scores (T-models x probes): one line per cohort
  model and probe of the score lists (training and evaluation files alike), ``claimed_id`` the
  cohort model, ``real_id`` and ``test_label`` the probe's class and label as in the score lists.
  Every probe needs its lines; ``calibrate accept --cohort`` reads the same layout.

As in a matrix, an entry whose two classes are the same is not an impostor comparison and is never part
of a cohort; on the probe side, a cohort model named like the claimed class is left out of that attempt's
cohort. The files give calibrate.contract.types.CohortScores for the training and for the evaluation probes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import numpy as np

from calibrate.contract.base import ScoreSplit
from calibrate.errors import DataError
from calibrate.contract.types import CohortScores, DistanceMatrix


def enrolled_side(read: Callable, path: Path, kind: str) -> DistanceMatrix:
    """The Z-norm file as a cohort probes x enrolled classes matrix."""
    m = read(path)
    return DistanceMatrix(m.values, m.probe_classes, m.gallery, m.valid, kind, m.probe_ids, source=str(path))


def probe_side(cohort, path: Path, matrix: DistanceMatrix, kind: str) -> DistanceMatrix:
    """The rows of the T-norm file (read as ``cohort``) for the probes of ``matrix``, in its order."""
    position = {p: i for i, p in enumerate(cohort.probe_ids.tolist())}
    index = np.array([position.get(p, -1) for p in matrix.probe_ids.tolist()], dtype=np.int64)
    if (index < 0).any():
        k = int(np.flatnonzero(index < 0)[0])
        raise DataError(f"{path}: probe {matrix.probe_ids[k][:60]!r} (of {matrix.source}) has no comparison with the "
                        f"cohort models (no line with test_label {matrix.probe_ids[k][:60]!r}); cohort_probes (bob's "
                        "T-norm scores: T-models x probes) needs every probe of the score lists (a CSV score list "
                        "needs its probe column, e.g. columns: {probe: test_label})")
    clash = np.flatnonzero(cohort.probe_classes[index] != matrix.probe_classes)
    if clash.size:
        k = int(clash[0])
        raise DataError(f"{path}: probe {matrix.probe_ids[k][:60]!r} has real class "
                        f"{cohort.probe_classes[index[k]][:60]!r} there and {matrix.probe_classes[k][:60]!r} in "
                        f"{matrix.source}; a probe belongs to one class: fix the cohort file's real_id")
    return DistanceMatrix(cohort.values[index], matrix.probe_classes, cohort.gallery, cohort.valid[index], kind,
                          matrix.probe_ids, source=str(path))


def with_cohorts(split: ScoreSplit, read: Callable, enrolled: Path | None, probes: Path | None, kind: str) -> ScoreSplit:
    """``split`` with the cohort scores of its training and evaluation probes read from the files given."""
    e = enrolled_side(read, enrolled, kind) if enrolled is not None else None
    if e is not None:
        shared = set(e.probe_ids.tolist()) & (set(split.train.probe_ids.tolist()) | set(split.test.probe_ids.tolist()))
        if shared:
            raise DataError(f"{enrolled}: cohort probe {sorted(shared)[0][:60]!r} is also a probe of the score lists; "
                            "the Z-norm cohort must be other probes (an attempt's probe in its class's cohort would "
                            "normalise itself). Without cohort files the training impostors serve, each left out of "
                            "its own statistics")
    tr = te = None
    if probes is not None:
        cohort = read(probes)
        tr = probe_side(cohort, probes, split.train, kind)
        te = probe_side(cohort, probes, split.test, kind)
    source = ", ".join(str(p) for p in (enrolled, probes) if p is not None)
    return ScoreSplit(split.train, split.test, split.missing, split.description, split.missing_by_file,
                      CohortScores(e, tr, leave_out=False, source=source), CohortScores(e, te, leave_out=False, source=source))
