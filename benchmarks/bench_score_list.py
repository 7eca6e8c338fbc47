"""Reading score lists: rows per second of each reader path of the `score-list` dataset.

    .venv/bin/python benchmarks/bench_score_list.py                 # 1,000 classes x 10,000 probes = 10M rows
    .venv/bin/python benchmarks/bench_score_list.py --classes 100 --probes 1000 --rounds 1

Writes a bob 4-column score list (`claimed_id real_id test_label score`, probe by probe) under
/tmp with numpy (seeded), then times `read_score_list` (parse + the probe x gallery matrix) with
each reader available in this environment, interleaved over rounds (best round reported), and
checks that every reader returns the same matrix. With --pipeline, also runs a recipe on the file
(generic-interp and class-interp, no pictures) and prints its stage timings, to compare reading
with the rest of a run. Results: docs/performance.md, "Reading score lists".
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from pathlib import Path

import numpy as np

from calibrate_builtins.datasets.score_list import pyarrow_available, read_score_list


def long_names(classes: int, seed: int = 0) -> np.ndarray:
    """Class names as long as LFW's (``Firstname_Lastname``, 8 to 32 characters; distinct, seeded)."""
    rng = np.random.default_rng(seed)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    return np.array([f"{''.join(rng.choice(letters, int(rng.integers(3, 14)))).title()}_"
                     f"{''.join(rng.choice(letters, int(rng.integers(3, 12)))).title()}_{j}" for j in range(classes)])


def generate(path: Path, classes: int, probes: int, seed: int = 0, labels: str = "short") -> int:
    """probes x classes comparisons; probe i belongs to class i mod classes; written in blocks with numpy.
    ``labels``: ``short`` (classes ``c00042``, probes ``p1234``) or ``lfw`` (names as long as LFW's, probes
    ``Name/Name_0003.jpg``: 20 to 80 characters)."""
    rng = np.random.default_rng(seed)
    claimed = long_names(classes) if labels == "lfw" else np.array([f"c{j:05d}" for j in range(classes)])
    with open(path, "w", encoding="ascii") as fh:
        step = max(1, 1_000_000 // classes)
        for lo in range(0, probes, step):
            ids = np.arange(lo, min(probes, lo + step))
            real = claimed[ids % classes]
            genuine = real[:, None] == claimed[None, :]
            scores = np.where(genuine, rng.beta(6, 2, genuine.shape), rng.beta(2, 6, genuine.shape))
            probe = probe_labels(real, ids // classes) if labels == "lfw" else np.char.add("p", ids.astype(str))
            cols = [np.broadcast_to(claimed[None, :], genuine.shape).ravel(), np.repeat(real, classes),
                    np.repeat(probe, classes), np.char.mod("%.6f", scores.ravel())]
            lines = np.char.add(np.char.add(np.char.add(np.char.add(cols[0], " "), cols[1]), " "),
                                np.char.add(np.char.add(cols[2], " "), cols[3]))
            fh.write("\n".join(lines.tolist()))
            fh.write("\n")
    return classes * probes


def probe_labels(real: np.ndarray, k: np.ndarray) -> np.ndarray:
    """LFW-like probe labels: ``Name/Name_0003.jpg`` for the (k+1)-th image of class ``Name``."""
    return np.char.add(np.char.add(np.char.add(real, "/"), np.char.add(real, "_")),
                       np.char.add(np.char.zfill((k + 1).astype(str), 4), ".jpg"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--classes", type=int, default=1000)
    ap.add_argument("--probes", type=int, default=10_000)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--file", type=Path, default=Path("/tmp/bench_score_list.txt"))
    ap.add_argument("--keep", action="store_true", help="reuse --file when it exists")
    ap.add_argument("--pipeline", action="store_true", help="also run a recipe on the file and print stage timings")
    args = ap.parse_args()
    n = args.classes * args.probes
    if not (args.keep and args.file.exists()):
        t = time.perf_counter()
        generate(args.file, args.classes, args.probes)
        print(f"wrote {n:,} rows ({args.file.stat().st_size / 1e6:.0f} MB) to {args.file} in {time.perf_counter() - t:.1f} s")
    print(f"{platform.processor() or platform.machine()}, nproc {os.cpu_count()}, load {os.getloadavg()[0]:.1f}, "
          f"numpy {np.__version__}", end="")
    readers = ["python"]
    if pyarrow_available():
        import pyarrow

        print(f", pyarrow {pyarrow.__version__}", end="")
        readers.insert(0, "pyarrow")
    print()
    best: dict[str, float] = {}
    results = {}
    for _ in range(args.rounds):
        for reader in readers:
            t = time.perf_counter()
            m = read_score_list(args.file, reader=reader)
            dt = time.perf_counter() - t
            best[reader] = min(best.get(reader, np.inf), dt)
            results[reader] = m
            del m
    for reader in readers:
        print(f"{reader:8s} {best[reader]:7.2f} s  {n / best[reader]:12,.0f} rows/s")
    ref = results[readers[-1]]
    for reader in readers[:-1]:
        m = results[reader]
        same = all(np.array_equal(getattr(m, f), getattr(ref, f), equal_nan=f == "values")
                   for f in ("values", "valid", "probe_classes", "gallery", "probe_ids"))
        print(f"{reader} == python: {same}")
        assert same
    results.clear()
    if args.pipeline:
        pipeline(args.file)


def pipeline(path: Path) -> None:
    import json
    import tempfile
    import warnings

    import yaml

    import calibrate

    with tempfile.TemporaryDirectory() as tmp:
        recipe = Path(tmp) / "r.yaml"
        recipe.write_text(yaml.safe_dump({
            "version": 1, "data": {"plugin": "score-list", "path": str(path), "kind": "similarity"},
            "estimators": [{"plugin": "generic-interp"}, {"plugin": "class-interp"}],
            "evaluation": {"targets": [0.001, 0.0001]}, "output": {"dir": str(Path(tmp) / "out"), "plots": False}}))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            calibrate.run(recipe)
        timings = json.loads((Path(tmp) / "out" / "results.json").read_text())["timings"]
    print("pipeline (reader auto):", ", ".join(f"{k} {v:.2f} s" for k, v in timings["seconds"].items()),
          f"; total {timings['total']:.2f} s")


if __name__ == "__main__":
    main()
