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
impostor rows are split per claimed class with ``numpy.random.default_rng(seed + column)``. So
a score list written probe by probe splits exactly as the score-matrix CSV of the same matrix.

Readers. ``pyarrow`` (the optional extra ``fast-io``) parses the file in C, several blocks at a
time; ``python`` (always available) reads blocks of lines with ``bytes.split`` / the ``csv``
module. Both end in the same numpy code, and the pyarrow path hands any file it does not accept
cleanly (a parse error, a label holding whitespace, a NaN score, a duplicate, ...) to the python
reader, which is the reference: it gives every message (file and line), so both paths return the
same data and say the same thing. ``calibrate validate`` (``check()``) reads the first
``CHECK_LINES`` comparisons of each file with the python reader.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from calibrate.base import Dataset, RunContext, ScoreSplit
from calibrate.errors import DataError, ParameterError
from calibrate.types import DistanceMatrix

from .score_matrix import _drop_failed_columns, check_split_params, split_per_class

#: comparisons that ``calibrate validate`` reads of each score list
CHECK_LINES = 200
#: the roles a CSV's columns play, and the header names used when ``columns:`` does not say
ROLES = ("claimed", "real", "probe", "score")
DEFAULT_COLUMNS = {"claimed": "claimed_id", "real": "real_id", "probe": "test_label", "score": "score"}
#: field positions (claimed, real, probe, score) of bob's whitespace formats
_BOB = {"4-column": (4, (0, 1, 2, 3)), "5-column": (5, (0, 2, 3, 4))}
_ASCII_SPACE = " \t\n\r\x0b\x0c"  # what bytes.split() splits on
_BLOCK = 1 << 24
#: a dense probe x gallery matrix larger than this many entries is refused (it would not fit)
MAX_ENTRIES = 2_000_000_000


def pyarrow_available() -> bool:
    try:
        import pyarrow.csv  # noqa: F401
    except ImportError:
        return False
    return True


@dataclass
class _Rows:
    """Comparisons as codes into label lists (one entry per comparison, in file order)."""

    claimed: np.ndarray            # int64 codes into claimed_labels
    claimed_labels: list[str]
    real: np.ndarray               # int64 codes into real_labels
    real_labels: list[str]
    probe: np.ndarray | None       # int64 codes into probe_labels, or None (no probe column)
    probe_labels: list[str] | None
    scores: np.ndarray             # float64
    lines: np.ndarray | None       # 1-based line of each comparison (python reader), None (pyarrow)


class _NeedLines(Exception):
    """The pyarrow path found something to report: the python reader says it, with the line."""


# ---- format ------------------------------------------------------------------------------

def _first_line(path: Path) -> tuple[int, str]:
    try:
        with open(path, "rb") as fh:
            number = 0
            for raw in fh:
                for part in raw.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")[:-1 if raw.endswith((b"\n", b"\r")) else None]:
                    number += 1  # \r\n, \n and a lone \r end a line, as for the readers
                    if part.strip():
                        return number, part.decode("utf-8", errors="replace")
    except OSError as exc:
        raise DataError(f"{path}: cannot read the score list ({exc})") from None
    raise DataError(f"{path}: empty file; a score list holds one comparison per line "
                    "(`claimed_id real_id test_label score`, or a CSV with a header row)")


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def sniff(path: Path, fmt: str = "auto", delimiter: str | None = None) -> tuple[str, str | None]:
    """(format, delimiter) of a score list: bob's 4/5 columns when the first line has 4 or 5
    whitespace-separated fields ending in a number, else a CSV whose header shows the delimiter."""
    if fmt != "auto" and (fmt != "csv" or delimiter is not None):
        return fmt, delimiter
    number, line = _first_line(path)
    if fmt == "auto":
        fields = line.encode("utf-8").split()
        if len(fields) in (4, 5) and _is_number(fields[-1].decode("utf-8", "replace")) and "," not in line:
            return ("4-column" if len(fields) == 4 else "5-column"), None
    if delimiter is None:
        if "," in line:
            delimiter = ","
        elif "\t" in line:
            delimiter = "\t"
        else:
            raise DataError(f"{path}, line {number}: cannot tell the score list's format: not 4 or 5 whitespace-separated "
                            "fields ending in a score (bob's `claimed_id real_id test_label score`), and no comma or "
                            "tab in what would be a CSV header; set `format:` (and `delimiter:` for a CSV)")
    return "csv", delimiter


