"""ncx2-grid fit speed: a plain reference of Algorithm 1 against the project's exact and fast modes.

    .venv/bin/python benchmarks/bench_ncx2.py [--classes 1000] [--n 1000] [--ref-classes 20] [--seed 0]

One run, one process, one core (no executor), on the same seeded data:

* data: ``classes`` classes x ``n`` training impostor distances from the synthetic-impostors
  generator (80% non-central chi-square classes with dim 10..30, lambda 50..400; 20% gamma,
  lognormal and shifted-|t| classes);
* grid: Algorithm 1's default, 8 dims (15..22) x 100 log-spaced sigmas per class, the range
  derived from each class's distances by the documented rule (re-implemented here);
* **reference**: Algorithm 1 written plainly in this file -- loops over dim and sigma, each
  calling ``scipy.stats.ncx2.cdf`` on all n distances and ``np.corrcoef`` -- about half a
  second per class, so it is timed on ``ref-classes`` classes spread over the set;
* **project**: ``Ncx2Grid(mode="exact")`` and ``Ncx2Grid(mode="fast")`` fitted on all classes;
* reference and project runs are interleaved (``rounds`` rounds) so that machine load hits both;
* checks: exact thresholds = reference thresholds to 1e-6 relative on the reference classes;
  fast thresholds within ``FAST_BOUND`` of exact ones on all classes (distribution printed);
* cohort size: fast mode's time per class at n = 1,000, 10,000 and 100,000 distances.

Exit status 1 if a check fails.
"""

from __future__ import annotations

import argparse
import os
import platform
import time
import warnings

import numpy as np
from scipy import stats

from calibrate.contract.types import ImpostorDistances
from calibrate_builtins.estimators.ncx2.batch import FAST_BOUND
from calibrate_builtins.estimators.ncx2.grid import Ncx2Grid
from calibrate_builtins.datasets.synthetic_impostors import impostor_distances

TARGETS = [1e-2, 1e-3, 1e-4]
DIMS = range(15, 23)


def reference_grid(d: np.ndarray, dims=DIMS, steps: int = 100) -> np.ndarray:
    """The documented default sigma range (divide units), written out independently."""
    d2 = d * d
    m, v = d2.mean(), d2.var()
    sig = []
    for k in dims:
        disc = m * m - k * v / 2
        sig.append(np.sqrt((m - np.sqrt(disc)) / k) if disc > 0 else np.sqrt(m / k))
    return np.geomspace(min(sig) / 2, 2 * np.sqrt(m / dims[0]), steps)


def reference_fit(d: np.ndarray, dims, sigmas) -> tuple[int, float, float, float]:
    """Algorithm 1, plainly: for dim, for sigma: X = (d/sigma)^2, lambda, ncx2.cdf, corrcoef."""
    phi_ref = np.searchsorted(np.sort(d), d, side="right").astype(float)  # #{j: d_j <= d_i}
    best = (-np.inf, 0, 0.0, 0.0)
    for dim in dims:
        for sigma in sigmas:
            X = (d / sigma) ** 2
            lam = max(X.mean() - dim, X.mean() / (1 + dim))
            phi = stats.ncx2.cdf(X, dim, lam)
            if np.ptp(phi) == 0:
                continue
            rho = np.corrcoef(phi_ref, phi)[0, 1]
            if rho > best[0]:
                best = (rho, dim, sigma, lam)
    return best[1], best[2], best[3], best[0]


def machine() -> str:
    model = "unknown CPU"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
        mem = [int(l.split()[1]) for l in open("/proc/meminfo") if l.startswith("MemTotal")][0] / 2**20
    except OSError:
        mem = float("nan")
    return f"{model}, {os.cpu_count()} cores, {mem:.0f} GB RAM, {platform.python_version()}"


