"""Estimator ``auto``: the configuration meant to be used when nothing is known about the data.

It takes no parameters; everything is read from the training impostor distances. It is the
hierarchical model of ``znorm`` with ``pooled_shape: true`` (one distribution shape shared by all
classes, a location and a scale per class), configured as follows:

* working scale ``log(d + c)`` (``family: lognormal``; ``c`` is 0 unless some distance is 0, see
  znorm.py): impostor distances are positive and their spread grows with their size, so a shift
  and a scale on the log scale make the classes' shapes more alike than on the raw scale;
* per class the median and the IQR / 1.349 (``robust: true``): a few look-alike enrollees must not
  move the location and scale that standardise everyone else's distances;
* every class's standardised training distances are pooled (N values), and the threshold of
  class c at target e is ``m_c + s_c z(e)`` mapped back to a distance, with ``z(e)`` the pooled
  e-quantile: the empirical one (interpolated) when at least 10 pooled values lie below it,
  otherwise a generalised Pareto tail fitted by probability-weighted moments to the lowest 10% of
  the pooled values (at least 30);
* the training scores are standardised half with their class's full statistics and half with
  leave-one-out statistics (``jackknife: 0.5``), between what is right when the evaluation
  impostors are new people (score matrices) and when they are the same enrolled people seen in
  other image sets (see znorm.py).

Why this one (the measurements are in docs/estimators.md, produced by
``benchmarks/compare_estimators.py``): the pooled quantile keeps the *overall* false positive rate
on target whatever the per-class shapes (it is calibrated on all N training distances at once),
the per-class location and scale make the thresholds class-specific, and the GPD tail takes over
only where the pooled sample is too small for an empirical quantile. Nothing in it was set per
dataset.
"""

from __future__ import annotations

import numpy as np

from calibrate.base import Estimator, FittedModel, RunContext
from calibrate.types import ImpostorDistances
from calibrate.world import REFERENCE_MODEL

from .znorm import ZnormModel, enroll_znorm, fit_znorm

#: the configuration, in znorm's terms (recorded in models.csv through the model's parameters)
#: (its family, robustness and jackknife are the reference world's model: calibrate.world.REFERENCE_MODEL)
AUTO_CONFIG = {**REFERENCE_MODEL, "pooled_shape": True, "predictive": False,
               "min_tail_count": 10.0, "tail_fraction": 0.1, "min_exceedances": 30, "shape_bounds": (-1.0, 0.5)}


class Auto(Estimator):
    """Class-specific thresholds chosen from the training distances alone (log scale, robust per-class location and scale, pooled shape with a GPD tail)."""

    model_class = ZnormModel
    #: a new class gets its own robust location and scale; the pooled standardised quantiles (and
    #: their GPD tail) stay as fitted, so refit once enrolled classes are a sizeable share of the gallery
    enroll_mode = "pooled"

    def _enroll(self, model: FittedModel, cls: str, single: ImpostorDistances, context: RunContext) -> FittedModel:
        return enroll_znorm(model, cls, single.of(0), AUTO_CONFIG["robust"], "auto")

    def simulate(self, galleries, targets: np.ndarray) -> np.ndarray:
        from .simulate import pooled_shape

        return pooled_shape(galleries, targets, **AUTO_CONFIG)

    def simulation_ranks(self, counts: np.ndarray, targets: np.ndarray, world) -> list[np.ndarray] | None:
        from .simulate import pooled_shape_ranks

        return pooled_shape_ranks(counts, targets, world, **AUTO_CONFIG)

    def _fit(self, impostors: ImpostorDistances, context: RunContext) -> FittedModel:
        return fit_znorm(impostors, who="auto", **AUTO_CONFIG)

    def partitioned(self):
        """Fitting sharded data shard by shard, with the same thresholds (calibrate/partitioned.py)."""
        from .partitioned import AutoPartitioned

        return AutoPartitioned(AUTO_CONFIG)