def _csv_columns(path: Path, header: list[str], line: int, columns: dict | None) -> tuple[int, int, int | None, int]:
    """Header positions of (claimed, real, probe or None, score)."""
    names = dict(DEFAULT_COLUMNS if columns is None else columns)
    positions = []
    for role in ROLES:
        name = names.get(role)
        if name is None or (role == "probe" and columns is None and name not in header):
            positions.append(None)  # no probe column
            continue
        hits = [i for i, h in enumerate(header) if h == name]
        if not hits:
            raise DataError(f"{path}, line {line}: no column {name!r} (the {role} column) in the header "
                            f"({', '.join(map(repr, header))}); name the header's columns with "
                            "`columns: {claimed: ..., real: ..., probe: ..., score: ...}`")
        if len(hits) > 1:
            raise DataError(f"{path}, line {line}: the header names column {name!r} ({role}) {len(hits)} times; "
                            "give each column its own name")
        positions.append(hits[0])
    return positions[0], positions[1], positions[2], positions[3]


# ---- the python reader (the reference) -----------------------------------------------------

def _factor(table: dict, items: list) -> np.ndarray:
    """Codes of items in ``table`` (label -> code, in order of first appearance), which grows."""
    for x in dict.fromkeys(items):  # the distinct items, in order
        if x not in table:
            table[x] = len(table)
    return np.fromiter(map(table.__getitem__, items), np.int64, count=len(items))


def _to_float(path: Path, raw: list, lines: list[int], what: str) -> np.ndarray:
    try:
        return np.fromiter(map(float, raw), dtype=np.float64, count=len(raw))
    except ValueError:
        for text, line in zip(raw, lines):
            try:
                float(text)
            except ValueError:
                if isinstance(text, bytes):
                    text = text.decode("utf-8", errors="replace")
                raise DataError(f"{path}, line {line}: score {text!r} is not a number{what}; write the score, or a "
                                "marker such as -1 there and set `missing: -1`") from None
        raise


def _decode(path: Path, table: dict, codes: np.ndarray, lines: np.ndarray) -> list[str]:
    out = []
    for code, raw in enumerate(table):
        try:
            out.append(raw.decode("utf-8"))
        except UnicodeDecodeError:
            line = lines[np.flatnonzero(codes == code)[0]]
            raise DataError(f"{path}, line {line}: a label is not UTF-8 text ({raw!r}); save the file as UTF-8") from None
    return out


_SPACE = np.zeros(256, bool)
_SPACE[list(_ASCII_SPACE.encode())] = True


def _block_tokens(text: bytes, split: list, ncols: int, line: int, max_rows: int | None, rows: int):
    """(tokens, line numbers) of a block of lines when each line holds ncols fields or none (numpy
    counts the fields of every line), else None: the line loop then says which line is wrong."""
    if not split:
        return None
    buf = np.frombuffer(text, np.uint8)
    space = _SPACE[buf]
    starts = np.flatnonzero(~space & np.r_[True, space[:-1]])  # first byte of every field
    newline = np.flatnonzero(buf == 10)
    if newline.size < len(split):  # the last line has no \n
        newline = np.r_[newline, buf.size]
    counts = np.diff(np.r_[0, np.searchsorted(starts, newline, side="right")])
    if not np.all((counts == ncols) | (counts == 0)):
        return None
    ln = line + 1 + np.flatnonzero(counts)
    tokens = text.split()
    if max_rows is not None and rows + ln.size > max_rows:
        keep = max_rows - rows
        ln, tokens = ln[:keep], tokens[:keep * ncols]
    return tokens, ln.tolist()


