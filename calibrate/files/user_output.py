"""Writing one file the user named (``accept --out``, ``fit --out``, ``evaluate --det``, ``Calibration.save``),
and the cells of every CSV file calibrate writes (:func:`csv_writer`, :func:`csv_text`: no text cell a
spreadsheet would run as a formula).

* ``-`` is standard output; a closed one is refused.
* A new path, or an existing regular file: written beside it and renamed over it, so the file is
  never half-written. The file beside it is created exclusively under a random name (O_CREAT|O_EXCL,
  as ``tempfile.mkstemp``): a planted file or link of a guessable name is never opened or followed.
  A new file gets the permissions any program's new file gets (0666 less the umask: see
  :func:`write_temp_beside`); a replaced file keeps its own permission bits.
* Not a path (bytes, a NUL byte, empty), a name ending in ``/`` (a folder), or one of the command's
  own input files (``inputs``: the same file by device and inode, so a hard link or a symbolic link
  to an input counts; for the command line, a saved calibration's inputs are every file its loader
  reads: calibrate.cli.inputs.command_inputs): refused before anything is written, naming the option
  and the input.
* A symbolic link: the file it points to is replaced that way (the link stays a link); a dangling
  link is refused.
* A character device (``/dev/null``, ``/dev/stdout`` on a terminal) or a FIFO: written through, in
  place; never replaced by a regular file. A FIFO that no process reads is refused at once rather
  than waited on.
* A folder, a socket or a block device: refused.

``data`` is the file's bytes, or an iterable of byte blocks written one after the other (``accept``'s
decisions, a million lines, are never one string in memory); a file replaced is replaced only once every
block is written.

Every failure is a :class:`~calibrate.errors.CalibrateError` naming the path and the fix.
"""

from __future__ import annotations

import codecs
import csv
import errno
import io
import os
import re
import secrets
import stat
import sys
from pathlib import Path
from typing import Callable, Iterable

from calibrate.errors import CalibrateError

STDOUT = "-"


def _blocks(data) -> Iterable[bytes]:
    """``data`` (bytes, or an iterable of byte blocks) as blocks to write."""
    return (data,) if isinstance(data, (bytes, bytearray, memoryview)) else data


def _write_blocks(write: Callable[[bytes], object], data) -> None:
    """``write`` each block of ``data``; blocks made one by one (a generator: ``accept``'s decisions) are written
    by a thread while the next is made (a write releases the GIL; writing accept's 480 MB of decisions on a
    3.8M-line list took 0.5 s), one block at a time in order; a failure on either side stops both and is raised here."""
    if isinstance(data, (bytes, bytearray, memoryview, list, tuple)):
        for block in _blocks(data):
            write(block)
        return
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1, thread_name_prefix="calibrate-write") as pool:
        pending = None
        for block in data:
            if pending is not None:
                pending.result()  # the block before is written (or its error raised): at most two blocks held
            pending = pool.submit(write, block)
        if pending is not None:
            pending.result()

#: what a spreadsheet reads as the start of a formula (OWASP, CSV injection): =, +, -, @, tab, carriage return;
#: and ' itself, so that one ' taken off any cell that starts with one gives the text back
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r", "'")
#: a plain decimal number (``-1``, ``+2.5e-3``): a spreadsheet reads it as that number, never as a formula
_PLAIN_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?", re.ASCII)


def csv_text(cell: object) -> str:
    """A text cell (a class, a probe, a group, an estimator's label) of a CSV file the user may open in a
    spreadsheet: one that starts with =, +, -, @, a tab or a carriage return gets a leading ``'`` (OWASP's
    advice against formula injection), and so does one that starts with ``'``, so that taking one ``'`` off
    a cell that starts with it always gives the text back. A plain decimal number (a class named ``-1``) is
    written as it is: a spreadsheet reads it as a number, not a formula. Numeric cells (scores, thresholds)
    are written by their writers with ``repr`` and never pass through here."""
    text = str(cell)
    if text.startswith(_FORMULA_START) and not _PLAIN_NUMBER.fullmatch(text):
        return "'" + text
    return text


def csv_texts(labels):
    """:func:`csv_text` of every label of a sequence or array, as a numpy array of str (``labels`` itself when
    none needs it): only the labels that start with one of its characters are looked at, so a million
    decisions' labels cost one vectorised pass, not a million calls, and no Python string each."""
    import numpy as np

    text = np.asarray(labels, dtype=str)
    hits = np.flatnonzero(np.isin(text.astype("U1"), np.array(_FORMULA_START)))
    if not hits.size:
        return text
    out = text.astype(f"U{text.dtype.itemsize // 4 + 1}")  # room for the '
    for i in hits.tolist():
        out[i] = csv_text(text[i])
    return out


class _Lines:
    """csv.writer's sink: each row (written whole, ending in ``\r\n``) kept with ``\n`` as its end, in one
    growing string buffer (a list of a million row strings took three times the memory)."""

    def __init__(self):
        self.buffer = io.StringIO()

    def write(self, row: str) -> None:
        self.buffer.write(row[:-2])
        self.buffer.write("\n")


