"""Committing a run's outputs: only the files of the output contract, never anything else in the folder.

A run's result is a *file set* (thresholds.csv, results.json, report.md, ...) described by
``manifest.json``, which lists every file with its size and SHA-256 and is written last. A
folder holds a complete result exactly when its manifest is present and every file it lists
matches (:func:`read_manifest` checks that). The protocol, for one run into ``--out``:

1. At the start, a staging folder ``.calibrate-staging-*`` is made *inside* the output folder
   (same file system, so renames are atomic) and locked for the run's lifetime (``flock``; the
   kernel releases it when the process dies, however it dies). Files are written there.
2. At commit, under an exclusive lock on the output folder itself: a journal listing the new
   file set is written into the staging folder; the old ``manifest.json`` is renamed to
   ``.calibrate-previous-manifest.json`` (from here on the folder does not claim a complete result,
   and recovery still knows what the old result owned); each new file is renamed into place; files
   of the previous result that this run does not write are removed; the new manifest is renamed
   into place; the set-aside manifest and the staging folder are removed.
3. A run killed inside step 2 leaves its journal behind. The next run into the folder (any run,
   before it does anything else) finds the unlocked journal and finishes that commit, so the
   folder again holds one run's complete result. Staging folders without a journal whose owner
   died are removed when they hold nothing but regular files (what a run stages); one holding a
   subfolder or a link may be the user's and is left alone.

Files the run did not write are never removed or replaced, and what the run wrote is proven, never
claimed (issue 31): the manifest carries a seal (``mac``), an HMAC-SHA256 under this user's owner key
(:mod:`calibrate.files.ownerkey`, kept outside every data folder) of the whole manifest and the folder's
real path, and the journal a seal of its own likewise. The run only touches plain names inside the
output folder that a manifest *sealed for this folder* lists and whose size and SHA-256 still match
its record (a file edited since is the user's), that manifest, and its own new files. Journals and
manifests are untrusted input: a journal is acted on only when its seal verifies, and then only when
it is whole and consistent (plain names; every new file staged as a regular file with the size and
SHA-256 the journal's manifest records, or already in place; every file it replaces recorded with
the very record the folder's sealed manifest (or the one set aside by that commit) keeps of it, and
removed only while it still matches; a manifest.json there sealed too). A manifest that is not sealed
for this folder (hand-written or edited, even stating a user file's true hash; copied from another
folder or a moved one; from another user or machine; from a calibrate before seals) owns nothing, so
the files of output names it lists are refused like any other user file. Ownership is never by name
alone: without a sealed manifest, nothing in the folder is calibrate's. Reading a result
(:func:`read_manifest`) checks sizes and hashes only and needs no key. Not defended against (see
docs/architecture.md): whoever can read the owner key (the user's own processes too), a genuine
manifest put back with its outputs into the folder it was sealed for, and writes by a stranger in
the moment between a check and a rename at commit.

Manifests and journals are read only when they are regular files (not links, FIFOs or devices) of at
most MAX_DOC_BYTES. A journal or manifest that fails these checks is reported (exit 2, naming it)
and left in place; nothing in the folder is changed. If the folder holds a file of the same name as
an output that no sealed manifest claims, the run refuses before computing anything (and again at
commit), naming the file and, when an unsealed manifest lists it, the way out. The folder's own
permissions are left as they are; a folder the run created is removed again if the run fails.
Two runs into one folder commit one after the other under the lock: the folder ends with the
complete result of the one that committed last, never a mix.

Locks need ``fcntl`` (Linux, macOS); elsewhere runs into one folder must not overlap.

The manifest itself (its names, MAX_DOC_BYTES, seals and what they own, :func:`read_manifest`) is
calibrate.files.manifest; the files a run writes are calibrate.running.outputs.
"""


from __future__ import annotations

import errno
import json
import os
import shutil
import tempfile
import uuid
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator

from calibrate.files.untrusted import plain_name
from calibrate.files.ownerkey import Seal, owner_key
from calibrate.files.user_output import write_temp_beside
from calibrate.files.manifest import (CONTRACT_NAMES, JOURNAL, MANIFEST, PREVIOUS, STAGING_PREFIX, OutputError, _exists,
                                      _load_json, _manifest_doc, _matches, _record_ok, _sealed, _sha256, owned_files)

try:  # POSIX advisory locks; absent on Windows
    import fcntl
