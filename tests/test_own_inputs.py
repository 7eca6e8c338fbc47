"""No command writes over one of its own inputs (issue 31, item 2): `accept --out`, `evaluate --det` and
`fit --out` naming the scores, the cohort, the groups file, the calibration, or any file a run's folder or a
sharded run's calibration is read from (calibration.json, manifest.json and every file it lists, the parts,
class lists and pooled samples), by any path to it (a hard link, a symbolic link), are refused before any
computation: exit 2, one line naming the option and the input, the file byte for byte as it was."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from calibrate_test_helpers import invoke_cli, quiet_run, write_recipe

BOB = Path(__file__).resolve().parents[1] / "examples" / "bob-scores"


def _bob_files(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name in ("scores-dev", "scores-eval", "cohort-tnorm", "cohort-znorm"):
        shutil.copy(BOB / name, folder / name)
    subjects = sorted({line.split()[0] for line in (folder / "scores-dev").read_text().splitlines()})
    (folder / "groups.csv").write_text("class,group\n" + "".join(f"{s},g{k % 2}\n" for k, s in enumerate(subjects)))
    return folder


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A plain run's folder, an S-norm run's folder (with its T-norm cohort file) and a sharded run's folder."""
    tmp = _bob_files(tmp_path_factory.mktemp("inputs"))
    base = {"version": 1, "estimators": [{"plugin": "class-interp"}],
            "evaluation": {"targets": [0.05], "prediction": False}}
    data = {"plugin": "score-list", "train": "scores-dev", "test": "scores-eval", "kind": "similarity", "missing": -1}
    quiet_run(write_recipe(tmp / "plain.yaml", {**base, "data": data, "output": {"dir": "plain", "plots": False}}))
    quiet_run(write_recipe(tmp / "snorm.yaml", {**base, "normalizer": {"plugin": "snorm"}, "output": {"dir": "snorm", "plots": False},
                                           "data": {**data, "cohort_enrolled": "cohort-znorm", "cohort_probes": "cohort-tnorm"}}))
    from test_partitioned import make_shards

    make_shards(tmp / "shards", shards=2, classes=6, probes=20, parquet=False)
    quiet_run(write_recipe(tmp / "sharded.yaml", {
        "version": 1, "data": {"plugin": "score-shards", "path": "shards", "kind": "distance"},
        "estimators": [{"plugin": "auto"}], "evaluation": {"targets": [0.05]}, "output": {"dir": "sharded", "plots": False}}))
    assert (tmp / "sharded" / "pooled-auto.npy").is_file() and (tmp / "sharded" / "calibration-part00001.json").is_file()
    return tmp


@pytest.fixture
def no_work(monkeypatch):
    """Any reading of the calibration or the scores fails loudly (exit 1): a refusal must come before them."""
    def never(*args, **kwargs):
        raise AssertionError("computation started before the output was checked")

    monkeypatch.setattr("calibrate.api.load", never)
    monkeypatch.setattr("calibrate.cli.inputs.read_attempts", never)  # where accept looks it up
    monkeypatch.setattr("calibrate.cli.fit_evaluate.read_attempts", never)  # where fit and evaluate look it up


def _refused(result, option: str, out: Path, before: bytes, named: str) -> None:
    assert result.returncode == 2, result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("error: ") and f"cannot write {option} " in line and "this command's input" in line, line
    assert named in line and f"give {option} another path" in line, line
    assert out.read_bytes() == before


def _accept(tmp: Path, artifact: str, out: Path, *extra: str, scores: str = "scores-eval"):
    return invoke_cli("accept", artifact, scores, "--fpr", "0.05", "--missing", "-1", "--out", str(out), *extra, cwd=tmp)


@pytest.mark.parametrize("name", ["calibration.json", "manifest.json", "thresholds.csv", "results.json"])
@pytest.mark.parametrize("given", ["folder", "calibration.json"])
def test_accept_out_a_file_of_the_run_folder_it_reads_is_refused(runs, no_work, name, given):
    artifact = "plain" if given == "folder" else "plain/calibration.json"
    out = runs / "plain" / name
    before = out.read_bytes()
    _refused(_accept(runs, artifact, out), "--out", out, before, "ARTIFACT")


def test_accept_out_a_hard_or_symbolic_link_to_its_calibration_is_refused(runs, no_work, tmp_path):
    cal = runs / "plain" / "calibration.json"
    before = cal.read_bytes()
    hard, soft = tmp_path / "hard.json", tmp_path / "soft.json"
    os.link(cal, hard)
    soft.symlink_to(cal)
    for out in (hard, soft):
        _refused(_accept(runs, "plain", out), "--out", cal, before, "ARTIFACT")
        _refused(_accept(runs, str(soft), out), "--out", cal, before, "ARTIFACT")