def _read_whitespace_python(path: Path, fmt: str, max_rows: int | None) -> _Rows:
    ncols, (ic, ir, ip, isc) = _BOB[fmt]
    tables: tuple[dict, dict, dict] = ({}, {}, {})
    parts: list[tuple[np.ndarray, ...]] = []
    line, rows, rest = 0, 0, b""
    try:
        with open(path, "rb") as fh:
            while True:
                block = fh.read(_BLOCK)
                data = rest + block
                if block:
                    cut = data.rfind(b"\n") + 1
                    data, rest = data[:cut], data[cut:]
                    if not data:
                        continue
                else:
                    rest = b""
                # \r\n, \n and a lone \r end a line (as they do for pyarrow)
                text = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
                split = text.split(b"\n")
                if text.endswith(b"\n"):
                    split.pop()
                fast = _block_tokens(text, split, ncols, line, max_rows, rows)
                if fast is not None:  # every line of the block has ncols fields (or none): split the block at once
                    tokens, ln = fast
                    c, r, p, s = tokens[ic::ncols], tokens[ir::ncols], tokens[ip::ncols], tokens[isc::ncols]
                    rows += len(ln)
                    line = int(ln[-1]) if max_rows is not None and rows >= max_rows else line + len(split)
                    split = ()
                else:
                    c, r, p, s, ln = [], [], [], [], []
                for raw in split:
                    line += 1
                    fields = raw.split()
                    if not fields:
                        continue
                    if len(fields) != ncols:
                        raise DataError(f"{path}, line {line}: {len(fields)} fields, but a {fmt} score list has {ncols} "
                                        f"(`{'claimed_id real_id test_label score' if ncols == 4 else 'claimed_id model_label real_id test_label score'}`); "
                                        "labels must not hold spaces")
                    c.append(fields[ic])
                    r.append(fields[ir])
                    p.append(fields[ip])
                    s.append(fields[isc])
                    ln.append(line)
                    rows += 1
                    if max_rows is not None and rows >= max_rows:
                        break
                if c:
                    parts.append((_factor(tables[0], c), _factor(tables[1], r), _factor(tables[2], p), _to_float(path, s, ln, ""),
                                  np.array(ln, np.int64)))
                if not block or (max_rows is not None and rows >= max_rows):
                    break
    except OSError as exc:
        raise DataError(f"{path}: cannot read the score list ({exc})") from None
    cols = [np.concatenate([p[k] for p in parts]) if parts else np.zeros(0, np.int64 if k != 3 else np.float64)
            for k in range(5)]
    return _Rows(cols[0], _decode(path, tables[0], cols[0], cols[4]), cols[1], _decode(path, tables[1], cols[1], cols[4]),
                 cols[2], _decode(path, tables[2], cols[2], cols[4]), cols[3], cols[4])


def _read_csv_python(path: Path, delimiter: str, columns: dict | None, max_rows: int | None) -> _Rows:
    tables: tuple[dict, dict, dict] = ({}, {}, {})
    c, r, p, s, ln = [], [], [], [], []
    header = None
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            reader = csv.reader(fh, delimiter=delimiter)
            for row in reader:
                if not row or not any(cell.strip() for cell in row):
                    continue
                if header is None:
                    header = [cell.strip() for cell in row]
                    ic, ir, ip, isc = _csv_columns(path, header, reader.line_num, columns)
                    continue
                if len(row) != len(header):
                    raise DataError(f"{path}, line {reader.line_num}: {len(row)} fields but the header has {len(header)}"
                                    f" (delimiter {delimiter!r}); quote cells that hold the delimiter")
                ln.append(reader.line_num)
                for out, i, role in ((c, ic, "claimed class"), (r, ir, "real class"), (p, ip, "probe id")):
                    if i is None:
                        continue
                    cell = row[i].strip()
                    if not cell:
                        raise DataError(f"{path}, line {reader.line_num}: empty {role} (column {header[i]!r}); "
                                        "every comparison needs one")
                    out.append(cell)
                s.append(row[isc])
                if max_rows is not None and len(ln) >= max_rows:
                    break
    except UnicodeDecodeError:
        raise DataError(f"{path}, line {len(ln) + 2 if header else 1} or near it: not UTF-8 text; "
                        "save the file as UTF-8") from None
    except (OSError, csv.Error) as exc:
        raise DataError(f"{path}: cannot read the score list ({exc})") from None
    if header is None:
        raise DataError(f"{path}: empty file; a CSV score list needs a header row and one comparison per row")
    lines = np.array(ln, np.int64)
    scores = _to_float(path, s, ln, f" (column {header[isc]!r})")
    probe = _factor(tables[2], p) if ip is not None else None
    return _Rows(_factor(tables[0], c), list(tables[0]), _factor(tables[1], r),
                 list(tables[1]), probe, list(tables[2]) if ip is not None else None, scores, lines)


# ---- the pyarrow reader ----------------------------------------------------------------------

