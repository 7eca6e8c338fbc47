"""The simulated galleries behind a predicted FPR interval (calibrate.predicted.interval calls them): the
replicates by the estimators' ``Estimator.simulate``, every estimator on one set of galleries drawn only at the
ranks they read (how many galleries, and what fewer do to the level), or by refitting an estimator on one gallery
at a time within a time budget (:func:`refit_plan`).
"""

from __future__ import annotations

import math
import warnings
from typing import Any, Sequence

import numpy as np

from calibrate.contract.base import RunContext, progress_name
from calibrate.errors import DataError
from calibrate.predicted.interval_result import MIN_REPLICATES, Prediction, PredictionSettings
from calibrate.predicted.simulated_galleries import DrawPlan, sorted_unique

#: vectorised simulation: replicates x drawn values may reach this many per training distance (the run's own cost
#: grows with them: reading, splitting, sorting, fitting), or SIMULATED_VALUES in all where that is more
SIMULATED_PER_DISTANCE = 4
SIMULATED_VALUES = 2_000_000
#: distances drawn per chunk of replicates (memory: about 10 arrays of this many float64 at once)
_CHUNK_VALUES = 2_000_000
#: candidate targets of the model-based confidence, as multiples of the smallest and largest target
_GRID_DOWN, _GRID_STEPS_PER_OCTAVE = 2.0 ** -14, 8


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


def _simulated(estimators: list, world: Any, t: np.ndarray, settings: PredictionSettings,
               seed: Sequence[int], task: Any = None) -> list[Prediction]:
    """All replicates by ``Estimator.simulate``, chunk by chunk, every estimator on the same galleries,
    drawn only at the ranks the estimators read (``Estimator.simulation_ranks``; whole when one says None).
    ``task``: a progress task (calibrate.contract.progress.Task) given the replicates' number and advanced by each chunk."""
    counts = world.counts
    n = int(counts.sum())
    asked = [e.simulation_ranks(counts, t, world) for e in estimators]
    keys = _union_keys(asked, counts)
    # the partial draw's layout, once for every chunk; None: whole galleries (asked for, or pair slots)
    plan = DrawPlan.of_keys(counts, keys) if keys is not None and world.slots is None else None
    drawn = n if plan is None else plan.drawn
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
    seen = [{"widened": 0, "refitted": 0} for _ in estimators]
    done = chunk = 0
    while done < total:
        size = min(per_chunk, total - done)
        galleries = world.draw_galleries(np.random.default_rng([*seed, chunk]), size, plan)
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
            missed = np.flatnonzero(np.all(np.isnan(thresholds), axis=(1, 2)))
            if missed.size:
                rng = np.random.default_rng([*seed, chunk, 1 + i])
                failed[i] += _complete(estimator, world, galleries, missed, thresholds, t, rng, seen[i])
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
                              simulation="vectorised", budget_note=note, **seen[i]))
    return out


#: a partial gallery that did not reach what an estimator reads is seen next at this many times each class's lowest
#: drawn values (plus WIDEN_FIXED), then whole
WIDEN_FACTOR, WIDEN_FIXED = 4, 10


def _complete(estimator: Any, world: Any, galleries: Any, missed: np.ndarray, thresholds: np.ndarray, t: np.ndarray,
              rng: np.random.Generator, seen: dict) -> int:
    """Fill ``thresholds[missed]``, the galleries where ``simulate`` gave none (a partial draw that did not cover what
    it reads, or a fit that needs the whole gallery): the same galleries seen at more ranks (World.widen: each class's
    lowest values WIDEN_FACTOR-fold), then whole, then refitted whole one at a time (``fit``: what a fit there says).
    Counts them in ``seen``; returns how many failed even so."""
    rows, view, pick = missed, galleries, missed  # view.values[pick[k]] is the gallery of thresholds[rows[k]]
    if not galleries.full:
        more = np.minimum(WIDEN_FACTOR * galleries.lowest_drawn() + WIDEN_FIXED, galleries.counts)
        lead = np.repeat(galleries.offsets[:-1], more) + np.arange(int(more.sum())) - np.repeat(np.cumsum(more) - more, more)
        for wider in (sorted_unique(np.concatenate([galleries.keys, lead])), None):
            seen["widened"] += rows.size
            view = world.widen(view, pick, wider, rng)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                again = np.array(estimator.simulate(view, t), dtype=np.float64)
            ok = ~np.all(np.isnan(again), axis=(1, 2))
            thresholds[rows[ok]] = again[ok]
            rows, pick = rows[~ok], np.flatnonzero(~ok)
            if not rows.size:
                return 0
    failed = 0
    for b, k in zip(rows, pick):
        seen["refitted"] += 1
        refit = _refit_thresholds(estimator, world, view.values[k], t)
        if refit is None:
            failed += 1
        else:
            thresholds[b] = refit
    return failed


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


def _union_keys(asked: list, counts: np.ndarray) -> np.ndarray | None:
    """The ranks every estimator reads, as ascending unique global positions (class offset + rank: what
    DrawPlan.of_keys lays out), every class among them (None: whole galleries, when one asks for them)."""
    if any(a is None for a in asked):
        return None
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
    empty = np.flatnonzero(np.bincount(np.searchsorted(offsets, keys, side="right") - 1, minlength=counts.size) == 0)
    if empty.size:
        raise DataError(f"simulation_ranks: class {empty[0]} was asked for no rank (0..{counts[empty[0]] - 1})")
    return keys


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


def plugged_in(world: Any, impostors: Any, tau: np.ndarray, checks: list, t: np.ndarray, settings: PredictionSettings,
               why: str) -> Prediction:
    """Replicates without refits, for an estimator whose refits do not fit the time budget (``why``): its own
    thresholds ``tau`` (classes x targets) judged on the training data. Two estimates of their FPR: the world's,
    p_w, and the training count's, p_t (``checks``: calibrate.predicted.world.training_check there, K distances
    below). Neither is exact for thresholds fitted to these very distances (the count is biased low where a class's
    threshold follows its own tail, the world's shape is auto's, not the estimator's), so the replicates span both:
    log-normal about the middle of their logs, with the variance of a count of K (K at least 1/2, and p_w N where
    no training distance lies below) plus that of their half-distance read as 1.645 standard deviations, at the
    normal scores of ``settings.replicates`` galleries. What the estimator would do on other training samples is not
    simulated: the interval is for these thresholds (the world's check, and how the training distances cluster,
    still apply)."""
    from scipy.special import ndtri

    p_w = world.gallery_fpr(world.class_fpr(tau))
    p_t = np.array([c["empirical_fpr"] for c in checks], dtype=np.float64)
    k = np.array([c["support"] for c in checks], dtype=np.float64)
    both = (p_t > 0) & (p_w > 0)
    log_w = np.log(np.maximum(p_w, 1e-300))
    centre = np.where(both, 0.5 * (log_w + np.log(np.where(both, p_t, 1.0))), log_w)
    half = np.where(both, np.abs(log_w - centre), 0.0)
    k = np.maximum(np.where(k > 0, k, p_w * float(impostors.values.size)), 0.5)
    sd = np.sqrt(1.0 / k + (half / 1.6448536269514722) ** 2)
    b = settings.replicates
    z = ndtri((np.arange(b) + 0.5) / b)
    reps = np.minimum(np.exp(centre[None, :] + z[:, None] * sd[None, :]), 1.0)
    reps[:, p_w <= 0] = 0.0
    pred = Prediction(t, settings.level, reps, None, None, 0, simulation="plug-in")
    pred.budget_note = f"its thresholds judged on the training data, without refits ({why})"
    return pred


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
