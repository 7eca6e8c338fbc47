"""Conformance check for estimators that implement ``Estimator.simulate`` (the vectorised refits of
the predicted FPR interval, calibrate.predicted.interval): on galleries drawn from the reference world, seen
at the ranks ``Estimator.simulation_ranks`` declares, the thresholds ``simulate`` gives must equal
those of a real ``fit`` on each whole gallery."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from calibrate.contract.base import RunContext
from calibrate.contract.types import ImpostorDistances
from calibrate.testing.common import CheckSkipped, ComponentCase, _build, _params, _tmpdir
from calibrate.testing.samples import SEED, TARGETS, make_impostors

#: targets from 1e-5 (below 1/N of every sample) to 0.2, so that every branch of an estimator is met
SIMULATE_TARGETS = tuple(sorted({*TARGETS, 1e-5, 1e-3, 0.02, 0.2}))
#: targets whose thresholds lie in the data's reach (e N >= 10 on the larger sample) and well below their
#: classes' quartiles: galleries are drawn at the few ranks the estimators read, not whole
PARTIAL_TARGETS = (0.001, 0.005)
#: relative tolerance: the same formulas on the same numbers, gathered in another order
SIMULATE_RTOL = 1e-9


def _samples() -> list[ImpostorDistances]:
    """The kit's sample (small classes, ties), 40 classes of 60 log-normal distances, and the same with
    zeros: similarity scores clipped at their top, as similarity-to-distance makes them (the world then
    draws zeros, and a fit's working offset is half the smallest positive distance)."""
    rng = np.random.default_rng(SEED)
    many = {f"c{i}": rng.lognormal(rng.normal(0.0, 0.2), 0.3, size=60) for i in range(40)}
    larger = {f"c{i}": rng.lognormal(rng.normal(0.0, 0.2), 0.3, size=300) for i in range(40)}
    clipped = {c: np.maximum(d - np.quantile(d, 0.01), 0.0) for c, d in larger.items()}
    return [make_impostors(), ImpostorDistances.from_lists(many), ImpostorDistances.from_lists(clipped)]


def _targets(sample: int) -> tuple[np.ndarray, ...]:
    """Every target set on the small samples; on the larger one, the kit's targets and those a partial draw serves."""
    sets = (SIMULATE_TARGETS, TARGETS) if sample < 2 else (TARGETS, PARTIAL_TARGETS)
    return tuple(np.asarray(t) for t in sets)


def check_estimator_simulate(case: ComponentCase, tmp_path: Path | None = None) -> None:
    """``simulate`` (when implemented), on 4 galleries drawn from the reference world and seen only at the
    ranks ``simulation_ranks`` declares, gives the thresholds ``fit`` gives on each whole gallery, within a
    relative 1e-9 (a gallery it leaves to a refit is a row of NaN; at most one in four may be)."""
    from calibrate.predicted.interval import simulates
    from calibrate.predicted.world import build_world

    with _tmpdir(tmp_path) as tmp:
        params = _params(case, tmp)
    est = _build(case, params)
    if not simulates(est):
        raise CheckSkipped(f"{case.id} does not implement simulate (its predicted interval refits it)")
    for k, imp in enumerate(_samples()):
        for t in _targets(k):
            world = build_world(imp)
            whole = world.draw_galleries(np.random.default_rng([SEED, k]), 4)
            ranks = est.simulation_ranks(world.counts, t, world)
            seen = whole if ranks is None else whole.restricted(ranks)
            sim = np.asarray(est.simulate(seen, t), dtype=np.float64)
            assert sim.shape == (4, len(imp), t.size), \
                f"{case.id}: simulate returned shape {sim.shape}, expected (galleries, classes, targets) = {(4, len(imp), t.size)}"
            left = np.all(np.isnan(sim), axis=(1, 2))
            assert left.sum() <= 1, f"{case.id}: simulate left {int(left.sum())} of 4 galleries to a refit"
            for b in np.flatnonzero(~left):
                model = _build(case, params).fit(ImpostorDistances(imp.classes, whole.gallery(b), world.offsets),
                                                 RunContext())
                ref = model._thresholds(t, model.all_rows())
                close = np.isclose(sim[b], ref, rtol=SIMULATE_RTOL, atol=1e-300)
                if not close.all():
                    i, j = np.argwhere(~close)[0]
                    raise AssertionError(f"{case.id}: simulate gives {sim[b, i, j]!r} for class {imp.classes[i]!r} at "
                                         f"target {t[j]:g} on sample {k}, gallery {b}, but fit on that gallery gives "
                                         f"{ref[i, j]!r}; simulate must compute what fit would"
                                         + ("" if ranks is None else " (from the ranks simulation_ranks declares)"))


CHECKS = (check_estimator_simulate,)
