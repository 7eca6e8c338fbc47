"""How often the predicted FPR intervals contain the FPR achieved on unseen impostors, and what the
confidence mode costs.

    .venv/bin/python benchmarks/prediction_coverage.py                 # full run (about an hour on 2 cores)
    .venv/bin/python benchmarks/prediction_coverage.py --quick         # a few minutes
    .venv/bin/python benchmarks/prediction_coverage.py --part real     # only the real datasets (or noise, tails, confidence)
    .venv/bin/python benchmarks/prediction_coverage.py --part tails --quick --generators floor-beta0.25   # seconds
    .venv/bin/python benchmarks/prediction_coverage.py --out docs/prediction-coverage.md

Part ``noise``: the noise-floor generator (benchmarks/noise_floor.py), whose true FPR is exact, at
20, 30, 38, 100 and 300 classes over its four settings. Per replicate gallery and estimator: fit,
predict (calibrate.predicted.interval, 90%, 100 simulated galleries, as a run does) and check whether the
interval for the long-run FPR contains the true FPR. Width is reported as the median of
high / low; the *oracle* width is the 5th-95th percentile range (as high / low) of the true ratio
over the replicate galleries of the same setting and size: what an interval that knew the true
distribution of the achieved ratio would quote. For ``auto-c95`` (auto with ``confidence: 0.95``):
the share of galleries whose true FPR exceeds the target (must be at most 5%) and its median ratio.

The noise part also runs the tail generators of benchmarks/noise_floor.py (``TAIL_SETTINGS``:
bounded floors, a saturating cap, a log-Pareto tail, mixtures; i.i.d. per-class laws with exact
CDFs, docs/noise-floor.md) at ``TAIL_PLAN`` sizes (classes x distances per class), each generator
on its own (``--part tails`` runs only these; ``--generators`` picks some): coverage, median width,
oracle width (over the galleries of that generator and size) and median ratio, as above. The
world is built without pair slots there (the distances are independent draws).

Part ``real``: every real dataset, as docs/estimators.md runs them, with split seeds (score
matrices) and enrollment folds (image sets, each fold evaluated on its own) as replicates; the
interval checked is the one for the FPR *measured* on the evaluation's attempts
(``predicted_fpr_low/high`` in results.json), against the measured FPR.
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
sys.path.insert(0, str(ROOT / "benchmarks"))

import noise_floor as nf  # noqa: E402

from calibrate.contract.base import RunContext  # noqa: E402
from calibrate.contract.manager import build_registry  # noqa: E402
from calibrate.predicted.interval import PredictionSettings, predict  # noqa: E402

TARGETS = nf.TARGETS
LEVEL = 0.9
ESTIMATORS = {"auto": ("auto", {}), "generic-interp": ("generic-interp", {}), "gpd-tail": ("gpd-tail", {}),
              "znorm": ("znorm", {}), "ncx2-grid": ("ncx2-grid", {"dim": [15, 22]})}


def _built(estimators: list[str]) -> dict:
    """The named estimators of ESTIMATORS, built through the registry."""
    registry = build_registry()
    return {label: registry.get("estimators", plugin).factory(**params)
            for label, (plugin, params) in ESTIMATORS.items() if label in estimators}


def noise_part(sizes, replicates: dict[int, int], seed: int, estimators: list[str]) -> dict:
    """Per (size, estimator): coverage per target, median width, oracle width; auto-c95 exceedance."""
    built = _built(estimators)
    settings = PredictionSettings(LEVEL, 100)
    t = np.asarray(TARGETS)
    out = {}
    for n in sizes:
        rows = {label: {"cover": [], "width": [], "true": [], "setting": []} for label in built}
        for r in range(replicates[n]):
            setting = nf.SETTINGS[r % len(nf.SETTINGS)]
            rng = np.random.default_rng([seed, n, r])
            gallery = nf.make_gallery(rng, n, 7, 20, setting)
            impostors = nf.training_impostors(gallery)
            d = nf.cdist(gallery.enrolled, gallery.enrolled)
            from calibrate.predicted.world import build_world as build, pair_slots

            world = build(impostors, pair_slots(d, ~np.eye(n, dtype=bool)))
            for label, est in built.items():
                if label == "ncx2-grid" and (n > 100 or r >= 10):
                    continue  # 100 refits of the grid search per gallery: a subset of galleries
                model = est.fit(impostors, RunContext())
                truth = nf.true_fpr(gallery, model.thresholds(TARGETS).values)
                pred = predict(est, impostors, t, settings=settings, seed=[seed, n, r], context=RunContext(),
                               world=world)
                rows[label]["cover"].append((pred.low <= truth) & (truth <= pred.high))
                rows[label]["width"].append(pred.high / np.maximum(pred.low, 1e-300))
                rows[label]["true"].append(truth / t)
                rows[label]["setting"].append(r % len(nf.SETTINGS))
        cell = {}
        for label, v in rows.items():
            if not v["true"]:
                continue
            true, setting = np.array(v["true"]), np.array(v["setting"])
            # per generator setting (galleries of one setting share the true distribution), then the median
            oracle = np.median([np.quantile(true[setting == s], 0.95, axis=0)
                                / np.maximum(np.quantile(true[setting == s], 0.05, axis=0), 1e-300)
                                for s in np.unique(setting)], axis=0)
            cell[label] = {"galleries": len(v["true"]), "true_ratios": true.tolist(), "settings": setting.tolist(),
                           "coverage": np.mean(v["cover"], axis=0).tolist(),
                           "median_width": np.median(v["width"], axis=0).tolist(), "oracle_width": oracle.tolist(),
                           "median_ratio": np.median(true, axis=0).tolist()}
        out[n] = {"replicates": replicates[n], "cells": cell}
        print(f"noise n={n}: " + json.dumps({k: {m: np.round(x, 2).tolist() for m, x in v.items()
                                                  if m not in ("true_ratios", "settings")}
                                              for k, v in cell.items()}), flush=True)
    return out


#: tail generators: classes -> (distances per class, galleries); the user's case was 517 x 258
TAIL_PLAN = {30: (200, 20), 100: (300, 12), 300: (258, 6)}
QUICK_TAIL_PLAN = {30: (200, 3), 100: (300, 2)}


def tail_part(plan: dict[int, tuple[int, int]], seed: int, estimators: list[str], generators: list[str]) -> dict:
    """Per (generator, size, estimator): coverage per target, median width, oracle width, median ratio."""
    from calibrate.predicted.world import build_world as build

    built = _built(estimators)
    settings = PredictionSettings(LEVEL, 100)
    t = np.asarray(TARGETS)
    out = {}
    for gi, setting in enumerate(nf.TAIL_SETTINGS):
        if setting.name not in generators:
            continue
        out[setting.name] = {}
        for n, (per, galleries) in plan.items():
            rows = {label: {"cover": [], "width": [], "true": []} for label in built}
            for r in range(galleries):
                gallery = setting.gallery(np.random.default_rng([seed, 1000 + gi, n, r]), n, per)
                impostors = gallery.training()
                world = build(impostors)
                for label, est in built.items():
                    if label == "ncx2-grid" and (n > 100 or r >= 5):
                        continue  # 100 refits of the grid search per gallery: a subset of galleries
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        model = est.fit(impostors, RunContext())
                        truth = nf.true_fpr_scores(gallery, model.thresholds(TARGETS).values)
                        pred = predict(est, impostors, t, settings=settings, seed=[seed, 1000 + gi, n, r],
                                       context=RunContext(), world=world)
                    rows[label]["cover"].append((pred.low <= truth) & (truth <= pred.high))
                    rows[label]["width"].append(pred.high / np.maximum(pred.low, 1e-300))
                    rows[label]["true"].append(truth / t)
            cell = {}
            for label, v in rows.items():
                if not v["true"]:
                    continue
                true = np.array(v["true"])
                oracle = np.quantile(true, 0.95, axis=0) / np.maximum(np.quantile(true, 0.05, axis=0), 1e-300)
                cell[label] = {"galleries": len(true), "per_class": per, "true_ratios": true.tolist(),
                               "coverage": np.mean(v["cover"], axis=0).tolist(),
                               "median_width": np.median(v["width"], axis=0).tolist(), "oracle_width": oracle.tolist(),
                               "median_ratio": np.median(true, axis=0).tolist()}
            out[setting.name][n] = cell
            print(f"tails {setting.name} n={n}x{per}: " + json.dumps(
                {k: {m: np.round(x, 2).tolist() for m, x in v.items() if m in ("coverage", "median_width", "oracle_width",
                                                                                 "median_ratio")}
                 for k, v in cell.items()}), flush=True)
    return out


def confidence_part(sizes, replicates: dict[int, int], seed: int) -> dict:
    """auto with confidence 0.95 on the same noise-floor galleries: how often the true FPR exceeds the
    target, the median true ratio (and plain auto's), and which bound each target used."""
    from calibrate.predicted.confidence import make_confident

    est = build_registry().get("estimators", "auto").factory()
    settings = PredictionSettings(LEVEL, 100)
    t = np.asarray(TARGETS)
    out = {}
    for n in sizes:
        conf, plain, methods = [], [], []
        for r in range(replicates[n]):
            rng = np.random.default_rng([seed, n, r])
            gallery = nf.make_gallery(rng, n, 7, 20, nf.SETTINGS[r % len(nf.SETTINGS)])
            impostors = nf.training_impostors(gallery)
            d = nf.cdist(gallery.enrolled, gallery.enrolled)
            from calibrate.predicted.world import build_world as build, pair_slots

            world = build(impostors, pair_slots(d, ~np.eye(n, dtype=bool)))
            model = est.fit(impostors, RunContext())
            wrapped, _, _ = make_confident(model, est, impostors, t, 0.95, settings=settings, seed=[seed, n, r],
                                           context=RunContext(), world=world)
            conf.append(nf.true_fpr(gallery, wrapped.thresholds(TARGETS).values) / t)
            plain.append(nf.true_fpr(gallery, model.thresholds(TARGETS).values) / t)
            methods.append([wrapped.choice(float(e))[0] for e in TARGETS])
        conf, plain, methods = np.array(conf), np.array(plain), np.array(methods)
        out[n] = {"galleries": replicates[n], "exceedance": np.mean(conf > 1.0, axis=0).tolist(),
                  "median_ratio": np.median(conf, axis=0).tolist(), "plain_median_ratio": np.median(plain, axis=0).tolist(),
                  "order_statistic_share": np.mean(methods == "order-statistic", axis=0).tolist(),
                  "unmet_share": np.mean(methods == "model-unmet", axis=0).tolist()}
        print(f"confidence n={n}: " + json.dumps({k: np.round(v, 2).tolist() for k, v in out[n].items()}), flush=True)
    return out


def real_specs(quick: bool) -> dict[str, dict]:
    """Real datasets of docs/estimators.md (compare_estimators.datasets) and their replicates."""
    import compare_estimators as ce

    specs = ce.datasets(ROOT / "results" / "prediction-coverage")
    keep = ["bssr1-face-c", "bssr1-finger-left", "held-out-face-c-quarter", "yale-staggered",
            "yale-interleaved-staggered", "held-out-yale-euclidean", "held-out-yale-30-elevation"]
    return {k: specs[k] for k in keep if k in specs}


def real_part(quick: bool, seeds: int, estimators: list[str]) -> dict:
    from calibrate.running.pipeline import run_recipe
    from calibrate.recipe.validation import parse_recipe
    from calibrate_builtins.evaluators.fpr import evaluate_label

    registry = build_registry()
    out = {}
    for name, spec in real_specs(quick).items():
        score = spec["data"]["plugin"] == "score-matrix"
        runs = range(seeds) if score else range(1)
        cells = []
        for s in runs:
            data = dict(spec["data"])
            if score:
                data["seed"] = data.get("seed", 0) + s
            raw = {"version": 1, "data": data, "transform": spec["transform"],
                   "estimators": [{"plugin": ESTIMATORS[e][0], "name": e, **ESTIMATORS[e][1]} for e in estimators
                                  if e != "ncx2-grid"]  # 100 grid searches per fold: its real cells are in estimators.md
                   + [{"plugin": "auto", "confidence": 0.95}],
                   "evaluation": {"targets": list(TARGETS), **spec.get("evaluation", {})},
                   "output": {"dir": str(ROOT / "results" / "prediction-coverage" / f"{name}-{s}"), "plots": False,
                              "save_calibration": False}, "seed": s}
            if "distance" in spec:
                raw["distance"] = spec["distance"]
            t0 = time.time()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                result = run_recipe(parse_recipe(raw, registry, source=f"{name}-{s}"))
            groups = [(f,) for f in result.folds]  # every fold (or the one split) evaluated on its own
            for fold in groups:
                for label in fold[0].models:
                    pred = fold[0].predictions.get(label)
                    for j, r in enumerate(evaluate_label(fold, label, TARGETS, s)):
                        e = r.extra
                        check = pred.checks[j] if pred is not None and pred.checks else {}
                        cells.append({"estimator": label, "target": r.target_fpr, "ratio": r.ratio,
                                      "low": e.get("predicted_ratio_low"), "high": e.get("predicted_ratio_high"),
                                      "covers": e.get("predicted_covers"), "expected_fa": r.target_fpr * r.impostor_attempts,
                                      "support": e["training_support"], "fnr": r.fnr,
                                      "status": e.get("prediction_status", "none" if pred is None else "fits"),
                                      "world_over_training": (check["world_fpr"] / check["empirical_fpr"]
                                                              if check.get("empirical_fpr") else None),
                                      "check_support": check.get("support"),
                                      "method": (e.get("confidence_method") or "")})
            print(f"real {name} seed {s}: {len(result.folds)} fold(s), {time.time() - t0:.0f} s", flush=True)
        out[name] = cells
    return out


def markdown(noise: dict, real: dict, command: str, seconds: float, confidence: dict | None = None,
             tails: dict | None = None) -> str:
    lines = ["# Predicted FPR intervals: coverage and the cost of confidence", "",
             f"Produced by `{command}` in {seconds / 60:.0f} min (benchmarks/prediction_coverage.py; its docstring "
             "says how). 90% intervals; a good one covers 85-95% of the time.", ""]
    if noise:
        lines += ["## Noise-floor galleries (true FPR exact)", "",
                  "Coverage of the long-run FPR per target (0.5 / 0.25 / 0.1 / 0.05%), median interval width "
                  "(high / low) and the oracle's width (the 5th-95th percentile range, as high / low, of the true ratio "
                  "over the galleries of one generator setting, median over the four settings: what an interval "
                  "that knew the true distribution of the achieved ratio would quote), median true ratio.", "",
                  "| Classes | Galleries | Estimator | Coverage | Median width | Oracle width | Median ratio |",
                  "|---|---|---|---|---|---|---|"]
        fmt = lambda xs, d=2: " / ".join(f"{x:.{d}f}" if x < 1000 else ">1000" for x in xs)  # noqa: E731
        for n, v in noise.items():
            for label, c in v["cells"].items():
                if label == "auto-c95":
                    continue
                lines.append(f"| {n} | {c['galleries']} | {label} | {fmt(c['coverage'])} | {fmt(c['median_width'], 1)} "
                             f"| {fmt(c['oracle_width'], 1)} | {fmt(c['median_ratio'])} |")
        lines.append("")
    if tails:
        fmt = lambda xs, d=2: " / ".join(f"{x:.{d}f}" if x < 1000 else ">1000" for x in xs)  # noqa: E731
        lines += ["## Tail generators (true FPR exact)", "",
                  "benchmarks/noise_floor.py's TAIL_SETTINGS (docs/noise-floor.md), each generator on its own; columns "
                  "as above, the oracle width over the galleries of one generator and size.", "",
                  "| Generator | Classes x per class | Galleries | Estimator | Coverage | Median width | Oracle width | Median ratio |",
                  "|---|---|---|---|---|---|---|---|"]
        for name, sizes in tails.items():
            for n, cells in sizes.items():
                for label, c in cells.items():
                    lines.append(f"| {name} | {n} x {c['per_class']} | {c['galleries']} | {label} | {fmt(c['coverage'])} | "
                                 f"{fmt(c['median_width'], 1)} | {fmt(c['oracle_width'], 1)} | {fmt(c['median_ratio'])} |")
        lines.append("")
    if confidence:
        fmt = lambda xs, d=2: " / ".join(f"{x:.{d}f}" for x in xs)  # noqa: E731
        lines += ["## `auto` with `confidence: 0.95` on the noise-floor galleries", "",
                  "Per target (0.5 / 0.25 / 0.1 / 0.05%): the share of galleries whose true FPR exceeds the target "
                  "(must be at most 0.05), the median true ratio beside plain auto's (the cost), the share of galleries "
                  "where the distribution-free order-statistic bound was used (else the model-based one) and where "
                  "no bound could be met.", "",
                  "| Classes | Galleries | Exceedance | Median ratio | Plain auto's median | Order-statistic share | Unmet share |",
                  "|---|---|---|---|---|---|---|"]
        for n, c in confidence.items():
            lines.append(f"| {n} | {c['galleries']} | {fmt(c['exceedance'])} | {fmt(c['median_ratio'])} | "
                         f"{fmt(c['plain_median_ratio'])} | {fmt(c['order_statistic_share'])} | {fmt(c['unmet_share'])} |")
        lines.append("")
    if real:
        lines += ["## Real datasets (measured FPR, with the evaluation's own counting noise)", "",
                  "Replicates: split seeds for score matrices, enrollment folds for image sets. Coverage over all "
                  "(replicate, target) cells, and over the measurable ones (training support >= 10 and >= 20 "
                  "expected false accepts); for auto-c95 the share of cells with measured ratio above 1 and 1.5, "
                  "the median ratio and the median FNR beside auto's.", "",
                  "Coverage is over the cells that got an interval; *no interval* counts the cells the world's check "
                  "refused (contradicted, tail-unfit) or the refits' time budget left without one (`none`).", "",
                  "| Dataset | Estimator | Cells | No interval | Coverage | Measurable cells | Coverage there | Median ratio | Median FNR |",
                  "|---|---|---|---|---|---|---|---|---|"]

        def cover(cs: list) -> str:
            known = [c["covers"] for c in cs if c.get("covers") is not None]
            return f"{np.mean(known):.2f}" if known else "-"

        for name, cells in real.items():
            for label in dict.fromkeys(c["estimator"] for c in cells):
                mine = [c for c in cells if c["estimator"] == label]
                meas = [c for c in mine if c["support"] >= 10 and c["expected_fa"] >= 20]
                none = sum(c.get("covers") is None for c in mine)
                fnr = [c["fnr"] for c in mine if c["fnr"] is not None]
                lines.append(f"| {name} | {label} | {len(mine)} | {none} | {cover(mine)} | {len(meas)} | {cover(meas)} | "
                             f"{np.median([c['ratio'] for c in mine]):.2f} | {np.median(fnr) if fnr else float('nan'):.3f} |")
        allc = [c for cells in real.values() for c in cells if c["estimator"] == "auto"]
        conf = [c for cells in real.values() for c in cells if c["estimator"] == "auto-c95"]
        every = [c for cells in real.values() for c in cells if c["estimator"] != "auto-c95"]
        predicted = [c for c in every if c.get("covers") is not None]
        checked = [c for c in every if c.get("world_over_training") is not None and (c.get("check_support") or 0) >= 10]
        lines += ["", f"auto over every real cell: coverage {cover(allc)} of the {sum(c.get('covers') is not None for c in allc)} "
                      f"with an interval ({len(allc)} cells).",
                  f"Every estimator: {len(predicted)} of {len(every)} cells got an interval "
                  f"({100 * (1 - len(predicted) / max(len(every), 1)):.0f}% without), coverage {cover(every)}; the world's "
                  f"FPR over the training FPR at the estimators' own thresholds (cells with support >= 10): "
                  + (f"median {np.median([c['world_over_training'] for c in checked]):.2f}, range "
                     f"{min(c['world_over_training'] for c in checked):.2f}-{max(c['world_over_training'] for c in checked):.2f}"
                     if checked else "-") + ".",
                  f"auto-c95: measured ratio > 1 in {np.mean([c['ratio'] > 1 for c in conf]):.2f} of {len(conf)} cells, "
                  f"> 1.5 in {np.mean([c['ratio'] > 1.5 for c in conf]):.2f}; methods used: "
                  + ", ".join(f"{m} {sum(c['method'] == m for c in conf)}" for m in ("order-statistic", "model", "model-unmet")), ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a few minutes: fewer sizes, galleries and estimators")
    parser.add_argument("--part", choices=("noise", "tails", "confidence", "real", "all"), default="all",
                        help="noise: the geometric noise-floor galleries and the tail generators; tails: only the latter")
    parser.add_argument("--generators", nargs="+", choices=[s.name for s in nf.TAIL_SETTINGS], default=None,
                        help="tail generators to run (default: all)")
    parser.add_argument("--estimators", nargs="+", choices=list(ESTIMATORS), default=None,
                        help="estimators of the noise and tail parts (default: all; --quick: auto, generic-interp)")
    parser.add_argument("--seed", type=int, default=2014)
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "prediction-coverage.md")
    args = parser.parse_args(argv)
    start = time.time()
    sizes = (20, 38, 100) if args.quick else (20, 30, 38, 100, 300)
    reps = {20: 40, 30: 40, 38: 40, 100: 20, 300: 8} if not args.quick else {20: 8, 38: 8, 100: 4}
    noise, real, confidence, tails = {}, {}, {}, {}
    chosen = args.estimators or (list(ESTIMATORS) if not args.quick else ["auto", "generic-interp"])
    if args.part in ("noise", "all"):
        noise = noise_part(sizes, reps, args.seed, chosen)
    if args.part in ("noise", "tails", "all"):
        tails = tail_part(QUICK_TAIL_PLAN if args.quick else TAIL_PLAN, args.seed, chosen,
                          args.generators or [s.name for s in nf.TAIL_SETTINGS])
    if args.part in ("confidence", "all"):
        confidence = confidence_part(sizes, reps, args.seed)
    if args.part in ("real", "all"):
        real = real_part(args.quick, 2 if args.quick else 3, list(ESTIMATORS))
    command = "python benchmarks/prediction_coverage.py" + "".join(
        f" {a}" for a in (["--quick"] if args.quick else []) + ([f"--part {args.part}"] if args.part != "all" else [])
        + ([f"--generators {' '.join(args.generators)}"] if args.generators else [])
        + ([f"--estimators {' '.join(args.estimators)}"] if args.estimators else []))
    text = markdown(noise, real, command, time.time() - start, confidence, tails)
    print(text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text, encoding="utf-8")
    (args.out.with_suffix(".json")).write_text(json.dumps({"noise": noise, "tails": tails, "confidence": confidence, "real": real},
                                                          default=float), encoding="utf-8")


if __name__ == "__main__":
    main()
