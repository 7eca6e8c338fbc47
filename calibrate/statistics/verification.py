"""Verification figures of scored attempts, in ISO/IEC 19795-1 terms (FMR, FNMR, DET): a public core module.

Shared by a run's evaluation (the ``fpr`` evaluator) and ``calibrate evaluate``, so that both say the
same thing about the same attempts:

* :class:`PooledScores`: the impostor and genuine attempts of an evaluation, sorted once; every figure
  of one pooled threshold (the baseline anyone gets from ``sklearn.metrics.roc_curve`` or bob.measure in
  one line) is read off them by binary search.
* :func:`one_threshold`: the loosest single threshold that admits no more of the impostor attempts than
  an estimator did, i.e. the pooled DET read at the estimator's achieved FPR; :func:`paired_fnr` compares
  the genuine attempts both reject (McNemar's exact test on the discordant ones).
* :func:`verification_metrics`: EER (with pyeer's eer_low/eer_high), AUC, d', FNMR at fixed FMRs and FMR at fixed
  FNMRs (and at zero), as pyeer and bob.measure report them; :func:`det_rows`: the DET as rows spaced on the probit
  scale; :func:`hter`: bob.measure's half total error rate. The EER's confidence interval is
  calibrate.statistics.eer_interval's.
* :func:`class_spread`: how unevenly false accepts fall on enrolled classes, beside what binomial
  noise alone would give under one common FPR.
* :func:`group_figures` and :func:`widening`: per demographic group (ISO/IEC 19795-10), the FMR over
  same-group impostor attempts, the FMR over all of a group's impostor attempts and the FNMR, with
  Clopper-Pearson intervals; whether one set of thresholds widens the differential beyond another's (the log
  max/min ratios over 2 standard errors apart, one-sided).

Convention: scores are *distances* and an attempt is accepted when ``d <= t``. Callers with similarity
scores pass them negated (exact in floating point), and thresholds back negated.

Ties are counted as the accept rule says: a threshold accepts every attempt tied with it, so where
impostor scores tie no threshold admits a share between the counts on either side of the tie, and
:func:`one_threshold` then admits fewer (never more) than the estimator it is compared with.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from calibrate.statistics.order import clopper_pearson

#: the FMRs at which ``fnmr_at_fmr`` is always reported (pyeer's FMR100, FMR1000, FMR10000), and the FNMRs at which
#: ``fmr_at_fnmr`` is
STANDARD_FMRS = (0.01, 0.001, 0.0001)
#: the most rows a DET table holds (det.csv)
DET_ROWS = 10_000
#: two-sided level of the paired comparison (McNemar's exact test): "beyond counting noise" below it
NOISE_LEVEL = 0.05
#: one threshold that admits fewer than this share of an estimator's false accepts (impostor scores tie at the
#: reference point, so no single threshold reaches the estimator's FPR) is not compared with it
SAME_FPR_SHARE = 0.5
#: the group of a class without one in a groups file
UNLABELLED = "unlabelled"


def _sorted_finite(values, what: str) -> np.ndarray:
    v = np.sort(np.asarray(values, dtype=np.float64).ravel())
    if v.size and not (np.isfinite(v[0]) and np.isfinite(v[-1])):
        raise ValueError(f"{what} scores must be finite")
    return v


@dataclass(frozen=True)
class PooledScores:
    """The impostor and genuine attempts of an evaluation as distances, each sorted ascending.

    Every count is a binary search: ``accepted_*(t)`` is how many attempts ``d <= t`` accepts.
    """

    impostors: np.ndarray
    genuine: np.ndarray

    @classmethod
    def of(cls, impostors, genuine) -> "PooledScores":
        """Sorted copies of both (finite distances; similarity scores negated by the caller)."""
        return cls(_sorted_finite(impostors, "impostor"), _sorted_finite(genuine, "genuine"))

    @property
    def n_impostors(self) -> int:
        return int(self.impostors.size)

    @property
    def n_genuine(self) -> int:
        return int(self.genuine.size)

    def accepted_impostors(self, t) -> np.ndarray:
        return np.searchsorted(self.impostors, np.asarray(t, dtype=np.float64), side="right")

    def accepted_genuine(self, t) -> np.ndarray:
        return np.searchsorted(self.genuine, np.asarray(t, dtype=np.float64), side="right")

    def fmr(self, t) -> np.ndarray:
        """The share of impostor attempts ``d <= t`` accepts."""
        return self.accepted_impostors(t) / max(self.n_impostors, 1)

    def fnmr(self, t) -> np.ndarray:
        """The share of genuine attempts ``d <= t`` rejects."""
        return 1.0 - self.accepted_genuine(t) / max(self.n_genuine, 1)

    # every figure below reads the attempts through these (and the counts above), so that attempts that are not in
    # one place (a sharded run's: calibrate.statistics.binned_scores) answer the same questions

    def impostor_at(self, ranks):
        """The impostor distances at 0-based ``ranks`` (ascending order)."""
        return self.impostors[ranks]

    def genuine_at(self, ranks):
        """The genuine distances at 0-based ``ranks``."""
        return self.genuine[ranks]

    def auc_counts(self) -> tuple[int, int]:
        """(sum over genuine attempts of the impostor attempts more alike, of those tied with it): :func:`auc`'s."""
        right = np.searchsorted(self.impostors, self.genuine, side="right")
        left = np.searchsorted(self.impostors, self.genuine, side="left")
        return int((self.n_impostors - right).sum()), int((right - left).sum())

    def d_prime(self) -> float:
        """:func:`d_prime` of the two sets of attempts, on the scale they are given."""
        return d_prime(self.genuine, self.impostors)


