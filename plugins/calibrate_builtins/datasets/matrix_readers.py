"""The score-matrix CSV's fast readers: pyarrow (the optional extra ``fast-io``) and a vectorised
numpy parse (always there), beside the careful ``csv``-module reader in score_matrix.py.

Both take only files they read cleanly, and raise :class:`calibrate.scorefiles.NeedLines` for
anything else (a quote in the header, a row of another length, a cell that is not a plain decimal
number, a label that is not UTF-8 or longer than MAX_LABEL, a NaN, blank rows other than empty
lines, ...): the careful reader then reads that file, and either gives the same matrix or names
file, line and column of what is wrong. So every path returns the same data and says the same
thing (tests/test_builtin_datasets.py runs the reading and error tests with all three).

What keeps them equal: the careful reader parses every cell with ``float()`` and then holds it to
the strict grammar (``calibrate.scorefiles.NUMBER``: no ``0_5``, no non-ASCII digits). pyarrow's
parser refuses ``0_5``, non-ASCII digits and empty cells itself, and for the decimal numbers both
accept it rounds correctly, as ``float()`` does; the numpy path uses ``float()`` on the bytes and
the same grammar check. Labels are stripped of whitespace in every path (``str.strip``).
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from calibrate.safefiles import MAX_LABEL
from calibrate.scorefiles import NeedLines, first_loose_number

#: rows parsed at once by the numpy path (bounds its temporary Python objects to a few MB per block)
_BLOCK_CELLS = 1 << 20


def _labels(raw: list) -> list[str]:
    """Stripped labels from bytes or str; NeedLines for what the careful reader would refuse or say."""
    out = []
    for x in raw:
        try:
            text = (x.decode("utf-8") if isinstance(x, bytes) else x).strip()
        except UnicodeDecodeError:
            raise NeedLines from None
        if len(text) > MAX_LABEL:
            raise NeedLines
        out.append(text)
    return out


def _header(first: bytes) -> list[str]:
    """The gallery labels of a header line (the cells after the first), when plainly readable."""
    line = first.rstrip(b"\r\n")
    if b'"' in line or not line.strip():  # quoting and leading blank rows: the careful reader
        raise NeedLines
    try:
        cells = next(csv.reader([line.decode("utf-8")]))
    except (UnicodeDecodeError, csv.Error):
        raise NeedLines from None
    if len(cells) < 2:
        raise NeedLines
    return _labels(cells[1:])


def read_pyarrow(path: Path) -> tuple[np.ndarray, list[str], list[str]]:
    """(values, probe labels, gallery labels) parsed by pyarrow in C, several blocks at a time."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    with open(path, "rb") as fh:
        gallery = _header(fh.readline())
    names = ["probe"] + [f"c{j}" for j in range(len(gallery))]
    types = {name: pa.float64() for name in names[1:]}
    types["probe"] = pa.dictionary(pa.int32(), pa.string())
    read = pacsv.ReadOptions(column_names=names, skip_rows=1, block_size=1 << 24)
    parse = pacsv.ParseOptions(delimiter=",", quote_char='"', double_quote=True, escape_char=False,
                               newlines_in_values=False, ignore_empty_lines=True)
    convert = pacsv.ConvertOptions(column_types=types, null_values=[], strings_can_be_null=False,
                                   quoted_strings_can_be_null=False, true_values=[], false_values=[])
    try:
        table = pacsv.read_csv(path, read_options=read, parse_options=parse, convert_options=convert)
    except (pa.ArrowException, ValueError, UnicodeError):
        raise NeedLines from None
    if table.num_rows == 0 or any(col.null_count for col in table.columns):
        raise NeedLines
    probe = table.column(0).unify_dictionaries()
    labels = _labels(probe.chunk(0).dictionary.to_pylist())
    codes = np.concatenate([np.asarray(ch.indices.to_numpy(zero_copy_only=False), np.int64) for ch in probe.chunks])
    values = np.empty((table.num_rows, len(gallery)))
    for j in range(len(gallery)):
        column = table.column(j + 1)
        values[:, j] = column.chunk(0).to_numpy() if column.num_chunks == 1 else \
            np.concatenate([ch.to_numpy() for ch in column.chunks])
    return values, [labels[k] for k in codes.tolist()], gallery


def _cell_counts(data: bytes) -> np.ndarray:
    """Commas on each line of ``data`` (lines end with \\n; the last may not)."""
    buf = np.frombuffer(data, np.uint8)
    ends = np.flatnonzero(buf == 10)
    if ends.size == 0 or ends[-1] != buf.size - 1:
        ends = np.r_[ends, buf.size]
    commas = np.flatnonzero(buf == 44)
    return np.diff(np.r_[0, np.searchsorted(commas, ends)])


def read_numpy(path: Path) -> tuple[np.ndarray, list[str], list[str]]:
    """(values, probe labels, gallery labels) of a file without quotes: lines split on commas by
    bytes.split, blocks of cells converted by ``float`` into numpy, the strict grammar checked per block."""
    data = path.read_bytes()
    if b'"' in data or b"\0" in data:
        raise NeedLines
    data = data.replace(b"\r\n", b"\n").rstrip(b"\n")
    if b"\r" in data:
        raise NeedLines
    cut = data.find(b"\n")
    if cut < 0:
        raise NeedLines  # no probe row: the careful reader says so
    gallery = _header(data[:cut])
    body = data[cut + 1:]
    width = len(gallery) + 1
    if not np.all(_cell_counts(body) == width - 1):
        raise NeedLines  # a row of another length, or a blank line
    rows = body.count(b"\n") + 1
    values = np.empty((rows, width - 1))
    probes: list[str] = []
    step = max(1, _BLOCK_CELLS // width)
    lines = body.split(b"\n")
    for start in range(0, rows, step):
        cells = b",".join(lines[start:start + step]).split(b",")
        probes += _labels(cells[::width])
        del cells[::width]
        try:
            block = np.fromiter(map(float, cells), np.float64, count=len(cells))
        except ValueError:
            raise NeedLines from None
        if first_loose_number(cells) is not None:
            raise NeedLines
        values[start:start + step] = block.reshape(-1, width - 1)
    return values, probes, gallery
