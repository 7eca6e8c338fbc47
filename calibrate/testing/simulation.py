"""Conformance check for estimators that implement ``Estimator.simulate`` (the vectorised refits of
the predicted FPR interval, calibrate.prediction): on galleries drawn from the reference world, the
thresholds ``simulate`` gives must equal those of a real ``fit`` on each gallery."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..base import RunContext
from ..types import ImpostorDistances
from .common import CheckSkipped, ComponentCase, _build, _params, _tmpdir
from .samples import SEED, TARGETS, make_impostors

#: targets from 1e-5 (below 1/N of every sample) to 0.2, so that every branch of an estimator is met
SIMULATE_TARGETS = tuple(sorted({*TARGETS, 1e-5, 1e-3, 0.02, 0.2}))
#: relative tolerance: the same formulas on the same numbers, gathered in another order
SIMULATE_RTOL = 1e-9


def _samples() -> list[ImpostorDistances]:
    """The kit's sample (small classes, ties), and 40 classes of 60 log-normal distances."""
    rng = np.random.default_rng(SEED)
    many = {f"c{i}": rng.lognormal(rng.normal(0.0, 0.2), 0.3, size=60) for i in range(40)}
    return [make_impostors(), ImpostorDistances.from_lists(many)]


def check_estimator_simulate(case: ComponentCase, tmp_path: Path | None = None) -> None:
    """``simulate`` (when implemented) gives, on 4 galleries drawn from the reference world, the thresholds
    ``fit`` gives on each, within a relative 1e-9; a gallery it leaves to a refit is a row of NaN."""
    from ..prediction import simulates
    from ..world import build_world

    with _tmpdir(tmp_path) as tmp:
        params = _params(case, tmp)
    est = _build(case, params)
    if not simulates(est):
        raise CheckSkipped(f"{case.id} does not implement simulate (its predicted interval refits it)")
    t = np.asarray(SIMULATE_TARGETS)
    for k, imp in enumerate(_samples()):
        world = build_world(imp)
        galleries = world.draw_sorted(np.random.default_rng([SEED, k]), 4)
        sim = np.asarray(est.simulate(galleries, world.offsets, t), dtype=np.float64)
        assert sim.shape == (4, len(imp), t.size), \
            f"{case.id}: simulate returned shape {sim.shape}, expected (galleries, classes, targets) = {(4, len(imp), t.size)}"
        for b in range(4):
            if np.all(np.isnan(sim[b])):
                continue
            model = _build(case, params).fit(ImpostorDistances(imp.classes, galleries[b], world.offsets), RunContext())
            ref = model._thresholds(t, model.all_rows())
            close = np.isclose(sim[b], ref, rtol=SIMULATE_RTOL, atol=1e-300)
            if not close.all():
                i, j = np.argwhere(~close)[0]
                raise AssertionError(f"{case.id}: simulate gives {sim[b, i, j]!r} for class {imp.classes[i]!r} at target "
                                     f"{t[j]:g} on sample {k}, gallery {b}, but fit on that gallery gives {ref[i, j]!r}; "
                                     "simulate must compute what fit would")


CHECKS = (check_estimator_simulate,)
