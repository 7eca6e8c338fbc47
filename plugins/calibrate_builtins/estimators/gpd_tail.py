"""Estimator ``gpd-tail``: extreme value theory, peaks over threshold on the LOWER tail.

Why. A threshold at a low target FPR ``e`` lives among the few smallest impostor distances, where
an empirical quantile has almost no data (below ``1/N`` none at all). Extreme value theory says
that, for a wide class of distributions, the values beyond a high enough threshold follow a
generalised Pareto distribution (GPD); ISO/IEC 5152 uses this to estimate small false match rates
from small samples. Here the "extremes" are the *smallest* distances, so the data are negated.

Model. Sort a sample ``d_(1) <= ... <= d_(n)``; take ``k`` exceedances (see the count rule below),
the threshold ``u = d_(k+1)`` and the exceedances ``x_i = u - d_(i)``, i = 1..k (>= 0). With
``p_u = k / n`` the estimated probability of falling below ``u``::

    P(D <= t) = p_u * (1 + xi (u - t) / beta) ** (-1 / xi)       for t < u
    tau(e)    = u - beta / xi * ((p_u / e) ** xi - 1)            for e < p_u   (u - beta log(p_u / e) at xi = 0)

For ``e >= p_u`` there are enough data and the paper's interpolation formula (``interp.py``) is
used, never below ``u`` (so the threshold is continuous and non-decreasing at ``p_u``). ``xi < 0`` is a bounded lower tail (an endpoint ``u + beta / xi``), ``xi = 0`` exponential,
``xi > 0`` a heavy lower tail.

Count rule. ``k = max(ceil(2 sqrt(n)), min_exceedances)`` by default, or
``k = max(ceil(tail_fraction * n), min_exceedances)`` when ``tail_fraction`` is given; capped at
``n - 1``; a sample needs ``k >= 3``. A fixed fraction is too coarse for large samples: the lowest
10% of a gamma(3) sample is not yet in the GPD regime, and with 20000 draws the 10% rule
misplaces the 0.1% quantile by 40% while ``2 sqrt(n)`` (283 exceedances) is within 3% (see
tests/test_robust_estimators.py). The square-root rule grows the exceedance count with the sample,
but ever more slowly, the usual compromise between the bias of a low threshold and the variance of
few exceedances; with 258 distances it takes 33 (13%), with 133,000 pooled ones 730 (0.5%).

Fit (``method``).

* ``pwm`` (default): probability-weighted moments (Hosking & Wallis, Technometrics 1987). With
  ``a0 = mean(x)`` and ``a1 = mean over i of x_(i) (k - i) / (k - 1)`` (x ascending),
  ``xi = 2 - a0 / (a0 - 2 a1)`` and ``beta = 2 a0 a1 / (a0 - 2 a1)``. Chosen as default because it
  is closed-form, always defined, and has lower bias and variance than maximum likelihood for the
  small exceedance counts met here (tens of points; Hosking & Wallis's simulations), where the
  likelihood is flat in the shape and its maximum can run to the boundary.
* ``mle``: ``scipy.stats.genpareto.fit(x, floc=0)`` (maximum likelihood, location fixed at 0).

Guards. The shape is clipped to ``shape_bounds`` (default [-1, 0.5]: below -1 the GPD density
increases towards its endpoint, which no lower tail of distances does; above 0.5 the tail is so
heavy that its variance is infinite, not plausible for a distance bounded below by 0); after
clipping, ``beta`` is re-fitted from the mean, ``beta = (1 - xi) mean(x)``. For ``xi < 0`` the
fitted support must cover the data: if the endpoint ``-beta / xi`` is below ``max(x) (1 + 1/k)``
(the usual small-sample correction of an observed maximum), beta is raised to meet it, so no
training distance lies where the model says none can. Thresholds are never below 0 (distances
are in [0, inf)) and never decrease as the target grows.

Pooling (``pooling``).

* ``class``: one fit per class on its own distances (class-specific thresholds);
* ``pooled``: one fit on all classes' distances together; every class gets the same threshold
  (the EVT counterpart of ``generic-interp``);
* ``shrunk``: per class, threshold, scale and exceedances of its own, but the shape (the hardest
  parameter to estimate from few points) pulled toward a shape shared by all classes:
  ``xi_c = w xi_class + (1 - w) xi_shared`` with ``w = k_c / (k_c + shape_prior)``; ``xi_shared``
  is the PWM shape of all classes' exceedances pooled after dividing each class's by its mean
  (which removes the scale and keeps the shape when the shapes agree). Then
  ``beta_c = (1 - xi_c) mean(x_c)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from calibrate.base import Estimator, FittedModel, RunContext
from calibrate.errors import DataError, ParameterError
from calibrate.types import ImpostorDistances

from .interp import below_ties, interp_threshold

Method = Literal["pwm", "mle"]
Pooling = Literal["class", "pooled", "shrunk"]


# --------------------------------------------------------------------------------------------
# pure functions, shared with znorm/auto


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
    den = a0 - 2.0 * a1
    if a0 <= 0:
        raise DataError("all exceedances are 0 (the lowest distances are tied); a GPD cannot be fitted to them")
    if den <= 0:  # only possible when x is degenerate (e.g. all equal): treat as the lightest tail allowed
        return -1.0, 2.0 * a0
    return 2.0 - a0 / den, 2.0 * a0 * a1 / den


def gpd_mle(x: np.ndarray) -> tuple[float, float]:
    """Maximum-likelihood ``(xi, beta)`` with location fixed at 0 (scipy.stats.genpareto.fit)."""
    from scipy.stats import genpareto

    x = np.asarray(x, dtype=np.float64)
    if x.size < 2 or not np.any(x > 0):
        raise DataError("a GPD fit needs at least 2 exceedances, not all 0")
    c, _, scale = genpareto.fit(x, floc=0.0)
    return float(c), float(scale)


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
        r = self.p_u / e
        if abs(self.xi) < 1e-9:
            excess = self.beta * np.log(r)
        else:
            excess = self.beta / self.xi * np.expm1(self.xi * np.log(r))
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
    lo, hi = shape_bounds
    if not lo <= xi <= hi or not np.isfinite(xi) or not (np.isfinite(beta) and beta > 0):
        xi = float(np.clip(xi, lo, hi)) if np.isfinite(xi) else 0.0
        beta = (1.0 - xi) * float(np.mean(x))
    if xi < 0:
        need = float(np.max(x)) * (1.0 + 1.0 / x.size)
        if -beta / xi < need:
            beta = -xi * need
    return xi, beta


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
        raise DataError(f"{n} distances leave {k} exceedances below the tail threshold; a GPD tail needs at least 3 "
                        "(at least 4 distances per class; use pooling: pooled or shrunk for classes with fewer)")
    u = float(d[k])
    x = u - d[:k]
    if not np.any(x > 0):
        raise DataError(f"the {k} lowest distances all equal the tail threshold {u:.6g} (ties); a GPD cannot be fitted "
                        "to them; raise tail_fraction so that the tail holds distinct values")
    if shape is not None:
        xi, beta = float(shape), (1.0 - float(shape)) * float(np.mean(x))
    else:
        xi, beta = gpd_pwm(x) if method == "pwm" else gpd_mle(x)
    xi, beta = guard_shape(x, xi, beta, shape_bounds)
    return TailFit(u, k / n, xi, beta, k), x


def tail_thresholds(sorted_distances: np.ndarray, fit: TailFit, targets: np.ndarray) -> np.ndarray:
    """Thresholds for distances (>= 0): GPD below p_u, the paper's interpolation above; monotone."""
    targets = np.asarray(targets, dtype=np.float64)
    emp = np.maximum(interp_threshold(sorted_distances, targets), fit.u)  # continuous at p_u: GPD(p_u) = u
    out = np.where(targets < fit.p_u, fit.quantile(targets), emp)
    return monotone(np.maximum(out, 0.0), targets)


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


