"""The `score-list` dataset: bob's 4/5-column score files and CSV/TSV comparison lists.

Every file is generated here with a fixed seed. Each reading test runs with both readers
(`python`, always there, and `pyarrow`, the optional extra `fast-io`), which must agree."""

from __future__ import annotations

import csv
import json
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest

import calibrate
from calibrate.errors import DataError, ParameterError
from calibrate_builtins.datasets.score_list import CHECK_LINES, ScoreListDataset, pyarrow_available, read_score_list
from calibrate_test_helpers import make_scores, invoke_cli, write_recipe, write_scores

pytestmark = pytest.mark.filterwarnings("ignore:.*have no comparison in the score list:UserWarning")
ROOT = Path(__file__).resolve().parents[1]
READERS = ["python", pytest.param("pyarrow", marks=pytest.mark.skipif(not pyarrow_available(),
                                                                      reason="pyarrow (extra fast-io) not installed"))]
needs_pyarrow = pytest.mark.skipif(not pyarrow_available(), reason="pyarrow (extra fast-io) not installed")


class Data:
    """A probe x gallery score matrix with probe ids, some comparisons absent and some failed (-1)."""

    def __init__(self, seed=0, n_classes=8, probes_per_class=6, absent=0.1, failed=0.05, impostor_probes=3):
        self.values, self.classes, self.gallery = make_scores(seed, n_classes, probes_per_class,
                                                              impostor_probes=impostor_probes)
        rng = np.random.default_rng(seed + 100)
        u = rng.random(self.values.shape)
        self.absent, self.failed = u < absent, (u >= absent) & (u < absent + failed)
        self.absent[0] = False  # the first probe meets every class: the file's class order is the gallery's
        self.absent[np.arange(len(self.classes)), np.arange(len(self.classes)) % len(self.gallery)] = False
        self.failed &= ~self.absent
        self.ids = [f"p{i:03d}" for i in range(len(self.classes))]

    def comparisons(self):
        """(claimed, real, probe, score text), probe by probe, in gallery order."""
        for i, (real, probe) in enumerate(zip(self.classes, self.ids)):
            for j, claimed in enumerate(self.gallery):
                if not self.absent[i, j]:
                    yield claimed, real, probe, "-1" if self.failed[i, j] else repr(float(self.values[i, j]))

    def bob4(self, path: Path, sep=" ") -> Path:
        path.write_text("".join(sep.join(c) + "\n" for c in self.comparisons()), encoding="utf-8")
        return path

    def bob5(self, path: Path) -> Path:
        path.write_text("".join(f"{c} m-{c} {r} {p} {s}\n" for c, r, p, s in self.comparisons()), encoding="utf-8")
        return path

    def table(self, path: Path, delimiter=",", names=("enrolled", "subject", "sample", "score"), probe=True) -> Path:
        with open(path, "w", newline="", encoding="utf-8") as fh:
            w = csv.writer(fh, delimiter=delimiter)
            keep = [0, 1, 2, 3] if probe else [0, 1, 3]
            w.writerow(["note"] + [names[k] for k in keep])
            for c in self.comparisons():
                w.writerow(["x"] + [c[k] for k in keep])
        return path

    def matrix_csv(self, path: Path) -> Path:
        """The same scores as a score-matrix CSV: absent and failed comparisons are both -1."""
        values = np.where(self.absent | self.failed, -1.0, self.values)
        return write_scores(path, values, self.classes, self.gallery)


def same(a, b):
    for f in ("values", "valid", "probe_classes", "gallery", "probe_ids"):
        assert np.array_equal(getattr(a, f), getattr(b, f), equal_nan=f == "values"), f
    assert (a.failed, a.absent) == (b.failed, b.absent)


COLUMNS = {"claimed": "enrolled", "real": "subject", "probe": "sample", "score": "score"}


