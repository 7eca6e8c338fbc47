"""What the built-in normalisers share: a cohort row's mean and spread, and the standardised distance.

The spread is the population standard deviation (ddof 0, as bob.bio.base's Z- and T-norm). Each row
is reduced on its own (numpy reduces the last axis of a C-ordered block row by row), so a row's
statistics do not depend on the rows computed with it: a run and a saved calibration's ``accept``
get the same numbers for the same cohort.

A row whose largest distance lies beyond 2**500 (or below 2**-500) is brought near 1 by a power of
two first, which is exact: its sum and squares neither overflow (distances near 1e300 gave a mean
and a std of inf) nor underflow. Every other row is reduced as it is, so its statistics are bit for
bit what they were before this scaling existed. The core refuses a spread of 0 or a rounding residue
(calibrate.cohort.statistics_problem: the ``std`` named in ``Normalizer.spreads``).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

#: rows whose largest |distance| lies outside [2**-LIMIT, 2**LIMIT] are scaled by a power of two first
LIMIT = 500


def mean_and_spread(cohort: np.ndarray) -> dict[str, np.ndarray]:
    """``{"mean", "std"}`` of each row of cohort distances (sorted ascending, as the core hands them)."""
    rows = np.ascontiguousarray(cohort, dtype=np.float64)
    largest = np.maximum(np.abs(rows[:, 0]), np.abs(rows[:, -1]))  # sorted: the largest magnitude is at an end
    far = (largest > 2.0 ** LIMIT) | (largest < 2.0 ** -LIMIT)
    if not far.any():
        return {"mean": rows.mean(axis=1), "std": rows.std(axis=1)}
    e = np.where(far, np.frexp(largest)[1], 0)
    rows = np.ldexp(rows, -e[:, None])
    return {"mean": np.ldexp(rows.mean(axis=1), e), "std": np.ldexp(rows.std(axis=1), e)}


def standardised(distances: np.ndarray, stats: Mapping[str, np.ndarray]) -> np.ndarray:
    """(d - mean) / std per attempt; a spread of 0 gives a non-finite z, which the core refuses by name."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        return (distances - stats["mean"]) / stats["std"]
