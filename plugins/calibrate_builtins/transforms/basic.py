"""Transforms ``identity`` and ``similarity-to-distance``."""

from __future__ import annotations

from typing import Literal

import numpy as np

from calibrate.contract.base import Transform
from calibrate.errors import DataError, ParameterError
from calibrate.contract.statecheck import field, number
from calibrate.contract.types import DistanceMatrix


class Identity(Transform):
    """Leaves distances as they are (they must already be distances in [0, inf))."""

    accepts = ("distance",)

    def _apply(self, values: np.ndarray, kind: str) -> np.ndarray:
        if kind != "distance":
            raise DataError("transform identity: the scores are similarities (higher = more alike); use "
                            "`transform: {plugin: similarity-to-distance}`")
        return values

    def _inverse(self, distances: np.ndarray, kind: str) -> np.ndarray:
        return np.asarray(distances, dtype=np.float64)


#: share of training scores allowed above a given `upper:` (rounding beyond the bound); more is a mistake
MAX_ABOVE_UPPER = 0.001


class SimilarityToDistance(Transform):
    """Turns similarity scores into distances in [0, inf).

    ``flip``: d = upper - s, where ``upper`` defaults to the largest training score; evaluation
    scores above it (closer than anything seen in training) map to 0.
    ``neg-log``: d = -log(s / upper) for scores in (0, upper].

    :param method: flip or neg-log.
    :param upper: the largest possible similarity (e.g. 1 for scores in [0, 1]); default: the largest training score.
    """

    accepts = ("similarity",)

    def __init__(self, *, method: Literal["flip", "neg-log"] = "flip", upper: float | None = None):
        if method not in ("flip", "neg-log"):
            raise ParameterError(f"method must be flip or neg-log, got {str(method)[:40]!r}")
        if upper is not None and (isinstance(upper, bool) or not isinstance(upper, (int, float))
                                  or not np.isfinite(upper)):
            raise ParameterError(f"upper must be a finite number, got {str(upper)[:40]!r}")
        self.method, self.upper = method, upper
        self._upper = upper

    def _fit(self, train: DistanceMatrix) -> None:
        if train.kind != "similarity":
            raise DataError("transform similarity-to-distance: the data are already distances; use `transform: {plugin: identity}`")
        used = train.values[train.valid]
        if self.upper is None:
            if used.size == 0:
                raise DataError("transform similarity-to-distance: no training scores to take the upper bound from")
            self._upper = float(used.max())
            return
        above = int(np.count_nonzero(used > self.upper))
        if above > MAX_ABOVE_UPPER * used.size:
            raise DataError(f"transform similarity-to-distance: upper: {self.upper:g} is below {above} of the "
                            f"{used.size} training scores (largest {float(used.max()):.6g}); they would all become "
                            "distance 0 and every one of them would be accepted. Set `upper:` to the largest score "
                            "the matcher can give (e.g. 1 for cosine similarity), or leave it out to use the largest "
                            "training score")

    def depends_on_data(self) -> bool:
        return self.upper is None  # the largest training score; with `upper:` the map is fixed

    def _apply(self, values: np.ndarray, kind: str) -> np.ndarray:
        if kind != "similarity":
            raise DataError("transform similarity-to-distance: the data are already distances; use `transform: {plugin: identity}`")
        upper = self._upper
        if self.method == "flip":
            return np.maximum(upper - values, 0.0)
        if upper <= 0:
            raise DataError(f"transform similarity-to-distance (neg-log): upper bound {upper} must be positive")
        if np.any(values <= 0):
            raise DataError(f"transform similarity-to-distance (neg-log): scores must be > 0, found {values.min():.6g}; "
                            "use method: flip for scores that can be 0 or negative")
        return np.maximum(-np.log(values / upper), 0.0)

    def _inverse(self, distances: np.ndarray, kind: str) -> np.ndarray:
        d = np.asarray(distances, dtype=np.float64)
        return self._upper - d if self.method == "flip" else self._upper * np.exp(-d)

    def out_of_range(self, values: np.ndarray, kind: str) -> int:
        # a score above the upper bound maps to distance 0 (flip) or is clipped there (neg-log)
        return int(np.count_nonzero(np.asarray(values, dtype=np.float64) > self._upper))

    def fitted_state(self) -> dict:
        return {"upper": self._upper}

    def set_fitted_state(self, state: dict) -> "SimilarityToDistance":
        upper = number(field(state, "upper"), "upper")  # a finite JSON number, not a string (calibrate.contract.statecheck)
        if self.upper is not None and upper != float(self.upper):
            raise DataError(f"transform similarity-to-distance: saved state.upper {upper!r} contradicts the parameter "
                            f"upper: {self.upper!r}")
        if self.method == "neg-log" and upper <= 0:
            raise DataError(f"transform similarity-to-distance (neg-log): saved state.upper {upper!r} must be positive")
        self._upper = upper
        return self
