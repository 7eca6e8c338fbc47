"""Conformance checks for datasets (they need a ``make_params`` factory writing a sample input)."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from pathlib import Path
from typing import get_args

import numpy as np

from calibrate.contract.base import Dataset, RunContext, ScoreSplit, overrides
from calibrate.contract.sharded import ShardedScores
from calibrate.errors import DataError, ParameterError
from calibrate.contract.params import param_specs
from calibrate.contract.types import DistanceMatrix, PatternSet
from calibrate.testing import load_digest
from calibrate.testing.common import CheckSkipped, ComponentCase, _build, _params, _tmpdir


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
    """Each path parameter (annotated ``Path``, or a ``str`` whose sample value names an existing file) pointed at
    a missing file, a text file of junk or a binary one: ``load`` raises DataError (or ParameterError); a dataset
    with its own ``check()`` refuses the missing file there too, and never raises anything else."""
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
                    _check_agrees(case, {**params, name: path}, f"{name}= {what}", must_refuse=path.name != junk_text.name
                                  and path.name != junk_bin.name)
                    continue
                except Exception as exc:  # noqa: BLE001
                    raise AssertionError(f"{case.id}: {name}= {what} raised {type(exc).__name__}: {exc}; "
                                         "raise calibrate.errors.DataError naming the file and the fix") from exc
                raise AssertionError(f"{case.id}: {name}= {what} loaded without error")


def _check_agrees(case: ComponentCase, params, what: str, must_refuse: bool) -> None:
    """A dataset with its own ``check()`` (what ``calibrate validate`` runs) refuses what ``load`` refused with a
    DataError too, never another exception; reading only the head, it may pass over junk further down, but
    not a missing file."""
    try:
        dataset = case.factory(**params)
    except ParameterError:
        return
    if not overrides(dataset, Dataset, "check"):
        return
    try:
        dataset.check()
    except (DataError, ParameterError):
        return
    except Exception as exc:  # noqa: BLE001
        raise AssertionError(f"{case.id}: check() on {what} raised {type(exc).__name__}: {exc}; it must raise the "
                             "DataError load() raises") from exc
    assert not must_refuse, f"{case.id}: load() refuses {what}, but check() (calibrate validate) accepts it"


def check_dataset_declarations(case: ComponentCase, tmp_path: Path | None = None) -> None:
    """What the dataset declares before loading agrees with what ``load`` returns: ``produces`` (patterns: a
    PatternSet; scores: a ScoreSplit or ShardedScores), ``sharded`` (ShardedScores), ``output_kind()`` (the
    kind of every loaded matrix; None or distance for patterns), and ``check()`` accepts the sample input."""
    with _tmpdir(tmp_path) as tmp:
        params = _params(case, tmp)
        dataset = _build(case, params)
        try:
            dataset.check()
        except Exception as exc:  # noqa: BLE001
            raise AssertionError(f"{case.id}: check() refuses the sample input that load() reads "
                                 f"({type(exc).__name__}: {exc}); check must say what load says") from exc
        kind = dataset.output_kind()
        raw = dataset.load(RunContext(seed=0))
        gives = "patterns" if isinstance(raw, PatternSet) else "scores"
        assert dataset.produces in (None, gives), \
            f"{case.id}: produces = {dataset.produces!r}, but load() returned {type(raw).__name__} ({gives})"
        assert dataset.sharded == isinstance(raw, ShardedScores), \
            f"{case.id}: sharded = {dataset.sharded!r}, but load() returned {type(raw).__name__}"
        if isinstance(raw, PatternSet):
            assert kind in (None, "distance"), \
                f"{case.id}: output_kind() = {kind!r} for patterns (compared by a distance): return None"
            return
        splits = [raw] if isinstance(raw, ScoreSplit) else [dataset.read_shard(s, 0)[0] for s in raw.shards]
        loaded = {m.kind for split in splits for m in (split.train, split.test)}
        loaded |= {raw.kind} if isinstance(raw, ShardedScores) else set()
        assert kind is None or loaded == {kind}, \
            f"{case.id}: output_kind() = {kind!r}, but the loaded matrices are of kind {sorted(loaded)}; a recipe " \
            "is validated against output_kind(), so they must agree"


#: the hash seeds :func:`check_dataset_independent_of_hash_seed`'s other process may take: the first one that is
#: not this process's own (an unset or random seed is never a fixed small one in practice: 2^-32)
HASH_SEEDS = ("1", "2")


def _other_seed() -> str:
    return next(seed for seed in HASH_SEEDS if os.environ.get("PYTHONHASHSEED") != seed)
#: what those processes run: load_digest.py as a file of its own, which keeps the kit's other modules (and their
#: imports) out of them
_CHILD = ("import importlib.util, sys\n"
          "spec = importlib.util.spec_from_file_location('_calibrate_load_digest', sys.argv[1])\n"
          "module = importlib.util.module_from_spec(spec)\n"
          "spec.loader.exec_module(module)\n"
          "module.main(sys.argv[2])\n")


def _load_in_processes(case: ComponentCase, blob: Path) -> dict[str, dict[str, str]]:
    """Hash seed -> the digests a fresh interpreter with that PYTHONHASHSEED loads (one seed other than this
    process's own: this process is the other side of the comparison)."""
    paths = [p for p in sys.path if p and Path(p).exists()]
    command = [sys.executable, "-c", _CHILD, load_digest.__file__, str(blob)]
    procs = {seed: subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                    env={**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": os.pathsep.join(paths)})
             for seed in (_other_seed(),)}
    out = {}
    for seed, proc in procs.items():
        stdout, stderr = proc.communicate(timeout=600)
        if proc.returncode != 0:
            tail = (stderr.strip().splitlines() or ["no message"])[-1]
            raise AssertionError(f"{case.id}: loading the sample input in another process (PYTHONHASHSEED={seed}) "
                                 f"failed: {tail}")
        out[seed] = json.loads(stdout.strip().splitlines()[-1])
    return out


def check_dataset_independent_of_hash_seed(case: ComponentCase, tmp_path: Path | None = None) -> None:
    """Loading gives the same data in a process with another ``PYTHONHASHSEED`` (1, or 2 when this process's is 1)
    as in this one: a train/test split, a shuffle or an order built on Python's per-process ``hash()`` of strings
    would give every run (and every worker) other data. Runs a subprocess, so the dataset class must be
    importable (defined at module level)."""
    factory = case.factory
    if "<locals>" in factory.__qualname__ or factory.__module__ == "__main__":
        raise CheckSkipped(f"{case.id}: {factory.__qualname__} is not importable by another process; define it "
                           "at module level to have loading checked across hash seeds")
    with _tmpdir(tmp_path) as tmp:
        params = _params(case, tmp)
        here = load_digest.digests(factory, params)
        blob = tmp / "hash-seed-case.pickle"
        blob.write_bytes(pickle.dumps((factory, params)))
        for seed, there in _load_in_processes(case, blob).items():
            differ = [name for name in here if there.get(name) != here[name]]
            assert not differ, \
                (f"{case.id}: loading the same input in a process with PYTHONHASHSEED={seed} gives other "
                 f"{', '.join(differ[:4])} than in this one: something depends on Python's per-process hash() of "
                 "strings (a split by hash(label) % k, iteration over a set of strings); use a stable hash "
                 "(hashlib.blake2b of the label's bytes) and sort what you iterate")


CHECKS = (check_dataset_load, check_dataset_deterministic, check_dataset_bad_files, check_dataset_declarations,
          check_dataset_independent_of_hash_seed)
