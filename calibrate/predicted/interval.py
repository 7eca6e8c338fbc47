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

Here: the entry points (:func:`predict`, :func:`predict_together`, :func:`predict_in_worlds`) and the worlds an
estimator is judged in (:func:`build_worlds`, :func:`choose_world`, :func:`check_prediction`). The replicates
themselves are drawn and fitted in calibrate.predicted.simulation; the result they make (the settings,
:class:`Prediction`, :func:`measured_interval`, :func:`combine`) is calibrate.predicted.interval_result. Every
name this module had before that split is importable from here still (a public module: plugins import them).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from calibrate.contract.base import Estimator, FittedModel, overrides, progress_name
from calibrate.errors import DataError
from calibrate.predicted.interval_result import (DEFAULT_BUDGET, DEFAULT_LEVEL, DEFAULT_REPLICATES,  # noqa: F401  (re-exported: public API)
                                                 MIN_REPLICATES, PREDICTED, STATUS, WORLD_WORDS, Prediction,
                                                 PredictionSettings, as_array, by_groups, column_quantile, combine,
                                                 combined_cv2, measured_interval, saved_table)
from calibrate.predicted.clustering import unit_size  # noqa: F401  (re-exported: public API, the fpr evaluator's)
from calibrate.predicted.simulation import (SIMULATED_PER_DISTANCE, SIMULATED_VALUES,  # noqa: F401  (re-exported: public API)
                                            _refitted, _simulated, plugged_in, refit_plan, replicate_level,
                                            simulated_replicates)


def predict(estimator: Any, impostors: Any, targets: Sequence[float], *, settings: PredictionSettings,
            seed: Sequence[int], context: Any, confidence: float | None = None, world: Any = None,
            ranks: np.ndarray | None = None, model: FittedModel | None = None, fit_seconds: float | None = None,
            base_seconds: float | None = None, units: Any = None) -> Prediction:
    """Simulate the estimator's achieved FPR (see the module's docstring); ``world`` may be given when
    already built for this gallery (it is the same for every estimator). ``model``: the estimator's fit on
    the training distances, whose thresholds the world is checked at (per target ``status``).
    ``fit_seconds``: what that fit took (a refit's cost); ``base_seconds``: the run's time so far (the
    refits' budget is a share of it), and when not even MIN_REPLICATES refits fit it, the model's own thresholds
    are judged on the training data instead (:func:`calibrate.predicted.simulation.plugged_in`); ``units``: the training
    distances' probe identities (calibrate.predicted.clustering.probe_units), whose clustering widens the
    replicates (with ``model``). With ``confidence``, every replicate is refitted, also on the grid of candidate
    targets of the model-based bound and at the order-statistic ``ranks`` (one per target, 0 where none) of
    :func:`calibrate.predicted.confidence.confidence_ranks`.

    Raises DataError when no interval can be given at all (too many failed refits; refits over budget without a
    model)."""
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
    elif confidence is None and model is not None and refit_plan(settings, fit_seconds, base_seconds)[0] == 0:
        tau, checks = _training_check(world, impostors, model, t)
        pred = plugged_in(world, impostors, tau, checks, t, settings, refit_plan(settings, fit_seconds, base_seconds)[1])
    elif confidence is None:
        pred = _refitted(estimator, world, t, settings, seed, context, name, fit_seconds, base_seconds)
    else:
        pred = _refitted(estimator, world, t, settings, seed, context, name, None, None, confidence=confidence,
                         ranks=ranks)
    pred.tail_model = getattr(world, "tail_model", "")
    pred.world = getattr(world, "structure", "bulk")
    if model is not None:
        check_prediction(pred, world, impostors, model)
        cluster(pred, units, impostors, model)
    return pred


