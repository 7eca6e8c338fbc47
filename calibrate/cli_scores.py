"""The recipe-less commands for score lists: ``calibrate fit`` and ``calibrate evaluate``.

In the spirit of ``bob bio metrics dev eval --far-value``: fit a calibration on all of one score
file (genuine comparisons are left out of the fit and check the score direction), then judge it on
another. ``calibrate fit dev && calibrate evaluate cal.json eval`` gives the same thresholds and
counts as a recipe run with ``score-list`` ``train: dev``, ``test: eval`` and the same estimator.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer

from .cli_app import _fail, app

#: the targets when none are given (a recipe's default)
DEFAULT_FPRS = (0.005, 0.0025, 0.001, 0.0005)

_FORMAT_HELP = "auto, 4-column, 5-column or csv."
_CLAIMED_HELP = "CSV: header of the claimed class."
_REAL_HELP = "CSV: header of the probe's real class."
_SCORE_HELP = "CSV: header of the score."
_MISSING_HELP = "Marker of failed comparisons (e.g. -1): left out, counted."
#: the formats --format takes (scorefiles.sniff's)
FORMATS = ("auto", "4-column", "5-column", "csv")
#: the most --fpr targets one command takes: each costs a pass over every class (and a prediction),
#: and no report needs more; 10,000 of them took 2.2 GB
MAX_TARGETS = 100


def cli_number(text: str | None, option: str) -> float | None:
    """A number given on the command line, under the score files' strict grammar (click's float reads
    ``1_0`` as 10.0); NaN refused, since nothing compares equal to it. None stays None."""
    import math

    from .errors import ParameterError
    from .scorefiles import NUMBER

    if text is None:
        return None
    if not NUMBER.fullmatch(text):
        raise ParameterError(f"{option} {text[:40]!r} is not a number; write a decimal number such as 0.001 "
                             "(no underscores or other digits)")
    if math.isnan(float(text)):
        raise ParameterError(f"{option} nan: no score is equal to NaN; give a number, e.g. {option} -1")
    return float(text)


def cli_targets(texts: list[str] | None) -> tuple[float, ...] | None:
    """The --fpr targets (strict numbers, at most MAX_TARGETS), or None when none are given."""
    from .errors import ParameterError

    if not texts:
        return None
    if len(texts) > MAX_TARGETS:
        raise ParameterError(f"--fpr is given {len(texts):,} times; give at most {MAX_TARGETS} targets per command")
    return tuple(cli_number(t, "--fpr") for t in texts)


def check_options(fmt: str, seed: int = 0) -> None:
    """--format and --seed, in the command line's words (a ParameterError: one line, exit 2)."""
    from .errors import ParameterError

    if fmt not in FORMATS:
        raise ParameterError(f"--format {fmt[:40]!r}: give one of {', '.join(FORMATS)}")
    if seed < 0:
        raise ParameterError(f"--seed {seed}: give a non-negative integer (the seed of the simulations)")


def read_attempts(path: Path, fmt: str, claimed_column: str | None, real_column: str | None,
                  score_column: str | None, missing: float | None, probes: bool = False):
    """(claimed, real, scores, failed) of a score list, failed comparisons (``missing``) left out; with
    ``probes``, also each attempt's probe label (None when the file has no probe column)."""
    import numpy as np

    from .scorefiles import DEFAULT_COLUMNS, read_comparisons

    columns = None
    if fmt in ("auto", "csv") and any((claimed_column, real_column, score_column)):
        columns = {"claimed": claimed_column or DEFAULT_COLUMNS["claimed"],
                   "real": real_column or DEFAULT_COLUMNS["real"], "score": score_column or DEFAULT_COLUMNS["score"]}
    rows = read_comparisons(path, fmt=fmt, columns=columns, missing=missing)
    keep = np.ones(len(rows.scores), bool) if missing is None else rows.scores != missing
    claimed = np.asarray(rows.claimed_labels, dtype=object)[rows.claimed[keep]].astype(str)
    real = np.asarray(rows.real_labels, dtype=object)[rows.real[keep]].astype(str)
    if not probes:
        return claimed, real, rows.scores[keep], int((~keep).sum())
    probe = (None if rows.probe is None or rows.probe_labels is None
             else np.asarray(rows.probe_labels, dtype=object)[rows.probe[keep]].astype(str))
    return claimed, real, rows.scores[keep], int((~keep).sum()), probe


