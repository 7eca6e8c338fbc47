"""Predicted FPR intervals in a sharded run (issue 43), from a sample of the enrolled classes.

An interval refits the estimator on simulated copies of the gallery (calibrate.predicted.interval), which a gallery
in shards cannot hold. The run draws a seeded sample of SAMPLE_CLASSES classes (all of them in a smaller gallery),
the last pass hands back their training side (impostor and genuine distances, groups, each distance's probe
identity), and the main process predicts it as an in-memory run does (calibrate.running.predict_stage), each
estimator refitted on the sample as the sharded fit was made (``PartitionedFitter.sample_params``: auto keeps the
structure it chose for the whole gallery). The interval is then that of a gallery of the sample's classes: the
same classes' false accepts, from fewer of them, so it is at least as wide as the whole gallery's would be (a
pooled threshold fitted on fewer distances errs more); in a gallery of at most SAMPLE_CLASSES classes it is the
in-memory run's. The evaluation's side (its probes' sizes, calibrate.predicted.clustering.unit_size) is reduced
over every shard.
"""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np

from calibrate.contract.comparisons import GenuineDistances, ImpostorDistances
from calibrate.contract.labels import TrainingGroups
from calibrate.contract.shard_data import name_hashes
from calibrate.contract.types import UNLABELLED

#: the classes a sharded run's predicted intervals are made from (a seeded sample; every class in a smaller gallery)
SAMPLE_CLASSES = 2000


def sample_positions(class_counts: list[int], seed: int, k: int = SAMPLE_CLASSES) -> dict[int, np.ndarray]:
    """Shard index -> the positions (ascending) of its sampled classes: ``k`` of all, without replacement, drawn by
    ``seed`` over the gallery's class order (shard by shard); every class when there are at most ``k``."""
    n = int(sum(class_counts))
    chosen = (np.arange(n) if n <= k
              else np.sort(np.random.default_rng([int(seed), 43]).choice(n, size=k, replace=False)))
    starts = np.concatenate([[0], np.cumsum(class_counts)]).astype(np.int64)
    out = {}
    for i in range(len(class_counts)):
        inside = chosen[(chosen >= starts[i]) & (chosen < starts[i + 1])] - starts[i]
        if inside.size:
            out[i] = inside
    return out


def probe_attempts(test_d) -> tuple[np.ndarray, np.ndarray]:
    """(64-bit hash of each probe identity, its impostor attempts) of one shard's evaluation matrix."""
    per_row = test_d.impostor_mask().sum(axis=1)
    names, of_row = np.unique(np.asarray(test_d.probe_classes).astype(str), return_inverse=True)
    counts = np.bincount(of_row.reshape(-1), weights=per_row, minlength=names.size)
    return name_hashes(names), counts


def unit_size(parts: list[tuple[np.ndarray, np.ndarray]]) -> float | None:
    """sum m_u^2 / sum m_u over the evaluation's probe identities, their attempts summed over shards (as
    calibrate.predicted.clustering.unit_size over matrices held whole)."""
    if not parts:
        return None
    keys = np.concatenate([p[0] for p in parts])
    counts = np.concatenate([p[1] for p in parts])
    _, inverse = np.unique(keys, return_inverse=True)
    m = np.bincount(inverse, weights=counts)
    m = m[m > 0]
    return float(np.sum(m * m) / m.sum()) if m.size else None


def gathered(parts: list) -> tuple[ImpostorDistances, GenuineDistances | None, TrainingGroups | None, object]:
    """The sample's training side from each shard's (calibrate.contract.shard_data.ShardTraining.subset, shard order):
    impostor and genuine distances, groups, and the probe identities (calibrate.predicted.clustering.ProbeUnits, or
    None when a shard kept none)."""
    from calibrate.predicted.clustering import ProbeUnits

    classes = tuple(c for p in parts for c in p.impostors.classes)
    counts = np.concatenate([p.impostors.counts() for p in parts])
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    impostors = ImpostorDistances(classes, np.concatenate([p.impostors.values for p in parts]), offsets)
    genuine = None
    if all(p.genuine is not None for p in parts):
        g_counts = np.concatenate([p.genuine.counts() for p in parts])
        genuine = GenuineDistances(classes, np.concatenate([p.genuine.values for p in parts]),
                                   np.concatenate([[0], np.cumsum(g_counts)]).astype(np.int64))
    groups = None
    if all(p.groups is not None for p in parts):
        groups = TrainingGroups(parts[0].groups.names, np.concatenate([p.groups.of_class for p in parts]),
                                np.concatenate([p.groups.of_impostor for p in parts]))
    units = None
    per = [p.distance_probes() for p in parts]
    if all(probes is not None for probes in per):
        names = np.concatenate([n[c] for c, n in per]).astype(str)  # each distance's probe
        _, unit = np.unique(names, return_inverse=True)  # sorted by name, as probe_units numbers them
        unit = unit.reshape(-1).astype(np.int64)
        units = ProbeUnits(np.bincount(unit).astype(np.int64), unit=unit)
    return impostors, genuine, groups, units


def predict_sample(recipe, fitters: dict, parts: list, n_classes: int, context, times) -> dict:
    """Each estimator's prediction (label -> calibrate.predicted.interval.Prediction) on the sample ``parts``, as
    calibrate.running.predict_stage makes it in memory; what it says goes to the run's notes."""
    from calibrate.running.predict_stage import predict_stage
    from calibrate.saved.grouped import fit_by_group

    impostors, genuine, groups, units = gathered(parts)
    fitted, models = [], {}
    with times("predict: the sample refitted"):
        for spec in recipe.estimators:
            fitter = fitters[spec.label][2]
            sample_params = getattr(fitter, "sample_params", None)
            spec = replace(spec, params={**spec.params, **(sample_params() if sample_params else {})})
            estimator = spec.build()
            quiet = replace(context, notes=[])  # what the fit says was said of the whole gallery's
            started = time.perf_counter()
            if recipe.same_group:  # each group as the shards fitted it (auto: the group's own chosen structure)
                per_group = getattr(fitter, "group_sample_params", dict)()
                missing = sorted(set(per_group) - {groups.names[c] if c < len(groups.names) else UNLABELLED
                                                   for c in np.unique(groups.of_class)})
                if missing:
                    context.note(f"{spec.label}: no predicted same-group FMR interval for group(s) "
                                 f"{', '.join(m[:40] for m in missing[:5])}: the predicted intervals' sample of "
                                 f"classes holds none of theirs")

                def make_for(name, spec=spec, per_group=per_group):
                    return replace(spec, params={**spec.params, **per_group.get(name, {})}).build()

                models[spec.label] = fit_by_group(spec.build, impostors, genuine, groups, quiet, make_for)
            else:
                models[spec.label] = estimator.fit(impostors, quiet, genuine=genuine, groups=groups)
            fitted.append((spec, estimator, time.perf_counter() - started))
    predictions: dict = {}
    predict_stage(recipe, fitted, models, predictions, impostors, None, "sample", 0, context, times, units=units)
    whole = len(impostors) >= n_classes
    context.note("predicted FPR intervals: " + (
        "from every class's training distances, each estimator refitted in memory as the shards were fitted"
        if whole else
        f"from a seeded sample of {len(impostors):,} of the {n_classes:,} classes (their training distances, each "
        "estimator refitted on them as the shards were fitted): the interval of a gallery of that many classes, "
        "at least as wide as the whole gallery's"))
    return predictions
