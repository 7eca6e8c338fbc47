"""Calibration group by group against same-group impostors (``data: {impostors: same-group}``, ISO/IEC 19795-10).

Calibrating against every impostor cannot keep each demographic group's *same-group* FMR at the target: a class of
a minority group meets mostly impostors of the other groups, which are far, so its threshold is loose for the
look-alikes of its own group that decide a low FPR. With ``impostors: same-group`` the run leaves out the impostor
comparisons of a labelled class with probes of another group (calibrate.running.pipeline.same_group_folds), and fits every
estimator once per group, on that group's classes and their same-group impostors only (:func:`fit_by_group`): each
group gets its own pooled quantities (a pooled threshold, a pooled shape), so that each group's same-group FMR,
not only the overall one, is calibrated to the target. Classes without a group form one more stratum, calibrated
against all their impostors.

The fitted model (:class:`GroupedModel`) holds one model of the estimator's own ``model_class`` per group; saved, its
state is ``{"grouped": 1, "classes": [...], "parts": [{"group": name, "state": part's state}, ...]}``, read back by
:func:`model_from_state` with the estimator's model class for every part (so that a file cannot name a class to
build). A class is enrolled into its group's part (:func:`enroll_into`, ``Calibration.enroll(..., group=)``).

A run (calibrate.running.pipeline.same_group_folds) and ``calibrate.fit(..., same_group=True)`` leave out the same
comparisons (:func:`other_group`) and fit with :func:`fit_by_group`.
"""

from __future__ import annotations

import warnings
from dataclasses import replace
from typing import Any, Callable

import numpy as np

from calibrate.contract.base import FittedModel, RunContext
from calibrate.errors import CalibrationError, DataError, ParameterError
from calibrate.contract.shard_data import other_group  # noqa: F401  (the rule, said once; imported from here too)
from calibrate.contract.types import UNLABELLED, GenuineDistances, ImpostorDistances, TrainingGroups, group_problem

#: the marker of a grouped model's saved state
GROUPED_KEY = "grouped"


class GroupedModel(FittedModel):
    """One fitted model per demographic group (``parts``: (group name, model) pairs, each over its group's classes);
    a class's thresholds are its group's model's."""

    def __init__(self, classes, parts: list[tuple[str, FittedModel]]):
        super().__init__(classes)
        self.parts = [(str(g), m) for g, m in parts]
        names = [g for g, _ in self.parts]
        if len(set(names)) != len(names):
            raise DataError("grouped model: a group has two parts")
        self._part = np.full(len(self.classes), -1, dtype=np.int64)
        self._row = np.full(len(self.classes), -1, dtype=np.int64)
        for p, (g, model) in enumerate(self.parts):
            for r, c in enumerate(model.classes):
                i = self._index.get(c)
                if i is None or self._part[i] >= 0:
                    raise DataError(f"grouped model: class {c[:60]!r} of group {g[:40]!r} is "
                                    f"{'not one of the classes' if i is None else 'in two groups'}")
                self._part[i], self._row[i] = p, r
        if np.any(self._part < 0):
            missing = self.classes[int(np.argmax(self._part < 0))]
            raise DataError(f"grouped model: class {missing[:60]!r} is in no group's part")

    #: Estimator.enroll refuses a grouped model with this message (Calibration.enroll takes the group: enroll_into)
    @property
    def enroll_refused(self) -> str:
        return ENROLL_REFUSED

    def group_of(self, cls: str) -> str:
        return self.parts[int(self._part[self._index[str(cls)]])][0]

    def groups(self) -> dict[str, str]:
        """Each class's group (:data:`UNLABELLED` for the part of classes without one)."""
        return {c: self.parts[int(p)][0] for c, p in zip(self.classes, self._part.tolist())}

    def _thresholds(self, targets: np.ndarray, rows: np.ndarray) -> np.ndarray:
        out = np.empty((rows.size, targets.size))
        part = self._part[rows]
        for p, (_, model) in enumerate(self.parts):
            mine = part == p
            if mine.any():
                out[mine] = model._thresholds(targets, self._row[rows[mine]])
        return out

    def parameters(self) -> list[dict[str, Any]]:
        rows = []
        for g, model in self.parts:
            rows.extend({"group": g, **row} for row in model.parameters())
        return rows

    def cdf(self, row: int, x: np.ndarray) -> np.ndarray | None:
        return self.parts[int(self._part[row])][1].cdf(int(self._row[row]), x)

    def compact(self, reach: float) -> "GroupedModel":
        parts = [(g, m.compact(reach)) for g, m in self.parts]
        if all(small is m for (_, small), (_, m) in zip(parts, self.parts)):
            return self  # every group's model is saved whole
        return GroupedModel(self.classes, parts)

    def to_state(self) -> dict[str, Any]:
        return {GROUPED_KEY: 1, "classes": list(self.classes),
                "parts": [{"group": g, "state": m.to_state()} for g, m in self.parts]}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> "GroupedModel":
        raise CalibrationError("a grouped model is read with calibrate.saved.grouped.model_from_state(model_class, state)")


