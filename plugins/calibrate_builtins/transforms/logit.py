"""Transforms ``neg-log-complement`` and ``shifted-logit``: distances confined to [0, 1] -> [0, inf).

The paper's model needs distances in [0, inf); for measures confined to [0, 1] (such as the
mutual subspace distance 1 - cos theta) it prescribes "a logit-like function" (citing Cramer
2003, on the origins of logistic regression). Both transforms here are strictly increasing
bijections from [0, 1) onto [0, inf) with t(0) = 0, so they keep the order of the distances (and
hence which comparisons a threshold accepts), keep 0 meaning "identical", and send d -> 1 to
infinity:

``neg-log-complement``: t(d) = -log(1 - d) = log(1 / (1 - d)).
    The simplest such map; t(d) = d + d^2/2 + ... near 0, so the small distances that decide
    thresholds at a low FPR are nearly unchanged. For d = 1 - cos(theta), t = -log cos(theta).

``shifted-logit``: t(d) = logit((d + eps) / (1 + eps)) - logit(eps / (1 + eps))
                        = log((d + eps) / eps) - log(1 - d).
    The logit itself, applied to d shifted away from 0 by ``eps`` (and rescaled so that 1 stays
    1), and shifted down so that t(0) = 0. ``eps`` sets where the logit's lower logarithmic
    branch starts: for d << eps the map is ~ d * (1 + 1/eps); eps = 1 gives
    t(d) = log((1 + d) / (1 - d)) = 2 artanh(d) = logit((1 + d) / 2); eps -> inf tends to
    ``neg-log-complement``; eps -> 0 tends to the plain logit (shifted), which stretches the
    neighbourhood of 0 logarithmically.

Which matches the paper? The paper states only the goal (a map to [0, inf)) and the family
(logit-like). The plain logit maps (0, 1) onto (-inf, inf), so it needs a shift; the obvious
shift, max(0, logit(d) - logit(eps)), clips every distance below eps to 0 and so erases exactly
the low tail of impostor distances that low-FPR thresholds are read from (and creates ties at 0
that a continuous chi-square model cannot fit). Shifting the argument instead, as here, keeps the
map strictly increasing. Of the two, ``neg-log-complement`` has no free parameter and leaves
small distances almost unchanged, so it is the closer reading of "a simple transformation";
``shifted-logit`` is the literal logit for users who want the logit's shape near 0.

Domain. Distances must lie in [0, 1); d == 1 (orthogonal subspaces) would map to infinity. With
``clip: c`` values in [1 - c, 1] are capped at 1 - c first; values below 0 or above 1 are always
an error (they are not distances confined to [0, 1]).
"""

from __future__ import annotations

import numpy as np

from calibrate.contract.base import Transform
from calibrate.errors import DataError, ParameterError


def _check_clip(clip: float | None) -> None:
    if clip is not None and not (isinstance(clip, (int, float)) and not isinstance(clip, bool)
                                 and np.isfinite(clip) and 0.0 < clip < 1.0):
        raise ParameterError(f"clip must be a number in (0, 1) (values above 1 - clip are capped there), got {clip!r}")


class _UnitIntervalTransform(Transform):
    name = ""
    accepts = ("distance",)

    def _domain(self, values: np.ndarray, kind: str) -> np.ndarray:
        if kind != "distance":
            raise DataError(f"transform {self.name}: the scores are similarities (higher = more alike), but this "
                            "transform needs distances confined to [0, 1]; use `transform: {plugin: similarity-to-distance}` "
                            "for similarity scores (for similarities in [0, 1], method: flip with upper: 1 gives 1 - s)")
        d = np.asarray(values, dtype=np.float64)
        upper = 1.0 if self.clip is None else 1.0 - self.clip
        outside = (d < 0) | ((d >= 1) if self.clip is None else (d > 1))
        if outside.any():
            bad = d[outside]
            n_one = int(np.count_nonzero(bad == 1))
            fix = ("distances equal to 1 map to infinity: set `clip:` (e.g. clip: 1.0e-6) to cap them at 1 - clip"
                   if self.clip is None and n_one else
                   "this transform is for distances confined to [0, 1]; for distances already in [0, inf) use "
                   "`transform: {plugin: identity}`")
            allowed = "[0, 1)" if self.clip is None else f"[0, 1] (clip: {self.clip:g})"
            raise DataError(f"transform {self.name}: {bad.size} of {d.size} distance(s) outside the allowed range "
                            f"{allowed}: smallest {bad.min():.6g}, largest {bad.max():.6g}"
                            f"{f', {n_one} equal to 1' if n_one else ''}; {fix}")
        return np.minimum(d, upper)


class NegLogComplement(_UnitIntervalTransform):
    """t(d) = -log(1 - d): distances in [0, 1) to [0, inf), strictly increasing, t(0) = 0.

    :param clip: cap distances at 1 - clip before transforming (so d = 1 maps to -log(clip)); default: d = 1 is an error.
    """

    name = "neg-log-complement"

    def __init__(self, *, clip: float | None = None):
        _check_clip(clip)
        self.clip = clip

    def _apply(self, values: np.ndarray, kind: str) -> np.ndarray:
        return -np.log1p(-self._domain(values, kind))

    def _inverse(self, distances: np.ndarray, kind: str) -> np.ndarray:
        return -np.expm1(-np.asarray(distances, dtype=np.float64))  # d = 1 - exp(-t)


class ShiftedLogit(_UnitIntervalTransform):
    """t(d) = logit((d + eps) / (1 + eps)) - logit(eps / (1 + eps)) = log(1 + d / eps) - log(1 - d).

    :param eps: shift of the argument away from 0 (> 0); 1 gives 2 artanh(d), large values approach neg-log-complement.
    :param clip: cap distances at 1 - clip before transforming; default: d = 1 is an error.
    """

    name = "shifted-logit"

    def __init__(self, *, eps: float = 1.0, clip: float | None = None):
        if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not np.isfinite(eps) or eps <= 0:
            raise ParameterError(f"eps must be a positive number, got {eps!r}")
        _check_clip(clip)
        self.eps, self.clip = float(eps), clip

    def _apply(self, values: np.ndarray, kind: str) -> np.ndarray:
        d = self._domain(values, kind)
        return np.log1p(d / self.eps) - np.log1p(-d)

    def _inverse(self, distances: np.ndarray, kind: str) -> np.ndarray:
        t = np.asarray(distances, dtype=np.float64)
        return np.expm1(t) / (np.exp(t) + 1.0 / self.eps)  # e^t (1 - d) = 1 + d / eps, solved for d
