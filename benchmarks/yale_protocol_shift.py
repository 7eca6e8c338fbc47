"""How much heavier the evaluation's lower impostor tail is than the training's, on Extended Yale B.

    /work/.venv/bin/python benchmarks/yale_protocol_shift.py      # about 1 min on 2 cores

For each Yale layout (set positions, grouping, distance, number of subjects) the recipe's
folds are built exactly as the pipeline builds them (default staggered enrollment, rotated),
and for q in 0.5%, 1%, 2%, 5% this prints the mean over folds of

    (share of evaluation impostor distances below the training q-quantile) / q

which is 1 when training and evaluation impostors have the same lower tail, and how
concentrated the distances below the training 0.5% quantile are: over all folds, how many
there are in training and in evaluation, from how many distinct subject pairs, and how many
come from the single most frequent pair (look-alike subjects seen through several sets). No estimator is
involved: this is the shift any estimator faces. Then the same after reweighting the training
pairs so that the share of same-position pairs (both sets at the same set position, e.g. the
same lighting) equals the evaluation's: a class is never its own impostor, so under staggered
enrollment same-position pairs are (n_h - 1)/(N - 1) of the training pairs but
(N - n_h)/((N - 1)(k - 1)) of the evaluation pairs. The reweighting is a diagnostic; it needs
set positions that mean the same thing for every class.

Reads ../shared/data (skips with a message when absent); writes nothing.
"""

from __future__ import annotations

import sys
import time
import warnings
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from compare_estimators import DATA, ROOT, yale_by_elevation  # noqa: E402

from calibrate.contract.base import RunContext  # noqa: E402
from calibrate.contract.manager import build_registry  # noqa: E402
from calibrate.recipe.protocol import pattern_folds  # noqa: E402
from calibrate.recipe.validation import parse_recipe  # noqa: E402

QS = (0.005, 0.01, 0.02, 0.05)
YALE = DATA / "extended-yale-b" / "CroppedYale"


def layouts(work: Path) -> dict[str, dict]:
    msm, euc = {"plugin": "mutual-subspace", "components": 6}, {"plugin": "euclidean"}
    nlc, ident = {"plugin": "neg-log-complement"}, {"plugin": "identity"}

    def yale(grouping: str, sets: int) -> dict:
        return {"plugin": "extended-yale-b", "path": str(YALE), "resize": [42, 48], "sets": sets, "grouping": grouping}

    y30 = {"plugin": "image-sets", "path": str(yale_by_elevation(YALE, work / "yale-30-elevation")), "resize": [42, 48]}
    return {"38 subj, 7 runs, MSM": (yale("runs", 7), msm, nlc),
            "38 subj, 7 interleaved, MSM": (yale("interleaved", 7), msm, nlc),
            "38 subj, 7 runs, Euclidean": (yale("runs", 7), euc, ident),
            "38 subj, 5 interleaved, MSM": (yale("interleaved", 5), msm, nlc),
            "38 subj, 5 runs, Euclidean": (yale("runs", 5), euc, ident),
            "30 subj, 5 by elevation, MSM": (y30, msm, nlc),
            "30 subj, 5 by elevation, Euclidean": (y30, euc, ident)}


def position(ids) -> np.ndarray:
    """The set label of every ``class/set`` pattern id."""
    return np.array([str(i).rsplit("/", 1)[-1] for i in ids])


def weighted_quantile(values: np.ndarray, weights: np.ndarray, q: float) -> float:
    order = np.argsort(values)
    cum = np.cumsum(weights[order]) / weights.sum()
    return float(values[order][min(np.searchsorted(cum, q), values.size - 1)])


def pair_counts(matrix, cut: float) -> Counter:
    """Unordered subject pairs of the impostor distances at or below ``cut``."""
    rows, cols = np.nonzero(matrix.impostor_mask() & (matrix.values <= cut))
    return Counter(tuple(sorted((str(matrix.probe_classes[i]), str(matrix.gallery_classes[j])))) for i, j in zip(rows, cols))


def shift(data: dict, distance: dict, transform: dict, registry) -> tuple[np.ndarray, np.ndarray, float, float, Counter, Counter]:
    raw = {"version": 1, "data": data, "distance": distance, "transform": transform, "evaluation": {"rotate": True}}
    recipe = parse_recipe(raw, registry, source="yale_protocol_shift", base_dir=ROOT)
    context = RunContext(seed=0)
    patterns = recipe.data.build().load(context)
    plain, reweighted, shares = [], [], []
    below_train, below_test = Counter(), Counter()
    for _, train, test in pattern_folds(patterns, recipe.protocol, recipe.distance.build(), context, source=recipe.source):
        t = recipe.transform_for(train.kind).build().fit(train)
        train, test = t.apply(train), t.apply(test)
        mt, me = train.impostor_mask(), test.impostor_mask()
        a, b = train.values[mt], test.values[me]
        same_t = (position(train.probe_ids)[:, None] == position(train.gallery_ids)[None, :])[mt]
        same_e = (position(test.probe_ids)[:, None] == position(test.gallery_ids)[None, :])[me]
        st, se = same_t.mean(), same_e.mean()
        w = np.where(same_t, se / st, (1 - se) / (1 - st))
        plain.append([np.mean(b <= np.quantile(a, q)) / q for q in QS])
        reweighted.append([np.mean(b <= weighted_quantile(a, w, q)) / q for q in QS])
        shares.append((st, se))
        cut = float(np.quantile(a, 0.005))
        below_train.update(pair_counts(train, cut))
        below_test.update(pair_counts(test, cut))
    st, se = np.mean(shares, axis=0)
    return np.mean(plain, axis=0), np.mean(reweighted, axis=0), float(st), float(se), below_train, below_test


def main() -> int:
    if not YALE.exists():
        print(f"Extended Yale B not found at {YALE}; nothing to measure")
        return 0
    start = time.perf_counter()
    registry = build_registry()
    head = " | ".join(f"{100 * q:g}%" for q in QS)
    print(f"| Layout | same-position share, training / evaluation | plain: {head} | reweighted: {head} | "
          "below training 0.5%: training (pairs, top pair) | evaluation (pairs, top pair) |")
    print("|---|---|" + "---|" * (2 * len(QS) + 2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, spec in layouts(ROOT / "results" / "protocol-shift").items():
            plain, rew, st, se, bt, be = shift(*spec, registry)
            conc = [f"{sum(c.values())} ({len(c)}, {max(c.values(), default=0)})" for c in (bt, be)]
            print(f"| {name} | {100 * st:.1f}% / {100 * se:.1f}% | " + " | ".join(f"{x:.2f}" for x in plain)
                  + " | " + " | ".join(f"{x:.2f}" for x in rew) + " | " + " | ".join(conc) + " |", flush=True)
    print(f"\n{time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
