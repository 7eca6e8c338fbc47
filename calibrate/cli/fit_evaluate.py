"""The recipe-less commands for score lists: ``calibrate fit`` and ``calibrate evaluate``.

In the spirit of ``bob bio metrics dev eval --far-value``: fit a calibration on all of one score
file (genuine comparisons are left out of the fit and check the score direction), then judge it on
another. ``calibrate fit dev && calibrate evaluate cal.json eval`` gives the same thresholds and
counts as a recipe run with ``score-list`` ``train: dev``, ``test: eval`` and the same estimator.
What they check and read, shared with the recipe commands, is calibrate.cli.checks and calibrate.cli.inputs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer

from calibrate.cli.app import EXTRAPOLATION_HELP, QUIET_HELP, _fail, app, command_progress
from calibrate.cli.checks import (_check_groups, check_cohort_flag, check_ids, check_known, check_options, check_reach,
                                  check_saved_reach, check_scale, cli_number, cli_seed, cli_targets)
from calibrate.cli.inputs import command_inputs, probe_cohorts, read_attempts, read_groups_option, read_pair

#: the targets when none are given (a recipe's default)
DEFAULT_FPRS = (0.005, 0.0025, 0.001, 0.0005)

_FORMAT_HELP = "auto, 4-column, 5-column or csv."
_CLAIMED_HELP = "CSV: header of the claimed class."
_REAL_HELP = "CSV: header of the probe's real class."
_SCORE_HELP = "CSV: header of the score."
_MISSING_HELP = "Marker of failed comparisons (e.g. -1): left out, counted."


def save_reporting(context, cal, out: str) -> None:
    """``cal.save(out)`` in a progress stage of its own, counting the classes written."""
    with context.stage(f"writing {'standard output' if str(out) == '-' else out}", None, "classes") as task:
        cal.save(out)
        task.advance(len(cal))


_COHORT_HELP = ("A normalised calibration: the probes' cohort scores, bob's T-norm file (T-models x probes: claimed_id a "
                "cohort model, real_id and test_label the probe's class and label), in a score list's format.")


_GENUINE_HELP = ("Instead of SCORES: a plain file of genuine scores, one per line (pyeer's input, with --impostor). Such "
                 "files carry no class: one threshold for every claimed class (class `pooled`).")
_IMPOSTOR_HELP = "Instead of SCORES: a plain file of impostor scores, one per line (with --genuine)."


def check_pair(scores, genuine, impostor, fmt: str, columns, groups, cohort=None) -> bool:
    """Whether the command reads two plain files of scores (--genuine, --impostor) rather than a score list (SCORES);
    one of the two forms, and none of the options only a score list has."""
    from calibrate.errors import ParameterError

    if scores is None and impostor is None:
        raise ParameterError("give SCORES (a score list) or --impostor FILE with --genuine FILE (scores one per line)")
    if scores is not None and (genuine is not None or impostor is not None):
        raise ParameterError("give SCORES (a score list) or --genuine/--impostor (scores one per line), not both")
    if scores is None:
        for flag, given in (("--format", fmt != "auto"), ("--claimed-column", columns[0]), ("--real-column", columns[1]),
                            ("--score-column", columns[2]), ("--groups", groups), ("--cohort", cohort)):
            if given:
                raise ParameterError(f"{flag} reads a score list's classes; --genuine/--impostor files hold one score "
                                     "per line and no class: leave out " + flag)
    return scores is None


_GROUPS_HELP = "Groups of the classes: a CSV with a header `class,group` (probes belong to their real class's group)."
_SAME_GROUP_HELP = ("With --groups: leave out the impostor comparisons of a class with a probe of another group (or of "
                    "none), as a recipe's `impostors: same-group` (ISO/IEC 19795-10).")


def check_same_group(same_group: bool, labels) -> None:
    """``--same-group`` without ``--groups``: an error, before any work."""
    if same_group and labels is None:
        from calibrate.errors import ParameterError

        raise ParameterError("--same-group needs --groups FILE (a CSV with a header `class,group`): a comparison's "
                             "groups are its class's and its probe's real class's")


def same_group_attempts(same_group: bool, labels, claimed, real, *more):
    """``(claimed, real, *more)`` with ``--same-group``'s leave-out applied (calibrate.saved.grouped.same_group_kept)
    and how many attempts it left out; as given without ``same_group``."""
    if not same_group:
        return (claimed, real, *more), 0
    from calibrate.saved.grouped import same_group_kept

    keep = same_group_kept(claimed, real, labels)
    return tuple(None if x is None else x[keep] for x in (claimed, real, *more)), int(keep.size - keep.sum())


def _clean(value):
    """JSON-ready: non-finite floats as null, numpy scalars as numbers."""
    import math

    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def det_csv(thresholds, fmr, fnmr) -> bytes:
    """det.csv's bytes: ``fpr,fnr,score_threshold`` per row."""
    lines = ["fpr,fnr,score_threshold"]
    for t, f, n in zip(thresholds.tolist(), fmr.tolist(), fnmr.tolist()):
        lines.append(f"{f!r},{n!r},{t!r}")
    return ("\n".join(lines) + "\n").encode("utf-8")


