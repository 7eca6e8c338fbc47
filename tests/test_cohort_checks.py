"""Cohorts checked where their statistics are made, where a calibration is loaded, and where a cohort is
given to a saved calibration (issue 31, items 3 and 7):

* a cohort row without spread (all equal, or equal up to a rounding residue), a negative or non-finite
  spread, and statistics that overflow are refused naming the class or probe, never accepted;
* scores near 1e300 normalise as their unscaled selves;
* a saved normalisation records the cohort it was fitted with, and a cohort given at accept/evaluate/enroll
  that does not match it (2 members, negated, rescaled, other names) is one line, exit 2;
* an enrolled-side-only normaliser answers threshold() in score units, deciding as accept does.
"""

from __future__ import annotations

import csv
import json
import re
import shutil
import warnings
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

import calibrate
from calibrate.contract.base import Normalizer
from calibrate.normalisation.cohort import (FittedNormalization, attempt_statistics, row_moments, rows_drift, rows_mismatch,
                              side_record, statistics_problem, to_distance)
from calibrate.errors import CalibrateError, CalibrationError, DataError
from calibrate_test_helpers import DATA, invoke_cli, quiet_run, write_recipe
from cohort_lists import lists_recipe, refused_on_load, tnorm_rows, write_lists

BOB = Path(__file__).resolve().parents[1] / "examples" / "bob-scores"


def _one_error_line(out) -> str:
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert out.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), out.stderr
    return lines[0]


def _rewrite(path: Path, edit) -> Path:
    """Each 4-column line of ``path`` through ``edit(fields) -> fields or None`` (None drops the line)."""
    out = []
    for line in path.read_text().splitlines():
        fields = edit(line.split())
        if fields is not None:
            out.append(" ".join(fields) + "\n")
    path.write_text("".join(out))
    return path


# ---- where statistics are made: no spread, a rounding residue, overflow -----------------------------------

def test_a_constant_tnorm_line_is_refused_where_it_was_accepted(tmp_path):
    """The audit's case: the T-norm lines of probe subj03/eval_1 all 0.3 gave std 5.6e-17, z -> -inf and its 30
    attempts accepted (14/30 against 5/30), exit 0; every line constant gave 43% FPR at a 5% target."""
    for name in ("scores-dev", "scores-eval", "cohort-tnorm"):
        shutil.copy(BOB / name, tmp_path / name)
    recipe = write_recipe(tmp_path / "r.yaml", {
        "version": 1, "data": {"plugin": "score-list", "train": "scores-dev", "test": "scores-eval",
                               "kind": "similarity", "missing": -1, "cohort_probes": "cohort-tnorm"},
        "normalizer": {"plugin": "tnorm"}, "estimators": [{"plugin": "generic-interp"}],
        "evaluation": {"targets": [0.05], "prediction": False}, "output": {"dir": str(tmp_path / "out"), "plots": False}})
    good = (tmp_path / "cohort-tnorm").read_text()
    _rewrite(tmp_path / "cohort-tnorm", lambda f: f[:3] + ["0.3"] if f[2] == "subj03/eval_1" else f)
    line = _one_error_line(invoke_cli("run", str(recipe), "-q"))
    # the built-ins' statistics are exact: equal distances have a std of 0, not a rounding residue
    assert "cohort-tnorm: probe 'subj03/eval_1'" in line and "without spread (std 0, 0)" in line
    assert not (tmp_path / "out" / "thresholds.csv").exists()
    (tmp_path / "cohort-tnorm").write_text(good)
    _rewrite(tmp_path / "cohort-tnorm", lambda f: f[:3] + ["0.25"])
    with pytest.raises(CalibrateError, match="without spread"):
        quiet_run(recipe)


def _snorm(n: int = 30, **kw) -> Normalizer:
    from calibrate_builtins.normalizers.snorm import SNorm

    return SNorm(**kw)


