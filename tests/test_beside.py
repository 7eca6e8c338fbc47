"""calibrate.running.beside, and the predicted intervals computed in a process beside the run: the same outputs
and notes as in line, errors raised where they are read, no process left behind."""

from __future__ import annotations

import json
import multiprocessing
import os
import re
import signal
import time

import numpy as np
import pytest

import calibrate
from calibrate.running import beside
from calibrate.predicted import interval as prediction
from calibrate.errors import DataError
from calibrate_builtins.evaluators import fpr

from calibrate_test_helpers import make_scores, score_recipe, write_recipe, write_scores
from test_end_to_end import _patterns

forks = pytest.mark.skipif(not beside.available(), reason="work runs beside the run only where fork is the safe default "
                                                          "(Linux) and CALIBRATE_BESIDE is not 0")


@forks
def test_the_child_reads_the_parents_arrays_and_returns_its_result():
    values = np.arange(1_000_000, dtype=np.int64)  # not passed: the forked child sees it as it is
    job = beside.start(lambda: (os.getpid(), int(values.sum())), "a sum")
    pid, total = job.result()
    assert pid != os.getpid() and total == 499_999_500_000
    assert job.result() == (pid, total)  # asked again: the same, without a second wait


@forks
def test_an_error_in_the_child_is_raised_by_result_with_its_traceback_noted():
    def fails():
        raise DataError("class id07 has no impostor distances")

    job = beside.start(fails, "a failing job")
    with pytest.raises(DataError, match="class id07 has no impostor distances") as info:
        job.result()
    assert any("raised in the process beside the run" in note and "fails" in note for note in info.value.__notes__)


@forks
def test_an_error_that_cannot_be_pickled_arrives_as_its_text():
    class Local(Exception):  # a local class cannot be pickled
        pass

    def fails():
        raise Local("the original words")

    with pytest.raises(RuntimeError, match="the original words"):
        beside.start(fails, "a job").result()


@forks
def test_a_child_killed_before_its_result_is_a_clear_error():
    job = beside.start(lambda: os.kill(os.getpid(), signal.SIGKILL), "the predicted FPR intervals")
    with pytest.raises(beside.BesideError, match=r"the predicted FPR intervals: .*ended without a result.*CALIBRATE_BESIDE=0"):
        job.result()


#: how long a child waits at a gate the test never opens (reached only when the code under test waits for it)
GATE_TIMEOUT = 600.0


def _held(gate, finished):
    """A child's work that ends only when ``gate`` appears, and then says so in ``finished``: a child stopped before
    the gate opens leaves no ``finished`` (no wall clock is read to tell stopped from waited for)."""
    deadline = time.monotonic() + GATE_TIMEOUT
    while not gate.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    finished.touch()


@forks
def test_close_stops_a_child_whose_result_is_not_wanted(tmp_path):
    gate, finished = tmp_path / "gate", tmp_path / "finished"
    job = beside.start(lambda: _held(gate, finished), "a long job")
    job.close()
    assert not multiprocessing.active_children() and not finished.exists()  # stopped, not waited for
    gate.touch()
    with pytest.raises(beside.BesideError, match="abandoned"):
        job.result()


def test_the_environment_turns_it_off(monkeypatch):
    monkeypatch.setenv("CALIBRATE_BESIDE", "0")
    assert not beside.available()


# --------------------------------------------------------------------------------------------
# the run: predictions beside it give what the run in line gives


def _score_run(tmp_path, monkeypatch, enabled: bool, name: str, **recipe_extra):
    monkeypatch.setattr(beside, "ENABLED", enabled)
    values, probes, gallery = make_scores(seed=3, n_classes=24, probes_per_class=10)
    csv = write_scores(tmp_path / "scores.csv", values, probes, gallery)
    recipe = score_recipe(csv, tmp_path / name, targets=(0.05, 0.01, 0.002))
    recipe.update(recipe_extra)
    return calibrate.run(write_recipe(tmp_path / f"{name}.yaml", recipe)), tmp_path / name


def _same_files(a, b):
    for name in ("thresholds.csv", "models.csv", "calibration.json"):
        assert (a / name).read_bytes() == (b / name).read_bytes(), name
    ra, rb = (json.loads((d / "results.json").read_text()) for d in (a, b))
    ta, tb = ra.pop("timings"), rb.pop("timings")
    assert ra.pop("recipe")["estimators"] == rb.pop("recipe")["estimators"]  # (the output folders differ)
    assert ra == rb
    assert set(ta["seconds"]) == set(tb["seconds"])
    a_md, b_md = ((d / "report.md").read_text().split("## Time per stage")[0] for d in (a, b))
    assert re.sub("Recipe `[^`]+`", "", a_md) == re.sub("Recipe `[^`]+`", "", b_md)  # (recipe file names differ)
    return ta, tb


@forks
def test_predictions_beside_the_run_give_the_outputs_and_notes_of_the_run_in_line(tmp_path, monkeypatch):
    where = tmp_path / "pids.txt"
    real = prediction.predict_together

    def recording(*args, **kwargs):
        with open(where, "a") as fh:
            fh.write(f"{os.getpid()}\n")
        return real(*args, **kwargs)

    monkeypatch.setattr(prediction, "predict_together", recording)
    inline, a = _score_run(tmp_path, monkeypatch, False, "inline")
    besides, b = _score_run(tmp_path, monkeypatch, True, "beside")
    pids = where.read_text().split()
    assert pids[0] == str(os.getpid()) and pids[1] != str(os.getpid())  # the second run predicted in a child
    assert "predicted_fpr_low" in inline.results["class-interp"][0].extra
    assert inline.notes == besides.notes and inline.results == besides.results
    t_inline, t_beside = _same_files(a, b)
    assert "beside" not in t_inline
    assert t_beside["beside"] == ["predict: reference world", "predict generic-interp, class-interp"]
    report = (b / "report.md").read_text()
    assert "| predict: reference world *beside* |" in report and "add up to more than 100%" in report
    assert not multiprocessing.active_children()


