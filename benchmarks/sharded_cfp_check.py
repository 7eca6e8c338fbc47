"""Issue 43's check of a sharded run against the in-memory run on real galleries: CFP frontal (dlib) or a BSSR1 matrix.

    .venv/bin/python benchmarks/sharded_cfp_check.py --data /work/shared/data/cfp-frontal-dlib/cfp_frontal_dlib.npz \
        --work /tmp/cfp-check [--address tcp://127.0.0.1:8799] [--same-group]
    .venv/bin/python benchmarks/sharded_cfp_check.py --gallery bssr1 \
        --data /work/shared/data/bssr1-set1/face-C.csv --work /tmp/bssr1-check [--address ...] [--same-group]

Writes bob score lists whole (all.txt) and in 5 shards of about a fifth of the claimed classes each (shards/, the same
lines in the same order), and a groups file. ``--gallery cfp``: cosine similarities, template = each identity's first
image, probes = the other nine images of every identity (500 x 4,500 comparisons), ``upper: 1``. ``--gallery bssr1``:
a 517 x 517 BSSR1 matrix as it is (rows are probes, columns the claimed classes, the diagonal genuine; its -1 entries
kept and read as ``missing: -1``), ``upper:`` 1 for scores in [0, 1], else the matrix's largest score plus 1 (the
fingerprint's integer scores; no impostor distance 0). Neither has group labels, so the identities are split by a
fixed random draw (seed 43, about 30% in group A, the rest in B). Runs auto (and generic-interp) on both with
``transform: similarity-to-distance`` and the groups file: in memory (score-list, serial) and sharded (score-shards on
the dask scheduler at ``--address``, else serial). Prints one JSON object: each run's note on auto's choice, the
largest relative difference of the thresholds, and whether results.json's figures per group are the same (counts
exact, rates within 1e-12); exit 1 when they differ.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import yaml


def cfp_scores(data: Path) -> tuple:
    """Claimed ids, (classes, probes) similarities, each probe's identity and name; the largest possible score."""
    z = np.load(data, allow_pickle=False)
    x, y = z["X"].astype(np.float64), z["y"].astype(str)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    ids = sorted(set(y.tolist()))
    first = np.array([np.flatnonzero(y == c)[0] for c in ids])
    probes = np.setdiff1d(np.arange(y.size), first)
    return ids, x[first] @ x[probes].T, y[probes], [f"img{p:05d}" for p in probes], 1.0


