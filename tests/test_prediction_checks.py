"""The predicted interval's cost and self-checks (calibrate.prediction, calibrate.world): partial
draws with the law of whole ones, the world's tail check and refit, the per-target check against the
training distances (and what a run, a calibration and the CLI say when it fails), the refits' time
budget. References: scipy.stats (beta quantiles, KS tests), brute-force loops, and generators with a
known tail."""

from __future__ import annotations

import csv
import dataclasses
import json

import numpy as np
import pytest
from scipy import stats

import calibrate
from calibrate.errors import CalibrationError, RecipeError
from calibrate.manager import build_registry
from calibrate.prediction import PredictionSettings, predict, refit_plan
from calibrate.types import ImpostorDistances
from calibrate.world import CHECK_LEVEL, build_world, check_tail, training_check

REGISTRY = build_registry()
TARGETS = (0.01, 0.005, 0.001)


def estimator(name: str, **params):
    return REGISTRY.get("estimators", name).factory(**params)


def saturating(rng: np.random.Generator, classes: int = 300, n: int = 250) -> ImpostorDistances:
    """A matcher whose scores saturate: every class's distances have a floor (25% of its values sit on a
    narrow band there), so the pooled lower tail is short and bounded, the kind a GPD with its shape
    clipped at -1 makes far heavier than the data."""
    per = {}
    for i in range(classes):
        scale = np.exp(rng.normal(0.0, 0.1))
        per[f"c{i:03d}"] = scale * np.maximum(rng.lognormal(0.0, 0.3, n), 0.75) + 1e-4 * rng.random(n)
    return ImpostorDistances.from_lists(per)


def lognormal(rng: np.random.Generator, classes: int = 200, n: int = 200) -> ImpostorDistances:
    return ImpostorDistances.from_lists({f"c{i:03d}": np.exp(rng.normal(0.0, 0.2) + 0.3 * rng.standard_normal(n))
                                         for i in range(classes)})


# ---- drawing --------------------------------------------------------------------------------------------


def test_a_partial_draw_has_the_law_of_a_whole_draw_at_its_ranks():
    world = build_world(lognormal(np.random.default_rng(1), classes=12, n=60))
    ranks = [np.array([0, 1, 2, 14, 29, 59]) for _ in range(12)]
    partial = world.draw_galleries(np.random.default_rng(2), 3000, ranks).at(np.tile(ranks[0], (12, 1)))
    whole = world.draw_galleries(np.random.default_rng(3), 3000).at(np.tile(ranks[0], (12, 1)))
    pvalues = [stats.ks_2samp(partial[:, c, j], whole[:, c, j]).pvalue for c in (0, 5, 11) for j in range(6)]
    assert min(pvalues) > 1e-3  # 18 two-sample KS tests on 3,000 galleries each (fixed seeds)
    # jointly too: neighbouring order statistics are as correlated as in whole galleries
    assert np.corrcoef(partial[:, 4, 1], partial[:, 4, 2])[0, 1] == pytest.approx(
        np.corrcoef(whole[:, 4, 1], whole[:, 4, 2])[0, 1], abs=0.05)
    assert np.all(np.diff(partial, axis=2) >= 0)  # ascending within each class


def test_a_rank_that_was_not_drawn_is_refused():
    world = build_world(lognormal(np.random.default_rng(1), classes=5, n=30))
    g = world.draw_galleries(np.random.default_rng(2), 2, [np.array([0, 3]) for _ in range(5)])
    assert g.at(np.tile([0, 3], (5, 1))).shape == (2, 5, 2)
    with pytest.raises(KeyError, match="simulation_ranks"):
        g.at(np.tile([1], (5, 1)))
    assert list(g.lowest_drawn()) == [1] * 5


# ---- the world's tail ----------------------------------------------------------------------------------


def test_the_tail_band_is_the_clopper_pearson_band_of_the_rank():
    world = build_world(lognormal(np.random.default_rng(4)))
    check = check_tail(world.sorted_z, world.tail, world.shape_cdf, world.independent())
    n = world.sorted_z.size
    a = (1 - CHECK_LEVEL) / 2
    for k, low, high in zip(check.ranks, check.low, check.high):
        assert low == pytest.approx(stats.beta.ppf(a, k, n - k + 1), rel=1e-9)
        assert high == pytest.approx(stats.beta.ppf(1 - a, k + 1, n - k), rel=1e-9)


