"""Estimator ``znorm``: per-class score normalisation (Z-norm, as in speaker verification).

Each class's training impostor distances are summarised by a location ``m_c`` and a scale
``s_c`` on a working scale ``y``:

* ``family: gaussian``  -> ``y = d``;
* ``family: lognormal`` -> ``y = log(d + c)``, with ``c = 0`` when every training distance is
  positive and otherwise half the smallest positive training distance (pooled over classes), so
  that distances of exactly 0 (e.g. the best possible score of a similarity turned into a
  distance) stay finite. Thresholds are mapped back by ``d = exp(y) - c``, never below 0.

Location and scale (``robust``): mean and standard deviation (ddof 1), or the median and the
interquartile range / 1.349 (both consistent for a normal distribution; the robust pair ignores
the few extreme values that a look-alike enrollee produces). A scale of 0 (ties) falls back to
the standard deviation; a class whose distances are all equal is an error naming it.

Two ways to turn the normalised scores into thresholds:

``pooled_shape: false`` (classic Z-norm): the class's own normal model,
    ``y_tau = m_c + s_c q(e)`` with ``q(e) = Phi^{-1}(e)``, or with ``predictive: true`` the
    Bayesian predictive quantile of a normal sample of size ``n`` (non-informative prior):
    ``q(e) = t_{n-1}^{-1}(e) sqrt(1 + 1/n)``; this widens the tail for small ``n`` (with ``n = 37``
    at e = 0.05% it is 3.5 instead of 3.3 standard deviations), which the plain plug-in ignores.

``pooled_shape: true`` (hierarchical: one shape shared by all classes, location and scale per
class): every class's standardised scores ``z = (y - m_c) / s_c`` are pooled, and the threshold
of class c is ``y_tau = m_c + s_c z(e)`` with ``z(e)`` the e-quantile of the pooled z. So the shape
of the distribution (in particular its lower tail) is learnt from all N training distances at
once, while each class keeps its own location and scale.

* ``z(e)`` is the pooled empirical quantile (linear interpolation between order statistics,
  ``z_(lo) + (eN - lo)(z_(hi) - z_(lo))``) when ``e N >= min_tail_count``; below that the pooled
  lower tail is extrapolated by a generalised Pareto fit (see ``gpd_tail.py``: probability-weighted
  moments, ``tail_fraction`` of the pooled scores, at least ``min_exceedances`` of them), capped at
  the empirical quantile where the two meet so that thresholds never fall as the target rises.
* ``jackknife`` (alpha in [0, 1]) decides which location and scale standardise a training
  score: ``m_{c,i} = (1 - alpha) m_c + alpha m_{c,-i}`` (same for s), where ``m_{c,-i}`` leaves the
  score itself out. A new impostor's score is standardised by statistics that did *not* see it,
  so in-sample scores (alpha = 0) are too well fitted and the pooled tail comes out too light,
  the more so the fewer distances a class has; alpha = 1 (leave-one-out) is exactly right when the
  evaluation impostors are new people. In the image-set protocol, though, the evaluation
  impostors are the *same* enrolled people as in training (other sets of them), so a training
  score predicts its own evaluation scores and alpha = 0 is nearer the truth. The default 0.5 sits
  between the two: in a design study on synthetic image-set galleries (25-100 classes, 10 seeds
  each) alpha = 1 gave mean ratios of 0.4-0.8 and alpha = 0 of 1.0-2.4, alpha = 0.5 0.7-1.1; on
  score matrices of 300-500 classes the three agree within about 30%.
"""

from __future__ import annotations

import math
from typing import Any, Literal

import numpy as np

from calibrate.contract.base import Estimator, FittedModel, RunContext
from calibrate.errors import DataError, ParameterError
from calibrate.contract.types import ImpostorDistances

from calibrate.statistics.gpd import TailFit, check_shape_bounds, check_tail_params, fit_lower_tail, monotone
from calibrate.statistics.standardise import (IQR_TO_SD, from_working, location_scale, loo_location_scale,  # noqa: F401
                                   pooled_quantile, pooled_sorted, standardise, standardise_classes, to_working,
                                   working_offset)
