"""What the built-in normalisers share: a cohort row's mean and spread, and the standardised distance.

The spread is the population standard deviation (ddof 0, as bob.bio.base's Z- and T-norm). Each row
is reduced on its own (numpy reduces the last axis of a C-ordered block row by row), so a row's
statistics do not depend on the rows computed with it: a run and a saved calibration's ``accept``
get the same numbers for the same cohort.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np


def mean_and_spread(cohort: np.ndarray) -> dict[str, np.ndarray]:
    """``{"mean", "std"}`` of each row of cohort distances."""
    rows = np.ascontiguousarray(cohort, dtype=np.float64)
    return {"mean": rows.mean(axis=1), "std": rows.std(axis=1)}


def standardised(distances: np.ndarray, stats: Mapping[str, np.ndarray]) -> np.ndarray:
    """(d - mean) / std per attempt; a spread of 0 gives a non-finite z, which the core refuses by name."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return (distances - stats["mean"]) / stats["std"]
