"""Normalisation at scale (issue 32): the built-ins' leave-one-out fast path gives the bits of the direct
computation (correctly rounded mean and variance), the kit catches a fast path that strays or depends on the
order of a row, a normaliser without one still works, and each probe's cohort row given once
(calibrate.ProbeCohorts, what `accept --cohort` reads) decides as the run did."""

from __future__ import annotations

import csv
from fractions import Fraction

import numpy as np
import pytest

import calibrate
from calibrate.contract.base import Normalizer
from calibrate.normalisation.cohort import ProbeCohorts, attempt_statistics, row_moments, row_moments_left_out
from calibrate.errors import CalibrationError, DataError
from calibrate.testing import ComponentCase
from calibrate.testing.normalizers import check_normalizer_left_out, check_normalizer_reproducible_after_saving
from calibrate_builtins.normalizers.asnorm import ASNorm
from calibrate_builtins.normalizers.snorm import SNorm
from calibrate_builtins.normalizers.znorm import ZNorm
from calibrate_test_helpers import invoke_cli, quiet_run
from test_normalised_runs import TARGETS, _matrix_lists, _matrix_recipe, _run_decisions

BUILTINS = [SNorm(), ZNorm(), ASNorm(), ASNorm(top_k=4)]


def _exact(values: list[float]) -> tuple[float, float]:
    """(mean, std) from the exact rational mean and variance, each rounded once."""
    mean = sum(map(Fraction, values)) / len(values)
    return float(mean), float(np.sqrt(float(sum((Fraction(v) - mean) ** 2 for v in values) / len(values))))


@pytest.mark.parametrize("normalizer", BUILTINS, ids=lambda n: f"{type(n).__name__}{getattr(n, 'top_k', '')}")
def test_the_fast_path_gives_the_bits_of_each_row_reduced_on_its_own(normalizer):
    rng = np.random.default_rng(5)
    # members in one binade (exact ties of the mean, about 1 in n), a few decimals, unusable members
    # (and rows mostly padding, packed first: a class's training impostors among all probes)
    for values, share in ((0.5 + rng.random((5, 61)) / 2, 0.9), (np.round(rng.gamma(3, 0.5, (5, 23)), 2), 0.9),
                          (rng.random((4, 7)) * 1e300, 0.9), (rng.gamma(3, 0.5, (6, 40)), 0.4)):
        usable = rng.random(values.shape) < share
        usable[:, :6] = True
        rows, left = np.nonzero(usable)
        rows, left = np.concatenate([rows, np.arange(values.shape[0])]), np.concatenate([left, np.full(values.shape[0], -1)])
        fast = normalizer.statistics_left_out(values, usable, rows, left)
        for a in range(rows.size):
            kept = np.flatnonzero(usable[rows[a]])
            row = np.sort(values[rows[a], kept[kept != left[a]]])
            slow = normalizer.statistics(row[None, :])
            assert all(fast[k][a] == slow[k][0] for k in slow), (a, {k: (fast[k][a], slow[k][0]) for k in slow})
            if isinstance(normalizer, SNorm) and values.max() < 1e10:
                assert (fast["mean"][a], fast["std"][a]) == _exact(row.tolist())