from calibrate.contract.statecheck import LOG_RANGE, bad, choice, distance_span, field, flag, number, numbers, tail_fit, within
from calibrate.contract.packed import packed
from calibrate.statistics.order import interpolate_rank, rank_values, refuse_beyond, saved_pool_count

from .pooled import checked_pooled, pooled_file

Family = Literal["gaussian", "lognormal"]
FAMILIES = ("gaussian", "lognormal")

# --------------------------------------------------------------------------------------------
# pure functions


def pooled_tail(sorted_z: np.ndarray, tail_fraction: float, min_exceedances: int,
                shape_bounds: tuple[float, float]) -> dict | None:
    """The GPD lower tail of the pooled standardised scores as a model keeps it, or None when too few or tied pooled
    values allow none (the empirical quantile is then used throughout)."""
    try:
        tail_fit, _ = fit_lower_tail(sorted_z, tail_fraction=tail_fraction, min_exceedances=min_exceedances,
                                     shape_bounds=shape_bounds)
    except DataError:
        return None
    return dict(tail_fit.__dict__)


def check_class_sizes(impostors: ImpostorDistances, minimum: int, who: str) -> None:
    counts = impostors.counts()
    small = [(c, int(n)) for c, n in zip(impostors.classes, counts) if n < minimum]
    if small:
        raise DataError(f"estimator {who}: class {small[0][0]!r} has {small[0][1]} training distance(s); at least "
                        f"{minimum} are needed to estimate a location and scale"
                        f"{f' ({len(small) - 1} more classes are as small)' if len(small) > 1 else ''}; "
                        "use generic-interp or gpd-tail with pooling: pooled for such data")


# --------------------------------------------------------------------------------------------
# model


