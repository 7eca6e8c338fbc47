"""This user's owner key: the secret that proves calibrate wrote an output (calibrate.files.commit).

A run seals its manifest and its commit journal with an HMAC-SHA256 under this key; a file in an
output folder is calibrate's to replace or remove only when a sealed record says calibrate wrote it
there (docs/architecture.md, "Outputs"). The key is 32 random bytes, kept as 64 hex digits in
``owner.key`` in the user's state folder, outside every data folder:

* ``$CALIBRATE_STATE_DIR/owner.key`` when that variable is set (an absolute path);
* else ``$XDG_STATE_HOME/calibrate/owner.key`` (when that is an absolute path, as the XDG spec asks);
* else ``~/.local/state/calibrate/owner.key``.

It is made on first use: the folder with mode 0700, the key written under a random name with mode
0600 and linked into place (``os.link`` fails when the name exists), so two runs starting at once
on a fresh machine end with one key, the first linked, and both use it. It is read only when it is
a regular file of this user, not readable or writable by others, of at most 4 KiB, holding 64 hex
digits; anything else, or a key that cannot be made, is a :class:`OwnerKeyError` (exit 2) naming the
file and the variable. Reading a result (``read_manifest``) never needs the key.
"""

from __future__ import annotations

import errno
import hmac
import json
import os
import secrets
import stat
from pathlib import Path
from typing import Any

from calibrate.errors import CalibrateError

ENV = "CALIBRATE_STATE_DIR"
KEY_NAME = "owner.key"
#: a key file is 65 bytes; anything past this is not one
_MAX_KEY_FILE = 4096

_keys: dict[str, bytes] = {}


class OwnerKeyError(CalibrateError):
    """The owner key cannot be read or made (the message names the file and the way out)."""


def key_path() -> Path:
    """Where this user's owner key lives (see the module doc)."""
    base = os.environ.get(ENV)
    if base:
        if not os.path.isabs(base):
            raise OwnerKeyError(f"{ENV}={base!r} is not an absolute path; set it to the absolute path of a folder "
                                "of yours for calibrate's owner key (or unset it)")
        return Path(base) / KEY_NAME
    xdg = os.environ.get("XDG_STATE_HOME")
    if xdg and os.path.isabs(xdg):
        return Path(xdg) / "calibrate" / KEY_NAME
    try:
        return Path.home() / ".local" / "state" / "calibrate" / KEY_NAME
    except RuntimeError:  # no HOME and no entry in the password database
        raise OwnerKeyError(f"there is no home folder for calibrate's owner key; set {ENV} to a folder of yours") from None


def _refuse(path: Path, problem: str, fix: str) -> OwnerKeyError:
    return OwnerKeyError(f"{path}: calibrate's owner key {problem}; {fix}, or set {ENV} to another folder of yours "
                         "for it")


def _read(path: Path) -> bytes | None:
    """The key in ``path``, None when there is none; an OwnerKeyError when the file is not a key of this user's."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except (FileNotFoundError, NotADirectoryError):  # none yet (the folder may not be one: said when it is made)
        return None
    except OSError as exc:
        raise _refuse(path, f"cannot be read ({exc.strerror or exc})", "make it readable to you") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise _refuse(path, "is not a regular file", "remove it (a new key is made)")
        if hasattr(os, "getuid") and st.st_uid != os.getuid():
            raise _refuse(path, "belongs to another user", "remove it (a new key is made)")
        if st.st_mode & 0o077:
            raise _refuse(path, f"can be read or written by other users (mode {stat.S_IMODE(st.st_mode):o})",
                          "make it private with chmod 600")
        data = os.read(fd, _MAX_KEY_FILE + 1)
    finally:
        os.close(fd)
    text = data.decode("ascii", "replace").removesuffix("\n")
    if len(text) != 64 or any(c not in "0123456789abcdef" for c in text):
        raise _refuse(path, "is not one calibrate made (64 hex digits)", "restore it, or remove it (a new key is made, "
                      "and outputs sealed with the old one are then refused as not calibrate's)")
    return bytes.fromhex(text)


def _create(path: Path) -> None:
    """Make a key at ``path`` unless another process got there first (then its key stays)."""
    folder = path.parent
    tmp = folder / f".{KEY_NAME}.{secrets.token_hex(8)}"
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
        try:
            os.write(fd, (secrets.token_bytes(32).hex() + "\n").encode("ascii"))
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass  # another run made it meanwhile: that key is the one
        dir_fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    except OSError as exc:
        why = exc.strerror or str(exc)
        if exc.errno in (errno.EEXIST, errno.ENOTDIR):
            why = f"{exc.filename or folder} or a folder above it is not a folder"
        raise _refuse(path, f"cannot be created ({why})", f"make {folder} a folder you can write") from None
    finally:
        try:
            tmp.unlink()
        except OSError:
            pass


def owner_key() -> bytes:
    """This user's owner key, made on first use (see the module doc); read once per process."""
    path = key_path()
    key = _keys.get(str(path))
    if key is None:
        key = _read(path)
        if key is None:
            _create(path)
            key = _read(path)
            if key is None and os.path.islink(path):  # a link to nothing: os.link does not replace it
                raise _refuse(path, "is a symbolic link to nothing", "remove it (a new key is made)")
            if key is None:  # removed between the link and the read
                raise _refuse(path, "vanished while it was made", "run again")
        _keys[str(path)] = key
    return key


class Seal:
    """HMAC-SHA256 seals, under this user's owner key, of documents calibrate writes into one folder.

    A seal covers a purpose (``manifest``, ``journal``), the folder's real path and the document's
    canonical JSON: it verifies only for the same document, written for the same purpose into the
    same folder with the same key."""

    def __init__(self, folder: Path):
        self.key = owner_key()
        self.folder = os.path.realpath(folder)

    def of(self, purpose: str, doc: Any) -> str:
        payload = json.dumps(["calibrate-" + purpose, self.folder, doc], sort_keys=True, ensure_ascii=True,
                             separators=(",", ":"))
        return hmac.new(self.key, payload.encode("ascii"), "sha256").hexdigest()

    def verifies(self, purpose: str, doc: Any, mac: Any) -> bool:
        """Whether ``mac`` is the seal of ``doc`` (a document read from the folder: any JSON value)."""
        if not isinstance(mac, str):
            return False
        try:
            expected = self.of(purpose, doc)
        except (RecursionError, ValueError):  # nested too deeply to be one calibrate wrote
            return False
        return hmac.compare_digest(mac.encode("ascii", "replace"), expected.encode("ascii"))