@dataclass(frozen=True)
class OneThreshold:
    """One threshold for every class (accept when ``d <= threshold``) and what it does to the attempts."""

    threshold: float
    false_accepts: int
    impostor_attempts: int
    genuine_accepted: int
    genuine_attempts: int

    @property
    def fpr(self) -> float | None:
        return self.false_accepts / self.impostor_attempts if self.impostor_attempts else None

    @property
    def fnr(self) -> float | None:
        return 1.0 - self.genuine_accepted / self.genuine_attempts if self.genuine_attempts else None

    def accepts(self, distances) -> np.ndarray:
        return np.asarray(distances, dtype=np.float64) <= self.threshold


def loosest_below(pooled: PooledScores, false_accepts: int) -> float:
    """The largest threshold that accepts at most ``false_accepts`` of the impostor attempts: just below the
    (false_accepts + 1)-th smallest impostor distance (``inf`` when every one may be accepted)."""
    k = int(false_accepts)
    if k < 0:
        raise ValueError(f"false accepts must be >= 0, got {k}")
    if k >= pooled.n_impostors:
        return math.inf
    return float(np.nextafter(pooled.impostor_at(k), -np.inf))


def one_threshold(pooled: PooledScores, false_accepts: int) -> OneThreshold:
    """The loosest single threshold admitting no more than ``false_accepts`` impostor attempts: one pooled
    threshold at the same share of this evaluation's impostors as an estimator that admitted that many
    (fewer when impostor scores tie there), with its genuine attempts accepted."""
    t = loosest_below(pooled, false_accepts)
    return OneThreshold(t, int(pooled.accepted_impostors(t)), pooled.n_impostors, int(pooled.accepted_genuine(t)),
                        pooled.n_genuine)


def at_fmr(pooled: PooledScores, fmr: float) -> OneThreshold | None:
    """The loosest single threshold whose FMR is at most ``fmr`` (bob.measure's ``far_threshold``), or None
    when the impostor attempts are fewer than 1 / fmr (the FMR cannot be measured there)."""
    n = pooled.n_impostors
    if n == 0 or fmr * n < 1 - 1e-9:
        return None
    return one_threshold(pooled, int(math.floor(fmr * n + 1e-9)))


