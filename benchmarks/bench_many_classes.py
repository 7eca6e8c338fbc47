"""Per-class work at a million classes (issue 19, item 11): no Python object per class in the split path,
and class-interp through the API.

    .venv/bin/python benchmarks/bench_many_classes.py [--classes 1000000] [--probes 4] [--seed 0]

Prints, measured in this run:

* **split**: ``split_per_class`` (one vectorised pass of hashed keys) on a probes x classes matrix,
  against the previous rule (one ``numpy.random.default_rng(seed + j)`` and permutation per class),
  timed on a tenth of the classes and scaled;
* **fit**: ``calibrate.fit(scores, classes, estimator="class-interp")`` on 2 scores per class.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np


def old_split(valid, probes, gallery, fit_fraction, seed):
    impostor = valid & (probes[:, None] != gallery[None, :])
    fit = np.zeros(valid.shape, bool)
    for j in range(valid.shape[1]):
        rows = np.flatnonzero(impostor[:, j])
        rows = rows[np.random.default_rng(seed + j).permutation(rows.size)]
        fit[rows[:int(round(fit_fraction * rows.size))], j] = True
    return fit, valid & ~fit


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--classes", type=int, default=1_000_000)
    ap.add_argument("--probes", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    import calibrate
    from calibrate_builtins.datasets.score_matrix import split_per_class

    c, p = args.classes, args.probes
    gallery = np.array([f"id{j:07d}" for j in range(c)])
    probes = np.array([f"probe{i}" for i in range(p)])
    valid = np.ones((p, c), bool)
    print(f"{c:,} classes x {p} probes; load average {os.getloadavg()[0]:.2f}")
    t0 = time.perf_counter()
    split_per_class(valid, probes, gallery, 0.5, args.seed)
    new = time.perf_counter() - t0
    tenth = max(c // 10, 1)
    t0 = time.perf_counter()
    old_split(valid[:, :tenth], probes, gallery[:tenth], 0.5, args.seed)
    old = (time.perf_counter() - t0) * c / tenth
    print(f"split_per_class: {new:.2f} s; one generator per class (scaled from {tenth:,}): {old:.1f} s; ratio {old / new:.0f}x")

    rng = np.random.default_rng(args.seed)
    classes = np.repeat(gallery, 2)
    scores = rng.random(classes.size)
    t0 = time.perf_counter()
    cal = calibrate.fit(scores, classes, kind="distance", estimator="class-interp", targets=(0.5,), impostors_only=True)
    fit = time.perf_counter() - t0
    t0 = time.perf_counter()
    cal.threshold(gallery[123], 0.5)
    first = time.perf_counter() - t0
    print(f"calibrate.fit(class-interp) on {classes.size:,} scores: {fit:.1f} s; first threshold {first:.2f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
