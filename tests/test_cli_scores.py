"""`calibrate fit` + `calibrate evaluate` (issue 20, item 3): on an unseen bob 4-column dev/eval pair
they agree with a recipe run on the same pair (same thresholds, same counts, same intervals)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from calibrate.cli.commands import app

from calibrate_test_helpers import write_recipe

runner = CliRunner()


def _bob_pair(folder: Path, seed: int) -> tuple[Path, Path]:
    """A dev/eval pair of bob 4-column files: 25 subjects, 4 probes each plus 8 outsiders, a few -1."""
    subjects = [f"s{k:02d}" for k in range(25)]
    paths = []
    for group, offset in (("dev", 0), ("eval", 1)):
        rng = np.random.default_rng([seed, offset])
        probes = [(s, f"{s}/{group}{n}") for s in subjects for n in range(4)]
        probes += [(f"out{k}", f"out{k}/{group}") for k in range(8)]
        lines = []
        for real, label in probes:
            for claimed in subjects:
                score = rng.beta(6, 2) if claimed == real else rng.beta(2, 5)
                lines.append(f"{claimed} {real} {label} {'-1' if rng.random() < 0.003 else f'{score:.5f}'}\n")
        path = folder / f"scores-{group}"
        path.write_text("".join(lines), encoding="ascii")
        paths.append(path)
    return paths[0], paths[1]


@pytest.mark.parametrize("estimator", ["auto", "class-interp"])
def test_fit_and_evaluate_agree_with_a_recipe_run(tmp_path, estimator):
    dev, ev = _bob_pair(tmp_path, seed=11)
    targets = [0.05, 0.02, 0.01]
    recipe = {"version": 1,
              "data": {"plugin": "score-list", "train": str(dev), "test": str(ev), "kind": "similarity", "missing": -1},
              "estimators": [{"plugin": estimator}], "evaluation": {"targets": targets},
              "output": {"dir": str(tmp_path / "run"), "plots": False}}
    ran = runner.invoke(app, ["run", str(write_recipe(tmp_path / "r.yaml", recipe)), "-q"])
    assert ran.exit_code == 0, ran.output
    fpr = [a for t in targets for a in ("--fpr", str(t))]
    fitted = runner.invoke(app, ["fit", str(dev), "--missing", "-1", "--estimator", estimator, "--out",
                                 str(tmp_path / "cal.json"), *fpr])
    assert fitted.exit_code == 0, fitted.output
    assert "genuine comparison(s) left out of the fit" in fitted.stdout
    judged = runner.invoke(app, ["evaluate", str(tmp_path / "cal.json"), str(ev), "--missing", "-1", "--json"])
    assert judged.exit_code == 0, judged.output
    got = json.loads(judged.stdout)["targets"]
    want = json.loads((tmp_path / "run" / "results.json").read_text())["estimators"][estimator]["targets"]
    for g, w in zip(got, want, strict=True):
        assert (g["target_fpr"], g["false_accepts"], g["impostor_attempts"]) == \
            (w["target_fpr"], w["false_accepts"], w["impostor_attempts"])
        assert g["fnr"] == pytest.approx(w["fnr"], abs=1e-12)
        assert g["fpr_ci_low"] == pytest.approx(w["fpr_ci_low"], rel=1e-9)
        for key in ("predicted_fpr_low", "predicted_fpr_high"):
            assert g[key] == pytest.approx(w[key], rel=1e-6), key
    for t in targets:  # the same thresholds, read back through `calibrate threshold`
        a = runner.invoke(app, ["threshold", str(tmp_path / "cal.json"), "--class", "s03", "--fpr", str(t), "--json"])
        b = runner.invoke(app, ["threshold", str(tmp_path / "run" / "calibration.json"), "--class", "s03",
                                "--fpr", str(t), "--json"])
        assert json.loads(a.stdout)["score_threshold"] == pytest.approx(json.loads(b.stdout)["score_threshold"], rel=1e-12)


def test_evaluate_leaves_out_unknown_classes_and_says_so(tmp_path):
    dev, ev = _bob_pair(tmp_path, seed=12)
    assert runner.invoke(app, ["fit", str(dev), "--missing", "-1", "--estimator", "class-interp", "--no-predict",
                               "--out", str(tmp_path / "cal.json")]).exit_code == 0
    with ev.open("a") as f:
        f.write("stranger s01 s01/x 0.5\nstranger s02 s02/y 0.7\n")
    result = runner.invoke(app, ["evaluate", str(tmp_path / "cal.json"), str(ev), "--missing", "-1"])
    assert result.exit_code == 0, result.output
    assert "2 attempt(s) claim classes the calibration does not hold" in result.stderr
    assert "0.5% |" in result.stdout  # the calibration's own targets


def test_fit_refuses_a_reversed_file(tmp_path):
    dev, _ = _bob_pair(tmp_path, seed=13)
    result = runner.invoke(app, ["fit", str(dev), "--missing", "-1", "--kind", "distance", "--out", str(tmp_path / "c.json")])
    assert result.exit_code == 2
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"error: {dev}: the ") and "give --kind similarity" in line
    assert not (tmp_path / "c.json").exists()


def test_accept_keeps_probe_labels_and_has_a_policy_for_unknown_classes(tmp_path):
    import csv

    dev, ev = _bob_pair(tmp_path, seed=14)
    assert runner.invoke(app, ["fit", str(dev), "--missing", "-1", "--estimator", "class-interp", "--no-predict",
                               "--out", str(tmp_path / "cal.json")]).exit_code == 0
    with ev.open("a") as f:
        f.write("stranger s01 s01/x 0.5\n")
    base = ["accept", str(tmp_path / "cal.json"), str(ev), "--fpr", "0.05", "--missing", "-1"]
    refused = runner.invoke(app, base + ["--out", str(tmp_path / "d.csv")])  # the default: stop, naming it
    assert refused.exit_code == 2 and "'stranger'" in refused.stderr and "--unknown" in refused.stderr
    skipped = runner.invoke(app, base + ["--unknown", "skip", "--out", str(tmp_path / "skip.csv")])
    assert skipped.exit_code == 0 and "1 attempt(s) claiming classes the calibration does not hold left out" in skipped.stdout
    rows = list(csv.DictReader((tmp_path / "skip.csv").open()))
    assert rows[0]["probe"].startswith(rows[0]["real"] + "/") and all(r["claimed"] != "stranger" for r in rows)
    rejected = runner.invoke(app, base + ["--unknown", "reject", "--out", str(tmp_path / "rej.csv")])
    assert rejected.exit_code == 0
    last = list(csv.DictReader((tmp_path / "rej.csv").open()))[-1]
    assert (last["claimed"], last["probe"], last["threshold"], last["accept"]) == ("stranger", "s01/x", "", "0")


def test_a_list_of_one_class_is_not_spread_over_every_score(tmp_path):
    import calibrate
    from calibrate.errors import CalibrationError

    rng = np.random.default_rng(2)
    cal = calibrate.fit({f"c{i}": rng.beta(2, 5, 100) for i in range(4)}, estimator="class-interp", impostors_only=True)
    assert cal.accept("c1", [0.1, 0.99], 0.05).tolist() == [False, True]  # one class, not in a list: for all
    with pytest.raises(CalibrationError, match="1 classes but 2 scores"):
        cal.accept(["c1"], [0.1, 0.99], 0.05)


def test_a_target_below_one_over_n_warns_or_is_refused_unless_asked(tmp_path):
    import warnings

    import calibrate

    dev, _ = _bob_pair(tmp_path, seed=15)
    assert runner.invoke(app, ["fit", str(dev), "--missing", "-1", "--no-predict", "--out", str(tmp_path / "c.json")]).exit_code == 0
    cal = calibrate.load(tmp_path / "c.json")
    n = cal.training_impostors
    assert n == sum(1 for line in dev.read_text().splitlines() if line.split()[0] != line.split()[1]
                    and line.split()[3] != "-1")
    base = ["threshold", str(tmp_path / "c.json"), "--class", "s01"]
    refused = runner.invoke(app, base + ["--fpr", "1e-6"])
    assert refused.exit_code == 2 and "below 1/N" in refused.stderr and "--allow-extrapolation" in refused.stderr
    allowed = runner.invoke(app, base + ["--fpr", "1e-6", "--allow-extrapolation", "--json"])
    assert allowed.exit_code == 0 and "note: target FPR 1e-06 is below 1/N" in allowed.stderr
    doc = json.loads(allowed.stdout)
    assert doc["training_impostors"] == n and doc["training_support"] == pytest.approx(1e-6 * n)
    plain = runner.invoke(app, base + ["--fpr", "0.05"])
    assert plain.exit_code == 0 and f"training support: {0.05 * n:.3g} of the {n:,} training impostor" in plain.stdout
    with pytest.warns(UserWarning, match="below 1/N"):
        cal.threshold("s01", 1e-6)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cal.threshold("s02", 1e-6)  # said once per target
        cal.threshold("s01", 0.05)


def test_a_calibration_from_another_version_loads_with_a_note(tmp_path):
    import calibrate
    from calibrate.saved.json_format import dumps_artifact
    from calibrate_test_helpers import invoke_cli

    dev, _ = _bob_pair(tmp_path, seed=16)
    assert runner.invoke(app, ["fit", str(dev), "--missing", "-1", "--no-predict", "--out", str(tmp_path / "c.json")]).exit_code == 0
    doc = json.loads((tmp_path / "c.json").read_text())
    doc["versions"]["calibrate-thresholds"] = "0.0.1"
    (tmp_path / "old.json").write_text(dumps_artifact(doc))  # as that version wrote it: with its digest
    with pytest.warns(UserWarning, match="written by calibrate-thresholds 0.0.1"):
        calibrate.load(tmp_path / "old.json")
    done = invoke_cli("threshold", str(tmp_path / "old.json"), "--class", "s01", "--fpr", "0.05")
    assert done.returncode == 0 and done.stderr.startswith("note: ") and "0.0.1" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_threshold_says_when_a_target_has_no_predicted_interval(tmp_path):
    dev, _ = _bob_pair(tmp_path, seed=16)
    fitted = runner.invoke(app, ["fit", str(dev), "--missing", "-1", "--fpr", "0.05", "--estimator", "class-interp",
                                 "--out", str(tmp_path / "c.json")])
    assert fitted.exit_code == 0, fitted.output
    base = ["threshold", str(tmp_path / "c.json"), "--class", "s01"]
    on_target = runner.invoke(app, base + ["--fpr", "0.05"])
    assert on_target.exit_code == 0 and "predicted long-run FPR" in on_target.stdout
    other = runner.invoke(app, base + ["--fpr", "0.04"])  # not among the fitted targets: said, not dropped
    assert other.exit_code == 0 and "predicted FPR: none (the FPR interval was predicted at targets 0.05 only" in other.stdout
    doc = json.loads(runner.invoke(app, base + ["--fpr", "0.04", "--json"]).stdout)
    assert doc["predicted"] is None and "0.05 only" in doc["no_prediction"]


def test_accept_and_evaluate_say_how_many_enrolled_classes_a_file_lacks(tmp_path):
    dev, ev = _bob_pair(tmp_path, seed=17)
    cal = str(tmp_path / "c.json")
    assert runner.invoke(app, ["fit", str(dev), "--missing", "-1", "--no-predict", "--out", cal]).exit_code == 0
    lacking = tmp_path / "lacking"
    lacking.write_text("".join(line for line in ev.read_text().splitlines(keepends=True)
                               if line.split()[0] not in ("s03", "s07")), encoding="ascii")
    evaluated = runner.invoke(app, ["evaluate", cal, str(lacking), "--missing", "-1"])
    assert evaluated.exit_code == 0, evaluated.output
    assert "2 of the calibration's 25 enrolled classes have no attempt (e.g. 's03')" in evaluated.stderr
    doc = json.loads(runner.invoke(app, ["evaluate", cal, str(lacking), "--missing", "-1", "--json"]).stdout)
    assert (doc["enrolled_classes"], doc["classes_judged"]) == (25, 23)
    accepted = runner.invoke(app, ["accept", cal, str(lacking), "--missing", "-1", "--fpr", "0.05",
                                   "--out", str(tmp_path / "d.csv")])
    assert accepted.exit_code == 0 and "2 of the calibration's 25 enrolled classes have no attempt" in accepted.stderr
    whole = runner.invoke(app, ["evaluate", cal, str(ev), "--missing", "-1"])
    assert whole.exit_code == 0 and "enrolled classes have no attempt" not in whole.stderr


@pytest.mark.parametrize("fpr", ["1e-300", "5e-324"])
def test_fit_at_a_target_far_below_one_over_n_says_so_at_fit_time(tmp_path, fpr):
    """Audit S5: fit saved such a target without a word (threshold refused it later), and a subnormal target
    leaked numpy's "overflow encountered in divide" from the GPD tail's quantile. Since issue 31 fit refuses it
    as threshold does (tests/test_operator_mistakes.py); --allow-extrapolation fits it, with the note."""
    dev, _ = _bob_pair(tmp_path, seed=16)
    result = runner.invoke(app, ["fit", str(dev), "--missing", "-1", "--fpr", fpr, "--fpr", "0.05",
                                 "--allow-extrapolation", "--out", str(tmp_path / "c.json")])
    assert result.exit_code == 0, result.output
    notes = [line for line in result.stderr.splitlines() if line.startswith("note: ") and not line.startswith("note: auto")]
    assert len(notes) == 1 and notes[0].startswith(f"note: target FPR {float(fpr):g} is below 1/N of the "), notes
    assert any(line.startswith(("note: auto chose ", "note: auto: one pooled")) for line in result.stderr.splitlines())  # what the default chose
    assert "encountered" not in result.stderr
