"""A recipe read and checked into a typed :class:`~calibrate.recipe.schema.Recipe` (load_recipe, parse_recipe),
section by section in the order a reader meets them: the top level, ``data:`` (with the core's keys ``groups:``
and ``impostors:``), distance, transform, normaliser, estimators, ``evaluation:`` (targets, evaluators, the
enrollment protocol, prediction), output, seed and executor. Every component is looked up in the registry
and built with its checked parameters (:func:`_component`); the first problem is one RecipeError naming
the field.
"""

from __future__ import annotations

import difflib
import json
from pathlib import Path
from typing import Any

from calibrate.errors import DataError, ParameterError, RecipeError
from calibrate.recipe.groups import check_against, read_groups
from calibrate.contract.params import coerce
from calibrate.contract.types import GroupLabels
from calibrate.predicted.confidence import check_confidence
from calibrate.normalisation.stage import check_normalizer
from calibrate.predicted.interval import PredictionSettings
from calibrate.recipe.protocol import Protocol
from calibrate.contract.registry import SINGULAR, Registry
from calibrate.recipe.reading import read_yaml
from calibrate.recipe.schema import (DEFAULT_ENROLLMENT, DEFAULT_ESTIMATORS, DEFAULT_EVALUATORS, DEFAULT_TARGETS,
                                     DEFAULT_TRANSFORMS, EVALUATION_KEYS, LABEL_PATTERN, MAX_LABEL, OUTPUT_KEYS,
                                     RECIPE_VERSION, TOP_LEVEL, ComponentSpec, Recipe)


def _unknown_key(key: str, allowed: tuple[str, ...], where: str, source: str) -> RecipeError:
    close = difflib.get_close_matches(str(key), allowed, n=1, cutoff=0.6)
    hint = f"did you mean {close[0]!r}? " if close else ""
    return RecipeError(f"unknown key {key!r}; {hint}allowed: {', '.join(allowed)}", source=source, where=where)


def _given(section: dict, key: str, where: str, source: str, fix: str) -> Any:
    """An optional key's value, or None when it is absent or null (the default applies). A value that reads as
    nothing but is not null (``false``, ``0``, ``-0.0``, ``''``, ``[]``) is a RecipeError, rather than the default
    taken silently as if the key were absent; ``fix`` says what the key takes."""
    value = section.get(key)
    if value is None or isinstance(value, dict):
        return value
    if isinstance(value, (bool, int, float, str, list)) and not value:
        raise RecipeError(f"`{key}:` is {json.dumps(value)}, which would be read as if it were absent; {fix}, or leave the key "
                          "out for the default", source=source, where=where)
    return value


#: keys the core reads in a component's mapping besides ``plugin:`` and ``name:``, per kind (the rest are parameters)
CORE_KEYS = {"datasets": ("groups", "impostors"), "estimators": ("confidence",)}


