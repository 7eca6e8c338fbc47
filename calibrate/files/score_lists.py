"""Score files: reading the comparisons of a score list, one per line, as bob's score files or a
CSV/TSV table. The ``score-list`` and ``score-shards`` datasets build their matrices from what this
reads, and ``calibrate accept`` decides on it directly, so it is a core service (a public module,
calibrate.PUBLIC_MODULES) rather than one plugin's code that the CLI would have to import.

Formats (``fmt``; by default told from the first non-empty line): ``4-column`` (bob's
``claimed_id real_id test_label score``), ``5-column`` (``claimed_id model_label real_id test_label
score``, the model label ignored), fields separated by runs of spaces or tabs; ``csv``: a header row,
then one comparison per row, ``columns`` naming the header's claimed, real, probe (optional) and
score columns.

Readers. ``pyarrow`` (the optional extra ``fast-io``) parses the file in C, several blocks at a
time; ``python`` (always available) reads blocks of lines with ``bytes.split`` / the ``csv``
module. The pyarrow path hands any file it does not accept cleanly (a parse error, a label holding
whitespace, a NaN score, ...; or a caller's :class:`NeedLines`) to the python reader, which is the
reference: it gives every message (file and line), so both paths return the same data and say the
same thing.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, TypeVar

import numpy as np

from calibrate.errors import DataError
from calibrate.formatting import shown
from calibrate.files.untrusted import MAX_LABEL, label_problem, regular_file

T = TypeVar("T")

#: the roles a CSV's columns play, and the header names used when ``columns:`` does not say
ROLES = ("claimed", "real", "probe", "score")
DEFAULT_COLUMNS = {"claimed": "claimed_id", "real": "real_id", "probe": "test_label", "score": "score"}
#: field positions (claimed, real, probe, score) of bob's whitespace formats
BOB_FORMATS = {"4-column": (4, (0, 1, 2, 3)), "5-column": (5, (0, 2, 3, 4))}
_ASCII_SPACE = " \t\n\r\x0b\x0c"  # what bytes.split() splits on
_BLOCK = 1 << 24
#: the python CSV reader's progress is advanced every this many rows
_PROGRESS_ROWS = 1 << 16


def pyarrow_available() -> bool:
    try:
        import pyarrow.csv  # noqa: F401
    except ImportError:
        return False
    return True


@dataclass
class Comparisons:
    """Comparisons as codes into label lists (one entry per comparison, in file order)."""

    claimed: np.ndarray            # int64 codes into claimed_labels
    claimed_labels: list[str]
    real: np.ndarray               # int64 codes into real_labels
    real_labels: list[str]
    probe: np.ndarray | None       # int64 codes into probe_labels, or None (no probe column)
    probe_labels: list[str] | None
    scores: np.ndarray             # float64
    lines: np.ndarray | None       # 1-based line of each comparison (python reader), None (pyarrow)
    #: what a comparison's position is called: "line" (text files) or "row" (a Parquet file, whose
    #: comparison i is row i + 1: no lines to find, so messages name the row)
    unit: str = "line"


@dataclass(frozen=True)
class Wording:
    """How the readers' messages name the settings that fix a file: a recipe's keys under ``data:`` or the
    command line's flags. Every reader takes one (``words``) and hands it on, so that a message never names
    a recipe key to someone at the command line, nor a flag in a recipe."""

    #: what to set when the format cannot be told from the file
    format: str
    #: what names a CSV header's columns
    columns: str
    #: what marks failed comparisons, with ``{}`` for the marker
    missing: str
    #: how to read a CSV separated by semicolons (the format cannot be told from its header)
    semicolons: str


RECIPE = Wording(format="set `format:` under `data:` (and `delimiter:` for a CSV)",
                 columns="name the header's columns with `columns: {claimed: ..., real: ..., probe: ..., score: ...}` "
                         "under `data:`",
                 missing="set `missing: {}` under `data:`",
                 semicolons="set `format: csv` and `delimiter: ';'` under `data:`")
COMMAND_LINE = Wording(format="give --format 4-column, 5-column or csv (a CSV read on the command line is separated by "
                              "commas or tabs)",
                       columns="name the header's columns with --claimed-column, --real-column and --score-column",
                       missing="give --missing {}",
                       semicolons="save the file again separated by commas or tabs, or read it in a recipe "
                                  "(`format: csv`, `delimiter: ';'` under `data:`)")


class NeedLines(Exception):
    """The pyarrow path found something to report: the python reader says it, with the line (raised
    by the readers, and by a ``finish`` of :func:`read_then` through :func:`line_of`)."""


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
    """Whether float() reads it (format sniffing; the readers then hold each score to NUMBER)."""
    try:
        float(text)
    except ValueError:
        return False
    return True


#: the first bytes of compressed files, the compression's name and the command that undoes it
COMPRESSED = ((b"\x1f\x8b", "gzip", "gunzip -k"), (b"BZh", "bzip2", "bunzip2 -k"),
              (b"\xfd7zXZ\x00", "xz", "unxz -k"), (b"PK\x03\x04", "zip", "unzip"),
              (b"\x28\xb5\x2f\xfd", "zstd", "unzstd"))
#: a number written with a decimal comma (``0,5361``), as some locales' spreadsheets save them
DECIMAL_COMMA = re.compile(r"\s*[+-]?\d*,\d+(?:[eE][+-]?\d+)?\s*", re.ASCII)
#: what a header's column name looks like (a bob file's line 1 that is a header, not a comparison)
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*", re.ASCII)


def compression_problem(path: Path) -> str | None:
    """Why a compressed file cannot be read as a score list (its compression and the command that undoes it),
    or None. Compressed files are not read: a reader streams the file more than once and names lines of the
    text, and decompressing is one command (``gunzip -k``) that also shows what the file holds."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(8)
    except OSError:
        return None  # the reader says why it cannot read it
    for magic, name, tool in COMPRESSED:
        if head.startswith(magic):
            return (f"{path}: the file is {name}-compressed, and score lists are read as text; decompress it first "
                    f"(`{tool} {path}`) and give the decompressed file")
    return None


