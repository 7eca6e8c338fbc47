"""Conformance checks for estimators and the fitted models they return."""

from __future__ import annotations

import inspect
import json
from pathlib import Path
from typing import Any

import numpy as np

from calibrate.contract.base import Estimator, FittedModel, RunContext, overrides
from calibrate.errors import DataError, ParameterError
from calibrate.contract.types import GenuineDistances, ImpostorDistances, ThresholdTable
from calibrate.testing.common import ComponentCase, _build, _close, _fmt_bad, _params, _tmpdir
from calibrate.testing.samples import SEED, TARGETS, make_genuine, make_impostors, make_training_groups


def _fit(case: ComponentCase, params, impostors: ImpostorDistances, seed: int = 0) -> FittedModel:
    est = _build(case, params)
    model = est.fit(impostors, RunContext(seed=seed))
    assert isinstance(model, FittedModel), f"{case.id}: fit returned {type(model).__name__}, not a FittedModel"
    return model


def _fitted_on_sample(case: ComponentCase, tmp_path: Path | None) -> tuple[ImpostorDistances, FittedModel]:
    """The kit's sample impostor distances and the case's estimator fitted on them."""
    with _tmpdir(tmp_path) as tmp:
        params = _params(case, tmp)
    imp = make_impostors()
    return imp, _fit(case, params, imp)


def _check_table(case, model: FittedModel, impostors: ImpostorDistances, targets=TARGETS, what="") -> np.ndarray:
    table = model.thresholds(targets, label=case.name)
    assert isinstance(table, ThresholdTable), f"{case.id}: thresholds() returned {type(table).__name__}"
    assert tuple(table.classes) == tuple(impostors.classes), \
        f"{case.id}{what}: the model's classes {table.classes[:3]}... differ from the fitted classes {impostors.classes[:3]}..."
    v = table.values
    assert v.shape == (len(impostors), len(targets)), f"{case.id}{what}: threshold table shape {v.shape}"
    assert np.all(np.isfinite(v)), f"{case.id}{what}: non-finite thresholds at (class, target) {_fmt_bad(~np.isfinite(v))}"
    return v


def _check_monotone(case, v: np.ndarray, targets, what="") -> None:
    order = np.argsort(targets)
    s = v[:, order]
    scale = max(1.0, float(np.abs(v).max()))
    drop = np.diff(s, axis=1) < -1e-9 * scale
    if drop.any():
        i, k = np.argwhere(drop)[0]
        t = np.asarray(targets)[order]
        raise AssertionError(f"{case.id}{what}: threshold decreases from {s[i, k]!r} at target {t[k]} to {s[i, k + 1]!r} at "
                             f"target {t[k + 1]} (class row {i}); thresholds must be non-decreasing in the target FPR")


def check_estimator_fit(case: ComponentCase, tmp_path: Path | None = None) -> None:
    """``fit`` returns a FittedModel of ``model_class`` with finite thresholds for every class and target."""
    model_class = getattr(case.factory, "model_class", None)
    assert inspect.isclass(model_class) and issubclass(model_class, FittedModel), \
        f"{case.id}: set the class attribute model_class to the FittedModel subclass fit() returns"
    imp, model = _fitted_on_sample(case, tmp_path)
    assert isinstance(model, model_class), \
        f"{case.id}: fit returned {type(model).__name__}, but model_class is {model_class.__name__}"
    assert model.classes == imp.classes, f"{case.id}: model.classes {model.classes} != fitted classes {imp.classes}"
    _check_table(case, model, imp)


def check_estimator_monotone(case: ComponentCase, tmp_path: Path | None = None) -> None:
    """Thresholds are non-decreasing in the target FPR, and each column depends only on its target."""
    imp, model = _fitted_on_sample(case, tmp_path)
    v = _check_table(case, model, imp)
    _check_monotone(case, v, TARGETS)
    shuffled = tuple(np.random.default_rng(SEED).permutation(TARGETS).tolist())
    v2 = _check_table(case, model, imp, shuffled)
    for k, t in enumerate(shuffled):
        j = TARGETS.index(t)
        assert _close(v2[:, k], v[:, j], rtol=1e-9, atol=1e-12), \
            f"{case.id}: the threshold at target {t} changes with the other targets asked for in the same call"


