"""Thresholds with a stated confidence: achieved FPR above the target with probability at most
``1 - confidence`` (recipe ``{plugin: auto, confidence: 0.95}``; ``calibrate.fit(confidence=0.95)``).

Two ways, chosen per target:

* ``order-statistic`` (distribution-free): when the estimator's threshold at rank k is the k-th
  smallest of N pooled exchangeable training values (auto's pooled standardised scores,
  generic-interp's pooled distances), the FPR it achieves is Beta(k, N - k + 1) whatever the
  distribution; the largest k with P(Beta(k, N - k + 1) <= e) >= c is used (the exact binomial
  bound of "learn then test" risk control). It exists when N is at least about -ln(1 - c) / e
  (6,000 training distances at 0.05% and c = 0.95).
* ``model`` (below that): the target is lowered to e' such that the c-quantile of the achieved FPR
  over the reference world's simulated galleries (calibrate.predicted.interval) is e; valid as far as the
  world resembles the data.

The rule (monotone by construction). Write k(e) for the order-statistic rank (0 below the target e0
where it starts), OS(k) for the inner model's threshold at the pooled order statistic of rank k, u0
for the smallest target the model-based curve meets (its bound at the strictest candidate) and
M(e) for the inner threshold at the lowered target e'(e). Both are non-decreasing in e (k(e) and e'(e) are, and so
are the inner thresholds, by the estimator contract). Then

* threshold(e) = OS(k(e)) where the order-statistic bound is met (k(e) >= 1): one bound keeps the promise, and
  stacking the other on it (their minimum, before issue 40) only costs strictness;
* below e0, the minimum of OS(1) and M(max(e, u0)) (those that exist) when the model-based bound is met (e >= u0);
* the minimum of them and 0 when neither is met but the model-based curve exists (``model-unmet``:
  only exact matches, at most, are accepted);
* a DataError when neither is met and there is no curve.

Below e0 every threshold is at most OS(1), and above it at least that, so a looser target never gives a stricter
threshold, asked in one call or one target per call. It keeps the promise: wherever a bound is met, the threshold
is at or below that bound's own threshold. The method recorded for a target is the bound whose threshold is used.

Clustered values (issue 40). Where the training false accepts cluster by probe (calibrate.predicted.clustering),
the count of pooled values below a quantile is overdispersed: the order-statistic rank is the negative binomial's
(:func:`clustered_rank`, the dispersion kept with the model), and the model-based bound reads replicates widened
by what clustering adds to a threshold's error. So the bound holds for the probes a deployment meets, not only
for independent values.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from calibrate.contract.base import FittedModel
from calibrate.errors import DataError, ParameterError
from calibrate.predicted.interval import Prediction, PredictionSettings, check_prediction, predict


def check_confidence(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.5 <= float(value) < 1.0:
        raise ParameterError(f"confidence must be a probability in [0.5, 1), e.g. 0.95; got {value!r}")
    return float(value)


def order_statistic_rank(target: float, n: int, confidence: float) -> int:
    """The largest rank k (1-based) with P(F(x_(k)) <= target) >= confidence for the k-th smallest of n
    exchangeable values, i.e. P(Binomial(n, target) >= k) >= confidence; 0 when even k = 1 fails."""
    from scipy.stats import binom

    if n < 1:
        return 0
    # P(Bin(n, e) >= k) = binom.sf(k - 1, n, e) is non-increasing in k
    k = int(binom.ppf(1 - confidence, n, target))  # smallest k with cdf(k) >= 1 - c
    while k >= 1 and binom.sf(k - 1, n, target) < confidence:
        k -= 1
    while binom.sf(k, n, target) >= confidence:
        k += 1
    return max(k, 0)


def clustered_rank(target: float, n: int, confidence: float, excess: float) -> int:
    """:func:`order_statistic_rank` where the count of the n values below the target's quantile is overdispersed
    (false accepts clustered by probe, calibrate.predicted.clustering): a negative binomial of mean n e whose variance
    is ``1 + excess`` times that; the largest k with P(count >= k) >= confidence (0 when even k = 1 fails)."""
    from scipy.special import betainc

    if excess <= 1e-9:
        return order_statistic_rank(target, n, confidence)
    mean = n * target
    r = mean / excess

    def at_least(k: int) -> float:  # P(X >= k) = 1 - P(X <= k - 1), non-increasing in k
        return 1.0 if k <= 0 else 1.0 - float(betainc(r, float(k), r / (r + mean)))

    lo, hi = 0, int(math.ceil(mean)) + 1  # P(X >= k) >= confidence > 1/2 needs k at most about the mean
    while hi - lo > 1:  # invariant: at_least(lo) >= confidence > at_least(hi)
        mid = (lo + hi) // 2
        if at_least(mid) >= confidence:
            lo = mid
        else:
            hi = mid
    return lo


def upper_curve(grid_fpr: np.ndarray, confidence: float) -> np.ndarray:
    """The ``confidence``-quantile over replicates of the achieved FPR at each candidate target, made
    non-decreasing in the candidate."""
    return np.maximum.accumulate(np.nanquantile(grid_fpr, confidence, axis=0))


def curve_target(target: float, grid: np.ndarray, upper: np.ndarray) -> float | None:
    """The candidate target whose ``upper`` FPR equals ``target`` (log-linear between grid points; the
    largest candidate when every candidate is below), or None when even the smallest exceeds it."""
    ok = np.flatnonzero(upper <= target)
    if ok.size == 0:
        return None
    j = int(ok[-1])
    if j + 1 >= grid.size or upper[j + 1] <= upper[j]:
        return float(grid[j])
    frac = (target - upper[j]) / (upper[j + 1] - upper[j])
    e = float(np.exp(np.log(grid[j]) + frac * (np.log(grid[j + 1]) - np.log(grid[j]))))
    return min(max(e, float(grid[j])), float(grid[j + 1]))  # exp(log(.)) may round past a grid point


def independent_values(world: Any) -> int | None:
    """How many of the world's pooled training values are independent draws: the distinct pairs when the
    enrolled-vs-enrolled matrix lists each pair twice, else None (all of them)."""
    slots = getattr(world, "slots", None)
    return None if slots is None or slots.size == 0 else int(slots.max()) + 1


def confidence_ranks(model: FittedModel, targets: Sequence[float], confidence: float,
                     independent: int | None = None, dispersion: dict | None = None) -> np.ndarray | None:
    """Per target the order-statistic rank of the bound (0 where even the smallest value fails), or None
    when the model's thresholds are not pooled order statistics; ``dispersion``: :func:`dispersion_of`."""
    pool = model.order_statistic_pool()
    if not pool:
        return None
    n = min(pool, independent) if independent else pool
    return np.array([clustered_rank(float(e), n, confidence, excess(dispersion, float(e))) for e in targets],
                    dtype=np.int64)