except ImportError:  # pragma: no cover - not on the platforms CI runs
    fcntl = None  # type: ignore[assignment]


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


@contextmanager
def _folder_lock(folder: Path) -> Iterator[None]:
    """Exclusive lock on the output folder (its directory inode), held while a commit runs."""
    if fcntl is None:
        yield
        return
    fd = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


#: the staging folders' lock descriptors this process holds. A forked child (the work beside a run, a pool's worker)
#: shares their locks (flock belongs to the open file, which fork shares) and closes them: a run's lock ends with
#: the run's own process, so that the next run sees a killed run's staging folder as abandoned
_HELD_LOCKS: set[int] = set()


def _close_held_locks() -> None:
    for fd in _HELD_LOCKS:
        try:
            os.close(fd)
        except OSError:
            pass
    _HELD_LOCKS.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_close_held_locks)


def _is_abandoned(staging: Path) -> bool:
    """True when no live process holds the staging folder's lock."""
    if fcntl is None:
        return False
    try:
        fd = os.open(staging, os.O_RDONLY)
    except OSError:
        return False  # vanished meanwhile: its owner finished
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False
    finally:
        os.close(fd)
    return True


def _commit_owner(folder: Path, seal: Seal) -> dict[str, dict]:
    """What an interrupted commit may replace or remove: the files the folder's manifest owns, or, once
    that commit has set the manifest aside, the files the set-aside manifest owns (D3)."""
    return owned_files(folder, seal, MANIFEST if _exists(folder / MANIFEST) else PREVIOUS) or {}


class JournalError(Exception):
    """A journal that calibrate cannot have written (the message says why)."""


#: why a journal without this user's seal for the folder is refused
_UNSEALED_JOURNAL = ("it is not sealed with your owner key for this folder: no calibrate run of yours wrote it here "
                     "(planted or copied, or written by another user or machine, or by a calibrate from before "
                     "sealed outputs)")


def _checked_journal(folder: Path, staging: Path, journal: Any, seal: Seal) -> tuple[list[str], dict[str, dict], dict]:
    """(new files, replaced files with their records, manifest) of a journal, after checking its seal and
    everything it names (see the module doc); raises JournalError otherwise. Reads only, changes nothing."""
    if not isinstance(journal, dict) or set(journal) - {"mac"} != {"files", "replaces", "manifest"}:
        raise JournalError("it is not a journal of this calibrate (keys files, replaces, manifest, mac)")
    if not _sealed(journal, seal, "journal"):
        raise JournalError(_UNSEALED_JOURNAL)
    files, replaces, manifest = journal["files"], journal["replaces"], journal["manifest"]
    if not (isinstance(files, list) and all(isinstance(n, str) for n in files) and isinstance(replaces, dict)
            and isinstance(manifest, dict) and manifest.get("format") == "calibrate-output"
            and isinstance(manifest.get("files"), dict)):
        raise JournalError("its files, replaces or manifest entry has the wrong form")
    records = manifest["files"]
    if len(set(files)) != len(files) or set(files) != set(records):
        raise JournalError("its files and its manifest list different names")
    for name in list(files) + list(replaces):
        if not plain_name(name) or name in (MANIFEST, JOURNAL):
            raise JournalError(f"it names {str(name)[:80]!r}, which is not a plain file name in the folder")
    if not all(_record_ok(records[n]) for n in files) or not all(_record_ok(e) for e in replaces.values()):
        raise JournalError("a record of its files has the wrong form (bytes and SHA-256)")
    current = _manifest_doc(folder)
    if current is not None and not _sealed(current, seal, "manifest"):
        raise JournalError(f"it would set aside {MANIFEST}, which is not sealed with your owner key for this folder")
    owned = _commit_owner(folder, seal)
    for name, entry in replaces.items():
        final = folder / name
        if not _exists(final) or (name in records and _matches(final, records[name])):
            continue  # removed already, or already the new file
        if owned.get(name) != entry or not _matches(final, entry):
            raise JournalError(f"it would replace or remove {name}, which the folder's manifest does not list with "
                               "its current size and SHA-256 (not calibrate's, or changed since)")
    for name in files:
        staged, final = staging / name, folder / name
        if _matches(staged, records[name]):
            if _exists(final) and name not in replaces:  # to be replaced: only a file checked above
                raise JournalError(f"it would replace {name}, which calibrate did not write (or which changed since)")
        elif not _matches(final, records[name]):  # neither staged nor already moved into place
            raise JournalError(f"its new file {name} is neither staged nor in place with the recorded size and SHA-256")
    return files, replaces, manifest


