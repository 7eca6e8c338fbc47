"""The saved calibration's format (JSON, never pickle): its constants and writing it.

``Calibration.save`` (calibrate.saved.calibration), a run's ``calibration.json`` (calibrate.running.outputs) and
a sharded run's parts (calibrate.running.sharded) all write through here (:func:`artifact`,
:func:`dumps_artifact`); reading it back and checking it field by field is calibrate.saved.reading (used by
the loaders, calibrate.api and calibrate.saved.partitioned). Both sit below all of them, so none has to
import another to share the format.
"""

from __future__ import annotations

import hashlib
import json
import platform
import uuid
from collections.abc import Sequence
from importlib import metadata
from typing import Any

import numpy as np

from calibrate.contract.types import ImpostorDistances

FORMAT = "calibrate-calibration"
#: 1: models only (distance units); 2: with the fitted transform, score direction, targets, versions, fingerprint
FORMAT_VERSION = 2
ACCEPT_IF = {"similarity": "score >= t", "distance": "score <= t"}
#: the saved calibration's last entry: "sha256:" and the SHA-256 of the compact JSON of everything before it
#: (calibrate.saved.json_format.dumps_artifact), so that a file changed since calibrate wrote it is refused on load
DIGEST = "digest"


def fingerprint(impostors: ImpostorDistances) -> str:
    """SHA-256 of the training impostor distances per class (the order of classes, and of distances
    within a class, ignored)."""
    h = hashlib.sha256()
    raw = np.ascontiguousarray(impostors.sorted_within(), dtype="<f8").tobytes()  # each class's values sorted
    offsets = (np.asarray(impostors.offsets, dtype=np.int64) * 8).tolist()
    pieces = []
    for i, cls in sorted(enumerate(impostors.classes), key=lambda item: item[1]):
        pieces += [cls.encode("utf-8"), b"\0", raw[offsets[i]:offsets[i + 1]]]
    h.update(b"".join(pieces))  # the same bytes, in the same order, as one update per piece would hash
    return "sha256:" + h.hexdigest()


def _sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


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
             estimators: dict[str, tuple], training_impostors: int | None = None,
             normalizer: dict | None = None, training_scores: Sequence[float] | None = None,
             fnr_thresholds: Sequence[dict] = ()) -> dict[str, Any]:
    """The saved calibration (format 2), for ``Calibration.save`` and a run's calibration.json alike;
    ``estimators``: label -> (plugin, params, model state) or (plugin, params, model state, extra
    entries), the extra entries being ``reach``, ``prediction`` and ``confidence``
    (:func:`calibrate.predicted.confidence.saved_entries`);
    ``normalizer``: the fitted normalisation's state (calibrate.normalisation.cohort.FittedNormalization.to_state), when the
    distances were normalised; ``fnr_thresholds``: one threshold for every class at each target FNR asked for
    (``calibrate fit --fnr``: ``target_fnr``, ``score_threshold``, ``genuine`` comparisons it was set on), written only
    when there are some."""
    def plain(value: Any) -> Any:
        return json.loads(json.dumps(value, default=str))

    return {"format": FORMAT, "version": FORMAT_VERSION, "kind": kind, "accept_if": ACCEPT_IF[kind],
            "transform": {"plugin": transform_plugin, "params": plain(transform_params), "state": transform_state},
            "targets": list(targets), "fingerprint": fingerprint, "versions": versions,
            **({"training": {"impostors": int(training_impostors), **training_entry(training_scores)}}
               if training_impostors is not None else {}),
            **({"fnr_thresholds": [dict(e) for e in fnr_thresholds]} if fnr_thresholds else {}),
            **({"normalizer": plain(normalizer)} if normalizer is not None else {}),
            "estimators": {label: {"plugin": entry[0], "params": plain(entry[1]), "state": entry[2],
                                   **(entry[3] if len(entry) > 3 else {})}
                           for label, entry in estimators.items()}}


