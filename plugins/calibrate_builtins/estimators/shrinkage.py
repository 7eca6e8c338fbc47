"""Estimator ``shrinkage``: class-specific interpolated thresholds pulled toward the pooled one.

For class c with ``n_c`` training distances and target e, the class's own threshold ``t_c(e)``
(the paper's interpolation formula on its distances, as ``class-interp``) and the pooled one
``t_pool(e)`` (the same formula on all classes' distances, as ``generic-interp``) are combined::

    tau_c(e) = w_c t_c(e) + (1 - w_c) t_pool(e)

The weight ``w_c`` says how much the class's own data can be trusted. It is one number per class,
the same at every target: both parts grow with e, so the combination does too (a weight that
changed with e could make a threshold fall as the target rises). ``weight`` chooses the rule:

``count`` (default): ``w_c = n_c / (n_c + k)`` with ``k = prior_count / reference_target``:
    the class's own estimate gets half the weight when it expects ``prior_count`` of its own
    training distances below its threshold at the reference target (defaults 5 and 0.001, so
    ``k = 5000``; 258 distances per class give w = 0.05, 37 give w = 0.007). Below ``e = 1/n_c``
    the class's own formula (``e n_c d_(1)``) is an extrapolation toward 0, which a small weight
    keeps in check.

``empirical-bayes``: ``w_c = tau^2 / (tau^2 + v_c)`` at the reference target, where ``v_c`` is the
    sampling variance of ``t_c``, estimated by a bootstrap of the class's distances (``bootstrap``
    resamples, seeded by the run's seed and the class's position, so runs are reproducible), and
    ``tau^2`` is the spread of the true class thresholds, estimated by the method of moments as
    ``max(0, var_c(t_c) - mean_c(v_c))`` (the between-class variance of the estimates less the part
    sampling noise explains). A variance says nothing about bias, and below 1/n_c the class's own
    formula is biased toward 0; the count rule guards against that, this rule does not.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np

from calibrate.contract.base import Estimator, FittedModel, RunContext
from calibrate.errors import DataError, ParameterError
from calibrate.contract.types import ImpostorDistances

from calibrate.contract.packed import packed
from calibrate.contract.statecheck import bad, choice, declared_size, distances, field, number, numbers, sorted_segments
from calibrate.statistics.order import interp_threshold, lowest_segments, refuse_beyond, saved_pool_count

Weight = Literal["count", "empirical-bayes"]


def interp_rows(sorted_rows: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """The paper's interpolation formula applied to every row of an (m, n) array of ascending samples."""
    d = np.asarray(sorted_rows, dtype=np.float64)
    n = d.shape[1]
    k = np.asarray(targets, dtype=np.float64) * n
    lo = np.clip(np.floor(k).astype(np.int64), 1, n)
    hi = np.clip(np.ceil(k).astype(np.int64), 1, n)
    frac = np.where(hi > lo, k - lo, 0.0)
    above = d[:, lo - 1] + frac * (d[:, hi - 1] - d[:, lo - 1])
    below = k[None, :] * d[:, :1]
    return np.where(k[None, :] <= 1.0, below, above)


def bootstrap_variance(sorted_d: np.ndarray, targets: np.ndarray, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """Bootstrap variance of the interpolated threshold of one sample at each target."""
    d = np.asarray(sorted_d, dtype=np.float64)
    idx = rng.integers(0, d.size, size=(resamples, d.size))
    boot = interp_rows(np.sort(d[idx], axis=1), targets)
    return boot.var(axis=0, ddof=1)


def count_weights(counts: np.ndarray, prior_count: float, reference_target: float) -> np.ndarray:
    """``n / (n + prior_count / reference_target)`` per class."""
    n = np.asarray(counts, dtype=np.float64)
    return n / (n + prior_count / reference_target)


def eb_weights(class_t: np.ndarray, variances: np.ndarray) -> np.ndarray:
    """``tau^2 / (tau^2 + v_c)`` with ``tau^2 = max(0, var(class_t) - mean(v))`` (one target)."""
    class_t = np.asarray(class_t, dtype=np.float64)
    v = np.asarray(variances, dtype=np.float64)
    tau2 = max(float(class_t.var(ddof=1)) - float(v.mean()), 0.0) if class_t.size > 1 else 0.0
    den = tau2 + v
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, tau2 / den, 0.0)


