"""Checks of what the scores say about themselves, where a mistake would otherwise pass silently.

The score direction: with ``kind: similarity`` a genuine comparison (the probe's real class is the
claimed one) should score higher than an impostor one, with ``kind: distance`` lower. Data whose
genuine scores sit on the reject side were read the wrong way round: every threshold set at a low
FPR then rejects nearly every genuine user (FNR near 100%), and nothing else in a run says why.

The check is the area under the ROC curve of the scores as read (AUC: the chance that a genuine
comparison lies on the accept side of an impostor one, ties counting half). A matcher that works
has AUC well above 0.5; a useless one about 0.5; one read the wrong way round well below 0.5.
Below :data:`REVERSED_AUC` the scores are refused (the fix is the other ``kind``); between it and
0.5 a note says that the scores barely separate.

The ids (:func:`id_problem`): a comparison is genuine when its claimed id equals the probe's real id, so
two spellings of the same ids (``001`` and ``cfp001``) make every genuine score an impostor's, silently.
When no claimed id is ever a real id, and the comparisons whose ids differ only in spelling score apart from
the others, that is an error; without that evidence (impostor-only data are legitimate), or when few ids
coincide, a note.

The scale (:func:`scale_problem`): a calibration's thresholds mean something for scores on the scale it
was fitted on. Scores beyond its training range by more than the range's width (:data:`FAR_OUTSIDE`
widths) are far outside it: most of them far outside is an error, some a note.
"""

from __future__ import annotations

import re

import numpy as np

from calibrate.errors import DataError
from calibrate.formatting import shown
from calibrate.contract.types import CodedLabels, factorise

#: an AUC (as read) below this means the scores were read the wrong way round: an error
REVERSED_AUC = 0.25
#: fewer genuine comparisons than this are too few to judge the direction by
MIN_GENUINE = 5
#: the AUC is computed on at most this many scores of each kind (evenly strided: +-0.003 at worst)
MAX_SCORES = 100_000


