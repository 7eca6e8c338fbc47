"""auto's matched structures (issue 39): class-specific thresholds with each demographic group held at the same-group
FMR one pooled threshold gives it, so that the gain of per-class locations is kept without widening the gap."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest
import yaml

import calibrate
from calibrate.contract.base import RunContext
from calibrate.contract.types import ImpostorDistances, TrainingGroups
from calibrate.predicted.world import build_world
from calibrate_builtins.estimators.auto import Auto

LEVELS = np.array([0.01, 0.003])


def grouped_gallery(seed: int, classes: int = 60, n: int = 1500) -> tuple[ImpostorDistances, TrainingGroups]:
    """Two groups (3:1 classes, and 3:1 probes among every class's impostors); a same-group impostor is nearer
    (log distance 0.5 lower), and classes differ in location (sd 0.15): the minority's classes meet few same-group
    impostors, whose look-alikes decide its FMR."""
    rng = np.random.default_rng(seed)
    of_class = (np.arange(classes) >= 3 * classes // 4).astype(np.int64)
    probes = (rng.random((classes, n)) < 0.25).astype(np.int64)
    loc = rng.normal(0.0, 0.15, classes)
    values = np.exp(loc[:, None] - 0.5 * (probes == of_class[:, None]) + 0.3 * rng.standard_normal((classes, n)))
    imp = ImpostorDistances.from_lists({f"c{c:03d}": values[c] for c in range(classes)})
    return imp, TrainingGroups(("a", "b"), of_class, probes.ravel())


def same_group_shares(imp: ImpostorDistances, groups: TrainingGroups, tau: np.ndarray) -> np.ndarray:
    """Per group and level, the share of the group's same-group training distances at or below their class's
    threshold (``tau``: classes x levels), counted directly."""
    own = np.repeat(groups.of_class, imp.counts())
    same = groups.of_impostor == own
    seg = np.repeat(np.arange(len(imp)), imp.counts())
    below = imp.values[:, None] <= tau[seg]
    return np.array([below[same & (own == g)].mean(axis=0) for g in range(2)])


@pytest.mark.parametrize("base", ["anchored", "bulk"])
def test_a_matched_structure_holds_each_group_where_one_threshold_puts_it(base):
    imp, groups = grouped_gallery(1)
    one = Auto(structure="one").fit(imp, groups=groups)
    plain = Auto(structure=base).fit(imp, groups=groups)
    matched = Auto(structure=f"{base}-matched").fit(imp, groups=groups)
    reference = same_group_shares(imp, groups, one.thresholds(LEVELS).values)
    plain_ratio = same_group_shares(imp, groups, plain.thresholds(LEVELS).values) / reference
    matched_ratio = same_group_shares(imp, groups, matched.thresholds(LEVELS).values) / reference
    # the plain structure moves the two groups apart (the minority several times its one-threshold share), the
    # matched one holds them together: about the same ratio to one threshold in both groups (one shift per group
    # holds them exactly at no single level, and the minority counts 13-69 same-group false accepts here)
    assert np.all(plain_ratio[1] / plain_ratio[0] > 3.0)
    assert np.all(np.abs(np.log(matched_ratio[1] / matched_ratio[0])) < np.log(1.5))
    # the overall FPR stays calibrated on every training distance
    tau = matched.thresholds(LEVELS).values[np.repeat(np.arange(len(imp)), imp.counts())]
    np.testing.assert_allclose((imp.values[:, None] <= tau).mean(axis=0) / LEVELS, 1.0, atol=0.15)
    # each class keeps its own location: one shift per group on the standardised scale
    shift = (matched.loc - plain.loc) / plain.scale
    for g in range(2):
        mine = shift[groups.of_class == g]
        np.testing.assert_allclose(mine, mine[0], atol=1e-9)
    assert abs(shift[groups.of_class == 1][0] - shift[groups.of_class == 0][0]) > 0.05


@pytest.mark.parametrize("structure", ["anchored-matched", "bulk-matched"])
def test_a_matched_structure_is_simulated_as_a_refit_with_its_shifts_held(structure):
    imp, groups = grouped_gallery(2, classes=40, n=300)
    est = Auto(structure=structure)
    est.fit(imp, groups=groups)
    world = build_world(imp)
    t = np.array([0.001, 0.005, 0.02])
    whole = world.draw_galleries(np.random.default_rng(3), 4)
    ranks = est.simulation_ranks(world.counts, t, world)
    sim = est.simulate(whole if ranks is None else whole.restricted(ranks), t)
    for b in range(4):
        model = est.fit(ImpostorDistances(imp.classes, whole.gallery(b), world.offsets), RunContext())
        np.testing.assert_allclose(sim[b], model.thresholds(t).values, rtol=1e-9)


def test_without_groups_a_matched_structure_is_its_plain_one():
    imp, _ = grouped_gallery(4, classes=30, n=200)
    t = np.array([0.001, 0.01])
    np.testing.assert_allclose(Auto(structure="anchored-matched").fit(imp).thresholds(t).values,
                               Auto(structure="anchored").fit(imp).thresholds(t).values, rtol=1e-12)


def test_auto_with_groups_keeps_the_gain_without_widening_the_gap(tmp_path):
    """On a gallery whose groups meet their own look-alikes (synthetic-groups), auto with groups turns away fewer
    genuine users than one pooled threshold, with the same-group FMR gap no wider than one threshold's."""
    recipe = {"version": 1, "data": {"plugin": "synthetic-groups", "classes": 400, "group_shares": [0.8, 0.2],
                                     "train_probes": 3, "test_probes": 3, "genuine": "follows", "seed": 29},
              "evaluation": {"targets": [0.005, 0.001], "prediction": False}, "output": {"plots": False}}
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(recipe), encoding="utf-8")
    with pytest.warns(UserWarning):
        calibrate.run(path, out=tmp_path / "out")
    rows = json.loads((tmp_path / "out" / "results.json").read_text(encoding="utf-8"))["estimators"]["auto"]["targets"]
    for row in rows:
        assert row["fnr"] < 0.8 * row["fnr_one_threshold"]
        gap, one_gap = row["fmr_same_group_max_over_min"], row["one_threshold"]["fmr_same_group_max_over_min"]
        assert gap <= max(1.2 * one_gap, 1.5)


@pytest.mark.parametrize("structure", ["anchored-matched", "bulk-matched"])
def test_a_matched_calibration_saved_and_loaded_answers_as_fitted(tmp_path, structure):
    recipe = {"version": 1, "data": {"plugin": "synthetic-groups", "classes": 200, "group_shares": [0.75, 0.25],
                                     "train_probes": 3, "test_probes": 2, "seed": 3},
              "estimators": [{"plugin": "auto", "structure": structure}],
              "evaluation": {"targets": [0.01, 0.001], "prediction": False}, "output": {"plots": False}}
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(recipe), encoding="utf-8")
    with pytest.warns(UserWarning):
        calibrate.run(path, out=tmp_path / "out")
    cal = calibrate.load(tmp_path / "out")
    fitted = {(r["class"], float(r["target_fpr"])): float(r["threshold"])
              for r in csv.DictReader((tmp_path / "out" / "thresholds.csv").open(encoding="utf-8"))}
    for (cls, t), want in list(fitted.items())[:40]:
        assert cal.distance_threshold(cls, t) == pytest.approx(want, rel=1e-12)
