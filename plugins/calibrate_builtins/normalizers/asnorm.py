"""Normaliser ``asnorm``: adaptive S-norm, each side's closest cohort distances only.

As S-norm, but each side's mean and std come from its ``top_k`` smallest cohort distances (the most
similar cohort members: after the transform everything is a distance), after Matejka et al. (2017),
"Analysis of score normalization in multilingual speaker recognition", as in SpeechBrain and WeSpeaker.
The core hands the cohort rows sorted ascending, so the top K are the first K columns.

``top_k`` by default is 200 (the order of the values those papers use), or the whole cohort of a row
that has fewer than 200 distances: there AS-norm is S-norm. An explicit ``top_k`` needs every class and
probe to have at least that many cohort distances, and is refused naming the first that has fewer.
"""

from __future__ import annotations

import numpy as np

from calibrate.base import Normalizer
from calibrate.errors import ParameterError

from .moments import mean_and_spread, standardised

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

    def _normalize(self, distances, enrolled, probe) -> np.ndarray:
        return 0.5 * (standardised(distances, enrolled) + standardised(distances, probe))
