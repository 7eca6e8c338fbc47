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
