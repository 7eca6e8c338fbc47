"""The library entry points: run or validate a recipe, load a saved calibration."""

from __future__ import annotations

import json
from pathlib import Path

from .base import FittedModel, RunContext
from .errors import CalibrateError
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
    """Load one estimator's fitted model from a run's ``calibration.json``.

    ``estimator`` is the label in the recipe (its ``name:`` or plugin name); it may be omitted
    when the file holds a single estimator.
    """
    path = Path(path)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CalibrateError(f"calibration file {str(path)!r} does not exist; run a recipe first") from None
    except (OSError, ValueError) as exc:
        raise CalibrateError(f"{path}: not a readable calibration file ({exc})") from None
    if not isinstance(doc, dict) or doc.get("format") != "calibrate-calibration":
        raise CalibrateError(f"{path}: not a calibrate calibration file (no 'format: calibrate-calibration')")
    entries = doc.get("estimators", {})
    if estimator is None:
        if len(entries) != 1:
            raise CalibrateError(f"{path} holds estimators {', '.join(entries)}; name the one to load")
        estimator = next(iter(entries))
    if estimator not in entries:
        raise CalibrateError(f"{path} has no estimator {estimator!r}; it holds: {', '.join(entries)}")
    entry = entries[estimator]
    info = build_registry(extra_plugins).get("estimators", entry["plugin"], source=str(path))
    return info.factory.model_class.from_state(entry["state"])
