"""What judging a sharded run against one pooled threshold costs (issue 29): a sharded run on shards that hold genuine
attempts, this tree against another, interleaved.

    .venv/bin/python benchmarks/bench_shard_genuine.py --shards 8 --classes 500 --probes 200 --rounds 3 \
        [--baseline /tmp/base]        # DIR: `git archive COMMIT | tar -x -C DIR`, imported through PYTHONPATH

Writes ``--shards`` Parquet shards, each of ``--classes`` claimed classes x (``--probes`` impostor probes + one
genuine probe), distances gamma(5, class scale), genuine gamma(1, 0.3); split per class in halves (fit /
evaluate). Runs auto and generic-interp (``score-shards``, serial executor, prediction off) in a subprocess per
run, interleaved with the baseline, and prints the medians of each run's wall time and of the stage
``one pooled threshold at each achieved FPR`` (this tree only), and its share of the run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import yaml

RUN = """
import json, resource, sys, time, warnings
warnings.simplefilter("ignore")
from calibrate.api import run
t = time.perf_counter()
result = run(sys.argv[1])
print(json.dumps({"seconds": time.perf_counter() - t, "stages": result.timings,
                  "peak_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))
"""


def write_shards(folder: Path, shards: int, classes: int, probes: int, seed: int = 0) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    for s in range(shards):
        names = np.array([f"c{s}_{j}" for j in range(classes)])
        scale = rng.uniform(0.5, 2.0, classes)
        claimed = np.repeat(names, probes + 1)
        real = np.concatenate([np.r_[[f"r{s}_{q}" for q in range(probes)], [n]] for n in names])
        probe = np.concatenate([np.r_[[f"p{s}_{q}" for q in range(probes)], [f"g{s}_{j}"]] for j in range(classes)])
        score = np.concatenate([np.r_[rng.gamma(5, scale[j], probes), rng.gamma(1, 0.3, 1)] for j in range(classes)])
        pq.write_table(pa.table({"claimed_id": claimed, "real_id": real, "test_label": probe, "score": score}),
                       folder / f"shard{s:03d}.parquet")


def one_run(recipe: Path, tree: Path | None) -> dict:
    env = dict(os.environ)
    if tree is not None:
        env["PYTHONPATH"] = f"{tree}:{tree / 'plugins'}"
    done = subprocess.run([sys.executable, "-c", RUN, str(recipe)], capture_output=True, text=True, env=env,
                          timeout=3600)
    if done.returncode:
        raise SystemExit(done.stderr[-3000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shards", type=int, default=8)
    parser.add_argument("--classes", type=int, default=500)
    parser.add_argument("--probes", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--baseline", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        write_shards(root / "shards", args.shards, args.classes, args.probes)
        recipes = {}
        for name in ("this", "baseline"):
            recipe = {"version": 1, "data": {"plugin": "score-shards", "path": str(root / "shards"), "kind": "distance"},
                      "estimators": [{"plugin": "auto"}, {"plugin": "generic-interp"}],
                      "evaluation": {"targets": [0.01, 0.001], "prediction": False},
                      "output": {"dir": str(root / f"out-{name}"), "plots": False}}
            recipes[name] = root / f"{name}.yaml"
            recipes[name].write_text(yaml.safe_dump(recipe), encoding="utf-8")
        runs: dict[str, list] = {"this": [], "baseline": []}
        for _ in range(args.rounds):
            runs["this"].append(one_run(recipes["this"], None))
            if args.baseline is not None:
                runs["baseline"].append(one_run(recipes["baseline"], args.baseline))
        stage = "one pooled threshold at each achieved FPR"
        total = statistics.median(r["seconds"] for r in runs["this"])
        part = statistics.median(r["stages"].get(stage, 0.0) for r in runs["this"])
        comparisons = args.shards * args.classes * (args.probes + 1)
        print(f"{comparisons:,} comparisons in {args.shards} shards; medians of {args.rounds} rounds")
        print(f"this tree: {total:.2f} s; '{stage}' {part:.2f} s ({100 * part / total:.1f}% of the run)")
        if runs["baseline"]:
            base = statistics.median(r["seconds"] for r in runs["baseline"])
            print(f"baseline: {base:.2f} s; this tree / baseline = {total / base:.3f}")


if __name__ == "__main__":
    main()