class ShrinkageModel(FittedModel):
    """Sorted training distances per class (and pooled) and one weight per class. A model as saved (``compact``)
    keeps each class's lowest distances and the pooled sample's lowest (``lowest``: (counts, pooled lowest,
    N))."""

    def __init__(self, classes, values: np.ndarray, offsets: np.ndarray, weights: np.ndarray, weight_rule: str = "count",
                 lowest: tuple[np.ndarray, np.ndarray, int] | None = None):
        super().__init__(classes)
        self._values = np.asarray(values, dtype=np.float64)
        self._offsets = np.asarray(offsets, dtype=np.int64)
        self.weights = np.asarray(weights, dtype=np.float64)
        self.weight_rule = weight_rule
        if self._offsets.size != len(self.classes) + 1 or self.weights.shape != (len(self.classes),):
            raise DataError("shrinkage model: offsets or weights do not match the classes")
        if lowest is None:
            self._counts, self._pooled, self._n_pooled = None, np.sort(self._values), self._values.size
        else:
            self._counts = np.asarray(lowest[0], dtype=np.int64)
            self._pooled, self._n_pooled = np.asarray(lowest[1], dtype=np.float64), int(lowest[2])
            if self._counts.shape != (len(self.classes),) or np.any(self._counts < np.diff(self._offsets)) \
                    or not 0 < self._pooled.size <= self._n_pooled:
                raise DataError("shrinkage model: the counts or the pooled sample do not match the distances kept")

    def _n(self) -> np.ndarray:
        return np.diff(self._offsets) if self._counts is None else self._counts

    def _row(self, i: int) -> np.ndarray:
        return self._values[self._offsets[i]:self._offsets[i + 1]]

    def _thresholds(self, targets: np.ndarray, rows: np.ndarray) -> np.ndarray:
        targets = np.asarray(targets, dtype=np.float64)
        n = self._n()
        if self._counts is not None:
            refuse_beyond(targets, self._pooled.size, self._n_pooled, "shrinkage")
            refuse_beyond(targets, np.diff(self._offsets), n, "shrinkage")
        pooled_t = interp_threshold(self._pooled, targets, self._n_pooled)
        out = np.empty((rows.size, targets.size))
        for r, i in enumerate(rows):
            w = self.weights[i]
            out[r] = w * interp_threshold(self._row(int(i)), targets, int(n[i])) + (1 - w) * pooled_t
        return out

    def parameters(self) -> list[dict[str, Any]]:
        return [{"class": c, "n_train": int(n), "weight_rule": self.weight_rule, "class_weight": float(w)}
                for c, n, w in zip(self.classes, self._n(), self.weights)]

    def compact(self, reach: float) -> FittedModel:
        """What a saved calibration keeps to answer every target up to ``reach``: each class's lowest
        ``ceil(reach n_c) + 1`` distances and n_c, the pooled sample's lowest ``ceil(reach N) + 1`` and N (the model
        itself when that is everything)."""
        values, offsets, counts = lowest_segments(self._values, self._offsets, reach, self._counts)
        pooled = self._pooled[:saved_pool_count(self._n_pooled, reach)]
        if values.size == self._values.size and pooled.size == self._pooled.size:
            return self
        return type(self)(self.classes, values, offsets, self.weights, self.weight_rule,
                              (counts, pooled.copy(), self._n_pooled))

    def to_state(self) -> dict[str, Any]:
        state = {"classes": list(self.classes), "values": packed(self._values), "offsets": self._offsets.tolist(),
                 "weights": self.weights.tolist(), "weight_rule": self.weight_rule}
        if self._counts is not None:
            state.update(counts=self._counts.tolist(), pooled=packed(self._pooled), n_pooled=self._n_pooled)
        return state

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> "ShrinkageModel":
        """The model a saved state describes, every field checked (calibrate.contract.statecheck): distances >= 0,
        ascending per class; weights in [0, 1]."""
        classes = field(state, "classes")
        size = len(classes) if isinstance(classes, list) else 0
        values = distances(field(state, "values"), "values", at_most=declared_size(state))
        offsets = sorted_segments(values, field(state, "offsets"), size)
        lowest = None
        if "counts" in state:  # a saved model: each class's and the pooled sample's lowest distances
            counts = numbers(field(state, "counts"), "counts", 1, size=size, integer=True)
            n_pooled = int(number(field(state, "n_pooled"), "n_pooled", 1, integer=True))
            pooled = distances(field(state, "pooled"), "pooled", at_most=n_pooled)
            if pooled.size > n_pooled:
                raise bad("n_pooled", f"is {n_pooled}: must be at least the {pooled.size:,} pooled values kept")
            if pooled.size == 0 or np.any(np.diff(pooled) < 0):
                raise bad("pooled", "must hold the pooled distances' lowest values, ascending")
            lowest = (counts, pooled, n_pooled)
        return cls(classes, values, offsets, numbers(field(state, "weights"), "weights", 0.0, 1.0, size=size),
                   choice(field(state, "weight_rule", "count"), "weight_rule", ("count", "empirical-bayes")), lowest)


