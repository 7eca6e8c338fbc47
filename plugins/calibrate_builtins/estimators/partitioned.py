"""Shard-by-shard fits of the pooled estimators ``auto`` and ``generic-interp`` (``calibrate.contract.sharded``).

Both need, besides each class's own statistics, a quantile of values pooled over every class: auto
the pooled standardised scores (and a GPD tail fitted to their lowest ``tail_fraction``), generic-interp
the pooled distances. A threshold at target ``e`` reads the pooled sample only at ranks up to
``ceil(e N)``, and the GPD tail only its lowest ``k + 1`` values, so the run selects exactly those
with :func:`calibrate.contract.sharded.lowest_sorted` (two passes over the shards; the selected values
are the very floats ``np.sort`` of everything would give). auto's tail (k = 10% of the pooled scores:
10^8 of them at a million classes) is not gathered: :func:`calibrate.contract.sharded.lowest_moments` sums
it bucket by bucket into the two probability-weighted moments its fit needs (gpd.fit_lower_tail_moments).
Both begin in the run's reading of each shard (``first_pass``): the histograms, and auto's saved lowest
scores on the guess that its working offset is 0 (every training distance positive; else auto makes its own
pass over the cached distances, as it did before there was a first pass).
Hence the thresholds equal the in-memory fit's: per-class location and scale are computed by
the same functions on the same distances, the pooled order statistics are the same numbers, the
tail's moments the same sums added in another order; ``tests/test_partitioned.py`` compares them
(relative 1e-12).

What the fitted models keep of the pooled sample: its lowest ``ceil(max(1%, largest target) N) + 1``
values, at least 100,000 (``pooled-LABEL.npy`` beside the parts) and ``N``; such a model answers targets
up to that rate (1% or the recipe's largest target, or more when 100,000 reach further) and says so for
larger ones. A saved in-memory calibration keeps the same (``FittedModel.compact``).
"""

from __future__ import annotations

import io
import math
from functools import partial
from pathlib import Path

import numpy as np

from calibrate.errors import DataError
from calibrate.statistics.gpd import exceedance_count, fit_lower_tail_moments
from calibrate.contract.sharded import (TailMoments, histogram_first_pass, lowest_moments, lowest_sorted, moments_first_pass,
                                   write_staged)
from calibrate.statistics.standardise import ANCHOR_MAX_RANK, standardise_classes, to_working
from calibrate.contract.types import ImpostorDistances

from .pooled import PooledSortedModel, kept_count
from .znorm import PooledZnormModel, check_class_sizes

def _save_pooled(folder: str, name: str, values: np.ndarray) -> tuple[str, int, str]:
    buffer = io.BytesIO()
    np.save(buffer, np.ascontiguousarray(values, dtype="<f8"))
    return write_staged(folder, name, buffer.getvalue())


def _standardised(impostors: ImpostorDistances, offset: float, jackknife: float, cfg: dict) -> tuple[list, list, list]:
    """fit_znorm's per-class step for auto (configuration ``cfg``): every class's standardised training
    scores (with ``jackknife``), and its full-sample location and scale (the same whatever ``jackknife``),
    with the whole gallery's working ``offset`` (calibrate.statistics.standardise.standardise_classes)."""
    check_class_sizes(impostors, 3, "auto")
    _, locs, scales, zs = standardise_classes(impostors, cfg["family"], cfg["robust"], jackknife, "estimator auto",
                                              offset=offset)
    return zs, locs, scales


def _auto_z(impostors: ImpostorDistances, arg: tuple[float, dict]) -> np.ndarray:
    """Every class's standardised training scores, as fit_znorm computes them for auto-bulk; for auto's structure
    ``one`` (no class located apart) the working-scale distances themselves."""
    offset, cfg = arg
    if not len(impostors):  # a shard without classes of the group a runner is restricted to
        return np.zeros(0)
    if cfg.get("structure") == "one":
        check_class_sizes(impostors, 3, "auto")
        return to_working(impostors.values, cfg["family"], offset)
    return np.concatenate(_standardised(impostors, offset, cfg["jackknife"], cfg)[0])


def _auto_first(impostors: ImpostorDistances, arg, index: int) -> tuple | None:
    """auto's tail selection begun in the run's first pass (calibrate.contract.sharded.moments_first_pass), on the guess
    that every training distance is positive, so that the working offset is 0 (working_offset's rule): None on a
    shard where that is false (then no shard's result is used) or whose scores cannot be standardised (the second
    pass says why, as it did before there was a first)."""
    function, first_arg = arg
    d = impostors.values
    if d.size == 0 or not float(d.min()) > 0:
        return None
    try:
        return function(impostors, first_arg, index)
    except DataError:
        return None


def _auto_tail(m: TailMoments, cfg: dict) -> dict | None:
    """fit_znorm's GPD tail, from the pooled scores' moments (the streamed form of fit_lower_tail's PWM fit)."""
    try:
        return dict(fit_lower_tail_moments(m.n_total, m.k, m.u, m.lowest, m.sum_low, m.sum_ranked,
                                           cfg["shape_bounds"]).__dict__)
    except DataError:
        return None  # as fit_znorm: too few or tied pooled scores, the empirical quantile throughout