def test_the_kit_catches_a_fast_path_that_strays_or_depends_on_order():
    class Strays(SNorm):
        def _statistics_left_out(self, cohort, usable, rows, left_out):
            out = super()._statistics_left_out(cohort, usable, rows, left_out)
            return {"mean": out["mean"] * (1 + 1e-7), "std": out["std"]}

    class InOrder(SNorm):  # sums the row in the order given: its last bits depend on that order
        def _statistics_left_out(self, cohort, usable, rows, left_out):
            keep = usable[rows] & (np.arange(cohort.shape[1])[None, :] != left_out[:, None])
            x = np.where(keep, cohort[rows], 0.0)
            total = np.zeros(rows.size)
            for k in range(x.shape[1]):
                total = total + x[:, k]
            mean = total / keep.sum(axis=1)
            return {"mean": mean, "std": np.sqrt(np.where(keep, (x - mean[:, None]) ** 2, 0.0).sum(axis=1) / keep.sum(axis=1))}

    with pytest.raises(AssertionError, match="must agree within a relative 1e-09"):
        check_normalizer_left_out(ComponentCase("normalizer", Strays, name="strays"))
    with pytest.raises(AssertionError, match="another order"):
        check_normalizer_left_out(ComponentCase("normalizer", InOrder, name="in-order"))
    # within the tolerance, one cohort row per attempt still normalises near the run, not exactly
    check_normalizer_reproducible_after_saving(ComponentCase("normalizer", InOrder, name="in-order"))


class _Median(Normalizer):
    """A third party's normaliser without a fast path: median and MAD (the core reduces every attempt's row)."""

    sides = ("probe",)
    spreads = ("mad",)

    def _statistics(self, cohort):
        med = np.median(cohort, axis=1)
        return {"median": med, "mad": np.median(np.abs(cohort - med[:, None]), axis=1)}

    def _normalize(self, distances, enrolled, probe):
        return (distances - probe["median"]) / probe["mad"]


def test_a_normaliser_without_a_fast_path_is_reduced_row_by_row_as_before():
    rng = np.random.default_rng(2)
    values = rng.gamma(3, 0.5, (6, 15))
    usable = rng.random(values.shape) < 0.85
    rows, left = np.nonzero(usable)
    stats = attempt_statistics(_Median(), values, usable, rows, left)
    for a in range(rows.size):
        kept = np.flatnonzero(usable[rows[a]])
        row = np.sort(values[rows[a], kept[kept != left[a]]])
        assert stats["median"][a] == np.median(row) and stats["mad"][a] == np.median(np.abs(row - np.median(row)))
    check_normalizer_reproducible_after_saving(ComponentCase("normalizer", _Median, name="median"))


def test_the_cohort_check_judges_each_attempts_row_from_the_probes_rows():
    rng = np.random.default_rng(4)
    values = rng.gamma(3, 0.5, (8, 30)) * 1e300
    usable = rng.random(values.shape) < 0.9
    rows = rng.integers(0, 8, 200)
    left = np.where(rng.random(200) < 0.8, rng.integers(0, 30, 200), -1)
    count, mean, std = row_moments_left_out(values, usable, rows, left)
    keep = usable[rows] & (np.arange(30)[None, :] != left[:, None])
    want = row_moments(values[rows], keep)
    assert np.array_equal(count, want[0])
    np.testing.assert_allclose(mean, want[1], rtol=1e-12)
    np.testing.assert_allclose(std, want[2], rtol=1e-9)


@pytest.fixture(scope="module")
def matrix_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("scale")
    result = quiet_run(_matrix_recipe(tmp, {"plugin": "snorm"}))
    from calibrate.contract.manager import build_registry
    from calibrate.recipe.validation import load_recipe

    split = load_recipe(tmp / "r.yaml", build_registry()).data.build().load()
    return tmp, result, split


def test_each_probes_row_once_decides_as_the_run_and_as_rows_per_attempt(matrix_run):
    tmp, result, split = matrix_run
    train, test = split.train, split.test
    whole = np.where(train.valid | test.valid, test.values, np.nan)
    cal = calibrate.load(tmp / "out", "class-interp")
    rows, cols, _ = _run_decisions(result, "class-interp", TARGETS[0])
    cohorts = calibrate.ProbeCohorts(whole, test.gallery_classes.tolist(), rows, test.probe_classes.tolist(),
                                     test.probe_ids.tolist())
    per_attempt = [whole[i][~np.isnan(whole[i]) & (test.gallery_classes != test.probe_classes[i])
                            & (np.arange(whole.shape[1]) != j)] for i, j in zip(rows, cols)]
    fitted, claimed, raw = cal.normalization, test.gallery_classes[cols], test.values[rows, cols]
    from calibrate.normalisation.decisions import normalised_distances

    d_probe = normalised_distances(fitted, cal.transform, cal.kind, raw, cols, cohorts, cal.classes)
    d_rows = normalised_distances(fitted, cal.transform, cal.kind, raw, cols, per_attempt, cal.classes)
    assert np.array_equal(d_probe, d_rows)  # the built-ins' statistics are exact: both forms, the same bits
    for target in TARGETS:
        rows, cols, want = _run_decisions(result, "class-interp", target)
        assert np.array_equal(cal.accept(claimed, raw, target, probe_cohort_scores=cohorts), want)