def _component(registry: Registry, kind: str, entry: Any, where: str, source: str, base_dir: Path) -> ComponentSpec:
    if isinstance(entry, str):
        entry = {"plugin": entry}
    if not isinstance(entry, dict):
        raise RecipeError(f"expected a mapping like {{plugin: NAME, ...parameters}}, got {entry!r}", source=source, where=where)
    if "plugin" not in entry:
        raise RecipeError(f"missing `plugin:`; name one of: {', '.join(registry.names(kind))}", source=source, where=where)
    name = entry["plugin"]
    if not isinstance(name, str):
        raise RecipeError(f"`plugin:` must be a name, got {name!r}; name one of: {', '.join(registry.names(kind))}",
                          source=source, where=f"{where}.plugin")
    info = registry.get(kind, name, where=f"{where}.plugin", source=source)
    confidence = None
    if kind == "estimators" and "confidence" in entry:
        try:
            confidence = check_confidence(entry["confidence"])
        except ParameterError as exc:
            raise RecipeError(str(exc), source=source, where=f"{where}.confidence") from None
    label = entry.get("name", name if confidence is None else f"{name}-c{100 * confidence:g}")
    if not isinstance(label, str) or not LABEL_PATTERN.fullmatch(label):
        shown = repr(label) if len(repr(label)) <= 80 else repr(label)[:77] + "..."
        raise RecipeError(f"`name:` must be 1-{MAX_LABEL} letters, digits, '.', '_' or '-', starting with a letter or "
                          f"digit (it names files and columns), got {shown}", source=source, where=f"{where}.name")
    specs = {p.name: p for p in info.params}
    given = {k: v for k, v in entry.items() if k not in ("plugin", "name") and not (k == "confidence" and confidence)}
    listing = "; ".join(p.describe() for p in specs.values()) or "none"
    params: dict[str, Any] = {}
    for key, value in given.items():
        if key not in specs:
            keys = ("plugin", "name") + CORE_KEYS.get(kind, ())
            close = difflib.get_close_matches(str(key), list(specs) + list(keys), n=1, cutoff=0.6)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise RecipeError(f"{SINGULAR[kind]} {name!r} has no parameter {key!r}; {hint}valid keys: {', '.join(keys)} "
                              f"and its parameters; valid parameters: {listing}", source=source, where=f"{where}.{key}")
        try:
            params[key] = coerce(value, specs[key].annotation, f"{where}.{key}", base_dir)
        except ParameterError as exc:
            message = str(exc).removeprefix(f"{where}.{key}: ")
            if "does not exist" not in message:
                message += f"; expected {specs[key].describe()}"
            raise RecipeError(message, source=source, where=f"{where}.{key}") from None
    missing = [p.name for p in specs.values() if p.required and p.name not in params]
    if missing:
        raise RecipeError(f"{SINGULAR[kind]} {name!r} needs parameter {missing[0]!r}; valid parameters: {listing}",
                          source=source, where=where)
    spec = ComponentSpec(kind, info, label, params, where, confidence)
    try:
        spec.build()  # constructors validate values and do no work
    except ParameterError as exc:
        raise RecipeError(f"{exc}", source=source, where=where) from None
    return spec


def load_recipe(path: str | Path, registry: Registry, *, out: str | Path | None = None) -> Recipe:
    """Read and validate a recipe file; paths in it are relative to the file."""
    path = Path(path)
    return parse_recipe(read_yaml(path), registry, source=str(path), base_dir=path.resolve().parent, out=out)


def parse_recipe(raw: Any, registry: Registry, *, source: str = "<recipe>", base_dir: Path | None = None,
                 out: str | Path | None = None) -> Recipe:
    """A recipe's YAML (already read) checked section by section, in the order a reader meets them; the first
    problem is a RecipeError naming the field. Components are built (their constructors validate) but do no work."""
    base_dir = Path(base_dir or Path.cwd())
    _check_top_level(raw, registry, source)
    data_raw, groups, same_group = _data_groups(raw["data"], source, base_dir)
    data = _component(registry, "datasets", data_raw, "data", source, base_dir)
    dataset = data.build()
    defaults: list[str] = [] if "version" in raw else [
        f"no `version:` given: read as version {RECIPE_VERSION}; write `version: {RECIPE_VERSION}` (README: recipes need it)"]
    distance = _distance(raw, registry, data, dataset, defaults, source, base_dir)
    dataset.check()  # the head of every data file, read by the run's own parser
    transform, default_transforms = _transform(raw, registry, data, dataset, source, base_dir)
    normalizer = _normalizer(registry, raw, data, dataset, source, base_dir)
    estimators = _estimators(raw, registry, defaults, source, base_dir)
    evaluation = _evaluation_section(raw, source)
    targets = _targets(evaluation, source)
    evaluators = tuple(_component(registry, "evaluators", e, f"evaluation.evaluators[{i}]", source, base_dir)
                       for i, e in enumerate(_evaluators_raw(evaluation, source)))
    protocol = _protocol(evaluation, source)
    prediction = _prediction(evaluation.get("prediction", True), source)
    _check_confidence_has_prediction(estimators, prediction, source)
    if same_group and any(e.confidence is not None for e in estimators):
        raise RecipeError("`confidence:` needs the predicted interval's simulated galleries, which a calibration group "
                          "by group against same-group impostors (`impostors: same-group`) does not have yet; remove "
                          "one of them", source=source, where="data.impostors")
    out_dir, output = _output(raw, out, base_dir, source)
    seed = _seed(raw, source)
    given_executor = _given(raw, "executor", "executor", source, "name one, e.g. `{plugin: processes}`")
    executor = _component(registry, "executors", {"plugin": "serial"} if given_executor is None else given_executor,
                          "executor", source, base_dir)
    return Recipe(source=source, base_dir=base_dir, data=data, distance=distance, transform=transform,
                  estimators=estimators, evaluators=evaluators, targets=targets, protocol=protocol,
                  output_dir=out_dir, plots=output.get("plots", True),
                  save_calibration=output.get("save_calibration", True), seed=seed, executor=executor, raw=raw,
                  default_transforms=default_transforms, defaults=tuple(defaults), prediction=prediction,
                  normalizer=normalizer, groups=groups, same_group=same_group, spread=given_executor is None)


