"""The `calibrate` command line: plugins, --version, validate/run exit codes (0 ok, 2 bad input
with one line, 1 internal error with a traceback)."""

from __future__ import annotations

import json
from importlib import metadata

import pytest
from typer.testing import CliRunner

import calibrate
import calibrate.api
from calibrate.cli.commands import app
from calibrate.errors import DataError
from calibrate.contract.hookspecs import hookimpl
from calibrate.contract.manager import OWN_DISTRIBUTION, build_registry

from calibrate_test_helpers import make_scores, run_cli, score_recipe, write_recipe, write_scores

runner = CliRunner()


def _builtins():
    return [i for i in build_registry().all() if i.distribution == OWN_DISTRIBUTION]


def test_version():
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.stdout.strip() == f"calibrate {metadata.version(OWN_DISTRIBUTION)}" == f"calibrate {calibrate.__version__}"


def test_installed_script_version():
    proc = run_cli("--version")
    assert proc.returncode == 0 and proc.stdout.strip() == f"calibrate {calibrate.__version__}"


def test_plugins_lists_every_builtin_with_parameters():
    result = runner.invoke(app, ["plugins"])
    assert result.exit_code == 0, result.output
    out = result.stdout
    version = metadata.version(OWN_DISTRIBUTION)
    for info in _builtins():
        assert f"  {info.name}  [{OWN_DISTRIBUTION} {version}]" in out, f"{info.name} missing from `calibrate plugins`"
        for p in info.params:
            assert p.describe() in out
    for kind in ("datasets:", "distances:", "transforms:", "estimators:", "evaluators:"):
        assert kind in out
    assert "upper (float or null, default None)" in out


def test_plugins_json_is_complete():
    result = runner.invoke(app, ["plugins", "--json"])
    assert result.exit_code == 0
    listed = json.loads(result.stdout)
    by_key = {(c["kind"], c["name"]): c for c in listed}
    for info in _builtins():
        entry = by_key[(info.kind[:-1], info.name)]
        assert entry["distribution"] == OWN_DISTRIBUTION and entry["version"] == metadata.version(OWN_DISTRIBUTION)
        assert entry["plugin"] == "builtins" and entry["summary"]
        assert [p["name"] for p in entry["parameters"]] == [p.name for p in info.params]
        for p in entry["parameters"]:
            assert set(p) == {"name", "type", "required", "default", "doc"}
    s2d = by_key[("transform", "similarity-to-distance")]["parameters"]
    assert s2d[0] == {"name": "method", "type": "flip|neg-log", "required": False, "default": "flip",
                      "doc": "flip or neg-log."}
    npz = by_key[("dataset", "npz-patterns")]["parameters"]
    assert npz == [{"name": "path", "type": "path", "required": True, "default": None,
                    "doc": "the .npz file; relative to the recipe."}]


@pytest.fixture
def score_setup(tmp_path):
    values, probes, gallery = make_scores(seed=5, n_classes=10, probes_per_class=8)
    csv = write_scores(tmp_path / "scores.csv", values, probes, gallery)
    return tmp_path, csv


def test_run_ok_prints_ratios_and_writes_outputs(score_setup):
    tmp, csv = score_setup
    path = write_recipe(tmp / "recipe.yaml", score_recipe(csv, tmp / "out"))
    result = runner.invoke(app, ["run", str(path), "--out", str(tmp / "other"), "-q"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.strip().splitlines()
    assert lines[0].startswith("generic-interp: achieved/target FPR 5%: ")
    # the other side of every threshold: its FNR beside one pooled threshold's at the same achieved FPR
    assert lines[1].startswith("generic-interp: FNR (one pooled threshold at the same FPR) 5%: ")
    assert lines[2].startswith("class-interp: achieved/target FPR 5%: ")
    assert lines[3].startswith("class-interp: FNR (one pooled threshold at the same FPR) 5%: ")
    assert lines[-1] == f"wrote {(tmp / 'other').resolve()}"
    assert (tmp / "other" / "thresholds.csv").exists() and not (tmp / "out").exists()


class _Boom:
    """A plugin whose estimator fails: with a bug (RuntimeError) or on bad data (DataError)."""

    def __init__(self, exc):
        self.exc = exc

    @hookimpl
    def calibrate_register_estimators(self, register):
        from calibrate_builtins.estimators.interp import ClassInterp

        exc = self.exc

        class Failing(ClassInterp):
            def _fit(self, impostors, context):
                raise exc

        register("failing", Failing)


@pytest.mark.parametrize("exc, code", [(RuntimeError("a bug in a plugin"), 1),
                                       (DataError("class 'x' has too few distances; add data"), 2)])
def test_failure_during_run_exit_codes(score_setup, monkeypatch, exc, code):
    tmp, csv = score_setup
    monkeypatch.setattr(calibrate.api, "build_registry", lambda extra=(): build_registry((_Boom(exc),)))
    path = write_recipe(tmp / "recipe.yaml", score_recipe(csv, tmp / "out", estimators=({"plugin": "failing"},)))
    result = runner.invoke(app, ["run", str(path), "-q"])
    assert result.exit_code == code, result.output
    if code == 1:
        assert "internal error (please report it" in result.stderr
        assert "Traceback" in result.stderr and "a bug in a plugin" in result.stderr
    else:
        assert result.stderr.strip() == "error: class 'x' has too few distances; add data"
    assert not (tmp / "out").exists()


def test_the_real_data_tests_read_the_folder_readme_names(tmp_path):
    """CALIBRATE_SHARED_DATA, as README says, points the tests that need real data at a folder."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    tests = Path(__file__).resolve().parent
    assert "`CALIBRATE_SHARED_DATA`" in (tests.parent / "README.md").read_text(encoding="utf-8")
    done = subprocess.run([sys.executable, "-c", "import calibrate_test_helpers as h; print(h.DATA)"], cwd=tests,
                          env={**os.environ, "CALIBRATE_SHARED_DATA": str(tmp_path)}, capture_output=True, text=True)
    assert done.stdout.strip() == str(tmp_path), done.stderr


def test_validate_reports_the_recipe_summary(score_setup):
    tmp, csv = score_setup
    path = write_recipe(tmp / "recipe.yaml", score_recipe(csv, tmp / "out", targets=(0.01,)))
    result = runner.invoke(app, ["validate", str(path)])
    assert result.exit_code == 0
    assert result.stdout.strip() == f"{path}: ok (score-matrix, 2 estimator(s), targets 0.01; data files: format checked on their first lines, the rest is read by `run`)"
    assert not (tmp / "out").exists()  # validation computes nothing


def test_help_reads_as_a_unix_command_line():
    """Flags without a value placeholder (no `<bool>`), --json/--no-json, usage lines with RECIPE."""
    out = runner.invoke(app, ["run", "--help"]).stdout
    assert "run [OPTIONS] RECIPE" in out.splitlines()[0] and "<bool>" not in out and "{" not in out.splitlines()[0]
    assert "--json / --no-json" in runner.invoke(app, ["plugins", "--help"]).stdout
    assert runner.invoke(app, ["plugins", "--no-json"]).exit_code == 0


def test_the_readme_recipe_is_the_example_file():
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    readme = (root / "README.md").read_text(encoding="utf-8")
    block = readme.split("`examples/bssr1-face-c.yaml`, verbatim:\n\n```yaml\n", 1)[1].split("```\n", 1)[0]
    assert block == (root / "examples" / "bssr1-face-c.yaml").read_text(encoding="utf-8")
