"""Notes and hints a run gives when the data are probably not what the recipe says."""

from __future__ import annotations

import numpy as np
import pytest

import calibrate
from calibrate.errors import DataError

from calibrate_test_helpers import DATA, make_scores, score_recipe, write_recipe, write_scores


def run_notes(tmp_path, values, probes, gallery, **data):
    csv_path = write_scores(tmp_path / "scores.csv", values, probes, gallery)
    recipe = write_recipe(tmp_path / "r.yaml", score_recipe(csv_path, tmp_path / "out", **data))
    with pytest.warns(UserWarning):
        return calibrate.run(recipe).notes


def test_a_column_of_one_repeated_score_names_the_missing_parameter(tmp_path):
    values, probes, gallery = make_scores(seed=3, n_classes=10, probes_per_class=8)
    values[:, 4] = -1.0  # a failed gallery template: every comparison with it is the marker
    notes = run_notes(tmp_path, values, probes, gallery)
    assert ("Every training score of 1 gallery class(es) (id04) is -1: such a repeated extreme value is often a "
            "matcher's marker of a failed comparison; if it is one here, set `missing: -1` under `data:`") in " ".join(notes)


@pytest.mark.shared_data
def test_bssr1_without_its_missing_marker_fails_with_the_hint(tmp_path):
    face_c = DATA / "bssr1-set1" / "face-C.csv"
    if not face_c.exists():
        pytest.skip(f"needs the NIST BSSR1 scores at {face_c} (../shared/data, or the folder CALIBRATE_SHARED_DATA names)")
    recipe = write_recipe(tmp_path / "r.yaml", {"version": 1, "output": str(tmp_path / "out"),
                                                "data": {"plugin": "score-matrix", "path": str(face_c), "kind": "similarity"},
                                                "transform": {"plugin": "similarity-to-distance", "upper": 1.0}})
    with pytest.raises(DataError, match=r"training distances are equal.*Every training score of 1 gallery class.* is -1"
                                        r".*set `missing: -1` under `data:`"):
        calibrate.run(recipe)
    assert not (tmp_path / "out").exists()


def test_a_dominant_extreme_score_is_pointed_out_in_the_notes(tmp_path):
    values, probes, gallery = make_scores(seed=4, n_classes=10, probes_per_class=8)
    rng = np.random.default_rng(0)
    values[rng.random(values.shape) < 0.05] = -1.0
    notes = run_notes(tmp_path, values, probes, gallery)
    hint = [n for n in notes if "marker of a failed comparison" in n]
    assert len(hint) == 1 and "equal -1, the smallest score" in hint[0] and "`missing: -1`" in hint[0]


def test_no_hint_for_continuous_scores_or_when_missing_is_set(tmp_path):
    values, probes, gallery = make_scores(seed=5, n_classes=10, probes_per_class=8)
    notes = run_notes(tmp_path, values, probes, gallery)
    assert not [n for n in notes if "marker of a failed comparison" in n]
    values[0, :] = -1.0
    notes = run_notes(tmp_path, values, probes, gallery, missing=-1)
    assert not [n for n in notes if "marker of a failed comparison" in n]


def test_failed_comparisons_are_counted_per_file_not_per_mention(tmp_path):
    values, probes, gallery = make_scores(seed=6, n_classes=10, probes_per_class=8)
    values[[1, 5, 9], 2] = -1.0
    csv_path = write_scores(tmp_path / "scores.csv", values, probes, gallery)
    recipe = score_recipe(csv_path, tmp_path / "out", missing=-1)
    del recipe["data"]["path"]
    recipe["data"].update(train=str(csv_path), test=str(csv_path))
    with pytest.warns(UserWarning):
        notes = calibrate.run(write_recipe(tmp_path / "r.yaml", recipe)).notes
    counted = [n for n in notes if "failed comparisons" in n]
    assert counted == ["failed comparisons (the dataset's `missing:` marker) were excluded from fitting and "
                       "evaluation: 3 in scores.csv"]
    other = write_scores(tmp_path / "eval.csv", values, probes, gallery)
    recipe["data"]["test"] = str(other)
    with pytest.warns(UserWarning):
        notes = calibrate.run(write_recipe(tmp_path / "r.yaml", recipe)).notes
    assert [n for n in notes if "failed comparisons" in n][0].endswith("3 in scores.csv, 3 in eval.csv")


def test_ratio_zero_below_one_over_n_is_explained_in_the_report(tmp_path):
    values, probes, gallery = make_scores(seed=8, n_classes=12, probes_per_class=8)
    csv_path = write_scores(tmp_path / "scores.csv", values, probes, gallery)
    recipe = write_recipe(tmp_path / "r.yaml", score_recipe(csv_path, tmp_path / "out", targets=(0.2, 0.01)))
    with pytest.warns(UserWarning):
        result = calibrate.run(recipe)
    per_class = result.results["class-interp"][1]
    assert per_class.false_accepts == 0 and per_class.ratio == 0
    notes = [n for n in result.notes if n.startswith("class-interp at 1%: ratio 0")]
    assert len(notes) == 1 and "about 44 training impostor distances (1/n = 2.27%)" in notes[0]
    assert not [n for n in result.notes if n.startswith("class-interp at 20%")]
    assert not [n for n in result.notes if n.startswith("generic-interp")]
    assert notes[0] in (tmp_path / "out" / "report.md").read_text()