#: the dense grid :func:`check_estimator_monotone_dense` asks: 200 log-spaced target FPRs from 1e-6 to 0.5
DENSE_TARGETS = tuple(np.geomspace(1e-6, 0.5, 200).tolist())
#: a threshold may fall by at most this much relative to its size from one target to the next
#: (floating-point rounding); any larger fall fails :func:`check_estimator_monotone_dense`
MONOTONE_RTOL = 1e-12


def _dense_shapes() -> dict[str, ImpostorDistances]:
    """The data shapes of the dense monotonicity check, all from :func:`make_impostors`."""
    sample = make_impostors()
    tied = ImpostorDistances.from_lists({c: np.round(sample.of(i), 1) for i, c in enumerate(sample.classes)})
    return {
        "the kit's sample": sample,
        "few classes with few distances": make_impostors(SEED + 1, sizes=(12, 20)),
        "many classes": make_impostors(SEED + 2, sizes=tuple(25 + (37 * i) % 120 for i in range(40))),
        "ties (every class rounded to 0.1)": tied,
        "a class with very few distances": make_impostors(SEED + 3, sizes=(3, 60, 150)),
    }


def _first_fall(values: np.ndarray, rtol: float = MONOTONE_RTOL) -> int | None:
    """Index k of the first fall values[k] -> values[k + 1] larger than ``rtol`` of the values' size."""
    a, b = values[:-1], values[1:]
    bad = np.flatnonzero(b < a - rtol * np.maximum(np.abs(a), np.abs(b)))
    return int(bad[0]) if bad.size else None


def check_estimator_monotone_dense(case: ComponentCase, tmp_path: Path | None = None) -> None:
    """On several data shapes (the sample, few classes with few distances, many classes, ties, a class with
    very few distances when the estimator accepts it), thresholds at 200 log-spaced targets from 1e-6 to 0.5
    (:data:`DENSE_TARGETS`) are non-decreasing in the target, asked as one array and one target per call
    (``threshold(class, e)``); a fall of at most 1e-12 of the threshold (:data:`MONOTONE_RTOL`) is rounding.
    A looser target never gives a stricter threshold."""
    with _tmpdir(tmp_path) as tmp:
        params = _params(case, tmp)
    targets = np.asarray(DENSE_TARGETS)
    fitted = 0
    for what, imp in _dense_shapes().items():
        try:
            model = _fit(case, params, imp)
            table = model.thresholds(DENSE_TARGETS).values
        except DataError:
            if what == "the kit's sample":
                raise
            continue  # the estimator refuses this shape, saying why
        fitted += 1
        for i in range(len(imp)):
            k = _first_fall(table[i])
            if k is not None:
                raise AssertionError(
                    f"{case.id} ({what}): class {imp.classes[i]!r}'s threshold falls from {table[i, k]!r} at target "
                    f"{targets[k]:.6g} to {table[i, k + 1]!r} at {targets[k + 1]:.6g} (relative fall "
                    f"{(table[i, k] - table[i, k + 1]) / abs(table[i, k]):.3g}); a looser target must never give a "
                    "stricter threshold")
        sizes = imp.offsets[1:] - imp.offsets[:-1]
        for i in sorted({0, len(imp) - 1, int(np.argmin(sizes))}):  # separate calls, as a runtime caller asks
            cls = imp.classes[i]
            one = np.array([model.threshold(cls, e) for e in DENSE_TARGETS])
            k = _first_fall(one)
            if k is not None:
                raise AssertionError(
                    f"{case.id} ({what}): threshold({cls!r}, {targets[k]:.6g}) = {one[k]!r} but threshold({cls!r}, "
                    f"{targets[k + 1]:.6g}) = {one[k + 1]!r}, asked one target per call; a looser target must never "
                    "give a stricter threshold")
    assert fitted, f"{case.id}: no data shape could be fitted"