def as_impostors(values: np.ndarray) -> ImpostorDistances:
    n, c = values.shape
    return ImpostorDistances(tuple(f"c{i}" for i in range(c)), np.ascontiguousarray(values.T).ravel(),
                             np.arange(c + 1, dtype=np.int64) * n)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--classes", type=int, default=1000)
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--ref-classes", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cohorts", default="1000,10000,100000", help="cohort sizes for the fast-mode scaling table ('' to skip)")
    args = ap.parse_args()
    warnings.simplefilter("ignore")  # edge-of-grid notes
    print(f"machine: {machine()}; load average {os.getloadavg()}")
    values, fam = impostor_distances(args.classes, args.n, seed=args.seed)
    impostors = as_impostors(values)
    ref_idx = np.linspace(0, args.classes - 1, args.ref_classes).round().astype(int)
    print(f"data: {args.classes} classes x {args.n} distances (synthetic-impostors seed {args.seed}; "
          f"{np.bincount(fam, minlength=4).tolist()} ncx2/gamma/lognormal/shifted-t); grid 8 dims x 100 sigmas; "
          f"reference on {args.ref_classes} of the classes (every {args.classes // args.ref_classes}th)")

    ref_fits, ref_time = {}, 0.0
    t_exact, t_fast = [], []
    parts = np.array_split(ref_idx, args.rounds)
    for r in range(args.rounds):
        t0 = time.perf_counter()
        exact = Ncx2Grid(mode="exact").fit(impostors)
        t_exact.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        for i in parts[r]:
            d = values[:, i]
            ref_fits[i] = reference_fit(d, DIMS, reference_grid(d))
        ref_time += time.perf_counter() - t0
        t0 = time.perf_counter()
        fast = Ncx2Grid(mode="fast").fit(impostors)
        t_fast.append(time.perf_counter() - t0)
        print(f"round {r + 1}: exact {t_exact[-1]:.2f} s / {args.classes} classes, reference "
              f"{len(parts[r])} classes so far {ref_time:.1f} s, fast {t_fast[-1]:.3f} s / {args.classes}; "
              f"load {os.getloadavg()[0]:.2f}", flush=True)

    ref_pc = ref_time / len(ref_idx)
    ex_pc, fa_pc = min(t_exact) / args.classes, min(t_fast) / args.classes
    ok = True
    # agreement: exact mode vs the reference on the reference classes
    ex_tab = exact.thresholds(TARGETS).values
    ref_tab = np.array([[s * np.sqrt(stats.ncx2.ppf(t, k, lam)) for t in TARGETS] for k, s, lam, _ in
                        (ref_fits[i] for i in ref_idx)])
    dev = np.abs(ex_tab[ref_idx] / ref_tab - 1).max()
    same = sum(exact.dim[i] == ref_fits[i][0] and abs(exact.sigma[i] / ref_fits[i][1] - 1) < 1e-9 for i in ref_idx)
    print(f"exact vs reference: same grid point for {same}/{len(ref_idx)} classes; max relative threshold "
          f"difference {dev:.1e} (must be <= 1e-6): {'OK' if dev <= 1e-6 else 'FAIL'}")
    ok &= dev <= 1e-6
    fa_tab = fast.thresholds(TARGETS).values
    rel = np.abs(fa_tab / ex_tab - 1)
    print(f"fast vs exact on all {args.classes} classes (|fast/exact - 1| at targets {TARGETS}): same grid point for "
          f"{np.mean((fast.dim == exact.dim) & (fast.sigma == exact.sigma)):.0%} of classes")
    for j, t in enumerate(TARGETS):
        q = np.quantile(rel[:, j], [0.5, 0.9, 0.99])
        print(f"  target {t:g}: median {q[0]:.2%}, p90 {q[1]:.2%}, p99 {q[2]:.2%}, max {rel[:, j].max():.2%}")
    print(f"  documented bound {FAST_BOUND:.0%}: {'OK' if rel.max() <= FAST_BOUND else 'FAIL'}")
    ok &= rel.max() <= FAST_BOUND
    print(f"RESULT per class: reference {ref_pc * 1e3:.0f} ms, exact {ex_pc * 1e3:.2f} ms ({ref_pc / ex_pc:.0f}x), "
          f"fast {fa_pc * 1e3:.3f} ms ({ref_pc / fa_pc:.0f}x)  [best of {args.rounds} rounds for the project]")

    if args.cohorts:
        print("fast mode, time per class against cohort size (same generator, one call each):")
        for n in [int(x) for x in args.cohorts.split(",")]:
            c = max(10, min(args.classes, 2 * 10**6 // n))
            imp = as_impostors(impostor_distances(c, n, seed=args.seed + 1)[0])
            times = []
            for _ in range(2):
                t0 = time.perf_counter()
                Ncx2Grid(mode="fast").fit(imp)
                times.append(time.perf_counter() - t0)
            print(f"  n = {n:>6}: {c:>5} classes, {min(times) / c * 1e3:.3f} ms per class", flush=True)
    print(f"load average at the end {os.getloadavg()}")
    if not ok:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
