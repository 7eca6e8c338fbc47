"""Reading a saved calibration back (the format is calibrate.saved.json_format): the file read and its
structure checked field by field before anything in it is used, its digest checked, and what the loaders
(calibrate.api, calibrate.saved.partitioned) share to rebuild what it holds.

* :func:`read_artifact` and :func:`load_json`: the file read (a regular file, JSON, this format and version);
* :func:`check_document` (and :func:`check_common`, what a partitioned head shares; :func:`check_labels`):
  every field by type, size and range, each failure naming the field (untrusted input);
* :func:`check_written`: the :data:`~calibrate.saved.json_format.DIGEST` (and a run folder's manifest), last;
* :func:`choose_estimator`, :func:`lookup_component`, :func:`rebuilt`, :func:`check_transform_kind`,
  :func:`check_model`, :func:`saved_span`: the loaders' shared steps, each failure a CalibrationError.
"""

from __future__ import annotations

import hashlib
import json
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from calibrate.saved.json_format import ACCEPT_IF, DIGEST, FORMAT, FORMAT_VERSION, _sha256
from calibrate.contract.base import FittedModel, Transform, check_target
from calibrate.errors import CalibrateError, CalibrationError
from calibrate.contract.packed import is_packed, unpacked
from calibrate.files.untrusted import MAX_LABEL, label_problem, open_regular, regular_file


def saved_span(training: Any) -> tuple | None:
    """The span :func:`training_entry` saved (checked with the document), or None."""
    if not isinstance(training, dict) or "scores" not in training:
        return None
    low, high = training["scores"]
    return (float(low), float(high), bool(training.get("scores_genuine", False)))


def training_distance_span(transform: Transform, kind: str, training: Any) -> tuple[float, float] | None:
    """The range of the distances ``transform`` gives a file's saved training scores (``training``, checked with
    the document; :func:`saved_span`): every training distance lies in it, as the transform is monotone. None
    when the file records no span, or the transform refuses it."""
    span = saved_span(training)
    if span is None:
        return None
    from calibrate.contract.types import DistanceMatrix

    scores = np.array([[span[0], span[1]]])
    try:
        d = transform.apply(DistanceMatrix(scores, np.array(["\0p"]), np.array(["\0a", "\0b"]),
                                           np.ones(scores.shape, dtype=bool), kind, source="training.scores")).values
    except (CalibrateError, ValueError, FloatingPointError):
        return None
    low, high = float(np.min(d)), float(np.max(d))
    return (low, high) if np.isfinite(low) and np.isfinite(high) else None


def read_artifact(path: str | Path) -> tuple[dict[str, Any], bytes]:
    """A saved calibration's JSON, its format, version and structure checked whole (:func:`check_document`), and
    the bytes it was read from: once the loader has rebuilt and checked what it holds, :func:`check_written`
    makes sure it is what calibrate wrote, before anything is answered from it."""
    path = Path(path)
    if not path.exists():
        raise CalibrationError(f"calibration file {str(path)!r} does not exist; run a recipe or Calibration.save first")
    regular_file(path, "the calibration", "give the calibration.json a run or Calibration.save wrote",
                 error=CalibrationError)
    doc, data = load_json(path, "calibration file", raw=True)
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
    check_document(doc, path)
    return doc, data


def check_written(doc: dict, data: bytes, path: Path, run: Any = None) -> None:
    """That a calibration read from ``path`` (``doc``, parsed from the bytes ``data``) is what calibrate wrote: its
    :data:`DIGEST` matches, and with ``run`` (a :class:`calibrate.files.manifest.RunFolder`: read from a run's output
    folder) the folder's manifest records it as it is. Called last, after every field was checked (so that a damaged field is named as such) and before anything is
    answered. A file without a digest (written by an earlier calibrate, or by hand) is read from a file path with a
    warning saying that a change to it cannot be noticed."""
    sealed = _check_digest(doc, data, path)
    if run is not None:
        run.check(path.name, data)
    elif not sealed:
        warnings.warn(f"{path} holds no content digest (written by an earlier calibrate, or by hand), so a change "
                      "made to it since cannot be noticed: it loads unchecked; save it again (calibrate.load, then "
                      ".save) to add one", stacklevel=4)


