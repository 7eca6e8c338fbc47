"""Confident thresholds (calibrate.predicted.confidence) never get stricter as the target loosens, within one call
and between separate calls, where the order-statistic bound starts and where the model-based curve
crosses it; and the method recorded per target names the threshold actually used (issue 18, item 4)."""

from __future__ import annotations

import numpy as np
import pytest

import calibrate
from calibrate.contract.base import RunContext
from calibrate.predicted.confidence import ConfidentModel, confident_prediction, curve_target, make_confident
from calibrate.contract.manager import build_registry
from calibrate.predicted.interval import PredictionSettings, build_world
from calibrate.testing.estimators import MONOTONE_RTOL
from calibrate.contract.types import ImpostorDistances

DENSE = np.geomspace(1e-6, 0.5, 200)
REGISTRY = build_registry()


def _lognormal(seed: int, classes: int, n: int) -> ImpostorDistances:
    rng = np.random.default_rng(seed)
    mu, sigma = rng.normal(1.0, 0.2, classes), rng.uniform(0.15, 0.3, classes)
    return ImpostorDistances.from_lists({f"c{i:03d}": np.exp(mu[i] + sigma[i] * rng.standard_normal(n))
                                         for i in range(classes)})


def assert_monotone(values: np.ndarray, targets: np.ndarray, what: str) -> None:
    a, b = values[..., :-1], values[..., 1:]
    fall = b < a - MONOTONE_RTOL * np.maximum(np.abs(a), np.abs(b))
    if fall.any():
        idx = tuple(np.argwhere(fall)[0])
        k = idx[-1]
        raise AssertionError(f"{what}: threshold falls from {a[idx]!r} at {targets[k]:.4g} to {b[idx]!r} at "
                             f"{targets[k + 1]:.4g} (relative {(a[idx] - b[idx]) / abs(a[idx]):.3g})")


def assert_monotone_everywhere(model, classes, what: str) -> np.ndarray:
    table = model.thresholds(DENSE).values
    assert_monotone(table, DENSE, f"{what}, one call")
    for cls in classes:
        one = np.array([model.threshold(cls, e) for e in DENSE])
        assert_monotone(one, DENSE, f"{what}, class {cls!r} one target per call")
        assert one == pytest.approx(table[model.classes.index(cls)], rel=1e-12, abs=0)
    return table


def _crossing_model(start: float, factor: float) -> tuple[ConfidentModel, np.ndarray]:
    """generic-interp on N = 1,200 pooled values (the order-statistic bound starts near 2.5e-3) and a
    hand-made model-based curve lowering every target e >= u0 = ``factor`` ``start`` to e / ``factor``."""
    imp = _lognormal(12, 30, 40)
    inner = REGISTRY.get("estimators", "generic-interp").factory().fit(imp, RunContext())
    grid = np.geomspace(start, 0.5, 120)
    return ConfidentModel(inner, 0.95, grid, factor * grid), grid


#: (start, factor) of the curve: from below the order-statistic bound (only the curve exists at 1e-4 ..
#: 2.5e-3; above, near e0 the bound's rank k is about e N / 3, stricter than e / 2, while far above k / N
#: approaches e: the two cross), or from above it (only the order-statistic bound at 2.5e-3 .. 2e-2, where
#: the curve switches on at e' = 5e-3, far stricter than the rank k = 16 the bound has reached there)
STARTS = {"curve crossing the order-statistic bound": (5e-5, 2.0), "curve starting above it": (5e-3, 4.0)}


@pytest.mark.parametrize("start, factor", STARTS.values(), ids=STARTS.keys())
def test_confident_thresholds_are_monotone_where_the_bounds_switch_and_cross(start, factor):
    model, grid = _crossing_model(start, factor)
    e0 = DENSE[np.argmax([model.rank(e) >= 1 for e in DENSE])]
    assert 1e-3 < e0 < 5e-3  # the order-statistic bound exists for some targets and not for others
    methods = [model.choice(e)[0] for e in DENSE]
    # where the order-statistic bound is met it alone is used (issue 40: the curves cross above e0, and stacking
    # the stricter of two bounds on one that keeps the promise only costs)
    assert set(m for m, e in zip(methods, DENSE) if e >= e0) == {"order-statistic"}
    assert methods[0] == "model-unmet"
    if factor * start < e0:
        assert "model" in [m for m, e in zip(methods, DENSE) if e < e0]
    table = assert_monotone_everywhere(model, model.classes[:2], "generic-interp with a crossing curve")
    # the promise: never looser than the bound used at that target (the order statistic where met, else the curve)
    for j, e in enumerate(DENSE):
        k = model.rank(e)
        if k >= 1:
            assert np.all(table[:, j] == model.inner.order_statistic_thresholds(np.array([float(k)]), model.all_rows())[:, 0])
            continue
        lowered = curve_target(e, grid, model.upper)
        if lowered is not None:
            assert np.all(table[:, j] <= model.inner.thresholds([lowered]).values[:, 0])


