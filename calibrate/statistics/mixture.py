"""Genuine comparisons hidden among scores given as impostor ones (issue 41).

``calibrate.fit(scores, classes)`` fits every score it is given as an impostor's. Given every comparison of a
gallery, genuine ones included, its thresholds at a low FPR land among the genuine scores (issue 41's face gallery:
FNR 49.3% at 0.1% against 4.15% on its impostor scores only), and nothing else says so. :func:`mixed_scores` looks
for what genuine comparisons leave behind: a second mode far on the accept side, in many classes.

How. Each class's scores are standardised by their own bulk (median and interquartile range, on the accept side
higher; runs of tied scores are first spread evenly over the half-gaps to the neighbouring distinct scores, so
integer scores do not make spikes), then pooled, less the classes that hold far more of the pooled top 0.2% than
their size gives them (:data:`TAIL`: a template that many impostors match has a far tail of its own). Impostor
scores alone: beyond its middle the pooled density
falls at a steady or quickening rate (a log-concave or exponential tail). Genuine scores among them: the density
falls, then stops falling or rises again (a plateau or a second bump). Over three equally spaced windows a < b < c
that is log-convexity, ``n_b^2 < n_a n_c``. The statistic is the signed root of the likelihood ratio of "the
window counts are a geometric sequence" (the boundary of log-concavity) against free counts, maximised over
windows of 1 to 16 of 240 bins. It fires when, for some windows, the root is at least :data:`MIN_ROOT`, the
convexity at least a factor :data:`MIN_FACTOR`, and the scores beyond window c come from at least
:data:`MIN_CLASSES` classes with none holding more than :data:`MAX_SHARE` of them (a mode that recurs across
classes, as genuine comparisons do; not one class's outliers). Measured rates: docs/embedding.md
(benchmarks/mixture_check.py).

What it cannot see: genuine scores that do not stand apart from the impostor tail (a weak matcher, a small
gallery), too few of them (at 1 per 2,000 impostor scores it fires on some data sets, not others), or a gallery of
fewer than :data:`MIN_CLASSES` classes; impostor scores with a second mode of their own (look-alikes) fire it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from calibrate.errors import DataError

#: the least signed root of the likelihood ratio that counts (impostor-only data measured: at most 4.7)
MIN_ROOT = 6.0
#: the least log-convexity n_a n_c / n_b^2 (counts + 1/2) that counts
MIN_FACTOR = 2.0
#: the scores beyond the second mode's start must come from at least this many classes ...
MIN_CLASSES = 5
#: ... none holding more than this share of them
MAX_SHARE = 0.5
#: fewer scores than this are not judged
MIN_SCORES = 500
#: classes with fewer scores than this are standardised by the pooled bulk instead of their own
SMALL_CLASS = 20
#: at most this many scores are read (evenly strided): the check takes about 0.2 s whatever the number of scores
MAX_SCORES = 1_000_000
#: histogram bins, from the pooled 10th percentile to the top, and the window widths in bins
BINS, WIDTHS, START = 240, (1, 2, 4, 8, 16), 0.1
#: the pooled top share whose classes are counted: a class holding far more of it than its size gives it is left out
TAIL = 0.002
#: standardised scores beyond this many interquartile ranges are counted at it (one wild score cannot stretch the bins)
CAP = 100.0


@dataclass(frozen=True)
class Mixture:
    """What :func:`mixed_scores` measured: ``root`` the statistic, ``factor`` the convexity, ``beyond`` the scores
    (of those read) from the start of the second mode on, in ``classes`` classes, the largest class's ``share`` of
    them; ``fired`` when all of it passes the module's bars."""

    root: float
    factor: float
    beyond: int
    classes: int
    share: float
    read: int
    fired: bool

    def finding(self) -> str:
        """The finding in words, without a fix."""
        return (f"the scores look like genuine and impostor comparisons mixed: {self.beyond:,} of {self.read:,} "
                f"({100 * self.beyond / max(self.read, 1):.2g}%), in {self.classes:,} classes, form a second mode far on "
                f"the accept side of each class's bulk (likelihood-ratio root {self.root:.3g}), so every low-FPR "
                "threshold would be set among genuine scores")


