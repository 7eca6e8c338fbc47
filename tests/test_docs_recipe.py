"""docs/plugins.md's complete recipe, written out from the page as it stands (issue 21, item 3): the
plugin package, its kit test and the recipe are the page's code blocks, each starting with a comment
naming its file. The component must pass the kit, the recipe must run, and the saved calibration must
decide scores as the run did."""

from __future__ import annotations

import csv
import importlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from calibrate.testing import checks_for

ROOT = Path(__file__).resolve().parents[1]
SECTION = "## A plugin from start to finish"


def _files_of_the_section() -> dict[str, str]:
    """File name -> text, for each code block of the section whose first line is a comment naming a file."""
    text = (ROOT / "docs" / "plugins.md").read_text(encoding="utf-8")
    section = text[text.index(SECTION):]
    section = section[:section.find("\n## ", 1)] if "\n## " in section[1:] else section
    files = {}
    for body in re.findall(r"```(?:python|yaml)\n(.*?)```", section, flags=re.S):
        first, _, rest = body.partition("\n")
        name = re.fullmatch(r"# (\S+\.(?:py|yaml))", first.strip())
        if name:
            files[name.group(1)] = body if name.group(1).endswith(".yaml") else rest
    return files


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """The section's files under a fresh folder, with the example's score lists where the recipe looks."""
    root = tmp_path_factory.mktemp("docs-recipe")
    for name, body in _files_of_the_section().items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(body, encoding="utf-8")
    (root / "examples" / "bob-scores").mkdir(parents=True)
    for name in ("scores-dev", "scores-eval"):
        shutil.copy(ROOT / "examples" / "bob-scores" / name, root / "examples" / "bob-scores" / name)
    sys.path.insert(0, str(root))
    try:
        yield root, importlib.import_module("my_plugin")
    finally:
        sys.path.remove(str(root))
        for module in [m for m in sys.modules if m == "my_plugin" or m.startswith("my_plugin.")]:
            del sys.modules[module]


def test_the_section_gives_the_package_its_test_and_the_recipe():
    assert set(_files_of_the_section()) == {"my_plugin/top_gap.py", "my_plugin/__init__.py", "tests/test_top_gap.py",
                                            "my-recipe.yaml"}


def test_the_component_passes_the_kit_with_the_test_the_page_gives(written):
    root, _ = written
    env = {**os.environ, "PYTHONPATH": str(root)}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_top_gap.py"],
                          cwd=root, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:]
    n = 2 * len(checks_for("transforms"))
    assert f"{n} passed" in proc.stdout.splitlines()[-1], proc.stdout[-500:]


def test_the_recipe_runs_and_its_calibration_decides_as_the_run_did(written):
    import calibrate

    root, plugin = written
    result = calibrate.run(root / "my-recipe.yaml", extra_plugins=(plugin,))
    out = root / "results" / "my-recipe"
    assert Path(result.out_dir).resolve() == out.resolve()
    results = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert set(results["estimators"]) == {"auto", "own-quantile", "auto-c90"}
    rows = list(csv.DictReader((out / "thresholds.csv").open(encoding="utf-8")))
    assert {r["accept_if"] for r in rows} == {"score >= t"}  # back in the matcher's units, through _inverse

    cal = calibrate.load(out / "calibration.json", "own-quantile", extra_plugins=(plugin,))
    dev = [line.split() for line in (root / "examples" / "bob-scores" / "scores-dev").read_text().splitlines()]
    top = max(float(s) for c, r, _, s in dev if c != r and float(s) != -1)
    assert cal.transform.fitted_state() == {"top": top}  # learned from the training impostors, saved, loaded
    for row in (r for r in rows if r["estimator"] == "own-quantile" and r["target_fpr"] == "0.01"):
        t = cal.threshold(row["class"], 0.01)
        assert t == float(row["score_threshold"]), row  # the saved calibration gives the run's threshold
        decided = cal.accept([row["class"]] * 2, np.array([t, np.nextafter(t, -np.inf)]), 0.01)
        assert decided.tolist() == [True, False]