def check_estimator_threshold_matches_table(case: ComponentCase, tmp_path: Path | None = None) -> None:
    """``model.threshold(class, e)`` equals the matching ``model.thresholds(...)`` entry."""
    imp, model = _fitted_on_sample(case, tmp_path)
    v = _check_table(case, model, imp)
    for i, cls in enumerate(imp.classes):
        for k in (0, 4, len(TARGETS) - 1):
            one = model.threshold(cls, TARGETS[k])
            assert isinstance(one, float), f"{case.id}: threshold() returned {type(one).__name__}, not float"
            assert _close(one, v[i, k], rtol=1e-9, atol=1e-12), \
                f"{case.id}: threshold({cls!r}, {TARGETS[k]}) = {one!r} but thresholds() gives {v[i, k]!r}"


def check_estimator_deterministic(case: ComponentCase, tmp_path: Path | None = None) -> None:
    """Same data and seed -> same thresholds, with fresh instances and when one instance is refitted."""
    with _tmpdir(tmp_path) as tmp:
        params = _params(case, tmp)
    imp = make_impostors()
    a = _fit(case, params, imp).thresholds(TARGETS).values
    b = _fit(case, params, make_impostors()).thresholds(TARGETS).values
    assert _close(a, b, rtol=1e-12), f"{case.id}: two fits with the same data and seed give different thresholds"
    est = _build(case, params)
    first = est.fit(imp, RunContext(seed=0)).thresholds(TARGETS).values
    second = est.fit(imp, RunContext(seed=0)).thresholds(TARGETS).values
    assert _close(first, second, rtol=1e-12) and _close(first, a, rtol=1e-12), \
        f"{case.id}: refitting the same estimator instance changes the thresholds (state left over from a previous fit?)"


def _scramble(obj: Any) -> None:
    """Overwrite, in place, every mutable container reachable from ``obj``."""
    if isinstance(obj, dict):
        for k, v in list(obj.items()):
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                obj[k] = -7.0
            else:
                _scramble(v)
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                obj[i] = -7.0
            else:
                _scramble(v)
    elif isinstance(obj, np.ndarray) and obj.flags.writeable and obj.dtype.kind in "fiu":
        obj[...] = 0


def check_estimator_no_shared_state(case: ComponentCase, tmp_path: Path | None = None) -> None:
    """A fitted model keeps no reference that later changes its results: refitting the estimator on other
    data, or changing the dict ``to_state()`` returned, leaves it alone; the input is not modified."""
    with _tmpdir(tmp_path) as tmp:
        params = _params(case, tmp)
    imp = make_impostors()
    before = imp.values.copy()
    est = _build(case, params)
    model = est.fit(imp, RunContext(seed=0))
    ref = model.thresholds(TARGETS).values.copy()
    assert np.array_equal(imp.values, before) and not imp.values.flags.writeable, f"{case.id}: fit modified its input"
    other = make_impostors(SEED + 1, sizes=(30, 45, 80, 120, 66))
    est.fit(other, RunContext(seed=0))
    assert _close(model.thresholds(TARGETS).values, ref, rtol=1e-12), \
        f"{case.id}: fitting the estimator again on other data changed an earlier model's thresholds; keep fitted state " \
        "in the model, not on the estimator"
    state = model.to_state()
    _scramble(state)
    assert _close(model.thresholds(TARGETS).values, ref, rtol=1e-12), \
        f"{case.id}: changing the dict returned by to_state() changed the model; return copies (e.g. array.tolist())"


def check_estimator_rejects_bad_input(case: ComponentCase, tmp_path: Path | None = None) -> None:
    """NaN, negative, wrongly typed (a dict of lists) or empty inputs are refused with DataError (never a crash
    inside numpy)."""
    with _tmpdir(tmp_path) as tmp:
        params = _params(case, tmp)
    bad = {
        "an array containing NaN": np.array([[0.5, np.nan], [1.0, 2.0]]),
        "an array of negative distances": np.array([[-1.0, 0.5], [1.0, 2.0]]),
        "a dict of lists": {"a": [0.5, np.nan], "b": [1.0]},
        "no classes": ImpostorDistances((), np.empty(0), np.array([0])),
    }
    for what, data in bad.items():
        est = _build(case, params)
        try:
            est.fit(data, RunContext(seed=0))
        except DataError:
            continue
        except Exception as exc:  # noqa: BLE001
            raise AssertionError(f"{case.id}: fit({what}) raised {type(exc).__name__}: {exc}; raise "
                                 "calibrate.errors.DataError") from exc
        raise AssertionError(f"{case.id}: fit({what}) was accepted; it must raise calibrate.errors.DataError")


