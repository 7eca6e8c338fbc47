"""Recipes: everything is validated before any computation, and every mistake a user can make
ends the CLI with exit code 2 and ONE line naming the place and the fix (no traceback)."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from calibrate.cli.commands import app
from calibrate.errors import RecipeError
from calibrate.contract.manager import build_registry
from calibrate.recipe.schema import DEFAULT_TARGETS
from calibrate.recipe.validation import load_recipe, parse_recipe

from calibrate_test_helpers import make_scores, run_cli, score_recipe, write_recipe, write_scores

runner = CliRunner()


@pytest.fixture(scope="module")
def registry():
    return build_registry()


@pytest.fixture
def good(tmp_path) -> dict:
    values, probes, gallery = make_scores(seed=1)
    write_scores(tmp_path / "scores.csv", values, probes, gallery)
    recipe = score_recipe(Path("scores.csv"), Path("out"))
    recipe["data"]["path"] = "scores.csv"  # relative to the recipe file
    recipe["output"]["dir"] = "out"
    return recipe


def _edit(recipe: dict, path: str, value) -> dict:
    """Set (or, with value ..., delete) a dotted key like 'estimators.0.plugin'."""
    recipe = copy.deepcopy(recipe)
    node, *keys = [recipe, *path.split(".")]
    for k in keys[:-1]:
        node = node[int(k)] if isinstance(node, list) else node[k]
    last = keys[-1]
    if isinstance(node, list):
        node[int(last)] = value
    elif value is ...:
        del node[last]
    else:
        node[last] = value
    return recipe


def _one_line_error(result) -> str:
    assert result.exit_code == 2, (result.exit_code, result.output)
    assert result.stdout == ""
    err = result.stderr
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, f"expected one line, got:\n{err}"
    assert lines[0].startswith("error: ")
    return lines[0]


# (what, edit, expected fragments of the one-line message: the place, then the fix)
BAD = [
    ("misspelled estimator", ("estimators.0", {"plugin": "generic-interpp"}),
     ["estimators[0].plugin in ", "unknown estimator 'generic-interpp'", "did you mean 'generic-interp'?",
      "available: ", "class-interp", "generic-interp", "calibrate plugins"]),
    ("misspelled dataset", ("data.plugin", "score-matrx"),
     ["data.plugin in ", "unknown dataset 'score-matrx'", "did you mean 'score-matrix'?", "npz-patterns"]),
    ("misspelled transform", ("transform", {"plugin": "similarity-to-distanse"}),
     ["transform.plugin in ", "did you mean 'similarity-to-distance'?", "identity"]),
    ("unknown parameter", ("transform", {"plugin": "similarity-to-distance", "uper": 1.0}),
     ["transform.uper in ", "has no parameter 'uper'", "did you mean 'upper'?",
      "valid parameters: method (flip|neg-log, default 'flip'); upper (float or null, default None)"]),
    ("unknown parameter of a parameterless plugin", ("estimators.1", {"plugin": "class-interp", "k": 3}),
     ["estimators[1].k in ", "has no parameter 'k'", "valid parameters: none"]),
    ("wrong type", ("transform", {"plugin": "similarity-to-distance", "upper": "one"}),
     ["transform.upper in ", "expected a number, got 'one'; expected upper (float or null, default None)"]),
    ("wrong choice", ("data.kind", "similarities"),
     ["data.kind in ", "'similarities' is not one of 'similarity', 'distance'"]),
    ("wrong integer", ("data.seed", 1.5), ["data.seed in ", "expected an integer, got 1.5; expected seed (int, default 0)"]),
    ("value refused by the constructor", ("data.fit_fraction", 1.5),
     ["data in ", "fit_fraction must be in (0, 1), got 1.5"]),
    ("missing file", ("data.path", "no-such-scores.csv"),
     ["data.path in ", "file or folder ", "no-such-scores.csv' does not exist", "relative to the recipe file"]),
    ("missing required parameter", ("data", {"plugin": "npz-patterns"}),
     ["data in ", "dataset 'npz-patterns' needs parameter 'path'", "valid parameters: path (path, required)"]),
    ("missing plugin key", ("estimators.0", {"name": "x"}), ["estimators[0] in ", "missing `plugin:`", "class-interp"]),
    ("unknown top-level key", ("estimator", [{"plugin": "class-interp"}]),
     ["estimator in ", "unknown key 'estimator'", "did you mean 'estimators'?", "allowed: version, data"]),
    ("unknown evaluation key", ("evaluation.target", [0.01]),
     ["evaluation.target in ", "unknown key 'target'", "did you mean 'targets'?"]),
    ("unknown output key", ("output.plot", False), ["output.plot in ", "did you mean 'plots'?"]),
    ("target above 1", ("evaluation.targets", [0.01, 5]),
     ["evaluation.targets[1] in ", "target FPR 5 is not a number in (0, 1)", "write 0.001 for 0.1%"]),
    ("target zero", ("evaluation.targets", [0.0]), ["evaluation.targets[0] in ", "not a number in (0, 1)"]),
    ("target as text", ("evaluation.targets", ["0.1%"]), ["evaluation.targets[0] in ", "'0.1%' is not a number"]),
    ("target as boolean", ("evaluation.targets", [True]), ["evaluation.targets[0] in ", "True is not a number"]),
    ("empty targets", ("evaluation.targets", []), ["evaluation.targets in ", "non-empty list of FPRs"]),
    ("targets not a list", ("evaluation.targets", 0.01), ["evaluation.targets in ", "non-empty list"]),
    ("duplicate labels", ("estimators.1", {"plugin": "generic-interp"}),
     ["estimators in ", "two estimators are labelled 'generic-interp'", "distinct `name:`"]),
    ("unsupported version", ("version", 2), ["version in ", "version 2 is not supported"]),
    ("missing data", ("data", ...), ["missing `data:`", "score-matrix"]),
    ("estimators not a list", ("estimators", {"plugin": "class-interp"}), ["estimators in ", "must be a list"]),
    ("seed not an integer", ("seed", "zero"), ["seed in ", "`seed:` must be an integer"]),
]


@pytest.mark.parametrize("what, edit, expected", BAD, ids=[b[0] for b in BAD])
def test_bad_recipe_exits_2_with_one_line_naming_place_and_fix(tmp_path, good, what, edit, expected):
    path = write_recipe(tmp_path / "recipe.yaml", _edit(good, *edit))
    line = _one_line_error(runner.invoke(app, ["validate", str(path)]))
    for fragment in expected:
        assert fragment in line, f"{fragment!r} not in {line!r}"
    if "in " in expected[0]:
        assert str(path) in line  # the file is named


@pytest.mark.parametrize("what, edit, expected", [BAD[0], BAD[3], BAD[9], BAD[15]], ids=lambda x: str(x)[:20])
def test_run_validates_before_any_computation(tmp_path, good, what, edit, expected):
    path = write_recipe(tmp_path / "recipe.yaml", _edit(good, *edit))
    line = _one_line_error(runner.invoke(app, ["run", str(path), "-q"]))
    assert expected[1] in line
    assert not (tmp_path / "out").exists()
    assert not list(tmp_path.glob(".out*"))  # nothing staged either


def test_broken_yaml_names_file_and_line(tmp_path):
    path = write_recipe(tmp_path / "recipe.yaml",
                        "version: 1\ndata:\n  plugin: score-matrix\n   path: x.csv\nestimators: []\n")
    line = _one_line_error(runner.invoke(app, ["validate", str(path)]))
    assert f"{path}:4:" in line and "YAML syntax error" in line and "indentation or quoting" in line


def test_unclosed_bracket_names_its_line(tmp_path):
    path = write_recipe(tmp_path / "recipe.yaml", "version: 1\nestimators: [{plugin: class-interp}\ndata: {}\n")
    line = _one_line_error(runner.invoke(app, ["validate", str(path)]))
    assert f"{path}:3:" in line and "YAML syntax error" in line


def test_missing_recipe_file(tmp_path):
    line = _one_line_error(runner.invoke(app, ["validate", str(tmp_path / "nope.yaml")]))
    assert "nope.yaml' does not exist" in line


def test_recipe_that_is_not_a_mapping(tmp_path):
    path = write_recipe(tmp_path / "recipe.yaml", "- just\n- a list\n")
    line = _one_line_error(runner.invoke(app, ["validate", str(path)]))
    assert "a recipe is a YAML mapping" in line


def test_installed_script_gives_one_line_and_exit_2(tmp_path, good):
    path = write_recipe(tmp_path / "recipe.yaml", _edit(good, "estimators.0", {"plugin": "clas-interp"}))
    proc = run_cli("run", str(path))
    assert proc.returncode == 2
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "did you mean 'class-interp'?" in lines[0], proc.stderr


# ---- Python-level behaviour ----------------------------------------------------------------------

def test_validate_ok_path(tmp_path, good):
    path = write_recipe(tmp_path / "recipe.yaml", good)
    result = runner.invoke(app, ["validate", str(path)])
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == f"{path}: ok (score-matrix, 2 estimator(s), targets 0.05, 0.02, 0.01; data files: format checked on their first lines, the rest is read by `run`)"


def test_paths_are_relative_to_the_recipe_file(tmp_path, good, registry, monkeypatch):
    sub = tmp_path / "recipes"
    sub.mkdir()
    recipe = _edit(good, "data.path", "../scores.csv")
    path = write_recipe(sub / "recipe.yaml", recipe)
    monkeypatch.chdir("/")
    parsed = load_recipe(path, registry)
    assert parsed.data.params["path"] == (tmp_path / "scores.csv").resolve()
    assert parsed.output_dir == (sub / "out").resolve()
    assert load_recipe(path, registry, out=tmp_path / "elsewhere").output_dir == (tmp_path / "elsewhere").resolve()


def test_defaults(tmp_path, good, registry):
    recipe = {"data": {**good["data"], "kind": "distance"}}  # distances need no transform: identity
    parsed = parse_recipe(recipe, registry, base_dir=tmp_path)
    assert parsed.targets == DEFAULT_TARGETS == (0.005, 0.0025, 0.001, 0.0005)
    assert [e.info.name for e in parsed.estimators] == ["auto"]  # the default configuration (docs/estimators.md)
    assert parsed.transform.info.name == "identity"
    assert [e.info.name for e in parsed.evaluators] == ["fpr"]
    assert parsed.output_dir == (tmp_path / "results").resolve()
    assert parsed.distance is None and parsed.seed == 0


def test_one_plugin_twice_under_different_names(tmp_path, good, registry):
    recipe = _edit(good, "estimators", [{"plugin": "class-interp"}, {"plugin": "class-interp", "name": "again"},
                                        "generic-interp"])
    parsed = parse_recipe(recipe, registry, base_dir=tmp_path)
    assert [e.label for e in parsed.estimators] == ["class-interp", "again", "generic-interp"]
    assert parsed.estimators[1].info.name == "class-interp"


def test_parameters_are_coerced_to_their_annotations(tmp_path, good, registry):
    recipe = _edit(good, "transform", {"plugin": "similarity-to-distance", "upper": 1})
    parsed = parse_recipe(recipe, registry, base_dir=tmp_path)
    assert parsed.transform.params == {"upper": 1.0} and isinstance(parsed.transform.params["upper"], float)
    assert parsed.data.params["missing"] is None if "missing" in parsed.data.params else True


def test_recipe_error_is_a_calibrate_error_with_its_place(tmp_path, good, registry):
    with pytest.raises(RecipeError) as err:
        parse_recipe(_edit(good, "estimators.0", {"plugin": "ncx2grid"}), registry, source="r.yaml", base_dir=tmp_path)
    assert err.value.where == "estimators[0].plugin" and err.value.source == "r.yaml"
    assert str(err.value).startswith("estimators[0].plugin in r.yaml: unknown estimator 'ncx2grid'")


def test_written_recipe_round_trips_through_yaml(tmp_path, good, registry):
    path = write_recipe(tmp_path / "recipe.yaml", good)
    assert yaml.safe_load(path.read_text()) == good
    parsed = load_recipe(path, registry)
    assert parsed.raw == good


def test_a_recipe_naming_no_estimator_is_calibrated_by_auto_with_staggered_enrollment(tmp_path):
    raw = {"data": {"plugin": "synthetic-patterns", "classes": 6, "sets": 3, "samples": 2, "dim": 3}}
    recipe = parse_recipe(raw, build_registry(), base_dir=tmp_path)
    assert [(e.info.name, e.label, e.params) for e in recipe.estimators] == [("auto", "auto", {})]
    assert recipe.protocol.enrollment == "staggered" and recipe.protocol.rotate is False
    assert recipe.targets == DEFAULT_TARGETS == (0.005, 0.0025, 0.001, 0.0005)


def test_a_key_given_twice_is_refused_with_both_lines(tmp_path):
    path = tmp_path / "twice.yaml"
    path.write_text("data: {plugin: synthetic-patterns}\nestimators: [{plugin: generic-interp}]\n"
                    "estimators: [{plugin: class-interp}]\n")
    with pytest.raises(RecipeError, match=r"twice.yaml:3:1: key 'estimators' appears twice in one mapping "
                                          r"\(first on line 2\); keep one of them"):
        load_recipe(path, build_registry())


def test_a_target_listed_twice_is_refused(tmp_path):
    raw = {"data": {"plugin": "synthetic-patterns"}, "evaluation": {"targets": [0.001, 0.005, 0.001]}}
    with pytest.raises(RecipeError, match=r"evaluation.targets in .*0.001 is listed twice"):
        parse_recipe(raw, build_registry(), base_dir=tmp_path)


@pytest.mark.parametrize("transform, kind, expected", [
    ({"plugin": "neg-log-complement"}, "similarity", r"transform.plugin in .*'neg-log-complement' takes distance"),
    ({"plugin": "similarity-to-distance"}, "distance", r"transform.plugin in .*distance scores but .* takes similarity.*identity"),
])
def test_validation_catches_a_transform_that_cannot_take_the_data(tmp_path, transform, kind, expected):
    scores = write_scores(tmp_path / "s.csv", *make_scores(seed=3, kind=kind))
    raw = {"data": {"plugin": "score-matrix", "path": str(scores), "kind": kind}}
    if transform:
        raw["transform"] = transform
    with pytest.raises(RecipeError, match=expected):
        parse_recipe(raw, build_registry(), base_dir=tmp_path)
