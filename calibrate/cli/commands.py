"""The ``calibrate`` command line (typer).

Exit codes: 0 success; 2 bad input (one message, no traceback); 1 internal error.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Optional

import typer

from calibrate.formatting import format_count, shown
from calibrate.version import __version__

from calibrate.cli.app import EXTRAPOLATION_HELP, QUIET_HELP, _fail, app, command_progress  # noqa: F401 (_environment_message's users import it from here too)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"calibrate {__version__}")
        raise typer.Exit(0)


@app.callback()
def _main(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                       help="Print the version and exit.")) -> None:
    """Set verification thresholds by target false positive rate."""
    from calibrate.cli.app import install_warning_notes

    install_warning_notes()


@app.command()
def run(recipe: Path = typer.Argument(..., metavar="RECIPE", help="Recipe YAML file."),
        out: Optional[Path] = typer.Option(None, "--out", help="Output folder (overrides the recipe's `output:`)."),
        quiet: bool = typer.Option(False, "--quiet/--no-quiet", "-q", help=QUIET_HELP)) -> None:
    """Run a recipe and write thresholds.csv, results.json and report.md."""
    from calibrate.api import read_recipe
    from calibrate.running.pipeline import run_recipe

    try:
        parsed = read_recipe(recipe, out=out)  # a groups file is checked against the classes once they are loaded
        with warnings.catch_warnings(), command_progress(quiet, announce=True) as context:
            warnings.simplefilter("ignore")  # notes are collected into report.md and printed below
            result = run_recipe(parsed, context=context)  # which sets the context's seed to the recipe's
    except Exception as exc:  # noqa: BLE001 - the CLI decides between exit code 1 and 2
        _fail(exc, recipe)
        return
    for note in result.notes:
        typer.echo(f"note: {' '.join(note.split())}", err=True)  # one line each, whatever a plugin wrote
    for label, rows in result.results.items():
        ratios = ", ".join(f"{100 * r.target_fpr:g}%: {r.ratio:.2f}" for r in rows)
        typer.echo(f"{label}: achieved/target FPR {ratios}")
        costs = [r for r in rows if r.fnr is not None and r.fnr_one_threshold is not None]
        if costs:
            said = ", ".join(f"{100 * r.target_fpr:g}%: {100 * r.fnr:.3g}% ({100 * r.fnr_one_threshold:.3g}%)"
                             for r in costs)
            typer.echo(f"{label}: FNR (one pooled threshold at the same FPR) {said}")
    typer.echo(f"wrote {result.out_dir}")


@app.command()
def validate(recipe: Path = typer.Argument(..., metavar="RECIPE", help="Recipe YAML file.")) -> None:
    """Check a recipe (plugin names, parameters, files) without running it."""
    from calibrate.api import read_recipe, validate_groups

    try:
        parsed, checked = validate_groups(read_recipe(recipe))
    except Exception as exc:  # noqa: BLE001
        _fail(exc, recipe)
        return
    groups = ""
    if parsed.groups is not None:
        names = parsed.groups.names
        groups = (f"; groups {shown(names, quote=False)} for "
                  f"{len(parsed.groups.classes):,} classes from {parsed.groups.source}, "
                  + (f"checked against the data's {checked:,} enrolled classes" if checked is not None else
                     "checked against the data's classes by `run`, once loaded"))
    typer.echo(f"{recipe}: ok ({parsed.data.info.name}, {len(parsed.estimators)} estimator(s), "
               f"targets {', '.join(f'{t:g}' for t in parsed.targets)}{groups}; data files: format checked on their "
               "first lines, the rest is read by `run`)")


@app.command()
def threshold(artifact: Path = typer.Argument(..., metavar="ARTIFACT", help="A saved calibration (calibration.json)."),
              cls: Optional[str] = typer.Option(None, "--class", help="The enrolled class (with --fpr)."),
              fpr: Optional[str] = typer.Option(None, "--fpr", metavar="NUMBER", help="Target false positive rate, "
                                                "e.g. 0.001."),
              fnr: Optional[str] = typer.Option(None, "--fnr", metavar="NUMBER", help="Instead of --fpr: the one "
                                                "threshold for every class saved at this target false negative rate "
                                                "(`calibrate fit --fnr`)."),
              estimator: Optional[str] = typer.Option(None, "--estimator", help="Which estimator, when the file holds several."),
              allow_extrapolation: bool = typer.Option(False, "--allow-extrapolation/--no-allow-extrapolation",
                                                       help=EXTRAPOLATION_HELP),
              as_json: bool = typer.Option(False, "--json/--no-json", help="Machine-readable output."),
              quiet: bool = typer.Option(False, "--quiet/--no-quiet", "-q", help=QUIET_HELP)) -> None:
    """Print a class's threshold in the data's own score units, with its training support (or with --fnr the one
    threshold for every class a fit saved at that FNR)."""
    from calibrate.api import load
    from calibrate.saved.calibration import extrapolation_message
    from calibrate.cli.checks import check_reach, cli_number

    if fnr is not None or fpr is None:
        _threshold_at_fnr(artifact, fnr, fpr, estimator, as_json, quiet)
        return
    try:
        if cls is None:
            from calibrate.errors import ParameterError

            raise ParameterError("--fpr needs --class: the enrolled class whose threshold to print")
        fpr = cli_number(fpr, "--fpr")
        with command_progress(quiet) as context, context.stage(f"loading {artifact}", None, "classes") as task:
            cal = load(artifact, estimator)
            task.advance(len(cal))
        support = cal.training_support(fpr) if 0 < fpr < 1 else None
        if support is not None:
            check_reach([fpr], cal.training_impostors, "answer", allow_extrapolation)
        normalised = getattr(cal, "normalization", None)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # said below, in the command line's words
            t = cal.threshold(cls, fpr) if normalised is None else cal.normalised_threshold(cls, fpr)
            # an enrolled-side-only normaliser (znorm): z is the score through the class's saved statistics
            score = None if normalised is None or normalised.reads_probe else _score_threshold(cal, cls, fpr)
        tau = cal.distance_threshold(cls, fpr)
        predicted = _predicted(cal, cls, fpr)
        group = (getattr(cal, "groups", None) or {}).get(cls)  # a calibration fitted group by group: the class's
    except Exception as exc:  # noqa: BLE001
        _fail(exc, artifact)
        return
    if normalised is not None:
        _print_normalised(cal, cls, fpr, t, score, tau, support, predicted, as_json)
        return
    if support is not None and support < 1:
        typer.echo(f"note: {extrapolation_message(fpr, cal.training_impostors)}", err=True)
    if as_json:
        doc = {"class": cls, "target_fpr": fpr, "score_threshold": t, "accept_if": cal.accept_if,
               "distance_threshold": tau, "estimator": cal.label, "training_impostors": cal.training_impostors,
               "training_support": support}
        if group is not None:
            doc["group"] = group
        if predicted:
            doc.update(predicted)
        typer.echo(json.dumps(doc))
    else:
        op = ">=" if cal.kind == "similarity" else "<="
        of_group = "" if group is None else f", group {group}, calibrated against same-group impostors"
        typer.echo(f"{cls} at FPR {fpr:g} ({cal.label}{of_group}): accept if score {op} {t!r}")
        if support is not None:
            typer.echo(f"training support: {format_count(support)} of the {cal.training_impostors:,} training impostor "
                       "distances lie below an on-target threshold")
        _echo_predicted(predicted)


def _threshold_at_fnr(artifact: Path, fnr: str | None, fpr: str | None, estimator: str | None, as_json: bool,
                      quiet: bool) -> None:
    """``calibrate threshold --fnr``: the one threshold for every class that `calibrate fit --fnr` saved."""
    from calibrate.api import load
    from calibrate.cli.checks import cli_number
    from calibrate.errors import ParameterError

    try:
        if (fnr is None) == (fpr is None):
            raise ParameterError("give --fpr (with --class) for a class's threshold, or --fnr for the one threshold for "
                                 "every class saved at that false negative rate; one of the two")
        target = cli_number(fnr, "--fnr")
        with command_progress(quiet) as context, context.stage(f"loading {artifact}", None, "classes") as task:
            cal = load(artifact, estimator)
            task.advance(len(cal))
        if not hasattr(cal, "fnr_threshold"):
            raise ParameterError(f"{artifact}: a sharded run's calibration holds no FNR threshold; fit one with "
                                 "`calibrate fit ... --fnr`")
        entry = cal.fnr_threshold(target)
    except Exception as exc:  # noqa: BLE001
        _fail(exc, artifact)
        return
    if as_json:
        typer.echo(json.dumps({"target_fnr": target, "score_threshold": entry["score_threshold"],
                               "accept_if": cal.accept_if, "one_threshold_for_every_class": True,
                               "training_genuine": entry["genuine"], "estimator": cal.label}))
    else:
        op = ">=" if cal.kind == "similarity" else "<="
        typer.echo(f"every class at FNR {target:g}: accept if score {op} {entry['score_threshold']!r} (one threshold for "
                   f"every class, set on the {entry['genuine']:,} training genuine comparisons)")


def _score_threshold(cal, cls: str, fpr: float) -> float | None:
    """A normalised calibration's threshold in score units, or None where its transform has no inverse (z only)."""
    from calibrate.errors import CalibrationError

    try:
        return cal.threshold(cls, fpr)
    except CalibrationError:
        return None