def test_a_rounding_residue_is_no_spread_but_a_fine_real_one_is():
    n = _snorm()
    rows = np.full((1, 47), 0.1)
    assert 0 < float(rows.std()) < 1e-15  # numpy's residue: its mean of 47 x 0.1 is not 0.1
    with pytest.raises(DataError, match=re.escape("cohort row 0 has cohort distances without spread (std 0, 0); "
                                                  "snorm divides by it")):  # the built-ins' exact std
        attempt_statistics(n, rows, np.ones(rows.shape, bool), np.zeros(1, np.int64))
    rows[0, 5] = np.nextafter(0.1, 1.0)  # one step apart: a std of 2e-18, rounding, not a spread
    with pytest.raises(DataError, match=re.escape("cohort row 0 has cohort distances without spread (std 2.003e-18, "
                                                  "at most 1e-09 x 0.1: rounding, not spread); snorm divides by it")):
        attempt_statistics(n, rows, np.ones(rows.shape, bool), np.zeros(1, np.int64))
    with pytest.raises(DataError, match=r"std 0, 0\)"):
        attempt_statistics(n, np.zeros((1, 5)), np.ones((1, 5), bool), np.zeros(1, np.int64))
    fine = 1000.0 + np.arange(6) * 1e-4  # scores of 4 decimals near 1000: relative spread 2e-7
    stats = attempt_statistics(n, fine[None, :], np.ones((1, 6), bool), np.zeros(1, np.int64))
    assert stats["std"][0] == pytest.approx(np.std(np.arange(6) * 1e-4), rel=1e-6)
    # leaving one member out of a row that differs only there leaves no spread: that attempt is refused by name
    row = np.array([[0.4, 0.4, 0.4, 0.9]])
    with pytest.raises(DataError, match="class 'c7' has cohort distances without spread"):
        attempt_statistics(n, row, np.ones(row.shape, bool), np.zeros(2, np.int64), np.array([-1, 3]),
                           describe=lambda r: "class 'c7'")
    assert statistics_problem(n, {"mean": np.array([0.5, 0.5]), "std": np.array([0.1, -1.0])}) == (1, "std", -1.0,
                                                                                                    "negative")
    assert statistics_problem(n, {"mean": np.array([np.inf]), "std": np.array([1.0])}) == (0, "mean", np.inf,
                                                                                           "not finite")


class _OverflowingNorm(Normalizer):
    """A third party's normaliser whose variance overflows for scores near 1e300 (no scaling first)."""

    sides = ("probe",)

    def _statistics(self, cohort):
        return {"mean": cohort.mean(axis=1), "std": np.sqrt((cohort ** 2).mean(axis=1) - cohort.mean(axis=1) ** 2)}

    def _normalize(self, distances, enrolled, probe):
        return (distances - probe["mean"]) / probe["std"]


def test_statistics_that_overflow_are_refused_and_the_builtins_do_not_overflow():
    rows = np.sort(np.random.default_rng(1).gamma(3, 0.5, (4, 30)), axis=1) * 1e300
    with np.errstate(over="ignore", invalid="ignore"), pytest.raises(DataError, match=r"whose std is (nan|inf) \(not "
                                                                                       r"finite\).*rescale the scores"):
        attempt_statistics(_OverflowingNorm(), rows, np.ones(rows.shape, bool), np.arange(4))
    big = _snorm().statistics(rows)
    small = _snorm().statistics(rows / 1e300)
    assert np.all(np.isfinite(big["std"]))
    np.testing.assert_allclose(big["mean"] / 1e300, small["mean"], rtol=1e-12)
    np.testing.assert_allclose(big["std"] / 1e300, small["std"], rtol=1e-12)
    # every row's mean and variance are the exact ones rounded once (numpy's pairwise sums: within a few ulps)
    plain = np.sort(np.random.default_rng(2).gamma(3, 0.5, (3, 17)), axis=1)
    got = _snorm().statistics(plain)
    for row, mean, std in zip(plain, got["mean"], got["std"]):
        exact = sum(map(Fraction, row.tolist())) / row.size
        assert mean == float(exact) and std == np.sqrt(float(sum((Fraction(v) - exact) ** 2 for v in row.tolist())
                                                             / row.size))
    np.testing.assert_allclose(got["mean"], plain.mean(axis=1), rtol=1e-15)
    np.testing.assert_allclose(got["std"], plain.std(axis=1), rtol=1e-14)