def test_zero_false_accepts_where_few_were_expected_is_called_chance():
    from calibrate.contract.types import TargetResult
    from calibrate_builtins.evaluators.fpr_report import unreachable_notes

    class Table:
        classes = ("a", "b")
        values = np.array([[0.5], [0.45]])

    class Train:
        gallery_classes = np.array(["a", "b"])
        values = np.array([[9.0, 0.1], [0.2, 9.0], [0.3, 0.4]])

        def impostor_mask(self):
            return np.array([[False, True], [True, False], [True, True]])

    class Fold:
        train, tables = Train(), {"e": Table()}

    rows = [TargetResult(0.001, 0.0, 0.0, 0, 1000, 0.1, {})]
    (note,) = unreachable_notes((Fold(),), "e", rows)
    assert note.startswith("e at 0.1%: no false accept, where only 1.0 were expected")


def test_a_pooled_estimator_is_not_blamed_on_per_class_data(tmp_path):
    """generic-interp below 1/N of the pooled distances is explained by the pool, above it not by 1/n per class."""
    values, probes, gallery = make_scores(seed=8, n_classes=12, probes_per_class=8)
    csv_path = write_scores(tmp_path / "scores.csv", values, probes, gallery)
    recipe = write_recipe(tmp_path / "r.yaml", score_recipe(csv_path, tmp_path / "out", targets=(0.2, 0.001)))
    with pytest.warns(UserWarning):
        result = calibrate.run(recipe)
    pooled = result.results["generic-interp"][1]
    assert pooled.false_accepts == 0
    (note,) = [n for n in result.notes if n.startswith("generic-interp at 0.1%")]
    assert "below 1/N of the 528 pooled training impostor distances" in note and "per-class" not in note


def _unique_rule(values: np.ndarray):
    """The rule as first written: np.unique's most frequent value (the smallest on a tie), when it is the
    smallest or largest and holds at least 1% of the scores."""
    uniq, counts = np.unique(values, return_counts=True)
    k = int(counts.argmax())
    if counts[k] / values.size >= 0.01 and k in (0, uniq.size - 1):
        return float(uniq[k]), int(counts[k]), 0 if k == 0 else 1
    return None


@pytest.mark.parametrize("seed", range(40))
def test_the_repeated_extreme_rule_matches_a_full_count_of_every_value(seed):
    """pipeline._extreme_mode (buckets, no sort of every value) against np.unique's counts, on generated
    scores with a repeated smallest, largest or inner value, ties between them, and -0.0 among 0.0."""
    from calibrate.running.pipeline import _extreme_mode

    rng = np.random.default_rng(seed)
    n = int(rng.integers(200, 20_000))
    values = np.round(rng.normal(0.0, 1.0, n), int(rng.integers(1, 6)))
    for _ in range(int(rng.integers(0, 4))):
        pick = rng.choice(["low", "high", "inner", "zero"])
        share = rng.choice([0.005, 0.01, 0.02, 0.1])
        where = rng.choice(n, int(share * n), replace=False)
        values[where] = {"low": values.min(), "high": values.max(), "inner": float(np.median(values)),
                         "zero": rng.choice([0.0, -0.0])}[pick]
    if seed % 5 == 0:  # exact ties between the two extremes, or an extreme and an inner value
        lo, hi = values.min(), values.max()
        c = int(0.03 * n)
        values[:c], values[c:2 * c] = lo, hi if seed % 10 == 0 else float(np.median(values))
    got = _extreme_mode(values)
    want = _unique_rule(values)
    assert (got[2] is None) == (want is None), (got, want)
    if want is not None:
        assert got == want


@pytest.mark.parametrize("other, want", [(3.0, (0.0, 30, 0)),   # smallest and largest tie: the smallest
                                         (1.2345678, None),     # the largest ties an inner value: no hint
                                         (-0.0, (0.0, 60, 0))])  # -0.0 counts as 0.0
def test_the_repeated_extreme_rule_breaks_ties_as_a_full_count(other, want):
    from calibrate.running.pipeline import _extreme_mode

    rng = np.random.default_rng(1)
    distinct = np.linspace(1.0, 2.0, 1_000)  # every value once
    extreme = 3.0 if other == 1.2345678 else 0.0
    values = rng.permutation(np.r_[distinct, [extreme] * 30, [other] * 30])
    assert _unique_rule(values) == want
    got = _extreme_mode(values)
    assert (got if got[2] is not None else None) == want