def check_estimator_degenerate_input(case: ComponentCase, tmp_path: Path | None = None) -> None:
    """Tiny or degenerate classes (one distance, all ties, zeros) give finite monotone thresholds or a DataError."""
    with _tmpdir(tmp_path) as tmp:
        params = _params(case, tmp)
    cases = {
        "a class with a single distance": {"a": [0.7], "b": [0.5, 0.9, 1.3]},
        "classes whose distances are all equal": {"a": [1.0] * 20, "b": [2.0] * 25},
        "classes with zero distances": {"a": [0.0] * 5 + [0.5, 0.8, 1.1], "b": [0.0, 0.2, 0.4, 0.6, 0.9, 1.2]},
    }
    for what, per in cases.items():
        imp = ImpostorDistances.from_lists({k: np.asarray(v, float) for k, v in per.items()})
        try:
            model = _fit(case, params, imp)
        except DataError:
            continue
        except Exception as exc:  # noqa: BLE001
            raise AssertionError(f"{case.id}: fitting {what} raised {type(exc).__name__}: {exc}; either handle it "
                                 "or raise calibrate.errors.DataError saying what the data lack") from exc
        try:
            v = _check_table(case, model, imp, what=f" ({what})")
        except DataError:
            continue
        _check_monotone(case, v, TARGETS, what=f" ({what})")


def check_estimator_genuine(case: ComponentCase, tmp_path: Path | None = None) -> None:
    """``fit(impostors, context, genuine=...)`` (the training genuine comparisons, the optional ``_fit_genuine``),
    also with ``groups=`` (``make_training_groups``: two groups and a class without one): a FittedModel of
    ``model_class`` with finite thresholds, non-decreasing in the target, for every class (also a class without
    genuine comparisons); the same for the same data; the genuine input left unmodified; genuine
    distances of other classes refused with DataError. An estimator without ``_fit_genuine`` fits as without them."""
    with _tmpdir(tmp_path) as tmp:
        params = _params(case, tmp)
    imp = make_impostors()
    genuine = make_genuine(imp)
    before = genuine.values.copy()
    model = _build(case, params).fit(imp, RunContext(seed=0), genuine=genuine)
    model_class = getattr(case.factory, "model_class", FittedModel)
    assert isinstance(model, model_class), \
        f"{case.id}: fit(..., genuine=) returned {type(model).__name__}, not {getattr(model_class, '__name__', model_class)}"
    assert model.classes == imp.classes, f"{case.id}: fit(..., genuine=) gave classes {model.classes[:3]}..."
    v = _check_table(case, model, imp, what=" (fitted with genuine distances)")
    _check_monotone(case, v, TARGETS, what=" (fitted with genuine distances)")
    assert np.array_equal(genuine.values, before), f"{case.id}: fit modified its genuine input"
    again = _build(case, params).fit(make_impostors(), RunContext(seed=0), genuine=make_genuine(make_impostors()))
    assert _close(again.thresholds(TARGETS).values, v, rtol=1e-12), \
        f"{case.id}: two fits with the same impostor and genuine distances give different thresholds"
    if not overrides(_build(case, params), Estimator, "_fit_genuine"):
        plain = _fit(case, params, make_impostors()).thresholds(TARGETS).values
        assert _close(plain, v, rtol=1e-12), \
            f"{case.id}: without _fit_genuine, genuine distances must not change the thresholds"
    groups = make_training_groups(imp)
    grouped = _build(case, params).fit(imp, RunContext(seed=0), genuine=genuine, groups=groups)
    w = _check_table(case, grouped, imp, what=" (fitted with genuine distances and groups)")
    _check_monotone(case, w, TARGETS, what=" (fitted with genuine distances and groups)")
    other = GenuineDistances.from_lists({f"other-{c}": genuine.of(i) for i, c in enumerate(genuine.classes)})
    try:
        _build(case, params).fit(imp, RunContext(seed=0), genuine=other)
    except DataError:
        pass
    except Exception as exc:  # noqa: BLE001
        raise AssertionError(f"{case.id}: genuine distances of other classes raised {type(exc).__name__}: {exc}; "
                             "raise calibrate.errors.DataError") from exc
    else:
        raise AssertionError(f"{case.id}: genuine distances of other classes than the impostors' were accepted; "
                             "they must raise calibrate.errors.DataError")