def _strided(values: np.ndarray) -> np.ndarray:
    v = np.asarray(values, dtype=np.float64).ravel()
    return v if v.size <= MAX_SCORES else v[:: -(-v.size // MAX_SCORES)]


def accept_side_auc(genuine: np.ndarray, impostor: np.ndarray, kind: str) -> float:
    """P(a genuine score lies on the accept side of an impostor score) + P(tie) / 2, exactly, in
    O((G + I) log I) on at most MAX_SCORES of each: higher is accepted for similarities, lower for distances."""
    g = _strided(genuine)
    imp = np.sort(_strided(impostor))
    if g.size == 0 or imp.size == 0:
        return float("nan")
    below = np.searchsorted(imp, g, side="left")  # impostors strictly below each genuine score
    not_above = np.searchsorted(imp, g, side="right")  # ... and those equal to it
    ties = not_above - below
    better = below if kind == "similarity" else imp.size - not_above
    return float((better.sum() + 0.5 * ties.sum()) / (g.size * imp.size))


def direction_problem(genuine: np.ndarray, impostor: np.ndarray, kind: str, source: str, fix: str) -> str | None:
    """The error message for scores read the wrong way round, or None when the direction is right
    (or there are too few genuine comparisons to tell)."""
    g = np.asarray(genuine, dtype=np.float64).ravel()
    if g.size < MIN_GENUINE or np.size(impostor) == 0:
        return None
    auc = accept_side_auc(g, impostor, kind)
    if not auc < REVERSED_AUC:
        return None
    other, plural = ("distance", "distances") if kind == "similarity" else ("similarity", "similarities")
    side = "lower" if kind == "similarity" else "higher"
    return (f"{source}: the {g.size} genuine comparisons (probe's real class = claimed class) score {side} than the "
            f"impostor ones (only {100 * auc:.3g}% of genuine-impostor pairs are ordered as kind: {kind} says; a "
            f"matcher read the right way round gives well over 50%), so every low-FPR threshold would reject nearly "
            f"every genuine user; the scores are {plural}: {fix}")


def check_direction(genuine: np.ndarray, impostor: np.ndarray, kind: str, source: str, fix: str) -> None:
    """Raise :class:`DataError` when the genuine scores sit on the reject side (see the module)."""
    problem = direction_problem(genuine, impostor, kind, source, fix)
    if problem:
        raise DataError(problem)


def weak_separation_note(genuine: np.ndarray, impostor: np.ndarray, kind: str, source: str) -> str | None:
    """A note when the genuine and impostor scores barely separate (AUC between REVERSED_AUC and 0.6)."""
    g = np.asarray(genuine, dtype=np.float64).ravel()
    if g.size < MIN_GENUINE or np.size(impostor) == 0:
        return None
    auc = accept_side_auc(g, impostor, kind)
    if REVERSED_AUC <= auc < 0.6:
        return (f"{source}: genuine and impostor scores barely separate ({100 * auc:.3g}% of genuine-impostor pairs "
                f"ordered as kind: {kind} says; 50% is chance): check `kind:` and the matcher before trusting the FNR")
    return None


def unchecked_direction_note(genuine: int, kind: str, source: str, fix: str) -> str | None:
    """A note when too few genuine comparisons exist to check the direction: what was assumed, and
    what the other reading would be (nothing in impostor scores alone tells the two apart)."""
    if genuine >= MIN_GENUINE:
        return None
    which, plural = ("higher", "similarities") if kind == "similarity" else ("lower", "distances")
    held = "no genuine comparison" if genuine == 0 else f"only {genuine} genuine comparison(s)"
    return (f"{source}: {held} (probe's real class = claimed class), too few to check "
            f"the score direction: the scores are read as {plural} ({which} = more alike). If that is the wrong way "
            f"round, every threshold rejects nearly every genuine user: then set {fix}")


#: fewer of the claimed ids than this share ever being a probe's real id: a note (the ids may be spelled two ways)
FEW_SHARED_IDS = 0.1


def _spelling(label: str) -> str:
    """What an id says once its spelling is set aside: its runs of digits without leading zeros (``cfp001`` and
    ``001`` -> ``1``), or, without digits, its letters and digits in one case (``Alice-B`` -> ``aliceb``)."""
    digits = re.findall(r"[0-9]+", label)
    if digits:
        return "-".join(d.lstrip("0") or "0" for d in digits)
    return re.sub(r"[\W_]+", "", label.casefold())


def spelled_alike(claimed, real) -> np.ndarray:
    """Whether each claimed id and real id (arrays that broadcast together, e.g. a row and a column of labels)
    are the same id spelled two ways (:func:`_spelling`), whatever they are letter by letter."""
    def keys(labels) -> np.ndarray:
        shape = labels.shape if isinstance(labels, CodedLabels) else np.shape(labels)
        uniq, inverse = factorise(labels)
        return np.array([_spelling(u) for u in uniq.tolist()], dtype=object)[inverse].reshape(shape)

    return keys(claimed) == keys(real)


def id_problem(claimed, real, source: str, fix: str, evidence=None) -> tuple[str | None, str | None]:
    """(error, note) on how the claimed ids and the probes' real ids coincide, each naming examples of both
    spellings; ``fix`` ends the message, in the caller's words.

    No claimed id is ever a real id: no comparison is genuine. That is an error when the comparisons whose ids are
    :func:`spelled_alike` score apart from the others (by the AUC as read, at least 0.75 or at most 0.25: they are
    the genuine ones, written two ways) and a note otherwise (impostor-only data are legitimate: probes of other
    people than the enrolled). ``evidence``: called only then, gives (the scores of the comparisons spelled alike,
    the other scores, their kind, one (claimed, real) pair spelled alike), or None. Fewer than
    :data:`FEW_SHARED_IDS` of the claimed ids ever being a real id: a note."""
    c, r = factorise(claimed)[0], factorise(real)[0]
    if c.size == 0 or r.size == 0:
        return None, None
    shared = np.intersect1d(c, r, assume_unique=True)
    if shared.size >= FEW_SHARED_IDS * c.size:
        return None, None
    only_claimed = np.setdiff1d(c, shared, assume_unique=True)
    only_real = np.setdiff1d(r, shared, assume_unique=True)
    spellings = f"claimed ids such as {shown(only_claimed, 3)}; real ids such as {shown(only_real, 3)}"
    if shared.size:
        return None, (f"{source}: only {shared.size:,} of the {c.size:,} claimed ids are ever a probe's real id "
                      f"({spellings}); the comparisons of the others are all taken for impostors': check that both "
                      "spell the ids the same way")
    found = evidence() if evidence is not None else None
    if found is not None:
        alike, others, kind, (a, b) = found
        if np.size(alike) >= MIN_GENUINE and np.size(others) and abs(accept_side_auc(alike, others, kind) - 0.5) >= 0.25:
            return (f"{source}: no claimed id is ever a probe's real id ({spellings}), yet the comparisons whose ids "
                    f"differ only in spelling (e.g. claimed {str(a)[:40]!r} and real {str(b)[:40]!r}) score apart from "
                    "the others, as genuine ones do: the same ids are written two ways, and every genuine score would "
                    f"be taken for an impostor's; {fix}"), None
    return None, (f"{source}: no claimed id is ever a probe's real id ({spellings}), so every comparison is taken "
                  f"for an impostor's; if they name the same people two ways, {fix}")


#: a score beyond the calibration's training range by more than this many of the range's widths is far outside it
FAR_OUTSIDE = 1.0


def scale_problem(values, training, source: str, kind: str = "similarity") -> tuple[str | None, str | None]:
    """(error, note) on scores far outside the calibration's training scores ``training`` ((low, high[, genuine
    seen]), score units, or None when the calibration did not record them): more than half of them far outside is
    an error (they are on another scale: the thresholds mean nothing for them), some of them a note with the count.
    When the training scores held no genuine comparison (impostors only: ``calibrate.fit`` of a mapping, image
    sets), scores beyond them on the genuine side (above for similarities, below for distances) may be genuine
    attempts of a strong matcher: only those far out on the impostor side count toward the error."""
    v = np.asarray(values, dtype=np.float64).ravel()
    if training is None or v.size == 0:
        return None, None
    low, high = float(training[0]), float(training[1])
    genuine_seen = len(training) > 2 and bool(training[2])
    margin = FAR_OUTSIDE * ((high - low) or max(abs(low), abs(high), 1.0))
    below, above = v < low - margin, v > high + margin
    far = int(np.count_nonzero(below | above))
    if far == 0:
        return None, None
    decisive = far if genuine_seen else int(np.count_nonzero(above if kind == "distance" else below))
    said = (f"{far:,} of the {v.size:,} scores ({100 * far / v.size:.3g}%) lie far outside the calibration's training "
            f"scores [{low:.6g}, {high:.6g}] (these span [{v.min():.6g}, {v.max():.6g}])")
    if not genuine_seen and decisive < far:
        said += ("; it saw no genuine training scores, so those beyond them on the genuine side may be genuine "
                 "attempts")
    if 2 * decisive > v.size:
        return (f"{source}: {said}: they are on another scale than the calibration was fitted on (another matcher, or "
                "scores scaled), so its thresholds mean nothing for them; give scores on the calibration's scale, or "
                "fit a calibration on scores like these"), None
    return None, (f"{source}: {said}; decisions on them extrapolate the calibration: check that they come from the "
                  "matcher and scale it was fitted on")


def training_span(matrix) -> tuple[float, float, bool] | None:
    """What a calibration saves of its training scores (``training.scores`` and ``training.scores_genuine``):
    the lowest and highest valid score of ``matrix`` (genuine ones included), and whether it holds a genuine
    comparison (a probe whose class is enrolled); None when nothing is valid."""
    span = matrix.score_range()
    if span is None:
        return None
    return (*span, bool(np.isin(matrix.probe_classes, matrix.gallery_classes).any()))


def list_evidence(claimed, real, scores, kind: str):
    """:func:`id_problem`'s ``evidence`` for comparisons given one by one (a score list's columns)."""
    def evidence():
        alike = spelled_alike(claimed, real)
        if not alike.any():
            return None
        i = int(np.flatnonzero(alike)[0])
        values = np.asarray(scores, dtype=np.float64)
        return values[alike], values[~alike], kind, (claimed[i], real[i])
    return evidence
