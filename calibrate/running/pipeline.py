"""Runs a recipe's stages; knows nothing of any one plugin.

    dataset -> (distance) -> transform -> (normaliser) -> estimators -> evaluators -> outputs

The sequence is written once (``_run_stages``); a route (calibrate.running.result.Route) supplies how the data are read, where
the fits run and how the outputs are put together: :class:`InMemory` here, calibrate.running.sharded.Sharded for shards.

Pattern datasets follow the paper's protocol: per class one *enrollment* set (chosen by
``evaluation.enrollment``); thresholds come from enrollment-vs-enrollment inter-class distances
only; every other set is a query compared with every enrolled class. With
``evaluation.rotate: true`` each set position is enrolled in turn and the evaluation counts are
summed over the folds. Score datasets provide their training and evaluation matrices directly.
"""

from __future__ import annotations

import time

import numpy as np

from calibrate.running import beside
from calibrate.normalisation import stage as normalising
from calibrate.predicted import interval as prediction
from calibrate.statistics import sanity
from calibrate.contract.base import EvaluationInput, FittedModel, Fold, RunContext, ScoreSplit
from calibrate.errors import DataError, RecipeError
from calibrate.saved.grouped import fit_by_group, no_own_impostor, other_group
from calibrate.recipe.groups import check_against
from calibrate.files.commit import StagedOutput
from calibrate.running.outputs import write_outputs
from calibrate.running.predict_stage import PendingPredictions, predict_stage
from calibrate.contract.sharded import ShardedScores
from calibrate.running.sharded import Sharded
from calibrate.recipe.protocol import pattern_folds
from calibrate.recipe.schema import Recipe
from calibrate.running.result import Route, RunResult, StageTimes
from calibrate.contract.types import (DistanceMatrix, EvaluationResult, GenuineDistances, GroupLabels, ImpostorDistances, PatternSet,
                    TargetResult, TrainingGroups, UNLABELLED)


def run_recipe(recipe: Recipe, *, context: RunContext | None = None) -> RunResult:
    """Run every stage and write the outputs into ``recipe.output_dir`` atomically."""
    if context is None:
        context = RunContext(seed=recipe.seed)
    else:
        context.seed = recipe.seed  # the recipe's seed holds whoever supplies the context
    if recipe.spread and context.spreader is None:  # no executor asked for: heavy maps use the other core too
        context.spreader = beside.spread_map
        try:
            return _run_on_executor(recipe, context)
        finally:
            context.spreader = None
    return _run_on_executor(recipe, context)


def _run_on_executor(recipe: Recipe, context: RunContext) -> RunResult:
    if recipe.executor is None or context.executor is not None:
        return _run(recipe, context)
    staging: list[StagedOutput] = []
    try:
        with recipe.executor.build() as executor:
            context.executor = executor
            try:
                return _run(recipe, context, staging)
            finally:
                context.executor = None
    except BaseException:
        for staged in staging:  # again, now that the workers have stopped: one still busy when the run failed
            staged.discard()    # (a shard's scratch file) may have written into the staging folder since
        raise


def _run(recipe: Recipe, context: RunContext, staging: list | None = None) -> RunResult:
    # claimed before any work: a folder holding files calibrate would have to replace without
    # having written them is refused now, not after a long run
    staged = StagedOutput(recipe.output_dir)
    if staging is not None:
        staging.append(staged)
    try:
        return _run_stages(recipe, context, staged)
    except BaseException:
        staged.discard()
        raise
    finally:
        for pending in PendingPredictions.of(context):  # unread only when the run failed: stopped
            pending.close()


def same_comparisons(train: DistanceMatrix, test: DistanceMatrix) -> bool:
    """Whether the evaluation matrix holds exactly the training one's comparisons (the same file twice)."""
    if train.values.shape != test.values.shape or not np.array_equal(train.valid, test.valid):
        return False
    return (np.array_equal(train.probe_classes, test.probe_classes)
            and np.array_equal(train.gallery_classes, test.gallery_classes)
            and np.array_equal(np.where(train.valid, train.values, 0.0), np.where(test.valid, test.values, 0.0)))


