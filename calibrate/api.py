"""The library entry points: run or validate a recipe, load a saved calibration."""

from __future__ import annotations

from pathlib import Path

from .base import FittedModel, RunContext
from .manager import build_registry
from .pipeline import RunResult, run_recipe
from .recipe import Recipe, load_recipe


def validate(recipe_path: str | Path, *, out: str | Path | None = None, extra_plugins: tuple = ()) -> Recipe:
    """Check a recipe file completely (names, parameters, files) without computing anything."""
    return load_recipe(recipe_path, build_registry(extra_plugins), out=out)


def run(recipe_path: str | Path, *, out: str | Path | None = None, context: RunContext | None = None,
        extra_plugins: tuple = ()) -> RunResult:
    """Validate, then run a recipe; outputs land in ``out`` (or the recipe's ``output:``)."""
    recipe = validate(recipe_path, out=out, extra_plugins=extra_plugins)
    return run_recipe(recipe, context=context)


def load_calibration(path: str | Path, estimator: str | None = None, *, extra_plugins: tuple = ()) -> FittedModel:
    """Load one estimator's fitted model (distance units) from a run's ``calibration.json``.

    ``estimator`` is the label in the recipe (its ``name:`` or plugin name); it may be omitted
    when the file holds a single estimator. :func:`calibrate.load` gives the whole calibration,
    answering in the data's own score units.
    """
    from .calibration import _choose, _lookup, read_artifact

    path = Path(path)
    doc = read_artifact(path)
    _, entry = _choose(doc, path, estimator)
    info = _lookup(build_registry(extra_plugins), "estimators", entry.get("plugin"), path)
    return info.factory.model_class.from_state(entry["state"])
