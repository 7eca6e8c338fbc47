"""Shard-by-shard fits of the pooled estimators ``auto`` and ``generic-interp`` (``calibrate.partitioned``).

Both need, besides each class's own statistics, a quantile of values pooled over every class: auto
the pooled standardised scores (and a GPD tail fitted to their lowest ``tail_fraction``), generic-interp
the pooled distances. A threshold at target ``e`` reads the pooled sample only at ranks up to
``ceil(e N)``, and the GPD tail only its lowest ``k + 1`` values, so the run selects exactly those
with :func:`calibrate.partitioned.lowest_sorted` (two passes over the shards; the selected values
are the very floats ``np.sort`` of everything would give). auto's tail (k = 10% of the pooled scores:
10^8 of them at a million classes) is not gathered: :func:`calibrate.partitioned.lowest_moments` sums
it bucket by bucket into the two probability-weighted moments its fit needs (gpd.fit_lower_tail_moments).
Hence the thresholds equal the in-memory fit's: per-class location and scale are computed by
the same functions on the same distances, the pooled order statistics are the same numbers, the
tail's moments the same sums added in another order; ``tests/test_partitioned.py`` compares them
(relative 1e-12).

What the fitted models keep of the pooled sample: its lowest ``ceil(max(1%, largest target) N) + 1``
values (``pooled-LABEL.npy`` beside the parts) and ``N``; such a model answers targets up to that
rate (1% or the recipe's largest target) and says so for larger ones.
"""

from __future__ import annotations

import io
import math
from pathlib import Path
from typing import Any

import numpy as np

from calibrate.base import FittedModel
from calibrate.errors import CalibrationError, DataError, ParameterError
from calibrate.gpd import exceedance_count, fit_lower_tail_moments
from calibrate.partitioned import TailMoments, lowest_moments, lowest_sorted, write_staged
from calibrate.safefiles import npy_array, plain_name
from calibrate.standardise import standardise, standardise_classes, to_working
from calibrate.statecheck import bad, field, number, numbers, tail_fit
from calibrate.stats import interpolate_rank
from calibrate.types import ImpostorDistances

from .znorm import ZnormModel, check_class_sizes, checked_location_scale

#: the pooled lower tail a partitioned model keeps answers targets up to this rate (or the largest target)
KEEP_FPR = 0.01


def kept_count(n_total: int, targets) -> int:
    return int(min(n_total, math.ceil(max(KEEP_FPR, max(targets)) * n_total) + 1))


def _save_pooled(folder: str, name: str, values: np.ndarray) -> tuple[str, int, str]:
    buffer = io.BytesIO()
    np.save(buffer, np.ascontiguousarray(values, dtype="<f8"))
    return write_staged(folder, name, buffer.getvalue())


def _load_pooled(state: dict[str, Any]) -> np.ndarray:
    pooled = field(state, "pooled")
    if isinstance(pooled, dict):  # a file beside the calibration's parts; "root" is set by the loader
        name = pooled.get("file")
        if not plain_name(name) or not str(name).endswith(".npy"):
            raise CalibrationError(f"the pooled sample's file {str(name)[:80]!r} is not a plain .npy name in the "
                                   "calibration's folder; the calibration is damaged: run the recipe again")
        values = npy_array(Path(state["root"]) / name, "the pooled sample", "run the recipe again", mmap=True,
                           error=CalibrationError)
        if values.ndim != 1 or values.dtype != np.float64:
            raise CalibrationError(f"{name}: the pooled sample must be a 1-D float64 array, got {values.dtype} "
                                   f"{values.shape}; run the recipe again")
        return values
    return numbers(pooled, "pooled")


def _check_reach(targets: np.ndarray, kept: int, n_pooled: int, who: str) -> None:
    need = np.ceil(np.asarray(targets) * n_pooled)
    if kept < n_pooled and np.any(need > kept):
        reach = (kept - 1) / n_pooled
        raise ParameterError(f"{who}: this partitioned calibration keeps the pooled sample's lowest {kept} of {n_pooled} "
                             f"values, enough for target FPRs up to {reach:.4g}; fit again with the larger target among "
                             "the recipe's targets")


