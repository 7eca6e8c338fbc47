"""A run's output folder as a loader reads it (calibrate.api.load, calibrate.saved.partitioned): every file
read from it is checked against the folder's manifest (calibrate.running.outputs), integrity only."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from calibrate.errors import CalibrationError
from calibrate.running.outputs import MANIFEST, OutputError, listed_files
from calibrate.files.untrusted import plain_name, regular_file


class RunFolder:
    """A run's output folder as a loader reads it: every file read from it must be one the folder's
    ``manifest.json`` lists, with the size and SHA-256 it records (calibrate.running.outputs.listed_files). This is
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
            regular_file(path, "a file of the run", "run the recipe again", error=CalibrationError)
            try:
                data = path.read_bytes()
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
