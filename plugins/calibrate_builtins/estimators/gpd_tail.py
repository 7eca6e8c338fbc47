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
* ``mle``: maximum likelihood, location fixed at 0 (calibrate.statistics.gpd.gpd_mle: the likelihood scipy.stats.genpareto.fit(x, floc=0) maximises, by a profile-likelihood search).

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

from typing import Any, Literal

import numpy as np

from calibrate.contract.base import Estimator, FittedModel, RunContext
from calibrate.errors import DataError, ParameterError
from calibrate.contract.types import ImpostorDistances

from calibrate.statistics.gpd import (TailFit, check_shape_bounds, check_tail_params, exceedance_count, fit_lower_tail,  # noqa: F401
                           gpd_mle, gpd_pwm, guard_shape, monotone)
from calibrate.contract.packed import packed
from calibrate.contract.statecheck import bad, choice, declared_size, distances, field, flag, numbers, sorted_segments, tail_fit
from calibrate.statistics.order import below_ties, interp_threshold, lowest_segments, refuse_beyond

Method = Literal["pwm", "mle"]
Pooling = Literal["class", "pooled", "shrunk"]


# --------------------------------------------------------------------------------------------
# pure functions, shared with znorm/auto


def tail_thresholds(sorted_distances: np.ndarray, fit: TailFit, targets: np.ndarray, n: int | None = None) -> np.ndarray:
    """Thresholds for distances (>= 0): GPD below p_u, the paper's interpolation above; monotone. ``n``: the
    sample's size when ``sorted_distances`` are only its lowest values (a saved model's)."""
    targets = np.asarray(targets, dtype=np.float64)
    emp = np.maximum(interp_threshold(sorted_distances, targets, n), fit.u)  # continuous at p_u: GPD(p_u) = u
    out = np.where(targets < fit.p_u, fit.quantile(targets), emp)
    return monotone(np.maximum(out, 0.0), targets)


# --------------------------------------------------------------------------------------------
# model and estimator


class GpdTailModel(FittedModel):
    """Per class: the GPD tail (u, p_u, xi, beta, k) and the sorted training distances above it; ``counts`` (a model
    as saved, ``compact``): each segment's number of training distances, of which it holds the lowest."""

    def __init__(self, classes, fits: list[dict], values: np.ndarray, offsets: np.ndarray, shared: bool, pooling: str,
                 counts: np.ndarray | None = None):
        super().__init__(classes)
        self._fits = [TailFit(float(f["u"]), float(f["p_u"]), float(f["xi"]), float(f["beta"]), int(f["k"])) for f in fits]
        self._values = np.asarray(values, dtype=np.float64)
        self._offsets = np.asarray(offsets, dtype=np.int64)
        self._shared = bool(shared)
        self.pooling = pooling
        expected = 1 if self._shared else len(self.classes)
        if len(self._fits) != expected or self._offsets.size != expected + 1:
            raise DataError(f"gpd-tail model: {len(self._fits)} fits for {len(self.classes)} classes")
        self._counts = None if counts is None else np.asarray(counts, dtype=np.int64)
        if self._counts is not None and (self._counts.shape != (expected,)
                                         or np.any(self._counts < np.diff(self._offsets))):
            raise DataError("gpd-tail model: counts must hold, per segment, at least as many distances as it keeps")

    def _n(self) -> np.ndarray:
        """Each segment's number of training distances."""
        return np.diff(self._offsets) if self._counts is None else self._counts

    def _slot(self, i: int) -> int:
        return 0 if self._shared else i

    def _thresholds(self, targets: np.ndarray, rows: np.ndarray) -> np.ndarray:
        n = self._n()
        if self._counts is not None:
            refuse_beyond(targets, np.diff(self._offsets), n, "gpd-tail")
        out = np.empty((rows.size, targets.size))
        for r, i in enumerate(rows):
            s = self._slot(int(i))
            out[r] = tail_thresholds(self._values[self._offsets[s]:self._offsets[s + 1]], self._fits[s], targets,
                                     int(n[s]))
        return out

    def order_statistic_pool(self) -> int | None:
        return int(self._n()[0]) if self._shared else None

    def order_statistic_thresholds(self, ranks: np.ndarray, rows: np.ndarray) -> np.ndarray:
        refuse_beyond(ranks, self._values.size, self._n()[0], "gpd-tail", ranks=True)
        return np.tile(below_ties(self._values, ranks), (len(rows), 1))

    def cdf(self, row: int, x: np.ndarray) -> np.ndarray | None:
        """Model CDF: GPD below u, empirical above (for the calibration plots; None for a saved model, which keeps
        only its lowest distances)."""
        if self._counts is not None:
            return None
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

    def compact(self, reach: float) -> FittedModel:
        """What a saved calibration keeps to answer every target up to ``reach``: the tail fits, and each segment's
        lowest ``ceil(reach n) + 1`` distances and n (the model itself when that is everything)."""
        values, offsets, counts = lowest_segments(self._values, self._offsets, reach, self._counts)
        if values.size == self._values.size:
            return self
        return type(self)(self.classes, [f.__dict__ for f in self._fits], values, offsets, self._shared,
                            self.pooling, counts)

    def to_state(self) -> dict[str, Any]:
        state = {"classes": list(self.classes), "shared": self._shared, "pooling": self.pooling,
                 "fits": [{"u": f.u, "p_u": f.p_u, "xi": f.xi, "beta": f.beta, "k": f.k} for f in self._fits],
                 "values": packed(self._values), "offsets": self._offsets.tolist()}
        if self._counts is not None:
            state["counts"] = self._counts.tolist()
        return state

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> "GpdTailModel":
        """The model a saved state describes, every field checked (calibrate.contract.statecheck): the distances >= 0
        and ascending per class, each tail's threshold u within its class's distances (at or above the lowest
        where a saved model keeps only those: ``counts``)."""
        classes, shared = field(state, "classes"), flag(field(state, "shared"), "shared")
        segments = 1 if shared else (len(classes) if isinstance(classes, list) else 0)
        values = distances(field(state, "values"), "values", at_most=declared_size(state))
        offsets = sorted_segments(values, field(state, "offsets"), segments)
        held = np.diff(offsets)
        counts = field(state, "counts", None)
        if counts is not None:
            counts = numbers(counts, "counts", 1, size=segments, integer=True).astype(np.int64)
            if np.any(counts < held):
                raise bad("counts", "must be at least the number of distances each segment keeps")
        n = held if counts is None else counts
        fits = field(state, "fits")
        if not isinstance(fits, list) or len(fits) != segments:
            raise bad("fits", f"must hold {segments} tail fit(s), one per {'model' if shared else 'class'}")
        fits = [tail_fit(f, f"fits[{i}]", 0.0, float(values[offsets[i + 1] - 1]) if n[i] == held[i] else np.inf,
                         int(n[i])) for i, f in enumerate(fits)]
        pooling = choice(field(state, "pooling", "class"), "pooling", ("class", "pooled", "shrunk"))
        return cls(classes, fits, values, offsets, shared, pooling, counts)


class GpdTail(Estimator):
    """Generalised Pareto fit to the lower tail of the impostor distances (peaks over threshold, as ISO/IEC 5152).

    :param pooling: class (a fit per class), pooled (one fit on all classes' distances, one threshold for all) or shrunk (per class, shape pulled toward a shared shape).
    :param tail_fraction: share of a sample's lowest distances treated as exceedances; default (null): 2 sqrt(n) of them.
    :param min_exceedances: at least this many exceedances (capped at the sample size minus 1).
    :param method: pwm (probability-weighted moments, default) or mle (maximum likelihood, location 0).
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
