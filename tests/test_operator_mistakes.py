"""Issue 31, items 5 and 6: a newcomer's mistakes that passed silently, and messages that pointed the wrong way.

Each reproduction of the issue is a test here: the command's exit code, its one `error:` line (or the note) and
what it names, and that nothing was written when it was refused."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import calibrate
from calibrate.cli.commands import app
from calibrate.errors import DataError

from calibrate_test_helpers import write_recipe

runner = CliRunner()
FIT = ["--estimator", "class-interp", "--no-predict"]


def _lines(seed: int, subjects: int = 25, probes: int = 5, scale: float = 1.0, prefix: str = "",
           real_prefix: str = "") -> list[str]:
    """bob 4-column lines: every probe of every subject against every subject (similarities in [0, 1])."""
    rng = np.random.default_rng(seed)
    names = [f"{k:03d}" for k in range(subjects)]
    out = []
    for real in names:
        for p in range(probes):
            for claimed in names:
                score = rng.beta(6, 2) if claimed == real else rng.beta(2, 5)
                out.append(f"{prefix}{claimed} {real_prefix}{real} {real}/{p} {scale * score:.6g}\n")
    return out


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(lines), encoding="ascii")
    return path


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    """(calibration fitted by `calibrate fit` on a dev file, an eval file of the same classes, the folder)."""
    tmp = tmp_path_factory.mktemp("mistakes")
    dev = _write(tmp / "dev", _lines(1))
    ev = _write(tmp / "eval", _lines(2))
    cal = tmp / "cal.json"
    result = runner.invoke(app, ["fit", str(dev), *FIT, "--out", str(cal)])
    assert result.exit_code == 0, result.output
    return cal, ev, tmp


def _error(result) -> str:
    """The command's one error line (exit 2, nothing else on stderr, no traceback)."""
    assert result.exit_code == 2, (result.exit_code, result.output)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


def _notes(result) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.startswith("note: ")]


# ---- item 5: claimed and real ids spelled differently ----------------------------------------------------------


def test_fit_refuses_ids_that_never_coincide_naming_both_spellings(tmp_path):
    dev = _write(tmp_path / "dev", _lines(3, real_prefix="cfp"))  # claimed 001, real cfp001
    line = _error(runner.invoke(app, ["fit", str(dev), *FIT, "--out", str(tmp_path / "c.json")]))
    assert "no claimed id is ever a probe's real id" in line and "'000'" in line and "'cfp000'" in line
    assert "score apart from the others, as genuine ones do" in line
    assert "--claimed-column" in line and "`" not in line  # the command line's words, no recipe key
    assert not (tmp_path / "c.json").exists()
    with pytest.raises(DataError, match="no claimed id is ever a probe's real id.*real="):
        rows = [line.split() for line in _lines(3, real_prefix="cfp")]
        calibrate.fit(np.array([float(r[3]) for r in rows]), np.array([r[0] for r in rows]),
                      real=np.array([r[1] for r in rows]), kind="similarity", estimator="class-interp")


def test_impostor_only_data_whose_ids_never_coincide_is_a_note_not_an_error(tmp_path):
    """Probes of other people than the enrolled are legitimate: without genuine-looking scores among the
    comparisons spelled alike (here: none is), the ids that never coincide are said, not refused."""
    rng = np.random.default_rng(22)
    lines = [f"{c:03d} visitor{p} v{p}/0 {rng.beta(2, 5):.5f}\n" for p in range(60) for c in range(25)]
    dev = _write(tmp_path / "dev", lines)
    result = runner.invoke(app, ["fit", str(dev), *FIT, "--fpr", "0.01", "--out", str(tmp_path / "c.json")])
    assert result.exit_code == 0, result.output
    assert any("no claimed id is ever a probe's real id" in n and "taken for an impostor's" in n
               for n in _notes(result)), result.stderr


def test_few_ids_in_common_is_a_note(tmp_path):
    lines = _lines(4, real_prefix="cfp")
    lines += [f"{c:03d} 000 000/x 0.9\n" if c == 0 else f"{c:03d} 000 000/x 0.2\n" for c in range(25)]
    dev = _write(tmp_path / "dev", lines)
    result = runner.invoke(app, ["fit", str(dev), *FIT, "--out", str(tmp_path / "c.json")])
    assert result.exit_code == 0, result.output
    assert any("only 1 of the 25 claimed ids are ever a probe's real id" in n for n in _notes(result)), result.stderr


