"""The score-list commands read lean (issue 32): `calibrate fit`, `evaluate` and `accept` keep a file's labels as
codes (calibrate.contract.types.CodedLabels) from the reader through calibrate.fit, Calibration.accept and calibrate.saved.assess,
and `accept` writes its decisions in blocks. On LFW's lists (5.8M / 3.8M lines, labels of 20-40 characters) they
peaked at 4.7-4.9 GB against 1.5 GB for a recipe run reading both files: a fixed-width string per attempt, copied
by every step. benchmarks/bench_cli_memory.py measures the peaks; these tests hold the mechanism and that nothing
said or written changed."""

from __future__ import annotations

import csv
import tracemalloc
import warnings
from pathlib import Path

import numpy as np
import pytest

import calibrate
from calibrate.saved.assess import assess, known_classes, verification
from calibrate.errors import CalibrateError, CalibrationError, DataError
from calibrate.contract.types import CodedLabels, factorise, same_labels
from calibrate.files.user_output import csv_text, csv_writer, write_user_file
from calibrate_test_helpers import invoke_cli


def _write_list(path: Path, classes: list[str], probes: int, seed: int = 0) -> None:
    """bob 4-column lines: ``probes`` probes, probe i of class i mod len(classes), against every class."""
    rng = np.random.default_rng(seed)
    with open(path, "w", encoding="utf-8") as fh:
        for i in range(probes):
            real = classes[i % len(classes)]
            label = f"{real}/{real}_{i // len(classes) + 1:04d}.jpg"
            for claimed in classes:
                score = rng.beta(6, 2) if claimed == real else rng.beta(2, 6)
                fh.write(f"{claimed} {real} {label} {score:.6f}\n")


def _long_names(n: int) -> list[str]:
    return [f"Firstname_Lastname_Of_Person_Number_{k:04d}" for k in range(n)]  # 40 characters, as LFW's longest


# -- the type --------------------------------------------------------------------------------------

def test_coded_labels_behave_as_their_labels():
    labels = CodedLabels.of(np.array([2, 0, 1, 2]), ["b", "a", "c"])  # codes into a file's order of appearance
    assert labels.names.tolist() == ["a", "b", "c"] and labels.tolist() == ["c", "b", "a", "c"]
    assert np.asarray(labels).tolist() == ["c", "b", "a", "c"] and labels.astype(str).tolist() == labels.tolist()
    assert labels[0] == "c" and isinstance(labels[0], str)
    assert labels[np.array([True, False, False, True])].tolist() == ["c", "c"] and labels[1:3].tolist() == ["b", "a"]
    assert len(labels) == labels.size == 4 and labels.shape == (4,) and labels.ndim == 1
    names, codes = factorise(labels[1:3])  # as np.unique: only the labels present, sorted
    assert names.tolist() == ["a", "b"] and codes.tolist() == [1, 0]
    other = CodedLabels.of(np.array([0, 1, 0, 2]), ["c", "a", "z"])  # another file's names
    assert same_labels(labels, other).tolist() == [True, False, False, False]
    assert (labels == other).tolist() == [True, False, False, False]
    assert (labels != np.array(["c", "b", "x", "c"])).tolist() == [False, False, True, False]
    assert (labels == "c").tolist() == [True, False, False, True]
    assert same_labels(CodedLabels([], []), CodedLabels([], ["a"])).tolist() == []


@pytest.mark.parametrize("codes, names", [([0, 3], ["a", "b"]), ([0], ["b", "a"]), ([0.5], ["a"])])
def test_coded_labels_refuse_what_is_not_codes_into_sorted_names(codes, names):
    with pytest.raises(DataError):
        CodedLabels(np.array(codes), names)


def test_fit_assess_and_accept_answer_the_same_for_codes_and_strings(tmp_path):
    classes = [f"c{k}" for k in range(12)]
    _write_list(tmp_path / "s.txt", classes, 240)
    from calibrate.cli.inputs import read_attempts

    claimed, real, values, _, probe = read_attempts(tmp_path / "s.txt", "auto", None, None, None, None, probes=True)
    assert isinstance(claimed, CodedLabels) and isinstance(probe, CodedLabels) and claimed.codes.itemsize == 4
    strings = np.asarray(claimed), np.asarray(real)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        coded = calibrate.fit(values, claimed, real=real, kind="similarity", estimator="class-interp")
        plain = calibrate.fit(values, *strings[:1], real=strings[1], kind="similarity", estimator="class-interp")
    assert coded.classes == plain.classes
    assert coded.thresholds(0.01) == plain.thresholds(0.01)
    assert np.array_equal(coded.accept(claimed, values, 0.01), plain.accept(strings[0], values, 0.01))
    known = known_classes(coded, claimed)
    assert np.array_equal(known, known_classes(plain, strings[0]))
    a = assess(coded, claimed[known], real[known], values[known], (0.01, 0.05))
    b = assess(plain, strings[0][known], strings[1][known], values[known], (0.01, 0.05))
    assert [r.as_dict() for r in a] == [r.as_dict() for r in b]
    assert verification("similarity", claimed, real, values)[0] == verification("similarity", *strings, values)[0]
    with pytest.raises(CalibrationError, match="'nobody' is not enrolled"):
        coded.accept(CodedLabels.of(np.array([0]), ["nobody"]), values[:1], 0.01)