def _check_digest(doc: dict, data: bytes, path: Path) -> bool:
    """Whether ``doc`` (read from the bytes ``data``) carries a :data:`DIGEST` (False: none); a digest that is not
    the one of its content is a CalibrationError. The bytes as written are hashed (the digest's own entry cut off
    the end); a copy re-indented or re-encoded by another tool is hashed as compact JSON again."""
    digest = doc.get(DIGEST)
    if digest is None:
        return False
    own = f',"{DIGEST}":"{digest}"}}'.encode("ascii")
    tail = data[-64:]
    end = len(data) - len(tail) + len(tail.rstrip())  # without the trailing white space (and no copy of the rest)
    if data.endswith(own, 0, end):
        written = hashlib.sha256(memoryview(data)[:end - len(own)])
        written.update(b"}")
        if "sha256:" + written.hexdigest() == digest:
            return True
    rest = {key: value for key, value in doc.items() if key != DIGEST}
    if _sha256(json.dumps(rest, separators=(",", ":")).encode("utf-8")) == digest:
        return True
    raise CalibrationError(f"{path}: the calibration was changed after calibrate wrote it (its content does not match "
                           f"the {DIGEST} saved in it); restore the file, or write it again (run the recipe, "
                           "`calibrate fit` or Calibration.save)")


def load_json(path: Path, what: str, *, raw: bool = False) -> Any:
    """A JSON document from a file the user gave, whatever it holds: an unreadable, non-JSON or absurdly
    nested file (RecursionError) is a CalibrationError naming it. ``raw``: (the document, the file's bytes)."""
    try:
        with open_regular(path, f"the {what}", "give a calibration a run or Calibration.save wrote",
                          error=CalibrationError) as fh:
            data = fh.read()
        doc = json.loads(data.decode("utf-8"))
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        raise CalibrationError(f"{path}: not a readable {what} ({type(exc).__name__}: {str(exc)[:200]})") from None
    except RecursionError:
        raise CalibrationError(f"{path}: not a {what}: it is nested too deeply to be one; run the recipe again") from None
    return (doc, data) if raw else doc


def _bad(path: Path, where: str, what: str) -> CalibrationError:
    return CalibrationError(f"{path}: {where} {what}; the file is damaged or not calibrate's: run the recipe (or "
                            "Calibration.save) again")


def _component_entry(entry: Any, path: Path, where: str) -> None:
    if not isinstance(entry, dict):
        raise _bad(path, where, f"must be a mapping, got {type(entry).__name__}")
    if not isinstance(entry.get("plugin"), str) or not entry["plugin"]:
        raise _bad(path, f"{where}.plugin", "must be a component name")
    for key in ("params", "state"):
        if key in entry and not isinstance(entry[key], dict):
            raise _bad(path, f"{where}.{key}", f"must be a mapping, got {type(entry[key]).__name__}")


def check_labels(labels: Any, path: Path, where: str) -> None:
    """Class labels read from a file: a list of distinct non-empty strings without NUL, each at most
    MAX_LABEL characters."""
    if not isinstance(labels, list | tuple):
        raise _bad(path, where, f"must be a list of class names, got {type(labels).__name__}")
    for i, c in enumerate(labels):
        if not isinstance(c, str) or label_problem(c):  # the rule every reader applies
            shown = repr(c)[:60]
            raise _bad(path, f"{where}[{i}]", f"is {shown}: a class name must be a non-empty string of at most "
                                              f"{MAX_LABEL} characters without NUL")
    if len(set(labels)) != len(labels):
        seen: set[str] = set()
        dup = next(c for c in labels if c in seen or seen.add(c))
        raise _bad(path, where, f"names class {dup[:60]!r} twice")


def _targets(values: Any, path: Path, where: str) -> None:
    if not isinstance(values, list) or not all(isinstance(t, (int, float)) and not isinstance(t, bool)
                                               and 0 < t < 1 for t in values):
        raise _bad(path, where, "must be a list of target FPRs in (0, 1)")


#: the longest string a saved prediction's descriptive entries (status, world, simulation) may hold
MAX_WORDS = 1000