NOTHING = Mixture(0.0, 1.0, 0, 0, 1.0, 0, False)


class MixedScoresWarning(UserWarning):
    """Said when the caller states that every score is an impostor comparison and they look mixed all the same;
    ``mixture`` holds what was measured."""

    def __init__(self, message: str, mixture: Mixture):
        super().__init__(message)
        self.mixture = mixture


class MixedScores(DataError):
    """Scores given as impostor comparisons that look mixed with genuine ones; ``mixture`` holds what was measured
    (a caller may say the fix in its own words: ``calibrate fit`` names its options)."""

    def __init__(self, message: str, mixture: Mixture):
        super().__init__(message)
        self.mixture = mixture


def _spread_ties(xs: np.ndarray, cs: np.ndarray) -> np.ndarray:
    """``xs`` (sorted within each class ``cs``, classes ascending) with each run of equal scores of a class spread
    evenly over the half-gaps to the class's neighbouring distinct scores (a class of one distinct score: as is)."""
    n = xs.size
    new = np.ones(n, dtype=bool)
    new[1:] = (xs[1:] != xs[:-1]) | (cs[1:] != cs[:-1])
    starts = np.flatnonzero(new)
    if starts.size == n:
        return xs
    counts = np.diff(np.r_[starts, n])
    u, uc = xs[starts], cs[starts]
    gap = np.diff(u)
    same = uc[1:] == uc[:-1]
    left = np.r_[np.nan, np.where(same, gap, np.nan)] / 2  # half-gap to the class's previous distinct score
    right = np.r_[np.where(same, gap, np.nan), np.nan] / 2
    left = np.where(np.isnan(left), right, left)
    right = np.where(np.isnan(right), left, right)
    left, right = np.nan_to_num(left), np.nan_to_num(right)
    within = np.arange(n) - np.repeat(starts, counts)
    return np.repeat(u - left, counts) + (within + 0.5) / np.repeat(counts, counts) * np.repeat(left + right, counts)


def _quantiles(xs: np.ndarray, first: np.ndarray, count: np.ndarray, p: float) -> np.ndarray:
    """Each class's ``p`` quantile (linear interpolation) from its sorted run ``xs[first:first + count]``."""
    pos = p * (count - 1)
    lo = np.floor(pos).astype(np.int64)
    hi = np.minimum(lo + 1, count - 1)
    return xs[first + lo] + (pos - lo) * (xs[first + hi] - xs[first + lo])


def standardised(scores: np.ndarray, codes: np.ndarray, kind: str) -> tuple[np.ndarray, np.ndarray]:
    """(z, class code) of every score, sorted by class: the scores oriented (accept side higher), ties spread, each
    class's less its median over its interquartile range (a small class's, or one without spread: the pooled ones)."""
    x = scores if kind == "similarity" else -scores
    order = np.argsort(x)
    small = np.uint16 if codes.size and codes.max() < 2 ** 16 else np.int64  # a stable sort of uint16 is a radix sort
    order = order[np.argsort(codes[order].astype(small), kind="stable")]  # by class, then score: lexsort's, faster
    cs = codes[order]
    xs = _spread_ties(x[order], cs)
    first = np.flatnonzero(np.r_[True, cs[1:] != cs[:-1]])
    count = np.diff(np.r_[first, cs.size])
    q25, med, q75 = (_quantiles(xs, first, count, p) for p in (0.25, 0.5, 0.75))
    p25, pmed, p75 = np.percentile(xs, [25, 50, 75])
    own = (count >= SMALL_CLASS) & (q75 > q25)
    med = np.where(own, med, pmed)
    iqr = np.where(own, q75 - q25, (p75 - p25) or 1.0)
    run = np.repeat(np.arange(first.size), count)
    return (xs - med[run]) / iqr[run], cs


