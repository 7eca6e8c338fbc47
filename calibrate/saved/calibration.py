"""Deployable calibrations: answer in the matcher's own score units, enroll one class, save (JSON, never
pickle; the format is calibrate.saved.json_format, loading is calibrate.api.load, fitting from arrays is
calibrate.saved.fitting).

    import calibrate
    cal = calibrate.fit(scores, classes, real=real, kind="similarity")  # claimed and real class of each score
    cal.threshold("alice", 0.001)                                    # a score: accept when score >= it
    cal.accept(["alice", "bob"], [71.9, 40.2], 0.001)                # vectorised decisions
    cal.enroll("carol", carol_impostor_scores)                       # one class more, the others untouched
    cal.save("face.calibration.json"); cal = calibrate.load("face.calibration.json")

Inside, scores go through the fitted transform to distances, the estimator's model gives a
distance threshold per class and target, and the transform's inverse brings it back to score
units, refined to the last floating-point step so that ``score >= t`` (similarities) or
``score <= t`` (distances) decides exactly as ``transform(score) <= distance threshold`` does.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from calibrate.saved.json_format import ACCEPT_IF, artifact, dumps_artifact
from calibrate.contract.base import Estimator, FittedModel, Transform, check_target
from calibrate.errors import CalibrateError, CalibrationError, DataError, ParameterError
from calibrate.predicted.confidence import ConfidentModel, saved_entries
from calibrate.predicted.interval import as_array, measured_interval
from calibrate.files.untrusted import refuse_bad_labels
from calibrate.files.score_lists import strict_floats
from calibrate.statistics.order import REACH_FACTOR, SAVED_REACH, saved_reach
from calibrate.contract.types import CodedLabels, DistanceMatrix
from calibrate.saved.decisions import Decider
from calibrate.saved.grouped import GroupedModel, check_group, enroll_into


class Calibration:
    """One estimator's fitted thresholds for every enrolled class, in the data's own score units."""

    def __init__(self, *, estimator: Estimator, plugin: str, label: str, params: dict[str, Any], model: FittedModel,
                 transform: Transform, transform_plugin: str, transform_params: dict[str, Any], kind: str,
                 targets: Sequence[float] = (), fingerprint: str = "", versions: dict | None = None,
                 prediction: dict[str, Any] | None = None, training_impostors: int | None = None,
                 normalization: Any = None, training_scores: Sequence[float] | None = None,
                 reach: float | None = None, fnr_thresholds: Sequence[dict] = ()):
        if kind not in ACCEPT_IF:
            raise ParameterError(f"kind must be similarity or distance, got {kind!r}")
        self.estimator, self.plugin, self.label, self.params = estimator, plugin, label, dict(params)
        self.model = model
        self.transform, self.transform_plugin, self.transform_params = transform, transform_plugin, dict(transform_params)
        self.kind = kind
        self.targets = tuple(float(t) for t in targets)
        self.fingerprint = fingerprint
        self.versions = dict(versions or {})
        #: the predicted FPR interval saved with the fit (``calibrate.predicted.interval``): None when not predicted
        self.prediction = prediction
        #: how many training impostor distances the fit saw (pooled over classes), when known
        self.training_impostors = None if training_impostors is None else int(training_impostors)
        #: (lowest, highest) training score in score units, genuine ones included where the fit had them, when known:
        #: ``calibrate accept`` and ``evaluate`` refuse scores far outside it (calibrate.statistics.sanity.scale_problem)
        self.training_scores = None if training_scores is None else (
            float(training_scores[0]), float(training_scores[1]), len(training_scores) > 2 and bool(training_scores[2]))
        #: the fitted normaliser (calibrate.normalisation.cohort.FittedNormalization) when the run normalised the scores: its
        #: thresholds are then on the normalised distance exp(z), and a decision needs the probe's cohort scores
        self.normalization = normalization
        #: a loaded calibration's reach: the largest target FPR its saved model answers (the file's estimator entry
        #: says; ``saved_reach`` of its targets when it was saved); None: every target (fitted here, or an older file)
        self.reach = None if reach is None else float(reach)
        #: one threshold for every class at each target FNR ``calibrate fit --fnr`` was asked for, set on the training
        #: genuine comparisons: ``{"target_fnr", "score_threshold", "genuine"}`` each (:meth:`fnr_threshold`)
        self.fnr_thresholds = tuple(dict(e) for e in fnr_thresholds)
        if normalization is not None and tuple(normalization.classes) != tuple(model.classes):
            raise CalibrationError(f"the normaliser's statistics are for {len(normalization.classes)} classes, the model "
                                   f"for {len(model.classes)} (or in another order); fit them together")
        self._extrapolation_said: set[float] = set()
        self._reset()

    def _reset(self) -> None:
        self._index = {c: i for i, c in enumerate(self.model.classes)}
        order = np.argsort(np.array(self.model.classes, dtype=str), kind="stable")
        self._sorted_names = np.array(self.model.classes, dtype=str)[order]
        self._sorted_rows = order.astype(np.int64)
        self._by_target: dict[float, tuple[np.ndarray, np.ndarray]] = {}

    # ---- questions ----------------------------------------------------------------------------

    @property
    def classes(self) -> tuple[str, ...]:
        return self.model.classes

    @property
    def accept_if(self) -> str:
        """``score >= t`` for similarity scores, ``score <= t`` for distances."""
        return ACCEPT_IF[self.kind]

    def __contains__(self, cls: object) -> bool:
        return str(cls) in self._index

    def __len__(self) -> int:
        return len(self.classes)

    def __repr__(self) -> str:
        normalised = "" if self.normalization is None else f", normalised by {self.normalization.plugin!r}"
        return (f"Calibration({self.label!r}, {len(self)} classes, {self.kind} scores, accept if {self.accept_if}, "
                f"transform {self.transform_plugin!r}{normalised})")

    def _target(self, target_fpr: float) -> float:
        try:
            return check_target(target_fpr)
        except (ParameterError, TypeError, ValueError):
            raise CalibrationError(f"target FPR {target_fpr!r} is not in (0, 1); give it as a fraction, "
                                   "e.g. 0.001 for 0.1%") from None

    def _row(self, cls: Any) -> int:
        try:
            return self._index[str(cls)]
        except KeyError:
            raise CalibrationError(f"class {str(cls)!r} is not enrolled in this calibration ({len(self)} classes); "
                                   "check the name, or enroll the class first (Calibration.enroll in Python)") from None

    def within_reach(self, target_fpr: float) -> float:
        """The target, checked: in (0, 1), and for a loaded calibration within its :attr:`reach` (a CalibrationError
        naming the reach and the fix beyond it). Every threshold and decision asks this first; the command line
        asks before any work."""
        e = self._target(target_fpr)
        if self.reach is not None and e > self.reach:
            raise CalibrationError(f"target FPR {e:g} is beyond this saved calibration's reach: it answers target FPRs "
                                   f"up to {self.reach:g} ({REACH_FACTOR:g} times the largest target it was fitted "
                                   f"at, at least {SAVED_REACH:g}; it keeps only the training values those targets "
                                   f"read); fit again with {e:g} among the targets (a recipe's `evaluation: targets`, "
                                   "`calibrate fit --fpr`, `calibrate.fit(targets=...)`)")
        return e

    def _table(self, target_fpr: float, need_scores: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """(distance thresholds, score thresholds) of every class at one target, computed once (for a
        normalised calibration the distance is exp(z), and score thresholds exist only when its normaliser
        reads the enrolled side alone: calibrate.normalisation.cohort.FittedNormalization.score_thresholds)."""
        e = self.within_reach(target_fpr)
        n = self.normalization
        if e not in self._by_target:
            tau = self.model.thresholds([e]).values[:, 0]
            scores = (self.transform.score_thresholds(tau, self.kind) if n is None
                      else None if n.reads_probe else n.score_thresholds(tau, self.transform, self.kind))
            self._by_target[e] = (tau, scores)
        tau, scores = self._by_target[e]
        if need_scores and n is not None and n.reads_probe:
            raise CalibrationError(f"this calibration normalises scores with {n.plugin}, which reads the probe's "
                                   "cohort scores: a decision depends on them, so no single score threshold exists; "
                                   "use normalised_threshold() (z units), or decide with accept(..., "
                                   "probe_cohort_scores=...)")
        if scores is None and need_scores:
            raise CalibrationError(f"transform {self.transform_plugin!r} has no inverse, so thresholds exist in "
                                   "distance units only: use "
                                   + ("distance_threshold()" if n is None else "normalised_threshold() (z units)"))
        return tau, scores

    def distance_threshold(self, cls: Any, target_fpr: float) -> float:
        """The threshold on the transformed distance (accept when distance <= it)."""
        return float(self._table(target_fpr, need_scores=False)[0][self._row(cls)])

    def normalised_threshold(self, cls: Any, target_fpr: float) -> float:
        """A normalised calibration's threshold on the normalised score z (accept when z <= it): the log of
        its distance threshold, since the estimators fit exp(z)."""
        if self.normalization is None:
            raise CalibrationError("this calibration does not normalise scores; use threshold() (score units)")
        from calibrate.normalisation.cohort import to_z

        return float(to_z(self.distance_threshold(cls, target_fpr)))

    def fnr_threshold(self, target_fnr: float) -> dict:
        """The one threshold for every class saved at ``target_fnr`` (``calibrate fit --fnr``: the strictest score
        threshold rejecting at most that share of the training genuine comparisons, bob.measure's ``frr_threshold``):
        ``{"target_fnr", "score_threshold", "genuine"}``. A CalibrationError names the targets it holds otherwise."""
        for entry in self.fnr_thresholds:
            if entry["target_fnr"] == target_fnr:
                return dict(entry)
        held = ", ".join(f"{e['target_fnr']:g}" for e in self.fnr_thresholds) or "none"
        raise CalibrationError(f"the calibration holds no threshold at FNR {target_fnr:g} (it holds {held}); fit it with "
                               f"`calibrate fit ... --fnr {target_fnr:g}`, which sets one threshold for every class on "
                               "the training genuine comparisons")

    def training_support(self, target_fpr: float) -> float | None:
        """``target x N``: how many of the N training impostor distances an on-target threshold has below
        it (None when N is not known). Below 1 the threshold extrapolates beyond the training data."""
        e = self._target(target_fpr)
        return None if self.training_impostors is None else e * self.training_impostors

    def _say_extrapolation(self, target_fpr: float) -> None:
        support = self.training_support(target_fpr)
        if support is not None and support < 1 and target_fpr not in self._extrapolation_said:
            self._extrapolation_said.add(target_fpr)
            warnings.warn(extrapolation_message(target_fpr, self.training_impostors), stacklevel=3)

    def threshold(self, cls: Any, target_fpr: float) -> float:
        """The threshold in the data's own score units: accept when ``score >= t`` for similarity
        scores, ``score <= t`` for distances (see :attr:`accept_if`). Warns (once per target) when the
        target is below 1/N of the training impostor distances: the answer extrapolates.

        A normalised calibration has one when its normaliser reads the enrolled side only (``znorm``): z
        then depends on the score and the class's saved statistics alone, so the class's threshold on z
        is one score threshold, deciding as ``accept`` does. One reading the probe's side refuses."""
        row = self._row(cls)
        value = float(self._table(target_fpr)[1][row])
        self._say_extrapolation(target_fpr)
        return value

    def thresholds(self, target_fpr: float) -> dict[str, float]:
        """Every class's score threshold at one target."""
        out = dict(zip(self.classes, self._table(target_fpr)[1].tolist()))
        self._say_extrapolation(target_fpr)
        return out

    def accept(self, classes: Any, scores: Any, target_fpr: float, probe_cohort_scores: Any = None) -> np.ndarray | bool:
        """Accept or reject each claim: ``classes`` (one class or an array, the claimed identity of each
        attempt) and ``scores`` (one score or an array of the same length, in score units). Returns a
        boolean array (a bool for scalar input). Unknown classes and non-finite scores are errors.

        A normalised calibration (:attr:`normalization`) whose normaliser reads the probe's side needs
        ``probe_cohort_scores``: per attempt, its probe's scores (score units) against the cohort models,
        without the claimed class and the probe's own (a 2-D array, or one sequence per attempt; for a
        single attempt, one sequence); or a :class:`calibrate.normalisation.cohort.ProbeCohorts`, each probe's scores once
        with the models' names (the claimed class's model is left out by name), which holds probes x models
        in memory rather than attempts x models and is decided a block of attempts at a time. The decision
        is then exactly the run's: the same normalisation, with the class statistics saved by the run."""
        scalar = np.ndim(scores) == 0 and np.ndim(classes) == 0
        try:
            s = np.atleast_1d(np.asarray(scores, dtype=np.float64))
        except (TypeError, ValueError):
            raise CalibrationError("scores must be numbers (one score per claim)") from None
        coded = isinstance(classes, CodedLabels)  # the score-list commands' codes: looked up once per distinct class
        c = classes if coded else np.atleast_1d(np.asarray(classes))
        if s.ndim != 1 or c.ndim != 1:
            raise CalibrationError(f"classes and scores must be one-dimensional, got shapes {c.shape} and {s.shape}")
        if not coded and np.ndim(classes) == 0 and s.size > 1:  # one class named for every score (a list must match them)
            c = np.broadcast_to(c, s.shape)
        if c.size != s.size:
            raise CalibrationError(f"{c.size} classes but {s.size} scores; give one claimed class per score (or a single "
                                   "class, not in a list, for all of them)")
        if not np.all(np.isfinite(s)):
            bad = int(np.flatnonzero(~np.isfinite(s))[0])
            raise CalibrationError(f"score number {bad + 1} is {float(s[bad])}; every score must be a finite number")
        if self.normalization is None and probe_cohort_scores is not None:
            raise CalibrationError("this calibration does not normalise scores; leave out probe_cohort_scores")
        tau, score_t = self._table(target_fpr, need_scores=self.normalization is None)
        rows = self._rows(c)
        if self.normalization is not None:
            from calibrate.normalisation.decisions import normalised_distances

            if scalar and probe_cohort_scores is not None and np.ndim(probe_cohort_scores) == 1:
                probe_cohort_scores = [probe_cohort_scores]  # one attempt: its one row
            out = normalised_distances(self.normalization, self.transform, self.kind, s, rows,
                                       probe_cohort_scores, self.classes) <= tau[rows]
        else:
            t = score_t[rows]
            out = s >= t if self.kind == "similarity" else s <= t
        self._say_extrapolation(target_fpr)
        return bool(out[0]) if scalar else out

    def _rows(self, c: Any) -> np.ndarray:
        """The row (position in :attr:`classes`) of each class of a 1-D array or CodedLabels, by binary search over
        the sorted names (no Python loop over attempts; CodedLabels: once per distinct name); an unknown class
        raises, naming it."""
        coded = isinstance(c, CodedLabels)
        names = c.names if coded else c.astype(str)
        pos = np.minimum(np.searchsorted(self._sorted_names, names), max(len(self) - 1, 0))
        known = self._sorted_names[pos] == names if len(self) else np.zeros(names.shape, bool)
        if coded:
            pos, known = pos[c.codes], known[c.codes]
        if not known.all():
            self._row(c[np.flatnonzero(~known)[0]])  # raises, naming the class
        return self._sorted_rows[pos]

    def codes(self, classes: Any) -> np.ndarray:
        """Each class's code (an int64 array): its position in :attr:`classes`, the code :meth:`decider`'s
        decisions take. An embedding system resolves its gallery's names once and decides on codes after
        (docs/embedding.md, "Decisions on class codes"). An unknown class is a CalibrationError naming it."""
        c = classes if isinstance(classes, CodedLabels) else np.atleast_1d(np.asarray(classes))
        if c.ndim != 1:
            raise CalibrationError(f"classes must be one-dimensional, got shape {c.shape}")
        return self._rows(c) if c.size else np.zeros(0, np.int64)

    def decider(self, target_fpr: float) -> Decider:
        """Decisions at one target on class codes (calibrate.saved.decisions.Decider): ``decider(e)(codes, scores)``
        decides as ``accept(classes, scores, e)`` does, bit for bit (the same score thresholds, the same
        comparison), at memory speed. Warns as ``threshold`` does when the target extrapolates. A normalised
        calibration has one when its normaliser reads the enrolled side only (``znorm``: a score threshold per
        class, as ``threshold`` gives); one reading the probe's cohort scores refuses (decide with ``accept``)."""
        e, n = self.within_reach(target_fpr), self.normalization
        if n is not None and n.reads_probe:
            raise CalibrationError(f"this calibration normalises scores with {n.plugin}, which reads the probe's "
                                   "cohort scores: a decision depends on them, so no threshold per class code exists; "
                                   "decide with accept(classes, scores, target_fpr, probe_cohort_scores=...)")
        decider = Decider(self.classes, self._table(e)[1], self.kind, e, self.label)
        self._say_extrapolation(target_fpr)
        return decider

    @property
    def groups(self) -> dict[str, str] | None:
        """Each class's group when the calibration was fitted group by group against same-group impostors
        (``same_group=True``, a run's ``impostors: same-group``; classes without a group: ``"unlabelled"``), else
        None."""
        return self.model.groups() if isinstance(self.model, GroupedModel) else None

    @property
    def confidence(self) -> float | None:
        """The confidence its thresholds were chosen with (``confidence:``), or None."""
        return self.model.confidence if isinstance(self.model, ConfidentModel) else None

    def predicted_fpr(self, target_fpr: float, cls: Any = None, attempts: int | None = None,
                      unit_size: float | None = None) -> tuple[float, float]:
        """The interval (at the saved level, 90% by default) for the FPR this calibration's thresholds will
        achieve on new impostors, predicted from the training data alone (calibrate.predicted.interval): over the
        whole gallery, or for one class ``cls``; with ``attempts``, for the FPR *measured* on that many
        attempts (adds the counting noise of a finite evaluation: overdispersed where the training false accepts
        clustered by probe, ``unit_size`` being the evaluation's sum m_u^2 / sum m_u over its probe identities'
        attempts m_u, by default the training's). Known at the calibration's targets."""
        p = self.prediction
        if not p:
            raise CalibrationError("this calibration holds no predicted FPR interval; fit it with predict=True "
                                   "(a run's calibration.json has one unless the recipe says `prediction: false`)")
        e = self._target(target_fpr)
        matches = [j for j, t in enumerate(p["targets"]) if abs(t - e) <= 1e-12 * max(t, e)]
        if not matches:
            raise CalibrationError(f"the FPR interval was predicted at targets {', '.join(f'{t:g}' for t in p['targets'])} "
                                   f"only, not at {e:g}; fit again with that target among the targets")
        j = matches[0]
        status = p.get("prediction_status")
        if p["predicted_fpr_low"][j] is None:
            from calibrate.predicted.interval import STATUS

            raise CalibrationError(f"no predicted FPR interval at target {e:g}: "
                                   + STATUS.get(status[j] if status else "", "it could not be predicted")
                                   .removeprefix("no prediction: "))
        if cls is not None:
            per = p.get("per_class")
            name = str(cls)
            if not per or name not in per["classes"]:
                self._row(cls)  # an unknown class is named as such
                why = ("per-class intervals are not kept for thresholds chosen with a confidence" if self.confidence
                       else "it was enrolled after the fit" if per
                       else "the gallery was too large to keep per-class intervals")
                raise CalibrationError(f"class {name!r} has no predicted interval of its own ({why}); ask for the "
                                       "gallery's interval (no cls), or refit")
            i = per["classes"].index(name)
            low, high = (float(as_array(per[end], len(p["targets"]))[i, j]) for end in ("low", "high"))
            if math.isnan(low):  # the class's replicates gave no interval there
                raise CalibrationError(f"class {name!r} has no predicted interval of its own at target {e:g}; ask for "
                                       "the gallery's interval (no cls)")
            return low, high
        if attempts is not None:
            if isinstance(attempts, bool) or not isinstance(attempts, (int, np.integer)) or attempts < 1:
                raise CalibrationError(f"attempts must be a positive whole number of impostor attempts, got {attempts!r}")
            c = p.get("clustering")
            size = None if not c else float(c["unit_size"] if unit_size is None else unit_size)
            low, high = measured_interval(as_array(p["replicates"], len(p["targets"])), int(attempts), float(p["level"]),
                                          c and c["cv2"], size)
            if not (np.isfinite(low[j]) and np.isfinite(high[j])):
                raise CalibrationError(f"no predicted interval at target {e:g} for {attempts} attempts: none of the "
                                       "simulated galleries gave an FPR there")
            return float(low[j]), float(high[j])
        return float(p["predicted_fpr_low"][j]), float(p["predicted_fpr_high"][j])

    # ---- one class more -------------------------------------------------------------------------

    def enroll(self, cls: Any, impostor_scores: Any, cohort_scores: Any = None,
               impostor_cohort_scores: Any = None, *, group: Any = None) -> "Calibration":
        """Add class ``cls`` (or replace it) from its impostor scores (score units), without refitting
        the others; the transform stays as fitted. What else stays fixed depends on the estimator
        (its ``enroll_mode``: per-class estimators give exactly a full fit's thresholds, pooled ones
        keep their pooled quantities; others refuse). Returns the calibration itself.

        A calibration fitted group by group against same-group impostors (:attr:`groups` is not None) needs the
        class's ``group`` (one of its groups; ``"unlabelled"`` where it has that part), and ``impostor_scores``
        against probes of that group only (of any group for ``"unlabelled"``): the class joins that group's part.
        Any other calibration refuses ``group``.

        A normalised calibration also computes the class's cohort statistics: from ``cohort_scores``
        (the class against the enrolled side's cohort), or, when the run's enrolled cohort was the
        training impostors and none are given, from ``impostor_scores`` themselves (each impostor score
        normalised without itself, as in the run). A normaliser that reads the probe side needs
        ``impostor_cohort_scores``: per impostor score, its probe's scores against the cohort models
        (without this class and the probe's own), as ``accept``'s ``probe_cohort_scores``."""
        refuse_bad_labels([str(cls)], "Calibration.enroll")  # what is enrolled must load again (issue 19: S1)
        grouped = isinstance(self.model, GroupedModel)
        if grouped:
            check_group(self.model, str(cls), group)  # before any work
        elif group is not None:
            raise ParameterError("group=: this calibration was not fitted group by group (same_group=True): a class "
                                 "enrolled into it is located as a class without a group (auto's matched structures "
                                 "shift each group as fitted; refit to give a new class its group's); leave out group=")
        refused = None if grouped else getattr(self.model, "enroll_refused", None)  # said before any work
        if refused:
            raise ParameterError(refused)
        scores = strict_floats(impostor_scores, f"class {cls!r}: impostor scores")
        if scores.ndim != 1 or scores.size == 0:
            raise DataError(f"class {cls!r}: impostor scores must be a non-empty 1-D array, got shape {scores.shape}")
        if not np.all(np.isfinite(scores)):
            bad = int(np.flatnonzero(~np.isfinite(scores))[0])
            raise DataError(f"class {cls!r}: impostor score number {bad + 1} is {float(scores[bad])}; "
                            "every score must be a finite number")
        outside = self.transform.out_of_range(scores, self.kind)
        if outside:
            warnings.warn(f"class {cls!r}: {outside} of {scores.size} impostor scores lie beyond what the fitted "
                          f"transform {self.transform_plugin!r} was fitted on, so it maps them to distance 0 and this "
                          "class's threshold accepts more than a full fit's would; fit with an explicit bound (e.g. "
                          "transform={'plugin': 'similarity-to-distance', 'upper': <largest possible score>}) or refit",
                          stacklevel=2)
        distances, normalization = self._enrolled_distances(str(cls), scores, cohort_scores, impostor_cohort_scores)
        if self.training_scores is not None:  # saved with the file: what its loader holds every distance to
            low, high, genuine = self.training_scores
            self.training_scores = (min(low, float(scores.min())), max(high, float(scores.max())), genuine)
        if grouped:
            self.model = enroll_into(self.model, self.estimator, str(cls), group, distances)
        elif isinstance(self.model, ConfidentModel):  # the confidence bound is pooled: it stays as fitted
            inner = self.estimator.enroll(self.model.inner, str(cls), distances)
            self.model = ConfidentModel(inner, self.model.confidence, self.model.grid, self.model.upper,
                                        self.model.independent, self.model.dispersion)
        else:
            self.model = self.estimator.enroll(self.model, str(cls), distances)
        if normalization is not None:  # in the model's order of classes (a class added goes last in both)
            order = [normalization.classes.index(c) for c in self.model.classes]
            normalization.classes = tuple(self.model.classes)
            normalization.statistics = {k: v[order] for k, v in normalization.statistics.items()}
            self.normalization = normalization
        self._reset()
        return self

    def _enrolled_distances(self, cls: str, scores: np.ndarray, cohort_scores: Any,
                            impostor_cohort_scores: Any) -> tuple[np.ndarray, Any]:
        """(the distances the estimator enrolls the class from, the normalisation with its statistics or None)."""
        if self.normalization is not None:
            from calibrate.normalisation.decisions import enrolled_inputs

            distances, stats = enrolled_inputs(self.normalization, self.transform, self.kind, cls, scores, cohort_scores,
                                               impostor_cohort_scores)
            return distances, self.normalization.with_class(cls, stats)
        if cohort_scores is not None or impostor_cohort_scores is not None:
            raise CalibrationError("this calibration does not normalise scores; leave out the cohort scores")
        raw = DistanceMatrix(scores[:, None], np.array([_OTHER] * scores.size), np.array([cls]), kind=self.kind,
                             source=f"impostor scores of class {cls!r}")
        d = self.transform.apply(raw)
        d.check_distances(f"impostor distances of class {cls!r}")
        return d.values[:, 0], None

    # ---- the artifact -----------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        return artifact(kind=self.kind, transform_plugin=self.transform_plugin, transform_params=self.transform_params,
                        transform_state=self.transform.fitted_state(), targets=self.targets,
                        fingerprint=self.fingerprint, versions=self.versions, training_impostors=self.training_impostors,
                        training_scores=self.training_scores, fnr_thresholds=self.fnr_thresholds,
                        normalizer=None if self.normalization is None else self.normalization.to_state(),
                        estimators={self.label: (self.plugin, self.params,
                                                 *saved_entries(self.model, self.prediction, saved_reach(self.targets),
                                                                self.reach))})

    def save(self, path: str | Path) -> Path:
        """Write the calibration as JSON: a regular file is written beside and renamed (never half-written),
        a symbolic link's file likewise (the link stays), a device or FIFO written through in place, ``-``
        to standard output (calibrate.files.user_output)."""
        from calibrate.files.user_output import write_user_file

        try:
            write_user_file(path, dumps_artifact(self.to_dict()).encode("utf-8"))
        except CalibrateError as exc:
            raise CalibrationError(f"cannot save the calibration: {exc}") from None
        return Path(path)


def extrapolation_message(target_fpr: float, n: int) -> str:
    """Why a threshold at ``target_fpr`` is an extrapolation (fewer than one training distance below it)."""
    return (f"target FPR {target_fpr:g} is below 1/N of the {n:,} training impostor distances: about "
            f"{target_fpr * n:.3g} of them lie below an on-target threshold, so the threshold extrapolates beyond "
            f"the data (its achieved FPR can stray far from the target); fit with more impostor comparisons, or "
            f"ask at {1 / n:.2g} or above")


_OTHER = "\0impostor"  # the probe class of impostor scores given without their own classes