class PooledZnormModel(ZnormModel):
    """auto's model of one shard's classes: their location and scale, and the pooled standardised scores'
    lowest values (``sorted_z``) out of ``n_pooled``, with the GPD tail fitted to them."""

    def __init__(self, classes, loc, scale, n, family: str, offset: float, sorted_z, n_pooled: int,
                 tail: dict | None, min_tail_count: float, pooled_file: str | None = None):
        super().__init__(classes, loc, scale, n, family, offset, True, False, None, tail, min_tail_count)
        self.sorted_z = sorted_z  # possibly a read-only memory map of pooled-LABEL.npy
        self.n_pooled, self.pooled_file = int(n_pooled), pooled_file

    def _quantile(self, targets: np.ndarray) -> np.ndarray:
        return interpolate_rank(self.sorted_z, np.asarray(targets, dtype=np.float64) * self.n_pooled)

    def z_quantiles(self, targets: np.ndarray) -> np.ndarray:
        """ZnormModel.z_quantiles with the pooled size ``n_pooled`` (only the lowest values are kept)."""
        targets = np.asarray(targets, dtype=np.float64)
        _check_reach(targets, len(self.sorted_z), self.n_pooled, "auto")
        emp = self._quantile(targets)
        switch = self.min_tail_count / self.n_pooled
        if self.tail is None or self.tail.p_u <= switch:
            return emp
        at_switch = float(self._quantile(np.array([switch]))[0])
        return np.where(targets < switch, np.minimum(self.tail.quantile(targets), at_switch), emp)

    def order_statistic_pool(self) -> int | None:
        return self.n_pooled  # ranks count in the whole pool; the kept lowest values hold the small ones

    def cdf(self, row: int, x: np.ndarray) -> np.ndarray:
        raise NotImplementedError("a partitioned auto model keeps only the pooled lower tail; it draws no CDF")

    def to_state(self) -> dict[str, Any]:
        state = {"classes": list(self.classes), "loc": self.loc.tolist(), "scale": self.scale.tolist(),
                 "n": self.n.tolist(), "family": self.family, "offset": self.offset, "n_pooled": self.n_pooled,
                 "pooled": {"file": self.pooled_file} if self.pooled_file else np.asarray(self.sorted_z).tolist(),
                 "tail": None if self.tail is None else dict(self.tail.__dict__), "min_tail_count": self.min_tail_count}
        return state

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> "PooledZnormModel":
        """The model a saved state describes, every field checked (calibrate.statecheck, znorm's
        checked_location_scale); the pooled tail's threshold lies at or above its lowest kept score."""
        loc, scale, n, family, offset = checked_location_scale(state)
        sorted_z, n_pooled = _checked_pooled(state, "standardised scores", -math.inf)
        tail = field(state, "tail")
        if tail is not None:
            tail = tail_fit(tail, "tail", float(sorted_z[0]), math.inf, n_pooled)
        min_tail_count = number(field(state, "min_tail_count"), "min_tail_count", 0.0, open_low=True)
        pooled = state["pooled"]
        return cls(state["classes"], loc, scale, n, family, offset, sorted_z, n_pooled, tail, min_tail_count,
                   pooled.get("file") if isinstance(pooled, dict) else None)


def _checked_pooled(state: dict[str, Any], what: str, low: float) -> tuple[np.ndarray, int]:
    """(the pooled sample's kept lowest values, its full size n_pooled), checked: at least one value, all
    finite, >= ``low``, ascending, and no more of them than n_pooled."""
    values = _load_pooled(state)
    if values.size == 0 or not np.all(np.isfinite(values)) or np.any(values < low) or np.any(np.diff(values) < 0):
        raise bad("pooled", f"must hold the pooled {what}' lowest values: finite, ascending"
                            f"{'' if low == -math.inf else ', >= ' + format(low, 'g')}")
    n_pooled = int(number(field(state, "n_pooled"), "n_pooled", values.size, integer=True))
    return values, n_pooled


def _standardised(impostors: ImpostorDistances, offset: float, jackknife: float, cfg: dict) -> tuple[list, list, list]:
    """fit_znorm's per-class step for auto (configuration ``cfg``): every class's standardised training
    scores (with ``jackknife``), and its full-sample location and scale (the same whatever ``jackknife``),
    with the whole gallery's working ``offset`` (calibrate.standardise.standardise_classes)."""
    check_class_sizes(impostors, 3, "auto")
    _, locs, scales, zs = standardise_classes(impostors, cfg["family"], cfg["robust"], jackknife, "estimator auto",
                                              offset=offset)
    return zs, locs, scales


def _auto_z(impostors: ImpostorDistances, arg: tuple[float, dict]) -> np.ndarray:
    """Every class's standardised training scores, as fit_znorm computes them for auto."""
    offset, cfg = arg
    return np.concatenate(_standardised(impostors, offset, cfg["jackknife"], cfg)[0])