def csv_cells(labels: list) -> list[str]:
    """Each label as a cell of a row :func:`csv_writer` writes: :func:`csv_text`, then quoted where csv.writer
    quotes (a delimiter, a quote, a line break in it). For writers that make each distinct label's cell once and
    join rows themselves (``calibrate accept``'s decisions)."""
    rows: list[str] = []

    class Rows:
        write = rows.append  # csv.writer writes one whole row per call

    writer = csv.writer(Rows(), lineterminator="\r\n")
    for text in csv_texts(labels).tolist() if labels else []:
        writer.writerow([text, ""])  # a second, empty cell: a lone empty cell would be written as ""
    return [line[:-3] for line in rows]


def csv_writer(fieldnames: list[str] | None = None):
    """(a ``csv.writer``, or with ``fieldnames`` a ``csv.DictWriter`` (missing cells empty), for the rows of a
    CSV file the user may open in a spreadsheet; a function giving the file's text once they are written).
    Every CSV calibrate writes goes through here, its text cells through :func:`csv_text`. Rows end in ``\n``
    and are quoted as ``csv.writer`` quotes (only where a cell needs it), a cell holding a carriage return too:
    ``csv.writer`` with ``\n`` line ends leaves it bare (Python 3.11), and a spreadsheet would end the row
    there and read the rest of the cell as a row of its own, unescaped."""
    lines = _Lines()
    writer = (csv.writer(lines, lineterminator="\r\n") if fieldnames is None  # \r in the terminator: quoted
              else csv.DictWriter(lines, fieldnames=fieldnames, lineterminator="\r\n", restval=""))
    return writer, lines.buffer.getvalue


def _fail(path: str, why: str, fix: str = "choose another path") -> CalibrateError:
    return CalibrateError(f"cannot write {path!r}: {why}; {fix}")


def write_temp_beside(folder: Path, name: str, data: bytes | Iterable[bytes], mode: int | None = None) -> Path:
    """A new file holding ``data`` in ``folder``, durably written: created exclusively under a random
    name (O_CREAT|O_EXCL|O_NOFOLLOW, so a planted file or symbolic link of a guessed name is never opened
    or followed). Renamed over its target by the caller; removed again if writing fails.

    Created with mode 0666, which the kernel narrows by the process's umask (or a default ACL of the
    folder) as for any new file: the user's umask, read by nobody. ``tempfile.mkstemp`` would make it
    0600, and reading the umask to widen it again is racy (``os.umask`` can only be read by setting it,
    process-wide, so a thread creating a file meanwhile would get the wrong mode). ``mode``: these
    permission bits instead (set on the open file, never through a name)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    for _ in range(100):
        tmp = Path(folder) / f".{name[:64]}.tmp-{secrets.token_hex(8)}"
        try:
            fd = os.open(tmp, flags, 0o666)
            break
        except FileExistsError:
            continue
    else:  # 100 collisions of 64 random bits: something is planting names as fast as we draw them
        raise FileExistsError(errno.EEXIST, "no unused temporary name", str(folder))
    try:
        with os.fdopen(fd, "wb") as fh:
            if mode is not None:
                os.fchmod(fd, mode)
            _write_blocks(fh.write, data)
            fh.flush()
            os.fsync(fh.fileno())
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return tmp


def _replace_regular(target: Path, data: bytes | Iterable[bytes], shown: str) -> None:
    """``target`` replaced whole by ``data`` (or made); a file replaced keeps its permission bits (a file the
    user made private stays private), a new one gets the umask's."""
    tmp = None
    try:
        try:
            mode = stat.S_IMODE(os.stat(target).st_mode) & 0o777
        except FileNotFoundError:
            mode = None
        tmp = write_temp_beside(target.parent, target.name, data, mode)
        os.replace(tmp, target)
    except OSError as exc:
        if tmp is not None:
            tmp.unlink(missing_ok=True)
        fix = "free disk space or choose another path" if exc.errno in (errno.ENOSPC, errno.EDQUOT) else "choose another path"
        raise _fail(shown, exc.strerror or str(exc), fix) from None


def _write_through(target: Path, data: bytes | Iterable[bytes], shown: str, fifo: bool) -> None:
    flags = os.O_WRONLY | (os.O_NONBLOCK if fifo else 0)
    try:
        fd = os.open(target, flags)
    except OSError as exc:
        if fifo and exc.errno == errno.ENXIO:
            raise _fail(shown, "it is a FIFO that no process reads", "start its reader first, or choose a file") from None
        raise _fail(shown, exc.strerror or str(exc)) from None
    try:
        if fifo:
            os.set_blocking(fd, True)
        def write(block: bytes) -> None:
            view = memoryview(block)
            while view:
                view = view[os.write(fd, view):]

        _write_blocks(write, data)
    except OSError as exc:
        fix = "free space on the device or choose another path" if exc.errno == errno.ENOSPC else "choose another path"
        raise _fail(shown, exc.strerror or str(exc), fix) from None
    finally:
        os.close(fd)