def test_evaluate_refuses_and_accept_notes_ids_that_never_coincide(fitted, tmp_path):
    cal, _, _ = fitted
    ev = _write(tmp_path / "ev", _lines(5, real_prefix="cfp"))
    line = _error(runner.invoke(app, ["evaluate", str(cal), str(ev)]))
    assert "'cfp000'" in line and "'000'" in line
    out = tmp_path / "d.csv"
    result = runner.invoke(app, ["accept", str(cal), str(ev), "--fpr", "0.01", "--out", str(out)])
    assert result.exit_code == 0, result.output  # decisions need no real ids: said, not refused
    assert any("no claimed id is ever a probe's real id" in n for n in _notes(result)), result.stderr
    assert out.exists()


def test_a_recipe_run_refuses_ids_that_never_coincide(tmp_path):
    dev = _write(tmp_path / "dev", _lines(6, real_prefix="cfp"))
    ev = _write(tmp_path / "ev", _lines(7, real_prefix="cfp"))
    recipe = write_recipe(tmp_path / "r.yaml", {
        "version": 1, "data": {"plugin": "score-list", "train": str(dev), "test": str(ev), "kind": "similarity"},
        "estimators": [{"plugin": "class-interp"}], "evaluation": {"targets": [0.01], "prediction": False},
        "output": {"dir": str(tmp_path / "out"), "plots": False}})
    line = _error(runner.invoke(app, ["run", str(recipe), "-q"]))
    assert "no claimed id is ever a probe's real id" in line and "'cfp000'" in line
    assert not (tmp_path / "out").exists()


# ---- item 5: scores on another scale ----------------------------------------------------------------------------


def test_accept_and_evaluate_refuse_scores_on_another_scale(fitted, tmp_path):
    cal, _, _ = fitted
    doc = json.loads(cal.read_text())
    low, high = doc["training"]["scores"]
    assert 0 < low < high < 1  # the fit recorded its training scores (similarities in [0, 1])
    ev = _write(tmp_path / "ev", _lines(8, scale=100.0))
    out = tmp_path / "d.csv"
    line = _error(runner.invoke(app, ["accept", str(cal), str(ev), "--fpr", "0.01", "--out", str(out)]))
    assert "far outside the calibration's training scores" in line and "another scale" in line
    assert f"[{low:.6g}, {high:.6g}]" in line
    assert not out.exists()
    line = _error(runner.invoke(app, ["evaluate", str(cal), str(ev)]))
    assert "another scale" in line


def test_a_few_scores_far_outside_are_a_note(fitted, tmp_path):
    cal, ev, _ = fitted
    lines = ev.read_text().splitlines(keepends=True)
    lines[1] = " ".join(lines[1].split()[:3] + ["40"]) + "\n"  # one score far above the training range
    ev2 = _write(tmp_path / "ev", lines)
    result = runner.invoke(app, ["accept", str(cal), str(ev2), "--fpr", "0.01", "--out", str(tmp_path / "d.csv")])
    assert result.exit_code == 0, result.output
    assert any("1 of the 3,125 scores" in n and "far outside" in n for n in _notes(result)), result.stderr


def test_a_run_records_its_training_scores(tmp_path):
    dev = _write(tmp_path / "dev", _lines(9))
    ev = _write(tmp_path / "ev", _lines(10))
    recipe = write_recipe(tmp_path / "r.yaml", {
        "version": 1, "data": {"plugin": "score-list", "train": str(dev), "test": str(ev), "kind": "similarity"},
        "estimators": [{"plugin": "class-interp"}], "evaluation": {"targets": [0.01], "prediction": False},
        "output": {"dir": str(tmp_path / "out"), "plots": False}})
    assert runner.invoke(app, ["run", str(recipe), "-q"]).exit_code == 0
    scores = [float(line.split()[3]) for line in dev.read_text().splitlines()]
    training = json.loads((tmp_path / "out" / "calibration.json").read_text())["training"]
    saved = training["scores"]
    assert saved == pytest.approx([min(scores), max(scores)], rel=1e-12) and training["scores_genuine"] is True
    assert calibrate.load(tmp_path / "out").training_scores[:2] == pytest.approx(tuple(saved), rel=1e-12)