def dispersion_of(found: Any) -> dict | None:
    """How the training false accepts cluster (calibrate.predicted.clustering.Clustering), as the confident model keeps
    it: log cv2 = intercept + slope log e (its sampling margin included) and the training units' size."""
    if found is None or found.intercept is None or not np.isfinite(found.intercept):
        return None
    return {"intercept": float(found.intercept), "slope": float(found.slope),
            "unit_size": float(found.size)}


def excess(dispersion: dict | None, e: float) -> float:
    """The overdispersion's excess (phi - 1) of the count below the level ``e``: cv2(e) e s (0 without clustering);
    non-decreasing in e (the slope is at least -1)."""
    if not dispersion:
        return 0.0
    return math.exp(dispersion["intercept"] + dispersion["slope"] * math.log(e)) * e * dispersion["unit_size"]


#: how each target's confident threshold was chosen
METHODS = {"order-statistic": "the distribution-free order-statistic bound (a pooled order statistic; below the targets "
                              "where that bound is met, the smallest one, stricter than the model-based bound met there)",
           "model": "the model-based bound (simulated galleries)",
           "model-unmet": "no bound could be met: even the strictest candidate exceeded the target in more than "
                          "1 - confidence of the simulated galleries, so the threshold is distance 0 (or below, "
                          "when a bound read at its switch point is lower: the thresholds never decrease with the "
                          "target): only exact matches, at most, are accepted, and the promise is kept by "
                          "rejecting nearly everyone"}


