"""Normaliser ``snorm``: symmetric normalisation, the mean of Z-norm and T-norm.

z = ((d - mean_j) / std_j + (d - mean_i) / std_i) / 2, class j's side from its distances to the
impostor cohort, probe i's from its distances to the cohort models (as in SpeechBrain and
WeSpeaker, whole cohorts; ``asnorm`` keeps the closest only).
"""

from __future__ import annotations

import numpy as np

from calibrate.contract.base import Normalizer

from .moments import mean_and_spread, mean_and_spread_left_out, standardised


class SNorm(Normalizer):
    """S-norm: the mean of Z-norm (enrolled side) and T-norm (probe side)."""

    progress_name = "snorm"  # as registered, in messages
    sides = ("enrolled", "probe")

    def _statistics(self, cohort: np.ndarray) -> dict[str, np.ndarray]:
        return mean_and_spread(cohort)

    def _statistics_left_out(self, cohort, usable, rows, left_out) -> dict[str, np.ndarray]:
        return mean_and_spread_left_out(cohort, usable, rows, left_out)

    def _normalize(self, distances, enrolled, probe) -> np.ndarray:
        return 0.5 * (standardised(distances, enrolled) + standardised(distances, probe))