def _pct(x) -> str:
    return "n/a" if x is None else f"{100 * x:.3g}%"


def _p(p: float) -> str:
    return "p < 0.001" if p < 0.001 else f"p = {p:.2g}"


def cost_lines(label: str, rows) -> list[str]:
    """What the calibration costs genuine users against one pooled threshold, where beyond counting noise."""
    out = []
    apart = [r for r in rows if r.fnr_paired and not r.fnr_paired["same_fpr"]]
    if apart:
        out.append(f"{label} at {', '.join(f'{100 * r.target_fpr:g}%' for r in apart)}: one pooled threshold cannot admit "
                   "the same share of impostors (their scores tie there), so no verdict on genuine users is given")
    for worse in (True, False):
        hits = [r for r in rows if r.fnr_paired and r.fnr_paired["beyond_noise"]
                and (r.fnr_paired["extra_rejects_per_1000"] > 0) == worse]
        if hits:
            out.append(f"{label} turns away {'more' if worse else 'fewer'} genuine users than one pooled threshold "
                       "admitting the same share of impostors, beyond counting noise: " + "; ".join(
                           f"at {100 * r.target_fpr:g}%: FNR {_pct(r.fnr)} against {_pct(r.fnr_one_threshold)}, "
                           f"{abs(r.fnr_paired['extra_rejects_per_1000']):.3g} {'more' if worse else 'fewer'} per 1,000 "
                           f"genuine attempts (McNemar {_p(r.fnr_paired['p_value'])})" for r in hits))
    if not any(r.fnr_paired and r.fnr_paired["beyond_noise"] for r in rows) \
            and any(r.fnr_paired and r.fnr_paired["same_fpr"] for r in rows):
        out.append(f"{label}: within counting noise of one pooled threshold at the same FPR at every target compared "
                   "(McNemar)")
    return out


def verification_line(metrics: dict, source: str) -> str:
    if not metrics["genuine_attempts"] or not metrics["impostor_attempts"]:
        return f"verification: {source} needs both genuine and impostor attempts for EER, AUC and the DET"
    at = ", ".join(f"{100 * float(f):g}%: {_pct(v) if v is not None else 'n/a (too few impostor attempts)'}"
                   for f, v in metrics["fnmr_at_fmr"].items())
    at_g = ", ".join(f"{100 * float(f):g}%: {_pct(v) if v is not None else 'n/a (too few genuine attempts)'}"
                     for f, v in metrics.get("fmr_at_fnmr", {}).items())
    threshold = metrics["eer_score_threshold"]
    ci = ("" if metrics.get("eer_ci_low") is None else
          f" (95% interval {_pct(metrics['eer_ci_low'])}-{_pct(metrics['eer_ci_high'])}, a bootstrap over "
          f"{metrics['eer_ci_units']})")
    return (f"verification (one pooled threshold on {source}): EER {_pct(metrics['eer'])}{ci}"
            + (f" at score {threshold:.6g}" if threshold is not None else "")
            + f", AUC {metrics['auc']:.5f}, d' {metrics['d_prime']:.3g}; FNMR at FMR {at}; FMR at FNMR {at_g}; "
              f"FNMR at FMR 0: {_pct(metrics['fnmr_at_zero_fmr'])}")


def _ratio(x) -> str:
    return "n/a" if x is None else f"{x:.2f}"