class ConfidentModel(FittedModel):
    """An estimator's fitted model whose threshold at target e has achieved FPR <= e with probability
    ``confidence`` (module docstring). Per target and class the stricter of the two bounds, each read at
    its switch point below it: the inner model's threshold at the pooled order statistic of rank
    max(k, 1) (``order-statistic``; k from the binomial bound over ``independent`` values, default all
    ``pool_size``), and at the target e' read off the simulated galleries' bound at max(e, u0)
    (``model``); at most 0 where neither bound is met (``model-unmet``). Non-decreasing in the target,
    and a stricter threshold keeps the promise (the rule and why: module docstring)."""

    def __init__(self, inner: FittedModel, confidence: float, grid: Sequence[float] = (), upper: Sequence[float] = (),
                 independent: int | None = None, dispersion: dict | None = None):
        super().__init__(inner.classes)
        self.inner, self.confidence = inner, check_confidence(confidence)
        self.grid, self.upper = np.asarray(grid, dtype=np.float64), np.asarray(upper, dtype=np.float64)
        if self.grid.shape != self.upper.shape:
            raise DataError("confidence: the candidate targets and their FPR bounds differ in length")
        self.pool_size = inner.order_statistic_pool()
        self.independent = None if independent is None else int(independent)
        #: how the training false accepts cluster by probe (:func:`dispersion_of`; None: as independent values)
        self.dispersion = dispersion
        # the smallest target the model-based curve meets (upper is non-decreasing; NaN only as a suffix);
        # None when there is no curve, or one that meets no target
        self.model_from = float(self.upper[0]) if self.upper.size and np.isfinite(self.upper[0]) else None

    def rank(self, target: float) -> int:
        """The order-statistic bound's rank at ``target`` (0 where even the smallest value fails)."""
        if not self.pool_size:
            return 0
        n = min(self.pool_size, self.independent) if self.independent else self.pool_size
        return clustered_rank(target, n, self.confidence, excess(self.dispersion, target))

    def _plan(self, target: float) -> tuple[bool, int | None, float | None, bool]:
        """(met, rank read, lowered target read, order statistic met) at ``target``: whether a bound is met there; the
        rank max(k, 1) of the order-statistic bound (None without pooled order statistics); the lowered target
        e'(max(e, u0)) of the model-based bound (None without a curve); whether k >= 1."""
        k = self.rank(target)
        rank = max(k, 1) if self.pool_size else None
        e_model = None if self.model_from is None else curve_target(max(target, self.model_from), self.grid, self.upper)
        met = k >= 1 or (self.model_from is not None and target >= self.model_from)
        if not met and not self.grid.size:
            raise DataError(f"confidence {self.confidence}: at target {target:g} the {self.pool_size or 0} pooled "
                            "training values are too few for an order-statistic bound, and this calibration holds no "
                            "model-based bound (its predicted interval could not be simulated)")
        return met, rank, e_model, k >= 1

    def _candidates(self, targets: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, list]:
        """Per target: whether a bound is met, the order-statistic and the model-based thresholds read
        (rows x targets; +inf where the bound does not exist), and the plans."""
        plans = [self._plan(float(e)) for e in targets]
        met = np.array([p[0] for p in plans], dtype=bool)
        os_t = np.full((rows.size, targets.size), np.inf)
        model_t = np.full((rows.size, targets.size), np.inf)
        if self.pool_size:
            os_t[:] = self.inner.order_statistic_thresholds(np.array([float(p[1]) for p in plans]), rows)
        if self.model_from is not None:
            model_t[:] = self.inner._thresholds(np.array([p[2] for p in plans]), rows)
        return met, os_t, model_t, plans

    def choice(self, target: float) -> tuple[str, float]:
        """(method, value) of the threshold used at ``target``: ("order-statistic", rank k read),
        ("model", e' read) or ("model-unmet", smallest candidate): then the threshold is at most 0. When
        the two bounds' thresholds order the classes differently (not for the built-ins: both are the same
        increasing map of one pooled quantity per class), the bound used by most classes."""
        met, os_t, model_t, plans = self._candidates(np.array([float(target)]), self.all_rows())
        _, rank, e_model, os_met = plans[0]
        if not met[0]:
            return "model-unmet", float(self.grid[0])
        if os_met or (rank is not None and (e_model is None or np.mean(os_t[:, 0] <= model_t[:, 0]) >= 0.5)):
            return "order-statistic", float(rank)
        return "model", float(e_model)

    def _thresholds(self, targets: np.ndarray, rows: np.ndarray) -> np.ndarray:
        met, os_t, model_t, plans = self._candidates(targets, rows)
        os_met = np.array([p[3] for p in plans], dtype=bool)
        out = np.where(os_met[None, :], os_t, np.minimum(os_t, model_t))
        # no bound met: the promise cannot be kept by any threshold the model offers: accept only exact matches
        out[:, ~met] = np.minimum(out[:, ~met], 0.0)
        return out

    def parameters(self) -> list[dict[str, Any]]:
        return [{**row, "confidence": self.confidence} for row in self.inner.parameters()]

    def confidence_state(self) -> dict[str, Any]:
        out = {"confidence": self.confidence, "grid": self.grid.tolist(), "upper": self.upper.tolist(),
               "independent": self.independent}
        if self.dispersion:
            out["dispersion"] = dict(self.dispersion)
        return out

    def to_state(self) -> dict[str, Any]:
        return self.inner.to_state()

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> "ConfidentModel":  # pragma: no cover - see saved_entries
        raise DataError("a confident model is rebuilt from its inner model's state and its confidence entry")