@pytest.mark.parametrize("kind", ["distance", "similarity"])
def test_genuine_attempts_beyond_an_impostor_only_range_are_a_note_not_another_scale(kind, tmp_path):
    """A calibration fitted on impostor scores alone (calibrate.fit of a mapping) never saw where genuine scores lie:
    a batch of mostly genuine attempts of a strong matcher beyond that range on the genuine side is noted, not
    refused as another scale (review of issue 31); the same batch on the impostor side, or scaled, still is."""
    rng = np.random.default_rng(31)
    impostor = {f"c{i}": rng.uniform(0.42, 0.52, 200) for i in range(20)}  # iris-like Hamming distances
    sign = 1.0 if kind == "distance" else -1.0
    cal = calibrate.fit({c: sign * v for c, v in impostor.items()}, kind=kind, predict=False, targets=(0.01,),
                        impostors_only=True)
    assert cal.training_scores[2] is False
    path = cal.save(tmp_path / "cal.json")
    genuine_side = sign * rng.uniform(0.05, 0.25, 90)  # far beyond the range, where genuine attempts lie
    impostor_side = sign * rng.uniform(0.9, 1.0, 90)
    for values, refused in ((genuine_side, False), (impostor_side, True)):
        lines = "".join(f"c{k % 20} c{k % 20} p{k} {v:.4f}\n" for k, v in enumerate(values))
        lines += "".join(f"c{k % 20} c{(k + 1) % 20} q{k} {sign * 0.47:.4f}\n" for k in range(10))
        scores = _write(tmp_path / f"s{refused}", [lines])
        result = runner.invoke(app, ["accept", str(path), str(scores), "--fpr", "0.01", "--out", str(tmp_path / "d.csv")])
        if refused:
            assert result.exit_code == 2 and "another scale" in result.stderr, result.stderr
        else:
            assert result.exit_code == 0, result.stderr
            assert any("may be genuine attempts" in n for n in _notes(result)), result.stderr


def test_a_damaged_training_range_is_refused_on_load(fitted, tmp_path):
    cal, _, _ = fitted
    doc = json.loads(cal.read_text())
    doc["training"]["scores"] = [1.0, 0.0]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    line = _error(runner.invoke(app, ["threshold", str(bad), "--class", "000", "--fpr", "0.01"]))
    assert "training.scores" in line


# ---- item 5: one rule for repeated lines -----------------------------------------------------------------------


def test_repeated_lines_are_refused_alike_by_fit_evaluate_accept_and_a_recipe(fitted, tmp_path):
    cal, ev, _ = fitted
    lines = _lines(11)
    dup = _write(tmp_path / "dup", lines + lines[:1])
    want = f"{dup}, lines 1 and {len(lines) + 1}: probe '000/0' is compared with claimed class '000' twice"
    said = [_error(runner.invoke(app, ["fit", str(dup), *FIT, "--out", str(tmp_path / "c.json")])),
            _error(runner.invoke(app, ["evaluate", str(cal), str(dup)])),
            _error(runner.invoke(app, ["accept", str(cal), str(dup), "--fpr", "0.01", "--out", str(tmp_path / "d")]))]
    recipe = write_recipe(tmp_path / "r.yaml", {
        "version": 1, "data": {"plugin": "score-list", "train": str(dup), "test": str(ev), "kind": "similarity"},
        "estimators": [{"plugin": "class-interp"}], "output": {"dir": str(tmp_path / "out"), "plots": False}})
    said.append(_error(runner.invoke(app, ["run", str(recipe), "-q"])))
    for line in said:
        assert want in line, line
    assert not any((tmp_path / name).exists() for name in ("c.json", "d", "out"))


# ---- item 5: another gallery's calibration -------------------------------------------------------------------


def test_evaluate_and_accept_refuse_another_gallerys_calibration(fitted, tmp_path):
    cal, _, _ = fitted
    other = _write(tmp_path / "other", _lines(12, prefix="g", real_prefix="g"))
    line = _error(runner.invoke(app, ["evaluate", str(cal), str(other)]))
    assert "none of its 25 claimed classes" in line and "'g000'" in line and "'000'" in line
    for unknown in ("reject", "skip"):
        line = _error(runner.invoke(app, ["accept", str(cal), str(other), "--fpr", "0.01", "--unknown", unknown,
                                          "--out", str(tmp_path / "d.csv")]))
        assert "another gallery" in line
    assert not (tmp_path / "d.csv").exists()


