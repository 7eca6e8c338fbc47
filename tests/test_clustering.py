"""False accepts that cluster by probe (calibrate.predicted.clustering, issue 40): the heterogeneity measured from
generated matrices whose probes' rates are known, the negative-binomial measured interval and the clustered
order-statistic rank against scipy.stats, the widening of replicates, and a run on clustered probes widening its
interval where independent probes do not."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from calibrate.contract.types import DistanceMatrix, ImpostorDistances
from calibrate.predicted.clustering import levels_for, measure, probe_units, unit_size, units_of, widen
from calibrate.predicted.confidence import clustered_rank, order_statistic_rank
from calibrate.predicted.interval import measured_interval


def probe_matrix(rng: np.random.Generator, probes: int, classes: int, shape: float | None,
                 images: int = 1) -> DistanceMatrix:
    """Distances U / lambda: below a threshold t with probability lambda t (t lambda <= 1), lambda one per probe
    identity, Gamma(shape, 1 / shape) (mean 1, squared coefficient of variation 1 / shape; None: all 1)."""
    ids = np.repeat(np.arange(probes), images)
    lam = np.ones(probes) if shape is None else rng.gamma(shape, 1.0 / shape, probes)
    values = rng.random((ids.size, classes)) / lam[ids][:, None]
    return DistanceMatrix(values, np.array([f"p{i}" for i in ids]), np.array([f"g{j}" for j in range(classes)]))


def measured_cv2(matrix: DistanceMatrix, levels=(0.002, 0.005, 0.01, 0.02)) -> np.ndarray:
    impostors = ImpostorDistances.from_matrix(matrix)
    units = probe_units(matrix, impostors)
    pooled = np.sort(impostors.values)
    levels = np.asarray(levels)
    tau = np.quantile(pooled, levels)[None, :].repeat(len(impostors), axis=0)
    return measure(units, impostors, tau, levels).measured


@pytest.mark.parametrize("shape", [1.0, 4.0])
def test_the_units_heterogeneity_is_the_coefficient_of_variation_of_their_rates(shape):
    """cv2 at each level is about 1 / shape, the squared coefficient of variation of the probes' rates (3,000 probes:
    its sampling error is about sqrt(2 (1 + 6 / shape) / 3000) relative to it at these counts; 35% allowed)."""
    m = probe_matrix(np.random.default_rng(1), 3000, 200, shape)
    cv2 = measured_cv2(m)
    assert np.all(np.abs(cv2 * shape - 1.0) < 0.35), cv2


def test_independent_probes_measure_no_clustering_and_images_join_their_identity():
    """Rates all 1: cv2 near 0 (within 3 of its standard errors, about sqrt(2 / 3000) / p s each). Five images of one
    identity share its rate: counted as one unit, the heterogeneity is the identity's (1 / shape); and the matrix's
    units line up with ImpostorDistances' order (class by class)."""
    m = probe_matrix(np.random.default_rng(2), 3000, 200, None)
    cv2 = measured_cv2(m)
    assert np.all(np.abs(cv2) < 3 * np.sqrt(2 / 3000) / (np.array([0.002, 0.005, 0.01, 0.02]) * 199)), cv2
    m5 = probe_matrix(np.random.default_rng(3), 600, 200, 2.0, images=5)
    impostors = ImpostorDistances.from_matrix(m5)
    units = probe_units(m5, impostors)
    assert units.count == 600 and np.all(units.sizes == 5 * 200)  # no probe is of an enrolled class: all impostors
    labels = np.unique(m5.probe_classes)  # units are numbered in the labels' sorted order
    assert np.array_equal(labels[units.of_row], m5.probe_classes)
    # given per distance instead (ImpostorDistances order: class by class, each class's rows in order), the same
    per_value = units_of(np.tile(m5.probe_classes, len(impostors)))
    tau = np.quantile(impostors.values, [0.005, 0.01])[None, :].repeat(len(impostors), axis=0)
    levels = np.array([0.005, 0.01])
    assert np.array_equal(measure(per_value, impostors, tau, levels).measured, measure(units, impostors, tau, levels).measured)
    assert np.all(np.abs(measured_cv2(m5) * 2.0 - 1.0) < 0.45)


def test_the_measured_interval_is_the_negative_binomial_where_probes_cluster():
    """One replicate: its quantiles are scipy's negative binomial's of mean n p and variance (1 + cv2 p s) n p; with
    cv2 0 they are the binomial's, as before."""
    n, p, cv2, s = 200_000, 0.001, 6.0, 900.0
    low, high = measured_interval(np.array([[p]]), n, 0.9, [cv2], s)
    mean, excess = n * p, cv2 * p * s
    r = mean / excess
    nb = stats.nbinom(r, r / (r + mean))
    assert (low[0] * n, high[0] * n) == pytest.approx((nb.ppf(0.05), nb.ppf(0.95)), abs=1e-6)
    b_low, b_high = measured_interval(np.array([[p]]), n, 0.9, [0.0], s)
    assert (b_low[0] * n, b_high[0] * n) == pytest.approx((stats.binom.ppf(0.05, n, p), stats.binom.ppf(0.95, n, p)),
                                                         abs=1e-6)
    assert (b_low[0], b_high[0]) == tuple(x[0] for x in measured_interval(np.array([[p]]), n, 0.9))