def test_scores_near_1e300_normalise_as_their_unscaled_selves(tmp_path):
    """The audit's case: snorm on scores near 1e300 overflowed the std to inf and accepted everything (FPR 100%)."""
    results = {}
    for scale in (1.0, 1e300):
        folder = write_lists(tmp_path / f"x{scale:g}")
        for name in ("scores-dev", "scores-eval", "cohort-znorm", "cohort-tnorm"):
            _rewrite(folder / name, lambda f: f[:3] + [repr(float(f[3]) * scale)])
        results[scale] = quiet_run(lists_recipe(folder, "snorm")).results["class-interp"][0]
    plain, huge = results[1.0], results[1e300]
    assert huge.false_accepts == plain.false_accepts and huge.fnr == plain.fnr
    assert plain.fpr < 0.1


# ---- a saved calibration records its cohort; a cohort given later is checked against it -----------------

@pytest.fixture(scope="module")
def snorm_run(tmp_path_factory):
    folder = write_lists(tmp_path_factory.mktemp("snorm"))
    result = quiet_run(lists_recipe(folder, "snorm"))
    return folder, result


def _eval_attempts(folder: Path):
    """(claimed, score, probe, genuine) of scores-eval, and each attempt's T-norm row (the file's, in order)."""
    lines = [line.split() for line in (folder / "scores-eval").read_text().splitlines()]
    tnorm = tnorm_rows(folder / "cohort-tnorm")
    claimed = np.array([c for c, _, _, _ in lines])
    scores = np.array([float(s) for _, _, _, s in lines])
    genuine = np.array([c == r for c, r, _, _ in lines])
    rows = [[s for _, s in tnorm[p]] for _, _, p, _ in lines]
    return claimed, scores, genuine, rows


def test_the_record_is_saved_and_a_same_cohort_evaluation_passes(snorm_run):
    folder, result = snorm_run
    doc = json.loads((folder / "out" / "calibration.json").read_text())
    probe = doc["normalizer"]["cohort"]["probe"]
    assert probe["members"] == 12 and probe["lengths"] == [12, 12] and probe["rows"] == 34
    assert doc["normalizer"]["cohort"]["enrolled"]["members"] == 24  # the Z-probes
    cal = calibrate.load(folder / "out" / "calibration.json")
    claimed, scores, genuine, rows = _eval_attempts(folder)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning either
        accepted = cal.accept(claimed, scores, 0.05, probe_cohort_scores=rows)
    ran = result.results["class-interp"][0]
    assert int(accepted[~genuine].sum()) == ran.false_accepts
    for i in range(0, len(rows), 7):  # one attempt at a time, as a deployment asks
        assert cal.accept(claimed[i], scores[i], 0.05, probe_cohort_scores=rows[i]) == accepted[i]


def test_accept_refuses_a_cohort_unlike_the_fitted_one(snorm_run):
    """The audit's case: a 2-member or a negated cohort at accept gave 17% / 41% FPR at a 5% target."""
    folder, _ = snorm_run
    cal = calibrate.load(folder / "out")
    claimed, scores, _, rows = _eval_attempts(folder)
    cases = {"gives 2 cohort score(s), but the cohort the calibration was fitted with (12 members)":
             [r[:2] for r in rows],
             "not like those the calibration was fitted with": [[-s for s in r] for r in rows],
             "like those the calibration was fitted with": [[100 * s for s in r] for r in rows],
             "do not spread like": [[0.3 + 0.01 * (s - 0.3) for s in r] for r in rows]}
    for message, hostile in cases.items():
        with pytest.raises(CalibrationError, match=re.escape(message)) as err:
            cal.accept(claimed, scores, 0.05, probe_cohort_scores=hostile)
        assert "\n" not in str(err.value)
    with pytest.raises(CalibrationError, match="attempt 1 gives 2 cohort score"):
        cal.accept(claimed[0], scores[0], 0.05, probe_cohort_scores=rows[0][:2])


