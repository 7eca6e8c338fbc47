"""Generated inputs for the conformance checks (public: plugin authors may use them in their own
tests). Every generator takes a seed, :data:`SEED` by default, so a failure is reproducible."""

from __future__ import annotations

import numpy as np

from calibrate.contract.base import EvaluationInput, FittedModel, Fold
from calibrate.contract.types import DistanceMatrix, GenuineDistances, ImpostorDistances, SetCollection, TrainingGroups

SEED = 20140929  # fixed: every generated input is reproducible
#: target FPRs the estimator checks ask for: both sides of 1/N for the generated class sizes
TARGETS = (1e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5)


def make_impostors(seed: int = SEED, sizes: tuple[int, ...] = (41, 60, 97, 150, 200)) -> ImpostorDistances:
    """Training impostor distances for ``len(sizes)`` classes: scaled chi(8) draws, one class rounded to
    produce ties. Class sizes straddle 1/N for the targets in :data:`TARGETS`."""
    rng = np.random.default_rng(seed)
    per = {}
    for i, n in enumerate(sizes):
        d = (0.5 + 0.25 * i) * np.sqrt(rng.chisquare(8, size=n))
        if i == 2:
            d = np.round(d, 1)  # ties
        per[f"class-{i}"] = d
    return ImpostorDistances.from_lists(per)


def make_genuine(impostors: ImpostorDistances, seed: int = SEED, per_class: int = 10) -> GenuineDistances:
    """Training genuine distances for the classes of ``impostors``: ``per_class`` each (the last class none, as a
    class whose probes all went to the evaluation), mostly below the class's impostors, some among them."""
    rng = np.random.default_rng(seed)
    per = {}
    for i, c in enumerate(impostors.classes):
        d = impostors.of(i)
        n = 0 if i == len(impostors) - 1 else per_class
        per[c] = np.quantile(d, rng.beta(1, 6, n)) if d.size else np.empty(0)
    return GenuineDistances.from_lists(per)


def make_training_groups(impostors: ImpostorDistances, seed: int = SEED) -> TrainingGroups:
    """Demographic groups for the classes of ``impostors``: groups A and B in turn, the last class without one;
    each impostor's probe in A, B or none at random (the probe of a class's own group more often)."""
    rng = np.random.default_rng(seed)
    n = len(impostors)
    of_class = np.array([2 if i == n - 1 else i % 2 for i in range(n)], dtype=np.int64)
    own = np.repeat(of_class, impostors.counts())
    other = rng.integers(0, 3, own.size)
    return TrainingGroups(("A", "B"), of_class, np.where(rng.random(own.size) < 0.5, np.minimum(own, 2), other))


def make_sets(seed: int = SEED, n_classes: int = 4, sets_per_class: int = 2, samples_per_set: int = 8,
              n_features: int = 10) -> SetCollection:
    """Image sets with non-negative features: set sizes vary from ``samples_per_set`` to +3."""
    rng = np.random.default_rng(seed)
    samples, classes, ids = [], [], []
    for c in range(n_classes):
        centre = rng.random(n_features) * 2.0
        for s in range(sets_per_class):
            n = samples_per_set + int(rng.integers(0, 4))
            samples.append(np.abs(centre + 0.3 * rng.standard_normal((n, n_features))))
            classes.append(f"class-{c}")
            ids.append(f"class-{c}/{s}")
    return SetCollection(tuple(samples), np.array(classes), np.array(ids))


def make_score_matrix(seed: int = SEED, kind: str = "distance", n_classes: int = 6, probes_per_class: int = 5,
                      domain: tuple[float, float] = (0.0, 1.0), missing_share: float = 0.05) -> DistanceMatrix:
    """Probe x gallery comparisons, one gallery column per class; genuine entries are closer
    (smaller distances, larger similarities); about ``missing_share`` of entries are invalid."""
    rng = np.random.default_rng(seed)
    gallery = np.array([f"class-{c}" for c in range(n_classes)])
    probes = np.repeat(gallery, probes_per_class)
    genuine = probes[:, None] == gallery[None, :]
    closeness = np.where(genuine, rng.beta(5, 2, genuine.shape), rng.beta(2, 5, genuine.shape))  # in (0, 1)
    low, high = domain
    width = high - low
    if kind == "similarity":
        values = low + width * (0.02 + 0.96 * closeness)
    else:
        values = low + width * (0.02 + 0.96 * (1.0 - closeness))
    valid = rng.random(values.shape) >= missing_share
    return DistanceMatrix(values, probes, gallery, valid, kind, source="generated scores")


class _QuantileModel(FittedModel):
    """A stand-in calibration for evaluator checks: per-class empirical quantiles (scaled)."""

    def __init__(self, classes, per_class: list[np.ndarray], scale: float):
        super().__init__(classes)
        self._per = [np.sort(np.asarray(p, float)) for p in per_class]
        self._scale = scale

    def _thresholds(self, targets, rows=None):
        rows = np.arange(len(self.classes)) if rows is None else rows
        return np.stack([self._scale * np.quantile(self._per[int(i)], targets, method="inverted_cdf") for i in rows])

    def to_state(self):
        return {"classes": list(self.classes), "per_class": [p.tolist() for p in self._per], "scale": self._scale}

    @classmethod
    def from_state(cls, state):
        return cls(state["classes"], state["per_class"], state["scale"])


def make_evaluation_input(seed: int = SEED, targets: tuple[float, ...] = (0.005, 0.05, 0.2), n_folds: int = 2,
                          plots: bool = False) -> EvaluationInput:
    """Folds of generated distances with two stand-in estimators, ``a`` and ``b``. Distances are
    rounded to 0.01 and thresholds of ``a`` are training distances, so that evaluation distances
    equal to a threshold occur (accepted: distance <= threshold)."""
    folds = []
    for k in range(n_folds):
        train = make_score_matrix(seed + 10 * k, probes_per_class=6)
        train = train.with_values(np.round(train.values, 2))
        test = make_score_matrix(seed + 10 * k + 1, probes_per_class=8)
        test = test.with_values(np.round(test.values, 2))
        imp = ImpostorDistances.from_matrix(train)
        models = {label: _QuantileModel(imp.classes, [imp.of(i) for i in range(len(imp))], scale)
                  for label, scale in (("a", 1.0), ("b", 0.5))}
        tables = {label: m.thresholds(targets, label=label) for label, m in models.items()}
        folds.append(Fold(f"fold {k}", train, test, models, tables))
    return EvaluationInput(tuple(folds), tuple(targets), plots)
