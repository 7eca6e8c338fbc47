"""Distance ``euclidean``: between the means of two sets (for one-sample sets, the samples)."""

from __future__ import annotations

import numpy as np

from calibrate.contract.base import Distance, RunContext
from calibrate.errors import DataError
from calibrate.contract.types import SetCollection


def _means(sets: SetCollection) -> np.ndarray:
    dims = {s.shape[1] for s in sets.samples}
    if len(dims) != 1:
        raise DataError(f"euclidean: sets have different feature dimensions {sorted(dims)}")
    return np.stack([s.mean(axis=0) for s in sets.samples])


class Euclidean(Distance):
    """Euclidean distance between set means (between samples when every set has one sample)."""

    def _pairwise(self, probes: SetCollection, gallery: SetCollection, context: RunContext) -> np.ndarray:
        from scipy.spatial.distance import cdist  # imported here: listing plugins must not load scipy

        a, b = _means(probes), _means(gallery)
        if a.shape[1] != b.shape[1]:
            raise DataError(f"euclidean: probes have {a.shape[1]} features, gallery {b.shape[1]}")
        return cdist(a, b)