def check_score_direction(data: ScoreSplit, recipe: Recipe, context: RunContext) -> None:
    """Refuse scores whose genuine comparisons sit on the reject side (calibrate.statistics.sanity), from the
    genuine scores of both files against the training impostors; note scores that barely separate."""
    train, test = data.train, data.test
    genuine = np.concatenate([m.values[m.genuine_mask()] for m in (train, test)])
    impostor = train.values[train.impostor_mask()]
    kind = train.kind
    other = "distance" if kind == "similarity" else "similarity"
    source = train.source if test.source == train.source else f"{train.source} and {test.source}"
    error, note = sanity.id_problem(np.concatenate([np.asarray(m.gallery_classes) for m in (train, test)]),
                                    np.concatenate([np.asarray(m.probe_classes) for m in (train, test)]), source,
                                    "spell the ids the same way in both places (each claimed id as the probes of that "
                                    "class give their real id)", lambda: _spelled_alike_scores(train, test))
    if error:
        raise DataError(error)
    if note:
        context.note(note)
    sanity.check_direction(genuine, impostor, kind, source,
                           f"set `kind: {other}` under `data:` in {recipe.source}")
    note = (sanity.weak_separation_note(genuine, impostor, kind, source)
            or sanity.unchecked_direction_note(genuine.size, kind, source, f"`kind: {other}` under `data:`"))
    if note:
        context.note(note)


def _spelled_alike_scores(train: DistanceMatrix, test: DistanceMatrix):
    """sanity.id_problem's evidence for score matrices: the valid scores whose probe's real id and claimed id are
    the same id spelled two ways (sanity.spelled_alike), the other valid scores, their kind, and one such pair."""
    alike, others, pair = [], [], None
    for m in (train, test):
        mask = sanity.spelled_alike(np.asarray(m.gallery_classes)[None, :], np.asarray(m.probe_classes)[:, None])
        alike.append(m.values[mask & m.valid])
        others.append(m.values[~mask & m.valid])
        hits = np.argwhere(mask & m.valid)
        if pair is None and hits.size:
            pair = (m.gallery_classes[hits[0][1]], m.probe_classes[hits[0][0]])
    return None if pair is None else (np.concatenate(alike), np.concatenate(others), train.kind, pair)


def _run_stages(recipe: Recipe, context: RunContext, staged: StagedOutput) -> RunResult:
    """The stages in the one order every run takes: load -> read (distances, checks) -> transform -> (normaliser) ->
    estimators -> (prediction) -> evaluators -> outputs, by the route :class:`InMemory`, or, when the dataset returns
    ShardedScores, calibrate.running.sharded.Sharded (read, fitted and evaluated shard by shard on the workers)."""
    times = StageTimes()
    context.clock = times  # components count their parts of a stage (RunContext.timed)
    dataset = recipe.data.build()
    with times("load data"):
        data = dataset.load(context)
    route = (Sharded if isinstance(data, ShardedScores) else InMemory)(recipe, context, staged, times, dataset, data)
    with route:
        kind = route.read()
        for note in recipe.defaults:
            context.note(note)
        said = recipe.default_note(kind)
        if said:
            context.note(said)
        route.fit()
        results = route.evaluate()
        route.write(results)
    return RunResult(recipe.output_dir, results, route.folds, tuple(context.notes), dict(times.seconds))


class InMemory(Route):
    """The route of data in memory: each fold's matrices read and checked, then fitted fold by fold in the run's
    process (the predicted intervals perhaps beside it, calibrate.running.beside), judged by the recipe's evaluators."""

    def read(self) -> str:
        self.raw_folds, self.hint = _raw_folds(self.recipe, self.dataset, self.data, self.context, self.times)
        return self.raw_folds[0][1].kind

    def fit(self) -> None:
        recipe, data, context = self.recipe, self.data, self.context
        cohorts = (data.train_cohort, data.test_cohort) if isinstance(data, ScoreSplit) else (None, None)
        self.groups = run_groups(recipe, data, self.raw_folds, context)
        raw_folds = self.raw_folds
        if recipe.same_group:
            raw_folds = same_group_folds(raw_folds, self.groups, recipe, context)
        folds: list[Fold] = []
        for name, train, test in raw_folds:
            folds.append(_fit_fold(recipe, name, train, test, len(folds), self.hint, context, self.times, cohorts,
                                   self.groups))
        self.folds = tuple(folds)

    def evaluate(self) -> dict[str, list[TargetResult]]:
        evaluation = EvaluationInput(self.folds, self.recipe.targets, self.recipe.plots, self.groups)
        self.evaluated: list[EvaluationResult] = []
        for spec in self.recipe.evaluators:
            with self.times(f"evaluate {spec.label}"):
                self.evaluated.append(spec.build().evaluate(evaluation, self.context))
        results: dict[str, list[TargetResult]] = {}
        for res in self.evaluated:
            for label, rows in res.estimators.items():
                if label in results:
                    raise DataError(f"two evaluators reported results for estimator {label!r}; use only one FPR "
                                    "evaluator")
                results[label] = rows
        for pending in PendingPredictions.of(self.context):  # read by no evaluator: its notes still belong to the run
            pending._get()
        return results

    def write(self, results: dict[str, list[TargetResult]]) -> None:
        write_outputs(self.staged, self.recipe, list(self.folds), self.evaluated, results, self.context.notes,
                      self.times)