def test_one_probes_cohort_rows_unlike_the_fitted_cohort_are_refused_among_many(snorm_run, tmp_path):
    """The first probe's T-norm lines shifted by -1 among the 124 attempts' rows: the median of the rows hid them, and
    all 9 of its impostor attempts were accepted (exit 0); each row is now checked, and the attempt named."""
    folder, _ = snorm_run
    cal = calibrate.load(folder / "out")
    claimed, scores, _, rows = _eval_attempts(folder)
    first = (folder / "scores-eval").read_text().split()[2]
    hostile = [[s - 1.0 for s in r] if i < 10 else r for i, r in enumerate(rows)]  # the first probe's 10 attempts
    with pytest.raises(CalibrationError, match=re.escape("probe_cohort_scores: attempt 1's cohort distances are not "
                                                         "like those the calibration was fitted with")):
        cal.accept(claimed, scores, 0.05, probe_cohort_scores=hostile)
    path = tmp_path / "tnorm"
    shutil.copy(folder / "cohort-tnorm", path)
    _rewrite(path, lambda f: f[:3] + [repr(float(f[3]) - 1.0)] if f[2] == first else f)
    line = _one_error_line(invoke_cli("accept", str(folder / "out"), str(folder / "scores-eval"), "--fpr", "0.05",
                                      "--out", str(tmp_path / "d.csv"), "--cohort", str(path)))
    assert f"--cohort {path}: attempt 1's cohort distances are not like" in line and not (tmp_path / "d.csv").exists()


def test_a_cohort_shifted_or_squeezed_as_a_whole_within_the_bounds_is_noted(snorm_run, tmp_path):
    """Every T-norm line shifted by -0.15 passes the bounds (each row within the fitted range widened by the range)
    and gave a 24% FPR at a 5% target, silently; spreads squeezed to 0.6 a 7.4% FPR. Most rows beyond the fitted
    rows' range is now a note (a warning), on the command line once."""
    folder, _ = snorm_run
    cal = calibrate.load(folder / "out")
    claimed, scores, _, rows = _eval_attempts(folder)
    cases = {"have a mean above the largest of the 34 rows": [[s - 0.15 for s in r] for r in rows],
             "have a spread below the smallest of the 34 rows": [[np.mean(r) + 0.6 * (s - np.mean(r)) for s in r]
                                                                 for r in rows]}
    for message, drifted in cases.items():
        with pytest.warns(UserWarning, match=message):
            cal.accept(claimed, scores, 0.05, probe_cohort_scores=drifted)
    path = tmp_path / "tnorm"
    shutil.copy(folder / "cohort-tnorm", path)
    _rewrite(path, lambda f: f[:3] + [repr(float(f[3]) - 0.15)])
    out = invoke_cli("accept", str(folder / "out"), str(folder / "scores-eval"), "--fpr", "0.05", "--out",
                     str(tmp_path / "d.csv"), "--cohort", str(path))
    assert out.returncode == 0 and out.stderr.count("have a mean above the largest") == 1, out.stderr
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a few rows alone say nothing
        cal.accept(claimed[:7], scores[:7], 0.05, probe_cohort_scores=cases["have a mean above the largest of the 34 "
                                                                              "rows"][:7])


def test_the_command_line_refuses_a_cohort_file_unlike_the_fitted_one(snorm_run, tmp_path):
    folder, _ = snorm_run
    good = folder / "cohort-tnorm"

    def hostile(name: str, edit) -> Path:
        path = tmp_path / name
        shutil.copy(good, path)
        return _rewrite(path, edit)

    files = {
        "names 2 cohort member(s), but the calibration was fitted with a cohort of 12":
            hostile("two", lambda f: f if f[0] in ("t00", "t01") else None),
        "not like those the calibration was fitted with": hostile("negated", lambda f: f[:3] + [f"-{f[3]}"]),
        "names 12 cohort members, but not those the calibration was fitted with":
            hostile("renamed", lambda f: ["u" + f[0]] + f[1:]),
    }
    for message, path in files.items():
        for command in (["accept", str(folder / "out"), str(folder / "scores-eval"), "--fpr", "0.05", "--out",
                         str(tmp_path / "d.csv")], ["evaluate", str(folder / "out"), str(folder / "scores-eval")]):
            line = _one_error_line(invoke_cli(*command, "--cohort", str(path)))
            assert f"--cohort {path}" in line and message in line, line
            assert not (tmp_path / "d.csv").exists()
    out = invoke_cli("evaluate", str(folder / "out"), str(folder / "scores-eval"), "--cohort", str(good))
    assert out.returncode == 0, out.stderr


