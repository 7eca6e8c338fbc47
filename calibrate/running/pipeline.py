"""Runs a recipe's stages; knows nothing of any one plugin.

    dataset -> (distance) -> transform -> (normaliser) -> estimators -> evaluators -> outputs

Pattern datasets follow the paper's protocol: per class one *enrollment* set (chosen by
``evaluation.enrollment``); thresholds come from enrollment-vs-enrollment inter-class distances
only; every other set is a query compared with every enrolled class. With
``evaluation.rotate: true`` each set position is enrolled in turn and the evaluation counts are
summed over the folds. Score datasets provide their training and evaluation matrices directly.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Mapping
from dataclasses import replace

import numpy as np

from calibrate.running import beside
from calibrate.predicted import confidence
from calibrate.normalisation import stage as normalising
from calibrate.predicted import interval as prediction
from calibrate.statistics import sanity
from calibrate.contract.base import EvaluationInput, FittedModel, Fold, RunContext, ScoreSplit
from calibrate.errors import DataError, RecipeError
from calibrate.running.grouped import fit_by_group
from calibrate.recipe.groups import check_against
from calibrate.files.commit import StagedOutput
from calibrate.running.outputs import write_outputs
from calibrate.contract.sharded import ShardedScores
from calibrate.running.sharded import run_sharded
from calibrate.recipe.protocol import pattern_folds
from calibrate.recipe.schema import Recipe
from calibrate.running.result import RunResult, StageTimes
from calibrate.contract.types import (DistanceMatrix, EvaluationResult, GenuineDistances, GroupLabels, ImpostorDistances, PatternSet,
                    TargetResult, TrainingGroups, UNLABELLED)


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
    """load -> (distances) -> transform -> estimators -> (prediction) -> evaluators -> outputs."""
    times = StageTimes()
    context.clock = times  # components count their parts of a stage (RunContext.timed)
    dataset = recipe.data.build()
    with times("load data"):
        data = dataset.load(context)
    if isinstance(data, ShardedScores):  # read, fitted and evaluated shard by shard on the workers
        return run_sharded(recipe, context, staged, data, times)
    raw_folds, hint = _raw_folds(recipe, dataset, data, context, times)
    for note in recipe.defaults:
        context.note(note)
    said = recipe.default_note(raw_folds[0][1].kind)
    if said:
        context.note(said)
    folds: list[Fold] = []
    cohorts = (data.train_cohort, data.test_cohort) if isinstance(data, ScoreSplit) else (None, None)
    groups = run_groups(recipe, data, raw_folds, context)
    if recipe.same_group:
        raw_folds = same_group_folds(raw_folds, groups, recipe, context)
    for name, train, test in raw_folds:
        folds.append(_fit_fold(recipe, name, train, test, len(folds), hint, context, times, cohorts, groups))
    evaluation = EvaluationInput(tuple(folds), recipe.targets, recipe.plots, groups)
    evaluated = []
    for spec in recipe.evaluators:
        with times(f"evaluate {spec.label}"):
            evaluated.append(spec.build().evaluate(evaluation, context))
    results = _merge(evaluated)
    for pending in PendingPredictions.of(context):  # read by no evaluator: its notes still belong to the run
        pending._get()
    write_outputs(staged, recipe, folds, evaluated, results, context.notes, times)
    return RunResult(recipe.output_dir, results, tuple(folds), tuple(context.notes), dict(times.seconds))


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
            cross = m.impostor_mask() & (probe[:, None] != gallery[None, :]) & (gallery < len(groups.names))[None, :]
            left_out += int(np.count_nonzero(cross))
            kept += int(np.count_nonzero(m.impostor_mask())) - int(np.count_nonzero(cross))
            pair.append(DistanceMatrix(m.values, m.probe_classes, m.gallery_classes, m.valid & ~cross, m.kind,
                                       m.probe_ids, m.gallery_ids, m.source))
        training = pair[0].impostor_mask().sum(axis=0)
        if np.any(training == 0):
            j = int(np.argmax(training == 0))
            cls = str(pair[0].gallery_classes[j])
            raise DataError(f"{name}: class {cls[:60]!r} (group {groups.group_of(cls)[:40]!r}) has no training impostor "
                            "comparison with a probe of its own group, so it cannot be calibrated against same-group "
                            "impostors; remove `impostors: same-group` under `data:`, or give the group more probes")
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
                if recipe.same_group:  # each group calibrated on its own (calibrate.running.grouped)
                    models[spec.label] = fit_by_group(spec.build, impostors, genuine, training_groups, context)
                else:
                    models[spec.label] = estimator.fit(impostors, context, genuine=genuine, groups=training_groups)
            except DataError as exc:
                if hint:
                    raise DataError(f"{exc}. {hint}") from None
                raise
        fitted.append((spec, estimator, time.perf_counter() - started))
    if recipe.prediction.enabled and recipe.same_group:
        if index == 0:
            context.note("no predicted FPR intervals: the thresholds are calibrated group by group against same-group "
                         "impostors (`impostors: same-group`), which the simulated galleries do not model yet")
    elif recipe.prediction.enabled:
        if beside.available() and all(s.confidence is None and prediction.simulates(e) for s, e, _ in fitted):
            # nothing before the evaluators' predicted columns reads it: computed beside the thresholds,
            # the evaluation and its pictures, and waited for when first read (see PendingPredictions). Only
            # simulated galleries (no refits, which use the run's executor), and no `confidence:` (whose
            # thresholds are made from the prediction)
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


class PendingPredictions(Mapping):
    """A fold's predictions (label -> calibrate.predicted.interval.Prediction) computed by :func:`predict_stage` in a
    process beside the run (calibrate.running.beside), started when the fold's models are fitted. The first read waits
    for it; its notes then take their place in the run's notes where they would have been said in line (so
    report.md reads the same either way) and its stage times join the run's (they overlap the stages run
    meanwhile). An error in the prediction is raised at that read."""

    def __init__(self, recipe: Recipe, fitted: list, models: dict, impostors: ImpostorDistances,
                 train_d: DistanceMatrix, fold: str, fold_index: int, context: RunContext, times: StageTimes) -> None:
        for earlier in self.of(context):  # one process beside the run at a time: an earlier fold's is waited for
            earlier._get()
        self._context, self._times, self._at = context, times, len(context.notes)
        self._value: dict | None = None

        def work():
            # the child shows and says nothing, and uses none of the run's workers
            quiet = replace(context, notes=[], reporter=None, progress=None, executor=None)
            before = dict(times.seconds)
            out: dict = {}
            predict_stage(recipe, fitted, models, out, impostors, train_d, fold, fold_index, quiet, times)
            spent = {k: v - before.get(k, 0.0) for k, v in times.seconds.items() if v != before.get(k)}
            return out, quiet.notes, spent

        prediction.before_beside()
        self._job = beside.start(work, f"the predicted FPR intervals of fold {fold!r}")
        context._beside.append(self)

    @staticmethod
    def of(context: RunContext) -> list["PendingPredictions"]:
        """The run's unread pending predictions, oldest first (those read or stopped are forgotten)."""
        context._beside[:] = [p for p in context._beside if not p._job.closed]
        return list(context._beside)

    def _get(self) -> dict:
        if self._value is None:
            if self._job.ready:
                value, notes, spent = self._job.result()
            else:  # shown while the run waits for it (the child itself shows nothing)
                with self._context.stage(f"waiting for {self._job.name} (computed beside the run)"):
                    value, notes, spent = self._job.result()
            self._context.notes[self._at:self._at] = notes
            for note in notes:
                warnings.warn(note, stacklevel=2)
            for stage, seconds in spent.items():
                self._times.add_beside(stage, seconds)
            self._value = value
        return self._value

    def __getitem__(self, label: str):
        return self._get()[label]

    def __iter__(self):
        return iter(self._get())

    def __len__(self) -> int:
        return len(self._get())

    def close(self) -> None:
        """Stop the child if its result is still unread (the run failed before reading it)."""
        self._job.close()