def at_fnmr(pooled: PooledScores, fnmr: float) -> OneThreshold | None:
    """The strictest single threshold whose FNMR is at most ``fnmr`` (bob.measure's ``frr_threshold``): the
    k-th smallest genuine distance, k = ceil((1 - fnmr) x genuine attempts); None when the genuine attempts are fewer
    than 1 / fnmr (the FNMR cannot be measured there)."""
    n = pooled.n_genuine
    if n == 0 or fnmr * n < 1 - 1e-9:
        return None
    k = math.ceil(n * (1.0 - fnmr) - 1e-9)
    t = float(pooled.genuine_at(k - 1)) if k > 0 else float(np.nextafter(pooled.genuine_at(0), -np.inf))
    return OneThreshold(t, int(pooled.accepted_impostors(t)), pooled.n_impostors, int(pooled.accepted_genuine(t)), n)


def hter(fmr: float | None, fnmr: float | None) -> float | None:
    """bob.measure's half total error rate at one set of thresholds, (FMR + FNMR) / 2; None when either is unknown."""
    if fmr is None or fnmr is None or not (math.isfinite(fmr) and math.isfinite(fnmr)):
        return None
    return (fmr + fnmr) / 2.0


def mcnemar_p(worse: int, better: int) -> float:
    """Exact two-sided McNemar p-value of ``worse`` against ``better`` discordant pairs (a sign test: under
    no difference each discordant pair is either way with probability 1/2)."""
    from scipy.special import bdtr

    n = int(worse) + int(better)
    if n == 0:
        return 1.0
    return float(min(1.0, 2.0 * bdtr(min(int(worse), int(better)), n, 0.5)))


@dataclass(frozen=True)
class PairedComparison:
    """Two decisions on the same genuine attempts: how many only the estimator rejected (``worse``), how
    many only the other threshold rejected (``better``), and whether the difference is beyond counting
    noise (McNemar's exact test)."""

    worse: int
    better: int
    genuine_attempts: int

    @property
    def p_value(self) -> float:
        return mcnemar_p(self.worse, self.better)

    @property
    def z(self) -> float | None:
        """The paired difference over its standard error, ``(worse - better) / sqrt(worse + better)``."""
        n = self.worse + self.better
        return (self.worse - self.better) / math.sqrt(n) if n else None

    @property
    def per_1000(self) -> float | None:
        """How many more genuine attempts per 1,000 the estimator rejects (negative: fewer)."""
        return 1000.0 * (self.worse - self.better) / self.genuine_attempts if self.genuine_attempts else None

    def beyond_noise(self, level: float = NOISE_LEVEL) -> bool:
        return self.worse + self.better > 0 and self.p_value < level


def cost_words(fnr: float | None, fnr_one: float | None) -> str:
    """The FNR cost as report.md and ``calibrate evaluate`` write it."""
    if fnr is None or fnr_one is None:
        return "n/a"
    if fnr_one > 0:
        return f"{fnr / fnr_one:.2f}x"
    return "n/a (one threshold rejects none)" if fnr > 0 else "1 (neither rejects any)"


def paired_fields(paired: PairedComparison, false_accepts: int, reference: OneThreshold) -> dict:
    """results.json's ``fnr_paired`` (and ``calibrate evaluate``'s): the discordant genuine attempts, the extra rejects
    per 1,000, McNemar's p-value, ``same_fpr`` (False when impostor scores tie where one threshold would reach the
    estimator's false accepts and it admits fewer than :data:`SAME_FPR_SHARE` of them: the two are then not at one
    FPR) and ``beyond_noise`` (p < 0.05 at the same FPR: the verdict a report states in words)."""
    same = reference.false_accepts >= SAME_FPR_SHARE * false_accepts
    return {"rejected_only_by_estimator": paired.worse, "rejected_only_by_one_threshold": paired.better,
            "extra_rejects_per_1000": paired.per_1000, "p_value": paired.p_value, "same_fpr": bool(same),
            "beyond_noise": bool(same and paired.beyond_noise())}


