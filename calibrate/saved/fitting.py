"""Fitting a calibration from arrays held in memory: ``calibrate.fit`` (and ``calibrate fit`` on the command line).

    import calibrate
    cal = calibrate.fit(scores, classes, real=real, kind="similarity")  # every comparison: claimed and real class
    cal = calibrate.fit(scores, classes, impostors_only=True, kind="distance")  # impostor scores only, said so
    cal = calibrate.fit(scores, classes, real=real, groups="groups.csv", same_group=True)  # each group on its own

:func:`fit` checks the scores and classes (one array each, or a mapping class -> scores), leaves out the
genuine comparisons after checking the score direction with them, builds the estimator and the transform
as a recipe would, fits them (and the predicted FPR interval, when asked) and returns a
:class:`calibrate.saved.calibration.Calibration`. Scores with no genuine comparison among them by their labels
are first checked for genuine ones hidden there (calibrate.statistics.mixture): refused when found, unless
``impostors_only=True`` says there are none (then a warning). A call that says neither ``real=`` nor
``impostors_only=True`` gets a FutureWarning naming both (issue 41). With ``groups`` the estimator sees them as
in a run with ``groups:``; with ``same_group`` it leaves out and fits group by group as a run with ``impostors:
same-group`` does (calibrate.saved.grouped).
"""

from __future__ import annotations

import os
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
from calibrate.predicted.interval import PredictionSettings, Worlds, choose_world, predict_parts
from calibrate.statistics.mixture import MAX_SCORES, MixedScores, MixedScoresWarning, mixed_scores
from calibrate.statistics.sanity import check_direction, id_problem, list_evidence
from calibrate.files.untrusted import refuse_bad_labels
from calibrate.files.score_lists import strict_floats
from calibrate.statistics.order import tie_message, tied_floor
from calibrate.contract.types import (CodedLabels, DistanceMatrix, GenuineDistances, GroupLabels, ImpostorDistances,
                                     TrainingGroups, factorise, same_labels)
from calibrate.recipe.groups import check_against, read_groups
from calibrate.saved.grouped import fit_by_group, no_own_impostor, prediction_parts, same_group_kept


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


def _without_genuine(scores: Any, classes: Any, real: Any, kind: str,
                     impostors_only: bool = False) -> tuple[Any, Any, Any]:
    """The impostor scores, their classes and their probes' real classes, after checking the direction
    (calibrate.statistics.sanity) with the genuine ones (``real == classes``); unchanged when ``real`` is None."""
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
    if impostors_only and genuine.any():
        raise ParameterError(f"impostors_only=True, but real= makes {int(genuine.sum()):,} of the {s.size:,} comparisons "
                             "genuine (real == classes); leave out impostors_only=True: they are left out of the fit")
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


#: what a call that says neither what its scores compare nor that they are impostor scores is told
UNSAID = ("calibrate.fit: say what the scores compare: real= (each score's probe's real class, with arrays of scores "
          "and classes: genuine comparisons are left out, the score direction is checked, and auto can choose "
          "per-class thresholds by them) or impostors_only=True (every score is an impostor comparison); a later "
          "version will refuse a call with neither")


