"""Is score normalisation worth having? Every real dataset, with and without each normaliser.

    .venv/bin/python benchmarks/normalisation.py                   # all: about 3 min on this 2-core machine
    .venv/bin/python benchmarks/normalisation.py --seeds 2 --only face-C
    .venv/bin/python benchmarks/normalisation.py --render-only     # the tables again, from the last run's JSON

Datasets (real data only, from ../shared/data; absent ones are skipped with a note): the BSSR1 set-1
score matrices face-C and finger-left (the two the folder holds), each split per class into fitting
and evaluation rows by ``seed`` (``--seeds`` splits: 0, 1, ...), as examples/bssr1-*.yaml; and Extended
Yale B with examples/paper-yale.yaml's distances (mutual subspace, 7 image sets per subject, every set
enrolled in turn: one protocol, so one "seed").

Per dataset and split, one recipe per variant: no normaliser, then znorm, tnorm, snorm and asnorm (top_k
default: 200, or a row's whole cohort where smaller), with the estimators auto (the default) and
generic-interp, predicted intervals on (the default), run back to back in this process. The cohort is
the rest of the gallery (no cohort files exist for these data): class j's training impostors, and each
probe's distances to the other enrolled classes.

Printed per dataset and estimator: at each target the FNR and the achieved/target FPR ratio (means over
splits) for every variant side by side; the ratio band (smallest and largest ratio over splits and
targets) and the share of those cells within [0.67, 1.5]; the predicted-interval coverage (share of
cells whose achieved FPR lies in the 90% interval predicted for that many attempts); and the added
time: the normalised run's wall-clock time over the plain run's, median over splits (back to back in
one process, after an untimed warm-up run of the dataset), and the normalise stage's own share of its run
(which the machine's other load affects less). Results: results/normalisation/results.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
OUT = ROOT / "results" / "normalisation"
TARGETS = [0.005, 0.0025, 0.001, 0.0005]
BAND = (0.67, 1.5)
ESTIMATORS = ("auto", "generic-interp")
VARIANTS = ("none", "znorm", "tnorm", "snorm", "asnorm")


def _matrix(path: Path, transform: dict):
    def recipe(seed: int) -> dict:
        return {"data": {"plugin": "score-matrix", "path": str(path), "kind": "similarity", "missing": -1,
                         "seed": seed}, "transform": transform}
    return recipe


def _yale(seed: int) -> dict:
    paper = ROOT / "examples" / "paper-yale.yaml"
    import yaml

    raw = yaml.safe_load(paper.read_text())
    raw["data"]["path"] = str((paper.parent / raw["data"]["path"]).resolve())
    return {"data": raw["data"], "distance": raw["distance"], "transform": raw["transform"],
            "evaluation": {"enrollment": raw["evaluation"]["enrollment"], "rotate": raw["evaluation"]["rotate"]}}


#: name -> (file that must exist, recipe builder by split seed, splits it has)
DATASETS = {
    "face-C": (DATA / "bssr1-set1" / "face-C.csv",
               _matrix(DATA / "bssr1-set1" / "face-C.csv", {"plugin": "similarity-to-distance", "upper": 1.0}), None),
    "finger-left": (DATA / "bssr1-set1" / "finger-left.csv",
                    _matrix(DATA / "bssr1-set1" / "finger-left.csv", {"plugin": "similarity-to-distance"}), None),
    "yale-b": (DATA / "extended-yale-b" / "CroppedYale", _yale, 1),
}


def recipe_for(name: str, seed: int, variant: str) -> dict:
    base = DATASETS[name][1](seed)
    evaluation = {"targets": TARGETS, **base.pop("evaluation", {})}
    raw = {"version": 1, **base, "estimators": [{"plugin": e} for e in ESTIMATORS], "evaluation": evaluation,
           "output": {"dir": str(OUT / name / f"seed{seed}" / variant), "plots": False, "save_calibration": False}}
    if variant != "none":
        raw["normalizer"] = {"plugin": variant}
    return raw


def run_one(name: str, seed: int, variant: str) -> dict:
    """One recipe: per estimator its per-target figures, the run's seconds and the normalise stage's."""
    import yaml

    from calibrate.api import run

    folder = OUT / name / f"seed{seed}"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{variant}.yaml"
    path.write_text(yaml.safe_dump(recipe_for(name, seed, variant), sort_keys=False))
    started = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = run(path)
    seconds = time.perf_counter() - started
    stage = sum(v for k, v in result.timings.items() if k.startswith("normalise"))
    cells = {label: [{"target": r.target_fpr, "fnr": r.fnr, "ratio": r.ratio,
                      "covers": r.extra.get("predicted_covers")} for r in rows]
             for label, rows in result.results.items()}
    return {"seconds": seconds, "stage_seconds": stage, "run_seconds": sum(result.timings.values()), "cells": cells}


def measure(names: list[str], seeds: int) -> dict:
    out: dict = {"targets": TARGETS, "datasets": {}}
    for name in names:
        path, _, fixed = DATASETS[name]
        if not path.exists():
            print(f"note: {name} skipped: {path} is absent", file=sys.stderr)
            continue
        runs: dict[str, list] = {v: [] for v in VARIANTS}
        run_one(name, 0, "none")  # untimed: the first run reads the files cold and imports what the others reuse
        for seed in range(fixed or seeds):
            for variant in VARIANTS:
                runs[variant].append(run_one(name, seed, variant))
                print(f"{name} seed {seed} {variant}: {runs[variant][-1]['seconds']:.1f} s", file=sys.stderr)
        out["datasets"][name] = runs
        OUT.mkdir(parents=True, exist_ok=True)
        (OUT / "results.json").write_text(json.dumps(out, indent=1))
    return out


def _mean(values: list) -> float | None:
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


def summary(runs: dict, estimator: str) -> dict:
    """Per variant: mean FNR and ratio per target, band, share in band, coverage, time ratio and stage share."""
    out = {}
    base_seconds = [r["seconds"] for r in runs["none"]]
    for variant, reps in runs.items():
        per_target = []
        for k, target in enumerate(TARGETS):
            cells = [r["cells"][estimator][k] for r in reps]
            per_target.append({"target": target, "fnr": _mean([c["fnr"] for c in cells]),
                               "ratio": _mean([c["ratio"] for c in cells])})
        ratios = [r["cells"][estimator][k]["ratio"] for r in reps for k in range(len(TARGETS))]
        covers = [r["cells"][estimator][k]["covers"] for r in reps for k in range(len(TARGETS))]
        known = [c for c in covers if c is not None]
        out[variant] = {
            "targets": per_target, "band": (min(ratios), max(ratios)),
            "in_band": sum(BAND[0] <= x <= BAND[1] for x in ratios) / len(ratios), "cells": len(ratios),
            "coverage": (sum(known) / len(known)) if known else None, "covered_cells": len(known),
            "time_ratio": statistics.median(r["seconds"] / b for r, b in zip(reps, base_seconds)),
            "stage_share": statistics.median(r["stage_seconds"] / r["run_seconds"] for r in reps),
            "stage_seconds": statistics.median(r["stage_seconds"] for r in reps)}
    return out


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.2f}%"


def render(measured: dict) -> str:
    lines = []
    for name, runs in measured["datasets"].items():
        splits = len(runs["none"])
        for estimator in ESTIMATORS:
            s = summary(runs, estimator)
            lines += [f"### {name}, {estimator} ({splits} split{'s' if splits > 1 else ''})", "",
                      "FNR (achieved/target FPR) at each target, means over splits; then the ratio band over every "
                      "split and target, the share of those in [0.67, 1.5], the predicted interval's coverage, and "
                      "the time: normalised run / plain run (median), and the normalise stage's share of its run.", "",
                      "| variant | " + " | ".join(f"{100 * t:g}%" for t in TARGETS)
                      + " | ratio band | in band | coverage | time | stage |",
                      "|---|" + "---|" * (len(TARGETS) + 5)]
            for variant, v in s.items():
                cells = [f"{_pct(t['fnr'])} ({t['ratio']:.2f})" for t in v["targets"]]
                time_cell = "1" if variant == "none" else f"{v['time_ratio']:.2f}x"
                stage = "-" if variant == "none" else f"{100 * v['stage_share']:.0f}% ({v['stage_seconds']:.2f} s)"
                cov = "-" if v["coverage"] is None else f"{v['coverage']:.2f} of {v['covered_cells']}"
                lines.append(f"| {variant} | " + " | ".join(cells) + f" | {v['band'][0]:.2f}-{v['band'][1]:.2f} | "
                             f"{v['in_band']:.2f} | {cov} | {time_cell} | {stage} |")
            lines.append("")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5, help="splits per score matrix (default 5)")
    parser.add_argument("--only", nargs="*", choices=list(DATASETS), help="these datasets only")
    parser.add_argument("--render-only", action="store_true", help="print the tables of the last run's results.json")
    args = parser.parse_args()
    if args.render_only:
        measured = json.loads((OUT / "results.json").read_text())
    else:
        measured = measure(args.only or list(DATASETS), args.seeds)
    print(render(measured))


if __name__ == "__main__":
    main()
