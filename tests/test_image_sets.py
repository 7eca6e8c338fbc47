"""Datasets image-sets and extended-yale-b on tiny trees written with Pillow (plus the junk the
real archive holds), and a smoke test on the real CroppedYale folder when it is present."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from calibrate.contract.base import RunContext
from calibrate.errors import DataError, ParameterError
from calibrate.contract.manager import build_registry
from calibrate_builtins.datasets.image_sets import ExtendedYaleB, ImageSets, read_image
from calibrate_test_helpers import DATA

YALE = DATA / "extended-yale-b" / "CroppedYale"

W, H = 6, 4


def write(path: Path, value: int, size=(W, H), mode="L") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if mode == "RGB":
        arr = np.zeros((size[1], size[0], 3), np.uint8)
        arr[..., 0] = value
        Image.fromarray(arr, "RGB").save(path)
    elif mode == "I;16":
        Image.fromarray(np.full((size[1], size[0]), value, np.uint16)).save(path)
    else:
        arr = np.full((size[1], size[0]), value, np.uint8)
        arr[0, 0] = 255 - value  # not constant, so rows are distinguishable from a plain fill
        Image.fromarray(arr, "L").save(path)


def junk(path: Path, content: bytes = b"not an image\n") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)


def values_of(data) -> dict[tuple[str, str], list[int]]:
    """(class, set) -> the fill values (median pixel) of its images, in order."""
    out: dict[tuple[str, str], list[int]] = {}
    for c, s, idx in data.groups():
        out[(c, s)] = [int(round(np.median(data.X[i]) * 255)) for i in idx]
    return out


# ---------------------------------------------------------------- image-sets


@pytest.fixture
def nested(tmp_path):
    root = tmp_path / "faces"
    write(root / "alice" / "s1" / "a.pgm", 10)
    write(root / "alice" / "s1" / "b.png", 20)
    write(root / "alice" / "s2" / "c.jpeg", 30)  # JPEG: lossy, value read approximately
    write(root / "bob" / "s1" / "d.pgm", 40)
    write(root / "bob" / "s2" / "e.pgm", 50)
    write(root / "bob" / "s2" / "f.PGM", 60)
    junk(root / "bob" / "s2" / ".DS_Store")
    junk(root / "bob" / "s2" / "notes.txt")
    junk(root / "bob" / "s2" / "broken.pgm", b"P5\n6 4\n255\n\x00\x01")  # truncated
    junk(root / "bob" / "s1" / "garbage.png", bytes(range(256)) * 3)
    junk(root / "bob" / "stray.pgm")  # beside set folders
    junk(root / "README.md")
    (root / "alice" / "s1" / "deeper").mkdir()
    (root / "carol" / "s1").mkdir(parents=True)  # empty class (its only set is empty)
    junk(root / "carol" / "s1" / "Thumbs.db")
    return root


def test_nested_layout(nested):
    context = RunContext()
    with pytest.warns(UserWarning, match="image-sets: passed over"):
        data = ImageSets(path=nested).load(context)
    assert data.X.shape == (6, W * H)
    assert data.classes == ["alice", "bob"]
    vals = values_of(data)
    assert vals[("alice", "s1")] == [10, 20]
    assert vals[("bob", "s1")] == [40]
    assert vals[("bob", "s2")] == [50, 60]
    assert abs(vals[("alice", "s2")][0] - 30) <= 8  # JPEG is lossy
    assert data.X.min() >= 0 and data.X.max() <= 1
    # first pixel is 255 - value: the flattening is row-major and the scale is 1/255
    i = int(np.flatnonzero(data.sets == "s1")[0])
    assert data.X[i, 0] == pytest.approx((255 - 10) / 255)
    (note,) = context.notes
    for part in ("hidden files or folders: 1 (bob/s2/.DS_Store)", "non-image files: 2 (bob/s2/notes.txt, carol/s1/Thumbs.db)",
                 "unreadable or corrupt images: 2", "bob/s2/broken.pgm", "bob/s1/garbage.png",
                 "files beside set folders: 1 (bob/stray.pgm)", "files outside class folders: 1 (README.md)",
                 "folders nested below a set: 1 (alice/s1/deeper)", "empty sets (no readable image): 1 (carol/s1)",
                 "empty classes (no readable image): 1 (carol)"):
        assert part in note


def test_flat_layout_needs_flat_sets(tmp_path):
    for k in range(5):
        write(tmp_path / "x" / f"img{k}.pgm", 10 * (k + 1))
        write(tmp_path / "y" / f"img{k}.pgm", 100 + k)
    with pytest.raises(DataError, match=r"2 class folder\(s\).*hold images directly.*flat_sets: N"):
        ImageSets(path=tmp_path).load()
    data = ImageSets(path=tmp_path, flat_sets=2).load()
    vals = values_of(data)
    # sorted by name, contiguous, sizes differ by at most one
    assert vals[("x", "1")] == [10, 20, 30] and vals[("x", "2")] == [40, 50]
    assert sorted(data.sets.tolist()) == ["1"] * 6 + ["2"] * 4


def test_flat_sets_beyond_the_images_are_reported_empty(tmp_path):
    for k in range(2):
        write(tmp_path / "x" / f"img{k}.pgm", 10 * (k + 1))
    context = RunContext()
    with pytest.warns(UserWarning, match=r"empty sets \(no readable image\): 1 \(x/3\)"):
        data = ImageSets(path=tmp_path, flat_sets=3).load(context)
    assert sorted(set(data.sets.tolist())) == ["1", "2"]
    # labels are zero-padded so that they sort in order
    with pytest.warns(UserWarning, match="empty sets"):
        data = ImageSets(path=tmp_path, flat_sets=12).load()
    assert sorted(set(data.sets.tolist())) == ["01", "02"]


def test_sizes_must_agree_unless_resized(tmp_path):
    write(tmp_path / "a" / "s" / "1.pgm", 10)
    write(tmp_path / "a" / "s" / "2.pgm", 20)
    write(tmp_path / "b" / "s" / "odd.png", 30, size=(8, 8))
    with pytest.raises(DataError, match=r"odd\.png is 8x8 pixels but 2 other images are 6x4.*resize: \[6, 4\]"):
        ImageSets(path=tmp_path).load()
    data = ImageSets(path=tmp_path, resize=[3, 2]).load()
    assert data.X.shape == (3, 6)


def test_color_and_sixteen_bit(tmp_path):
    write(tmp_path / "a" / "s" / "rgb.png", 200, mode="RGB")
    write(tmp_path / "a" / "s" / "deep.png", 65535, mode="I;16")
    gray = ImageSets(path=tmp_path).load()
    assert gray.X.shape == (2, W * H)
    np.testing.assert_allclose(gray.X[0], 1.0)  # deep.png sorts first: full-scale 16-bit is 1
    color = ImageSets(path=tmp_path, grayscale=False).load()
    assert color.X.shape == (2, W * H * 3)
    np.testing.assert_allclose(color.X[1].reshape(H, W, 3)[..., 0], 200 / 255)
    np.testing.assert_allclose(color.X[1].reshape(H, W, 3)[..., 1:], 0)
    assert read_image(tmp_path / "a" / "s" / "rgb.png").shape == (H, W)


def test_nothing_readable_is_an_error(tmp_path):
    junk(tmp_path / "a" / "s" / "x.pgm", b"garbage")
    with pytest.warns(UserWarning), pytest.raises(DataError, match="no readable images"):
        ImageSets(path=tmp_path).load()
    with pytest.raises(DataError, match="no class folders"):
        ImageSets(path=tmp_path / "a" / "s").load()


def test_image_sets_parameters():
    with pytest.raises(ParameterError, match="resize"):
        ImageSets(path=Path("."), resize=[10])
    with pytest.raises(ParameterError, match="resize"):
        ImageSets(path=Path("."), resize=[0, 5])
    with pytest.raises(ParameterError, match="flat_sets"):
        ImageSets(path=Path("."), flat_sets=0)


# ------------------------------------------------------------ extended-yale-b

LIGHTS = [(-110, 15), (-70, 0), (-35, -20), (0, 0), (0, 20), (35, 15), (70, 45), (110, -20)]


def yale_name(subject: int, light) -> str:
    return f"yaleB{subject:02d}_P00A{light[0]:+04d}E{light[1]:+03d}.pgm"


@pytest.fixture
def yale(tmp_path):
    root = tmp_path / "CroppedYale"
    for subject in (1, 2, 3):
        folder = root / f"yaleB{subject:02d}"
        for k, light in enumerate(LIGHTS):
            write(folder / yale_name(subject, light), 10 * k + subject)
        write(folder / f"yaleB{subject:02d}_P00_Ambient.pgm", 5, size=(20, 20))  # other size: must not be read
        junk(folder / f"yaleB{subject:02d}_P00.info", "\n".join(yale_name(subject, li) for li in LIGHTS).encode())
        junk(folder / "WS_FTP.LOG")
    junk(root / "yaleB01" / "DEADJOE")
    # subject 2: one image flagged bad (renamed, as in the archive), one corrupt .pgm, one text file
    bad = root / "yaleB02" / yale_name(2, LIGHTS[0])
    bad.rename(bad.with_name(bad.name + ".bad"))
    junk(root / "yaleB02" / yale_name(2, LIGHTS[7]), b"P5\n6 4\n255\n" + b"\xff" * 3)
    junk(root / "yaleB03" / "readme.txt")
    junk(root / "yaleB03" / ".hidden")
    return root


def test_yale_fixture(yale):
    context = RunContext()
    with pytest.warns(UserWarning, match="extended-yale-b: used 22 images of 3 subjects in 4 sets"):
        data = ExtendedYaleB(path=yale, resize=None, sets=4).load(context)
    assert data.X.shape == (22, W * H)
    assert data.classes == ["yaleB01", "yaleB02", "yaleB03"]
    vals = values_of(data)
    # 8 directions sorted by (azimuth, elevation), cut into 4 runs of 2: light k goes to set k // 2 + 1
    for subject in (1, 3):
        for s in range(4):
            assert vals[(f"yaleB{subject:02d}", str(s + 1))] == [10 * k + subject for k in (2 * s, 2 * s + 1)]
    assert vals[("yaleB02", "1")] == [12]  # light 0 was .bad
    assert vals[("yaleB02", "4")] == [62]  # light 7 is corrupt
    (note,) = context.notes
    for part in ("ambient images (*_Ambient.pgm, no light source): 3", "images flagged bad by the database (*.bad): 1",
                 "image lists (*.info): 3", "other non-image files: 5 (DEADJOE, WS_FTP.LOG, readme.txt)",
                 "unreadable or corrupt images: 1 (yaleB02/yaleB02_P00A+110E-20.pgm)", "hidden files: 1",
                 "1: A-110E+15..A-070E+00", "4: A+070E+45..A+110E-20"):
        assert part in note


def test_yale_interleaved_grouping_deals_directions_out_in_turn(yale):
    with pytest.warns(UserWarning, match="interleaved"):
        data = ExtendedYaleB(path=yale, resize=None, sets=4, grouping="interleaved").load()
    vals = values_of(data)
    # 8 sorted directions dealt to 4 sets: light k goes to set k % 4 + 1, so every set spans the lighting range
    for s in range(4):
        assert vals[("yaleB01", str(s + 1))] == [10 * k + 1 for k in (s, s + 4)]


def test_yale_default_resize_and_sets(yale):
    with pytest.warns(UserWarning):
        data = ExtendedYaleB(path=yale, resize=[3, 2], sets=8).load()
    assert data.X.shape == (22, 6)
    assert sorted(set(data.sets.tolist())) == [str(k) for k in range(1, 9)]
    params = {p.name: p.default for p in build_registry().get("datasets", "extended-yale-b").params}
    assert params["resize"] == [42, 48] and params["sets"] == 7


def test_yale_errors(yale):
    with pytest.raises(DataError, match="only 8 distinct light direction.*sets: 8 or fewer"):
        ExtendedYaleB(path=yale, resize=None, sets=9).load()
    with pytest.raises(DataError, match="point `path:` there"):
        ExtendedYaleB(path=yale.parent).load()
    with pytest.raises(ParameterError, match="sets"):
        ExtendedYaleB(path=yale, sets=0)


def test_registered():
    registry = build_registry()
    assert registry.get("datasets", "image-sets").factory is ImageSets
    assert registry.get("datasets", "extended-yale-b").factory is ExtendedYaleB


@pytest.mark.shared_data
@pytest.mark.skipif(not YALE.exists(), reason=f"real data not present: {YALE}")
def test_real_extended_yale_b():
    context = RunContext()
    start = time.perf_counter()
    with pytest.warns(UserWarning):
        data = ExtendedYaleB(path=YALE).load(context)
    seconds = time.perf_counter() - start
    groups = data.groups()
    assert len(data.classes) == 38 and len(groups) == 38 * 7
    assert all(len({s for c, s, _ in groups if c == cls}) == 7 for cls in data.classes)
    assert data.X.shape == (2414, 42 * 48)
    (note,) = context.notes
    for part in ("ambient images (*_Ambient.pgm, no light source): 38", "images flagged bad by the database (*.bad): 18",
                 "image lists (*.info): 38", "other non-image files: 39 (DEADJOE, WS_FTP.LOG)"):
        assert part in note
    print(f"\nloaded {data.X.shape[0]} Yale images in {seconds:.2f} s; {note}")
