"""Dataset ``npz-patterns``: feature vectors with class and set labels from a NumPy ``.npz``."""

from __future__ import annotations

import zipfile
from pathlib import Path


from calibrate.base import Dataset, RunContext
from calibrate.errors import DataError
from calibrate.safefiles import npz_arrays, regular_file
from calibrate.types import PatternSet


class NpzPatterns(Dataset):
    """Patterns from an .npz with arrays X (samples x features), labels and sets (one per sample).

    :param path: the .npz file; relative to the recipe.
    """

    produces = "patterns"
    default_distance = "euclidean"  # between set means

    def __init__(self, *, path: Path):
        self.path = path

    def _read(self, names_only: bool) -> dict:
        if names_only:
            regular_file(Path(self.path), "the patterns file", "save it with numpy.savez")
            try:
                with zipfile.ZipFile(self.path) as zf:
                    arrays = {n[:-4] if n.endswith(".npy") else n: None for n in zf.namelist()}
            except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
                raise DataError(f"{self.path}: not a readable .npz file ({exc}); save it with numpy.savez") from None
        else:  # every member's header is checked against its real size before anything is allocated
            arrays = npz_arrays(Path(self.path), "the patterns file", "save it with numpy.savez")
        missing = [k for k in ("X", "labels", "sets") if k not in arrays]
        if missing:
            raise DataError(f"{self.path}: missing array(s) {', '.join(missing)}; the file needs X (samples x features), "
                            f"labels and sets (one entry per sample); it has {', '.join(arrays) or 'nothing'}")
        return arrays

    def check(self) -> None:
        """Open the archive and check its array names (the arrays themselves are read by the run)."""
        self._read(names_only=True)

    def _load(self, context: RunContext) -> PatternSet:
        arrays = self._read(names_only=False)
        return PatternSet(arrays["X"], arrays["labels"], arrays["sets"], source=str(self.path))
