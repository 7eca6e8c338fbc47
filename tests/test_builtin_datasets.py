"""Built-in datasets score-matrix and npz-patterns on small generated files."""

from __future__ import annotations

import numpy as np
import pytest

from calibrate.contract.base import RunContext, ScoreSplit
from calibrate.errors import DataError
from calibrate.contract.types import PatternSet
from calibrate_builtins.datasets.npz_patterns import NpzPatterns
from calibrate_builtins.datasets.score_matrix import ScoreMatrixDataset

from calibrate_test_helpers import documented_genuine_fit, documented_order, make_scores, write_scores


def _load(**params) -> ScoreSplit:
    return ScoreMatrixDataset(**params).load(RunContext())


@pytest.fixture
def one_file(tmp_path):
    values, probes, gallery = make_scores(seed=4, n_classes=6, probes_per_class=5, impostor_probes=3)
    return write_scores(tmp_path / "scores.csv", values, probes, gallery), values, probes, gallery


# ---- score-matrix, one file split per class ------------------------------------------------------

def test_single_file_split_is_disjoint_and_covers_every_valid_entry(one_file):
    path, values, probes, gallery = one_file
    split = _load(path=path)
    tr, te = split.train, split.test
    np.testing.assert_array_equal(tr.values, values)
    assert not (tr.valid & te.valid).any()
    assert (tr.valid | te.valid).all()
    genuine = np.array(probes)[:, None] == np.array(gallery)[None, :]
    assert ((tr.valid | te.valid) & genuine).sum() == genuine.sum()  # genuine comparisons on one side or the other
    n_imp = (~genuine).sum(axis=0)
    np.testing.assert_array_equal((tr.valid & ~genuine).sum(axis=0), np.round(0.5 * n_imp).astype(int))


def test_single_file_split_follows_the_documented_permutation(one_file):
    path, values, probes, gallery = one_file
    split = _load(path=path, seed=7, fit_fraction=0.3)
    impostor = np.array(probes)[:, None] != np.array(gallery)[None, :]
    for j in range(len(gallery)):  # the documented rule, in plain Python integers (a reference, not the code)
        rows = np.flatnonzero(impostor[:, j]).tolist()
        chosen = documented_order(rows, 7 + j)[:int(round(0.3 * len(rows)))]
        chosen += documented_genuine_fit(np.flatnonzero(~impostor[:, j]).tolist(), 7 + j, 0.3)
        expected = np.zeros(len(probes), bool)
        expected[chosen] = True
        np.testing.assert_array_equal(split.train.valid[:, j], expected)


def test_the_split_of_a_thousand_classes_equals_the_per_class_reference():
    from calibrate_builtins.datasets.score_matrix import split_per_class

    rng = np.random.default_rng(1)
    gallery = np.array([f"g{j}" for j in range(1000)])
    probes = rng.choice(np.r_[gallery, ["other"]], 6)
    valid = rng.random((6, 1000)) > 0.2
    fit, evaluate = split_per_class(valid, probes, gallery, 0.5, 11)
    for j in range(0, 1000, 37):
        rows = np.flatnonzero(valid[:, j] & (probes != gallery[j])).tolist()
        chosen = set(documented_order(rows, 11 + j)[:int(round(0.5 * len(rows)))])
        assert set(np.flatnonzero(fit[:, j]).tolist()) == chosen
    assert not (fit & evaluate).any() and np.array_equal(fit | evaluate, valid)


def test_single_file_split_is_reproducible_by_seed(one_file):
    path = one_file[0]
    a, b, c = _load(path=path, seed=3), _load(path=path, seed=3), _load(path=path, seed=4)
    np.testing.assert_array_equal(a.train.valid, b.train.valid)
    np.testing.assert_array_equal(a.test.valid, b.test.valid)
    assert not np.array_equal(a.train.valid, c.train.valid)


def test_train_and_test_files(tmp_path):
    v1, p1, g = make_scores(seed=1, n_classes=5, probes_per_class=3)
    v2, p2, _ = make_scores(seed=2, n_classes=5, probes_per_class=4)
    train = write_scores(tmp_path / "train.csv", v1, p1, g)
    test = write_scores(tmp_path / "test.csv", v2, p2, g)
    split = _load(train=train, test=test, kind="similarity")
    np.testing.assert_array_equal(split.train.values, v1)
    np.testing.assert_array_equal(split.test.values, v2)
    assert split.train.valid.all() and split.test.valid.all() and split.missing == 0
    assert split.train.kind == split.test.kind == "similarity"
    other = write_scores(tmp_path / "other.csv", v2, p2, [*g[:-1], "zzz"])
    with pytest.raises(DataError, match="different gallery columns"):
        _load(train=train, test=other)