@pytest.mark.parametrize("reader", READERS)
def test_four_and_five_columns_csv_and_tsv_read_the_same_comparisons(tmp_path, reader):
    d = Data(seed=1)
    ref = read_score_list(d.bob4(tmp_path / "s4.txt"), missing=-1, reader=reader)
    assert ref.values.shape == (len(d.ids), len(d.gallery))
    assert ref.gallery.tolist() == d.gallery and ref.probe_ids.tolist() == d.ids
    assert ref.probe_classes.tolist() == d.classes
    present = ~d.absent & ~d.failed
    assert np.array_equal(ref.valid, present)
    assert np.array_equal(ref.values[present], d.values[present])
    assert ref.failed == d.failed.sum() and ref.absent == d.absent.sum()
    same(read_score_list(d.bob5(tmp_path / "s5.txt"), missing=-1, reader=reader), ref)
    same(read_score_list(d.bob4(tmp_path / "tabs.txt", sep="\t  "), missing=-1, reader=reader), ref)
    for name, delim in (("s.csv", ","), ("s.tsv", "\t")):
        path = d.table(tmp_path / name, delim)
        same(read_score_list(path, columns=COLUMNS, missing=-1, reader=reader), ref)
        same(read_score_list(path, fmt="csv", delimiter=delim, columns=COLUMNS, missing=-1, reader=reader), ref)
    # through the dataset, format given
    split = ScoreListDataset(path=tmp_path / "s5.txt", format="5-column", missing=-1, reader=reader).load()
    assert split.missing == d.failed.sum()


@needs_pyarrow
def test_both_readers_agree_on_untidy_files(tmp_path):
    d = Data(seed=2)
    lines = d.bob4(tmp_path / "a.txt").read_text().splitlines()
    untidy = [("  " + ln.replace(" ", " \t ") + "  ") if k % 3 == 0 else ln for k, ln in enumerate(lines)]
    (tmp_path / "crlf.txt").write_bytes(("\r\n".join(untidy) + "\r\n\r\n").encode())
    (tmp_path / "cr.txt").write_bytes(("\r".join(lines)).encode())
    rows = d.table(tmp_path / "a.csv").read_text().splitlines()
    rows = [rows[0]] + [",".join(f" {c} " if k != 4 else c for k, c in enumerate(r.split(","))) for r in rows[1:]]
    (tmp_path / "spaces.csv").write_text("\n\n" + "\n".join(rows) + "\n,,,,\n")
    ref = read_score_list(tmp_path / "a.txt", missing=-1, reader="python")
    for name in ("crlf.txt", "cr.txt", "spaces.csv"):
        kw = {"columns": COLUMNS} if name.endswith("csv") else {}
        a = read_score_list(tmp_path / name, missing=-1, reader="python", **kw)
        b = read_score_list(tmp_path / name, missing=-1, reader="pyarrow", **kw)
        same(a, b)
        same(a, ref)


@pytest.mark.parametrize("reader", READERS)
def test_a_csv_without_probe_column_gives_each_real_class_one_row_per_repeat(tmp_path, reader):
    d = Data(seed=3, absent=0.2, failed=0.0)
    m = read_score_list(d.table(tmp_path / "s.csv", probe=False), reader=reader,
                        columns={"claimed": "enrolled", "real": "subject", "score": "score"})
    for real in dict.fromkeys(d.classes):
        rows = [i for i, c in enumerate(d.classes) if c == real]
        mine = m.probe_classes == real
        assert mine.sum() == (~d.absent[rows]).sum(axis=0).max()
        assert m.probe_ids[mine].tolist() == [f"{real}#{k + 1}" for k in range(mine.sum())]
        for j in range(len(d.gallery)):  # the k-th comparison of (real, claimed) is on row k
            want = [d.values[i, j] for i in rows if not d.absent[i, j]]
            got = m.values[mine, j][m.valid[mine, j]]
            assert got.tolist() == want