def is_grouped(state: Any) -> bool:
    return isinstance(state, dict) and GROUPED_KEY in state


def model_from_state(model_class: type[FittedModel], state: Any) -> FittedModel:
    """The model a saved state describes: the estimator's ``model_class``'s, or a :class:`GroupedModel` of them (each
    part checked by ``model_class.from_state``; group names and classes checked here)."""
    if not is_grouped(state):
        return model_class.from_state(state)
    if state.get(GROUPED_KEY) != 1:
        raise CalibrationError(f"{GROUPED_KEY}: {str(state.get(GROUPED_KEY))[:20]!r} is not a grouped model version "
                               "this calibrate reads (1)")
    classes, parts = state.get("classes"), state.get("parts")
    if not isinstance(classes, list) or not all(isinstance(c, str) for c in classes):
        raise CalibrationError("classes: must be a list of class names")
    if not isinstance(parts, list) or not parts:
        raise CalibrationError("parts: must be a non-empty list of {group, state}")
    built = []
    for k, part in enumerate(parts):
        if not isinstance(part, dict) or not isinstance(part.get("group"), str) or "state" not in part:
            raise CalibrationError(f"parts[{k}]: must be a mapping of a group name and a model state")
        name = part["group"]
        problem = None if name == UNLABELLED else group_problem(name)
        if problem is not None:
            raise CalibrationError(f"parts[{k}].group: {name[:40]!r} {problem}")
        if is_grouped(part["state"]):
            raise CalibrationError(f"parts[{k}].state: a grouped model cannot hold another")
        built.append((name, model_class.from_state(part["state"])))
    try:
        return GroupedModel(classes, built)
    except DataError as exc:
        raise CalibrationError(str(exc)) from None


def with_root(state: Any, root: str) -> Any:
    """A saved state with the folder its files are read from (``root``): in each part of a grouped one."""
    if not isinstance(state, dict):
        return state
    if is_grouped(state) and isinstance(state.get("parts"), list):
        return {**state, "parts": [{**p, "state": {**p["state"], "root": root}}
                                   if isinstance(p, dict) and isinstance(p.get("state"), dict) else p
                                   for p in state["parts"]]}
    return {**state, "root": root}


def same_group_kept(claimed: Any, real: Any, labels: Any) -> np.ndarray:
    """Which comparisons (each one's claimed class and its probe's real class: label columns) calibration against
    same-group impostors keeps, by :class:`calibrate.contract.types.GroupLabels` ``labels``: all but
    :func:`other_group`'s (genuine comparisons are kept)."""
    return ~other_group(labels.codes(real), labels.codes(claimed), len(labels.names))


def no_own_impostor(cls: str, group: str, where: str, fix: str) -> DataError:
    """The error for a class left without an impostor comparison of its own group."""
    return DataError(f"{where}class {cls[:60]!r} (group {group[:40]!r}) has no training impostor comparison with a "
                     f"probe of its own group, so it cannot be calibrated against same-group impostors; {fix}")


def strata(groups: TrainingGroups) -> list[tuple[str, np.ndarray]]:
    """(group name, the rows of its classes) for every labelled group with classes, then :data:`UNLABELLED`'s."""
    out = [(name, np.flatnonzero(groups.of_class == k)) for k, name in enumerate(groups.names)]
    out.append((UNLABELLED, np.flatnonzero(groups.of_class == len(groups.names))))
    return [(name, rows) for name, rows in out if rows.size]


