"""The predicted interval's cost and self-checks (calibrate.predicted.interval, calibrate.predicted.world): partial
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
from calibrate.contract.manager import build_registry
from calibrate.predicted.interval import PredictionSettings, predict, refit_plan
from calibrate.contract.types import ImpostorDistances
from calibrate.predicted.world import CHECK_LEVEL, build_world, check_tail, training_check

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


def _per_class_draw(world, rng: np.random.Generator, replicates: int, ranks: list) -> np.ndarray:
    """The partial draw written one class at a time (the layout before DrawPlan): per class the Gamma increments
    between its sorted ranks, laid side by side in one row, cumulated over the row, each class's sum before it
    subtracted."""
    ks = [np.unique(np.asarray(r)) + 1 for r in ranks]
    shapes = np.concatenate([np.diff(np.concatenate([[0], k, [n + 1]])) for k, n in zip(ks, world.counts)])
    g = np.cumsum(rng.standard_gamma(shapes.astype(np.float64), size=(replicates, shapes.size)), axis=1)
    out, start = [], 0
    for c, k in enumerate(ks):
        before = g[:, start - 1:start] if start else np.zeros((replicates, 1))
        u = (g[:, start:start + k.size] - before) / (g[:, start + k.size:start + k.size + 1] - before)
        out.append(world._distances(np.clip(u, 0.0, np.nextafter(1.0, 0.0)), np.full(k.size, c)))
        start += k.size + 1
    return np.concatenate(out, axis=1)


def test_a_draw_plan_draws_what_a_class_by_class_draw_draws():
    world = build_world(lognormal(np.random.default_rng(1), classes=9, n=50))
    rng = np.random.default_rng(4)
    # unsorted, repeated, a class at one rank, a class at every rank
    ranks = [rng.integers(0, 50, 8) for _ in range(7)] + [np.array([49]), np.arange(50)[::-1]]
    drawn = world.draw_galleries(np.random.default_rng(5), 6, ranks)
    assert np.array_equal(drawn.values, _per_class_draw(world, np.random.default_rng(5), 6, ranks))
    assert np.array_equal(drawn.keys, np.concatenate([o + np.unique(r) for o, r in zip(world.offsets[:-1], ranks)]))
    again = world.draw_galleries(np.random.default_rng(5), 6, world.draw_plan(ranks))  # the plan made once
    assert np.array_equal(again.values, drawn.values)
    with pytest.raises(ValueError, match="within its count"):
        world.draw_plan(ranks[:-1] + [np.array([50])])


def test_partial_draws_give_the_replicates_refits_on_whole_galleries_give():
    """The vectorised simulation on galleries drawn only at the ranks auto-bulk reads, against refitting auto-bulk
    on whole galleries drawn afresh: the replicate FPRs agree in law (two-sample KS, 300 galleries each, fixed
    seeds) and their 5th and 95th percentiles within Monte Carlo error (4 standard deviations on the probability
    scale: where the one sample's percentile falls among the other's)."""
    from calibrate.predicted.simulation import _simulated, simulated_replicates

    imp = lognormal(np.random.default_rng(12), classes=30, n=200)
    world = build_world(imp)
    t = np.array([0.01, 0.005])
    est = estimator("auto-bulk")
    assert est.simulation_ranks(world.counts, t, world) is not None  # a partial draw: 37 of 200 ranks per class
    partial = _simulated([est], world, t, PredictionSettings(0.9, 300), [3])[0].replicates
    assert partial.shape == (300, 2) and simulated_replicates(PredictionSettings(0.9, 300), 37 * 30, imp.values.size) == 300
    rng = np.random.default_rng(13)
    whole = np.array([world.gallery_fpr(world.class_fpr(est.fit(world.draw(rng)).thresholds(t).values))
                      for _ in range(300)])
    for j in range(t.size):
        assert stats.ks_2samp(partial[:, j], whole[:, j]).pvalue > 1e-3
        for q in (0.05, 0.95):  # on the probability scale two samples' q-quantiles differ by sd sqrt(2 q (1 - q) / B)
            share = np.mean(whole[:, j] <= np.quantile(partial[:, j], q))
            assert abs(share - q) < 4 * np.sqrt(2 * q * (1 - q) / 300), (j, q, share)


def test_the_world_s_cdf_is_np_interp_over_its_ranks_to_the_bit():
    """shape_cdf's body reads the sorted pooled scores as np.interp over ranks 1..n / n would, ties, knots, both ends
    and NaN included, without building the n-array of ranks."""
    from calibrate.predicted.world import _rank_cdf

    rng = np.random.default_rng(9)
    s = np.sort(np.round(rng.normal(size=5_000), 2))  # many ties
    z = np.concatenate([rng.normal(0.0, 1.5, 20_000), s[rng.integers(0, s.size, 2_000)],
                        [s[0], s[-1], s[0] - 1, s[-1] + 1, np.nan, -np.inf, np.inf]])
    expected = np.interp(z, s, np.arange(1, s.size + 1, dtype=np.float64) / s.size, left=0.0, right=1.0)
    assert np.array_equal(_rank_cdf(s, z), expected, equal_nan=True)
    assert np.array_equal(_rank_cdf(s, z.reshape(-1, 1)), expected.reshape(-1, 1), equal_nan=True)


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
    from calibrate.predicted.world_tail import _tail

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
    import calibrate.predicted.interval as prediction_module

    real = prediction_module.build_world
    # every reference world (calibrate.predicted.interval.build_worlds builds each through build_world) contradicts
    monkeypatch.setattr(prediction_module, "build_world", lambda *a, **k: _contradicting(real(*a, **k)))
    rng = np.random.default_rng(8)
    scores = {f"c{i:03d}": -np.exp(rng.normal(0.0, 0.2) + 0.3 * rng.standard_normal(200)) for i in range(300)}
    cal = calibrate.fit(scores, kind="similarity", estimator="generic-interp", predict=True, targets=TARGETS,
                        replicates=40, impostors_only=True)
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


# ---- how many simulated galleries ------------------------------------------------------------------------


def test_galleries_drawn_at_their_ranks_are_budgeted_per_training_distance():
    from calibrate.predicted.interval import SIMULATED_PER_DISTANCE, simulated_replicates

    s = PredictionSettings()  # 100 replicates
    lfw = 4_786_008  # training distances of the 5,701 x 1,680 face matrix (benchmarks/bench_whole_run.py)
    assert simulated_replicates(s, 140_972, lfw) == 100  # auto's ranks there: 2.9 values per training distance
    assert simulated_replicates(s, 140_972, None) == 20  # the old rule (2 million values in all) gave 20
    assert simulated_replicates(s, lfw, lfw) == 20  # whole galleries: never below 20
    assert simulated_replicates(s, 5_000, 20_000) == 100  # small galleries: 2 million values in all
    assert simulated_replicates(s, 30_000, 100_000) == 66
    assert simulated_replicates(s, 500_000, 10_000_000) == SIMULATED_PER_DISTANCE * 20


def test_fewer_galleries_than_asked_are_said_with_what_they_do_to_the_level(tmp_path, monkeypatch):
    import calibrate.predicted.simulation as simulation_module  # where simulated_replicates reads them

    monkeypatch.setattr(simulation_module, "SIMULATED_VALUES", 1_000)
    monkeypatch.setattr(simulation_module, "SIMULATED_PER_DISTANCE", 0)
    result, doc = _run_small(tmp_path, "estimators: [{plugin: generic-interp}]\nevaluation: {targets: [0.01]}\n")
    assert doc["estimators"]["generic-interp"]["targets"][0]["simulated_galleries"] == 20
    said = [n for n in result.notes if n.startswith("generic-interp: predicted FPR interval from 20 of 100")]
    assert said and "5th and 95th percentiles of 20 draws" in said[0] and "81% +- 8%" in said[0], result.notes
    assert "(88% at 100)" in said[0] and "refits" not in said[0]


@pytest.mark.parametrize("replicates", [20, 47, 100])
def test_the_level_of_b_percentiles_is_what_monte_carlo_says(replicates):
    """The 5th and 95th percentiles of B draws (numpy's, as Prediction.low/high) hold a further draw level (B - 1) /
    (B + 1) of the time on average, varying from one set of B draws to another by the sd replicate_level says."""
    from calibrate.predicted.interval import replicate_level

    u = np.random.default_rng(replicates).random((20_000, replicates))
    held = np.quantile(u, 0.95, axis=1) - np.quantile(u, 0.05, axis=1)  # the share of uniforms between them
    mean, sd = replicate_level(replicates, 0.9)
    assert held.mean() == pytest.approx(mean, abs=0.003)
    assert held.std() == pytest.approx(sd, rel=0.05)


def test_each_world_is_checked_once_against_the_training_distances(monkeypatch):
    """choose_world, predict_in_worlds and the per-target check ask the same question of each world: one pass over
    the training distances each."""
    import calibrate.predicted.world as world_module
    from calibrate.predicted.interval import build_worlds, choose_world, predict_in_worlds

    imp = lognormal(np.random.default_rng(21), classes=40, n=80)
    est = estimator("auto-bulk")
    model = est.fit(imp)
    worlds = build_worlds(imp)
    calls = []
    real = world_module.training_check
    monkeypatch.setattr(world_module, "training_check", lambda *a: calls.append(a[0]) or real(*a))
    chosen = choose_world(worlds, imp, model, TARGETS)
    pred = predict_in_worlds([est], [model], imp, TARGETS, settings=PredictionSettings(0.9, 20), seed=[1],
                             worlds=worlds)[0]
    assert 1 <= len(calls) == len({id(w) for w in calls}) <= len(worlds) == 2 and pred.world == chosen.structure
    assert pred.checks == real(chosen, imp, model._thresholds(np.asarray(TARGETS), model.all_rows()))


@pytest.mark.parametrize("name", ["auto-bulk", "anchored", "class-interp"])
def test_worlds_built_when_asked_choose_as_all_worlds_do_and_build_no_world_they_need_not(name):
    """A world that fits every target the training data can check cannot be beaten (ties go to the first): the
    worlds after it are not built, and the choice is the one made with every world built."""
    from calibrate.predicted.interval import Worlds, build_worlds, choose_world
    from calibrate.predicted.world import training_check

    imp = lognormal(np.random.default_rng(22), classes=40, n=80)
    model = estimator(name).fit(imp)
    every = build_worlds(imp)
    lazy = Worlds(imp)
    assert choose_world(lazy, imp, model, TARGETS).structure == choose_world(every, imp, model, TARGETS).structure
    checks = training_check(every["bulk"], imp, model._thresholds(np.asarray(TARGETS), model.all_rows()))
    bulk_unbeatable = all(c["fits"] for c in checks if c["support"] >= 10) and not any(
        c["fits"] is False for c in checks)
    assert [w.structure for _, w in lazy.built()] == (["bulk"] if bulk_unbeatable else ["bulk", "anchored"])


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


def _run_small(tmp_path, rest: str) -> tuple:
    """A run on 40 synthetic classes x 100 training distances with the recipe's ``rest``: (its result, results.json)."""
    recipe = tmp_path / "r.yaml"
    recipe.write_text("version: 1\ndata: {plugin: synthetic-impostors, classes: 40, train: 100, test: 50, seed: 3}\n"
                      + rest, encoding="utf-8")
    with pytest.warns(UserWarning):
        result = calibrate.run(recipe, out=tmp_path / "out")
    return result, json.loads((tmp_path / "out" / "results.json").read_text(encoding="utf-8"))


def test_an_estimator_over_budget_is_judged_in_the_world_and_says_so(tmp_path):
    """Refits that do not fit the budget (issue 40): the estimator's own thresholds judged on the training data (an
    interval spanning the world's FPR there and the training count's), and a note saying so and what ``budget_s``
    would buy."""
    result, doc = _run_small(tmp_path, "estimators: [{plugin: znorm}, {plugin: generic-interp}]\n"
                                       "evaluation: {targets: [0.01], prediction: {budget_s: 0.000001}}\n")
    row = doc["estimators"]["znorm"]["targets"][0]
    assert row["prediction_simulation"] == "plug-in" and row["predicted_fpr_low"] <= row["predicted_fpr_high"]
    assert doc["estimators"]["generic-interp"]["targets"][0]["prediction_simulation"] == "vectorised"
    said = [n for n in result.notes if n.startswith("znorm: predicted FPR interval from its thresholds judged on the training data")]
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
