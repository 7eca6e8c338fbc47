"""The python reader of score lists, the reference (calibrate.files.score_lists chooses the reader): blocks of
lines split with ``bytes.split`` (bob's formats) or rows of the ``csv`` module, every message naming its file and
line; labels coded in order of first appearance (:func:`_factor`), and scores held to the strict grammar
:data:`NUMBER` (:func:`to_floats`, :func:`strict_floats`, :func:`first_loose_number`), which other readers of
numbers use too.
"""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

import numpy as np

from calibrate.errors import DataError
from calibrate.files.untrusted import open_regular
from calibrate.files.score_list_format import (BOB_FORMATS, DECIMAL_COMMA, RECIPE, Comparisons, Wording, _ASCII_SPACE,
                                               _csv_columns)

_BLOCK = 1 << 24
#: the python CSV reader's progress is advanced every this many rows
_PROGRESS_ROWS = 1 << 16


def _factor(table: dict, items: list) -> np.ndarray:
    """Codes of items in ``table`` (label -> code, in order of first appearance), which grows."""
    for x in dict.fromkeys(items):  # the distinct items, in order
        if x not in table:
            table[x] = len(table)
    return np.fromiter(map(table.__getitem__, items), np.int64, count=len(items))


#: what a score may look like: a decimal number (sign, digits, point, exponent), inf or nan, spaces around.
#: Python's float() also takes 1_000 and non-ASCII digits; a score file that holds them holds a mistake
NUMBER = re.compile(r"\s*[+-]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|inf(?:inity)?|nan)\s*", re.IGNORECASE | re.ASCII)


def strict_floats(values, what: str) -> np.ndarray:
    """``values`` (numbers, or text as from a caller's file) as float64; text under :data:`NUMBER`,
    where numpy would read ``"0_5"`` as 5.0. A DataError starting with ``what`` otherwise."""
    arr = np.asarray(values)
    if arr.dtype.kind in "USO":
        for k, x in enumerate(arr.ravel().tolist()):
            text = x.decode("utf-8", "replace") if isinstance(x, bytes) else x
            if isinstance(text, str) and not NUMBER.fullmatch(text):
                raise DataError(f"{what}: {text[:80]!r} (number {k + 1}) is not a number; write decimal numbers "
                                "(no underscores or other digits)")
    try:
        return np.asarray(arr, dtype=np.float64)
    except (TypeError, ValueError):
        raise DataError(f"{what} must be numbers") from None


def first_loose_number(texts: list) -> int | None:
    """The index of the first of ``texts`` (str or bytes) that float() reads but :data:`NUMBER` refuses
    (an underscore, a non-ASCII digit), or None: one pass over the joined text, then a look at each."""
    if not texts:
        return None
    joined = b"".join(texts) if isinstance(texts[0], bytes) else "".join(texts)
    if (b"_" if isinstance(joined, bytes) else "_") not in joined and joined.isascii():
        return None
    for i, text in enumerate(texts):
        if isinstance(text, bytes):
            text = text.decode("utf-8", errors="replace")
        if not NUMBER.fullmatch(text):
            return i
    return None


def to_floats(path: Path, raw: list, lines, what: str, unit: str = "line", words: Wording = RECIPE) -> np.ndarray:
    """Scores from their texts (str or bytes) under the :data:`NUMBER` grammar; a DataError naming
    ``path`` and the ``unit`` ("line", "row") of the first that is not a number."""
    def refuse(text, line):
        if isinstance(text, bytes):
            text = text.decode("utf-8", errors="replace")
        if DECIMAL_COMMA.fullmatch(text):
            return DataError(f"{path}, {unit} {line}: score {text[:80]!r}{what} is written with a decimal comma; write "
                             "scores with a decimal point (0.5, not 0,5), e.g. save the file again with an English "
                             "number format")
        return DataError(f"{path}, {unit} {line}: score {text[:80]!r} is not a number{what}; write the score as a "
                         "decimal number (no underscores or other digits), or a marker such as -1 there and "
                         f"{words.missing.format(-1)}")

    try:
        values = np.fromiter(map(float, raw), dtype=np.float64, count=len(raw))
    except ValueError:
        for text, line in zip(raw, lines):
            try:
                float(text)
            except ValueError:
                raise refuse(text, line) from None
        raise
    loose = first_loose_number(raw)
    if loose is not None:
        raise refuse(raw[loose], lines[loose])
    return values


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


