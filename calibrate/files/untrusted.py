"""Opening files whose names or sizes come from other files, under a budget (untrusted input).

* :func:`plain_name`: a file name that stays in its folder (no separators, no ``..``, no NUL, not hidden).
* :func:`open_regular`: a file opened for reading only when it is a regular file (a FIFO would block a
  reader forever, a device never end, a folder is no file), checked on the open descriptor, named in the
  error otherwise: every reader of a file a user may have placed opens it so (:func:`regular_file`: its stat).
* :func:`read_bounded`: the bytes of a regular file (never a link, FIFO, folder or device) of at most a given size.
* :func:`npy_array` / :func:`npz_arrays`: ``.npy`` / ``.npz`` arrays whose headers are checked
  against the bytes really there before anything is allocated or mapped (a header that claims
  (4e8, 8) in a 64-byte file is an error, not a 24 GiB allocation); pickles are never loaded;
  ``.npz`` members are refused when what they expand to exceeds :func:`memory_budget`.
* :func:`label_problem`: the loader's rule for a class label (non-empty, no NUL, at most MAX_LABEL
  characters), for every reader, so that nothing is fitted that a saved calibration cannot hold.
* :func:`memory_budget`: how many bytes one input may take once read.

A public module (calibrate.PUBLIC_MODULES): stdlib and numpy only.
"""

from __future__ import annotations

import errno
import math
import os
import stat
import zipfile
from pathlib import Path
from typing import BinaryIO, Callable

import numpy as np

from calibrate.errors import CalibrateError, DataError

#: the longest file name accepted from a file (most file systems stop at 255 bytes)
MAX_NAME = 255
#: the longest class label accepted from a file (score lists, matrices, calibrations): far beyond any
#: real identifier, far below what makes fixed-width label arrays blow up
MAX_LABEL = 1024


def label_problem(label: str) -> str | None:
    """What is wrong with one class label read from a file (None when it is fine): the rule that
    ``calibrate.load`` applies, so a label every reader accepts is one a saved calibration can hold."""
    if not label:
        return "is empty"
    if "\0" in label:
        return "holds a NUL character"
    if len(label) > MAX_LABEL:
        return f"is {len(label):,} characters long (at most {MAX_LABEL:,})"
    return None


def refuse_bad_labels(labels, what: str) -> None:
    """A DataError naming the first of ``labels`` (strings) that :func:`label_problem` refuses."""
    for label in labels:
        if (problem := label_problem(label)) is not None:
            raise DataError(f"{what}: class {label[:40]!r} {problem}; a class label is non-empty text without NUL "
                            f"characters, at most {MAX_LABEL:,} long")


#: used when the machine's memory cannot be asked (not POSIX)
_FALLBACK_MEMORY = 8 << 30


def memory_budget() -> int:
    """Bytes one input (an .npz member, a folder of images) may take once read: an eighth of the
    machine's memory (or of the process's address-space limit, when lower). A run holds several
    times its input (copies, distances, the models), so an input past this would end in "out of
    memory" after minutes, or take the machine down: it is refused from its header instead."""
    try:
        total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        total = _FALLBACK_MEMORY
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_AS)[0]
        if soft != resource.RLIM_INFINITY and soft > 0:
            total = min(total, soft)
    except (ImportError, OSError, ValueError):
        pass
    return max(total, 1 << 30) // 8


def plain_name(name: object) -> bool:
    """Whether ``name`` names a file directly inside a folder: a non-empty string of at most MAX_NAME
    characters without ``/``, ``\\``, NUL, not ``.``/``..`` and not hidden."""
    return (isinstance(name, str) and 0 < len(name) <= MAX_NAME and "/" not in name and "\\" not in name
            and "\0" not in name and not name.startswith("."))


