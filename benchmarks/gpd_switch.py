"""Estimator ``auto`` around its GPD switch point: variants of the tail rule on the noise-floor galleries.

    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/gpd_switch.py           # full run
    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/gpd_switch.py --quick   # tiny run (seconds)
    .venv/bin/python benchmarks/gpd_switch.py --settings tau0-s0.3 tau0.5-s0.3 --plan 100:60      # a subset

Why: docs/noise-floor.md shows, at 100 classes (~9,900 pooled training distances, so the target
FPRs 0.1% and 0.05% have 9.9 and 4.95 pooled values below them and both fall below auto's switch
at ``min_tail_count`` = 10), auto's median true ratio at 0.1% below 1 (0.79-0.96) and at 0.05% above
1 (1.13-1.39). This benchmark refits auto's configuration (``AUTO_CONFIG`` of
plugins/calibrate_builtins/estimators/auto.py) with variants of the tail rule, by calling
``fit_znorm(impostors, who="auto", **config)`` directly, on exactly the galleries of
benchmarks/noise_floor.py (its generator, seeds ``[seed, setting index, N, replicate]`` and its
exact non-central chi-square true FPR are imported from it), so the ``current`` rows reproduce
the auto rows of docs/noise-floor.md (true ratio) and every variant is compared on the same
replicates (paired).

Variants (``VARIANTS``; everything else as AUTO_CONFIG):

* ``current``: min_tail_count 10, tail_fraction 0.1, min_exceedances 30;
* ``mtc5`` / ``mtc4``: min_tail_count 5 / 4 (the empirical quantile is used further into the tail; at
  100 classes the 0.05% support 4.95 is below 5, so only ``mtc4`` makes 0.05% empirical there);
* ``tf0.05``: tail_fraction 0.05 (GPD fitted to the lowest 5% of the pooled scores, at least 30);
* ``tfNone``: tail_fraction None (``max(ceil(2 sqrt(N)), 30)`` exceedances: 59 / 75 / 199 at 30 / 38 / 100 classes);
* ``mtc20`` / ``tfNone+mtc20``: min_tail_count 20 (alone / with tail_fraction None): the GPD is used
  further up (at 100 classes it then gives 0.1%, support 9.9, where the current rule mostly reads the
  empirical quantile at the switch through the cap); nothing changes at 300 classes (support >= 44.9).

At 300 classes every variant reads the empirical quantile at every target (e N >= 44.9 >= any
min_tail_count here), so their rows are identical there by construction.

Not included: a smooth hand-over between the GPD and the empirical quantile. ``fit_znorm`` and
``ZnormModel.z_quantiles`` only support the hard switch at ``e N = min_tail_count`` (GPD below it,
capped at the empirical quantile at the switch; empirical above it); a blend needs a change to
znorm.py, which this benchmark does not make.

Prints (and writes to ``--out``, default results/gpd_switch.md) Markdown:

* per (setting, N) a table, one row per variant: per target the median true ratio (achieved FPR /
  target) [10th-90th percentile] and the share of replicates with the ratio in [0.75, 1.33] / in
  [0.67, 1.5]; the share with all four targets in [0.67, 1.5]; and the source of z(e) per target
  over the replicates (E: empirical quantile; G: GPD tail; C: GPD tail capped by the empirical
  quantile at the switch);
* a paired summary per N (over the settings run): per variant and target, the share of replicates
  in [0.67, 1.5], the median |log ratio|, and the share of replicates in which the variant is
  closer to 1 (on the log scale) than ``current`` / farther (identical thresholds count as neither).
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
from calibrate_builtins.estimators.auto import AUTO_CONFIG  # noqa: E402
from calibrate_builtins.estimators.znorm import fit_znorm, pooled_quantile  # noqa: E402

TARGETS = nf.TARGETS
BANDS = ((0.75, 1.33), (0.67, 1.5))
VARIANTS: dict[str, dict] = {
    "current": {},
    "mtc5": {"min_tail_count": 5.0},
    "mtc4": {"min_tail_count": 4.0},
    "tf0.05": {"tail_fraction": 0.05},
    "tfNone": {"tail_fraction": None},
    "mtc20": {"min_tail_count": 20.0},
    "tfNone+mtc20": {"tail_fraction": None, "min_tail_count": 20.0},
}
FULL_PLAN = ((30, 40), (38, 40), (100, 20), (300, 8))
QUICK_PLAN = ((30, 3), (38, 3), (100, 2))


def z_source(model, targets: np.ndarray) -> list[str]:
    """Per target, where the model's pooled z(e) comes from: E (empirical), G (GPD tail), C (GPD capped at the switch).

    Mirrors ZnormModel.z_quantiles (read-only use of the fitted model's attributes).
    """
    n = model.sorted_z.size
    switch = model.min_tail_count / n
    if model.tail is None or model.tail.p_u <= switch:
        return ["E"] * targets.size
    at_switch = float(pooled_quantile(model.sorted_z, np.array([switch]))[0])
    gpd = model.tail.quantile(targets)
    return ["E" if e >= switch else ("C" if g > at_switch else "G") for e, g in zip(targets, gpd)]


def run_size(setting: nf.Setting, setting_index: int, n: int, reps: int, k: int, p: int, seed: int,
             registry_auto) -> tuple[dict[str, np.ndarray], dict[str, list[list[str]]]]:
    """True ratios (replicates x targets) and z(e) sources per variant for one setting and gallery size."""
    targets = np.asarray(TARGETS)
    ratios = {v: np.empty((reps, targets.size)) for v in VARIANTS}
    sources: dict[str, list[list[str]]] = {v: [] for v in VARIANTS}
    for r in range(reps):
        rng = np.random.default_rng([seed, setting_index, n, r])  # as noise_floor.run_size
        gallery = nf.make_gallery(rng, n, k, p, setting)
        impostors = nf.training_impostors(gallery)
        tables = {}
        for label, change in VARIANTS.items():
            model = fit_znorm(impostors, who="auto", **{**AUTO_CONFIG, **change})
            tables[label] = model.thresholds(TARGETS).values
            sources[label].append(z_source(model, targets))
        if r == 0:  # the direct fit is the registry's auto
            reference = registry_auto.fit(impostors, RunContext(seed=0)).thresholds(TARGETS).values
            if not np.array_equal(reference, tables["current"]):
                raise RuntimeError("fit_znorm(**AUTO_CONFIG) differs from the registry's auto")
        # the exact true FPR once per distinct threshold column (variants often agree, e.g. empirical targets)
        columns, where = [], {}
        for label, values in tables.items():
            for j in range(targets.size):
                key = values[:, j].tobytes()
                if key not in where:
                    where[key] = len(columns)
                    columns.append(values[:, j])
        fpr = nf.true_fpr(gallery, np.column_stack(columns))
        for label, values in tables.items():
            ratios[label][r] = [fpr[where[values[:, j].tobytes()]] / targets[j] for j in range(targets.size)]
    return ratios, sources


def share(ratios: np.ndarray, band: tuple[float, float]) -> np.ndarray:
    return (ratios >= band[0]) & (ratios <= band[1])


def cell(col: np.ndarray) -> str:
    lo, med, hi = np.percentile(col, [10, 50, 90])
    return (f"{med:.2f} [{lo:.2f}-{hi:.2f}] " + "/".join(f"{100 * share(col, b).mean():.0f}%" for b in BANDS))


def source_cell(rows: list[list[str]]) -> str:
    """Per target: the letter if every replicate agrees, else counts (e.g. C17G3); targets separated by ' '."""
    out = []
    for j in range(len(TARGETS)):
        letters = [row[j] for row in rows]
        kinds = sorted(set(letters))
        out.append(kinds[0] if len(kinds) == 1 else "".join(f"{c}{letters.count(c)}" for c in kinds))
    return " ".join(out)


def size_table(setting: nf.Setting, n: int, reps: int, ratios: dict, sources: dict) -> list[str]:
    pooled = n * (n - 1)
    support = " / ".join(f"{t * pooled:.3g}" for t in TARGETS)
    lines = [f"### {setting.name}, N = {n} classes, {reps} replicates (pooled values {pooled}; e N = {support})", "",
             "| variant | " + " | ".join(f"{100 * t:g}%" for t in TARGETS) + " | all 4 in [0.67, 1.5] | z(e) source |",
             "|" + "---|" * (len(TARGETS) + 3)]
    for label in VARIANTS:
        r = ratios[label]
        lines.append(f"| {label} | " + " | ".join(cell(r[:, j]) for j in range(len(TARGETS)))
                     + f" | {100 * share(r, BANDS[1]).all(axis=1).mean():.0f}% | {source_cell(sources[label])} |")
    return lines + [""]


def paired_summary(results: list) -> list[str]:
    """Per N over all settings run: in-band share, median |log ratio|, and closer/farther than current."""
    lines = ["## Paired summary per N (all settings run pooled)", "",
             "Cells: share in [0.67, 1.5]; median |log ratio|; replicates closer to 1 than `current` / farther "
             "(identical thresholds count as neither).", ""]
    for n in sorted({n for _, n, _, _, _ in results}):
        rows = [(ratios, reps) for _, m, reps, ratios, _ in results if m == n]
        total = sum(reps for _, reps in rows)
        lines += [f"### N = {n} ({total} replicates)", "",
                  "| variant | " + " | ".join(f"{100 * t:g}%" for t in TARGETS) + " |", "|" + "---|" * (len(TARGETS) + 1)]
        base = np.vstack([ratios["current"] for ratios, _ in rows])
        for label in VARIANTS:
            r = np.vstack([ratios[label] for ratios, _ in rows])
            cells = []
            for j in range(len(TARGETS)):
                dev, dev0 = np.abs(np.log(np.maximum(r[:, j], 1e-12))), np.abs(np.log(np.maximum(base[:, j], 1e-12)))
                same = r[:, j] == base[:, j]
                closer, farther = int(((dev < dev0) & ~same).sum()), int(((dev > dev0) & ~same).sum())
                cells.append(f"{100 * share(r[:, j], BANDS[1]).mean():.0f}%; {np.median(dev):.2f}; "
                             + ("=" if label == "current" else f"{closer}/{farther}"))
            lines.append(f"| {label} | " + " | ".join(cells) + " |")
        lines.append("")
    return lines


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny run (seconds): one setting, few replicates")
    parser.add_argument("--seed", type=int, default=2014, help="base seed (noise_floor.py's default: same galleries)")
    parser.add_argument("--positions", type=int, default=7, help="set positions per subject, k (noise_floor.py: 7)")
    parser.add_argument("--settings", nargs="+", choices=[s.name for s in nf.SETTINGS],
                        help="noise-floor settings to run (default: all four; --quick: tau0.5-s0.3)")
    parser.add_argument("--plan", nargs="+", metavar="N:R",
                        help="gallery sizes and replicates, e.g. 100:60 (default 30:40 38:40 100:20 300:8, as noise_floor.py)")
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "gpd_switch.md", help="where to write the report")
    args = parser.parse_args(argv)
    p = 20  # as noise_floor.py
    if args.plan:
        plan = [tuple(int(x) for x in item.split(":")) for item in args.plan]
    else:
        plan = QUICK_PLAN if args.quick else FULL_PLAN
    names = args.settings or (["tau0.5-s0.3"] if args.quick else [s.name for s in nf.SETTINGS])
    registry_auto = build_registry().get("estimators", "auto").factory()
    start = time.perf_counter()
    results = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for si, setting in enumerate(nf.SETTINGS):  # si: the setting's index in noise_floor.SETTINGS (part of the seed)
            if setting.name not in names:
                continue
            for n, reps in plan:
                t0 = time.perf_counter()
                ratios, sources = run_size(setting, si, n, reps, args.positions, p, args.seed, registry_auto)
                results.append((setting, n, reps, ratios, sources))
                print(f"[{setting.name} N={n} R={reps}: {time.perf_counter() - t0:.1f} s]", file=sys.stderr, flush=True)
    elapsed = time.perf_counter() - start
    command = "python benchmarks/gpd_switch.py " + " ".join(sys.argv[1:] if argv is None else argv)
    variants = "; ".join(f"`{k}`: " + (", ".join(f"{a}={b}" for a, b in v.items()) or "AUTO_CONFIG") for k, v in VARIANTS.items())
    lines = ["# auto around the GPD switch point: variants of the tail rule (true ratio)", "",
             f"`{command.strip()}` (seed {args.seed}, k = {args.positions}, p = {p}; noise_floor.py's galleries; "
             f"{elapsed:.0f} s).", "",
             f"Variants (changes to AUTO_CONFIG): {variants}. Not included: a smooth GPD/empirical hand-over "
             "(fit_znorm supports only the hard switch; it would need a change to znorm.py).", "",
             "Cells: median true ratio (achieved FPR / target) [10th-90th percentile] share of replicates in "
             f"[{BANDS[0][0]}, {BANDS[0][1]}] / in [{BANDS[1][0]}, {BANDS[1][1]}]. z(e) source per target "
             f"({' / '.join(f'{100 * t:g}%' for t in TARGETS)}): E empirical, G GPD tail, C GPD capped at the "
             "empirical quantile at the switch (counts of replicates when mixed).", ""]
    for setting, n, reps, ratios, sources in results:
        lines += size_table(setting, n, reps, ratios, sources)
    lines += paired_summary(results)
    return nf.publish("\n".join(lines) + "\n", args.out, elapsed)


if __name__ == "__main__":
    main()