def paired_fnr(estimator_accepts, other_accepts) -> PairedComparison:
    """Compare two decisions on the same genuine attempts (boolean arrays in one order)."""
    a = np.asarray(estimator_accepts, dtype=bool)
    b = np.asarray(other_accepts, dtype=bool)
    if a.shape != b.shape:
        raise ValueError(f"paired decisions of shapes {a.shape} and {b.shape}")
    return PairedComparison(int(np.count_nonzero(~a & b)), int(np.count_nonzero(a & ~b)), int(a.size))


def _scaled_gap(pooled: PooledScores, t: float) -> int:
    """(FNMR - FMR) x (genuine attempts x impostor attempts) at ``t``, exactly, as an integer: rejected genuine x
    impostors - accepted impostors x genuine (float rates would let rounding decide exact ties)."""
    rejected = pooled.n_genuine - int(pooled.accepted_genuine(t))
    return rejected * pooled.n_impostors - int(pooled.accepted_impostors(t)) * pooled.n_genuine


def _last_at_least(at, n: int, pooled: PooledScores) -> int:
    """The last rank i of ``n`` sorted values (``at(i)``: the value) with FNMR(at(i)) >= FMR(at(i)), or -1."""
    lo, hi = 0, n  # FNMR - FMR is non-increasing in the threshold: binary search its sign
    while lo < hi:
        mid = (lo + hi) // 2
        if _scaled_gap(pooled, float(at(mid))) >= 0:
            lo = mid + 1
        else:
            hi = mid
    return lo - 1


def eer(pooled: PooledScores) -> tuple[float, float]:
    """(EER, its threshold): at the threshold where FMR and FNMR are closest (bob.measure's rule; on an exact tie,
    the stricter one), the mean of the two. Candidates are the attempts' own scores and -inf (nothing
    accepted); FNMR - FMR is a non-increasing step function, so the closest pair lies on either side of
    its change of sign, found by binary search. Gaps are compared in integers (:func:`_scaled_gap`)."""
    if pooled.n_impostors == 0 or pooled.n_genuine == 0:
        return float("nan"), float("nan")
    candidates_low, candidates_high = [-math.inf], []
    for at, n in ((pooled.impostor_at, pooled.n_impostors), (pooled.genuine_at, pooled.n_genuine)):
        i = _last_at_least(at, n, pooled)
        if i >= 0:
            candidates_low.append(float(at(i)))
        if i + 1 < n:
            candidates_high.append(float(at(i + 1)))
    picks = [max(candidates_low)] + ([min(candidates_high)] if candidates_high else [])
    gaps = [abs(_scaled_gap(pooled, t)) for t in picks]
    best = picks[0] if len(picks) == 1 or gaps[0] <= gaps[1] else picks[1]  # the stricter threshold on a tie
    return (float(pooled.fmr(best)) + float(pooled.fnmr(best))) / 2.0, best


def auc(pooled: PooledScores) -> float:
    """The area under the ROC curve: the chance that a genuine attempt scores more alike than an impostor
    one, ties counting half (sklearn's ``roc_auc_score``, bob.measure's ``roc_auc_score``)."""
    if pooled.n_impostors == 0 or pooled.n_genuine == 0:
        return float("nan")
    above, ties = pooled.auc_counts()
    return float((above + 0.5 * ties) / (pooled.n_genuine * pooled.n_impostors))


