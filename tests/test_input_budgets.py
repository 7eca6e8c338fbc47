"""Issue 19's audit, input readers (group C): budgets checked from headers before anything is
decoded or loaded, the loader's label rules in every reader, the strict number grammar on the
command line, and one line for every refusal."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image
from typer.testing import CliRunner

from calibrate.cli import app
from calibrate.errors import DataError, ParameterError
from calibrate_builtins.datasets import image_sets
from calibrate_builtins.datasets.image_sets import MAX_IMAGE_VALUES, ImageSets

from calibrate_test_helpers import write_recipe

runner = CliRunner()


def _tree(root, sizes, mode="L"):
    """root/c<k>/s<j>/i.png, one image per set, of the given (width, height) sizes in turn."""
    paths = []
    for k, size in enumerate(sizes):
        path = root / f"c{k // 2}" / f"s{k % 2}" / "i.png"
        path.parent.mkdir(parents=True)
        Image.new(mode, size).save(path)
        paths.append(path)
    return paths


def _no_decoding(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("an image was decoded before its header was checked")
    monkeypatch.setattr(image_sets, "read_image", refuse)


def test_a_huge_image_among_small_ones_is_refused_from_its_header(tmp_path, monkeypatch):
    # audit M2: a 10 KB PNG of 9400 x 9400 pixels cost 1.5 GB before the size-mismatch error
    _tree(tmp_path, [(8, 8), (8, 8), (8, 8), (9400, 9400)], mode="1")
    _no_decoding(monkeypatch)
    with pytest.raises(DataError, match=r"c1/s1/i.png is 9400x9400 pixels but 3 other images are 8x8"):
        ImageSets(path=tmp_path).load()


def test_images_past_the_per_image_budget_are_refused_before_decoding(tmp_path, monkeypatch):
    # audit M2: four such images used 10.8 GB and exited 0
    _tree(tmp_path, [(5000, 5000)] * 4, mode="1")
    _no_decoding(monkeypatch)
    with pytest.raises(DataError, match=rf"25,000,000 values per image \(at most {MAX_IMAGE_VALUES:,}\).*resize"):
        ImageSets(path=tmp_path).load()


def test_images_past_the_memory_budget_are_refused_before_decoding(tmp_path, monkeypatch):
    _tree(tmp_path, [(8, 8)] * 4)
    _no_decoding(monkeypatch)
    monkeypatch.setattr(image_sets, "memory_budget", lambda: 4 * 64 * 8 - 1)  # one byte short of 4 8x8 images
    with pytest.raises(DataError, match=r"4 images of 8x8 pixels make .* GiB of values, more than"):
        ImageSets(path=tmp_path).load()


def test_a_resize_past_the_budget_is_refused_when_the_recipe_is_checked(tmp_path):
    # audit M4: resize: [9000, 9000] used 11.3 GB, then "out of memory"
    with pytest.raises(ParameterError, match="81,000,000 values"):
        ImageSets(path=tmp_path, resize=[9000, 9000])
    with pytest.raises(ParameterError, match="50,331,648 values"):  # RGB: three values per pixel
        ImageSets(path=tmp_path, resize=[4096, 4096], grayscale=False)
    ImageSets(path=tmp_path, resize=[4096, 4096])  # grayscale: exactly the budget
    recipe = write_recipe(tmp_path / "r.yaml", {"version": 1, "data": {"plugin": "image-sets", "path": str(tmp_path),
                                                                       "resize": [9000, 9000]}})
    result = runner.invoke(app, ["validate", str(recipe)])
    assert result.exit_code == 2 and "81,000,000 values" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def _npz(path, **arrays):
    np.savez(path, **arrays)
    return path


def _classes(n=4, sets=2, per=2):
    labels = np.repeat([f"c{k}" for k in range(n)], sets * per)
    return labels, np.tile(np.repeat([f"s{j}" for j in range(sets)], per), n)


def test_an_npz_that_expands_past_the_budget_is_refused_before_it_is_read(tmp_path, monkeypatch):
    # audit M3: 1.5 MB of compressed zeros expanded to 7.7 GB before "1 class"
    from calibrate import safefiles
    from calibrate_builtins.datasets import npz_patterns
    from calibrate_builtins.datasets.npz_patterns import NpzPatterns

    labels, sets = _classes()
    path = tmp_path / "p.npz"
    np.savez_compressed(path, X=np.zeros((labels.size, 1000)), labels=labels, sets=sets)
    monkeypatch.setattr(npz_patterns, "memory_budget", lambda: labels.size * 1000 * 8 - 1)
    with pytest.raises(DataError, match=r"X is 16 x 1,000 values .* more than this machine's budget"):
        NpzPatterns(path=path).load()
    # the generic reader: the members' uncompressed sizes add up against the budget
    monkeypatch.setattr(safefiles, "memory_budget", lambda: 1000)
    with pytest.raises(DataError, match=r"array 'X' makes the arrays read .* once uncompressed"):
        safefiles.npz_arrays(path, "the file", "save less")


def test_npz_labels_and_sets_are_checked_before_x_is_read(tmp_path, monkeypatch):
    # audit M5: one class (or no second set) was found only after X was decompressed whole
    from calibrate_builtins.datasets import npz_patterns
    from calibrate_builtins.datasets.npz_patterns import NpzPatterns

    real = npz_patterns.npz_arrays

    def no_x(*args, names=None, **kwargs):
        assert names is not None and "X" not in names, "X was read before the labels were checked"
        return real(*args, names=names, **kwargs)

    monkeypatch.setattr(npz_patterns, "npz_arrays", no_x)
    one = _npz(tmp_path / "one.npz", X=np.ones((4, 2)), labels=np.array(["a"] * 4), sets=np.array(list("0101")))
    with pytest.raises(DataError, match="labels name 1 class; verification needs at least 2"):
        NpzPatterns(path=one).load()
    single = _npz(tmp_path / "single.npz", X=np.ones((4, 2)), labels=np.array(list("aabb")), sets=np.array(list("0000")))
    with pytest.raises(DataError, match="every class has a single set"):
        NpzPatterns(path=single).load()


@pytest.mark.parametrize("x, words", [
    (np.zeros(16, dtype=[("a", "f8"), ("b", "f8")]), "holds [('a', '<f8'), ('b', '<f8')] values"),  # audit T12
    (np.ones((16, 3)) + 1j, "holds complex128 values"),  # audit S6
    (np.full((16, 3), "0.5"), "holds <U3 values"),  # audit S6
])
def test_npz_x_that_is_not_real_numbers_is_one_line(tmp_path, x, words):
    labels, sets = _classes()
    path = _npz(tmp_path / "p.npz", X=x, labels=labels, sets=sets)
    recipe = write_recipe(tmp_path / "r.yaml", {"version": 1, "data": {"plugin": "npz-patterns", "path": str(path)},
                                                "distance": {"plugin": "euclidean"},
                                                "estimators": [{"plugin": "generic-interp"}]})
    for command in (["validate", str(recipe)], ["run", str(recipe), "-q", "--out", str(tmp_path / "out")]):
        result = runner.invoke(app, command)
        assert result.exit_code == 2 and words in result.stderr, result.stderr
        assert len(result.stderr.strip().splitlines()) == 1