def bssr1_scores(data: Path) -> tuple:
    """A BSSR1 matrix transposed to (claimed classes, probes); ``upper`` 1 for scores within [0, 1], else the largest
    score plus 1."""
    import csv

    with open(data, newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    ids, rowids = rows[0][1:], [r[0] for r in rows[1:]]
    sims = np.array([[float(v) for v in r[1:]] for r in rows[1:]]).T
    upper = 1.0 if sims.max() <= 1.0 else float(sims.max()) + 1.0
    return ids, sims, np.array(rowids), [f"p{i:03d}" for i in range(len(rowids))], upper


def write_scores(gallery: str, data: Path, work: Path, shards: int = 5) -> float:
    ids, sims, real, names, upper = (cfp_scores if gallery == "cfp" else bssr1_scores)(data)
    (work / "shards").mkdir(parents=True, exist_ok=True)
    lines_all = []
    for s, part in enumerate(np.array_split(np.arange(len(ids)), shards)):
        lines = [f"{ids[i]} {real[j]} {names[j]} {float(sims[i, j])!r}" for i in part for j in range(len(names))]
        (work / "shards" / f"shard{s:02d}.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
        lines_all += lines
    (work / "all.txt").write_text("\n".join(lines_all) + "\n", encoding="utf-8")
    rng = np.random.default_rng(43)
    groups = ["A" if u < 0.3 else "B" for u in rng.random(len(ids))]
    (work / "groups.csv").write_text("class,group\n" + "".join(f"{c},{g}\n" for c, g in zip(ids, groups)),
                                     encoding="utf-8")
    (work / "upper.json").write_text(json.dumps(upper), encoding="utf-8")
    return upper


def run(work: Path, name: str, data: dict, executor: dict | None, estimators: list, upper: float) -> tuple:
    import calibrate

    recipe = {"version": 1, "data": data, "transform": {"plugin": "similarity-to-distance", "upper": upper},
              "estimators": estimators, "evaluation": {"targets": [0.01, 0.001], "prediction": False},
              "output": {"dir": str(work / name), "plots": False}}
    if executor:
        recipe["executor"] = executor
    path = work / f"{name}.yaml"
    path.write_text(yaml.safe_dump(recipe), encoding="utf-8")
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = calibrate.run(path)
    return result, time.perf_counter() - t0


def thresholds(files) -> dict:
    import csv

    out = {}
    for f in files:
        with open(f, newline="", encoding="utf-8") as fh:
            for r in csv.DictReader(fh):
                out[(r["estimator"], r["class"], float(r["target_fpr"]))] = float(r["threshold"])
    return out


def same(x, y) -> bool:
    if isinstance(y, dict):
        return isinstance(x, dict) and set(x) == set(y) and all(same(x[k], y[k]) for k in y)
    if isinstance(y, float) and not isinstance(x, bool):
        return x is not None and abs(x - y) <= 1e-12 * abs(y)
    return x == y


def group_figures(doc: dict) -> dict:
    keep = ("groups", "fmr_same_group_max_over_min", "fnmr_max_over_min")
    return {"summary": doc.get("groups"),
            "rows": {label: [{**{k: r.get(k) for k in keep},
                              "one_threshold": {k: r.get("one_threshold", {}).get(k) for k in keep}}
                             for r in est["targets"]] for label, est in doc["estimators"].items()}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gallery", choices=("cfp", "bssr1"), default="cfp",
                    help="cfp: --data is cfp_frontal_dlib.npz; bssr1: --data is a BSSR1 CSV (face-C.csv, finger-left.csv)")
    ap.add_argument("--data", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--address", help="a dask scheduler started outside the run")
    ap.add_argument("--same-group", action="store_true", help="calibrate against same-group impostors")
    args = ap.parse_args()
    work = Path(args.work)
    if not (work / "all.txt").exists():
        write_scores(args.gallery, Path(args.data), work)
    upper = json.loads((work / "upper.json").read_text())
    extra = {"kind": "similarity", "groups": str(work / "groups.csv")}
    if args.gallery == "bssr1":
        extra["missing"] = -1
    if args.same_group:
        extra["impostors"] = "same-group"
    estimators = [{"plugin": "auto"}, {"plugin": "generic-interp"}]
    tag = "-same-group" if args.same_group else ""
    memory, t_memory = run(work, f"memory{tag}", {"plugin": "score-list", "path": str(work / "all.txt"), **extra},
                           None, estimators, upper)
    executor = {"plugin": "dask", "address": args.address} if args.address else None
    sharded, t_sharded = run(work, f"sharded{tag}", {"plugin": "score-shards", "path": str(work / "shards"), **extra},
                             executor, estimators, upper)
    a = thresholds(sorted(sharded.out_dir.glob("thresholds-part*.csv")))
    b = thresholds([memory.out_dir / "thresholds.csv"])
    worst = (max(abs(a[k] - b[k]) / abs(b[k]) if b[k] else abs(a[k]) for k in b) if set(a) == set(b)
             else float("inf"))
    ra = json.loads((sharded.out_dir / "results.json").read_text())
    rb = json.loads((memory.out_dir / "results.json").read_text())
    chose = {name: [n for n in r.notes if "auto chose" in n or "no choice can be made" in n]
             for name, r in (("memory", memory), ("sharded", sharded))}
    out = {"gallery": f"{args.gallery}: {args.data}", "seconds": {"memory": round(t_memory, 1), "sharded": round(t_sharded, 1)},
           "executor": executor or "serial", "same_group": args.same_group, "chose": chose,
           "same_choice": chose["memory"] == chose["sharded"], "thresholds": len(b),
           "max_relative_difference": worst, "group_figures_same": same(group_figures(ra), group_figures(rb)),
           "warnings_same": [n for n in sharded.notes if n.startswith("WARNING")]
                            == [n for n in memory.notes if n.startswith("WARNING")],
           "fpr_ratios": {label: [round(r["ratio"], 3) for r in est["targets"]]
                          for label, est in ra["estimators"].items()}}
    print(json.dumps(out, indent=1))
    if not (out["same_choice"] and worst <= 1e-9 and out["group_figures_same"] and out["warnings_same"]):
        sys.exit(1)


if __name__ == "__main__":
    main()