def d_prime(genuine, impostors) -> float:
    """The decidability index |mean_g - mean_i| / sqrt((var_g + var_i) / 2) (pyeer's, population variances),
    on whatever scale the scores are given."""
    g = np.asarray(genuine, dtype=np.float64)
    i = np.asarray(impostors, dtype=np.float64)
    if g.size < 2 or i.size < 2:
        return float("nan")
    spread = math.sqrt((float(g.var()) + float(i.var())) / 2.0)
    return abs(float(g.mean()) - float(i.mean())) / spread if spread > 0 else float("nan")


def verification_metrics(pooled: PooledScores, fmrs: Sequence[float] = STANDARD_FMRS,
                         fnmrs: Sequence[float] = STANDARD_FMRS) -> dict:
    """EER and its threshold; ``eer_low``/``eer_high``, pyeer's (Maio et al. 2002, FVC2000): the lower and the higher
    of FMR and FNMR at that threshold, whose mean the EER is (where the rates jump; not a confidence interval);
    AUC, FNMR at each of ``fmrs`` (None where fewer than 1 / fmr impostor attempts measure it), FMR at each of
    ``fnmrs`` (:func:`at_fnmr`; None where fewer than 1 / fnmr genuine attempts), at zero FMR (pyeer's ZeroFMR)
    and the FMR at zero FNMR (ZeroFNMR), and the attempt counts. Thresholds are distances (accept ``d <= t``);
    ``d_prime`` is the caller's (it needs the score scale)."""
    rate, threshold = eer(pooled)
    at = {}
    for f in fmrs:
        point = at_fmr(pooled, f)
        at[repr(float(f))] = None if point is None else point.fnr
    at_g = {}
    for f in fnmrs:
        point = at_fnmr(pooled, f)
        at_g[repr(float(f))] = None if point is None else point.fpr
    zero = one_threshold(pooled, 0) if pooled.n_impostors else None
    loosest = float(pooled.genuine_at(pooled.n_genuine - 1)) if pooled.n_genuine else math.nan
    rates = ((float(pooled.fmr(threshold)), float(pooled.fnmr(threshold)))
             if pooled.n_impostors and pooled.n_genuine else (math.nan, math.nan))
    return {"eer": rate, "eer_threshold": threshold, "eer_low": min(rates), "eer_high": max(rates),
            "auc": auc(pooled), "fnmr_at_fmr": at, "fmr_at_fnmr": at_g,
            "fnmr_at_zero_fmr": None if zero is None else zero.fnr,
            "fmr_at_zero_fnmr": float(pooled.fmr(loosest)) if pooled.n_genuine and pooled.n_impostors else None,
            "impostor_attempts": pooled.n_impostors, "genuine_attempts": pooled.n_genuine}


