"""The pyarrow reader of score lists (the optional extra ``fast-io``; calibrate.files.score_lists chooses the
reader): the file parsed in C, several blocks at a time, taken only when it reads cleanly; anything the python
reader would refuse or must name a line for raises :class:`calibrate.files.score_list_format.NeedLines`, and the
python reader, the reference, reads the file again and says what is wrong and where.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from calibrate.errors import DataError
from calibrate.files.score_list_format import BOB_FORMATS, Comparisons, NeedLines, _ASCII_SPACE, _csv_columns, _first_line
from calibrate.files.score_list_python_reader import _BLOCK, _factor

def pyarrow_available() -> bool:
    try:
        import pyarrow.csv  # noqa: F401
    except ImportError:
        return False
    return True


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
