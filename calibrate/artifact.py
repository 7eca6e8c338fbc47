"""The saved calibration's format (JSON, never pickle): writing it, reading it back, and what both need.

``Calibration.save`` (calibrate.calibration), a run's ``calibration.json`` (calibrate.outputs), a
sharded run's parts (calibrate.partitioned_run) and the loaders (calibrate.api, calibrate.partitioned_calibration)
all go through here; it sits below all of them, so none has to import another to share the format.
"""

from __future__ import annotations

import hashlib
import json
import platform
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from .base import FittedModel, Transform, check_target
from .errors import CalibrateError, CalibrationError
from .types import ImpostorDistances

FORMAT = "calibrate-calibration"
#: 1: models only (distance units); 2: with the fitted transform, score direction, targets, versions, fingerprint
FORMAT_VERSION = 2
ACCEPT_IF = {"similarity": "score >= t", "distance": "score <= t"}


def fingerprint(impostors: ImpostorDistances) -> str:
    """SHA-256 of the training impostor distances per class (the order of classes, and of distances
    within a class, ignored)."""
    h = hashlib.sha256()
    for i, cls in sorted(enumerate(impostors.classes), key=lambda item: item[1]):
        h.update(cls.encode("utf-8") + b"\0")
        h.update(np.ascontiguousarray(np.sort(impostors.of(i)), dtype="<f8").tobytes())
    return "sha256:" + h.hexdigest()


def package_versions(specs: Sequence[Any] = ()) -> dict[str, str | None]:
    """Python, the platform, calibrate, numpy, scipy, and the distribution of every chosen component
    (``specs``: anything with ``.info.distribution`` and ``.info.version``, e.g. a recipe's specs)."""
    out: dict[str, str | None] = {"python": platform.python_version(), "platform": platform.platform()}
    for dist in ("calibrate-thresholds", "numpy", "scipy"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = None
    for spec in specs:
        if spec is not None and spec.info.distribution:
            out[spec.info.distribution] = spec.info.version
    return out


def artifact(*, kind: str, transform_plugin: str, transform_params: dict, transform_state: dict,
             targets: Sequence[float], fingerprint: str, versions: dict,
             estimators: dict[str, tuple]) -> dict[str, Any]:
    """The saved calibration (format 2), for ``Calibration.save`` and a run's calibration.json alike;
    ``estimators``: label -> (plugin, params, model state) or (plugin, params, model state, extra
    entries), the extra entries being ``prediction`` and ``confidence`` (:func:`calibrate.confidence.saved_entries`)."""
    def plain(value: Any) -> Any:
        return json.loads(json.dumps(value, default=str))

    return {"format": FORMAT, "version": FORMAT_VERSION, "kind": kind, "accept_if": ACCEPT_IF[kind],
            "transform": {"plugin": transform_plugin, "params": plain(transform_params), "state": transform_state},
            "targets": list(targets), "fingerprint": fingerprint, "versions": versions,
            "estimators": {label: {"plugin": entry[0], "params": plain(entry[1]), "state": entry[2],
                                   **(entry[3] if len(entry) > 3 else {})}
                           for label, entry in estimators.items()}}


def dumps_artifact(doc: dict[str, Any]) -> str:
    """Compact JSON: the C encoder (a model's state can hold millions of values; indent is pure Python)."""
    return json.dumps(doc, separators=(",", ":")) + "\n"


def read_artifact(path: str | Path) -> dict[str, Any]:
    """A saved calibration's JSON, checked for its format and version."""
    path = Path(path)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CalibrationError(f"calibration file {str(path)!r} does not exist; run a recipe or Calibration.save first") from None
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        raise CalibrationError(f"{path}: not a readable calibration file ({exc})") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise CalibrationError(f"{path}: not a calibrate calibration file (no 'format: {FORMAT}')")
    version = doc.get("version")
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise CalibrationError(f"{path}: calibration format version {version!r} is not a version number")
    if version > FORMAT_VERSION:
        raise CalibrationError(f"{path}: calibration format version {version!r} is newer than this calibrate reads "
                               f"(up to {FORMAT_VERSION}); upgrade calibrate-thresholds")
    if not isinstance(doc.get("estimators"), dict) or not doc["estimators"]:
        raise CalibrationError(f"{path}: the file holds no estimator")
    return doc


def choose_estimator(doc: dict, path: Path, estimator: str | None) -> tuple[str, dict]:
    """(label, entry) of the estimator to load from a saved calibration (or a partitioned head)."""
    entries = doc["estimators"]
    if estimator is None:
        if len(entries) != 1:
            raise CalibrationError(f"{path} holds estimators {', '.join(entries)}; name the one to load "
                                   "(estimator=..., or --estimator on the command line)")
        estimator = next(iter(entries))
    if estimator not in entries:
        raise CalibrationError(f"{path} has no estimator {estimator!r}; it holds: {', '.join(entries)}")
    return estimator, entries[estimator]


def lookup_component(registry, kind: str, name: Any, path: Path):
    """The registered component a saved calibration names, or a CalibrationError saying what to install."""
    try:
        return registry.get(kind, name, source=str(path))
    except CalibrateError as exc:
        raise CalibrationError(f"{exc}; install the plugin that provides it to load this calibration") from None


def check_model(model: FittedModel, transform: Transform, kind: str, targets, path: Path, label: str) -> None:
    """A loaded model must answer every class with a finite threshold (a hand-edited or damaged file
    may hold short arrays or NaN, which JSON allows): refuse it now rather than answer NaN later."""
    try:
        tau = model.thresholds([check_target(t) for t in targets]).values
        scores = transform.score_thresholds(tau, kind)
    except Exception as exc:  # noqa: BLE001 - whatever a damaged state makes the model raise
        raise CalibrationError(f"{path}: estimator {label!r} holds a damaged model ({type(exc).__name__}: {exc}); "
                               "save or run it again") from None
    if not np.all(np.isfinite(tau)) or (scores is not None and not np.all(np.isfinite(scores))):
        raise CalibrationError(f"{path}: estimator {label!r} gives non-finite thresholds (NaN or infinite values in "
                               "the file); save or run it again")