def _echo_predicted(predicted: dict | None) -> None:
    """``calibrate threshold``'s line on the predicted interval (or why there is none)."""
    if predicted and predicted.get("no_prediction"):
        typer.echo(f"predicted FPR: none ({predicted['no_prediction']})")
    elif predicted:
        level = 100 * predicted["predicted_level"]
        typer.echo(f"predicted long-run FPR ({level:.0f}%, from training data): gallery "
                   f"{predicted['gallery_long_run_fpr_low']:.3g}-{predicted['gallery_long_run_fpr_high']:.3g}"
                   + (f", this class {predicted['class_long_run_fpr_low']:.3g}-{predicted['class_long_run_fpr_high']:.3g}"
                      if "class_long_run_fpr_low" in predicted else ""))


def _print_normalised(cal, cls: str, fpr: float, z: float, score: float | None, tau: float, support, predicted,
                      as_json: bool) -> None:
    """``calibrate threshold`` for a normalised calibration: its threshold on the normalised score z, and in score
    units too (``score``) when the normaliser reads the enrolled side only."""
    name = cal.normalization.plugin
    if as_json:
        doc = {"class": cls, "target_fpr": fpr, "normalised_threshold": z, "accept_if": f"{name}-normalised z <= t",
               "score_threshold": score, "score_accept_if": None if score is None else cal.accept_if,
               "distance_threshold": tau, "normalizer": name, "estimator": cal.label,
               "training_impostors": cal.training_impostors, "training_support": support, **(predicted or {})}
        typer.echo(json.dumps(doc))
        return
    if score is not None:
        op = ">=" if cal.kind == "similarity" else "<="
        typer.echo(f"{cls} at FPR {fpr:g} ({cal.label}): accept if score {op} {score!r} (the {name}-normalised score "
                   f"z <= {z!r}; {name} reads the class's saved cohort statistics only, so no probe cohort is needed)")
    else:
        typer.echo(f"{cls} at FPR {fpr:g} ({cal.label}): accept if the {name}-normalised score z <= {z!r} (a decision "
                   "needs the probe's cohort scores: calibrate accept --cohort)")
    if support is not None:
        typer.echo(f"training support: {format_count(support)} of the {cal.training_impostors:,} training impostor "
                   "distances lie below an on-target threshold")
    _echo_predicted(predicted)