@pytest.mark.parametrize("name", ["cohort-tnorm", "scores-eval", "groups.csv"])
def test_accept_out_the_cohort_scores_or_groups_by_any_path_is_refused(runs, no_work, tmp_path, name):
    extra = ("--cohort", "cohort-tnorm", "--groups", "groups.csv")
    named = {"cohort-tnorm": "--cohort", "scores-eval": "SCORES", "groups.csv": "--groups"}[name]
    original = runs / name
    before = original.read_bytes()
    hard = tmp_path / f"{name}.hard"
    os.link(original, hard)
    for out in (original, hard):
        _refused(_accept(runs, "snorm", out, *extra), "--out", original, before, named)


@pytest.mark.parametrize("name", ["calibration.json", "calibration-part00000.json", "classes-part00001.json",
                                  "pooled-auto.npy", "thresholds-part00000.csv", "manifest.json"])
def test_accept_out_a_part_of_a_sharded_calibration_is_refused(runs, no_work, name):
    out = runs / "sharded" / name
    before = out.read_bytes()
    _refused(_accept(runs, "sharded", out, scores="all.txt"), "--out", out, before, "ARTIFACT")
    _refused(_accept(runs, "sharded/calibration.json", out, scores="all.txt"), "--out", out, before, "ARTIFACT")


@pytest.mark.parametrize("name", ["scores-eval", "cohort-tnorm", "groups.csv", "snorm/calibration.json", "snorm/det.csv"])
def test_evaluate_det_an_input_is_refused(runs, no_work, name):
    out = runs / name
    before = out.read_bytes()
    result = invoke_cli("evaluate", "snorm", "scores-eval", "--missing", "-1", "--cohort", "cohort-tnorm",
                        "--groups", "groups.csv", "--det", str(out), cwd=runs)
    _refused(result, "--det", out, before, {"scores-eval": "SCORES", "cohort-tnorm": "--cohort",
                                            "groups.csv": "--groups"}.get(name, "ARTIFACT"))


def test_fit_out_its_groups_or_a_link_to_its_training_data_is_refused(runs, no_work, tmp_path):
    for out, named in ((runs / "groups.csv", "--groups"), (tmp_path / "dev.hard", "SCORES")):
        if named == "SCORES":
            os.link(runs / "scores-dev", out)
        before = out.read_bytes()
        result = invoke_cli("fit", "scores-dev", "--missing", "-1", "--groups", "groups.csv", "--no-predict",
                            "--out", str(out), cwd=runs)
        _refused(result, "--out", out, before, named)


def test_other_files_beside_a_run_are_written_as_before(runs, tmp_path):
    """Only inputs are refused: a new file in the run's folder, or a file beside a lone calibration file."""
    out = runs / "plain" / "decisions.csv"
    try:
        result = _accept(runs, "plain", out)
        assert result.returncode == 0, result.stderr
        assert out.read_text().startswith("claimed,real,probe,score,threshold,accept")
    finally:
        out.unlink(missing_ok=True)
    lone = tmp_path / "cal.json"
    shutil.copy(runs / "plain" / "calibration.json", lone)
    (tmp_path / "manifest.json").write_text("{}")  # not a run's folder: a calibration file of another name
    result = _accept(runs, str(lone), tmp_path / "manifest.json")
    assert result.returncode == 0, result.stderr


def test_the_files_of_an_artifact_are_the_loaders(runs):
    """artifact_files names what calibrate.load reads: nothing for a lone file, the folder's for a run."""
    from calibrate.cli.inputs import artifact_files

    plain = {p.name for p in artifact_files(runs / "plain")}
    assert {"calibration.json", "manifest.json", "thresholds.csv", "results.json", "report.md"} <= plain
    assert {p.name for p in artifact_files(runs / "plain" / "calibration.json")} == plain
    sharded = {p.name for p in artifact_files(runs / "sharded")}
    assert {"calibration-part00000.json", "calibration-part00001.json", "classes-part00000.json",
            "classes-part00001.json", "pooled-auto.npy", "manifest.json"} <= sharded
    (runs / "sharded" / "manifest.json").rename(runs / "moved.json")
    try:  # without its manifest, a sharded run's loader still reads its parts and pooled sample
        reports = {"models-part00000.csv", "models-part00001.csv", "thresholds-part00000.csv",
                   "thresholds-part00001.csv", "report.md", "results.json", "det.csv"}  # written, not loaded
        assert {p.name for p in artifact_files(runs / "sharded")} >= {n for n in sharded - reports
                                                                      if not n.endswith(".png")}
    finally:
        (runs / "moved.json").rename(runs / "sharded" / "manifest.json")
    assert artifact_files(runs / "scores-dev") == [] and artifact_files(runs / "nowhere") == []
