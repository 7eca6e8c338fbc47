"""Does the reference world of the predicted intervals agree with the very training data it was fitted to?

    .venv/bin/python benchmarks/world_fit.py                       # every generator and the real data (a few minutes)
    .venv/bin/python benchmarks/world_fit.py --quick               # seconds: one replicate, small sizes, no real data
    .venv/bin/python benchmarks/world_fit.py --generators floor-beta0.5 cap-atom --plan 500x258 --replicates 5

Why (issue 18, item 3): on an unseen 517-class face-matcher matrix auto's thresholds measured well, yet
the world (calibrate/predicted/world.py), refitted on the training half, put the 0.05% threshold at 0.29-0.33%
FPR while only 0.049% of the training scores lay beyond it (and at 0.1%: 133 training scores, the
world ~3.3x as many). A world that contradicts its own training data where they are plentiful
(support >= 10) cannot give honest intervals. This benchmark looks for the generator that
reproduces that.

Per generator (benchmarks/noise_floor.py: the four geometric settings, N - 1 distances per class,
and the tail generators of ``TAIL_SETTINGS`` at the ``--plan`` sizes), size and replicate gallery:
the world is fitted with ``calibrate.predicted.interval.build_world(impostors)`` and ``auto`` (built through
the registry) on the training distances; per target (0.5 / 0.25 / 0.1 / 0.05%):

* ``k``: the training support, training distances at or below their class's auto threshold, summed;
* ``k/N``: the empirical training FPR of those thresholds;
* ``world``: the world's pooled FPR of the same thresholds, ``world.class_fpr`` weighted by class counts;
* ``true``: the generator's exact pooled FPR (the real data have none);
* ``band``: whether ``world`` lies in the 99.9% Clopper-Pearson interval of k out of N.

A row *contradicts* when the world is outside the band with k >= 10. Real data: BSSR1 set 1 face-C
and finger-left (/work/shared/data/bssr1-set1, as benchmarks/compare_estimators.py loads them:
score-matrix, similarity, ``missing: -1``, per-class half split with seeds 0.., the same transform),
as a check that the world agrees with them. Cells: median over replicates (k, k/N, world, true),
``world/emp`` the median ratio world / (k/N), ``band`` the count of replicates inside the band.
Prints Markdown and writes it to ``--out`` (default results/world_fit.md).
"""

from __future__ import annotations

import argparse
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
from calibrate.predicted.interval import build_world  # noqa: E402
from calibrate.statistics.order import clopper_pearson  # noqa: E402
from calibrate.contract.types import ImpostorDistances  # noqa: E402

TARGETS = nf.TARGETS
BAND_LEVEL = 0.999
MIN_SUPPORT = 10
DATA = Path("/work/shared/data/bssr1-set1")
REAL = {"bssr1-face-c": ("face-C.csv", {"plugin": "similarity-to-distance", "upper": 1.0}),
        "bssr1-finger-left": ("finger-left.csv", {"plugin": "similarity-to-distance"})}


def check(impostors: ImpostorDistances, estimator) -> dict:
    """World vs training data at auto's thresholds (see the module's docstring)."""
    world = build_world(impostors)
    thresholds = estimator.fit(impostors, RunContext(seed=0)).thresholds(TARGETS).values
    counts = impostors.counts()
    n = int(counts.sum())
    k = np.zeros(len(TARGETS), dtype=np.int64)
    for i in range(len(counts)):
        k += (impostors.of(i)[:, None] <= thresholds[i][None, :]).sum(axis=0)
    w = (counts[:, None] * world.class_fpr(thresholds)).sum(axis=0) / n
    band = np.array([clopper_pearson(int(kj), n, BAND_LEVEL) for kj in k])
    inside = (band[:, 0] <= w) & (w <= band[:, 1])
    tail = world.tail
    return {"thresholds": thresholds, "k": k, "n": n, "emp": k / n, "world": w, "inside": inside,
            "xi": np.nan if tail is None else tail.xi, "p_u": np.nan if tail is None else tail.p_u}


def generated(setting, n: int, per_class: int | None, rng: np.random.Generator, estimator, positions: int = 7,
              p: int = 20) -> dict:
    """One generated gallery of ``setting`` (geometric: N - 1 distances per class; tail: ``per_class``)."""
    if isinstance(setting, nf.ScoreSetting):
        gallery = setting.gallery(rng, n, per_class)
        out = check(gallery.training(), estimator)
        out["true"] = nf.true_fpr_scores(gallery, out["thresholds"])
    else:
        gallery = nf.make_gallery(rng, n, positions, p, setting)
        out = check(nf.training_impostors(gallery), estimator)
        out["true"] = nf.true_fpr(gallery, out["thresholds"])
    return out


