"""Normaliser ``snorm``: symmetric normalisation, the mean of Z-norm and T-norm.

z = ((d - mean_j) / std_j + (d - mean_i) / std_i) / 2, class j's side from its distances to the
impostor cohort, probe i's from its distances to the cohort models (as in SpeechBrain and
WeSpeaker, whole cohorts; ``asnorm`` keeps the closest only).
"""

from __future__ import annotations

import numpy as np

from .moments import MeanAndSpread, standardised


class SNorm(MeanAndSpread):
    """S-norm: the mean of Z-norm (enrolled side) and T-norm (probe side)."""

    progress_name = "snorm"  # as registered, in messages
    sides = ("enrolled", "probe")

    def _normalize(self, distances, enrolled, probe) -> np.ndarray:
        return 0.5 * (standardised(distances, enrolled) + standardised(distances, probe))
