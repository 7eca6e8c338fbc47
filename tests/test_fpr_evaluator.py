"""The fpr evaluator's figures, each checked against an independent computation on generated data."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy import stats

import calibrate
from calibrate.contract.base import EvaluationInput, Fold, RunContext
from calibrate.contract.types import DistanceMatrix, ImpostorDistances, ThresholdTable
from calibrate_builtins.estimators.interp import GenericInterp
from calibrate_builtins.evaluators.fpr import FprEvaluator, class_bootstrap, clopper_pearson, evaluate_label

from calibrate_test_helpers import make_scores, score_recipe, write_recipe, write_scores

TARGETS = (0.05, 0.01)


def random_fold(seed: int, n_classes: int = 9, sets_per_class: int = 3, name: str = "f") -> Fold:
    """Query sets of every class against one enrolled set per class, with random thresholds."""
    rng = np.random.default_rng(seed)
    classes = [f"c{i}" for i in range(n_classes)]
    probes = np.repeat(classes, sets_per_class)
    test = DistanceMatrix(rng.gamma(4.0, 1.0, (probes.size, n_classes)), probes, np.array(classes), source="test")
    train = DistanceMatrix(rng.gamma(4.0, 1.0, (n_classes, n_classes)), np.array(classes), np.array(classes), source="train")
    taus = np.sort(rng.uniform(0.5, 3.0, (n_classes, len(TARGETS))), axis=1)[:, ::-1]  # lower target, lower threshold
    table = ThresholdTable("est", tuple(classes), TARGETS, taus)
    model = GenericInterp().fit(ImpostorDistances.from_matrix(train))  # only names the label; the table is random
    return Fold(name, train, test, {"est": model}, {"est": table})


def brute_force(folds: list[Fold], k: int) -> dict:
    fa = n = 0
    pairs = set()
    per_class: dict[str, list[int]] = {}
    for fold in folds:
        table, test = fold.tables["est"], fold.test
        for j, g in enumerate(test.gallery_classes):
            tau = table.values[table.classes.index(g), k]
            for i, p in enumerate(test.probe_classes):
                if p == g:
                    continue
                n += 1
                per_class.setdefault(g, [0, 0])[1] += 1
                if test.values[i, j] <= tau:
                    fa += 1
                    per_class[g][0] += 1
                    pairs.add(tuple(sorted((str(p), str(g)))))
    return {"fa": fa, "n": n, "pairs": len(pairs), "per_class": per_class}


@pytest.mark.parametrize("k, n", [(0, 50), (1, 50), (7, 200), (50, 50), (3, 100_000)])
def test_clopper_pearson_inverts_the_binomial_tails(k, n):
    low, high = clopper_pearson(k, n)
    if k > 0:
        assert stats.binom.sf(k - 1, n, low) == pytest.approx(0.025, rel=1e-6)  # P(X >= k | low)
    else:
        assert low == 0.0
    if k < n:
        assert stats.binom.cdf(k, n, high) == pytest.approx(0.025, rel=1e-6)  # P(X <= k | high)
    else:
        assert high == 1.0


def test_counts_pairs_and_shares_match_a_brute_force_count_over_two_folds():
    folds = [random_fold(1, name="a"), random_fold(2, name="b")]
    rows = evaluate_label(tuple(folds), "est", TARGETS, seed=0)
    for k, row in enumerate(rows):
        ref = brute_force(folds, k)
        assert (row.false_accepts, row.impostor_attempts) == (ref["fa"], ref["n"])
        assert row.extra["false_accept_pairs"] == ref["pairs"]
        assert row.extra["training_support"] == pytest.approx(TARGETS[k] * 9 * 8)
        low, high = clopper_pearson(ref["fa"], ref["n"])
        assert row.extra["ratio_ci_low"] == pytest.approx(low / TARGETS[k])
        assert row.extra["ratio_ci_high"] == pytest.approx(high / TARGETS[k])
    # per-class shares: each fold's class rates, as the evaluator pools them
    k = 0
    rates = []
    for fold in folds:
        ref = brute_force([fold], k)
        rates += [fa / n for fa, n in ref["per_class"].values()]
    assert rows[k].extra["share_classes_over_2x"] == pytest.approx(np.mean(np.array(rates) > 2 * TARGETS[k]))


def test_counts_with_ties_invalid_entries_and_missing_thresholds_match_a_brute_force_count():
    """Scores equal to a threshold are accepted, invalid entries never count, a NaN threshold accepts
    nothing (at its target only), genuine attempts give the FNR: cell by cell in plain Python."""
    from calibrate_builtins.evaluators.fpr import class_names, fold_counts

    fold = random_fold(3, n_classes=7, sets_per_class=4)
    rng = np.random.default_rng(4)
    taus = fold.tables["est"].values.copy()
    values = fold.test.values.copy()
    values[rng.random(values.shape) < 0.3] = np.round(values[rng.random(values.shape) < 0.3][0], 1)
    taus[2, 1], taus[5] = np.nan, np.nan
    values[0, 0] = taus[0, 0]  # a genuine attempt exactly at its threshold
    values[6, 0] = taus[0, 1]  # an impostor attempt exactly at a threshold
    valid = rng.random(values.shape) > 0.15
    test = DistanceMatrix(values, fold.test.probe_classes, fold.test.gallery_classes, valid, source="test")
    fold = Fold("f", fold.train, test, fold.models, {"est": ThresholdTable("est", fold.tables["est"].classes, TARGETS, taus)})
    got = fold_counts(fold, "est", class_names((fold,)))
    for k in range(len(TARGETS)):
        for j, g in enumerate(test.gallery_classes):
            tau = taus[list(fold.tables["est"].classes).index(g), k]
            fa = imp = ga = gen = 0
            for i, p in enumerate(test.probe_classes):
                if not valid[i, j]:
                    continue
                accepted = bool(values[i, j] <= tau)
                if p == g:
                    gen, ga = gen + 1, ga + accepted
                else:
                    imp, fa = imp + 1, fa + accepted
            assert (got["fa"][k, j], got["imp"][k, j], got["ga"][k, j], got["gen"][k, j]) == (fa, imp, ga, gen), (k, j)
    assert got["pairs"].size == got["fa"].sum()


def test_class_bootstrap_widens_when_false_accepts_cluster_in_one_class():
    imp = np.full(30, 200)
    clustered = np.zeros(30, dtype=int)
    clustered[0] = 12  # all 12 false accepts from one look-alike class
    low, high = class_bootstrap(clustered, imp, np.random.default_rng(0))
    cp_low, cp_high = clopper_pearson(12, 6000)
    assert low == 0.0 < cp_low  # that class is left out of many resamples
    assert high > 1.5 * cp_high


def test_class_bootstrap_agrees_with_clopper_pearson_when_attempts_are_independent():
    rng = np.random.default_rng(5)
    imp = np.full(400, 500)
    fa = rng.binomial(imp, 0.004)
    low, high = class_bootstrap(fa, imp, np.random.default_rng(1))
    cp_low, cp_high = clopper_pearson(int(fa.sum()), int(imp.sum()))
    assert low == pytest.approx(cp_low, rel=0.15)
    assert high == pytest.approx(cp_high, rel=0.15)


def test_bootstrap_interval_is_reproducible_for_a_seed_and_brackets_the_ratio():
    folds = (random_fold(3), random_fold(4))
    data = EvaluationInput(folds, TARGETS, plots=False)
    first = FprEvaluator(plots=False).evaluate(data, RunContext(seed=7)).estimators["est"]
    again = FprEvaluator(plots=False).evaluate(data, RunContext(seed=7)).estimators["est"]
    for a, b in zip(first, again):
        assert a.extra == b.extra
        assert a.extra["ratio_boot_low"] <= a.ratio <= a.extra["ratio_boot_high"]


def test_run_reports_thin_training_support_in_notes_and_report(tmp_path):
    values, probes, gallery = make_scores(seed=3, n_classes=10, probes_per_class=6)
    csv_path = write_scores(tmp_path / "scores.csv", values, probes, gallery)
    recipe = write_recipe(tmp_path / "r.yaml", score_recipe(csv_path, tmp_path / "out", targets=(0.05, 0.001)))
    with pytest.warns(UserWarning, match="training impostor distances"):
        calibrate.run(recipe)
    doc = json.loads((tmp_path / "out" / "results.json").read_text(encoding="utf-8"))
    support = [n for n in doc["notes"] if "extrapolates" in n]
    assert len(support) == 1 and "0.1% (" in support[0] and "5% (" not in support[0]  # 0.05 x 270 = 13.5 is enough
    row = doc["estimators"]["generic-interp"]["targets"][1]
    assert {"ratio_boot_low", "ratio_boot_high", "false_accept_pairs", "training_support"} <= set(row)
    report = (tmp_path / "out" / "report.md").read_text(encoding="utf-8")
    assert "Class bootstrap" in report and "Training support" in report


def test_run_says_when_ties_at_the_smallest_distance_make_a_target_unreachable(tmp_path):
    rng = np.random.default_rng(4)
    n = 30
    gallery = [f"id{c:02d}" for c in range(n)]
    probes = [g for g in gallery for _ in range(4)]
    values = np.round(rng.gamma(3.0, 1.0, (len(probes), n)))  # integer distances: about 2% of them are 0
    values[np.array(probes)[:, None] == np.array(gallery)[None, :]] = 0.0
    csv_path = write_scores(tmp_path / "d.csv", values, probes, gallery)
    raw = score_recipe(csv_path, tmp_path / "out", targets=(0.05, 0.005))
    raw["data"]["kind"] = "distance"
    raw["transform"] = {"plugin": "identity"}
    with pytest.warns(UserWarning):
        result = calibrate.run(write_recipe(tmp_path / "r.yaml", raw))
    train = result.folds[0].train
    pooled = train.values[train.impostor_mask()]
    share = np.mean(pooled == pooled.min())
    assert 0.005 < share < 0.05
    tied = [note for note in result.notes if "equal the smallest one" in note]
    assert len(tied) == 1 and "0.5%" in tied[0] and "5%," not in tied[0] and f"{100 * share:.3g}%" in tied[0]


@pytest.mark.parametrize("accepting", [40, 3000, 15000])
def test_class_bootstrap_of_a_large_gallery_agrees_with_resampling_every_class(monkeypatch, accepting):
    # past LARGE_GALLERY classes only the accepting ones are drawn (the others' attempts by their normal sum; past
    # MANY_ACCEPTING the ratio's normal law): the interval must be the one that resampling every class gives
    import calibrate_builtins.evaluators.fpr_fields as fields

    rng = np.random.default_rng(43)
    n = 25_000
    imp = rng.integers(50, 150, size=n)
    fa = np.zeros(n, dtype=int)
    who = rng.choice(n, accepting, replace=False)
    fa[who] = rng.binomial(imp[who], 0.03) + 1
    assert fields.LARGE_GALLERY < n and (accepting > fields.MANY_ACCEPTING) == (accepting == 15000)
    fast = fields.class_bootstrap(fa, imp, np.random.default_rng(1))
    monkeypatch.setattr(fields, "LARGE_GALLERY", 10 ** 9)
    every = fields.class_bootstrap(fa, imp, np.random.default_rng(2))
    # two independent sets of 1,000 replicates: their 2.5% and 97.5% quantiles differ by Monte Carlo error alone
    width = every[1] - every[0]
    assert abs(fast[0] - every[0]) <= 0.1 * width and abs(fast[1] - every[1]) <= 0.1 * width
