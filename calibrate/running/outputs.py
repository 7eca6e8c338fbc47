"""What a run in memory writes into its output folder: thresholds.csv (one per fold), models.csv, calibration.json,
the evaluators' own files, and results.json and report.md (calibrate.running.report, shared with sharded runs), staged
and committed as one file set through :class:`calibrate.files.commit.StagedOutput` (the protocol, the
manifest and what calibrate may replace are calibrate.files.commit and calibrate.files.manifest).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from calibrate.contract.types import TargetResult, ThresholdTable
from calibrate.files.user_output import csv_text, csv_texts, csv_writer
from calibrate.running.report import evaluators_summary, versions, write_reports

if TYPE_CHECKING:
    from calibrate.contract.base import Fold
    from calibrate.files.commit import StagedOutput
    from calibrate.running.result import StageTimes
    from calibrate.recipe.schema import Recipe
    from calibrate.contract.types import EvaluationResult


def thresholds_csv(tables: list[ThresholdTable], transform=None, kind: str = "distance",
                   predictions: dict | None = None, normalized: str | None = None) -> str:
    """``estimator,class,target_fpr,threshold,score_threshold,accept_if,class_long_run_fpr_low,class_long_run_fpr_high,prediction_status``:
    ``threshold`` on the transformed distance (accept when distance <= it), ``score_threshold`` the
    same threshold in the data's own score units through the fitted transform's inverse (empty when
    the transform has none), ``accept_if`` how to compare a score with it (``score >= t`` for
    similarities); ``class_long_run_fpr_low/high`` the interval predicted for this class's own long-run
    FPR at that threshold (unlimited new impostor attempts on this class; calibrate.predicted.interval; empty when
    it was not predicted per class, or not at that target), not the gallery's interval of results.json;
    ``prediction_status`` what the world's check said at that target (calibrate.predicted.interval.STATUS: fits,
    tail, contradicted, tail-unfit; empty without a prediction). A normalised run (``normalized``: the
    normaliser's name) has no score thresholds: ``threshold`` is on the normalised distance exp(z),
    ``score_threshold`` is the same threshold on the normalised score z, and ``accept_if`` says so."""
    from calibrate.saved.json_format import ACCEPT_IF
    from calibrate.normalisation.cohort import to_z

    predictions = predictions or {}
    w, text = csv_writer()
    w.writerow(["estimator", "class", "target_fpr", "threshold", "score_threshold", "accept_if",
                "class_long_run_fpr_low", "class_long_run_fpr_high", "prediction_status"])
    for table in tables:
        scores = None if transform is None else transform.score_thresholds(table.values, kind)
        if normalized is not None:
            scores = to_z(table.values)
        pred = predictions.get(table.estimator)
        per_class = pred is not None and pred.class_low is not None and pred.class_low.shape == table.values.shape
        estimator = csv_text(table.estimator)
        for i, cls in enumerate(csv_texts(table.classes).tolist()):
            for k, target in enumerate(table.targets):
                st = "" if scores is None else repr(float(scores[i, k]))
                low = _cell(pred.class_low[i, k]) if per_class else ""
                high = _cell(pred.class_high[i, k]) if per_class else ""
                status = pred.status[k] if pred is not None and len(pred.status) == len(table.targets) else ""
                accept_if = ACCEPT_IF[kind] if scores is not None else ""
                if normalized is not None:
                    accept_if = f"{normalized}-normalised z <= t"
                w.writerow([estimator, cls, repr(target), repr(float(table.values[i, k])), st,
                            csv_text(accept_if), low, high, csv_text(status)])
    return text()


def _cell(value: float) -> str:
    return repr(float(value)) if np.isfinite(value) else ""


def models_csv(rows: list[dict[str, Any]]) -> str:
    """estimator, class, then the union of parameter columns in first-seen order."""
    columns = ["estimator", "class"]
    for row in rows:
        for key in row:
            if key not in columns:
                columns.append(key)
    w, text = csv_writer(columns)
    w.writeheader()
    for row in rows:
        w.writerow({k: (repr(v) if isinstance(v, float) else csv_text(v) if isinstance(v, str) else v)
                    for k, v in row.items()})
    return text()


# ---- the run's file set ------------------------------------------------------------------------

def write_outputs(staged: StagedOutput, recipe: Recipe, folds: list[Fold], evaluated: list[EvaluationResult],
                  results: dict[str, list[TargetResult]], notes: list[str], times: StageTimes) -> None:
    """Stage every output file, then commit them as one file set (the caller discards on failure)."""
    with times("write outputs"):
        _stage_tables(staged, recipe, folds, evaluated)
    first = folds[0]
    write_reports(staged, recipe, results, notes, times, estimators=len(first.models), classes=first.train.shape[1],
                  folds=[f.name for f in folds], sections=[s for res in evaluated for s in res.sections],
                  summary=evaluators_summary(evaluated))
    staged.commit()


def _fold_thresholds_csv(fold: Fold) -> str:
    """A fold's thresholds.csv: in score units through its transform, or in normalised units (calibrate.normalisation.cohort)."""
    normalized = getattr(fold, "normalization", None)
    if normalized is not None:
        return thresholds_csv(list(fold.tables.values()), None, fold.kind, fold.predictions, normalized.plugin)
    return thresholds_csv(list(fold.tables.values()), fold.transform, fold.kind, fold.predictions)


def _stage_tables(staged: StagedOutput, recipe: Recipe, folds: list[Fold], evaluated: list[EvaluationResult]) -> None:
    first = folds[0]
    staged.write_text("thresholds.csv", _fold_thresholds_csv(first))
    for k, fold in enumerate(folds[1:], start=1):
        staged.write_text(f"thresholds-fold{k}.csv", _fold_thresholds_csv(fold))
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
    """The saved calibration (format 2, read by ``calibrate.load``): every estimator's model, the
    fitted transform and the score direction, so that answers come in the data's own score units."""
    from calibrate.saved.json_format import artifact, dumps_artifact, fingerprint
    from calibrate.predicted.confidence import saved_entries
    from calibrate.statistics.order import saved_reach
    from calibrate.contract.types import ImpostorDistances

    spec = recipe.transform_for(fold.kind)
    impostors = fold.impostors if fold.impostors is not None else ImpostorDistances.from_matrix(fold.train)
    return dumps_artifact(artifact(
        kind=fold.kind, transform_plugin=spec.info.name, transform_params=spec.params,
        transform_state=fold.transform.fitted_state() if fold.transform is not None else {},
        targets=recipe.targets, fingerprint=fingerprint(impostors), versions=versions(recipe),
        training_impostors=int(impostors.values.size), training_scores=fold.training_scores,
        normalizer=fold.normalization.to_state() if getattr(fold, "normalization", None) is not None else None,
        estimators={s.label: (s.info.name, s.params, *saved_entries(
            fold.models[s.label], fold.predictions[s.label].saved(fold.models[s.label].classes)
            if s.label in fold.predictions else None, saved_reach(recipe.targets)))
            for s in recipe.estimators}))
