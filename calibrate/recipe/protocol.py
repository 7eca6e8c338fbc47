"""The paper's enrollment protocol for pattern datasets (image sets, feature vectors).

Per class one *enrollment* set is chosen (``evaluation.enrollment``: a set index, a set label,
or ``staggered``, the default: class number i in sorted order enrolls its set i mod n);
thresholds come from enrollment-vs-enrollment inter-class distances only, and every other set is
a query compared with every enrolled class. With ``evaluation.rotate: true`` each set position
(with staggering: each offset) is enrolled in turn, one fold each.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from calibrate.contract.base import Distance, RunContext
from calibrate.errors import DataError, RecipeError
from calibrate.contract.types import DistanceMatrix, PatternSet, SetCollection


@dataclass(frozen=True)
class Protocol:
    """Which set of each class is enrolled, and whether enrollment rotates over set positions."""

    enrollment: int | str = "staggered"
    rotate: bool = False


def _sets(data: PatternSet) -> list[tuple[str, str, np.ndarray]]:
    return [(c, s, data.X[idx]) for c, s, idx in data.groups()]


def _enrollment_choices(groups: list[tuple[str, str, np.ndarray]], protocol: Protocol, context: RunContext,
                        source: str) -> list[dict[str, int]]:
    """Per fold: class -> index (into ``groups``) of its enrollment set."""
    by_class: dict[str, list[int]] = {}
    for i, (c, _, _) in enumerate(groups):
        by_class.setdefault(c, []).append(i)
    if len(by_class) < 2:
        raise DataError(f"the dataset has {len(by_class)} class(es); verification thresholds need at least 2 classes")
    enrollment = protocol.enrollment
    if enrollment == "staggered":
        # class number i (in sorted order) enrolls its set (i + fold) mod (its number of sets): enrollment
        # pairs then mix set positions (e.g. lighting conditions) as query-vs-enrollment pairs do. A class
        # with a single set enrolls it and contributes no queries.
        n_min = min(len(v) for v in by_class.values())
        if protocol.rotate and n_min < 2:
            raise RecipeError("`rotate: true` needs at least 2 sets per class", source=source,
                              where="evaluation.rotate")
        folds = range(n_min) if protocol.rotate else range(1)
        return [{c: idx[(i + k) % len(idx)] for i, (c, idx) in enumerate(sorted(by_class.items()))} for k in folds]
    if protocol.rotate:
        n = min(len(v) for v in by_class.values())
        if n < 2:
            raise RecipeError("`rotate: true` needs at least 2 sets per class", source=source, where="evaluation.rotate")
        if any(len(v) != n for v in by_class.values()):
            context.note(f"classes have between {n} and {max(len(v) for v in by_class.values())} sets; "
                         f"rotation enrolls each of the first {n} set positions in turn")
        return [{c: idx[k] for c, idx in by_class.items()} for k in range(n)]
    choice: dict[str, int] = {}
    for c, idx in by_class.items():
        if isinstance(enrollment, int):
            if not -len(idx) <= enrollment < len(idx):
                raise RecipeError(f"class {c!r} has {len(idx)} set(s), so set index {enrollment} does not exist; "
                                  "choose a smaller index", source=source, where="evaluation.enrollment")
            choice[c] = idx[enrollment]
        else:
            named = [i for i in idx if groups[i][1] == enrollment]
            if not named:
                raise RecipeError(f"class {c!r} has no set labelled {enrollment!r}; its sets are "
                                  f"{', '.join(groups[i][1] for i in idx)}", source=source, where="evaluation.enrollment")
            choice[c] = named[0]
    return [choice]


def _collection(groups, indices) -> SetCollection:
    return SetCollection(tuple(groups[i][2] for i in indices), np.array([groups[i][0] for i in indices]),
                         np.array([f"{groups[i][0]}/{groups[i][1]}" for i in indices]))


def pattern_folds(data: PatternSet, protocol: Protocol, distance: Distance | None, context: RunContext, *,
                  source: str = "<recipe>") -> list[tuple[str, DistanceMatrix, DistanceMatrix]]:
    """Per fold: (name, enrollment-vs-enrollment training matrix, queries-vs-enrollment evaluation matrix)."""
    if distance is None:
        raise RecipeError("this dataset gives patterns, which need a distance: add e.g. `distance: {plugin: euclidean}`",
                          source=source, where="distance")
    groups = _sets(data)
    folds = _enrollment_choices(groups, protocol, context, source)
    gallery_idx = sorted({i for fold in folds for i in fold.values()})
    col = {g: j for j, g in enumerate(gallery_idx)}
    every = list(range(len(groups)))
    # one batched call: all sets against every set that is enrolled in some fold
    full = distance.pairwise(_collection(groups, every), _collection(groups, gallery_idx), context)
    out = []
    for k, fold in enumerate(folds):
        classes = sorted(fold)
        enrolled = [fold[c] for c in classes]
        cols = [col[i] for i in enrolled]
        queries = [i for i in every if i not in set(enrolled)]
        if not queries:
            raise DataError("no query sets are left after enrollment; every class needs a second set to evaluate with")
        gal = _collection(groups, enrolled)
        train = DistanceMatrix(full[np.ix_(enrolled, cols)], gal.classes, gal.classes, probe_ids=gal.ids,
                               gallery_ids=gal.ids, source="enrollment vs enrollment")
        q = _collection(groups, queries)
        test = DistanceMatrix(full[np.ix_(queries, cols)], q.classes, gal.classes, probe_ids=q.ids,
                              gallery_ids=gal.ids, source="queries vs enrollment")
        name = f"enrollment fold {k}" if protocol.rotate else f"enrollment {protocol.enrollment!r}"
        out.append((name, train, test))
    return out