def _arrow_labels(col, strip: bool) -> tuple[np.ndarray, list[str]]:
    """Codes and labels of a dictionary-encoded column; _NeedLines for anything the python reader would refuse."""
    if col.null_count:
        raise _NeedLines
    col = col.unify_dictionaries()
    if col.num_chunks == 0:
        return np.zeros(0, np.int64), []
    labels = col.chunk(0).dictionary.to_pylist()
    codes = np.concatenate([np.asarray(ch.indices.to_numpy(zero_copy_only=False), np.int64) for ch in col.chunks])
    if strip:  # CSV cells are stripped; labels equal after stripping become one
        stripped = [x.strip() for x in labels]
        if any(not x for x in stripped):
            raise _NeedLines
        if stripped != labels:
            table: dict = {}
            remap = _factor(table, stripped)
            codes, labels = remap[codes], list(table)
    elif any(not x or any(ch in x for ch in _ASCII_SPACE) for x in labels):
        raise _NeedLines  # pyarrow split on single spaces only: let the python reader split on whitespace
    return codes, labels


def _read_pyarrow(path: Path, fmt: str, delimiter: str | None, columns: dict | None) -> _Rows:
    import pyarrow as pa
    import pyarrow.csv as pacsv

    labels_t = pa.dictionary(pa.int32(), pa.string())
    if fmt in _BOB:
        ncols, positions = _BOB[fmt]
        names = [f"f{i}" for i in range(ncols)]
        read = pacsv.ReadOptions(column_names=names, block_size=_BLOCK)
        parse = pacsv.ParseOptions(delimiter=" ", quote_char=False, double_quote=False, escape_char=False)
        used = [names[i] for i in positions]
    else:
        read = pacsv.ReadOptions(block_size=_BLOCK)
        parse = pacsv.ParseOptions(delimiter=delimiter, quote_char='"', double_quote=True, escape_char=False)
        number, first = _first_line(path)
        if number != 1:
            raise _NeedLines
        header = next(csv.reader([first], delimiter=delimiter))
        stripped = [h.strip() for h in header]
        try:
            positions = _csv_columns(path, stripped, 1, columns)
        except DataError:
            raise _NeedLines from None  # the python reader says it (a header that is not UTF-8 text, ...)
        if len(set(header)) != len(header):
            raise _NeedLines
        used = [header[i] if i is not None else None for i in positions]
    types = {name: labels_t for name in used[:3] if name is not None}
    types[used[3]] = pa.float64()
    convert = pacsv.ConvertOptions(column_types=types, include_columns=[u for u in used if u is not None],
                                   null_values=[], strings_can_be_null=False, quoted_strings_can_be_null=False,
                                   true_values=[], false_values=[])
    try:
        table = pacsv.read_csv(path, read_options=read, parse_options=parse, convert_options=convert)
    except (pa.ArrowException, ValueError, UnicodeError):
        raise _NeedLines from None
    strip = fmt == "csv"
    claimed, claimed_labels = _arrow_labels(table.column(used[0]), strip)
    real, real_labels = _arrow_labels(table.column(used[1]), strip)
    probe = probe_labels = None
    if used[2] is not None:
        probe, probe_labels = _arrow_labels(table.column(used[2]), strip)
    score = table.column(used[3])
    if score.null_count:
        raise _NeedLines
    scores = np.concatenate([ch.to_numpy(zero_copy_only=False) for ch in score.chunks]) if score.num_chunks \
        else np.zeros(0)
    return _Rows(claimed, claimed_labels, real, real_labels, probe, probe_labels, np.asarray(scores, np.float64), None)


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


def _line(rows: _Rows, i: int) -> int:
    if rows.lines is None:
        raise _NeedLines
    return int(rows.lines[i])


