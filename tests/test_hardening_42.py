"""Issue 42's reproductions (hardening, round three), each on a small run of its own: a folder (or FIFO) where
calibrate reads a file, a packed array declaring more values than its state, saved numbers impossible for the
file's own transform and training record, a cohort file whose probe rows name another real class, user text as
HTML in report.md, and ``missing: .nan``."""

from __future__ import annotations

import base64
import json
import os
import signal
import shutil
import tracemalloc
import zlib

import numpy as np
import pytest
from typer.testing import CliRunner

import calibrate
from calibrate.cli.commands import app
from calibrate.contract.packed import ENCODING, packed, unpacked
from calibrate.errors import CalibrationError, DataError
from calibrate.saved.json_format import dumps_artifact

from calibrate_test_helpers import make_scores, score_recipe, write_recipe, write_scores

runner = CliRunner()


def _one_line(result, *words) -> str:
    """The single ``error:`` line of an exit 2 (no traceback), holding every one of ``words``."""
    assert result.exit_code == 2, (result.exit_code, result.stderr, result.exception)
    (line,) = [l for l in result.stderr.splitlines() if l.strip()]
    assert line.startswith("error: ") and all(w in line for w in words), line
    return line


@pytest.fixture(scope="module")
def plain_run(tmp_path_factory):
    """A finished run (generic-interp, class-interp, auto) over a small score matrix: (folder, recipe, its output)."""
    folder = tmp_path_factory.mktemp("plain")
    csv = write_scores(folder / "s.csv", *make_scores(n_classes=8, probes_per_class=6))
    recipe = write_recipe(folder / "r.yaml", score_recipe(
        csv, folder / "out", estimators=({"plugin": "generic-interp"}, {"plugin": "class-interp"}, {"plugin": "auto"}),
        targets=(0.05, 0.02)) | {"output": {"dir": str(folder / "out"), "plots": False}})
    result = runner.invoke(app, ["run", str(recipe), "-q"])
    assert result.exit_code == 0, result.stderr
    return folder, recipe, folder / "out"


def _attempts(folder) -> str:
    path = folder / "attempts.txt"
    path.write_text("id01 id02 p1 0.4\nid01 id01 p2 0.9\n")
    return str(path)


# ---- 1. a folder (or FIFO) where a file is read: one line naming it --------------------------------------------

@pytest.mark.parametrize("what", ["manifest", "journal"])
@pytest.mark.parametrize("kind", ["folder", "fifo"])
def test_a_folder_or_fifo_where_the_output_folder_has_a_file_is_one_line(tmp_path, plain_run, what, kind):
    folder, recipe, out = plain_run
    target = tmp_path / "out"
    shutil.copytree(out, target)
    place = target / "manifest.json" if what == "manifest" else target / ".calibrate-staging-x" / ".journal.json"
    if what == "manifest":
        place.unlink()
    place.parent.mkdir(exist_ok=True)
    os.mkdir(place) if kind == "folder" else os.mkfifo(place)
    signal.alarm(60)  # a regression that blocks on the FIFO fails instead of hanging
    try:
        result = runner.invoke(app, ["run", str(recipe), "--out", str(target), "-q"])
    finally:
        signal.alarm(0)
    _one_line(result, str(place), "a folder" if kind == "folder" else "a FIFO")
    assert place.exists() and (target / "thresholds.csv").read_bytes() == (out / "thresholds.csv").read_bytes()


@pytest.mark.parametrize("role", ["recipe", "groups", "scores", "calibration", "attempts"])
def test_a_folder_given_as_any_input_file_is_one_line_naming_it(tmp_path, plain_run, role):
    folder, recipe, out = plain_run
    bad = tmp_path / "a-folder"
    bad.mkdir()
    doc = json.loads(json.dumps(__import__("yaml").safe_load(recipe.read_text())))
    doc["output"]["dir"] = str(tmp_path / "o")
    if role == "groups":
        doc["data"]["groups"] = str(bad)
    elif role == "scores":
        doc["data"]["path"] = str(bad)
    mine = write_recipe(tmp_path / "r.yaml", doc)
    command = {"recipe": ["validate", str(bad)], "groups": ["validate", str(mine)], "scores": ["validate", str(mine)],
               "calibration": ["threshold", str(bad / "calibration.json"), "--class", "id01", "--fpr", "0.05"],
               "cohort": ["accept", str(out), _attempts(tmp_path), "--fpr", "0.05", "--estimator", "auto",
                          "--cohort", str(bad), "--out", str(tmp_path / "d.csv")],
               "attempts": ["accept", str(out), str(bad), "--fpr", "0.05", "--estimator", "auto",
                            "--out", str(tmp_path / "d.csv")]}[role]
    if role == "calibration":
        (bad / "calibration.json").mkdir()
    _one_line(runner.invoke(app, command), "holds no calibration.json" if role == "calibration" else "a folder")


# ---- 2. a packed array is bounded by its state before it is inflated ---------------------------------------------

def _deflated_zeros(count: int) -> str:
    """Packed data of ``count`` zero bytes (every difference 0 bytes long), as a deflate bomb holds them."""
    z = zlib.compressobj(6)
    block = bytes(1 << 22)
    parts = [z.compress(block[:min(1 << 22, count - k)]) for k in range(0, count, 1 << 22)] + [z.flush()]
    return base64.b64encode(b"".join(parts)).decode("ascii")


def test_a_packed_array_declaring_more_values_than_its_state_is_refused_before_inflating(tmp_path, plain_run):
    """Issue 42's bomb, smaller: generic-interp's pooled sample declares 10**8 values (deflated zeros, digest
    recomputed) where the state's n_pooled says a few hundred: refused naming the field, nothing inflated."""
    _, _, out = plain_run
    doc = json.loads((out / "calibration.json").read_text())
    state = doc["estimators"]["generic-interp"]["state"]
    state["pooled"] = {"encoding": ENCODING, "count": 10**8, "data": _deflated_zeros(10**8)}
    path = tmp_path / "bomb.json"
    path.write_text(dumps_artifact(doc))
    tracemalloc.start()
    try:
        with pytest.raises(CalibrationError, match=rf"state\.n_pooled is {state['n_pooled']}: must be at least the "
                                                   r"100,000,000 pooled values"):
            calibrate.load(path, "generic-interp")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 32 << 20  # the file's text and its JSON: far from the 800 MB the count declares


def test_a_packed_count_that_lies_is_found_with_a_few_mb_inflated():
    """A count within the state's size whose data inflates to far more: inflation stops at what the count allows."""
    value = {"encoding": ENCODING, "count": 5000, "data": _deflated_zeros(10**8)}
    tracemalloc.start()
    try:
        with pytest.raises(DataError, match="state.pooled data does not hold the 5000 values its count declares"):
            unpacked(value, "state.pooled", at_most=5000)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 << 20
    with pytest.raises(DataError, match="declares 5,000 values, but the state says it holds at most 4,999"):
        unpacked(value, "state.pooled", at_most=4999)


def test_packed_arrays_unpack_exactly_across_chunks():
    """Streaming in chunks gives every float back bit for bit (the running sum carried from chunk to chunk)."""
    rng = np.random.default_rng(42)
    for values in (np.sort(rng.gamma(2.0, 1.0, (1 << 20) + 17)), rng.normal(size=2 * (1 << 20) + 3),
                   np.round(np.sort(rng.random(1 << 20)), 4)):
        assert unpacked(packed(values), "x").tobytes() == values.tobytes()
