"""Defaults that just work: a recipe with only `version` and `data` runs end to end on every
built-in dataset, and the report says which defaults were used; `validate` rejects what `run`
would reject for the recipe's shape."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from PIL import Image

import calibrate
from calibrate.contract.base import RunContext
from calibrate.errors import RecipeError
from calibrate.contract.manager import build_registry

from calibrate_test_helpers import make_scores, invoke_cli, write_recipe, write_scores


def _images(root, classes=6, sets=3, per_set=4, seed=0):
    rng = np.random.default_rng(seed)
    for c in range(classes):
        base = rng.integers(0, 255, size=(8, 8))
        for s in range(sets):
            for i in range(per_set):
                img = np.clip(base + rng.normal(0, 20, size=(8, 8)), 0, 255).astype(np.uint8)
                path = root / f"c{c}" / f"s{s}" / f"{i}.png"
                path.parent.mkdir(parents=True, exist_ok=True)
                Image.fromarray(img).save(path)
    return root


def _yale(root, subjects=6, seed=1):
    rng = np.random.default_rng(seed)
    lights = [(a, e) for a in (-70, -35, 0, 35, 70) for e in (-20, 0, 20)]
    for subject in range(1, subjects + 1):
        base = rng.integers(0, 255, size=(12, 10))
        for a, e in lights:
            img = np.clip(base + rng.normal(0, 25, size=base.shape), 0, 255).astype(np.uint8)
            path = root / f"yaleB{subject:02d}" / f"yaleB{subject:02d}_P00A{a:+04d}E{e:+03d}.pgm"
            path.parent.mkdir(parents=True, exist_ok=True)
            Image.fromarray(img).save(path)
    return root


def data_for(name: str, tmp_path) -> dict:
    """A small `data:` section for each built-in dataset."""
    if name == "score-matrix":
        values, probes, gallery = make_scores(seed=3, n_classes=12, probes_per_class=8)
        return {"plugin": name, "path": str(write_scores(tmp_path / "s.csv", values, probes, gallery)), "kind": "similarity"}
    if name == "score-list":
        values, probes, gallery = make_scores(seed=3, n_classes=12, probes_per_class=8)
        lines = [f"{g} {p} probe{i} {float(v)!r}" for i, (p, row) in enumerate(zip(probes, values)) for g, v in zip(gallery, row)]
        (tmp_path / "scores.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
        return {"plugin": name, "path": str(tmp_path / "scores.txt")}
    if name == "score-shards":  # distances: a similarity's default transform would fit its upper bound per shard
        values, probes, gallery = make_scores(seed=3, n_classes=12, probes_per_class=8, kind="distance")
        (tmp_path / "shards").mkdir()
        for k, cols in enumerate((slice(0, 7), slice(7, 12))):
            lines = [f"{g} {p} probe{i} {float(v)!r}" for i, (p, row) in enumerate(zip(probes, values))
                     for g, v in zip(gallery[cols], row[cols])]
            (tmp_path / "shards" / f"part{k}.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
        return {"plugin": name, "path": str(tmp_path / "shards"), "kind": "distance"}
    if name == "genuine-impostor":  # two plain files of scores, one per line (pyeer's input)
        rng = np.random.default_rng(5)
        for file, mean, n in (("true.txt", 0.8, 200), ("false.txt", 0.3, 4000)):
            (tmp_path / file).write_text("\n".join(f"{v:.5f}" for v in rng.normal(mean, 0.1, n)) + "\n", encoding="utf-8")
        return {"plugin": name, "genuine": str(tmp_path / "true.txt"), "impostor": str(tmp_path / "false.txt")}
    if name == "synthetic-impostors":
        return {"plugin": name, "classes": 20, "train": 200, "test": 200}
    if name == "synthetic-groups":
        return {"plugin": name, "classes": 40}
    if name == "synthetic-patterns":
        return {"plugin": name, "classes": 12}
    if name == "npz-patterns":
        rng = np.random.default_rng(4)
        labels = np.repeat([f"c{i}" for i in range(10)], 6)
        sets = np.tile(np.repeat(["a", "b", "c"], 2), 10)
        X = rng.normal(size=(60, 5)) + np.repeat(rng.normal(size=(10, 5)) * 3, 6, axis=0)
        np.savez(tmp_path / "p.npz", X=X, labels=labels, sets=sets)
        return {"plugin": name, "path": str(tmp_path / "p.npz")}
    if name == "image-sets":
        return {"plugin": name, "path": str(_images(tmp_path / "images"))}
    if name == "extended-yale-b":
        return {"plugin": name, "path": str(_yale(tmp_path / "CroppedYale")), "resize": None, "sets": 3}
    raise AssertionError(f"no minimal data for built-in dataset {name!r}: add one here")


BUILTIN_DATASETS = [i.name for i in build_registry().all() if i.kind == "datasets" and i.plugin == "builtins"]


@pytest.mark.parametrize("name", BUILTIN_DATASETS)
def test_a_recipe_with_only_data_runs_the_default_estimator(tmp_path, name):
    recipe = write_recipe(tmp_path / "r.yaml", {"version": 1, "data": data_for(name, tmp_path)})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = calibrate.run(recipe, out=tmp_path / "out")
    assert list(result.results) == ["auto"]
    assert all(np.isfinite(r.ratio) for r in result.results["auto"])
    said = " ".join(result.notes)
    assert "no `estimators:` given: `auto` was used" in said
    assert "no `transform:` given" in said
    if name in ("image-sets", "extended-yale-b"):
        assert "no `distance:` given: `mutual-subspace` was used" in said
    if name in ("npz-patterns", "synthetic-patterns"):
        assert "no `distance:` given: `euclidean` was used" in said
    assert "## Notes" in (tmp_path / "out" / "report.md").read_text()


@pytest.mark.parametrize("kind", ["similarity", "distance"])
def test_the_default_transform_follows_the_kind_of_score(tmp_path, kind):
    values, probes, gallery = make_scores(seed=5, n_classes=10, probes_per_class=8, kind=kind)
    path = write_scores(tmp_path / "s.csv", values, probes, gallery)
    recipe = write_recipe(tmp_path / "r.yaml", {"version": 1, "data": {"plugin": "score-matrix", "path": str(path),
                                                                       "kind": kind},
                                                "estimators": [{"plugin": "generic-interp"}]})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = calibrate.run(recipe, out=tmp_path / "out")
    name = "similarity-to-distance" if kind == "similarity" else "identity"
    assert any(n.startswith(f"no `transform:` given: the data are {kind} scores, so `{name}` was used")
               for n in result.notes)
    train = result.folds[0].train
    if kind == "distance":  # identity: the training distances are the scores themselves
        np.testing.assert_array_equal(train.values[train.valid], values[train.valid])
    else:  # flip: the largest training impostor score (the transform is fitted on those) minus the score
        imp = train.impostor_mask()
        used = values[imp]
        np.testing.assert_allclose(train.values[imp], used.max() - used, rtol=0, atol=1e-12)


def test_validate_rejects_a_distance_or_rotation_for_score_data(tmp_path):
    for extra, where in (({"distance": {"plugin": "euclidean"}}, "distance"),
                         ({"evaluation": {"rotate": True}}, "evaluation.rotate")):
        recipe = write_recipe(tmp_path / "r.yaml", {"version": 1, "data": {"plugin": "synthetic-impostors"}, **extra})
        with pytest.raises(RecipeError, match=rf"^{where} in .*r\.yaml: .*(remove `distance:`|image-set datasets only)"):
            calibrate.validate(recipe)
        done = invoke_cli("validate", str(recipe))
        assert done.returncode == 2 and done.stderr.count("\n") == 1


def test_a_passed_context_keeps_the_recipes_seed(tmp_path):
    recipe = write_recipe(tmp_path / "r.yaml", {"version": 1, "seed": 17, "estimators": [{"plugin": "generic-interp"}],
                                                "data": {"plugin": "synthetic-impostors", "classes": 10, "train": 50,
                                                         "test": 50}})
    context = RunContext()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        calibrate.run(recipe, out=tmp_path / "a", context=context)
        assert context.seed == 17
        calibrate.run(recipe, out=tmp_path / "b")
    import json

    a, b = (json.loads((tmp_path / d / "results.json").read_text())["estimators"] for d in "ab")
    assert a == b