def test_probe_cohorts_that_cannot_be_right_are_one_clear_error(matrix_run):
    tmp, _, split = matrix_run
    cal = calibrate.load(tmp / "out", "class-interp")
    scores, gallery = split.test.values, split.test.gallery_classes.tolist()
    with pytest.raises(DataError, match=r"scores has shape \(126, 40\), but 39 cohort model\(s\) are named"):
        ProbeCohorts(scores, gallery[:-1], [0])
    with pytest.raises(DataError, match="outside 0..125"):
        ProbeCohorts(scores, gallery, [126])
    with pytest.raises(DataError, match="a cohort model is named twice"):
        ProbeCohorts(scores, gallery[:-1] + gallery[:1], [0])
    with pytest.raises(CalibrationError, match=r"names a probe row for 1 attempt\(s\), but 2 attempt\(s\) are decided"):
        cal.accept(gallery[:2], [0.5, 0.5], 0.05, probe_cohort_scores=ProbeCohorts(scores, gallery, [0]))
    tiny = ProbeCohorts(scores[:, :3], gallery[:3], [0, 1])  # 3 cohort models a probe: refused as at fit
    with pytest.raises(CalibrationError, match=r"attempt 1 gives 3 cohort score\(s\), but the cohort the calibration"):
        cal.accept(gallery[3:5], [0.5, 0.5], 0.05, probe_cohort_scores=tiny)


def test_accept_with_a_cohort_file_reads_each_probe_once(matrix_run, tmp_path):
    tmp, result, split = matrix_run
    test = split.test
    whole_valid = split.train.valid | test.valid
    rows, cols, want = _run_decisions(result, "class-interp", 0.02)
    attempts, cohort = _matrix_lists(tmp_path, test, whole_valid, rows, cols)
    from calibrate.cli.inputs import probe_cohorts

    cal = calibrate.load(tmp / "out", "class-interp")
    read = probe_cohorts(cohort, np.array([f"p{i}" for i in rows]), test.gallery_classes[cols],
                         test.probe_classes[rows], None, cal)
    assert read.scores.shape == (np.unique(rows).size, test.shape[1])  # probes x models, not attempts x models
    out = invoke_cli("accept", str(tmp / "out"), str(attempts), "--fpr", "0.02", "--estimator", "class-interp",
                     "--out", str(tmp_path / "d.csv"), "--cohort", str(cohort))
    assert out.returncode == 0, out.stderr
    decided = np.array([row["accept"] == "1" for row in csv.DictReader(open(tmp_path / "d.csv"))])
    assert np.array_equal(decided, want)
    # a probe without a line in the file is one line naming it
    attempts.write_text(attempts.read_text() + f"{test.gallery_classes[0]} x nobody 0.5\n", encoding="utf-8")
    out = invoke_cli("accept", str(tmp / "out"), str(attempts), "--fpr", "0.02", "--estimator", "class-interp",
                     "--out", str(tmp_path / "d2.csv"), "--cohort", str(cohort))
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1
    assert "probe 'nobody' (attempt" in out.stderr and "has no line in the cohort file" in out.stderr
    assert not (tmp_path / "d2.csv").exists()
