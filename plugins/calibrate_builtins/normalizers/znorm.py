"""Normaliser ``znorm``: Z-norm, the enrolled side only.

z = (d - mean_j) / std_j, with mean_j and std_j those of class j's distances to the impostor cohort
(bob's Z-norm: the model scored against Z-probes). Statistics per class, so they are saved with a
calibration and a decision needs no probe cohort scores. Not the *estimator* ``znorm``, which
standardises each class's training impostors inside the estimator (registries are per kind).
"""

from __future__ import annotations

import numpy as np

from .moments import MeanAndSpread, standardised


class ZNorm(MeanAndSpread):
    """Z-norm: (d - mean) / std of the claimed class's distances to the impostor cohort (enrolled side)."""

    progress_name = "znorm"  # as registered, in messages
    sides = ("enrolled",)

    def _normalize(self, distances, enrolled, probe) -> np.ndarray:
        return standardised(distances, enrolled)
