"""Files the user names for one output (`accept --out`, `fit --out`, `Calibration.save`; issue 19,
item 3): a device, FIFO or symbolic link is written through or refused, never replaced by a regular
file; `-` is standard output; a full device is one line, exit 2."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import calibrate
from calibrate.cli.commands import app
from calibrate.errors import CalibrateError
from calibrate.files.user_output import write_user_file

runner = CliRunner()
fifo_only = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    """A small calibration and a score list to decide (bob 4-column)."""
    tmp = tmp_path_factory.mktemp("userout")
    rng = np.random.default_rng(3)
    names = [f"s{k}" for k in range(12)]
    lines = [f"{c} {r} {r}/p{k} {rng.beta(6, 2) if c == r else rng.beta(2, 5):.5f}\n"
             for r in names for k in range(3) for c in names]
    scores = tmp / "scores"
    scores.write_text("".join(lines))
    cal = tmp / "cal.json"
    assert runner.invoke(app, ["fit", str(scores), "--estimator", "class-interp", "--no-predict", "--fpr", "0.05",
                               "--out", str(cal)]).exit_code == 0
    return cal, scores


def _accept(fitted, out) -> object:
    cal, scores = fitted
    return runner.invoke(app, ["accept", str(cal), str(scores), "--fpr", "0.05", "--out", str(out)])


def test_out_dash_is_standard_output_with_the_summary_on_stderr(fitted):
    result = _accept(fitted, "-")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[0] == "claimed,real,probe,score,threshold,accept"
    assert "wrote standard output" in result.stderr and "accepted" not in result.stdout
    assert not Path("-").exists()


def test_a_character_device_is_written_through_not_replaced(fitted):
    assert _accept(fitted, "/dev/null").exit_code == 0
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full here")
def test_a_full_device_is_one_line_exit_2_and_stays_a_device(fitted):
    result = _accept(fitted, "/dev/full")
    assert result.exit_code == 2
    (line,) = result.stderr.strip().splitlines()
    assert "/dev/full" in line and "No space left" in line
    assert stat.S_ISCHR(os.lstat("/dev/full").st_mode)


def test_a_symbolic_link_stays_a_link_and_its_file_is_replaced(fitted, tmp_path):
    real = tmp_path / "real.csv"
    real.write_text("old\n")
    link = tmp_path / "link.csv"
    link.symlink_to(real)
    assert _accept(fitted, link).exit_code == 0
    assert link.is_symlink() and real.read_text().startswith("claimed,real,probe,score")
    dangling = tmp_path / "dangling.csv"
    dangling.symlink_to(tmp_path / "nowhere" / "x.csv")
    result = _accept(fitted, dangling)
    assert result.exit_code == 2 and "symbolic link to nothing" in result.stderr and dangling.is_symlink()


@fifo_only
def test_a_fifo_without_a_reader_is_refused_at_once_and_with_one_is_written(fitted, tmp_path):
    fifo = tmp_path / "decisions.pgm"
    os.mkfifo(fifo)
    result = _accept(fitted, fifo)  # would block forever if opened for writing without O_NONBLOCK
    assert result.exit_code == 2 and "no process reads" in result.stderr
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    got = []
    reader = threading.Thread(target=lambda: got.append(Path(fifo).read_bytes()))
    reader.start()
    try:
        for _ in range(200):  # until the reader has the FIFO open
            try:
                write_user_file(fifo, b"through the pipe\n")
                break
            except CalibrateError:
                threading.Event().wait(0.01)
    finally:
        reader.join(timeout=10)
    assert got == [b"through the pipe\n"] and stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_a_folder_is_refused_and_save_goes_the_same_way(fitted, tmp_path):
    result = _accept(fitted, tmp_path)
    assert result.exit_code == 2 and "it is a folder" in result.stderr
    cal = calibrate.load(fitted[0])
    with pytest.raises(CalibrateError, match="it is a folder"):
        cal.save(tmp_path)
    link = tmp_path / "cal-link.json"
    target = tmp_path / "cal-target.json"
    target.write_text("{}")
    link.symlink_to(target)
    cal.save(link)
    assert link.is_symlink() and calibrate.load(target).classes == cal.classes


# ---- issue 19 audit: D4, T18, S9, T13, T14, S8 ----------------------------------------------------

def test_a_planted_link_at_a_guessable_temporary_name_is_never_followed(tmp_path):
    """D4: the temporary file beside the target is created exclusively under a random name."""
    victim = tmp_path / "victim.txt"
    victim.write_text("victim\n")
    target = tmp_path / "cal.json"
    for pid in range(os.getpid() - 2, os.getpid() + 3):  # the old name: .NAME.tmp-PID
        (tmp_path / f".cal.json.tmp-{pid}").symlink_to(victim)
    write_user_file(target, b"new\n")
    assert victim.read_text() == "victim\n"
    assert not target.is_symlink() and target.read_bytes() == b"new\n"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".cal.json.tmp-") and not p.is_symlink()]


@pytest.mark.parametrize("path", ["out/c\0.json", b"c.json", 5])
def test_save_to_a_path_that_cannot_be_a_file_name_is_a_calibrate_error(fitted, tmp_path, path, monkeypatch):
    """T18: a NUL byte, a bytes path or no path at all: CalibrateError, not ValueError/TypeError."""
    cal = calibrate.load(fitted[0])
    monkeypatch.chdir(tmp_path)
    with pytest.raises(CalibrateError, match="cannot save the calibration"):
        cal.save(path)
    assert list(tmp_path.iterdir()) == []


def test_an_output_equal_to_an_input_is_refused(fitted, tmp_path):
    """S9: accept --out the scores or the calibration, fit --out its training data: refused, inputs kept."""
    cal, scores = fitted
    before = {p: p.read_bytes() for p in (cal, scores)}
    for out in (scores, cal):
        result = _accept(fitted, out)
        assert result.exit_code == 2 and "this command's input" in result.stderr, result.output
    link = tmp_path / "same.txt"
    link.symlink_to(scores)
    assert _accept(fitted, link).exit_code == 2
    result = runner.invoke(app, ["fit", str(scores), "--no-predict", "--out", str(scores)])
    assert result.exit_code == 2 and "this command's input" in result.stderr
    assert {p: p.read_bytes() for p in (cal, scores)} == before


def test_an_out_ending_in_a_slash_names_a_folder_not_a_file(fitted, tmp_path):
    """S9: `--out newdir/` never makes a file named newdir."""
    for out in (f"{tmp_path}/newdir/", f"{tmp_path}/"):
        result = _accept(fitted, out)
        assert result.exit_code == 2 and "it names a folder" in result.stderr
        result = runner.invoke(app, ["fit", str(fitted[1]), "--no-predict", "--out", out])
        assert result.exit_code == 2 and "it names a folder" in result.stderr
    assert not (tmp_path / "newdir").exists()


def test_out_dash_with_standard_output_closed_is_one_line(fitted, monkeypatch):
    """T14: sys.stdout is None when the process starts without it: a CalibrateError, not AttributeError."""
    monkeypatch.setattr("sys.stdout", None)
    with pytest.raises(CalibrateError, match="standard output.*closed"):
        write_user_file("-", b"x\n")


def _cli_with_stdout(args: list[str], how: str):
    import subprocess

    from calibrate_test_helpers import CALIBRATE

    if how == "closed":
        return subprocess.run(["sh", "-c", '"$0" "$@" >&-', str(CALIBRATE), *args], stderr=subprocess.PIPE,
                              text=True, timeout=120)
    with open("/dev/full", "w") as full:
        return subprocess.run([str(CALIBRATE), *args], stdout=full, stderr=subprocess.PIPE, text=True, timeout=120)


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full here")
@pytest.mark.parametrize("how", ["full", "closed"])
@pytest.mark.parametrize("command", ["version", "threshold", "accept-dash"])
def test_lost_standard_output_is_exit_2_with_one_line_never_a_traceback(fitted, how, command):
    """T13, S8: a command whose printed result could not be written does not exit 0, nor with a traceback."""
    cal, scores = fitted
    args = {"version": ["--version"],
            "threshold": ["threshold", str(cal), "--class", "s3", "--fpr", "0.05"],
            "accept-dash": ["accept", str(cal), str(scores), "--fpr", "0.05", "--out", "-"]}[command]
    done = _cli_with_stdout(args, how)
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("error: ") and "Traceback" not in done.stderr