def _predicted(cal, cls: str, fpr: float) -> dict | None:
    """The saved predicted interval at this target (gallery, and the class's own when kept), or None."""
    from calibrate.errors import CalibrationError

    if not cal.prediction:
        return None
    try:
        low, high = cal.predicted_fpr(fpr)
    except CalibrationError as exc:  # predicted at other targets only, or refused there: say so, not nothing
        return {"predicted": None, "no_prediction": str(exc)}
    out = {"gallery_long_run_fpr_low": low, "gallery_long_run_fpr_high": high, "predicted_level": cal.prediction["level"]}
    try:
        out["class_long_run_fpr_low"], out["class_long_run_fpr_high"] = cal.predicted_fpr(fpr, cls=cls)
    except CalibrationError:
        pass
    return out


@app.command()
def accept(artifact: Path = typer.Argument(..., metavar="ARTIFACT", help="A saved calibration (a calibration.json, or a run's folder)."),
           scores: Path = typer.Argument(..., metavar="SCORES", help="Attempts to decide, as a score list (bob 4/5-column, or CSV with a header)."),
           fpr: str = typer.Option(..., "--fpr", metavar="NUMBER", help="Target false positive rate, e.g. 0.001."),
           out: str = typer.Option(..., "--out", help="Where to write the decisions (CSV); - for standard output "
                                    "(the summary then goes to standard error)."),
           estimator: Optional[str] = typer.Option(None, "--estimator", help="Which estimator, when the file holds several."),
           unknown: str = typer.Option("error", "--unknown", help="Attempts claiming a class the calibration does not "
                                       "hold: error (stop, naming it), reject (decide 0) or skip (leave out); counted."),
           fmt: str = typer.Option("auto", "--format", help="auto, 4-column, 5-column or csv."),
           claimed_column: Optional[str] = typer.Option(None, "--claimed-column", help="CSV: header of the claimed class."),
           real_column: Optional[str] = typer.Option(None, "--real-column", help="CSV: header of the probe's real class."),
           score_column: Optional[str] = typer.Option(None, "--score-column", help="CSV: header of the score."),
           missing: Optional[str] = typer.Option(None, "--missing", metavar="NUMBER", help="Marker of failed comparisons: not decided, counted."),
           cohort: Optional[Path] = typer.Option(None, "--cohort", help="A normalised calibration: the probes' cohort "
                                                 "scores, bob's T-norm file (T-models x probes), in a score list's format."),
           groups: Optional[Path] = typer.Option(None, "--groups", metavar="FILE", help="Groups of the classes: a CSV with "
                                                 "a header `class,group`; adds a `group` column (the claimed class's) and "
                                                 "a summary line per group."),
           allow_extrapolation: bool = typer.Option(False, "--allow-extrapolation/--no-allow-extrapolation",
                                                    help=EXTRAPOLATION_HELP),
           quiet: bool = typer.Option(False, "--quiet/--no-quiet", "-q", help=QUIET_HELP)) -> None:
    """Decide every attempt of a score list with a saved calibration; write one decision per line
    (claimed, real, probe, score, threshold, accept; with --groups, the claimed class's group; a label beginning
    with =, +, -, @, a tab or a carriage return gets a leading ' so that no spreadsheet runs it as a formula).
    A normalised calibration's threshold is on the normalised score z, and its decisions need the probes' cohort
    scores (--cohort). --out may not be one of the command's inputs (nor a file of the run folder it reads)."""

    from calibrate.api import load
    from calibrate.saved.assess import absent_note
    from calibrate.cli.checks import (_check_groups, check_ids, check_options, check_reach, check_saved_reach, check_scale,
                                      cli_number)
    from calibrate.cli.inputs import command_inputs, read_attempts, read_groups_option
    from calibrate.errors import CalibrateError
    from calibrate.contract.types import factorise
    from calibrate.files.user_output import check_target, write_user_file

    try:
        fpr, missing = cli_number(fpr, "--fpr"), cli_number(missing, "--missing")
        check_options(fmt)
        inputs = command_inputs(artifact, {"SCORES": scores, "--cohort": cohort, "--groups": groups})
        check_target(out, inputs, "--out")  # before any work: never replace an input (S9)
        if unknown not in ("error", "reject", "skip"):
            raise CalibrateError(f"--unknown {unknown!r}: give error, reject or skip")
        labels = read_groups_option(groups)
        with command_progress(quiet) as context:
            with context.stage(f"loading {artifact}", None, "classes") as task:
                cal = load(artifact, estimator)
                task.advance(len(cal))
            if 0 < fpr < 1:
                check_reach([fpr], cal.training_impostors, "decide", allow_extrapolation)
            check_saved_reach(cal, [fpr])
            claimed, real, values, failed, probe = read_attempts(scores, fmt, claimed_column, real_column,
                                                                 score_column, missing, probes=True, context=context)
            # decisions need no real ids, so ids that never coincide are a note here: the tallies below would be wrong
            group_notes = (check_ids(claimed, real, values, cal.kind, scores, refuse=False)
                           + _check_groups(labels, claimed, real))
            with context.stage(f"deciding {values.size:,} attempts", None, "attempts") as task:
                decided, known, rows, table = _decisions(cal, scores, claimed, real, values, probe, fpr, unknown,
                                                         cohort, missing, labels, context.advance)
                task.advance(values.size)
            scale_note = check_scale(cal, values[known], scores)
            with context.stage(f"writing {rows.size:,} decisions", rows.size, "decisions"):
                written = write_user_file(out, table, inputs, "--out")
    except Exception as exc:  # noqa: BLE001
        _fail(exc, scores)
        return
    for note in group_notes + ([scale_note] if scale_note else []):
        typer.echo(f"note: {note}", err=True)
    genuine = (claimed == real)[rows]
    summary = _accept_summary(decided[rows], genuine, int((~known).sum()), unknown, failed, missing)
    normalised = getattr(cal, "normalization", None)
    rule = cal.accept_if if normalised is None else f"{normalised.plugin}-normalised z <= t"
    typer.echo(f"{summary} (accept if {rule}, FPR target {fpr:g}); wrote {written}", err=str(out) == "-")
    if labels is not None:
        claimed_groups = labels.codes(claimed[rows])
        probe_groups = labels.codes(real[rows])
        from calibrate.contract.types import UNLABELLED

        for k, name in enumerate(list(labels.names) + [UNLABELLED]):
            mine = claimed_groups == k
            if not mine.any():
                continue
            same = mine & ~genuine & (probe_groups == k)
            said = _accept_summary(decided[rows][mine], genuine[mine], 0, unknown, 0, None)
            if k < len(labels.names):
                said += (f"; same-group impostor attempts {int(same.sum())}, false accepts "
                         f"{int(decided[rows][same].sum())}")
            typer.echo(f"group {name}: {said}", err=str(out) == "-")
    absent = absent_note(cal, factorise(claimed[known])[0], str(scores))
    if absent:
        typer.echo(f"note: {absent}", err=True)


