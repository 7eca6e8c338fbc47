"""Dataset ``score-matrix``: a probe x gallery comparison matrix in CSV.

Layout (as NIST BSSR1): the header row holds gallery class labels after one empty cell; each
following row starts with the probe's class label (several rows may share a label).

Splitting. With ``train:`` and ``test:`` files, rows of the first are used for fitting and rows
of the second for evaluation (their gallery columns must be the same). With one file
(``path:``), each gallery class's impostor rows are split independently: each row gets a key hashed
from ``seed + column index`` and its place among the column's impostor rows (``split_per_class``),
and the ``round(fit_fraction * n)`` rows of smallest key fit that class, the rest evaluate it. Genuine comparisons
are split too, each on its own key: a share ``fit_fraction`` of them (in expectation) goes to the fit, where an
estimator may judge what its thresholds cost genuine users (``Estimator._fit_genuine``, e.g. ``auto``'s choice), the
rest to the evaluation (FNR). Entries equal to ``missing`` are failed comparisons: excluded everywhere and counted.
"""

from __future__ import annotations

import csv
import math
import io
from pathlib import Path
from typing import Literal

import numpy as np

from calibrate.contract.base import Dataset, RunContext, ScoreSplit
from calibrate.errors import DataError, ParameterError
from calibrate.contract.types import DistanceMatrix
from calibrate.files.untrusted import MAX_LABEL, label_problem, regular_file, open_regular
from calibrate.files.score_lists import NeedLines, first_loose_number, pyarrow_available

from .matrix_readers import read_numpy, read_pyarrow


#: rows that ``calibrate validate`` reads of each score CSV (the header and this many probe rows)
CHECK_ROWS = 200
#: ``calibrate validate`` reads the class names of score files at most this large together (Dataset.class_names)
CLASS_NAMES_BYTES = 256 * 2 ** 20


def _looks_like_score_list(line: list[str]) -> int:
    """Columns of a whitespace-separated line (a bob-style score list), or 0."""
    fields = line[0].split() if len(line) == 1 else []
    return len(fields) if len(fields) in (4, 5) else 0


def _not_a_number(path: Path, r: int, c: int, gallery: list[str], cell: str) -> DataError:
    return DataError(f"{path}, line {r}, column {c + 2} ({gallery[c][:60]}): {cell[:80]!r} is not a number; write the "
                     "score as a decimal number (no underscores or other digits), or a marker such as -1 there and "
                     "set `missing: -1`")


def read_score_csv(path: Path, missing: float | None, max_rows: int | None = None,
                   reader: str = "auto") -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(values, valid, probe labels, gallery labels); names the row and column of bad cells.

    ``reader``: ``auto`` (pyarrow when installed, else numpy), ``pyarrow`` or ``numpy`` try that fast
    path first (matrix_readers); what it does not take cleanly, and ``csv``, go to the careful reader,
    which gives every message. ``max_rows``: read only the header and that many probe rows
    (validation; numpy, else the careful reader); the checks and messages are those of a full read.
    """
    path = Path(path)
    regular_file(path, "the score matrix", "give a CSV file")
    if reader != "csv":
        fast = read_pyarrow if reader == "pyarrow" or (reader == "auto" and pyarrow_available()) else read_numpy
        try:
            values, probes, gallery = fast(path) if max_rows is None else read_numpy(path, max_rows)
            return _checked(path, values, missing, probes, gallery, exact=False)
        except NeedLines:
            pass  # the careful reader reads it, or says what is wrong and where
    values, probes, gallery = _read_careful(path, max_rows)
    return _checked(path, values, missing, probes, gallery, exact=True)


def _checked(path: Path, values: np.ndarray, missing: float | None, probes: list[str], gallery: list[str],
             exact: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The matrix with its valid mask, refusing NaN and infinite scores (from a fast path: NeedLines)."""
    valid = np.ones(values.shape, bool) if missing is None else values != missing
    bad = valid & ~np.isfinite(values)
    if bad.any():
        if not exact:
            raise NeedLines
        r, c = np.argwhere(bad)[0]
        raise DataError(f"{path}, line {r + 2}, column {c + 2}: NaN or infinite score; "
                        "set `missing:` to the marker of failed comparisons or remove the row")
    return values, valid, np.array(probes), np.array(gallery)


