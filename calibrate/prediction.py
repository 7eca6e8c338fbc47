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
    from .world import build_world as build, pair_slots

    slots = None if train is None else pair_slots(train.values, train.impostor_mask())
    return build(impostors, slots)


# ---- confidence ----------------------------------------------------------------------------------


