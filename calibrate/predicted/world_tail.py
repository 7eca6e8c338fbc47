"""The reference world's lower tail (calibrate.predicted.world): the tail models tried in turn until one passes
(:data:`TAIL_MODELS`: a GPD by probability-weighted moments, one by maximum likelihood, the interpolated scores
down to :data:`EMPIRICAL_RANK`), the check of a tail against the pooled scores it was fitted to
(:class:`TailCheck`, :func:`check_tail`), and the binomial band both of the world's checks use (:func:`band`,
:data:`CHECK_LEVEL`, from :data:`CHECK_SUPPORT` values below).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from calibrate.errors import DataError
from calibrate.statistics.gpd import TailFit, fit_lower_tail
from calibrate.statistics.order import clopper_pearson

#: tail models, tried in this order until one passes the tail check
TAIL_MODELS = ("gpd-pwm", "gpd-mle", "empirical")
#: the level of the binomial bands the world's fit is checked with
CHECK_LEVEL = 0.999
#: training support (values below a threshold) from which a threshold is checked against the data
CHECK_SUPPORT = 10
#: the empirical tail model's interpolated scores reach down to this rank
EMPIRICAL_RANK = 10
_MLE_SHAPE_BOUNDS = (-5.0, 0.9)


@dataclass(frozen=True)
class TailCheck:
    """The world's tail against the pooled scores: per tested rank k, the world's G at the k-th lowest
    score and its band; ``passed`` when every rank lies in its band."""

    ranks: tuple[int, ...]
    world: tuple[float, ...]
    low: tuple[float, ...]
    high: tuple[float, ...]

    @property
    def passed(self) -> bool:
        return all(lo <= w <= hi for w, lo, hi in zip(self.world, self.low, self.high))

    def worst(self) -> str:
        """The rank where the world strays furthest from its band, in words."""
        if not self.ranks:
            return "no rank to test"
        j = int(np.argmax([max(lo / max(w, 1e-300), w / max(hi, 1e-300)) for w, lo, hi in
                           zip(self.world, self.low, self.high)]))
        return (f"at the {self.ranks[j]}-th lowest pooled score the world puts G = {self.world[j]:.3g}, outside the "
                f"{100 * CHECK_LEVEL:.1f}% band [{self.low[j]:.3g}, {self.high[j]:.3g}] of the data")


def band(k: float, n: int, level: float = CHECK_LEVEL) -> tuple[float, float]:
    """The two-sided binomial (Clopper-Pearson) band of the rate k / n, k rounded to a whole count."""
    return clopper_pearson(int(round(k)), int(n), level)


def check_tail(sorted_z: np.ndarray, tail: TailFit | None, shape_cdf, independent: int) -> TailCheck:
    """The world's G at the k-th lowest pooled score against the binomial band of k / N, at log-spaced
    ranks from CHECK_SUPPORT up to the tail's threshold (about 12 ranks); pairs counted once with slots."""
    n = sorted_z.size
    top = tail.k if tail is not None else 0
    if top < CHECK_SUPPORT:
        return TailCheck((), (), (), ())
    ranks = np.unique(np.round(np.geomspace(CHECK_SUPPORT, top, 12)).astype(np.int64))
    g = shape_cdf(sorted_z[ranks - 1])
    scale = independent / n
    lows, highs = zip(*(band(k * scale, independent) for k in ranks))
    return TailCheck(tuple(int(k) for k in ranks), tuple(float(x) for x in g), tuple(lows), tuple(highs))


def _tail(sorted_z: np.ndarray, model: str) -> TailFit | None:
    try:
        if model == "gpd-pwm":
            return fit_lower_tail(sorted_z, min_exceedances=30)[0]
        fit = fit_lower_tail(sorted_z, min_exceedances=30, method="mle", shape_bounds=_MLE_SHAPE_BOUNDS)[0]
    except (DataError, ValueError, ArithmeticError):
        return None  # too few or tied pooled scores: the interpolated scores throughout
    if model == "gpd-mle":
        return fit
    # the GPD above a lower threshold u' < u is again a GPD, with the same shape and scale beta + xi (u - u')
    k = min(EMPIRICAL_RANK, fit.k)
    u2 = float(sorted_z[k - 1])
    beta2 = fit.beta + fit.xi * (fit.u - u2)
    if not (u2 < fit.u and beta2 > 0):
        return fit
    return TailFit(u2, k / sorted_z.size, fit.xi, beta2, k)