class ZnormModel(FittedModel):
    """Per class location/scale on the working scale, plus either per-class normal quantiles or a pooled z."""

    def __init__(self, classes, loc, scale, n, family: str, offset: float, pooled_shape: bool, predictive: bool,
                 sorted_z: np.ndarray | None = None, tail: dict | None = None, min_tail_count: float = 10.0,
                 anchor: dict | None = None):
        super().__init__(classes)
        #: ``anchored``'s shrinkage constants (mean and spread of the anchors, the rank cap), None for auto and znorm
        self.anchor = None if anchor is None else dict(anchor)
        self.loc = np.asarray(loc, dtype=np.float64)
        self.scale = np.asarray(scale, dtype=np.float64)
        self.n = np.asarray(n, dtype=np.int64)
        self.family, self.offset = family, float(offset)
        self.pooled_shape, self.predictive = bool(pooled_shape), bool(predictive)
        self.sorted_z = None if sorted_z is None else np.asarray(sorted_z, dtype=np.float64)
        #: the pooled sample's size: every value is in ``sorted_z``, or (a saved or sharded model) its lowest
        self.n_pooled = None if self.sorted_z is None else int(self.sorted_z.size)
        self.tail = None if tail is None else TailFit(**tail)
        self.min_tail_count = float(min_tail_count)
        if self.loc.shape != (len(self.classes),) or self.scale.shape != self.loc.shape:
            raise DataError("znorm model: location/scale do not match the classes")
        if family not in FAMILIES:
            raise DataError(f"znorm model: family {str(family)[:40]!r} is not one of {', '.join(FAMILIES)}")
        if not (np.all(np.isfinite(self.loc)) and np.all(np.isfinite(self.scale)) and np.all(self.scale > 0)):
            raise DataError("znorm model: every location must be finite and every scale a positive finite number")
        if not (np.isfinite(self.offset) and self.offset >= 0):
            raise DataError(f"znorm model: offset {self.offset!r} must be a finite number >= 0")

    def _quantile(self, targets: np.ndarray) -> np.ndarray:
        """The pooled sample's interpolated quantile at rank e N, read from the values kept (pooled_quantile's)."""
        return interpolate_rank(self.sorted_z, np.asarray(targets, dtype=np.float64) * self.n_pooled)

    def z_quantiles(self, targets: np.ndarray) -> np.ndarray:
        """The pooled standardised-score quantile at each target (pooled_shape models); a target beyond what the
        kept values reach (a saved model: calibrate.statistics.order.refuse_beyond) is refused."""
        targets = np.asarray(targets, dtype=np.float64)
        refuse_beyond(targets, len(self.sorted_z), self.n_pooled, "auto")
        emp = self._quantile(targets)
        switch = self.min_tail_count / self.n_pooled
        if self.tail is None or self.tail.p_u <= switch:
            return emp
        # below the switch the GPD tail, capped by the empirical quantile at the switch: non-decreasing in e
        at_switch = float(self._quantile(np.array([switch]))[0])
        return np.where(targets < switch, np.minimum(self.tail.quantile(targets), at_switch), emp)

    def _thresholds(self, targets: np.ndarray, rows: np.ndarray) -> np.ndarray:
        targets = np.asarray(targets, dtype=np.float64)
        if self.pooled_shape:
            q = np.broadcast_to(self.z_quantiles(targets), (rows.size, targets.size))
            y = self.loc[rows][:, None] + self.scale[rows][:, None] * q
            return monotone(from_working(y, self.family, self.offset), targets)
        from scipy import stats  # imported here and only here: listing plugins must not load scipy.stats

        if self.predictive:
            n = self.n[rows][:, None].astype(np.float64)
            q = stats.t.ppf(targets[None, :], n - 1) * np.sqrt(1 + 1 / n)
        else:
            q = np.broadcast_to(stats.norm.ppf(targets), (rows.size, targets.size))
        y = self.loc[rows][:, None] + self.scale[rows][:, None] * q
        return monotone(from_working(y, self.family, self.offset), targets)

    def order_statistic_pool(self) -> int | None:
        return self.n_pooled if self.pooled_shape else None

    def order_statistic_thresholds(self, ranks: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """``m_c + s_c z_(k)``, the k-th smallest pooled standardised score, mapped back to a distance; one
        float step below it where z_(k) is tied with the next score (so that no tie group is accepted whole)."""
        refuse_beyond(ranks, len(self.sorted_z), self.n_pooled, "auto", ranks=True)
        z, tied = rank_values(self.sorted_z, ranks)
        y = self.loc[rows][:, None] + self.scale[rows][:, None] * z[None, :]
        tau = from_working(y, self.family, self.offset)
        tau[:, tied] = np.nextafter(tau[:, tied], -np.inf)
        return tau

    def cdf(self, row: int, x: np.ndarray) -> np.ndarray:
        """Model CDF of the distance for class ``row`` (for the plots)."""
        y = to_working(np.maximum(np.asarray(x, dtype=np.float64), 0.0), self.family, self.offset)
        with np.errstate(divide="ignore"):
            z = (y - self.loc[row]) / self.scale[row]
        if not self.pooled_shape:
            from scipy import stats  # per-class normal or t shapes only (a pooled shape needs no scipy.stats)

            if self.predictive:
                n = float(self.n[row])
                return stats.t.cdf(z / np.sqrt(1 + 1 / n), n - 1)
            return stats.norm.cdf(z)
        emp = np.searchsorted(self.sorted_z, z, side="right") / self.sorted_z.size
        if self.tail is None:
            return emp
        switch = self.min_tail_count / self.sorted_z.size
        if self.tail.p_u <= switch:
            return emp
        z_switch = float(pooled_quantile(self.sorted_z, np.array([switch]))[0])
        return np.where(z < z_switch, np.minimum(self.tail.cdf(z), switch), emp)

    def parameters(self) -> list[dict[str, Any]]:
        rows = []
        for c, m, s, n in zip(self.classes, self.loc, self.scale, self.n):
            row = {"class": c, "family": self.family, "location": float(m), "scale": float(s), "n_train": int(n)}
            if self.anchor is not None:
                row["structure"] = self.anchor.get("structure", "anchored")
            if self.tail is not None:
                row.update({"pooled_tail_shape": self.tail.xi, "pooled_tail_scale": self.tail.beta})
            rows.append(row)
        return rows

    def compact(self, reach: float) -> FittedModel:
        """A pooled-shape model saved keeps only its pooled standardised scores' lowest ``ceil(reach N) + 1``
        (a PooledZnormModel, as a sharded run's): every threshold up to ``reach`` reads nothing above them."""
        if not self.pooled_shape or type(self) is not ZnormModel:
            return self
        kept = saved_pool_count(self.n_pooled, reach)
        if kept >= self.n_pooled:
            return self
        return PooledZnormModel(self.classes, self.loc, self.scale, self.n, self.family, self.offset,
                                self.sorted_z[:kept].copy(), self.n_pooled,
                                None if self.tail is None else dict(self.tail.__dict__), self.min_tail_count,
                                anchor=self.anchor)

    def to_state(self) -> dict[str, Any]:
        state = {"classes": list(self.classes), "loc": self.loc.tolist(), "scale": self.scale.tolist(),
                 "n": self.n.tolist(), "family": self.family, "offset": self.offset,
                 "pooled_shape": self.pooled_shape, "predictive": self.predictive,
                 "sorted_z": None if self.sorted_z is None else packed(self.sorted_z),
                 "tail": None if self.tail is None else dict(self.tail.__dict__),
                 "min_tail_count": self.min_tail_count}
        if self.anchor is not None:
            state["anchor"] = dict(self.anchor)
        return state

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> "ZnormModel":
        """The model a saved state describes; a state with ``n_pooled`` keeps only the pooled sample's lowest
        values (a compacted or a sharded run's model): a PooledZnormModel."""
        if isinstance(state, dict) and "n_pooled" in state:
            return PooledZnormModel.from_state(state)
        loc, scale, n, family, offset = checked_location_scale(state)
        pooled_shape, predictive = flag(field(state, "pooled_shape"), "pooled_shape"), flag(field(state, "predictive"),
                                                                                              "predictive")
        sorted_z, tail = field(state, "sorted_z", None), field(state, "tail", None)
        if pooled_shape:
            sorted_z = numbers(sorted_z, "sorted_z")
            if sorted_z.size < 2 or np.any(np.diff(sorted_z) < 0):
                raise bad("sorted_z", "must hold the pooled standardised scores, at least 2, ascending")
            if tail is not None:
                tail = tail_fit(tail, "tail", float(sorted_z[0]), float(sorted_z[-1]), sorted_z.size)
        min_tail_count = number(field(state, "min_tail_count", 10.0), "min_tail_count", 0.0, open_low=True)
        anchor = checked_anchor(state)
        if pooled_shape:
            _check_one_offset(anchor, offset, sorted_z)
            check_pooled_shifts(state, sorted_z, "sorted_z", family, offset)
        return cls(state["classes"], loc, scale, n, family, offset, pooled_shape, predictive,
                   sorted_z if pooled_shape else None, tail if pooled_shape else None, min_tail_count,
                   anchor=anchor)


def checked_anchor(state: dict[str, Any]) -> dict | None:
    """A saved ``anchor`` entry (``anchored``'s shrinkage constants), checked, or None when the state has none."""
    anchor = field(state, "anchor", None)
    if anchor is None:
        return None
    if not isinstance(anchor, dict):
        raise bad("anchor", "must be a mapping of mean, between_var and max_rank")
    return {"structure": choice(field(anchor, "structure", "anchored", where="anchor"), "anchor.structure",
                                ("anchored", "one")),
            "mean": number(field(anchor, "mean", where="anchor"), "anchor.mean", -LOG_RANGE, LOG_RANGE),
            "between_var": number(field(anchor, "between_var", where="anchor"), "anchor.between_var", 0.0, 1e6),
            "max_rank": int(number(field(anchor, "max_rank", where="anchor"), "anchor.max_rank", 3, 10 ** 6,
                                   integer=True))}


def _check_one_offset(anchor: dict | None, offset: float, sorted_z: np.ndarray) -> None:
    """auto's structure ``one`` pools log(d + offset) itself: every pooled value is at least log(offset)."""
    if anchor is not None and anchor["structure"] == "one" and offset > 0 and np.log(offset) > float(sorted_z[0]):
        raise bad("offset", f"is {offset!r}: must be at most exp of the smallest pooled value "
                            f"({float(np.exp(sorted_z[0])):.6g}), as log(d + offset) >= log(offset)")


def checked_location_scale(state: dict[str, Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray, str, float]:
    """A saved znorm-like state's (loc, scale, n, family, offset), by type and range (calibrate.contract.statecheck):
    a scale is > 0; a location is a mean of distances (>= 0) or of log(d + offset) (above log(offset), and
    within float64's exp range); the offset is half a training distance, so below every class's typical one
    (not checked for auto's structure ``one``, whose location 0 is a reference, not a class's typical distance)."""
    classes = field(state, "classes")
    size = len(classes) if isinstance(classes, list) else None
    family = choice(field(state, "family"), "family", FAMILIES)
    offset = number(field(state, "offset"), "offset", 0.0)
    if family == "lognormal":
        loc = numbers(field(state, "loc"), "loc", -LOG_RANGE, LOG_RANGE, size=size)
        anchor = state.get("anchor") if isinstance(state, dict) else None
        one = isinstance(anchor, dict) and anchor.get("structure") == "one"
        if offset > 0 and not one and offset >= float(np.exp(loc.min())):  # log(d + c) >= log(c) for every d >= 0
            raise bad("offset", f"is {offset!r}: must be below every class's typical distance (exp of its location, "
                                f"smallest {float(np.exp(loc.min())):.6g})")
    else:
        if offset != 0:
            raise bad("offset", f"is {offset!r}: a gaussian znorm model has offset 0")
        loc = numbers(field(state, "loc"), "loc", 0.0, size=size)
    scale = numbers(field(state, "scale"), "scale", 0.0, size=size, open_low=True)
    n = numbers(field(state, "n"), "n", 1, size=size, integer=True)
    _check_against_training(state, loc, scale, family, offset)
    return loc, scale, n, family, offset


def working_span(family: str, offset: float) -> tuple[float, float] | None:
    """The range of the working-scale training distances of the file being loaded (statecheck.distance_span)."""
    span = distance_span()
    if span is None:
        return None
    with np.errstate(divide="ignore"):
        low, high = (float(v) for v in to_working(np.array(span), family, offset))
    return (low, high) if math.isfinite(low) and math.isfinite(high) else None


def _check_against_training(state: dict[str, Any], loc: np.ndarray, scale: np.ndarray, family: str,
                            offset: float) -> None:
    """Locations and scales whose thresholds stay finite and ordered: an anchored model (``anchor``) shifts every class,
    scale 1 (anchored.py); with the loader's training range on the working scale, of width W, a location lies within
    it widened by W on each side (a group's shift moves locations, never beyond all training distances; structure
    ``one``'s are a reference 0) and a class's spread is at most W."""
    anchor = state.get("anchor")
    if isinstance(anchor, dict) and np.any(scale != 1.0):
        i = int(np.flatnonzero(scale != 1.0)[0])
        raise bad(f"scale[{i}]", f"is {float(scale[i])!r}: an anchored model shifts each class and scales none (scale 1)")
    span = working_span(family, offset)
    if span is None:
        return
    width = span[1] - span[0]
    if not (isinstance(anchor, dict) and anchor.get("structure") == "one"):
        within(loc, "loc", (span[0] - width, span[1] + width), "working-scale distances (widened by their range)")
    if anchor is None and np.any(scale > width * (1 + 1e-9)):
        i = int(np.flatnonzero(scale > width * (1 + 1e-9))[0])
        raise bad(f"scale[{i}]", f"is {float(scale[i])!r}: wider than the whole range of this file's working-scale "
                                 f"training distances ({width:.6g}), which no class's spread can exceed")


def check_pooled_shifts(state: dict[str, Any], z: np.ndarray, name: str, family: str, offset: float) -> None:
    """An anchored model's pooled values are working-scale distances (width W) less a location (structure ``one``:
    less 0), a group's shift aside: within [-2W, 2W] (``one``: the range widened by W each side)."""
    anchor, span = state.get("anchor"), working_span(family, offset)
    if not isinstance(anchor, dict) or span is None:
        return
    width = span[1] - span[0]
    one = anchor.get("structure") == "one"
    within(z, name, (span[0] - width, span[1] + width) if one else (-2 * width, 2 * width),
           "working-scale distances less a location, widened by their range")


def enroll_znorm(model: ZnormModel, cls: str, distances: np.ndarray, robust: bool, who: str) -> ZnormModel:
    """``model`` with one class added or replaced: its location and scale from its own distances on the
    fitted working scale; the pooled shape (standardised scores, tail) and the offset stay as fitted."""
    y = to_working(np.asarray(distances, dtype=np.float64), model.family, model.offset)
    try:
        _, m, s = standardise(y, robust, 0.0)
    except DataError as exc:
        raise DataError(f"estimator {who}, class {cls!r}: {exc}") from None
    state = model.to_state()
    if cls in model.classes:
        i = model.classes.index(cls)
        state["loc"][i], state["scale"][i], state["n"][i] = float(m), float(s), int(y.size)
    else:
        state["classes"].append(cls)
        state["loc"].append(float(m))
        state["scale"].append(float(s))
        state["n"].append(int(y.size))
    return type(model).from_state(state)


def fit_znorm(impostors: ImpostorDistances, *, family: str, robust: bool, pooled_shape: bool, predictive: bool,
              jackknife: float, min_tail_count: float, tail_fraction: float, min_exceedances: int,
              shape_bounds: tuple[float, float], who: str) -> ZnormModel:
    """The fit shared by ``znorm`` and ``auto``."""
    check_class_sizes(impostors, 3, who)
    offset, locs, scales, zs = standardise_classes(impostors, family, robust, jackknife if pooled_shape else 0.0,
                                                   f"estimator {who}")
    sorted_z, tail = None, None
    if pooled_shape:
        sorted_z = pooled_sorted(impostors, family, robust, jackknife, f"estimator {who}")
        tail = pooled_tail(sorted_z, tail_fraction, min_exceedances, shape_bounds)
    return ZnormModel(impostors.classes, locs, scales, impostors.counts(), family, offset, pooled_shape, predictive,
                      sorted_z, tail, min_tail_count)


class Znorm(Estimator):
    """Per-class Z-norm: location and scale per class, then a normal quantile or a quantile of the pooled normalised scores.

    :param family: gaussian (normalise the distances) or lognormal (normalise log distances).
    :param robust: median and IQR/1.349 instead of mean and standard deviation.
    :param pooled_shape: pool all classes' normalised scores and take their quantile (shape shared, location and scale per class).
    :param predictive: pooled_shape false: use the predictive (Student t) quantile of a normal sample instead of the plug-in normal one.
    :param jackknife: pooled_shape true: 0 standardises each training score with statistics that include it, 1 with leave-one-out statistics; in between mixes them.
    :param min_tail_count: pooled_shape true: below this many pooled scores under the target, extrapolate with a GPD tail.
    :param tail_fraction: share of the pooled scores used for the GPD tail fit.
    :param min_exceedances: at least this many pooled scores in the GPD tail fit.
    """

    model_class = ZnormModel
    #: a new class gets its own location and scale; the pooled shape and the working-scale offset stay
    enroll_mode = "pooled"

    def _enroll(self, model: FittedModel, cls: str, single: ImpostorDistances, context: RunContext) -> FittedModel:
        return enroll_znorm(model, cls, single.of(0), self.robust, "znorm")

    def __init__(self, *, family: Family = "gaussian", robust: bool = False, pooled_shape: bool = False,
                 predictive: bool = True, jackknife: float = 0.5, min_tail_count: float = 10.0,
                 tail_fraction: float = 0.1, min_exceedances: int = 30):
        if family not in ("gaussian", "lognormal"):
            raise ParameterError(f"family must be gaussian or lognormal; got {family!r}")
        if not 0.0 <= jackknife <= 1.0:
            raise ParameterError(f"jackknife must be in [0, 1]; got {jackknife}")
        if not min_tail_count >= 1:
            raise ParameterError(f"min_tail_count must be at least 1; got {min_tail_count}")
        check_tail_params(tail_fraction, min_exceedances)
        self.family, self.robust, self.pooled_shape, self.predictive = family, robust, pooled_shape, predictive
        self.jackknife, self.min_tail_count = jackknife, min_tail_count
        self.tail_fraction, self.min_exceedances = tail_fraction, min_exceedances

    def _fit(self, impostors: ImpostorDistances, context: RunContext) -> FittedModel:
        return fit_znorm(impostors, family=self.family, robust=self.robust, pooled_shape=self.pooled_shape,
                         predictive=self.predictive, jackknife=self.jackknife, min_tail_count=self.min_tail_count,
                         tail_fraction=self.tail_fraction, min_exceedances=self.min_exceedances,
                         shape_bounds=check_shape_bounds([-1.0, 0.5]), who="znorm")


class PooledZnormModel(ZnormModel):
    """auto's model as saved (``compact``) or fitted shard by shard: every class's location and scale, and the
    pooled standardised scores' lowest values (``sorted_z``) out of ``n_pooled``, with the GPD tail fitted
    to them (pooled.py)."""

    def __init__(self, classes, loc, scale, n, family: str, offset: float, sorted_z, n_pooled: int,
                 tail: dict | None, min_tail_count: float, pooled_file: str | None = None, anchor: dict | None = None):
        super().__init__(classes, loc, scale, n, family, offset, True, False, None, tail, min_tail_count, anchor)
        self.sorted_z = sorted_z  # possibly a read-only memory map of pooled-LABEL.npy
        self.n_pooled, self.pooled_file = int(n_pooled), pooled_file

    def cdf(self, row: int, x: np.ndarray) -> np.ndarray | None:
        return None  # only the pooled lower tail is kept: no curve drawn

    def to_state(self) -> dict[str, Any]:
        state = {"classes": list(self.classes), "loc": self.loc.tolist(), "scale": self.scale.tolist(),
                 "n": self.n.tolist(), "family": self.family, "offset": self.offset, "n_pooled": self.n_pooled,
                 "pooled": {"file": self.pooled_file} if self.pooled_file else packed(self.sorted_z),
                 "tail": None if self.tail is None else dict(self.tail.__dict__), "min_tail_count": self.min_tail_count}
        if self.anchor is not None:
            state["anchor"] = dict(self.anchor)
        return state

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> "PooledZnormModel":
        """The model a saved state describes, every field checked (calibrate.contract.statecheck, znorm's
        checked_location_scale); the pooled tail's threshold lies at or above its lowest kept score."""
        loc, scale, n, family, offset = checked_location_scale(state)
        sorted_z, n_pooled = checked_pooled(state, "standardised scores", -math.inf)
        _check_one_offset(checked_anchor(state), offset, sorted_z)
        check_pooled_shifts(state, sorted_z, "pooled", family, offset)
        tail = field(state, "tail")
        if tail is not None:
            tail = tail_fit(tail, "tail", float(sorted_z[0]), math.inf, n_pooled)
        min_tail_count = number(field(state, "min_tail_count"), "min_tail_count", 0.0, open_low=True)
        return cls(state["classes"], loc, scale, n, family, offset, sorted_z, n_pooled, tail, min_tail_count,
                   pooled_file(state), anchor=checked_anchor(state))