def run_groups(recipe: Recipe, data, raw_folds: list, context: RunContext) -> GroupLabels | None:
    """The run's demographic groups: the recipe's groups file (``data: {groups: FILE}``) or else the dataset's own
    (``ScoreSplit.groups``), checked against the classes of the data (calibrate.recipe.groups); None without either."""
    own = data.groups if isinstance(data, ScoreSplit) else None
    groups = recipe.groups if recipe.groups is not None else own
    if groups is None:
        return None
    if recipe.groups is not None and own is not None:
        context.note(f"the recipe's groups file {recipe.groups.source} replaces the groups the dataset gives")
    enrolled = np.unique(np.concatenate([np.asarray(test.gallery_classes) for _, _, test in raw_folds]))
    probes = np.unique(np.concatenate([np.asarray(m.probe_classes) for _, train, test in raw_folds
                                       for m in (train, test)]))
    for note in check_against(groups, enrolled, probes):
        context.note(note)
    return groups


def same_group_folds(raw_folds: list, groups: GroupLabels | None, recipe: Recipe, context: RunContext) -> list:
    """``data: {impostors: same-group}`` (ISO/IEC 19795-10): every fold's impostor comparisons of a labelled class
    with probes of another group (or of no group) left out of fitting and evaluation, so that the thresholds are
    calibrated, and the FPR measured, against same-group impostors; genuine comparisons and the impostors of
    classes without a group stay (those classes are calibrated against all their impostors, as the note says)."""
    if groups is None:
        raise RecipeError("`impostors: same-group` needs the classes' demographic groups: add `groups: FILE` under "
                          "`data:` (a CSV with a header `class,group`)", source=recipe.source, where="data.impostors")
    out, left_out, kept = [], 0, 0
    for name, train, test in raw_folds:
        pair = []
        for m in (train, test):
            probe, gallery = groups.codes(m.probe_classes), groups.codes(m.gallery_classes)
            cross = m.impostor_mask() & other_group(probe[:, None], gallery[None, :], len(groups.names))
            left_out += int(np.count_nonzero(cross))
            kept += int(np.count_nonzero(m.impostor_mask())) - int(np.count_nonzero(cross))
            pair.append(DistanceMatrix(m.values, m.probe_classes, m.gallery_classes, m.valid & ~cross, m.kind,
                                       m.probe_ids, m.gallery_ids, m.source))
        training = pair[0].impostor_mask().sum(axis=0)
        if np.any(training == 0):
            j = int(np.argmax(training == 0))
            cls = str(pair[0].gallery_classes[j])
            raise no_own_impostor(cls, groups.group_of(cls), f"{name}: ", "remove `impostors: same-group` under "
                                  "`data:`, or give the group more probes")
        out.append((name, pair[0], pair[1]))
    unlabelled = sorted({str(c) for _, _, test in raw_folds for c in np.asarray(test.gallery_classes).tolist()
                         if groups.group_of(c) == UNLABELLED})
    context.note(f"calibrated against same-group impostors (`impostors: same-group`, ISO/IEC 19795-10): {left_out:,} "
                 f"impostor comparisons of a class with a probe of another group were left out of fitting and "
                 f"evaluation ({kept:,} kept), so every FPR in this report is over same-group impostor attempts"
                 + (f"; {len(unlabelled):,} enrolled class(es) without a group are calibrated against all their "
                    "impostors" if unlabelled else ""))
    return out