def _auto_tail(m: TailMoments, cfg: dict) -> dict | None:
    """fit_znorm's GPD tail, from the pooled scores' moments (the streamed form of fit_lower_tail's PWM fit)."""
    try:
        return dict(fit_lower_tail_moments(m.n_total, m.k, m.u, m.lowest, m.sum_low, m.sum_ranked,
                                           cfg["shape_bounds"]).__dict__)
    except DataError:
        return None  # as fit_znorm: too few or tied pooled scores, the empirical quantile throughout


class AutoPartitioned:
    """auto, shard by shard: the working-scale offset from the shards' minima, the pooled standardised
    scores' lower tail by exact selection, then each shard's classes' location and scale. ``config``:
    auto's configuration in znorm's terms (``Auto.partitioned`` passes AUTO_CONFIG: this module does
    not import auto, which imports it)."""

    model_class = PooledZnormModel

    def __init__(self, config: dict):
        self.config = dict(config)
        self.offset, self.n_pooled, self.tail, self.files = 0.0, 0, None, ()
        self._pooled_path: str | None = None

    def reduce(self, runner, targets, label: str) -> None:
        if runner.minimum > 0:
            self.offset = 0.0  # working_offset's rule, from the shards' minima
        else:
            positive = runner.min_positive
            if not math.isfinite(positive):
                raise DataError("every training distance is 0; a log-normal model cannot be fitted (use family: gaussian)")
            self.offset = 0.5 * positive
        name = f"pooled-{label}.npy"
        cfg = self.config
        # the tail's k exceedances are summed bucket by bucket (at 10% of a billion scores they would not fit
        # one worker); only the lowest max(1%, largest target) are kept, for the thresholds above the tail
        moments = lowest_moments(runner, _auto_z, (self.offset, cfg),
                                 lambda n: exceedance_count(n, cfg["tail_fraction"], cfg["min_exceedances"]),
                                 lambda n: kept_count(n, targets), name=label)
        self.tail, self.n_pooled = _auto_tail(moments, cfg), moments.n_total
        self.files = (_save_pooled(str(runner.scratch), name, moments.kept),)
        self._pooled_path = str(runner.scratch / name)

    def fit_part(self, impostors: ImpostorDistances) -> PooledZnormModel:
        cfg = self.config
        _, locs, scales = _standardised(impostors, self.offset, 0.0, cfg)  # the full-sample location and scale
        pooled = np.load(self._pooled_path, mmap_mode="r")
        return PooledZnormModel(impostors.classes, locs, scales, impostors.counts(), cfg["family"], self.offset,
                                pooled, self.n_pooled, self.tail, cfg["min_tail_count"], Path(self._pooled_path).name)


# ---- generic-interp ------------------------------------------------------------------------------

class PooledSortedModel(FittedModel):
    """generic-interp's model: the pooled training distances' lowest values out of ``n_pooled``; one
    threshold for every class (the paper's interpolation formula at rank e N)."""

    def __init__(self, classes, lowest, n_pooled: int, pooled_file: str | None = None):
        super().__init__(classes)
        self.lowest, self.n_pooled, self.pooled_file = lowest, int(n_pooled), pooled_file

    def _thresholds(self, targets: np.ndarray, rows: np.ndarray) -> np.ndarray:
        _check_reach(targets, len(self.lowest), self.n_pooled, "generic-interp")
        k = np.asarray(targets, dtype=np.float64) * self.n_pooled
        one = np.where(k <= 1.0, k * float(self.lowest[0]), interpolate_rank(self.lowest, k))
        return np.tile(one, (len(rows), 1))

    def parameters(self) -> list[dict[str, Any]]:
        return [{"class": c, "n_train": self.n_pooled} for c in self.classes]

    def to_state(self) -> dict[str, Any]:
        return {"classes": list(self.classes), "n_pooled": self.n_pooled,
                "pooled": {"file": self.pooled_file} if self.pooled_file else np.asarray(self.lowest).tolist()}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> "PooledSortedModel":
        lowest, n_pooled = _checked_pooled(state, "distances", 0.0)
        pooled = state["pooled"]
        return cls(field(state, "classes"), lowest, n_pooled, pooled.get("file") if isinstance(pooled, dict) else None)


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

    def reduce(self, runner, targets, label: str) -> None:
        name = f"pooled-{label}.npy"
        self.n_pooled, info = lowest_sorted(runner, _distances, None, lambda n: kept_count(n, targets), _interp_finish,
                                            (str(runner.scratch), name, tuple(targets)), name=label)
        self.files = (info,)
        self._pooled_path = str(runner.scratch / name)

    def fit_part(self, impostors: ImpostorDistances) -> PooledSortedModel:
        return PooledSortedModel(impostors.classes, np.load(self._pooled_path, mmap_mode="r"), self.n_pooled,
                                 Path(self._pooled_path).name)
