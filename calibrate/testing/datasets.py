"""Conformance checks for datasets (they need a ``make_params`` factory writing a sample input)."""

from __future__ import annotations

from pathlib import Path
from typing import get_args

import numpy as np

from ..base import RunContext, ScoreSplit
from ..partitioned import ShardedScores
from ..errors import DataError, ParameterError
from ..params import param_specs
from ..types import DistanceMatrix, PatternSet
from .common import CheckSkipped, ComponentCase, _build, _params, _tmpdir


def _load(case: ComponentCase, params):
    data = _build(case, params).load(RunContext(seed=0))
    if isinstance(data, ShardedScores):  # a sharded dataset: its shards read as the workers read them
        return _read_shards(case, data)
    assert isinstance(data, (PatternSet, ScoreSplit)), \
        f"{case.id}: load() returned {type(data).__name__}; return a PatternSet, a ScoreSplit or ShardedScores"
    return data


def _read_shards(case: ComponentCase, data: ShardedScores) -> ScoreSplit:
    """Every shard of a sharded dataset read with ``read_shard`` (column offsets counted as a run does),
    checked, and the first shard's split returned for the checks that follow."""
    assert data.shards, f"{case.id}: load() returned ShardedScores without shards"
    first, offset = None, 0
    for shard in data.shards:
        out = data.dataset.read_shard(shard, offset)
        assert isinstance(out, tuple) and len(out) == 4 and isinstance(out[0], ScoreSplit), \
            f"{case.id}: read_shard must return (ScoreSplit, columns, absent, notes)"
        first = out[0] if first is None else first
        offset += int(out[1])
    return first


def check_dataset_load(case: ComponentCase, tmp_path: Path | None = None) -> None:
    """The sample input loads into a PatternSet (>= 2 classes) or a consistent ScoreSplit."""
    with _tmpdir(tmp_path) as tmp:
        data = _load(case, _params(case, tmp))
    if isinstance(data, PatternSet):
        assert len(data.classes) >= 2, f"{case.id}: the sample input gave {len(data.classes)} class(es)"
        return
    assert isinstance(data.train, DistanceMatrix) and isinstance(data.test, DistanceMatrix)
    assert np.array_equal(data.train.gallery_classes, data.test.gallery_classes), \
        f"{case.id}: training and evaluation matrices enroll different classes"
    assert isinstance(data.missing, int) and data.missing >= 0, f"{case.id}: ScoreSplit.missing must be a count"
    assert data.train.impostor_mask().any(), f"{case.id}: no training impostor comparisons"
    assert data.test.impostor_mask().any(), f"{case.id}: no evaluation impostor comparisons"


def _arrays(data) -> list[np.ndarray]:
    if isinstance(data, PatternSet):
        return [data.X, data.labels, data.sets]
    return [m for d in (data.train, data.test) for m in (d.values, d.valid, d.probe_classes, d.gallery_classes)]


def check_dataset_deterministic(case: ComponentCase, tmp_path: Path | None = None) -> None:
    """Loading twice gives the same data."""
    with _tmpdir(tmp_path) as tmp:
        params = _params(case, tmp)
        a, b = _load(case, params), _load(case, params)
    assert type(a) is type(b)
    for x, y in zip(_arrays(a), _arrays(b)):
        assert np.array_equal(x, y), f"{case.id}: loading the same input twice gives different data"


def _path_params(case: ComponentCase, params) -> list[str]:
    """Parameters that name files: annotated ``Path``, or (annotated ``str``) given a sample value that
    names an existing file or folder."""
    out = []
    for p in param_specs(case.factory):
        tp, value = p.annotation, params.get(p.name)
        if value is None:
            continue
        if tp is Path or Path in get_args(tp) or (isinstance(value, (str, Path)) and str(value) and Path(value).exists()):
            out.append(p.name)
    return out


def check_dataset_bad_files(case: ComponentCase, tmp_path: Path | None = None) -> None:
    """A path parameter pointing at a missing file, or at a file of junk, gives DataError (or ParameterError)."""
    with _tmpdir(tmp_path) as tmp:
        params = _params(case, tmp)
        names = _path_params(case, params)
        if not names:
            raise CheckSkipped(f"{case.id}: no path parameters")
        junk_text = tmp / "junk.txt"
        junk_text.write_text("this is not a data file\n", encoding="utf-8")
        junk_bin = tmp / "junk.bin"
        junk_bin.write_bytes(bytes(range(256)) * 4)
        for name in names:
            for what, path in (("a missing file", tmp / "does-not-exist.dat"), ("a text file of junk", junk_text),
                               ("a binary file of junk", junk_bin)):
                try:
                    _load(case, {**params, name: path})
                except (DataError, ParameterError):
                    continue
                except Exception as exc:  # noqa: BLE001
                    raise AssertionError(f"{case.id}: {name}= {what} raised {type(exc).__name__}: {exc}; "
                                         "raise calibrate.errors.DataError naming the file and the fix") from exc
                raise AssertionError(f"{case.id}: {name}= {what} loaded without error")


CHECKS = (check_dataset_load, check_dataset_deterministic, check_dataset_bad_files)