def _read_whitespace_python(path: Path, fmt: str, max_rows: int | None, words: Wording = RECIPE,
                            task=None) -> Comparisons:
    ncols, (ic, ir, ip, isc) = BOB_FORMATS[fmt]
    tables: tuple[dict, dict, dict] = ({}, {}, {})
    parts: list[tuple[np.ndarray, ...]] = []
    line, rows, rest = 0, 0, b""
    try:
        with open_regular(path, "the score list", "give a score file") as fh:
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
                    parts.append((_factor(tables[0], c), _factor(tables[1], r), _factor(tables[2], p), to_floats(path, s, ln, "", words=words),
                                  np.array(ln, np.int64)))
                    if task is not None:
                        task.advance(len(c))
                if not block or (max_rows is not None and rows >= max_rows):
                    break
    except OSError as exc:
        raise DataError(f"{path}: cannot read the score list ({exc})") from None
    cols = [np.concatenate([p[k] for p in parts]) if parts else np.zeros(0, np.int64 if k != 3 else np.float64)
            for k in range(5)]
    return Comparisons(cols[0], _decode(path, tables[0], cols[0], cols[4]), cols[1], _decode(path, tables[1], cols[1], cols[4]),
                 cols[2], _decode(path, tables[2], cols[2], cols[4]), cols[3], cols[4])


def _read_csv_python(path: Path, delimiter: str, columns: dict | None, max_rows: int | None,
                     words: Wording = RECIPE, task=None) -> Comparisons:
    tables: tuple[dict, dict, dict] = ({}, {}, {})
    c, r, p, s, ln = [], [], [], [], []
    header = None
    try:
        with io.TextIOWrapper(open_regular(path, "the score list", "give a score file"), encoding="utf-8", newline="") as fh:
            reader = csv.reader(fh, delimiter=delimiter)
            for row in reader:
                if not row or not any(cell.strip() for cell in row):
                    continue
                if header is None:
                    header = [cell.strip() for cell in row]
                    ic, ir, ip, isc = _csv_columns(path, header, reader.line_num, columns, words)
                    continue
                if len(row) != len(header):
                    comma = (" (scores written with a decimal comma? write 0.5, not 0,5)" if delimiter == ","
                             and len(row) > len(header) and DECIMAL_COMMA.fullmatch(",".join(row[isc:isc + 2])) else "")
                    raise DataError(f"{path}, line {reader.line_num}: {len(row)} fields but the header has {len(header)}"
                                    f" (delimiter {delimiter!r}){comma}; quote cells that hold the delimiter")
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
                if task is not None and not len(ln) % _PROGRESS_ROWS:
                    task.advance(_PROGRESS_ROWS)
    except UnicodeDecodeError:
        raise DataError(f"{path}, line {len(ln) + 2 if header else 1} or near it: not UTF-8 text; "
                        "save the file as UTF-8") from None
    except (OSError, csv.Error) as exc:
        raise DataError(f"{path}: cannot read the score list ({exc})") from None
    if header is None:
        raise DataError(f"{path}: empty file; a CSV score list needs a header row and one comparison per row")
    if task is not None:
        task.advance(len(ln) % _PROGRESS_ROWS)
    lines = np.array(ln, np.int64)
    scores = to_floats(path, s, ln, f" (column {header[isc]!r})", words=words)
    probe = _factor(tables[2], p) if ip is not None else None
    return Comparisons(_factor(tables[0], c), list(tables[0]), _factor(tables[1], r),
                 list(tables[1]), probe, list(tables[2]) if ip is not None else None, scores, lines)