def _read_careful(path: Path, max_rows: int | None) -> tuple[np.ndarray, list[str], list[str]]:
    """The reference reader (the csv module, cell by cell): every file it accepts, every message."""
    try:
        with io.TextIOWrapper(open_regular(path, "the score matrix", "give a CSV file"), encoding="utf-8", newline="") as fh:
            rows = []
            for row in csv.reader(fh):
                if row and any(cell.strip() for cell in row):
                    rows.append(row)
                    if max_rows is not None and len(rows) > max_rows:
                        break
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise DataError(f"{path}: cannot read the score CSV ({exc})") from None
    if rows and _looks_like_score_list(rows[0]):
        raise DataError(f"{path}, line 1: {_looks_like_score_list(rows[0])} whitespace-separated columns and no commas: "
                        "this looks like a score list (one comparison per line, as bob's score files), but "
                        "score-matrix reads a probe x gallery matrix in CSV (a header row of gallery labels after "
                        "one empty cell, then one row per probe); use `plugin: score-list` for a score list")
    if len(rows) < 2:
        raise DataError(f"{path}: needs a header row of gallery labels and at least one probe row")
    gallery = [c.strip() for c in rows[0][1:]]
    for r, labels in [(1, gallery)] + [(r, [row[0]]) for r, row in enumerate(rows[1:], start=2)]:
        bad = next((x.strip() for x in labels if label_problem(x.strip())), None)
        if bad is not None and len(bad) > MAX_LABEL:
            raise DataError(f"{path}, line {r}: a label of {len(bad):,} characters ({bad[:40]!r}...); "
                            f"labels are at most {MAX_LABEL:,} characters: check the file's format and delimiter")
        if bad is not None:  # the rule calibrate.load applies: what is fitted here must load again
            raise DataError(f"{path}, line {r}: a label {bad!r} {label_problem(bad)}; every gallery column and probe "
                            "row needs a label of text without NUL characters")
    if not gallery:
        raise DataError(f"{path}: the header row has no gallery labels after the first cell; score-matrix reads a "
                        "probe x gallery matrix in CSV (a header row of gallery labels after one empty cell)")
    probes, values = [], np.empty((len(rows) - 1, len(gallery)))
    for r, row in enumerate(rows[1:], start=2):
        if len(row) != len(gallery) + 1:
            raise DataError(f"{path}, line {r}: {len(row) - 1} scores but the header has {len(gallery)} gallery labels")
        probes.append(row[0].strip())
        for c, cell in enumerate(row[1:]):
            try:
                values[r - 2, c] = float(cell)
            except ValueError:
                raise _not_a_number(path, r, c, gallery, cell) from None
        loose = first_loose_number(row[1:])
        if loose is not None:
            raise _not_a_number(path, r, loose, gallery, row[1 + loose])
    return values, probes, gallery


def _drop_failed_columns(split: ScoreSplit, context: RunContext) -> ScoreSplit:
    """Gallery columns with no usable comparison (all failed) cannot be calibrated: drop and report them."""
    dead = ~split.train.valid.any(axis=0) | ~split.test.valid.any(axis=0)
    if not dead.any():
        return split
    keep = ~dead
    # labels with line breaks (a quoted CSV cell may hold one) are escaped: a note is one line
    names = [n if n.isprintable() else repr(n)[1:-1] for n in split.train.gallery_classes[dead].tolist()]
    context.note(f"{dead.sum()} gallery class(es) had no usable training or evaluation comparison (every score was "
                 f"the `missing:` marker, or the data hold none for them) and were left out: "
                 f"{', '.join(names[:5])}{' ...' if len(names) > 5 else ''}")

    def cut(m: DistanceMatrix) -> DistanceMatrix:
        return DistanceMatrix(m.values[:, keep], m.probe_classes, m.gallery_classes[keep], m.valid[:, keep], m.kind,
                              m.probe_ids, m.gallery_ids[keep], m.source)

    return ScoreSplit(cut(split.train), cut(split.test), split.missing, split.description, split.missing_by_file)


def check_split_params(path, train, test, fit_fraction: float, seed: int, missing: float | None = None) -> None:
    """The split parameters score datasets share: one file or a train/test pair, a share, a seed; and the
    failed comparisons' marker, a finite number or none (no score equals NaN, and no score may be infinite)."""
    if missing is not None and not math.isfinite(missing):
        raise ParameterError(f"missing: {missing!r} is not a finite number: no score can equal it, so no failed "
                             "comparison would be found; give the marker your matcher writes (e.g. missing: -1), or "
                             "leave `missing:` out when it writes none")
    if (path is not None and (train is not None or test is not None)) or \
            (path is None and (train is None or test is None)):
        raise ParameterError("give either `path:` (one file, split per class) or both `train:` and `test:`")
    if not 0.0 < fit_fraction < 1.0:
        raise ParameterError(f"fit_fraction must be in (0, 1), got {fit_fraction}: a run keeps some rows of each class "
                             "to evaluate on; to fit on all of a score file, use `calibrate fit SCORES --out cal.json` "
                             "(and `calibrate evaluate cal.json OTHER` on another file)")
    if seed < 0:  # numpy.random.default_rng takes non-negative seeds only
        raise ParameterError(f"seed must be a non-negative integer, got {seed}")