@pytest.mark.parametrize("start, factor", STARTS.values(), ids=STARTS.keys())
def test_the_method_recorded_names_the_threshold_used(start, factor):
    model, _ = _crossing_model(start, factor)
    rows = model.all_rows()
    for e in DENSE:
        method, value = model.choice(e)
        tau = model.thresholds([e]).values[:, 0]
        if method == "order-statistic":
            assert tau == pytest.approx(model.inner.order_statistic_thresholds(np.array([value]), rows)[:, 0], rel=0, abs=0)
        elif method == "model":
            assert tau == pytest.approx(model.inner.thresholds([value]).values[:, 0], rel=0, abs=0)
        else:
            assert np.all(tau <= 0.0)


@pytest.mark.parametrize("name, classes, n, seed", [
    ("auto", 20, 30, 4),  # before the fix: 2.7% stricter at 1.09% than at 1.02%
    ("auto", 30, 40, 12),
    ("generic-interp", 60, 100, 1),
])
def test_make_confident_is_monotone_and_its_prediction_follows_the_thresholds(name, classes, n, seed):
    imp = _lognormal(seed, classes, n)
    est = REGISTRY.get("estimators", name).factory()
    targets = np.array([0.02, 0.01, 0.005, 0.0025, 0.001, 0.0005])
    wrapped, pred, plain = make_confident(est.fit(imp, RunContext()), est, imp, targets, 0.95,
                                          settings=PredictionSettings(0.9, 30), seed=[3], context=RunContext(),
                                          world=build_world(imp))
    assert_monotone_everywhere(wrapped, imp.classes[:2], f"{name} c95")
    choices = [wrapped.choice(float(e)) for e in targets]
    assert pred.methods == tuple(m for m, _ in choices)
    assert "order-statistic" in pred.methods
    for j, (method, value) in enumerate(choices):
        if method == "order-statistic":  # simulated at the rank actually used: the replicates' FPR there
            assert plain.ranks[j] == value
            assert pred.replicates[:, j] == pytest.approx(plain.rank_fpr[:, j], rel=0, abs=0)
        elif method == "model-unmet":
            assert np.all(pred.replicates[:, j] == 0.0)
    assert confident_prediction(wrapped, plain).replicates == pytest.approx(pred.replicates, rel=0, abs=0)


@pytest.mark.parametrize("estimator", ["auto", "generic-interp"])
def test_fit_with_confidence_is_monotone_one_call_at_a_time(estimator):
    imp = _lognormal(4, 20, 30)
    cal = calibrate.fit({c: imp.of(i) for i, c in enumerate(imp.classes)}, kind="distance", estimator=estimator,
                        confidence=0.95, replicates=30, targets=(0.02, 0.005, 0.001), impostors_only=True)
    assert cal.label == f"{estimator}-c95"
    assert_monotone_everywhere(cal.model, imp.classes[:2], cal.label)
    cls = imp.classes[0]
    by_call = np.array([cal.distance_threshold(cls, e) for e in DENSE])
    assert_monotone(by_call, DENSE, f"{cal.label} through Calibration.distance_threshold")


def _builtin_estimators() -> list[tuple[str, dict]]:
    from calibrate.contract.manager import OWN_DISTRIBUTION

    names = sorted(info.name for info in REGISTRY.all() if info.kind == "estimators" and info.distribution == OWN_DISTRIBUTION)
    # and the settings that pool order statistics (both bounds) or change how thresholds are computed
    return [(n, {}) for n in names] + [("gpd-tail", {"pooling": "pooled"}), ("znorm", {"pooled_shape": True}),
                                       ("ncx2-grid", {"mode": "fast"})]


@pytest.mark.parametrize("estimator, params", _builtin_estimators())
def test_every_builtin_with_confidence_is_monotone(estimator, params):
    """Every confidence mode: the model-based bound alone (per-class estimators) or both (pooled ones)."""
    imp = _lognormal(5, 12, 40)
    cal = calibrate.fit({c: imp.of(i) for i, c in enumerate(imp.classes)}, kind="distance", estimator=estimator,
                        confidence=0.95, replicates=20, targets=(0.05, 0.01), **params, impostors_only=True)
    assert (cal.model.pool_size is not None) == (estimator in ("auto", "auto-bulk", "anchored", "generic-interp")
                                                 or bool(params.get("pooling"))
                                                 or bool(params.get("pooled_shape")))
    assert_monotone_everywhere(cal.model, imp.classes[:1], f"{cal.label} {params}")