_COHORT_HELP = ("A normalised calibration: the probes' cohort scores, bob's T-norm file (T-models x probes: claimed_id a "
                "cohort model, real_id and test_label the probe's class and label), in a score list's format.")


def check_cohort_flag(cal, cohort: Path | None) -> None:
    """--cohort goes with a normalised calibration only (one line otherwise)."""
    from .errors import CalibrateError

    if cohort is not None and getattr(cal, "normalization", None) is None:
        raise CalibrateError(f"--cohort {cohort}: this calibration does not normalise scores, so it reads no cohort "
                             "scores; leave out --cohort")


def probe_cohorts(path: Path, probe, claimed, real, missing: float | None) -> list:
    """Per attempt, its probe's cohort scores from a T-norm file (``path``): every line of that probe, less
    the cohort models named like the claimed class or the probe's own class (as a run leaves them out) and
    failed comparisons (``missing``)."""
    import numpy as np

    from .errors import DataError
    from .scorefiles import read_comparisons

    if probe is None:
        raise DataError(f"the attempts have no probe column, so their cohort scores in {path} cannot be found; give "
                        "the score list's probe labels (bob's test_label, or the CSV's probe column)")
    rows = read_comparisons(path, fmt="auto", missing=missing)
    if rows.probe is None or rows.probe_labels is None:
        raise DataError(f"{path}: a cohort file needs the probes' labels (bob's test_label column) to match the attempts")
    keep = np.ones(rows.scores.size, bool) if missing is None else rows.scores != missing
    models = np.asarray(rows.claimed_labels, dtype=object)[rows.claimed].astype(str)
    labels = np.asarray(rows.probe_labels, dtype=object)
    order = np.argsort(rows.probe, kind="stable")
    bounds = np.searchsorted(rows.probe[order], np.arange(len(labels) + 1))
    where = {str(p): k for k, p in enumerate(labels.tolist())}
    out = []
    for a, p in enumerate(np.asarray(probe).astype(str).tolist()):
        k = where.get(p)
        if k is None:
            raise DataError(f"{path}: probe {p[:60]!r} (attempt {a + 1}) has no line in the cohort file; --cohort (bob's "
                            "T-norm scores: T-models x probes) needs every probe of the attempts")
        lines = order[bounds[k]:bounds[k + 1]]
        mine = lines[keep[lines] & (models[lines] != claimed[a]) & (models[lines] != real[a])]
        out.append(rows.scores[mine])
    return out


def _targets(fpr: list[str] | None) -> tuple[float, ...]:
    return cli_targets(fpr) or DEFAULT_FPRS


@app.command("fit")
def fit_command(
        scores: Path = typer.Argument(..., metavar="SCORES", help="Training comparisons, a score list (bob 4/5-column, or CSV with a header)."),
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
        seed: int = typer.Option(0, "--seed", help="Seed of the predicted intervals' simulations.")) -> None:
    """Fit thresholds on every comparison of one score file and save the calibration."""
    import warnings

    from .calibration import fit
    from .sanity import check_direction
    from .userfiles import check_target

    try:
        check_options(fmt, seed)
        missing = cli_number(missing, "--missing")
        targets = _targets(fpr)
        check_target(out, (scores,))  # before the fit: never replace the training data (S9)
        claimed, real, values, failed = read_attempts(scores, fmt, claimed_column, real_column, score_column, missing)
        if kind in ("similarity", "distance"):  # said in the command line's words (calibrate.fit checks it again)
            genuine = claimed == real
            check_direction(values[genuine], values[~genuine], kind, str(scores),
                            f"give --kind {'distance' if kind == 'similarity' else 'similarity'}")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            cal = fit(values, claimed, real=real, kind=kind, estimator=estimator, targets=targets,
                      predict=predict, seed=seed)
        cal.save(out)
    except Exception as exc:  # noqa: BLE001
        _fail(exc, scores)
        return
    for w in caught:
        typer.echo(f"note: {' '.join(str(w.message).split())}", err=True)
    genuine = int((claimed == real).sum())
    extra = f", {failed} failed comparison(s) left out" if failed else ""
    typer.echo(f"fitted {cal.label} on {values.size - genuine} impostor comparisons of {len(cal)} classes "
               f"({genuine} genuine comparison(s) left out of the fit{extra}); wrote "
               f"{'standard output' if str(out) == '-' else out}", err=str(out) == "-")