def _set_aside_manifest(folder: Path, manifest_doc: dict) -> None:
    """Step 2b: the old manifest becomes PREVIOUS (the folder no longer claims a complete result, and
    recovery still knows what the old result owned); skipped when the new manifest is already there."""
    path = folder / MANIFEST
    if not _exists(path):
        return
    current = _manifest_doc(folder)
    if current is not None and current.get("run_id") is not None and current.get("run_id") == manifest_doc.get("run_id"):
        return  # this commit's own manifest: everything before it was done
    os.replace(path, folder / PREVIOUS)


def _finish_commit(folder: Path, staging: Path, journal: dict) -> None:
    """Steps 2b-2e of the protocol; idempotent, so an interrupted commit can be finished by anyone.
    ``journal`` has passed :func:`_checked_journal`."""
    files, replaces, manifest_doc = journal["files"], journal["replaces"], journal["manifest"]
    _set_aside_manifest(folder, manifest_doc)
    for name in files:
        src = staging / name
        if _matches(src, manifest_doc["files"][name]):
            os.replace(src, folder / name)
    for name, entry in replaces.items():
        if name not in files and _matches(folder / name, entry):  # still the file calibrate wrote
            (folder / name).unlink(missing_ok=True)
    # written afresh from the journal every time (exclusively, under a random name: the staging folder
    # may be a planted one), so that a manifest cut short by a kill is never used
    manifest = write_temp_beside(staging, MANIFEST, (json.dumps(manifest_doc, indent=1) + "\n").encode("utf-8"))
    os.replace(manifest, folder / MANIFEST)
    (folder / PREVIOUS).unlink(missing_ok=True)
    _fsync_dir(folder)
    shutil.rmtree(staging, ignore_errors=True)


#: the names tempfile.mkdtemp gives a staging folder: the prefix and 8 of these characters
_MKDTEMP_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_")


def _only_staged_files(staging: Path) -> bool:
    """Whether a staging folder without a journal is one a run made and staged into: named as
    ``tempfile.mkdtemp`` names them, holding nothing but regular files (staged outputs, temporaries).
    Anything else (another name, a subfolder, a link) may be the user's: the folder is left alone."""
    suffix = staging.name[len(STAGING_PREFIX):]
    if len(suffix) != 8 or not set(suffix) <= _MKDTEMP_CHARS:
        return False
    try:
        return all(e.is_file(follow_symlinks=False) for e in os.scandir(staging))
    except OSError:
        return False


def recover(folder: Path, seal: Seal) -> None:
    """Finish commits that a killed run left half done; remove staging folders of dead runs.

    A journal that fails :func:`_checked_journal` is an :class:`OutputError` naming it (left in place,
    nothing changed). Call with the folder lock held.
    """
    for staging in sorted(folder.glob(STAGING_PREFIX + "*")):
        if staging.is_symlink() or not staging.is_dir() or not _is_abandoned(staging):
            continue
        path = staging / JOURNAL
        if not _exists(path):
            if _only_staged_files(staging):
                shutil.rmtree(staging, ignore_errors=True)  # a dead run's staging, never committed
            continue
        try:
            doc = _load_json(path, "the journal", "", JournalError)
            checked = _checked_journal(folder, staging, doc, seal)
        except JournalError as exc:
            why = str(exc).replace(f"{path}: the journal ", "").rstrip("; ")
            raise OutputError(f"the output folder {str(folder)!r} holds an unfinished commit whose journal "
                              f"{str(path)!r} calibrate cannot have written ({why}); nothing was changed. If no "
                              f"calibrate run of yours was killed there, remove {staging.name!r} (or choose "
                              "another folder with --out), then run again") from None
        _finish_commit(folder, staging, {"files": checked[0], "replaces": checked[1], "manifest": checked[2]})