def test_a_calibration_saved_before_the_record_decides_as_before_with_a_warning(snorm_run, tmp_path):
    folder, _ = snorm_run
    doc = json.loads((folder / "out" / "calibration.json").read_text())
    del doc["normalizer"]["cohort"]
    del doc["digest"]  # calibrations from before the record have no digest either
    old = tmp_path / "old.json"
    old.write_text(json.dumps(doc))
    claimed, scores, _, rows = _eval_attempts(folder)
    want = calibrate.load(folder / "out").accept(claimed, scores, 0.05, probe_cohort_scores=rows)
    with pytest.warns(UserWarning, match="holds no content digest"):
        cal = calibrate.load(old)
    with pytest.warns(UserWarning, match="saved before calibrate recorded the cohort its normaliser was fitted with"):
        got = cal.accept(claimed, scores, 0.05, probe_cohort_scores=rows)
    assert np.array_equal(got, want)
    out = invoke_cli("accept", str(old), str(folder / "scores-eval"), "--fpr", "0.05", "--out", str(tmp_path / "d.csv"),
                     "--cohort", str(folder / "cohort-tnorm"))
    assert out.returncode == 0 and "note: probe_cohort_scores: this calibration was saved before" in out.stderr
    decided = np.array([row["accept"] == "1" for row in csv.DictReader(open(tmp_path / "d.csv"))])
    assert np.array_equal(decided, want)


def test_enroll_checks_the_cohort_scores_against_the_fitted_cohort(snorm_run):
    folder, _ = snorm_run
    cal = calibrate.load(folder / "out")
    znorm = [line.split() for line in (folder / "cohort-znorm").read_text().splitlines()]
    cohort = [float(s) for c, _, _, s in znorm if c == "c03"]
    impostors = [0.2, 0.25, 0.3, 0.35, 0.28]
    probe_rows = [[0.3, 0.2, 0.25, 0.33, 0.28, 0.31, 0.27, 0.22, 0.36, 0.3, 0.29, 0.26]] * 5
    with pytest.raises(CalibrationError, match="class 'new': cohort_scores: attempt 1 gives 3 cohort score"):
        cal.enroll("new", impostors, cohort_scores=cohort[:3], impostor_cohort_scores=probe_rows)
    with pytest.raises(CalibrationError, match="impostor_cohort_scores: attempt 1 gives 2 cohort score"):
        cal.enroll("new", impostors, cohort_scores=cohort, impostor_cohort_scores=[r[:2] for r in probe_rows])
    cal.enroll("new", impostors, cohort_scores=cohort, impostor_cohort_scores=probe_rows)
    assert "new" in cal and cal.normalization.cohort is not None


# ---- where a calibration is loaded -----------------------------------------------------------------------

def test_loading_refuses_spreads_and_records_that_cannot_be_right(snorm_run, tmp_path):
    folder, _ = snorm_run
    good = json.loads((folder / "out" / "calibration.json").read_text())
    mean = good["normalizer"]["statistics"]["mean"][1]
    damages = {
        "is -1 (negative)": lambda n: n["statistics"]["std"].__setitem__(1, -1.0),
        "is 0 (0)": lambda n: n["statistics"]["std"].__setitem__(1, 0.0),
        "is 1e-300 (at most 1e-09": lambda n: n["statistics"]["std"].__setitem__(1, 1e-300),
        "rounding, not spread": lambda n: n["statistics"]["std"].__setitem__(1, mean * 1e-16),
        "normalizer.cohort.probe.lengths must be": lambda n: n["cohort"]["probe"].__setitem__("lengths", [0, 12]),
        "normalizer.cohort.probe.names_sha256 must": lambda n: n["cohort"]["probe"].__setitem__("names_sha256", "x"),
        "normalizer.cohort.enrolled.means must": lambda n: n["cohort"]["enrolled"].__setitem__("means", [1, 0, 2]),
        "normalizer.cohort.probe.spreads must": lambda n: n["cohort"]["probe"].__setitem__("spreads", [-1, 0, 2]),
        "normalizer.cohort.probe.members must": lambda n: n["cohort"]["probe"].__setitem__("members", True),
        "normalizer.cohort must map": lambda n: n["cohort"].__setitem__("neither", {}),
        "normalizer.cohort describes the sides ['probe']": lambda n: n["cohort"].pop("enrolled"),
    }
    for text, message in refused_on_load(good, damages, tmp_path).items():
        if text.startswith("is ") or "rounding" in text:
            assert "normalizer.statistics['std'] of class 'c01' is" in message
    line = _one_error_line(invoke_cli("threshold", str(tmp_path / "bad.json"), "--class", "c01", "--fpr", "0.05"))
    assert "bad.json" in line