def test_missing_marker_is_excluded_and_counted(tmp_path):
    values, probes, gallery = make_scores(seed=2, n_classes=4, probes_per_class=4)
    values[0, 1] = values[5, 2] = values[9, 3] = -1
    path = write_scores(tmp_path / "s.csv", values, probes, gallery)
    split = _load(path=path, missing=-1)
    assert split.missing == 3
    for r, c in ((0, 1), (5, 2), (9, 3)):
        assert not split.train.valid[r, c] and not split.test.valid[r, c]
    # without the marker, -1 is an ordinary score
    assert _load(path=path).missing == 0


def test_all_missing_column_is_dropped_with_a_note(tmp_path):
    values, probes, gallery = make_scores(seed=3, n_classes=4, probes_per_class=4)
    values[:, 2] = -1
    path = write_scores(tmp_path / "s.csv", values, probes, gallery)
    context = RunContext()
    with pytest.warns(UserWarning, match="no usable training or evaluation comparison"):
        split = ScoreMatrixDataset(path=path, missing=-1).load(context)
    assert split.train.gallery_classes.tolist() == [g for k, g in enumerate(gallery) if k != 2]
    assert split.test.gallery_classes.tolist() == split.train.gallery_classes.tolist()
    assert len(context.notes) == 1 and gallery[2] in context.notes[0]
    assert split.missing == len(probes)


@pytest.mark.parametrize("mutate, fragment", [
    (lambda rows: rows.__setitem__(3, ",".join(rows[3].split(",")[:2] + ["abc"] + rows[3].split(",")[3:])),
     "line 4, column 3 (id01): 'abc' is not a number"),
    (lambda rows: rows.__setitem__(2, rows[2] + ",0.5"), "line 3: 5 scores but the header has 4 gallery labels"),
    (lambda rows: rows.__setitem__(5, ",".join(rows[5].split(",")[:4] + ["nan"])), "line 6, column 5: NaN"),
])
def test_bad_cells_are_named_by_line_and_column(tmp_path, mutate, fragment):
    values, probes, gallery = make_scores(seed=5, n_classes=4, probes_per_class=2)
    path = write_scores(tmp_path / "s.csv", values, probes, gallery)
    rows = path.read_text().splitlines()
    mutate(rows)
    path.write_text("\n".join(rows) + "\n")
    with pytest.raises(DataError) as err:
        _load(path=path)
    assert str(err.value).startswith(f"{path}, {fragment}")


@pytest.mark.parametrize("text, fragment", [("", "needs a header row"), (",a,b\n", "needs a header row"),
                                            ("x\n1\n", "no gallery labels")])
def test_empty_or_headless_files(tmp_path, text, fragment):
    path = tmp_path / "s.csv"
    path.write_text(text)
    with pytest.raises(DataError, match=fragment):
        _load(path=path)


# ---- score-matrix readers: the careful csv reader, numpy and pyarrow agree on data and messages ----------

from calibrate.files.untrusted import MAX_LABEL  # noqa: E402
from calibrate.files.score_lists import pyarrow_available  # noqa: E402

MATRIX_READERS = ["csv", "numpy", pytest.param("pyarrow", marks=pytest.mark.skipif(
    not pyarrow_available(), reason="pyarrow (extra fast-io) not installed"))]
