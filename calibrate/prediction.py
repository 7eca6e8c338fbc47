"""How far a threshold can be trusted before any evaluation data exist: predicted FPR intervals
and thresholds with a stated confidence.

Predicted interval (``predict``). The FPR a threshold will achieve on new impostors is unknown,
but its *spread* can be simulated: build a world from the training distances in which the true
FPR of any threshold is known (the reference world, ``calibrate_builtins.estimators.world``:
auto's model, with a generalised Pareto lower tail), draw B galleries of the same classes and
sizes from it, refit the estimator on each, and compute the true FPR its thresholds achieve in
the world. The ratios ``achieved / target`` over the B replicates are taken as the distribution
of the ratio the real thresholds achieve (a percentile bootstrap on the ratio, which carries the
estimator's bias in the world as well as its variance); the interval at level L is their
(1 - L) / 2 and (1 + L) / 2 quantiles, times the target. Per class the same is done with the
class's own FPR.

That interval is for the long-run FPR (infinitely many new attempts). An evaluation counts false
accepts among a finite number n of attempts, which adds binomial noise;
:func:`measured_interval` gives the interval for the FPR *measured* on n attempts: a mixture,
over the replicates, of Binomial(n, p_b) / n. The ``fpr`` evaluator reports that one beside the
measured FPR (only the count n of evaluation attempts is used, none of their outcomes).

Confidence (``confident_targets``). A threshold whose achieved FPR exceeds the target with
probability at most 1 - c. Two ways, chosen per target:

* ``order-statistic`` (distribution-free): when the estimator's threshold at rank k is the k-th
  smallest of N pooled exchangeable training values (auto's pooled standardised scores,
  generic-interp's pooled distances), the FPR it achieves is Beta(k, N - k + 1) whatever the
  distribution; the largest k with P(Beta(k, N - k + 1) <= e) >= c is used (the exact binomial
  bound of "learn then test" risk control). It exists when N is at least about -ln(1 - c) / e
  (6,000 training distances at 0.05% and c = 0.95).
* ``model`` (below that): the target is lowered to e' such that the c-quantile of the achieved FPR
  over the world's replicates is e; valid as far as the world resembles the data.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from .base import FittedModel, RunContext
from .errors import DataError, ParameterError

DEFAULT_LEVEL = 0.9
DEFAULT_REPLICATES = 100
#: candidate targets of the model-based confidence, as multiples of the smallest and largest target
_GRID_DOWN, _GRID_STEPS_PER_OCTAVE = 2.0 ** -14, 8


@dataclass(frozen=True)
class PredictionSettings:
    """The recipe's ``evaluation.prediction`` (``false`` turns it off)."""

    level: float = DEFAULT_LEVEL
    replicates: int = DEFAULT_REPLICATES
    enabled: bool = True

    def __post_init__(self):
        if not 0.5 <= self.level < 1.0:
            raise ParameterError(f"prediction level must be in [0.5, 1), e.g. 0.9 for a 90% interval; got {self.level}")
        if not (isinstance(self.replicates, int) and 20 <= self.replicates <= 100_000):
            raise ParameterError(f"prediction replicates must be an integer in [20, 100000]; got {self.replicates!r}")


