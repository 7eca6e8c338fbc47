"""The runtime API: fit from arrays, thresholds and decisions in score units, enroll, save, load."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings

import numpy as np
import pytest

import calibrate
from calibrate.errors import CalibrateError, CalibrationError, DataError

from calibrate_test_helpers import make_scores, write_recipe, write_scores

TARGETS = (0.05, 0.02, 0.01)


def gallery(seed=0, n_classes=40, n=300):
    rng = np.random.default_rng(seed)
    return {f"c{i:02d}": rng.beta(2, 6, n) * 100 for i in range(n_classes)}  # similarity scores in [0, 100]


@pytest.fixture(scope="module")
def recipe_run(tmp_path_factory):
    """A score-matrix recipe with train/test files, and the training impostor scores per class."""
    tmp = tmp_path_factory.mktemp("api")
    values, probes, gallery_ = make_scores(seed=31, n_classes=15, probes_per_class=10)
    train = write_scores(tmp / "train.csv", values, probes, gallery_)
    test = write_scores(tmp / "test.csv", *make_scores(seed=32, n_classes=15, probes_per_class=10))
    recipe = {"version": 1, "data": {"plugin": "score-matrix", "train": str(train), "test": str(test), "kind": "similarity"},
              "estimators": [{"plugin": "auto"}, {"plugin": "class-interp"}],
              "evaluation": {"targets": list(TARGETS)}, "output": {"dir": str(tmp / "out"), "plots": False}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        calibrate.run(write_recipe(tmp / "r.yaml", recipe))
    probes = np.array(probes)
    per_class = {g: values[probes != g, j] for j, g in enumerate(gallery_)}
    return tmp / "out", per_class


def test_fit_on_arrays_gives_the_recipes_thresholds(recipe_run):
    out, per_class = recipe_run
    rows = [line.split(",") for line in (out / "thresholds.csv").read_text().splitlines()[1:]]
    for label in ("auto", "class-interp"):
        cal = calibrate.fit(per_class, kind="similarity", estimator=label, impostors_only=True)
        for est, cls, target, tau, score_t, accept_if, *_ in rows:
            if est != label:
                continue
            assert accept_if == "score >= t"
            assert cal.threshold(cls, float(target)) == pytest.approx(float(score_t), rel=1e-12, abs=1e-12)
            assert cal.distance_threshold(cls, float(target)) == pytest.approx(float(tau), rel=1e-12, abs=1e-12)
    # the same scores given flat, with the class of each
    classes = np.concatenate([[c] * v.size for c, v in per_class.items()])
    flat = calibrate.fit(np.concatenate(list(per_class.values())), classes, estimator="auto", impostors_only=True)
    mapped = calibrate.fit(per_class, impostors_only=True)
    assert flat.thresholds(0.01) == pytest.approx(mapped.thresholds(0.01), rel=1e-12)


def test_the_documented_form_gives_the_recipes_thresholds(recipe_run):
    """calibrate.fit(scores, classes, real=real) on every comparison of the recipe's training file, genuine ones
    included (issue 41): the genuine ones are left out of the fit and given to auto, as the run gives them."""
    out, _ = recipe_run
    values, probes, gallery_ = make_scores(seed=31, n_classes=15, probes_per_class=10)  # the fixture's training file
    scores = values.ravel()
    classes = np.tile(gallery_, len(probes))
    real = np.repeat(probes, len(gallery_))
    assert (classes == real).sum() == 150  # genuine comparisons among them
    rows = [line.split(",") for line in (out / "thresholds.csv").read_text().splitlines()[1:]]
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)  # the documented form is not told to say more
        for label in ("auto", "class-interp"):
            cal = calibrate.fit(scores, classes, real=real, kind="similarity", estimator=label)
            checked = 0
            for est, cls, target, tau, score_t, *_ in rows:
                if est == label:
                    assert cal.threshold(cls, float(target)) == pytest.approx(float(score_t), rel=1e-12, abs=1e-12)
                    assert cal.distance_threshold(cls, float(target)) == pytest.approx(float(tau), rel=1e-12, abs=1e-12)
                    checked += 1
            assert checked == 15 * len(TARGETS)


def test_a_runs_calibration_loads_and_answers_in_score_units(recipe_run):
    out, _ = recipe_run
    cal = calibrate.load(out / "calibration.json", "auto")
    rows = [line.split(",") for line in (out / "thresholds.csv").read_text().splitlines()[1:] if line.startswith("auto,")]
    for _, cls, target, _, score_t, *_ in rows:
        assert cal.threshold(cls, float(target)) == pytest.approx(float(score_t), rel=1e-12, abs=1e-12)
    doc = json.loads((out / "calibration.json").read_text())
    assert doc["version"] == 2 and doc["kind"] == "similarity" and doc["accept_if"] == "score >= t"
    assert doc["transform"]["plugin"] == "similarity-to-distance" and "upper" in doc["transform"]["state"]
    assert doc["targets"] == list(TARGETS) and doc["fingerprint"].startswith("sha256:")
    assert {"calibrate-thresholds", "numpy", "scipy"} <= set(doc["versions"])
    with pytest.raises(CalibrationError, match="holds estimators auto, class-interp; name the one to load"):
        calibrate.load(out / "calibration.json")


@pytest.mark.parametrize("kind, transform", [("similarity", None), ("similarity", {"plugin": "similarity-to-distance",
                                                                                   "method": "neg-log"}),
                                             ("distance", None), ("distance", "neg-log-complement")])
def test_a_score_threshold_accepts_exactly_what_the_distance_threshold_accepts(kind, transform):
    rng = np.random.default_rng(3)
    per = {f"c{i}": rng.uniform(0.01, 0.99, 200) for i in range(12)}
    cal = calibrate.fit(per, kind=kind, estimator="class-interp", transform=transform, impostors_only=True)
    for cls in ("c0", "c5"):
        for e in (0.05, 0.01):
            t, tau = cal.threshold(cls, e), cal.distance_threshold(cls, e)
            # the threshold itself, its neighbours at one float step, and the training scores (ties included)
            probe = np.concatenate([[t, np.nextafter(t, 0), np.nextafter(t, 1)], per[cls], rng.uniform(0, 1, 500)])
            decided = cal.accept(cls, probe, e)
            by_distance = cal.transform._apply(probe, kind) <= tau
            np.testing.assert_array_equal(decided, by_distance)
            assert decided[0], "the threshold score itself is accepted"
            expected = probe >= t if kind == "similarity" else probe <= t
            np.testing.assert_array_equal(decided, expected)


def test_saved_calibration_answers_from_a_fresh_process(tmp_path):
    cal = calibrate.fit(gallery(), kind="similarity", estimator="auto", impostors_only=True)
    path = cal.save(tmp_path / "face.json")
    code = (f"import calibrate; c = calibrate.load({str(path)!r}); "
            "print(repr(c.threshold('c07', 0.001))); print(c.accept(['c07', 'c07'], [99.0, 1.0], 0.001).tolist())")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    first, second = done.stdout.splitlines()
    assert float(first) == cal.threshold("c07", 0.001)  # repr round trip of the same computation
    assert second == "[True, False]"


def test_enroll_class_by_class(tmp_path):
    per = gallery(seed=5, n_classes=60)
    names = list(per)
    for estimator, params, tolerance in (("class-interp", {}, 0.0), ("ncx2-grid", {"dim": [3, 8], "sigma": {"steps": 20}}, 1e-9),
                                         ("auto", {}, 0.05), ("generic-interp", {}, 0.05)):
        full = calibrate.fit(per, estimator=estimator, **params, impostors_only=True)
        part = calibrate.fit({n: per[n] for n in names[:30]}, estimator=estimator, **params, impostors_only=True)
        for n in names[30:]:
            part.enroll(n, per[n])
        assert part.classes == full.classes
        for e in (0.005, 0.001):
            a = np.array(list(full.thresholds(e).values()))
            b = np.array(list(part.thresholds(e).values()))
            # per-class estimators: exactly a full fit; pooled ones (auto's pooled shape, generic-interp's
            # pool) keep what the first 30 classes gave: within 5% in score units here, with half the
            # gallery enrolled afterwards
            np.testing.assert_allclose(b, a, rtol=tolerance, atol=0, err_msg=estimator)
        if estimator == "class-interp":  # the classes fitted first are untouched, and replacing one works
            before = part.threshold("c00", 0.005)
            part.enroll("c01", per["c01"][:100])
            assert part.threshold("c00", 0.005) == before and len(part) == 60
            from calibrate_builtins.estimators.interp import interp_threshold

            own = np.sort(part.transform._apply(per["c01"][:100], "similarity"))
            assert part.distance_threshold("c01", 0.005) == interp_threshold(own, np.array([0.005]))[0]
    cal = calibrate.fit(per, estimator="gpd-tail", impostors_only=True)
    with pytest.raises(CalibrateError, match="cannot add one class.*fit again"):
        cal.enroll("new", per["c00"])


def test_enrolled_calibration_survives_save_and_load(tmp_path):
    cal = calibrate.fit(gallery(seed=6), estimator="auto", impostors_only=True)
    cal.enroll("newcomer", gallery(seed=7)["c00"])
    again = calibrate.load(cal.save(tmp_path / "c.json"))
    assert again.threshold("newcomer", 0.001) == cal.threshold("newcomer", 0.001)


def test_questions_it_cannot_answer_are_clear_errors():
    cal = calibrate.fit(gallery(n_classes=5), estimator="class-interp", impostors_only=True)
    with pytest.raises(CalibrationError, match="class 'zed' is not enrolled"):
        cal.threshold("zed", 0.01)
    with pytest.raises(CalibrationError, match="class 'zed' is not enrolled"):
        cal.accept(["c00", "zed"], [50.0, 50.0], 0.01)
    for bad in (0, 1, -0.1, 1.5, float("nan"), "x"):
        with pytest.raises(CalibrationError, match="is not in \\(0, 1\\)"):
            cal.threshold("c00", bad)
    with pytest.raises(CalibrationError, match="3 classes but 2 scores"):
        cal.accept(["c00", "c01", "c02"], [1.0, 2.0], 0.01)
    with pytest.raises(CalibrationError, match="must be a finite number"):
        cal.accept("c00", [1.0, float("nan")], 0.01)
    assert cal.accept("c00", 99.0, 0.01) in (True, False)


def test_bad_training_arrays_are_clear_errors():
    with pytest.raises(DataError, match="score 1 is nan"):
        calibrate.fit({"a": [0.1, float("nan"), 0.3], "b": [0.2, 0.4, 0.5]}, impostors_only=True)
    with pytest.raises(DataError, match="3 scores but classes has shape"):
        calibrate.fit([0.1, 0.2, 0.3], ["a", "b"], impostors_only=True)
    with pytest.raises(CalibrateError, match="unknown estimator 'autoo'; did you mean 'auto'"):
        calibrate.fit({"a": [0.1, 0.2, 0.3]}, estimator="autoo", impostors_only=True)
    with pytest.raises(CalibrateError, match="has no parameter 'bogus'"):
        calibrate.fit({"a": [0.1, 0.2, 0.3]}, estimator="class-interp", bogus=1, impostors_only=True)
    with pytest.raises(CalibrateError, match="takes distance scores, but kind is 'similarity'"):
        calibrate.fit({"a": [0.1, 0.2, 0.3]}, transform="identity", impostors_only=True)


def test_artifacts_it_cannot_load_are_clear_errors(tmp_path):
    cal = calibrate.fit(gallery(n_classes=4), estimator="class-interp", impostors_only=True)
    doc = cal.to_dict()
    for change, message in ((lambda d: d.update(version=3), "version 3 is newer than this calibrate reads"),
                            (lambda d: d["transform"].update(plugin="warp"), "unknown transform 'warp'.*install the plugin"),
                            (lambda d: d["estimators"]["class-interp"].update(plugin="magic"),
                             "unknown estimator 'magic'.*install the plugin"),
                            (lambda d: d.update(format="other"), "not a calibrate calibration file")):
        bad = json.loads(json.dumps(doc))
        change(bad)
        (tmp_path / "bad.json").write_text(json.dumps(bad))
        with pytest.raises(CalibrationError, match=message):
            calibrate.load(tmp_path / "bad.json")
    (tmp_path / "cut.json").write_text(json.dumps(doc)[:200])
    with pytest.raises(CalibrationError, match="not a readable calibration file"):
        calibrate.load(tmp_path / "cut.json")
    assert "pickle" not in (tmp_path / "cut.json").read_text()


def test_cli_threshold_answers_in_score_units(tmp_path):
    from calibrate_test_helpers import invoke_cli

    cal = calibrate.fit(gallery(n_classes=6), estimator="class-interp", impostors_only=True)
    path = cal.save(tmp_path / "c.json")
    done = invoke_cli("threshold", str(path), "--class", "c03", "--fpr", "0.01", "--json")
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer["score_threshold"] == cal.threshold("c03", 0.01) and answer["accept_if"] == "score >= t"
    done = invoke_cli("threshold", str(path), "--class", "nobody", "--fpr", "0.01")
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "'nobody' is not enrolled" in done.stderr


def test_the_embedding_example_runs(capsys):
    # as `python examples/embed.py` runs it (as __main__), in this process: the script is about the API
    # it calls, and a second interpreter would only import numpy and scipy again
    import runpy
    from pathlib import Path

    example = Path(__file__).resolve().parents[1] / "examples" / "embed.py"
    runpy.run_path(str(example), run_name="__main__")
    stdout = capsys.readouterr().out
    assert "newcomer enrolled: accept when score >=" in stdout and "1,000,000 decisions" in stdout
    assert "predicted FPR of these thresholds (90%)" in stdout and "auto-c95: impostors accepted" in stdout
    assert "on class codes: 1,000,000 decisions" in stdout and "the same decisions: True" in stdout
    assert "without real=: calibrate.fit: the scores look like genuine and impostor comparisons mixed" in stdout


def test_cli_accept_decides_a_score_list_as_the_run_evaluated_it(tmp_path):
    """examples/bob-scores: the decisions `calibrate accept` writes for the eval file count exactly the
    false accepts and false rejects the run reported, and each is `score >= threshold`."""
    import csv
    from pathlib import Path

    from calibrate_test_helpers import invoke_cli

    example = Path(__file__).resolve().parents[1] / "examples" / "bob-scores"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = calibrate.run(example / "recipe.yaml", out=tmp_path / "run")
    done = invoke_cli("accept", str(tmp_path / "run" / "calibration.json"), str(example / "scores-eval"), "--fpr", "0.01",
                   "--estimator", "auto", "--missing", "-1", "--out", str(tmp_path / "decisions.csv"))
    assert done.returncode == 0, done.stderr
    with open(tmp_path / "decisions.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert all((r["accept"] == "1") == (float(r["score"]) >= float(r["threshold"])) for r in rows)
    impostor = [r for r in rows if r["claimed"] != r["real"]]
    genuine = [r for r in rows if r["claimed"] == r["real"]]
    at_1pct = next(t for t in result.results["auto"] if t.target_fpr == 0.01)
    assert len(impostor) == at_1pct.impostor_attempts
    assert sum(r["accept"] == "1" for r in impostor) == at_1pct.false_accepts
    assert sum(r["accept"] == "0" for r in genuine) / len(genuine) == pytest.approx(at_1pct.fnr, abs=1e-12)
    done = invoke_cli("accept", str(tmp_path / "run" / "calibration.json"), str(example / "scores-eval"), "--fpr", "0.01",
                   "--out", str(tmp_path / "d2.csv"))
    assert done.returncode == 2 and "name the one to load" in done.stderr and not (tmp_path / "d2.csv").exists()


def test_acceptance_review_findings(tmp_path):
    """Found by an independent acceptance test: each is a clear error or a warning, never NaN."""
    rng = np.random.default_rng(9)
    per = {f"c{i}": rng.normal(0.3, 0.05, 200) for i in range(6)}
    # the fingerprint does not depend on the order of classes
    reversed_ = dict(reversed(list(per.items())))
    assert calibrate.fit(per, impostors_only=True).fingerprint == calibrate.fit(reversed_, impostors_only=True).fingerprint
    # enrolling scores above the fitted upper bound (mapped to distance 0) warns
    cal = calibrate.fit(per, estimator="class-interp", impostors_only=True)
    with pytest.warns(UserWarning, match="1 of 200 impostor scores lie beyond .* accepts more than a full fit"):
        cal.enroll("high", np.r_[0.99, rng.normal(0.3, 0.05, 199)])
    with pytest.raises(DataError, match="non-empty 1-D array"):
        cal.enroll("flat", [[0.1, 0.2]])
    with pytest.raises(CalibrationError, match="scores must be numbers"):
        cal.accept(["c0"], ["abc"], 0.01)
    # damaged artifacts: short arrays, NaN state, a version that is not a number
    doc = cal.to_dict()
    state = doc["estimators"]["class-interp"]["state"]
    for name, change in (("short", lambda d: d["estimators"]["class-interp"]["state"].update(values=state["values"][:50])),
                         ("nan", lambda d: d["transform"]["state"].update(upper=float("nan"))),
                         ("nanvalues", lambda d: d["estimators"]["class-interp"]["state"]["values"].__setitem__(0, float("nan"))),
                         ("strversion", lambda d: d.update(version="2"))):
        bad = json.loads(json.dumps(doc))
        change(bad)
        (tmp_path / f"{name}.json").write_text(json.dumps(bad))
        with pytest.raises(CalibrationError):
            calibrate.load(tmp_path / f"{name}.json")


def test_cli_accept_names_the_line_of_a_bad_score(tmp_path):
    from calibrate_test_helpers import invoke_cli

    path = calibrate.fit({"p001": np.linspace(0, 1, 50), "p002": np.linspace(0, 1, 50)},
                         impostors_only=True).save(tmp_path / "c.json")
    (tmp_path / "nan.txt").write_text("p001 p002 x 0.5\np001 p002 y nan\n")
    done = invoke_cli("accept", str(path), str(tmp_path / "nan.txt"), "--fpr", "0.01", "--out", str(tmp_path / "d.csv"))
    assert done.returncode == 2 and "nan.txt, line 2: NaN or infinite score" in done.stderr
    assert done.stderr.count("\n") == 1 and not (tmp_path / "d.csv").exists()