def predict_stage(recipe: Recipe, fitted: list, models: dict, predictions: dict, impostors: ImpostorDistances,
                  train_d: DistanceMatrix, fold: str, fold_index: int, context: RunContext, times: StageTimes) -> None:
    """Every estimator's predicted FPR on this fold (calibrate.predicted.interval), filling ``predictions`` (and
    ``models``, wrapped with their bound where a confidence is asked). Estimators with a vectorised
    simulation share one set of simulated galleries; the others are refitted within the time budget."""
    with times("predict: reference world"):
        try:
            worlds = prediction.build_worlds(impostors, train_d)
        except DataError as exc:  # the thresholds stand without it: said once, not fatal
            context.note(f"no predicted FPR intervals on fold {fold!r}: {exc}")
            return
    together = [(s, e) for s, e, _ in fitted if s.confidence is None and prediction.simulates(e)]
    used = {prediction.choose_world(worlds, impostors, models[s.label], recipe.targets).structure: None
            for s, _, _ in fitted}
    for world in worlds.values():
        if world.rejected and world.structure in used:
            context.note(f"predicted FPR intervals, fold {fold!r}: the {world.structure} world's tail was refitted as "
                         f"{world.tail_model!r}: " + "; ".join(world.rejected))
    if together:
        with times("predict " + ", ".join(s.label for s, _ in together)):
            try:
                done = prediction.predict_in_worlds([e for _, e in together], [models[s.label] for s, _ in together],
                                                    impostors, recipe.targets, settings=recipe.prediction,
                                                    seed=[recipe.seed, fold_index], worlds=worlds)
            except DataError as exc:
                context.note(f"{', '.join(s.label for s, _ in together)}: no predicted FPR interval ({exc})")
                done = [None] * len(together)
        for (spec, _), predicted in zip(together, done):
            if predicted is not None:
                _keep(spec, predicted, predictions, fold, recipe, context)
    for index, (spec, estimator, fit_seconds) in enumerate(fitted):
        if any(spec is s for s, _ in together):
            continue
        with times(f"predict {spec.label}"):
            try:
                world = prediction.choose_world(worlds, impostors, models[spec.label], recipe.targets)
                models[spec.label], predicted = confidence.predict_model(
                    models[spec.label], estimator, impostors, recipe.targets, spec.confidence,
                    settings=recipe.prediction, seed=[recipe.seed, fold_index, index], context=context, world=world,
                    fit_seconds=fit_seconds, base_seconds=times.total() - times.predicting())
            except DataError as exc:
                if spec.confidence is not None:
                    raise DataError(f"estimator {spec.label}: `confidence: {spec.confidence}` needs the simulated "
                                    f"galleries of the predicted interval, which failed: {exc}") from None
                context.note(f"{spec.label}: no predicted FPR interval ({exc})")
                continue
        _keep(spec, predicted, predictions, fold, recipe, context)