TIDY = ",g1,g2,g3\np1,0.5,0.25,-1\ng2,1e-3,+.5,5.\np1,-0,00.125,7\n"
UNTIDY = {  # files every reader must read as the careful reader does (the fast paths may hand them over)
    "crlf": TIDY.replace("\n", "\r\n"),
    "blank lines": "\n" + TIDY.replace("\ng2", "\n\n , , , \ng2") + "\n\n",
    "spaces": ", g1 ,g2,g3\n p1 , 0.5 ,0.25,\t-1\ng2,1e-3,+.5,5.\np1,-0,00.125,7 \n",
    "quoted labels": ',"g,1",g2,g3\n"p,1",0.5,"0.25",-1\ng2,1e-3,+.5,5.\n',
    "no final newline": TIDY.rstrip("\n"),
    "infinity as missing": TIDY.replace("-1", "-inf"),
}
BAD = {  # files every reader refuses with the careful reader's message
    "underscore": TIDY.replace("0.25", "0_25"),
    "arabic digit": TIDY.replace("0.25", "\u0665"),
    "word": TIDY.replace("0.25", "abc"),
    "empty cell": TIDY.replace(",0.25,", ",,"),
    "nan": TIDY.replace("5.", "nan"),
    "infinity": TIDY.replace("7", "inf"),
    "short row": TIDY.replace(",7\n", "\n"),
    "long row": TIDY.replace("5.\n", "5.,1\n"),
    "long probe label": TIDY.replace("g2,1e", "x" * (MAX_LABEL + 1) + ",1e"),
    "long gallery label": TIDY.replace(",g3", "," + "y" * (MAX_LABEL + 1)),
    "header only": ",g1,g2\n",
    "score list": "g1 g2 p1 0.5\ng1 g1 p2 0.9\n",
    "no gallery": "x\n1\n",
    "empty": "",
}


def _read_all(path, missing=None):
    """What each reader gives: the four arrays, or the DataError's message."""
    from calibrate_builtins.datasets.score_matrix import read_score_csv

    out = {}
    for reader in ("csv", "numpy") + (("pyarrow",) if pyarrow_available() else ()):
        try:
            out[reader] = read_score_csv(path, missing, reader=reader)
        except DataError as exc:
            out[reader] = str(exc)
    return out


def _agree(results):
    ref = results["csv"]
    for reader, got in results.items():
        if isinstance(ref, str) or isinstance(got, str):
            assert got == ref, reader
        else:
            for a, b in zip(got, ref):
                assert a.dtype == b.dtype and np.array_equal(a, b), reader


@pytest.mark.parametrize("name", sorted(UNTIDY))
def test_every_reader_reads_untidy_matrices_as_the_careful_reader(tmp_path, name):
    path = tmp_path / "m.csv"
    path.write_bytes(UNTIDY[name].encode("utf-8"))
    results = _read_all(path, missing=-1 if name != "infinity as missing" else float("-inf"))
    assert not isinstance(results["csv"], str), results["csv"]
    _agree(results)


@pytest.mark.parametrize("name", sorted(BAD))
def test_every_reader_refuses_bad_matrices_with_the_careful_readers_message(tmp_path, name):
    path = tmp_path / "m.csv"
    path.write_bytes(BAD[name].encode("utf-8"))
    results = _read_all(path, missing=-1)
    assert isinstance(results["csv"], str) and results["csv"].startswith(str(path)), results["csv"]
    _agree(results)


def test_a_label_that_is_not_utf8_is_refused_by_every_reader(tmp_path):
    path = tmp_path / "m.csv"
    path.write_bytes(TIDY.replace("g2,1e", "g\xff,1e").encode("latin-1"))
    results = _read_all(path)
    assert "cannot read the score CSV" in results["csv"]
    _agree(results)


@pytest.mark.parametrize("reader", MATRIX_READERS[1:])
def test_tidy_matrices_stay_on_the_fast_path(tmp_path, monkeypatch, reader):
    import calibrate_builtins.datasets.score_matrix as sm

    values, probes, gallery = make_scores(seed=6, n_classes=7, probes_per_class=4)
    values[3, 2] = -1.0
    path = write_scores(tmp_path / "s.csv", values, probes, gallery)
    expected = sm.read_score_csv(path, -1, reader="csv")

    def refuse(*args, **kwargs):
        raise AssertionError("fell back to the careful reader")

    monkeypatch.setattr(sm, "_read_careful", refuse)
    _agree({"csv": expected, reader: sm.read_score_csv(path, -1, reader=reader)})
    split = ScoreMatrixDataset(path=path, missing=-1, reader="python" if reader == "numpy" else reader).load(RunContext())
    assert np.array_equal(split.train.values, values) and split.missing == 1


@pytest.mark.parametrize("name", sorted(UNTIDY) + sorted(BAD))
def test_validation_reads_the_head_as_the_careful_reader(tmp_path, name):
    """``max_rows`` (what validate reads): the numpy path on the head, or the careful reader; the same either way."""
    from calibrate_builtins.datasets.score_matrix import read_score_csv

    path = tmp_path / "m.csv"
    path.write_bytes({**UNTIDY, **BAD}[name].encode("utf-8"))
    results = {}
    for reader, rows in (("csv", 1), ("numpy", 1), ("csv", 2), ("numpy", 2)):
        try:
            results[(reader, rows)] = read_score_csv(path, -1, max_rows=rows, reader=reader)
        except DataError as exc:
            results[(reader, rows)] = str(exc)
    for rows in (1, 2):
        _agree({"csv": results[("csv", rows)], "numpy": results[("numpy", rows)]})


