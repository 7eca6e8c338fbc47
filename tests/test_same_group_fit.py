"""Calibration against same-group impostors outside recipes (issue 39, part 3): ``calibrate.fit(groups=,
same_group=)``, the command line's ``fit``/``evaluate``/``threshold``/``enroll`` with ``--groups``/``--same-group``,
saved and loaded, and a class enrolled into its group's part; each against a recipe run on the same data."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import calibrate
from calibrate.cli.commands import app
from calibrate.contract.base import RunContext
from calibrate.contract.manager import build_registry
from calibrate.errors import DataError, ParameterError
from calibrate.recipe.validation import parse_recipe
from calibrate.running.pipeline import run_recipe
from calibrate.saved.grouped import GroupedModel

TARGETS = [0.01, 0.005]
runner = CliRunner()


def _synthetic_recipe(tmp: Path, same_group: bool, estimator: str):
    """Three groups of unequal size whose own impostors are closer (a small third group closest): with groups, auto
    chooses otherwise than without (tests/test_same_group.py)."""
    data = {"plugin": "synthetic-groups", "classes": 300, "group_shares": [0.6, 0.3, 0.1],
            "within_group": [1.0, 1.5, 2.0], "train_probes": 3, "test_probes": 3, "seed": 31}
    if same_group:
        data["impostors"] = "same-group"
    raw = {"version": 1, "data": data, "estimators": [{"plugin": estimator}],
           "evaluation": {"targets": TARGETS, "prediction": True},
           "output": {"dir": str(tmp / f"{estimator}-{same_group}"), "plots": False}}
    return parse_recipe(raw, build_registry(), source="groups.yaml", base_dir=tmp)


def _training_arrays(recipe):
    """The recipe's training comparisons as calibrate.fit takes them (score, claimed class, probe's real class) and
    its groups as a mapping."""
    split = recipe.data.build().load(RunContext(seed=recipe.seed))
    m = split.train
    rows, cols = np.nonzero(m.valid)
    groups = dict(zip(split.groups.classes, split.groups.groups))
    return m.values[rows, cols], np.asarray(m.gallery_classes)[cols], np.asarray(m.probe_classes)[rows], groups


def _thresholds(cal, classes) -> np.ndarray:
    return np.array([[cal.threshold(c, t) for t in TARGETS] for c in classes])


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("estimator, same_group", [("auto", True), ("auto", False), ("generic-interp", True)])
def test_fit_with_groups_gives_the_recipes_thresholds_and_intervals(tmp_path, estimator, same_group):
    recipe = _synthetic_recipe(tmp_path, same_group, estimator)
    run_recipe(recipe)
    ran = calibrate.load(recipe.output_dir)
    scores, classes, real, groups = _training_arrays(recipe)
    cal = calibrate.fit(scores, classes, real=real, kind="similarity", groups=groups, same_group=same_group,
                        estimator=estimator, targets=TARGETS, predict=True)
    assert set(cal.classes) == set(ran.classes)
    np.testing.assert_allclose(_thresholds(cal, ran.classes), _thresholds(ran, ran.classes), rtol=1e-12, atol=0)
    for key in ("predicted_fpr_low", "predicted_fpr_high"):
        np.testing.assert_allclose(cal.prediction[key], ran.prediction[key], rtol=1e-12)
    if same_group:
        assert isinstance(cal.model, GroupedModel) and cal.groups == {c: groups[c] for c in cal.classes}
    # the groups matter: without them (or calibrated against every impostor) the thresholds are others
    plain = calibrate.fit(scores, classes, real=real, kind="similarity", estimator=estimator, targets=TARGETS)
    assert np.max(np.abs(_thresholds(plain, ran.classes) / _thresholds(ran, ran.classes) - 1)) > 0.01


def _score_list(folder: Path, seed: int = 3, n: int = 48) -> tuple[Path, Path, Path]:
    """A dev/eval pair of bob 4-column lists (4 probes a class in each) and a groups file: group A's own impostors
    much closer than B's, the last three classes without a group."""
    rng = np.random.default_rng(seed)
    names = [f"c{k:03d}" for k in range(n)]
    group = {c: "A" if k < 0.65 * n else "B" for k, c in enumerate(names)}
    where = dict(zip(names, rng.normal(0, 0.5, n)))
    paths = []
    for part in ("dev", "eval"):
        lines = []
        for real in names:
            for p in range(4):
                b = rng.normal(0, 0.3)
                for claimed in names:
                    if claimed == real:
                        x = 4.0 + b + rng.normal()
                    else:
                        own = group[claimed] == group[real]
                        x = where[claimed] + b + own * (1.5 if group[real] == "A" else 0.75) + rng.normal()
                    lines.append(f"{claimed} {real} {real}/{part}{p} {x:.6f}\n")
        paths.append(folder / f"scores-{part}")
        paths[-1].write_text("".join(lines), encoding="ascii")
    groups = folder / "groups.csv"
    groups.write_text("class,group\n" + "".join(f"{c},{g}\n" for c, g in list(group.items())[:-3]), encoding="ascii")
    return paths[0], paths[1], groups


