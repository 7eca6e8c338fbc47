"""The predicted FPR interval as a result (calibrate.predicted.interval makes it): the recipe's settings
(:class:`PredictionSettings`), one estimator's :class:`Prediction` (its replicates, the world's check per target,
its summary and saved form), the saved tables, the interval for the FPR measured on n attempts
(:func:`measured_interval`) and several folds' replicates combined (:func:`combine`). What reads a prediction
(a saved calibration, the ``fpr`` evaluator) needs this, not the simulation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from calibrate.errors import ParameterError


DEFAULT_LEVEL = 0.9
DEFAULT_REPLICATES = 100
#: fewer replicates than this give no interval (the 5% and 95% quantiles of fewer are too coarse)
MIN_REPLICATES = 20
#: the share of the run's time so far that refits may take by default
DEFAULT_BUDGET = 0.2

#: per target, what the world's check said and what it means for the interval
STATUS = {"fits": "the world matches the training distances at these thresholds (at least 10 of them lie below)",
          "tail": "fewer than 10 training distances lie below these thresholds: the world's tail, checked against "
                  "the pooled training scores, predicts there",
          "contradicted": "no prediction: the model does not fit these training scores at this target (its FPR at "
                          "these thresholds lies outside the 99.9% binomial band of the training FPR, widened 1.5-fold; "
                          "where fewer than 10 training distances lie below them, its expected count outside the 99.9% "
                          "Poisson band of theirs)",
          "tail-unfit": "no prediction: the model does not fit these training scores at this target (its tail "
                        "failed the check against the pooled training scores, and these thresholds lie in it)"}
#: the statuses that give an interval
PREDICTED = ("fits", "tail")
#: the reference worlds (calibrate.predicted.world.WORLDS), in words
WORLD_WORDS = {"bulk": "auto's model (classes located by the bulk of their impostors)",
               "anchored": "the anchored model (classes located at their nearest impostors)"}


@dataclass(frozen=True)
class PredictionSettings:
    """The recipe's ``evaluation.prediction`` (``false`` turns it off)."""

    level: float = DEFAULT_LEVEL
    replicates: int = DEFAULT_REPLICATES
    enabled: bool = True
    #: refits may take this share of the run's time so far (estimators without ``simulate``)
    budget: float = DEFAULT_BUDGET
    #: or this many seconds per estimator and fold (overrides ``budget``)
    budget_s: float | None = None

    def __post_init__(self):
        if not 0.5 <= self.level < 1.0:
            raise ParameterError(f"prediction level must be in [0.5, 1), e.g. 0.9 for a 90% interval; got {self.level}")
        if not (isinstance(self.replicates, int) and MIN_REPLICATES <= self.replicates <= 100_000):
            raise ParameterError(f"prediction replicates must be an integer in [{MIN_REPLICATES}, 100000]; "
                                 f"got {self.replicates!r}")
        if isinstance(self.budget, bool) or not isinstance(self.budget, (int, float)) or not 0 < self.budget <= 100:
            raise ParameterError(f"prediction budget must be a share of the run's time in (0, 100], e.g. 0.2; "
                                 f"got {self.budget!r}")
        if self.budget_s is not None and (isinstance(self.budget_s, bool) or not isinstance(self.budget_s, (int, float))
                                          or not 0 < self.budget_s < 1e7):
            raise ParameterError(f"prediction budget_s must be a positive number of seconds, e.g. 600; "
                                 f"got {self.budget_s!r}")

    def seconds(self, base_seconds: float) -> float:
        """The refits' time budget, given the run's time so far."""
        return float(self.budget_s) if self.budget_s is not None else self.budget * max(float(base_seconds), 0.0)


def column_quantile(values: np.ndarray, q: float) -> np.ndarray:
    """The q-quantile of each column over its finite entries (NaN where a column has none)."""
    v = np.asarray(values, dtype=np.float64)
    out = np.full(v.shape[1:], np.nan)
    finite = np.isfinite(v)
    for idx in np.ndindex(*v.shape[1:]):
        col = v[(slice(None), *idx)][finite[(slice(None), *idx)]]
        if col.size:
            out[idx] = np.quantile(col, q)
    return out


