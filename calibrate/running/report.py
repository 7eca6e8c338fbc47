"""report.md and results.json: one writer for both routes (a run in memory, calibrate.running.outputs; a sharded run,
calibrate.running.sharded), so that a user reads the same report whichever route the data took.

Both files say the same things in the same order where both routes have them: the preamble (recipe, estimators,
enrolled classes, then the folds or the shards), the table of achieved FPR per target, the evaluators' sections, the
seconds per stage, the notes; results.json ``estimators``, ``recipe``, ``versions``, the evaluators' run-wide figures
(``verification``, ``groups``), ``partitions`` (sharded runs), ``notes``, ``timings``. A sharded run says in one line
(:data:`SHARDED_LEAVES_OUT`, also results.json ``partitions.left_out``) what it does not give.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from calibrate.contract.types import TargetResult
from calibrate.errors import CalibrateError
from calibrate.formatting import format_pct, markdown_cell, markdown_safe

if TYPE_CHECKING:
    from calibrate.contract.types import EvaluationResult
    from calibrate.files.commit import StagedOutput
    from calibrate.recipe.schema import Recipe
    from calibrate.running.result import StageTimes

#: what a sharded run does not give (docs/architecture.md, "Sharded scores"): report.md says it in one line
SHARDED_LEAVES_OUT = ("report.md's section on demographic groups and groups.png (the figures per group are in "
                      "results.json)",)
#: results.json keys the writer owns: an evaluator's run-wide figures may not take them
OWN_KEYS = ("estimators", "recipe", "versions", "partitions", "notes", "timings")


def versions(recipe: Recipe) -> dict[str, Any]:
    """The versions of calibrate and of every package whose component the recipe names."""
    from calibrate.saved.json_format import package_versions

    return package_versions((recipe.data, recipe.distance, recipe.transform, *recipe.default_transforms.values(),
                             *recipe.estimators, *recipe.evaluators, recipe.executor, recipe.normalizer))


def jsonable_recipe(recipe: Recipe) -> dict:
    return json.loads(json.dumps(recipe.raw, default=str))


def _clean(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


def results_json(results: dict[str, list[TargetResult]], recipe: dict, versions: dict, extra: dict | None = None) -> str:
    doc = {"estimators": {label: {"targets": [r.as_dict() for r in rows]} for label, rows in results.items()},
           "recipe": recipe, "versions": versions}
    if extra:
        doc.update(extra)
    return json.dumps(_clean(doc), indent=2, default=str) + "\n"


def report_md(title: str, results: dict[str, list[TargetResult]], sections: list[str], notes: list[str],
              preamble: str = "") -> str:
    labels = list(results)
    lines = [f"# {title}", ""]
    if preamble:
        lines += [preamble, ""]
    lines += ["## Achieved vs target false positive rate, and what it costs genuine users", "",
              "Achieved FPR on the evaluation (unseen) impostor attempts and its ratio to the target (1.0 is perfect, "
              "above 1 admits more intruders than promised); the FNR (genuine attempts rejected) and, in brackets, the "
              "FNR of one pooled threshold admitting the same share of these impostor attempts; FNR cost is their "
              "ratio (above 1: more genuine users turned away than one threshold for everyone would at that FPR).", ""]
    head = "| Target FPR | " + " | ".join(f"{l} FPR | {l} ratio | {l} FNR (one threshold) | {l} FNR cost"
                                         for l in map(markdown_cell, labels)) + " |"
    lines += [head, "|" + "---|" * (1 + 4 * len(labels))]
    targets = [r.target_fpr for r in results[labels[0]]] if labels else []
    for k, t in enumerate(targets):
        cells = []
        for l in labels:
            r = results[l][k]
            cost = r.fnr_cost
            cells += [format_pct(r.fpr), f"{r.ratio:.2f}",
                      format_pct(r.fnr) + ("" if r.fnr_one_threshold is None else f" ({format_pct(r.fnr_one_threshold)})"),
                      "n/a" if cost is None else f"{cost:.2f}x"]
        lines.append(f"| {100 * t:.3g}% | " + " | ".join(cells) + " |")
    lines.append("")
    for section in sections:
        lines += [section.rstrip(), ""]
    if notes:
        lines += ["## Notes", ""] + [f"- {n}" for n in notes] + [""]
    return markdown_safe("\n".join(lines))  # users' names reach it in many places: no HTML renders from any


def timings_md(timings: dict) -> str:
    """report.md's section of seconds per stage."""
    total = timings["total"]
    beside = timings.get("beside", [])
    within = timings.get("within", {})
    lines = ["## Time per stage", "", f"Wall-clock seconds of this run ({total:.2f} s until the report was written)."
             + (" Stages marked *beside* ran in a second process while the stages after them ran in this one, so the "
                "shares add up to more than 100%." if beside else "")
             + (" A part *within* a stage is counted in that stage's seconds too." if within else ""), "",
             "| Stage | Seconds | Share |", "|---|---|---|"]
    for stage, seconds in timings["seconds"].items():
        name = f"{stage} *beside*" if stage in beside else stage
        if stage in within:
            name = f"{stage} (*within* {within[stage]})"
        lines.append(f"| {name} | {seconds:.3f} | {100 * seconds / total:.0f}% |" if total > 0 else f"| {name} | {seconds:.3f} | |")
    return "\n".join(lines)


def evaluators_summary(evaluated: list[EvaluationResult]) -> dict:
    """The evaluators' run-wide figures (results.json's top-level entries besides the writer's own), each key once."""
    summary: dict = {}
    for res in evaluated:
        for key, value in res.summary.items():
            if key in summary or key in OWN_KEYS:
                raise CalibrateError(f"evaluator {res.evaluator!r} reports {key!r} for the whole run, which another "
                                     "part of results.json already holds; use only one FPR evaluator")
            summary[key] = value
    return summary


def write_reports(staged: StagedOutput, recipe: Recipe, results: dict[str, list[TargetResult]], notes: list[str],
                  times: StageTimes, *, estimators: int, classes: int, folds: list[str] | None = None,
                  shards: dict | None = None, sections: list[str] = (), summary: dict | None = None) -> None:
    """Stage report.md and results.json of a run: ``folds`` (their names) for a run in memory, ``shards`` (results.json's
    ``partitions``: shards, classes, training impostors) for a sharded one; ``sections`` and ``summary``: the
    evaluators' report sections and run-wide figures (:func:`evaluators_summary`)."""
    timings = times.as_dict()
    preamble = f"Recipe `{Path(recipe.source).name}`; {estimators} estimator(s); {classes} enrolled classes"
    partitions = None
    if shards is not None:
        preamble += (f" in {shards['shards']} shards (a partitioned run: thresholds and models per shard in "
                     "thresholds-partNNNNN.csv and models-partNNNNN.csv; the evaluation counts are summed over the "
                     f"shards).\n\nNot in a sharded run: {'; '.join(SHARDED_LEAVES_OUT)}.")
        partitions = {**shards, "left_out": list(SHARDED_LEAVES_OUT)}
    else:
        preamble += f"; {len(folds or ())} fold(s): {', '.join(folds or ())}."
    staged.write_text("report.md", report_md("Calibration report", results, [*sections, timings_md(timings)], notes,
                                             preamble))
    extra = dict(summary or {})
    if partitions is not None:
        extra["partitions"] = partitions
    extra.update({"notes": notes, "timings": timings})
    staged.write_text("results.json", results_json(results, jsonable_recipe(recipe), versions(recipe), extra))
