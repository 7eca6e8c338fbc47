"""How the predicted FPR interval fares on score tails the reference world does not assume: bounded
and saturating, heavier than any generalised Pareto, and mixtures; with exact truth.

    .venv/bin/python benchmarks/tail_coverage.py [--quick] [--seed 2026] [--out results/tail-coverage.md]

Generator (one gallery): C enrolled classes, n training impostor distances each, class c's distances
``d = exp(m_c + s_c X)`` with m_c ~ N(0, 0.2^2), s_c ~ U(0.2, 0.4) and X drawn from one base law per
setting, whose CDF is known in closed form, so the true FPR of any threshold is exact:
``F_c(t) = F_X((log t - m_c) / s_c)``, pooled over classes with equal weights (equal counts).

* ``lognormal``: X ~ N(0, 1) (the world's own assumption; the control);
* ``saturating``: X = -1.5 + 6 Beta(0.5, 4): a hard floor with an infinite density at it (a matcher
  whose scores pile up against their best value): a short, bounded lower tail (GPD shape -2);
* ``heavy``: X = T clipped to [-1500, 1500], T ~ Cauchy (Student t, 1 degree of freedom): a lower tail with GPD
  shape 1 (infinite mean), beyond both auto's clip (0.5) and the world's likelihood bound (0.9); the
  floor at -1500 (a point mass of 2e-4, below every target; distances stay above 1e-261) keeps the CDF
  exact: F_T above the floor, 0 below;
* ``mixture``: X ~ 0.97 N(0, 1) + 0.03 N(-2.5, 0.5^2): a few percent of impostors from a closer,
  second component (look-alikes);
* ``class-mixture``: as ``mixture`` with each class's share of the close component drawn from U(0, 0.06).

Per gallery and estimator (auto, generic-interp, class-interp, fitted through the registry) the
prediction is made exactly as a run makes it (calibrate.predicted.interval.predict_together: vectorised,
world checked at the estimator's thresholds). Reported per setting, size and target: the share of
galleries that got an interval, the coverage of the long-run interval over those (the truth is
exact, so this is the interval's own coverage, no evaluation noise), the median interval width
(high / low), the oracle width (5th-95th percentile range of the true ratio over the galleries,
high / low) and the median true ratio.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
from scipy import stats

from calibrate.contract.manager import build_registry
from calibrate.predicted.interval import PredictionSettings, build_world, predict_together
from calibrate.contract.types import ImpostorDistances

ROOT = Path(__file__).resolve().parents[1]
TARGETS = (0.005, 0.0025, 0.001, 0.0005)
ESTIMATORS = ("auto", "generic-interp", "class-interp")
HEAVY_FLOOR = 1500.0


def _draw(setting: str, rng: np.random.Generator, size: int, share: float = 0.03) -> np.ndarray:
    if setting == "lognormal":
        return rng.standard_normal(size)
    if setting == "saturating":
        return -1.5 + 6.0 * rng.beta(0.5, 4.0, size)
    if setting == "heavy":
        return np.clip(rng.standard_cauchy(size), -HEAVY_FLOOR, HEAVY_FLOOR)
    close = rng.random(size) < share
    return np.where(close, -2.5 + 0.5 * rng.standard_normal(size), rng.standard_normal(size))


def _cdf(setting: str, x: np.ndarray, share: np.ndarray | float = 0.03) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    if setting == "lognormal":
        return stats.norm.cdf(x)
    if setting == "saturating":
        return stats.beta.cdf((x + 1.5) / 6.0, 0.5, 4.0)
    if setting == "heavy":
        return np.where(x >= HEAVY_FLOOR, 1.0, np.where(x >= -HEAVY_FLOOR, stats.cauchy.cdf(x), 0.0))
    return (1 - share) * stats.norm.cdf(x) + share * stats.norm.cdf((x + 2.5) / 0.5)


SETTINGS = ("lognormal", "saturating", "heavy", "mixture", "class-mixture")


def gallery(setting: str, rng: np.random.Generator, classes: int, n: int):
    """(training ImpostorDistances, a function giving the exact per-class FPR of thresholds (C x T))."""
    m = rng.normal(0.0, 0.2, classes)
    s = rng.uniform(0.2, 0.4, classes)
    share = rng.uniform(0.0, 0.06, classes) if setting == "class-mixture" else np.full(classes, 0.03)
    per = {f"c{i:04d}": np.exp(m[i] + s[i] * _draw(setting, rng, n, share[i])) for i in range(classes)}

    def truth(thresholds: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore"):
            x = (np.log(np.maximum(thresholds, 1e-300)) - m[:, None]) / s[:, None]
        return _cdf(setting, x, share[:, None])

    return ImpostorDistances.from_lists(per), truth


def run(sizes, replicates, seed: int) -> dict:
    registry = build_registry()
    estimators = {name: registry.get("estimators", name).factory() for name in ESTIMATORS}
    t = np.asarray(TARGETS)
    settings = PredictionSettings()
    out = {}
    for setting in SETTINGS:
        for classes, n in sizes:
            rows = {name: {"true": [], "low": [], "high": [], "status": []} for name in estimators}
            for r in range(replicates[classes]):
                rng = np.random.default_rng([seed, SETTINGS.index(setting), classes, r])
                imp, truth = gallery(setting, rng, classes, n)
                models = {name: est.fit(imp) for name, est in estimators.items()}
                world = build_world(imp)
                preds = predict_together(list(estimators.values()), list(models.values()), imp, t, settings=settings,
                                         seed=[seed, r], world=world)
                for (name, model), pred in zip(models.items(), preds):
                    true = truth(model._thresholds(t, model.all_rows())).mean(axis=0)
                    rows[name]["true"].append(true / t)
                    rows[name]["low"].append(pred.low / t)
                    rows[name]["high"].append(pred.high / t)
                    rows[name]["status"].append(list(pred.status))
                rows.setdefault("_world", []).append(world.tail_model)
            cell = {"tail_models": {m: rows["_world"].count(m) for m in set(rows["_world"])}}
            for name in estimators:
                true, low, high = (np.array(rows[name][k]) for k in ("true", "low", "high"))
                got = np.isfinite(low)
                cover = np.where(got, (low <= true) & (true <= high), np.nan)
                with np.errstate(invalid="ignore", divide="ignore"):
                    width = np.where(got, high / np.maximum(low, 1e-300), np.nan)
                cell[name] = {"galleries": int(true.shape[0]), "predicted_share": got.mean(axis=0).tolist(),
                              "coverage": [float(np.nanmean(c)) if np.isfinite(c).any() else None for c in cover.T],
                              "median_width": [float(np.nanmedian(w)) if np.isfinite(w).any() else None for w in width.T],
                              "oracle_width": (np.quantile(true, 0.95, axis=0)
                                               / np.maximum(np.quantile(true, 0.05, axis=0), 1e-300)).tolist(),
                              "median_ratio": np.median(true, axis=0).tolist()}
            out[f"{setting} {classes}x{n}"] = cell
            print(f"{setting} {classes}x{n}: " + json.dumps({k: ({m: (np.round(v, 2).tolist() if isinstance(v, list) and None not in v else v)
                                                                  for m, v in c.items()} if k != "tail_models" else c)
                                                             for k, c in cell.items()}), flush=True)
    return out


def markdown(results: dict, command: str, seconds: float) -> str:
    def fmt(xs, d=2):
        return " / ".join("-" if x is None else (f"{x:.{d}f}" if x < 1000 else ">1000") for x in xs)

    lines = ["# Predicted intervals on tails the world does not assume (exact truth)", "",
             f"Produced by `{command}` in {seconds / 60:.1f} min (benchmarks/tail_coverage.py; its docstring says how). "
             "Per target 0.5 / 0.25 / 0.1 / 0.05%: the share of galleries given an interval, the coverage of the 90% "
             "long-run interval over those (85-95% is right), the median width and the oracle's (high / low), the "
             "median true ratio.", "",
             "| Setting | Galleries | World tails | Estimator | Given | Coverage | Median width | Oracle width | Median ratio |",
             "|---|---|---|---|---|---|---|---|---|"]
    for key, cell in results.items():
        tails = ", ".join(f"{m} {k}" for m, k in sorted(cell["tail_models"].items()))
        for name in ESTIMATORS:
            c = cell[name]
            lines.append(f"| {key} | {c['galleries']} | {tails} | {name} | {fmt(c['predicted_share'])} | "
                         f"{fmt(c['coverage'])} | {fmt(c['median_width'], 1)} | {fmt(c['oracle_width'], 1)} | "
                         f"{fmt(c['median_ratio'])} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "tail-coverage.md")
    args = parser.parse_args(argv)
    sizes = ((30, 100), (100, 200), (500, 300)) if not args.quick else ((30, 100), (100, 200))
    replicates = {30: 30, 100: 20, 500: 10} if not args.quick else {30: 6, 100: 4}
    start = time.time()
    results = run(sizes, replicates, args.seed)
    command = "python benchmarks/tail_coverage.py" + (" --quick" if args.quick else "")
    text = markdown(results, command, time.time() - start)
    print(text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text, encoding="utf-8")
    args.out.with_suffix(".json").write_text(json.dumps(results, default=float), encoding="utf-8")


if __name__ == "__main__":
    main()