def _decisions(cal, scores: Path, claimed, real, values, probe, fpr: float, unknown: str, cohort: Path | None,
               missing: float | None, labels=None, advance=None):
    """(decision per attempt, whether its class is calibrated, the rows written, the CSV's bytes); attempts
    claiming an unknown class stop it (``unknown`` error), are decided 0 (reject) or left out (skip); with
    ``labels`` (calibrate.contract.types.GroupLabels), a last column with the claimed class's group; labels written
    through calibrate.files.user_output.csv_text (no cell a spreadsheet reads as a formula); the CSV's bytes come in
    blocks as they are written (:func:`_decision_lines`), each calling ``advance`` with its decisions."""
    import numpy as np

    from calibrate.saved.assess import known_classes
    from calibrate.cli.checks import check_known
    from calibrate.errors import CalibrateError

    known = known_classes(cal, claimed)
    check_known(cal, claimed, known, scores)  # none held: another gallery's calibration, whatever --unknown says
    n_unknown = int((~known).sum())
    if n_unknown and unknown == "error":
        first = claimed[np.flatnonzero(~known)[0]]
        raise CalibrateError(f"{scores}: {n_unknown} attempt(s) claim classes the calibration does not hold (e.g. "
                             f"{str(first)[:60]!r}); give --unknown reject (decide them 0) or --unknown skip "
                             "(leave them out), or enroll the class")
    decided, thresholds = _decide(cal, claimed, real, values, probe, known, fpr, cohort, missing)
    rows = np.flatnonzero(known) if unknown == "skip" else np.arange(values.size)
    return decided, known, rows, _decision_lines(claimed, real, values, probe, decided, thresholds, rows, labels,
                                                 advance)


