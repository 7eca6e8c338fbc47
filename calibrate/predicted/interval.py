"""How far a threshold can be trusted before any evaluation data exist: the predicted FPR interval.

The FPR a threshold will achieve on new impostors is unknown, but its *spread* can be simulated:
build a world from the training distances in which the true FPR of any threshold is known (the
reference world, calibrate.predicted.world: auto's model with a checked lower tail), draw B galleries of
the same classes and sizes from it, fit the estimator on each, and compute the true FPR its
thresholds achieve in the world. The ratios ``achieved / target`` over the B replicates are taken
as the distribution of the ratio the real thresholds achieve (a percentile bootstrap on the
ratio, which carries the estimator's bias in the world as well as its variance); the interval at
level L is their (1 - L) / 2 and (1 + L) / 2 quantiles, times the target. Per class the same is
done with the class's own FPR.

Cost, by design. An estimator that implements ``Estimator.simulate`` gets all its replicates as
array operations over the B galleries at once (generic-interp, class-interp and auto do: the same
formulas as their fit, checked equal by the conformance kit), on galleries drawn only at the ranks
they read; the number of replicates is then ``replicates`` (100), lowered only where that would draw
more than ``SIMULATED_PER_DISTANCE`` values per training distance (and more than ``SIMULATED_VALUES``
in all; never below 20): deterministic, so a run gives the same interval on every machine, and the
run's notes say what fewer galleries do to the level (:func:`replicate_level`). Any
other estimator is refitted one gallery at a time, within a time budget: ``budget`` (0.2) times
the run's time so far (or ``budget_s`` seconds); as many refits as the estimator's own measured
fit time allows, and none, with a note saying what it would cost, when fewer than 20 fit.

Checked, before it is believed. Per target the world is compared with the training distances at
the estimator's own thresholds (calibrate.predicted.world.training_check): where at least 10 training
distances lie below the thresholds, the world's FPR must lie in the 99.9% binomial band of the
training FPR, widened 1.5-fold for the bias of counting at thresholds fitted to those very
distances (``fits``), or the target gets no interval (``contradicted``: "the model does not fit
these training scores at this target"). Below 10 the world's tail speaks (``tail``), and only if it
passed its own check against the pooled scores (else ``tail-unfit``, no interval) and its expected count
of training distances below the thresholds agrees with the observed one both ways (the 99.9% Poisson band,
widened 1.5-fold; else ``contradicted``: a world that predicts hundreds where there is one is wrong at any
support). Each estimator is judged in the world that fits its thresholds best (:func:`choose_world`:
calibrate.predicted.world.WORLDS, classes located by the bulk of their impostors or at their nearest ones).

That interval is for the long-run FPR (infinitely many new attempts). An evaluation counts false
accepts among a finite number n of attempts, which adds binomial noise; :func:`measured_interval`
gives the interval for the FPR *measured* on n attempts: a mixture, over the replicates, of
Binomial(n, p_b) / n. The ``fpr`` evaluator reports that one beside the measured FPR (only the
count n of evaluation attempts is used, none of their outcomes).

Thresholds with a stated confidence (calibrate.predicted.confidence) use the same simulation, with every
replicate refitted (a user who asks for a confidence asks for its cost).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from calibrate.contract.base import Estimator, FittedModel, RunContext, overrides, progress_name
from calibrate.errors import DataError, ParameterError

DEFAULT_LEVEL = 0.9
DEFAULT_REPLICATES = 100
#: fewer replicates than this give no interval (the 5% and 95% quantiles of fewer are too coarse)
MIN_REPLICATES = 20
#: the share of the run's time so far that refits may take by default
DEFAULT_BUDGET = 0.2
#: vectorised simulation: replicates x drawn values may reach this many per training distance (the run's own cost
#: grows with them: reading, splitting, sorting, fitting), or SIMULATED_VALUES in all where that is more
SIMULATED_PER_DISTANCE = 4
SIMULATED_VALUES = 2_000_000
#: distances drawn per chunk of replicates (memory: about 10 arrays of this many float64 at once)
_CHUNK_VALUES = 2_000_000
#: candidate targets of the model-based confidence, as multiples of the smallest and largest target
_GRID_DOWN, _GRID_STEPS_PER_OCTAVE = 2.0 ** -14, 8

#: per target, what the world's check said and what it means for the interval
STATUS = {"fits": "the world matches the training distances at these thresholds (at least 10 of them lie below)",
          "tail": "fewer than 10 training distances lie below these thresholds: the world's tail, checked against "
                  "the pooled training scores, predicts there",
          "contradicted": "no prediction: the model does not fit these training scores at this target (its FPR at "
                          "these thresholds lies outside the 99.9% binomial band of the training FPR, widened 1.5-fold; "
                          "where fewer than 10 training distances lie below them, its expected count outside the 99.9% "
                          "Poisson band of theirs)",
          "tail-unfit": "no prediction: the model does not fit these training scores at this target (its tail "
                        "failed the check against the pooled training scores, and these thresholds lie in it)"}
#: the statuses that give an interval
PREDICTED = ("fits", "tail")
#: the reference worlds (calibrate.predicted.world.WORLDS), in words
WORLD_WORDS = {"bulk": "auto's model (classes located by the bulk of their impostors)",
               "anchored": "the anchored model (classes located at their nearest impostors)"}


@dataclass(frozen=True)
class PredictionSettings:
    """The recipe's ``evaluation.prediction`` (``false`` turns it off)."""

    level: float = DEFAULT_LEVEL
    replicates: int = DEFAULT_REPLICATES
    enabled: bool = True
    #: refits may take this share of the run's time so far (estimators without ``simulate``)
    budget: float = DEFAULT_BUDGET
    #: or this many seconds per estimator and fold (overrides ``budget``)
    budget_s: float | None = None

    def __post_init__(self):
        if not 0.5 <= self.level < 1.0:
            raise ParameterError(f"prediction level must be in [0.5, 1), e.g. 0.9 for a 90% interval; got {self.level}")
        if not (isinstance(self.replicates, int) and MIN_REPLICATES <= self.replicates <= 100_000):
            raise ParameterError(f"prediction replicates must be an integer in [{MIN_REPLICATES}, 100000]; "
                                 f"got {self.replicates!r}")
        if isinstance(self.budget, bool) or not isinstance(self.budget, (int, float)) or not 0 < self.budget <= 100:
            raise ParameterError(f"prediction budget must be a share of the run's time in (0, 100], e.g. 0.2; "
                                 f"got {self.budget!r}")
        if self.budget_s is not None and (isinstance(self.budget_s, bool) or not isinstance(self.budget_s, (int, float))
                                          or not 0 < self.budget_s < 1e7):
            raise ParameterError(f"prediction budget_s must be a positive number of seconds, e.g. 600; "
                                 f"got {self.budget_s!r}")

    def seconds(self, base_seconds: float) -> float:
        """The refits' time budget, given the run's time so far."""
        return float(self.budget_s) if self.budget_s is not None else self.budget * max(float(base_seconds), 0.0)


