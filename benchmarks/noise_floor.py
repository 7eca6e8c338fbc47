"""How far the achieved/target FPR ratio strays by chance alone on small image-set galleries.

    /work/.venv/bin/python benchmarks/noise_floor.py            # full run (a few minutes on 2 cores)
    /work/.venv/bin/python benchmarks/noise_floor.py --quick    # tiny run (seconds)
    /work/.venv/bin/python benchmarks/noise_floor.py --out docs/noise-floor.md   # refresh the committed tables

On a gallery of 30-40 enrolled classes every class has only N - 1 training impostor distances
(its enrolled set against the other classes' enrolled sets), so a threshold at a target FPR of
0.1% or 0.05% is extrapolated from ~N^2 / 2 distinct distances; the evaluation then counts a few
false accepts among N (N - 1) (k - 1) attempts. This benchmark measures both sources of chance
on synthetic galleries whose truth is known, so that a ratio read on a small real dataset (e.g.
Extended Yale B) can be judged against the spread that chance alone produces.

Generator (one replicate): N subjects, k set positions (conditions), dimension p. Subject
vectors a_c ~ N(0, I_p), condition vectors b_g ~ N(0, tau^2 I_p), set representation
x_{c,g} = a_c + b_g + eps with eps ~ N(0, s^2 I_p), fresh for every set; distance = Euclidean.
The ``lookalike`` variant replaces ~3% of the subjects by a near copy of another subject
(a_c' = a_c + N(0, 0.3^2 I_p)), a heavier lower tail of the impostor distances.

Protocol, as the pipeline's ``enrollment: staggered``: subject i (sorted) enrolls position
i mod k; the training impostor distances of class c are the distances between c's enrolled set
and every other subject's enrolled set; the estimator is fitted through the registry exactly as
the pipeline does. The queries are every subject's sets at its k - 1 other positions; the FPR
pools all (class, impostor query) attempts, as the ``fpr`` evaluator does.

Two ratios per replicate and target e:

* **true** ratio: the expected FPR of the fitted thresholds over fresh query noise, divided by
  e. Given the enrolled set x_c and the query mean m = a_c' + b_g, ||x_c - m - eps||^2 / s^2 is
  non-central chi-square (p degrees of freedom, non-centrality ||x_c - m||^2 / s^2), so the
  probability of a false accept is computed exactly (``scipy.special.chndtr``) instead of by
  Monte Carlo. Its spread is the TRAINING-side chance (estimation error) alone.
* **evaluated** ratio: what a real evaluation reads: one query set (one noise draw) per
  (subject, position), counted against every other class's threshold. Adds the test-side chance.

Prints Markdown tables (per setting, N and estimator: median ratio, 10th-90th percentile and
the share of replicates with the ratio inside [0.67, 1.5], per target and at all targets at once)
and writes them to ``results/noise_floor.md``.
"""

from __future__ import annotations

import argparse
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.spatial.distance import cdist
from scipy.special import chndtr

from calibrate.base import RunContext
from calibrate.manager import build_registry
from calibrate.types import ImpostorDistances

ROOT = Path(__file__).resolve().parents[1]
TARGETS = (0.005, 0.0025, 0.001, 0.0005)
BAND = (0.67, 1.5)
ESTIMATORS = ("auto", "generic-interp")


@dataclass(frozen=True)
class Setting:
    """One generator configuration (see the module docstring)."""

    name: str
    tau: float
    s: float
    lookalike: float = 0.0


SETTINGS = (Setting("tau0-s0.3", 0.0, 0.3), Setting("tau0.5-s0.3", 0.5, 0.3),
            Setting("tau0.5-s0.6", 0.5, 0.6), Setting("tau0.5-s0.3-lookalike", 0.5, 0.3, 0.03))


@dataclass(frozen=True)
class Gallery:
    """One synthetic gallery: the query means of every (subject, position) and the enrolled sets."""

    subjects: np.ndarray   # (N, p) subject vectors a_c
    conditions: np.ndarray  # (k, p) condition vectors b_g
    enrolled_pos: np.ndarray  # (N,) position each subject enrolls
    enrolled: np.ndarray   # (N, p) enrolled set representations x_{c, pos(c)}
    s: float

    @property
    def size(self) -> int:
        return self.subjects.shape[0]

    def queries(self) -> tuple[np.ndarray, np.ndarray]:
        """Noise-free means of the query sets, (N (k - 1), p), and the subject index of each."""
        n, k = self.size, self.conditions.shape[0]
        owner, pos = np.divmod(np.arange(n * k), k)
        keep = pos != self.enrolled_pos[owner]
        return self.subjects[owner[keep]] + self.conditions[pos[keep]], owner[keep]


