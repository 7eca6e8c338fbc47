"""Do the predicted FPR intervals cover on real galleries split several ways (issue 40)?

    .venv/bin/python benchmarks/split_coverage.py                       # development families: CFP, BSSR1 (about 1 h)
    .venv/bin/python benchmarks/split_coverage.py --families yale groups # the held-out families
    .venv/bin/python benchmarks/split_coverage.py --render-only          # the tables from the last runs' JSON

Each family is one probe x gallery score matrix whose rows carry the probe's identity (several rows may share one):

* ``cfp`` (development): CFP frontal, dlib's ResNet (../shared/data/cfp-frontal-dlib): template = each identity's
  first image, probes = its other nine, distance = 1 - cosine similarity; 500 identities x 9 probes.
* ``face-c``, ``finger`` (development): NIST BSSR1 face-C and left index finger, 517 x 517, one probe per identity;
  distance = 1 - score (face-C, its failed column dropped) and 1000 - score (finger: integers, many ties).
* ``yale`` (held out): Extended Yale B, 38 subjects, template = the frontally lit image, probes = every other usable
  image (about 63 each); raw pixels at 24 x 21, each image scaled to unit length, distance = Euclidean.
* ``groups`` (held out): the ``synthetic-groups`` dataset (probe locations, look-alikes: scores that cluster by
  probe), 400 classes x 8 probes, its two generated halves pooled.

Splits (per seed, each identity's probe rows drawn at random; an identity with one probe is itself a unit):

* ``halves``: each identity's rows in halves A / B (one-probe families: the identities in halves); fit A, evaluate B;
* ``exchanged``: the same halves, fit B, evaluate A;
* ``tenth``: fit a tenth of A's rows, evaluate B;
* ``one-per-class`` (several probes per identity): fit one row of A per identity, evaluate B;
* ``uneven`` (several probes per identity): as one-per-class, but the evaluation keeps a random 1..all of each
  identity's B rows: the training weights identities equally, the evaluation by their (uneven) image counts.

Per split one run (calibrate.running.pipeline.run_recipe, the default prediction settings) with auto, generic-interp,
class-interp, anchored and ncx2-grid, and auto with ``confidence: 0.95`` (label ``auto-c95``). Per estimator and target
the achieved FPR is counted here, from the evaluation rows and the model's thresholds (not by calibrate's evaluator),
and compared with the interval results.json states for the FPR measured on those attempts
(``predicted_fpr_low/high``). A cell is measurable when at least 20 false accepts are expected (target x attempts).
Outputs (and the generated matrices) go to ``results/split-coverage/``, never into the repository.
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
OUT = ROOT / "results" / "split-coverage"
TARGETS = (0.005, 0.001, 0.0005, 0.0001)
ESTIMATORS = [("auto", "auto", {}), ("generic-interp", "generic-interp", {}), ("class-interp", "class-interp", {}),
              ("anchored", "anchored", {}), ("ncx2-grid", "ncx2-grid", {"dim": [15, 22]}),
              ("auto-c95", "auto", {"confidence": 0.95})]
DEVELOPMENT, HELD_OUT = ("cfp", "face-c", "finger"), ("yale", "groups")
SPLITS = ("halves", "exchanged", "tenth", "one-per-class", "uneven")
MEASURABLE_FA = 20.0


class Family:
    """A score matrix (distances, probes x gallery), each row's identity, the gallery's identities."""

    def __init__(self, name: str, values: np.ndarray, probe: np.ndarray, gallery: np.ndarray):
        self.name, self.values, self.probe, self.gallery = name, values, probe, gallery

    @property
    def several(self) -> bool:
        return bool(np.unique(self.probe, return_counts=True)[1].max() > 1)


def cfp() -> Family | None:
    source = DATA / "cfp-frontal-dlib" / "cfp_frontal_dlib.npz"
    if not source.exists():
        return None
    d = np.load(source)
    X = d["X"].astype(np.float64)
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    y, files = d["y"], d["files"]
    order = np.lexsort((files, y))
    X, y = X[order], y[order]
    first = np.r_[True, y[1:] != y[:-1]]
    return Family("cfp", np.maximum(1.0 - X[~first] @ X[first].T, 0.0), y[~first], y[first])


def bssr1(name: str, file: str, top: float) -> Family | None:
    path = DATA / "bssr1-set1" / file
    if not path.exists():
        return None
    rows = [line.rstrip("\n").split(",") for line in path.read_text().splitlines()]
    gallery = np.array(rows[0][1:])
    probe = np.array([r[0] for r in rows[1:]])
    s = np.array([[float(x) for x in r[1:]] for r in rows[1:]])
    keep = ~np.all(s == -1, axis=0)
    s = s[:, keep]
    if np.any(s == -1):
        raise SystemExit(f"{path}: failed comparisons outside the failed column")
    return Family(name, top - s, probe, gallery[keep])


def yale() -> Family | None:
    root = DATA / "extended-yale-b" / "CroppedYale"
    if not root.exists():
        return None
    from PIL import Image

    images, who, frontal = [], [], []
    for folder in sorted(p for p in root.iterdir() if p.is_dir()):
        for f in sorted(folder.glob("*.pgm")):
            if "Ambient" in f.name:
                continue
            try:
                img = np.asarray(Image.open(f).convert("L").resize((21, 24)), dtype=np.float64).ravel()
            except OSError:
                continue
            images.append(img / max(np.linalg.norm(img), 1e-12))
            who.append(folder.name)
            frontal.append("P00A+000E+00" in f.name)
    X, who, frontal = np.array(images), np.array(who), np.array(frontal)
    names = np.unique(who[frontal])
    templates = np.array([X[frontal & (who == n)][0] for n in names])
    probes = np.isin(who, names) & ~frontal
    d = np.sqrt(np.maximum(((X[probes][:, None, :] - templates[None, :, :]) ** 2).sum(axis=2), 0.0))
    return Family("yale", d, who[probes], names)


def groups() -> Family:
    from calibrate.contract.base import RunContext
    from calibrate_builtins.datasets.synthetic_groups import SyntheticGroups

    split = SyntheticGroups(classes=400, train_probes=4, test_probes=4, probe_spread=0.4, look_alikes=0.002,
                            genuine="fixed", seed=11)._load(RunContext())
    values = np.vstack([split.train.values, split.test.values])
    probe = np.concatenate([split.train.probe_classes, split.test.probe_classes])
    return Family("groups", 1.5 - values, probe, np.asarray(split.train.gallery_classes))


def families(names: list[str]) -> list[Family]:
    makers = {"cfp": cfp, "face-c": lambda: bssr1("face-c", "face-C.csv", 1.0),
              "finger": lambda: bssr1("finger", "finger-left.csv", 1000.0), "yale": yale, "groups": groups}
    out = []
    for n in names:
        fam = makers[n]()
        if fam is None:
            print(f"note: {n}: its data are not in {DATA}; skipped", flush=True)
        else:
            out.append(fam)
    return out


def split_rows(fam: Family, split: str, seed: int) -> tuple[np.ndarray, np.ndarray] | None:
    """(training rows, evaluation rows) of one split, or None where the split does not apply to the family."""
    rng = np.random.default_rng([seed, SPLITS.index(split)])
    rng_halves = np.random.default_rng(seed)  # the same halves for every split of a seed
    ids, inverse = np.unique(fam.probe, return_inverse=True)
    if fam.several:
        a, b = [], []
        for i in range(ids.size):
            rows = rng_halves.permutation(np.flatnonzero(inverse == i))
            a.append(rows[:rows.size // 2])
            b.append(rows[rows.size // 2:])
    else:
        perm = rng_halves.permutation(ids.size)
        half = set(perm[:ids.size // 2].tolist())
        a = [np.flatnonzero(inverse == i) if i in half else np.zeros(0, np.int64) for i in range(ids.size)]
        b = [np.zeros(0, np.int64) if i in half else np.flatnonzero(inverse == i) for i in range(ids.size)]
    flat_a, flat_b = np.concatenate(a), np.concatenate(b)
    if split == "halves":
        return np.sort(flat_a), np.sort(flat_b)
    if split == "exchanged":
        return np.sort(flat_b), np.sort(flat_a)
    if split == "tenth":
        return np.sort(rng.choice(flat_a, max(1, flat_a.size // 10), replace=False)), np.sort(flat_b)
    if not fam.several:
        return None
    one = np.sort(np.array([rng.choice(r) for r in a if r.size]))
    if split == "one-per-class":
        return one, np.sort(flat_b)
    keep = [rng.choice(r, rng.integers(1, r.size + 1), replace=False) for r in b if r.size]
    return one, np.sort(np.concatenate(keep))  # uneven


def write_matrix(path: Path, fam: Family, rows: np.ndarray) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = ["," + ",".join(fam.gallery.tolist())]
    for r in rows:
        lines.append(fam.probe[r] + "," + ",".join(repr(float(v)) for v in fam.values[r]))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def achieved(fam: Family, rows: np.ndarray, classes: list[str], tau: np.ndarray) -> tuple[np.ndarray, int]:
    """False accepts per target (counted here) and impostor attempts, over the evaluation ``rows``."""
    col = {c: j for j, c in enumerate(fam.gallery.tolist())}
    order = np.array([col[c] for c in classes])
    d = fam.values[rows][:, order]
    impostor = fam.probe[rows][:, None] != np.asarray(classes)[None, :]
    fa = np.array([int(np.sum(impostor & (d <= tau[None, :, k]))) for k in range(tau.shape[1])])
    return fa, int(impostor.sum())


def run_split(fam: Family, split: str, seed: int) -> list[dict] | None:
    from calibrate.recipe.validation import parse_recipe
    from calibrate.contract.manager import build_registry
    from calibrate.running.pipeline import run_recipe
    from calibrate_builtins.evaluators.fpr import evaluate_label

    rows = split_rows(fam, split, seed)
    if rows is None:
        return None
    train, test = rows
    where = OUT / "_data" / f"{fam.name}-{split}-{seed}"
    write_matrix(where / "train.csv", fam, train)
    write_matrix(where / "test.csv", fam, test)
    raw = {"version": 1, "data": {"plugin": "score-matrix", "train": str(where / "train.csv"),
                                  "test": str(where / "test.csv"), "kind": "distance"},
           "transform": {"plugin": "identity"},
           "estimators": [{"plugin": p, "name": label, **params} for label, p, params in ESTIMATORS],
           "evaluation": {"targets": list(TARGETS)},
           "output": {"dir": str(OUT / "runs" / f"{fam.name}-{split}-{seed}"), "plots": False,
                      "save_calibration": False}, "seed": seed}
    t0 = time.time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = run_recipe(parse_recipe(raw, build_registry(), source=f"{fam.name}-{split}-{seed}"))
    fold = result.folds[0]
    cells = []
    plain = {}
    for label in fold.models:
        model = fold.models[label]
        table = model.thresholds(TARGETS)
        fa, attempts = achieved(fam, test, list(table.classes), np.asarray(table.values, dtype=np.float64))
        reported = evaluate_label((fold,), label, TARGETS, seed)
        for k, (target, r) in enumerate(zip(TARGETS, reported)):
            e = r.extra
            if r.false_accepts != fa[k] or r.impostor_attempts != attempts:
                raise SystemExit(f"{fam.name} {split} {seed} {label}: calibrate counted {r.false_accepts} / "
                                 f"{r.impostor_attempts}, here {fa[k]} / {attempts}")
            ratio = fa[k] / attempts / target
            low, high = e.get("predicted_fpr_low"), e.get("predicted_fpr_high")
            if label == "auto":
                plain[k] = ratio
            cells.append({"family": fam.name, "split": split, "seed": seed, "estimator": label, "target": target,
                          "ratio": ratio, "expected_fa": target * attempts, "attempts": attempts,
                          "support": e["training_support"], "fnr": r.fnr,
                          "low": None if low is None else low / target, "high": None if high is None else high / target,
                          "covers": None if low is None else bool(low <= fa[k] / attempts <= high),
                          "status": (e.get("prediction_status") or "none") if low is None else
                          e.get("prediction_status", "fits"), "method": e.get("confidence_method", "")})
    for c in cells:
        c["plain_ratio"] = plain.get(TARGETS.index(c["target"]))
    print(f"{fam.name} {split} seed {seed}: {train.size} training rows, {test.size} evaluation rows, "
          f"{time.time() - t0:.0f} s", flush=True)
    return cells


def measurable(c: dict) -> bool:
    return c["expected_fa"] >= MEASURABLE_FA


def render(cells: list[dict], command: str) -> str:
    fmt = lambda x: "-" if x is None else f"{x:.2f}"  # noqa: E731
    lines = [f"Produced by `{command}`. Coverage: share of measurable cells (>= {MEASURABLE_FA:.0f} false accepts "
             "expected) whose achieved FPR lies in the 90% interval for the measured FPR; refused: cells without an "
             "interval; ratio range: achieved / target over the measurable cells.", "",
             "| Family | Split | Estimator | Measurable | Refused | Covered | Ratio range | Interval (median low-high) |",
             "|---|---|---|---|---|---|---|---|"]
    keys = dict.fromkeys((c["family"], c["split"], c["estimator"]) for c in cells)
    for fam, split, label in keys:
        if label == "auto-c95":
            continue
        mine = [c for c in cells if (c["family"], c["split"], c["estimator"]) == (fam, split, label) and measurable(c)]
        if not mine:
            continue
        given = [c for c in mine if c["covers"] is not None]
        ratios = [c["ratio"] for c in mine]
        lines.append(f"| {fam} | {split} | {label} | {len(mine)} | {len(mine) - len(given)} | "
                     f"{sum(c['covers'] for c in given)} of {len(given)} | {min(ratios):.2f}-{max(ratios):.2f} | "
                     + (f"{np.median([c['low'] for c in given]):.2f}-{np.median([c['high'] for c in given]):.2f}"
                        if given else "-") + " |")
    lines += ["", "Per estimator over every family and split:", "",
              "| Estimator | Measurable | Refused | Coverage |", "|---|---|---|---|"]
    for label in dict.fromkeys(c["estimator"] for c in cells):
        if label == "auto-c95":
            continue
        mine = [c for c in cells if c["estimator"] == label and measurable(c)]
        given = [c for c in mine if c["covers"] is not None]
        lines.append(f"| {label} | {len(mine)} | {len(mine) - len(given)} ({100 * (len(mine) - len(given)) / max(len(mine), 1):.0f}%) | "
                     + (f"{np.mean([c['covers'] for c in given]):.2f}" if given else "-") + " |")
    conf = [c for c in cells if c["estimator"] == "auto-c95"]
    if conf:
        lines += ["", "`confidence: 0.95` (auto-c95), per family and target, over splits and seeds: the measured ratio's range "
                      "over every cell and over the measurable ones; among measurable cells with training support >= 10, "
                      "the least ratio to plain auto's and how many fall below half of it; measurable cells above 1 and "
                      "1.5; the median FNR beside plain auto's.", "",
                  "| Family | Target | Ratio range (all) | Ratio range (measurable) | Least vs plain | Below half of plain "
                  "| > 1 | > 1.5 | FNR (c95 / auto) |",
                  "|---|---|---|---|---|---|---|---|---|"]
        auto = {(c["family"], c["split"], c["seed"], c["target"]): c for c in cells if c["estimator"] == "auto"}
        for fam in dict.fromkeys(c["family"] for c in conf):
            for t in TARGETS:
                mine = [c for c in conf if c["family"] == fam and c["target"] == t]
                meas = [c for c in mine if measurable(c)]
                vs = [c["ratio"] / c["plain_ratio"] for c in meas if c["support"] >= 10 and c["plain_ratio"]]
                r, rm = [c["ratio"] for c in mine], [c["ratio"] for c in meas]
                fnr = [c["fnr"] for c in mine if c["fnr"] is not None]
                pf = [auto[(c["family"], c["split"], c["seed"], t)]["fnr"] for c in mine
                      if auto.get((c["family"], c["split"], c["seed"], t), {}).get("fnr") is not None]
                span = lambda x: f"{min(x):.2f}-{max(x):.2f}" if x else "-"  # noqa: E731
                lines.append(f"| {fam} | {100 * t:g}% | {span(r)} | {span(rm)} | {fmt(min(vs) if vs else None)} | "
                             f"{sum(v < 0.5 for v in vs)} of {len(vs)} | {sum(x > 1 for x in rm)} of {len(rm)} | "
                             f"{sum(x > 1.5 for x in rm)} | "
                             f"{np.median(fnr) if fnr else float('nan'):.3f} / {np.median(pf) if pf else float('nan'):.3f} |")
    return "\n".join(lines) + "\n"


def compare(before: list[dict], after: list[dict], command: str) -> str:
    """Per family and split, each estimator's measurable cells covered before and after (refused in brackets), and
    per estimator over all of them."""
    labels = [label for label, _, _ in ESTIMATORS if label != "auto-c95"]

    def cell(cells: list[dict]) -> str:
        given = [c for c in cells if c["covers"] is not None]
        refused = len(cells) - len(given)
        return f"{sum(c['covers'] for c in given)}/{len(cells)}" + (f" ({refused} refused)" if refused else "")

    lines = [f"Produced by `{command}`: measurable cells covered of all measurable ones, before -> after (refused: "
             "no interval).", "", "| Family | Split | " + " | ".join(labels) + " |", "|---|---|" + "---|" * len(labels)]
    for fam, split in dict.fromkeys((c["family"], c["split"]) for c in after):
        row = []
        for label in labels:
            pick = lambda cs: [c for c in cs if (c["family"], c["split"], c["estimator"]) == (fam, split, label)  # noqa: E731
                               and measurable(c)]
            row.append(f"{cell(pick(before))} -> {cell(pick(after))}")
        lines.append(f"| {fam} | {split} | " + " | ".join(row) + " |")
    row = []
    for label in labels:
        mine = [[c for c in cs if c["estimator"] == label and measurable(c)] for cs in (before, after)]
        share = [np.mean([c["covers"] for c in m if c["covers"] is not None]) if any(c["covers"] is not None for c in m)
                 else float("nan") for m in mine]
        row.append(f"{cell(mine[0])} ({share[0]:.2f}) -> {cell(mine[1])} ({share[1]:.2f})")
    lines.append("| all | all | " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--families", nargs="+", choices=(*DEVELOPMENT, *HELD_OUT), default=list(DEVELOPMENT))
    parser.add_argument("--splits", nargs="+", choices=SPLITS, default=list(SPLITS))
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--tag", default="", help="a name for this run's JSON and tables (e.g. before, after)")
    parser.add_argument("--render-only", action="store_true")
    parser.add_argument("--compare", nargs=2, metavar=("BEFORE", "AFTER"), default=None,
                        help="tags of two earlier runs: a before/after table of their coverage")
    args = parser.parse_args(argv)
    if args.compare:
        runs = [json.loads((OUT / f"coverage-{t}.json").read_text(encoding="utf-8")) for t in args.compare]
        print(compare(*runs, f"python benchmarks/split_coverage.py --compare {' '.join(args.compare)}"))
        return
    stem = OUT / ("coverage" + (f"-{args.tag}" if args.tag else ""))
    command = "python benchmarks/split_coverage.py" + "".join(
        [f" --families {' '.join(args.families)}"] + ([f" --splits {' '.join(args.splits)}"] if args.splits != list(SPLITS) else [])
        + ([f" --seeds {args.seeds}"] if args.seeds != 2 else []) + ([f" --tag {args.tag}"] if args.tag else []))
    if not args.render_only:
        cells = []
        for fam in families(args.families):
            for split in args.splits:
                for seed in range(args.seeds):
                    done = run_split(fam, split, seed)
                    if done:
                        cells += done
                        stem.parent.mkdir(parents=True, exist_ok=True)
                        stem.with_suffix(".json").write_text(json.dumps(cells), encoding="utf-8")
    cells = json.loads(stem.with_suffix(".json").read_text(encoding="utf-8"))
    text = render(cells, command)
    stem.with_suffix(".md").write_text(text, encoding="utf-8")
    print(text)


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT / "benchmarks"))
    main()