def sniff(path: Path, fmt: str = "auto", delimiter: str | None = None,
          words: Wording = RECIPE) -> tuple[str, str | None]:
    """(format, delimiter) of a score list: bob's 4/5 columns when the first line has 4 or 5
    whitespace-separated fields ending in a number, else a CSV whose header shows the delimiter. A compressed
    file, a bob file's header line and scores written with a decimal comma are refused here, by their name."""
    if fmt not in ("auto", "csv") and fmt not in BOB_FORMATS:  # else it reaches a reader as a delimiter
        raise DataError(f"{path}: unknown score list format {str(fmt)[:40]!r}; give auto, 4-column, 5-column or csv")
    compressed = compression_problem(path)
    if compressed:
        raise DataError(compressed)
    if fmt == "csv" and delimiter is not None:
        return fmt, delimiter
    number, line = _first_line(path)
    fields = line.split()
    if fmt in BOB_FORMATS or (fmt == "auto" and len(fields) in (4, 5) and "," not in line and "\t" not in line):
        ncols = BOB_FORMATS[fmt][0] if fmt in BOB_FORMATS else len(fields)
        if len(fields) == ncols and not _is_number(fields[-1]) and all(_NAME.fullmatch(f) for f in fields):
            raise DataError(f"{path}, line {number}: {line.strip()[:80]!r} is a header line (column names), which "
                            f"bob's score files do not have; remove the line")
    if fmt in BOB_FORMATS:
        return fmt, None
    if fmt == "auto":
        if len(fields) in (4, 5) and _is_number(fields[-1]) and "," not in line:
            return ("4-column" if len(fields) == 4 else "5-column"), None
        if len(fields) in (4, 5) and DECIMAL_COMMA.fullmatch(fields[-1]) and "," not in "".join(fields[:-1]):
            raise DataError(f"{path}, line {number}: score {fields[-1][:40]!r} is written with a decimal comma; "
                            "write scores with a decimal point (0.5, not 0,5), e.g. save the file again with an "
                            "English number format")
    if delimiter is None:
        if "," in line:
            delimiter = ","
        elif "\t" in line:
            delimiter = "\t"
        else:
            raise DataError(f"{path}, line {number}: cannot tell the score list's format: not 4 or 5 whitespace-separated "
                            "fields ending in a score (bob's `claimed_id real_id test_label score`), and no comma or "
                            "tab in what would be a CSV header; "
                            + (f"it is separated by semicolons: {words.semicolons}" if ";" in line else words.format))
    return "csv", delimiter