def test_the_array_parse_gives_floats_bits_on_every_decimal_layout(tmp_path, monkeypatch):
    """Cells written as matchers write them (fixed decimals, few or 15-16 significant digits, integers, signs,
    leading zeros, a bare point at either end, exponents, padding): the numpy path's values are float()'s."""
    import calibrate_builtins.datasets.score_matrix as sm

    rng = np.random.default_rng(9)
    x = rng.standard_normal((40, 30)) * 10.0 ** rng.integers(-7, 9, (40, 30))
    layouts = [lambda v: f"{v:.6f}", lambda v: f"{v:.2f}", lambda v: f"{v:.15g}", lambda v: f"{v:.16g}", repr,
               lambda v: str(int(v)), lambda v: f"{v:+.4f}", lambda v: f"00{abs(v):.3f}", lambda v: f"{abs(v):.0f}.",
               lambda v: f"{v:.3f}".replace("0.", ".", 1), lambda v: f"{v:.3e}", lambda v: f" {v:.5f}"]
    cells = [[layouts[(i * 7 + j) % len(layouts)](float(v)) for j, v in enumerate(row)] for i, row in enumerate(x)]
    path = tmp_path / "m.csv"
    path.write_text("," + ",".join(f"g{j}" for j in range(30)) + "\n" +
                    "".join(f"p{i}," + ",".join(row) + "\n" for i, row in enumerate(cells)))
    expected = np.array([[float(c) for c in row] for row in cells])
    monkeypatch.setattr(sm, "_read_careful", lambda *a: (_ for _ in ()).throw(AssertionError("fell back")))
    values = sm.read_score_csv(path, None, reader="numpy")[0]
    assert values.tobytes() == expected.tobytes()


def test_a_matrix_larger_than_one_parse_block_reads_whole(tmp_path, monkeypatch):
    import calibrate_builtins.datasets.matrix_readers as mr

    values, probes, gallery = make_scores(seed=8, n_classes=9, probes_per_class=5)
    path = write_scores(tmp_path / "s.csv", values, probes, gallery)
    monkeypatch.setattr(mr, "_BLOCK_CELLS", 25)  # a few rows per block
    _agree(_read_all(path))


# ---- npz-patterns --------------------------------------------------------------------------------

def _npz(tmp_path, **arrays):
    path = tmp_path / "p.npz"
    np.savez(path, **arrays)
    return path


def test_npz_patterns_loads_samples_with_labels_and_sets(tmp_path):
    X = np.arange(12.0).reshape(6, 2)
    path = _npz(tmp_path, X=X, labels=np.array(["a", "a", "b", "b", "c", "c"]), sets=np.array([0, 1, 0, 1, 0, 1]))
    data = NpzPatterns(path=path).load()
    assert isinstance(data, PatternSet)
    np.testing.assert_array_equal(data.X, X)
    assert data.classes == ["a", "b", "c"] and data.sets.tolist() == ["0", "1"] * 3


def test_npz_missing_keys_are_listed(tmp_path):
    path = _npz(tmp_path, X=np.zeros((2, 2)), label=np.array(["a", "b"]))
    with pytest.raises(DataError) as err:
        NpzPatterns(path=path).load()
    msg = str(err.value)
    assert "missing array(s) labels, sets" in msg and "it has X, label" in msg


def test_npz_nan_is_refused_with_the_sample(tmp_path):
    X = np.ones((4, 3))
    X[2, 1] = np.nan
    path = _npz(tmp_path, X=X, labels=np.array(list("aabb")), sets=np.array(list("0101")))
    with pytest.raises(DataError, match="NaN or infinite values \\(first at sample 2\\)"):
        NpzPatterns(path=path).load()


def test_npz_wrong_lengths_and_junk(tmp_path):
    path = _npz(tmp_path, X=np.ones((4, 3)), labels=np.array(list("aab")), sets=np.array(list("0101")))
    with pytest.raises(DataError, match=r"labels has shape \(3,\) but X has 4 samples"):
        NpzPatterns(path=path).load()
    junk = tmp_path / "junk.npz"
    junk.write_text("not a zip")
    with pytest.raises(DataError, match="not a readable .npz file"):
        NpzPatterns(path=junk).load()