@dataclass
class Prediction:
    """Predicted FPR of one estimator's thresholds on one fold's gallery.

    ``replicates[b, t]``: the true FPR, in replicate world b, of the thresholds refitted there at
    ``targets[t]`` (attempts weighted by each class's training count), NaN in the columns of targets
    without a prediction (``status``); ``class_low``/``class_high``: the per-class interval (classes x
    targets) or None when it was not kept.
    """

    targets: np.ndarray
    level: float
    replicates: np.ndarray
    class_low: np.ndarray | None = None
    class_high: np.ndarray | None = None
    failed: int = 0
    #: model-based confidence: candidate targets and the replicates' achieved FPR at each (B x G)
    grid: np.ndarray | None = None
    grid_fpr: np.ndarray | None = None
    #: order-statistic confidence: the rank used at each target (0: none) and the replicates' FPR there (B x T)
    ranks: np.ndarray | None = None
    rank_fpr: np.ndarray | None = None
    #: how each target's threshold was chosen when the estimator carries a confidence ("order-statistic" or "model")
    methods: tuple[str, ...] = ()
    #: per target, the world's check (a key of STATUS) and its figures (calibrate.predicted.world.training_check)
    status: tuple[str, ...] = ()
    checks: list[dict] = field(default_factory=list)
    #: "vectorised" (Estimator.simulate) or "refits"; the world's tail model and structure (calibrate.predicted.world.WORLDS)
    simulation: str = "refits"
    tail_model: str = ""
    world: str = "bulk"
    #: when the time budget cut the refits short, how many ran (in words; "" otherwise)
    budget_note: str = ""
    #: vectorised simulation: galleries whose partial draw missed what ``simulate`` reads, seen again at more ranks
    #: (calibrate.predicted.simulation._complete), and those of them refitted whole one at a time (the slow path)
    widened: int = 0
    refitted: int = 0
    #: a model fitted group by group (``impostors: same-group``): each group's own prediction, by group name
    groups: dict | None = None
    #: how the training false accepts cluster by probe, and what that added to the replicates
    #: (calibrate.predicted.clustering.Clustering.summary; None: not measured, no probe identities known)
    clustering: dict | None = None

    def predicted(self) -> np.ndarray:
        """Per target, whether it has an interval."""
        if not self.status:
            return np.ones(self.targets.size, dtype=bool)
        return np.array([s in PREDICTED for s in self.status])

    @property
    def low(self) -> np.ndarray:
        return column_quantile(self.replicates, (1 - self.level) / 2)

    @property
    def high(self) -> np.ndarray:
        return column_quantile(self.replicates, (1 + self.level) / 2)

    def summary(self) -> dict[str, Any]:
        """JSON-ready: the long-run interval per target (None where there is no prediction), and how it was made."""
        low, high = self.low, self.high
        out: dict[str, Any] = {"level": self.level, "simulated_galleries": int(self.replicates.shape[0]),
                               "simulation": self.simulation, "targets": self.targets.tolist(),
                               "predicted_fpr_low": _nones(low), "predicted_fpr_high": _nones(high),
                               "world": f"{WORLD_WORDS.get(self.world, self.world)} with a {self.tail_model or 'GPD'} "
                                        "lower tail (calibrate.world)", "world_structure": self.world}
        if self.status:
            out["prediction_status"] = list(self.status)
            out["world_check"] = [_jsonable_check(c) for c in self.checks]
        if self.methods:
            out["confidence_method"] = list(self.methods)
        if self.clustering:
            out["clustering"] = self.clustering
        return out

    def dispersion(self) -> tuple[np.ndarray | None, float | None]:
        """(cv2 per target, the training units' size) for :func:`measured_interval`; (None, None) when not measured."""
        c = self.clustering
        if not c:
            return None, None
        return np.asarray(c["cv2"], dtype=np.float64), float(c["unit_size"])

    def saved(self, classes: Sequence[str]) -> dict[str, Any]:
        """What a saved calibration keeps: the summary, the replicates (for the interval on any number of
        attempts) and the per-class intervals when they were kept; each table as :func:`saved_table` writes it."""
        out = self.summary()
        out["replicates"] = saved_table(self.replicates)
        if self.class_low is not None:
            out["per_class"] = {"classes": list(classes), "low": saved_table(self.class_low),
                                "high": saved_table(self.class_high)}
        return out


