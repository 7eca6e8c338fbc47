"""The library entry points: run or validate a recipe, load a saved calibration (whole or partitioned)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from calibrate.saved.reading import (check_model, check_transform_kind, check_written, choose_estimator, lookup_component,
                       read_artifact, rebuilt, saved_span, training_distance_span)
from calibrate.contract.statecheck import training_distances
from calibrate.contract.base import FittedModel, RunContext
from calibrate.saved.calibration import Calibration
from calibrate.predicted.confidence import from_saved_entry
from calibrate.errors import CalibrationError, DataError, ParameterError
from calibrate.saved.grouped import model_from_state
from calibrate.contract.manager import build_registry
from calibrate.saved.partitioned import PartitionedCalibration, load_partitioned, read_head
from calibrate.running import pipeline
from calibrate.running.pipeline import RunResult
from calibrate.recipe.schema import Recipe
from calibrate.recipe.validation import groups_against_data, load_recipe
from calibrate.files.manifest import RunFolder


def validate(recipe_path: str | Path, *, out: str | Path | None = None, extra_plugins: tuple = ()) -> Recipe:
    """Check a recipe file completely (names, parameters, the head of the data files, a groups file against the
    data's classes where the dataset names them without loading) without computing anything; the notes about the
    groups file are warnings."""
    return validate_groups(read_recipe(recipe_path, out=out, extra_plugins=extra_plugins))[0]


def read_recipe(recipe_path: str | Path, *, out: str | Path | None = None, extra_plugins: tuple = ()) -> Recipe:
    """A recipe file read and checked (names, parameters, the head of the data files), its data's labels unread."""
    return load_recipe(recipe_path, build_registry(extra_plugins), out=out)


def validate_groups(recipe: Recipe) -> tuple[Recipe, int | None]:
    """``recipe`` with its groups file checked against the data's classes (calibrate.recipe.validation.groups_against_data),
    its notes warned, and the number of enrolled classes it was checked against (None: not checked)."""
    import warnings

    checked, notes = groups_against_data(recipe)
    for note in notes:
        warnings.warn(note, stacklevel=3)
    return recipe, checked


def run(recipe_path: str | Path, *, out: str | Path | None = None, context: RunContext | None = None,
        extra_plugins: tuple = ()) -> RunResult:
    """Validate, then run a recipe; outputs land in ``out`` (or the recipe's ``output:``). The groups file is checked
    against the classes once they are loaded (no early read of the data's labels)."""
    recipe = read_recipe(recipe_path, out=out, extra_plugins=extra_plugins)
    return pipeline.run_recipe(recipe, context=context)  # looked up at call time, as the CLI does


def load_calibration(path: str | Path, estimator: str | None = None, *, extra_plugins: tuple = ()) -> FittedModel:
    """Load one estimator's fitted model (distance units) from a run's ``calibration.json``.

    ``estimator`` is the label in the recipe (its ``name:`` or plugin name); it may be omitted
    when the file holds a single estimator. :func:`calibrate.load` gives the whole calibration,
    answering in the data's own score units.
    """
    path = calibration_path(path, "calibrate.load_calibration")
    doc, data = read_artifact(path)
    _, entry = choose_estimator(doc, path, estimator)
    info = lookup_component(build_registry(extra_plugins), "estimators", entry.get("plugin"), path)
    model = rebuilt(path, f"estimator {entry.get('plugin')!r}",
                    lambda: model_from_state(info.factory.model_class, entry["state"]))
    check_written(doc, data, path)
    return model


def load(path: str | Path, estimator: str | None = None, *, extra_plugins: tuple = ()) -> Calibration | PartitionedCalibration:
    """A saved calibration (from ``Calibration.save`` or a run's ``calibration.json``, or a run's output
    folder, plain or sharded), ready to answer in score units. ``estimator``: the label to load when the
    file holds several. The file is validated as a whole first (calibrate.saved.reading.check_document)."""
    path = calibration_path(path, "calibrate.load")
    try:
        cal = _load(path, estimator, extra_plugins)
    except OSError as exc:  # a name too long, a loop of links, a folder we may not read: the user's to fix
        raise CalibrationError(f"{str(path)[:200]}: cannot read the calibration ({exc.strerror or exc}); give the path "
                               "of a calibration file or a run's output folder") from None
    _check_version(cal, path)
    return cal


def calibration_path(path: object, who: str) -> Path:
    """``path`` as a Path, when it can name a file: a str or os.PathLike without NUL (audit T18)."""
    if isinstance(path, bytes) or not isinstance(path, str | os.PathLike):
        raise CalibrationError(f"{who}: the calibration's path must be a file or folder name (str or pathlib.Path), "
                               f"got {type(path).__name__}")
    if "\0" in str(path):
        raise CalibrationError(f"{who}: the calibration's path {str(path)[:200]!r} holds a NUL character; no file "
                               "can be named so")
    return Path(path)


def _check_version(cal, path: Path) -> None:
    """Warn when the calibration was written by another version of calibrate (it still loads)."""
    import warnings

    from calibrate.version import __version__

    written = (getattr(cal, "versions", None) or getattr(cal, "head", {}).get("versions") or {}).get("calibrate-thresholds")
    if isinstance(written, str) and written != __version__:
        warnings.warn(f"{path} was written by calibrate-thresholds {written[:40]}, this is {__version__}: it loads, but "
                      "a refit with this version may give other thresholds", stacklevel=3)


def _load(path: Path, estimator: str | None, extra_plugins: tuple) -> Calibration | PartitionedCalibration:
    run = None
    if path.is_dir():  # a run's folder: its calibration.json, plain or the head of a sharded run's parts
        if not (path / "calibration.json").exists():
            raise CalibrationError(f"{path}: the folder holds no calibration.json; give a run's output folder (with "
                                   "`save_calibration` on, the default) or a calibration file")
        run = RunFolder(path)  # what is read from it must be what the run wrote (its manifest)
        path = path / "calibration.json"
    if read_head(path) is not None:  # a sharded run's calibration: opened part by part
        return load_partitioned(path, estimator, extra_plugins=extra_plugins, run=run)
    doc, data = read_artifact(path)
    label, entry = choose_estimator(doc, path, estimator)
    if doc["version"] < 2 or "transform" not in doc:
        raise CalibrationError(f"{path}: format version {doc['version']} holds distance thresholds only (no transform); "
                               "run the recipe again with this calibrate to get score-unit thresholds, or use "
                               "calibrate.load_calibration for the distance model")
    registry = build_registry(extra_plugins)
    est_info = lookup_component(registry, "estimators", entry.get("plugin"), path)
    tr = doc["transform"]
    tr_info = lookup_component(registry, "transforms", tr.get("plugin"), path)
    check_transform_kind(doc["kind"], tr_info, path)
    what = f"estimator {label!r}"
    est = rebuilt(path, what, lambda: est_info.factory(**entry.get("params", {})))
    transform = rebuilt(path, f"transform {tr_info.name!r}",
                        lambda: tr_info.factory(**tr.get("params", {})).set_fitted_state(tr.get("state", {})))
    kind = doc["kind"]  # checked with the document (calibrate.saved.reading.check_document)
    span = None if "normalizer" in doc else training_distance_span(transform, kind, doc.get("training"))
    with training_distances(span):  # a saved value no fit on the file's own training scores gives is refused
        model = rebuilt(path, what, lambda: _model(est_info.factory.model_class, entry))
    normalization = _normalization(doc, registry, path)
    check_model(model, transform if normalization is None else None, kind, doc.get("targets") or (0.005, 0.001), path,
                label)
    if normalization is not None and normalization.classes != model.classes:
        raise CalibrationError(f"{path}: normalizer.classes are not estimator {label!r}'s classes in its order; the file "
                               "is damaged: run the recipe again")
    per_class = (entry.get("prediction") or {}).get("per_class")
    if per_class and not set(per_class["classes"]) <= set(model.classes):
        raise CalibrationError(f"{path}: estimators[{label[:60]!r}].prediction.per_class.classes names a class the "
                               "estimator does not hold; the file is damaged: run the recipe again")
    check_written(doc, data, path, run)  # every field is valid: now, is it what calibrate wrote?
    return Calibration(estimator=est, plugin=est_info.name, label=label, params=entry.get("params", {}), model=model,
                       transform=transform, transform_plugin=tr_info.name, transform_params=tr.get("params", {}),
                       kind=kind, targets=doc.get("targets", ()),
                       fingerprint=doc.get("fingerprint", ""), versions=doc.get("versions", {}),
                       prediction=entry.get("prediction"),
                       training_impostors=doc.get("training", {}).get("impostors"), normalization=normalization,
                       training_scores=saved_span(doc.get("training")), reach=entry.get("reach"),
                       fnr_thresholds=doc.get("fnr_thresholds", ()))


def _model(model_class, entry: dict) -> FittedModel:
    """The estimator's model from its saved state, wrapped in its saved confidence when it has one."""
    model = model_from_state(model_class, entry["state"])
    if entry.get("confidence") is not None:
        model = from_saved_entry(model, entry["confidence"])
    return model


def _normalization(doc: dict, registry, path: Path):
    """The saved normalisation (calibrate.normalisation.cohort.FittedNormalization), or None; its structure was checked
    with the document's (calibrate.saved.reading.check_document)."""
    from calibrate.normalisation.cohort import FittedNormalization

    state = doc.get("normalizer")
    if state is None:
        return None
    info = lookup_component(registry, "normalizers", state["plugin"], path)
    try:
        normalizer = info.factory(**state.get("params", {}))
    except (TypeError, ValueError, KeyError, ParameterError, DataError) as exc:
        raise _unbuildable(state, path, exc) from None
    try:  # its refusals name the file, the field and the fix
        fitted = FittedNormalization.from_state(state, normalizer, str(path))
        _check_statistic_names(normalizer, state, path)
        return fitted
    except DataError as exc:
        raise CalibrationError(str(exc)) from None
    except (TypeError, ValueError, KeyError, ParameterError) as exc:
        raise _unbuildable(state, path, exc) from None


def _unbuildable(state: dict, path: Path, exc: Exception) -> CalibrationError:
    return CalibrationError(f"{path}: normalizer {state['plugin'][:40]!r} cannot be rebuilt from the file "
                            f"({type(exc).__name__}: {str(exc)[:200]}); the file is damaged: run the recipe again")


#: the most cohort members a saved normaliser may need per row (its statistics' names are read from one such row)
MAX_MEMBERS = 1_000_000


def _check_statistic_names(normalizer, state: dict, path: Path) -> None:
    """A normaliser that reads the enrolled side must find in the file exactly the statistics it computes
    (their names, from one made-up cohort row): one missing would fail at the first decision."""
    if "enrolled" not in normalizer.sides:
        return
    members = normalizer.min_members()
    if isinstance(members, bool) or not isinstance(members, int) or not 1 <= members <= MAX_MEMBERS:
        raise DataError(f"{path}: normalizer.params ask for {str(members)[:40]} cohort members per row (at most "
                        f"{MAX_MEMBERS:,}); the file is damaged: run the recipe again")
    names = set(normalizer.statistics(np.linspace(1.0, 2.0, max(members, 2))[None, :]))
    if set(state["statistics"]) != names:
        raise DataError(f"{path}: normalizer.statistics holds "
                        f"{', '.join(sorted(map(str, state['statistics'])))[:200] or 'nothing'}, but it computes "
                        f"{', '.join(sorted(names))[:200]}; the file is damaged: run the recipe again")