def make_gallery(rng: np.random.Generator, n: int, k: int, p: int, setting: Setting) -> Gallery:
    """Draw subjects, conditions and the enrolled sets (staggered: subject i enrolls position i mod k)."""
    subjects = rng.standard_normal((n, p))
    n_look = round(setting.lookalike * n)
    if n_look:
        copies = rng.choice(n, size=2 * n_look, replace=False)
        subjects[copies[:n_look]] = subjects[copies[n_look:]] + 0.3 * rng.standard_normal((n_look, p))
    conditions = setting.tau * rng.standard_normal((k, p))
    enrolled_pos = np.arange(n) % k
    enrolled = subjects + conditions[enrolled_pos] + setting.s * rng.standard_normal((n, p))
    return Gallery(subjects, conditions, enrolled_pos, enrolled, setting.s)


def class_names(n: int) -> list[str]:
    """Class labels whose sorted order is the subject order (as the staggered enrollment assumes)."""
    return [f"s{i:04d}" for i in range(n)]


def training_impostors(gallery: Gallery) -> ImpostorDistances:
    """Per class: distances from its enrolled set to every other subject's enrolled set."""
    d = cdist(gallery.enrolled, gallery.enrolled)
    n = gallery.size
    off = ~np.eye(n, dtype=bool)
    return ImpostorDistances.from_lists({name: d[i, off[i]] for i, name in enumerate(class_names(n))})


def fit_thresholds(impostors: ImpostorDistances, estimators: dict, targets: tuple[float, ...]) -> dict[str, np.ndarray]:
    """Thresholds (classes x targets) of every estimator, fitted as the pipeline fits them."""
    out = {}
    for label, estimator in estimators.items():
        table = estimator.fit(impostors, RunContext(seed=0)).thresholds(targets)
        if table.classes != impostors.classes:
            raise RuntimeError(f"{label}: threshold table classes are not in the training order")
        out[label] = table.values
    return out


def true_fpr(gallery: Gallery, thresholds: np.ndarray) -> np.ndarray:
    """Expected pooled FPR per target over fresh query noise (exact, non-central chi-square)."""
    means, owner = gallery.queries()
    lam = cdist(gallery.enrolled, means, "sqeuclidean") / gallery.s ** 2       # (classes, queries)
    impostor = owner[None, :] != np.arange(gallery.size)[:, None]
    lam = lam[impostor].reshape(gallery.size, -1)                  # every class has N - 1 impostors x (k - 1)
    p = gallery.enrolled.shape[1]
    x = (thresholds / gallery.s) ** 2                                 # (classes, targets)
    return np.array([chndtr(x[:, [j]], p, lam).mean() for j in range(x.shape[1])])


