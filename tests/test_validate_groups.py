"""`calibrate validate` checks what it can without the run: a groups file against the classes the data name (read from
the files' labels, not their scores), and a misspelt key in any section gets "did you mean" and every valid key."""

from __future__ import annotations

import pytest

from calibrate.contract.manager import build_registry
from calibrate.recipe.schema import EVALUATION_KEYS, OUTPUT_KEYS, TOP_LEVEL
from calibrate.recipe.validation import PREDICTION_KEYS, load_recipe
from calibrate_builtins.datasets import score_list, score_matrix
from calibrate_test_helpers import invoke_cli, make_scores, score_recipe, write_recipe, write_scores


def write_groups(path, classes, groups=("a", "b")):
    path.write_text("class,group\n" + "".join(f"{c},{groups[k % len(groups)]}\n" for k, c in enumerate(classes)))
    return path


def matrix_recipe(tmp_path, groups_file):
    values, probes, gallery = make_scores(seed=2, n_classes=6, probes_per_class=4)
    csv = write_scores(tmp_path / "s.csv", values, probes, gallery)
    return score_recipe(csv, tmp_path / "out", groups=str(groups_file)), gallery


def list_recipe(tmp_path, groups_file):
    values, probes, gallery = make_scores(seed=3, n_classes=6, probes_per_class=4)
    lines = [f"{g} {p} probe{i} {float(values[i, j])!r}" for i, p in enumerate(probes) for j, g in enumerate(gallery)]
    (tmp_path / "s.txt").write_text("\n".join(lines) + "\n")
    recipe = {"version": 1, "data": {"plugin": "score-list", "path": str(tmp_path / "s.txt"), "kind": "similarity",
                                     "groups": str(groups_file)},
              "transform": {"plugin": "similarity-to-distance", "upper": 1.0}, "output": str(tmp_path / "out")}
    return recipe, gallery


def synthetic_recipe(tmp_path, groups_file):
    return {"version": 1, "data": {"plugin": "synthetic-groups", "classes": 12, "groups": str(groups_file)},
            "output": str(tmp_path / "out")}, [f"c{i:02d}" for i in range(12)]


RECIPES = {"score-matrix": matrix_recipe, "score-list": list_recipe, "synthetic-groups": synthetic_recipe}


@pytest.mark.parametrize("dataset", RECIPES)
def test_validate_refuses_a_groups_file_of_another_gallery(tmp_path, dataset):
    recipe, gallery = RECIPES[dataset](tmp_path, write_groups(tmp_path / "g.csv", ["other1", "other2", "other3"]))
    done = invoke_cli("validate", write_recipe(tmp_path / "r.yaml", recipe))
    assert done.returncode == 2 and done.stdout == "", (done.stdout, done.stderr)
    (line,) = done.stderr.splitlines()
    assert line.startswith("error: data.groups in ") and "none of its 3 classes" in line
    assert repr(gallery[0]) in line  # the data's own names, to compare with


@pytest.mark.parametrize("dataset", RECIPES)
def test_validate_accepts_the_data_own_classes_and_says_what_the_run_will_note(tmp_path, dataset):
    recipe, gallery = RECIPES[dataset](tmp_path, tmp_path / "g.csv")
    write_groups(tmp_path / "g.csv", gallery[:-1] + ["stranger"])
    done = invoke_cli("validate", write_recipe(tmp_path / "r.yaml", recipe))
    assert done.returncode == 0, done.stderr
    assert f"checked against the data's {len(gallery)} enrolled classes" in done.stdout
    assert "1 of its " in done.stderr and "'stranger'" in done.stderr  # the run's notes, before the run
    assert f"1 of the {len(gallery)} enrolled classes have no group" in done.stderr


@pytest.mark.parametrize("dataset, module", [("score-matrix", score_matrix), ("score-list", score_list)])
def test_files_beyond_the_budget_are_left_to_the_run(tmp_path, monkeypatch, dataset, module):
    monkeypatch.setattr(module, "CLASS_NAMES_BYTES", 10)
    recipe, _ = RECIPES[dataset](tmp_path, write_groups(tmp_path / "g.csv", ["other1", "other2"]))
    done = invoke_cli("validate", write_recipe(tmp_path / "r.yaml", recipe))
    assert done.returncode == 0 and "checked against the data's classes by `run`, once loaded" in done.stdout
    ran = invoke_cli("run", write_recipe(tmp_path / "r.yaml", recipe), "-q")
    assert ran.returncode == 2 and "none of its 2 classes" in ran.stderr


@pytest.mark.parametrize("dataset", RECIPES)
def test_the_names_read_without_loading_are_those_the_run_loads(tmp_path, dataset):
    recipe, _ = RECIPES[dataset](tmp_path, write_groups(tmp_path / "g.csv", ["x"]))
    data = load_recipe(write_recipe(tmp_path / "r.yaml", recipe), build_registry()).data.build()
    enrolled, probes = data.class_names()
    split = data.load()
    assert sorted(enrolled) == sorted(split.train.gallery_classes.tolist())
    assert sorted(probes) == sorted(set(split.train.probe_classes.tolist()) | set(split.test.probe_classes.tolist()))


BASE = {"version": 1, "data": {"plugin": "synthetic-patterns", "classes": 10, "sets": 3, "samples": 4, "dim": 4}}
# (where, the misspelt recipe fragment, the key meant, every key that section takes)
TYPOS = [
    ("top level", {"estimtors": []}, "estimators", TOP_LEVEL),
    ("data", {"data": {**BASE["data"], "grups": "g.csv"}}, "groups", ("plugin", "name", "groups", "impostors", "classes")),
    ("data", {"data": {**BASE["data"], "impostor": "same-group"}}, "impostors", ("plugin", "groups", "impostors")),
    ("distance", {"distance": {"plugin": "euclidean", "nam": "d"}}, "name", ("plugin", "name")),
    ("transform", {"transform": {"plugin": "identity", "nmae": "t"}}, "name", ("plugin", "name")),
    ("normalizer", {"normalizer": {"plugin": "znorm", "nme": "z"}}, "name", ("plugin", "name")),
    ("estimators", {"estimators": [{"plugin": "auto", "confidnce": 0.9}]}, "confidence",
     ("plugin", "name", "confidence", "structure")),
    ("evaluation", {"evaluation": {"targts": [0.01]}}, "targets", EVALUATION_KEYS),
    ("evaluators", {"evaluation": {"evaluators": [{"plugin": "fpr", "plts": False}]}}, "plots", ("plugin", "name", "plots")),
    ("prediction", {"evaluation": {"prediction": {"budgt": 0.1}}}, "budget", PREDICTION_KEYS),
    ("output", {"output": {"dri": "x"}}, "dir", OUTPUT_KEYS),
    ("executor", {"executor": {"plugin": "processes", "worker": 2}}, "workers", ("plugin", "name", "workers")),
]


@pytest.mark.parametrize("where, fragment, meant, keys", TYPOS, ids=[t[0] + "-" + t[2] for t in TYPOS])
def test_a_misspelt_key_in_every_section_gets_did_you_mean_and_every_valid_key(tmp_path, where, fragment, meant, keys):
    done = invoke_cli("validate", write_recipe(tmp_path / "r.yaml", {**BASE, **fragment}))
    assert done.returncode == 2, done.stdout
    (line,) = done.stderr.splitlines()
    assert f"did you mean {meant!r}?" in line, line
    listed = line.split("did you mean", 1)[1]
    assert all(key in listed for key in keys), (keys, line)
