"""The default's choice of how class-specific to be (issue 30): its cross-fitted counts against a brute-force
recount, and the choice it makes where the answer is known by construction."""

from __future__ import annotations

import math

import numpy as np
import pytest

from calibrate.contract.base import RunContext
from calibrate.contract.types import GenuineDistances, ImpostorDistances
from calibrate_builtins.estimators.auto import Auto
from calibrate_builtins.estimators.choose import LEVELS, MIN_EXPECTED, choose, halves, judge


def gallery(seed: int, classes: int = 60, n: int = 400, genuine: int = 6, spread: float = 0.5,
            genuine_follows: bool = True):
    """Log-normal impostor distances per class, located apart by ``spread`` (0: every class alike); the genuine
    distances sit a fixed way below their class's location (``genuine_follows``) or below the average class."""
    rng = np.random.default_rng(seed)
    shift = rng.normal(0.0, spread, classes)
    imp, gen = {}, {}
    for c in range(classes):
        imp[f"c{c}"] = np.exp(rng.normal(1.0 + shift[c], 0.3, n))
        centre = 0.2 + (shift[c] if genuine_follows else 0.0)
        gen[f"c{c}"] = np.exp(rng.normal(centre, 0.3, genuine))
    return ImpostorDistances.from_lists(imp), GenuineDistances.from_lists(gen)


def brute_force(fit, impostors, genuine, structure):
    """(worse, better, decided) recounted class by class and level by level, one pooled threshold's decisions
    taken from their definition: it accepts a genuine distance g when at most `fa` held-out impostors are <= g."""
    worse = better = decided = 0
    a, b = halves(impostors)
    for fitted_on, held in ((a, b), (b, a)):
        n_held = held.values.size
        levels = [e for e in LEVELS if e * n_held >= MIN_EXPECTED]
        table = fit(structure, fitted_on).thresholds(np.array(levels)).values if levels else None
        for k in range(len(levels)):
            fa = sum(int(np.sum(held.of(i) <= table[i, k])) for i in range(len(held)))
            for i in range(len(genuine)):
                for g in genuine.of(i):
                    mine = g <= table[i, k]
                    theirs = int(np.sum(held.values <= g)) <= fa
                    worse += int(theirs and not mine)
                    better += int(mine and not theirs)
                    decided += 1
    return worse, better, decided


@pytest.mark.parametrize("structure", ["anchored", "bulk"])
def test_the_cross_fitted_counts_equal_a_brute_force_recount(structure):
    imp, gen = gallery(3, classes=25, n=300, genuine=4)
    est = Auto()
    (got,) = judge(est._structure_fit, imp, gen, (structure,))
    assert (got.worse, got.better, got.decided) == brute_force(est._structure_fit, imp, gen, structure)
    assert got.decided > 0 and got.worse + got.better > 0  # the recount had something to count


def test_halves_split_every_class_in_two_the_same_way_every_run():
    imp, _ = gallery(4, classes=5, n=33)
    a, b = halves(imp)
    again = halves(imp)
    for i in range(len(imp)):
        both = np.sort(np.concatenate([a.of(i), b.of(i)]))
        np.testing.assert_array_equal(both, np.sort(imp.of(i)))  # nothing lost or repeated
        assert abs(a.of(i).size - b.of(i).size) <= 1
        np.testing.assert_array_equal(a.of(i), again[0].of(i))


def test_class_structure_that_genuine_users_share_is_chosen():
    """Genuine distances move with their class's impostors: per-class thresholds save genuine users."""
    imp, gen = gallery(5, genuine_follows=True)
    est, context = Auto(), RunContext()
    est.fit(imp, context, genuine=gen)
    assert est.chosen in ("anchored", "bulk")
    assert any(n.startswith(f"auto chose ") and "cross-fitted" in n for n in context.notes), context.notes


@pytest.mark.parametrize("seed", [6, 7, 8])
def test_without_class_structure_one_pooled_threshold_is_kept(seed):
    """Every class alike: a class-specific threshold only adds estimation noise, so one pooled threshold."""
    imp, gen = gallery(seed, spread=0.0, genuine_follows=False)
    est, context = Auto(), RunContext()
    model = est.fit(imp, context, genuine=gen)
    assert est.chosen == "one", context.notes
    table = model.thresholds([0.01, 0.001]).values
    np.testing.assert_allclose(table, table[:1].repeat(len(imp), axis=0), rtol=1e-12)  # one threshold for all
    assert any("one pooled threshold" in n for n in context.notes)


def test_without_enough_genuine_comparisons_one_pooled_threshold_and_the_notes_say_why():
    imp, gen = gallery(9, classes=10, genuine=2)  # 20 genuine comparisons
    context = RunContext()
    est = Auto()
    est.fit(imp, context, genuine=gen)
    assert est.chosen == "one"
    assert any("fewer than the 30 a choice needs" in n for n in context.notes), context.notes
    context = RunContext()
    est = Auto()
    est.fit(imp, context)  # no genuine comparisons at all
    assert est.chosen == "one" and any("no genuine comparison" in n for n in context.notes), context.notes


def test_a_fixed_structure_skips_the_choice():
    imp, gen = gallery(10, spread=0.0, genuine_follows=False)
    est = Auto(structure="bulk")
    context = RunContext()
    est.fit(imp, context, genuine=gen)
    assert est.chosen == "bulk" and not any("auto chose" in n for n in context.notes)