def _strings(values: Any, n: int | None, path: Path, where: str) -> None:
    if not isinstance(values, list) or (n is not None and len(values) != n) or not all(
            isinstance(x, str) and len(x) <= MAX_WORDS for x in values):
        raise _bad(path, where, f"must be {n if n is not None else 'a list of'} strings"
                                f"{', one per target' if n is not None else ''}")


def _rate_rows(rows: Any, count: int | None, n: int, path: Path, where: str) -> np.ndarray:
    """A saved table of rates: ``count`` rows (at least one when None) of ``n`` entries, each a number in [0, 1] or
    null (not predicted there); as floats, NaN for null. Packed (calibrate.predicted.interval.saved_table): the rows one
    after the other, NaN for null."""
    if is_packed(rows):
        try:
            flat = unpacked(rows, where)
        except CalibrateError as exc:
            raise _bad(path, where, str(exc).removeprefix(where).strip()) from None
        if not flat.size or flat.size % n or (count is not None and flat.size != count * n):
            raise _bad(path, where, f"holds {flat.size} packed rates; it must hold "
                                    f"{count if count is not None else 'one or more'} rows of {n}, one rate per target")
        outside = ~np.isnan(flat) & ~((flat >= 0) & (flat <= 1))
        if outside.any():
            k = int(np.flatnonzero(outside)[0])
            raise _bad(path, f"{where}[{k // n}][{k % n}]", f"is {flat[k]!r}: a rate must be a number in [0, 1] (or null)")
        return flat.reshape(-1, n)
    if not isinstance(rows, list) or (len(rows) != count if count is not None else not rows) or not all(
            isinstance(r, list) and len(r) == n for r in rows):
        raise _bad(path, where, f"must hold {count if count is not None else 'one or more'} lists of {n} rates "
                                "(numbers in [0, 1], or null), one per target")
    return _rate_values([v for r in rows for v in r], path, where, n).reshape(len(rows), n)


def _rates(values: Any, n: int, path: Path, where: str) -> np.ndarray:
    """A saved list of ``n`` rates, one per target, each a number in [0, 1] or null; as floats, NaN for null."""
    if not isinstance(values, list) or len(values) != n:
        raise _bad(path, where, f"must be {n} rates in [0, 1] (or null), one per target")
    return _rate_values(values, path, where, None)


def _rate_values(flat: list, path: Path, where: str, n: int | None) -> np.ndarray:
    """The rates of ``flat`` (the rows of a table of ``n`` columns one after the other, or one list when None)."""
    if not set(map(type, flat)) <= {int, float, type(None)}:
        raise _bad(path, where, "must hold rates (numbers in [0, 1]) or null only, not strings, booleans or lists")
    cells = np.array(flat, dtype=object)
    null = np.equal(cells, None)
    try:
        values = np.where(null, 0.0, cells).astype(np.float64)
    except OverflowError:  # a whole number beyond float64
        values = np.full(len(flat), np.inf)
    outside = ~null & ~((values >= 0) & (values <= 1))  # NaN and infinities too
    if outside.any():
        k = int(np.flatnonzero(outside)[0])
        at = f"[{k}]" if n is None else f"[{k // n}][{k % n}]"
        raise _bad(path, f"{where}{at}", f"is {repr(flat[k])[:40]}: a rate must be a number in [0, 1] (or null)")
    values[null] = np.nan
    return values


def _interval(low: np.ndarray, high: np.ndarray, path: Path, where: str) -> None:
    """Predicted intervals, low and high: null at the same places, low <= high elsewhere."""
    def at(mask: np.ndarray) -> str:
        i, j = np.argwhere(mask)[0]
        return f"{where}[{j}]" if low.shape[0] == 1 else f"{where}[{i}][{j}]"

    lonely = np.isnan(low) != np.isnan(high)
    if lonely.any():
        raise _bad(path, at(lonely), "has a low end without a high end (or the reverse); both are null where nothing "
                                     "was predicted")
    crossed = low > high
    if crossed.any():
        i, j = np.argwhere(crossed)[0]
        raise _bad(path, at(crossed), f"has a low end {float(low[i, j])!r} above its high end {float(high[i, j])!r}")