#: ``data: {impostors: ...}``: what the thresholds are calibrated against (the core's key, for every dataset)
IMPOSTOR_CHOICES = ("all", "same-group")


def _data_groups(entry: Any, source: str, base_dir: Path) -> tuple[Any, GroupLabels | None, bool]:
    """``data:`` without the core's keys ``groups:`` and ``impostors:`` (for every dataset), the groups file
    ``groups:`` names, read and checked (calibrate.recipe.groups), or None, and whether ``impostors: same-group`` asks
    to calibrate against same-group impostors only (ISO/IEC 19795-10)."""
    if not isinstance(entry, dict) or not ({"groups", "impostors"} & set(entry)):
        return entry, None, False
    rest = {k: v for k, v in entry.items() if k not in ("groups", "impostors")}
    which = entry.get("impostors", "all")
    if which not in IMPOSTOR_CHOICES:
        raise RecipeError(f"`impostors:` must be `all` (calibrate against every impostor comparison, the default) or "
                          f"`same-group` (only comparisons of a class with probes of its own demographic group: each "
                          f"group's same-group FMR meets the target); got {str(which)[:40]!r}", source=source,
                          where="data.impostors")
    if "groups" not in entry:
        return rest, None, which == "same-group"
    try:
        path = coerce(entry["groups"], Path, "data.groups", base_dir)
        return rest, read_groups(path), which == "same-group"
    except (ParameterError, DataError) as exc:
        message = str(exc).removeprefix("data.groups: ")
        raise RecipeError(f"{message} (`groups:` names a CSV file with a header `class,group`)", source=source,
                          where="data.groups") from None


def groups_against_data(recipe: Recipe) -> tuple[int | None, list[str]]:
    """``calibrate validate``: the recipe's groups file against the classes the data hold, when the dataset names them
    without loading (Dataset.class_names): a RecipeError when the file names none of them, as the run would say after
    loading; else (the number of enrolled classes checked against, the run's notes about the file). (None, []) without
    a groups file, or when only loading tells."""
    if recipe.groups is None:
        return None, []
    names = recipe.data.build().class_names()
    if names is None:
        return None, []
    enrolled, probes = names
    try:
        return len(set(enrolled)), check_against(recipe.groups, enrolled, probes)
    except DataError as exc:
        raise RecipeError(str(exc), source=recipe.source, where="data.groups") from None


def _check_top_level(raw: Any, registry: Registry, source: str) -> None:
    """A mapping of known sections, of the version this calibrate reads, with `data:`."""
    if not isinstance(raw, dict):
        raise RecipeError("a recipe is a YAML mapping: `version: 1` and `data:` are required; distance, transform, "
                          "normalizer, estimators, evaluation, output, seed and executor are optional", source=source)
    for key in raw:
        if key not in TOP_LEVEL:
            raise _unknown_key(key, TOP_LEVEL, str(key), source)
    version = raw.get("version", RECIPE_VERSION)  # a missing version is read as 1, and said (parse_recipe)
    if type(version) is not int or version != RECIPE_VERSION:  # `true` and 1.0 equal 1 in Python, not in a recipe
        raise RecipeError(f"version {version!r} is not supported; this calibrate reads version {RECIPE_VERSION}",
                          source=source, where="version")
    if "data" not in raw:
        raise RecipeError(f"missing `data:`; name one of: {', '.join(registry.names('datasets'))}", source=source)


