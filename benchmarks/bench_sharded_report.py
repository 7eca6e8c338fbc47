"""What the fpr evaluator's report costs a sharded run (issue 43, part 4: verification figures, det.csv, class
bootstrap, spread of false accepts; running/sharded_eval.py): the same sharded run by this tree and by a tree
without them (``--baseline``: the run's own counts and one-threshold reference only), interleaved, each in a
subprocess.

    git -C . archive 9487c84 | tar -x -C /tmp/base_h43     # the tree before the sharded report
    .venv/bin/python benchmarks/bench_sharded_report.py --baseline /tmp/base_h43 --shards 20 --classes 1000 \
        --probes 200 --rounds 3 [--workers 2]   # a dask LocalCluster of that many workers (default: serial)

Shards as benchmarks/bench_shard_genuine.py writes them (Parquet; per claimed class ``--probes`` impostor probes and
one genuine probe, split per class in halves). Prints, per variant, the median wall time, the median of the stage
``evaluate fpr`` and the main process's peak resident memory, their ratio, and the load average before and after.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).parent))
from bench_shard_genuine import one_run, write_shards  # noqa: E402 (its subprocess run, peak memory included)

def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shards", type=int, default=20)
    parser.add_argument("--classes", type=int, default=1000)
    parser.add_argument("--probes", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workers", type=int, help="a dask LocalCluster of this many workers")
    parser.add_argument("--baseline", type=Path, required=True, help="a tree without the sharded report")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        write_shards(root / "shards", args.shards, args.classes, args.probes)
        recipe = {"version": 1, "data": {"plugin": "score-shards", "path": str(root / "shards"), "kind": "distance"},
                  "estimators": [{"plugin": "auto"}, {"plugin": "generic-interp"}],
                  "evaluation": {"targets": [0.01, 0.001], "prediction": False},
                  "output": {"dir": str(root / "out"), "plots": False}}
        if args.workers:
            recipe["executor"] = {"plugin": "dask", "workers": args.workers}
        path = root / "recipe.yaml"
        path.write_text(yaml.safe_dump(recipe), encoding="utf-8")
        trees = {"this tree": None, "baseline": args.baseline}
        load_before = os.getloadavg()
        runs: dict[str, list] = {name: [] for name in trees}
        for _ in range(args.rounds):
            for name, tree in trees.items():
                runs[name].append(one_run(path, tree))
        load_after = os.getloadavg()
        rows = args.shards * args.classes * (args.probes + 1)
        print(f"{rows:,} comparisons in {args.shards} shards, "
              f"{'dask ' + str(args.workers) + ' workers' if args.workers else 'serial'}; medians of {args.rounds} "
              f"interleaved rounds; load average before {load_before[0]:.2f}, after {load_after[0]:.2f}")
        seconds = {}
        for name, got in runs.items():
            seconds[name] = statistics.median(r["seconds"] for r in got)
            fpr = statistics.median(r["stages"].get("evaluate fpr", 0.0) for r in got)
            peak = statistics.median(r["peak_bytes"] for r in got) / 2**20
            each = ", ".join(format(r["seconds"], ".2f") for r in got)
            print(f"{name}: {seconds[name]:.2f} s (each: {each}); "
                  f"stage 'evaluate fpr' {fpr:.2f} s; main peak {peak:.0f} MiB")
        print(f"this tree / baseline = {seconds['this tree'] / seconds['baseline']:.3f}")


if __name__ == "__main__":
    main()