def _prediction(p: Any, path: Path, where: str) -> None:
    """A saved predicted interval (calibrate.predicted.interval.Prediction.saved), every entry that is read."""
    if p is None:
        return
    if not isinstance(p, dict):
        raise _bad(path, where, f"must be a mapping, got {type(p).__name__}")
    level = p.get("level")
    if not isinstance(level, (int, float)) or isinstance(level, bool) or not 0 < level < 1:
        raise _bad(path, f"{where}.level", "must be a coverage in (0, 1)")
    _targets(p.get("targets"), path, f"{where}.targets")
    n = len(p["targets"])
    if n == 0:
        raise _bad(path, f"{where}.targets", "must name at least one target")
    low, high = (_rates(p.get(key), n, path, f"{where}.{key}") for key in ("predicted_fpr_low", "predicted_fpr_high"))
    _interval(low[None, :], high[None, :], path, f"{where}.predicted_fpr")
    reps = _rate_rows(p.get("replicates"), None, n, path, f"{where}.replicates")
    galleries = p.get("simulated_galleries", len(reps))
    if isinstance(galleries, bool) or galleries != len(reps):
        raise _bad(path, f"{where}.simulated_galleries", f"is {str(galleries)[:40]!r}, but replicates holds {len(reps)}")
    for key in ("prediction_status", "confidence_method"):
        if p.get(key) is not None:
            _strings(p[key], n, path, f"{where}.{key}")
    for key in ("simulation", "world", "world_structure"):
        if p.get(key) is not None and not (isinstance(p[key], str) and len(p[key]) <= MAX_WORDS):
            raise _bad(path, f"{where}.{key}", "must be a string")
    if p.get("world_check") is not None and not (isinstance(p["world_check"], list) and len(p["world_check"]) == n):
        raise _bad(path, f"{where}.world_check", f"must be {n} entries, one per target")
    _clustering(p.get("clustering"), n, path, f"{where}.clustering")
    per = p.get("per_class")
    if per is not None:
        if not isinstance(per, dict):
            raise _bad(path, f"{where}.per_class", "must be a mapping")
        check_labels(per.get("classes"), path, f"{where}.per_class.classes")
        count = len(per["classes"])
        low, high = (_rate_rows(per.get(key), count, n, path, f"{where}.per_class.{key}") for key in ("low", "high"))
        _interval(low, high, path, f"{where}.per_class")


def _clustering(c: Any, n: int, path: Path, where: str) -> None:
    """A saved prediction's clustering (calibrate.predicted.clustering.Clustering.summary): what the measured interval
    reads, cv2 per target (>= 0) and the units' size (>= 1)."""
    if c is None:
        return
    if not isinstance(c, dict):
        raise _bad(path, where, f"must be a mapping, got {type(c).__name__}")
    cv2 = c.get("cv2")
    if not (isinstance(cv2, list) and len(cv2) == n and all(
            isinstance(x, (int, float)) and not isinstance(x, bool) and 0 <= x < 1e300 for x in cv2)):
        raise _bad(path, f"{where}.cv2", f"must be {n} finite numbers >= 0, one per target")
    size = c.get("unit_size")
    if isinstance(size, bool) or not isinstance(size, (int, float)) or not 1 <= size < 1e300:
        raise _bad(path, f"{where}.unit_size", "must be a finite number >= 1 (distances per probe unit)")


#: the most training impostor distances a saved count may state (far beyond any gallery; keeps it a float)
MAX_IMPOSTORS = 10**15
#: the most entries, and characters per entry, of a saved ``versions`` mapping
MAX_VERSIONS = 1000


