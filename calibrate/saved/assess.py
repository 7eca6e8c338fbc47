"""How a saved calibration does on a score file it was not fitted on (``calibrate evaluate``).

The counts are the run's own (the FPR evaluator of a recipe run): achieved FPR = false accepts /
impostor attempts over the whole file, its ratio to the target, the exact (Clopper-Pearson) 95%
interval of the achieved FPR, and FNR = genuine attempts rejected / genuine attempts. Attempts
whose claimed class the calibration does not hold are left out and counted (``unknown``).

Beside them, as in a run (calibrate.statistics.verification): the FNR of one pooled threshold on the file's own scores
admitting the same share of its impostor attempts (``fnr_one_threshold``, ``fnr_cost``, and the paired
comparison on the same genuine attempts), how unevenly the false accepts fall on the claimed classes beside
binomial noise, and with groups (``--groups``) every group's same-group FMR and FNMR, for the calibration
and for that one threshold; :func:`verification` gives the file's EER, AUC, d', FNMR at fixed FMRs and DET.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from calibrate.errors import CalibrationError
from calibrate.statistics.order import clopper_pearson
from calibrate.contract.types import CodedLabels, GroupLabels, factorise, same_labels
from calibrate.statistics.verification import (STANDARD_FMRS, GroupCounts, PooledScores, class_spread, d_prime, det_rows,
                                               group_figures, hter, one_threshold, own_threshold, paired_fields,
                                               paired_fnr, verification_metrics)


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
    #: the FNR of one pooled threshold on the file's scores admitting the same share of its impostor attempts
    fnr_one_threshold: float | None = None
    #: fnr / fnr_one_threshold (None when either is unknown or the one threshold rejects none)
    fnr_cost: float | None = None
    #: the genuine attempts only the calibration rejects, only the one threshold rejects, McNemar's p-value
    fnr_paired: dict | None = None
    #: the one threshold itself: score_threshold (accept as the calibration's accept_if says), false accepts,
    #: fpr, fnr, and how its false accepts spread over classes (and groups)
    one_threshold: dict | None = None
    #: how the false accepts spread over the claimed classes (calibrate.statistics.verification.class_spread, and the observed
    #: shares of classes over 2x and 10x the target); in ``as_dict`` its keys sit in the row, as in results.json
    spread: dict = field(default_factory=dict)
    #: with groups: per group figures (calibrate.statistics.verification.group_figures), and the max/min ratios
    groups: dict | None = None
    fmr_same_group_max_over_min: float | None = None
    fnmr_max_over_min: float | None = None

    @property
    def hter(self) -> float | None:
        """bob.measure's half total error rate at the calibration's thresholds, (FPR + FNR) / 2."""
        return hter(self.fpr, self.fnr)

    def as_dict(self) -> dict:
        out = {}
        for key, value in asdict(self).items():
            out[key] = value
            if key == "fnr_cost":
                out["hter"] = self.hter
        out.update(out.pop("spread"))
        return out


def known_classes(cal, claimed: np.ndarray) -> np.ndarray:
    """Which claimed classes the calibration holds (a boolean mask)."""
    unique, inverse = factorise(claimed)
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


def as_distances(scores: np.ndarray, kind: str) -> np.ndarray:
    """Scores oriented as distances (lower = more alike; similarities negated, exactly)."""
    s = np.asarray(scores, dtype=np.float64)
    return -s if kind == "similarity" else s


def _checked(claimed, real, scores) -> tuple[np.ndarray | CodedLabels, np.ndarray | CodedLabels, np.ndarray]:
    """The attempts' claimed and real classes (:class:`CodedLabels` kept, anything else as str arrays) and scores."""
    c, r = (x if isinstance(x, CodedLabels) else np.asarray(x).astype(str) for x in (claimed, real))
    s = np.asarray(scores, dtype=np.float64)
    if not (c.shape == r.shape == s.shape) or s.ndim != 1:
        raise CalibrationError(f"claimed {c.shape}, real {r.shape} and scores {s.shape} must be 1-D and of one length")
    return c, r, s