def test_evaluate_counts_the_classes_it_leaves_out(fitted, tmp_path):
    cal, ev, _ = fitted
    extra = _write(tmp_path / "ev", ev.read_text().splitlines(keepends=True)
                   + ["stranger 000 000/s 0.4\n", "alien 001 001/s 0.3\n"])
    result = runner.invoke(app, ["evaluate", str(cal), str(extra)])
    assert result.exit_code == 0, result.output
    assert any("2 attempt(s) claim classes the calibration does not hold (2 class(es): 'alien', 'stranger')" in n
               for n in _notes(result)), result.stderr


# ---- item 5: one rule for targets below what the data reach -------------------------------------------------


def test_a_target_below_one_over_n_is_refused_alike_unless_allowed(fitted, tmp_path):
    cal, ev, tmp = fitted
    out = tmp_path / "c.json"
    for args in (["fit", str(tmp / "dev"), *FIT, "--fpr", "1e-9", "--out", str(out)],
                 ["threshold", str(cal), "--class", "000", "--fpr", "1e-9"],
                 ["accept", str(cal), str(ev), "--fpr", "1e-9", "--out", str(tmp_path / "d.csv")]):
        line = _error(runner.invoke(app, args))
        assert "target FPR 1e-09 is below 1/N of the 3,000 training impostor distances" in line, line
        assert "give --allow-extrapolation" in line
    assert not out.exists() and not (tmp_path / "d.csv").exists()
    fitted_anyway = runner.invoke(app, ["fit", str(tmp / "dev"), *FIT, "--fpr", "1e-9", "--allow-extrapolation",
                                        "--out", str(out)])
    assert fitted_anyway.exit_code == 0 and any("below 1/N" in n for n in _notes(fitted_anyway))
    decided = runner.invoke(app, ["accept", str(out), str(ev), "--fpr", "1e-9", "--allow-extrapolation",
                                  "--out", str(tmp_path / "d.csv")])
    assert decided.exit_code == 0 and any("below 1/N" in n for n in _notes(decided)), decided.output


def test_the_default_targets_follow_the_same_rule(tmp_path):
    small = _write(tmp_path / "small", _lines(13, subjects=10, probes=2))  # 180 impostors: 1/N = 0.0056
    line = _error(runner.invoke(app, ["fit", str(small), *FIT, "--out", str(tmp_path / "c.json")]))
    assert "one of the default targets: give --fpr" in line


# ---- item 5: `evaluation:` that reads as nothing -------------------------------------------------------------


@pytest.mark.parametrize("key, value", [("evaluation", "-0.0"), ("evaluation", "''"), ("evaluation", "0"),
                                        ("evaluation", "false"), ("evaluation", "[]"), ("estimators", "[]"),
                                        ("transform", "false"), ("executor", "0")])
def test_a_section_that_reads_as_nothing_is_refused(fitted, tmp_path, key, value):
    _, ev, _ = fitted
    recipe = tmp_path / "r.yaml"
    recipe.write_text(f"version: 1\ndata: {{plugin: score-list, path: {ev}}}\n{key}: {value}\n")
    line = _error(runner.invoke(app, ["validate", str(recipe)]))
    assert line.startswith(f"error: {key} in {recipe}: `{key}:` is ") and "leave the key out" in line


def test_an_empty_evaluation_section_is_the_default(fitted, tmp_path):
    _, ev, _ = fitted
    recipe = tmp_path / "r.yaml"
    recipe.write_text(f"version: 1\ndata: {{plugin: score-list, path: {ev}}}\nevaluation:\n")
    assert runner.invoke(app, ["validate", str(recipe)]).exit_code == 0


# ---- item 6: messages that name the real cause, in the caller's words ----------------------------------------


def test_a_header_line_in_a_bob_file_is_named(tmp_path):
    path = _write(tmp_path / "dev", ["claimed_id real_id test_label score\n"] + _lines(14))
    for extra in ([], ["--format", "4-column"]):
        line = _error(runner.invoke(app, ["fit", str(path), *FIT, *extra, "--out", str(tmp_path / "c.json")]))
        assert "line 1" in line and "is a header line" in line and "remove the line" in line
        assert "`" not in line


