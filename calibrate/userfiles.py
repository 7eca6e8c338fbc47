"""Writing one file the user named (``accept --out``, ``fit --out``, ``Calibration.save``).

* ``-`` is standard output; a closed one is refused.
* A new path, or an existing regular file: written beside it and renamed over it, so the file is
  never half-written. The file beside it is created exclusively under a random name
  (``tempfile.mkstemp``): a planted file or link of a guessable name is never opened or followed.
* Not a path (bytes, a NUL byte, empty), a name ending in ``/`` (a folder), or one of the command's
  own input files (``inputs``): refused before anything is written.
* A symbolic link: the file it points to is replaced that way (the link stays a link); a dangling
  link is refused.
* A character device (``/dev/null``, ``/dev/stdout`` on a terminal) or a FIFO: written through, in
  place; never replaced by a regular file. A FIFO that no process reads is refused at once rather
  than waited on.
* A folder, a socket or a block device: refused.

Every failure is a :class:`~calibrate.errors.CalibrateError` naming the path and the fix.
"""

from __future__ import annotations

import errno
import os
import stat
import sys
import tempfile
from pathlib import Path

from .errors import CalibrateError

STDOUT = "-"


def _fail(path: str, why: str, fix: str = "choose another path") -> CalibrateError:
    return CalibrateError(f"cannot write {path!r}: {why}; {fix}")


def write_temp_beside(folder: Path, name: str, data: bytes) -> Path:
    """A new file holding ``data`` in ``folder``, durably written: created exclusively under a random
    name (``tempfile.mkstemp``: O_CREAT|O_EXCL, so a planted file or symbolic link of a guessed name is
    never opened or followed). Renamed over its target by the caller; removed again if writing fails."""
    fd, tmp = tempfile.mkstemp(prefix=f".{name[:64]}.tmp-", dir=folder)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return Path(tmp)


def _replace_regular(target: Path, data: bytes, shown: str) -> None:
    tmp = None
    try:
        tmp = write_temp_beside(target.parent, target.name, data)
        os.replace(tmp, target)
    except OSError as exc:
        if tmp is not None:
            tmp.unlink(missing_ok=True)
        fix = "free disk space or choose another path" if exc.errno in (errno.ENOSPC, errno.EDQUOT) else "choose another path"
        raise _fail(shown, exc.strerror or str(exc), fix) from None


def _write_through(target: Path, data: bytes, shown: str, fifo: bool) -> None:
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
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
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


def _write_stdout(data: bytes) -> str:
    stream = sys.stdout
    try:
        if stream is None or getattr(stream, "closed", False):
            raise OSError(errno.EBADF, "it is closed")
        stream.flush()
        out = getattr(stream, "buffer", None)
        if out is not None:
            out.write(data)
            out.flush()
        else:  # a text stream (e.g. a test runner's capture)
            stream.write(data.decode("utf-8"))
            stream.flush()
    except (OSError, ValueError) as exc:  # ValueError: closed meanwhile
        raise _fail("standard output", getattr(exc, "strerror", None) or str(exc),
                    "give a file name with --out, or run with standard output open") from None
    return "standard output"


def _refuse_inputs(target: Path, shown: str, inputs: tuple) -> None:
    """A user-named output must not be one of the command's own inputs (it would be replaced)."""
    try:
        st = os.stat(target)
    except OSError:
        return
    if not stat.S_ISREG(st.st_mode):  # a device or FIFO is written through, never lost
        return
    for given in inputs:
        try:
            if os.path.samestat(st, os.stat(given)):
                raise _fail(shown, f"it is this command's input {os.fspath(given)!r}, which would be lost",
                            "give another output path")
        except (OSError, TypeError, ValueError):
            continue


def check_target(path: object, inputs: tuple = ()) -> str:
    """``path`` as a str when it can name this command's output (checked before any work is done), else
    the CalibrateError: not a str path, a NUL byte, a name ending in ``/`` (a folder), one of ``inputs``."""
    shown = _checked_name(path)
    if shown == STDOUT:
        return shown
    if shown.endswith(("/", os.sep)) or os.path.basename(shown) in (".", ".."):
        raise _fail(shown, "it names a folder", "give a file name inside it")
    _refuse_inputs(Path(shown), shown, inputs)
    return shown


def write_user_file(path: str | os.PathLike, data: bytes, inputs: tuple = ()) -> str:
    """Write ``data`` to the file the user named (see the module doc); returns how to name it in messages.
    ``inputs``: the command's input files, which the output must not be (S9 of issue 19's audit)."""
    shown = check_target(path, inputs)
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