def check_common(doc: dict, bad) -> None:
    """The fields a saved calibration and a partitioned head share: kind, targets, training, versions
    (each by type and size; ``bad(where, what)`` makes the error)."""
    if "kind" in doc and (not isinstance(doc["kind"], str) or doc["kind"] not in ACCEPT_IF):
        raise bad("kind", f"is {str(doc['kind'])[:40]!r}, not similarity or distance")
    if "targets" in doc and not (isinstance(doc["targets"], list) and all(
            isinstance(t, (int, float)) and not isinstance(t, bool) and 0 < t < 1 for t in doc["targets"])):
        raise bad("targets", "must be a list of target FPRs in (0, 1)")
    if "training" in doc:
        n = doc["training"].get("impostors") if isinstance(doc["training"], dict) else None
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_IMPOSTORS:
            raise bad("training.impostors", f"must be the positive number of training impostor distances (at most "
                                            f"{MAX_IMPOSTORS:.0e}), got {str(n)[:40]!r}")
        span = doc["training"].get("scores", [0.0, 0.0])
        if not (isinstance(span, list) and len(span) == 2 and all(
                isinstance(x, (int, float)) and not isinstance(x, bool) and abs(x) < 1e308 for x in span)
                and span[0] <= span[1]):  # abs(x) < 1e308: finite (NaN compares false), and no int beyond a float
            raise bad("training.scores", "must be the lowest and highest training score, two finite numbers in order")
        if not isinstance(doc["training"].get("scores_genuine", False), bool):
            raise bad("training.scores_genuine", "must be true or false (whether genuine scores were among them)")
    versions = doc.get("versions", {})
    if not isinstance(versions, dict) or len(versions) > MAX_VERSIONS or not all(
            isinstance(k, str) and len(k) <= MAX_VERSIONS and (v is None or isinstance(v, str) and len(v) <= MAX_VERSIONS)
            for k, v in versions.items()):
        raise bad("versions", f"must map package names to version strings (or null), at most {MAX_VERSIONS} of them")


#: the most FNR thresholds a calibration may hold (``calibrate fit`` takes at most 100 targets)
MAX_FNR_THRESHOLDS = 100


def _number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and abs(x) < 1e308  # finite, within a float


def _fnr_thresholds(entries: Any, path: Path) -> None:
    """``fnr_thresholds`` (calibrate.saved.json_format.artifact): each a target FNR in (0, 1), a finite score threshold
    and the positive count of genuine comparisons it was set on."""
    if not isinstance(entries, list) or len(entries) > MAX_FNR_THRESHOLDS:
        raise _bad(path, "fnr_thresholds", f"must be a list of at most {MAX_FNR_THRESHOLDS} thresholds")
    for k, e in enumerate(entries):
        where = f"fnr_thresholds[{k}]"
        if not isinstance(e, dict) or not (_number(e.get("target_fnr")) and 0 < e["target_fnr"] < 1):
            raise _bad(path, f"{where}.target_fnr", "must be a target FNR in (0, 1)")
        if not _number(e.get("score_threshold")):
            raise _bad(path, f"{where}.score_threshold", "must be a finite number")
        n = e.get("genuine")
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_IMPOSTORS:
            raise _bad(path, f"{where}.genuine", "must be the positive number of genuine comparisons it was set on")


def check_document(doc: dict, path: Path) -> None:
    """The whole of a calibration document's structure, before anything in it is used (names read from it
    are looked up in the registry only, never imported): every failure names the field."""
    check_common(doc, lambda where, what: _bad(path, where, what))
    if doc["version"] >= 2:  # the score direction: format 2 always writes both, and one must say the other
        kind = doc.get("kind")
        if kind is None:
            raise _bad(path, "kind", "is missing (similarity or distance)")
        if doc.get("accept_if") != ACCEPT_IF[kind]:
            raise _bad(path, "accept_if", f"is {str(doc.get('accept_if'))[:40]!r}, but kind {kind!r} accepts if "
                                          f"{ACCEPT_IF[kind]}")
    if not isinstance(doc.get("fingerprint", ""), str) or len(doc.get("fingerprint", "")) > MAX_WORDS:
        raise _bad(path, "fingerprint", "must be the training data's fingerprint (a string)")
    if DIGEST in doc and not (isinstance(doc[DIGEST], str) and len(doc[DIGEST]) == 71 and doc[DIGEST].startswith(
            "sha256:") and all(c in "0123456789abcdef" for c in doc[DIGEST][7:])):
        raise _bad(path, DIGEST, "must be 'sha256:' and 64 hexadecimal digits")
    check_labels(list(doc["estimators"]), path, "estimators")
    _fnr_thresholds(doc.get("fnr_thresholds", []), path)
    if "transform" in doc:
        _component_entry(doc["transform"], path, "transform")
    if "normalizer" in doc:
        from calibrate.normalisation.cohort import check_state

        check_state(doc["normalizer"], lambda where, what: _bad(path, where, what))
        check_labels(doc["normalizer"]["classes"], path, "normalizer.classes")
    for label, entry in doc["estimators"].items():
        where = f"estimators[{label[:60]!r}]"
        _component_entry(entry, path, where)
        if not isinstance(entry.get("state"), dict):
            raise _bad(path, f"{where}.state", "is missing")
        if "classes" in entry["state"]:
            check_labels(entry["state"]["classes"], path, f"{where}.state.classes")
        reach = entry.get("reach", 1.0)
        if isinstance(reach, bool) or not isinstance(reach, (int, float)) or not 0 < reach <= 1:
            raise _bad(path, f"{where}.reach", f"is {str(reach)[:40]!r}: must be the largest target FPR the saved model "
                                               "answers, a number in (0, 1]")
        if entry.get("confidence") is not None and not isinstance(entry["confidence"], dict):
            raise _bad(path, f"{where}.confidence", "must be a mapping")
        _prediction(entry.get("prediction"), path, f"{where}.prediction")
        if entry.get("confidence") is None and (entry.get("prediction") or {}).get("confidence_method") is not None:
            raise _bad(path, f"{where}.confidence", "is missing, but its prediction says how the confidence bound "
                                                    "chose each threshold (confidence_method)")


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