def group_lines(rows, names) -> list[str]:
    """Per target: each group's same-group FMR as a ratio to the target [95% interval] and FNMR, then the max/min
    ratios of the calibration and of one pooled threshold at the same overall FPR."""
    out = []
    for r in rows:
        if not r.groups:
            continue
        cells = []
        for name in names:
            g = r.groups.get(name, {})
            same = ("n/a" if g.get("fmr_same_group") is None else
                    f"{g['fmr_same_group'] / r.target_fpr:.2f} [{g['fmr_same_group_ci_low'] / r.target_fpr:.2f}, "
                    f"{g['fmr_same_group_ci_high'] / r.target_fpr:.2f}]")
            cells.append(f"{name}: same-group FMR/target {same}, FNMR {_pct(g.get('fnmr'))}")
        ref = r.one_threshold or {}
        out.append(f"{100 * r.target_fpr:g}% | " + " | ".join(cells)
                   + f" | same-group FMR max/min {_ratio(r.fmr_same_group_max_over_min)} (one threshold "
                     f"{_ratio(ref.get('fmr_same_group_max_over_min'))}), FNMR max/min {_ratio(r.fnmr_max_over_min)} "
                     f"(one threshold {_ratio(ref.get('fnmr_max_over_min'))})")
    return out


def _same_group_notes(cal, same_group: bool, other: int, scores: Path) -> list[str]:
    """evaluate's notes on same-group attempts: how many --same-group left out, or that a calibration fitted group by
    group is measured over every impostor attempt without it."""
    if same_group:
        return [f"--same-group: {other:,} impostor attempt(s) of {scores} by a probe of another group (or of none) "
                "left out: every FPR below is over same-group impostor attempts"]
    if getattr(cal, "groups", None) is not None:
        return ["this calibration was fitted group by group against same-group impostors: every FPR below is over all "
                "impostor attempts; --groups FILE --same-group measures it as its fit did"]
    return []


def _targets(fpr: list[str] | None) -> tuple[float, ...]:
    return cli_targets(fpr) or DEFAULT_FPRS


#: what `fit` and `evaluate` note for --genuine/--impostor files
PAIR_NOTE = ("--genuine and --impostor files carry no class: every attempt claims one class ('pooled'), so the "
             "calibration is one pooled threshold for everyone")


def _fnr_targets(texts: list[str] | None) -> tuple[float, ...]:
    from calibrate.errors import ParameterError

    targets = cli_targets(texts, "--fnr") or ()
    for t in targets:
        if not 0 < t < 1:
            raise ParameterError(f"--fnr {t:g}: a target FNR is a share of genuine comparisons in (0, 1), e.g. 0.01")
    return targets


def fnr_thresholds(values, genuine, kind: str, targets, source) -> list[dict]:
    """One threshold for every class at each target FNR (bob.measure's ``frr_threshold``: the strictest rejecting at
    most that share of the training genuine comparisons), as a calibration saves them."""
    from calibrate.errors import DataError
    from calibrate.statistics.verification import PooledScores, at_fnmr

    d = -values if kind == "similarity" else values
    pooled = PooledScores.of(d[~genuine], d[genuine])
    out = []
    for t in targets:
        point = at_fnmr(pooled, t)
        if point is None:
            raise DataError(f"{source}: --fnr {t:g} needs at least {1 / t:,.0f} training genuine comparisons to be "
                            f"measured, and there are {pooled.n_genuine:,}; give a larger --fnr or more genuine scores")
        out.append({"target_fnr": float(t), "score_threshold": float(-point.threshold if kind == "similarity"
                                                                     else point.threshold),
                    "genuine": pooled.n_genuine})
    return out


def fnr_line(cal, entry: dict, values, genuine) -> str:
    """fit's line on one FNR threshold: what it is, and its FNR and FPR on the training comparisons."""
    t = entry["score_threshold"]
    accepted = values >= t if cal.kind == "similarity" else values <= t
    n_imp = int((~genuine).sum())
    fpr = f"{100 * accepted[~genuine].mean():.3g}%" if n_imp else "n/a"
    return (f"at FNR {100 * entry['target_fnr']:g}%: one threshold for every class, set on the {entry['genuine']:,} "
            f"training genuine comparisons: accept if score {cal.accept_if.split()[1]} {t!r} (training FNR "
            f"{100 * (1 - accepted[genuine].mean()):.3g}%, FPR {fpr} of {n_imp:,} impostor comparisons)")


