"""Datasets ``image-sets`` and ``extended-yale-b``: folders of images grouped into image sets.

Both read images with one helper (:func:`read_image`, Pillow): PGM/PPM/PBM/PNM, PNG and JPEG,
converted to 8-bit grayscale (or RGB), optionally resized, scaled to floats in [0, 1] and
flattened row by row (one sample per image). 16-bit grayscale images are scaled by 65535.

``image-sets`` layout::

    root/<class>/<set>/<image files>      one folder per set
    root/<class>/<image files>            "flat": give flat_sets: N

In the flat layout each class's readable images, sorted by file name, are split into ``flat_sets``
contiguous sets of (nearly) equal size, labelled 1..N. Classes may mix the two layouts; in a
class that has set folders, files lying beside them are passed over.

Passed over, never fatal, and summarised in one ``context.note`` (count and first few names per
kind): hidden files and folders (names starting with "."), files that are not images (by
extension), images Pillow cannot read (corrupt or truncated), folders nested below a set.
Sets left with no readable image are skipped and reported, and so are classes left with no set;
it is an error only when nothing readable remains. Sizes are read from the image headers before
anything is decoded: images of different sizes are an error (the message names a file and suggests
``resize: [width, height]``), and so are images of more than MAX_IMAGE_VALUES values each, or more
values in all than ``calibrate.files.untrusted.memory_budget`` allows.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import numpy as np
from PIL import Image

from calibrate.contract.base import Dataset, RunContext
from calibrate.errors import DataError, ParameterError
from calibrate.files.untrusted import memory_budget, open_regular
from calibrate.contract.types import PatternSet

IMAGE_SUFFIXES = frozenset({".pgm", ".pnm", ".ppm", ".pbm", ".png", ".jpg", ".jpeg"})
_SIXTEEN_BIT = frozenset({"I;16", "I;16B", "I;16L", "I;16N", "I"})


class UnreadableImage(Exception):
    """Pillow could not decode a file (the reason is the message)."""


#: the most values (pixels x channels) one image may become: 4096 x 4096 grayscale, far past any
#: matcher's input; a larger vector per sample makes every distance and copy gigabytes
MAX_IMAGE_VALUES = 1 << 24


def check_resize(resize: Sequence[int] | None, bands: int = 1) -> tuple[int, int] | None:
    """Validate a ``resize: [width, height]`` parameter (raises ParameterError); ``bands`` values per
    pixel (1 grayscale, 3 RGB) count against MAX_IMAGE_VALUES, checked before any image is read."""
    if resize is None:
        return None
    if (not isinstance(resize, (list, tuple)) or len(resize) != 2
            or any(isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1 for v in resize)):
        raise ParameterError(f"resize must be [width, height] in pixels (two positive integers), got {resize!r}")
    if int(resize[0]) * int(resize[1]) * bands > MAX_IMAGE_VALUES:
        raise ParameterError(f"resize {list(resize)!r} makes images of {int(resize[0]) * int(resize[1]) * bands:,} values "
                             f"(at most {MAX_IMAGE_VALUES:,} per image); choose a smaller [width, height]")
    return int(resize[0]), int(resize[1])


def _opened(path: Path):
    """``path`` opened (calibrate.files.untrusted.open_regular), else UnreadableImage: a FIFO named like an
    image would block the read forever, a device never end."""
    return open_regular(path, "the image", "", error=lambda message: UnreadableImage(message.split(": the image ", 1)[-1]
                                                                                    .removesuffix("; ")))


def image_size(path: Path) -> tuple[int, int]:
    """(width, height) from the image's header alone: Pillow decodes nothing until asked, so a
    10 KB PNG that claims 9400 x 9400 pixels costs nothing here. Raises :class:`UnreadableImage`."""
    with _opened(path) as fh:
        try:
            with Image.open(fh) as im:
                return im.size
        except Exception as exc:  # Pillow raises many types for bad files; a bad file must not stop the run
            raise UnreadableImage(f"{type(exc).__name__}: {exc}") from None


def read_image(path: Path, resize: tuple[int, int] | None = None, grayscale: bool = True) -> np.ndarray:
    """One image as floats in [0, 1]: (height, width) when grayscale, else (height, width, 3).

    Raises :class:`UnreadableImage` for anything Pillow cannot decode, and for anything that is not a
    regular file.
    """
    try:
        with _opened(path) as fh, Image.open(fh) as im:
            im.load()
            if im.mode in _SIXTEEN_BIT:
                scale = 65535.0
                im = im.convert("I").convert("F")
            else:
                scale = 255.0
                im = im.convert("L" if grayscale else "RGB")
            if resize is not None and im.size != resize:
                im = im.resize(resize, Image.Resampling.BILINEAR)
            arr = np.asarray(im, dtype=np.float64)
    except UnreadableImage:
        raise
    except Exception as exc:  # Pillow raises many types for bad files; a bad file must not stop the run
        raise UnreadableImage(f"{type(exc).__name__}: {exc}") from None
    arr /= scale  # in place: one float64 copy of the image, not three
    if not grayscale and arr.ndim == 2:
        arr = np.repeat(arr[:, :, None], 3, axis=2)
    return np.clip(arr, 0.0, 1.0, out=arr)


class PassedOver:
    """Files a loader deliberately did not use, by kind, for one summary note."""

    def __init__(self):
        self.kinds: dict[str, list[str]] = {}

    def add(self, kind: str, name: str) -> None:
        self.kinds.setdefault(kind, []).append(name)

    def count(self, kind: str) -> int:
        return len(self.kinds.get(kind, []))

    def summary(self, examples: int = 3) -> str:
        parts = []
        for kind, names in self.kinds.items():
            unique = list(dict.fromkeys(names))
            # a name holding a line break (legal in file names) would break the one-line note: escape it
            shown = ", ".join(n if n.isprintable() else repr(n)[1:-1] for n in unique[:examples]) \
                + (", ..." if len(unique) > examples else "")
            parts.append(f"{kind}: {len(names)} ({shown})")
        return "; ".join(parts)


def read_images(paths: Sequence[Path], root: Path, resize: tuple[int, int] | None, grayscale: bool,
                passed: PassedOver, context: RunContext, name: str) -> list[np.ndarray | None]:
    """Flattened images for ``paths`` (None where unreadable, recorded in ``passed``).

    Sizes are read from the headers first: images of different sizes (without ``resize``), one image
    past MAX_IMAGE_VALUES, or all of them past :func:`memory_budget` are a DataError before anything
    is decoded.
    """
    sizes: list[tuple[int, int] | None] = []
    for path in paths:
        try:
            sizes.append(image_size(path))
        except UnreadableImage:
            passed.add("unreadable or corrupt images", _rel(path, root))
            sizes.append(None)
    _check_sizes(paths, sizes, resize, 1 if grayscale else 3, name)
    out: list[np.ndarray | None] = []
    for path, size in context.track(list(zip(paths, sizes)), f"{name}: reading {len(paths)} images", len(paths),
                                    unit="images"):
        try:
            out.append(None if size is None else read_image(path, resize, grayscale))
        except UnreadableImage:
            passed.add("unreadable or corrupt images", _rel(path, root))
            out.append(None)
    _check_sizes(paths, [None if a is None else (a.shape[1], a.shape[0]) for a in out], resize, 1, name)
    return [None if arr is None else arr.ravel() for arr in out]


def _check_sizes(paths: Sequence[Path], sizes: list[tuple[int, int] | None], resize: tuple[int, int] | None,
                 bands: int, name: str) -> None:
    """Refuse (DataError) images whose (width, height) differ, one too large, or all too large."""
    counts: dict[tuple[int, int], int] = {}
    for size in sizes:
        if size is not None:
            counts[size] = counts.get(size, 0) + 1
    if not counts:
        return
    if resize is None and len(counts) > 1:
        (cw, ch) = common = max(counts, key=counts.get)
        odd = next(i for i, size in enumerate(sizes) if size is not None and size != common)
        w, h = sizes[odd]
        raise DataError(f"{name}: {paths[odd]} is {w}x{h} pixels but {counts[common]} other images are "
                        f"{cw}x{ch}; give the dataset `resize: [{cw}, {ch}]` "
                        "(width, height) to bring every image to one size")
    w, h = resize or next(iter(counts))
    if resize is None and w * h * bands > MAX_IMAGE_VALUES:
        first = next(p for p, size in zip(paths, sizes) if size is not None)
        raise DataError(f"{name}: {first} is {w}x{h} pixels, {w * h * bands:,} values per image (at most "
                        f"{MAX_IMAGE_VALUES:,}); give the dataset `resize: [width, height]` to shrink every image")
    total = sum(counts.values()) * w * h * bands * 8
    if total > memory_budget():
        raise DataError(f"{name}: {sum(counts.values())} images of {w}x{h} pixels make {total / 2**30:.1f} GiB of "
                        f"values, more than this machine's budget of {memory_budget() / 2**30:.1f} GiB for one "
                        "input; give the dataset a smaller `resize: [width, height]`, or use fewer images")


def _rel(path: Path, root: Path) -> str:
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)


def _listing(folder: Path) -> list[Path]:
    try:
        return sorted(folder.iterdir(), key=lambda p: p.name)
    except OSError as exc:
        raise DataError(f"cannot list folder {folder} ({exc})") from None


def _check_root(path: Path, name: str) -> Path:
    path = Path(path)
    if not path.is_dir():
        raise DataError(f"{name}: {path} is not a folder; `path:` must be the dataset's root folder")
    return path


def _class_folders(root: Path, passed: "PassedOver", hidden: str, loose: str) -> list[Path]:
    """The root's sub-folders (one per class); hidden entries and loose files are passed over
    under the kinds ``hidden`` and ``loose``."""
    folders = []
    for entry in _listing(root):
        if entry.name.startswith("."):
            passed.add(hidden, entry.name)
        elif entry.is_dir():
            folders.append(entry)
        else:
            passed.add(loose, entry.name)
    return folders


def _label(k: int, n: int) -> str:
    """Set labels 1..n, zero-padded so that they sort in order."""
    return f"{k + 1:0{len(str(n))}d}"


def _pattern_set(rows: list[tuple[str, str, np.ndarray]], passed: PassedOver, root: Path, name: str) -> PatternSet:
    """PatternSet from (class, set, flat image) rows; empty sets/classes were dropped already."""
    if not rows:
        raise DataError(f"{name}: no readable images under {root}"
                        + (f" (passed over: {passed.summary()})" if passed.kinds else ""))
    X = np.stack([r[2] for r in rows])
    return PatternSet(X, np.array([r[0] for r in rows]), np.array([r[1] for r in rows]), source=str(root))


class ImageSets(Dataset):
    """Image sets from folders root/<class>/<set>/<images> (or root/<class>/<images> with flat_sets).

    :param path: the root folder; relative to the recipe.
    :param resize: [width, height] to resize every image to; default: keep sizes (they must agree).
    :param grayscale: convert to 8-bit grayscale (else RGB, 3 values per pixel).
    :param flat_sets: for classes whose folder holds images directly: split its sorted images into this many contiguous sets.
    """

    produces = "patterns"
    default_distance = "mutual-subspace"  # the paper's distance between image sets

    def __init__(self, *, path: Path, resize: list[int] | None = None, grayscale: bool = True,
                 flat_sets: int | None = None):
        self._size = check_resize(resize, 1 if grayscale else 3)
        if flat_sets is not None and (isinstance(flat_sets, bool) or not isinstance(flat_sets, int) or flat_sets < 1):
            raise ParameterError(f"flat_sets must be a positive integer (sets per class in a flat layout), got {flat_sets!r}")
        self.path, self.resize, self.grayscale, self.flat_sets = path, resize, grayscale, flat_sets

    def _load(self, context: RunContext) -> PatternSet:
        name = "image-sets"
        root = _check_root(self.path, name)
        passed = PassedOver()
        # (class, set label or None for flat, path); per class its set folders (None: flat layout)
        files: list[tuple[str, str | None, Path]] = []
        layout: dict[str, list[str] | None] = {}
        classes = _class_folders(root, passed, "hidden files or folders", "files outside class folders")
        if not classes:
            raise DataError(f"{name}: no class folders in {root}; expected root/<class>/<set>/<images> "
                            "(or root/<class>/<images> with flat_sets:)")
        for cdir in classes:
            entries = _listing(cdir)
            set_dirs = [e for e in entries if e.is_dir() and not e.name.startswith(".")]
            if set_dirs:
                layout[cdir.name] = [d.name for d in set_dirs]
                for e in entries:
                    if e not in set_dirs:
                        passed.add("hidden files or folders" if e.name.startswith(".") else "files beside set folders",
                                   _rel(e, root))
                for sdir in set_dirs:
                    files += [(cdir.name, sdir.name, f) for f in _listing(sdir) if self._usable(f, root, passed)]
            else:
                layout[cdir.name] = None
                files += [(cdir.name, None, f) for f in entries if self._usable(f, root, passed)]
        flat = [c for c, sets in layout.items() if sets is None]
        if flat and self.flat_sets is None:
            raise DataError(f"{name}: {len(flat)} class folder(s) in {root} hold images directly, with no set "
                            f"folders (e.g. {flat[0]!r}): this flat layout needs `flat_sets: N` to split each "
                            "class's images (sorted by name) into N sets, or put each set in its own folder")
        arrays = read_images([f[2] for f in files], root, self._size, self.grayscale, passed, context, name)
        grouped: dict[tuple[str, str | None], list[np.ndarray]] = {}
        for (cls, set_label, _), arr in zip(files, arrays):
            if arr is not None:
                grouped.setdefault((cls, set_label), []).append(arr)

        rows: list[tuple[str, str, np.ndarray]] = []
        for cls, set_names in layout.items():
            n_before = len(rows)
            if set_names is None:
                images = grouped.get((cls, None), [])
                parts = np.array_split(np.arange(len(images)), self.flat_sets)
                named = [(_label(k, self.flat_sets), [images[i] for i in part]) for k, part in enumerate(parts)]
            else:
                named = [(s, grouped.get((cls, s), [])) for s in set_names]
            for set_label, images in named:
                if not images:
                    passed.add("empty sets (no readable image)", f"{cls}/{set_label}")
                rows += [(cls, set_label, arr) for arr in images]
            if len(rows) == n_before:
                passed.add("empty classes (no readable image)", cls)
        if passed.kinds:
            context.note(f"{name}: passed over {passed.summary()} under {root}")
        return _pattern_set(rows, passed, root, name)

    @staticmethod
    def _usable(f: Path, root: Path, passed: PassedOver) -> bool:
        if f.name.startswith("."):
            passed.add("hidden files or folders", _rel(f, root))
        elif f.is_dir():
            passed.add("folders nested below a set", _rel(f, root))
        elif f.suffix.lower() not in IMAGE_SUFFIXES:
            passed.add("non-image files", _rel(f, root))
        else:
            return True
        return False


_YALE_IMAGE = re.compile(r"^.+_P\d+A([+-]\d+)E([+-]\d+)\.pgm$", re.IGNORECASE)


class ExtendedYaleB(Dataset):
    """The cropped Extended Yale Face Database B (folder CroppedYale), one class per subject.

    Each subject's images are grouped into ``sets`` image sets by light direction: the distinct
    (azimuth, elevation) pairs found in the file names (``yaleB05_P00A-035E+15.pgm``: azimuth
    -35, elevation +15), over all subjects, are sorted by azimuth then elevation and cut into
    ``sets`` contiguous runs of (nearly) equal length with numpy.array_split; set k holds a
    subject's images lit from the k-th run (from the far left to the far right). The grouping is
    the same for every subject, so a subject with missing images has a smaller set, never a
    differently lit one. With the database's 64 directions and sets: 7 the runs have 10, 9, ..., 9
    directions. This (``grouping: runs``, the default) is the closest analogue of the paper's
    sequences, each taken under one illumination. ``grouping: interleaved`` deals the sorted
    directions out in turn (direction rank modulo ``sets``), so that every set spans the whole
    range of lighting: enrollment and query sets then look alike, which removes the
    train/test shift that ``runs`` creates (see docs/reproduction.md).

    Passed over deliberately and reported with counts per kind: *_Ambient.pgm (no light
    source; 640x480, not cropped), *.bad (images the database's authors flagged as corrupt),
    *.info (file lists), DEADJOE, WS_FTP.LOG and other non-images, hidden files, images Pillow
    cannot read.

    :param path: the CroppedYale folder (holding yaleB01 ... yaleB39).
    :param resize: [width, height]; the default [42, 48] is 1/4 of the 168x192 originals (16x fewer values, for speed); null keeps full size.
    :param sets: image sets per subject, formed by light direction.
    :param grouping: runs (each set a contiguous range of light directions) or interleaved (directions dealt out in turn).
    """

    produces = "patterns"
    default_distance = "mutual-subspace"  # the paper's distance between image sets

    def __init__(self, *, path: Path, resize: list[int] | None = [42, 48], sets: int = 7,  # noqa: B006 (never mutated)
                 grouping: Literal["runs", "interleaved"] = "runs"):
        self._size = check_resize(resize)
        if isinstance(sets, bool) or not isinstance(sets, int) or sets < 1:
            raise ParameterError(f"sets must be a positive integer (image sets per subject), got {sets!r}")
        self.path, self.resize, self.sets = path, None if resize is None else list(resize), sets
        self.grouping = grouping

    def _load(self, context: RunContext) -> PatternSet:
        name = "extended-yale-b"
        root = _check_root(self.path, name)
        passed = PassedOver()
        found: list[tuple[str, tuple[int, int], Path]] = []
        subjects = _class_folders(root, passed, "hidden files", "other non-image files")
        for sdir in subjects:
            for f in _listing(sdir):
                n = f.name
                if n.startswith("."):
                    passed.add("hidden files", _rel(f, root))
                elif f.is_dir():
                    passed.add("nested folders", _rel(f, root))
                elif n.lower().endswith("_ambient.pgm"):
                    passed.add("ambient images (*_Ambient.pgm, no light source)", n)
                elif n.lower().endswith(".bad"):
                    passed.add("images flagged bad by the database (*.bad)", n)
                elif n.lower().endswith(".info"):
                    passed.add("image lists (*.info)", n)
                elif (m := _YALE_IMAGE.match(n)):
                    found.append((sdir.name, (int(m.group(1)), int(m.group(2))), f))
                elif f.suffix.lower() in IMAGE_SUFFIXES:
                    passed.add("images without a light direction in the name", _rel(f, root))
                else:
                    passed.add("other non-image files", n)
        if not found:
            hint = " (it has a CroppedYale folder: point `path:` there)" if (root / "CroppedYale").is_dir() else ""
            raise DataError(f"{name}: no images named like yaleB01_P00A+000E+00.pgm in subject folders under {root}"
                            f"{hint}; `path:` must be the CroppedYale folder")
        arrays = read_images([f[2] for f in found], root, self._size, True, passed, context, name)
        # within a set, images are ordered by light direction
        used = sorted(((subj, light, arr) for (subj, light, _), arr in zip(found, arrays) if arr is not None),
                      key=lambda r: (r[0], r[1]))
        directions = sorted({light for _, light, _ in used})
        if len(directions) < self.sets:
            raise DataError(f"{name}: the images under {root} have only {len(directions)} distinct light direction(s), "
                            f"too few for sets: {self.sets}; choose sets: {len(directions)} or fewer")
        if self.grouping == "runs":
            runs = np.array_split(np.arange(len(directions)), self.sets)
        else:
            runs = [np.arange(k, len(directions), self.sets) for k in range(self.sets)]
        group = {directions[i]: k for k, run in enumerate(runs) for i in run}
        rows = sorted(((subj, _label(group[light], self.sets), arr) for subj, light, arr in used),
                      key=lambda r: (r[0], r[1]))
        present = {(r[0], r[1]) for r in rows}
        for subj in sorted({r[0] for r in rows}):
            for k in range(self.sets):
                if (subj, _label(k, self.sets)) not in present:
                    passed.add("empty sets (every image of that light group missing)", f"{subj}/{_label(k, self.sets)}")
        empty_subjects = [s.name for s in subjects if s.name not in {r[0] for r in rows}]
        for s in empty_subjects:
            passed.add("subject folders without usable images", s)

        def fmt(light):
            return f"A{light[0]:+04d}E{light[1]:+03d}"

        ranges = ", ".join(f"{_label(k, self.sets)}: {fmt(directions[run[0]])}..{fmt(directions[run[-1]])}"
                           for k, run in enumerate(runs)) if self.grouping == "runs" else "interleaved"
        context.note(f"{name}: used {len(rows)} images of {len({r[0] for r in rows})} subjects in {self.sets} sets by "
                     f"light direction ({ranges}); passed over {passed.summary() if passed.kinds else 'nothing'}")
        return _pattern_set(rows, passed, root, name)