def _mix64(x: np.ndarray, copy: bool = True) -> np.ndarray:
    """SplitMix64's finaliser: a bijection of uint64 that scatters neighbouring inputs (vectorised; in place
    with ``copy=False``)."""
    x = x.copy() if copy else x
    x ^= x >> np.uint64(30)
    x *= np.uint64(0xBF58476D1CE4E5B9)
    x ^= x >> np.uint64(27)
    x *= np.uint64(0x94D049BB133111EB)
    x ^= x >> np.uint64(31)
    return x


def split_per_class(valid: np.ndarray, probes: np.ndarray, gallery: np.ndarray, fit_fraction: float,
                    seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(fit, evaluate) masks: each gallery column j's valid impostor rows, in file order k = 0, 1, ..., get
    the random key ``mix64(mix64(seed + j) + k)``; the ``round(fit_fraction * n)`` rows of smallest key
    fit that class. Its genuine rows, in file order k, get ``mix64(mix64(seed + j + GENUINE_SALT) + k)`` and
    fit when that key, as a fraction of 2^64, is below ``fit_fraction`` (a class with one genuine row gives it
    to the fit with that probability). Every other valid entry evaluates. A key depends only on
    ``seed + j`` and k, so a shard split with ``seed + its first column`` splits as the whole file does;
    and the split is one vectorised pass (no generator per class)."""
    _, inverse = np.unique(np.concatenate([np.asarray(probes), np.asarray(gallery)]), return_inverse=True)
    p_codes, g_codes = inverse[:len(probes)], inverse[len(probes):]
    impostor = valid & (p_codes[:, None] != g_codes[None, :])
    position = np.cumsum(impostor, axis=0, dtype=np.uint64)
    position -= np.uint64(1)  # k within the column (rows before the first impostor wrap: masked below)
    with np.errstate(over="ignore"):
        column = _mix64((np.uint64(seed) + np.arange(valid.shape[1], dtype=np.uint64)))
        keys = _mix64(column[None, :] + position, copy=False)
    keys[~impostor] = np.iinfo(np.uint64).max
    n_fit = np.round(fit_fraction * impostor.sum(axis=0)).astype(np.int64)
    # the n_fit smallest keys of a column are those up to its n_fit-th smallest: a column's impostor keys
    # are distinct (mix64 is a bijection), so a sort of the keys gives the cut without ranking every row
    cut = np.sort(keys, axis=0)[np.maximum(n_fit - 1, 0), np.arange(valid.shape[1])]
    fit = impostor & (keys <= cut[None, :]) & (n_fit > 0)[None, :]
    genuine = valid & (p_codes[:, None] == g_codes[None, :])
    # genuine cells are few (about one per probe): keyed where they are, in column order, not over the matrix
    g_cols, g_rows = np.nonzero(genuine.T)  # by column, then by row: file order k within each column
    if g_cols.size:
        per_column = np.bincount(g_cols, minlength=valid.shape[1])
        first = np.cumsum(per_column) - per_column  # each column's first index among the genuine cells
        g_position = (np.arange(g_cols.size) - first[g_cols]).astype(np.uint64)
        with np.errstate(over="ignore"):
            g_column = _mix64(np.uint64(seed) + np.uint64(GENUINE_SALT) + g_cols.astype(np.uint64))
            g_keys = _mix64(g_column + g_position, copy=False)
        chosen = g_keys < np.uint64(min(int(fit_fraction * 2.0 ** 64), 2 ** 64 - 1))
        fit[g_rows[chosen], g_cols[chosen]] = True
    return fit, valid & ~fit


#: separates the genuine rows' keys from the impostor rows' (split_per_class)
GENUINE_SALT = 0x5EED_6E17


class ScoreMatrixDataset(Dataset):
    """Probe x gallery scores from CSV (header: gallery labels; first column: probe labels).

    :param path: one CSV, split per class into fit and evaluation rows (see fit_fraction, seed).
    :param train: CSV whose rows are used for fitting (with test; instead of path).
    :param test: CSV whose rows are used for evaluation (with train).
    :param kind: similarity (higher = more alike) or distance (lower = more alike).
    :param missing: marker value of failed comparisons (BSSR1 uses -1); excluded and counted.
    :param fit_fraction: share of each class's impostor rows used for fitting (single file).
    :param seed: seed of the per-class split (single file).
    :param reader: auto (pyarrow when installed: `pip install calibrate-thresholds[fast-io]`), pyarrow or python (a vectorised numpy parse); all give the same data, and the same messages.
    """

    produces = "scores"

    def __init__(self, *, path: Path | None = None, train: Path | None = None, test: Path | None = None,
                 kind: Literal["similarity", "distance"] = "similarity", missing: float | None = None,
                 fit_fraction: float = 0.5, seed: int = 0, reader: Literal["auto", "pyarrow", "python"] = "auto"):
        check_split_params(path, train, test, fit_fraction, seed, missing)
        if reader == "pyarrow" and not pyarrow_available():
            raise ParameterError("reader: pyarrow is not installed; `pip install calibrate-thresholds[fast-io]` "
                                 "or use `reader: python`")
        self.reader = {"python": "numpy"}.get(reader, reader)
        self.path, self.train, self.test = path, train, test
        self.kind, self.missing, self.fit_fraction, self.seed = kind, missing, fit_fraction, seed

    def output_kind(self) -> str | None:
        return self.kind

    def check(self) -> None:
        """Read the header and the first rows of every file with the run's own parser."""
        for path in (self.path, self.train, self.test):
            if path is not None:
                read_score_csv(path, self.missing, max_rows=CHECK_ROWS)

    def class_names(self) -> tuple[list[str], list[str]] | None:
        """The gallery labels of the header and the probe label of every row (the scores unparsed), when the files
        are at most ``CLASS_NAMES_BYTES`` together."""
        files = list(dict.fromkeys(p for p in (self.path, self.train, self.test) if p is not None))
        if sum(Path(p).stat().st_size for p in files) > CLASS_NAMES_BYTES:
            return None
        gallery: dict[str, None] = {}
        probes: dict[str, None] = {}
        for path in files:
            try:
                with open(path, newline="", encoding="utf-8") as fh:
                    rows = (row for row in csv.reader(fh) if row and any(cell.strip() for cell in row))
                    gallery.update(dict.fromkeys(c.strip() for c in next(rows, [""])[1:]))
                    probes.update(dict.fromkeys(row[0].strip() for row in rows))
            except (OSError, UnicodeDecodeError, csv.Error) as exc:
                raise DataError(f"{path}: cannot read the score CSV ({exc})") from None
        return list(gallery), list(probes)

    def _load(self, context: RunContext) -> ScoreSplit:
        split = self._split_one() if self.path is not None else self._two_files()
        return _drop_failed_columns(split, context)

    def _two_files(self) -> ScoreSplit:
        same = Path(self.train).resolve() == Path(self.test).resolve()
        tr, trv, trp, trg = read_score_csv(self.train, self.missing, reader=self.reader)
        te, tev, tep, teg = (tr, trv, trp, trg) if same else read_score_csv(self.test, self.missing, reader=self.reader)
        if trg.tolist() != teg.tolist():
            raise DataError(f"{self.train} and {self.test} have different gallery columns; both must enroll the same classes in the same order")
        train = DistanceMatrix(tr, trp, trg, trv, self.kind, source=str(self.train))
        test = DistanceMatrix(te, tep, teg, tev, self.kind, source=str(self.test))
        if same:  # one file named twice: read once, its failures counted once
            by_file = ((self.train.name, int((~trv).sum())),)
        else:
            by_file = ((self.train.name, int((~trv).sum())), (self.test.name, int((~tev).sum())))
        return ScoreSplit(train, test, sum(n for _, n in by_file), f"train {self.train.name}, test {self.test.name}",
                          by_file)

    def _split_one(self) -> ScoreSplit:
        values, valid, probes, gallery = read_score_csv(self.path, self.missing, reader=self.reader)
        fit, evaluate = split_per_class(valid, probes, gallery, self.fit_fraction, self.seed)
        train = DistanceMatrix(values, probes, gallery, fit, self.kind, source=f"{self.path} (fit rows)")
        test = DistanceMatrix(train.values, train.probe_classes, train.gallery_classes, evaluate, self.kind,
                              source=f"{self.path} (evaluation rows)")  # the fit rows' (read-only) arrays, not copies
        return ScoreSplit(train, test, int((~valid).sum()), f"{self.path.name}, split per class (seed {self.seed})",
                          ((self.path.name, int((~valid).sum())),))