def _keep(spec, predicted: "prediction.Prediction", predictions: dict, fold: str, recipe: Recipe,
          context: RunContext) -> None:
    predictions[spec.label] = predicted
    for said in prediction_notes(spec.label, fold, predicted, recipe.targets):
        context.note(said)
    unmet = [t for t, m in zip(recipe.targets, predicted.methods) if m == "model-unmet"]
    if unmet:
        context.note(f"{spec.label} at {', '.join(f'{100 * t:.3g}%' for t in unmet)}: confidence "
                     f"{spec.confidence} cannot be met from these training data: even the strictest candidate "
                     "threshold exceeded the target in more than 1 - confidence of the simulated galleries, "
                     "so its threshold is distance 0: only exact matches are accepted (nearly every genuine "
                     "user is rejected there). More training impostor distances, or a larger target, are "
                     "needed for that promise")


def prediction_notes(label: str, fold: str, predicted: "prediction.Prediction", targets: tuple[float, ...]) -> list[str]:
    """What the run's notes say about how an estimator's interval was made, when it is not the plain case:
    refits cut short by the budget, and targets without a prediction (the world does not fit there)."""
    out = []
    if predicted.budget_note:
        out.append(f"{label}: predicted FPR interval from "
                   f"{'refits: ' if predicted.simulation == 'refits' else ''}{predicted.budget_note}")
    missing = [(t, s) for t, s in zip(targets, predicted.status) if s not in prediction.PREDICTED]
    if missing:
        where = ", ".join(f"{100 * t:.3g}%" for t, _ in missing)
        out.append(f"{label} at {where}: {prediction.STATUS[missing[0][1]]}; no interval is given there"
                   + (f" (fold {fold!r})" if fold != "score split" else ""))
    return out


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
