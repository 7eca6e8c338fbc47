"""What a command reads, shared by the commands (fit, evaluate, threshold, accept): the attempts of a
score list, the probes' cohort scores (--cohort), the groups file (--groups), and the list of a command's
input files (a saved calibration's own files included) that no output of the command may replace.
"""

from __future__ import annotations

import json
from pathlib import Path


def read_attempts(path: Path, fmt: str, claimed_column: str | None, real_column: str | None,
                  score_column: str | None, missing: float | None, probes: bool = False, context=None):
    """(claimed, real, scores, failed) of a score list, failed comparisons (``missing``) left out; with
    ``probes``, also each attempt's probe label (None when the file has no probe column). The labels are
    :class:`calibrate.contract.types.CodedLabels` (a small integer per attempt into the file's distinct labels), which
    ``calibrate.fit``, ``Calibration.accept`` and ``calibrate.saved.assess`` take as they are: the file is read as a
    recipe run reads it, never as a string per attempt. ``context``: a RunContext whose progress shows the
    reading (a stage counting comparisons)."""
    import numpy as np

    from calibrate.files.score_lists import COMMAND_LINE, DEFAULT_COLUMNS, read_comparisons
    from calibrate.contract.types import CodedLabels

    columns = None
    if fmt in ("auto", "csv") and any((claimed_column, real_column, score_column)):
        columns = {"claimed": claimed_column or DEFAULT_COLUMNS["claimed"],
                   "real": real_column or DEFAULT_COLUMNS["real"], "score": score_column or DEFAULT_COLUMNS["score"]}
    if context is None:
        rows = read_comparisons(path, fmt=fmt, columns=columns, missing=missing, words=COMMAND_LINE)
    else:
        with context.stage(f"reading {path}", None, "comparisons") as task:
            rows = read_comparisons(path, fmt=fmt, columns=columns, missing=missing, words=COMMAND_LINE, task=task)
    keep = slice(None) if missing is None else rows.scores != missing
    failed = 0 if missing is None else int(rows.scores.size - np.count_nonzero(keep))
    claimed = CodedLabels.of(rows.claimed[keep], rows.claimed_labels)
    real = CodedLabels.of(rows.real[keep], rows.real_labels)
    scores = rows.scores[keep]
    if not probes:
        return claimed, real, scores, failed
    probe = (None if rows.probe is None or rows.probe_labels is None
             else CodedLabels.of(rows.probe[keep], rows.probe_labels))
    return claimed, real, scores, failed, probe


def read_pair(genuine: Path | None, impostor: Path, missing: float | None, context=None):
    """(claimed, real, scores, failed) of two plain files of scores, one per line (pyeer's input; ``genuine`` may be
    None): every attempt claims the one class ``pooled`` (calibrate.files.score_lists.POOLED_CLASS), the genuine ones
    from it, the impostor ones from a class enrolled nowhere."""
    import numpy as np

    from calibrate.contract.types import CodedLabels
    from calibrate.files.score_lists import COMMAND_LINE, OTHER_CLASS, POOLED_CLASS, read_score_column

    def read(path: Path, what: str):
        if context is None:
            return read_score_column(path, what, missing=missing, words=COMMAND_LINE)
        with context.stage(f"reading {path}", None, "scores") as task:
            values, failed = read_score_column(path, what, missing=missing, words=COMMAND_LINE)
            task.advance(values.size)
        return values, failed

    gen, failed_g = read(genuine, "the genuine scores (--genuine)") if genuine is not None else (np.empty(0), 0)
    imp, failed_i = read(impostor, "the impostor scores (--impostor)")
    claimed = CodedLabels.of(np.zeros(gen.size + imp.size, dtype=np.int64), [POOLED_CLASS])
    real = CodedLabels.of(np.repeat([0, 1], [gen.size, imp.size]), [POOLED_CLASS, OTHER_CLASS])
    return claimed, real, np.concatenate([gen, imp]), failed_g + failed_i


