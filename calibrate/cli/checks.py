"""The command line's checks, shared by the commands (fit, evaluate, threshold, accept): numbers and
targets as written on the command line, --format and --seed, targets beyond what a calibration reaches,
and the attempts read (ids, classes the calibration holds, score scale, groups, --cohort). Each refusal is
one line (a CalibrateError: exit 2) in the command line's words.
"""

from __future__ import annotations

from pathlib import Path

#: the formats --format takes (calibrate.files.score_list_format.sniff's)
FORMATS = ("auto", "4-column", "5-column", "csv")
#: the most --fpr targets one command takes: each costs a pass over every class (and a prediction),
#: and no report needs more; 10,000 of them took 2.2 GB
MAX_TARGETS = 100


def cli_number(text: str | None, option: str) -> float | None:
    """A number given on the command line, under the score files' strict grammar (click's float reads
    ``1_0`` as 10.0); NaN refused, since nothing compares equal to it. None stays None."""
    import math

    from calibrate.errors import ParameterError
    from calibrate.files.score_lists import NUMBER

    if text is None:
        return None
    if not NUMBER.fullmatch(text):
        raise ParameterError(f"{option} {text[:40]!r} is not a number; write a decimal number such as 0.001 "
                             "(no underscores or other digits)")
    if math.isnan(float(text)):
        raise ParameterError(f"{option} nan: no score is equal to NaN; give a number, e.g. {option} -1")
    return float(text)


def cli_targets(texts: list[str] | None, flag: str = "--fpr") -> tuple[float, ...] | None:
    """The --fpr (or ``flag``'s) targets (strict numbers, at most MAX_TARGETS), or None when none are given."""
    from calibrate.errors import ParameterError

    if not texts:
        return None
    if len(texts) > MAX_TARGETS:
        raise ParameterError(f"{flag} is given {len(texts):,} times; give at most {MAX_TARGETS} targets per command")
    return tuple(cli_number(t, flag) for t in texts)


def check_options(fmt: str) -> None:
    """--format, in the command line's words (a ParameterError: one line, exit 2)."""
    from calibrate.errors import ParameterError

    if fmt not in FORMATS:
        raise ParameterError(f"--format {fmt[:40]!r}: give one of {', '.join(FORMATS)}")


def cli_seed(text: str) -> int:
    """--seed as a non-negative whole number in ASCII digits (one line otherwise, where click's own integer
    reading prints its usage text, and Python's int() takes other scripts' digits and underscores)."""
    from calibrate.errors import ParameterError

    if not (text.isascii() and text.isdigit()):
        raise ParameterError(f"--seed {' '.join(text[:40].split()) or repr(text)}: give a non-negative integer in the "
                             "digits 0-9 (the seed of the simulations), e.g. --seed 0")
    return int(text)


def check_reach(targets, n: int | None, verb: str, allow: bool, defaults: bool = False) -> None:
    """The one rule for targets below what the training data reach, in ``fit``, ``accept`` and ``threshold``:
    a target below 1/N of the N training impostor distances is refused unless --allow-extrapolation is given
    (then it is answered, with a note). ``n`` None (not recorded): nothing to check."""
    from calibrate.saved.calibration import extrapolation_message
    from calibrate.errors import CalibrateError

    low = [t for t in targets if n is not None and t * n < 1]
    if low and not allow:
        which = " (one of the default targets: give --fpr)" if defaults else ""
        raise CalibrateError(f"{extrapolation_message(low[0], n)}{which}; give --allow-extrapolation to {verb} anyway")


def check_saved_reach(cal, targets) -> None:
    """Targets beyond what a loaded calibration answers (its reach: calibrate.saved.calibration.Calibration.within_reach)
    are refused before any work, in ``accept`` and ``evaluate`` (``threshold`` asks at once)."""
    within = getattr(cal, "within_reach", None)
    for t in targets:
        if within is not None and 0 < t < 1:
            within(t)


def check_ids(claimed, real, values, kind: str, scores: Path, refuse: bool = True) -> list[str]:
    """Claimed and real ids that never coincide where the scores show them to be one set of ids spelled two ways:
    an error (``refuse``), else a note; without that evidence, or few that do: a note (calibrate.statistics.sanity.id_problem,
    in the command line's words)."""
    from calibrate.errors import DataError
    from calibrate.statistics.sanity import id_problem, list_evidence

    error, note = id_problem(claimed, real, str(scores), "write the ids the same way in both columns (the probe's "
                             "real_id as its class is claimed), or name the right columns with --claimed-column and "
                             "--real-column", list_evidence(claimed, real, values, kind))
    if error and refuse:
        raise DataError(error)
    return [x for x in (error, note) if x]


def check_known(cal, claimed, known, scores: Path) -> str | None:
    """Attempts whose claimed class the calibration does not hold: none it holds is an error (another gallery's
    calibration: nothing could be judged or decided), some a note with the counts and examples."""

    from calibrate.errors import CalibrateError
    from calibrate.formatting import shown
    from calibrate.contract.types import factorise

    if known.all():
        return None
    missing = factorise(claimed[~known])[0]
    if not known.any():
        held = getattr(cal, "classes", None)
        raise CalibrateError(f"{scores}: none of its {missing.size:,} claimed classes ({shown(missing, 3)}) is in the "
                             f"calibration's {len(cal):,}" + (f" ({shown(held, 3)})" if held is not None else "")
                             + ": it was fitted on another gallery; give the calibration of these classes")
    return (f"{int((~known).sum()):,} attempt(s) claim classes the calibration does not hold ({missing.size:,} "
            f"class(es): {shown(missing, 3)})")


def check_scale(cal, values, scores: Path) -> str | None:
    """Scores far outside the calibration's training scores: most of them an error, some a note
    (calibrate.statistics.sanity.scale_problem; nothing when the calibration did not record its range)."""
    from calibrate.errors import DataError
    from calibrate.statistics.sanity import scale_problem

    error, note = scale_problem(values, getattr(cal, "training_scores", None), str(scores), cal.kind)
    if error:
        raise DataError(error)
    return note


def check_cohort_flag(cal, cohort: Path | None) -> None:
    """--cohort goes with a normalised calibration only (one line otherwise)."""
    from calibrate.errors import CalibrateError

    if cohort is not None and getattr(cal, "normalization", None) is None:
        raise CalibrateError(f"--cohort {cohort}: this calibration does not normalise scores, so it reads no cohort "
                             "scores; leave out --cohort")


def _check_groups(labels, claimed, real) -> list[str]:
    if labels is None:
        return []
    from calibrate.recipe.groups import check_against
    from calibrate.contract.types import factorise

    return check_against(labels, factorise(claimed)[0], factorise(real)[0])