def test_the_commands_hold_no_string_per_attempt(tmp_path):
    """Read, check, fit and judge a list of 40-character labels: numpy's peak per comparison stays small (it was
    over 1,000 bytes with a fixed-width string per attempt, copied by each step)."""
    from calibrate.cli.checks import check_ids
    from calibrate.cli.inputs import read_attempts

    _write_list(tmp_path / "warm.txt", _long_names(4), 8)
    _write_list(tmp_path / "s.txt", _long_names(40), 600)  # 24,000 comparisons

    def work(path: Path) -> int:
        claimed, real, values, _ = read_attempts(path, "auto", None, None, None, None)
        check_ids(claimed, real, values, "similarity", path)
        cal = calibrate.fit(values, claimed, real=real, kind="similarity", estimator="class-interp")
        known = known_classes(cal, claimed)
        assess(cal, claimed[known], real[known], values[known], (0.01,))
        return values.size

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        work(tmp_path / "warm.txt")  # imports and first-call caches are not the data's
        tracemalloc.start()
        try:
            n = work(tmp_path / "s.txt")
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert peak / n < 400, f"{peak / n:.0f} bytes per comparison"


# -- accept's decisions ----------------------------------------------------------------------------

def _reference_decisions(path: Path, cal, fpr: float, groups: dict | None, unknown: str) -> bytes:
    """The decisions as the csv module writes them, row by row (how accept wrote them before issue 32)."""
    w, text = csv_writer()
    w.writerow(["claimed", "real", "probe", "score", "threshold", "accept"] + (["group"] if groups else []))
    thresholds = cal.thresholds(fpr)
    for line in path.read_text(encoding="utf-8").splitlines():
        claimed, real, probe, score = line.split()
        held = claimed in cal
        if not held and unknown == "skip":
            continue
        t = thresholds[claimed] if held else None
        decided = held and float(score) >= t
        w.writerow([csv_text(claimed), csv_text(real), csv_text(probe), repr(float(score)),
                    "" if t is None else repr(t), "1" if decided else "0"]
                   + ([csv_text(groups.get(claimed, "unlabelled"))] if groups else []))
    return text().encode("utf-8")


@pytest.mark.parametrize("unknown", ["reject", "skip"])
def test_decisions_written_in_blocks_are_the_csv_modules_bytes(tmp_path, monkeypatch, unknown):
    classes = ["=cmd", "a,b", 'q"uote', "plain", "-1", "@x"]
    _write_list(tmp_path / "train.txt", classes, 60)
    _write_list(tmp_path / "test.txt", classes + ["stranger"], 35, seed=1)
    (tmp_path / "groups.csv").write_text('class,group\n=cmd,"g,1"\nplain,@g2\n', encoding="utf-8")
    done = invoke_cli("fit", "train.txt", "--estimator", "class-interp", "--no-predict", "--fpr", "0.05", "--out",
                      "cal.json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    monkeypatch.setattr("calibrate.cli.commands.DECISION_BLOCK", 7)  # many blocks, one of them short
    done = invoke_cli("accept", "cal.json", "test.txt", "--fpr", "0.05", "--unknown", unknown, "--groups",
                      "groups.csv", "--out", "decisions.csv", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    cal = calibrate.load(tmp_path / "cal.json")
    want = _reference_decisions(tmp_path / "test.txt", cal, 0.05, {"=cmd": "g,1", "plain": "@g2"}, unknown)
    assert (tmp_path / "decisions.csv").read_bytes() == want
    rows = list(csv.reader(want.decode().splitlines()))
    assert any(r[0] == "a,b" for r in rows) and any(r[-1] == "g,1" for r in rows)  # quoted cells read back whole


def test_written_in_blocks_the_file_is_replaced_only_when_every_block_is_written(tmp_path):
    target = tmp_path / "out.csv"
    target.write_bytes(b"before\n")
    assert write_user_file(target, (b"a\n", b"", b"b\n")) == str(target) and target.read_bytes() == b"a\nb\n"

    def failing():
        yield b"half\n"
        raise CalibrateError("stopped")

    with pytest.raises(CalibrateError, match="stopped"):
        write_user_file(target, failing())
    assert target.read_bytes() == b"a\nb\n" and [p.name for p in tmp_path.iterdir()] == ["out.csv"]