def test_a_well_modelled_tail_keeps_auto_s_gpd():
    world = build_world(lognormal(np.random.default_rng(4)))
    assert world.tail_model == "gpd-pwm" and world.tail_check.passed and not world.rejected


def test_a_saturating_tail_is_refitted_until_the_world_agrees_with_the_scores():
    imp = saturating(np.random.default_rng(5))
    world = build_world(imp)
    assert world.rejected and world.rejected[0].startswith("gpd-pwm")
    assert world.tail_model != "gpd-pwm" and world.tail_check.passed
    # auto's own tail (the clipped PWM GPD) strays outside the data's band; the refitted one does not
    from calibrate.world import _tail

    pwm = dataclasses.replace(world, tail=_tail(world.sorted_z, "gpd-pwm"))
    assert not check_tail(pwm.sorted_z, pwm.tail, pwm.shape_cdf, pwm.independent()).passed
    for k, g, low, high in zip(*(getattr(world.tail_check, f) for f in ("ranks", "world", "low", "high"))):
        assert low <= g <= high, k


# ---- the check against the training distances ------------------------------------------------------------


def test_training_support_counts_each_class_s_continuous_rank():
    imp = lognormal(np.random.default_rng(6), classes=7, n=40)
    world = build_world(imp)
    model = estimator("class-interp").fit(imp)
    t = np.array([0.1, 0.05, 0.01])
    checks = training_check(world, imp, model._thresholds(t, model.all_rows()))
    # class-interp's threshold sits at rank e n_c (0 below the smallest value): brute force per class
    for j, e in enumerate(t):
        k = e * 40
        assert checks[j]["support"] == pytest.approx(7 * (k if k >= 1 else 0.0), rel=1e-9)
        assert checks[j]["empirical_fpr"] == pytest.approx(7 * (k if k >= 1 else 0.0) / (7 * 41), rel=1e-9)


def _contradicting(world):
    """The same world with its shape shifted right by half a unit: a fraction of the data's FPR in the tail."""
    return dataclasses.replace(world, sorted_z=world.sorted_z + 0.5,
                               tail=dataclasses.replace(world.tail, u=world.tail.u + 0.5) if world.tail else None)


def test_a_world_the_training_data_contradict_gives_no_interval():
    imp = lognormal(np.random.default_rng(7), classes=300, n=200)
    model = estimator("generic-interp").fit(imp)
    good = predict(estimator("generic-interp"), imp, TARGETS, settings=PredictionSettings(replicates=40), seed=[1],
                   context=None, world=build_world(imp), model=model)
    assert good.status == ("fits", "fits", "fits") and np.all(np.isfinite(good.low))
    bad = predict(estimator("generic-interp"), imp, TARGETS, settings=PredictionSettings(replicates=40), seed=[1],
                  context=None, world=_contradicting(build_world(imp)), model=model)
    assert bad.status == ("contradicted",) * 3
    assert np.all(np.isnan(bad.low)) and np.all(np.isnan(bad.replicates))
    summary = bad.summary()
    assert summary["predicted_fpr_low"] == [None] * 3 and summary["prediction_status"] == ["contradicted"] * 3
    assert all(c["world_fpr"] < c["empirical_fpr"] / 2 and c["support"] >= 10 for c in summary["world_check"])


def test_no_interval_is_said_in_the_calibration_the_run_and_the_cli(tmp_path, monkeypatch):
    import calibrate.prediction as prediction_module

    real = prediction_module.build_world
    # every reference world (calibrate.prediction.build_worlds builds each through build_world) contradicts
    monkeypatch.setattr(prediction_module, "build_world", lambda *a, **k: _contradicting(real(*a, **k)))
    rng = np.random.default_rng(8)
    scores = {f"c{i:03d}": -np.exp(rng.normal(0.0, 0.2) + 0.3 * rng.standard_normal(200)) for i in range(300)}
    cal = calibrate.fit(scores, kind="similarity", estimator="generic-interp", predict=True, targets=TARGETS,
                        replicates=40)
    with pytest.raises(CalibrationError, match="does not fit these training scores"):
        cal.predicted_fpr(0.005)
    path = tmp_path / "cal.json"
    cal.save(path)
    with pytest.raises(CalibrationError, match="does not fit these training scores"):
        calibrate.load(path).predicted_fpr(0.005)

    # a run: results.json, thresholds.csv, report.md and the notes say it
    monkeypatch.setattr(prediction_module, "build_world", lambda *a, **k: _contradicting(real(*a, **k)))
    recipe = tmp_path / "r.yaml"
    recipe.write_text("version: 1\ndata: {plugin: synthetic-impostors, classes: 300, train: 200, test: 200, seed: 3}\n"
                      "estimators: [{plugin: generic-interp}]\nevaluation: {targets: [0.01, 0.005]}\n", encoding="utf-8")
    with pytest.warns(UserWarning):
        result = calibrate.run(recipe, out=tmp_path / "out")
    doc = json.loads((tmp_path / "out" / "results.json").read_text(encoding="utf-8"))
    rows = doc["estimators"]["generic-interp"]["targets"]
    assert [r["prediction_status"] for r in rows] == ["contradicted", "contradicted"]
    assert all(r["predicted_fpr_low"] is None and "predicted_covers" not in r for r in rows)
    with open(tmp_path / "out" / "thresholds.csv", newline="", encoding="utf-8") as fh:
        table = list(csv.DictReader(fh))
    assert {r["prediction_status"] for r in table} == {"contradicted"} and {r["class_long_run_fpr_low"] for r in table} == {""}
    report = (tmp_path / "out" / "report.md").read_text(encoding="utf-8")
    assert "No prediction: the model does not fit these training scores at this target" in report
    assert any("does not fit these training scores" in n for n in result.notes)


