"""Issue 19's reproductions outside the file readers and the write protocol: what the machine refuses
(disk full, out of memory, too deep) is a one-line exit 2, estimator labels stay plain file names,
numbers at the edges of floating point get an answer or a clear error, and the mistakes that used to
pass silently are refused or warned about."""

from __future__ import annotations

import errno
import warnings

import numpy as np
import pytest
from typer.testing import CliRunner

import calibrate
import calibrate.running.pipeline
from calibrate.cli.commands import app
from calibrate.errors import DataError

from calibrate_test_helpers import make_scores, score_recipe, write_recipe, write_scores

runner = CliRunner()


def _gallery(seed: int = 1, scale: float = 1.0, n_classes: int = 6) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {f"c{i}": (rng.gamma(5.0, 1.0, 200) + 20.0) * scale for i in range(n_classes)}


@pytest.fixture
def recipe(tmp_path):
    csv = write_scores(tmp_path / "s.csv", *make_scores())
    return write_recipe(tmp_path / "r.yaml", score_recipe(csv, tmp_path / "out"))


@pytest.mark.parametrize("exc, words", [
    (OSError(errno.ENOSPC, "No space left on device", "/some/out/thresholds.csv"),
     ["No space left on device", "/some/out/thresholds.csv", "free disk space"]),
    (OSError(errno.EACCES, "Permission denied", "/some/file"), ["Permission denied", "/some/file", "permissions"]),
    (MemoryError(), ["out of memory", "r.yaml"]),
    (RecursionError("maximum recursion depth exceeded"), ["nested too deeply", "r.yaml"]),
])
def test_what_the_machine_refuses_is_one_line_exit_2(recipe, monkeypatch, exc, words):
    def refuse(*args, **kwargs):
        raise exc

    monkeypatch.setattr(calibrate.running.pipeline, "run_recipe", refuse)
    result = runner.invoke(app, ["run", str(recipe), "-q"])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert all(w in lines[0] for w in words), lines[0]


def test_a_bug_is_still_exit_1_with_its_traceback(recipe, monkeypatch):
    def broken(*args, **kwargs):
        raise KeyError("a bug")

    monkeypatch.setattr(calibrate.running.pipeline, "run_recipe", broken)
    result = runner.invoke(app, ["run", str(recipe), "-q"])
    assert result.exit_code == 1 and "Traceback" in result.stderr