@pytest.fixture(scope="module")
def listed(tmp_path_factory):
    """The score lists, a same-group recipe run on them, and `calibrate fit --groups --same-group` on dev."""
    tmp = tmp_path_factory.mktemp("listed")
    dev, ev, groups = _score_list(tmp)
    raw = {"version": 1, "data": {"plugin": "score-list", "train": str(dev), "test": str(ev), "kind": "similarity",
                                  "groups": str(groups), "impostors": "same-group"},
           "estimators": [{"plugin": "auto"}], "evaluation": {"targets": TARGETS},
           "output": {"dir": str(tmp / "run"), "plots": False}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run_recipe(parse_recipe(raw, build_registry(), source="r.yaml", base_dir=tmp))
    fpr = [a for t in TARGETS for a in ("--fpr", str(t))]
    fitted = runner.invoke(app, ["fit", str(dev), "--groups", str(groups), "--same-group", "--out",
                                 str(tmp / "cal.json"), "-q", *fpr])
    assert fitted.exit_code == 0, fitted.output
    return tmp, dev, ev, groups, fitted


def test_the_command_line_fits_and_evaluates_as_the_recipe_does(listed):
    tmp, _, ev, groups, fitted = listed
    assert "left out" in fitted.stdout and "same-group FMR/target" in fitted.stdout
    assert "3 of the 48 enrolled classes have no group" in fitted.output  # unlabelled: said, as a run says it
    for cls, group in (("c001", "A"), ("c040", "B"), ("c047", "unlabelled")):
        a = json.loads(runner.invoke(app, ["threshold", str(tmp / "cal.json"), "--class", cls, "--fpr", "0.01",
                                           "--json"]).stdout)
        b = json.loads(runner.invoke(app, ["threshold", str(tmp / "run"), "--class", cls, "--fpr", "0.01",
                                           "--json"]).stdout)
        assert a["score_threshold"] == pytest.approx(b["score_threshold"], rel=1e-12) and a["group"] == group
    judged = runner.invoke(app, ["evaluate", str(tmp / "cal.json"), str(ev), "--groups", str(groups), "--same-group",
                                 "--json"])
    assert judged.exit_code == 0, judged.output
    got = json.loads(judged.stdout)["targets"]
    want = json.loads((tmp / "run" / "results.json").read_text())["estimators"]["auto"]["targets"]
    for g, w in zip(got, want, strict=True):  # the run's FPR over same-group attempts, and its groups' figures
        assert (g["false_accepts"], g["impostor_attempts"]) == (w["false_accepts"], w["impostor_attempts"])
        assert g["fnr"] == pytest.approx(w["fnr"], abs=1e-12)
        assert set(g["groups"]) == set(w["groups"]) == {"A", "B", "unlabelled"}
        for name in ("A", "B"):
            for key in ("fmr_same_group", "fnmr", "impostor_attempts_same_group"):
                assert g["groups"][name][key] == pytest.approx(w["groups"][name][key], abs=1e-12), (name, key)
    every = runner.invoke(app, ["evaluate", str(tmp / "cal.json"), str(ev)])  # without: over every impostor attempt
    assert f"/ {got[0]['impostor_attempts']} |" not in every.stdout and "fitted group by group" in every.stderr


def test_a_grouped_calibration_saved_and_loaded_answers_as_before(tmp_path):
    dev, ev, groups = _score_list(tmp_path, seed=4)
    from calibrate.files.score_lists import read_comparisons

    rows = read_comparisons(dev)
    claimed = np.asarray(rows.claimed_labels)[rows.claimed]
    real = np.asarray(rows.real_labels)[rows.real]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cal = calibrate.fit(rows.scores, claimed, real=real, kind="similarity", groups=groups, same_group=True,
                            targets=TARGETS, predict=True)
    again = calibrate.load(cal.save(tmp_path / "c.json"))
    assert isinstance(again.model, GroupedModel) and again.groups == cal.groups
    assert again.groups["c047"] == "unlabelled" and again.groups["c000"] == "A"
    test = read_comparisons(ev)
    probes = np.asarray(test.claimed_labels)[test.claimed]
    for t in (*TARGETS, 0.003):
        # a saved state holds the fitted values exactly (JSON's repr, or packed bits): the same answers, bit for bit
        assert again.thresholds(t) == cal.thresholds(t)
        np.testing.assert_array_equal(again.accept(probes, test.scores, t), cal.accept(probes, test.scores, t))
    assert again.predicted_fpr(0.01) == cal.predicted_fpr(0.01)


def _distances(rng, n_a, n_b):
    """Per class, impostor distances of its own group: group A's much nearer than B's (a pooled threshold apart)."""
    per = {f"a{k}": rng.gamma(4.0, 0.5, 200) for k in range(n_a)}
    per.update({f"b{k}": 3.0 + rng.gamma(4.0, 0.5, 200) for k in range(n_b)})
    return per


def _grouped_fit(per: dict, estimator: str):
    """calibrate.fit on same-group impostors only (each class's probes of its own group), distances as given."""
    scores = np.concatenate(list(per.values()))
    classes = np.repeat(list(per), [v.size for v in per.values()])
    groups = {c: c[0].upper() for c in per}
    # each comparison's probe: another class of the claimed class's group
    real = np.array([("a" if c[0] == "a" else "b") + "-probe" for c in classes])
    groups.update({"a-probe": "A", "b-probe": "B"})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return calibrate.fit(scores, classes, real=real, kind="distance", groups=groups, same_group=True,
                             estimator=estimator, targets=TARGETS)


def test_a_class_enrolled_with_its_group_joins_that_groups_part():
    rng = np.random.default_rng(7)
    per = _distances(rng, 20, 12)
    newcomer = rng.gamma(4.0, 0.5, 150)
    # a pooled estimator: a class enrolled takes its group's pooled threshold, whichever of its own scores
    cal = _grouped_fit(per, "generic-interp")
    before = cal.thresholds(0.01)
    cal.enroll("new-a", newcomer, group="A")
    cal.enroll("new-b", newcomer, group="B")
    assert cal.threshold("new-a", 0.01) == before["a0"] and cal.threshold("new-b", 0.01) == before["b0"]
    assert before["a0"] < before["b0"] / 2
    assert {c: t for c, t in cal.thresholds(0.01).items() if c in before} == before  # the others untouched
    assert cal.groups["new-a"] == "A" and cal.groups["new-b"] == "B"
    # a per-class estimator: exactly a full fit with the class in its group
    part = _grouped_fit({k: v for k, v in per.items() if k != "a3"}, "class-interp")
    part.enroll("a3", per["a3"], group="A")
    full = _grouped_fit(per, "class-interp")
    assert part.thresholds(0.005)["a3"] == full.thresholds(0.005)["a3"]


def test_enroll_on_the_command_line_puts_a_class_into_its_groups_part(listed):
    tmp, _, ev, groups, _ = listed
    lines = [ln.split() for ln in ev.read_text().splitlines()]
    (tmp / "new").write_text("".join(f"newcomer {r} {p} {s}\n" for c, r, p, s in lines if c == "c001"))
    (tmp / "groups2.csv").write_text(groups.read_text() + "newcomer,A\n")
    done = runner.invoke(app, ["enroll", str(tmp / "cal.json"), str(tmp / "new"), "--class", "newcomer", "--groups",
                               str(tmp / "groups2.csv"), "--out", str(tmp / "cal2.json")])
    assert done.exit_code == 0, done.output
    assert "newcomer (group A) from" in done.stdout and "with probes of another group left out" in done.stdout
    # the API given the class's same-group impostor scores
    cal = calibrate.load(tmp / "cal.json")
    group_of = dict(line.split(",") for line in (tmp / "groups2.csv").read_text().split()[1:])
    same = [float(s) for c, r, _, s in lines if c == "c001" and group_of.get(r) == "A"]  # c001's own: impostors too
    cal.enroll("newcomer", same, group="A")
    again = calibrate.load(tmp / "cal2.json")
    assert again.groups["newcomer"] == "A"
    assert again.threshold("newcomer", 0.01) == pytest.approx(cal.threshold("newcomer", 0.01), rel=1e-12)
    missing = runner.invoke(app, ["enroll", str(tmp / "cal.json"), str(tmp / "new"), "--class", "newcomer", "--out",
                                  str(tmp / "cal3.json")])
    assert missing.exit_code == 2 and "--groups FILE" in missing.stderr and not (tmp / "cal3.json").exists()


@pytest.mark.filterwarnings("ignore")
def test_mistakes_are_clear_errors(tmp_path, listed):
    scores, classes, real = np.linspace(0, 1, 40), np.repeat(["a", "b"], 20), np.repeat(["b", "a"], 20)
    with pytest.raises(ParameterError, match="same_group=True needs groups="):
        calibrate.fit(scores, classes, real=real, kind="distance", same_group=True)
    with pytest.raises(ParameterError, match="groups= needs real="):
        calibrate.fit(scores, classes, kind="distance", groups={"a": "X", "b": "Y"}, impostors_only=True)
    with pytest.raises(ParameterError, match="confidence"):
        calibrate.fit(scores, classes, real=real, kind="distance", groups={"a": "X"}, same_group=True, confidence=0.9)
    with pytest.raises(DataError, match="none of its 1 classes"):
        calibrate.fit(scores, classes, real=real, kind="distance", groups={"zed": "X"})
    with pytest.raises(DataError, match="class 'a' \\(group 'X'\\) has no training impostor comparison with a probe "
                                        "of its own group"):
        calibrate.fit(scores, classes, real=real, kind="distance", groups={"a": "X", "b": "Y"}, same_group=True)
    cal = _grouped_fit(_distances(np.random.default_rng(1), 6, 6), "generic-interp")
    for group, match in ((None, "group=NAME"), ("C", "group='C' is not one of this calibration's groups"),
                         ("B", "class 'a1' is in group 'A', not 'B'")):
        with pytest.raises(ParameterError, match=match):
            cal.enroll("a1", np.linspace(0.1, 2, 50), group=group)
    plain = calibrate.fit({"a": np.linspace(0, 1, 50), "b": np.linspace(0, 1, 50)}, kind="distance",
                          impostors_only=True)
    with pytest.raises(ParameterError, match="leave out group="):
        plain.enroll("c", np.linspace(0, 1, 50), group="A")
    tmp, dev, ev, groups, _ = listed
    for command in (["fit", str(dev), "--out", str(tmp_path / "x.json")], ["evaluate", str(tmp / "cal.json"), str(ev)]):
        done = runner.invoke(app, [*command, "--same-group"])
        assert done.exit_code == 2 and "--same-group needs --groups FILE" in done.stderr
    done = runner.invoke(app, ["enroll", str(plain.save(tmp_path / "plain.json")), str(ev), "--class", "x",
                               "--groups", str(groups), "--out", str(tmp_path / "y.json")])
    assert done.exit_code == 2 and "leave out --groups" in done.stderr
