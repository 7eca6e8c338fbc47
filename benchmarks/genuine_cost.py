"""What every estimator costs genuine users, and how it treats demographic groups, on every shipped real dataset and
on the synthetic demographic families (issue 29); writes docs/genuine-cost.md.

    .venv/bin/python benchmarks/genuine_cost.py                     # everything (about 10 minutes on 2 cores)
    .venv/bin/python benchmarks/genuine_cost.py --only cfp-frontal-dlib synthetic-groups-fixed
    .venv/bin/python benchmarks/genuine_cost.py --render-only       # the document from the last runs

Per dataset one recipe with every estimator of benchmarks/compare_estimators.py (prediction off: this measures the
evaluation, not the intervals), targets 0.5%, 0.1%, 0.05%, 0.01%; outputs in ``results/genuine-cost/<dataset>/``.
Each estimator's FNR is set beside that of one pooled threshold admitting the same share of the evaluation's
impostor attempts (results.json ``fnr_one_threshold``), with McNemar's paired test on the same genuine attempts.

``--check`` recomputes every ``fnr_one_threshold`` of the score-matrix datasets independently: from the dataset's
evaluation split, by cumulative counts over the distinct score values (no sort of attempts, no binary search, not
calibrate.statistics.verification), and prints the largest difference. Real data files absent from ../shared/data are skipped
with a note; generated data go to ``results/genuine-cost/_data/`` (never into the repository).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
TARGETS = [0.005, 0.001, 0.0005, 0.0001]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from compare_estimators import ESTIMATORS  # noqa: E402  (the same estimator configurations as docs/estimators.md)


def cfp_matrix(path: Path) -> Path | None:
    """CFP frontal, dlib ResNet descriptors (../shared/data/cfp-frontal-dlib): template = each identity's first image,
    probes = its other nine, cosine similarity of L2-normalised descriptors; a score-matrix CSV (6 decimals)."""
    source = DATA / "cfp-frontal-dlib" / "cfp_frontal_dlib.npz"
    if not source.exists():
        return None
    if path.exists():
        return path
    d = np.load(source)
    X = d["X"].astype(np.float64)
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    y, files = d["y"], d["files"]
    order = np.lexsort((files, y))
    X, y = X[order], y[order]
    first = np.r_[True, y[1:] != y[:-1]]
    templates, names = X[first], y[first]
    probes, owners = X[~first], y[~first]
    scores = probes @ templates.T
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="ascii") as fh:
        fh.write("probe," + ",".join(names) + "\n")
        for owner, row in zip(owners, np.char.mod("%.6f", scores)):
            fh.write(owner + "," + ",".join(row) + "\n")
    return path


def datasets(out_root: Path) -> dict[str, dict]:
    bssr1 = DATA / "bssr1-set1"
    yale = DATA / "extended-yale-b" / "CroppedYale"
    out: dict[str, dict] = {}
    cfp = cfp_matrix(out_root / "_data" / "cfp-frontal-dlib.csv")
    if cfp is not None:
        out["cfp-frontal-dlib"] = {
            "about": "CFP frontal faces, dlib's ResNet (a modern matcher not trained on CFP): 500 identities, template = "
                     "first image, 4,500 probes (the other nine), cosine similarity; each class's impostor rows split in "
                     "halves (fit / evaluate), every genuine attempt evaluates.",
            "data": {"plugin": "score-matrix", "path": str(cfp), "kind": "similarity"},
            "transform": {"plugin": "similarity-to-distance", "upper": 1.0}}
    if (bssr1 / "face-C.csv").exists():
        out["bssr1-face-c"] = {
            "about": "NIST BSSR1 face matcher C (2004), 517 x 517 similarity scores; impostor rows split in halves.",
            "data": {"plugin": "score-matrix", "path": str(bssr1 / "face-C.csv"), "kind": "similarity", "missing": -1},
            "transform": {"plugin": "similarity-to-distance", "upper": 1.0}}
    if (bssr1 / "finger-left.csv").exists():
        out["bssr1-finger-left"] = {
            "about": "NIST BSSR1 left index finger, integer similarity scores (many ties); impostor rows split in halves.",
            "data": {"plugin": "score-matrix", "path": str(bssr1 / "finger-left.csv"), "kind": "similarity",
                     "missing": -1},
            "transform": {"plugin": "similarity-to-distance"}}
    if yale.exists():
        out["yale-staggered"] = {
            "about": "Extended Yale B, 38 subjects x 7 image sets by light direction, mutual subspace distance, "
                     "-log(1 - d); staggered enrollment rotated over the 7 positions (7 folds, counts summed).",
            "data": {"plugin": "extended-yale-b", "path": str(yale), "resize": [42, 48], "sets": 7},
            "distance": {"plugin": "mutual-subspace", "components": 6},
            "transform": {"plugin": "neg-log-complement"},
            "evaluation": {"enrollment": "staggered", "rotate": True}}
    for genuine in ("follows", "fixed"):
        out[f"synthetic-groups-{genuine}"] = {
            "about": f"synthetic-groups: 600 classes in two groups of 80% / 20%, same-group impostors 1.5 sd closer, "
                     f"class locations sd 0.5, 3 training and 3 evaluation probes per class; a class's genuine scores "
                     f"{'move with' if genuine == 'follows' else 'do not move with'} its impostor location.",
            "data": {"plugin": "synthetic-groups", "classes": 600, "group_shares": [0.8, 0.2], "train_probes": 3,
                     "test_probes": 3, "genuine": genuine, "seed": 29},
            "groups": True}
    out["synthetic-look-alikes"] = {
        "about": "synthetic-groups, one group: 600 classes whose impostor bulk moves with a class location (sd 1.0) "
                 "while 5% of impostor comparisons are look-alikes scoring 2.5 sd above the crowd whatever the class "
                 "(the nearest impostors do not follow the bulk, as in deep face embeddings); genuine scores fixed.",
        "data": {"plugin": "synthetic-groups", "classes": 600, "group_shares": [1.0], "train_probes": 3,
                 "test_probes": 3, "genuine": "fixed", "class_spread": 1.0, "look_alikes": 0.05,
                 "look_alike_level": 2.5, "separation": 8.0, "seed": 37}}
    out["synthetic-groups-three"] = {
        "about": "synthetic-groups: 600 classes in three groups (60% / 30% / 10%) whose own impostors are 1.0, 1.5 and "
                 "2.0 sd closer (a matcher that separates the small group's faces worst); genuine scores follow.",
        "data": {"plugin": "synthetic-groups", "classes": 600, "group_shares": [0.6, 0.3, 0.1],
                 "within_group": [1.0, 1.5, 2.0], "train_probes": 3, "test_probes": 3, "seed": 31},
        "groups": True}
    return out


def recipe_for(spec: dict, out_dir: Path) -> dict:
    raw = {"version": 1, "data": spec["data"],
           "estimators": [{"plugin": plugin, "name": label, **params} for label, plugin, params, _ in ESTIMATORS],
           "evaluation": {"targets": TARGETS, "prediction": False, **spec.get("evaluation", {})},
           "output": {"dir": str(out_dir), "plots": False, "save_calibration": False}, "seed": 0}
    for key in ("distance", "transform"):
        if key in spec:
            raw[key] = spec[key]
    return raw


def run_one(name: str, spec: dict, out_root: Path) -> None:
    import yaml

    from calibrate.api import validate
    from calibrate.running.pipeline import run_recipe

    out_dir = out_root / name
    out_dir.mkdir(parents=True, exist_ok=True)
    recipe = out_dir / "recipe.yaml"
    recipe.write_text(yaml.safe_dump(recipe_for(spec, out_dir), sort_keys=False), encoding="utf-8")
    started = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run_recipe(validate(recipe))
    (out_dir / "about.json").write_text(json.dumps({"about": spec["about"], "groups": bool(spec.get("groups")),
                                                    "seconds": time.perf_counter() - started}), encoding="utf-8")
    print(f"{name}: {time.perf_counter() - started:.1f} s", flush=True)


def independent_check(name: str, spec: dict, out_root: Path) -> float | None:
    """The largest |difference| between results.json's fnr_one_threshold and a recomputation from the dataset's
    evaluation split by cumulative counts over distinct score values (score-matrix datasets only)."""
    if spec["data"]["plugin"] != "score-matrix":
        return None
    from calibrate.contract.base import RunContext
    from calibrate.contract.manager import build_registry

    params = {k: v for k, v in spec["data"].items() if k != "plugin"}
    params["path"] = Path(params["path"])
    split = build_registry().get("datasets", "score-matrix").factory(**params).load(RunContext())
    test = split.test
    s = test.values if test.kind == "distance" else -test.values
    imp, gen = s[test.impostor_mask()], s[test.genuine_mask()]
    values, inverse = np.unique(np.concatenate([imp, gen]), return_inverse=True)
    imp_at = np.bincount(inverse[:imp.size], minlength=values.size).cumsum()  # impostors <= each distinct value
    gen_at = np.bincount(inverse[imp.size:], minlength=values.size).cumsum()
    doc = json.loads((out_root / name / "results.json").read_text(encoding="utf-8"))
    worst = 0.0
    for rows in doc["estimators"].values():
        for row in rows["targets"]:
            ok = np.flatnonzero(imp_at <= row["false_accepts"])  # thresholds at a distinct value admitting no more
            accepted = gen_at[ok[-1]] if ok.size else 0
            worst = max(worst, abs((1 - accepted / gen.size) - row["fnr_one_threshold"]))
    return worst


def _pct(x) -> str:
    return "n/a" if x is None else f"{100 * x:.3g}%"


def _cell(row: dict) -> str:
    if row.get("fnr") is None:
        return f"{row['ratio']:.2f} · n/a"
    paired = row.get("fnr_paired") or {}
    mark = ""
    if paired.get("beyond_noise"):
        mark = " **+**" if paired["extra_rejects_per_1000"] > 0 else " **−**"
    cost = "n/a" if row.get("fnr_cost") is None else f"{row['fnr_cost']:.2f}x"
    return f"{row['ratio']:.2f} · {_pct(row['fnr'])} ({_pct(row['fnr_one_threshold'])}) {cost}{mark}"


def _spread(x) -> str:
    return "n/a" if x is None else f"{x:.2f}"


BAND = (0.75, 1.33)


def summary(folders: list[Path]) -> list[str]:
    """The default's FNR cost on every dataset, and which estimators beat one threshold while keeping their promise."""
    lines = ["## Summary", "",
             "The default (auto): FNR cost per target (**+**/**−**: beyond noise), and the estimators that turn away "
             f"fewer genuine users than one threshold beyond noise at three or more of the four targets with every "
             f"achieved/target ratio in [{BAND[0]}, {BAND[1]}] (a threshold that misses its FPR target is not a saving).",
             "", "| dataset | auto: " + " | ".join(f"{100 * t:g}%" for t in TARGETS) + " | pays for itself (and keeps "
             "its promise) |", "|---|" + "---|" * (len(TARGETS) + 1)]
    for folder in folders:
        doc = json.loads((folder / "results.json").read_text(encoding="utf-8"))
        cells = []
        for r in doc["estimators"].get("auto", {}).get("targets", []):
            paired = r.get("fnr_paired") or {}
            mark = ("" if not paired.get("beyond_noise") else
                    " **+**" if paired["extra_rejects_per_1000"] > 0 else " **−**")
            cells.append("n/a" if r.get("fnr_cost") is None else f"{r['fnr_cost']:.2f}x{mark}")
        good = []
        for label, rows in doc["estimators"].items():
            rows = rows["targets"]
            saves = sum(1 for r in rows if (r.get("fnr_paired") or {}).get("beyond_noise")
                        and r["fnr_paired"]["extra_rejects_per_1000"] < 0)
            if saves >= 3 and all(BAND[0] <= r["ratio"] <= BAND[1] for r in rows):
                good.append(label)
        lines.append(f"| {folder.name} | " + " | ".join(cells) + f" | {', '.join(good) or 'none'} |")
    return lines + [""]


