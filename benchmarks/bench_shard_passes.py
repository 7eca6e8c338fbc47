"""Where a sharded run's time goes per shard, with no cluster in the way, against another source tree.

    .venv/bin/python benchmarks/bench_shard_passes.py --shards 10 --rounds 2 [--baseline /tmp/base]

Writes ``--shards`` Parquet shard pairs of 1,000 classes x (1,000 training + 100 evaluation) impostor
distances (run_scale.py's generator and layout), then runs run_scale's recipe (auto and ncx2-grid fast mode,
``score-shards``) with the serial executor, one process, in a subprocess per run: this tree, and with
``--baseline`` the same recipe by another source tree (``git archive COMMIT | tar -x -C DIR``; imported through
PYTHONPATH), interleaved round by round so that the machine's load hits both. Prints each run's stage times
(results.json), seconds per shard, the ratio baseline / this tree per stage (medians over rounds), and whether
the two trees wrote the same thresholds, models and calibration parts, byte for byte.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
RUN = """
import json, sys, time, warnings
warnings.simplefilter("ignore")
from calibrate.api import run
from calibrate.base import RunContext  # the former name: a baseline tree may predate issue 33's
t = time.perf_counter()
result = run(sys.argv[1], context=RunContext(seed=0))
print(json.dumps({"seconds": time.perf_counter() - t, "stages": result.timings}))
"""


def one_run(root: Path, name: str, tree: Path | None) -> dict:
    out = root / name
    shutil.rmtree(out, ignore_errors=True)
    recipe = yaml.safe_load((root / "recipe.yaml").read_text())
    recipe["output"]["dir"] = str(out)
    path = root / f"{name}.yaml"
    path.write_text(yaml.safe_dump(recipe))
    env = dict(os.environ)
    if tree is not None:
        env["PYTHONPATH"] = f"{tree}{os.pathsep}{tree / 'plugins'}"
    done = subprocess.run([sys.executable, "-c", RUN, str(path)], env=env, capture_output=True, text=True, cwd=root)
    if done.returncode:
        raise RuntimeError(f"{name}: the run failed:\n{done.stderr[-3000:]}")
    got = json.loads(done.stdout.strip().splitlines()[-1])
    got["load"] = round(os.getloadavg()[0], 2)
    return got


def same_parts(a: Path, b: Path) -> bool:
    names = sorted(p.name for p in a.iterdir() if "part" in p.name or p.name.startswith("pooled-"))
    return names == sorted(p.name for p in b.iterdir() if "part" in p.name or p.name.startswith("pooled-")) and all(
        (a / n).read_bytes() == (b / n).read_bytes() for n in names)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shards", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--baseline", type=Path, help="another source tree (its calibrate/ and plugins/)")
    ap.add_argument("--tmp", help="folder for the shards and outputs (default: the system's temp)")
    args = ap.parse_args()
    sys.path.insert(0, str(HERE))
    import run_scale

    root = Path(tempfile.mkdtemp(prefix="calibrate-passes-", dir=args.tmp))
    try:
        (root / "train").mkdir()
        (root / "test").mkdir()
        for k in range(args.shards):
            run_scale._write_shard((str(root), k, k * 1000, 1000, 0))
        recipe = {"version": 1, "data": {"plugin": "score-shards", "train": str(root / "train"),
                                         "test": str(root / "test"), "kind": "distance"},
                  "estimators": [{"plugin": "auto"}, {"plugin": "ncx2-grid", "name": "ncx2-fast", "mode": "fast"}],
                  "evaluation": {"targets": run_scale.TARGETS}, "output": {"dir": "", "plots": False}, "seed": 0}
        (root / "recipe.yaml").write_text(yaml.safe_dump(recipe))
        runs: dict[str, list[dict]] = {"this": [], "baseline": []}
        for r in range(args.rounds):
            for label, tree in (("baseline", args.baseline), ("this", None)):
                if label == "baseline" and tree is None:
                    continue
                got = one_run(root, f"out-{label}", tree)
                runs[label].append(got)
                stages = ", ".join(f"{k} {v:.2f}" for k, v in got["stages"].items() if v >= 0.005)
                print(f"round {r + 1} {label}: {got['seconds']:.2f} s = {got['seconds'] / args.shards:.3f} s per shard "
                      f"(load {got['load']}); {stages}", flush=True)
        if args.baseline is not None:
            def med(label, key=None):
                return statistics.median(g["seconds"] if key is None else g["stages"].get(key, 0.0) for g in runs[label])

            print(f"median: baseline {med('baseline'):.2f} s, this tree {med('this'):.2f} s: "
                  f"{med('baseline') / med('this'):.2f}x")
            for key in runs["this"][0]["stages"]:
                if med("this", key) >= 0.005:
                    print(f"  {key}: {med('baseline', key):.2f} -> {med('this', key):.2f} s")
            print("same thresholds, models, calibration parts and pooled sample (bytes):",
                  same_parts(root / "out-baseline", root / "out-this"))
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
