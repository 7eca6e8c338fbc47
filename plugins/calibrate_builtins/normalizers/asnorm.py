"""Normaliser ``asnorm``: adaptive S-norm, each side's closest cohort distances only.

As S-norm, but each side's mean and std come from its ``top_k`` smallest cohort distances (the most
similar cohort members: after the transform everything is a distance), after Matejka et al. (2017),
"Analysis of score normalization in multilingual speaker recognition", as in SpeechBrain and WeSpeaker.
The core hands ``_statistics`` the cohort rows sorted ascending, so the top K are the first K columns.
Where many attempts share a row (``_statistics_left_out``), each row is partially sorted once (its K + 1
smallest distances): an attempt leaving out a member ranked K or beyond keeps the row's top K, any other
keeps the first K + 1 without that one, and the mean and spread of either come from moments.moments,
correctly rounded, so both paths give the same bits.

``top_k`` by default is 200 (the order of the values those papers use), or the whole cohort of a row
that has fewer than 200 distances: there AS-norm is S-norm. An explicit ``top_k`` needs every class and
probe to have at least that many cohort distances, and is refused naming the first that has fewer.
"""

from __future__ import annotations

import numpy as np

from calibrate.base import Normalizer
from calibrate.errors import ParameterError

from .moments import mean_and_spread, moments, standardised

#: the top-K used when none is given (or the row's whole cohort, if smaller)
DEFAULT_TOP_K = 200


class ASNorm(Normalizer):
    """AS-norm: S-norm over each side's top_k closest cohort distances (adaptive cohort).

    :param top_k: how many of the closest cohort distances each side keeps; default 200, or a row's whole cohort where it has fewer (S-norm there). An explicit value needs every class and probe to have at least that many.
    """

    progress_name = "asnorm"  # as registered, in messages
    sides = ("enrolled", "probe")

    def __init__(self, *, top_k: int | None = None):
        if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 2):
            raise ParameterError(f"top_k must be a whole number of at least 2 (a spread needs two distances), got {top_k!r}")
        self.top_k = top_k

    def min_members(self) -> int:
        return 2 if self.top_k is None else self.top_k

    def _statistics(self, cohort: np.ndarray) -> dict[str, np.ndarray]:
        k = self.top_k if self.top_k is not None else min(DEFAULT_TOP_K, cohort.shape[1])
        return mean_and_spread(cohort[:, :k])

    def _statistics_left_out(self, cohort, usable, rows, left_out) -> dict[str, np.ndarray]:
        width = cohort.shape[1]
        most = min((self.top_k or DEFAULT_TOP_K) + 1, width)
        # each row's `most` smallest usable distances, ascending, and where each of their columns went
        keyed = np.where(usable, cohort, np.inf)
        picked = np.argpartition(keyed, most - 1, axis=1)[:, :most] if most < width else \
            np.broadcast_to(np.arange(width), keyed.shape)
        firsts = np.take_along_axis(keyed, picked, axis=1)
        order = np.argsort(firsts, axis=1, kind="stable")
        top = np.take_along_axis(firsts, order, axis=1)
        place = np.full(cohort.shape, -1, dtype=np.int64)
        np.put_along_axis(place, np.take_along_axis(picked, order, axis=1),
                          np.broadcast_to(np.arange(most), top.shape), axis=1)
        gone = left_out >= 0
        kept = usable.sum(axis=1)[rows] - gone
        k = np.full(rows.shape, self.top_k) if self.top_k is not None else np.minimum(DEFAULT_TOP_K, kept)
        col = np.where(gone, left_out, 0)
        value = cohort[rows, col]
        # a member left out changes the top k only if it is no larger than the k-th smallest; then the top k is
        # the first k + 1 without one member of that value (at its place, or the k-th's when they tie)
        inside = gone & (value <= top[rows, k - 1])
        at = place[rows, col]
        at = np.where(inside, np.where((at >= 0) & (at <= k), at, k - 1), -1)
        length = k + inside
        pairs, which = np.unique(rows * (most + 1) + length, return_inverse=True)
        firsts_of = np.arange(most)[None, :] < (pairs % (most + 1))[:, None]
        mean, std = moments(top[pairs // (most + 1)], firsts_of, which.ravel(), at)
        return {"mean": mean, "std": std}

    def _normalize(self, distances, enrolled, probe) -> np.ndarray:
        return 0.5 * (standardised(distances, enrolled) + standardised(distances, probe))
