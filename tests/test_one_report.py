"""One report writer for both routes (issue 41, calibrate/running/report.py): a run in memory and a sharded run of
the same comparisons write report.md and results.json with the same fields in the same order where both have them,
and the sharded one says in one line what it leaves out."""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path

import numpy as np
import yaml

import calibrate
from calibrate.running.report import SHARDED_LEAVES_OUT

ESTIMATORS = [{"plugin": "auto", "structure": "bulk"}, {"plugin": "generic-interp"}]


def text_shards(folder: Path, shards: int = 3, classes: int = 12, probes: int = 40, seed: int = 0) -> Path:
    """bob 4-column shards of distances, one per group of claimed classes, and all.txt: the same lines in one list."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True)
    every = []
    for s in range(shards):
        lines = []
        for j in range(classes):
            c, scale = f"c{s}_{j}", rng.uniform(0.5, 2.0)
            lines += [f"{c} r{s}_{q} p{s}_{q} {rng.gamma(5, scale)!r}" for q in range(probes)]
            lines += [f"{c} {c} g{s}_{j}_{k} {rng.gamma(1, 0.3)!r}" for k in range(3)]
        (folder / f"shard{s:03d}.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
        every += lines
    (folder.parent / "all.txt").write_text("\n".join(every) + "\n", encoding="utf-8")
    return folder


def run(tmp: Path, data: dict, name: str) -> tuple[dict, str]:
    recipe = {"version": 1, "data": {**data, "kind": "distance"}, "estimators": ESTIMATORS,
              "evaluation": {"targets": [0.02, 0.005], "prediction": False}, "output": {"dir": str(tmp / name)}}
    path = tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump(recipe), encoding="utf-8")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = calibrate.run(path).out_dir
    return json.loads((out / "results.json").read_text(encoding="utf-8")), (out / "report.md").read_text(encoding="utf-8")


def same_fields(a, b, where: str = "") -> None:
    """The keys both mappings hold come in the same order in each, and so on inside them."""
    if isinstance(a, dict) and isinstance(b, dict):
        shared = [k for k in a if k in b]
        assert shared == [k for k in b if k in a], where
        for k in shared:
            same_fields(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for k, (x, y) in enumerate(zip(a, b)):
            same_fields(x, y, f"{where}[{k}]")


def test_a_sharded_and_an_in_memory_run_write_the_same_fields(tmp_path):
    folder = text_shards(tmp_path / "shards")
    memory, memory_md = run(tmp_path, {"plugin": "score-list", "path": str(tmp_path / "all.txt")}, "memory")
    sharded, sharded_md = run(tmp_path, {"plugin": "score-shards", "path": str(folder)}, "sharded")

    # results.json: the writer's own keys in one order, the evaluator's figures (verification) in both
    assert list(memory) == ["estimators", "recipe", "versions", "verification", "notes", "timings"]
    assert list(sharded) == ["estimators", "recipe", "versions", "verification", "partitions", "notes", "timings"]
    assert sharded["partitions"] == {"shards": 3, "classes": 36, "training_impostors": sharded["partitions"][
        "training_impostors"], "left_out": list(SHARDED_LEAVES_OUT)}
    same_fields(memory, sharded)
    for label in memory["estimators"]:
        for m, s in zip(memory["estimators"][label]["targets"], sharded["estimators"][label]["targets"], strict=True):
            assert set(s) <= set(m), set(s) - set(m)  # nothing a sharded row says that an in-memory row does not
            for key in ("target_fpr", "fpr", "ratio", "false_accepts", "impostor_attempts", "fnr", "fnr_one_threshold",
                        "hter"):
                assert s[key] == m[key], (label, key)

    # report.md: one preamble, the same table and the same sections in the same order where both have them
    def preamble(md: str) -> str:
        return md.splitlines()[2]

    assert preamble(memory_md).startswith("Recipe `memory.yaml`; 2 estimator(s); 36 enrolled classes; 1 fold(s)")
    assert preamble(sharded_md).startswith("Recipe `sharded.yaml`; 2 estimator(s); 36 enrolled classes in 3 shards")
    left_out = [line for line in sharded_md.splitlines() if line.startswith("Not in a sharded run:")]
    assert left_out == [f"Not in a sharded run: {'; '.join(SHARDED_LEAVES_OUT)}."]
    assert "Not in a sharded run" not in memory_md

    def table(md: str) -> list[str]:
        return [line for line in md.splitlines() if line.startswith("| ") and "FNR cost |" in line or
                re.match(r"\| [0-9.]+% \| ", line)][:3]

    assert table(memory_md) == table(sharded_md) and len(table(memory_md)) == 3
    headings_m = [line for line in memory_md.splitlines() if line.startswith("## ")]
    headings_s = [line for line in sharded_md.splitlines() if line.startswith("## ")]
    assert headings_s == headings_m  # the fpr evaluator's sections too (calibrate_builtins/evaluators/fpr_sharded.py)
    assert "## What the thresholds cost genuine users" in headings_s and "## Pictures" in headings_s