# --------------------------------------------------------------------------------------------
# model and estimator


class GpdTailModel(FittedModel):
    """Per class: the GPD tail (u, p_u, xi, beta, k) and the sorted training distances above it."""

    def __init__(self, classes, fits: list[dict], values: np.ndarray, offsets: np.ndarray, shared: bool, pooling: str):
        super().__init__(classes)
        self._fits = [TailFit(float(f["u"]), float(f["p_u"]), float(f["xi"]), float(f["beta"]), int(f["k"])) for f in fits]
        self._values = np.asarray(values, dtype=np.float64)
        self._offsets = np.asarray(offsets, dtype=np.int64)
        self._shared = bool(shared)
        self.pooling = pooling
        expected = 1 if self._shared else len(self.classes)
        if len(self._fits) != expected or self._offsets.size != expected + 1:
            raise DataError(f"gpd-tail model: {len(self._fits)} fits for {len(self.classes)} classes")

    def _slot(self, i: int) -> int:
        return 0 if self._shared else i

    def _thresholds(self, targets: np.ndarray, rows: np.ndarray) -> np.ndarray:
        out = np.empty((rows.size, targets.size))
        for r, i in enumerate(rows):
            s = self._slot(int(i))
            out[r] = tail_thresholds(self._values[self._offsets[s]:self._offsets[s + 1]], self._fits[s], targets)
        return out

    def order_statistic_pool(self) -> int | None:
        return int(self._values.size) if self._shared else None

    def order_statistic_thresholds(self, ranks: np.ndarray, rows: np.ndarray) -> np.ndarray:
        return np.tile(below_ties(self._values, ranks), (len(rows), 1))

    def cdf(self, row: int, x: np.ndarray) -> np.ndarray:
        """Model CDF: GPD below u, empirical above (for the calibration plots)."""
        s = self._slot(int(row))
        d = self._values[self._offsets[s]:self._offsets[s + 1]]
        fit = self._fits[s]
        x = np.asarray(x, dtype=np.float64)
        emp = np.searchsorted(d, x, side="right") / d.size
        return np.where(x < fit.u, fit.cdf(x), emp)

    def parameters(self) -> list[dict[str, Any]]:
        rows = []
        for i, c in enumerate(self.classes):
            f = self._fits[self._slot(i)]
            rows.append({"class": c, "pooling": self.pooling, "tail_threshold": f.u, "tail_probability": f.p_u,
                         "shape_xi": f.xi, "scale_beta": f.beta, "exceedances": f.k})
        return rows

    def to_state(self) -> dict[str, Any]:
        return {"classes": list(self.classes), "shared": self._shared, "pooling": self.pooling,
                "fits": [{"u": f.u, "p_u": f.p_u, "xi": f.xi, "beta": f.beta, "k": f.k} for f in self._fits],
                "values": self._values.tolist(), "offsets": self._offsets.tolist()}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> "GpdTailModel":
        return cls(state["classes"], state["fits"], np.asarray(state["values"]), np.asarray(state["offsets"]),
                   state["shared"], state.get("pooling", "class"))