def build_matrix(rows: _Rows, path: Path, fmt: str, missing: float | None) -> _Matrix:
    """The probe x gallery matrix of a file's comparisons; DataError (with lines) for what cannot be one."""
    scores = rows.scores
    ok = np.ones(scores.shape, bool) if missing is None else scores != missing
    bad = ok & ~np.isfinite(scores)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise DataError(f"{path}, line {_line(rows, i)}: NaN or infinite score; set `missing:` to the marker of failed "
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
            raise DataError(f"{path}, lines {_line(rows, i)} and {_line(rows, j)}: probe {probe_labels[probe[i]]!r} has real "
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
    flat = probe * n_gallery + claimed
    present = np.zeros(n_probes * n_gallery, bool)
    present[flat] = True
    if np.count_nonzero(present) != flat.size:  # some (probe, class) twice: find the first repeated line
        order = np.argsort(flat, kind="stable")
        again = order[1:][flat[order][1:] == flat[order][:-1]]
        j = int(again.min())
        i = int(np.flatnonzero(flat == flat[j])[0])
        hint = (" (a 5-column file with several models per claimed class is not supported: keep one model per class)"
                if fmt == "5-column" else "")
        raise DataError(f"{path}, lines {_line(rows, int(i))} and {_line(rows, int(j))}: probe "
                        f"{probe_labels[probe[i]]!r} is compared with claimed class {gallery[claimed[i]]!r} twice; keep "
                        f"one comparison per probe and class{hint}")
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
    return _read_then(path, fmt, delimiter, columns, reader, max_rows,
                      lambda rows, fmt: build_matrix(rows, path, fmt, missing))


def _read_then(path: Path, fmt: str, delimiter: str | None, columns: dict | None, reader: str, max_rows: int | None,
               finish):
    """``finish(rows, fmt)`` on the file's comparisons: read by pyarrow when it may, by the python reader
    when pyarrow is not wanted, reads a prefix only, or ``finish`` needs line numbers (``_NeedLines``)."""
    fmt, delimiter = sniff(path, fmt, delimiter)
    if max_rows is None and reader != "python" and (reader == "pyarrow" or pyarrow_available()):
        try:
            return finish(_read_pyarrow(path, fmt, delimiter, columns), fmt)
        except _NeedLines:
            pass  # the python reader reads it, or says what is wrong and where
    if fmt in _BOB:
        rows = _read_whitespace_python(path, fmt, max_rows)
    else:
        rows = _read_csv_python(path, delimiter, columns, max_rows)
    return finish(rows, fmt)


def read_comparisons(path: Path, *, fmt: str = "auto", delimiter: str | None = None, columns: dict | None = None,
                     reader: str = "auto", missing: float | None = None) -> _Rows:
    """Every comparison of one score list, in file order (no matrix is built): what
    ``calibrate accept`` decides on. Same formats, readers and messages as the dataset; a NaN or
    infinite score (other than ``missing``) is a DataError naming file and line."""
    path = Path(path)

    def finite(rows: _Rows, fmt: str) -> _Rows:
        bad = ~np.isfinite(rows.scores) & ((rows.scores != missing) if missing is not None else True)
        if bad.any():  # from the pyarrow reader, _line hands the file to the python reader for the line
            i = int(np.flatnonzero(bad)[0])
            raise DataError(f"{path}, line {_line(rows, i)}: NaN or infinite score; remove the line, or mark failed "
                            "comparisons with a number and give it as --missing")
        return rows

    return _read_then(path, fmt, delimiter, columns, reader, None, finite)


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
    """

    produces = "scores"

    def __init__(self, *, path: Path | None = None, train: Path | None = None, test: Path | None = None,
                 format: Literal["auto", "4-column", "5-column", "csv"] = "auto", columns: dict[str, str] | None = None,
                 delimiter: str | None = None, kind: Literal["similarity", "distance"] = "similarity",
                 missing: float | None = None, fit_fraction: float = 0.5, seed: int = 0,
                 reader: Literal["auto", "pyarrow", "python"] = "auto"):
        check_split_params(path, train, test, fit_fraction, seed)
        if format in _BOB and (columns is not None or delimiter is not None):
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

    def output_kind(self) -> str | None:
        return self.kind

    def _read(self, path: Path, max_rows: int | None = None) -> _Matrix:
        return read_score_list(path, fmt=self.format, delimiter=self.delimiter, columns=self.columns,
                               missing=self.missing, reader=self.reader, max_rows=max_rows)

    def check(self) -> None:
        """Read the first comparisons of every file with the run's own (python) parser and checks."""
        for path in (self.path, self.train, self.test):
            if path is not None:
                self._read(path, max_rows=CHECK_LINES)

    def _load(self, context: RunContext) -> ScoreSplit:
        split, absent = self._split_one() if self.path is not None else self._two_files()
        if absent:
            context.note(f"{absent} probe x claimed class pair(s) have no comparison in the score list(s); they are "
                         "left out (not counted as failed comparisons)")
        return _drop_failed_columns(split, context)

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
