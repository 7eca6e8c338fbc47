"""CSV cells a spreadsheet would read as a formula (issue 31, item 8).

Labels beginning with =, +, -, @, a tab or a carriage return (OWASP's list for CSV injection), and with ' so
that one ' taken off gives the label back, are written with a leading ' in every CSV calibrate writes
(decisions of `accept`, thresholds.csv, models.csv); numbers, a class named like a plain number, and
numeric cells are written as they are; a cell holding a carriage return is quoted."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import numpy as np
import pytest

from calibrate.files.user_output import csv_text
from calibrate_test_helpers import invoke_cli, write_recipe

#: labels a score file can carry (its readers strip a label's leading tab or carriage return: those two are
#: checked on the writers directly)
HOSTILE = ["=HYPERLINK(\"http://x\",\"y\")", "+SUM(1,2)", "-2+3", "@cmd", "'quoted", "-inf"]
PLAIN = ["-1", "+7", "alice", "b=c", "1e5"]


@pytest.mark.parametrize("text", HOSTILE + ["\tTAB", "\rCR", "=", "-", "+", "@", "'"])
def test_a_cell_a_spreadsheet_reads_as_a_formula_gets_a_leading_quote(text):
    assert csv_text(text) == "'" + text
    assert csv_text(text)[1:] == text  # one ' taken off gives the label back


@pytest.mark.parametrize("text", PLAIN + ["-0.5", "+.25", "-3e-7", "", "a@b"])
def test_plain_numbers_and_other_text_are_written_as_they_are(text):
    assert csv_text(text) == text


def _unquote(cell: str) -> str:
    """How a reader gets a label back from calibrate's CSV (docs/architecture.md, Outputs)."""
    return cell[1:] if cell.startswith("'") else cell