def real_impostors(path: Path, transform: dict, seed: int) -> ImpostorDistances:
    """The training impostor distances of one split, loaded and transformed as the pipeline does."""
    from calibrate.recipe.validation import parse_recipe

    raw = {"version": 1, "data": {"plugin": "score-matrix", "path": str(path), "kind": "similarity", "missing": -1,
                                  "seed": seed},
           "transform": transform, "estimators": [{"plugin": "auto"}], "evaluation": {"targets": list(TARGETS)},
           "output": {"dir": str(ROOT / "results" / "world-fit"), "plots": False, "save_calibration": False}}
    recipe = parse_recipe(raw, build_registry(), source=path.name)
    data = recipe.data.build().load(RunContext(seed=seed))
    fitted = recipe.transform_for(data.train.kind).build().fit(data.train.impostors_only())
    return ImpostorDistances.from_matrix(fitted.apply(data.train))


def summarise(name: str, size: str, runs: list[dict]) -> list[str]:
    """Table rows (one per target) over the replicates of one generator and size."""
    rows = []
    med = lambda key, j: float(np.median([r[key][j] for r in runs]))  # noqa: E731
    xi = np.nanmedian([r["xi"] for r in runs]) if any(np.isfinite(r["xi"]) for r in runs) else np.nan
    for j, t in enumerate(TARGETS):
        ratio = np.median([r["world"][j] / r["emp"][j] if r["emp"][j] > 0 else np.inf for r in runs])
        inside = sum(bool(r["inside"][j]) for r in runs)
        bad = sum((not r["inside"][j]) and r["k"][j] >= MIN_SUPPORT for r in runs)
        true = f"{100 * med('true', j):.3f}%" if "true" in runs[0] else "-"
        rows.append(f"| {name} | {size} | {100 * t:g}% | {med('k', j):.0f} | {100 * med('emp', j):.3f}% | "
                    f"{100 * med('world', j):.3f}% | {true} | {ratio:.2f} | {inside}/{len(runs)} | "
                    f"{'**' + str(bad) + '**' if bad else '0'} | {xi:.2f} |")
    return rows


def parse_plan(items: list[str]) -> list[tuple[int, int]]:
    out = []
    for item in items:
        classes, _, per = item.partition("x")
        out.append((int(classes), int(per)))
    return out


def main(argv: list[str] | None = None) -> str:
    names = [s.name for s in nf.SETTINGS + nf.TAIL_SETTINGS]
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="seconds: one replicate of 30x200 and 100x300, no real data")
    parser.add_argument("--generators", nargs="+", choices=names, default=None, help="default: all")
    parser.add_argument("--plan", nargs="+", default=None,
                        help="tail generators' sizes as CLASSESxPER_CLASS (default 30x200 100x300 500x258); "
                             "geometric settings use the class counts with N - 1 distances per class")
    parser.add_argument("--replicates", type=int, default=3)
    parser.add_argument("--real-seeds", type=int, default=3, help="split seeds per real dataset (0: skip the real data)")
    parser.add_argument("--seed", type=int, default=2014)
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "world_fit.md")
    args = parser.parse_args(argv)
    plan = parse_plan(args.plan or (["30x200", "100x300"] if args.quick else ["30x200", "100x300", "500x258"]))
    reps = 1 if args.quick else args.replicates
    real_seeds = 0 if args.quick else args.real_seeds
    chosen = args.generators or names
    estimator = build_registry().get("estimators", "auto").factory()
    start = time.perf_counter()
    lines = ["# Does the reference world agree with its own training data?", "",
             f"`python benchmarks/world_fit.py {' '.join(argv if argv is not None else sys.argv[1:])}`".replace(" `", "`"),
             "(benchmarks/world_fit.py; its docstring says how). Per target: training support k (summed over "
             "classes), empirical training FPR k/N of auto's thresholds, the world's FPR of the same thresholds, "
             "the generator's true FPR, world / (k/N), replicates with the world inside the 99.9% Clopper-Pearson "
             f"band of k/N, replicates that *contradict* (outside with k >= {MIN_SUPPORT}), and the world's fitted "
             "GPD shape xi (clipped to [-1, 0.5]). Medians over replicates.", "",
             "| generator | classes x per class | target | k | k/N | world | true | world/emp | in band | contradict | xi |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for si, setting in enumerate(nf.SETTINGS + nf.TAIL_SETTINGS):
            if setting.name not in chosen:
                continue
            tail = isinstance(setting, nf.ScoreSetting)
            for n, per in plan:
                runs = [generated(setting, n, per, np.random.default_rng([args.seed, si, n, per, r]), estimator)
                        for r in range(reps)]
                size = f"{n} x {per if tail else n - 1}"
                lines += summarise(setting.name, size, runs)
                print(f"{setting.name} {size}: {time.perf_counter() - start:.0f} s", file=sys.stderr, flush=True)
        for name, (file, transform) in REAL.items():
            if real_seeds and (DATA / file).exists():
                runs = [check(real_impostors(DATA / file, transform, s), estimator) for s in range(real_seeds)]
                lines += summarise(name, f"{len(runs[0]['thresholds'])} x ~{runs[0]['n'] // len(runs[0]['thresholds'])}", runs)
                print(f"{name}: {time.perf_counter() - start:.0f} s", file=sys.stderr, flush=True)
    elapsed = time.perf_counter() - start
    lines += ["", f"{elapsed:.0f} s."]
    return nf.publish("\n".join(lines) + "\n", args.out, elapsed)


if __name__ == "__main__":
    main()
