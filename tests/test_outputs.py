"""The output contract: thresholds.csv, results.json, report.md, written atomically."""

from __future__ import annotations

import csv
import json
import math
import re

import numpy as np
import pytest

import calibrate
from calibrate.contract.base import Evaluator
from calibrate.contract.hookspecs import hookimpl

from calibrate_test_helpers import make_scores, score_recipe, write_recipe, write_scores

TARGETS = (0.05, 0.02, 0.01)
RESULT_KEYS = {"target_fpr", "fpr", "ratio", "false_accepts", "impostor_attempts", "fnr"}


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("outputs")
    values, probes, gallery = make_scores(seed=11, n_classes=12, probes_per_class=8)
    csv_path = write_scores(tmp / "scores.csv", values, probes, gallery)
    recipe = write_recipe(tmp / "recipe.yaml", score_recipe(csv_path, tmp / "out", targets=TARGETS))
    result = calibrate.run(recipe)
    return tmp, result


def test_thresholds_csv_format(finished):
    tmp, result = finished
    text = (tmp / "out" / "thresholds.csv").read_text(encoding="utf-8")
    assert text.splitlines()[0] == "estimator,class,target_fpr,threshold,score_threshold,accept_if,class_long_run_fpr_low,class_long_run_fpr_high,prediction_status"
    rows = list(csv.DictReader(text.splitlines()))
    classes = result.folds[0].train.gallery_classes.tolist()
    assert len(rows) == 2 * len(classes) * len(TARGETS)
    assert {r["estimator"] for r in rows} == {"generic-interp", "class-interp"}
    tables = result.folds[0].tables
    for r in rows:
        table = tables[r["estimator"]]
        i, k = table.classes.index(r["class"]), table.targets.index(float(r["target_fpr"]))
        assert float(r["threshold"]) == table.values[i, k]  # written with full precision


def test_results_json_structure(finished):
    tmp, result = finished
    doc = json.loads((tmp / "out" / "results.json").read_text(encoding="utf-8"))
    assert {"estimators", "recipe", "versions"} <= set(doc)
    assert list(doc["estimators"]) == ["generic-interp", "class-interp"]
    for label, entry in doc["estimators"].items():
        assert list(entry) == ["targets"]
        assert [t["target_fpr"] for t in entry["targets"]] == list(TARGETS)
        for t in entry["targets"]:
            assert RESULT_KEYS <= set(t)
            assert isinstance(t["false_accepts"], int) and isinstance(t["impostor_attempts"], int)
            assert t["fpr"] == t["false_accepts"] / t["impostor_attempts"]
            assert math.isclose(t["ratio"], t["fpr"] / t["target_fpr"], rel_tol=1e-12)
            assert t["fnr"] is None or 0 <= t["fnr"] <= 1
    assert doc["recipe"]["estimators"] == [{"plugin": "generic-interp"}, {"plugin": "class-interp"}]
    assert doc["versions"]["calibrate-thresholds"] == calibrate.__version__
    assert {"python", "numpy", "scipy"} <= set(doc["versions"])