class _Groups:
    """The attempts' group codes and the counts that do not depend on any decision."""

    def __init__(self, groups: GroupLabels, classes: np.ndarray, codes: np.ndarray, r: np.ndarray, genuine: np.ndarray,
                 d: np.ndarray):
        self.names = groups.names
        self.n = len(self.names) + 1
        of_class = groups.codes(classes)  # per distinct claimed class, then per attempt: one lookup per class
        self.claimed = of_class[codes]
        ur, r_codes = factorise(r)
        self.probe = groups.codes(ur)[r_codes]
        self.impostors = self.pairs(~genuine)
        self.genuine_mask = genuine
        self.genuine = np.bincount(self.claimed[genuine], minlength=self.n)
        self.classes = np.bincount(of_class, minlength=self.n)
        # per labelled group: its same-group impostor attempts (sorted) and its genuine ones, as distances
        same = ~genuine & (self.claimed == self.probe)
        self.d = d
        self.same = [np.sort(d[same & (self.claimed == g)]) for g in range(self.n - 1)]
        self.of_group = [genuine & (self.claimed == g) for g in range(self.n - 1)]

    def pairs(self, mask: np.ndarray) -> np.ndarray:
        return np.bincount(self.claimed[mask] * self.n + self.probe[mask], minlength=self.n * self.n).reshape(self.n,
                                                                                                             self.n)

    def figures(self, accepted: np.ndarray, own: bool = True) -> dict:
        """Per group figures of ``accepted``; ``own``: each group against one threshold of its own too."""
        imp = ~self.genuine_mask
        rejects = np.bincount(self.claimed[self.genuine_mask & ~accepted], minlength=self.n)
        pairs = self.pairs(imp & accepted)
        out = group_figures(GroupCounts(self.names, self.impostors, pairs, self.genuine, rejects, self.classes))
        if own:
            for g, name in enumerate(self.names):
                if name in out["groups"] and self.same[g].size:
                    out["groups"][name].update(own_threshold(self.same[g], int(pairs[g, g]), self.d[self.of_group[g]],
                                                             accepted[self.of_group[g]]))
        return out


def _spread(accepted: np.ndarray, genuine: np.ndarray, codes: np.ndarray, n_classes: int, unit_imp: np.ndarray,
            target: float) -> dict:
    fa = np.bincount(codes[~genuine & accepted], minlength=n_classes)
    out = class_spread(fa, unit_imp, target)
    scored = unit_imp > 0
    rate = fa[scored] / unit_imp[scored]
    out["share_classes_over_2x"] = float(np.mean(rate > 2 * target)) if rate.size else None
    out["share_classes_over_10x"] = float(np.mean(rate > 10 * target)) if rate.size else None
    return out