def _raw_folds(recipe: Recipe, dataset, data, context: RunContext, times: StageTimes) -> tuple[list, str | None]:
    """The (name, train, test) matrices of raw scores the run fits and evaluates, and the hint a
    failed fit adds (repeated scores that look like an unmarked failure value), or None."""
    if isinstance(data, PatternSet):
        with times("distances"):
            return pattern_folds(data, recipe.protocol, recipe.distance.build() if recipe.distance else None,
                                 context, source=recipe.source), None
    if not isinstance(data, ScoreSplit):
        raise DataError(f"dataset {recipe.data.info.name!r} returned {type(data).__name__}; expected PatternSet or ScoreSplit")
    if recipe.distance is not None:
        raise RecipeError(f"dataset {recipe.data.info.name!r} gives comparison scores, not patterns; remove `distance:`",
                          source=recipe.source, where="distance")
    if recipe.protocol.rotate:
        raise RecipeError("`rotate:` applies to image-set datasets only", source=recipe.source, where="evaluation.rotate")
    if data.missing:
        per_file = ", ".join(f"{n} in {name}" for name, n in data.missing_by_file) or str(data.missing)
        context.note(f"failed comparisons (the dataset's `missing:` marker) were excluded from fitting and "
                     f"evaluation: {per_file}")
    with times("check scores"):  # a failure marker left in, the score direction, train and test the same
        hint = repeated_score_hint(data.train, dataset.missing)
        if hint:
            context.note(hint)
        check_score_direction(data, recipe, context)
        same = same_comparisons(data.train, data.test)
    if same:
        context.note("the evaluation comparisons are the training ones (train and test give the same scores): every "
                     "achieved FPR below is in-sample and says nothing of unseen impostors. To fit on all of the "
                     "data, use `calibrate fit SCORES --out cal.json`, then `calibrate evaluate cal.json OTHER` "
                     "on comparisons it has not seen")
    return [("score split", data.train, data.test)], hint


def _fit_fold(recipe: Recipe, name: str, train: DistanceMatrix, test: DistanceMatrix, index: int, hint: str | None,
              context: RunContext, times: StageTimes, cohorts: tuple = (None, None),
              groups: GroupLabels | None = None) -> Fold:
    """One fold: the transform fitted on the training impostors, the normaliser (when the recipe has one),
    every estimator fitted, the predicted intervals (when on), and each estimator's thresholds at the targets."""
    with times("transform"):
        # fitted on the training impostor comparisons only, as the estimators are (and calibrate.fit is)
        transform = recipe.transform_for(train.kind).build().fit(train.impostors_only())
        train_d, test_d = _apply_both(transform, train, test)
        train_d.check_distances("training distances")
        test_d.check_distances("evaluation distances")
    normalization = None
    if recipe.normalizer is not None:
        with times(f"normalise ({recipe.normalizer.info.name})"):
            train_d, test_d, normalization = normalising.normalise_fold(recipe.normalizer, train, test, train_d, test_d,
                                                                        transform, cohorts, context)
        if index == 0:
            context.note(normalising.normalised_note(normalization))
    impostors = ImpostorDistances.from_matrix(train_d)
    genuine = GenuineDistances.from_matrix(train_d, impostors.classes)  # training genuine comparisons, if any
    training_groups = None if groups is None else TrainingGroups.of_matrix(groups, train_d)
    models: dict[str, FittedModel] = {}
    tables, predictions = {}, {}
    fitted = []
    for spec in recipe.estimators:
        estimator = spec.build()
        started = time.perf_counter()
        with times(f"fit {spec.label}"):
            try:
                if recipe.same_group:  # each group calibrated on its own (calibrate.saved.grouped)
                    models[spec.label] = fit_by_group(spec.build, impostors, genuine, training_groups, context)
                else:
                    models[spec.label] = estimator.fit(impostors, context, genuine=genuine, groups=training_groups)
            except DataError as exc:
                if hint:
                    raise DataError(f"{exc}. {hint}") from None
                raise
        fitted.append((spec, estimator, time.perf_counter() - started))
    if recipe.prediction.enabled:
        if beside.available() and all(s.confidence is None and (prediction.simulates(e) or recipe.spread)
                                      for s, e, _ in fitted):
            # nothing before the evaluators' predicted columns reads it: computed beside the thresholds,
            # the evaluation and its pictures, and waited for when first read (see PendingPredictions). Only
            # simulated galleries, or refits where the recipe names no executor (else they use its workers),
            # and no `confidence:` (whose thresholds are made from the prediction)
            impostors.sorted_within()  # the world's and the saved fingerprint's: sorted once, for both processes
            predictions = PendingPredictions(recipe, fitted, models, impostors, train_d, name, index, context, times)
        else:
            predict_stage(recipe, fitted, models, predictions, impostors, train_d, name, index, context, times)
    for spec, _, _ in fitted:
        if spec.confidence is not None and spec.label not in predictions:
            raise DataError(f"estimator {spec.label}: `confidence: {spec.confidence}` needs the simulated galleries "
                            "of the predicted interval, which could not be made (see the notes)")
        tables[spec.label] = models[spec.label].thresholds(recipe.targets, label=spec.label)
    return Fold(name, train_d, test_d, models, tables, transform, train.kind, impostors, predictions,
                normalization=normalization, raw_test=test, training_scores=sanity.training_span(train))