def check_confidence(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.5 <= float(value) < 1.0:
        raise ParameterError(f"confidence must be a probability in [0.5, 1), e.g. 0.95; got {value!r}")
    return float(value)


@dataclass
class Prediction:
    """Predicted FPR of one estimator's thresholds on one fold's gallery.

    ``replicates[b, t]``: the true FPR, in replicate world b, of the thresholds refitted there at
    ``targets[t]`` (attempts weighted by each class's training count); ``class_low``/``class_high``:
    the per-class interval (classes x targets) or None when it was not kept.
    """

    targets: np.ndarray
    level: float
    replicates: np.ndarray
    class_low: np.ndarray | None = None
    class_high: np.ndarray | None = None
    failed: int = 0
    #: model-based confidence: candidate targets and the replicates' achieved FPR at each (B x G)
    grid: np.ndarray | None = None
    grid_fpr: np.ndarray | None = None
    #: order-statistic confidence: the rank used at each target (0: none) and the replicates' FPR there (B x T)
    ranks: np.ndarray | None = None
    rank_fpr: np.ndarray | None = None
    #: how each target's threshold was chosen when the estimator carries a confidence ("order-statistic" or "model")
    methods: tuple[str, ...] = ()

    @property
    def low(self) -> np.ndarray:
        return np.nanquantile(self.replicates, (1 - self.level) / 2, axis=0)

    @property
    def high(self) -> np.ndarray:
        return np.nanquantile(self.replicates, (1 + self.level) / 2, axis=0)

    def summary(self) -> dict[str, Any]:
        """JSON-ready: the long-run interval per target (and per class when kept)."""
        out: dict[str, Any] = {"level": self.level, "simulated_galleries": int(self.replicates.shape[0]),
                               "targets": self.targets.tolist(),
                               "predicted_fpr_low": self.low.tolist(), "predicted_fpr_high": self.high.tolist(),
                               "world": "auto's model with a GPD lower tail (calibrate.prediction)"}
        if self.methods:
            out["confidence_method"] = list(self.methods)
        return out

    def saved(self, classes: Sequence[str]) -> dict[str, Any]:
        """What a saved calibration keeps: the summary, the replicates (for the interval on any number of
        attempts) and the per-class intervals when they were kept."""
        out = self.summary()
        out["replicates"] = self.replicates.tolist()
        if self.class_low is not None:
            out["per_class"] = {"classes": list(classes), "low": self.class_low.tolist(), "high": self.class_high.tolist()}
        return out


def saved_entries(model: FittedModel, prediction: dict | None) -> tuple[dict, dict]:
    """(model state, extra entries) of one estimator in a saved calibration: ``prediction``
    (:meth:`Prediction.saved`) and, for a confident model, ``confidence`` (its bound; the state is the
    inner model's, so the estimator's own ``from_state`` rebuilds it)."""
    extra: dict[str, Any] = {}
    if prediction:
        extra["prediction"] = prediction
    if isinstance(model, ConfidentModel):
        extra["confidence"] = model.confidence_state()
        return model.inner.to_state(), extra
    return model.to_state(), extra


def measured_interval(replicates: np.ndarray, attempts: int, level: float) -> tuple[np.ndarray, np.ndarray]:
    """Quantiles (1 -/+ level) / 2 of the mixture over replicates of Binomial(attempts, p_b) / attempts."""
    from scipy.stats import binom

    reps = np.asarray(replicates, dtype=np.float64)
    reps = reps[np.all(np.isfinite(reps), axis=1)]
    n = int(attempts)
    t = reps.shape[1]
    low, high = np.full(t, np.nan), np.full(t, np.nan)
    if n <= 0 or reps.shape[0] == 0:
        return low, high
    a = (1 - level) / 2
    for j in range(t):
        p = np.clip(reps[:, j], 0.0, 1.0)
        top = int(binom.ppf(1 - 1e-6, n, float(p.max()))) + 1
        k = np.arange(top + 1)
        mix = binom.cdf(k[:, None], n, p[None, :]).mean(axis=1)
        low[j] = k[np.searchsorted(mix, a - 1e-12)] / n
        high[j] = k[min(np.searchsorted(mix, 1 - a - 1e-12), k.size - 1)] / n
    return low, high


def combine(predictions: Sequence[Prediction], weights: Sequence[float]) -> np.ndarray:
    """Replicate-wise FPR over several folds (rotating enrollment): the folds' attempts add up, so
    replicate b's FPR is the ``weights``-weighted mean of the folds' replicate b (folds independent)."""
    b = min(p.replicates.shape[0] for p in predictions)
    w = np.asarray(weights, dtype=np.float64)
    stack = np.stack([p.replicates[:b] for p in predictions])  # folds x B x T
    return np.tensordot(w / w.sum(), stack, axes=1)


# ---- the simulation ----------------------------------------------------------------------------


def _grid(targets: np.ndarray) -> np.ndarray:
    lo, hi = float(targets.min()) * _GRID_DOWN, float(targets.max())
    steps = int(math.ceil(math.log2(hi / lo) * _GRID_STEPS_PER_OCTAVE))
    return np.exp(np.linspace(math.log(lo), math.log(hi), steps + 1))


#: what a refit on a simulated gallery may raise without failing the run: the gallery is counted as failed
_REFIT_ERRORS = (DataError, ValueError, ArithmeticError, np.linalg.LinAlgError)


def _replicate(item: tuple) -> tuple | None:
    """One replicate world: draw a gallery, refit, and the true FPR of the refitted thresholds (module
    level: executors may run it in other processes). Returns (per-class FPR at the targets, gallery FPR
    on the candidate grid or None, gallery FPR at the order-statistic ranks or None); None when the
    refit failed."""
    world, estimator, targets, grid, ranks, seed = item
    rng = np.random.default_rng(seed)
    drawn = world.draw(rng)
    try:
        # a refit on a simulated gallery says nothing the user can act on: its notes (and numpy's
        # warnings) stay here, or a recipe would print one warning per refit (hundreds per run)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = estimator.fit(drawn, RunContext())
        rows = model.all_rows()
        per_class = world.class_fpr(model._thresholds(targets, rows))
        on_grid = on_ranks = None
        if grid is not None:
            on_grid = _gallery_fpr(world.counts, world.class_fpr(model._thresholds(grid, rows)))
        if ranks is not None:
            on_ranks = np.full(ranks.size, np.nan)
            usable = ranks >= 1
            if usable.any():
                tau = model.order_statistic_thresholds(ranks[usable].astype(np.float64), rows)
                on_ranks[usable] = _gallery_fpr(world.counts, world.class_fpr(tau))
    except _REFIT_ERRORS:
        return None
    return per_class, on_grid, on_ranks


def _gallery_fpr(counts: np.ndarray, per_class: np.ndarray) -> np.ndarray:
    w = counts.astype(np.float64)
    return (w[:, None] * per_class).sum(axis=0) / w.sum()


#: per-class intervals are kept while replicates x classes x targets stays below this many values
_PER_CLASS_LIMIT = 20_000_000


def predict(estimator: Any, impostors: Any, targets: Sequence[float], *, settings: PredictionSettings,
            seed: Sequence[int], context: Any, confidence: float | None = None, world: Any = None,
            ranks: np.ndarray | None = None) -> Prediction:
    """Simulate the estimator's achieved FPR (see the module's docstring); ``world`` may be given when
    already built for this gallery (it is the same for every estimator). With ``confidence``, also on
    the grid of candidate targets of the model-based bound, and at the order-statistic ``ranks`` (one
    per target, 0 where none) of :func:`confidence_ranks`."""
    if world is None:
        world = build_world(impostors)
    t = np.asarray(targets, dtype=np.float64)
    grid = _grid(t) if confidence is not None else None
    items = [(world, estimator, t, grid, ranks, [*seed, b]) for b in range(settings.replicates)]
    out = context.map(_replicate, items)
    done = [o for o in out if o is not None]
    failed = len(out) - len(done)
    if len(done) < max(10, 0.9 * len(out)):
        raise DataError(f"predicted FPR interval: estimator {type(estimator).__name__} failed on {failed} of {len(out)} "
                        "simulated galleries (drawn from a model of the training distances), so no interval can be "
                        "given; turn the prediction off for this data (recipe: `evaluation: {prediction: false}`; "
                        "calibrate.fit: predict=False)")
    per_class = np.stack([d[0] for d in done])  # B x C x T
    reps = np.stack([_gallery_fpr(world.counts, pc) for pc in per_class])
    keep = per_class.size <= _PER_CLASS_LIMIT
    a = (1 - settings.level) / 2
    pred = Prediction(t, settings.level, reps,
                      np.quantile(per_class, a, axis=0) if keep else None,
                      np.quantile(per_class, 1 - a, axis=0) if keep else None, failed)
    if grid is not None:
        pred.grid, pred.grid_fpr = grid, np.stack([d[1] for d in done])
    if ranks is not None:
        pred.ranks, pred.rank_fpr = np.asarray(ranks), np.stack([d[2] for d in done])
    return pred


def build_world(impostors: Any, train: Any = None) -> Any:
    """The reference world fitted to the training distances (``calibrate_builtins.estimators.world``);
    ``train``: the training DistanceMatrix they come from, whose symmetric pairs the world keeps."""
    from calibrate_builtins.estimators.world import build_world as build, pair_slots

    slots = None if train is None else pair_slots(train.values, train.impostor_mask())
    return build(impostors, slots)


# ---- confidence ----------------------------------------------------------------------------------


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
    return float(np.exp(np.log(grid[j]) + frac * (np.log(grid[j + 1]) - np.log(grid[j]))))


def independent_values(world: Any) -> int | None:
    """How many of the world's pooled training values are independent draws: the distinct pairs when the
    enrolled-vs-enrolled matrix lists each pair twice, else None (all of them)."""
    slots = getattr(world, "slots", None)
    return None if slots is None or slots.size == 0 else int(slots.max()) + 1


def confidence_ranks(model: FittedModel, targets: Sequence[float], confidence: float,
                     independent: int | None = None) -> np.ndarray | None:
    """Per target the order-statistic rank of the bound (0 where even the smallest value fails), or None
    when the model's thresholds are not pooled order statistics."""
    pool = model.order_statistic_pool()
    if not pool:
        return None
    n = min(pool, independent) if independent else pool
    return np.array([order_statistic_rank(float(e), n, confidence) for e in targets], dtype=np.int64)


#: how each target's confident threshold was chosen
METHODS = {"order-statistic": "the distribution-free order-statistic bound",
           "model": "the model-based bound (simulated galleries)",
           "model-unmet": "no bound could be met: even the strictest candidate exceeded the target in more than "
                          "1 - confidence of the simulated galleries, so the threshold is distance 0 (only exact "
                          "matches are accepted: the promise is kept by rejecting nearly everyone)"}


class ConfidentModel(FittedModel):
    """An estimator's fitted model whose threshold at target e has achieved FPR <= e with probability
    ``confidence`` (module docstring). Per target the stricter of the two bounds that exist: the inner
    model's threshold at the pooled order statistic of rank k (``order-statistic``; k from the binomial
    bound over ``independent`` values, default all ``pool_size``), or at a target e' read off the
    simulated galleries' bound (``model``). The stricter of two non-decreasing choices, and a model-based
    threshold never looser than the smallest order statistic (which the order-statistic bound uses from
    some target up), keep the thresholds non-decreasing in the target; a stricter threshold keeps the
    promise."""

    def __init__(self, inner: FittedModel, confidence: float, grid: Sequence[float] = (), upper: Sequence[float] = (),
                 independent: int | None = None):
        super().__init__(inner.classes)
        self.inner, self.confidence = inner, check_confidence(confidence)
        self.grid, self.upper = np.asarray(grid, dtype=np.float64), np.asarray(upper, dtype=np.float64)
        if self.grid.shape != self.upper.shape:
            raise DataError("confidence: the candidate targets and their FPR bounds differ in length")
        self.pool_size = inner.order_statistic_pool()
        self.independent = None if independent is None else int(independent)

    def rank(self, target: float) -> int:
        if not self.pool_size:
            return 0
        n = min(self.pool_size, self.independent) if self.independent else self.pool_size
        return order_statistic_rank(target, n, self.confidence)

    def choice(self, target: float) -> tuple[str, float]:
        """(method, value): ("order-statistic", rank k), ("model", e') or ("model-unmet", smallest candidate):
        then the threshold is distance 0."""
        k = self.rank(target)
        e_model = curve_target(target, self.grid, self.upper) if self.grid.size else None
        if k >= 1 and (e_model is None or k / self.pool_size <= e_model):
            return "order-statistic", float(k)
        if e_model is not None:
            return "model", e_model
        if self.grid.size:
            return "model-unmet", float(self.grid[0])
        raise DataError(f"confidence {self.confidence}: at target {target:g} the {self.pool_size or 0} pooled training "
                        "values are too few for an order-statistic bound, and this calibration holds no model-based "
                        "bound (its predicted interval could not be simulated)")

    def _thresholds(self, targets: np.ndarray, rows: np.ndarray) -> np.ndarray:
        out = np.empty((rows.size, targets.size))
        for j, e in enumerate(targets):
            method, value = self.choice(float(e))
            if method == "order-statistic":
                out[:, j] = self.inner.order_statistic_thresholds(np.array([value]), rows)[:, 0]
            elif method == "model-unmet":
                out[:, j] = 0.0  # the promise cannot be kept by any threshold the model offers: accept only exact matches
            else:
                out[:, j] = self.inner._thresholds(np.array([value]), rows)[:, 0]
                if self.pool_size and self.rank(float(e)) == 0:  # below where the order-statistic bound starts:
                    # never looser than the smallest order statistic, which it uses from there up
                    out[:, j] = np.minimum(out[:, j], self.inner.order_statistic_thresholds(np.array([1.0]), rows)[:, 0])
        return out

    def parameters(self) -> list[dict[str, Any]]:
        return [{**row, "confidence": self.confidence} for row in self.inner.parameters()]

    def confidence_state(self) -> dict[str, Any]:
        return {"confidence": self.confidence, "grid": self.grid.tolist(), "upper": self.upper.tolist(),
                "independent": self.independent}

    def to_state(self) -> dict[str, Any]:
        return self.inner.to_state()

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> "ConfidentModel":  # pragma: no cover - see saved_entries
        raise DataError("a confident model is rebuilt from its inner model's state and its confidence entry")


def confident(model: FittedModel, prediction: Prediction | None, confidence: float,
              independent: int | None = None) -> ConfidentModel:
    """Wrap a fitted model with its confidence bound (the model-based curve from ``prediction``'s replicates)."""
    if prediction is None or prediction.grid is None:
        return ConfidentModel(model, confidence, independent=independent)
    return ConfidentModel(model, confidence, prediction.grid, upper_curve(prediction.grid_fpr, confidence), independent)


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
                   settings: PredictionSettings, seed: Sequence[int], context: Any, world: Any) -> tuple:
    """Fit-time confidence: simulate (with the candidate grid and the order-statistic ranks), wrap the model,
    and the predicted interval of the confident thresholds. Returns (ConfidentModel, its Prediction, the
    Prediction of the plain thresholds)."""
    independent = independent_values(world)
    ranks = confidence_ranks(model, targets, confidence, independent)
    predicted = predict(estimator, impostors, targets, settings=settings, seed=seed, context=context,
                        confidence=confidence, world=world, ranks=ranks)
    wrapped = confident(model, predicted, confidence, independent)
    return wrapped, confident_prediction(wrapped, predicted), predicted


def predict_model(model: FittedModel, estimator: Any, impostors: Any, targets: Sequence[float],
                  confidence: float | None, *, settings: PredictionSettings, seed: Sequence[int], context: Any,
                  world: Any) -> tuple[FittedModel, Prediction]:
    """The fitted model and its predicted FPR: with ``confidence``, the model wrapped with its bound and the
    prediction of the confident thresholds (:func:`make_confident`); else the model as fitted (:func:`predict`)."""
    if confidence is not None:
        return make_confident(model, estimator, impostors, targets, confidence, settings=settings, seed=seed,
                              context=context, world=world)[:2]
    return model, predict(estimator, impostors, targets, settings=settings, seed=seed, context=context, world=world)
