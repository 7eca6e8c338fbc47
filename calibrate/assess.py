"""How a saved calibration does on a score file it was not fitted on (``calibrate evaluate``).

The counts are the run's own (the FPR evaluator of a recipe run): achieved FPR = false accepts /
impostor attempts over the whole file, its ratio to the target, the exact (Clopper-Pearson) 95%
interval of the achieved FPR, and FNR = genuine attempts rejected / genuine attempts. Attempts
whose claimed class the calibration does not hold are left out and counted (``unknown``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from .errors import CalibrationError
from .stats import clopper_pearson


@dataclass(frozen=True)
class Assessment:
    """One target's figures on an evaluation file."""

    target_fpr: float
    impostor_attempts: int
    false_accepts: int
    fpr: float | None
    ratio: float | None
    fpr_ci_low: float | None
    fpr_ci_high: float | None
    genuine_attempts: int
    false_rejects: int
    fnr: float | None
    #: the calibration's predicted interval for the FPR measured on this many attempts, if it holds one
    predicted_fpr_low: float | None = None
    predicted_fpr_high: float | None = None

    def as_dict(self) -> dict:
        return asdict(self)


def known_classes(cal, claimed: np.ndarray) -> np.ndarray:
    """Which claimed classes the calibration holds (a boolean mask)."""
    names = np.asarray(claimed).astype(str)
    unique, inverse = np.unique(names, return_inverse=True)
    held = np.array([str(u) in cal for u in unique.tolist()], dtype=bool)
    return held[inverse] if unique.size else np.zeros(0, dtype=bool)


def absent_note(cal, present: np.ndarray, source: str) -> str | None:
    """A note naming how many of the calibration's enrolled classes no attempt claims (their thresholds
    go unjudged), or None when every one is claimed; ``present``: the distinct claimed classes it holds."""
    absent = len(cal) - present.size
    if absent <= 0:
        return None
    names = getattr(cal, "classes", None)
    example = ""
    if names is not None:
        claimed = set(present.tolist())
        first = next((c for c in names if c not in claimed), None)
        example = f" (e.g. {first[:60]!r})" if first is not None else ""
    return (f"{source}: {absent} of the calibration's {len(cal):,} enrolled classes have no attempt{example}; "
            "their thresholds are not judged here")


def assess(cal, claimed, real, scores, targets, probe_cohort_scores=None) -> list[Assessment]:
    """The figures of :class:`Assessment` at each target for attempts ``(claimed, real, score)``, all
    claiming classes the calibration holds (see :func:`known_classes`); ``probe_cohort_scores`` as
    ``Calibration.accept``'s, for a normalised calibration."""
    c = np.asarray(claimed).astype(str)
    r = np.asarray(real).astype(str)
    s = np.asarray(scores, dtype=np.float64)
    if not (c.shape == r.shape == s.shape) or s.ndim != 1:
        raise CalibrationError(f"claimed {c.shape}, real {r.shape} and scores {s.shape} must be 1-D and of one length")
    genuine = c == r
    n_imp, n_gen = int((~genuine).sum()), int(genuine.sum())
    out = []
    for target in targets:
        cohort = {} if probe_cohort_scores is None else {"probe_cohort_scores": probe_cohort_scores}
        accepted = cal.accept(c, s, target, **cohort) if s.size else np.zeros(0, dtype=bool)
        fa = int(accepted[~genuine].sum())
        fr = int((~accepted[genuine]).sum())
        fpr = fa / n_imp if n_imp else None
        low, high = clopper_pearson(fa, n_imp) if n_imp else (None, None)
        p_low = p_high = None
        if n_imp and getattr(cal, "prediction", None):
            try:
                p_low, p_high = cal.predicted_fpr(target, attempts=n_imp)
            except CalibrationError:  # predicted at other targets only, or not at this one
                pass
        out.append(Assessment(float(target), n_imp, fa, fpr, None if fpr is None else fpr / target, low, high,
                              n_gen, fr, fr / n_gen if n_gen else None, p_low, p_high))
    return out
