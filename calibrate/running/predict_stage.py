"""The predict stage of a run: each estimator's predicted FPR interval (calibrate.predicted.interval), computed
beside the run in a forked process where it can (calibrate.running.beside) and read when first needed
(:class:`PendingPredictions`), kept per fold and target, and the notes a run says about it."""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import replace

import numpy as np

from calibrate.running import beside
from calibrate.predicted import confidence
from calibrate.predicted import interval as prediction
from calibrate.contract.base import RunContext
from calibrate.errors import DataError
from calibrate.recipe.schema import Recipe
from calibrate.running.result import StageTimes
from calibrate.contract.types import DistanceMatrix, ImpostorDistances


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
        self._count = beside.SharedCount("galleries")

        def work():
            # the child says nothing, counts its simulated galleries for the run to show, and uses none of its workers
            quiet = replace(context, notes=[], reporter=self._count, progress=None, executor=None, spreader=None)
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
                with self._context.stage(f"waiting for {self._job.name} (computed beside the run)", None,
                                         "galleries") as task:
                    self._count.follow(task, self._job)
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
                  train_d: DistanceMatrix | None, fold: str, fold_index: int, context: RunContext, times: StageTimes,
                  units=False) -> None:
    """Every estimator's predicted FPR on this fold (calibrate.predicted.interval), filling ``predictions`` (and
    ``models``, wrapped with their bound where a confidence is asked). Estimators with a vectorised
    simulation share one set of simulated galleries; the others are refitted within the time budget. ``units``: the
    training distances' probe identities where there is no ``train_d`` to find them in (a sharded run's sample)."""
    if recipe.same_group:  # each group calibrated on its own: each predicted in its own world
        for index, (spec, _, _) in enumerate(fitted):
            with times(f"predict {spec.label}"):
                predicted = predict_by_group(models[spec.label], impostors, recipe, [recipe.seed, fold_index, index],
                                             fold, context)
            if predicted is not None:
                _keep(spec, predicted, predictions, fold, recipe, context)
        return
    with times("predict: reference world"):
        worlds = prediction.Worlds(impostors, train_d, units)
        try:
            worlds.first()
        except DataError as exc:  # the thresholds stand without it: said once, not fatal
            context.note(f"no predicted FPR intervals on fold {fold!r}: {exc}")
            return
        used = {prediction.choose_world(worlds, impostors, models[s.label], recipe.targets).structure: None
                for s, _, _ in fitted}
    together = [(s, e) for s, e, _ in fitted if s.confidence is None and prediction.simulates(e)]
    for _, world in worlds.built():
        if world.rejected and world.structure in used:
            context.note(f"predicted FPR intervals, fold {fold!r}: the {world.structure} world's tail was refitted as "
                         f"{world.tail_model!r}: " + "; ".join(world.rejected))
    if together:
        with times("predict " + ", ".join(s.label for s, _ in together)):
            try:
                done = prediction.predict_in_worlds([e for _, e in together], [models[s.label] for s, _ in together],
                                                    impostors, recipe.targets, settings=recipe.prediction,
                                                    seed=[recipe.seed, fold_index], worlds=worlds, context=context)
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
                    fit_seconds=fit_seconds, base_seconds=times.total() - times.predicting(), units=worlds.units())
            except DataError as exc:
                if spec.confidence is not None:
                    raise DataError(f"estimator {spec.label}: `confidence: {spec.confidence}` needs the simulated "
                                    f"galleries of the predicted interval, which failed: {exc}") from None
                context.note(f"{spec.label}: no predicted FPR interval ({exc})")
                continue
        _keep(spec, predicted, predictions, fold, recipe, context)


def predict_by_group(model, impostors: ImpostorDistances, recipe: Recipe, seed: list, fold: str,
                     context: RunContext) -> "prediction.Prediction | None":
    """A model fitted group by group (``impostors: same-group``, calibrate.saved.grouped) predicted group by group
    (calibrate.predicted.interval.predict_parts); None, with a note, when a group has no prediction."""
    from calibrate.saved.grouped import GroupedModel, prediction_parts

    if not isinstance(model, GroupedModel) or not hasattr(model, "estimators"):
        return None
    try:
        return prediction.predict_parts(prediction_parts(model, impostors), model, recipe.targets, settings=recipe.prediction, seed=seed,
                                        context=context)
    except DataError as exc:
        context.note(f"no predicted FPR intervals on fold {fold!r}: {exc}")
        return None


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
    c = predicted.clustering
    if c and max(c["threshold_variance"]) >= 0.01:  # a threshold's error grows by 10% or more (one sd)
        j = int(np.argmax(c["threshold_variance"]))
        out.append(f"{label}: its training false accepts cluster by probe identity ({c['units']} identities; at "
                   f"{100 * targets[j]:.3g}% one identity's rate varies about {np.sqrt(c['cv2'][j]):.2g}x their mean): "
                   "its predicted intervals allow for it, for the probes a deployment meets (wider)"
                   + (f" (fold {fold!r})" if fold != "score split" else ""))
    missing = [(t, s) for t, s in zip(targets, predicted.status) if s not in prediction.PREDICTED]
    if missing:
        where = ", ".join(f"{100 * t:.3g}%" for t, _ in missing)
        out.append(f"{label} at {where}: {prediction.STATUS[missing[0][1]]}; no interval is given there"
                   + (f" (fold {fold!r})" if fold != "score split" else ""))
    return out