@app.command("fit")
def fit_command(
        scores: Optional[Path] = typer.Argument(None, metavar="[SCORES]", help="Training comparisons, a score list (bob "
                                                "4/5-column, or CSV with a header); or give --genuine and --impostor."),
        out: str = typer.Option(..., "--out", help="Where to write the calibration (JSON), e.g. cal.json; - for standard output."),
        kind: str = typer.Option("similarity", "--kind", help="similarity (higher = more alike) or distance."),
        estimator: str = typer.Option("auto", "--estimator", help="The estimator (see `calibrate plugins`)."),
        fpr: Optional[List[str]] = typer.Option(None, "--fpr", metavar="NUMBER", help="A target FPR (repeat for several); "
                                                  "default 0.005, 0.0025, 0.001, 0.0005."),
        predict: bool = typer.Option(True, "--predict/--no-predict", help="Save the predicted FPR intervals."),
        fmt: str = typer.Option("auto", "--format", help=_FORMAT_HELP),
        claimed_column: Optional[str] = typer.Option(None, "--claimed-column", help=_CLAIMED_HELP),
        real_column: Optional[str] = typer.Option(None, "--real-column", help=_REAL_HELP),
        score_column: Optional[str] = typer.Option(None, "--score-column", help=_SCORE_HELP),
        missing: Optional[str] = typer.Option(None, "--missing", metavar="NUMBER", help=_MISSING_HELP),
        seed: str = typer.Option("0", "--seed", metavar="INTEGER", help="Seed of the predicted intervals' simulations."),
        allow_extrapolation: bool = typer.Option(False, "--allow-extrapolation/--no-allow-extrapolation",
                                                 help=EXTRAPOLATION_HELP),
        groups: Optional[Path] = typer.Option(None, "--groups", metavar="FILE", help=_GROUPS_HELP + " The estimator "
                                              "sees them as in a recipe with `groups:` (auto chooses without widening "
                                              "the gap between groups); prints each group's same-group FMR and FNMR on "
                                              "the training comparisons (in-sample)."),
        same_group: bool = typer.Option(False, "--same-group/--no-same-group", help=_SAME_GROUP_HELP + " Each group is "
                                        "calibrated on its own; the calibration keeps each class's group."),
        genuine: Optional[Path] = typer.Option(None, "--genuine", metavar="FILE", help=_GENUINE_HELP),
        impostor: Optional[Path] = typer.Option(None, "--impostor", metavar="FILE", help=_IMPOSTOR_HELP),
        fnr: Optional[List[str]] = typer.Option(None, "--fnr", metavar="NUMBER", help="A target FNR (repeat): also save "
                                                "one threshold for every class, the strictest rejecting at most that "
                                                "share of the training genuine comparisons (`calibrate threshold --fnr` "
                                                "reads it)."),
        impostors_only: bool = typer.Option(False, "--impostors-only/--no-impostors-only", help="Every comparison is "
                                            "an impostor one (no probe is of an enrolled class): scores that look "
                                            "mixed with genuine ones are then a note, not an error."),
        quiet: bool = typer.Option(False, "--quiet/--no-quiet", "-q", help=QUIET_HELP)) -> None:
    """Fit thresholds on every comparison of one score file (or of --genuine and --impostor files) and save the
    calibration."""
    import warnings

    import numpy as np

    from calibrate.errors import DataError, ParameterError
    from calibrate.saved.fitting import fit
    from calibrate.statistics.mixture import MixedScores, MixedScoresWarning
    from calibrate.statistics.sanity import check_direction
    from calibrate.files.user_output import check_target

    try:
        check_options(fmt)
        seed = cli_seed(seed)
        missing = cli_number(missing, "--missing")
        targets = _targets(fpr)
        fnrs = _fnr_targets(fnr)
        pair = check_pair(scores, genuine, impostor, fmt, (claimed_column, real_column, score_column), groups)
        inputs = command_inputs(None, {"SCORES": scores, "--groups": groups, "--genuine": genuine,
                                       "--impostor": impostor})
        check_target(out, inputs, "--out")  # before any work: never replace an input (S9)
        labels = read_groups_option(groups)
        check_same_group(same_group, labels)
        with command_progress(quiet) as context:
            if pair:
                claimed, real, values, failed = read_pair(genuine, impostor, missing, context)
                group_notes = [PAIR_NOTE]
            else:
                claimed, real, values, failed = read_attempts(scores, fmt, claimed_column, real_column, score_column,
                                                              missing, context=context)
                group_notes = check_ids(claimed, real, values, kind, scores)  # the groups' notes: calibrate.fit's
            source = scores if not pair else impostor
            # before the fit, the rule `threshold` and `accept` apply too
            (c, r, v), other = same_group_attempts(same_group, labels, claimed, real, values)  # what is fitted
            fitted_impostors = int((c != r).sum())
            check_reach(targets, fitted_impostors or None, "fit", allow_extrapolation, defaults=not fpr)
            if kind in ("similarity", "distance"):  # said in the command line's words (calibrate.fit checks it again)
                genuine = claimed == real
                check_direction(values[genuine], values[~genuine], kind, str(source),
                                f"give --kind {'distance' if kind == 'similarity' else 'similarity'}")
            if impostors_only and fitted_impostors < c.size:
                raise ParameterError(f"--impostors-only, but {c.size - fitted_impostors:,} comparison(s) of {source} are "
                                     "genuine (claimed id = real id); leave out --impostors-only: they are left out "
                                     "of the fit")
            # before the fit: its own refusal (too few genuine comparisons) costs nothing
            saved_fnr = fnr_thresholds(values, np.asarray(claimed == real), kind, fnrs, source) if fnrs else ()
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                try:
                    cal = fit(values, claimed, real=real, kind=kind, estimator=estimator, targets=targets,
                              predict=predict, seed=seed, context=context, groups=labels, same_group=same_group,
                              impostors_only=impostors_only)
                except MixedScores as exc:  # said in the command line's words
                    raise DataError(f"{source}: no claimed id is ever a probe's real id, so every comparison was taken "
                                    f"for an impostor's, yet {exc.mixture.finding()}; write the ids the same way in "
                                    "both columns, or name the right ones with --claimed-column and --real-column; if "
                                    "every comparison is an impostor one, give --impostors-only") from None
            in_sample = None
            if labels is not None:
                from calibrate.saved.assess import assess, known_classes

                known = known_classes(cal, c)  # in-sample, the comparisons fitted
                in_sample = assess(cal, c[known], r[known], v[known], targets, groups=labels)
            cal.fnr_thresholds = saved_fnr
            check_target(out, inputs, "--out")  # again, after the fit: still not an input
            save_reporting(context, cal, out)
    except Exception as exc:  # noqa: BLE001
        _fail(exc, scores if scores is not None else impostor)
        return
    for w in caught:
        said = (f"{source}: --impostors-only, yet {w.message.mixture.finding()}"
                if isinstance(w.message, MixedScoresWarning) else str(w.message))
        typer.echo(f"note: {' '.join(said.split())}", err=True)
    for note in group_notes:
        typer.echo(f"note: {note}", err=True)
    genuine = int((claimed == real).sum())
    extra = f", {failed} failed comparison(s) left out" if failed else ""
    to_stdout = str(out) == "-"
    extra += f", {other} impostor comparison(s) with a probe of another group left out" if same_group else ""
    typer.echo(f"fitted {cal.label} on {fitted_impostors} impostor comparisons of {len(cal)} classes "
               f"({genuine} genuine comparison(s) left out of the fit{extra}); wrote "
               f"{'standard output' if to_stdout else out}", err=to_stdout)
    for entry in cal.fnr_thresholds:
        typer.echo(fnr_line(cal, entry, values, np.asarray(claimed == real)), err=to_stdout)
    if in_sample is not None:
        typer.echo(f"groups from {labels.source}, on the training comparisons{' of one group' if same_group else ''} "
                   "(in-sample: expect the evaluation's figures to differ):", err=to_stdout)
        for line in group_lines(in_sample, labels.names):
            typer.echo(line, err=to_stdout)