def assess(cal, claimed, real, scores, targets, probe_cohort_scores=None, groups: GroupLabels | None = None,
           task=None) -> list[Assessment]:
    """The figures of :class:`Assessment` at each target for attempts ``(claimed, real, score)``, all
    claiming classes the calibration holds (see :func:`known_classes`); ``probe_cohort_scores`` as
    ``Calibration.accept``'s, for a normalised calibration; ``groups``: figures per group; ``task``: a progress
    task (calibrate.contract.progress.Task) advanced by one as each target is judged."""
    c, r, s = _checked(claimed, real, scores)
    genuine = same_labels(c, r)
    n_imp, n_gen = int((~genuine).sum()), int(genuine.sum())
    d = as_distances(s, cal.kind)
    pooled = PooledScores.of(d[~genuine], d[genuine])
    uc, codes = factorise(c)
    unit_imp = np.bincount(codes[~genuine], minlength=uc.size)
    per_probe = np.bincount(factorise(r)[1][~genuine]).astype(np.float64)  # the probe identities' attempts
    probe_size = float(np.sum(per_probe ** 2) / per_probe.sum()) if n_imp else None
    by_group = _Groups(groups, uc, codes, r, genuine, d) if groups is not None and s.size else None
    out = []
    for target in targets:
        cohort = {} if probe_cohort_scores is None else {"probe_cohort_scores": probe_cohort_scores}
        accepted = cal.accept(c, s, target, **cohort) if s.size else np.zeros(0, dtype=bool)
        accepted = np.asarray(accepted, dtype=bool)
        fa = int(accepted[~genuine].sum())
        fr = int((~accepted[genuine]).sum())
        fpr = fa / n_imp if n_imp else None
        low, high = clopper_pearson(fa, n_imp) if n_imp else (None, None)
        p_low = p_high = None
        if n_imp and getattr(cal, "prediction", None):
            try:
                p_low, p_high = cal.predicted_fpr(target, attempts=n_imp, unit_size=probe_size)
            except CalibrationError:  # predicted at other targets only, or not at this one
                pass
        extra: dict = {}
        if by_group is not None:
            extra.update(by_group.figures(accepted))
        if n_imp:
            ref = one_threshold(pooled, fa)
            ref_accept = d <= ref.threshold
            t_score = (-ref.threshold if cal.kind == "similarity" else ref.threshold) if np.isfinite(ref.threshold) \
                else None
            reference = {"score_threshold": t_score, "false_accepts": ref.false_accepts, "fpr": ref.fpr,
                         "fnr": ref.fnr}
            extra["spread"] = _spread(accepted, genuine, codes, uc.size, unit_imp, float(target))
            ref_spread = _spread(ref_accept, genuine, codes, uc.size, unit_imp, float(target))
            reference.update({"fa_dispersion": ref_spread["fa_dispersion"],
                              "fa_share_top_classes": ref_spread["fa_share_top_classes"]})
            if n_gen:
                extra["fnr_paired"] = paired_fields(paired_fnr(accepted[genuine], ref_accept[genuine]), fa, ref)
                extra["fnr_one_threshold"] = ref.fnr
                extra["fnr_cost"] = (fr / n_gen) / ref.fnr if ref.fnr else None
            if by_group is not None:
                reference.update(by_group.figures(ref_accept, own=False))
            extra["one_threshold"] = reference
        out.append(Assessment(float(target), n_imp, fa, fpr, None if fpr is None else fpr / target, low, high,
                              n_gen, fr, fr / n_gen if n_gen else None, p_low, p_high, **extra))
        if task is not None:
            task.advance(1)
    return out


def verification(kind: str, claimed, real, scores, targets=(), classes: bool = True
                 ) -> tuple[dict, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """The file's verification figures with one pooled threshold (calibrate.statistics.verification.verification_metrics,
    with ``eer_score_threshold``, d' on the scores as given, and the EER's 95% bootstrap interval over the claimed
    classes, calibrate.statistics.eer_interval; over attempts with ``classes`` False or one class) and its
    DET rows (score thresholds, FMR, FNMR); every threshold in the file's own units (accept as ``kind`` says)."""
    from calibrate.statistics.eer_interval import attempt_interval, bin_counts, class_interval, grid, with_interval

    c, r, s = _checked(claimed, real, scores)
    genuine = same_labels(c, r)
    d = as_distances(s, kind)
    pooled = PooledScores.of(d[~genuine], d[genuine])
    fmrs = tuple(STANDARD_FMRS) + tuple(t for t in sorted(targets, reverse=True) if t not in STANDARD_FMRS)
    metrics = verification_metrics(pooled, fmrs)
    uc, codes = factorise(c)
    classes = classes and uc.size >= 2  # one class: nothing to resample but the attempts
    interval, units = (None, None), "enrolled classes" if classes else "attempts"
    if pooled.n_impostors and pooled.n_genuine:
        thresholds = grid(pooled, metrics["eer"])
        if classes:
            interval = class_interval(bin_counts(d[~genuine], codes[~genuine], thresholds, uc.size),
                                      bin_counts(d[genuine], codes[genuine], thresholds, uc.size))
        else:
            interval = attempt_interval(pooled, thresholds)
    metrics = with_interval(metrics, *interval, units)
    t = metrics.pop("eer_threshold")
    metrics["eer_score_threshold"] = (-t if kind == "similarity" else t) if np.isfinite(t) else None
    metrics["d_prime"] = d_prime(s[genuine], s[~genuine])
    metrics["score_kind"] = kind
    thresholds, fmr, fnmr = det_rows(pooled)
    return metrics, ((-thresholds if kind == "similarity" else thresholds), fmr, fnmr)
