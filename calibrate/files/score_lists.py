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

Here: choosing the reader and falling back (:func:`read_then`), where a comparison is (:func:`line_of`,
:func:`place`), and the checks every reader's comparisons get (:func:`check_labels`, :func:`refuse_repeats`,
:func:`read_comparisons`). The formats, :class:`Comparisons` and :func:`sniff` are in
calibrate.files.score_list_format, the readers in calibrate.files.score_list_python_reader and
calibrate.files.score_list_pyarrow_reader. Every name this module had before that split is importable from here
still (a public module: plugins and the CLI import them).
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, TypeVar

import numpy as np

from calibrate.errors import DataError
from calibrate.files.untrusted import MAX_LABEL, label_problem, regular_file
from calibrate.files.score_list_format import (BOB_FORMATS, COMMAND_LINE, COMPRESSED, DECIMAL_COMMA,  # noqa: F401  (re-exported: public API)
                                               DEFAULT_COLUMNS, RECIPE, ROLES, Comparisons, NeedLines, Wording,
                                               compression_problem, sniff)
from calibrate.files.score_list_python_reader import (NUMBER, _read_csv_python, _read_whitespace_python,  # noqa: F401  (re-exported: public API)
                                                      first_loose_number, strict_floats, to_floats)
from calibrate.files.score_list_pyarrow_reader import _read_pyarrow, _release_arrow_memory, pyarrow_available

T = TypeVar("T")


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


#: genuine and impostor score files (pyeer's input) carry no class: every attempt claims this one class, and an impostor
#: attempt's probe is of :data:`OTHER_CLASS`, enrolled nowhere
POOLED_CLASS = "pooled"
OTHER_CLASS = "impostor"


def read_score_column(path: Path, what: str, *, missing: float | None = None, words: Wording = RECIPE,
                      max_lines: int | None = None) -> tuple[np.ndarray, int]:
    """A plain file of scores, one per line, blank lines skipped (pyeer's input: one file of genuine scores, another
    of impostor scores; ``what`` says which, in messages): (the scores, how many equal ``missing`` and were left out).
    A line of several fields (a score list given here), a score that is not a finite number, a compressed file or
    one without any score is a DataError naming the file and the line. ``max_lines``: read only the first lines
    (validation)."""
    regular_file(path, what, "give a text file of scores, one per line")
    compressed = compression_problem(path)
    if compressed:
        raise DataError(compressed)
    if max_lines is None:
        data = path.read_bytes()
    else:
        with path.open("rb") as fh:
            data = b"".join(line for _, line in zip(range(max_lines), fh))
    tokens = data.split()
    if not tokens:
        raise DataError(f"{path}: {what} holds no score; give a text file of scores, one per line")
    lines = data.splitlines()
    numbers: range | list[int] = range(1, len(tokens) + 1)
    if len(lines) != len(tokens):  # blank lines, or a line of several fields
        numbers = [k for k, line in enumerate(lines, 1) if line.strip()]
        if len(numbers) != len(tokens):
            k = next(k for k, line in enumerate(lines, 1) if len(line.split()) > 1)
            raise DataError(f"{path}, line {k}: {len(lines[k - 1].split())} fields, but {what} holds one score per line "
                            "(a score list of claimed and real ids is read by the `score-list` dataset, or as SCORES "
                            "on the command line)")
    values = to_floats(path, tokens, numbers, "", words=words)
    kept = np.ones(values.size, dtype=bool) if missing is None else values != missing
    bad = kept & ~np.isfinite(values)
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        raise DataError(f"{path}, line {numbers[k]}: score {values[k]!r} is not a finite number; write a marker such "
                        f"as -1 there and {words.missing.format(-1)}")
    return values[kept], int(values.size - np.count_nonzero(kept))
