"""Run a scale recipe (e.g. benchmarks/scale-100k.yaml) and measure throughput and peak memory.

    .venv/bin/python benchmarks/run_scale.py benchmarks/scale-100k.yaml [--classes N] [--workers W]
    .venv/bin/python benchmarks/run_scale.py --scan 1,2 --classes 20000 [--mode fast]
    .venv/bin/python benchmarks/run_scale.py --classes 200000 --json [--workers W | --address tcp://...]

With ``--classes N --json`` (no recipe): the sharded data path. The dask workers generate N classes
x 1,000 training (+ 100 evaluation) impostor distances as Parquet shards of ``--shard-classes``
classes in a temporary folder (synthetic-impostors' generator, block = shard); the same workers read
every shard's scores once (pyarrow to numpy: the read limit, ``read_limit_rows_per_second``); then a
``score-shards`` recipe runs auto and ncx2-grid fast mode through the same cluster (a LocalCluster
of ``--workers``, or the scheduler at ``--address``): ``rows_per_second`` and ``run_over_read_limit``
against it, and ``worker_peak_bytes`` (issue 22 asks for under 1 GB). A second process then fits the same
estimators in memory (calibrate's own Estimator.fit) on ``--check`` sampled classes' shards (auto:
on every class, up to ``--check-auto-max`` classes, since its pooled shape needs all of them) and
compares thresholds. Prints one JSON object; peaks are each process's ``ru_maxrss`` (main process,
every worker, the checking process).

With a recipe: runs it through the pipeline (calibrate.api.run) and reports the wall time of every
stage that reports progress (each ncx2-grid fit: classes/s), the total, and the peak resident
memory of the main process and of main + executor worker processes together (sampled every 0.2 s
with psutil). ``--classes``/``--workers`` override the recipe's (for a quick try).

With ``--scan``: fits ``--classes`` generated classes (synthetic-impostors' generator, 1,000
distances each) with ncx2-grid on a dask LocalCluster of each listed worker count, one after the
other, and prints classes/s per worker count (the fit only, data already in memory).
"""

from __future__ import annotations

import argparse
import os
import threading
import time
from pathlib import Path

import numpy as np
import psutil
import yaml

from calibrate.base import RunContext


class Memory:
    """Peak RSS of this process and of this process + its children, sampled in a thread."""

    def __init__(self, every: float = 0.2):
        self.every, self.main, self.total = every, 0, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        me = psutil.Process()
        while not self._stop.is_set():
            try:
                rss = me.memory_info().rss
                kids = sum(c.memory_info().rss for c in me.children(recursive=True))
            except psutil.Error:
                continue
            self.main, self.total = max(self.main, rss), max(self.total, rss + kids)
            time.sleep(self.every)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


class Stages:
    """A progress hook that records when each tracked stage starts and ends."""

    def __init__(self):
        self.times: list[tuple[str, float, float]] = []

    def __call__(self, items, description, total):
        start = time.perf_counter()
        for item in items:
            yield item
        self.times.append((description, start, time.perf_counter()))


def run_recipe(path: Path, classes: int | None, workers: int | None) -> None:
    from calibrate.api import run

    raw = yaml.safe_load(path.read_text())
    if classes or workers:
        if classes:
            raw["data"]["classes"] = classes
        if workers:
            raw["executor"]["workers"] = workers
        raw["output"]["dir"] = str((path.parent / raw["output"]["dir"]).resolve()) + f"-{classes or 'all'}"
        path = Path("/tmp") / f"{path.stem}-override.yaml"
        path.write_text(yaml.safe_dump(raw))
    n = raw["data"]["classes"]
    stages = Stages()
    t0 = time.perf_counter()
    with Memory() as mem:
        result = run(path, context=RunContext(progress=stages, seed=raw.get("seed", 0)))
    total = time.perf_counter() - t0
    print(f"recipe {path.name}: {n} classes, executor {raw.get('executor')}, cpus {os.cpu_count()}")
    for desc, a, b in stages.times:
        extra = f" -> {n / (b - a):.0f} classes/s" if "ncx2-grid" in desc else ""
        print(f"  {desc}: {b - a:.1f} s{extra}")
    print(f"  total wall time {total:.1f} s; peak RSS main {mem.main / 2**30:.2f} GB, main + workers {mem.total / 2**30:.2f} GB")
    for label, rows in result.results.items():
        print(f"  {label}: " + ", ".join(f"target {r.target_fpr:g}: FPR {r.fpr:.5f} (ratio {r.ratio:.2f})" for r in rows))
    print(f"  outputs in {result.out_dir}")