def _apply_both(transform, train: DistanceMatrix, test: DistanceMatrix) -> tuple[DistanceMatrix, DistanceMatrix]:
    """The transform applied to the training and evaluation matrices. When both are one score matrix with
    other valid entries (a file split per class), it maps their valid entries together once (a transform
    is element-wise) and each keeps its own mask."""
    if train.values is not test.values or train.kind != test.kind:
        return transform.apply(train), transform.apply(test)
    both = transform.apply(DistanceMatrix(train.values, train.probe_classes, train.gallery_classes,
                                          train.valid | test.valid, train.kind, train.probe_ids, train.gallery_ids,
                                          train.source))
    return train.with_values(both.values, kind=both.kind), test.with_values(both.values, kind=both.kind)


#: a share of training scores on one value above which a run suspects a failed-comparison marker
REPEATED_SHARE = 0.01


def _extreme_mode(values: np.ndarray) -> tuple[float, int, int | None]:
    """(value, count, 0 or 1) when the most frequent of ``values`` (the first in order, on a tie) is their
    smallest (0) or largest (1) and holds at least :data:`REPEATED_SHARE` of them, else (nan, 0, None):
    what ``np.unique(values, return_counts=True)`` would say, without sorting every value. Only a value
    at least as frequent as the more frequent extreme can beat it; values are bucketed by their bits
    (counts per bucket bound counts per value), and only buckets that reach that count are counted
    exactly."""
    lo, hi = values.min(), values.max()
    n_lo, n_hi = int(np.count_nonzero(values == lo)), int(np.count_nonzero(values == hi))
    count, k, value = (n_lo, 0, lo) if n_lo >= n_hi else (n_hi, 1, hi)
    if count / values.size < REPEATED_SHARE:
        return float("nan"), 0, None
    bits = (np.asarray(values, dtype=np.float64) + 0.0).view(np.uint64)  # + 0.0: -0.0 joins 0.0's bucket
    buckets = ((bits * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(48)).astype(np.intp)  # 65,536 buckets
    heavy = np.flatnonzero(np.bincount(buckets, minlength=1 << 16) >= count)
    inner = values[np.isin(buckets, heavy) & (values != lo) & (values != hi)]
    if inner.size:
        uniq, counts = np.unique(inner, return_counts=True)
        # np.unique's argmax takes the smallest of tied values: an inner value ties ahead of the largest only
        if counts.max() > count or (counts.max() == count and k == 1):
            return float("nan"), 0, None
    return float(value), count, k


def repeated_score_hint(train: DistanceMatrix, missing: float | None) -> str | None:
    """When one score value, the smallest or largest, dominates the training impostor scores (or fills a
    whole gallery column), say that it is probably a failed-comparison marker and name `missing:`."""
    if missing is not None:
        return None
    mask = train.impostor_mask()
    values = train.values.T[mask.T]  # column by column: each gallery class's scores in one segment
    if values.size < 2:
        return None
    value, count, k = _extreme_mode(values)
    # a gallery column whose training scores are all one value (its smallest equals its largest)
    per_column = mask.sum(axis=0)
    starts = np.r_[0, np.cumsum(per_column)[:-1]]
    some = per_column > 0
    lowest, highest = np.full(per_column.size, np.inf), np.full(per_column.size, -np.inf)
    lowest[some] = np.minimum.reduceat(values, starts[some])
    highest[some] = np.maximum.reduceat(values, starts[some])
    columns = np.flatnonzero((per_column > 1) & (lowest == highest))
    if columns.size:
        value = float(lowest[columns[0]])
        where = (f"Every training score of {len(columns)} gallery class(es) ({', '.join(map(str, train.gallery_classes[columns][:3]))}"
                 f"{' ...' if len(columns) > 3 else ''}) is {value:g}")
    elif k is not None and count > 1:  # (_extreme_mode says k only at a share of REPEATED_SHARE or more)
        where = (f"{count} of the {values.size} training impostor scores ({100 * count / values.size:.3g}%) equal "
                 f"{value:g}, the {'smallest' if k == 0 else 'largest'} score")
    else:
        return None
    return (f"{where}: such a repeated extreme value is often a matcher's marker of a failed comparison; "
            f"if it is one here, set `missing: {value:g}` under `data:` so that those comparisons are excluded")