def cluster(pred: Prediction, units: Any, impostors: Any, model: FittedModel) -> None:
    """How the training false accepts cluster by probe at the model's thresholds (calibrate.predicted.clustering), kept on
    the prediction, its replicates widened by what that adds to each threshold's error; nothing without ``units``."""
    from calibrate.predicted.clustering import clustering_of, widen

    found = clustering_of(units, impostors, model, pred.targets, pred.level)
    if found is None:
        return
    n = int(impostors.values.size)
    pred.replicates = widen(pred.replicates, found.threshold_variance(pred.targets, n))
    pred.clustering = found.summary(pred.targets, n)


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
                     world: Any, context: Any = None, units: Any = None) -> list[Prediction]:
    """The predicted FPR of several estimators that implement ``simulate``, on one shared set of simulated
    galleries (common random numbers: drawing them is most of the cost), each checked against the training
    distances at its model's thresholds and widened by how they cluster by probe (``units``: :func:`cluster`);
    ``context``: a RunContext whose stage counts the galleries."""
    t = np.asarray(targets, dtype=np.float64)
    if context is None:
        out = _simulated(list(estimators), world, t, settings, seed)
    else:
        names = ", ".join(progress_name(e) for e in estimators)
        with context.stage(f"{names}: predicted FPR, simulated galleries", settings.replicates, "galleries") as task:
            out = _simulated(list(estimators), world, t, settings, seed, task)
    for pred, model in zip(out, models):
        pred.tail_model = getattr(world, "tail_model", "")
        pred.world = getattr(world, "structure", "bulk")
        check_prediction(pred, world, impostors, model)
        cluster(pred, units, impostors, model)
    return out


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
    ``train``: the training DistanceMatrix they come from, whose symmetric pairs the world keeps (their slots found
    once per matrix and kept on it, as its impostor mask is: every world of a fold shares them, and a symmetric
    matrix of thousands of enrolled sets takes seconds to pair)."""
    from calibrate.contract.comparisons import _once
    from calibrate.predicted.world import build_world as build, pair_slots

    slots = None if train is None else _once(train, "_pair_slots",
                                             lambda: (pair_slots(train.values, train.impostor_mask()),))[0]
    return build(impostors, slots, structure)


def build_worlds(impostors: Any, train: Any = None) -> dict[str, Any]:
    """Every reference world (calibrate.predicted.world.WORLDS) fitted to the training distances, by structure; a world that
    cannot be built is left out (a DataError when none can)."""
    worlds = Worlds(impostors, train)
    worlds.first()
    return {s: w for s in worlds.structures() if (w := worlds.get(s)) is not None}


class Worlds:
    """The reference worlds of one gallery (calibrate.predicted.world.WORLDS), each built when first asked for: the
    default's estimator is judged in one world as a rule (:func:`choose_world` stops at a world no other can beat), and
    each world costs a pass over the training distances and a fit of its tail."""

    def __init__(self, impostors: Any, train: Any = None, units: Any = False) -> None:
        self._impostors, self._train = impostors, train
        self._built: dict[str, Any] = {}  # structure -> World, or the DataError it raised
        self._units: Any = units  # False: not yet looked for (given where there is no training matrix to look in)

    def units(self) -> Any:
        """The training distances' probe identities (calibrate.predicted.clustering.probe_units; None without a
        training matrix), found once."""
        if self._units is False:
            from calibrate.predicted.clustering import probe_units

            self._units = probe_units(self._train, self._impostors)
        return self._units

    @staticmethod
    def structures() -> tuple[str, ...]:
        from calibrate.predicted.world import WORLDS

        return WORLDS

    def get(self, structure: str) -> Any:
        """The world of ``structure``, or None where it cannot be built."""
        if structure not in self._built:
            try:
                self._built[structure] = build_world(self._impostors, self._train, structure)
            except DataError as exc:
                self._built[structure] = exc
        world = self._built[structure]
        return None if isinstance(world, DataError) else world

    def first(self) -> Any:
        """The first world that can be built (the DataError of the first that cannot, when none can)."""
        for structure in self.structures():
            world = self.get(structure)
            if world is not None:
                return world
        raise self._built[self.structures()[0]]

    def built(self) -> list[tuple[int, Any]]:
        """(position in WORLDS, world) of the worlds built so far."""
        return [(k, self._built[s]) for k, s in enumerate(self.structures())
                if s in self._built and not isinstance(self._built[s], DataError)]


def choose_world(worlds: "dict[str, Any] | Worlds", impostors: Any, model: FittedModel,
                 targets: Sequence[float]) -> Any:
    """The world an estimator is predicted in: the one that agrees with the training distances at the estimator's
    own thresholds at most targets (calibrate.predicted.world.training_check; a contradicted target counts against), the
    first of calibrate.predicted.world.WORLDS on a tie. So the world follows the estimator: a model that locates classes by
    their bulk is judged in the bulk world where that world fits it, one whose thresholds follow each class's
    nearest impostors in the anchored world where that one does, and neither is believed where both contradict.
    Worlds are tried in that order and the search stops at one that fits every target the training data can check
    (no later world can beat it), so with :class:`Worlds` the others are not built."""
    from calibrate.predicted.world import CHECK_SUPPORT

    if isinstance(worlds, dict):
        if len(worlds) == 1:
            return next(iter(worlds.values()))
        candidates = iter(worlds.values())
    else:
        candidates = (w for s in worlds.structures() if (w := worlds.get(s)) is not None)
    best, best_score = None, None
    for world in candidates:
        checks = _training_check(world, impostors, model, targets)[1]
        score = sum(1 for c in checks if c["fits"]) - sum(1 for c in checks if c["fits"] is False)
        if best is None or score > best_score:
            best, best_score = world, score
        if best_score == sum(1 for c in checks if c["support"] >= CHECK_SUPPORT):  # every checkable target fits
            break
    return best


def predict_in_worlds(estimators: Sequence[Any], models: Sequence[FittedModel], impostors: Any,
                      targets: Sequence[float], *, settings: PredictionSettings, seed: Sequence[int],
                      worlds: "dict[str, Any] | Worlds", context: Any = None) -> list[Prediction]:
    """:func:`predict_together`, each estimator in the world :func:`choose_world` picks for it; estimators that share
    a world share its simulated galleries."""
    chosen = [choose_world(worlds, impostors, m, targets) for m in models]
    out: list[Prediction | None] = [None] * len(estimators)
    for k, world in (enumerate(worlds.values()) if isinstance(worlds, dict) else worlds.built()):
        idx = [i for i, w in enumerate(chosen) if w is world]
        if not idx:
            continue
        done = predict_together([estimators[i] for i in idx], [models[i] for i in idx], impostors, targets,
                                settings=settings, seed=seed if k == 0 else [*seed, 7919 * k], world=world,
                                context=context, units=None if isinstance(worlds, dict) else worlds.units())
        for i, pred in zip(idx, done):
            out[i] = pred
    return out



def predict_parts(parts: Sequence[tuple], model: FittedModel, targets: Sequence[float], *,
                  settings: PredictionSettings, seed: Sequence[int], context: Any = None) -> Prediction:
    """A model fitted part by part (a group's classes against their same-group impostors, ``impostors:
    same-group``) predicted part by part: ``parts`` are (name, the part's model, its fitted estimator, the part's
    training ImpostorDistances); each estimator in the world of its own part's distances, the parts' replicates then
    combined weighted by their training distances (as a gallery's classes are) and each part's own prediction kept
    (``Prediction.groups``). A DataError naming the part when one cannot be predicted."""
    predictions, weights = {}, []
    for k, (name, part, estimator, impostors) in enumerate(parts):
        try:
            if not simulates(estimator):
                raise DataError("its estimator has no vectorised simulation (refits part by part are not made)")
            worlds = Worlds(impostors)
            worlds.first()
            world = choose_world(worlds, impostors, part, targets)
            predictions[name] = predict_together([estimator], [part], impostors, targets, settings=settings,
                                                 seed=[*seed, k], world=world, context=context)[0]
        except DataError as exc:
            raise DataError(f"group {str(name)[:40]}: {exc}") from None
        weights.append(impostors.values.size)
    return by_groups(predictions, weights, model)