def _distance(raw: dict, registry: Registry, data: ComponentSpec, dataset, defaults: list[str], source: str,
              base_dir: Path) -> ComponentSpec | None:
    """The distance: only for patterns (the dataset's default when the recipe names none); `rotate:` only for
    image sets, which a score dataset is not."""
    produces = dataset.produces
    distance = None
    if raw.get("distance") is not None:
        if produces == "scores":
            raise RecipeError(f"dataset {data.info.name!r} gives comparison scores, not patterns, so there is nothing "
                              "for a distance to compare; remove `distance:`", source=source, where="distance")
        distance = _component(registry, "distances", raw["distance"], "distance", source, base_dir)
    elif produces == "patterns":
        chosen = dataset.default_distance
        if chosen is None:
            raise RecipeError(f"dataset {data.info.name!r} gives patterns, which need a distance: add e.g. "
                              "`distance: {plugin: euclidean}`", source=source, where="distance")
        distance = _component(registry, "distances", {"plugin": chosen}, "distance", source, base_dir)
        defaults.append(f"no `distance:` given: `{chosen}` was used, the default for dataset {data.info.name!r}")
    evaluation_raw = raw.get("evaluation")  # checked to be a mapping further down, with its own message
    if produces == "scores" and isinstance(evaluation_raw, dict) and evaluation_raw.get("rotate") is True:
        raise RecipeError(f"`rotate:` applies to image-set datasets only; dataset {data.info.name!r} gives "
                          "comparison scores with a fixed training/evaluation split", source=source, where="evaluation.rotate")
    return distance


def _transform(raw: dict, registry: Registry, data: ComponentSpec, dataset, source: str,
               base_dir: Path) -> tuple[ComponentSpec | None, dict[str, ComponentSpec]]:
    """The recipe's transform (or the default for the data's kind, one per kind when only loading tells),
    checked against the kind of scores and, for sharded data, refused when it would be fitted per shard."""
    kind = dataset.output_kind()
    default_transforms = {}
    given = _given(raw, "transform", "transform", source, "name one, e.g. `{plugin: identity}`") is not None
    if given:
        transform = _component(registry, "transforms", raw["transform"], "transform", source, base_dir)
    else:
        default_transforms = {k: _component(registry, "transforms", {"plugin": name}, "transform", source, base_dir)
                              for k, name in DEFAULT_TRANSFORMS.items()}
        transform = default_transforms[kind] if kind is not None else None
    if dataset.sharded and transform is not None and transform.build().depends_on_data():
        fix = ("give its parameters, e.g. `transform: {plugin: similarity-to-distance, upper: 1.0}` (the largest "
               "score the matcher can give)" if kind == "similarity" else "give its parameters in the recipe")
        raise RecipeError(f"dataset {data.info.name!r} is read shard by shard, and transform {transform.info.name!r} "
                          f"{'(the default for similarity scores) ' if not given else ''}would be "
                          f"fitted to each shard's data separately, giving each shard another transform; {fix}",
                          source=source, where="transform")
    accepts = transform.info.factory.accepts if transform else ()
    if kind is None and dataset.produces == "patterns":
        kind = "distance"  # what a distance stage gives: refused here, as the run would refuse it (issue 19: S7)
    if transform is not None and kind is not None and kind not in accepts:
        fix = ("add `transform: {plugin: similarity-to-distance}` (higher scores must become smaller distances)"
               if kind == "similarity" else "use a transform for distances, e.g. `transform: {plugin: identity}`")
        raise RecipeError(f"the data are {kind} scores but transform {transform.info.name!r} takes "
                          f"{' or '.join(accepts)} scores; {fix}", source=source,
                          where="transform.plugin" if given else "transform")
    return transform, default_transforms


def _estimators(raw: dict, registry: Registry, defaults: list[str], source: str,
                base_dir: Path) -> tuple[ComponentSpec, ...]:
    """The estimators (the default when none is named), each under a distinct label."""
    estimators_raw = _given(raw, "estimators", "estimators", source, "list them, e.g. `[{plugin: auto}]`")
    if estimators_raw is None:
        estimators_raw = list(DEFAULT_ESTIMATORS)
        names = ", ".join(f"`{e['plugin']}`" for e in DEFAULT_ESTIMATORS)
        defaults.append(f"no `estimators:` given: {names} was used, the default (docs/estimators.md says why)")
    if not isinstance(estimators_raw, list):
        raise RecipeError("`estimators:` must be a list of {plugin: NAME, ...}", source=source, where="estimators")
    estimators = tuple(_component(registry, "estimators", e, f"estimators[{i}]", source, base_dir)
                       for i, e in enumerate(estimators_raw))
    labels = [e.label for e in estimators]
    dup = next((x for x in labels if labels.count(x) > 1), None)
    if dup is not None:
        raise RecipeError(f"two estimators are labelled {dup!r}; give each a distinct `name:`", source=source, where="estimators")
    return estimators