def from_saved_entry(inner: FittedModel, entry: Any) -> ConfidentModel:
    """The confident model a saved calibration's ``confidence`` entry describes around ``inner``, every field
    checked (audit S3): the candidate targets in (0, 1) ascending, their FPR bounds in [0, 1] (NaN only as a
    suffix: targets the curve does not meet), ``independent`` a whole number >= 1 or null."""
    from calibrate.contract import statecheck

    if not isinstance(entry, dict):
        raise DataError(f"confidence must be a mapping, got {type(entry).__name__}")
    grid = statecheck.numbers(entry.get("grid", []), "confidence.grid", 0.0, 1.0, open_low=True)
    upper = entry.get("upper", [])
    if not isinstance(upper, list) or len(upper) != grid.size:
        raise DataError(f"confidence.upper must hold {grid.size} FPR bounds, one per candidate target")
    met = [v for v in upper if not (isinstance(v, float) and np.isnan(v))]
    bounds = statecheck.numbers(met, "confidence.upper", 0.0, 1.0)
    if np.any(np.diff(grid) <= 0) or np.any(np.diff(bounds) < 0) or upper[:len(met)] != met:
        raise DataError("confidence.grid must ascend and confidence.upper must not decrease (NaN only at its end)")
    independent = entry.get("independent")
    if independent is not None:
        independent = int(statecheck.number(independent, "confidence.independent", 1, integer=True))
    dispersion = entry.get("dispersion")
    if dispersion is not None:
        if not isinstance(dispersion, dict):
            raise DataError("confidence.dispersion must be a mapping of intercept, slope and unit_size")
        dispersion = {"intercept": float(statecheck.number(dispersion.get("intercept"), "confidence.dispersion.intercept",
                                                           -1e6, 1e6)),
                      "slope": float(statecheck.number(dispersion.get("slope"), "confidence.dispersion.slope", -1.0, 0.0)),
                      "unit_size": float(statecheck.number(dispersion.get("unit_size"), "confidence.dispersion.unit_size",
                                                           1.0, 1e15))}
    return ConfidentModel(inner, entry.get("confidence"), grid, np.asarray(upper, dtype=np.float64), independent,
                          dispersion)


def confident(model: FittedModel, prediction: Prediction | None, confidence: float,
              independent: int | None = None, dispersion: dict | None = None) -> ConfidentModel:
    """Wrap a fitted model with its confidence bound (the model-based curve from ``prediction``'s replicates)."""
    if prediction is None or prediction.grid is None:
        return ConfidentModel(model, confidence, independent=independent, dispersion=dispersion)
    return ConfidentModel(model, confidence, prediction.grid, upper_curve(prediction.grid_fpr, confidence), independent,
                          dispersion)


def confident_prediction(model: ConfidentModel, prediction: Prediction) -> Prediction:
    """The predicted interval of the confident thresholds: each replicate's achieved FPR at the threshold
    actually used (the order statistic of the same rank in the replicate; or the lowered target, log-linear
    between the candidates the replicates were judged at)."""
    lg = np.log(prediction.grid)
    reps = np.empty((prediction.grid_fpr.shape[0], prediction.targets.size))
    methods = []
    for j, e in enumerate(prediction.targets):
        method, value = model.choice(float(e))
        methods.append(method)
        if (method == "order-statistic" and prediction.ranks is not None and prediction.ranks[j] == int(value)
                and np.all(np.isfinite(prediction.rank_fpr[:, j]))):
            reps[:, j] = prediction.rank_fpr[:, j]
        elif method == "model-unmet":
            reps[:, j] = 0.0  # distance 0: the world has no mass there unless some training distance is exactly 0
        else:
            eff = value / model.pool_size if method == "order-statistic" else value
            reps[:, j] = [np.interp(np.log(eff), lg, row) for row in prediction.grid_fpr]
    return Prediction(prediction.targets, prediction.level, reps, None, None, prediction.failed, methods=tuple(methods))