@pytest.mark.parametrize("n,e,excess", [(100_000, 0.0005, 2.0), (50_000, 0.001, 0.5), (20_000, 0.0001, 5.0)])
def test_the_clustered_rank_is_the_largest_the_negative_binomial_allows(n, e, excess):
    k = clustered_rank(e, n, 0.95, excess)
    mean = n * e
    r = mean / excess
    nb = stats.nbinom(r, r / (r + mean))
    if k >= 1:
        assert nb.sf(k - 1) >= 0.95 - 1e-9  # P(X >= k)
    assert nb.sf(k) < 0.95
    assert k <= order_statistic_rank(e, n, 0.95)  # clustered values allow no looser rank
    assert clustered_rank(e, n, 0.95, 0.0) == order_statistic_rank(e, n, 0.95)


def test_widen_adds_the_variance_to_the_log_and_keeps_the_median():
    rng = np.random.default_rng(4)
    reps = np.exp(rng.normal(np.log(0.001), 0.2, (4000, 2)))
    reps[:, 1] = 0.002  # no spread: normal scores of the added variance
    out = widen(reps, np.array([0.05, 0.09]))
    sd = lambda x: np.diff(np.quantile(np.log(x), [0.05, 0.95]))[0] / 3.29  # noqa: E731
    assert sd(out[:, 0]) ** 2 == pytest.approx(sd(reps[:, 0]) ** 2 + 0.05, rel=1e-6)
    assert np.median(out[:, 0]) == pytest.approx(np.median(reps[:, 0]), rel=1e-6)
    assert sd(out[:, 1]) == pytest.approx(0.3, rel=0.02)
    assert np.array_equal(widen(reps, np.zeros(2)), reps)


def test_unit_size_counts_each_identitys_attempts_over_matrices():
    m = probe_matrix(np.random.default_rng(5), 10, 4, None, images=3)  # 10 identities x 3 images x 4 impostor classes
    assert unit_size([m]) == pytest.approx(12.0)  # every identity 12 attempts: 10 x 144 / 120
    assert unit_size([m, m]) == pytest.approx(24.0)  # the same identities in two folds: 24 each


def test_levels_reach_from_the_smallest_target_to_five_percent():
    lv = levels_for([0.001, 0.0001])
    assert lv[0] == 0.0001 and lv[-1] == pytest.approx(0.05) and 0.001 in lv and np.all(np.diff(lv) > 0)


def _run(matrix: DistanceMatrix, test: DistanceMatrix, targets):
    from calibrate.contract.manager import build_registry
    from calibrate.contract.base import RunContext
    from calibrate.predicted.interval import PredictionSettings, Worlds, choose_world, predict

    est = build_registry().get("estimators", "generic-interp").factory()
    impostors = ImpostorDistances.from_matrix(matrix)
    model = est.fit(impostors, RunContext())
    worlds = Worlds(impostors, matrix)
    world = choose_world(worlds, impostors, model, targets)
    return predict(est, impostors, targets, settings=PredictionSettings(), seed=[0], context=RunContext(), world=world,
                   model=model, units=worlds.units())


def test_a_prediction_widens_where_probes_cluster_and_not_where_they_do_not():
    """The same sizes, probes clustered (rates Gamma(1/2): cv2 2) or not: the clustered interval's log-width is the
    larger, by about the variance the heterogeneity adds (cv2 / 400 probes); the independent one's cv2 is near 0."""
    t = np.array([0.01, 0.002])
    rng = np.random.default_rng(6)
    wide = _run(probe_matrix(rng, 400, 150, 0.5), None, t)
    plain = _run(probe_matrix(rng, 400, 150, None), None, t)
    var = lambda p: (np.log(p.high / p.low) / 3.29) ** 2  # noqa: E731
    added = np.asarray(wide.clustering["threshold_variance"])
    assert np.all(added > 2 * 0.5 / 400) and np.all(added < 2 * 2 / 400)
    assert np.all(var(wide) - var(plain) > 0.5 * added)
    assert wide.clustering["units"] == 400 and len(wide.clustering["cv2"]) == 2
    assert np.all(np.asarray(plain.clustering["cv2"]) < 0.5)


