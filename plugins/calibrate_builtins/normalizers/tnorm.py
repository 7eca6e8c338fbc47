"""Normaliser ``tnorm``: T-norm, the probe side only.

z = (d - mean_i) / std_i, with mean_i and std_i those of probe i's distances to the cohort models
(bob's T-norm: the probe scored against T-models), the claimed class left out when the cohort holds
it. Every decision needs the probe's cohort scores.
"""

from __future__ import annotations

import numpy as np

from .moments import MeanAndSpread, standardised


class TNorm(MeanAndSpread):
    """T-norm: (d - mean) / std of the probe's distances to the cohort models (probe side)."""

    progress_name = "tnorm"  # as registered, in messages
    sides = ("probe",)

    def _normalize(self, distances, enrolled, probe) -> np.ndarray:
        return standardised(distances, probe)
