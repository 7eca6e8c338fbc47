"""Runs a recipe's stages; knows nothing of any one plugin.

    dataset -> (distance) -> transform -> estimators -> evaluators -> outputs

Pattern datasets follow the paper's protocol: per class one *enrollment* set (chosen by
``evaluation.enrollment``); thresholds come from enrollment-vs-enrollment inter-class distances
only; every other set is a query compared with every enrolled class. With
``evaluation.rotate: true`` each set position is enrolled in turn and the evaluation counts are
summed over the folds. Score datasets provide their training and evaluation matrices directly.
"""

from __future__ import annotations

import json
import platform
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from .base import EvaluationInput, FittedModel, Fold, RunContext, ScoreSplit
from .errors import DataError, RecipeError
from .outputs import StagedOutput, models_csv, report_md, results_json, thresholds_csv
from .recipe import Recipe
from .types import DistanceMatrix, EvaluationResult, ImpostorDistances, PatternSet, SetCollection, TargetResult


@dataclass(frozen=True)
class RunResult:
    out_dir: Path
    results: dict[str, list[TargetResult]]
    folds: tuple[Fold, ...]
    notes: tuple[str, ...]
    #: seconds per stage, in the order the stages ran (summed over folds)
    timings: dict[str, float] = field(default_factory=dict)