def _strided_scores(raw: DistanceMatrix) -> tuple[np.ndarray, np.ndarray]:
    """(scores, column of each) of every k-th valid entry of ``raw`` in class order, at most MAX_SCORES of them,
    gathered a block of classes at a time (never an index array the size of all the scores)."""
    n = int(np.count_nonzero(raw.valid))
    step = -(-n // MAX_SCORES)
    block = max(1, (1 << 22) // max(raw.values.shape[0], 1))
    values, columns, seen = [], [], 0
    for j0 in range(0, raw.values.shape[1], block):
        cls, row = np.nonzero(raw.valid[:, j0:j0 + block].T)
        keep = (seen + np.arange(cls.size)) % step == 0
        seen += cls.size
        values.append(raw.values[row[keep], j0 + cls[keep]])
        columns.append(j0 + cls[keep])
    return np.concatenate(values), np.concatenate(columns)


def _check_mixture(raw: DistanceMatrix, real: Any, impostors_only: bool) -> None:
    """Before any fit: scores fitted as impostor ones that look mixed with genuine ones (calibrate.statistics.mixture)
    are refused naming the fix, or, when the caller said ``impostors_only=True``, warned about."""
    found = mixed_scores(*_strided_scores(raw), raw.kind)
    if not found.fired:
        return
    if impostors_only:
        warnings.warn(MixedScoresWarning(f"calibrate.fit: impostors_only=True, yet {found.finding()}; if some are "
                                         "genuine comparisons, pass real= (each score's probe's real class) instead",
                                         found), stacklevel=3)
        return
    if real is None:
        raise MixedScores(f"calibrate.fit: {found.finding()}; pass real= (each score's probe's real class: genuine "
                          "comparisons are left out) or, if every score is an impostor comparison, impostors_only=True",
                          found)
    raise MixedScores(f"calibrate.fit: real= never equals classes, so every score was taken for an impostor's, yet "
                      f"{found.finding()}; write real= with the ids of classes (a probe's own class as it is named "
                      "there) or, if every score is an impostor comparison, pass impostors_only=True", found)


def _warn_unreachable_targets(dist: DistanceMatrix, targets: tuple[float, ...]) -> None:
    """Warn (as a run notes) when tied distances put some targets out of reach."""
    smallest, tied = tied_floor(dist.values[dist.valid])
    below = [t for t in targets if t < tied]
    if below and tied > 1.0 / dist.valid.sum():
        warnings.warn(tie_message(smallest, tied, below), stacklevel=3)


def fit(scores: Any, classes: Any = None, *, real: Any = None, impostors_only: bool = False, groups: Any = None,
        same_group: bool = False, kind: str | None = None, estimator: str = "auto",
        transform: str | Mapping | None = None, targets: Sequence[float] = (0.005, 0.0025, 0.001, 0.0005),
        extra_plugins: tuple = (), predict: bool = False, confidence: float | None = None,
        level: float = 0.9, replicates: int = 100, seed: int = 0, budget_s: float | None = None,
        context: RunContext | None = None, **params: Any) -> Calibration:
    """Fit a calibration from comparison scores held in memory.

    :param scores: 1-D array of comparison scores, or a mapping class -> array of impostor scores.
    :param classes: the enrolled (claimed) class of each score (with an array of scores).
    :param real: the real class of each score's probe (with an array of scores): the documented form. Genuine
        comparisons (``real == classes``) are left out of the fit, used to check the direction (scores whose
        genuine comparisons sit on the reject side, a distance given as ``kind="similarity"`` or the reverse,
        raise :class:`DataError` naming the fix) and let ``auto`` choose how class-specific its thresholds are.
    :param impostors_only: say that every score is an impostor comparison (no ``real`` needed). Without it or
        ``real``, a FutureWarning asks for one of them. Scores with no genuine comparison by their labels that look
        like genuine and impostor ones mixed (calibrate.statistics.mixture) raise
        :class:`~calibrate.statistics.mixture.MixedScores` (a DataError) naming the fix before anything is fitted;
        with ``impostors_only=True`` a warning says so instead.
    :param groups: each class's demographic group: a mapping class -> group, or the path of a CSV file with a
        header ``class,group`` (a recipe's ``data: {groups: FILE}``); needs ``real`` (a probe is in its real class's
        group). A class it does not name is ``unlabelled``, as in a run (a warning counts them). The estimator
        sees the groups as in a run with ``groups:`` (``auto`` chooses without widening the gap between groups).
    :param same_group: calibrate each group on its own against same-group impostors (a recipe's ``impostors:
        same-group``, ISO/IEC 19795-10): impostor comparisons of a labelled class with a probe of another group (or
        of none) are left out, and the estimator is fitted group by group (calibrate.saved.grouped); unlabelled
        classes form one more part, calibrated against all their impostors. Needs ``groups``.
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
    if not isinstance(impostors_only, bool):
        raise ParameterError(f"impostors_only must be True or False, got {impostors_only!r}")
    if real is None and not impostors_only:
        warnings.warn(UNSAID, FutureWarning, stacklevel=2)
    est_spec, tr_spec = _fit_specs(kind, estimator, params, transform, extra_plugins)
    checked_targets = tuple(check_target(t) for t in targets)
    labels = fitting_groups(groups, same_group, real, confidence)
    s, c, r = _without_genuine(scores, classes, real, kind, impostors_only)
    unlabelled = real is None or np.size(s) == np.size(scores)  # no comparison genuine by its labels
    if labels is not None:
        for note in check_against(labels, factorise(_column(classes))[0], factorise(_column(real))[0]):
            warnings.warn(note, stacklevel=2)
        if same_group:
            s, c, r = same_group_only(s, c, r, labels)
    raw = _impostor_matrix(s, c, kind)
    if unlabelled:  # before anything is fitted: genuine scores hidden among them?
        _check_mixture(raw, real, impostors_only)
    tr = tr_spec.build().fit(raw)
    dist = tr.apply(raw)
    impostors = ImpostorDistances.from_matrix(dist)
    training_groups = None if labels is None else _training_groups(labels, s, c, r, impostors)
    genuine = _genuine_distances(scores, classes, real, kind, tr, impostors.classes)
    _warn_unreachable_targets(dist, checked_targets)
    est = est_spec.build()
    fit_started = time.perf_counter()
    context = RunContext() if context is None else context
    if same_group:  # each group on its own, as a run with `impostors: same-group` (calibrate.saved.grouped)
        model = fit_by_group(est_spec.build, impostors, genuine, training_groups, context)
    else:
        model = est.fit(impostors, context, genuine=genuine, groups=training_groups)
    fit_seconds = time.perf_counter() - fit_started
    label, saved = est_spec.label, None
    if confidence is not None:
        confidence = check_confidence(confidence)
        label = f"{label}-c{100 * confidence:g}"
    if same_group and predict:  # each group in a world of its own, as a run predicts it (seeded as its first estimator)
        settings = PredictionSettings(float(level), int(replicates), budget_s=budget_s)
        try:
            saved = predict_parts(prediction_parts(model, impostors), model, checked_targets, settings=settings,
                                  seed=[int(seed), 0, 0], context=context).saved(model.classes)
        except DataError as exc:  # the thresholds stand without it, as in a run
            warnings.warn(f"calibrate.fit: no predicted FPR intervals: {exc}", stacklevel=2)
    elif predict or confidence is not None:
        settings = PredictionSettings(float(level), int(replicates), budget_s=budget_s)
        worlds = Worlds(impostors, dist)
        world = choose_world(worlds, impostors, model, checked_targets)
        model, predicted = predict_model(model, est, impostors, checked_targets, confidence, settings=settings,
                                         seed=[int(seed)], context=context, world=world, fit_seconds=fit_seconds,
                                         units=_probe_units(c, r))
        saved = predicted.saved(model.classes)
    _say_extrapolated_targets(checked_targets, int(impostors.values.size))
    return Calibration(estimator=est, plugin=est_spec.info.name, label=label, params=est_spec.params,
                       model=model, transform=tr, transform_plugin=tr_spec.info.name, transform_params=tr_spec.params,
                       kind=kind, targets=checked_targets, fingerprint=fingerprint(impostors),
                       versions=package_versions((est_spec, tr_spec)), prediction=saved,
                       training_impostors=int(impostors.values.size), training_scores=(*_score_range(scores), genuine is not None and genuine.values.size > 0))


def fitting_groups(groups: Any, same_group: Any, real: Any, confidence: Any) -> GroupLabels | None:
    """``fit``'s ``groups`` as GroupLabels (a mapping class -> group, a groups file's path, or GroupLabels), with
    what ``same_group`` needs checked before any work; None without groups."""
    if not isinstance(same_group, bool):
        raise ParameterError(f"same_group must be True or False, got {same_group!r}")
    if groups is None:
        if same_group:
            raise ParameterError("same_group=True needs groups=: each class's demographic group (a mapping class -> "
                                 "group, or a CSV file with a header `class,group`), and real=")
        return None
    if real is None:
        raise ParameterError("groups= needs real=, each score's probe's real class: a probe is in its real class's "
                             "group, and the estimator is told each impostor comparison's groups")
    if same_group and confidence is not None:
        raise ParameterError("confidence= needs one simulated world for the whole calibration, which a calibration "
                             "group by group (same_group=True) does not have yet; leave out one of them")
    if isinstance(groups, GroupLabels):
        return groups
    if isinstance(groups, (str, os.PathLike)):
        return read_groups(groups)
    if isinstance(groups, Mapping):
        refuse_bad_labels([str(c) for c in groups], "calibrate.fit groups")
        return GroupLabels.from_mapping({str(c): str(g) for c, g in groups.items()}, source="calibrate.fit groups")
    raise ParameterError(f"groups must be a mapping class -> group or the path of a groups file (CSV `class,group`), "
                         f"got {type(groups).__name__}")


def same_group_only(s: np.ndarray, c: Any, r: Any, labels: GroupLabels) -> tuple[np.ndarray, Any, Any]:
    """The impostor comparisons a run with ``impostors: same-group`` keeps (calibrate.saved.grouped.other_group),
    said in a warning; a class left without one is a DataError."""
    out = ~same_group_kept(c, r, labels)
    names, inverse = factorise(c)
    lost = np.bincount(inverse[~out], minlength=names.size) == 0
    if lost.any():
        cls = str(names[int(np.argmax(lost))])
        raise no_own_impostor(cls, labels.group_of(cls), "calibrate.fit: ",
                              "leave out same_group=True, or give the group more probes")
    unlabelled = int(np.count_nonzero(labels.codes(names) == len(labels.names)))
    warnings.warn(f"calibrate.fit: calibrated against same-group impostors (ISO/IEC 19795-10): {int(out.sum()):,} "
                  f"impostor comparisons of a class with a probe of another group were left out of the fit "
                  f"({int((~out).sum()):,} kept)" + (f"; {unlabelled:,} class(es) without a group are calibrated "
                                                    "against all their impostors" if unlabelled else ""), stacklevel=3)
    return s[~out], c[~out], r[~out]


def _training_groups(labels: GroupLabels, s: np.ndarray, c: Any, r: Any,
                     impostors: ImpostorDistances) -> TrainingGroups:
    """The groups of the classes and impostor probes, value by value as ``_impostor_matrix(s, c)`` orders them."""
    _, codes, valid = _padded(labels.codes(r).astype(np.float64), c)  # the same layout as the scores'
    return TrainingGroups(labels.names, labels.codes(impostors.classes), codes.T[valid.T].astype(np.int64))


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
