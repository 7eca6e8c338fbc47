"""Dataset ``score-list``: one comparison per line, as bob's score files or a CSV/TSV table.

Formats (``format:``; by default told from the first non-empty line):

* ``4-column``: bob's ``claimed_id real_id test_label score``, fields separated by runs of spaces
  or tabs;
* ``5-column``: bob's ``claimed_id model_label real_id test_label score`` (``model_label`` is
  read and ignored: one model per claimed class);
* ``csv``: a header row, then one comparison per row; ``delimiter`` comma or tab (told from the
  header line) or given; ``columns:`` names the header's columns of the claimed (enrolled) class,
  the probe's real class, the probe id (optional) and the score.

A line whose claimed class equals its real class is a genuine attempt (FNR), the others are
impostor attempts. The probe x gallery matrix has one row per distinct probe id (bob's
``test_label``) and one column per distinct claimed class, both in order of first appearance in
the file; a probe and class that were not compared are an invalid entry (not an error). Without
a probe column (CSV only), the k-th comparison (in file order) of real class ``r`` with a given
claimed class goes to probe row ``r#k``: each real class gets as many rows as its most-compared
claimed class has comparisons with it. A probe compared twice with one claimed class is an error
naming both lines; so is a probe id given two real classes.

Splitting is score-matrix's: ``train:``/``test:`` files (their claimed classes must be the same
set; the test file's columns are put in the training file's order), or one ``path:`` whose
impostor rows are split per claimed class by keys hashed from ``seed + column`` (``split_per_class``). So
a score list written probe by probe splits exactly as the score-matrix CSV of the same matrix.

Readers (calibrate.files.score_lists, the core's score-file reading, which ``calibrate accept`` uses too).
``pyarrow`` (the optional extra ``fast-io``) parses the file in C, several blocks at a
time; ``python`` (always available) reads blocks of lines with ``bytes.split`` / the ``csv``
module. Both end in the same numpy code (here: the matrix), and the pyarrow path hands any file it does not accept
cleanly (a parse error, a label holding whitespace, a NaN score, a duplicate, ...) to the python
reader, which is the reference: it gives every message (file and line), so both paths return the
same data and say the same thing. ``calibrate validate`` (``check()``) reads the first
``CHECK_LINES`` comparisons of each file with the python reader.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from calibrate.contract.base import Dataset, RunContext, ScoreSplit
from calibrate.errors import DataError, ParameterError
from calibrate.files.score_lists import (BOB_FORMATS, DEFAULT_COLUMNS, ROLES, Comparisons, NeedLines,  # noqa: F401 (re-exported)
                                  line_of, place, pyarrow_available, read_comparisons, read_then, refuse_repeats, sniff)
from calibrate.contract.types import DistanceMatrix

from .cohort_files import with_cohorts
from .score_matrix import CLASS_NAMES_BYTES, _drop_failed_columns, check_split_params, split_per_class

#: comparisons that ``calibrate validate`` reads of each score list
CHECK_LINES = 200
#: a dense probe x gallery matrix larger than this many entries is refused (it would not fit)
MAX_ENTRIES = 2_000_000_000


# ---- from comparisons to a matrix --------------------------------------------------------------

def _first_appearance(codes: np.ndarray, labels: list[str]) -> tuple[np.ndarray, list[str]]:
    """Renumber codes so that labels are in order of first appearance (already so for the python reader)."""
    if codes.size == 0:
        return codes, []
    top = np.maximum.accumulate(codes)
    if codes[0] == 0 and np.all(codes[1:] <= top[:-1] + 1) and top[-1] == len(labels) - 1:
        return codes, labels
    used, first = np.unique(codes, return_index=True)
    order = used[np.argsort(first, kind="stable")]
    remap = np.empty(len(labels), np.int64)
    remap[order] = np.arange(order.size)
    return remap[codes], [labels[i] for i in order]


@dataclass
class _Matrix:
    values: np.ndarray
    valid: np.ndarray
    probe_classes: np.ndarray
    gallery: np.ndarray
    probe_ids: np.ndarray
    failed: int     # comparisons whose score is the missing marker
    absent: int     # probe x class pairs never compared


def build_matrix(rows: Comparisons, path: Path, fmt: str, missing: float | None) -> _Matrix:
    """The probe x gallery matrix of a file's comparisons; DataError (with lines) for what cannot be one."""
    scores = rows.scores
    ok = np.ones(scores.shape, bool) if missing is None else scores != missing
    bad = ok & ~np.isfinite(scores)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise DataError(f"{path}, {place(rows, i)}: NaN or infinite score; set `missing:` to the marker of failed "
                        "comparisons or remove the line")
    if scores.size == 0:
        raise DataError(f"{path}: no comparisons; a score list holds one comparison per line")
    claimed, gallery = _first_appearance(rows.claimed, rows.claimed_labels)
    real_labels = np.array(rows.real_labels, dtype=object)
    if rows.probe is not None:
        probe, probe_labels = _first_appearance(rows.probe, rows.probe_labels)
        owner = np.empty(len(probe_labels), np.int64)
        owner[probe] = rows.real  # some comparison's real class, per probe
        clash = owner[probe] != rows.real
        if clash.any():
            i = int(np.flatnonzero(clash)[0])
            j = int(np.flatnonzero((probe == probe[i]) & (rows.real != rows.real[i]))[0])
            i, j = sorted((i, j))
            raise DataError(f"{path}, {rows.unit}s {line_of(rows, i)} and {line_of(rows, j)}: probe {probe_labels[probe[i]]!r} has real "
                            f"class {rows.real_labels[rows.real[i]]!r} on one and {rows.real_labels[rows.real[j]]!r} on the "
                            "other; a probe (test_label) belongs to one class")
        probe_real = owner
    else:
        # the k-th comparison of real class r with a claimed class goes to probe row (r, k)
        pair = rows.real * max(len(gallery), 1) + claimed
        order = np.argsort(pair, kind="stable")
        sorted_pair = pair[order]
        start = np.flatnonzero(np.r_[True, sorted_pair[1:] != sorted_pair[:-1]])
        rank = np.empty(pair.size, np.int64)
        rank[order] = np.arange(pair.size) - np.repeat(start, np.diff(np.r_[start, pair.size]))
        key = rows.real * (int(rank.max()) + 1) + rank
        probe, _ = _first_appearance(*_dense(key))
        probe_real = np.empty(int(probe.max()) + 1, np.int64)
        probe_real[probe] = rows.real
        probe_rank = np.empty(probe_real.size, np.int64)
        probe_rank[probe] = rank
        probe_labels = [f"{rows.real_labels[r]}#{k + 1}" for r, k in zip(probe_real.tolist(), probe_rank.tolist())]
    n_probes, n_gallery = len(probe_labels), len(gallery)
    if n_probes * n_gallery > MAX_ENTRIES:
        raise DataError(f"{path}: {n_probes} probes x {n_gallery} claimed classes is too large a matrix for this dataset "
                        f"(more than {MAX_ENTRIES} entries); split the file or compare fewer probes")
    refuse_repeats(path, rows, fmt)  # the rule every score-list reader applies (calibrate.files.score_lists)
    flat = probe * n_gallery + claimed
    values = np.full(n_probes * n_gallery, np.nan)
    values[flat] = scores
    valid = np.zeros(n_probes * n_gallery, bool)
    valid[flat] = ok
    shape = (n_probes, n_gallery)
    return _Matrix(values.reshape(shape), valid.reshape(shape), real_labels[probe_real].astype(str),
                   np.array(gallery, dtype=object).astype(str), np.array(probe_labels, dtype=object).astype(str),
                   int((~ok).sum()), n_probes * n_gallery - int(scores.size))