@forks
def test_rotating_folds_keep_their_notes_in_fold_order(tmp_path, monkeypatch):
    path, *_ = _patterns(tmp_path)
    real = prediction.build_world

    def no_world_for_two_folds(impostors, train_d, structure="bulk"):  # a note from the prediction of each fold
        if train_d.gallery_ids[0].endswith("s0"):
            return real(impostors, train_d, structure)
        raise DataError(f"no world for enrollment {train_d.gallery_ids[0]}")

    monkeypatch.setattr(prediction, "build_world", no_world_for_two_folds)
    runs = []
    for enabled in (False, True):
        monkeypatch.setattr(beside, "ENABLED", enabled)
        out = tmp_path / f"out{enabled}"
        recipe = {"data": {"plugin": "npz-patterns", "path": str(path)}, "distance": {"plugin": "euclidean"},
                  "estimators": ["class-interp", "generic-interp"],
                  "evaluation": {"targets": [0.2, 0.01], "enrollment": 0, "rotate": True},
                  "output": {"dir": str(out), "plots": False}}
        runs.append((calibrate.run(write_recipe(tmp_path / f"r{enabled}.yaml", recipe)), out))
    (inline, a), (besides, b) = runs
    assert len(inline.folds) == 3
    said = [k for k, note in enumerate(inline.notes) if note.startswith("no predicted FPR intervals on fold")]
    assert len(said) == 2 and said[1] == said[0] + 1  # the prediction's notes, in fold order, ahead of the evaluation's
    assert "k0/s1" in inline.notes[said[0]] and "k0/s2" in inline.notes[said[1]]
    assert any("training impostor distances" in note for note in inline.notes[said[1]:])
    assert inline.notes == besides.notes
    _same_files(a, b)
    assert not multiprocessing.active_children()


@forks
def test_an_error_in_the_prediction_is_raised_by_the_run_and_nothing_is_written(tmp_path, monkeypatch):
    def broken(*args, **kwargs):
        raise ZeroDivisionError("a bug in the world")

    monkeypatch.setattr(prediction, "build_world", broken)
    with pytest.raises(ZeroDivisionError, match="a bug in the world"):
        _score_run(tmp_path, monkeypatch, True, "out")
    assert not (tmp_path / "out").exists() and not multiprocessing.active_children()


@forks
def test_a_failure_while_the_prediction_runs_stops_it(tmp_path, monkeypatch):
    slow = prediction.predict_together
    gate, finished = tmp_path / "gate", tmp_path / "finished"

    def held(*args, **kwargs):
        _held(gate, finished)
        return slow(*args, **kwargs)

    def broken(*args, **kwargs):
        raise DataError("the evaluation data are unusable")

    monkeypatch.setattr(prediction, "predict_together", held)
    monkeypatch.setattr(fpr, "measure_label", broken)
    with pytest.raises(DataError, match="unusable"):
        _score_run(tmp_path, monkeypatch, True, "out")
    assert not finished.exists()  # the child was stopped, not waited for
    assert not (tmp_path / "out").exists() and not multiprocessing.active_children()


@forks
@pytest.mark.filterwarnings("ignore")
def test_refitted_predictions_go_beside_only_where_the_recipe_names_no_executor(tmp_path, monkeypatch):
    """ncx2-grid has no vectorised simulation: its refits run beside the run when no executor is named (the run's
    other core), in line with one (they use its workers); the outputs are those of the run in line either way."""
    where = tmp_path / "pids.txt"
    real = prediction._refitted

    def recording(*args, **kwargs):
        with open(where, "a") as fh:
            fh.write(f"{os.getpid()}\n")
        return real(*args, **kwargs)

    monkeypatch.setattr(prediction, "_refitted", recording)

    def run(name: str, enabled: bool, executor: str = ""):
        monkeypatch.setattr(beside, "ENABLED", enabled)
        path = tmp_path / f"{name}.yaml"
        path.write_text("version: 1\ndata: {plugin: synthetic-impostors, classes: 6, train: 300, test: 100, seed: 4}\n"
                        "estimators: [{plugin: ncx2-grid}]\n"
                        "evaluation: {targets: [0.05, 0.01], prediction: {replicates: 20, budget_s: 3600}}\n"
                        f"output: {{dir: {tmp_path / name}, plots: false}}\n{executor}")
        return calibrate.run(path), tmp_path / name

    inline, a = run("inline", False)
    besides, b = run("beside", True)
    named, c = run("named", True, "executor: {plugin: serial}\n")
    assert [pid == str(os.getpid()) for pid in where.read_text().split()] == [True, False, True]
    assert "predicted_fpr_low" in inline.results["ncx2-grid"][0].extra
    assert inline.notes == besides.notes == named.notes and inline.results == besides.results == named.results
    _same_files(a, b)
    _same_files(a, c)
    assert not multiprocessing.active_children()