class Shrinkage(Estimator):
    """Class-specific interpolated thresholds shrunk toward the pooled (generic) threshold by how much data each class has.

    :param weight: count (w = n / (n + prior_count / reference_target)) or empirical-bayes (bootstrap variance against the between-class spread).
    :param prior_count: count rule: expected number of a class's distances below its threshold (at the reference target) at which its own estimate gets half the weight.
    :param reference_target: the target FPR at which the weights are set (one weight per class for all targets).
    :param bootstrap: empirical-bayes rule: bootstrap resamples per class for the variance of its threshold.
    """

    model_class = ShrinkageModel

    def __init__(self, *, weight: Weight = "count", prior_count: float = 5.0, reference_target: float = 0.001,
                 bootstrap: int = 200):
        if weight not in ("count", "empirical-bayes"):
            raise ParameterError(f"weight must be count or empirical-bayes; got {weight!r}")
        if not prior_count > 0:
            raise ParameterError(f"prior_count must be > 0; got {prior_count}")
        if not 0.0 < reference_target < 1.0:
            raise ParameterError(f"reference_target must be a target FPR in (0, 1); got {reference_target}")
        if not 10 <= bootstrap <= 100_000:  # resamples x class size values are drawn at once
            raise ParameterError(f"bootstrap must be from 10 to 100,000 resamples; got {bootstrap}")
        self.weight, self.prior_count, self.reference_target, self.bootstrap = weight, prior_count, reference_target, bootstrap

    def _fit(self, impostors: ImpostorDistances, context: RunContext) -> FittedModel:
        rows = [np.sort(impostors.of(i)) for i in range(len(impostors))]
        if self.weight == "count":
            weights = count_weights(impostors.counts(), self.prior_count, self.reference_target)
        else:
            ref = np.array([self.reference_target])
            class_t = np.array([interp_threshold(d, ref)[0] for d in rows])
            variances = np.empty(len(rows))
            for i, d in enumerate(rows):  # the slow part: a bootstrap per class (progress counts classes)
                variances[i] = bootstrap_variance(d, ref, self.bootstrap, np.random.default_rng([context.seed, i]))[0]
                context.advance(1)
            weights = eb_weights(class_t, variances)
        return ShrinkageModel(impostors.classes, np.concatenate(rows), impostors.offsets, weights, self.weight)