def rebuild_error(exc: BaseException) -> str:
    """Why a saved state could not be rebuilt, for a loader's message: a state check's own words (they name the
    field, calibrate.contract.statecheck), anything else with its exception type."""
    if isinstance(exc, CalibrateError):
        return str(exc)[:300]
    return f"{type(exc).__name__}: {str(exc)[:200]}"


#: what rebuilding a component from a damaged file may raise (besides a CalibrateError)
REBUILD_ERRORS = (KeyError, TypeError, ValueError, IndexError, AttributeError, OverflowError, MemoryError, OSError)


def rebuilt(path: Path, what: str, build, fix: str = "run the recipe (or Calibration.save) again"):
    """``build()``, a component rebuilt from a saved file; whatever a damaged file makes it raise is a
    CalibrationError naming the file, ``what`` (e.g. "the transform") and the field when a state check named it."""
    try:
        return build()
    except (CalibrateError, *REBUILD_ERRORS) as exc:
        if isinstance(exc, CalibrationError) and str(path) in str(exc):
            raise  # already names the file (e.g. a pooled sample's file)
        raise CalibrationError(f"{path}: {what} cannot be rebuilt from the file ({rebuild_error(exc)}); the file is "
                               f"damaged: {fix}") from None


def check_transform_kind(kind: str, info, path: Path) -> None:
    """The saved score direction must be one the saved transform (``info``, its registry entry) takes."""
    accepts = tuple(getattr(info.factory, "accepts", ACCEPT_IF))
    if kind not in accepts:
        raise CalibrationError(f"{path}: kind is {kind!r}, but transform {info.name!r} takes {' or '.join(accepts)} "
                               "scores; the file is damaged: run the recipe (or Calibration.save) again")


def check_model(model: FittedModel, transform: Transform | None, kind: str, targets, path: Path, label: str) -> None:
    """A loaded model must answer every class with a finite threshold (a hand-edited or damaged file
    may hold short arrays or NaN, which JSON allows): refuse it now rather than answer NaN later
    (``transform`` None: a normalised calibration, whose thresholds have no score form)."""
    if not len(model.classes):
        raise CalibrationError(f"{path}: estimator {label!r} holds no class; save or run it again")
    try:
        tau = model.thresholds([check_target(t) for t in targets]).values
        scores = None if transform is None else transform.score_thresholds(tau, kind)
    except Exception as exc:  # noqa: BLE001 - whatever a damaged state makes the model raise
        raise CalibrationError(f"{path}: estimator {label!r} holds a damaged model ({type(exc).__name__}: {exc}); "
                               "save or run it again") from None
    if not np.all(np.isfinite(tau)) or (scores is not None and not np.all(np.isfinite(scores))):
        raise CalibrationError(f"{path}: estimator {label!r} gives non-finite thresholds (NaN or infinite values in "
                               "the file); save or run it again")