def probe_cohorts(path: Path, probe, claimed, real, missing: float | None, cal=None):
    """The attempts' probes' cohort scores from a T-norm file (``path``), as a
    :class:`calibrate.normalisation.cohort.ProbeCohorts`: one row per probe of the attempts, its scores against every cohort
    model of the file, less the model named like its own class (the file's real_id for it; an attempt naming
    another real class gets a row of its own) and failed comparisons (``missing``); each attempt leaves the
    model named like its claimed class out as well, as a run does. Memory: probes x models, not attempts x
    models; labels are matched by binary search against the file's. With the calibration ``cal``, the file's
    cohort models and each attempt's row are checked against the cohort it was fitted with
    (calibrate.normalisation.decisions.check_cohort_file)."""
    import numpy as np

    from calibrate.normalisation.cohort import ProbeCohorts
    from calibrate.errors import DataError
    from calibrate.files.score_lists import COMMAND_LINE, read_comparisons

    if probe is None:
        raise DataError(f"the attempts have no probe column, so their cohort scores in {path} cannot be found; give "
                        "the score list's probe labels (bob's test_label, or the CSV's probe column)")
    rows = read_comparisons(path, fmt="auto", missing=missing, words=COMMAND_LINE)
    if rows.probe is None or rows.probe_labels is None:
        raise DataError(f"{path}: a cohort file needs the probes' labels (bob's test_label column) to match the attempts")
    probe, real = np.asarray(probe, dtype=str), np.asarray(real, dtype=str)
    labels = np.asarray(rows.probe_labels, dtype=str)
    order = np.argsort(labels)
    at = np.zeros(probe.size, dtype=np.int64)
    found = np.zeros(probe.size, dtype=bool)
    for start in range(0, probe.size if labels.size else 0, 1 << 18):  # blocks: the labels compared are copies
        part = probe[start:start + (1 << 18)]
        k = order[np.minimum(np.searchsorted(labels[order], part), labels.size - 1)]
        at[start:start + part.size], found[start:start + part.size] = k, labels[k] == part
    absent = np.flatnonzero(~found)
    if absent.size:
        a = int(absent[0])
        raise DataError(f"{path}: probe {probe[a][:60]!r} (attempt {a + 1}) has no line in the cohort file; --cohort (bob's "
                        "T-norm scores: T-models x probes) needs every probe of the attempts")
    # each probe's scores against every model (NaN: none, or failed), once
    used, row = np.unique(at, return_inverse=True)
    row_of = np.full(labels.size, -1, dtype=np.int64)
    row_of[used] = np.arange(used.size)
    line = np.flatnonzero(row_of[rows.probe] >= 0)
    base = np.full((used.size, len(rows.claimed_labels)), np.nan)
    scores = rows.scores[line]
    base[row_of[rows.probe[line]], rows.claimed[line]] = scores if missing is None else \
        np.where(scores == missing, np.nan, scores)
    owner = np.empty(labels.size, dtype=object)
    owner[rows.probe] = np.asarray(rows.real_labels, dtype=object)[rows.real]
    own = owner[used].astype(str)
    row = row.ravel()
    # attempts naming another real class than the file's for their probe: rows of their own
    other = np.concatenate([np.flatnonzero(own[row[k:k + (1 << 18)]] != real[k:k + (1 << 18)]) + k
                            for k in range(0, row.size, 1 << 18)] + [np.zeros(0, dtype=np.int64)])
    if other.size:  # said (issue 42): the files disagree on whose probe it is, and so on the model left out
        import warnings

        a = int(other[0])
        more = np.unique(at[other]).size - 1
        warnings.warn(f"--cohort {path}: probe {str(probe[a])[:60]!r} is of real class {own[row[a]][:60]!r} there but "
                      f"{str(real[a])[:60]!r} in the attempts{f' (and {more:,} more probes)' if more else ''}; the "
                      "attempts' class is used (its cohort model left out): check that the cohort file is the "
                      "T-norm file of these very probes", stacklevel=2)
        extra: dict[tuple[int, str], int] = {}
        for a in other.tolist():
            row[a] = extra.setdefault((int(row[a]), str(real[a])), used.size + len(extra))
        pairs = list(extra)
        base = np.concatenate([base, base[[r for r, _ in pairs]]])
        own = np.concatenate([own, [c for _, c in pairs]])
        used = np.concatenate([used, used[[r for r, _ in pairs]]])
    cohorts = ProbeCohorts(base, rows.claimed_labels, row, own.tolist(), labels[used].tolist())
    if getattr(cal, "normalization", None) is not None:
        from calibrate.normalisation.decisions import check_cohort_file

        check_cohort_file(cal.normalization, cal.transform, cal.kind, cohorts, claimed, f"--cohort {path}")
    return cohorts


def command_inputs(artifact: Path | None, named: dict) -> tuple[tuple[str, Path], ...]:
    """A command's input files as (name, path) pairs for calibrate.files.user_output.check_target: ``artifact`` (a
    saved calibration, named ARTIFACT; None for none) with every file its loader reads (:func:`artifact_files`),
    then each path of ``named`` (the command line's name -> path, e.g. ``{"SCORES": p, "--cohort": None}``)
    that is given."""
    out: list = []
    if artifact is not None:
        out += [("ARTIFACT", artifact)] + [("a file of ARTIFACT", p) for p in artifact_files(artifact)]
    return tuple(out + [(name, path) for name, path in named.items() if path is not None])


def artifact_files(artifact: Path) -> list[Path]:
    """The files ``calibrate.load(artifact)`` reads or checks beyond ``artifact`` itself, when it is a run's
    output folder (or a ``calibration.json``, or a sharded run's head, in one): ``calibration.json``,
    ``manifest.json`` and every file the manifest lists, and a sharded run's parts, class lists and pooled
    samples (``*.npy``). Nothing for a calibration file of another name. Never raises: what cannot be read
    here is the loader's to report."""
    import os

    from calibrate.files.manifest import MANIFEST, MAX_DOC_BYTES
    from calibrate.contract.sharded import PART
    from calibrate.saved.partitioned import MAX_PARTS, read_head
    from calibrate.files.untrusted import plain_name, read_bounded

    try:
        path = Path(artifact)
        if path.is_dir():
            head = path / "calibration.json"
        elif path.name == "calibration.json" or read_head(path) is not None:
            head = path
        else:
            return []
        folder = head.parent
        names = {"calibration.json", MANIFEST}
        try:
            files = json.loads(read_bounded(folder / MANIFEST, "", "", MAX_DOC_BYTES, error=ValueError)).get("files")
            names.update(n for n in (files if isinstance(files, (dict, list)) else ()) if plain_name(n))
        except (ValueError, AttributeError, RecursionError):
            pass  # no manifest, or a damaged one: the loader says so
        parts = (read_head(head) or {}).get("parts")
        if isinstance(parts, int) and not isinstance(parts, bool):
            for k in range(min(max(parts, 0), MAX_PARTS)):
                names.update((f"calibration-{PART.format(k)}.json", f"classes-{PART.format(k)}.json"))
            with os.scandir(folder) as entries:
                names.update(e.name for e in entries if e.name.endswith(".npy") and plain_name(e.name))
        return [folder / n for n in sorted(names)]
    except (OSError, ValueError, TypeError, RuntimeError):
        return []


def read_groups_option(path: Path | None):
    """--groups FILE read and checked (calibrate.recipe.groups), or None."""
    if path is None:
        return None
    from calibrate.recipe.groups import read_groups

    return read_groups(path)