def check_model_state_round_trip(case: ComponentCase, tmp_path: Path | None = None) -> None:
    """``to_state()`` -> JSON -> ``model_class.from_state()`` rebuilds a model with equal thresholds, which keeps
    no reference to the state it was given. A damaged state (``{}``, a list, each field left out or made a string)
    is refused with what a loader reports as one line naming the file: a CalibrateError (the DataError of the
    ``calibrate.contract.statecheck`` helpers, naming the field), or a KeyError, TypeError, ValueError, IndexError, ...;
    never another exception (an AssertionError, say: it would end a load in a traceback)."""
    imp, model = _fitted_on_sample(case, tmp_path)
    state = model.to_state()
    try:
        text = json.dumps(state)
    except (TypeError, ValueError) as exc:
        raise AssertionError(f"{case.id}: to_state() is not JSON-serialisable ({exc}); use lists, numbers and strings") from exc
    loaded = case.factory.model_class.from_state(json.loads(text))
    assert isinstance(loaded, FittedModel), f"{case.id}: from_state returned {type(loaded).__name__}"
    assert loaded.classes == model.classes, f"{case.id}: from_state lost the classes"
    assert _close(loaded.thresholds(TARGETS).values, model.thresholds(TARGETS).values, rtol=1e-12), \
        f"{case.id}: the model rebuilt by from_state(to_state()) gives different thresholds"
    state2 = json.loads(text)
    again = case.factory.model_class.from_state(state2)
    ref = again.thresholds(TARGETS).values.copy()
    _scramble(state2)
    assert _close(again.thresholds(TARGETS).values, ref, rtol=1e-12), \
        f"{case.id}: changing the state dict after from_state() changed the model; copy what you keep"
    _check_damaged_states(case, text)


def _check_damaged_states(case: ComponentCase, text: str) -> None:
    """``from_state`` on damaged copies of the JSON state ``text``, as a loader calls it (calibrate.saved.reading.rebuilt):
    a model, or a refusal the loader turns into one CalibrationError line; any other exception fails."""
    from calibrate.saved.reading import rebuilt
    from calibrate.errors import CalibrationError

    saved = json.loads(text)
    keys = list(saved) if isinstance(saved, dict) else []
    damaged: dict[str, Any] = {"{}": lambda state: {}, "a list instead of the mapping": lambda state: []}
    for key in keys:
        damaged[f"the state without {key!r}"] = lambda state, key=key: {k: v for k, v in state.items() if k != key}
        damaged[f"the state with {key!r} a string"] = lambda state, key=key: {**state, key: "damaged"}
    for what, damage in damaged.items():
        state = damage(json.loads(text))
        try:
            rebuilt(Path("calibration.json"), "the model", lambda: case.factory.model_class.from_state(state))
        except CalibrationError:
            continue
        except Exception as exc:  # noqa: BLE001 - what a loader would let through
            raise AssertionError(
                f"{case.id}: from_state({what}) raised {type(exc).__name__}: {str(exc)[:200]}; loading a damaged "
                "calibration file would end in a traceback. Check each field with calibrate.contract.statecheck (field, "
                "number, numbers, ...), whose DataError names it") from exc


#: the targets of saved calibrations ``check_model_compact`` asks ``compact`` for: their reaches (10 times the largest
#: target, at least 1%: calibrate.statistics.order.saved_reach) are 0.01, 0.05 and 0.2
_SAVED_TARGETS = ((0.0005,), (0.005, 0.001), (0.02,))
#: ... and where their thresholds are compared: the kit's targets and a dense grid up to 0.5
_REACH_GRID = np.unique(np.r_[TARGETS, np.geomspace(1e-5, 0.5, 41)])


