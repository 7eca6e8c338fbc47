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
against it, ``worker_peak_bytes`` (issue 32 asks for under 1 GB), the workers' and the main process's CPU
seconds during the run (``worker_cpu_seconds``, ``main_cpu_seconds``: what the machine's other work changes
least) and the load average sampled during the run. A second process then checks the thresholds in bounded
memory (``check_in_memory``): ncx2-grid fitted with its own fit on ``--check // 100`` sampled shards; auto
recomputed for the same classes from every shard, selecting the pooled lowest 1% exactly by its own means
(``streamed_auto``; the run's saved pooled sample must be those floats); and auto's in-memory fit on every
class as well up to ``--check-auto-max`` classes. ``check.passed`` is false (and the exit status 1) when a
compared threshold differs by more than a relative 1e-12. Prints one JSON object; peaks are each process's
``ru_maxrss`` (main process, every worker, the checking process).

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

from calibrate.contract.base import RunContext


class Sampler:
    """Calls ``sample()`` every ``every`` seconds in a thread while a ``with`` block runs (and once at its start)."""

    def __init__(self, every: float):
        self.every = every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def sample(self) -> None:
        raise NotImplementedError

    def _run(self):
        while True:
            self.sample()
            if self._stop.wait(self.every):
                return

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


class Memory(Sampler):
    """Peak RSS of this process and of this process + its children, sampled in a thread."""

    def __init__(self, every: float = 0.2):
        super().__init__(every)
        self.main, self.total, self._me = 0, 0, psutil.Process()

    def sample(self) -> None:
        try:
            rss = self._me.memory_info().rss
            kids = sum(c.memory_info().rss for c in self._me.children(recursive=True))
        except psutil.Error:
            return
        self.main, self.total = max(self.main, rss), max(self.total, rss + kids)


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
    from calibrate.contract.types import ImpostorDistances
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
#: the most classes --json accepts: its check holds about 2% of the 1,000 N training distances (1.6 GB at the most)
MAX_CLASSES = 10_000_000


def _peak_rss() -> int:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: kB


def _cpu() -> tuple[float, float]:
    """This process's CPU seconds so far: (user, system)."""
    import resource

    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime, r.ru_stime


class LoadAverage(Sampler):
    """The 1-minute load average sampled every 5 s while a block runs (the machine is shared: say how busy)."""

    def __init__(self):
        super().__init__(5.0)
        self.samples: list[float] = []

    def sample(self) -> None:
        self.samples.append(os.getloadavg()[0])

    def summary(self) -> dict:
        return {"start": round(self.samples[0], 2), "mean": round(float(np.mean(self.samples)), 2),
                "max": round(max(self.samples), 2), "end": round(os.getloadavg()[0], 2)}


def _write_shard(args) -> int:
    """One shard pair (train/, test/) of ``classes`` classes, generated on a worker; with ``genuine`` > 0, each class
    also has that many genuine comparisons in each (its training impostors' median times U(0.3, 0.8): a class's
    genuine scores move with its impostors, as class-specific thresholds assume)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from calibrate_builtins.datasets.synthetic_impostors import impostor_block

    folder, index, first, classes, seed, genuine = (*args, 0)[:6]
    rng = np.random.default_rng([seed, index])
    values, _ = impostor_block(rng, classes, TRAIN + TEST, 0.2)
    labels = [f"c{first + j:07d}" for j in range(classes)]
    names = pa.array(labels)
    gen = (np.median(values[:TRAIN], axis=0)[None, :] * np.random.default_rng([seed, index, 1]).uniform(
        0.3, 0.8, (2 * genuine, classes))) if genuine else None
    for k, (role, rows) in enumerate((("train", range(0, TRAIN)), ("test", range(TRAIN, TRAIN + TEST)))):
        probes = pa.array([f"imp{r}" for r in rows] + labels)
        n = len(rows)
        claimed = np.repeat(np.arange(classes, dtype=np.int32), n)
        probe = np.tile(np.arange(n, dtype=np.int32), classes)
        score = np.ascontiguousarray(values[rows.start:rows.stop].T).ravel()
        label_codes = probe
        label_names = [f"imp{r}" for r in rows]
        if genuine:  # after the impostor rows: each class's genuine probes (real id: the class)
            own = np.repeat(np.arange(classes, dtype=np.int32), genuine)
            claimed = np.r_[claimed, own]
            probe = np.r_[probe, n + own]
            score = np.r_[score, gen[k * genuine:(k + 1) * genuine].T.ravel()]
            label_codes = np.r_[label_codes, n + np.arange(classes * genuine, dtype=np.int32)]
            label_names += [f"g{role[1]}{q}.{c}" for c in labels for q in range(genuine)]
        table = pa.table({"claimed_id": pa.DictionaryArray.from_arrays(pa.array(claimed), names),
                          "real_id": pa.DictionaryArray.from_arrays(pa.array(probe), probes),
                          "test_label": pa.DictionaryArray.from_arrays(pa.array(label_codes), pa.array(label_names)),
                          "score": pa.array(score)})
        pq.write_table(table, Path(folder) / role / f"shard{index:05d}.parquet", compression="snappy")
    return classes


def write_groups(path: Path, classes: int) -> None:
    """A groups file for the benchmark's classes and impostor probes: two groups by a fixed rule (about 30% in A)."""
    rows = [f"c{j:07d},{'A' if (j * 2654435761) % 10 < 3 else 'B'}" for j in range(classes)]
    rows += [f"imp{r},{'A' if r % 3 == 0 else 'B'}" for r in range(TRAIN + TEST)]
    path.write_text("class,group\n" + "\n".join(rows) + "\n", encoding="utf-8")


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
    shards = [(str(root), k, k * per, min(per, n - k * per), args.seed, args.genuine)
              for k in range((n + per - 1) // per)]
    estimators = [{"plugin": "auto", **({"structure": args.structure} if args.structure else {})}] + ([{"plugin": "ncx2-grid", "name": "ncx2-fast", "mode": "fast"}]
                                          if not args.no_ncx2 else [])
    recipe = {"version": 1, "data": {"plugin": "score-shards", "train": str(root / "train"),
                                     "test": str(root / "test"), "kind": "distance"},
              "estimators": estimators, "evaluation": {"targets": TARGETS, "prediction": not args.no_prediction},
              "output": {"dir": str(root / "out"), "plots": False}, "seed": 0}
    if args.groups:
        write_groups(root / "groups.csv", n)
        recipe["data"]["groups"] = str(root / "groups.csv")
    (root / "recipe.yaml").write_text(yaml.safe_dump(recipe))
    out: dict = {"classes": n, "shards": len(shards), "shard_classes": per, "train_per_class": TRAIN,
                 "genuine_per_class": args.genuine, "groups": bool(args.groups),
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
            before, main_before = client.run(_cpu), _cpu()
            t0 = time.perf_counter()
            with LoadAverage() as load:
                result = run(root / "recipe.yaml", context=RunContext(executor=ex, seed=0))
            out["seconds"] = round(time.perf_counter() - t0, 2)
            out["load_average_end"] = round(os.getloadavg()[0], 2)
            out["load_average_during_run"] = load.summary()
            # CPU seconds the run took, which the machine's other work changes far less than the wall time
            after, main_after = client.run(_cpu), _cpu()
            out["worker_cpu_seconds"] = {"user": round(sum(after[w][0] - before[w][0] for w in after), 1),
                                         "system": round(sum(after[w][1] - before[w][1] for w in after), 1)}
            out["main_cpu_seconds"] = round(main_after[0] - main_before[0] + main_after[1] - main_before[1], 1)
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
        out["auto_chose"] = [note[:160] for note in result.notes if "auto chose" in note or "no choice" in note]
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


#: thresholds of the sharded run and of the check agree within this relative difference (in practice they are equal)
CHECK_RTOL = 1e-12
#: bytes per training distance that auto's in-memory fit on every class holds at its peak (measured, section 7)
IN_MEMORY_BYTES = 60


def _shard_impostors(path: Path, genuine: bool = False):
    """One training shard as the benchmark wrote it (TRAIN impostor rows a class, each class's scores in probe order,
    then its genuine rows), read with pyarrow alone: not through score-shards' reader, whose parsing the check must not
    share. ``genuine``: (impostors, the genuine distances of the same classes)."""
    import pyarrow.parquet as pq

    from calibrate.contract.types import GenuineDistances, ImpostorDistances

    table = pq.read_table(path, columns=["claimed_id", "score"])
    claimed = table.column("claimed_id").unify_dictionaries().combine_chunks()
    names = claimed.dictionary.to_pylist()
    n_imp = len(names) * TRAIN  # the impostor rows come first
    scores = table.column("score").to_numpy()

    def flat(codes, values, kind):
        order = np.argsort(codes, kind="stable")
        counts = np.bincount(codes, minlength=len(names))
        return kind(tuple(names), values[order], np.concatenate([[0], np.cumsum(counts)]).astype(np.int64))

    codes = claimed.indices.to_numpy().astype(np.int64)
    imp = flat(codes[:n_imp], scores[:n_imp], ImpostorDistances)
    return (imp, flat(codes[n_imp:], scores[n_imp:], GenuineDistances)) if genuine else imp


class _Lowest:
    """The ``m`` smallest of values added in pieces, exactly (as a multiset), holding at most about 2m + a piece:
    values above the m-th smallest seen so far are dropped as they come."""

    def __init__(self, m: int):
        self.m, self.parts, self.size, self.cut = m, [], 0, np.inf

    def add(self, values: np.ndarray) -> None:
        kept = values[values <= self.cut]
        self.parts.append(kept)
        self.size += kept.size
        if self.size > 2 * self.m + (1 << 20):
            self._shrink()

    def _shrink(self) -> None:
        values = np.concatenate(self.parts)
        if values.size > self.m:
            values = np.partition(values, self.m - 1)[:self.m]
            self.cut = float(values.max())
        self.parts, self.size = [values], values.size

    def sorted(self) -> np.ndarray:
        self._shrink()
        return np.sort(self.parts[0])


def streamed_auto(root: Path, classes: list[str]) -> tuple[dict, dict]:
    """auto's thresholds for ``classes``, recomputed apart from the run and in bounded memory: every training shard
    read in turn (pyarrow), its distances taken to auto's working scale (calibrate.statistics.standardise.to_working, auto's
    family), and the lowest ``kept_count(N)`` (about 1% of N) of all N kept exactly by :class:`_Lowest` (no
    histogram, no buckets: not the run's selection). The run's own saved pooled sample (pooled-auto.npy) must be
    those very floats; the thresholds come from them and N through auto's model (one pooled threshold: a sharded
    run's auto is structure ``one``). The GPD tail is not recomputed: at these sizes every target lies where the
    empirical quantile is used (at least ``min_tail_count`` pooled values below it, asserted)."""
    import json

    import pyarrow.parquet as pq

    from calibrate.statistics.standardise import ANCHOR_MAX_RANK, to_working
    from calibrate_builtins.estimators.auto import AUTO_CONFIG
    from calibrate_builtins.estimators.pooled import kept_count
    from calibrate_builtins.estimators.znorm import PooledZnormModel

    files = sorted((root / "train").glob("*.parquet"))
    notes = json.loads((root / "out" / "results.json").read_text())["notes"]
    chose = [n for n in notes if n.startswith("auto chose") and not n.startswith("auto chose one pooled")]
    if chose:
        return {}, {"auto_streamed": False, "auto_streamed_not_checked_because": chose[0][:90]}
    n_total = TRAIN * sum(len(pq.read_table(f, columns=["claimed_id"]).column(0).unify_dictionaries().chunk(0).dictionary)
                          for f in files)  # the impostor rows (genuine rows follow them)
    family = AUTO_CONFIG["family"]
    if min(TARGETS) * n_total < AUTO_CONFIG["min_tail_count"]:
        return {}, {"auto_streamed": False, "auto_streamed_not_checked_because": "a target reaches auto's GPD tail"}
    lowest, minimum = _Lowest(kept_count(n_total, TARGETS)), np.inf
    for f in files:
        d = _shard_impostors(f).values
        minimum = min(minimum, float(d.min()))
        lowest.add(to_working(d, family, 0.0))
    if not minimum > 0:  # the benchmark's generator gives positive distances; the offset rule is not redone here
        return {}, {"auto_streamed": False, "auto_streamed_not_checked_because": "a training distance is 0"}
    pooled = lowest.sorted()
    saved = np.load(root / "out" / "pooled-auto.npy")
    n = len(classes)
    model = PooledZnormModel(classes, np.zeros(n), np.ones(n), np.full(n, TRAIN), family, 0.0, pooled, n_total, None,
                             AUTO_CONFIG["min_tail_count"],
                             anchor={"structure": "one", "mean": 0.0, "between_var": 0.0, "max_rank": ANCHOR_MAX_RANK})
    table = model.thresholds(TARGETS)
    expected = {("auto", c, t): float(table.values[i, j]) for i, c in enumerate(classes) for j, t in enumerate(TARGETS)}
    return expected, {"auto_streamed": True, "pooled_values": int(n_total), "pooled_kept": int(pooled.size),
                      "saved_pooled_sample_identical": saved.shape == pooled.shape and saved.tobytes() == pooled.tobytes()}


def _compare(expected: dict, got: dict) -> dict:
    """The largest relative difference per estimator between the run's thresholds and the check's."""
    assert set(got) >= set(expected), "the sampled classes are missing from the partitioned thresholds"
    worst: dict = {}
    for (label, c, t), v in expected.items():
        worst[label] = max(worst.get(label, 0.0), abs(got[(label, c, t)] / v - 1))
    return worst


def check_in_memory(root: Path, sample: int, auto_max: int) -> dict:
    """Compare the sharded run's thresholds with fits made apart from it, in bounded memory, on sampled classes:
    ncx2-grid (per class) fitted in memory with its own fit on ``sample // 100`` sampled shards; auto recomputed on
    the same classes from every shard by :func:`streamed_auto`; and, up to ``auto_max`` classes, auto's own in-memory
    fit on every class as well (about IN_MEMORY_BYTES per training distance). A wrong threshold in the sampled parts
    (or a wrong pooled selection, which moves every auto threshold) shows as a relative difference above CHECK_RTOL,
    and then ``passed`` is false."""
    import csv

    from calibrate.contract.types import GenuineDistances, ImpostorDistances
    from calibrate_builtins.estimators.auto import Auto
    from calibrate_builtins.estimators.ncx2.grid import Ncx2Grid

    files = sorted((root / "train").glob("*.parquet"))
    rng = np.random.default_rng(0)
    chosen = sorted(rng.choice(len(files), size=min(len(files), max(1, sample // 100)), replace=False).tolist())
    parts = {k: _shard_impostors(files[k]) for k in chosen}
    sample_classes = {k: [parts[k].classes[i] for i in
                          sorted(rng.choice(len(parts[k]), size=min(len(parts[k]), 100), replace=False).tolist())]
                      for k in chosen}
    classes = [c for k in chosen for c in sample_classes[k]]
    labels = [e.get("name", e["plugin"]) for e in yaml.safe_load((root / "recipe.yaml").read_text())["estimators"]]
    expected: dict = {}
    if "ncx2-fast" in labels:
        for k in chosen:
            table = Ncx2Grid(mode="fast").fit(parts[k]).thresholds(TARGETS)
            index = {c: i for i, c in enumerate(table.classes)}
            expected.update({("ncx2-fast", c, t): float(table.values[index[c], j])
                             for c in sample_classes[k] for j, t in enumerate(TARGETS)})
    streamed, out = streamed_auto(root, classes)
    in_memory: dict = {}
    all_classes = sum(1 for _ in files) * len(parts[chosen[0]])
    if all_classes <= auto_max:
        whole = [_shard_impostors(f, genuine=True) for f in files]
        allimp = ImpostorDistances(tuple(c for p, _ in whole for c in p.classes),
                                   np.concatenate([p.values for p, _ in whole]),
                                   np.concatenate([[0], np.cumsum(np.concatenate([p.counts() for p, _ in whole]))]))
        genuine = GenuineDistances(allimp.classes, np.concatenate([g.values for _, g in whole]),
                                   np.concatenate([[0], np.cumsum(np.concatenate([g.counts() for _, g in whole]))]))
        del whole
        groups = None
        if "groups" in yaml.safe_load((root / "recipe.yaml").read_text())["data"]:
            from calibrate.contract.types import TrainingGroups
            from calibrate.recipe.groups import read_groups

            labels_ = read_groups(root / "groups.csv")
            probe = labels_.codes(np.array([f"imp{r}" for r in range(TRAIN)]))
            groups = TrainingGroups(labels_.names, labels_.codes(np.array(allimp.classes)), np.tile(probe, len(allimp)))
        table = Auto().fit(allimp, genuine=genuine, groups=groups).thresholds(TARGETS)
        del allimp, genuine
        index = {c: i for i, c in enumerate(table.classes)}
        in_memory = {("auto", c, t): float(table.values[index[c], j]) for c in classes for j, t in enumerate(TARGETS)}
        out["auto_in_memory"] = True
    else:
        out["auto_in_memory"] = False
        out["auto_in_memory_not_checked_because"] = (f"{all_classes} classes > --check-auto-max {auto_max} (about "
                                                     f"{IN_MEMORY_BYTES} bytes per training distance in memory)")
    got = {}
    for k in chosen:
        with open(root / "out" / f"thresholds-part{k:05d}.csv", newline="") as fh:
            for r in csv.DictReader(fh):
                got[(r["estimator"], r["class"], float(r["target_fpr"]))] = float(r["threshold"])
    out["sampled_classes"], out["sampled_shards"] = len(classes), len(chosen)
    out["max_relative_difference"] = _compare({**expected, **streamed}, got)
    if in_memory:
        out["max_relative_difference_auto_in_memory"] = _compare(in_memory, got)["auto"]
    out["compared_thresholds"] = len(expected) + len(streamed) + len(in_memory)
    # auto is checked streamed (structure one) or in memory (up to --check-auto-max classes); a class-specific
    # structure chosen beyond that is not checked here (tests/test_sharded_choice.py and sharded_cfp_check.py are)
    out["auto_checked"] = bool(streamed or in_memory)
    out["passed"] = bool(all(v <= CHECK_RTOL for v in out["max_relative_difference"].values())
                         and out.get("max_relative_difference_auto_in_memory", 0.0) <= CHECK_RTOL
                         and out.get("saved_pooled_sample_identical", True)
                         and bool(streamed or in_memory or "auto" not in labels
                                  or "auto_streamed_not_checked_because" in out and not in_memory
                                  and out["auto_streamed_not_checked_because"].startswith("auto chose")))
    out["saved_calibration"] = time_saved_calibration(root, classes)
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
    ap.add_argument("--check-auto-max", type=int, default=20_000,
                    help=f"--json: also fit auto in memory on every class up to this many classes (about "
                         f"{IN_MEMORY_BYTES * TRAIN / 1e6:.2f} MB a class)")
    ap.add_argument("--genuine", type=int, default=0,
                    help="--json: genuine comparisons per class in each of train/ and test/ (auto's choice needs them)")
    ap.add_argument("--groups", action="store_true", help="--json: a groups file (two groups) in the recipe")
    ap.add_argument("--no-prediction", action="store_true", help="--json: without predicted intervals")
    ap.add_argument("--structure", help="--json: auto's structure fixed (e.g. one: the figures' cost without the choice)")
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
        if not 1 <= (args.classes or 0) <= MAX_CLASSES:
            ap.error(f"--json needs --classes from 1 to {MAX_CLASSES:,} (its shards take about 9.6 KB a class on disk)")
        out = sharded(args)
        print(json.dumps(out), flush=True)
        if not out["check"]["passed"]:
            raise SystemExit("the check failed: the sharded run's thresholds differ from the check's (see \"check\")")
        return
    if args.scan:
        scan([int(w) for w in args.scan.split(",")], args.classes or 20000, args.mode)
    else:
        run_recipe(Path(args.recipe), args.classes, args.workers)


if __name__ == "__main__":
    main()
