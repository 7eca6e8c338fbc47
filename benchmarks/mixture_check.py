"""How often calibrate.fit's check for genuine scores among impostor ones fires (calibrate.statistics.mixture): on
impostor-only data it must not, on the same data with genuine scores mixed in it must (issue 41).

    .venv/bin/python benchmarks/mixture_check.py                  # 20 replicates per cell (about 5 minutes on 2 cores)
    .venv/bin/python benchmarks/mixture_check.py --replicates 5 --only bssr1-face-c
    .venv/bin/python benchmarks/mixture_check.py --cost          # the check's time against calibrate.fit's

``--cost``: on the synthetic-impostors generator at 1,000 classes x 2,000 (2M scores), the check alone against a
whole ``calibrate.fit(..., impostors_only=True, estimator="auto")`` (the check included), 3 interleaved rounds.

Per data set and replicate: the impostor scores (with their classes), then the same with genuine scores mixed in:
all the genuine comparisons the data hold, and 1 genuine per 100, 500 and 2,000 impostor scores (genuine ones drawn
at random, or, where the data hold too few, impostor ones left out at random). Each cell prints how many of the
replicates fired, and the largest and smallest statistic (likelihood-ratio root; it fires at
calibrate.statistics.mixture.MIN_ROOT with the other bars met).

Real data (../shared/data; absent ones are skipped with a note), each replicate a random half of the classes and of
the probes, the whole set in replicate 0: CFP frontal with dlib's ResNet (cosine similarity; template = each
identity's first image, probes = its other nine: 9 genuine and 4,491 impostor scores per class); BSSR1 set 1 face C
and left index finger (517 x 517, the diagonal genuine, face C's failed column left out). Generated (a new seed per
replicate): synthetic-impostors (distances, 200 classes x 400, 20% of classes off the ncx2 model; and rounded to 2
decimals: ties), synthetic-groups (its defaults: 300 classes, 2 groups, same-group impostors closer), its
look-alikes variant of docs/genuine-cost.md (5% of impostor comparisons 2.5 sd above the crowd: impostor-only data
with a second mode of their own), tests/test_calibration_api.py's beta gallery (40 classes x 300) and
examples/embed.py's matcher (200 classes x 400). Their genuine scores: synthetic-groups' own; for the others 2 per
class drawn 4 impostor standard deviations onto the accept side of the class's impostor mean (the beta gallery:
Beta(6, 2), as tests/calibrate_test_helpers.make_scores; embed: N(80, 8) as the example's genuine attempts).
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
sys.path.insert(0, str(ROOT / "plugins"))

from calibrate.statistics import mixture  # noqa: E402
from calibrate_builtins.datasets.synthetic_groups import SyntheticGroups  # noqa: E402
from calibrate_builtins.datasets.synthetic_impostors import impostor_distances  # noqa: E402

CONDITIONS = ("impostors only", "all genuine", "1:100", "1:500", "1:2000")


def cfp():
    """(scores probes x classes, genuine mask, kind) of CFP frontal (as benchmarks/genuine_cost.py builds it)."""
    source = DATA / "cfp-frontal-dlib" / "cfp_frontal_dlib.npz"
    if not source.exists():
        return None
    d = np.load(source)
    X = d["X"].astype(np.float64)
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    order = np.lexsort((d["files"], d["y"]))
    X, y = X[order], d["y"][order]
    first = np.r_[True, y[1:] != y[:-1]]
    return X[~first] @ X[first].T, y[~first][:, None] == y[first][None, :], "similarity"


def bssr1(name: str):
    """(scores probes x gallery, genuine mask, kind) of a BSSR1 set-1 matrix, failed columns (-1) left out."""
    path = DATA / "bssr1-set1" / f"{name}.csv"
    if not path.exists():
        return None
    with path.open(newline="") as fh:
        rows = list(csv.reader(fh))
    m = np.array([[float(v) for v in r[1:]] for r in rows[1:]])
    keep = ~(m == -1).all(axis=0)
    return m[:, keep], np.eye(m.shape[0], dtype=bool)[:, keep], "similarity"


def from_matrix(full):
    """A replicate maker over a real matrix: replicate 0 the whole, the others a random half of classes and probes."""
    m, genuine, kind = full

    def make(r: int):
        rows, cols = np.arange(m.shape[0]), np.arange(m.shape[1])
        if r:
            rng = np.random.default_rng([41, r])
            rows = np.sort(rng.choice(rows, rows.size // 2, replace=False))
            cols = np.sort(rng.choice(cols, cols.size // 2, replace=False))
        sub, g = m[np.ix_(rows, cols)], genuine[np.ix_(rows, cols)]
        codes = np.broadcast_to(np.arange(cols.size), sub.shape)
        return sub[~g], codes[~g], sub[g], codes[g], kind
    return make


def accept_side_genuine(rng, values: np.ndarray, codes: np.ndarray, kind: str, per_class: int = 2):
    """``per_class`` genuine scores per class, 4 impostor standard deviations onto the accept side of its mean."""
    k = codes.max() + 1
    mean = np.bincount(codes, values, k) / np.bincount(codes, minlength=k)
    sd = np.sqrt(np.bincount(codes, (values - mean[codes]) ** 2, k) / np.bincount(codes, minlength=k))
    c = np.repeat(np.arange(k), per_class)
    sign = 1 if kind == "similarity" else -1
    return mean[c] + sign * 4 * sd[c] + rng.normal(0, 1, c.size) * sd[c], c


def synthetic_impostors(decimals=None):
    def make(r: int):
        d, _ = impostor_distances(200, 400, seed=r, off_model=0.2)
        if decimals is not None:
            d = np.round(d, decimals)
        codes = np.broadcast_to(np.arange(200), d.shape).ravel()
        g, gc = accept_side_genuine(np.random.default_rng([41, r]), d.ravel(), codes, "distance")
        g = np.maximum(g, 0) if decimals is None else np.maximum(np.round(g, decimals), 0)
        return d.ravel(), codes, g, gc, "distance"
    return make


def synthetic_groups(**params):
    def make(r: int):
        m = SyntheticGroups(seed=r, **params).load().train
        genuine = m.probe_classes[:, None] == m.gallery_classes[None, :]
        codes = np.broadcast_to(np.arange(m.gallery_classes.size), m.values.shape)
        return m.values[~genuine], codes[~genuine], m.values[genuine], codes[genuine], "similarity"
    return make


def beta_gallery(r: int):
    rng = np.random.default_rng([41, r])
    imp = rng.beta(2, 6, (300, 40)) * 100
    codes = np.broadcast_to(np.arange(40), imp.shape).ravel()
    gc = np.repeat(np.arange(40), 2)
    return imp.ravel(), codes, rng.beta(6, 2, gc.size) * 100, gc, "similarity"


def embed_matcher(r: int):
    rng = np.random.default_rng([41, r])
    offset = rng.normal(0, 4, 200)
    imp = np.clip(rng.normal(35, 9, (400, 200)) + offset, 0, 100)
    codes = np.broadcast_to(np.arange(200), imp.shape).ravel()
    gc = np.repeat(np.arange(200), 2)
    return imp.ravel(), codes, np.clip(rng.normal(80, 8, gc.size), 0, 100), gc, "similarity"


def sources() -> dict:
    out = {}
    for name, load in (("cfp-frontal-dlib", cfp), ("bssr1-face-c", lambda: bssr1("face-C")),
                       ("bssr1-finger-left", lambda: bssr1("finger-left"))):
        full = load()
        if full is None:
            print(f"{name}: skipped, no data in {DATA}")
        else:
            out[name] = from_matrix(full)
    out["synthetic-impostors"] = synthetic_impostors()
    out["synthetic-impostors-rounded"] = synthetic_impostors(decimals=2)
    out["synthetic-groups"] = synthetic_groups()
    out["synthetic-look-alikes"] = synthetic_groups(classes=300, group_shares=[1.0], train_probes=3, genuine="fixed",
                                                    class_spread=1.0, look_alikes=0.05, look_alike_level=2.5,
                                                    separation=8.0)
    out["beta-gallery"] = beta_gallery
    out["embed-matcher"] = embed_matcher
    return out


def condition(rng, imp, ic, gen, gc, which: str):
    """(scores, codes) of one condition: impostors only, all genuine, or 1 genuine per N impostors."""
    if which == "impostors only":
        return imp, ic
    if which == "all genuine":
        return np.r_[imp, gen], np.r_[ic, gc]
    per = int(which.split(":")[1])
    want = imp.size // per
    if want <= gen.size:
        pick = rng.choice(gen.size, max(want, 1), replace=False)
        return np.r_[imp, gen[pick]], np.r_[ic, gc[pick]]
    keep = rng.choice(imp.size, gen.size * per, replace=False)
    return np.r_[imp[keep], gen], np.r_[ic[keep], gc]


def cost() -> None:
    import warnings

    import calibrate

    d, _ = impostor_distances(1000, 2000, seed=0, off_model=0.2)
    scores, codes = d.ravel(), np.tile(np.arange(1000), 2000)
    classes = np.char.add("c", codes.astype(str))
    checks, fits = [], []
    for _ in range(3):
        t = time.perf_counter()
        fired = mixture.mixed_scores(scores, codes, "distance").fired
        checks.append(time.perf_counter() - t)
        t = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            calibrate.fit(scores, classes, kind="distance", impostors_only=True, predict=False)
        fits.append(time.perf_counter() - t)
    print(f"{scores.size:,} scores: check {min(checks):.2f} s (fired: {fired}), calibrate.fit with auto {min(fits):.2f} s "
          f"(best of 3, interleaved): the check is {min(checks) / min(fits):.0%} of the fit; "
          f"load average {os.getloadavg()[0]:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicates", type=int, default=20)
    parser.add_argument("--only", nargs="*", help="data set names")
    parser.add_argument("--cost", action="store_true", help="time the check against calibrate.fit")
    args = parser.parse_args()
    if args.cost:
        return cost()
    started = time.perf_counter()
    print(f"load average {os.getloadavg()[0]:.2f}; fires at root >= {mixture.MIN_ROOT:g}, factor >= "
          f"{mixture.MIN_FACTOR:g}, >= {mixture.MIN_CLASSES} classes beyond, none over {mixture.MAX_SHARE:.0%} of them")
    print("data set | " + " | ".join(f"{c}: fired/replicates [root min-max]" for c in CONDITIONS) + " | ratio of all")
    totals = {c: [0, 0] for c in CONDITIONS}
    for name, make in sources().items():
        if args.only and name not in args.only:
            continue
        cells, ratio = {c: [] for c in CONDITIONS}, ""
        for r in range(args.replicates):
            imp, ic, gen, gc, kind = make(r)
            ratio = ratio or f"1:{imp.size / max(gen.size, 1):.0f}"
            rng = np.random.default_rng([41, 1, r])
            for c in CONDITIONS:
                s, k = condition(rng, np.asarray(imp, float), np.asarray(ic), np.asarray(gen, float), np.asarray(gc), c)
                cells[c].append(mixture.mixed_scores(s, k, kind))
        parts = []
        for c in CONDITIONS:
            fired = sum(m.fired for m in cells[c])
            roots = [m.root for m in cells[c]]
            totals[c][0] += fired
            totals[c][1] += len(roots)
            parts.append(f"{fired}/{len(roots)} [{min(roots):.1f}-{max(roots):.1f}]")
        print(f"{name} | " + " | ".join(parts) + f" | {ratio}", flush=True)
    print("all | " + " | ".join(f"{f}/{n}" for f, n in totals.values()))
    print(f"{time.perf_counter() - started:.0f} s; load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