def _evaluation_section(raw: dict, source: str) -> dict:
    evaluation = _given(raw, "evaluation", "evaluation", source, "give a mapping such as `{targets: [0.001]}`")
    if evaluation is None:
        evaluation = {}
    if not isinstance(evaluation, dict):
        raise RecipeError(f"`evaluation:` must be a mapping such as `{{targets: [0.001]}}`, got {str(evaluation)[:40]!r}",
                          source=source, where="evaluation")
    for key in evaluation:
        if key not in EVALUATION_KEYS:
            raise _unknown_key(key, EVALUATION_KEYS, f"evaluation.{key}", source)
    return evaluation


def _targets(evaluation: dict, source: str) -> tuple[float, ...]:
    """`evaluation.targets`: distinct FPRs in (0, 1)."""
    targets_raw = evaluation.get("targets", list(DEFAULT_TARGETS))
    if not isinstance(targets_raw, list) or not targets_raw:
        raise RecipeError("`targets:` must be a non-empty list of FPRs in (0, 1), e.g. [0.005, 0.001]",
                          source=source, where="evaluation.targets")
    for i, t in enumerate(targets_raw):
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not (0 < t < 1):
            raise RecipeError(f"target FPR {t!r} is not a number in (0, 1); write 0.001 for 0.1%",
                              source=source, where=f"evaluation.targets[{i}]")
    if len(set(targets_raw)) != len(targets_raw):
        dup = next(t for t in targets_raw if targets_raw.count(t) > 1)
        raise RecipeError(f"target FPR {dup!r} is listed twice; list each target once", source=source,
                          where="evaluation.targets")
    return tuple(float(t) for t in targets_raw)


def _evaluators_raw(evaluation: dict, source: str) -> list:
    evaluators_raw = _given(evaluation, "evaluators", "evaluation.evaluators", source, "list them, e.g. `[{plugin: fpr}]`")
    if evaluators_raw is None:
        evaluators_raw = list(DEFAULT_EVALUATORS)
    if not isinstance(evaluators_raw, list):
        raise RecipeError("`evaluators:` must be a list", source=source, where="evaluation.evaluators")
    return evaluators_raw


def _protocol(evaluation: dict, source: str) -> Protocol:
    """`evaluation.enrollment` and `evaluation.rotate` (image sets)."""
    enrollment = evaluation.get("enrollment", DEFAULT_ENROLLMENT)
    if isinstance(enrollment, bool) or not isinstance(enrollment, (int, str)):
        raise RecipeError(f"`enrollment:` is staggered, a set label, or the index of a class's set in sorted order, got {enrollment!r}",
                          source=source, where="evaluation.enrollment")
    rotate = evaluation.get("rotate", False)
    if not isinstance(rotate, bool):
        raise RecipeError(f"`rotate:` must be true or false, got {rotate!r}", source=source, where="evaluation.rotate")
    return Protocol(enrollment, rotate)


def _check_confidence_has_prediction(estimators: tuple[ComponentSpec, ...], prediction: PredictionSettings,
                                     source: str) -> None:
    if not prediction.enabled:
        needing = [e.label for e in estimators if e.confidence is not None]
        if needing:
            raise RecipeError(f"estimator {needing[0]!r} asks for a confidence, whose model-based bound needs the "
                              "predicted interval's simulations; remove `prediction: false`", source=source,
                              where="evaluation.prediction")