# ---- item 7: an enrolled-side-only normaliser has score thresholds ------------------------------------------

def test_znorm_answers_threshold_in_score_units_deciding_as_accept_does(tmp_path):
    folder = write_lists(tmp_path)
    quiet_run(lists_recipe(folder, "znorm", sides=("enrolled",), estimators=({"plugin": "class-interp"},
                                                                         {"plugin": "generic-interp"})))
    for label in ("class-interp", "generic-interp"):
        cal = calibrate.load(folder / "out", label)
        for target in (0.05, 0.1):
            table = cal.thresholds(target)
            for cls, t in table.items():
                assert cal.threshold(cls, target) == t
                near = np.array([np.nextafter(t, -np.inf), t, np.nextafter(t, np.inf)])
                grid = np.concatenate([near, t + np.linspace(-0.2, 0.2, 81)])
                assert np.array_equal(cal.accept(cls, grid, target), grid >= t), (label, cls)
                assert cal.accept(cls, near, target).tolist() == [False, True, True]
                # decisions on class codes: the score thresholds, deciding as accept does
                code = cal.codes([cls])[0]
                decide = cal.decider(target)
                assert decide.thresholds[code] == t
                assert np.array_equal(decide(np.full(grid.size, code), grid), cal.accept(cls, grid, target))
    out = invoke_cli("threshold", str(folder / "out"), "--class", "c02", "--fpr", "0.05", "--estimator", "class-interp")
    assert out.returncode == 0, out.stderr
    t = calibrate.load(folder / "out", "class-interp").threshold("c02", 0.05)
    assert f"accept if score >= {t!r} (the znorm-normalised score z <=" in out.stdout
    doc = json.loads(invoke_cli("threshold", str(folder / "out"), "--class", "c02", "--fpr", "0.05", "--estimator",
                                "class-interp", "--json").stdout)
    assert doc["score_threshold"] == t and doc["score_accept_if"] == "score >= t"
    cal = calibrate.load(folder / "out", "class-interp")
    cal.transform._inverse = lambda distances, kind: None  # a transform without an inverse: z only
    with pytest.raises(CalibrationError, match=re.escape("has no inverse, so thresholds exist in distance units "
                                                         "only: use normalised_threshold() (z units)")):
        cal.threshold("c02", 0.05)
    assert cal.normalised_threshold("c02", 0.05) < 0


def test_a_normaliser_reading_the_probe_still_has_no_score_threshold(snorm_run):
    folder, _ = snorm_run
    cal = calibrate.load(folder / "out")
    with pytest.raises(CalibrationError, match=re.escape("snorm, which reads the probe's cohort scores: a decision "
                                                         "depends on them, so no single score threshold exists")):
        cal.threshold("c01", 0.05)
    out = invoke_cli("threshold", str(folder / "out"), "--class", "c01", "--fpr", "0.05", "--json")
    assert out.returncode == 0 and json.loads(out.stdout)["score_threshold"] is None
    with pytest.raises(CalibrationError, match=re.escape("snorm, which reads the probe's cohort scores: a decision "
                                                         "depends on them, so no threshold per class code exists; "
                                                         "decide with accept(classes, scores, target_fpr, "
                                                         "probe_cohort_scores=...)")):
        cal.decider(0.05)


class _LogNorm(Normalizer):
    """A third party's enrolled-side-only normaliser that is not affine: log(d) less the log of the mean."""

    sides = ("enrolled",)
    spreads = ()

    def _statistics(self, cohort):
        return {"mean": cohort.mean(axis=1)}

    def _normalize(self, distances, enrolled, probe):
        with np.errstate(divide="ignore"):
            return 3.0 * (np.log(distances) - np.log(enrolled["mean"]))