@pytest.mark.parametrize("reader", READERS)
def test_genuine_and_impostor_attempts(tmp_path, reader):
    d = Data(seed=4, failed=0.0)
    split = ScoreListDataset(train=d.bob4(tmp_path / "s.txt"), test=tmp_path / "s.txt", reader=reader).load()
    m = split.test
    genuine = np.array(d.classes)[:, None] == np.array(d.gallery)[None, :]
    assert np.array_equal(m.genuine_mask(), genuine & ~d.absent)
    assert np.array_equal(m.impostor_mask(), ~genuine & ~d.absent)
    n_lines = len((tmp_path / "s.txt").read_text().splitlines())
    claimed_is_real = sum(c == r for c, r, _, _ in d.comparisons())
    assert m.genuine_mask().sum() == claimed_is_real and m.impostor_mask().sum() == n_lines - claimed_is_real
    assert set(m.probe_classes[m.probe_classes == "outsider"]) == {"outsider"}  # a probe no class enrolls: impostor only


def _thresholds(out: Path) -> list[dict]:
    with open(out / "thresholds.csv", newline="") as fh:
        return list(csv.DictReader(fh))


def _run(tmp_path, name, data: dict) -> tuple[list[dict], dict]:
    recipe = {"version": 1, "data": data, "transform": {"plugin": "similarity-to-distance", "upper": 1.0},
              "estimators": [{"plugin": "generic-interp"}, {"plugin": "class-interp"}, {"plugin": "auto"}],
              "evaluation": {"targets": [0.1, 0.05, 0.02]}, "output": {"dir": str(tmp_path / name), "plots": False}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        calibrate.run(write_recipe(tmp_path / f"{name}.yaml", recipe))
    results = json.loads((tmp_path / name / "results.json").read_text())["estimators"]
    return _thresholds(tmp_path / name), results


def _assert_same_thresholds(a, b):
    (ta, ra), (tb, rb) = a, b
    assert len(ta) == len(tb) > 0
    for x, y in zip(ta, tb):
        assert (x["estimator"], x["class"], x["target_fpr"]) == (y["estimator"], y["class"], y["target_fpr"])
        assert abs(float(x["threshold"]) - float(y["threshold"])) <= 1e-12
    for label in ra:
        for x, y in zip(ra[label]["targets"], rb[label]["targets"]):
            assert (x["false_accepts"], x["impostor_attempts"]) == (y["false_accepts"], y["impostor_attempts"])


@pytest.mark.parametrize("reader", READERS)
def test_thresholds_equal_score_matrix_on_train_and_test_files(tmp_path, reader):
    dev, ev = Data(seed=5, n_classes=10, probes_per_class=12), Data(seed=6, n_classes=10, probes_per_class=12)
    listed = _run(tmp_path, "list", {"plugin": "score-list", "train": str(dev.bob4(tmp_path / "dev.txt")),
                                     "test": str(ev.bob4(tmp_path / "eval.txt")), "missing": -1, "reader": reader})
    matrix = _run(tmp_path, "matrix", {"plugin": "score-matrix", "train": str(dev.matrix_csv(tmp_path / "dev.csv")),
                                       "test": str(ev.matrix_csv(tmp_path / "eval.csv")), "missing": -1})
    _assert_same_thresholds(listed, matrix)


@pytest.mark.parametrize("reader", READERS)
def test_thresholds_equal_score_matrix_on_one_file_split_per_class(tmp_path, reader):
    d = Data(seed=7, n_classes=10, probes_per_class=14)
    for seed in (0, 11):
        listed = _run(tmp_path, f"list{seed}", {"plugin": "score-list", "path": str(d.bob4(tmp_path / "s.txt")),
                                                "missing": -1, "seed": seed, "fit_fraction": 0.4, "reader": reader})
        matrix = _run(tmp_path, f"matrix{seed}", {"plugin": "score-matrix", "path": str(d.matrix_csv(tmp_path / "s.csv")),
                                                  "missing": -1, "seed": seed, "fit_fraction": 0.4})
        _assert_same_thresholds(listed, matrix)


def test_the_test_files_columns_follow_the_training_files_order(tmp_path):
    d = Data(seed=8)
    (tmp_path / "rev.txt").write_text("".join(f"{c} {r} {p} {s}\n" for c, r, p, s in
                                              sorted(d.comparisons(), key=lambda t: (t[2], t[0]), reverse=True)))
    split = ScoreListDataset(train=d.bob4(tmp_path / "s.txt"), test=tmp_path / "rev.txt", missing=-1).load()
    assert split.test.gallery_classes.tolist() == d.gallery
    order = np.argsort(split.test.probe_ids)
    assert np.array_equal(split.test.values[order][split.test.valid[order]], split.train.values[split.train.valid])
    other = Data(seed=8, n_classes=9)
    with pytest.raises(DataError, match=r"different claimed classes \(0 only in the first, e.g. \[\]; 1 only in the second, e.g. \['id08'\]\)"):
        ScoreListDataset(train=tmp_path / "s.txt", test=other.bob4(tmp_path / "o.txt")).load()


def _bad(tmp_path, d: Data, line: int, text: str, name="s.txt") -> Path:
    lines = d.bob4(tmp_path / name).read_text().splitlines()
    lines[line - 1] = text
    (tmp_path / name).write_text("\n".join(lines) + "\n")
    return tmp_path / name


BAD_ROWS = [  # (line, replacement, message after "s.txt, line(s) ")
    (5, "id01 id00 p000", "line 5: 3 fields, but a 4-column score list has 4"),
    (6, "id01 id00 p000 0.5 extra", "line 6: 5 fields, but a 4-column score list has 4"),
    (7, "id01 id00 p000 0.5x", "line 7: score '0.5x' is not a number"),
    (8, "id01 id00 p000 nan", "line 8: NaN or infinite score"),
    (9, "id01 id00 p000 -inf", "line 9: NaN or infinite score"),
    (10, "id01 id00 p000 0.5", "lines 2 and 10: probe 'p000' is compared with claimed class 'id01' twice"),
    (11, "id01 id05 p000 0.5", "lines 1 and 11: probe 'p000' has real class 'id00' on one and 'id05' on the other"),
]


@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize("line,text,message", BAD_ROWS)
def test_each_bad_row_is_named_by_file_and_line(tmp_path, reader, line, text, message):
    d = Data(seed=9, absent=0.0, failed=0.0)
    path = _bad(tmp_path, d, line, text)
    with pytest.raises(DataError, match="^" + str(path).replace(".", r"\.") + ", " + message.replace("(", r"\(")):
        ScoreListDataset(path=path, reader=reader).load()


@pytest.mark.parametrize("reader", READERS)
def test_bad_csv_rows_and_headers(tmp_path, reader):
    d = Data(seed=10, absent=0.0, failed=0.0)
    path = d.table(tmp_path / "s.csv")
    rows = path.read_text().splitlines()

    def load(text, **kw):
        path.write_text(text)
        ScoreListDataset(path=path, reader=reader, **{"columns": COLUMNS, **kw}).load()

    for k, row, msg in ((4, "x,id01,id00,p001", r"line 4: 4 fields but the header has 5"),
                        (5, "x,id01,id00,p001,abc", r"line 5: score 'abc' is not a number \(column 'score'\)"),
                        (6, "x, ,id00,p001,0.5", r"line 6: empty claimed class \(column 'enrolled'\)")):
        with pytest.raises(DataError, match=rf"s\.csv, {msg}"):
            load("\n".join(rows[:k - 1] + [row] + rows[k:]) + "\n")
    with pytest.raises(DataError, match=r"s\.csv, line 1: no column 'subject' \(the real column\) in the header"):
        load("\n".join(rows).replace("subject", "who") + "\n")
    with pytest.raises(DataError, match=r"line 1: no column 'claimed_id'"):
        load("\n".join(rows) + "\n", columns=None)
    (tmp_path / "x.txt").write_text("just some words\n")
    with pytest.raises(DataError, match=r"x\.txt, line 1: cannot tell the score list's format"):
        ScoreListDataset(path=tmp_path / "x.txt", reader=reader).load()


def test_parameters_are_checked(tmp_path):
    p = Data(seed=11).bob4(tmp_path / "s.txt")
    for kw, msg in (({"columns": {"claimed": "a", "real": "b", "score": "c", "who": "d"}}, "unknown role"),
                    ({"columns": {"claimed": "a", "score": "c"}}, "name the header's real column"),
                    ({"columns": {"claimed": "a", "real": "a", "score": "c"}}, "one column serves two roles"),
                    ({"columns": {"claimed": "a", "real": 3, "score": "c"}}, "columns.real: expected a column name"),
                    ({"format": "4-column", "delimiter": ","}, "are for `format: csv`"),
                    ({"delimiter": ";;"}, "delimiter must be one character"),
                    ({"train": p}, "give either `path:`")):
        with pytest.raises(ParameterError, match=msg):
            ScoreListDataset(path=p, **kw)
    assert ScoreListDataset(path=p, format="csv", delimiter="tab").delimiter == "\t"


def test_validate_says_what_run_says_and_reads_only_the_head(tmp_path, monkeypatch):
    d = Data(seed=12, n_classes=10, probes_per_class=30, absent=0.0, failed=0.0)
    for line, text, message in (BAD_ROWS[2], BAD_ROWS[5]):
        path = _bad(tmp_path, d, line, text)
        recipe = write_recipe(tmp_path / "r.yaml", {"version": 1, "data": {"plugin": "score-list", "path": str(path)},
                                                    "output": str(tmp_path / "out")})
        checked, ran = invoke_cli("validate", str(recipe)), invoke_cli("run", str(recipe), "--quiet")
        assert checked.returncode == 2 and ran.returncode == 2, (checked.stderr, ran.stderr)
        assert checked.stderr.count("\n") == 1 and checked.stderr == ran.stderr
        assert f"s.txt, {message}" in checked.stderr
        assert not (tmp_path / "out").exists()
    # beyond the first CHECK_LINES comparisons validate does not look: only run finds the bad line
    path = _bad(tmp_path, d, CHECK_LINES + 5, "id01 id00 p000 nan")
    calibrate.validate(write_recipe(tmp_path / "r.yaml", {"version": 1, "data": {"plugin": "score-list",
                                                                                "path": str(path)}}))
    with pytest.raises(DataError, match=rf"line {CHECK_LINES + 5}: NaN"):
        ScoreListDataset(path=path).load()


def test_a_recipe_with_only_version_and_data_runs(tmp_path):
    d = Data(seed=13, n_classes=12, probes_per_class=10)
    recipe = write_recipe(tmp_path / "r.yaml", {"version": 1, "data": {"plugin": "score-list", "missing": -1,
                                                                       "path": str(d.bob4(tmp_path / "s.txt"))}})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = calibrate.run(recipe, out=tmp_path / "out")
    assert list(result.results) == ["auto"] and all(np.isfinite(r.ratio) for r in result.results["auto"])
    assert any("have no comparison in the score list" in n for n in result.notes)
    assert (tmp_path / "out" / "manifest.json").exists()


def test_the_bob_scores_example_runs_and_its_files_are_what_the_script_makes(tmp_path):
    example = ROOT / "examples" / "bob-scores"
    copy = tmp_path / "bob-scores"
    shutil.copytree(example, copy)
    for f in ("scores-dev", "scores-eval"):
        (copy / f).unlink()
    import runpy
    runpy.run_path(str(copy / "make_scores.py"), run_name="__main__")
    for f in ("scores-dev", "scores-eval"):
        assert (copy / f).read_bytes() == (example / f).read_bytes(), f
        assert (example / f).stat().st_size < 400_000
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = calibrate.run(copy / "recipe.yaml", out=tmp_path / "out")
    assert result.results and all(np.isfinite(r.ratio) for rs in result.results.values() for r in rs)


@needs_pyarrow
def test_tidy_files_stay_on_the_pyarrow_path(tmp_path, monkeypatch):
    import calibrate.files.score_lists as readers  # the readers live in the core; score-list builds its matrix from them

    def refuse(*args, **kwargs):
        raise AssertionError("fell back to the python reader")

    d = Data(seed=14)
    files = [(d.bob4(tmp_path / "s4.txt"), {}), (d.bob5(tmp_path / "s5.txt"), {}),
             (d.table(tmp_path / "s.csv"), {"columns": COLUMNS}), (d.table(tmp_path / "s.tsv", "\t"), {"columns": COLUMNS}),
             (d.table(tmp_path / "n.csv", probe=False), {"columns": {k: v for k, v in COLUMNS.items() if k != "probe"}})]
    expected = [read_score_list(p, missing=-1, reader="python", **kw) for p, kw in files]
    monkeypatch.setattr(readers, "_read_whitespace_python", refuse)
    monkeypatch.setattr(readers, "_read_csv_python", refuse)
    for (p, kw), want in zip(files, expected):
        same(read_score_list(p, missing=-1, reader="pyarrow", **kw), want)


@needs_pyarrow
def test_the_streamed_pyarrow_read_gives_the_python_readers_comparisons_block_by_block(tmp_path, monkeypatch):
    """The pyarrow reader parses a file a block at a time (STREAM_BLOCK): labels first met in a later block, blocks
    whose dictionaries differ, a first block of long lines (the columns' first size too small: they grow), CSV
    cells stripped across blocks give what the python reader gives; a bad line in a later block is named as the
    python reader names it."""
    import pyarrow.csv as pacsv

    import calibrate.files.score_list_pyarrow_reader as streamed
    import calibrate.files.score_lists as readers
    from calibrate.files.score_lists import read_comparisons

    def comparisons(path, reader, **kw):
        rows = read_comparisons(path, reader=reader, missing=-1, **kw)
        return ([np.asarray(x).tolist() if x is not None else None for x in (rows.claimed, rows.real, rows.probe)],
                [rows.claimed_labels, rows.real_labels, rows.probe_labels], rows.scores.tolist())

    d = Data(seed=15, n_classes=12, probes_per_class=9)
    long_first = [f"{'x' * 200}{k} {'y' * 200} p{k} 0.5\n" for k in range(3)]
    (tmp_path / "grows.txt").write_text("".join(long_first) + d.bob4(tmp_path / "plain.txt").read_text())
    lines = d.bob4(tmp_path / "s4.txt").read_text().splitlines()
    (tmp_path / "tab.txt").write_text("\n".join(lines[:-5] + ["late\tlabel r9 p9 0.25"] + lines[-5:]) + "\n")
    rows = d.table(tmp_path / "a.csv").read_text().splitlines()
    (tmp_path / "spaces.csv").write_text("\n".join([rows[0]] + [",".join(f" {c} " if k in (1, 2) and n % 2 else c
                                                                         for k, c in enumerate(r.split(",")))
                                                                for n, r in enumerate(rows[1:])]) + "\n")
    files = [(tmp_path / "s4.txt", {}), (d.bob5(tmp_path / "s5.txt"), {}), (tmp_path / "grows.txt", {}),
             (tmp_path / "spaces.csv", {"columns": COLUMNS})]
    expected = [comparisons(p, "python", **kw) for p, kw in files]
    with pytest.raises(DataError) as python_said:
        comparisons(tmp_path / "tab.txt", "python")
    assert f"line {len(lines) - 4}: 5 fields" in str(python_said.value)
    monkeypatch.setattr(streamed, "STREAM_BLOCK", 512)  # a few lines a block
    blocks, open_csv = [], pacsv.open_csv

    def counting(*args, **kwargs):
        return (blocks.append(b) or b for b in open_csv(*args, **kwargs))

    monkeypatch.setattr(pacsv, "open_csv", counting)
    with monkeypatch.context() as only_pyarrow:  # no file here falls back to the python reader
        for name in ("_read_whitespace_python", "_read_csv_python"):
            only_pyarrow.setattr(readers, name, lambda *a, **k: pytest.fail("fell back to the python reader"))
        for (path, kw), want in zip(files, expected):
            blocks.clear()
            assert comparisons(path, "pyarrow", **kw) == want, path.name
            assert len(blocks) > 5 and len({tuple(b.column(0).dictionary.to_pylist()) for b in blocks}) > 1, path.name
    with pytest.raises(DataError) as pyarrow_said:
        comparisons(tmp_path / "tab.txt", "pyarrow")
    assert str(pyarrow_said.value) == str(python_said.value)
