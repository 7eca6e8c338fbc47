"""``calibrate enroll``: classes added to a saved calibration from a score list, without refitting the others
(``Calibration.enroll``); a calibration fitted group by group takes each class into its group's part."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from calibrate.cli.app import QUIET_HELP, _fail, app, command_progress
from calibrate.cli.fit_evaluate import (_CLAIMED_HELP, _FORMAT_HELP, _MISSING_HELP, _REAL_HELP, _SCORE_HELP,
                                        save_reporting)


@app.command("enroll")
def enroll_command(
        artifact: Path = typer.Argument(..., metavar="ARTIFACT", help="A saved calibration (calibration.json or "
                                        "`calibrate fit`'s file)."),
        scores: Path = typer.Argument(..., metavar="SCORES", help="Comparisons of the new classes with impostor "
                                      "probes, a score list (its genuine comparisons are left out)."),
        classes: List[str] = typer.Option(..., "--class", metavar="CLASS", help="A class to enroll (repeat for several): its "
                                          "comparisons are the lines claiming it."),
        out: str = typer.Option(..., "--out", help="Where to write the calibration with the classes added (JSON); - "
                                "for standard output. Not ARTIFACT itself."),
        estimator: Optional[str] = typer.Option(None, "--estimator", help="Which estimator, when the file holds several."),
        groups: Optional[Path] = typer.Option(None, "--groups", metavar="FILE", help="A calibration fitted group by "
                                              "group (--same-group): the classes' and probes' groups, a CSV with a "
                                              "header `class,group`; each class joins its group's part from its "
                                              "comparisons with probes of that group."),
        fmt: str = typer.Option("auto", "--format", help=_FORMAT_HELP),
        claimed_column: Optional[str] = typer.Option(None, "--claimed-column", help=_CLAIMED_HELP),
        real_column: Optional[str] = typer.Option(None, "--real-column", help=_REAL_HELP),
        score_column: Optional[str] = typer.Option(None, "--score-column", help=_SCORE_HELP),
        missing: Optional[str] = typer.Option(None, "--missing", metavar="NUMBER", help=_MISSING_HELP),
        quiet: bool = typer.Option(False, "--quiet/--no-quiet", "-q", help=QUIET_HELP)) -> None:
    """Add classes to a saved calibration (or replace them) from their impostor comparisons, the other classes
    untouched; what stays as fitted depends on the estimator (pooled quantities: refit once many are added)."""
    from calibrate.api import load
    from calibrate.cli.checks import check_options, cli_number
    from calibrate.cli.inputs import command_inputs, read_attempts, read_groups_option
    from calibrate.contract.types import UNLABELLED
    from calibrate.errors import ParameterError
    from calibrate.files.user_output import check_target
    from calibrate.saved.grouped import same_group_kept

    said = []
    try:
        check_options(fmt)
        missing = cli_number(missing, "--missing")
        inputs = command_inputs(artifact, {"SCORES": scores, "--groups": groups})
        check_target(out, inputs, "--out")  # before any work: never replace an input (S9)
        labels = read_groups_option(groups)
        with command_progress(quiet) as context:
            with context.stage(f"loading {artifact}", None, "classes") as task:
                cal = load(artifact, estimator)
                task.advance(len(cal))
            if not hasattr(cal, "enroll"):
                raise ParameterError(f"{artifact}: a sharded run's calibration cannot enroll a class; run it again "
                                     "with the class in its data")
            grouped = getattr(cal, "groups", None) is not None
            if grouped and labels is None:
                raise ParameterError(f"{artifact} was fitted group by group against same-group impostors: give "
                                     "--groups FILE, the classes' and probes' groups")
            if labels is not None and not grouped:
                raise ParameterError(f"--groups: {artifact} holds one model for every group (not fitted with "
                                     "--same-group), so a class's group does not change its threshold; leave out "
                                     "--groups")
            claimed, real, values, failed = read_attempts(scores, fmt, claimed_column, real_column, score_column,
                                                          missing, context=context)
            impostor = claimed != real
            kept = same_group_kept(claimed, real, labels) if grouped else impostor
            for cls in dict.fromkeys(classes):
                mine = claimed == cls
                if not mine.any():
                    raise ParameterError(f"{scores}: no line claims class {cls[:60]!r}; its impostor comparisons are "
                                         "the lines that claim it")
                use = mine & impostor & kept
                group = labels.group_of(cls) if grouped else None
                if grouped and group not in set(cal.groups.values()):
                    raise ParameterError(f"{labels.source}: class {cls[:60]!r} is in group {group[:40]!r}, of which "
                                         f"{artifact} has no part (its groups: {', '.join(sorted(set(cal.groups.values())))})"
                                         "; a new group needs a new fit")
                cal.enroll(cls, values[use], group=group)
                said.append(f"{cls}{'' if group is None else f' (group {group})'} from {int(use.sum()):,} impostor "
                            f"comparison(s)" + (f", {int((mine & impostor & ~kept).sum()):,} with probes of another "
                                                "group left out" if grouped and group != UNLABELLED else ""))
            check_target(out, inputs, "--out")
            save_reporting(context, cal, out)
    except Exception as exc:  # noqa: BLE001
        _fail(exc, scores)
        return
    to_stdout = str(out) == "-"
    extra = f" ({failed} failed comparison(s) left out)" if failed else ""
    typer.echo(f"enrolled into {cal.label}: {'; '.join(said)}{extra}; wrote {'standard output' if to_stdout else out}",
               err=to_stdout)