def training_entry(span: Sequence[Any] | None) -> dict[str, Any]:
    """``training.scores`` (lowest, highest training score) and ``training.scores_genuine`` (whether genuine
    comparisons were among them) of a span (low, high[, genuine seen]); nothing when unknown."""
    if span is None:
        return {}
    out: dict[str, Any] = {"scores": [float(span[0]), float(span[1])]}
    if len(span) > 2:
        out["scores_genuine"] = bool(span[2])
    return out


def dumps_artifact(doc: dict[str, Any]) -> str:
    """Compact JSON, the bytes ``json.dumps(doc, separators=(",", ":"))`` writes: the C encoder (a model's
    state can hold millions of values; indent is pure Python), and long lists of floats (auto's pooled
    scores: one per training distance) formatted in one pass by pyarrow when it is installed
    (:func:`float_list_json`), each spliced in where a placeholder string stood. The last entry is the
    :data:`DIGEST` of those bytes (``doc``'s own digest, if any, left out), checked by :func:`read_artifact`."""
    lists: list[list] = []
    token = f"\0calibrate-floats-{uuid.uuid4().hex}-"

    def swap(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: swap(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            if len(value) >= FAST_FLOATS and set(map(type, value)) == {float}:
                lists.append(value)
                return f"{token}{len(lists) - 1}"
            return [swap(v) for v in value]
        return value

    doc = {key: value for key, value in doc.items() if key != DIGEST}
    swapped = swap(doc)
    if lists and not _pyarrow():  # pyarrow (about 80 ms to import) only where a long list asks for it
        lists.clear()
        swapped = doc
    text = json.dumps(swapped, separators=(",", ":"))
    for i, values in enumerate(lists):
        text = text.replace(json.dumps(f"{token}{i}"), float_list_json(values), 1)
    return f'{text[:-1]},"{DIGEST}":"{_sha256(text.encode("utf-8"))}"}}\n'


#: lists of floats at least this long are formatted by pyarrow (below it the saving is nothing)
FAST_FLOATS = 10_000
#: where pyarrow's shortest representation of a non-integer float reads as Python's repr (checked
#: decade by decade: positional digits, no exponent, in [1e-4, 1e10)); outside it repr formats
_SAME_FORMAT = (1e-4, 1e9)


def _pyarrow() -> bool:
    try:
        import pyarrow.compute  # noqa: F401
    except ImportError:
        return False
    return True


def float_list_json(values: list[float]) -> str:
    """``json.dumps(values)`` for a list of floats (compact), most of them formatted by pyarrow's C++
    shortest representation (:func:`pyarrow_float_json`), else by json itself."""
    text = pyarrow_float_json(values)
    return json.dumps(values, separators=(",", ":")) if text is None else text


def pyarrow_float_json(values: list[float]) -> str | None:
    """``json.dumps(values)`` with the floats formatted by pyarrow, which writes repr's text wherever
    :data:`_SAME_FORMAT` says; the others (integers, zeros, tiny or huge magnitudes, NaN and infinities) are
    formatted by json. None when a sample of the list compared with json's own formatting differs (a
    pyarrow version that writes otherwise): the caller formats it all with json."""
    import pyarrow as pa
    import pyarrow.compute as pc

    x = np.array(values, dtype=np.float64)
    size = np.abs(x)
    other = np.flatnonzero(~((size >= _SAME_FORMAT[0]) & (size < _SAME_FORMAT[1]) & (x != np.round(x))))
    text = pc.cast(pa.array(x), pa.string())
    sample = np.setdiff1d(np.unique(np.linspace(0, x.size - 1, 257).astype(np.int64)), other)
    if text.take(pa.array(sample)).to_pylist() != [json.dumps(values[i]) for i in sample.tolist()]:
        return None
    if other.size:
        mask = np.zeros(x.size, dtype=bool)
        mask[other] = True
        text = pc.replace_with_mask(text, pa.array(mask), pa.array([json.dumps(values[i]) for i in other.tolist()]))
    joined = pc.binary_join(pa.ListArray.from_arrays(pa.array([0, x.size], pa.int32()), text), ",")
    return "[" + joined[0].as_py() + "]"