# ---- the refits' time budget --------------------------------------------------------------------------


def test_refits_take_what_the_budget_allows_and_say_what_more_would_cost():
    s = PredictionSettings()  # 100 replicates, 20% of the run so far
    assert refit_plan(s, fit_seconds=0.01, base_seconds=10.0) == (100, "")
    count, why = refit_plan(s, fit_seconds=0.05, base_seconds=10.0)  # 2 s of budget: 40 refits
    assert count == 40 and "40 of 100" in why
    count, why = refit_plan(s, fit_seconds=1.0, base_seconds=10.0)
    assert count == 0 and "20 refits would take about 20 s" in why and "budget_s: 110" in why
    assert refit_plan(PredictionSettings(budget_s=30.0), fit_seconds=1.0, base_seconds=0.0)[0] == 30
    assert refit_plan(s, fit_seconds=1.0, base_seconds=None) == (100, "")  # calibrate.fit: asked for, paid for


def test_an_estimator_over_budget_gets_a_note_and_no_interval(tmp_path):
    recipe = tmp_path / "r.yaml"
    recipe.write_text("version: 1\ndata: {plugin: synthetic-impostors, classes: 40, train: 100, test: 50, seed: 3}\n"
                      "estimators: [{plugin: znorm}, {plugin: generic-interp}]\n"
                      "evaluation: {targets: [0.01], prediction: {budget_s: 0.000001}}\n", encoding="utf-8")
    with pytest.warns(UserWarning):
        result = calibrate.run(recipe, out=tmp_path / "out")
    doc = json.loads((tmp_path / "out" / "results.json").read_text(encoding="utf-8"))
    assert "predicted_fpr_low" not in doc["estimators"]["znorm"]["targets"][0]
    assert doc["estimators"]["generic-interp"]["targets"][0]["prediction_simulation"] == "vectorised"
    said = [n for n in result.notes if n.startswith("znorm: no predicted FPR interval")]
    assert said and "over the time budget" in said[0] and "budget_s" in said[0]


@pytest.mark.parametrize("prediction,where", [("{budget_s: -1}", "budget_s"), ("{budget: 0}", "budget"),
                                              ("{budget_s: yes}", "budget_s"), ("{budgt: 1}", "budgt")])
def test_bad_budgets_are_named(tmp_path, prediction, where):
    recipe = tmp_path / "r.yaml"
    recipe.write_text("version: 1\ndata: {plugin: synthetic-impostors, classes: 5, train: 20, test: 10}\n"
                      f"evaluation: {{prediction: {prediction}}}\n", encoding="utf-8")
    with pytest.raises(RecipeError) as err:
        calibrate.validate(recipe)
    assert f"evaluation.prediction.{where}" in str(err.value)


# ---- the conformance check of simulate can fail ----------------------------------------------------------


def test_the_simulate_check_fails_on_a_simulate_that_is_not_the_fit():
    from calibrate.testing import check_component
    from calibrate_builtins.estimators.interp import GenericInterp

    class Drifting(GenericInterp):
        def simulate(self, galleries, targets):
            return super().simulate(galleries, targets) * 1.001

    with pytest.raises(AssertionError, match="simulate must compute what fit would"):
        check_component("estimator", Drifting, {})