def _rows(path: Path) -> list[dict]:
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def _is_number_cell(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    """A CSV score list whose classes, probes and groups are hostile labels, with negative similarity scores."""
    tmp = tmp_path_factory.mktemp("cells")
    classes = HOSTILE + PLAIN
    rng = np.random.default_rng(5)
    lines = [["claimed_id", "real_id", "test_label", "score"]]
    for r, real in enumerate(classes):
        for q in range(12):
            for claimed in classes:
                score = rng.normal(-0.2 if claimed == real else -0.8, 0.1)
                lines.append([claimed, real, f"={r}-{q}" if q % 2 else f"p{r}-{q}", f"{score:.5f}"])
    scores = tmp / "scores.csv"
    with open(scores, "w", newline="", encoding="utf-8") as fh:
        csv.writer(fh).writerows(lines)
    groups = tmp / "groups.csv"
    with open(groups, "w", newline="", encoding="utf-8") as fh:
        csv.writer(fh).writerows([["class", "group"]] + [[c, "=g1" if k % 2 else "@g2"] for k, c in enumerate(classes)])
    return tmp, classes


def test_decisions_escape_labels_and_keep_numbers(hostile):
    tmp, classes = hostile
    done = invoke_cli("fit", "scores.csv", "--estimator", "class-interp", "--no-predict", "--fpr", "0.05",
                      "--out", "cal.json", cwd=tmp)
    assert done.returncode == 0, done.stderr
    done = invoke_cli("accept", "cal.json", "scores.csv", "--fpr", "0.05", "--groups", "groups.csv",
                      "--out", "decisions.csv", cwd=tmp)
    assert done.returncode == 0, done.stderr
    rows = _rows(tmp / "decisions.csv")
    assert {_unquote(r["claimed"]) for r in rows} == set(classes) == {_unquote(r["real"]) for r in rows}
    for r in rows:
        for column in ("claimed", "real", "probe", "group"):
            raw = _unquote(r[column])
            assert r[column] == (raw if raw in PLAIN or raw.startswith("p") else "'" + raw), (column, r[column])
        assert _is_number_cell(r["score"]) and _is_number_cell(r["threshold"]), r
    assert any(r["score"].startswith("-") for r in rows) and all(r["threshold"].startswith("-") for r in rows)
    assert {r["group"] for r in rows} == {"'=g1", "'@g2"}


def test_a_runs_thresholds_and_models_escape_labels_and_keep_numbers(hostile):
    tmp, classes = hostile
    recipe = write_recipe(tmp / "r.yaml", {
        "version": 1, "data": {"plugin": "score-list", "train": "scores.csv", "test": "scores.csv", "kind": "similarity"},
        "transform": {"plugin": "similarity-to-distance", "upper": 0.0},
        "estimators": [{"plugin": "class-interp"}, {"plugin": "znorm"}],
        "evaluation": {"targets": [0.05], "prediction": False}, "output": {"dir": "out", "plots": False}})
    done = invoke_cli("run", str(recipe), cwd=tmp)
    assert done.returncode == 0, done.stderr
    thresholds = _rows(tmp / "out" / "thresholds.csv")
    assert {_unquote(r["class"]) for r in thresholds} == set(classes)
    for r in thresholds:
        raw = _unquote(r["class"])
        assert r["class"] == (raw if raw in PLAIN else "'" + raw)
        assert _is_number_cell(r["threshold"]) and _is_number_cell(r["score_threshold"]), r
        assert r["score_threshold"].startswith("-") and not r["accept_if"].startswith("'")
    models = _rows(tmp / "out" / "models.csv")
    assert {_unquote(r["class"]) for r in models} == set(classes)
    assert all(r["class"] == (_unquote(r["class"]) if _unquote(r["class"]) in PLAIN else "'" + _unquote(r["class"]))
               for r in models)


def test_every_csv_writer_escapes_tab_and_carriage_return_labels():
    """thresholds.csv and models.csv (a run's and a sharded run's parts) from the writers themselves."""
    from calibrate.running.outputs import models_csv, thresholds_csv
    from calibrate.contract.types import ThresholdTable

    labels = ["\tTAB", "\rCR", "-1", "ok"]
    table = ThresholdTable("=est", tuple(labels), (0.05,), np.array([[-0.5], [0.25], [-1.0], [2.0]]))
    rows = list(csv.DictReader(io.StringIO(thresholds_csv([table]), newline="")))
    assert [r["class"] for r in rows] == ["'\tTAB", "'\rCR", "-1", "ok"]
    assert {r["estimator"] for r in rows} == {"'=est"} and [r["threshold"] for r in rows] == ["-0.5", "0.25", "-1.0", "2.0"]
    inside = ThresholdTable("e", ("a\r=cmd()", "b"), (0.05,), np.array([[1.0], [2.0]]))  # a CR inside a label
    text = thresholds_csv([inside])
    assert text.count("\n") == 3 and '"a\r=cmd()"' in text  # quoted: it starts no row of its own
    assert [r["class"] for r in csv.DictReader(io.StringIO(text, newline=""))] == ["a\r=cmd()", "b"]
    text = models_csv([{"estimator": "e", "class": c, "family": "@x", "scale": -0.5, "n_train": -3} for c in labels])
    rows = list(csv.DictReader(io.StringIO(text, newline="")))
    assert [r["class"] for r in rows] == ["'\tTAB", "'\rCR", "-1", "ok"]
    assert {(r["family"], r["scale"], r["n_train"]) for r in rows} == {("'@x", "-0.5", "-3")}


def test_a_csv_writer_holds_its_rows_once():
    """`accept` writes a decision per attempt through csv_writer: a million rows kept as a list of row strings
    and joined again took 631 MB against 377 MB before (1M-line bob list); the text is now built in one buffer."""
    import tracemalloc

    from calibrate.files.user_output import csv_writer

    tracemalloc.start()
    try:
        w, text = csv_writer()
        for k in range(50_000):
            w.writerow([f"c{k % 1000:04d}", f"c{k // 1000:04d}", f"p{k}", repr(k / 7), "0.5", "1"])
        out = text()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert out.count("\n") == 50_000 and "\r" not in out
    assert peak < 4.5 * len(out), peak / len(out)  # the list of rows: 5.9 x the text; one buffer: 3.6 x (2.0 at 200k)