def _csv_columns(path: Path, header: list[str], line: int, columns: dict | None,
                 words: Wording = RECIPE) -> tuple[int, int, int | None, int]:
    """Header positions of (claimed, real, probe or None, score)."""
    names = dict(DEFAULT_COLUMNS if columns is None else columns)
    given = [(role, names[role]) for role in ROLES if names.get(role) is not None]
    for k, (role, name) in enumerate(given):
        other = next((r for r, n in given[k + 1:] if n == name), None)
        if other is not None:  # one column cannot be both: the readers would read it twice
            raise DataError(f"{path}: column {name!r} is named as both the {role} and the {other} column; give each "
                            f"role its own column: {words.columns}")
    positions = []
    for role in ROLES:
        name = names.get(role)
        if name is None or (role == "probe" and columns is None and name not in header):
            positions.append(None)  # no probe column
            continue
        hits = [i for i, h in enumerate(header) if h == name]
        if not hits:
            matrix = len(header) > 8 and not any(n in header for n in names.values() if n is not None)
            raise DataError(f"{path}, line {line}: no column {name!r} (the {role} column) in the header "
                            f"({shown(header)}); " + (f"a header of {len(header):,} columns is a score matrix's (a "
                                                      "column per class), not a score list's: read it in a recipe "
                                                      "with `plugin: score-matrix`" if matrix else words.columns))
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
        with open(path, newline="", encoding="utf-8") as fh:
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


# ---- the pyarrow reader ----------------------------------------------------------------------

def _arrow_labels(col, strip: bool) -> tuple[np.ndarray, list[str]]:
    """Codes and labels of a dictionary-encoded column; NeedLines for anything the python reader would refuse."""
    if col.null_count:
        raise NeedLines
    col = col.unify_dictionaries()
    if col.num_chunks == 0:
        return np.zeros(0, np.int64), []
    labels = col.chunk(0).dictionary.to_pylist()
    codes = np.concatenate([np.asarray(ch.indices.to_numpy(zero_copy_only=False), np.int64) for ch in col.chunks])
    if strip:  # CSV cells are stripped; labels equal after stripping become one
        stripped = [x.strip() for x in labels]
        if any(not x for x in stripped):
            raise NeedLines
        if stripped != labels:
            table: dict = {}
            remap = _factor(table, stripped)
            codes, labels = remap[codes], list(table)
    elif any(not x or any(ch in x for ch in _ASCII_SPACE) for x in labels):
        raise NeedLines  # pyarrow split on single spaces only: let the python reader split on whitespace
    return codes, labels


