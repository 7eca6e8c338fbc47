"""An output folder's manifest: what a run's result is, and what of the folder is calibrate's.

``manifest.json`` lists every file of a run's result with its size and SHA-256 (the names a folder's
protocol uses are here too); a seal (``mac``) proves that a run of this user's wrote it for this folder.
:func:`read_manifest` and :func:`listed_files` check integrity only (no key); :func:`owned_files`
(sealed manifests, files that still match) is what a run may replace or remove; :class:`RunFolder` is
a folder as a loader reads it, every file checked against the manifest. Committing a result (staging,
journal, recovery) is calibrate.files.commit, whose docstring tells the whole protocol.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path
from typing import Any

from calibrate.errors import CalibrateError, CalibrationError
from calibrate.files.untrusted import open_regular, plain_name, read_bounded
from calibrate.files.ownerkey import Seal

MANIFEST = "manifest.json"
#: where a commit keeps the previous manifest while it replaces files: the authority on what an
#: interrupted commit may replace or remove (a journal never is); removed when the commit ends
PREVIOUS = ".calibrate-previous-manifest.json"
STAGING_PREFIX = ".calibrate-staging-"
JOURNAL = ".journal.json"
#: a journal or a manifest lists a run's file names and their records: far below this
MAX_DOC_BYTES = 64 << 20
#: names every run may write; a file of one of these names that no manifest claims blocks a run
CONTRACT_NAMES = ("thresholds.csv", "results.json", "report.md", "models.csv", "calibration.json", "det.csv", MANIFEST)


class OutputError(CalibrateError):
    """The output folder cannot take this run's result as it stands (the message says why and what to do)."""


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open_regular(path, "a listed file", "", error=OSError, follow=False) as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _load_json(path: Path, what: str, fix: str, error) -> Any:
    """The JSON document in ``path`` (a regular file, not a link, within MAX_DOC_BYTES), else ``error``."""
    data = read_bounded(path, what, fix, MAX_DOC_BYTES, error)
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:  # RecursionError: nested too deeply
        why = "nested too deeply" if isinstance(exc, RecursionError) else "not JSON in UTF-8"
        raise error(f"{path}: {what} is {why}; {fix}") from None


def _exists(path: Path) -> bool:
    """Whether anything (a dangling link too) is at ``path``."""
    try:
        os.lstat(path)
    except FileNotFoundError:
        return False
    return True


def _record_ok(entry: Any) -> bool:
    """A manifest entry: {"bytes": a non-negative int, "sha256": 64 hex digits}."""
    return (isinstance(entry, dict) and isinstance(entry.get("bytes"), int) and not isinstance(entry["bytes"], bool)
            and entry["bytes"] >= 0 and isinstance(entry.get("sha256"), str) and len(entry["sha256"]) == 64
            and all(c in "0123456789abcdef" for c in entry["sha256"]))


def _matches(path: Path, entry: Any) -> bool:
    """Whether ``path`` is a regular file (not a link) with the size and SHA-256 ``entry`` records."""
    try:
        st = path.lstat()
    except OSError:
        return False
    try:
        return (_record_ok(entry) and stat.S_ISREG(st.st_mode) and st.st_size == entry["bytes"]
                and _sha256(path) == entry["sha256"])
    except OSError:  # swapped for something else since
        return False


#: the fix named with a damaged manifest
_DAMAGED = ("calibrate left it in place and changed nothing: restore it, or move it away together with the outputs "
            "it lists, or choose another folder with --out")


def _manifest_doc(folder: Path, name: str = MANIFEST) -> dict | None:
    """The folder's manifest (or the previous one a commit keeps, PREVIOUS), None when there is none; a
    manifest that is there but damaged is an OutputError naming it (D2: ownership never falls back to names)."""
    path = folder / name
    if not _exists(path):
        return None
    doc = _load_json(path, "the output folder's manifest", _DAMAGED, OutputError)
    files = doc.get("files") if isinstance(doc, dict) else None
    if not (isinstance(doc, dict) and doc.get("format") == "calibrate-output" and isinstance(files, dict)):
        raise OutputError(f"{path}: the output folder's manifest is not one calibrate writes (format "
                          f"calibrate-output with files); {_DAMAGED}")
    for key, entry in files.items():
        if not plain_name(key) or key in (MANIFEST, JOURNAL) or not _record_ok(entry):
            raise OutputError(f"{path}: the output folder's manifest lists {key[:80]!r} without a plain name and a "
                              f"record of bytes and SHA-256; {_DAMAGED}")
    return doc


def _sealed(doc: dict, seal: Seal, purpose: str) -> bool:
    """Whether ``doc`` (a manifest or a journal read from the folder) carries, as ``mac``, the seal a run of
    this user's made of the rest of it for this folder: proof that calibrate wrote it there (issue 31)."""
    return seal.verifies(purpose, {k: v for k, v in doc.items() if k != "mac"}, doc.get("mac"))