def det_rows(pooled: PooledScores, extra: Sequence[float] = (), max_rows: int = DET_ROWS
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(thresholds ascending, FMR, FNMR): the DET at thresholds whose FMR and FNMR levels are evenly spaced
    on the probit scale (half the rows each, every order statistic when there are fewer), from zero FMR
    (just below the smallest impostor) to zero FNMR, plus the thresholds ``extra`` (e.g. each operating
    point's one-threshold reference); at most ``max_rows``. FMR rises and FNMR falls down the rows."""
    from scipy.special import ndtr, ndtri

    ni, ng = pooled.n_impostors, pooled.n_genuine
    if ni == 0 or ng == 0:
        return np.empty(0), np.empty(0), np.empty(0)
    extra = [float(t) for t in extra if np.isfinite(t)][: max_rows // 10]
    each = max(1, (max_rows - len(extra) - 2) // 2)

    def levels(at, n: int) -> np.ndarray:
        if n <= each:
            return np.asarray(at(np.arange(n)), dtype=np.float64)
        p = ndtr(np.linspace(ndtri(0.5 / n), ndtri(1 - 0.5 / n), each))
        return np.asarray(at(np.clip(np.ceil(p * n).astype(np.int64) - 1, 0, n - 1)), dtype=np.float64)

    start = np.nextafter(min(pooled.impostor_at(0), pooled.genuine_at(0)), -np.inf)
    t = np.unique(np.concatenate([[start], levels(pooled.impostor_at, ni), levels(pooled.genuine_at, ng), extra,
                                  [max(pooled.impostor_at(ni - 1), pooled.genuine_at(ng - 1))]]))
    if t.size > max_rows:  # only when the extras pushed it over: keep the ends and the extras, thin the rest
        keep = np.isin(t, np.asarray(extra)) | (np.arange(t.size) == 0) | (np.arange(t.size) == t.size - 1)
        rest = np.flatnonzero(~keep)
        drop = rest[np.linspace(0, rest.size - 1, t.size - max_rows).astype(np.int64)]
        t = np.delete(t, drop)
    return t, pooled.fmr(t).astype(np.float64), pooled.fnmr(t).astype(np.float64)


# ---- per enrolled class -------------------------------------------------------------------------------

def class_spread(false_accepts, attempts, target: float, factors: Sequence[float] = (2.0, 10.0),
                 top: float = 0.05) -> dict:
    """How unevenly false accepts fall on enrolled classes (``false_accepts[i]`` of ``attempts[i]`` each; classes
    without attempts are left out), beside what binomial noise alone gives when every class has the same FPR p
    (the pooled achieved FPR):

    * ``share_classes_over_{f}x_noise``: the share of classes expected above f x ``target`` by chance alone, beside
      the observed share the caller reports (classes with a few hundred attempts exceed 2x often by chance);
    * ``fa_dispersion``: Pearson's chi-square over degrees of freedom, sum (fa_i - n_i p)^2 / (n_i p (1 - p)) / (C - 1):
      about 1 under binomial noise alone, larger when some classes attract far more false accepts than others;
    * ``fa_share_top_classes``: the share of all false accepts held by the ``top`` share (5%) of classes with most.
    """
    from scipy.special import bdtrc

    fa = np.asarray(false_accepts, dtype=np.float64)
    n = np.asarray(attempts, dtype=np.int64)
    keep = n > 0
    fa, n = fa[keep], n[keep]
    out: dict = {}
    total = float(fa.sum())
    p = total / float(n.sum()) if n.size and n.sum() > 0 else math.nan
    for f in factors:
        key = f"share_classes_over_{f:g}x_noise"
        if not n.size or not np.isfinite(p):
            out[key] = None
        else:
            out[key] = float(np.mean(bdtrc(np.floor(f * target * n).astype(np.int64), n, p)))
    if n.size >= 2 and 0.0 < p < 1.0:
        expected = n.astype(np.float64) * p
        out["fa_dispersion"] = float(np.sum((fa - expected) ** 2 / (expected * (1 - p))) / (n.size - 1))
    else:
        out["fa_dispersion"] = None
    if total > 0:
        m = max(1, math.ceil(top * n.size))
        out["fa_share_top_classes"] = float(np.sort(fa)[::-1][:m].sum() / total)
    else:
        out["fa_share_top_classes"] = None
    return out


# ---- per demographic group --------------------------------------------------------------------------

@dataclass(frozen=True)
class GroupCounts:
    """Counts of one set of decisions by group (``names``, then the unlabelled classes last):

    * ``impostors[a, b]`` / ``false_accepts[a, b]``: impostor attempts (and those accepted) claiming a class of
      group a by a probe whose real class is in group b;
    * ``genuine[a]`` / ``false_rejects[a]``: genuine attempts of group a's classes (and those rejected);
    * ``classes[a]``: enrolled classes of group a.
    """

    names: tuple[str, ...]
    impostors: np.ndarray
    false_accepts: np.ndarray
    genuine: np.ndarray
    false_rejects: np.ndarray
    classes: np.ndarray


def _rate(k: int, n: int) -> float | None:
    return k / n if n else None


def _ratio(values: list[float]) -> float | None:
    """max / min of the rates given (None when fewer than two, or the smallest is 0)."""
    if len(values) < 2 or min(values) <= 0:
        return None
    return max(values) / min(values)


def group_figures(counts: GroupCounts) -> dict:
    """Per group: ``fmr_same_group`` (false accepts over impostor attempts by probes of the same group, the ISO/IEC
    19795-10 view) with its 95% Clopper-Pearson interval and counts, ``fmr`` over all the group's impostor
    attempts, ``fnmr`` with its interval; and across the labelled groups with attempts, the max/min ratios
    ``fmr_same_group_max_over_min`` and ``fnmr_max_over_min`` (None when a group has a rate of 0). The
    unlabelled classes are reported under :data:`UNLABELLED` (no same-group figures) and never in the ratios."""
    groups: dict[str, dict] = {}
    same_rates, fnmr_rates = [], []
    labelled = len(counts.names)
    for a, name in enumerate(list(counts.names) + [UNLABELLED]):
        if a == labelled and counts.classes[a] == 0 and counts.impostors[a].sum() == 0 and counts.genuine[a] == 0:
            continue  # no unlabelled classes: no row
        n_imp, n_fa = int(counts.impostors[a].sum()), int(counts.false_accepts[a].sum())
        n_gen, n_fr = int(counts.genuine[a]), int(counts.false_rejects[a])
        row = {"classes": int(counts.classes[a])}
        if a < labelled:
            s_imp, s_fa = int(counts.impostors[a, a]), int(counts.false_accepts[a, a])
            low, high = clopper_pearson(s_fa, s_imp) if s_imp else (None, None)
            row.update({"fmr_same_group": _rate(s_fa, s_imp), "fmr_same_group_ci_low": low,
                        "fmr_same_group_ci_high": high, "false_accepts_same_group": s_fa,
                        "impostor_attempts_same_group": s_imp})
            if s_imp:
                same_rates.append(s_fa / s_imp)
            if n_gen:
                fnmr_rates.append(n_fr / n_gen)
        g_low, g_high = clopper_pearson(n_fr, n_gen) if n_gen else (None, None)
        row.update({"fmr": _rate(n_fa, n_imp), "false_accepts": n_fa, "impostor_attempts": n_imp,
                    "fnmr": _rate(n_fr, n_gen), "fnmr_ci_low": g_low, "fnmr_ci_high": g_high,
                    "false_rejects": n_fr, "genuine_attempts": n_gen})
        groups[name] = row
    return {"groups": groups, "fmr_same_group_max_over_min": _ratio(same_rates),
            "fnmr_max_over_min": _ratio(fnmr_rates)}


def own_threshold(same_impostors: np.ndarray, same_false_accepts: int, genuine: np.ndarray,
                  accepted: np.ndarray) -> dict:
    """A group against one threshold of its own (issue 39): the loosest threshold on the group's same-group impostor
    distances (``same_impostors``, sorted) admitting no more than the estimator's ``same_false_accepts`` of them; its
    FNMR on the group's genuine distances (``genuine``) as ``fnmr_own_threshold``, and the paired comparison with the
    estimator's decisions on them (``accepted``) as ``fnmr_paired_own_threshold`` (:func:`paired_fields`). Empty
    without genuine attempts."""
    k = int(same_false_accepts)
    t = float(np.nextafter(same_impostors[k], -np.inf)) if k < same_impostors.size else math.inf
    return own_threshold_at(t, int(np.searchsorted(same_impostors, t, side="right")), same_impostors.size, k, genuine,
                            accepted)


def own_threshold_at(t: float, admitted: int, same: int, same_false_accepts: int, genuine: np.ndarray,
                     accepted: np.ndarray) -> dict:
    """:func:`own_threshold` given the group's own threshold ``t``, the same-group impostor attempts it admits
    (``admitted`` of ``same``) and the estimator's same-group false accepts: where the attempts are not in one
    place (a sharded run selects the threshold from every shard's attempts)."""
    genuine = np.asarray(genuine, dtype=np.float64)
    if not genuine.size:
        return {}
    theirs = genuine <= t
    return {"fnmr_own_threshold": 1.0 - float(theirs.mean()),
            "fnmr_paired_own_threshold": paired_fields(paired_fnr(accepted, theirs), int(same_false_accepts),
                                                       OneThreshold(t, int(admitted), int(same), 0, 0))}


def _extremes(groups: Mapping[str, dict], count: str, attempts: str) -> tuple[float, float] | None:
    """(log of max/min, its variance) of a rate over the labelled groups, counts k + 1/2 (so that a group with
    no event still gives a finite ratio): var(log k/n) ~ 1/k for a binomial count far from n."""
    rows = [g for name, g in groups.items() if name != UNLABELLED and g.get(attempts)]
    if len(rows) < 2:
        return None
    rates = [((g[count] + 0.5) / (g[attempts] + 0.5), g[count] + 0.5) for g in rows]
    hi, lo = max(rates), min(rates)
    return math.log(hi[0] / lo[0]), 1.0 / hi[1] + 1.0 / lo[1]


def widening(estimator: Mapping[str, dict], reference: Mapping[str, dict], which: str = "fmr_same_group"
             ) -> tuple[float, bool] | None:
    """Whether the estimator's max/min differential of ``which`` (``fmr_same_group`` or ``fnmr``) across groups is
    wider than the reference's (one threshold at the same overall FPR) beyond counting noise: (z, beyond) with z
    the difference of the two log max/min ratios over its standard error (the two treated as independent, which
    overstates the error, since both are counted on the same attempts), beyond when z > 2. None when fewer than
    two labelled groups have attempts."""
    keys = {"fmr_same_group": ("false_accepts_same_group", "impostor_attempts_same_group"),
            "fnmr": ("false_rejects", "genuine_attempts")}[which]
    est, ref = _extremes(estimator, *keys), _extremes(reference, *keys)
    if est is None or ref is None:
        return None
    z = (est[0] - ref[0]) / math.sqrt(est[1] + ref[1])
    return z, z > 2.0


#: the group differentials :func:`widened` looks at, in words
WHICH = {"fmr_same_group": "same-group FMR", "fnmr": "FNMR"}


def spread_words(x: float | None, fallback: str) -> str:
    return fallback if x is None else f"{x:.2f}"


def widened(results: Mapping[str, list]) -> dict[str, list[tuple[Any, str, float]]]:
    """Per estimator (``results``: label -> its TargetResult rows), the (row, which, z) where it widens a group
    differential beyond one threshold's and noise (:func:`widening` of the rows' ``groups`` figures)."""
    out: dict[str, list] = {}
    for label, rows in results.items():
        for r in rows:
            mine, theirs = r.extra.get("groups"), r.extra.get("one_threshold", {}).get("groups")
            if not mine or not theirs:
                continue
            for which in WHICH:
                said = widening(mine, theirs, which)
                if said is not None and said[1]:
                    out.setdefault(label, []).append((r, which, said[0]))
    return out


def widening_notes(results: Mapping[str, list]) -> list[str]:
    """The run's warning for each estimator that widens a differential between groups (:func:`widened`)."""
    notes = []
    for label, hits in widened(results).items():
        parts = [f"{WHICH[w]} at {100 * r.target_fpr:.3g}% (max/min {spread_words(r.extra.get(f'{w}_max_over_min'), 'inf')} "
                 f"against {spread_words(r.extra['one_threshold'].get(f'{w}_max_over_min'), 'inf')} for one threshold)"
                 for r, w, _ in hits]
        notes.append(f"WARNING: {label} widens the differential between demographic groups beyond what one pooled threshold "
                     f"at the same FPR gives, beyond counting noise: {'; '.join(parts)} (report.md: Demographic groups)")
    return notes