@app.command("evaluate")
def evaluate_command(
        artifact: Path = typer.Argument(..., metavar="ARTIFACT", help="A saved calibration (calibration.json or `calibrate fit`'s file)."),
        scores: Path = typer.Argument(..., metavar="SCORES", help="Comparisons to judge it on, a score list."),
        fpr: Optional[List[str]] = typer.Option(None, "--fpr", metavar="NUMBER", help="A target FPR (repeat); default: the "
                                                  "calibration's own targets."),
        estimator: Optional[str] = typer.Option(None, "--estimator", help="Which estimator, when the file holds several."),
        fmt: str = typer.Option("auto", "--format", help=_FORMAT_HELP),
        claimed_column: Optional[str] = typer.Option(None, "--claimed-column", help=_CLAIMED_HELP),
        real_column: Optional[str] = typer.Option(None, "--real-column", help=_REAL_HELP),
        score_column: Optional[str] = typer.Option(None, "--score-column", help=_SCORE_HELP),
        missing: Optional[str] = typer.Option(None, "--missing", metavar="NUMBER", help=_MISSING_HELP),
        cohort: Optional[Path] = typer.Option(None, "--cohort", help=_COHORT_HELP),
        as_json: bool = typer.Option(False, "--json/--no-json", help="Machine-readable output.")) -> None:
    """Achieved FPR (with its 95% interval), ratio to the target and FNR of a saved calibration on
    another score file; attempts claiming classes the calibration does not hold are left out and counted."""
    from .api import load
    import numpy as np

    from .assess import absent_note, assess, known_classes

    try:
        check_options(fmt)
        missing = cli_number(missing, "--missing")
        fpr = cli_targets(fpr)
        cal = load(artifact, estimator)
        check_cohort_flag(cal, cohort)
        claimed, real, values, failed, probe = read_attempts(scores, fmt, claimed_column, real_column, score_column,
                                                             missing, probes=True)
        known = known_classes(cal, claimed)
        targets = tuple(fpr) if fpr else (tuple(getattr(cal, "targets", ())) or DEFAULT_FPRS)
        cohorts = None if cohort is None else probe_cohorts(cohort, None if probe is None else probe[known],
                                                             claimed[known], real[known], missing)
        rows = assess(cal, claimed[known], real[known], values[known], targets, probe_cohort_scores=cohorts)
    except Exception as exc:  # noqa: BLE001
        _fail(exc, scores)
        return
    unknown = int((~known).sum())
    present = np.unique(claimed[known].astype(str))
    absent = absent_note(cal, present, str(scores))
    if as_json:
        typer.echo(json.dumps({"estimator": cal.label, "scores": str(scores), "unknown_class_attempts": unknown,
                               "enrolled_classes": len(cal),
                               "classes_judged": int(present.size),
                               "failed_comparisons": failed, "targets": [r.as_dict() for r in rows]}))
        return
    if absent:
        typer.echo(f"note: {absent}", err=True)
    if unknown:
        typer.echo(f"note: {unknown} attempt(s) claim classes the calibration does not hold; left out", err=True)
    if failed:
        typer.echo(f"note: {failed} failed comparison(s) (score {missing:g}) left out", err=True)
    rule = cal.accept_if if getattr(cal, "normalization", None) is None else f"{cal.normalization.plugin}-normalised z <= t"
    typer.echo(f"{cal.label} on {scores}: accept if {rule}")
    typer.echo("target FPR | achieved FPR (95% interval) | ratio | false accepts / impostor attempts | FNR | predicted FPR")
    for r in rows:
        achieved = "n/a" if r.fpr is None else f"{100 * r.fpr:.3g}% ({100 * r.fpr_ci_low:.3g}-{100 * r.fpr_ci_high:.3g}%)"
        ratio = "n/a" if r.ratio is None else f"{r.ratio:.2f}"
        fnr = "n/a" if r.fnr is None else f"{100 * r.fnr:.3g}%"
        predicted = ("-" if r.predicted_fpr_low is None
                     else f"{100 * r.predicted_fpr_low:.3g}-{100 * r.predicted_fpr_high:.3g}%")
        typer.echo(f"{100 * r.target_fpr:g}% | {achieved} | {ratio} | {r.false_accepts} / {r.impostor_attempts} | "
                   f"{fnr} | {predicted}")