def test_a_run_keeps_its_clustering_and_a_saved_calibration_answers_with_it(tmp_path):
    """A score matrix whose probe identities cluster (five images each, Gamma(1/2) rates): results.json's interval for
    the measured FPR is the negative binomial's on the evaluation's own units (wider than the binomial one), the
    saved calibration keeps the clustering and the confident model its dispersion, and loaded they answer as the run."""
    import json

    import calibrate
    from calibrate_test_helpers import write_recipe, write_scores

    rng = np.random.default_rng(7)
    train, test = probe_matrix(rng, 300, 60, 0.5, images=5), probe_matrix(rng, 300, 60, 0.5, images=5)
    paths = [write_scores(tmp_path / f"{n}.csv", m.values, m.probe_classes.tolist(), m.gallery_classes.tolist())
             for n, m in (("train", train), ("test", test))]
    raw = {"version": 1, "data": {"plugin": "score-matrix", "train": str(paths[0]), "test": str(paths[1]),
                                  "kind": "distance"},
           "estimators": [{"plugin": "generic-interp"}, {"plugin": "generic-interp", "confidence": 0.95}],
           "evaluation": {"targets": [0.01, 0.002], "prediction": {"replicates": 40}},
           "output": {"dir": str(tmp_path / "out"), "plots": False}}
    result = calibrate.run(write_recipe(tmp_path / "r.yaml", raw))
    doc = json.loads((tmp_path / "out" / "results.json").read_text())
    rows = doc["estimators"]["generic-interp"]["targets"]
    # the confidence's cost is stated per target: the plain thresholds' FNR on the same genuine attempts (here no
    # genuine attempts: probes of no enrolled class), so nothing is said
    assert not [n for n in result.notes if "costs genuine users" in n]
    pred = result.folds[0].predictions["generic-interp"]
    n = rows[0]["impostor_attempts"]
    binomial = measured_interval(pred.replicates, n, 0.9)
    for j, row in enumerate(rows):
        assert row["predicted_fpr_low"] <= binomial[0][j] and row["predicted_fpr_high"] >= binomial[1][j]
    assert rows[0]["predicted_fpr_high"] > binomial[1][0]  # strictly wider where the counts clump
    saved = json.loads((tmp_path / "out" / "calibration.json").read_text())
    entries = {e["label"]: e for e in saved["estimators"]} if isinstance(saved["estimators"], list) else saved["estimators"]
    plain = entries["generic-interp"]
    assert plain["prediction"]["clustering"]["units"] == 300
    assert entries["generic-interp-c95"]["confidence"]["dispersion"]["unit_size"] == pytest.approx(5 * 60)
    cal = calibrate.load(tmp_path / "out" / "calibration.json", "generic-interp")
    # the training's units (300 of 5 images) are the evaluation's size here: the same interval as the run's
    assert cal.predicted_fpr(0.01, attempts=n) == pytest.approx((rows[0]["predicted_fpr_low"], rows[0]["predicted_fpr_high"]))
    conf = calibrate.load(tmp_path / "out" / "calibration.json", "generic-interp-c95")
    assert conf.model.dispersion == pytest.approx(result.folds[0].models["generic-interp-c95"].dispersion)
    table = result.folds[0].tables["generic-interp-c95"]
    for i, cls in enumerate(table.classes[:5]):
        assert conf.distance_threshold(cls, 0.002) == pytest.approx(table.values[i, 1], rel=1e-12)


def test_an_estimator_over_the_refit_budget_is_judged_on_the_training_data():
    """plugged_in: the replicates' median is the geometric mean of the world's FPR at the estimator's own thresholds
    (computed here from the world's class CDFs directly) and the training count's there (counted here), and their
    90% range reaches both, and at least a count's sampling error either way."""
    from calibrate.contract.base import RunContext
    from calibrate.contract.manager import build_registry
    from calibrate.predicted.interval import PredictionSettings, build_world
    from calibrate.predicted.simulation import plugged_in
    from calibrate.predicted.world import training_check

    rng = np.random.default_rng(8)
    imp = ImpostorDistances.from_lists({f"c{i}": np.exp(rng.normal(1.0 + 0.1 * i, 0.3, 400)) for i in range(30)})
    model = build_registry().get("estimators", "class-interp").factory().fit(imp, RunContext())
    world = build_world(imp)
    t = np.array([0.05, 0.02])
    tau = model.thresholds(t).values
    pred = plugged_in(world, imp, tau, training_check(world, imp, tau), t, PredictionSettings(), "over budget")
    per_class = world.shape_cdf((np.log(tau + world.offset) - world.loc[:, None]) / world.scale[:, None])
    p_w = per_class.mean(axis=0)  # equal class sizes: the gallery's FPR is the classes' mean
    # the training count at the thresholds: each class's continuous rank of its threshold among its sorted distances
    # (linear between order statistics), over sum (n_c + 1)
    ranks = np.array([[np.interp(tau[i, j], np.sort(imp.of(i)), np.arange(1, 401)) if tau[i, j] >= imp.of(i).min()
                       else 0.0 for j in range(2)] for i in range(30)])
    p_t = ranks.sum(axis=0) / (30 * 401)
    # the median of 100 normal scores is +-0.0125 sd about 0: within a relative 1e-3 of the middle here
    assert np.median(pred.replicates, axis=0) == pytest.approx(np.sqrt(p_w * p_t), rel=1e-3)
    assert np.all(pred.low <= np.minimum(p_w, p_t)) and np.all(pred.high >= np.maximum(p_w, p_t))
    sd = np.log(pred.high / pred.low) / (2 * 1.6448536)
    assert np.all(sd >= 0.95 / np.sqrt(p_t * 30 * 401))  # the 5-95% of 100 normal scores: +-1.61, not 1.645
    assert pred.simulation == "plug-in" and "over budget" in pred.budget_note