#: decisions written per block of the CSV (its text is never held whole)
DECISION_BLOCK = 1 << 16


def _decision_lines(claimed, real, values, probe, decided, thresholds, rows, labels, advance=None):
    """The decisions' CSV as blocks of bytes: a header, then per attempt of ``rows`` its claimed, real (and probe)
    labels (calibrate.contract.types.CodedLabels, as read_attempts gives them), score, threshold (``thresholds``:
    the cell of each distinct claimed label, empty for a class the calibration does not hold) and decision, and
    with ``labels`` the claimed class's group. Every cell but the score is made once per distinct label (the
    labels' through calibrate.files.user_output.csv_cells: no cell a spreadsheet reads as a formula, quoted as
    csv.writer quotes; the threshold, decision and group together, once per claimed label and decision), so a
    line costs the score's repr and four or five pieces of one join per block; the text is never held whole."""
    import numpy as np

    from calibrate.contract.types import UNLABELLED
    from calibrate.files.user_output import csv_cells, csv_writer

    def cells(texts, end: str = ",") -> np.ndarray:
        return np.array([x + end for x in csv_cells(texts)] + [""], dtype=object)  # one more: never empty

    names = claimed.names.tolist()
    columns = [(cells(x.names.tolist()), x.codes) for x in ([claimed, real] + ([probe] if probe is not None else []))]
    group = [""] * len(names)
    if labels is not None:
        group_of = dict(zip(labels.classes, labels.groups))
        group = ["," + x for x in csv_cells([group_of.get(x, UNLABELLED) for x in names])]
    # the cells after the score, per claimed label and decision (2 k + decision)
    after = np.array([f",{t},{d}{g}\n" for t, g in zip(thresholds, group) for d in "01"] + [""], dtype=object)
    w, text = csv_writer()
    w.writerow(["claimed", "real"] + (["probe"] if probe is not None else []) + ["score", "threshold", "accept"]
               + (["group"] if labels is not None else []))
    yield text().encode("utf-8")
    width = len(columns) + 2
    for lo in range(0, rows.size, DECISION_BLOCK):
        block = rows[lo:lo + DECISION_BLOCK]
        line: list = [None] * (width * block.size)  # the pieces of every line of the block, in order
        for k, (table, codes) in enumerate(columns):
            line[k::width] = table[codes[block]].tolist()
        line[width - 2::width] = map(repr, values[block].tolist())
        line[width - 1::width] = after[2 * claimed.codes[block].astype(np.int64) + decided[block]].tolist()
        yield "".join(line).encode("utf-8")
        if advance is not None:
            advance(block.size)