@app.command("evaluate")
def evaluate_command(
        artifact: Path = typer.Argument(..., metavar="ARTIFACT", help="A saved calibration (calibration.json or `calibrate fit`'s file)."),
        scores: Optional[Path] = typer.Argument(None, metavar="[SCORES]", help="Comparisons to judge it on, a score "
                                                "list; or give --genuine and --impostor."),
        fpr: Optional[List[str]] = typer.Option(None, "--fpr", metavar="NUMBER", help="A target FPR (repeat); default: the "
                                                  "calibration's own targets."),
        estimator: Optional[str] = typer.Option(None, "--estimator", help="Which estimator, when the file holds several."),
        fmt: str = typer.Option("auto", "--format", help=_FORMAT_HELP),
        claimed_column: Optional[str] = typer.Option(None, "--claimed-column", help=_CLAIMED_HELP),
        real_column: Optional[str] = typer.Option(None, "--real-column", help=_REAL_HELP),
        score_column: Optional[str] = typer.Option(None, "--score-column", help=_SCORE_HELP),
        missing: Optional[str] = typer.Option(None, "--missing", metavar="NUMBER", help=_MISSING_HELP),
        cohort: Optional[Path] = typer.Option(None, "--cohort", help=_COHORT_HELP),
        groups: Optional[Path] = typer.Option(None, "--groups", metavar="FILE", help=_GROUPS_HELP + " Adds each "
                                              "group's same-group FMR and FNMR, and their max/min across groups."),
        same_group: bool = typer.Option(False, "--same-group/--no-same-group", help=_SAME_GROUP_HELP + " Every FPR "
                                        "is then over same-group impostor attempts, as in such a run's results."),
        det: Optional[str] = typer.Option(None, "--det", metavar="FILE", help="Write the DET of the file's scores with "
                                          "one pooled threshold (CSV: fpr,fnr,score_threshold; at most 10,000 rows, "
                                          "spaced on the probit scale)."),
        as_json: bool = typer.Option(False, "--json/--no-json", help="Machine-readable output."),
        genuine: Optional[Path] = typer.Option(None, "--genuine", metavar="FILE", help=_GENUINE_HELP),
        impostor: Optional[Path] = typer.Option(None, "--impostor", metavar="FILE", help=_IMPOSTOR_HELP),
        quiet: bool = typer.Option(False, "--quiet/--no-quiet", "-q", help=QUIET_HELP)) -> None:
    """Achieved FPR (with its 95% interval), ratio to the target and FNR of a saved calibration on
    another score file, the FNR of one pooled threshold at the same FPR (and whether the calibration costs
    more genuine users beyond counting noise), the file's EER, AUC, d' and FNMR at fixed FMRs, and with
    --groups the figures per group; attempts claiming classes the calibration does not hold are left out
    and counted."""
    from calibrate.api import load
    from calibrate.saved.assess import absent_note, assess, known_classes, verification
    from calibrate.contract.types import factorise
    from calibrate.files.user_output import check_target, write_user_file

    try:
        check_options(fmt)
        missing = cli_number(missing, "--missing")
        fpr = cli_targets(fpr)
        pair = check_pair(scores, genuine, impostor, fmt, (claimed_column, real_column, score_column), groups, cohort)
        source = scores if not pair else impostor
        if det is not None:
            if det == "-" and as_json:
                from calibrate.errors import ParameterError

                raise ParameterError("--det - and --json would both write to standard output; give --det a file name")
            inputs = command_inputs(artifact, {"SCORES": scores, "--cohort": cohort, "--groups": groups,
                                               "--genuine": genuine, "--impostor": impostor})
            check_target(det, inputs, "--det")  # before any work: never replace an input (S9)
        labels = read_groups_option(groups)
        check_same_group(same_group, labels)
        with command_progress(quiet) as context:
            with context.stage(f"loading {artifact}", None, "classes") as task:
                cal = load(artifact, estimator)  # here: its warnings are the command's (one note each)
                task.advance(len(cal))
            check_saved_reach(cal, fpr or ())
            check_cohort_flag(cal, cohort)
            if pair:
                (claimed, real, values, failed), probe = read_pair(genuine, impostor, missing, context), None
                group_notes = [PAIR_NOTE]
            else:
                claimed, real, values, failed, probe = read_attempts(scores, fmt, claimed_column, real_column,
                                                                     score_column, missing, probes=True, context=context)
                group_notes = check_ids(claimed, real, values, cal.kind, scores) + _check_groups(labels, claimed, real)
            (claimed, real, values, probe), other = same_group_attempts(same_group, labels, claimed, real, values,
                                                                        probe)
            group_notes += _same_group_notes(cal, same_group, other, source)
            known = known_classes(cal, claimed)
            unknown_note = check_known(cal, claimed, known, source)
            scale_note = check_scale(cal, values[known], source)
            targets = tuple(fpr) if fpr else (tuple(getattr(cal, "targets", ())) or DEFAULT_FPRS)
            cohorts = None if cohort is None else probe_cohorts(cohort, None if probe is None else probe[known],
                                                                 claimed[known], real[known], missing, cal)
            n = int(known.sum())
            with context.stage(f"judging {n:,} attempts at {len(targets)} target(s)", len(targets), "targets") as task:
                rows = assess(cal, claimed[known], real[known], values[known], targets, probe_cohort_scores=cohorts,
                              groups=labels, task=task)
            with context.stage(f"EER, AUC and DET of {n:,} attempts", None, "attempts") as task:
                metrics, curve = verification(cal.kind, claimed[known], real[known], values[known], targets,
                                              classes=not pair)
                task.advance(n)
        written = None
        if det is not None and metrics["genuine_attempts"] and metrics["impostor_attempts"]:
            written = write_user_file(det, det_csv(*curve), inputs, "--det")
    except Exception as exc:  # noqa: BLE001
        _fail(exc, scores if scores is not None else impostor)
        return
    unknown = int((~known).sum())
    present = factorise(claimed[known])[0]
    absent = absent_note(cal, present, str(source))
    if as_json:
        doc = {"estimator": cal.label, "scores": str(scores) if not pair else
               {"genuine": None if genuine is None else str(genuine), "impostor": str(impostor)}, "unknown_class_attempts": unknown,
               "enrolled_classes": len(cal), "classes_judged": int(present.size), "failed_comparisons": failed,
               "accept_if": cal.accept_if, "targets": [r.as_dict() for r in rows], "verification": metrics}
        if labels is not None:
            doc["groups"] = {"source": labels.source, "names": list(labels.names)}
        if same_group:
            doc["same_group"] = {"left_out_other_group_attempts": other}
        typer.echo(json.dumps(_clean(doc)))
        return
    shown = str(scores) if not pair else " and ".join(str(p) for p in (genuine, impostor) if p is not None)
    for note in group_notes + [x for x in (scale_note, absent) if x]:
        typer.echo(f"note: {note}", err=True)
    if unknown_note:
        typer.echo(f"note: {unknown_note}; left out", err=True)
    if failed:
        typer.echo(f"note: {failed} failed comparison(s) (score {missing:g}) left out", err=True)
    if det is not None and written is None:
        typer.echo(f"note: no DET written: {shown} needs both genuine and impostor attempts for one", err=True)
    side = written == "standard output"  # the DET went to standard output: the table goes to standard error

    def say(line: str) -> None:
        typer.echo(line, err=side)

    rule = cal.accept_if if getattr(cal, "normalization", None) is None else f"{cal.normalization.plugin}-normalised z <= t"
    say(f"{cal.label} on {shown}: accept if {rule}")
    say("target FPR | achieved FPR (95% interval) | ratio | false accepts / impostor attempts | FNR | HTER | one "
        "pooled threshold's FNR at the same FPR (FNR cost) | predicted FPR")
    from calibrate.statistics.verification import cost_words

    for r in rows:
        achieved = "n/a" if r.fpr is None else f"{100 * r.fpr:.3g}% ({100 * r.fpr_ci_low:.3g}-{100 * r.fpr_ci_high:.3g}%)"
        ratio = "n/a" if r.ratio is None else f"{r.ratio:.2f}"
        fnr = "n/a" if r.fnr is None else f"{100 * r.fnr:.3g}%"
        one = ("n/a" if r.fnr_one_threshold is None
               else f"{100 * r.fnr_one_threshold:.3g}% ({cost_words(r.fnr, r.fnr_one_threshold)})")
        predicted = ("-" if r.predicted_fpr_low is None
                     else f"{100 * r.predicted_fpr_low:.3g}-{100 * r.predicted_fpr_high:.3g}%")
        say(f"{100 * r.target_fpr:g}% | {achieved} | {ratio} | {r.false_accepts} / {r.impostor_attempts} | "
            f"{fnr} | {_pct(r.hter)} | {one} | {predicted}")
    for line in cost_lines(cal.label, rows):
        say(line)
    say(verification_line(metrics, shown))
    if labels is not None:
        say(f"groups from {labels.source}:")
        for line in group_lines(rows, labels.names):
            say(line)
    if written is not None:
        typer.echo(f"wrote the DET to {written}", err=True)
