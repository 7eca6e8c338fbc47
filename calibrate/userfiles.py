"""Writing one file the user named (``accept --out``, ``fit --out``, ``Calibration.save``).

* ``-`` is standard output.
* A new path, or an existing regular file: written beside it and renamed over it, so the file is
  never half-written.
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
from pathlib import Path

from .errors import CalibrateError

STDOUT = "-"


def _fail(path: str, why: str, fix: str = "choose another path") -> CalibrateError:
    return CalibrateError(f"cannot write {path!r}: {why}; {fix}")


def _replace_regular(target: Path, data: bytes, shown: str) -> None:
    tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except OSError as exc:
        try:
            tmp.unlink()
        except OSError:
            pass
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


def write_user_file(path: str | os.PathLike, data: bytes) -> str:
    """Write ``data`` to the file the user named (see the module doc); returns how to name it in messages."""
    shown = os.fspath(path)
    if shown == STDOUT:
        try:
            sys.stdout.flush()
            out = getattr(sys.stdout, "buffer", None)
            if out is not None:
                out.write(data)
                out.flush()
            else:  # a text stream (e.g. a test runner's capture)
                sys.stdout.write(data.decode("utf-8"))
                sys.stdout.flush()
        except OSError as exc:
            raise _fail("standard output", exc.strerror or str(exc)) from None
        return "standard output"
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