def _output(raw: dict, out: str | Path | None, base_dir: Path, source: str) -> tuple[Path, dict]:
    """The output folder (``out`` overrides the recipe's) and the `output:` mapping, checked."""
    output = raw.get("output", "results")
    if isinstance(output, str):
        output = {"dir": output}
    if not isinstance(output, dict):
        raise RecipeError("`output:` is a folder path or {dir: PATH, plots: true}", source=source, where="output")
    for key in output:
        if key not in OUTPUT_KEYS:
            raise _unknown_key(key, OUTPUT_KEYS, f"output.{key}", source)
    for key in ("plots", "save_calibration"):
        if not isinstance(output.get(key, True), bool):
            raise RecipeError(f"`{key}:` must be true or false", source=source, where=f"output.{key}")
    return _output_dir(output, out, base_dir, source), output


def _seed(raw: dict, source: str) -> int:
    seed = raw.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise RecipeError(f"`seed:` must be an integer >= 0 (numpy seeds are non-negative), got {seed!r}", source=source, where="seed")
    return seed


def _output_dir(output: dict, out: str | Path | None, base_dir: Path, source: str) -> Path:
    """The output folder (``--out``, else ``output:``), resolved; a name that cannot be a folder (empty, a
    NUL byte, a symbolic-link loop, too long) is one RecipeError rather than an OSError later (T16, S7)."""
    where = "--out" if out is not None else "output"
    given = str(out) if out is not None else str(output.get("dir", "results"))
    if not given.strip():
        raise RecipeError("the output folder is empty, which would write into the recipe's own folder; name a "
                          "folder (e.g. results/)", source=source, where=where)
    if "\0" in given:
        raise RecipeError("the output folder's name holds a NUL byte; give a plain folder path", source=source,
                          where=where)
    try:
        return (Path(given) if out is not None else base_dir / given).resolve()
    except (OSError, RuntimeError, ValueError) as exc:  # RuntimeError: a symbolic-link loop (Python < 3.13)
        why = getattr(exc, "strerror", None) or ("a symbolic-link loop" if isinstance(exc, RuntimeError) else exc)
        raise RecipeError(f"the output folder {given[:100]!r} cannot be used ({why}); choose another folder",
                          source=source, where=where) from None


def _normalizer(registry: Registry, raw: dict, data: ComponentSpec, dataset: Any, source: str,
                base_dir: Path) -> ComponentSpec | None:
    """``normalizer:`` (optional), checked against the dataset (calibrate.normalisation.stage.check_normalizer)."""
    spec = None
    if raw.get("normalizer") is not None:
        spec = _component(registry, "normalizers", raw["normalizer"], "normalizer", source, base_dir)
    check_normalizer(spec, dataset, data.info.name, source)
    return spec


PREDICTION_KEYS = ("level", "replicates", "budget", "budget_s")


def _prediction(raw: Any, source: str) -> PredictionSettings:
    """``evaluation.prediction``: true (default), false, or {level: 0.9, replicates: 100, budget: 0.2, budget_s: 600}."""
    where = "evaluation.prediction"
    if raw is True or raw is None:
        return PredictionSettings()
    if raw is False:
        return PredictionSettings(enabled=False)
    if not isinstance(raw, dict):
        raise RecipeError(f"`prediction:` is true, false or {{level: 0.9, replicates: 100, budget: 0.2, budget_s: 600}}; "
                          f"got {raw!r}", source=source, where=where)
    for key in raw:
        if key not in PREDICTION_KEYS:
            raise _unknown_key(key, PREDICTION_KEYS, f"{where}.{key}", source)
    level, replicates = raw.get("level", PredictionSettings.level), raw.get("replicates", PredictionSettings.replicates)
    budget, budget_s = raw.get("budget", PredictionSettings.budget), raw.get("budget_s")
    if isinstance(level, bool) or not isinstance(level, (int, float)):
        raise RecipeError(f"`level:` must be a number in [0.5, 1), e.g. 0.9; got {level!r}", source=source,
                          where=f"{where}.level")
    if isinstance(replicates, bool) or not isinstance(replicates, int):
        raise RecipeError(f"`replicates:` must be an integer in [20, 100000]; got {replicates!r}", source=source,
                          where=f"{where}.replicates")
    try:
        return PredictionSettings(float(level), replicates, budget=budget, budget_s=budget_s)
    except ParameterError as exc:
        key = next((k for k in ("budget_s", "budget", "level", "replicates") if f"prediction {k} " in str(exc)), "level")
        raise RecipeError(str(exc), source=source, where=f"{where}.{key}") from None