def _subset(impostors: ImpostorDistances, rows: np.ndarray) -> ImpostorDistances:
    return ImpostorDistances.from_lists({impostors.classes[i]: impostors.of(i) for i in rows.tolist()})


def fit_by_group(make: Callable[[], Any], impostors: ImpostorDistances, genuine: GenuineDistances | None,
                 groups: TrainingGroups, context: RunContext,
                 make_for: Callable[[str], Any] | None = None) -> GroupedModel:
    """A fresh estimator from ``make()`` (``make_for(group's name)`` where given) fitted on each group's classes alone
    (:func:`strata`), with their training genuine distances; the estimators' notes are said with the group's name. A
    group whose fit fails: a DataError naming the group."""
    parts, estimators = [], []
    for name, rows in strata(groups):
        sub = _subset(impostors, rows)
        sub_genuine = None if genuine is None else GenuineDistances.from_lists(
            {genuine.classes[i]: genuine.of(i) for i in rows.tolist()})
        inner = replace(context, notes=[])
        try:
            with warnings.catch_warnings(record=True) as caught:  # the notes are said again, with the group's name
                warnings.simplefilter("always")
                estimator = make() if make_for is None else make_for(name)
                model = estimator.fit(sub, inner, genuine=sub_genuine)
        except DataError as exc:
            raise DataError(f"group {name[:40]!r} ({rows.size} classes, calibrated on its own against same-group "
                            f"impostors): {exc}") from None
        for w in caught:
            if str(w.message) not in inner.notes:
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        for note in inner.notes:
            context.note(f"group {name}: {note}")
        parts.append((name, model))
        estimators.append(estimator)
    grouped = GroupedModel(impostors.classes, parts)
    grouped.estimators = estimators  # each group's fitted estimator, for its predicted interval (not saved)
    return grouped


def prediction_parts(model: GroupedModel, impostors: ImpostorDistances) -> list[tuple]:
    """(group, the group's model, its fitted estimator, its training distances) of a model :func:`fit_by_group` just
    fitted on ``impostors``: what calibrate.predicted.interval.predict_parts predicts group by group."""
    index = {c: i for i, c in enumerate(impostors.classes)}
    return [(name, part, estimator, _subset(impostors, np.array([index[c] for c in part.classes])))
            for (name, part), estimator in zip(model.parts, model.estimators)]


def enroll_into(model: GroupedModel, estimator: Any, cls: str, group: Any, distances: np.ndarray) -> GroupedModel:
    """``model`` with class ``cls`` added to (or replaced in) the part of ``group`` by ``estimator.enroll`` (what
    stays fixed is the estimator's ``enroll_mode``, within that group); the other parts untouched. ``distances``:
    the class's impostor distances against probes of its own group (of any group for :data:`UNLABELLED`)."""
    p = check_group(model, cls, group)
    parts = list(model.parts)
    parts[p] = (parts[p][0], estimator.enroll(parts[p][1], cls, distances))
    return GroupedModel(model.classes if cls in model._index else (*model.classes, cls), parts)


def check_group(model: GroupedModel, cls: str, group: Any) -> int:
    """The part class ``cls`` of ``group`` is enrolled into; a ParameterError naming ``group=`` when it is missing,
    not one of the model's groups, or not the group the class is in already."""
    names = [g for g, _ in model.parts]
    if group is None:
        raise ParameterError(f"this calibration was fitted group by group against same-group impostors: give the "
                             f"class's group, enroll(..., group=NAME) (one of {', '.join(map(repr, names))}), and its "
                             "impostor scores against probes of that group")
    group = str(group)
    if group not in names:
        raise ParameterError(f"group={group[:40]!r} is not one of this calibration's groups "
                             f"({', '.join(map(repr, names))}); a new group needs a new fit")
    if cls in model._index and model.group_of(cls) != group:
        raise ParameterError(f"class {cls[:60]!r} is in group {model.group_of(cls)!r}, not {group[:40]!r}: enroll it "
                             "with its own group, or fit again to move it")
    return names.index(group)


ENROLL_REFUSED = ("this calibration was made group by group against same-group impostors; enrolling one class needs "
                  "its group: Calibration.enroll(cls, scores, group=NAME)")