def test_the_command_line_names_flags_and_a_recipe_names_keys(fitted, tmp_path):
    _, ev, _ = fitted
    odd = _write(tmp_path / "odd", ["a|b|c|0.5\n"])
    cli = _error(runner.invoke(app, ["fit", str(odd), "--out", str(tmp_path / "c.json")]))
    assert "give --format" in cli and "`format:`" not in cli
    broken = _write(tmp_path / "broken", _lines(15)[:5] + ["000 001 001/9 n/a\n"])
    cli = _error(runner.invoke(app, ["fit", str(broken), "--format", "4-column", "--out", str(tmp_path / "c.json")]))
    assert "give --missing -1" in cli and "`missing" not in cli
    for data, key in ((odd, "set `format:`"), (broken, "set `missing: -1`")):
        recipe = tmp_path / "r.yaml"
        recipe.write_text(f"version: 1\ndata: {{plugin: score-list, train: {data}, test: {ev}}}\n")
        line = _error(runner.invoke(app, ["run", str(recipe), "-q", "--out", str(tmp_path / "o")]))
        assert key in line and "--" not in line.split(": ", 2)[-1], line


def test_a_decimal_comma_is_named(fitted, tmp_path):
    _, ev, _ = fitted
    bob = _write(tmp_path / "bob", [line.replace(".", ",") for line in _lines(16)])
    assert "written with a decimal comma" in _error(runner.invoke(app, ["fit", str(bob), "--out", str(tmp_path / "c")]))
    semi = tmp_path / "semi.csv"
    semi.write_text("claimed_id;real_id;test_label;score\n"
                    + "".join(";".join(line.split()) + "\n" for line in _lines(17)).replace(".", ","))
    line = _error(runner.invoke(app, ["fit", str(semi), "--out", str(tmp_path / "c")]))
    assert "separated by semicolons" in line and "--format" not in line
    recipe = tmp_path / "r.yaml"
    recipe.write_text(f"version: 1\ndata: {{plugin: score-list, train: {semi}, test: {ev}, format: csv, "
                      "delimiter: ';'}\n")
    assert "written with a decimal comma" in _error(runner.invoke(app, ["run", str(recipe), "-q"]))
    comma = tmp_path / "comma.csv"
    comma.write_text("claimed_id,real_id,test_label,score\n000,000,000/0,0,53\n")
    assert "decimal comma" in _error(runner.invoke(app, ["fit", str(comma), "--out", str(tmp_path / "c")]))


def test_a_compressed_score_list_is_named(tmp_path):
    path = tmp_path / "dev.gz"
    path.write_bytes(gzip.compress("".join(_lines(18)).encode()))
    line = _error(runner.invoke(app, ["fit", str(path), "--out", str(tmp_path / "c.json")]))
    assert "gzip-compressed" in line and f"gunzip -k {path}" in line


def test_a_score_matrix_given_to_fit_is_named_and_its_header_cut(tmp_path):
    path = tmp_path / "matrix.csv"
    rng = np.random.default_rng(19)
    path.write_text(",".join([""] + [f"c{i}" for i in range(500)]) + "\n"
                    + "".join(",".join([f"c{r}"] + [f"{x:.3f}" for x in rng.random(500)]) + "\n" for r in range(3)))
    line = _error(runner.invoke(app, ["fit", str(path), "--out", str(tmp_path / "c.json")]))
    assert "(501 in all)" in line and "'c499'" not in line and len(line) < 400
    assert "score matrix" in line and "plugin: score-matrix" in line


def test_the_other_kind_is_named_in_plural(tmp_path):
    dev = _write(tmp_path / "dev", _lines(20))
    line = _error(runner.invoke(app, ["fit", str(dev), "--kind", "distance", "--out", str(tmp_path / "c.json")]))
    assert "the scores are similarities: give --kind similarity" in line and "similaritys" not in line


@pytest.mark.parametrize("seed", ["١", "1_0", "-5", "x"])
def test_a_seed_that_is_not_a_plain_integer_is_one_line(tmp_path, seed):
    dev = _write(tmp_path / "dev", _lines(21))
    line = _error(runner.invoke(app, ["fit", str(dev), "--seed", seed, "--out", str(tmp_path / "c.json")]))
    assert "--seed" in line and "give a non-negative integer" in line