def make_confident(model: FittedModel, estimator: Any, impostors: Any, targets: Sequence[float], confidence: float, *,
                   settings: PredictionSettings, seed: Sequence[int], context: Any, world: Any,
                   units: Any = None) -> tuple:
    """Fit-time confidence: simulate (with the candidate grid and the order-statistic ranks), wrap the model,
    and the predicted interval of the confident thresholds. Where the training false accepts cluster by probe
    (``units``: calibrate.predicted.clustering), the replicates are widened by what that adds to a threshold's error
    (at every candidate target) and the order-statistic ranks count the values as overdispersed. Returns
    (ConfidentModel, its Prediction, the Prediction of the plain thresholds)."""
    from calibrate.predicted.clustering import clustering_of, widen

    independent = independent_values(world)
    found = clustering_of(units, impostors, model, targets, settings.level)
    dispersion = dispersion_of(found)
    ranks = confidence_ranks(model, targets, confidence, independent, dispersion)
    if ranks is not None:  # below where the bound starts, the smallest order statistic caps the threshold
        ranks = np.maximum(ranks, 1)
    predicted = predict(estimator, impostors, targets, settings=settings, seed=seed, context=context,
                        confidence=confidence, world=world, ranks=ranks)
    if found is not None:
        n = int(impostors.values.size)
        predicted.grid_fpr = widen(predicted.grid_fpr, found.threshold_variance(predicted.grid, n))
        if predicted.rank_fpr is not None:
            predicted.rank_fpr = widen(predicted.rank_fpr, found.threshold_variance(predicted.targets, n))
        predicted.clustering = found.summary(predicted.targets, n)
    wrapped = confident(model, predicted, confidence, independent, dispersion)
    out = confident_prediction(wrapped, predicted)
    out.clustering = predicted.clustering
    return wrapped, out, predicted


def predict_model(model: FittedModel, estimator: Any, impostors: Any, targets: Sequence[float],
                  confidence: float | None, *, settings: PredictionSettings, seed: Sequence[int], context: Any,
                  world: Any, fit_seconds: float | None = None, base_seconds: float | None = None,
                  units: Any = None) -> tuple[FittedModel, Prediction]:
    """The fitted model and its predicted FPR, checked against the training distances per target: with
    ``confidence``, the model wrapped with its bound and the prediction of the confident thresholds
    (:func:`make_confident`); else the model as fitted (:func:`calibrate.predicted.interval.predict`, within the
    time budget that ``fit_seconds`` and ``base_seconds`` set)."""
    if confidence is not None:
        wrapped, predicted = make_confident(model, estimator, impostors, targets, confidence, settings=settings,
                                            seed=seed, context=context, world=world, units=units)[:2]
        predicted.tail_model = getattr(world, "tail_model", "")
        check_prediction(predicted, world, impostors, wrapped)
        return wrapped, predicted
    return model, predict(estimator, impostors, targets, settings=settings, seed=seed, context=context, world=world,
                          model=model, fit_seconds=fit_seconds, base_seconds=base_seconds, units=units)


def saved_entries(model: FittedModel, prediction: dict | None, reach: float, held: float | None = None
                  ) -> tuple[dict, dict]:
    """(model state, extra entries) of one estimator in a saved calibration that answers targets up to
    ``reach`` (:func:`calibrate.statistics.order.saved_reach`; the state is the compacted model's,
    :meth:`FittedModel.compact`): ``reach``, what the saved model answers (``reach``, or 1 when the model is saved
    whole; ``held``: the reach of a model loaded from a file, which a model it compacts no further keeps);
    ``prediction`` (:meth:`Prediction.saved`) and, for a confident model, ``confidence`` (its bound; the state is
    the inner model's, so the estimator's own ``from_state`` rebuilds it)."""
    extra: dict[str, Any] = {}
    if prediction:
        extra["prediction"] = prediction
    inner = model.inner if isinstance(model, ConfidentModel) else model
    if isinstance(model, ConfidentModel):
        extra["confidence"] = model.confidence_state()
    small = inner.compact(reach)
    extra["reach"] = float(reach if small is not inner else (1.0 if held is None else held))
    return small.to_state(), extra