def test_choose_takes_the_structure_with_the_most_net_saves_beyond_two_standard_errors():
    from calibrate_builtins.estimators.choose import Judged
    near = Judged("anchored", worse=10, better=40, decided=1000)    # z = -5.5, -30 per 1,000
    far = Judged("bulk", worse=5, better=60, decided=1000)          # z = -6.8, -55 per 1,000
    assert choose([near, far])[0] == "bulk"
    assert choose([Judged("anchored", worse=20, better=25, decided=1000)])[0] == "one"  # z = -0.7


def test_a_large_gallery_is_judged_on_a_fixed_subset_of_classes_under_the_cap(monkeypatch):
    import calibrate_builtins.estimators.choose as choose_module

    imp, gen = gallery(11, classes=60, n=200)
    monkeypatch.setattr(choose_module, "MAX_JUDGED", 5000)
    sub, sub_gen, _, said = choose_module.judged_subset(imp, gen, None)
    assert sub.values.size <= 5000 and sub.classes == imp.classes[::3] and sub_gen.classes == sub.classes
    for i, c in enumerate(sub.classes):
        np.testing.assert_array_equal(sub.of(i), imp.of(imp.classes.index(c)))
    assert "one class in 3 (20 of 60" in said
    est, context = Auto(), RunContext()
    est.fit(imp, context, genuine=gen)
    assert any("one class in 3" in n for n in context.notes), context.notes


def test_too_few_training_distances_to_judge_any_level_keep_one_pooled_threshold():
    imp, gen = gallery(12, classes=30, n=60)  # 900 distances a half: 9 false accepts expected at 1%
    est, context = Auto(), RunContext()
    est.fit(imp, context, genuine=gen)
    assert est.chosen == "one" and any("no FPR level can be judged" in n for n in context.notes), context.notes


def test_the_training_fnr_in_the_note_is_the_share_of_genuine_decisions_rejected():
    imp, gen = gallery(13, classes=25, n=300, genuine=4)
    est = Auto()
    (got,) = judge(est._structure_fit, imp, gen, ("anchored",))
    worse, better, decided = brute_force(est._structure_fit, imp, gen, "anchored")
    a, b = halves(imp)
    rejected = 0
    for fitted_on, held in ((a, b), (b, a)):
        levels = [e for e in LEVELS if e * held.values.size >= MIN_EXPECTED]
        table = est._structure_fit("anchored", fitted_on).thresholds(np.array(levels)).values
        rejected += sum(int(np.sum(gen.of(i) > table[i, k])) for k in range(len(levels)) for i in range(len(gen)))
    assert got.rejected == rejected
    assert got.fnr == pytest.approx(rejected / decided, rel=1e-12)
    assert got.fnr_one == pytest.approx((rejected - worse + better) / decided, rel=1e-12)


def test_the_paired_difference_is_clustered_by_class():
    """Ten genuine comparisons of one class saved at every level say little about the other classes: by class, the
    saving is one standard error, not the 3.2 that counting every decision as independent would claim."""
    from calibrate_builtins.estimators.choose import Judged
    one_class = Judged("anchored", worse=0, better=10, decided=1000, net_per_class=np.array([-10.0] + [0.0] * 49))
    assert one_class.z == pytest.approx(-1.0)
    assert choose([one_class])[0] == "one"
    spread = Judged("anchored", worse=0, better=10, decided=1000, net_per_class=np.array([-1.0] * 10 + [0.0] * 40))
    assert spread.z == pytest.approx(-10 / math.sqrt(10))
    assert choose([spread])[0] == "anchored"


def test_the_clustered_nets_add_up_to_the_paired_counts():
    imp, gen = gallery(14, classes=25, n=300, genuine=4)
    (got,) = judge(Auto()._structure_fit, imp, gen, ("anchored",))
    assert got.net_per_class.shape == (25,)
    assert got.net_per_class.sum() == got.worse - got.better


def test_a_genuine_score_the_transform_cannot_map_is_left_out_of_calibrate_fit_with_a_warning():
    """Genuine scores only inform the default's choice: one failed attempt scored 0 under neg-log must not stop
    the fit (it did when they were first passed to the estimator)."""
    import calibrate

    rng = np.random.default_rng(15)
    n, per = 40, 300
    imp = rng.beta(2, 5, (n, per)) * 0.9 + 0.05
    gen = rng.beta(6, 2, (n, 3)) * 0.9 + 0.05
    gen[-1, -1] = 0.0
    scores = np.concatenate([imp.ravel(), gen.ravel()])
    classes = np.concatenate([np.repeat(np.arange(n), per), np.repeat(np.arange(n), 3)]).astype(str)
    real = np.concatenate([np.full(n * per, "someone-else"), np.repeat(np.arange(n), 3).astype(str)])
    with pytest.warns(UserWarning, match="1 of 120 genuine scores cannot be mapped"):
        cal = calibrate.fit(scores, classes, real=real, kind="similarity", targets=[0.01], predict=False,
                            transform={"plugin": "similarity-to-distance", "method": "neg-log", "upper": 1.0})
    assert np.isfinite(cal.threshold("0", 0.01))