def test_stage_timings_in_results_and_report(finished):
    tmp, result = finished
    doc = json.loads((tmp / "out" / "results.json").read_text(encoding="utf-8"))
    seconds = doc["timings"]["seconds"]
    # both estimators have a vectorised simulation: they are predicted together, on shared galleries
    assert list(seconds) == ["load data", "check scores", "transform", "fit generic-interp", "fit class-interp",
                             "predict: reference world", "predict generic-interp, class-interp", "evaluate fpr",
                             "fpr: genuine cost and groups", "write outputs"]
    assert all(v >= 0 for v in seconds.values())
    # a part of a stage (RunContext.timed) is counted within it: its seconds are in the stage's too
    within = doc["timings"]["within"]
    assert within == {"fpr: genuine cost and groups": "evaluate fpr"}
    assert seconds["fpr: genuine cost and groups"] <= seconds["evaluate fpr"]
    # stages run beside the others (the predicted intervals, calibrate.running.beside) overlap them; the rest add up
    beside = doc["timings"].get("beside", [])
    assert set(beside) <= {"predict: reference world", "predict generic-interp, class-interp"}
    assert sum(v for k, v in seconds.items() if k not in beside and k not in within) <= doc["timings"]["total"] + 1e-3
    assert all(seconds[k] <= doc["timings"]["total"] + 1e-3 for k in beside)
    assert seconds == pytest.approx(result.timings, abs=1e-4)
    report = (tmp / "out" / "report.md").read_text(encoding="utf-8")
    section = report.split("## Time per stage", 1)[1]
    for stage in seconds:
        name = f"{stage} (*within* {within[stage]})" if stage in within else stage
        assert f"| {name}{' *beside*' if stage in beside else ''} | {seconds[stage]:.3f} |" in section


def test_report_has_one_row_per_target(finished):
    tmp, result = finished
    report = (tmp / "out" / "report.md").read_text(encoding="utf-8")
    lines = report.splitlines()
    head = lines.index("| Target FPR | generic-interp FPR | generic-interp ratio | generic-interp FNR (one threshold) | "
                       "generic-interp FNR cost | class-interp FPR | class-interp ratio | class-interp FNR (one threshold) | "
                       "class-interp FNR cost |")
    assert lines[head + 1] == "|" + "---|" * 9
    rows = []
    for line in lines[head + 2:]:
        if not line.startswith("|"):
            break
        rows.append(line)
    assert [r.split("|")[1].strip() for r in rows] == ["5%", "2%", "1%"]
    for row, k in zip(rows, range(len(TARGETS))):
        cells = [c.strip() for c in row.strip("|").split("|")]
        for j, label in enumerate(("generic-interp", "class-interp")):
            r = result.results[label][k]
            assert cells[1 + 4 * j] == f"{100 * r.fpr:.3f}%"
            assert cells[2 + 4 * j] == f"{r.ratio:.2f}"
            assert cells[3 + 4 * j] == f"{100 * r.fnr:.3f}% ({100 * r.fnr_one_threshold:.3f}%)"
            assert cells[4 + 4 * j] == ("n/a" if r.fnr_cost is None else f"{r.fnr_cost:.2f}x")


# ---- atomicity --------------------------------------------------------------------------------

class _Failing:
    """Test plugin: an estimator or an evaluator that raises at a chosen point of the run."""

    def __init__(self, where: str):
        self.where = where

    @hookimpl
    def calibrate_register_estimators(self, register):
        from calibrate_builtins.estimators.interp import ClassInterp, _SortedModel

        where = self.where

        class BadModel(_SortedModel):
            def to_state(self):  # called while the outputs are being staged
                if where == "writing":
                    raise RuntimeError("failed while writing")
                return super().to_state()

            def parameters(self):
                if where == "interrupt":
                    raise KeyboardInterrupt
                return super().parameters()

        class Flaky(ClassInterp):
            model_class = BadModel

            def _fit(self, impostors, context):
                if where == "fit":
                    raise RuntimeError("failed while fitting")
                m = super()._fit(impostors, context)
                return BadModel(m.classes, m._values, m._offsets, False)

        register("flaky", Flaky)

    @hookimpl
    def calibrate_register_evaluators(self, register):
        where = self.where

        class FlakyEvaluator(Evaluator):
            def __init__(self):
                pass

            def _evaluate(self, data, context):
                raise RuntimeError("failed while evaluating")

        if where == "evaluate":
            register("flaky-eval", FlakyEvaluator)


def _snapshot(folder):
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


