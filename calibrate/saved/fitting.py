"""Fitting a calibration from arrays held in memory: ``calibrate.fit`` (and ``calibrate fit`` on the command line).

    import calibrate
    cal = calibrate.fit(scores, classes, kind="similarity")          # impostor scores, enrolled class of each
    cal = calibrate.fit(scores, classes, real=real, kind="distance") # genuine ones too: the direction checked

:func:`fit` checks the scores and classes (one array each, or a mapping class -> scores), leaves out the
genuine comparisons after checking the score direction with them, builds the estimator and the transform
as a recipe would, fits them (and the predicted FPR interval, when asked) and returns a
:class:`calibrate.saved.calibration.Calibration`.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from calibrate.saved.calibration import _OTHER, Calibration, extrapolation_message
from calibrate.saved.json_format import ACCEPT_IF, fingerprint, package_versions
from calibrate.contract.base import RunContext, Transform, check_target
from calibrate.errors import DataError, ParameterError
from calibrate.predicted.confidence import check_confidence, predict_model
from calibrate.predicted.interval import PredictionSettings, Worlds, choose_world
from calibrate.statistics.sanity import check_direction, id_problem, list_evidence
from calibrate.files.untrusted import refuse_bad_labels
from calibrate.files.score_lists import strict_floats
from calibrate.statistics.order import tie_message, tied_floor
from calibrate.contract.types import CodedLabels, DistanceMatrix, GenuineDistances, ImpostorDistances, factorise, same_labels


def _padded(scores: Any, classes: Any) -> tuple[list[str], np.ndarray, np.ndarray]:
    """(class names, values (width, C), valid mask): each class's scores down its column, padded; built
    without a Python loop over classes for array input."""
    if isinstance(scores, Mapping):
        per_class = _per_class(scores, classes)
        names = list(per_class)
        if not names:
            raise DataError("no classes to calibrate")
        width = max(a.size for a in per_class.values())
        values = np.zeros((width, len(names)))
        valid = np.zeros((width, len(names)), dtype=bool)
        for j, n in enumerate(names):
            a = per_class[n]
            values[:a.size, j], valid[:a.size, j] = a, True
        return names, values, valid
    s, c = _checked_arrays(scores, classes)
    if s.size == 0:
        raise DataError("no classes to calibrate")
    names, inverse = factorise(c)
    order = np.argsort(inverse, kind="stable")
    counts = np.bincount(inverse, minlength=names.size)
    starts = np.r_[0, np.cumsum(counts)[:-1]]
    within = np.arange(s.size) - np.repeat(starts, counts)
    values = np.zeros((int(counts.max()), names.size))
    valid = np.zeros(values.shape, dtype=bool)
    values[within, inverse[order]] = s[order]
    valid[within, inverse[order]] = True
    return names.tolist(), values, valid


def _column(labels: Any) -> np.ndarray | CodedLabels:
    """A column of class labels as given: :class:`CodedLabels` kept (the score-list commands' codes), anything
    else as a numpy array."""
    return labels if isinstance(labels, CodedLabels) else np.asarray(labels)


def _checked_arrays(scores: Any, classes: Any) -> tuple[np.ndarray, np.ndarray]:
    s = strict_floats(scores, "scores (a 1-D array of impostor comparison scores)")
    if s.ndim != 1:
        raise DataError(f"scores must be a 1-D array of impostor comparison scores, got shape {s.shape}")
    if classes is None:
        raise ParameterError("classes is required with an array of scores: the enrolled class of each score")
    c = _column(classes)
    if c.shape != s.shape:
        raise DataError(f"{s.size} scores but classes has shape {c.shape}; give the enrolled class of each score")
    return s, c


def _per_class(scores: Any, classes: Any) -> dict[str, np.ndarray]:
    if isinstance(scores, Mapping):
        if classes is not None:
            raise ParameterError("give either a mapping class -> scores, or scores and classes, not both")
        out = {}
        for cls, values in scores.items():
            arr = strict_floats(values, f"class {cls!r}: impostor scores")
            if arr.ndim != 1:
                raise DataError(f"class {cls!r}: impostor scores must be a 1-D array, got shape {arr.shape}")
            out[str(cls)] = arr
        refuse_bad_labels(out, "calibrate.fit")  # what is fitted must load again (issue 19: S1)
        return out
    s, c = _checked_arrays(scores, classes)
    names, inverse = factorise(c)
    refuse_bad_labels(names.tolist(), "calibrate.fit classes")
    order = np.argsort(inverse, kind="stable")
    bounds = np.searchsorted(inverse[order], np.arange(names.size + 1))
    return {str(n): s[order[bounds[k]:bounds[k + 1]]] for k, n in enumerate(names)}


def _without_genuine(scores: Any, classes: Any, real: Any, kind: str) -> tuple[Any, Any, Any]:
    """The impostor scores, their classes and their probes' real classes (None without ``real``), after checking the
    direction (calibrate.statistics.sanity) with the genuine ones (``real == classes``)."""
    if real is None:
        return scores, classes, None
    if isinstance(scores, Mapping) or classes is None:
        raise ParameterError("real= goes with an array of scores and classes (the probe's real class of each score)")
    try:
        s = np.asarray(scores, dtype=np.float64)
    except (TypeError, ValueError):
        raise DataError("scores must be numbers (a 1-D array of comparison scores)") from None
    c, r = _column(classes), _column(real)
    if not s.ndim == 1 or c.shape != s.shape or r.shape != s.shape:
        raise DataError(f"scores {s.shape}, classes {c.shape} and real {r.shape} must be 1-D arrays of one length: "
                        "per comparison its score, claimed class and the probe's real class")
    genuine = same_labels(c, r)
    if not genuine.any():  # two spellings of the same ids: every genuine score would be fitted as an impostor's
        error, _ = id_problem(c, r, "calibrate.fit", "give real= the ids spelled as in classes",
                              list_evidence(c, r, s, kind))
        if error:  # without the scores' evidence, impostor-only data: fitted as given
            raise DataError(error)
    check_direction(s[genuine], s[~genuine], kind, "calibrate.fit scores",
                    f"pass kind={'distance' if kind == 'similarity' else 'similarity'!r}")
    if genuine.all():
        raise DataError(f"all {s.size} comparisons are genuine (real == classes); thresholds need impostor comparisons")
    return s[~genuine], c[~genuine], r[~genuine]


def _probe_units(classes: Any, real: Any) -> Any:
    """The impostor scores' probe identities (their real classes) in the order the fit's ImpostorDistances lists
    them (class by class in :func:`_padded`'s order, each class's scores as given): how their false accepts cluster
    (calibrate.predicted.clustering); None without ``real``."""
    from calibrate.predicted.clustering import units_of

    if real is None:
        return None
    _, inverse = factorise(classes)
    _, identity = factorise(real)
    return units_of(np.asarray(identity)[np.argsort(inverse, kind="stable")])


def _genuine_distances(scores: Any, classes: Any, real: Any, kind: str, transform: Transform,
                       order: tuple[str, ...]) -> GenuineDistances | None:
    """The genuine comparisons (``real == classes``) as distances through the fitted transform, per class in
    ``order`` (the estimator's classes; a genuine score of a class without impostor scores is left out); None
    without ``real`` or without a genuine comparison."""
    if real is None:
        return None
    s = np.asarray(scores, dtype=np.float64)
    c, r = _column(classes), _column(real)
    genuine = same_labels(c, r)
    if not genuine.any():
        return None
    gs, gc = s[genuine], c[genuine]
    mapped = _mappable(gs, kind, transform)
    if not mapped.all():  # they only inform the estimator's choice: left out, said, never a failed fit
        bad = int(np.flatnonzero(~mapped)[0])
        warnings.warn(f"calibrate.fit: {int((~mapped).sum())} of {gs.size} genuine scores cannot be mapped by the "
                      f"transform (e.g. {gs[bad]!r} of class {gc[bad]!r}) and are left out of what the estimator may "
                      "judge its choice by", stacklevel=3)
        gs, gc = gs[mapped], gc[mapped]
        if not gs.size:
            return None
    names, values, valid = _padded(gs, gc)
    matrix = DistanceMatrix(values, np.array([_OTHER] * values.shape[0]), np.array(names), valid, kind,
                            source="calibrate.fit genuine scores")
    d = transform.apply(matrix)
    column = {n: j for j, n in enumerate(names)}
    return GenuineDistances.from_lists({cls: (d.values[d.valid[:, column[cls]], column[cls]] if cls in column
                                              else np.empty(0)) for cls in order})


def _mappable(values: np.ndarray, kind: str, transform: Transform) -> np.ndarray:
    """Which of ``values`` the fitted transform maps to a finite, non-negative distance (all of them in one call when
    it can; else one by one, so that one failed genuine attempt does not stop a fit)."""
    def ok(v: np.ndarray) -> np.ndarray | None:
        m = DistanceMatrix(v[:, None], np.array([_OTHER] * v.size), np.array(["genuine"]), np.ones((v.size, 1), bool),
                           kind, source="calibrate.fit genuine scores")
        try:
            out = transform.apply(m).values[:, 0]
        except DataError:
            return None
        return np.isfinite(out) & (out >= 0)

    whole = ok(values)
    if whole is not None:
        return whole
    return np.array([bool(r is not None and r[0]) for r in (ok(values[i:i + 1]) for i in range(values.size))],
                    dtype=bool)


def _spec(registry, kind: str, entry: Any, where: str):
    from calibrate.recipe.validation import _component

    if isinstance(entry, str):
        entry = {"plugin": entry}
    return _component(registry, kind, entry, where, "calibrate.fit", Path.cwd())


def _fit_specs(kind: str, estimator: str, params: dict, transform: str | Mapping | None, extra_plugins: tuple):
    """The estimator's and the transform's specs, checked as a recipe's are (the default transform by ``kind``)."""
    from calibrate.contract.manager import build_registry
    from calibrate.recipe.schema import DEFAULT_TRANSFORMS

    registry = build_registry(extra_plugins)
    est_spec = _spec(registry, "estimators", {"plugin": estimator, **params}, "estimator")
    tr_spec = _spec(registry, "transforms", transform if transform is not None else DEFAULT_TRANSFORMS[kind],
                    "transform")
    accepts = tr_spec.info.factory.accepts
    if kind not in accepts:
        raise ParameterError(f"transform {tr_spec.info.name!r} takes {' or '.join(accepts)} scores, but kind is {kind!r}")
    return est_spec, tr_spec


def _impostor_matrix(scores: Any, classes: Any, kind: str) -> DistanceMatrix:
    """The impostor scores as a matrix with one column per class (a probe of no class in each row)."""
    names, values, valid = _padded(scores, classes)
    bad = valid & ~np.isfinite(values)
    if bad.any():
        r, j = np.argwhere(bad)[0]
        raise DataError(f"class {names[j]!r}: score {r} is {float(values[r, j])}; impostor scores must be finite numbers")
    return DistanceMatrix(values, np.array([_OTHER] * values.shape[0]), np.array(names), valid, kind,
                          source="calibrate.fit scores")


def _warn_unreachable_targets(dist: DistanceMatrix, targets: tuple[float, ...]) -> None:
    """Warn (as a run notes) when tied distances put some targets out of reach."""
    smallest, tied = tied_floor(dist.values[dist.valid])
    below = [t for t in targets if t < tied]
    if below and tied > 1.0 / dist.valid.sum():
        warnings.warn(tie_message(smallest, tied, below), stacklevel=3)


def fit(scores: Any, classes: Any = None, *, real: Any = None, kind: str | None = None, estimator: str = "auto",
        transform: str | Mapping | None = None, targets: Sequence[float] = (0.005, 0.0025, 0.001, 0.0005),
        extra_plugins: tuple = (), predict: bool = False, confidence: float | None = None,
        level: float = 0.9, replicates: int = 100, seed: int = 0, budget_s: float | None = None,
        context: RunContext | None = None, **params: Any) -> Calibration:
    """Fit a calibration from training impostor scores held in memory.

    :param scores: 1-D array of impostor comparison scores, or a mapping class -> array of them.
    :param classes: the enrolled (claimed) class of each score (with an array of scores).
    :param real: the real class of each score's probe (with an array of scores). Genuine comparisons
        (``real == classes``) are left out of the fit and used to check the direction: scores whose
        genuine comparisons sit on the reject side (a distance given as ``kind="similarity"``, or the
        reverse) raise :class:`DataError` naming the fix. Without it every score must be an impostor one.
    :param kind: ``similarity`` (higher = more alike) or ``distance``. Left out, the scores are read as
        similarities; without ``real`` that cannot be checked, so a warning says what was assumed
        (a distance read as a similarity rejects nearly every genuine user).
    :param estimator: the estimator's registered name (``calibrate plugins``); ``**params`` are its parameters.
    :param transform: a transform name or ``{plugin: NAME, ...}``; default: similarity-to-distance for
        similarity scores, identity for distances (as a recipe without ``transform:``).
    :param targets: the target FPRs the calibration is meant for (recorded in the artifact; any
        target in (0, 1) can be asked later).
    :param predict: also predict, from these scores alone, the interval of the FPR each target's
        thresholds will achieve (:meth:`Calibration.predicted_fpr`; ``replicates`` refits of the
        estimator on simulated galleries, ``level`` the interval's coverage, ``seed`` their seed; an
        estimator without a vectorised simulation is refitted ``replicates`` times, or as often as
        ``budget_s`` seconds allow at the cost of its fit, and gets no interval when 20 refits do not fit).
    :param confidence: thresholds whose achieved FPR exceeds the target with probability at most
        ``1 - confidence`` (e.g. 0.95; implies ``predict``); see calibrate.predicted.interval.
    :param context: a :class:`~calibrate.contract.base.RunContext` whose progress reporter shows the fit's stages (the
        estimator's classes, the simulated galleries) as a run shows them (``calibrate fit`` passes its own);
        default: none shown.
    """
    if kind is None:
        kind = "similarity"
        if real is None:
            warnings.warn("calibrate.fit: no kind= and no real=, so the scores are read as similarities (higher = more "
                          "alike) without a check; if they are distances every threshold rejects nearly every genuine "
                          "user. Pass kind='similarity' or kind='distance', or real= (each probe's real class) to check "
                          "the direction against the genuine scores", stacklevel=2)
    if kind not in ACCEPT_IF:
        raise ParameterError(f"kind must be similarity or distance, got {kind!r}")
    est_spec, tr_spec = _fit_specs(kind, estimator, params, transform, extra_plugins)
    checked_targets = tuple(check_target(t) for t in targets)
    imp_scores, imp_classes, imp_real = _without_genuine(scores, classes, real, kind)
    raw = _impostor_matrix(imp_scores, imp_classes, kind)
    tr = tr_spec.build().fit(raw)
    dist = tr.apply(raw)
    impostors = ImpostorDistances.from_matrix(dist)
    genuine = _genuine_distances(scores, classes, real, kind, tr, impostors.classes)
    _warn_unreachable_targets(dist, checked_targets)
    est = est_spec.build()
    fit_started = time.perf_counter()
    context = RunContext() if context is None else context
    model = est.fit(impostors, context, genuine=genuine)
    fit_seconds = time.perf_counter() - fit_started
    label, saved = est_spec.label, None
    if confidence is not None:
        confidence = check_confidence(confidence)
        label = f"{label}-c{100 * confidence:g}"
    if predict or confidence is not None:
        settings = PredictionSettings(float(level), int(replicates), budget_s=budget_s)
        worlds = Worlds(impostors, dist)
        world = choose_world(worlds, impostors, model, checked_targets)
        model, predicted = predict_model(model, est, impostors, checked_targets, confidence, settings=settings,
                                         seed=[int(seed)], context=context, world=world, fit_seconds=fit_seconds,
                                         units=_probe_units(imp_classes, imp_real))
        saved = predicted.saved(model.classes)
    _say_extrapolated_targets(checked_targets, int(impostors.values.size))
    return Calibration(estimator=est, plugin=est_spec.info.name, label=label, params=est_spec.params,
                       model=model, transform=tr, transform_plugin=tr_spec.info.name, transform_params=tr_spec.params,
                       kind=kind, targets=checked_targets, fingerprint=fingerprint(impostors),
                       versions=package_versions((est_spec, tr_spec)), prediction=saved,
                       training_impostors=int(impostors.values.size), training_scores=(*_score_range(scores), genuine is not None and genuine.values.size > 0))


def _score_range(scores: Any) -> tuple[float, float]:
    """(lowest, highest) of the scores ``fit`` was given (a 1-D array, or a mapping class -> scores; genuine
    ones included), which every fit checks are finite numbers before this."""
    values = (np.concatenate([np.asarray(v, dtype=np.float64).ravel() for v in scores.values()])
              if isinstance(scores, Mapping) else np.asarray(scores, dtype=np.float64).ravel())
    return float(values.min()), float(values.max())


def _say_extrapolated_targets(targets: Sequence[float], n: int) -> None:
    """Warn at fit time about every target below 1/N of the training impostor distances (audit S5): its
    thresholds extrapolate, and ``calibrate threshold`` refuses it later without --allow-extrapolation."""
    for t in targets:
        if t * n < 1:
            warnings.warn(extrapolation_message(t, n), stacklevel=3)