def _without_outlying_classes(z: np.ndarray, cs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``z`` and ``cs`` less the classes holding far more of the pooled top :data:`TAIL` than their size gives them
    (a Poisson count beyond its mean by 5 standard deviations and 5): a class whose template many impostors match
    has a far tail of its own, which is not a mode that recurs across classes."""
    top = z > np.quantile(z, 1 - TAIL)
    n = np.bincount(cs)
    expected = n * (top.sum() / z.size)
    outlying = np.bincount(cs[top], minlength=n.size) > expected + 5 * np.sqrt(expected) + 5
    if not outlying.any():
        return z, cs
    keep = ~outlying[cs]
    return z[keep], cs[keep]


def _root(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """The signed root of the likelihood ratio of counts (a, b, c) under free multinomial probabilities against
    probabilities in geometric sequence (1, r, r^2) / (1 + r + r^2): positive where b^2 < a c."""
    n, m = a + b + c, b + 2 * c
    qa, qb = m - 2 * n, m - n  # the MLE of r solves qa r^2 + qb r + m = 0 (qa < 0 unless all are in c)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.where(qa < 0, (-qb - np.sqrt(np.maximum(qb * qb - 4 * qa * m, 0))) / (2 * qa), np.inf)
        s = 1 + r + r * r

        def ll(k, p):
            return np.where(k > 0, k * np.log(np.where(p > 0, p, 1.0)), 0.0)

        free = ll(a, a / n) + ll(b, b / n) + ll(c, c / n)
        bound = ll(a, 1 / s) + ll(b, r / s) + ll(c, r * r / s)
    g = np.nan_to_num(np.maximum(2 * (free - bound), 0.0), nan=0.0, posinf=0.0)
    return np.where((b * b < a * c) & (n > 0), np.sqrt(g), 0.0)


def mixed_scores(scores, codes, kind: str) -> Mixture:
    """Whether scores given as impostor comparisons (``codes``: each score's class as an integer) look like genuine
    and impostor ones mixed (see the module); :data:`NOTHING` when there are too few to judge."""
    s = np.asarray(scores, dtype=np.float64).ravel()
    k = np.asarray(codes).ravel()
    if s.size > MAX_SCORES:
        step = -(-s.size // MAX_SCORES)
        s, k = s[::step], k[::step]
    keep = np.isfinite(s)
    s, k = s[keep], k[keep]
    if s.size < MIN_SCORES or np.unique(k).size < MIN_CLASSES:
        return NOTHING
    z, cs = standardised(s, k, kind)
    z, cs = _without_outlying_classes(z, cs)
    order = np.argsort(z, kind="stable")
    z, cs = np.minimum(z[order], CAP), cs[order]
    lo, hi, mid = z[int(START * (z.size - 1))], z[-1], np.median(z)
    if not hi > lo:
        return NOTHING
    hist, edges = np.histogram(z[z >= lo], bins=BINS, range=(lo, hi))
    cum = np.r_[0, np.cumsum(hist)].astype(np.float64)
    candidates = []  # (root, log factor, edge where c starts)
    for w in WIDTHS:
        win = cum[w:] - cum[:-w]  # win[i]: the count of bins i .. i + w - 1
        m = win.size
        for d in range(w, (m + 1) // 2):
            a, b, c = win[:m - 2 * d], win[d:m - d], win[2 * d:]
            log_factor = np.log(a + 0.5) + np.log(c + 0.5) - 2 * np.log(b + 0.5)
            ok = (log_factor >= np.log(MIN_FACTOR)) & (edges[d:d + b.size] >= mid)  # the valley beyond the middle
            root = np.where(ok, _root(a, b, c), 0.0)
            top = int(np.argmax(root))
            for i in {top, *np.flatnonzero(root >= MIN_ROOT).tolist()} if root[top] > 0 else ():
                candidates.append((float(root[i]), float(log_factor[i]), float(edges[i + 2 * d])))
    if not candidates:
        return NOTHING
    candidates.sort(reverse=True)
    best = None
    for root, log_factor, edge in candidates[:200]:
        beyond = cs[np.searchsorted(z, edge):]
        per = np.bincount(beyond)
        found = Mixture(root, float(np.exp(log_factor)), int(beyond.size), int(np.count_nonzero(per)),
                        float(per.max() / beyond.size) if beyond.size else 1.0, int(s.size), False)
        if root >= MIN_ROOT and found.classes >= MIN_CLASSES and found.share <= MAX_SHARE:
            return Mixture(**{**found.__dict__, "fired": True})
        best = best or found
    return best
