"""The pyarrow reader of score lists (the optional extra ``fast-io``; calibrate.files.score_lists chooses the
reader): the file parsed in C and streamed, a block at a time, taken only when it reads cleanly; anything the python
reader would refuse or must name a line for raises :class:`calibrate.files.score_list_format.NeedLines`, and the
python reader, the reference, reads the file again and says what is wrong and where.
"""

from __future__ import annotations

import csv
import os
from pathlib import Path

import numpy as np

from calibrate.errors import DataError
from calibrate.files.score_list_format import BOB_FORMATS, Comparisons, NeedLines, _ASCII_SPACE, _csv_columns, _first_line

def pyarrow_available() -> bool:
    try:
        import pyarrow.csv  # noqa: F401
    except ImportError:
        return False
    return True


#: bytes parsed per block: the reader streams the file, a block at a time (a few blocks in flight), so that its
#: memory is a few of them and the comparisons' codes, never the file's text (a whole-file read took about 1.4x
#: the file's size: 526 MB for LFW's 3.8M-line, 399 MB eval list; streamed: 150 MB); 1 MB is as fast as 16 MB
STREAM_BLOCK = 1 << 20


class _Column:
    """One column's values over the streamed blocks, written into one array as they come (grown by half when a
    block does not fit; first sized from the file's size and the first block's lines): one allocation rather
    than a piece per block, which the parser's freed blocks would sit between."""

    def __init__(self, dtype: type):
        self.dtype, self.data, self.n = dtype, np.zeros(0, dtype), 0

    def room(self, k: int, expected: int) -> np.ndarray:
        """The slice the next ``k`` values go into (``expected``: the file's comparisons, as estimated)."""
        if self.n + k > self.data.size:
            grown = np.empty(max(self.n + k, expected, self.data.size * 3 // 2), self.dtype)
            grown[:self.n] = self.data[:self.n]
            self.data = grown
        self.n += k
        return self.data[self.n - k:self.n]

    def done(self) -> np.ndarray:
        return self.data[:self.n] if self.n * 10 >= self.data.size * 9 else self.data[:self.n].copy()


class _Labels(_Column):
    """One label column over the streamed blocks: each block's dictionary mapped to codes into the labels in
    order of first appearance (a label is looked at once: when it is new); NeedLines for anything the python
    reader would refuse (a null, an empty label; in a bob file, one holding whitespace pyarrow did not split on)."""

    def __init__(self, strip: bool):
        super().__init__(np.int64)
        self.table: dict[str, int] = {}
        self.strip = strip
        self._dictionary = None
        self._remap = np.zeros(0, np.int64)

    def add(self, col, expected: int) -> None:
        if col.null_count:
            raise NeedLines
        if self._dictionary is None or not col.dictionary.equals(self._dictionary):  # blocks often repeat theirs
            labels = col.dictionary.to_pylist()
            if self.strip:  # CSV cells are stripped; labels equal after stripping become one
                labels = [x.strip() for x in labels]
            new = [x for x in labels if x not in self.table]
            if any(not x for x in new) or (not self.strip and any(ch in x for x in new for ch in _ASCII_SPACE)):
                raise NeedLines  # bob: pyarrow split on single spaces only; the python reader splits on whitespace
            for x in new:
                self.table.setdefault(x, len(self.table))
            self._remap = np.fromiter(map(self.table.__getitem__, labels), np.int64, count=len(labels))
            self._dictionary = col.dictionary
        np.take(self._remap, col.indices.to_numpy(zero_copy_only=False), out=self.room(len(col), expected))

    def labelled(self) -> tuple[np.ndarray, list[str]]:
        return self.done(), list(self.table)


def _read_pyarrow(path: Path, fmt: str, delimiter: str | None, columns: dict | None) -> Comparisons:
    import pyarrow as pa
    import pyarrow.csv as pacsv

    labels_t = pa.dictionary(pa.int32(), pa.string())
    if fmt in BOB_FORMATS:
        ncols, positions = BOB_FORMATS[fmt]
        names = [f"f{i}" for i in range(ncols)]
        read = pacsv.ReadOptions(column_names=names, block_size=STREAM_BLOCK)
        parse = pacsv.ParseOptions(delimiter=" ", quote_char=False, double_quote=False, escape_char=False)
        used = [names[i] for i in positions]
    else:
        read = pacsv.ReadOptions(block_size=STREAM_BLOCK)
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
    strip = fmt == "csv"
    labels = [_Labels(strip) if name is not None else None for name in used[:3]]
    scores = _Column(np.float64)
    expected = 0
    try:  # a block pyarrow cannot parse or hand over as asked: the python reader says what is wrong
        for batch in pacsv.open_csv(path, read_options=read, parse_options=parse, convert_options=convert,
                                    memory_pool=pa.system_memory_pool()):
            if not expected:  # the file's lines, from the first block's (a little more: grown less often)
                expected = int(os.path.getsize(path) * batch.num_rows / STREAM_BLOCK * 1.05) + batch.num_rows
            for name, column in zip(used[:3], labels):
                if column is not None:
                    column.add(batch.column(name), expected)
            score = batch.column(used[3])
            if score.null_count:
                raise NeedLines
            scores.room(len(score), expected)[:] = score.to_numpy(zero_copy_only=False)
    except (pa.ArrowException, KeyError, ValueError, UnicodeError):
        raise NeedLines from None
    (claimed, claimed_labels), (real, real_labels) = labels[0].labelled(), labels[1].labelled()
    probe, probe_labels = labels[2].labelled() if labels[2] is not None else (None, None)
    return Comparisons(claimed, claimed_labels, real, real_labels, probe, probe_labels, scores.done(), None)


def _release_arrow_memory() -> None:
    """Hand the memory pyarrow's pool kept from a read back to the system: the file's columns are numpy arrays
    by now, and what comes after (numpy) never allocates from that pool, so it would only sit there (about 1.5x
    the file's size, for the rest of the process)."""
    import pyarrow as pa

    release = getattr(pa.default_memory_pool(), "release_unused", None)
    if release is not None:
        release()