@pytest.mark.parametrize("where", ["fit", "evaluate", "writing", "interrupt"])
def test_failed_run_leaves_previous_result_intact_and_nothing_partial(tmp_path, where):
    values, probes, gallery = make_scores(seed=12)
    csv_path = write_scores(tmp_path / "scores.csv", values, probes, gallery)
    out = tmp_path / "out"
    good = write_recipe(tmp_path / "good.yaml", score_recipe(csv_path, out))
    calibrate.run(good)
    before = _snapshot(out)
    assert {"thresholds.csv", "results.json", "report.md"} <= set(before)

    bad = score_recipe(csv_path, out, estimators=({"plugin": "class-interp"}, {"plugin": "flaky"}))
    if where == "evaluate":
        bad["evaluation"]["evaluators"] = [{"plugin": "fpr"}, {"plugin": "flaky-eval"}]
    bad_path = write_recipe(tmp_path / "bad.yaml", bad)
    expected = KeyboardInterrupt if where == "interrupt" else RuntimeError
    with pytest.raises(expected):
        calibrate.run(bad_path, extra_plugins=(_Failing(where),))
    assert _snapshot(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.yaml", "good.yaml", "out", "scores.csv"]

    fresh = tmp_path / "fresh"
    with pytest.raises(expected):
        calibrate.run(bad_path, out=fresh, extra_plugins=(_Failing(where),))
    assert not fresh.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_a_worker_writing_during_the_discard_leaves_nothing(tmp_path, monkeypatch):
    """A sharded run's worker may still be writing its scratch file into the staging folder when another
    worker's death fails the run: the first removal then leaves that file (and so the folder) behind. The
    pipeline removes the staging folder again once the executor has stopped its workers."""
    import calibrate.files.commit as commit

    values, probes, gallery = make_scores(seed=12)
    csv_path = write_scores(tmp_path / "scores.csv", values, probes, gallery)
    bad = score_recipe(csv_path, tmp_path / "fresh" / "out", estimators=({"plugin": "flaky"},))
    real_rmtree, real_discard, calls, staging = commit.shutil.rmtree, commit.StagedOutput.discard, [], []

    def recorded(self):
        staging.append(self.dir)
        real_discard(self)

    def raced(path, ignore_errors=False):
        real_rmtree(path, ignore_errors=ignore_errors)
        calls.append(path)
        if len(calls) == 1:  # a file arrived by the staging folder's name while the folder was being removed
            staging[0].mkdir()
            (staging[0] / "scratch-late.npz").write_bytes(b"late")

    monkeypatch.setattr(commit.StagedOutput, "discard", recorded)
    monkeypatch.setattr(commit.shutil, "rmtree", raced)
    with pytest.raises(RuntimeError, match="failed while fitting"):
        calibrate.run(write_recipe(tmp_path / "bad.yaml", bad), extra_plugins=(_Failing("fit"),))
    assert len(calls) == 2 and len(staging) == 2 and staging[0] == staging[1]  # removed again once the executor stopped
    assert not (tmp_path / "fresh").exists(), sorted(str(p) for p in (tmp_path / "fresh").rglob("*"))


def test_thresholds_csv_values_survive_a_round_trip():
    from calibrate.running.outputs import thresholds_csv
    from calibrate.contract.types import ThresholdTable

    values = np.array([[0.1, 1 / 3], [2e-17, 12345.678901234567]])
    text = thresholds_csv([ThresholdTable("e", ("a", "b,c"), (0.001, 0.0005), values)])
    rows = list(csv.reader(text.splitlines()))
    assert rows[0] == ["estimator", "class", "target_fpr", "threshold", "score_threshold", "accept_if", "class_long_run_fpr_low", "class_long_run_fpr_high", "prediction_status"]
    assert rows[3] == ["e", "b,c", "0.001", "2e-17", "", "", "", "", ""]  # a comma in a class label is quoted
    assert [float(r[3]) for r in rows[1:]] == values.ravel().tolist()
    assert re.fullmatch(r"e,a,0\.0005,0\.3333333333333333,,,,,", text.splitlines()[2])