def _checked_name(path: object) -> str:
    """``path`` as a str, or the CalibrateError saying why it cannot name a file."""
    try:
        shown = os.fspath(path)  # type: ignore[arg-type]
    except TypeError:
        raise CalibrateError(f"cannot write to {str(path)[:80]!r}: it is not a path; give a file name") from None
    if not isinstance(shown, str):
        raise CalibrateError(f"cannot write to {shown[:80]!r}: a bytes path; give the file name as a string")
    if "\0" in shown:
        raise _fail(shown.replace("\0", "\\0")[:200], "the name holds a NUL byte", "give a file name without one")
    if not shown:
        raise _fail(shown, "the name is empty", "give a file name, or - for standard output")
    return shown


def _write_stdout(data: bytes | Iterable[bytes]) -> str:
    stream = sys.stdout
    try:
        if stream is None or getattr(stream, "closed", False):
            raise OSError(errno.EBADF, "it is closed")
        stream.flush()
        out = getattr(stream, "buffer", None)
        decoder = codecs.getincrementaldecoder("utf-8")()
        if out is not None:
            _write_blocks(out.write, data)
        else:  # a text stream (e.g. a test runner's capture)
            for block in _blocks(data):
                stream.write(decoder.decode(block))
        (out if out is not None else stream).flush()
    except (OSError, ValueError) as exc:  # ValueError: closed meanwhile
        raise _fail("standard output", getattr(exc, "strerror", None) or str(exc),
                    "give a file name with --out, or run with standard output open") from None
    return "standard output"


def _refuse_inputs(target: Path, shown: str, inputs: tuple, option: str | None) -> None:
    """A user-named output must not be one of the command's own inputs (it would be replaced): the same
    file by device and inode, whatever the path (a hard link, a symbolic link, ``./x`` and ``x``)."""
    try:
        st = os.stat(target)
    except OSError:
        return  # nothing there yet (or a dangling link, refused when written): no input can be lost
    if not stat.S_ISREG(st.st_mode):  # a device or FIFO is written through, never lost
        return
    for given in inputs:
        label, given = given if isinstance(given, tuple) else ("input", given)
        try:
            same = os.path.samestat(st, os.stat(given))
        except (OSError, TypeError, ValueError):
            continue
        if same:
            said = f"{option} {shown!r}" if option else repr(shown)
            raise CalibrateError(f"cannot write {said}: it is this command's input ({label} {os.fspath(given)!r}), "
                                 f"which would be lost; give {option or 'the output'} another path")


def check_target(path: object, inputs: tuple = (), option: str | None = None) -> str:
    """``path`` as a str when it can name this command's output (checked before any work is done), else
    the CalibrateError: not a str path, a NUL byte, a name ending in ``/`` (a folder), one of ``inputs``
    (paths, or (name, path) pairs: calibrate.cli.inputs.command_inputs); ``option`` names the output in
    messages."""
    shown = _checked_name(path)
    if shown == STDOUT:
        return shown
    if shown.endswith(("/", os.sep)) or os.path.basename(shown) in (".", ".."):
        raise _fail(shown, "it names a folder", "give a file name inside it")
    _refuse_inputs(Path(shown), shown, inputs, option)
    return shown


def write_user_file(path: str | os.PathLike, data: bytes | Iterable[bytes], inputs: tuple = (), option: str | None = None) -> str:
    """Write ``data`` to the file the user named (see the module doc); returns how to name it in messages.
    ``inputs``: the command's input files, which the output must not be (S9 of issue 19's audit; checked
    again here, after the computation); ``option``: the command line's name of the output (``--out``)."""
    shown = check_target(path, inputs, option)
    if shown == STDOUT:
        return _write_stdout(data)
    target = Path(shown)
    try:
        st = os.lstat(target)
    except FileNotFoundError:
        _replace_regular(target, data, shown)
        return shown
    except OSError as exc:
        raise _fail(shown, exc.strerror or str(exc)) from None
    if stat.S_ISLNK(st.st_mode):
        try:
            resolved = target.resolve(strict=True)
        except (OSError, RuntimeError):
            raise _fail(shown, "it is a symbolic link to nothing (or a loop)", "point it at a file or choose another path") from None
        rst = os.stat(resolved)
        if stat.S_ISREG(rst.st_mode):
            _replace_regular(resolved, data, shown)  # the link stays; the file it names is replaced whole
            return shown
        st = rst
        target = resolved
    if stat.S_ISREG(st.st_mode):
        _replace_regular(target, data, shown)
    elif stat.S_ISCHR(st.st_mode) or stat.S_ISFIFO(st.st_mode):
        _write_through(target, data, shown, fifo=stat.S_ISFIFO(st.st_mode))
    elif stat.S_ISDIR(st.st_mode):
        raise _fail(shown, "it is a folder", "give a file name inside it")
    else:
        raise _fail(shown, "it is neither a regular file, a character device nor a FIFO")
    return shown