def saved_table(rows: np.ndarray) -> list | dict:
    """A table of rates (one row per replicate or class, one column per target) as a saved calibration holds it:
    lists with null for NaN (JSON has no NaN), or, from ``calibrate.contract.packed.PACK_FROM`` values (a per-class table
    of hundreds of classes), its rows one after the other packed exactly (calibrate.contract.packed; NaN kept)."""
    from calibrate.contract.packed import PACK_FROM, packed

    r = np.asarray(rows, dtype=np.float64)
    return packed(r.ravel()) if r.size >= PACK_FROM else [_nones(row) for row in r]


def _nones(values: np.ndarray) -> list:
    """A JSON list with None for NaN (JSON has no NaN)."""
    return [float(v) if np.isfinite(v) else None for v in np.asarray(values, dtype=np.float64)]


def _jsonable_check(check: dict) -> dict:
    return {k: (list(v) if isinstance(v, tuple) else v) for k, v in check.items()}


def as_array(values: Any, columns: int | None = None) -> np.ndarray:
    """A saved (JSON) list of floats or None back to an array with NaN; a packed table (:func:`saved_table`) of
    ``columns`` columns back to its rows."""
    from calibrate.contract.packed import is_packed, unpacked

    if is_packed(values):
        return unpacked(values, "prediction").reshape(-1, columns)
    return np.array([[np.nan if v is None else v for v in row] if isinstance(row, list) else
                     (np.nan if row is None else row) for row in values], dtype=np.float64)


