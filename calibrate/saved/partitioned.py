"""A partitioned calibration (a sharded run's ``calibration.json`` and its parts), opened lazily.

The head names the estimators, the transform and the number of parts; each part
``calibration-partNNNNN.json`` is an ordinary saved calibration (format 2) of one shard's classes,
``classes-partNNNNN.json`` lists them. :func:`load_partitioned` reads the head only. The first
question about a class reads the class lists into a dict (class -> part: about 1 s and 100 MB per
million classes); a part's models are read when one of its classes is asked for and kept in a
cache of ``cache_parts`` parts. So ``threshold(cls, e)`` costs a dict lookup and, for a part in the
cache, an array lookup; thresholds for a part at a target are computed once per part.
"""

from __future__ import annotations

import bisect
import json
import os
from collections import OrderedDict
from pathlib import Path
from typing import Any

import numpy as np

from calibrate.saved.json_format import ACCEPT_IF
from calibrate.saved.reading import (check_common, check_labels, check_model, check_transform_kind, check_written,
                                     choose_estimator, load_json, lookup_component, read_artifact, rebuilt, saved_span,
                                     training_distance_span)
from calibrate.contract.statecheck import training_distances
from calibrate.saved.calibration import Calibration
from calibrate.saved.decisions import Decider
from calibrate.saved.grouped import model_from_state, with_root
from calibrate.errors import CalibrationError
from calibrate.contract.sharded import HEAD_FORMAT, HEAD_VERSION, PART, fitter_for
from calibrate.files.manifest import RunFolder
from calibrate.files.untrusted import open_regular, regular_file

#: parts whose models are kept in memory at once
CACHE_PARTS = 16


def read_head(path: Path) -> dict[str, Any] | None:
    """The head of a partitioned calibration, or None when ``path`` is something else."""
    try:
        with open_regular(path, "", "", error=ValueError) as fh:  # a head is a small regular file
            if os.fstat(fh.fileno()).st_size > 1 << 20:
                return None
            doc = json.loads(fh.read().decode("utf-8"))
    except (OSError, ValueError, UnicodeDecodeError, RecursionError):
        return None
    return doc if isinstance(doc, dict) and doc.get("format") == HEAD_FORMAT else None


#: the most parts a head may name (a million classes in shards of ten)
MAX_PARTS = 100_000


def check_head(head: dict, path: Path) -> None:
    """A partitioned head's structure, whole, before it is used; a failure names the field."""
    def bad(where: str, what: str) -> CalibrationError:
        return CalibrationError(f"{path}: {where} {what}; the file is damaged or not calibrate's: run the recipe again")

    version = head.get("version")
    if isinstance(version, bool) or version != HEAD_VERSION:
        raise CalibrationError(f"{path}: partitioned calibration version {repr(version)[:40]} is not the one this "
                               f"calibrate reads ({HEAD_VERSION}); run the recipe again with this calibrate")
    for key, low, high in (("parts", 1, MAX_PARTS), ("classes", 0, None)):
        value = head.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or value < low or (high is not None and value > high):
            raise bad(key, f"must be a whole number {'from ' + str(low) + (' to ' + str(high) if high else '')}, "
                           f"got {str(value)[:40]!r}")
    check_common(head, bad)
    estimators = head.get("estimators")
    if not isinstance(estimators, dict) or not estimators:
        raise bad("estimators", "must name at least one estimator")
    for label, entry in estimators.items():
        if not isinstance(entry, dict) or not isinstance(entry.get("plugin"), str) \
                or not isinstance(entry.get("params", {}), dict):
            raise bad(f"estimators[{label[:60]!r}]", "must be a mapping with a plugin name and params")
    transform = head.get("transform")
    if not isinstance(transform, dict) or not isinstance(transform.get("plugin"), str) \
            or not isinstance(transform.get("params", {}), dict) or not isinstance(transform.get("state", {}), dict):
        raise bad("transform", "must be a mapping with a plugin name, params and state")


