"""The score-matrix CSV's fast readers: pyarrow (the optional extra ``fast-io``) and a vectorised
numpy parse (always there), beside the careful ``csv``-module reader in score_matrix.py.

Both take only files they read cleanly, and raise :class:`calibrate.files.score_lists.NeedLines` for
anything else (a quote in the header, a row of another length, a cell that is not a plain decimal
number, a label that is not UTF-8 or that the loader refuses (empty, NUL, longer than MAX_LABEL), a NaN, blank rows other than empty
lines, ...): the careful reader then reads that file, and either gives the same matrix or names
file, line and column of what is wrong. So every path returns the same data and says the same
thing (tests/test_builtin_datasets.py runs the reading and error tests with all three).

What keeps them equal: the careful reader parses every cell with ``float()`` and then holds it to
the strict grammar (``calibrate.files.score_lists.NUMBER``: no ``0_5``, no non-ASCII digits). pyarrow's
parser refuses ``0_5``, non-ASCII digits and empty cells itself, and for the decimal numbers both
accept it rounds correctly, as ``float()`` does; the numpy path uses ``float()`` on the bytes and
the same grammar check. Labels are stripped of whitespace in every path (``str.strip``).
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from calibrate.files.untrusted import label_problem, open_regular
from calibrate.files.score_lists import NeedLines, first_loose_number

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
        if label_problem(text):  # empty, NUL, too long: the careful reader names the line
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

    with open_regular(path, "the score matrix", "give a CSV file") as fh:
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


def _line_ends(data: bytes) -> np.ndarray:
    """Offsets of the \\n ending each line of ``data`` (``len(data)`` for a last line without one)."""
    ends = np.flatnonzero(np.frombuffer(data, np.uint8) == 10)
    return ends if ends.size and ends[-1] == len(data) - 1 else np.r_[ends, len(data)]


def _cell_counts(data: bytes, ends: np.ndarray) -> np.ndarray:
    """Commas on each line of ``data``."""
    commas = np.flatnonzero(np.frombuffer(data, np.uint8) == 44)
    return np.diff(np.r_[0, np.searchsorted(commas, ends)])


def _whole(path: Path) -> bytes:
    with open_regular(path, "the score matrix", "give a CSV file") as fh:
        return fh.read()


def _head(path: Path, lines: int) -> bytes:
    """The first ``lines`` lines of a file (all of it when shorter); NeedLines when one is blank (the
    careful reader would skip it and read a row further)."""
    with open_regular(path, "the score matrix", "give a CSV file") as fh:
        head = [fh.readline() for _ in range(lines)]
    if any(not line.strip() for line in head if line):
        raise NeedLines
    return b"".join(head)


def read_numpy(path: Path, max_rows: int | None = None) -> tuple[np.ndarray, list[str], list[str]]:
    """(values, probe labels, gallery labels) of a file without quotes, parsed block by block of rows in
    array operations (:func:`parse_cells`). ``max_rows``: the header and that many probe rows only (validation)."""
    data = _whole(path) if max_rows is None else _head(path, max_rows + 1)
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
    ends = _line_ends(body)
    if not np.all(_cell_counts(body, ends) == width - 1):
        raise NeedLines  # a row of another length, or a blank line
    values = np.empty((ends.size, width - 1))
    probes: list[str] = []
    step = max(1, _BLOCK_CELLS // width)
    for first in range(0, ends.size, step):
        lo = 0 if first == 0 else int(ends[first - 1]) + 1
        hi = int(ends[min(first + step, ends.size) - 1])
        block, labels = parse_cells(body[lo:hi], width)
        values[first:first + step] = block
        probes += _labels(labels)
    return values, probes, gallery


#: exact powers of ten (integers converted: 10**k is a double exactly for k <= 22)
_POW10 = np.array([float(10 ** k) for k in range(23)])
#: decimal digits a cell may have for its value to be computed as (integer digits) / 10**(fraction digits):
#: the integer stays below 2**53, so both operands are exact and the division rounds once, as float() does
_EXACT_DIGITS = 15


def parse_cells(data: bytes, width: int) -> tuple[np.ndarray, list[bytes]]:
    """(values of shape (rows, width - 1), first cell of each row) of rows of ``width`` comma-separated cells
    separated by \\n. A plain decimal cell (a sign, at most 15 digits, at most one point) is read digit by
    digit for all cells at once (Horner's rule, one step per character position) and divided by its power
    of ten: exactly the value ``float()`` gives (Clinger's exact case). Any other cell goes through
    ``float()`` and the strict grammar (calibrate.files.score_lists.NUMBER); NeedLines for one either refuses."""
    b = np.frombuffer(data, np.uint8)
    stops = np.flatnonzero((b == 44) | (b == 10))
    starts, ends = np.r_[0, stops + 1], np.r_[stops, b.size]
    number = np.ones(starts.size, dtype=bool)
    number[::width] = False  # the labels
    numbers, length = starts[number], (ends - starts)[number]
    mantissa, digits, fraction = np.zeros(numbers.size), np.zeros(numbers.size, np.int64), np.zeros(numbers.size, np.int64)
    first = b[np.minimum(numbers, b.size - 1)]
    plain = (length >= 1) & (length <= _EXACT_DIGITS + 2)
    point = np.zeros(numbers.size, dtype=bool)
    for k in range(int(length[plain].max(initial=0))):
        inside = plain & (k < length)
        c = b[np.minimum(numbers + k, b.size - 1)]
        digit = inside & ((c - np.uint8(48)) < 10)
        dot = inside & (c == 46)
        sign = inside & (k == 0) & ((c == 45) | (c == 43))
        plain &= ~inside | digit | (dot & ~point) | sign
        mantissa = np.where(digit, mantissa * 10.0 + (c - np.uint8(48)), mantissa)
        digits += digit
        fraction += digit & point
        point |= dot
    plain &= (digits >= 1) & (digits <= _EXACT_DIGITS)
    value = mantissa / _POW10[np.where(plain, fraction, 0)]
    value[plain & (first == 45)] *= -1.0
    for k in np.flatnonzero(~plain).tolist():
        value[k] = _careful_cell(data[numbers[k]:numbers[k] + length[k]])
    return value.reshape(-1, width - 1), [data[starts[k]:ends[k]] for k in range(0, starts.size, width)]


def _careful_cell(text: bytes) -> float:
    """``float()`` of a cell the array parse does not take, held to the strict grammar; NeedLines otherwise."""
    try:
        value = float(text)
    except ValueError:
        raise NeedLines from None
    if first_loose_number([text]) is not None:
        raise NeedLines
    return value
