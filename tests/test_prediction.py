"""Predicted FPR intervals and the confidence mode (calibrate.predicted.interval), checked against
independent references: order-statistic theory (scipy.stats.beta / binom), brute-force Monte Carlo,
and exact CDFs of generated data."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy import stats

import calibrate
from calibrate.contract.base import RunContext
from calibrate.errors import CalibrateError, CalibrationError, RecipeError
from calibrate.contract.manager import build_registry
from calibrate.predicted.confidence import ConfidentModel, order_statistic_rank
from calibrate.predicted.interval import PredictionSettings, build_world, measured_interval, predict
from calibrate.contract.types import DistanceMatrix, ImpostorDistances
from calibrate.predicted.world import pair_slots

REGISTRY = build_registry()


def estimator(name: str, **params):
    return REGISTRY.get("estimators", name).factory(**params)


def lognormal_gallery(rng: np.random.Generator, classes: int, n: int) -> tuple[ImpostorDistances, np.ndarray, np.ndarray]:
    """Per class log-normal distances with its own location and scale (the truth, returned)."""
    mu, sigma = rng.normal(1.0, 0.2, classes), rng.uniform(0.15, 0.3, classes)
    per = {f"c{i:03d}": np.exp(mu[i] + sigma[i] * rng.standard_normal(n)) for i in range(classes)}
    return ImpostorDistances.from_lists(per), mu, sigma


# ---- the exact pieces --------------------------------------------------------------------------------


@pytest.mark.parametrize("n,e,c", [(1000, 0.005, 0.95), (20000, 0.0005, 0.9), (6000, 0.0005, 0.95), (50, 0.001, 0.95)])
def test_order_statistic_rank_is_the_largest_rank_the_binomial_bound_allows(n, e, c):
    k = order_statistic_rank(e, n, c)
    # P(F(x_(k)) <= e) = P(Binomial(n, e) >= k), by brute force over the binomial pmf
    pmf = stats.binom.pmf(np.arange(n + 1), n, e)
    at_least = lambda j: pmf[j:].sum()  # noqa: E731
    if k >= 1:
        assert at_least(k) >= c - 1e-12
    assert at_least(k + 1) < c
    if n * e < -np.log(1 - c) * 0.9:  # too few values: even the minimum does not make it
        assert k == 0


def test_the_order_statistic_bound_holds_by_monte_carlo():
    """The k-th smallest of n uniform draws exceeds e in at most 1 - c of 4,000 galleries."""
    n, e, c = 4000, 0.002, 0.9
    k = order_statistic_rank(e, n, c)
    rng = np.random.default_rng(5)
    kth = np.array([np.partition(rng.random(n), k - 1)[k - 1] for _ in range(4000)])
    exceed = float(np.mean(kth > e))
    assert exceed <= 1 - c + 3 * np.sqrt(0.1 * 0.9 / 4000)  # three binomial standard errors above 10%
    assert exceed > 0.02  # and not far stricter than it needs to be


def test_measured_interval_is_the_binomial_mixture_by_monte_carlo():
    rng = np.random.default_rng(3)
    reps = rng.uniform(0.0008, 0.0015, size=(200, 1))
    low, high = measured_interval(reps, 50_000, 0.9)
    draws = rng.binomial(50_000, np.repeat(reps[:, 0], 500)) / 50_000
    assert low[0] == pytest.approx(np.quantile(draws, 0.05), abs=2 / 50_000)
    assert high[0] == pytest.approx(np.quantile(draws, 0.95), abs=2 / 50_000)


def test_world_shape_quantile_and_cdf_agree_and_draws_keep_the_gallery():
    rng = np.random.default_rng(1)
    imp, _, _ = lognormal_gallery(rng, 40, 60)
    world = build_world(imp)
    u = np.linspace(1e-6, 1 - 1e-6, 2001)
    assert world.shape_cdf(world.shape_quantile(u)) == pytest.approx(u, abs=2e-3)
    drawn = world.draw(np.random.default_rng(2))
    assert drawn.classes == imp.classes and np.array_equal(drawn.counts(), imp.counts())
    # the world's class distributions sit where the data do: medians within a few percent
    assert np.median(drawn.of(3)) == pytest.approx(np.median(imp.of(3)), rel=0.1)


def test_pair_slots_tie_the_two_entries_of_each_enrolled_pair():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((6, 3))
    d = np.sqrt(((x[:, None] - x[None]) ** 2).sum(-1))
    mask = ~np.eye(6, dtype=bool)
    slots = pair_slots(d, mask)
    values = DistanceMatrix(d, np.arange(6).astype(str), np.arange(6).astype(str), mask)
    listed = ImpostorDistances.from_matrix(values).values
    assert slots.max() + 1 == 15  # 6 * 5 / 2 distinct pairs
    for s in range(15):  # both entries of a pair are the same distance
        assert np.ptp(listed[slots == s]) == 0.0
    assert pair_slots(d + np.triu(np.ones_like(d)), mask) is None  # not symmetric: no pairing


# ---- the simulation -----------------------------------------------------------------------------------


def test_generic_interp_interval_matches_order_statistic_theory():
    """For a pooled empirical quantile the achieved FPR is Beta(k, N - k + 1) whatever the world:
    the simulated interval must reproduce its 5% and 95% quantiles (Monte Carlo error of 400 replicates)."""
    rng = np.random.default_rng(8)
    imp, _, _ = lognormal_gallery(rng, 50, 100)  # N = 5000
    e = np.array([0.01, 0.004])  # e N = 50 and 20: integer ranks
    pred = predict(estimator("generic-interp"), imp, e, settings=PredictionSettings(0.9, 400), seed=[1],
                   context=RunContext())
    n = 5000
    for j, t in enumerate(e):
        k = int(round(t * n))
        lo, hi = stats.beta.ppf([0.05, 0.95], k, n - k + 1)
        assert pred.low[j] == pytest.approx(lo, rel=0.12)
        assert pred.high[j] == pytest.approx(hi, rel=0.12)


def test_auto_interval_covers_the_exact_fpr_of_generated_galleries():
    """Galleries of log-normal classes (exact CDFs): the 90% interval of auto's long-run FPR contains
    the true FPR in most of 30 galleries (a loose statistical bound: 90% nominal, at least 22 of 30)."""
    targets = np.array([0.005, 0.001])
    covered = np.zeros(2)
    for g in range(30):
        rng = np.random.default_rng([11, g])
        imp, mu, sigma = lognormal_gallery(rng, 30, 60)
        est = estimator("auto")
        tau = est.fit(imp, RunContext()).thresholds(targets).values
        truth = stats.norm.cdf((np.log(tau) - mu[:, None]) / sigma[:, None]).mean(axis=0)
        pred = predict(est, imp, targets, settings=PredictionSettings(0.9, 60), seed=[g], context=RunContext())
        covered += (pred.low <= truth) & (truth <= pred.high)
    assert np.all(covered >= 22), covered


def test_same_seed_same_interval():
    imp, _, _ = lognormal_gallery(np.random.default_rng(2), 20, 40)
    runs = [predict(estimator("auto"), imp, [0.01], settings=PredictionSettings(0.9, 30), seed=[7], context=RunContext())
            for _ in range(2)]
    assert runs[0].replicates == pytest.approx(runs[1].replicates, rel=1e-12, abs=0)


# ---- confidence ----------------------------------------------------------------------------------------


def test_confident_generic_threshold_is_the_order_statistic():
    imp, _, _ = lognormal_gallery(np.random.default_rng(6), 100, 100)  # N = 10,000
    model = estimator("generic-interp").fit(imp, RunContext())
    conf = ConfidentModel(model, 0.95)
    k = order_statistic_rank(0.002, 10_000, 0.95)
    assert conf.choice(0.002) == ("order-statistic", float(k))
    assert conf.thresholds([0.002]).values[:, 0] == pytest.approx(np.sort(imp.pooled())[k - 1], rel=0, abs=0)
    with pytest.raises(CalibrateError, match="too few for an order-statistic bound"):
        conf.thresholds([1e-6])  # no model-based curve in this one


def test_confidence_in_a_recipe(tmp_path):
    from calibrate_test_helpers import make_scores, score_recipe, write_recipe, write_scores

    values, probes, gallery = make_scores(seed=3, n_classes=30, probes_per_class=6)
    csv_path = write_scores(tmp_path / "scores.csv", values, probes, gallery)
    raw = score_recipe(csv_path, tmp_path / "out", targets=[0.01, 0.0005])
    raw["estimators"] = [{"plugin": "auto"}, {"plugin": "auto", "confidence": 0.95}]
    raw["evaluation"]["prediction"] = {"replicates": 40}
    result = calibrate.run(write_recipe(tmp_path / "recipe.yaml", raw))
    doc = json.loads((tmp_path / "out" / "results.json").read_text())
    plain, conf = doc["estimators"]["auto"]["targets"], doc["estimators"]["auto-c95"]["targets"]
    for p, c in zip(plain, conf):
        assert c["confidence_method"] in ("order-statistic", "model")
        assert p["predicted_fpr_low"] <= p["predicted_fpr_high"]
        assert "predicted_fpr_long_run_low" in p and isinstance(p["predicted_covers"], bool)
    # stricter than the plain thresholds at every class and target
    assert np.all(result.folds[0].tables["auto-c95"].values <= result.folds[0].tables["auto"].values + 1e-12)
    # what the confidence costs genuine users, per target: beside the plain fit's FNR (here the recipe's own auto)
    for p, c in zip(plain, conf):
        assert c["fnr_without_confidence"] == pytest.approx(p["fnr"], abs=1e-12) and c["fnr"] >= p["fnr"]
    said = [n for n in result.notes if n.startswith("auto-c95: confidence 0.95 costs genuine users")]
    assert len(said) == 1 and "1%:" in said[0] and "0.05%:" in said[0]
    # N = 30 x ~87 training distances: 0.05% is below the order-statistic bound's own reach, so a model-based
    # bound exists there; the method recorded is whichever of the two gives the smaller threshold (the
    # order-statistic one read at its reach is a cap), which depends on the data drawn
    assert conf[1]["confidence_method"] in ("model", "order-statistic")
    # the saved calibration answers as the run did, and keeps its interval and its confidence
    cal = calibrate.load(tmp_path / "out" / "calibration.json", "auto-c95")
    assert cal.confidence == 0.95
    table = result.folds[0].tables["auto-c95"]
    for i, cls in enumerate(table.classes[:5]):
        assert cal.distance_threshold(cls, 0.0005) == pytest.approx(table.values[i, 1], rel=1e-12)
    low, high = cal.predicted_fpr(0.01)
    assert (low, high) == pytest.approx((conf[0]["predicted_fpr_long_run_low"], conf[0]["predicted_fpr_long_run_high"]))
    plain_cal = calibrate.load(tmp_path / "out" / "calibration.json", "auto")
    lo_c, hi_c = plain_cal.predicted_fpr(0.01, cls=table.classes[0])
    assert 0 <= lo_c <= hi_c <= 1
    assert plain_cal.predicted_fpr(0.01, attempts=plain[0]["impostor_attempts"]) == pytest.approx(
        (plain[0]["predicted_fpr_low"], plain[0]["predicted_fpr_high"]))
    with pytest.raises(CalibrationError, match="predicted at targets"):
        plain_cal.predicted_fpr(0.003)
    cal.enroll("newcomer", np.array(list(plain_cal.thresholds(0.01).values())) - 0.01)  # a confident model enrolls
    assert cal.threshold("newcomer", 0.0005) >= cal.threshold("newcomer", 0.01)  # similarity: stricter is higher


@pytest.mark.parametrize("entry,where,message", [
    ({"plugin": "auto", "confidence": 1.0}, "estimators[0].confidence", "confidence must be a probability"),
    ({"plugin": "auto", "confidence": "high"}, "estimators[0].confidence", "confidence must be a probability"),
])
def test_bad_confidence_is_named(tmp_path, entry, where, message):
    from calibrate.recipe.validation import parse_recipe

    raw = {"version": 1, "data": {"plugin": "synthetic-impostors", "classes": 5}, "estimators": [entry]}
    with pytest.raises(RecipeError, match=message) as info:
        parse_recipe(raw, REGISTRY)
    assert info.value.where == where


@pytest.mark.parametrize("prediction,message", [
    ({"level": 1.5}, "prediction level must be in"), ({"replicates": 5}, "replicates must be an integer"),
    ({"levels": 0.9}, "unknown key 'levels'"), ("yes", "is true, false or"),
])
def test_bad_prediction_settings_are_named(prediction, message):
    from calibrate.recipe.validation import parse_recipe

    raw = {"version": 1, "data": {"plugin": "synthetic-impostors", "classes": 5},
           "evaluation": {"prediction": prediction}}
    with pytest.raises(RecipeError, match=message):
        parse_recipe(raw, REGISTRY)


def test_prediction_false_turns_it_off_and_confidence_then_refuses():
    from calibrate.recipe.validation import parse_recipe

    raw = {"version": 1, "data": {"plugin": "synthetic-impostors", "classes": 5}, "evaluation": {"prediction": False}}
    assert parse_recipe(raw, REGISTRY).prediction.enabled is False
    raw["estimators"] = [{"plugin": "auto", "confidence": 0.9}]
    with pytest.raises(RecipeError, match="needs the predicted interval"):
        parse_recipe(raw, REGISTRY)


def test_cli_threshold_states_the_predicted_interval(tmp_path):
    from typer.testing import CliRunner

    from calibrate.cli.commands import app
    from calibrate_test_helpers import make_scores, score_recipe, write_recipe, write_scores

    values, probes, gallery = make_scores(seed=5, n_classes=12, probes_per_class=6)
    csv_path = write_scores(tmp_path / "scores.csv", values, probes, gallery)
    raw = score_recipe(csv_path, tmp_path / "out", estimators=[{"plugin": "generic-interp"}], targets=[0.05])
    raw["evaluation"]["prediction"] = {"replicates": 20}
    calibrate.run(write_recipe(tmp_path / "recipe.yaml", raw))
    cal = calibrate.load(tmp_path / "out" / "calibration.json")
    cls = cal.classes[0]
    result = CliRunner().invoke(app, ["threshold", str(tmp_path / "out" / "calibration.json"), "--class", cls,
                                      "--fpr", "0.05", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert (doc["gallery_long_run_fpr_low"], doc["gallery_long_run_fpr_high"]) == pytest.approx(cal.predicted_fpr(0.05))
    assert (doc["class_long_run_fpr_low"], doc["class_long_run_fpr_high"]) == pytest.approx(cal.predicted_fpr(0.05, cls))
    plain = CliRunner().invoke(app, ["threshold", str(tmp_path / "out" / "calibration.json"), "--class", cls,
                                     "--fpr", "0.01"])  # not a predicted target: said, not silently dropped
    assert plain.exit_code == 0 and "predicted long-run FPR" not in plain.output
    assert "predicted FPR: none (the FPR interval was predicted at targets 0.05 only, not at 0.01" in plain.output


def test_order_statistic_threshold_steps_below_a_tie_group():
    """With ties at the k-th value, `distance <= threshold` must not accept the whole tie group."""
    from calibrate_builtins.estimators.interp import below_ties

    values = np.array([0.0, 0.0, 0.0, 0.5, 1.0, 1.0, 2.0])
    out = below_ties(values, np.array([1, 3, 4, 5, 7]))
    assert out[0] < 0.0 and out[1] == 0.0  # rank 1 of three zeros: below them all; rank 3: the last zero
    assert out[2] == 0.5 and out[3] < 1.0 and out[3] > 0.5 and out[4] == 2.0
    assert [int(np.sum(values <= t)) for t in out] == [0, 3, 4, 4, 7]  # never more than k accepted


def test_paired_values_count_once_in_the_order_statistic_bound():
    """An enrolled-vs-enrolled matrix lists each pair twice: the bound counts the distinct pairs."""
    imp, _, _ = lognormal_gallery(np.random.default_rng(9), 100, 100)  # N = 10,000
    model = estimator("generic-interp").fit(imp, RunContext())
    both = ConfidentModel(model, 0.95)
    halved = ConfidentModel(model, 0.95, independent=5_000)
    assert halved.rank(0.002) == order_statistic_rank(0.002, 5_000, 0.95) < both.rank(0.002)
    assert halved.thresholds([0.002]).values[0, 0] <= both.thresholds([0.002]).values[0, 0]


def test_confident_thresholds_never_decrease_with_the_target_and_unmet_is_said():
    from calibrate.predicted.confidence import make_confident

    imp, _, _ = lognormal_gallery(np.random.default_rng(12), 30, 40)  # N = 1,200: the bound switches
    est = estimator("generic-interp")
    targets = np.array([0.02, 0.01, 0.005, 0.002, 0.001, 0.0005])
    wrapped, pred, _ = make_confident(est.fit(imp, RunContext()), est, imp, targets, 0.95,
                                      settings=PredictionSettings(0.9, 40), seed=[3], context=RunContext(),
                                      world=build_world(imp))
    fine = np.geomspace(1e-4, 0.05, 60)
    tau = wrapped.thresholds(fine).values[0]
    assert np.all(np.diff(tau) >= -1e-12)
    assert set(pred.methods) <= {"order-statistic", "model", "model-unmet"} and "order-statistic" in pred.methods
    tiny = ConfidentModel(wrapped.inner, 0.95, [1e-6, 1e-5], [0.01, 0.02])
    assert tiny.choice(0.001) == ("model-unmet", 1e-6)  # even the strictest candidate fails: said ...
    assert np.all(tiny.thresholds([0.001]).values == 0.0)  # ... and kept by accepting only exact matches


def test_a_refit_that_raises_counts_as_a_failed_gallery():
    from calibrate.contract.base import Estimator

    class Flaky(Estimator):
        model_class = None
        calls = 0

        def _fit(self, impostors, context):
            Flaky.calls += 1
            if Flaky.calls % 3 == 0:
                raise ValueError("not on this gallery")
            return estimator("generic-interp")._fit(impostors, context)

    imp, _, _ = lognormal_gallery(np.random.default_rng(1), 10, 30)
    with pytest.raises(calibrate.errors.DataError, match="failed on .* of 30 simulated galleries"):
        predict(Flaky(), imp, [0.01], settings=PredictionSettings(0.9, 30), seed=[0], context=RunContext())


def test_refits_on_simulated_galleries_keep_their_notes_to_themselves():
    """A note a component makes while refitting a simulated gallery is not the user's business:
    without this a recipe printed one warning per refit (hundreds per run, e.g. ncx2-grid's sigma-edge
    note); the user's own fit still notes and warns."""
    import warnings

    from calibrate.contract.base import Estimator

    class Chatty(Estimator):
        model_class = None

        def _fit(self, impostors, context):
            context.note("chatty: something about this gallery")
            return estimator("generic-interp")._fit(impostors, context)

    imp, _, _ = lognormal_gallery(np.random.default_rng(2), 10, 30)
    context = RunContext()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        Chatty().fit(imp, context)
        predict(Chatty(), imp, [0.01], settings=PredictionSettings(0.9, 20), seed=[0], context=context)
    assert [str(w.message) for w in caught] == ["chatty: something about this gallery"]
    assert context.notes == ["chatty: something about this gallery"]