class StageTimes:
    """Wall-clock seconds per named stage; ``with times("fit auto"): ...`` adds to that stage."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._start = time.perf_counter()

    @contextmanager
    def __call__(self, stage: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[stage] = self.seconds.get(stage, 0.0) + time.perf_counter() - start

    def total(self) -> float:
        return time.perf_counter() - self._start


def _sets(data: PatternSet) -> list[tuple[str, str, np.ndarray]]:
    return [(c, s, data.X[idx]) for c, s, idx in data.groups()]


def _enrollment_choices(groups: list[tuple[str, str, np.ndarray]], recipe: Recipe, context: RunContext) -> list[dict[str, int]]:
    """Per fold: class -> index (into ``groups``) of its enrollment set."""
    by_class: dict[str, list[int]] = {}
    for i, (c, _, _) in enumerate(groups):
        by_class.setdefault(c, []).append(i)
    if len(by_class) < 2:
        raise DataError(f"the dataset has {len(by_class)} class(es); verification thresholds need at least 2 classes")
    enrollment = recipe.protocol.enrollment
    if enrollment == "staggered":
        # class number i (in sorted order) enrolls its set (i + fold) mod (its number of sets): enrollment
        # pairs then mix set positions (e.g. lighting conditions) as query-vs-enrollment pairs do. A class
        # with a single set enrolls it and contributes no queries.
        n_min = min(len(v) for v in by_class.values())
        if recipe.protocol.rotate and n_min < 2:
            raise RecipeError("`rotate: true` needs at least 2 sets per class", source=recipe.source,
                              where="evaluation.rotate")
        folds = range(n_min) if recipe.protocol.rotate else range(1)
        return [{c: idx[(i + k) % len(idx)] for i, (c, idx) in enumerate(sorted(by_class.items()))} for k in folds]
    if recipe.protocol.rotate:
        n = min(len(v) for v in by_class.values())
        if n < 2:
            raise RecipeError("`rotate: true` needs at least 2 sets per class", source=recipe.source, where="evaluation.rotate")
        if any(len(v) != n for v in by_class.values()):
            context.note(f"classes have between {n} and {max(len(v) for v in by_class.values())} sets; "
                         f"rotation enrolls each of the first {n} set positions in turn")
        return [{c: idx[k] for c, idx in by_class.items()} for k in range(n)]
    choice: dict[str, int] = {}
    for c, idx in by_class.items():
        if isinstance(enrollment, int):
            if not -len(idx) <= enrollment < len(idx):
                raise RecipeError(f"class {c!r} has {len(idx)} set(s), so set index {enrollment} does not exist; "
                                  "choose a smaller index", source=recipe.source, where="evaluation.enrollment")
            choice[c] = idx[enrollment]
        else:
            named = [i for i in idx if groups[i][1] == enrollment]
            if not named:
                raise RecipeError(f"class {c!r} has no set labelled {enrollment!r}; its sets are "
                                  f"{', '.join(groups[i][1] for i in idx)}", source=recipe.source, where="evaluation.enrollment")
            choice[c] = named[0]
    return [choice]


def _collection(groups, indices) -> SetCollection:
    return SetCollection(tuple(groups[i][2] for i in indices), np.array([groups[i][0] for i in indices]),
                         np.array([f"{groups[i][0]}/{groups[i][1]}" for i in indices]))


def pattern_folds(data: PatternSet, recipe: Recipe, distance, context: RunContext) -> list[tuple[str, DistanceMatrix, DistanceMatrix]]:
    if distance is None:
        raise RecipeError("this dataset gives patterns, which need a distance: add e.g. `distance: {plugin: euclidean}`",
                          source=recipe.source, where="distance")
    groups = _sets(data)
    folds = _enrollment_choices(groups, recipe, context)
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
        name = f"enrollment fold {k}" if recipe.protocol.rotate else f"enrollment {recipe.protocol.enrollment!r}"
        out.append((name, train, test))
    return out


def versions(recipe: Recipe) -> dict[str, Any]:
    out = {"python": platform.python_version(), "platform": platform.platform()}
    for dist in ("calibrate-thresholds", "numpy", "scipy"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = None
    for spec in (recipe.data, recipe.distance, recipe.transform, *recipe.default_transforms.values(), *recipe.estimators,
                 *recipe.evaluators, recipe.executor):
        if spec is not None and spec.info.distribution:
            out[spec.info.distribution] = spec.info.version
    return out


def _merge(results: list[EvaluationResult]) -> dict[str, list[TargetResult]]:
    merged: dict[str, list[TargetResult]] = {}
    for res in results:
        for label, rows in res.estimators.items():
            if label in merged:
                raise DataError(f"two evaluators reported results for estimator {label!r}; use only one FPR evaluator")
            merged[label] = rows
    return merged


def run_recipe(recipe: Recipe, *, context: RunContext | None = None) -> RunResult:
    """Run every stage and write the outputs into ``recipe.output_dir`` atomically."""
    if context is None:
        context = RunContext(seed=recipe.seed)
    else:
        context.seed = recipe.seed  # the recipe's seed holds whoever supplies the context
    if recipe.executor is None or context.executor is not None:
        return _run(recipe, context)
    with recipe.executor.build() as executor:
        context.executor = executor
        try:
            return _run(recipe, context)
        finally:
            context.executor = None


def _run(recipe: Recipe, context: RunContext) -> RunResult:
    # claimed before any work: a folder holding files calibrate would have to replace without
    # having written them is refused now, not after a long run
    staged = StagedOutput(recipe.output_dir)
    try:
        return _run_stages(recipe, context, staged)
    except BaseException:
        staged.discard()
        raise


def _run_stages(recipe: Recipe, context: RunContext, staged: StagedOutput) -> RunResult:
    times = StageTimes()
    dataset = recipe.data.build()
    with times("load data"):
        data = dataset.load(context)
    hint = None
    if isinstance(data, PatternSet):
        with times("distances"):
            raw_folds = pattern_folds(data, recipe, recipe.distance.build() if recipe.distance else None, context)
    elif isinstance(data, ScoreSplit):
        if recipe.distance is not None:
            raise RecipeError(f"dataset {recipe.data.info.name!r} gives comparison scores, not patterns; remove `distance:`",
                              source=recipe.source, where="distance")
        if recipe.protocol.rotate:
            raise RecipeError("`rotate:` applies to image-set datasets only", source=recipe.source, where="evaluation.rotate")
        if data.missing:
            per_file = ", ".join(f"{n} in {name}" for name, n in data.missing_by_file) or str(data.missing)
            context.note(f"failed comparisons (the dataset's `missing:` marker) were excluded from fitting and "
                         f"evaluation: {per_file}")
        hint = repeated_score_hint(data.train, getattr(dataset, "missing", None))
        if hint:
            context.note(hint)
        raw_folds = [("score split", data.train, data.test)]
    else:
        raise DataError(f"dataset {recipe.data.info.name!r} returned {type(data).__name__}; expected PatternSet or ScoreSplit")

    folds: list[Fold] = []
    for note in recipe.defaults:
        context.note(note)
    said = recipe.default_note(raw_folds[0][1].kind)
    if said:
        context.note(said)
    for name, train, test in raw_folds:
        with times("transform"):
            transform = recipe.transform_for(train.kind).build().fit(train)
            train_d, test_d = transform.apply(train), transform.apply(test)
            impostors = ImpostorDistances.from_matrix(train_d)
            test_d.check_distances("evaluation distances")
        models: dict[str, FittedModel] = {}
        tables = {}
        for spec in recipe.estimators:
            with times(f"fit {spec.label}"):
                try:
                    model = spec.build().fit(impostors, context)
                except DataError as exc:
                    if hint:
                        raise DataError(f"{exc}. {hint}") from None
                    raise
                models[spec.label] = model
                tables[spec.label] = model.thresholds(recipe.targets, label=spec.label)
        folds.append(Fold(name, train_d, test_d, models, tables))

    note_training_support(folds, recipe.targets, context)
    evaluation = EvaluationInput(tuple(folds), recipe.targets, recipe.plots)
    evaluated = []
    for spec in recipe.evaluators:
        with times(f"evaluate {spec.label}"):
            evaluated.append(spec.build().evaluate(evaluation, context))
    results = _merge(evaluated)
    write_outputs(staged, recipe, folds, evaluated, results, context, times)
    return RunResult(recipe.output_dir, results, tuple(folds), tuple(context.notes), dict(times.seconds))


#: a share of training scores on one value above which a run suspects a failed-comparison marker
REPEATED_SHARE = 0.01


def repeated_score_hint(train: DistanceMatrix, missing: float | None) -> str | None:
    """When one score value, the smallest or largest, dominates the training impostor scores (or fills a
    whole gallery column), say that it is probably a failed-comparison marker and name `missing:`."""
    if missing is not None:
        return None
    mask = train.impostor_mask()
    values = train.values[mask]
    if values.size < 2:
        return None
    uniq, counts = np.unique(values, return_counts=True)
    k = int(counts.argmax())
    value, count = float(uniq[k]), int(counts[k])
    # a gallery column whose training scores are all one value
    columns = [j for j in range(train.shape[1]) if mask[:, j].sum() > 1
               and np.all(train.values[mask[:, j], j] == train.values[mask[:, j], j][0])]
    if columns:
        value = float(train.values[mask[:, columns[0]], columns[0]][0])
        where = (f"Every training score of {len(columns)} gallery class(es) ({', '.join(map(str, train.gallery_classes[columns][:3]))}"
                 f"{' ...' if len(columns) > 3 else ''}) is {value:g}")
    elif count / values.size >= REPEATED_SHARE and k in (0, uniq.size - 1) and count > 1:
        where = (f"{count} of the {values.size} training impostor scores ({100 * count / values.size:.3g}%) equal "
                 f"{value:g}, the {'smallest' if k == 0 else 'largest'} score")
    else:
        return None
    return (f"{where}: such a repeated extreme value is often a matcher's marker of a failed comparison; "
            f"if it is one here, set `missing: {value:g}` under `data:` so that those comparisons are excluded")


#: below this many training impostor distances under an on-target threshold, the threshold is an extrapolation
SUPPORT_WARNING = 10.0


def note_training_support(folds: list[Fold], targets: tuple[float, ...], context: RunContext) -> None:
    """Say which targets lie beyond what the training impostor distances can show: below the share of
    distances tied at the smallest value (no threshold reaches them), or with e x N_train < 10."""
    n = min(int(f.train.impostor_mask().sum()) for f in folds)
    pooled = folds[0].train.values[folds[0].train.impostor_mask()]
    if pooled.size:
        smallest = float(pooled.min())
        tied = float(np.mean(pooled == smallest))
        below = [t for t in targets if t < tied]
        if tied > 1.0 / pooled.size and below:
            context.note(f"{100 * tied:.3g}% of the training impostor distances equal the smallest one ({smallest:.6g}); "
                         f"at target(s) {', '.join(f'{100 * t:.3g}%' for t in sorted(below, reverse=True))} no threshold "
                         "can be on target, since `distance <= threshold` accepts all of these ties or none of them: "
                         "a matcher with finer scores (or a transform that keeps them apart) is needed there")
    thin = [t for t in targets if t * n < SUPPORT_WARNING]
    if not thin:
        return
    listed = ", ".join(f"{100 * t:.3g}% ({t * n:.1f})" for t in sorted(thin, reverse=True))
    context.note(f"{n} training impostor distances: at target(s) {listed} fewer than {SUPPORT_WARNING:.0f} of them "
                 "would lie below an on-target threshold, so every estimator extrapolates there and the achieved "
                 "rate can stray far from the target by chance; read the class-bootstrap interval in the report, "
                 "and enroll more classes (or add impostor comparisons) for a firmer threshold")


def _jsonable_recipe(recipe: Recipe) -> dict:
    return json.loads(json.dumps(recipe.raw, default=str))


def write_outputs(staged: StagedOutput, recipe: Recipe, folds: list[Fold], evaluated: list[EvaluationResult],
                  results: dict[str, list[TargetResult]], context: RunContext, times: StageTimes | None = None) -> None:
    """Stage every output file, then commit them as one file set (the caller discards on failure)."""
    times = times or StageTimes()
    with times("write outputs"):
        _stage_tables(staged, recipe, folds, evaluated)
    timings = {"seconds": {k: round(v, 4) for k, v in times.seconds.items()}, "total": round(times.total(), 4)}
    first = folds[0]
    sections = [s for res in evaluated for s in res.sections] + [timings_md(timings)]
    preamble = (f"Recipe `{Path(recipe.source).name}`; {len(first.models)} estimator(s); "
                f"{first.train.shape[1]} enrolled classes; "
                f"{len(folds)} fold(s): {', '.join(f.name for f in folds)}.")
    staged.write_text("report.md", report_md("Calibration report", results, sections, context.notes, preamble))
    staged.write_text("results.json", results_json(results, _jsonable_recipe(recipe), versions(recipe),
                                                   {"notes": context.notes, "timings": timings}))
    staged.commit()


def timings_md(timings: dict) -> str:
    """report.md's section of seconds per stage."""
    total = timings["total"]
    lines = ["## Time per stage", "", f"Wall-clock seconds of this run ({total:.2f} s until the report was written).", "",
             "| Stage | Seconds | Share |", "|---|---|---|"]
    for stage, seconds in timings["seconds"].items():
        lines.append(f"| {stage} | {seconds:.3f} | {100 * seconds / total:.0f}% |" if total > 0 else f"| {stage} | {seconds:.3f} | |")
    return "\n".join(lines)


def _stage_tables(staged: StagedOutput, recipe: Recipe, folds: list[Fold], evaluated: list[EvaluationResult]) -> None:
    first = folds[0]
    staged.write_text("thresholds.csv", thresholds_csv(list(first.tables.values())))
    for k, fold in enumerate(folds[1:], start=1):
        staged.write_text(f"thresholds-fold{k}.csv", thresholds_csv(list(fold.tables.values())))
    rows = []
    for label, model in first.models.items():
        for row in model.parameters():
            rows.append({"estimator": label, **row})
    if rows:
        staged.write_text("models.csv", models_csv(rows))
    if recipe.save_calibration:
        staged.write_text("calibration.json", calibration_json(recipe, first))
    files = {}
    for res in evaluated:
        files.update(res.files)
    for name, content in files.items():
        staged.write_bytes(name, content)


def calibration_json(recipe: Recipe, fold: Fold) -> str:
    doc = {"format": "calibrate-calibration", "version": 1, "estimators": {}}
    for spec in recipe.estimators:
        doc["estimators"][spec.label] = {"plugin": spec.info.name, "params": json.loads(json.dumps(spec.params, default=str)),
                                         "state": fold.models[spec.label].to_state()}
    return json.dumps(doc, indent=1) + "\n"
