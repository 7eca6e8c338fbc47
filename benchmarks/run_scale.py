"""Run a scale recipe (e.g. benchmarks/scale-100k.yaml) and measure throughput and peak memory.

    .venv/bin/python benchmarks/run_scale.py benchmarks/scale-100k.yaml [--classes N] [--workers W]
    .venv/bin/python benchmarks/run_scale.py --scan 1,2 --classes 20000 [--mode fast]

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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("recipe", nargs="?")
    ap.add_argument("--classes", type=int)
    ap.add_argument("--workers", type=int)
    ap.add_argument("--scan", help="comma-separated worker counts, e.g. 1,2")
    ap.add_argument("--mode", default="fast", choices=["fast", "exact"])
    args = ap.parse_args()
    if args.scan:
        scan([int(w) for w in args.scan.split(",")], args.classes or 20000, args.mode)
    else:
        run_recipe(Path(args.recipe), args.classes, args.workers)


if __name__ == "__main__":
    main()