def _read_pyarrow(path: Path, fmt: str, delimiter: str | None, columns: dict | None) -> Comparisons:
    import pyarrow as pa
    import pyarrow.csv as pacsv

    labels_t = pa.dictionary(pa.int32(), pa.string())
    if fmt in BOB_FORMATS:
        ncols, positions = BOB_FORMATS[fmt]
        names = [f"f{i}" for i in range(ncols)]
        read = pacsv.ReadOptions(column_names=names, block_size=_BLOCK)
        parse = pacsv.ParseOptions(delimiter=" ", quote_char=False, double_quote=False, escape_char=False)
        used = [names[i] for i in positions]
    else:
        read = pacsv.ReadOptions(block_size=_BLOCK)
        parse = pacsv.ParseOptions(delimiter=delimiter, quote_char='"', double_quote=True, escape_char=False)
        number, first = _first_line(path)
        if number != 1:
            raise NeedLines
        header = next(csv.reader([first], delimiter=delimiter))
        stripped = [h.strip() for h in header]
        try:
            positions = _csv_columns(path, stripped, 1, columns)
        except DataError:
            raise NeedLines from None  # the python reader says it (a header that is not UTF-8 text, ...)
        if len(set(header)) != len(header):
            raise NeedLines
        used = [header[i] if i is not None else None for i in positions]
    types = {name: labels_t for name in used[:3] if name is not None}
    types[used[3]] = pa.float64()
    convert = pacsv.ConvertOptions(column_types=types, include_columns=[u for u in used if u is not None],
                                   null_values=[], strings_can_be_null=False, quoted_strings_can_be_null=False,
                                   true_values=[], false_values=[])
    try:
        table = pacsv.read_csv(path, read_options=read, parse_options=parse, convert_options=convert)
    except (pa.ArrowException, ValueError, UnicodeError):
        raise NeedLines from None
    try:  # a column pyarrow cannot hand over as asked: the python reader says what is wrong
        strip = fmt == "csv"
        claimed, claimed_labels = _arrow_labels(table.column(used[0]), strip)
        real, real_labels = _arrow_labels(table.column(used[1]), strip)
        probe = probe_labels = None
        if used[2] is not None:
            probe, probe_labels = _arrow_labels(table.column(used[2]), strip)
        score = table.column(used[3])
    except (pa.ArrowException, KeyError, ValueError):
        raise NeedLines from None
    if score.null_count:
        raise NeedLines
    scores = np.concatenate([ch.to_numpy(zero_copy_only=False) for ch in score.chunks]) if score.num_chunks \
        else np.zeros(0)
    return Comparisons(claimed, claimed_labels, real, real_labels, probe, probe_labels, np.asarray(scores, np.float64), None)


def _release_arrow_memory() -> None:
    """Hand the memory pyarrow's pool kept from a read back to the system: the file's columns are numpy arrays
    by now, and what comes after (numpy) never allocates from that pool, so it would only sit there (about 1.5x
    the file's size, for the rest of the process)."""
    import pyarrow as pa

    release = getattr(pa.default_memory_pool(), "release_unused", None)
    if release is not None:
        release()


def line_of(rows: Comparisons, i: int) -> int:
    """The 1-based file line (or Parquet row) of comparison ``i``; from the pyarrow reader (no lines),
    :class:`NeedLines`, which makes :func:`read_then` read the file again with the python reader to
    name the line."""
    if rows.lines is None:
        if rows.unit == "row":
            return i + 1
        raise NeedLines
    return int(rows.lines[i])


def place(rows: Comparisons, i: int) -> str:
    """Where comparison ``i`` is, for a message: "line 12" (a text file) or "row 12" (Parquet)."""
    return f"{rows.unit} {line_of(rows, i)}"


def read_then(path: Path, fmt: str, delimiter: str | None, columns: dict | None, reader: str, max_rows: int | None,
              finish: Callable[[Comparisons, str], T], words: Wording = RECIPE, task=None) -> T:
    """``finish(rows, fmt)`` on the file's comparisons: read by pyarrow when it may, by the python reader
    when pyarrow is not wanted, reads a prefix only, or ``finish`` needs line numbers (``NeedLines``).
    ``words``: how messages name the settings (a recipe's keys, or the command line's flags); ``task``: a
    progress task (calibrate.contract.progress.Task) advanced by the comparisons read, as the python reader reads its
    blocks, and at once when pyarrow's read is taken."""
    regular_file(path, "the score list", "give a score file")
    fmt, delimiter = sniff(path, fmt, delimiter, words)
    if max_rows is None and reader != "python" and (reader == "pyarrow" or pyarrow_available()):
        try:
            rows = _read_pyarrow(path, fmt, delimiter, columns)
        except NeedLines:
            rows = None  # the python reader reads it, or says what is wrong and where
        finally:
            _release_arrow_memory()
        if rows is not None:
            try:
                out = finish(check_labels(path, rows), fmt)
            except NeedLines:
                pass
            else:
                if task is not None:
                    task.advance(rows.scores.size)
                return out
    if fmt in BOB_FORMATS:
        rows = _read_whitespace_python(path, fmt, max_rows, words, task)
    else:
        rows = _read_csv_python(path, delimiter, columns, max_rows, words, task)
    return finish(check_labels(path, rows), fmt)