def pooled_offset(runner) -> float:
    """The whole gallery's working offset (working_offset's rule), from the shards' minima."""
    if runner.minimum > 0:
        return 0.0
    positive = runner.min_positive
    if not math.isfinite(positive):
        raise DataError("every training distance is 0; a log-normal model cannot be fitted (use family: gaussian)")
    return 0.5 * positive


class AutoPartitioned:
    """auto, shard by shard: the working-scale offset from the shards' minima, the pooled standardised
    scores' lower tail by exact selection, then each shard's classes' location and scale. ``config``:
    auto's configuration in znorm's terms (``Auto.partitioned`` passes AUTO_CONFIG: this module does
    not import auto, which imports it)."""

    model_class = PooledZnormModel
    #: said in the run's notes when set (calibrate.running.sharded)
    note: str | None = None

    def __init__(self, config: dict):
        self.config = dict(config)
        self.offset, self.n_pooled, self.tail, self.files = 0.0, 0, None, ()
        self._pooled_path: str | None = None

    def _counts(self, targets) -> tuple:
        """The tail's exceedance count and the kept count, as functions of the pooled count (picklable)."""
        cfg = self.config
        return (partial(exceedance_count, tail_fraction=cfg["tail_fraction"], min_exceedances=cfg["min_exceedances"]),
                partial(kept_count, targets=tuple(targets)))

    def first_pass(self, shards: int, prefix: str, targets):
        """The tail's first pass, on the run's first reading of each shard, with the working offset 0 (every
        training distance positive, as distances from a matcher mostly are; else not used, see _auto_first)."""
        k, keep = self._counts(targets)
        return _auto_first, moments_first_pass(_auto_z, (0.0, self.config), k, keep, shards, prefix)

    def reduce(self, runner, targets, label: str) -> None:
        self.offset = pooled_offset(runner)
        name = f"pooled-{label}.npy"
        cfg = self.config
        k, keep = self._counts(targets)
        # the tail's k exceedances are summed bucket by bucket (at 10% of a billion scores they would not fit
        # one worker); only the lowest max(1%, largest target) are kept, for the thresholds above the tail. The
        # first pass's selection was made with offset 0 (first_pass): used only if that is the offset
        moments = lowest_moments(runner, _auto_z, (self.offset, cfg), k, keep, name=label,
                                 first=runner.take_first(label) if self.offset == 0.0 else None)
        self.tail, self.n_pooled = _auto_tail(moments, cfg), moments.n_total
        self.files = (_save_pooled(str(runner.scratch), name, moments.kept),)
        self._pooled_path = str(runner.scratch / name)

    def fit_part(self, impostors: ImpostorDistances) -> PooledZnormModel:
        cfg = self.config
        anchor = None
        if cfg.get("structure") == "one":  # every class at location 0: one pooled threshold (anchored.fit_anchored's)
            check_class_sizes(impostors, 3, "auto")
            locs, scales = np.zeros(len(impostors)), np.ones(len(impostors))
            anchor = {"structure": "one", "mean": 0.0, "between_var": 0.0, "max_rank": ANCHOR_MAX_RANK}
        else:
            _, locs, scales = _standardised(impostors, self.offset, 0.0, cfg)  # the full-sample location and scale
        pooled = np.load(self._pooled_path, mmap_mode="r")
        return PooledZnormModel(impostors.classes, locs, scales, impostors.counts(), cfg["family"], self.offset,
                                pooled, self.n_pooled, self.tail, cfg["min_tail_count"], Path(self._pooled_path).name,
                                anchor=anchor)


# ---- generic-interp ------------------------------------------------------------------------------

def _distances(impostors: ImpostorDistances, arg) -> np.ndarray:
    return impostors.values


def _interp_finish(lowest: np.ndarray, n_total: int, arg):
    folder, name, targets = arg
    return n_total, _save_pooled(folder, name, lowest[:kept_count(n_total, targets)])


class GenericInterpPartitioned:
    """generic-interp, shard by shard: the pooled distances' lowest values by exact selection."""

    model_class = PooledSortedModel

    def __init__(self):
        self.n_pooled, self.files, self._pooled_path = 0, (), None

    def first_pass(self, shards: int, prefix: str, targets):
        """The pooled distances' histograms, made on the run's first reading of each shard."""
        return histogram_first_pass(_distances, None)

    def reduce(self, runner, targets, label: str) -> None:
        name = f"pooled-{label}.npy"
        self.n_pooled, info = lowest_sorted(runner, _distances, None, lambda n: kept_count(n, targets), _interp_finish,
                                            (str(runner.scratch), name, tuple(targets)), name=label,
                                            first=runner.take_first(label))
        self.files = (info,)
        self._pooled_path = str(runner.scratch / name)

    def fit_part(self, impostors: ImpostorDistances) -> PooledSortedModel:
        return PooledSortedModel(impostors.classes, np.load(self._pooled_path, mmap_mode="r"), self.n_pooled,
                                 Path(self._pooled_path).name)