@pytest.mark.parametrize("name", ["a/b", "../up", "..", "/abs", "with space", "x" * 65, "", "nul\x00"])
def test_estimator_labels_must_be_plain_names(tmp_path, name):
    csv = write_scores(tmp_path / "s.csv", *make_scores())
    path = write_recipe(tmp_path / "r.yaml", score_recipe(csv, tmp_path / "out",
                                                          estimators=({"plugin": "class-interp", "name": name},)))
    result = runner.invoke(app, ["validate", str(path)])
    assert result.exit_code == 2, result.output
    assert "estimators[0].name" in result.stderr and "letters, digits" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_ncx2_grid_is_scale_equivariant_where_it_answers_and_refuses_beyond():
    """Distances times c give thresholds times c (checked against the unscaled fit, rtol 1e-9) down
    to 1e-70; at 1e-300 the squares underflow, and the error says what to do instead of failing
    inside numpy."""
    base = calibrate.fit(_gallery(), kind="distance", estimator="ncx2-grid", impostors_only=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the grid-edge note, the same at every scale
        for scale in (1e-70, 3.0, 1e70):
            scaled = calibrate.fit(_gallery(scale=scale), kind="distance", estimator="ncx2-grid", impostors_only=True)
            for cls in base.classes:
                assert scaled.threshold(cls, 0.005) == pytest.approx(scale * base.threshold(cls, 0.005), rel=1e-9)
        with pytest.raises(DataError, match=r"multiply the scores by a constant.*estimator auto"):
            calibrate.fit(_gallery(scale=1e-300), kind="distance", estimator="ncx2-grid", impostors_only=True)


def test_znorm_takes_tiny_distances_for_what_they_are():
    """1e-300-sized distances are not 'all equal': their spread underflows only when squared."""
    base = calibrate.fit(_gallery(), kind="distance", estimator="znorm", impostors_only=True)
    tiny = calibrate.fit(_gallery(scale=1e-300), kind="distance", estimator="znorm", impostors_only=True)
    for cls in base.classes:
        assert tiny.threshold(cls, 0.005) == pytest.approx(1e-300 * base.threshold(cls, 0.005), rel=1e-9)
    with pytest.raises(DataError, match="all 200 training distances are equal"), \
            pytest.warns(UserWarning, match="50% of the training impostor distances equal the smallest"):
        calibrate.fit({"a": np.full(200, 1e-300), "b": np.arange(1.0, 201.0)}, kind="distance", estimator="znorm",
                      impostors_only=True)


def test_an_upper_bound_below_the_training_scores_is_refused():
    rng = np.random.default_rng(2)
    scores = {f"c{i}": rng.uniform(0.2, 0.4, 300) for i in range(4)}
    with pytest.raises(DataError, match=r"upper: 0 is below 1200 of the 1200 training scores.*largest score the matcher"):
        calibrate.fit(scores, transform={"plugin": "similarity-to-distance", "upper": 0}, impostors_only=True)
    # a bound the scores respect (a rounding step above it aside) is used as given
    scores["c0"][0] = 1.0 + 1e-12
    cal = calibrate.fit(scores, transform={"plugin": "similarity-to-distance", "upper": 1.0}, impostors_only=True)
    assert cal.transform.fitted_state() == {"upper": 1.0}


def test_fit_warns_when_tied_distances_make_a_target_unreachable():
    tied = {"a": np.ones(100), "b": np.ones(100)}
    with pytest.warns(UserWarning, match=r"100% of the training impostor distances equal the smallest one.*5%"):
        calibrate.fit(tied, kind="distance", estimator="class-interp", targets=(0.05,), impostors_only=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # distinct distances: no warning
        calibrate.fit(_gallery(), kind="distance", estimator="class-interp", targets=(0.05,), impostors_only=True)


# ---- readers (items 5, 6, 8, 10) -----------------------------------------------------------------------

@pytest.mark.parametrize("reader", ["python", "pyarrow"])
def test_a_score_with_an_underscore_is_not_read_as_a_number(tmp_path, reader):
    from pathlib import Path

    from calibrate.files.score_lists import read_comparisons

    path = Path(tmp_path / "s.txt")
    path.write_text("s1 s2 s2/a 0.25\ns1 s3 s3/a 0_5\n")
    with pytest.raises(DataError, match=r"line 2: score '0_5' is not a number.*no underscores"):
        read_comparisons(path, reader=reader)
    path.write_text("s1 s2 s2/a 0.25\ns1 s3 s3/a \u0665\n")  # an Arabic-Indic five: float() reads it
    with pytest.raises(DataError, match=r"line 2: score"):
        read_comparisons(path, reader=reader)


def test_a_matrix_cell_with_an_underscore_is_refused_naming_line_and_column(tmp_path):
    path = tmp_path / "m.csv"
    path.write_text(",g1,g2\np1,0.5,0_5\n")
    recipe = write_recipe(tmp_path / "r.yaml", {"version": 1, "data": {"plugin": "score-matrix", "path": str(path)}})
    result = runner.invoke(app, ["run", str(recipe), "-q"])
    assert result.exit_code == 2 and "line 2, column 3 (g2): '0_5' is not a number" in result.stderr


@pytest.mark.parametrize("reader", ["python", "pyarrow"])
def test_a_label_over_the_budget_is_refused_naming_its_line(tmp_path, reader):
    from pathlib import Path

    from calibrate.files.untrusted import MAX_LABEL
    from calibrate.files.score_lists import read_comparisons

    path = Path(tmp_path / "s.txt")
    path.write_text("s1 s2 s2/a 0.25\n" + "x" * (MAX_LABEL + 1) + " s1 s1/a 0.5\n")
    with pytest.raises(DataError, match=rf"line 2: a claimed class of {MAX_LABEL + 1:,} characters"):
        read_comparisons(path, reader=reader)


def test_an_npz_header_that_claims_more_than_the_file_holds_is_refused(tmp_path):
    import io
    import zipfile

    from calibrate_builtins.datasets.npz_patterns import NpzPatterns

    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<f8", "fortran_order": False, "shape": (400_000_000, 8)})
    labels = io.BytesIO()
    np.save(labels, np.array(["a"]))
    with zipfile.ZipFile(tmp_path / "lie.npz", "w") as z:
        z.writestr("X.npy", header.getvalue() + b"\0" * 64)
        z.writestr("labels.npy", labels.getvalue())
        z.writestr("sets.npy", labels.getvalue())
    with pytest.raises(DataError, match=r"header claims shape \(400000000, 8\).*but the file holds 64"):
        NpzPatterns(path=tmp_path / "lie.npz").load()


@pytest.mark.skipif(not hasattr(__import__("os"), "mkfifo"), reason="no FIFOs on this platform")
def test_fifos_named_like_inputs_never_block(tmp_path):
    import os
    import signal

    from PIL import Image

    rng = np.random.default_rng(0)
    for c in "ab":
        for s in ("s1", "s2"):
            (tmp_path / "imgs" / c / s).mkdir(parents=True)
            for k in range(2):
                Image.fromarray((rng.random((8, 8)) * 255).astype("uint8")).save(tmp_path / "imgs" / c / s / f"{k}.pgm")
    os.mkfifo(tmp_path / "imgs" / "a" / "s1" / "x.pgm")
    os.mkfifo(tmp_path / "recipe.yaml")
    os.mkfifo(tmp_path / "scores.txt")
    images = write_recipe(tmp_path / "images.yaml", {"version": 1, "data": {"plugin": "image-sets", "path": str(tmp_path / "imgs")},
                                                     "estimators": [{"plugin": "generic-interp"}],
                                                     "evaluation": {"targets": [0.2]}})
    scores = write_recipe(tmp_path / "scores.yaml", {"version": 1, "data": {"plugin": "score-list",
                                                                            "path": str(tmp_path / "scores.txt")}})
    signal.alarm(60)  # a regression hangs: fail instead
    try:
        result = runner.invoke(app, ["run", str(images), "-q", "--out", str(tmp_path / "out")])
        assert result.exit_code == 0 and "a/s1/x.pgm" in result.stderr  # passed over, named
        result = runner.invoke(app, ["validate", str(tmp_path / "recipe.yaml")])
        assert result.exit_code == 2 and "is a FIFO, not a regular file" in result.stderr
        result = runner.invoke(app, ["validate", str(scores)])
        assert result.exit_code == 2 and "is a FIFO, not a regular file" in result.stderr
    finally:
        signal.alarm(0)


def test_an_integer_of_hundreds_of_digits_is_one_line(tmp_path):
    path = tmp_path / "big.yaml"
    path.write_text("version: 1\ndata: {plugin: synthetic-impostors, classes: " + "9" * 401 + "}\n")
    result = runner.invoke(app, ["validate", str(path)])
    assert result.exit_code == 2 and "data.classes" in result.stderr and "too large" in result.stderr
    path.write_text("version: 1\ndata: {plugin: synthetic-impostors, classes: " + "9" * 5000 + "}\n")
    result = runner.invoke(app, ["validate", str(path)])
    assert result.exit_code == 2 and len(result.stderr.strip().splitlines()) == 1