def check_model_compact(case: ComponentCase, tmp_path: Path | None = None) -> None:
    """A model as a saved calibration keeps it (``compact(reach)``, for the reach
    :func:`calibrate.statistics.order.saved_reach` gives its targets: 0.01, 0.05 and 0.2 here; calibrate.predicted.confidence.saved_entries)
    and loads it (``to_state`` -> JSON -> ``model_class.from_state``) gives the fitted model's thresholds at every
    target up to the reach the file states (rtol 1e-12; the reach, or 1 where ``compact`` returned the model itself:
    saved whole), and beyond it the same thresholds or a ParameterError; the model itself is left as it was. A
    model that overrides ``compact`` is fitted for this on 40 classes of 300 distances (12,000)."""
    from calibrate.predicted.confidence import saved_entries
    from calibrate.saved.grouped import model_from_state
    from calibrate.statistics.order import saved_reach

    with _tmpdir(tmp_path) as tmp:
        params = _params(case, tmp)
    compacts = overrides(case.factory.model_class, FittedModel, "compact")
    imp = make_impostors(sizes=(300,) * 40) if compacts else make_impostors()
    model = _fit(case, params, imp)
    before = model.thresholds(TARGETS).values.copy()
    for targets in _SAVED_TARGETS:
        reach = saved_reach(targets)
        state, extra = saved_entries(model, None, reach)
        stated = extra["reach"]
        assert stated in (reach, 1.0), f"{case.id}: a calibration saved at reach {reach} states reach {stated}"
        loaded = model_from_state(case.factory.model_class, json.loads(json.dumps(state)))
        assert isinstance(loaded, FittedModel), f"{case.id}: from_state returned {type(loaded).__name__}"
        assert loaded.classes == model.classes, f"{case.id}: compact({reach}) lost the classes"
        for t in sorted({*_REACH_GRID.tolist(), reach}):
            want = model.thresholds([t]).values
            try:
                got = loaded.thresholds([t]).values
            except ParameterError:
                assert t > stated, (f"{case.id}: the model saved with compact({reach}) refuses target {t}, within the "
                                    f"reach {stated} its file states")
                continue
            assert _close(got, want, rtol=1e-12), \
                f"{case.id}: the model saved with compact({reach}) gives other thresholds at target {t} than the fitted one"
    assert _close(model.thresholds(TARGETS).values, before, rtol=0), f"{case.id}: compact changed the fitted model"


def check_model_rejects_bad_targets(case: ComponentCase, tmp_path: Path | None = None) -> None:
    """Target FPRs outside (0, 1) raise ParameterError; an unknown class raises KeyError."""
    imp, model = _fitted_on_sample(case, tmp_path)
    for bad in (0.0, 1.0, -0.01, 1.5, float("nan")):
        try:
            model.thresholds([0.01, bad])
        except ParameterError:
            pass
        else:
            raise AssertionError(f"{case.id}: thresholds() accepted target FPR {bad!r}; it must raise ParameterError")
        try:
            model.threshold(imp.classes[0], bad)
        except ParameterError:
            pass
        else:
            raise AssertionError(f"{case.id}: threshold() accepted target FPR {bad!r}; it must raise ParameterError")
    try:
        model.threshold("no-such-class", 0.01)
    except KeyError:
        pass
    else:
        raise AssertionError(f"{case.id}: threshold() of an unknown class must raise KeyError")


def check_model_parameters(case: ComponentCase, tmp_path: Path | None = None) -> None:
    """``model.parameters()`` (models.csv rows) is a list of dicts, each naming a fitted class."""
    imp, model = _fitted_on_sample(case, tmp_path)
    rows = model.parameters()
    assert isinstance(rows, list), f"{case.id}: parameters() returned {type(rows).__name__}, not a list"
    for row in rows:
        assert isinstance(row, dict), f"{case.id}: parameters() rows must be dicts, got {row!r}"
        assert row.get("class") in imp.classes, f"{case.id}: parameters() row {row!r} has no 'class' of the model"
        json.dumps(row, default=str)


CHECKS = (check_estimator_fit, check_estimator_monotone, check_estimator_monotone_dense,
          check_estimator_threshold_matches_table,
          check_estimator_deterministic, check_estimator_no_shared_state, check_estimator_rejects_bad_input,
          check_estimator_degenerate_input, check_estimator_genuine, check_model_state_round_trip, check_model_compact,
          check_model_rejects_bad_targets, check_model_parameters)