def test_the_distance_threshold_of_any_monotone_enrolled_side_normaliser_is_exact():
    fitted = FittedNormalization(_LogNorm(), "lognorm", {}, ("a", "b", "c", "d"),
                                 {"mean": np.array([0.5, 1.0, 2.0, 1e-3])})
    tau = np.array([0.2, 1.0, 5.0, 1e-310])  # the last is below exp(-700): nothing is accepted
    d_star = fitted.distance_thresholds(tau)
    assert np.all(np.isfinite(d_star[:3])) and d_star[3] == -np.inf
    for k in range(4):
        d = d_star[k]
        near = [d, np.nextafter(d, np.inf), np.nextafter(d, 0)] if np.isfinite(d) else []
        probe = np.array(near + [0.0, 5e-324, 1e-3, 0.3, 10.0, 1e300])
        with np.errstate(divide="ignore"):
            z = fitted.normalizer.normalize(probe, fitted.class_statistics(np.full(probe.size, k)), None)
        accepted = to_distance(z) <= tau[k]
        assert np.array_equal(accepted, probe <= d), (k, d)
    snorm = FittedNormalization(_snorm(), "snorm", {}, ("a",), {"mean": np.array([1.0]), "std": np.array([1.0])})
    with pytest.raises(DataError, match="reads the probe's cohort scores"):
        snorm.distance_thresholds(np.array([1.0]))


# ---- the conformance kit: a spread left undeclared ----------------------------------------------------------

class _UndeclaredSigma(Normalizer):
    sides = ("probe",)

    def _statistics(self, cohort):
        return {"m": cohort.mean(axis=1), "sigma": cohort.std(axis=1)}

    def _normalize(self, distances, enrolled, probe):
        with np.errstate(divide="ignore", invalid="ignore"):
            return (distances - probe["m"]) / probe["sigma"]


class _DeclaredSigma(_UndeclaredSigma):
    spreads = ("sigma",)


class _MisnamedSpread(_UndeclaredSigma):
    spreads = ("scale",)


class _NoisySigma(_UndeclaredSigma):
    """Its spread is never 0: a constant cohort gives a rounding-noise sigma and a huge, finite z."""

    def _statistics(self, cohort):
        return {"m": cohort.mean(axis=1), "sigma": cohort.std(axis=1) + 1e-12 * cohort.mean(axis=1)}


@pytest.mark.parametrize("factory, message", [
    # what was observed: sigma is 0 (not rounding noise), and the fix
    (_UndeclaredSigma, "on a cohort row of 40 distances all 0.1, normalize gave -inf from distance 0.05 (probe "
                       "statistics m 0.1, sigma 0): the statistics are finite (it declares none of them a spread, so "
                       "none was checked); undeclared-sigma's _normalize gives no number for these values: it divides by a "
                       "statistic that is 0 here and not named in its `spreads`"),
    (_NoisySigma, "normalises 0.05, 0.1, 0.2 to [-500000000000.0, 0.0, 1000000000000.0] (|z| above 1e6), from statistics "
                  "m 0.1, sigma 1e-13: it divides by a spread of rounding noise; name that statistic in `spreads`"),
    (_MisnamedSpread, "spreads names ['scale'], which _statistics does not return"),
    (_DeclaredSigma, None)])
def test_the_kit_catches_a_spread_left_undeclared(factory, message, tmp_path):
    from calibrate.testing import ComponentCase, checks_for

    check = next(c for c in checks_for("normalizer") if c.__name__ == "check_normalizer_refuses_constant_cohorts")
    case = ComponentCase("normalizer", factory, name="sigma")
    if message is None:
        check(case, tmp_path)
        return
    with pytest.raises(AssertionError, match=re.escape(message)):
        check(case, tmp_path)


class _LogGap(Normalizer):
    """z = log(d - mean + 1) / std: no number where d < mean - 1, however much spread the cohort has."""

    sides = ("enrolled",)

    def _statistics(self, cohort):
        return {"mean": cohort.mean(axis=1), "std": cohort.std(axis=1)}

    def _normalize(self, distances, enrolled, probe):
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.log(distances - enrolled["mean"] + 1.0) / enrolled["std"]


NOT_SPREAD = ("the statistics are finite and the spreads it declares (std) passed the core's check, so this is not a "
              "cohort without spread; log-gap's _normalize gives no number for these values: it divides by a statistic "
              "that is 0 here and not named in its `spreads`, or computes something undefined here (a log or root of a "
              "negative, 0/0, inf - inf, an overflow)")