def open_regular(path: Path, what: str, fix: str, error: Callable[[str], Exception] = DataError, *,
                 follow: bool = True) -> BinaryIO:
    """``path`` opened for reading when it is a regular file, else ``error`` naming it: the one rule of every
    reader of a file a user may have placed. Opened without blocking (a FIFO would block a reader forever, a
    device never end) and checked on the open descriptor, so nothing can be swapped in between the check and
    the read; a folder is refused the same way. ``follow=False``: a symbolic link is refused too (the files
    calibrate keeps in its own folders); else a link to a regular file counts."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | (0 if follow else getattr(os, "O_NOFOLLOW", 0))
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        why = ("is a symbolic link" if exc.errno == errno.ELOOP and not follow
               else f"cannot be read ({exc.strerror or exc})")
        raise error(f"{path}: {what} {why}; {fix}") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise error(f"{path}: {what} is {_kind(mode)}, not a regular file; {fix}")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def regular_file(path: Path, what: str, fix: str, error: Callable[[str], Exception] = DataError) -> os.stat_result:
    """``path``'s stat when it is a regular file (a symbolic link to one counts); else ``error``
    (:func:`open_regular`'s rule; a reader that opens the file itself had better read from that)."""
    with open_regular(path, what, fix, error) as fh:
        return os.fstat(fh.fileno())


def _kind(mode: int) -> str:
    return ("a FIFO" if stat.S_ISFIFO(mode) else "a folder" if stat.S_ISDIR(mode)
            else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "not a regular file")


def read_bounded(path: Path, what: str, fix: str, limit: int,
                 error: Callable[[str], Exception] = DataError) -> bytes:
    """The bytes of ``path`` when it is a regular file (never a link, FIFO, folder or device) of at most
    ``limit`` bytes, else ``error`` (:func:`open_regular` with ``follow=False``)."""
    with open_regular(path, what, fix, error, follow=False) as fh:
        size = os.fstat(fh.fileno()).st_size
        data = fh.read(limit + 1) if size <= limit else b""
        if size > limit or len(data) > limit:
            raise error(f"{path}: {what} is larger than {limit:,} bytes; {fix}")
    return data


def _header(fh, size: int, where: str, error) -> tuple[tuple[int, ...], bool, np.dtype, int]:
    """(shape, fortran order, dtype, offset of the data) of an .npy stream of ``size`` bytes, checked."""
    try:
        version = np.lib.format.read_magic(fh)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(fh)
        elif version in ((2, 0), (3, 0)):
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(fh)
        else:
            raise ValueError(f"unknown .npy version {version}")
    except (ValueError, OSError, EOFError, SyntaxError) as exc:
        raise error(f"{where}: not a NumPy array file ({exc})") from None
    if dtype.hasobject:
        raise error(f"{where}: holds Python objects (a pickle), which calibrate never loads; save plain numbers")
    count = 1
    for n in shape:
        count *= int(n)
    offset = fh.tell()
    if offset + count * dtype.itemsize > size:
        raise error(f"{where}: its header claims shape {tuple(shape)} of {dtype} ({count * dtype.itemsize:,} bytes), "
                    f"but the file holds {max(size - offset, 0):,}; the file is cut short or damaged")
    return tuple(int(n) for n in shape), bool(fortran), dtype, offset


def npy_array(path: Path, what: str, fix: str, *, mmap: bool = False,
              error: Callable[[str], Exception] = DataError) -> np.ndarray:
    """The array in the ``.npy`` file ``path`` (a regular file whose header matches its size)."""
    with open_regular(path, what, fix, error) as fh:
        shape, fortran, dtype, offset = _header(fh, os.fstat(fh.fileno()).st_size, f"{path} ({what})", error)
        try:
            if mmap and math.prod(shape):  # mapped from the descriptor checked, not the name again
                return np.memmap(fh, dtype=dtype, mode="r", offset=offset, shape=shape, order="F" if fortran else "C")
            fh.seek(0)
            return np.lib.format.read_array(fh, allow_pickle=False)
        except CalibrateError:
            raise
        except (ValueError, OSError) as exc:
            raise error(f"{path}: {what} cannot be read ({exc}); {fix}") from None


def _npz_members(zf: zipfile.ZipFile) -> dict[str, zipfile.ZipInfo]:
    return {i.filename[:-4] if i.filename.endswith(".npy") else i.filename: i for i in zf.infolist()}


def npz_headers(path: Path, what: str, fix: str,
                error: Callable[[str], Exception] = DataError) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
    """Every member of the ``.npz`` file ``path`` as (shape, dtype), from its header alone (each checked
    against the member's real size): what a reader checks before it decompresses anything."""
    try:
        with open_regular(path, what, fix, error) as raw, zipfile.ZipFile(raw) as zf:
            out = {}
            for name, info in _npz_members(zf).items():
                with zf.open(info) as fh:
                    shape, _, dtype, _ = _header(fh, info.file_size, f"{path}, array {name!r}", error)
                out[name] = (shape, dtype)
            return out
    except CalibrateError:
        raise
    except (zipfile.BadZipFile, ValueError, OSError, EOFError) as exc:
        raise error(f"{path}: {what} is not a readable .npz file ({exc}); {fix}") from None


def npz_arrays(path: Path, what: str, fix: str, names: tuple[str, ...] | None = None,
               error: Callable[[str], Exception] = DataError) -> dict[str, np.ndarray]:
    """The arrays of the ``.npz`` file ``path`` (all, or ``names``), each member's header checked against
    its real (uncompressed) size, and their total against :func:`memory_budget`, before any is read
    (a 1.5 MB file of compressed zeros really expands to gigabytes)."""
    try:
        with open_regular(path, what, fix, error) as raw, zipfile.ZipFile(raw) as zf:
            infos = _npz_members(zf)
            wanted = [n for n in (names if names is not None else tuple(infos)) if n in infos]
            total = 0
            for name in wanted:
                with zf.open(infos[name]) as fh:
                    shape, _, dtype, _ = _header(fh, infos[name].file_size, f"{path}, array {name!r}", error)
                total += math.prod(shape) * dtype.itemsize
                if total > memory_budget():
                    raise error(f"{path}: array {name!r} makes the arrays read {total / 2**30:.1f} GiB once "
                                f"uncompressed, more than this machine's budget of {memory_budget() / 2**30:.1f} "
                                f"GiB for one input; {fix} with fewer or smaller arrays")
            out = {}
            for name in wanted:
                with zf.open(infos[name]) as fh:
                    out[name] = np.lib.format.read_array(fh, allow_pickle=False)
            return out
    except CalibrateError:
        raise
    except (zipfile.BadZipFile, ValueError, OSError, EOFError) as exc:
        raise error(f"{path}: {what} is not a readable .npz file ({exc}); {fix}") from None