def column_quantile(values: np.ndarray, q: float) -> np.ndarray:
    """The q-quantile of each column over its finite entries (NaN where a column has none)."""
    v = np.asarray(values, dtype=np.float64)
    out = np.full(v.shape[1:], np.nan)
    finite = np.isfinite(v)
    for idx in np.ndindex(*v.shape[1:]):
        col = v[(slice(None), *idx)][finite[(slice(None), *idx)]]
        if col.size:
            out[idx] = np.quantile(col, q)
    return out


@dataclass
class Prediction:
    """Predicted FPR of one estimator's thresholds on one fold's gallery.

    ``replicates[b, t]``: the true FPR, in replicate world b, of the thresholds refitted there at
    ``targets[t]`` (attempts weighted by each class's training count), NaN in the columns of targets
    without a prediction (``status``); ``class_low``/``class_high``: the per-class interval (classes x
    targets) or None when it was not kept.
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
    #: per target, the world's check (a key of STATUS) and its figures (calibrate.predicted.world.training_check)
    status: tuple[str, ...] = ()
    checks: list[dict] = field(default_factory=list)
    #: "vectorised" (Estimator.simulate) or "refits"; the world's tail model and structure (calibrate.predicted.world.WORLDS)
    simulation: str = "refits"
    tail_model: str = ""
    world: str = "bulk"
    #: when the time budget cut the refits short, how many ran (in words; "" otherwise)
    budget_note: str = ""

    def predicted(self) -> np.ndarray:
        """Per target, whether it has an interval."""
        if not self.status:
            return np.ones(self.targets.size, dtype=bool)
        return np.array([s in PREDICTED for s in self.status])

    @property
    def low(self) -> np.ndarray:
        return column_quantile(self.replicates, (1 - self.level) / 2)

    @property
    def high(self) -> np.ndarray:
        return column_quantile(self.replicates, (1 + self.level) / 2)

    def summary(self) -> dict[str, Any]:
        """JSON-ready: the long-run interval per target (None where there is no prediction), and how it was made."""
        low, high = self.low, self.high
        out: dict[str, Any] = {"level": self.level, "simulated_galleries": int(self.replicates.shape[0]),
                               "simulation": self.simulation, "targets": self.targets.tolist(),
                               "predicted_fpr_low": _nones(low), "predicted_fpr_high": _nones(high),
                               "world": f"{WORLD_WORDS.get(self.world, self.world)} with a {self.tail_model or 'GPD'} "
                                        "lower tail (calibrate.world)", "world_structure": self.world}
        if self.status:
            out["prediction_status"] = list(self.status)
            out["world_check"] = [_jsonable_check(c) for c in self.checks]
        if self.methods:
            out["confidence_method"] = list(self.methods)
        return out

    def saved(self, classes: Sequence[str]) -> dict[str, Any]:
        """What a saved calibration keeps: the summary, the replicates (for the interval on any number of
        attempts) and the per-class intervals when they were kept; each table as :func:`saved_table` writes it."""
        out = self.summary()
        out["replicates"] = saved_table(self.replicates)
        if self.class_low is not None:
            out["per_class"] = {"classes": list(classes), "low": saved_table(self.class_low),
                                "high": saved_table(self.class_high)}
        return out


def saved_table(rows: np.ndarray) -> list | dict:
    """A table of rates (one row per replicate or class, one column per target) as a saved calibration holds it:
    lists with null for NaN (JSON has no NaN), or, from ``calibrate.contract.packed.PACK_FROM`` values (a per-class table
    of hundreds of classes), its rows one after the other packed exactly (calibrate.contract.packed; NaN kept)."""
    from calibrate.contract.packed import PACK_FROM, packed

    r = np.asarray(rows, dtype=np.float64)
    return packed(r.ravel()) if r.size >= PACK_FROM else [_nones(row) for row in r]


def _nones(values: np.ndarray) -> list:
    """A JSON list with None for NaN (JSON has no NaN)."""
    return [float(v) if np.isfinite(v) else None for v in np.asarray(values, dtype=np.float64)]


def _jsonable_check(check: dict) -> dict:
    return {k: (list(v) if isinstance(v, tuple) else v) for k, v in check.items()}


def as_array(values: Any, columns: int | None = None) -> np.ndarray:
    """A saved (JSON) list of floats or None back to an array with NaN; a packed table (:func:`saved_table`) of
    ``columns`` columns back to its rows."""
    from calibrate.contract.packed import is_packed, unpacked

    if is_packed(values):
        return unpacked(values, "prediction").reshape(-1, columns)
    return np.array([[np.nan if v is None else v for v in row] if isinstance(row, list) else
                     (np.nan if row is None else row) for row in values], dtype=np.float64)


def measured_interval(replicates: np.ndarray, attempts: int, level: float) -> tuple[np.ndarray, np.ndarray]:
    """Quantiles (1 -/+ level) / 2 of the mixture over replicates of Binomial(attempts, p_b) / attempts
    (per target over its finite replicates; NaN where a target has none)."""
    reps = np.asarray(replicates, dtype=np.float64)
    n = int(attempts)
    t = reps.shape[1]
    low, high = np.full(t, np.nan), np.full(t, np.nan)
    if n <= 0 or reps.shape[0] == 0:
        return low, high
    a = (1 - level) / 2
    for j in range(t):
        p = np.clip(reps[np.isfinite(reps[:, j]), j], 0.0, 1.0)
        if p.size == 0:
            continue
        low[j] = _mixture_quantile(p, n, a - 1e-12) / n
        high[j] = _mixture_quantile(p, n, 1 - a - 1e-12) / n
    return low, high


def _mixture_quantile(p: np.ndarray, n: int, q: float) -> int:
    """The smallest count k with mean_b P(Binomial(n, p_b) <= k) >= q, by bisection on k (the mixture's
    CDF is non-decreasing in k), so that a large n costs a few dozen CDF evaluations, not n."""
    from scipy.special import bdtr  # the binomial CDF, without importing scipy.stats (about 0.4 s)

    lo, hi = 0, _binomial_top(n, float(p.max()))
    if bdtr(lo, n, p).mean() >= q:
        return lo
    while hi - lo > 1:  # invariant: cdf(lo) < q <= cdf(hi)
        mid = (lo + hi) // 2
        if bdtr(mid, n, p).mean() >= q:
            hi = mid
        else:
            lo = mid
    return hi


def _binomial_top(n: int, p: float) -> int:
    """A count at which Binomial(n, p) has all but less than 1e-6 of its mass (mean + 6 sd, and a margin)."""
    mean = n * p
    return int(min(n, math.ceil(mean + 6.0 * math.sqrt(mean * (1 - p)) + 10)))


def combine(predictions: Sequence[Prediction], weights: Sequence[float]) -> np.ndarray:
    """Replicate-wise FPR over several folds (rotating enrollment): the folds' attempts add up, so
    replicate b's FPR is the ``weights``-weighted mean of the folds' replicate b (folds independent;
    NaN where a fold has no prediction at that target)."""
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
            on_grid = world.gallery_fpr(world.class_fpr(model._thresholds(grid, rows)))
        if ranks is not None:
            on_ranks = np.full(ranks.size, np.nan)
            usable = ranks >= 1
            if usable.any():
                tau = model.order_statistic_thresholds(ranks[usable].astype(np.float64), rows)
                on_ranks[usable] = world.gallery_fpr(world.class_fpr(tau))
    except _REFIT_ERRORS:
        return None
    return per_class, on_grid, on_ranks


#: per-class intervals are kept while replicates x classes x targets stays below this many values
_PER_CLASS_LIMIT = 20_000_000


def predict(estimator: Any, impostors: Any, targets: Sequence[float], *, settings: PredictionSettings,
            seed: Sequence[int], context: Any, confidence: float | None = None, world: Any = None,
            ranks: np.ndarray | None = None, model: FittedModel | None = None, fit_seconds: float | None = None,
            base_seconds: float | None = None) -> Prediction:
    """Simulate the estimator's achieved FPR (see the module's docstring); ``world`` may be given when
    already built for this gallery (it is the same for every estimator). ``model``: the estimator's fit on
    the training distances, whose thresholds the world is checked at (per target ``status``).
    ``fit_seconds``: what that fit took (a refit's cost); ``base_seconds``: the run's time so far (the
    refits' budget is a share of it). With ``confidence``, every replicate is refitted, also on the grid
    of candidate targets of the model-based bound and at the order-statistic ``ranks`` (one per target,
    0 where none) of :func:`calibrate.predicted.confidence.confidence_ranks`.

    Raises DataError when no interval can be given at all (too many failed refits; refits over budget)."""
    if world is None:
        world = build_world(impostors)
    t = np.asarray(targets, dtype=np.float64)
    name = progress_name(estimator)
    if confidence is None and simulates(estimator):
        if context is None:
            pred = _simulated([estimator], world, t, settings, seed)[0]
        else:
            with context.stage(f"{name}: predicted FPR, simulated galleries", settings.replicates, "galleries") as task:
                pred = _simulated([estimator], world, t, settings, seed, task)[0]
    elif confidence is None:
        pred = _refitted(estimator, world, t, settings, seed, context, name, fit_seconds, base_seconds)
    else:
        pred = _refitted(estimator, world, t, settings, seed, context, name, None, None, confidence=confidence,
                         ranks=ranks)
    pred.tail_model = getattr(world, "tail_model", "")
    pred.world = getattr(world, "structure", "bulk")
    if model is not None:
        check_prediction(pred, world, impostors, model)
    return pred


def before_beside() -> None:
    """What the prediction needs and the run needs after it too, imported in the run before the process beside it is
    forked (which then has it): scipy.special (the world's binomial and Poisson bands, and the fpr evaluator's
    measured interval), about 0.16 s of CPU and 0.25 s that the child would otherwise spend importing it again."""
    import scipy.special  # noqa: F401


def simulates(estimator: Any) -> bool:
    """Whether the estimator implements ``Estimator.simulate`` (its replicates are array operations)."""
    return overrides(estimator, Estimator, "simulate")


def predict_together(estimators: Sequence[Any], models: Sequence[FittedModel], impostors: Any,
                     targets: Sequence[float], *, settings: PredictionSettings, seed: Sequence[int],
                     world: Any) -> list[Prediction]:
    """The predicted FPR of several estimators that implement ``simulate``, on one shared set of simulated
    galleries (common random numbers: drawing them is most of the cost), each checked against the training
    distances at its model's thresholds."""
    t = np.asarray(targets, dtype=np.float64)
    out = _simulated(list(estimators), world, t, settings, seed)
    for pred, model in zip(out, models):
        pred.tail_model = getattr(world, "tail_model", "")
        pred.world = getattr(world, "structure", "bulk")
        check_prediction(pred, world, impostors, model)
    return out


def _simulated(estimators: list, world: Any, t: np.ndarray, settings: PredictionSettings,
               seed: Sequence[int], task: Any = None) -> list[Prediction]:
    """All replicates by ``Estimator.simulate``, chunk by chunk, every estimator on the same galleries,
    drawn only at the ranks the estimators read (``Estimator.simulation_ranks``; whole when one says None).
    ``task``: a progress task (calibrate.contract.progress.Task) given the replicates' number and advanced by each chunk."""
    counts = world.counts
    n = int(counts.sum())
    asked = [e.simulation_ranks(counts, t, world) for e in estimators]
    ranks = _union_ranks(asked, counts)
    if ranks is not None and world.slots is None:
        ranks = world.draw_plan(ranks)  # the partial draw's layout, once for every chunk
    drawn = ranks.drawn if ranks is not None and world.slots is None else n  # slots: whole galleries
    total = simulated_replicates(settings, drawn, n)
    whole = [e for e, a in zip(estimators, asked) if a is None]
    note = ""
    if total < settings.replicates:  # said in the run's notes, with what it does to the level
        note = _fewer_note(total, settings, drawn, n, world.slots is not None, whole)
    per_chunk = int(max(1, min(total, _CHUNK_VALUES // max(drawn, 1))))
    if task is not None:
        task.set_total(total)
    keep = total * len(world.classes) * t.size <= _PER_CLASS_LIMIT
    shape = (len(world.classes), t.size)
    gallery = [[] for _ in estimators]
    per_class = [[] for _ in estimators]
    failed = [0] * len(estimators)
    done = chunk = 0
    while done < total:
        size = min(per_chunk, total - done)
        galleries = world.draw_galleries(np.random.default_rng([*seed, chunk]), size, ranks)
        for i, estimator in enumerate(estimators):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                thresholds = estimator.simulate(galleries, t)
            if thresholds is None:
                raise DataError(f"estimator {type(estimator).__name__}: simulate() returned None; an estimator that "
                                "implements it must give thresholds for every call")
            thresholds = np.array(thresholds, dtype=np.float64)
            if thresholds.shape != (size, *shape):
                raise DataError(f"estimator {type(estimator).__name__}: simulate() returned shape {thresholds.shape}; "
                                f"expected {(size, *shape)} (galleries, classes, targets)")
            for b in np.flatnonzero(np.all(np.isnan(thresholds), axis=(1, 2))):  # drawn whole and refitted
                values = (galleries.gallery(b) if galleries.full else
                          world.draw_sorted(np.random.default_rng([*seed, chunk, 1 + int(b)]), 1)[0])
                refit = _refit_thresholds(estimator, world, values, t)
                if refit is None:
                    failed[i] += 1
                else:
                    thresholds[b] = refit
            usable = ~np.all(np.isnan(thresholds), axis=(1, 2))
            fpr = world.class_fpr(thresholds[usable])
            gallery[i].append(world.gallery_fpr(fpr))
            if keep:
                per_class[i].append(fpr)
        done += size
        chunk += 1
        if task is not None:
            task.advance(size)
    out = []
    a = (1 - settings.level) / 2
    for i, estimator in enumerate(estimators):
        _enough(failed[i], total, estimator)
        low = high = None
        if keep:
            pc = np.concatenate(per_class[i])
            low, high = np.quantile(pc, a, axis=0), np.quantile(pc, 1 - a, axis=0)
        out.append(Prediction(t, settings.level, np.concatenate(gallery[i]), low, high, failed[i],
                              simulation="vectorised", budget_note=note))
    return out


def replicate_level(replicates: int, level: float) -> tuple[float, float]:
    """What B simulated galleries do to an interval's level: the (1 -/+ level) / 2 quantiles of B draws (numpy's
    linear interpolation, at 1-based positions 1 + q (B - 1)) hold a further draw from the same law with probability
    ``level (B - 1) / (B + 1)`` on average (order statistics of uniforms: the share between the i-th and j-th of B is
    Beta(j - i, B + 1 - j + i)), and that share varies from one set of B draws to another with the returned standard
    deviation. At 20 galleries a "90%" interval is 81% +- 8%; at 100, 88% +- 3%."""
    b = int(replicates)
    mean = level * (b - 1) / (b + 1)
    return mean, math.sqrt(mean * (1 - mean) / (b + 2))


def _fewer_note(total: int, settings: PredictionSettings, drawn: int, training: int, paired: bool,
                whole: list) -> str:
    """Why a vectorised simulation drew fewer galleries than asked (``paired``: pair slots; ``whole``: the estimators
    that asked for whole galleries), and what that does to the interval's level."""
    if paired:
        why = "whole galleries: the two entries of each pair of enrolled sets are drawn together"
    elif whole:
        why = f"whole galleries: {', '.join(progress_name(e) for e in whole)} reads every rank at these targets"
    else:
        why = "the ranks the estimators read"
    mean, sd = replicate_level(total, settings.level)
    at_asked, _ = replicate_level(settings.replicates, settings.level)
    lo, hi = 100 * (1 - settings.level) / 2, 100 * (1 + settings.level) / 2
    limit = max(SIMULATED_VALUES, SIMULATED_PER_DISTANCE * training)
    return (f"{total} of {settings.replicates} simulated galleries ({drawn:,} values each, {why}; "
            f"{settings.replicates} would draw over {limit:,}, the most for {training:,} training distances): its "
            f"{100 * settings.level:g}% bounds are the {lo:g}th and {hi:g}th percentiles of {total} draws, which hold "
            f"a further draw from the world {100 * mean:.0f}% +- {100 * sd:.0f}% of the time "
            f"({100 * at_asked:.0f}% at {settings.replicates})")


def _union_ranks(asked: list, counts: np.ndarray) -> list[np.ndarray] | None:
    """The ranks every estimator reads, per class, sorted and unique (None: whole galleries, when one asks for them)."""
    if any(a is None for a in asked):
        return None
    from calibrate.predicted.world import sorted_unique

    counts = np.asarray(counts, dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(counts)])
    keys = []
    for a in asked:
        if len(a) != counts.size:
            raise DataError(f"simulation_ranks: {len(a)} arrays of ranks for {counts.size} classes")
        sizes = np.array([np.size(r) for r in a], dtype=np.int64)
        flat = np.concatenate([np.asarray(r, dtype=np.int64).ravel() for r in a])
        cls = np.repeat(np.arange(counts.size), sizes)
        outside = (flat < 0) | (flat >= counts[cls])
        if outside.any():
            c = int(cls[np.argmax(outside)])
            raise DataError(f"simulation_ranks: class {c} was asked for ranks outside 0..{counts[c] - 1}")
        keys.append(offsets[:-1][cls] + flat)
    keys = sorted_unique(np.concatenate(keys))
    per_class = np.split(keys, np.searchsorted(keys, offsets[1:-1]))
    empty = [c for c, r in enumerate(per_class) if r.size == 0]
    if empty:
        raise DataError(f"simulation_ranks: class {empty[0]} was asked for no rank (0..{counts[empty[0]] - 1})")
    return [r - o for r, o in zip(per_class, offsets[:-1])]


def simulated_replicates(settings: PredictionSettings, drawn: int, training: int | None = None) -> int:
    """How many galleries a vectorised simulation draws, ``drawn`` values each, for ``training`` training distances:
    ``settings.replicates``, fewer when that would draw more than SIMULATED_PER_DISTANCE values per training distance
    (and more than SIMULATED_VALUES) in all, never below 20."""
    limit = max(SIMULATED_VALUES, SIMULATED_PER_DISTANCE * int(training or 0))
    return int(min(settings.replicates, max(MIN_REPLICATES, limit // max(drawn, 1))))


def _refit_thresholds(estimator: Any, world: Any, values: np.ndarray, t: np.ndarray) -> np.ndarray | None:
    from calibrate.contract.types import ImpostorDistances

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = estimator.fit(ImpostorDistances(world.classes, values, world.offsets), RunContext())
        return model._thresholds(t, model.all_rows())
    except _REFIT_ERRORS:
        return None


def _enough(failed: int, total: int, estimator: Any) -> None:
    if total - failed < max(10, 0.9 * total):
        raise DataError(f"predicted FPR interval: estimator {type(estimator).__name__} failed on {failed} of {total} "
                        "simulated galleries (drawn from a model of the training distances), so no interval can be "
                        "given; turn the prediction off for this data (recipe: `evaluation: {prediction: false}`; "
                        "calibrate.fit: predict=False)")


def refit_plan(settings: PredictionSettings, fit_seconds: float | None, base_seconds: float | None) -> tuple[int, str]:
    """(replicates, why) for an estimator refitted one gallery at a time: as many as its measured fit time
    allows within the budget, up to ``settings.replicates``; 0 (with the reason) when fewer than 20 fit."""
    if fit_seconds is None or (settings.budget_s is None and base_seconds is None):
        return settings.replicates, ""  # no budget: a caller that asked for the prediction pays for it
    budget = settings.seconds(base_seconds or 0.0)
    cost = max(float(fit_seconds), 1e-6)
    fits = int(math.floor(budget / cost * (1 + 1e-12)))
    if fits >= settings.replicates:
        return settings.replicates, ""
    if fits >= MIN_REPLICATES:
        return fits, f"{fits} of {settings.replicates} simulated galleries fit the time budget of {budget:.3g} s"
    return 0, (f"no vectorised simulation, and {MIN_REPLICATES} refits would take about {MIN_REPLICATES * cost:.3g} s "
               f"({cost:.3g} s a fit), over the time budget of {budget:.3g} s "
               + ("(`budget_s`)" if settings.budget_s is not None else
                  f"({100 * settings.budget:g}% of the run so far)")
               + f"; `evaluation: {{prediction: {{budget_s: {math.ceil(round(1.1 * settings.replicates * cost, 6))}}}}}` buys "
                 f"{settings.replicates} of them")


def _refitted(estimator: Any, world: Any, t: np.ndarray, settings: PredictionSettings, seed: Sequence[int],
              context: Any, name: str, fit_seconds: float | None, base_seconds: float | None, *,
              confidence: float | None = None, ranks: np.ndarray | None = None) -> Prediction:
    """Replicates by refitting the estimator on one simulated gallery at a time (executors may spread them)."""
    count, why = refit_plan(settings, fit_seconds, base_seconds)
    if count == 0:
        raise DataError(why)
    grid = _grid(t) if confidence is not None else None
    items = [(world, estimator, t, grid, ranks, [*seed, b]) for b in range(count)]
    with context.stage(f"{name}: predicted FPR, {count} simulated galleries", count, "galleries"):
        out = context.map(_replicate, items)
    done = [o for o in out if o is not None]
    failed = len(out) - len(done)
    _enough(failed, len(out), estimator)
    per_class = np.stack([d[0] for d in done])  # B x C x T
    reps = world.gallery_fpr(per_class)
    keep = per_class.size <= _PER_CLASS_LIMIT
    a = (1 - settings.level) / 2
    pred = Prediction(t, settings.level, reps,
                      np.quantile(per_class, a, axis=0) if keep else None,
                      np.quantile(per_class, 1 - a, axis=0) if keep else None, failed, simulation="refits")
    pred.budget_note = why
    if grid is not None:
        pred.grid, pred.grid_fpr = grid, np.stack([d[1] for d in done])
    if ranks is not None:
        pred.ranks, pred.rank_fpr = np.asarray(ranks), np.stack([d[2] for d in done])
    return pred


def check_prediction(pred: Prediction, world: Any, impostors: Any, model: FittedModel) -> None:
    """Per target, the world against the training distances at the model's thresholds (module docstring);
    targets without a prediction get NaN replicates and per-class intervals."""
    from calibrate.predicted.world import tail_reaches

    tau, checks = _training_check(world, impostors, model, pred.targets)
    in_tail = tail_reaches(world, tau)
    tail_ok = world.tail_check is None or world.tail_check.passed
    status = []
    for j, c in enumerate(checks):
        if c["fits"] is None:
            status.append("tail" if tail_ok or not in_tail[j] else "tail-unfit")
        else:
            status.append("fits" if c["fits"] else "contradicted")
    pred.status, pred.checks = tuple(status), checks
    bad = ~pred.predicted()
    if bad.any():
        pred.replicates = pred.replicates.copy()
        pred.replicates[:, bad] = np.nan
        for name in ("class_low", "class_high"):
            arr = getattr(pred, name)
            if arr is not None:
                arr = arr.copy()
                arr[:, bad] = np.nan
                setattr(pred, name, arr)


def _training_check(world: Any, impostors: Any, model: FittedModel,
                    targets: Sequence[float]) -> tuple[np.ndarray, list]:
    """(the model's thresholds at ``targets``, calibrate.predicted.world.training_check of the world there), computed once per
    world, training distances, model and targets: a run asks it of each world when it names the one chosen, again when
    it predicts, and of the chosen one when it checks the prediction (each a pass over every training distance per
    target). Kept on the world, with the objects it was asked for (so their ids cannot be reused meanwhile)."""
    from calibrate.predicted.world import training_check

    t = np.asarray(targets, dtype=np.float64)
    cache = world.__dict__.setdefault("_training_checks", {})
    key = (id(impostors), id(model), t.tobytes())
    hit = cache.get(key)
    if hit is None or hit[0] is not impostors or hit[1] is not model:
        tau = model._thresholds(t, model.all_rows())
        hit = cache[key] = (impostors, model, tau, training_check(world, impostors, tau))
    return hit[2], [dict(c) for c in hit[3]]


def build_world(impostors: Any, train: Any = None, structure: str = "bulk") -> Any:
    """The reference world fitted to the training distances (calibrate.predicted.world);
    ``train``: the training DistanceMatrix they come from, whose symmetric pairs the world keeps."""
    from calibrate.predicted.world import build_world as build, pair_slots

    slots = None if train is None else pair_slots(train.values, train.impostor_mask())
    return build(impostors, slots, structure)


def build_worlds(impostors: Any, train: Any = None) -> dict[str, Any]:
    """Every reference world (calibrate.predicted.world.WORLDS) fitted to the training distances, by structure; a world that
    cannot be built is left out (a DataError when none can)."""
    from calibrate.predicted.world import WORLDS

    worlds, first_error = {}, None
    for structure in WORLDS:
        try:
            worlds[structure] = build_world(impostors, train, structure)
        except DataError as exc:
            first_error = first_error or exc
    if not worlds:
        raise first_error
    return worlds


def choose_world(worlds: dict[str, Any], impostors: Any, model: FittedModel, targets: Sequence[float]) -> Any:
    """The world an estimator is predicted in: the one that agrees with the training distances at the estimator's
    own thresholds at most targets (calibrate.predicted.world.training_check; a contradicted target counts against), the
    first of calibrate.predicted.world.WORLDS on a tie. So the world follows the estimator: a model that locates classes by
    their bulk is judged in the bulk world where that world fits it, one whose thresholds follow each class's
    nearest impostors in the anchored world where that one does, and neither is believed where both contradict."""
    if len(worlds) == 1:
        return next(iter(worlds.values()))
    best, best_score = None, None
    for world in worlds.values():
        checks = _training_check(world, impostors, model, targets)[1]
        score = sum(1 for c in checks if c["fits"]) - sum(1 for c in checks if c["fits"] is False)
        if best is None or score > best_score:
            best, best_score = world, score
    return best


def predict_in_worlds(estimators: Sequence[Any], models: Sequence[FittedModel], impostors: Any,
                      targets: Sequence[float], *, settings: PredictionSettings, seed: Sequence[int],
                      worlds: dict[str, Any]) -> list[Prediction]:
    """:func:`predict_together`, each estimator in the world :func:`choose_world` picks for it; estimators that share
    a world share its simulated galleries."""
    chosen = [choose_world(worlds, impostors, m, targets) for m in models]
    out: list[Prediction | None] = [None] * len(estimators)
    for k, world in enumerate(worlds.values()):
        idx = [i for i, w in enumerate(chosen) if w is world]
        if not idx:
            continue
        done = predict_together([estimators[i] for i in idx], [models[i] for i in idx], impostors, targets,
                                settings=settings, seed=seed if k == 0 else [*seed, 7919 * k], world=world)
        for i, pred in zip(idx, done):
            out[i] = pred
    return out


# ---- confidence ----------------------------------------------------------------------------------