def evaluated_fpr(gallery: Gallery, thresholds: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """Pooled FPR per target from one query set per (subject, position), and the number of attempts."""
    means, owner = gallery.queries()
    queries = means + gallery.s * rng.standard_normal(means.shape)
    d = cdist(queries, gallery.enrolled)                # (queries, classes)
    impostor = owner[:, None] != np.arange(gallery.size)[None, :]
    accept = d[:, :, None] <= thresholds[None, :, :]
    return (accept & impostor[:, :, None]).sum(axis=(0, 1)) / impostor.sum(), int(impostor.sum())


def run_size(setting: Setting, n: int, k: int, p: int, replicates: int, estimators: dict,
             seed: int, setting_index: int) -> dict[str, dict[str, np.ndarray]]:
    """True and evaluated ratios (replicates x targets) per estimator for one setting and size."""
    out = {label: {"true": np.empty((replicates, len(TARGETS))), "eval": np.empty((replicates, len(TARGETS)))}
           for label in estimators}
    targets = np.asarray(TARGETS)
    for r in range(replicates):
        rng = np.random.default_rng([seed, setting_index, n, r])
        gallery = make_gallery(rng, n, k, p, setting)
        tables = fit_thresholds(training_impostors(gallery), estimators, TARGETS)
        query_seed = rng.integers(2 ** 63)  # the same evaluation queries for every estimator
        for label, values in tables.items():
            out[label]["true"][r] = true_fpr(gallery, values) / targets
            fpr, _ = evaluated_fpr(gallery, values, np.random.default_rng(query_seed))
            out[label]["eval"][r] = fpr / targets
    return out


def in_band(ratios: np.ndarray) -> np.ndarray:
    """Whether each ratio lies inside the goal band."""
    return (ratios >= BAND[0]) & (ratios <= BAND[1])


def summary_cells(ratios: np.ndarray) -> list[str]:
    """Per target 'median [p10-p90] share-in-band', then the share in band at every target at once."""
    cells = []
    for j in range(ratios.shape[1]):
        col = ratios[:, j]
        lo, med, hi = np.percentile(col, [10, 50, 90])
        cells.append(f"{med:.2f} [{lo:.2f}-{hi:.2f}] {100 * in_band(col).mean():.0f}%")
    cells.append(f"{100 * in_band(ratios).all(axis=1).mean():.0f}%")
    return cells


def markdown(results: list[tuple[Setting, int, int, str, dict[str, np.ndarray]]], k: int, p: int,
             seed: int, elapsed: float, command: str) -> str:
    """The report: one table for the true ratio and one for the evaluated ratio."""
    head = "| setting | N | R | estimator | " + " | ".join(f"{100 * t:g}%" for t in TARGETS) + " | all 4 in band |"
    rule = "|" + "---|" * (5 + len(TARGETS))
    lines = ["# Noise floor of the achieved/target FPR ratio on small galleries", "",
             f"`{command}` (seed {seed}, k = {k} positions, p = {p}, staggered enrollment; {elapsed:.0f} s).",
             (f"Cells: median ratio [10th-90th percentile] share of replicates with the ratio in "
              f"[{BAND[0]}, {BAND[1]}]. Generator and protocol: see the docstring of benchmarks/noise_floor.py."), ""]
    for kind, title in (("true", "True ratio (expected FPR of the fitted thresholds): training-side chance"),
                        ("eval", "Evaluated ratio (one query set per subject and position): training + test chance")):
        lines += [f"## {title}", "", head, rule]
        for setting, n, reps, label, ratios in results:
            lines.append(f"| {setting.name} | {n} | {reps} | {label} | " + " | ".join(summary_cells(ratios[kind])) + " |")
        lines.append("")
    attempts = sorted({(n, n * (n - 1) * (k - 1)) for _, n, _, _, _ in results})
    lines.append("Evaluation impostor attempts per replicate: "
                 + ", ".join(f"N = {n}: {a} (expected false accepts at {100 * TARGETS[-1]:g}%: {a * TARGETS[-1]:.1f})"
                             for n, a in attempts) + ".")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> str:
    """Run the benchmark; print the Markdown report, write it to results/noise_floor.md and return it."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny run (seconds): few replicates, small sizes")
    parser.add_argument("--seed", type=int, default=2014, help="base seed of every replicate")
    parser.add_argument("--positions", type=int, default=7, help="set positions (conditions) per subject, k")
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "noise_floor.md", help="where to write the report")
    args = parser.parse_args(argv)
    p = 20
    if args.quick:
        plan, settings = [(30, 3), (38, 3), (100, 2)], SETTINGS[1:2]
    else:
        plan, settings = [(30, 40), (38, 40), (100, 20), (300, 8)], SETTINGS
    registry = build_registry()
    estimators = {label: registry.get("estimators", label).factory() for label in ESTIMATORS}
    start = time.perf_counter()
    results = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for si, setting in enumerate(SETTINGS):
            if setting not in settings:
                continue
            for n, reps in plan:
                ratios = run_size(setting, n, args.positions, p, reps, estimators, args.seed, si)
                results += [(setting, n, reps, label, ratios[label]) for label in ESTIMATORS]
    elapsed = time.perf_counter() - start
    command = "python benchmarks/noise_floor.py" + (" --quick" if args.quick else "") + f" --seed {args.seed}"
    return publish(markdown(results, args.positions, p, args.seed, elapsed, command), args.out, elapsed)


def publish(report: str, out: Path, elapsed: float) -> str:
    """Print the report and the elapsed time, and write the report to ``out`` (shared with gpd_switch.py)."""
    print(report)
    print(f"elapsed: {elapsed:.1f} s")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(report)
    return report


if __name__ == "__main__":
    main()