def _accept_summary(decided, genuine, n_unknown: int, unknown: str, failed: int, missing: float | None) -> str:
    """accept's one summary line: attempts, accepts, false accepts and rejects, unknown classes, failed comparisons."""
    summary = f"{decided.size} attempts, {int(decided.sum())} accepted"
    if decided.size:
        imp = ~genuine
        summary += (f"; impostor attempts {int(imp.sum())}, false accepts {int(decided[imp].sum())}"
                    f"; genuine attempts {int(genuine.sum())}, false rejects {int((~decided[genuine]).sum())}")
    if n_unknown:
        summary += (f"; {n_unknown} attempt(s) claiming classes the calibration does not hold "
                    f"{'rejected' if unknown == 'reject' else 'left out'}")
    if failed:
        summary += f"; {failed} failed comparison(s) (score {missing:g}) not decided"
    return summary


def _decide(cal, claimed, real, values, probe, known, fpr: float, cohort: Path | None, missing: float | None):
    """(accept per attempt, the threshold cell of each distinct claimed label: its repr, empty where the calibration
    does not hold it): the attempts claiming known classes decided (with the probes' cohort scores from ``cohort``
    when given); a normalised calibration's thresholds are on z. A plain calibration decides on codes
    (Calibration.decider: accept's thresholds and comparison), every attempt in one pass: an unheld label gets a
    threshold no finite score meets."""
    import numpy as np

    from calibrate.cli.checks import check_cohort_flag
    from calibrate.cli.inputs import probe_cohorts
    from calibrate.saved.decisions import Decider

    check_cohort_flag(cal, cohort)
    names = claimed.names.tolist()
    held = np.array([x in cal for x in names], dtype=bool)
    if hasattr(cal, "model") and cal.normalization is None:  # a Calibration (not a partitioned one), not normalised
        never = np.inf if cal.kind == "similarity" else -np.inf
        per_label = np.full(len(names), never)
        per_label[held] = cal.decider(fpr).thresholds[cal.codes(claimed.names[held])]
        decided = Decider(tuple(names), per_label, cal.kind, fpr)(claimed.codes, values)
        return decided, [repr(t) if h else "" for t, h in zip(per_label.tolist(), held.tolist())]
    decided = np.zeros(values.size, bool)
    if known.any():
        extra = {}
        if cohort is not None:
            extra["probe_cohort_scores"] = probe_cohorts(cohort, None if probe is None else probe[known],
                                                         claimed[known], real[known], missing, cal)
        decided[known] = cal.accept(claimed[known], values[known], fpr, **extra)
    if getattr(cal, "normalization", None) is not None:  # no single score threshold exists
        threshold = cal.normalised_threshold
    else:
        threshold = cal.threshold  # a partitioned calibration: the parts of the classes claimed
    return decided, [repr(threshold(x, fpr)) if h else "" for x, h in zip(names, held.tolist())]


@app.command()
def plugins(as_json: bool = typer.Option(False, "--json/--no-json", help="Machine-readable output.")) -> None:
    """List every plugin component with its parameters and where it came from."""
    from calibrate.contract.manager import build_registry

    try:
        registry = build_registry()
    except Exception as exc:  # noqa: BLE001
        _fail(exc)
        return
    infos = registry.all()
    if as_json:
        typer.echo(json.dumps([i.as_dict() for i in infos], indent=2))
        return
    current = None
    for info in infos:
        if info.kind != current:
            typer.echo(f"{'' if current is None else chr(10)}{info.kind}:")
            current = info.kind
        origin = f"{info.distribution} {info.version}" if info.distribution else info.plugin
        typer.echo(f"  {info.name}  [{origin}]  {info.summary}")
        for p in info.params:
            typer.echo(f"      {p.describe()}{': ' + p.doc if p.doc else ''}")


from calibrate.cli import enroll, fit_evaluate  # noqa: E402,F401  (register `fit`, `evaluate` and `enroll` on app)


def main() -> None:
    from calibrate.cli.app import run_app

    run_app(app)


if __name__ == "__main__":
    main()