class PartitionedCalibration:
    """One estimator's thresholds for the classes of every part, loaded part by part when asked.

    Answers as :class:`~calibrate.saved.calibration.Calibration` does (``threshold``, ``distance_threshold``,
    ``accept``, ``in``, ``len``, ``accept_if``, ``kind``, ``label``)."""

    def __init__(self, folder: Path, head: dict[str, Any], label: str, entry: dict[str, Any], extra_plugins: tuple,
                 cache_parts: int = CACHE_PARTS, run: RunFolder | None = None):
        from calibrate.contract.manager import build_registry

        check_head(head, folder / "calibration.json")
        self.folder, self.head, self.label = folder, head, label
        #: sharded runs make no predicted intervals (calibrate.predicted.interval); the same interface as Calibration
        self.prediction = None
        self.confidence = None
        training = head.get("training")
        n = training.get("impostors") if isinstance(training, dict) else None
        self.training_impostors = n if isinstance(n, int) and not isinstance(n, bool) and n > 0 else None
        #: (lowest, highest) training score, as Calibration.training_scores (checked with the head: check_common)
        self.training_scores = saved_span(training)
        self.kind = head.get("kind", "distance")
        if self.kind not in ACCEPT_IF:
            raise CalibrationError(f"{folder}: kind {self.kind!r} is not similarity or distance")
        self.plugin, self.params = entry.get("plugin"), entry.get("params", {})
        self.targets = tuple(head.get("targets", ()))
        self._registry = build_registry(extra_plugins)
        head_path = folder / "calibration.json"
        check_transform_kind(self.kind, lookup_component(self._registry, "transforms", head["transform"]["plugin"],
                                                         head_path), head_path)
        info = lookup_component(self._registry, "estimators", self.plugin, head_path)
        self._model_class = rebuilt(head_path, f"estimator {label!r}",
                                    lambda: fitter_for(info.factory(**self.params), label).model_class,
                                    "run the recipe again")
        #: every file read from the folder is checked against its manifest, last (a damaged field is named as
        #: such): the head now, each part and class list as it is read
        self._run = RunFolder(folder) if run is None else run
        self._run.check("calibration.json")
        self._parts: OrderedDict[int, Calibration] = OrderedDict()
        self._cache = cache_parts
        self._index: dict[str, int] | None = None
        self._sizes: list[int] = []
        self._starts: list[int] = [0]

    @property
    def accept_if(self) -> str:
        return ACCEPT_IF[self.kind]

    def __len__(self) -> int:
        return int(self.head["classes"])

    def __repr__(self) -> str:
        return (f"PartitionedCalibration({self.label!r}, {len(self)} classes in {self.head['parts']} parts, "
                f"{self.kind} scores, accept if {self.accept_if})")

    def _class_index(self) -> dict[str, int]:
        """class -> code (its position in the parts' class lists, in order), from every part's class list (read
        once); ``self._sizes``: classes per part, ``self._starts``: each part's first code."""
        if self._index is None:
            index: dict[str, int] = {}
            sizes = []
            for k in range(int(self.head["parts"])):
                path = self.folder / f"classes-{PART.format(k)}.json"
                regular_file(path, f"the class list of part {k}", "the result is incomplete: run the recipe again",
                             error=CalibrationError)
                names, data = load_json(path, f"class list of part {k}", raw=True)
                check_labels(names, path, "the class list")
                self._run.check(path.name, data)  # the bytes just read: not read a second time
                before = len(index)
                index.update(zip(names, range(before, before + len(names))))
                if len(index) != before + len(names):
                    raise CalibrationError(f"{path}: a class of part {k} is also in an earlier part; the result is "
                                           "damaged: run the recipe again")
                sizes.append(len(names))
            self._index, self._sizes = index, sizes
            self._starts = np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)]).tolist()
        return self._index

    def _code(self, cls: Any) -> int:
        try:
            return self._class_index()[str(cls)]
        except KeyError:
            raise CalibrationError(f"class {str(cls)!r} is not enrolled in this calibration ({len(self)} classes); "
                                   "check the name") from None

    def _part_of(self, cls: Any) -> int:
        return self._part_of_code(self._code(cls))

    def _part_of_code(self, code: int) -> int:
        return bisect.bisect_right(self._starts, code) - 1

    def codes(self, classes: Any) -> np.ndarray:
        """Each class's code (an int64 array): its position in the parts' class lists taken in order
        (``classes-part00000.json`` first), the code :meth:`decider`'s decisions take. Reads the class lists on
        the first question (about 1 s per million classes); a dict lookup per name after."""
        from calibrate.contract.types import CodedLabels

        coded = isinstance(classes, CodedLabels)
        names = classes.names if coded else np.atleast_1d(np.asarray(classes))
        if names.ndim != 1:
            raise CalibrationError(f"classes must be one-dimensional, got shape {names.shape}")
        index = self._class_index()
        out = np.fromiter((index.get(x, -1) for x in names.astype(str).tolist()), np.int64, count=names.size)
        if (out < 0).any():
            self._code(names[np.flatnonzero(out < 0)[0]])  # raises, naming the class
        return out[classes.codes] if coded else out

    def decider(self, target_fpr: float) -> Decider:
        """Decisions at one target on class codes (:meth:`codes`), as ``Calibration.decider``'s: the thresholds of
        every part, read once (every part is read: for a million classes, minutes); decides as :meth:`accept`."""
        index = self._class_index()
        thresholds = np.empty(len(index), dtype=np.float64)
        for k in range(int(self.head["parts"])):
            part = self.part(k)
            rows = np.fromiter(map(index.__getitem__, part.classes), np.int64, count=len(part))
            thresholds[rows] = part.decider(target_fpr).thresholds
        return Decider(tuple(index), thresholds, self.kind, target_fpr, self.label)

    def __contains__(self, cls: object) -> bool:
        try:
            self._part_of(cls)
        except CalibrationError:
            return False
        return True

    def part(self, k: int) -> Calibration:
        """The calibration of part ``k``'s classes (read once, then cached)."""
        if k in self._parts:
            self._parts.move_to_end(k)
            return self._parts[k]
        path = self.folder / f"calibration-{PART.format(k)}.json"
        doc, data = read_artifact(path)
        label, entry = choose_estimator(doc, path, self.label)
        self._check_part(doc, path)
        tr = doc["transform"]
        tr_info = lookup_component(self._registry, "transforms", tr.get("plugin"), path)
        est_info = lookup_component(self._registry, "estimators", entry.get("plugin"), path)
        what, fix = f"estimator {label!r}", "run the recipe again"
        transform = rebuilt(path, f"transform {tr_info.name!r}",
                            lambda: tr_info.factory(**tr.get("params", {})).set_fitted_state(tr.get("state", {})), fix)
        with training_distances(training_distance_span(transform, self.kind, self.head.get("training"))):
            model = rebuilt(path, what, lambda: model_from_state(self._model_class,
                                                                 with_root(entry["state"], str(self.folder))), fix)
        est = rebuilt(path, what, lambda: est_info.factory(**entry.get("params", {})), fix)
        self._check_classes(model.classes, path, k)
        check_model(model, transform, self.kind, self.targets or (0.005, 0.001), path, label)
        check_written(doc, data, path, self._run)  # every field is valid: now, is it what the run wrote?
        self._run.check_state_files(entry["state"])  # and the files its model read (e.g. a pooled sample)
        cal = Calibration(estimator=est, plugin=est_info.name, label=label, params=entry.get("params", {}), model=model,
                          transform=transform, transform_plugin=tr_info.name, transform_params=tr.get("params", {}),
                          kind=self.kind, targets=self.targets)
        self._parts[k] = cal
        while len(self._parts) > self._cache:
            self._parts.popitem(last=False)
        return cal

    def _check_part(self, doc: dict, path: Path) -> None:
        """A part must agree with the head: the same kind and transform (a part is one shard of one run)."""
        def bad(what: str) -> CalibrationError:
            return CalibrationError(f"{path}: {what}; the result is damaged: run the recipe again")

        if doc.get("version", 0) < 2 or "transform" not in doc:
            raise bad("the part holds no transform (format 2's 'transform' entry is missing)")
        if doc.get("kind", "distance") != self.kind:
            raise bad(f"the part's kind {doc.get('kind', 'distance')!r} contradicts the head's {self.kind!r}")
        head_tr, tr = self.head["transform"], doc["transform"]
        if any(tr.get(key, {} if key != "plugin" else None) != head_tr.get(key, {} if key != "plugin" else None)
               for key in ("plugin", "params", "state")):
            raise bad("the part's transform contradicts the head's (calibration.json)")

    def _check_classes(self, classes: tuple[str, ...], path: Path, k: int) -> None:
        """A part's model must hold exactly the classes its class list (classes-partNNNNN.json) names."""
        index, start, end = self._class_index(), int(self._starts[k]), int(self._starts[k + 1])
        if len(classes) != self._sizes[k] or any(not start <= index.get(c, -1) < end for c in classes):
            raise CalibrationError(f"{path}: the part's classes contradict classes-{PART.format(k)}.json; the result is "
                                   "damaged: run the recipe again")

    def training_support(self, target_fpr: float) -> float | None:
        """``target x N`` training impostor distances below an on-target threshold (None when not known)."""
        return None if self.training_impostors is None else float(target_fpr) * self.training_impostors

    def predicted_fpr(self, target_fpr: float, cls: Any = None, attempts: int | None = None,
                      unit_size: float | None = None) -> tuple[float, float]:
        """Sharded runs make no predicted FPR intervals: always a CalibrationError saying so."""
        raise CalibrationError("a sharded run's calibration holds no predicted FPR interval (sharded runs do not "
                               "simulate galleries); calibrate a sample of the classes in one piece to see one")

    def threshold(self, cls: Any, target_fpr: float) -> float:
        """The threshold in the data's own score units (accept if :attr:`accept_if`)."""
        return self.part(self._part_of(cls)).threshold(cls, target_fpr)

    def distance_threshold(self, cls: Any, target_fpr: float) -> float:
        return self.part(self._part_of(cls)).distance_threshold(cls, target_fpr)

    def accept(self, classes: Any, scores: Any, target_fpr: float) -> np.ndarray | bool:
        """Accept or reject each claim (as Calibration.accept), answered part by part."""
        scalar = np.ndim(scores) == 0 and np.ndim(classes) == 0
        s = np.atleast_1d(np.asarray(scores, dtype=np.float64))
        c = np.atleast_1d(np.asarray(classes)).astype(str)
        if np.ndim(classes) == 0 and s.size > 1:  # one class named for every score (a list must match them)
            c = np.broadcast_to(c, s.shape)
        if c.size != s.size:
            raise CalibrationError(f"{c.size} classes but {s.size} scores; give one claimed class per score (or a single "
                                   "class, not in a list, for all of them)")
        codes = self.codes(c)  # reads the class lists first
        parts = np.searchsorted(np.array(self._starts), codes, side="right") - 1
        out = np.zeros(s.size, bool)
        for k in np.unique(parts):
            at = np.flatnonzero(parts == k)
            out[at] = self.part(int(k)).accept(c[at], s[at], target_fpr)
        return bool(out[0]) if scalar else out

    def thresholds(self, target_fpr: float) -> dict[str, float]:
        """Every class's score threshold at one target (reads every part: for a million classes, minutes)."""
        out: dict[str, float] = {}
        for k in range(int(self.head["parts"])):
            out.update(self.part(k).thresholds(target_fpr))
        return out


def load_partitioned(path: str | Path, estimator: str | None = None, *, extra_plugins: tuple = (),
                     cache_parts: int = CACHE_PARTS, run: RunFolder | None = None) -> PartitionedCalibration:
    """A sharded run's calibration (its folder, or the ``calibration.json`` head in it); every file read from
    the folder must be as its manifest records (``run``: that check, when the caller already made it)."""
    path = Path(path)
    head_path = path / "calibration.json" if path.is_dir() else path
    head = read_head(head_path)
    if head is None:
        raise CalibrationError(f"{head_path}: not the head of a partitioned calibration (format {HEAD_FORMAT!r})")
    check_head(head, head_path)  # before anything in it is used (choose_estimator reads its estimators)
    label, entry = choose_estimator(head, head_path, estimator)
    return PartitionedCalibration(head_path.parent, head, label, entry, extra_plugins, cache_parts, run)