def owned_files(folder: Path, seal: Seal, name: str = MANIFEST) -> dict[str, dict] | None:
    """Files in ``folder`` that calibrate wrote and may therefore replace or remove, name -> record: those the
    manifest (or the previous one a commit keeps, PREVIOUS) lists with their current size and SHA-256, when it is
    sealed, and then that manifest too; None when it is not there or not sealed, and then nothing in the folder
    is calibrate's. Never a file recognised by its name alone (D1), nor by a record that anybody could have
    written (issue 31): a listed file that differs is the user's."""
    doc = _manifest_doc(folder, name)
    if doc is None or not _sealed(doc, seal, "manifest"):
        return None
    return {key: entry for key, entry in doc["files"].items() if _matches(folder / key, entry)}


def read_manifest(folder: str | Path) -> dict[str, Any] | None:
    """The manifest of a complete result in ``folder``, or None when the folder holds none.

    Complete means: ``manifest.json`` is present and every file it lists exists with the size and
    SHA-256 it records.
    """
    folder = Path(folder)
    try:
        doc = _manifest_doc(folder)
    except OutputError:  # damaged: not a complete result
        return None
    if doc is None:
        return None
    for name, entry in doc["files"].items():
        if not plain_name(name) or not _matches(folder / name, entry):
            return None
    return doc


def listed_files(folder: str | Path) -> dict[str, dict] | None:
    """Integrity only, for a loader that checks what it reads (RunFolder, below): name -> {bytes,
    sha256} as the folder's manifest records them, None when there is no manifest; a damaged one is an
    OutputError naming it. It proves no ownership and needs nothing but the folder, so a copy loads anywhere."""
    doc = _manifest_doc(Path(folder))
    return None if doc is None else doc["files"]


class RunFolder:
    """A run's output folder as a loader reads it: every file read from it must be one the folder's
    ``manifest.json`` lists, with the size and SHA-256 it records (listed_files). This is
    integrity, not ownership: it needs no key, so a folder copied whole to another machine loads there."""

    def __init__(self, folder: Path):
        self.folder, self._manifest = folder, folder / MANIFEST
        try:
            records = listed_files(folder)
        except OutputError:
            raise CalibrationError(f"{self._manifest}: the run's manifest is damaged or not calibrate's, so the files "
                                   "of the run cannot be checked against it; restore it, or run the recipe again") from None
        if records is None:
            raise CalibrationError(f"{folder}: the folder holds no {MANIFEST}, so its calibration cannot be checked "
                                   "against what the run wrote (a run that did not finish, or a folder copied in part); "
                                   "copy the whole folder, or run the recipe again")
        self._records, self._checked = records, set()

    def check(self, name: str, data: bytes | None = None) -> None:
        """Refuse the file ``name`` unless the manifest records it as it is (``data``: its bytes, when read)."""
        if name in self._checked and data is None:
            return
        path = self.folder / name
        record = self._records.get(name)
        if record is None:
            raise CalibrationError(f"{path}: the run's {self._manifest.name} does not list it, so it is not a file the "
                                   "run wrote; run the recipe again")
        if data is None:
            try:
                with open_regular(path, "a file of the run", "run the recipe again", error=CalibrationError) as fh:
                    data = fh.read()
            except OSError as exc:
                raise CalibrationError(f"{path}: cannot be read ({exc.strerror or exc}); run the recipe again") from None
        if len(data) != record["bytes"] or hashlib.sha256(data).hexdigest() != record["sha256"]:
            raise CalibrationError(f"{path}: changed since the run wrote it (its size or SHA-256 is not the one "
                                   f"{self._manifest.name} records); run the recipe again or restore it (a calibration "
                                   "saved over it on purpose loads by its file path)")
        self._checked.add(name)

    def check_state_files(self, state: Any) -> None:
        """Check the files a saved model state reads beside it (``{"file": NAME}`` entries, as a pooled sample's)."""
        for name in state_files(state):
            if plain_name(name):  # any other name is refused by the state's own check, naming it
                self.check(name)


def state_files(value: Any, depth: int = 0) -> list[str]:
    """The names in ``{"file": NAME}`` entries of a saved state (mappings and lists of them, a few levels deep)."""
    if depth > 8:
        return []
    if isinstance(value, dict):
        own = [value["file"]] if isinstance(value.get("file"), str) else []
        return own + [n for v in value.values() if isinstance(v, dict | list) for n in state_files(v, depth + 1)]
    if isinstance(value, list) and value and isinstance(value[0], dict | list):
        return [n for v in value for n in state_files(v, depth + 1)]
    return []