class GpdTail(Estimator):
    """Generalised Pareto fit to the lower tail of the impostor distances (peaks over threshold, as ISO/IEC 5152).

    :param pooling: class (a fit per class), pooled (one fit on all classes' distances, one threshold for all) or shrunk (per class, shape pulled toward a shared shape).
    :param tail_fraction: share of a sample's lowest distances treated as exceedances; default (null): 2 sqrt(n) of them.
    :param min_exceedances: at least this many exceedances (capped at the sample size minus 1).
    :param method: pwm (probability-weighted moments, default) or mle (scipy.stats.genpareto.fit, location 0).
    :param shape_bounds: [low, high] range the GPD shape xi is clipped to.
    :param shape_prior: pooling shrunk only: exceedance count at which a class's own shape gets half the weight.
    """

    model_class = GpdTailModel

    def __init__(self, *, pooling: Pooling = "class", tail_fraction: float | None = None, min_exceedances: int = 15,
                 method: Method = "pwm", shape_bounds: list[float] = [-1.0, 0.5],  # noqa: B006 - never mutated
                 shape_prior: float = 50.0):
        if pooling not in ("class", "pooled", "shrunk"):
            raise ParameterError(f"pooling must be class, pooled or shrunk; got {pooling!r}")
        if method not in ("pwm", "mle"):
            raise ParameterError(f"method must be pwm or mle; got {method!r}")
        check_tail_params(tail_fraction, min_exceedances)
        self._bounds = check_shape_bounds(shape_bounds)
        if not shape_prior > 0:
            raise ParameterError(f"shape_prior must be > 0; got {shape_prior}")
        self.pooling, self.tail_fraction, self.min_exceedances = pooling, tail_fraction, min_exceedances
        self.method, self.shape_bounds, self.shape_prior = method, list(shape_bounds), shape_prior

    def _fit_one(self, d: np.ndarray, name: str, shape: float | None = None) -> tuple[TailFit, np.ndarray]:
        try:
            return fit_lower_tail(d, tail_fraction=self.tail_fraction, min_exceedances=self.min_exceedances,
                                  method=self.method, shape_bounds=self._bounds, shape=shape)
        except DataError as exc:
            raise DataError(f"estimator gpd-tail, {name}: {exc}") from None

    def _fit(self, impostors: ImpostorDistances, context: RunContext) -> FittedModel:
        classes = impostors.classes
        if self.pooling == "pooled":
            d = np.sort(impostors.pooled())
            fit, _ = self._fit_one(d, "all classes pooled")
            return GpdTailModel(classes, [fit.__dict__], d, np.array([0, d.size]), True, self.pooling)
        sorted_rows = [np.sort(impostors.of(i)) for i in range(len(impostors))]
        fitted = []
        for c, d in zip(classes, sorted_rows):
            fitted.append(self._fit_one(d, f"class {c!r}"))
            context.advance(1)  # Estimator.fit's stage counts classes
        if self.pooling == "shrunk":
            scaled = np.concatenate([x / x.mean() for _, x in fitted])
            shared, _ = gpd_pwm(scaled)
            shared = float(np.clip(shared, *self._bounds))
            refit = []
            for (fit, x), d, c in zip(fitted, sorted_rows, classes):
                w = fit.k / (fit.k + self.shape_prior)
                refit.append(self._fit_one(d, f"class {c!r}", shape=w * fit.xi + (1 - w) * shared))
            fitted = refit
        values = np.concatenate(sorted_rows)
        return GpdTailModel(classes, [f.__dict__ for f, _ in fitted], values, impostors.offsets, False, self.pooling)
