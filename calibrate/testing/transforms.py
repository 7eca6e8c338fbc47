"""Conformance checks for transforms (raw scores to distances)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from calibrate.contract.base import Transform
from calibrate.errors import DataError
from calibrate.contract.types import DistanceMatrix
from calibrate.testing.common import ComponentCase, _build, _close, _params, _tmpdir
from calibrate.testing.samples import SEED, make_score_matrix


def _domain(case: ComponentCase) -> tuple[float, float]:
    low, high = case.options.get("domain", (0.0, 1.0))
    return float(low), float(high)


def _accepted_kinds(case: ComponentCase, params) -> dict[str, Transform]:
    """kind -> a transform fitted on generated training scores of that kind (kinds it refuses left out)."""
    out = {}
    for kind in ("distance", "similarity"):
        train = make_score_matrix(kind=kind, domain=_domain(case))
        t = _build(case, params)
        try:
            fitted = t.fit(train)
            fitted.apply(train)
        except DataError:
            continue
        except Exception as exc:  # noqa: BLE001
            raise AssertionError(f"{case.id}: fit/apply on {kind} scores raised {type(exc).__name__}: {exc}; a kind "
                                 "the transform does not handle must be refused with DataError") from exc
        assert fitted is t, f"{case.id}: fit() must return self"
        out[kind] = t
    assert out, f"{case.id}: refuses both distance and similarity scores in {_domain(case)}; set options={{'domain': ...}}"
    return out


def check_transform_output(case: ComponentCase, tmp_path: Path | None = None) -> None:
    """Accepts distances or similarities (refusing the other with DataError); output: a DistanceMatrix of kind
    distance in [0, inf), with the validity mask kept."""
    with _tmpdir(tmp_path) as tmp:
        params = _params(case, tmp)
    for kind, t in _accepted_kinds(case, params).items():
        for seed in (SEED, SEED + 1):
            m = make_score_matrix(seed, kind=kind, domain=_domain(case))
            out = t.apply(m)
            assert isinstance(out, DistanceMatrix) and out.kind == "distance", \
                f"{case.id}: apply() must return a DistanceMatrix of kind 'distance'"
            v = out.values[out.valid]
            assert np.all(np.isfinite(v)) and np.all(v >= 0), \
                f"{case.id}: on {kind} scores the output has values outside [0, inf) (min {v.min()!r})"
            assert np.array_equal(out.valid, m.valid), f"{case.id}: apply() changed which entries are valid"


def check_transform_monotone(case: ComponentCase, tmp_path: Path | None = None) -> None:
    """Output is non-decreasing in dissimilarity: increasing in distances, decreasing in similarities."""
    with _tmpdir(tmp_path) as tmp:
        params = _params(case, tmp)
    low, high = _domain(case)
    grid = np.linspace(low, high, 403)[1:-1]
    for kind, t in _accepted_kinds(case, params).items():
        m = DistanceMatrix(grid[:, None], np.full(grid.size, "p"), np.array(["g"]), kind=kind, source="grid")
        out = t.apply(m).values[:, 0]
        steps = np.diff(out) if kind == "distance" else -np.diff(out)
        tol = 1e-9 * max(1.0, float(np.abs(out).max()))
        bad = steps < -tol
        if bad.any():
            k = int(np.argmax(bad))
            raise AssertionError(f"{case.id}: on {kind} scores {grid[k]!r} -> {out[k]!r} but {grid[k + 1]!r} -> {out[k + 1]!r}; "
                                 "the transform must preserve the order of dissimilarity")


def check_transform_ignores_invalid_entries(case: ComponentCase, tmp_path: Path | None = None) -> None:
    """Entries marked invalid (failed comparisons, e.g. -1 or NaN) are neither used nor refused."""
    with _tmpdir(tmp_path) as tmp:
        params = _params(case, tmp)
    for kind in _accepted_kinds(case, params):
        clean = make_score_matrix(kind=kind, domain=_domain(case))
        values = np.array(clean.values)
        values[~clean.valid] = np.where(np.arange((~clean.valid).sum()) % 2, -1.0, np.nan)
        dirty = clean.with_values(values)
        a = _build(case, params).fit(clean).apply(clean)
        try:
            b = _build(case, params).fit(dirty).apply(dirty)
        except Exception as exc:  # noqa: BLE001
            raise AssertionError(f"{case.id}: invalid entries holding -1/NaN made the transform fail "
                                 f"({type(exc).__name__}: {exc}); only entries with valid=True may be used") from exc
        assert _close(a.values[a.valid], b.values[b.valid], rtol=1e-12), \
            f"{case.id}: values of invalid entries changed the output of valid ones"


def check_transform_pure(case: ComponentCase, tmp_path: Path | None = None) -> None:
    """``fit`` returns self; ``apply`` has no side effects (applying to evaluation data does not refit); two fits
    on the same data agree."""
    with _tmpdir(tmp_path) as tmp:
        params = _params(case, tmp)
    for kind, t in _accepted_kinds(case, params).items():
        train = make_score_matrix(kind=kind, domain=_domain(case))
        test = make_score_matrix(SEED + 5, kind=kind, domain=_domain(case))
        before = t.apply(train).values.copy()
        t.apply(test)
        assert _close(t.apply(train).values, before, rtol=1e-12), \
            f"{case.id}: applying to other data changed the result on the training data; learn only in fit()"
        fresh = _build(case, params).fit(train).apply(train).values
        assert _close(fresh, before, rtol=1e-12), f"{case.id}: two fits on the same data give different outputs"


def check_transform_state_round_trip(case: ComponentCase, tmp_path: Path | None = None) -> None:
    """What ``_fit`` learned survives a saved calibration: ``fitted_state()`` is JSON, and a fresh
    transform given it by ``set_fitted_state`` (never fitted) maps scores, and thresholds back to scores,
    exactly as the fitted one (rtol 1e-12). A transform that learns in ``_fit`` without a
    ``fitted_state`` fails here, not when a user loads its calibration.json."""
    import json

    with _tmpdir(tmp_path) as tmp:
        params = _params(case, tmp)
    for kind, fitted in _accepted_kinds(case, params).items():
        state = fitted.fitted_state()
        try:
            saved = json.loads(json.dumps(state, allow_nan=False))
        except (TypeError, ValueError) as exc:
            raise AssertionError(f"{case.id}: fitted_state() {state!r} is not JSON ({exc}); return plain numbers, "
                                 "strings, lists and dicts") from exc
        restored = _build(case, params).set_fitted_state(saved)
        assert isinstance(restored, Transform), f"{case.id}: set_fitted_state() must return the transform (self)"
        test = make_score_matrix(SEED + 7, kind=kind, domain=_domain(case))
        want = fitted.apply(test)
        try:
            got = restored.apply(test)
        except Exception as exc:  # noqa: BLE001
            raise AssertionError(f"{case.id}: a transform restored from fitted_state() {saved!r} fails to apply "
                                 f"({type(exc).__name__}: {exc}); fitted_state must return all that _fit learned") from exc
        assert _close(got.values[got.valid], want.values[want.valid], rtol=1e-12), \
            (f"{case.id}: a transform restored from fitted_state() {saved!r} maps {kind} scores otherwise than the "
             "fitted one; fitted_state must return all that _fit learned (and set_fitted_state restore it)")
        tau = np.quantile(want.values[want.valid], [0.01, 0.1, 0.5])
        a, b = fitted.score_thresholds(tau, kind), restored.score_thresholds(tau, kind)
        assert (a is None) == (b is None) and (a is None or _close(a, b, rtol=1e-12)), \
            f"{case.id}: thresholds back in score units differ after fitted_state/set_fitted_state"


CHECKS = (check_transform_output, check_transform_monotone, check_transform_ignores_invalid_entries,
          check_transform_pure, check_transform_state_round_trip)