def render(out_root: Path, checks: dict[str, float | None]) -> str:
    lines = ["# What each estimator costs genuine users, and how it treats groups", "",
             "Generated by `benchmarks/genuine_cost.py` (rerun it to refresh; `--check` recomputes every one-threshold "
             "FNR of the score-matrix datasets independently). Every estimator of docs/estimators.md, prediction "
             "off, targets 0.5%, 0.1%, 0.05%, 0.01%.", "",
             "Each cell: achieved/target FPR · the estimator's FNR (in brackets: the FNR of one pooled threshold, the "
             "same for every class, admitting the same share of that evaluation's impostor attempts: what "
             "`sklearn.metrics.roc_curve` or bob.measure give in one line) and their ratio, the FNR cost; **+** marks an "
             "estimator that turns away more genuine users than the one threshold beyond counting noise (McNemar's exact "
             "test on the same genuine attempts, p < 0.05), **−** one that turns away fewer. The one threshold is an "
             "oracle read off the evaluation data at the FPR the estimator achieved: it judges how the estimator spends "
             "its false accepts across classes, not whether it hits the target.", ""]
    folders = sorted(p for p in out_root.iterdir() if (p / "results.json").exists())
    lines += summary(folders)
    for folder in folders:
        doc = json.loads((folder / "results.json").read_text(encoding="utf-8"))
        about = json.loads((folder / "about.json").read_text(encoding="utf-8"))
        v = doc.get("verification", {})
        lines += [f"## {folder.name}", "", about["about"], "",
                  f"The matcher (one pooled threshold on the evaluation scores): EER {_pct(v.get('eer'))}, AUC "
                  f"{v.get('auc', float('nan')):.4f}, d' {v.get('d_prime', float('nan')):.2f}; FNMR at FMR 0.1% "
                  f"{_pct(v.get('fnmr_at_fmr', {}).get('0.001'))}, at 0.01% {_pct(v.get('fnmr_at_fmr', {}).get('0.0001'))}; "
                  f"{v.get('genuine_attempts', 0):,} genuine and {v.get('impostor_attempts', 0):,} impostor evaluation "
                  f"attempts; {about['seconds']:.0f} s for every estimator."
                  + (f" Independent recomputation of every one-threshold FNR: largest difference {checks[folder.name]:.1e}."
                     if checks.get(folder.name) is not None else ""), "",
                  "| estimator | " + " | ".join(f"{100 * t:g}%" for t in TARGETS) + " |",
                  "|---|" + "---|" * len(TARGETS)]
        for label, rows in doc["estimators"].items():
            lines.append(f"| {label} | " + " | ".join(_cell(r) for r in rows["targets"]) + " |")
        lines.append("")
        if about.get("groups"):
            lines += ["Groups: same-group FMR max/min across groups (one threshold's at the same FPR), then FNMR max/min "
                      "(one threshold's); **w** marks a differential the estimator widens beyond noise.", "",
                      "| estimator | " + " | ".join(f"{100 * t:g}%" for t in TARGETS) + " |", "|---|" + "---|" * len(TARGETS)]
            from calibrate.statistics.verification import widening

            for label, rows in doc["estimators"].items():
                cells = []
                for r in rows["targets"]:
                    ref = r.get("one_threshold", {})
                    marks = []
                    for which in ("fmr_same_group", "fnmr"):
                        said = widening(r.get("groups") or {}, ref.get("groups") or {}, which)
                        marks.append(" **w**" if said and said[1] else "")
                    cells.append(f"{_spread(r.get('fmr_same_group_max_over_min'))} "
                                 f"({_spread(ref.get('fmr_same_group_max_over_min'))}){marks[0]}; "
                                 f"{_spread(r.get('fnmr_max_over_min'))} ({_spread(ref.get('fnmr_max_over_min'))}){marks[1]}")
                lines.append(f"| {label} | " + " | ".join(cells) + " |")
            lines.append("")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="*", help="datasets to run (default: all)")
    parser.add_argument("--render-only", action="store_true")
    parser.add_argument("--check", action="store_true", help="recompute the one-threshold FNRs independently")
    parser.add_argument("--out", default=str(ROOT / "results" / "genuine-cost"))
    parser.add_argument("--doc", default=str(ROOT / "docs" / "genuine-cost.md"))
    args = parser.parse_args()
    out_root = Path(args.out)
    out_root.mkdir(parents=True, exist_ok=True)
    specs = datasets(out_root)
    for missing in ("cfp-frontal-dlib", "bssr1-face-c", "bssr1-finger-left", "yale-staggered"):
        if missing not in specs:
            print(f"note: {missing}: its data are not in {DATA}; skipped", flush=True)
    chosen = {k: v for k, v in specs.items() if not args.only or k in args.only}
    if not args.render_only:
        for name, spec in chosen.items():
            run_one(name, spec, out_root)
    checks = {}
    if args.check:
        for name, spec in specs.items():
            if (out_root / name / "results.json").exists():
                checks[name] = independent_check(name, spec, out_root)
                if checks[name] is not None:
                    print(f"{name}: independent one-threshold FNR, largest difference {checks[name]:.2e}", flush=True)
    Path(args.doc).write_text(render(out_root, checks), encoding="utf-8")
    print(f"wrote {args.doc}")


if __name__ == "__main__":
    main()
