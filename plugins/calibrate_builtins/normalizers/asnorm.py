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

from calibrate.contract.base import Normalizer
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
        cap = self.top_k or DEFAULT_TOP_K
        most = min(cap + 1, width)
        # each row's `most` smallest usable distances, ascending, and where each of their columns went
        keyed = np.where(usable, cohort, np.inf)
        picked = np.argpartition(keyed, most - 1, axis=1)[:, :most] if most < width else \
            np.broadcast_to(np.arange(width), keyed.shape)
        firsts = np.take_along_axis(keyed, picked, axis=1)
        order = np.argsort(firsts, axis=1, kind="stable")
        top = np.take_along_axis(firsts, order, axis=1)
        place = np.full(cohort.shape, -1, dtype=np.int16 if most < 2 ** 15 else np.int64)
        np.put_along_axis(place, np.take_along_axis(picked, order, axis=1),
                          np.broadcast_to(np.arange(most, dtype=place.dtype), top.shape), axis=1)
        gone = left_out >= 0
        # k: the top k of an attempt's cohort (of those left, for top_k unset); an attempt keeps the row's first k,
        # or if the member it leaves out is no larger than the k-th smallest, the first k + 1 without one member
        # of that value (at its place, or the k-th's when they tie): `extra` 0 or 1
        n_gone = usable.sum(axis=1) - 1
        k_row = np.full(n_gone.shape, self.top_k) if self.top_k is not None else np.minimum(cap, n_gone)
        k = k_row[rows]
        col = np.where(gone, left_out, 0)
        inside = gone & (cohort[rows, col] <= top[rows, np.maximum(k - 1, 0)])
        at = place[rows, col].astype(np.int64)
        at = np.where(inside, np.where((at >= 0) & (at <= k), at, k - 1), -1)
        # an attempt leaving nothing out keeps the first min(cap, n) = k + 1 when n <= cap, else k
        extra = np.where(gone, inside, (self.top_k is None) & (n_gone[rows] < cap)).astype(np.int64)
        variant = np.arange(2 * top.shape[0]) % 2
        lengths = np.repeat(k_row, 2) + variant
        firsts_of = np.arange(most)[None, :] < lengths[:, None]
        mean, std = moments(np.repeat(top, 2, axis=0), firsts_of, 2 * rows + extra, at)
        return {"mean": mean, "std": std}

    def _normalize(self, distances, enrolled, probe) -> np.ndarray:
        return 0.5 * (standardised(distances, enrolled) + standardised(distances, probe))