def scan(workers: list[int], classes: int, mode: str) -> None:
    from calibrate.types import ImpostorDistances
    from calibrate_builtins.executors.cluster import Dask
    from calibrate_builtins.estimators.ncx2.grid import Ncx2Grid
    from calibrate_builtins.datasets.synthetic_impostors import impostor_distances

    values, _ = impostor_distances(classes, 1000, seed=1)
    imp = ImpostorDistances(tuple(f"c{i}" for i in range(classes)), np.ascontiguousarray(values.T).ravel(),
                            np.arange(classes + 1) * 1000)
    del values
    for w in workers:
        with Dask(workers=w) as ex:
            ex.map(abs, list(range(4 * w)))  # workers up and warm
            t0 = time.perf_counter()
            with Memory() as mem:
                Ncx2Grid(mode=mode).fit(imp, RunContext(executor=ex))
            dt = time.perf_counter() - t0
        print(f"scan mode={mode} workers={w}: {classes} classes in {dt:.1f} s -> {classes / dt:.0f} classes/s "
              f"({classes / dt / w:.0f} per worker); peak RSS main + workers {mem.total / 2**30:.2f} GB; "
              f"load {os.getloadavg()[0]:.2f}", flush=True)


# ---- the sharded data path -------------------------------------------------------------------

TRAIN, TEST = 1000, 100
TARGETS = [0.005, 0.0025, 0.001, 0.0005]


def _peak_rss() -> int:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: kB