def _dense(key: np.ndarray) -> tuple[np.ndarray, list]:
    uniq, codes = np.unique(key, return_inverse=True)
    return codes.astype(np.int64), list(range(uniq.size))


def read_score_list(path: Path, *, fmt: str = "auto", delimiter: str | None = None, columns: dict | None = None,
                    missing: float | None = None, reader: str = "auto", max_rows: int | None = None) -> _Matrix:
    """Read and check one score list. ``reader``: auto (pyarrow when installed), pyarrow or python;
    ``max_rows``: read only the first comparisons (validation), always with the python reader."""
    return read_then(path, fmt, delimiter, columns, reader, max_rows,
                     lambda rows, fmt: build_matrix(rows, path, fmt, missing))


# ---- the dataset -------------------------------------------------------------------------------

class ScoreListDataset(Dataset):
    """Comparisons one per line: bob's 4/5-column score files, or a CSV/TSV with a header row.

    :param path: one score list, split per claimed class into fit and evaluation rows (see fit_fraction, seed).
    :param train: score list whose comparisons are used for fitting (with test; instead of path), e.g. bob's dev file.
    :param test: score list whose comparisons are used for evaluation (with train), e.g. bob's eval file; same claimed classes.
    :param format: auto (from the first line), 4-column (claimed_id real_id test_label score), 5-column (claimed_id model_label real_id test_label score) or csv (a header row).
    :param columns: csv only: header names of the columns {claimed, real, probe, score} (default claimed_id, real_id, test_label if present, score); without probe, the k-th comparison of a real class with a claimed class is probe row k of that class.
    :param delimiter: csv only: the field separator (default: comma or tab, from the header line; `tab` for a tab).
    :param kind: similarity (higher = more alike) or distance (lower = more alike).
    :param missing: marker score of failed comparisons (e.g. -1); excluded and counted.
    :param fit_fraction: share of each claimed class's impostor rows used for fitting (single file).
    :param seed: seed of the per-class split (single file).
    :param reader: auto (pyarrow when installed: `pip install calibrate-thresholds[fast-io]`), pyarrow or python; both give the same data.
    :param cohort_enrolled: with `normalizer:`, the enrolled side's cohort scores: bob's Z-norm file (models x Z-probes; claimed_id an enrolled class, test_label a cohort probe), in the score lists' format.
    :param cohort_probes: with `normalizer:`, the probe side's cohort scores: bob's T-norm file (T-models x probes; claimed_id a cohort model, test_label a probe of the score lists), in their format.
    """

    produces = "scores"

    def __init__(self, *, path: Path | None = None, train: Path | None = None, test: Path | None = None,
                 format: Literal["auto", "4-column", "5-column", "csv"] = "auto", columns: dict[str, str] | None = None,
                 delimiter: str | None = None, kind: Literal["similarity", "distance"] = "similarity",
                 missing: float | None = None, fit_fraction: float = 0.5, seed: int = 0,
                 reader: Literal["auto", "pyarrow", "python"] = "auto", cohort_enrolled: Path | None = None,
                 cohort_probes: Path | None = None):
        check_split_params(path, train, test, fit_fraction, seed, missing)
        if format in BOB_FORMATS and (columns is not None or delimiter is not None):
            raise ParameterError(f"`columns:` and `delimiter:` are for `format: csv`; a {format} file's columns are fixed "
                                 "(claimed_id [model_label] real_id test_label score, separated by whitespace)")
        if columns is not None:
            unknown = sorted(set(columns) - set(ROLES))
            if unknown:
                raise ParameterError(f"columns: unknown role(s) {', '.join(map(repr, unknown))}; the roles are "
                                     f"{', '.join(ROLES)} (probe is optional)")
            for role in ("claimed", "real", "score"):
                if role not in columns:
                    raise ParameterError(f"columns: name the header's {role} column (`{role}: NAME`); claimed, real "
                                         "and score are required, probe is optional")
            for role, name in columns.items():
                if not (isinstance(name, str) and name.strip()) and not (role == "probe" and name is None):
                    raise ParameterError(f"columns.{role}: expected a column name, got {name!r}")
            named = [n.strip() for n in columns.values() if n is not None]
            if len(set(named)) != len(named):
                raise ParameterError(f"columns: one column serves two roles ({columns}); each role needs its own column")
            columns = {k: (v.strip() if isinstance(v, str) else v) for k, v in columns.items()}
        if delimiter is not None:
            if delimiter.lower() == "tab":
                delimiter = "\t"
            if len(delimiter) != 1 or delimiter in "\"\r\n":
                raise ParameterError(f"delimiter must be one character other than a quote or a line break "
                                     f"(`,`, `;`, `tab`, ...), got {delimiter!r}")
        if reader == "pyarrow" and not pyarrow_available():
            raise ParameterError("reader: pyarrow is not installed; `pip install calibrate-thresholds[fast-io]` "
                                 "or use `reader: python`")
        self.path, self.train, self.test = path, train, test
        self.format, self.columns, self.delimiter, self.reader = format, columns, delimiter, reader
        self.kind, self.missing, self.fit_fraction, self.seed = kind, missing, fit_fraction, seed
        self.cohort_enrolled, self.cohort_probes = cohort_enrolled, cohort_probes

    def output_kind(self) -> str | None:
        return self.kind

    def cohort_sides(self) -> tuple[str, ...] | None:
        sides = tuple(side for side, path in (("enrolled", self.cohort_enrolled), ("probe", self.cohort_probes))
                      if path is not None)
        return sides or None

    def _read(self, path: Path, max_rows: int | None = None) -> _Matrix:
        return read_score_list(path, fmt=self.format, delimiter=self.delimiter, columns=self.columns,
                               missing=self.missing, reader=self.reader, max_rows=max_rows)

    def check(self) -> None:
        """Read the first comparisons of every file with the run's own (python) parser and checks."""
        for path in (self.path, self.train, self.test, self.cohort_enrolled, self.cohort_probes):
            if path is not None:
                self._read(path, max_rows=CHECK_LINES)

    def class_names(self) -> tuple[list[str], list[str]] | None:
        """The claimed and real ids of every comparison (the scores unused), when the files are at most
        ``CLASS_NAMES_BYTES`` together; the checks are the run's own."""
        files = list(dict.fromkeys(p for p in (self.path, self.train, self.test) if p is not None))
        if sum(Path(p).stat().st_size for p in files) > CLASS_NAMES_BYTES:
            return None
        enrolled: dict[str, None] = {}
        probes: dict[str, None] = {}
        for path in files:
            rows = read_then(path, self.format, self.delimiter, self.columns, self.reader, None, lambda rows, _: rows)
            enrolled.update(dict.fromkeys(np.asarray(rows.claimed_labels)[np.unique(rows.claimed)].tolist()))
            probes.update(dict.fromkeys(np.asarray(rows.real_labels)[np.unique(rows.real)].tolist()))
        return list(enrolled), list(probes)

    def _load(self, context: RunContext) -> ScoreSplit:
        split, absent = self._split_one() if self.path is not None else self._two_files()
        if absent:
            context.note(f"{absent} probe x claimed class pair(s) have no comparison in the score list(s); they are "
                         "left out (not counted as failed comparisons)")
        split = _drop_failed_columns(split, context)
        if self.cohort_sides():
            split = with_cohorts(split, self._read, self.cohort_enrolled, self.cohort_probes, self.kind)
        return split

    def _two_files(self) -> tuple[ScoreSplit, int]:
        tr = self._read(self.train)
        te = tr if Path(self.train).resolve() == Path(self.test).resolve() else self._read(self.test)
        if set(tr.gallery.tolist()) != set(te.gallery.tolist()):
            only_tr = sorted(set(tr.gallery.tolist()) - set(te.gallery.tolist()))
            only_te = sorted(set(te.gallery.tolist()) - set(tr.gallery.tolist()))
            raise DataError(f"{self.train} and {self.test} have different claimed classes ({len(only_tr)} only in the "
                            f"first, e.g. {only_tr[:3]}; {len(only_te)} only in the second, e.g. {only_te[:3]}); both "
                            "must enroll the same classes (use one file with `path:` to split it per class)")
        position = {c: j for j, c in enumerate(te.gallery.tolist())}
        order = np.array([position[c] for c in tr.gallery.tolist()], np.int64)
        train = DistanceMatrix(tr.values, tr.probe_classes, tr.gallery, tr.valid, self.kind, tr.probe_ids,
                               source=str(self.train))
        test = DistanceMatrix(te.values[:, order], te.probe_classes, tr.gallery, te.valid[:, order], self.kind,
                              te.probe_ids, source=str(self.test))
        if te is tr:  # one file named twice: its failures once
            by_file = ((self.train.name, tr.failed),)
            absent = tr.absent
        else:
            by_file = ((self.train.name, tr.failed), (self.test.name, te.failed))
            absent = tr.absent + te.absent
        return ScoreSplit(train, test, sum(n for _, n in by_file), f"train {self.train.name}, test {self.test.name}",
                          by_file), absent

    def _split_one(self) -> tuple[ScoreSplit, int]:
        m = self._read(self.path)
        fit, evaluate = split_per_class(m.valid, m.probe_classes, m.gallery, self.fit_fraction, self.seed)  # as score-matrix
        train = DistanceMatrix(m.values, m.probe_classes, m.gallery, fit, self.kind, m.probe_ids,
                               source=f"{self.path} (fit rows)")
        test = DistanceMatrix(m.values, m.probe_classes, m.gallery, evaluate, self.kind, m.probe_ids,
                              source=f"{self.path} (evaluation rows)")
        return ScoreSplit(train, test, m.failed, f"{self.path.name}, split per class (seed {self.seed})",
                          ((self.path.name, m.failed),)), m.absent
