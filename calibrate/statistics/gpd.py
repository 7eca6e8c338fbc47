"""Generalised Pareto fits to a sample's lower tail (a public core module): probability-weighted
moments or maximum likelihood, with the shape guarded to bounds. The "extremes" here are the
*smallest* values, so the data are negated: for t below the threshold u,
``P(D <= t) = p_u (1 + xi (u - t) / beta)^(-1/xi)``. Used by the ``gpd-tail``, ``znorm`` and ``auto``
estimators and by the reference world of the predicted intervals (calibrate.predicted.world).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np

from calibrate.errors import DataError, ParameterError

Method = Literal["pwm", "mle"]


def gpd_pwm(x: np.ndarray) -> tuple[float, float]:
    """Probability-weighted-moment estimates ``(xi, beta)`` of a GPD with location 0.

    ``xi`` is scipy's shape ``c`` (``scipy.stats.genpareto``); ``x`` holds >= 2 values >= 0, not all 0.
    """
    x = np.sort(np.asarray(x, dtype=np.float64))
    k = x.size
    if k < 2:
        raise DataError(f"a GPD fit needs at least 2 exceedances, got {k}")
    a0 = float(x.mean())
    a1 = float(np.sum(x * (k - np.arange(1, k + 1)) / (k - 1)) / k)
    return _pwm(a0, a1)


def gpd_mle(x: np.ndarray) -> tuple[float, float]:
    """Maximum-likelihood ``(xi, beta)`` with location fixed at 0 (``xi`` is scipy.stats.genpareto's ``c``),
    by Grimshaw's profile likelihood (Technometrics 35, 1993): for ``theta = xi / beta`` the likelihood is
    maximised by ``xi(theta) = mean(log1p(theta x))`` and ``beta = xi / theta``, which leaves
    ``-log L / n = log(beta) + 1 + xi`` to minimise over one number, ``theta x_max`` in (-1, 1e6]: on a
    log-spaced grid, then by golden section between the best point's neighbours (to 1e-12). Where the
    likelihood has no maximum (``xi < -1``: it grows without bound as ``theta x_max -> -1``) the search ends
    at the grid's edge, ``theta x_max = -1 + 1e-9``; callers bound the shape (:func:`guard_shape`).

    numpy only: scipy.stats (0.5-2 s to import) is not needed. tests/test_robust_estimators.py checks it
    against ``scipy.stats.genpareto.fit(x, floc=0)`` (whose Nelder-Mead stops within about 1e-4) and a
    brute-force grid of the two-parameter likelihood."""
    x = np.asarray(x, dtype=np.float64)
    if x.size < 2 or not np.any(x > 0) or not np.all(np.isfinite(x)) or np.any(x < 0):
        raise DataError("a GPD fit needs at least 2 finite exceedances >= 0, not all 0")
    top = float(x.max())
    y = x / top  # in units of the largest exceedance: theta' = theta * top, beta' = beta / top
    mean = float(y.mean())

    def cost(t: float) -> tuple[float, float, float]:
        """(-log L / n + log(top), xi, beta') at theta' = t."""
        if t == 0.0:
            return math.log(mean) + 1.0, 0.0, mean
        xi = float(np.mean(np.log1p(t * y)))
        b = xi / t
        return (math.log(b) + 1.0 + xi, xi, b) if b > 0 and np.isfinite(b) else (math.inf, xi, b)

    grid = np.concatenate([-1.0 + np.logspace(-9, np.log10(0.5), 40), -np.logspace(np.log10(0.5), -8, 40), [0.0],
                           np.logspace(-8, 6, 120)])
    values = [cost(float(t))[0] for t in grid]
    i = int(np.argmin(values))
    lo, hi = float(grid[max(i - 1, 0)]), float(grid[min(i + 1, grid.size - 1)])
    g = (math.sqrt(5.0) - 1.0) / 2.0
    a, b = hi - g * (hi - lo), lo + g * (hi - lo)
    fa, fb = cost(a)[0], cost(b)[0]
    while hi - lo > 1e-12 * max(1.0, abs(lo), abs(hi)):
        if fa <= fb:
            hi, b, fb = b, a, fa
            a = hi - g * (hi - lo)
            fa = cost(a)[0]
        else:
            lo, a, fa = a, b, fb
            b = lo + g * (hi - lo)
            fb = cost(b)[0]
    best = min((cost(t) for t in (lo, hi, float(grid[i]))), key=lambda r: r[0])
    return float(best[1]), float(best[2] * top)


@dataclass(frozen=True)
class TailFit:
    """A GPD fitted to the lower tail: P(D <= t) = p_u (1 + xi (u - t) / beta)^(-1/xi) for t < u."""

    u: float
    p_u: float
    xi: float
    beta: float
    k: int

    def quantile(self, e: np.ndarray) -> np.ndarray:
        """The model's e-quantile (valid for e < p_u); no clipping at 0."""
        e = np.asarray(e, dtype=np.float64)
        log_r = np.log(self.p_u) - np.log(e)  # log(p_u / e) without the division, which overflows at e ~ 1e-320
        if abs(self.xi) < 1e-9:
            excess = self.beta * log_r
        else:
            with np.errstate(over="ignore"):  # a heavy tail at a vanishing target: the quantile is -inf, clipped by callers
                excess = self.beta / self.xi * np.expm1(self.xi * log_r)
        return self.u - excess

    def cdf(self, t: np.ndarray) -> np.ndarray:
        """Model P(D <= t) below u (and the constant p_u at u)."""
        y = np.maximum(self.u - np.asarray(t, dtype=np.float64), 0.0) / self.beta
        if abs(self.xi) < 1e-9:
            return self.p_u * np.exp(-y)
        base = 1.0 + self.xi * y
        with np.errstate(divide="ignore", invalid="ignore"):
            out = self.p_u * np.where(base > 0, base, 0.0) ** (-1.0 / self.xi)
        return np.where(base > 0, out, 0.0)


def exceedance_count(n: int, tail_fraction: float | None, min_exceedances: int) -> int:
    """The count rule: ``max(ceil(2 sqrt(n)), min_exceedances)`` (or ``ceil(tail_fraction n)`` in place of
    ``ceil(2 sqrt(n))`` when a fraction is given), capped at ``n - 1``."""
    base = math.ceil(2.0 * math.sqrt(n)) if tail_fraction is None else math.ceil(tail_fraction * n)
    return int(min(max(base, min_exceedances), n - 1))


def guard_shape(x: np.ndarray, xi: float, beta: float, shape_bounds: tuple[float, float]) -> tuple[float, float]:
    """Clip the shape to its bounds (re-fitting beta from the mean) and make the support cover the data."""
    return _guard(xi, beta, lambda: float(np.mean(x)), float(np.max(x)), x.size, shape_bounds)


def _guard(xi: float, beta: float, mean, largest: float, k: int, shape_bounds: tuple[float, float]) -> tuple[float, float]:
    """:func:`guard_shape` from the exceedances' mean (a callable, evaluated only when needed), largest value and count."""
    lo, hi = shape_bounds
    if not lo <= xi <= hi or not np.isfinite(xi) or not (np.isfinite(beta) and beta > 0):
        xi = float(np.clip(xi, lo, hi)) if np.isfinite(xi) else 0.0
        beta = (1.0 - xi) * mean()
    if xi < 0:
        need = largest * (1.0 + 1.0 / k)
        if -beta / xi < need:
            beta = -xi * need
    return xi, beta


def _pwm(a0: float, a1: float) -> tuple[float, float]:
    """``(xi, beta)`` from the first two probability-weighted moments (:func:`gpd_pwm`)."""
    den = a0 - 2.0 * a1
    if a0 <= 0:
        raise DataError("all exceedances are 0 (the lowest distances are tied); a GPD cannot be fitted to them")
    if den <= 0:  # only possible when x is degenerate (e.g. all equal): treat as the lightest tail allowed
        return -1.0, 2.0 * a0
    return 2.0 - a0 / den, 2.0 * a0 * a1 / den


def _too_few(n: int, k: int) -> DataError:
    return DataError(f"{n} distances leave {k} exceedances below the tail threshold; a GPD tail needs at least 3 "
                     "(at least 4 distances per class; use pooling: pooled or shrunk for classes with fewer)")


def _all_tied(k: int, u: float) -> DataError:
    return DataError(f"the {k} lowest distances all equal the tail threshold {u:.6g} (ties); a GPD cannot be fitted "
                     "to them; raise tail_fraction so that the tail holds distinct values")


def fit_lower_tail_moments(n: int, k: int, u: float, lowest: float, sum_low: float, sum_ranked: float,
                           shape_bounds: tuple[float, float] = (-1.0, 0.5)) -> TailFit:
    """:func:`fit_lower_tail` (probability-weighted moments) from sums instead of the exceedances: with
    d_(0) <= ... the n values ascending, u = d_(k), ``sum_low`` = sum of d_(j) and ``sum_ranked`` = sum of
    j d_(j) over j < k, ``lowest`` = d_(0). The exceedances x = u - d_(j) have mean u - sum_low / k, and the
    moment :func:`gpd_pwm` sums over them in ascending order, sum x_(i) (k - i) / ((k - 1) k), is
    u / 2 - sum_ranked / ((k - 1) k): the same estimates up to the rounding of the sums (a sharded run
    adds them up bucket by bucket; tests/test_partitioned.py bounds the difference)."""
    if k < 3:
        raise _too_few(n, k)
    if not lowest < u:
        raise _all_tied(k, u)
    a0 = u - sum_low / k
    xi, beta = _pwm(a0, u / 2.0 - sum_ranked / ((k - 1) * k))
    xi, beta = _guard(xi, beta, lambda: a0, u - lowest, k, shape_bounds)
    return TailFit(u, k / n, xi, beta, k)


def fit_lower_tail(sorted_values: np.ndarray, *, tail_fraction: float | None = None, min_exceedances: int = 15,
                   method: Method = "pwm", shape_bounds: tuple[float, float] = (-1.0, 0.5),
                   shape: float | None = None, n: int | None = None) -> tuple[TailFit, np.ndarray]:
    """Fit a GPD to the lower tail of ``sorted_values`` (ascending; any real values).

    Returns the fit and the exceedances. With ``shape`` given, the shape is fixed and only
    ``beta = (1 - shape) mean(x)`` is fitted. ``n``: the size of the whole sample when
    ``sorted_values`` holds only its lowest values (at least the k + 1 the fit reads).
    """
    d = np.asarray(sorted_values, dtype=np.float64)
    n = d.size if n is None else int(n)
    k = exceedance_count(n, tail_fraction, min_exceedances)
    if k < 3:
        raise _too_few(n, k)
    u = float(d[k])
    x = u - d[:k]
    if not np.any(x > 0):
        raise _all_tied(k, u)
    if shape is not None:
        xi, beta = float(shape), (1.0 - float(shape)) * float(np.mean(x))
    else:
        xi, beta = gpd_pwm(x) if method == "pwm" else gpd_mle(x)
    xi, beta = guard_shape(x, xi, beta, shape_bounds)
    return TailFit(u, k / n, xi, beta, k), x


def monotone(values: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """Make thresholds non-decreasing in the target FPR along the last axis (targets in any order)."""
    order = np.argsort(targets, kind="stable")
    out = np.empty_like(values)
    out[..., order] = np.maximum.accumulate(values[..., order], axis=-1)
    return out


def check_shape_bounds(shape_bounds) -> tuple[float, float]:
    if not isinstance(shape_bounds, (list, tuple)) or len(shape_bounds) != 2:
        raise ParameterError(f"shape_bounds must be [low, high], e.g. [-1, 0.5]; got {shape_bounds!r}")
    lo, hi = float(shape_bounds[0]), float(shape_bounds[1])
    if not (-1.0 <= lo <= hi < 1.0):
        raise ParameterError(f"shape_bounds must satisfy -1 <= low <= high < 1 (a GPD with shape >= 1 has no mean); "
                             f"got {shape_bounds!r}")
    return lo, hi


def check_tail_params(tail_fraction: float | None, min_exceedances: int) -> None:
    if tail_fraction is not None and not 0.0 < tail_fraction < 1.0:
        raise ParameterError(f"tail_fraction must be in (0, 1), e.g. 0.1 for the lowest 10%; got {tail_fraction}")
    if min_exceedances < 3:
        raise ParameterError(f"min_exceedances must be at least 3; got {min_exceedances}")