def _write_shard(args) -> int:
    """One shard pair (train/, test/) of ``classes`` classes, generated on a worker."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from calibrate_builtins.datasets.synthetic_impostors import impostor_block

    folder, index, first, classes, seed = args
    values, _ = impostor_block(np.random.default_rng([seed, index]), classes, TRAIN + TEST, 0.2)
    names = pa.array([f"c{first + j:07d}" for j in range(classes)])
    for role, rows in (("train", range(0, TRAIN)), ("test", range(TRAIN, TRAIN + TEST))):
        probes = pa.array([f"imp{r}" for r in rows])
        n = len(rows)
        claimed = pa.DictionaryArray.from_arrays(pa.array(np.repeat(np.arange(classes, dtype=np.int32), n)), names)
        probe = pa.DictionaryArray.from_arrays(pa.array(np.tile(np.arange(n, dtype=np.int32), classes)), probes)
        score = pa.array(np.ascontiguousarray(values[rows.start:rows.stop].T).ravel())
        table = pa.table({"claimed_id": claimed, "real_id": probe, "test_label": probe, "score": score})
        pq.write_table(table, Path(folder) / role / f"shard{index:05d}.parquet", compression="snappy")
    return classes


def _read_rows(path: str) -> int:
    """Read one shard as a run must at least: pyarrow reads the file (every column: the labels are needed
    too), the scores become a numpy array."""
    import pyarrow.parquet as pq

    return int(pq.read_table(path).column("score").to_numpy().size)


def sharded(args) -> dict:
    import json
    import shutil
    import subprocess
    import sys
    import tempfile

    from calibrate.api import run
    from calibrate_builtins.executors.cluster import Dask

    root = Path(tempfile.mkdtemp(prefix="calibrate-scale-", dir=args.tmp))
    (root / "train").mkdir()
    (root / "test").mkdir()
    n, per = args.classes, args.shard_classes
    shards = [(str(root), k, k * per, min(per, n - k * per), args.seed) for k in range((n + per - 1) // per)]
    estimators = [{"plugin": "auto"}] + ([{"plugin": "ncx2-grid", "name": "ncx2-fast", "mode": "fast"}]
                                          if not args.no_ncx2 else [])
    recipe = {"version": 1, "data": {"plugin": "score-shards", "train": str(root / "train"),
                                     "test": str(root / "test"), "kind": "distance"},
              "estimators": estimators, "evaluation": {"targets": TARGETS},
              "output": {"dir": str(root / "out"), "plots": False}, "seed": 0}
    (root / "recipe.yaml").write_text(yaml.safe_dump(recipe))
    out: dict = {"classes": n, "shards": len(shards), "shard_classes": per, "train_per_class": TRAIN,
                 "test_per_class": TEST, "estimators": [e.get("name", e["plugin"]) for e in estimators],
                 "cluster": args.address or f"LocalCluster({args.workers} workers, 1 thread each)", "cpus": os.cpu_count()}
    try:
        executor = Dask(address=args.address) if args.address else Dask(workers=args.workers)
        with executor as ex:
            client = ex._client
            t0 = time.perf_counter()
            made = sum(client.gather(client.map(_write_shard, shards, pure=False)))
            out["generate_seconds"] = round(time.perf_counter() - t0, 2)
            assert made == n
            out["shard_bytes"] = sum(p.stat().st_size for p in root.rglob("*.parquet"))
            out["load_average_start"] = round(os.getloadavg()[0], 2)
            # the read limit: the same workers read every shard's scores once (pyarrow, to numpy), nothing else
            files = sorted(str(p) for p in root.rglob("*.parquet"))
            t0 = time.perf_counter()
            rows = sum(client.gather(client.map(_read_rows, files, pure=False)))
            read_seconds = time.perf_counter() - t0
            t0 = time.perf_counter()
            result = run(root / "recipe.yaml", context=RunContext(executor=ex, seed=0))
            out["seconds"] = round(time.perf_counter() - t0, 2)
            out["load_average_end"] = round(os.getloadavg()[0], 2)
            out["classes_per_second"] = round(n / out["seconds"], 1)
            out["rows"] = rows
            out["read_limit_seconds"] = round(read_seconds, 2)
            out["read_limit_rows_per_second"] = round(rows / read_seconds)
            out["rows_per_second"] = round(rows / out["seconds"])
            out["run_over_read_limit"] = round(out["seconds"] / read_seconds, 2)
            out["stage_seconds"] = {k: round(v, 2) for k, v in result.timings.items()}
            peaks = client.run(_peak_rss)
            out["workers"] = len(peaks)
            out["worker_peak_bytes"] = max(peaks.values())
            out["worker_peaks_bytes"] = sorted(peaks.values())
            out["worker_peak_under_1gb"] = max(peaks.values()) < 1e9
        out["main_peak_bytes"] = _peak_rss()
        out["ratios"] = {label: [round(r.ratio, 3) for r in rows] for label, rows in result.results.items()}
        out["output_bytes"] = sum(p.stat().st_size for p in (root / "out").iterdir())
        check = subprocess.run([sys.executable, __file__, "--check-dir", str(root), "--check", str(args.check),
                                "--check-auto-max", str(args.check_auto_max)], capture_output=True, text=True)
        if check.returncode != 0:
            raise RuntimeError(f"the in-memory check failed:\n{check.stderr[-3000:]}")
        out["check"] = json.loads(check.stdout)
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
        else:
            out["kept"] = str(root)
    return out


def check_in_memory(root: Path, sample: int, auto_max: int) -> dict:
    """Fit in memory with the estimators' own fit and compare thresholds on a sample of classes."""
    import csv

    from calibrate.types import ImpostorDistances
    from calibrate_builtins.datasets.score_shards import ScoreShards
    from calibrate_builtins.estimators.auto import Auto
    from calibrate_builtins.estimators.ncx2.grid import Ncx2Grid

    data = ScoreShards(train=root / "train", test=root / "test", kind="distance")
    shards = data.load(RunContext()).shards
    rng = np.random.default_rng(0)
    chosen = sorted(rng.choice(len(shards), size=min(len(shards), max(1, sample // 100)), replace=False).tolist())

    def impostors(k):
        split = data.read_shard(shards[k], 0)[0]
        return ImpostorDistances.from_matrix(split.train)

    parts = {k: impostors(k) for k in chosen}
    sample_classes = {k: [parts[k].classes[i] for i in
                          sorted(rng.choice(len(parts[k]), size=min(len(parts[k]), 100), replace=False).tolist())]
                      for k in chosen}
    expected: dict = {}
    total = sum(1 for _ in root.glob("train/*.parquet"))
    fitted = {}
    labels = [e.get("name", e["plugin"]) for e in yaml.safe_load((root / "recipe.yaml").read_text())["estimators"]]
    if "ncx2-fast" in labels:
        fitted["ncx2-fast"] = {k: Ncx2Grid(mode="fast").fit(parts[k]) for k in chosen}
    out = {"sampled_classes": sum(len(v) for v in sample_classes.values()), "sampled_shards": len(chosen)}
    all_classes = total * len(parts[chosen[0]])
    if all_classes <= auto_max:
        whole = [impostors(k) if k not in parts else parts[k] for k in range(total)]
        allimp = ImpostorDistances(tuple(c for p in whole for c in p.classes), np.concatenate([p.values for p in whole]),
                                   np.concatenate([[0], np.cumsum(np.concatenate([p.counts() for p in whole]))]))
        del whole
        model = Auto().fit(allimp)
        del allimp
        fitted["auto"] = {k: model for k in chosen}
        out["auto_checked"] = True
    else:
        out["auto_checked"] = False
        out["auto_not_checked_because"] = f"{all_classes} classes > --check-auto-max {auto_max} (in memory, about 30 bytes per distance)"
    for label, models in fitted.items():
        for k in chosen:
            table = models[k].thresholds(TARGETS)
            index = {c: i for i, c in enumerate(table.classes)}
            for c in sample_classes[k]:
                for j, t in enumerate(TARGETS):
                    expected[(label, c, t)] = float(table.values[index[c], j])
    got = {}
    for k in chosen:
        with open(root / "out" / f"thresholds-part{k:05d}.csv", newline="") as fh:
            for r in csv.DictReader(fh):
                key = (r["estimator"], r["class"], float(r["target_fpr"]))
                if key in expected:
                    got[key] = float(r["threshold"])
    assert set(got) == set(expected), "the sampled classes are missing from the partitioned thresholds"
    worst = {}
    for (label, c, t), v in expected.items():
        worst[label] = max(worst.get(label, 0.0), abs(got[(label, c, t)] / v - 1))
    out["max_relative_difference"] = worst
    out["compared_thresholds"] = len(expected)
    out["saved_calibration"] = time_saved_calibration(root, [c for k in chosen for c in sample_classes[k]])
    out["check_peak_bytes"] = _peak_rss()
    return out


def time_saved_calibration(root: Path, classes: list[str]) -> dict:
    """How long the saved partitioned calibration takes to open and answer (auto, target 0.1%)."""
    import calibrate

    t0 = time.perf_counter()
    cal = calibrate.load(root / "out", "auto")
    opened = time.perf_counter() - t0
    t0 = time.perf_counter()
    cal.threshold(classes[0], 0.001)
    first = time.perf_counter() - t0  # reads the class index and one part
    t0 = time.perf_counter()
    for c in classes:
        cal.threshold(c, 0.001)
    rest = time.perf_counter() - t0  # the sampled classes' parts (at most 16 cached, so each read once)
    t0 = time.perf_counter()
    for _ in range(10):
        for c in classes:
            cal.threshold(c, 0.001)
    cached = (time.perf_counter() - t0) / (10 * len(classes))
    return {"open_seconds": round(opened, 4), "first_threshold_seconds": round(first, 3),
            "sampled_classes_seconds": round(rest, 3), "threshold_cached_microseconds": round(cached * 1e6, 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("recipe", nargs="?")
    ap.add_argument("--classes", type=int)
    ap.add_argument("--workers", type=int)
    ap.add_argument("--scan", help="comma-separated worker counts, e.g. 1,2")
    ap.add_argument("--mode", default="fast", choices=["fast", "exact"])
    ap.add_argument("--json", action="store_true", help="the sharded data path; print one JSON object")
    ap.add_argument("--address", help="--json: a dask scheduler address instead of a LocalCluster")
    ap.add_argument("--shard-classes", type=int, default=1000, help="--json: classes per shard")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-ncx2", action="store_true", help="--json: auto only")
    ap.add_argument("--check", type=int, default=500, help="--json: classes compared with the in-memory fit")
    ap.add_argument("--check-auto-max", type=int, default=200_000,
                    help="--json: check auto in memory (all classes) up to this many classes")
    ap.add_argument("--tmp", help="--json: folder for the shards and outputs (default: the system's temp)")
    ap.add_argument("--keep", action="store_true", help="--json: keep the shards and outputs")
    ap.add_argument("--check-dir", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.check_dir:
        import json

        print(json.dumps(check_in_memory(Path(args.check_dir), args.check, args.check_auto_max)))
        return
    if args.json:
        import json

        if args.workers is None and not args.address:
            args.workers = 2
        print(json.dumps(sharded(args)), flush=True)
        return
    if args.scan:
        scan([int(w) for w in args.scan.split(",")], args.classes or 20000, args.mode)
    else:
        run_recipe(Path(args.recipe), args.classes, args.workers)


if __name__ == "__main__":
    main()