def measured_interval(replicates: np.ndarray, attempts: int, level: float, cv2: Sequence[float] | None = None,
                      unit_size: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Quantiles (1 -/+ level) / 2 of the mixture over replicates of the false accepts among ``attempts``, over
    ``attempts`` (per target over its finite replicates; NaN where a target has none): Binomial(attempts, p_b), or,
    where false accepts cluster by probe (``cv2`` per target, the units' heterogeneity, and ``unit_size``, the
    evaluation's units' size: calibrate.predicted.clustering), a negative binomial of mean attempts p_b whose variance
    is ``1 + cv2 p_b unit_size`` times that."""
    reps = np.asarray(replicates, dtype=np.float64)
    n = int(attempts)
    t = reps.shape[1]
    low, high = np.full(t, np.nan), np.full(t, np.nan)
    if n <= 0 or reps.shape[0] == 0:
        return low, high
    a = (1 - level) / 2
    for j in range(t):
        p = np.clip(reps[np.isfinite(reps[:, j]), j], 0.0, 1.0)
        if p.size == 0:
            continue
        excess = 0.0 if cv2 is None or unit_size is None else float(cv2[j]) * float(unit_size)
        low[j] = _mixture_quantile(p, n, a - 1e-12, excess) / n
        high[j] = _mixture_quantile(p, n, 1 - a - 1e-12, excess) / n
    return low, high


def _mixture_quantile(p: np.ndarray, n: int, q: float, excess: float = 0.0) -> int:
    """The smallest count k with mean_b P(X_b <= k) >= q, X_b Binomial(n, p_b), or (``excess`` > 0) negative binomial
    of mean n p_b and variance (1 + excess p_b) n p_b; by bisection on k (the mixture's CDF is non-decreasing in k),
    so that a large n costs a few dozen CDF evaluations, not n."""
    from scipy.special import bdtr, betainc  # the binomial CDF and the incomplete beta (no scipy.stats: about 0.4 s)

    if excess > 0:
        mean = n * p
        over = excess * p  # the variance's excess over the mean, as a share of it
        clumped = over > 1e-9
        r = np.where(clumped, mean / np.where(clumped, over, 1.0), 1.0)

        def cdf(k: int) -> float:
            nb = betainc(r, k + 1.0, r / (r + mean)) if clumped.any() else 0.0
            return float(np.mean(np.where(mean <= 0, 1.0, np.where(clumped, nb, bdtr(k, n, p)))))

        hi = int(min(n, math.ceil(float(np.max(mean + 8.0 * np.sqrt(mean * (1 + over)))) + 10)))
    else:
        def cdf(k: int) -> float:
            return float(bdtr(k, n, p).mean())

        hi = _binomial_top(n, float(p.max()))
    lo = 0
    if cdf(lo) >= q:
        return lo
    if cdf(hi) < q:
        return hi
    while hi - lo > 1:  # invariant: cdf(lo) < q <= cdf(hi)
        mid = (lo + hi) // 2
        if cdf(mid) >= q:
            hi = mid
        else:
            lo = mid
    return hi


def _binomial_top(n: int, p: float) -> int:
    """A count at which Binomial(n, p) has all but less than 1e-6 of its mass (mean + 6 sd, and a margin)."""
    mean = n * p
    return int(min(n, math.ceil(mean + 6.0 * math.sqrt(mean * (1 - p)) + 10)))


def combine(predictions: Sequence[Prediction], weights: Sequence[float]) -> np.ndarray:
    """Replicate-wise FPR over several folds (rotating enrollment): the folds' attempts add up, so
    replicate b's FPR is the ``weights``-weighted mean of the folds' replicate b (folds independent;
    NaN where a fold has no prediction at that target)."""
    b = min(p.replicates.shape[0] for p in predictions)
    w = np.asarray(weights, dtype=np.float64)
    stack = np.stack([p.replicates[:b] for p in predictions])  # folds x B x T
    return np.tensordot(w / w.sum(), stack, axes=1)


def combined_cv2(predictions: Sequence[Prediction], weights: Sequence[float]) -> np.ndarray | None:
    """The folds' clustering (cv2 per target) weighted as :func:`combine` weights their replicates; None when a fold did
    not measure it (its interval for a measured FPR is then binomial, as before issue 40)."""
    cv2 = [p.dispersion()[0] for p in predictions]
    if any(c is None for c in cv2):
        return None
    w = np.asarray(weights, dtype=np.float64)
    return np.tensordot(w / w.sum(), np.stack(cv2), axes=1)


def by_groups(parts: dict, weights: Sequence[float], model: Any) -> Prediction:
    """One prediction of a model fitted group by group from each group's (``parts``: name -> Prediction, in the model's
    part order; ``weights``: each group's training distances): replicate-wise weighted as :func:`combine` does, each
    group's per-class intervals placed at its classes' rows, and per target the status of the group that gives none
    (else ``tail`` where a group rests on its tail, else ``fits``)."""
    preds = list(parts.values())
    reps = combine(preds, weights)
    classes = list(model.classes)
    low = high = None
    if all(p.class_low is not None for p in preds):
        low, high = np.full((len(classes), reps.shape[1]), np.nan), np.full((len(classes), reps.shape[1]), np.nan)
        row = {c: i for i, c in enumerate(classes)}
        for (_, part), p in zip(model.parts, preds):
            at = [row[c] for c in part.classes]
            low[at], high[at] = p.class_low, p.class_high
    status = []
    for j in range(reps.shape[1]):
        said = [p.status[j] for p in preds if p.status]
        status.append(next((s for s in said if s not in PREDICTED), "tail" if "tail" in said else "fits"))
    checks = [{"groups": {name: _jsonable_check(p.checks[j]) for name, p in parts.items() if p.checks}}
              for j in range(reps.shape[1])]
    out = Prediction(preds[0].targets, preds[0].level, reps, low, high, sum(p.failed for p in preds),
                     status=tuple(status), checks=checks, simulation="vectorised", tail_model="per group",
                     world="per group", groups=dict(parts))
    bad = ~out.predicted()
    if bad.any():
        out.replicates[:, bad] = np.nan
    return out
