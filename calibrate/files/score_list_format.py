"""What a score list is and how its format is told (calibrate.files.score_lists reads it): bob's 4- and 5-column
formats and CSV/TSV tables (:data:`BOB_FORMATS`, :data:`ROLES`, :data:`DEFAULT_COLUMNS`), the :class:`Comparisons`
every reader returns, the :class:`Wording` of their messages (:data:`RECIPE`, :data:`COMMAND_LINE`),
:class:`NeedLines` (the pyarrow reader hands a file to the python one), and :func:`sniff`: the format from the
first line, refusing a compressed file, a bob file's header line and scores written with a decimal comma.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from calibrate.errors import DataError
from calibrate.files.untrusted import open_regular
from calibrate.formatting import shown

#: the roles a CSV's columns play, and the header names used when ``columns:`` does not say
ROLES = ("claimed", "real", "probe", "score")
DEFAULT_COLUMNS = {"claimed": "claimed_id", "real": "real_id", "probe": "test_label", "score": "score"}
#: field positions (claimed, real, probe, score) of bob's whitespace formats
BOB_FORMATS = {"4-column": (4, (0, 1, 2, 3)), "5-column": (5, (0, 2, 3, 4))}
_ASCII_SPACE = " \t\n\r\x0b\x0c"  # what bytes.split() splits on


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
    #: how to read two plain files of scores, one per line (genuine and impostor: pyeer's input)
    one_per_line: str = ""


RECIPE = Wording(format="set `format:` under `data:` (and `delimiter:` for a CSV)",
                 columns="name the header's columns with `columns: {claimed: ..., real: ..., probe: ..., score: ...}` "
                         "under `data:`",
                 missing="set `missing: {}` under `data:`",
                 semicolons="set `format: csv` and `delimiter: ';'` under `data:`",
                 one_per_line="the `genuine-impostor` dataset reads a file of genuine and one of impostor scores")


COMMAND_LINE = Wording(format="give --format 4-column, 5-column or csv (a CSV read on the command line is separated by "
                              "commas or tabs)",
                       columns="name the header's columns with --claimed-column, --real-column and --score-column",
                       missing="give --missing {}",
                       semicolons="save the file again separated by commas or tabs, or read it in a recipe "
                                  "(`format: csv`, `delimiter: ';'` under `data:`)",
                       one_per_line="give it as --genuine or --impostor (with the other file) instead of SCORES")


class NeedLines(Exception):
    """The pyarrow path found something to report: the python reader says it, with the line (raised
    by the readers, and by a ``finish`` of :func:`read_then` through :func:`line_of`)."""


def _first_line(path: Path) -> tuple[int, str]:
    try:
        with open_regular(path, "the score list", "give a score file") as fh:
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
        with open_regular(path, "the score list", "give a score file") as fh:
            head = fh.read(8)
    except (OSError, DataError):
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
                            + (f"it is separated by semicolons: {words.semicolons}" if ";" in line else words.format)
                            + (f"; it holds one score per line: {words.one_per_line}"
                               if len(fields) == 1 and _is_number(fields[0]) and words.one_per_line else ""))
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