def refuse_repeats(path: Path, rows: Comparisons, fmt: str) -> None:
    """The one rule for repeated comparisons, for every reader of score lists (a recipe's datasets, ``calibrate
    fit``, ``evaluate``, ``accept`` and their cohort files): a probe compared twice with one claimed class is a
    DataError naming both lines (a duplicated line would otherwise count twice). Without a probe column (a CSV
    without one) every comparison is its own probe, so nothing repeats."""
    if rows.probe is None or rows.scores.size < 2:
        return
    n = rows.scores.size
    width = max(len(rows.claimed_labels), 1)
    key = rows.probe * width + rows.claimed
    cells = (int(rows.probe.max()) + 1) * width
    if cells <= max(8 * n, 1 << 20):  # a bitmap of the (probe, class) pairs: one pass
        present = np.zeros(cells, bool)
        present[key] = True
        if np.count_nonzero(present) == n:
            return
    order = np.argsort(key, kind="stable")
    again = order[1:][key[order][1:] == key[order][:-1]]
    if again.size == 0:
        return
    j = int(again.min())  # the first line that repeats an earlier one, and that earlier one
    i = int(np.flatnonzero(key == key[j])[0])
    hint = (" (a 5-column file with several models per claimed class is not supported: keep one model per class)"
            if fmt == "5-column" else "")
    raise DataError(f"{path}, {rows.unit}s {line_of(rows, i)} and {line_of(rows, j)}: probe "
                    f"{rows.probe_labels[rows.probe[i]]!r} is compared with claimed class "
                    f"{rows.claimed_labels[rows.claimed[i]]!r} twice; keep one comparison per probe and class{hint}")


def check_labels(path: Path, rows: Comparisons) -> Comparisons:
    """Refuse a label that a saved calibration could not hold (``calibrate.files.untrusted.label_problem``:
    empty, a NUL, more than MAX_LABEL characters), naming its line, before anything builds
    fixed-width arrays of the labels; from the pyarrow reader, NeedLines (the python reader names it)."""
    for what, labels, codes in (("claimed class", rows.claimed_labels, rows.claimed),
                                ("real class", rows.real_labels, rows.real),
                                ("probe id", rows.probe_labels, rows.probe)):
        if not labels or (max(map(len, labels)) <= MAX_LABEL and min(map(len, labels)) > 0
                          and "\0" not in "".join(labels)):
            continue  # the usual case, at C speed
        k = next(k for k, x in enumerate(labels) if label_problem(x))
        where = f"{path}, {place(rows, int(np.flatnonzero(codes == k)[0]))}"
        if len(labels[k]) > MAX_LABEL:
            raise DataError(f"{where}: a {what} of {len(labels[k]):,} characters ({labels[k][:40]!r}...); labels are "
                            f"at most {MAX_LABEL:,} characters: check the file's format and delimiter")
        raise DataError(f"{where}: a {what} {labels[k][:40]!r} {label_problem(labels[k])}; a label is non-empty text "
                        "without NUL characters: check the file's format and encoding")
    return rows


def read_comparisons(path: Path, *, fmt: str = "auto", delimiter: str | None = None, columns: dict | None = None,
                     reader: str = "auto", missing: float | None = None, words: Wording = RECIPE,
                     task=None) -> Comparisons:
    """Every comparison of one score list, in file order (no matrix is built): what
    ``calibrate fit``, ``evaluate`` and ``accept`` read. Same formats, readers, checks and messages as the dataset
    (a probe compared twice with one class: :func:`refuse_repeats`); a NaN or infinite score (other than
    ``missing``) is a DataError naming file and line. ``task``: as :func:`read_then`'s."""
    path = Path(path)

    def finite(rows: Comparisons, fmt: str) -> Comparisons:
        bad = ~np.isfinite(rows.scores) & ((rows.scores != missing) if missing is not None else True)
        if bad.any():  # from the pyarrow reader, line_of hands the file to the python reader for the line
            i = int(np.flatnonzero(bad)[0])
            raise DataError(f"{path}, {place(rows, i)}: NaN or infinite score; remove the line, or mark failed "
                            f"comparisons with a number and {words.missing.format('NUMBER')}")
        refuse_repeats(path, rows, fmt)
        return rows

    return read_then(path, fmt, delimiter, columns, reader, None, finite, words, task)