class StagedOutput:
    """A run's outputs, staged inside ``final`` and committed as one file set (see the module doc).

    Create it when the run starts: it checks the folder (refusing files it would have to
    replace without owning them) and finishes any interrupted commit there.
    """

    def __init__(self, final: Path):
        self.final = Path(final)
        self._created: list[Path] = []
        owner_key()  # a key that cannot be read or made is refused before anything is created
        missing = self._make_folder()
        self._created = missing  # deepest first: removed in this order if the run fails
        self.seal = Seal(self.final)
        self._lock_fd: int | None = None
        self._names: list[str] = []
        self._unsynced: list[str] = []  # written, not yet fsync'ed (commit syncs them together)
        self._adopted: dict[str, dict[str, Any]] = {}
        self.dir = self.final / STAGING_PREFIX  # replaced below; set so that discard() is always safe
        try:
            # under the folder lock, so that no other run's recovery sees our staging folder unlocked
            with _folder_lock(self.final):
                try:
                    self.dir = Path(tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=self.final))
                except OSError as exc:
                    raise OutputError(f"cannot write into the output folder {str(self.final)!r} ({exc.strerror}); "
                                      "choose another with --out") from None
                if fcntl is not None:
                    self._lock_fd = os.open(self.dir, os.O_RDONLY)
                    _HELD_LOCKS.add(self._lock_fd)
                    fcntl.flock(self._lock_fd, fcntl.LOCK_EX)
                recover(self.final, self.seal)
                self._check_conflicts(CONTRACT_NAMES)
        except BaseException:
            self.discard()
            raise

    def _make_folder(self) -> list[Path]:
        """Create the output folder; returns the folders made (deepest first). A name that cannot be a
        folder (a file, a NUL byte, a symbolic-link loop, too long) is one OutputError (T16)."""
        shown = str(self.final).replace("\0", "\\0")[:200]
        try:
            if "\0" in str(self.final):
                raise ValueError("the name holds a NUL byte")
            if self.final.exists() and not self.final.is_dir():
                raise OutputError(f"output {shown!r} is a file, not a folder; choose a folder with --out "
                                  "(or the recipe's `output:`)")
            missing = []
            p = self.final.absolute()
            while not _exists(p):
                missing.append(p)
                p = p.parent
            self.final.mkdir(parents=True, exist_ok=True)
        except (OSError, RuntimeError, ValueError) as exc:  # RuntimeError: a symbolic-link loop
            why = getattr(exc, "strerror", None) or ("a symbolic-link loop" if isinstance(exc, RuntimeError) else exc)
            raise OutputError(f"cannot create the output folder {shown!r} ({why}); choose another with --out") from None
        return missing

    def _check_conflicts(self, names) -> dict[str, dict]:
        """Refuse files of ``names`` here that calibrate cannot prove it wrote; the records of those it may replace
        or remove (:func:`owned_files`: what a commit replaces, each file hashed once)."""
        if _exists(self.final / PREVIOUS):  # only ever there while a commit runs: recovery removed ours
            raise OutputError(f"the output folder {str(self.final)!r} holds {PREVIOUS} without an unfinished commit "
                              "that set it aside; calibrate changed nothing: move it away or choose another folder "
                              "with --out")
        records = owned_files(self.final, self.seal)
        owned = set() if records is None else {*records, MANIFEST}
        foreign = sorted(n for n in names if n not in owned and _exists(self.final / n))
        if not foreign:
            return records or {}
        if records is None and _exists(self.final / MANIFEST):  # a manifest there, not sealed for this folder
            raise OutputError(f"the output folder {str(self.final)!r} already holds {', '.join(foreign)}, which "
                              f"calibrate cannot prove it wrote there: its {MANIFEST} is not sealed with your owner "
                              "key for this folder (written by a calibrate from before sealed outputs, by another "
                              "user or machine, or by hand, or the folder was moved or copied since); calibrate "
                              "never replaces files it did not write: if they are old outputs you no longer need, "
                              f"delete them and {MANIFEST}, else move them away or choose another folder with --out")
        raise OutputError(f"the output folder {str(self.final)!r} already holds {', '.join(foreign)}, which no "
                          f"calibrate run wrote there (no {MANIFEST} lists them with their current size and "
                          "SHA-256: new, or changed since); calibrate never replaces files it did not write: move "
                          "them away or choose another folder with --out")

    def write_text(self, name: str, text: str) -> None:
        self.write_bytes(name, text.encode("utf-8"))

    def write_bytes(self, name: str, data: bytes) -> None:
        if not plain_name(name) or name in (MANIFEST, JOURNAL):
            raise ValueError(f"output file name {name!r} is not allowed (plain names only, not {MANIFEST})")
        try:
            with open(self.dir / name, "wb") as fh:
                fh.write(data)
        except OSError as exc:
            raise self._write_error(exc) from None
        if name not in self._names:
            self._names.append(name)
        if name not in self._unsynced:
            self._unsynced.append(name)

    def _sync_written(self) -> None:
        """Every file written here on disk before the journal names it (a commit's step 1): fsync'ed all at
        once, in threads (fsync releases the GIL, and concurrent ones share the file system's journal
        commits: 11 fsyncs one after the other took 1 s on a slow disk)."""
        from concurrent.futures import ThreadPoolExecutor

        def sync(name: str) -> None:
            fd = os.open(self.dir / name, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

        names, self._unsynced = self._unsynced, []
        try:
            if names:
                with ThreadPoolExecutor(min(len(names), 16)) as pool:
                    list(pool.map(sync, names))
        except OSError as exc:
            raise self._write_error(exc) from None

    def adopt(self, name: str, size: int, sha256: str) -> None:
        """A file another process (a worker of a partitioned run) wrote into the staging folder, with its
        size and SHA-256 as that process computed them: committed with the others, not read again here."""
        if not plain_name(name) or name in (MANIFEST, JOURNAL) or (self.dir / name).stat().st_size != size:
            raise ValueError(f"output file {name!r} cannot be adopted (not a plain name, or not the size reported)")
        self._adopted[name] = {"bytes": int(size), "sha256": sha256}
        if name not in self._names:
            self._names.append(name)

    def _manifest(self) -> dict[str, Any]:
        from calibrate.version import __version__

        files = {name: self._adopted.get(name) or {"bytes": (self.dir / name).stat().st_size,
                                                    "sha256": _sha256(self.dir / name)}
                 for name in self._names}
        doc = {"format": "calibrate-output", "version": 2, "run_id": uuid.uuid4().hex,
               "written": datetime.now(timezone.utc).isoformat(timespec="seconds"),
               "calibrate": __version__, "files": files}
        return {**doc, "mac": self.seal.of("manifest", doc)}

    def _write_error(self, exc: OSError) -> OutputError:
        fix = ("free disk space or choose another folder with --out" if exc.errno in (errno.ENOSPC, errno.EDQUOT)
               else "choose another folder with --out")
        return OutputError(f"cannot write the outputs into {str(self.final)!r} ({exc.strerror or exc}); nothing of "
                           f"this run was kept and the folder is as it was: {fix}")

    def commit(self) -> Path:
        self._sync_written()
        manifest = self._manifest()
        with _folder_lock(self.final):
            recover(self.final, self.seal)
            # what it replaces (a manifest planted meanwhile is refused, not replaced)
            replaces = self._check_conflicts([*self._names, MANIFEST])
            journal = {"files": list(self._names), "replaces": replaces, "manifest": manifest}
            journal["mac"] = self.seal.of("journal", journal)
            # the journal appears whole or not at all: from here on the commit is as good as done
            try:
                tmp = write_temp_beside(self.dir, JOURNAL, json.dumps(journal).encode("utf-8"))
                os.replace(tmp, self.dir / JOURNAL)
            except OSError as exc:
                raise self._write_error(exc) from None
            _finish_commit(self.final, self.dir, journal)
        self._release()
        self._created = []
        return self.final

    def _release(self) -> None:
        if self._lock_fd is not None:
            _HELD_LOCKS.discard(self._lock_fd)
            os.close(self._lock_fd)
            self._lock_fd = None

    def _remove_created(self) -> None:
        for k, folder in enumerate(self._created):
            try:
                folder.rmdir()  # only if empty: another run may be using it
            except OSError:
                self._created = self._created[k:]  # kept for a second discard (see discard)
                return
        self._created = []

    def discard(self) -> None:
        """Remove the staging folder and the folders this run created. May be called again: a run's pipeline
        calls it again once its executor's workers have stopped (one still busy when the run failed may
        have written into the staging folder after the first call). The folder is renamed before it is removed:
        a worker still writing by its name then fails, rather than adding a file while the folder is emptied
        (which left it behind)."""
        if self.dir.name != STAGING_PREFIX:
            gone = self.dir.with_name(f"{STAGING_PREFIX}{uuid.uuid4().hex[:8]}")  # as mkdtemp names them: recoverable
            try:
                os.rename(self.dir, gone)
            except OSError:  # removed already (a second call), or the name taken
                gone = self.dir
            shutil.rmtree(gone, ignore_errors=True)
        self._release()
        self._remove_created()