@pytest.mark.parametrize("name", ["check_normalizer_monotone", "check_normalizer_reproducible_after_saving"])
def test_a_z_that_is_no_number_is_reported_as_observed_not_blamed_on_a_cohort_without_spread(name, tmp_path):
    """The kit's cohorts have spread: its message (and the core's, which the kit shows) says what it saw."""
    from calibrate.testing import ComponentCase, checks_for

    check = next(c for c in checks_for("normalizer") if c.__name__ == name)
    with pytest.raises((AssertionError, DataError)) as err:
        check(ComponentCase("normalizer", _LogGap, name="log-gap"), tmp_path)
    text = str(err.value)
    assert re.search(r"gave nan from distance [0-9.]+ \(class statistics mean [0-9.]+, std [0-9.]+\): ", text), text
    assert NOT_SPREAD in text and "all equal" not in text, text


def test_the_core_names_the_attempt_its_distance_and_statistics_when_z_is_no_number():
    fitted = FittedNormalization(_LogGap(), "log-gap", {}, ("a", "b"), {"mean": np.array([3.0, 1.0]),
                                                                           "std": np.array([0.5, 0.2])})
    with pytest.raises(DataError) as err:
        fitted.normalise(np.array([2.5, 0.5]), np.array([0, 0]))
    assert str(err.value) == ("the attempts: normalising attempt 2 gave nan from distance 0.5 (class statistics mean 3, "
                              "std 0.5): " + NOT_SPREAD)


# ---- real data: a same-cohort split of CFP passes; a negated, rescaled or 2-member cohort does not ----------

@pytest.mark.shared_data
def test_a_real_same_cohort_split_passes_and_hostile_cohorts_do_not():
    path = DATA / "cfp-frontal-dlib" / "cfp_frontal_dlib.npz"
    if not path.is_file():
        pytest.skip(f"{path} is absent (real data: ../shared/data, or the folder CALIBRATE_SHARED_DATA names)")
    with np.load(path) as z:
        x, y = z["X"].astype(np.float64), z["y"].astype(str)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    for seed in (0, 1):
        rng = np.random.default_rng(seed)
        ids = rng.permutation(np.unique(y))
        cohort, enrolled = ids[:100], set(ids[100:].tolist())
        first = {c: int(np.flatnonzero(y == c)[0]) for c in ids}
        probes = np.array([k for k in range(y.size) if y[k] in enrolled and k != first[y[k]]])
        s = x[probes] @ x[[first[c] for c in cohort]].T  # probes x cohort models, cosine similarity
        upper = float(s.max())
        fit = rng.random(probes.size) < 0.5
        usable = np.ones(s.shape, bool)
        record = side_record(upper - s[fit], usable[fit], cohort.tolist())
        held = np.flatnonzero(~fit)
        assert rows_mismatch(record, upper - s[held], usable[held], "held out") is None
        assert rows_drift(record, upper - s[held], usable[held]) is None
        assert all(rows_mismatch(record, upper - s[i:i + 1], usable[i:i + 1], "one") is None for i in held)
        assert all(rows_mismatch(record, upper + s[i:i + 1], usable[i:i + 1], "one") for i in held[:200])  # negated
        assert "not like" in rows_mismatch(record, upper - 100 * s[held], usable[held], "x100")
        assert "gives 2 cohort score" in rows_mismatch(record, upper - s[held][:, :2], usable[held][:, :2], "two")


def test_row_moments_are_those_of_numpy_and_do_not_overflow():
    rng = np.random.default_rng(4)
    values = rng.normal(3, 1, (5, 9))
    usable = rng.random(values.shape) < 0.7
    usable[0] = False
    count, mean, std = row_moments(values, usable)
    assert count[0] == 0 and np.isnan(mean[0])
    for r in range(1, 5):
        v = values[r, usable[r]]
        assert count[r] == v.size and mean[r] == pytest.approx(v.mean()) and std[r] == pytest.approx(v.std())
    _, big_mean, big_std = row_moments(values * 1e300, usable)
    np.testing.assert_allclose(big_std[1:] / 1e300, std[1:], rtol=1e-12)
