"""What a dataset loads, as one SHA-256 per array: compared between processes with different hash seeds by
``check_dataset_independent_of_hash_seed``. The kit runs this file in those processes by its path, not as
part of the calibrate.testing package, so it imports only calibrate's public data modules (absolute imports)."""

from __future__ import annotations

import hashlib
import json
import pickle

import numpy as np

from calibrate.contract.base import RunContext, ScoreSplit
from calibrate.contract.sharded import ShardedScores
from calibrate.contract.types import PatternSet


def named_arrays(raw) -> dict[str, np.ndarray]:
    """Every array a load gave (each shard's too, read as the workers read them), by name."""
    if isinstance(raw, PatternSet):
        return {"X": raw.X, "labels": raw.labels, "sets": raw.sets}
    if isinstance(raw, ShardedScores):
        splits = {f"shard {k} ": raw.dataset.read_shard(s, 0)[0] for k, s in enumerate(raw.shards)}
    elif isinstance(raw, ScoreSplit):
        splits = {"": raw}
    else:
        raise TypeError(f"load() returned {type(raw).__name__}; return a PatternSet, a ScoreSplit or ShardedScores")
    return {f"{where}{side}.{name}": getattr(getattr(split, side), name)
            for where, split in splits.items() for side in ("train", "test")
            for name in ("values", "valid", "probe_classes", "gallery_classes")}


def digests(factory: type, params: dict) -> dict[str, str]:
    """SHA-256 of each array a fresh ``factory(**params).load()`` gives."""
    raw = factory(**params).load(RunContext(seed=0))
    out = {}
    for name, array in named_arrays(raw).items():
        a = np.asarray(array)
        a = a.astype(str) if a.dtype == object else a
        out[name] = hashlib.sha256(f"{a.dtype.str}{a.shape}".encode() + np.ascontiguousarray(a).tobytes()).hexdigest()
    return out


def main(blob: str) -> None:
    """Print the digests of the (factory, params) pickled in the file ``blob``, as JSON."""
    with open(blob, "rb") as fh:
        factory, params = pickle.load(fh)
    print(json.dumps(digests(factory, params)))
