"""Conformance checks for plugin components, one list per kind.

Every check is a plain function ``check_xxx(case, tmp_path=None)`` that raises
:class:`AssertionError` (or the component's own exception) when the component breaks the
contract documented in ``docs/plugins.md``, and :class:`CheckSkipped` when it cannot run
(e.g. a dataset without a ``make_params`` factory). Data are generated with fixed seeds, so a
failure is reproducible.
"""

from __future__ import annotations

import inspect
import json
import math
import tempfile
from collections.abc import Callable, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, get_args

import numpy as np
import yaml

from ..base import BASES, KINDS, EvaluationInput, FittedModel, Fold, RunContext, ScoreSplit, Transform
from ..errors import DataError, ParameterError
from ..params import coerce, param_specs
from ..types import (DistanceMatrix, EvaluationResult, ImpostorDistances, PatternSet, SetCollection, TargetResult,
                     ThresholdTable)

SEED = 20140929  # fixed: every generated input is reproducible
#: target FPRs the estimator checks ask for: both sides of 1/N for the generated class sizes
TARGETS = (1e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5)
#: names the pipeline itself writes; evaluators must not overwrite them
RESERVED_FILES = ("thresholds.csv", "results.json", "report.md", "calibration.json", "models.csv")

_ALIASES = {"dataset": "datasets", "distance": "distances", "transform": "transforms",
            "estimator": "estimators", "evaluator": "evaluators", "executor": "executors"}


class CheckSkipped(Exception):
    """Raised by a check that cannot run for this component (the message says why)."""


def normalise_kind(kind: str) -> str:
    kind = _ALIASES.get(str(kind), str(kind))
    if kind not in KINDS:
        raise ValueError(f"unknown component kind {kind!r}; use one of {', '.join(KINDS)} (or the singular)")
    return kind


@dataclass(frozen=True)
class ComponentCase:
    """One component to check.

    :param kind: ``estimator``/``estimators``, ``distance``, ``transform``, ``dataset``, ``evaluator`` or ``executor``.
    :param factory: the component class (as registered).
    :param params: keyword parameters to construct it with (default: none, i.e. all defaults).
    :param name: the registered name (for test ids and messages).
    :param make_params: ``make_params(tmp_path) -> dict``: writes a small sample input under
        ``tmp_path`` and returns the parameters that load it (datasets need it; merged over ``params``).
    :param skip: ``{check_name: reason}`` for checks that do not apply, e.g.
        ``{"check_distance_self_zero": "d(A, A) is not 0 for this measure"}``.
    :param options: data options: ``samples_per_set``/``n_features`` (distances),
        ``domain=(low, high)`` of raw scores (transforms; default ``(0, 1)``).
    """

    kind: str
    factory: type
    params: Mapping[str, Any] = field(default_factory=dict)
    name: str | None = None
    make_params: Callable[[Path], Mapping[str, Any]] | None = None
    skip: Mapping[str, str] = field(default_factory=dict)
    options: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        object.__setattr__(self, "kind", normalise_kind(self.kind))
        if not inspect.isclass(self.factory):
            raise TypeError(f"factory must be a class, got {self.factory!r}")
        object.__setattr__(self, "params", dict(self.params or {}))
        object.__setattr__(self, "skip", dict(self.skip or {}))
        object.__setattr__(self, "options", dict(self.options or {}))
        if self.name is None:
            object.__setattr__(self, "name", self.factory.__name__)

    @property
    def id(self) -> str:
        args = ",".join(f"{k}={v!r}" for k, v in self.params.items())
        return f"{self.kind[:-1]}:{self.name}" + (f"({args})" if args else "")

    def __repr__(self) -> str:
        return f"ComponentCase({self.id})"


# --------------------------------------------------------------------------------------------
# generated inputs (public: plugin authors may use them in their own tests)
# --------------------------------------------------------------------------------------------

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


# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------

@contextmanager
def _tmpdir(tmp_path: Path | None):
    if tmp_path is not None:
        Path(tmp_path).mkdir(parents=True, exist_ok=True)
        yield Path(tmp_path)
        return
    with tempfile.TemporaryDirectory(prefix="calibrate-check-") as d:
        yield Path(d)


def _params(case: ComponentCase, tmp: Path) -> dict[str, Any]:
    params = dict(case.params)
    if case.make_params is not None:
        made = case.make_params(tmp)
        if not isinstance(made, Mapping):
            raise AssertionError(f"{case.id}: make_params(tmp_path) must return a mapping of parameters, got {made!r}")
        params.update(made)
    elif case.kind == "datasets":
        raise CheckSkipped(f"{case.id}: dataset checks need a sample input; pass make_params=lambda tmp_path: "
                           "{...} that writes one under tmp_path and returns the parameters that load it")
    required = [p.name for p in param_specs(case.factory) if p.required and p.name not in params]
    if required:
        raise AssertionError(f"{case.id}: required parameter(s) {', '.join(required)} not given; pass them in params")
    return params


def _build(case: ComponentCase, params: Mapping[str, Any]):
    obj = case.factory(**params)
    base = BASES[case.kind]
    assert isinstance(obj, base), f"{case.id}: {type(obj).__name__} is not a calibrate.base.{base.__name__}"
    return obj


def _close(a, b, rtol: float = 1e-9, atol: float = 0.0) -> bool:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return a.shape == b.shape and bool(np.allclose(a, b, rtol=rtol, atol=atol, equal_nan=True))


def _fmt_bad(values: np.ndarray) -> str:
    idx = np.argwhere(values)[:3].tolist()
    return ", ".join(map(str, idx))


def _same_value(a: Any, b: Any) -> bool:
    if isinstance(a, Path) or isinstance(b, Path):
        try:
            return Path(a).resolve() == Path(b).resolve()
        except TypeError:
            return False
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same_value(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same_value(a[k], b[k]) for k in a)
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.array_equal(np.asarray(a), np.asarray(b))
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    return bool(a == b)


def _to_recipe_value(value: Any, where: str) -> Any:
    """What a user writes in a recipe for a parameter value (YAML: no tuples, no Path objects)."""
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, (list, tuple)):
        return [_to_recipe_value(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, dict):
        return {str(k): _to_recipe_value(v, f"{where}.{k}") for k, v in value.items()}
    if isinstance(value, np.generic):
        return value.item()
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise AssertionError(f"{where}: get_params() holds {value!r} ({type(value).__name__}), which a YAML recipe cannot "
                         "express; parameters must be numbers, strings, booleans, paths, lists or mappings")


# --------------------------------------------------------------------------------------------
# checks for every kind
# --------------------------------------------------------------------------------------------

def check_signature(case: ComponentCase, tmp_path: Path | None = None) -> None:
    """``__init__`` lists keyword-only, annotated parameters (no ``*args``/``**kwargs``); a component
    without parameters may have no ``__init__`` of its own."""
    if case.factory.__init__ is object.__init__:
        return
    sig = inspect.signature(case.factory.__init__)
    for name, p in sig.parameters.items():
        if name == "self":
            continue
        assert p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD), \
            f"{case.id}: __init__ takes {p}; list every parameter explicitly so recipes can be validated"
        assert p.kind == p.KEYWORD_ONLY, \
            f"{case.id}: parameter {name!r} can be passed by position; make it keyword-only (def __init__(self, *, {name}...))"
        assert p.annotation is not p.empty, \
            f"{case.id}: parameter {name!r} has no type annotation; the recipe loader checks values against it"
    param_specs(case.factory)  # resolves the annotations


def check_init_stores_params(case: ComponentCase, tmp_path: Path | None = None) -> None:
    """Parameters are stored unchanged under their own names; ``repr`` works."""
    with _tmpdir(tmp_path) as tmp:
        params = _params(case, tmp)
        obj = _build(case, params)
        got = obj.get_params()
        names = [p.name for p in param_specs(case.factory)]
        assert list(got) == names, f"{case.id}: get_params() keys {list(got)} differ from the __init__ parameters {names}"
        for key, value in params.items():
            assert _same_value(got[key], value), \
                f"{case.id}: parameter {key!r} was given {value!r} but is stored as {got[key]!r}; store parameters " \
                f"unchanged (self.{key} = {key}) and keep derived values in private attributes"
        text = repr(obj)
        assert isinstance(text, str) and type(obj).__name__ in text, f"{case.id}: repr() gave {text!r}"


def check_unknown_keyword_rejected(case: ComponentCase, tmp_path: Path | None = None) -> None:
    """An unknown keyword argument raises TypeError (no ``**kwargs`` swallowing typos)."""
    with _tmpdir(tmp_path) as tmp:
        params = _params(case, tmp)
        try:
            case.factory(**params, surely_not_a_parameter_name=1)
        except TypeError:
            return
        raise AssertionError(f"{case.id}: constructing with an unknown keyword did not raise TypeError")


def check_params_yaml_round_trip(case: ComponentCase, tmp_path: Path | None = None) -> None:
    """``yaml.safe_dump(get_params())``, read back as a recipe would, builds an equal component."""
    with _tmpdir(tmp_path) as tmp:
        params = _params(case, tmp)
        obj = _build(case, params)
        got = obj.get_params()
        text = yaml.safe_dump(_to_recipe_value(got, case.id), sort_keys=False)
        loaded = yaml.safe_load(text) or {}
        specs = {p.name: p for p in param_specs(case.factory)}
        again = {k: coerce(v, specs[k].annotation, f"{case.id}.{k}", tmp) for k, v in loaded.items()}
        obj2 = _build(case, again)
        got2 = obj2.get_params()
        for key in got:
            assert _same_value(got[key], got2[key]), \
                f"{case.id}: parameter {key!r} is {got[key]!r}, but after a YAML round trip it is {got2[key]!r}\n{text}"


GENERIC_CHECKS = (check_signature, check_init_stores_params, check_unknown_keyword_rejected, check_params_yaml_round_trip)


# --------------------------------------------------------------------------------------------
# estimators
# --------------------------------------------------------------------------------------------

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
    """NaN, negative or empty inputs are refused with DataError (never a crash inside numpy)."""
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


def check_model_state_round_trip(case: ComponentCase, tmp_path: Path | None = None) -> None:
    """``to_state()`` -> JSON -> ``model_class.from_state()`` rebuilds a model with equal thresholds."""
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


ESTIMATOR_CHECKS = (check_estimator_fit, check_estimator_monotone, check_estimator_threshold_matches_table,
                    check_estimator_deterministic, check_estimator_no_shared_state, check_estimator_rejects_bad_input,
                    check_estimator_degenerate_input, check_model_state_round_trip, check_model_rejects_bad_targets,
                    check_model_parameters)


# --------------------------------------------------------------------------------------------
# distances
# --------------------------------------------------------------------------------------------

def _sets(case: ComponentCase, seed: int = SEED, n_classes: int = 4, sets_per_class: int = 2) -> SetCollection:
    return make_sets(seed, n_classes, sets_per_class, int(case.options.get("samples_per_set", 8)),
                     int(case.options.get("n_features", 10)))


def _subset(sets: SetCollection, idx) -> SetCollection:
    idx = list(idx)
    return SetCollection(tuple(sets.samples[i] for i in idx), sets.classes[idx], sets.ids[idx])


def _pairwise(case, params, probes, gallery) -> np.ndarray:
    dist = _build(case, params)
    out = dist.pairwise(probes, gallery, RunContext(seed=0))
    assert isinstance(out, np.ndarray) and out.shape == (len(probes), len(gallery)), \
        f"{case.id}: pairwise returned shape {getattr(out, 'shape', None)}, expected {(len(probes), len(gallery))}"
    return out


def _dtol(d: np.ndarray) -> float:
    return 1e-7 * max(1.0, float(np.abs(d).max()))


def check_distance_output(case: ComponentCase, tmp_path: Path | None = None) -> None:
    """``pairwise(probes, gallery)`` has shape (probes, gallery) and finite, non-negative entries."""
    with _tmpdir(tmp_path) as tmp:
        params = _params(case, tmp)
    probes, gallery = _sets(case), _sets(case, SEED + 1, n_classes=3, sets_per_class=1)
    d = _pairwise(case, params, probes, gallery)
    assert np.all(np.isfinite(d)), f"{case.id}: non-finite distances at {_fmt_bad(~np.isfinite(d))}"
    assert np.all(d >= 0), f"{case.id}: negative distances at {_fmt_bad(d < 0)} (min {d.min()!r}); clip rounding errors at 0"


def check_distance_symmetric(case: ComponentCase, tmp_path: Path | None = None) -> None:
    """Comparing a collection with itself gives a symmetric matrix."""
    with _tmpdir(tmp_path) as tmp:
        params = _params(case, tmp)
    sets = _sets(case)
    d = _pairwise(case, params, sets, sets)
    assert _close(d, d.T, rtol=1e-7, atol=_dtol(d)), \
        f"{case.id}: pairwise(A, A) is not symmetric (max |d - d.T| = {np.abs(d - d.T).max():.3g})"


def check_distance_self_zero(case: ComponentCase, tmp_path: Path | None = None) -> None:
    """d(A, A) is about 0 (opt out with skip={'check_distance_self_zero': reason})."""
    with _tmpdir(tmp_path) as tmp:
        params = _params(case, tmp)
    sets = _sets(case)
    d = _pairwise(case, params, sets, sets)
    diag = np.diag(d)
    assert np.all(np.abs(diag) <= 1e-6 * max(1.0, float(d.max()))), \
        f"{case.id}: d(A, A) is not ~0 (largest {np.abs(diag).max():.3g}); if that is by design, skip this check"


def check_distance_order_independent(case: ComponentCase, tmp_path: Path | None = None) -> None:
    """Each entry depends only on its two sets: permuting or sub-selecting the gallery moves columns only."""
    with _tmpdir(tmp_path) as tmp:
        params = _params(case, tmp)
    probes, gallery = _sets(case), _sets(case, SEED + 2)
    d = _pairwise(case, params, probes, gallery)
    perm = np.random.default_rng(SEED).permutation(len(gallery))
    dp = _pairwise(case, params, probes, _subset(gallery, perm))
    assert _close(dp, d[:, perm], rtol=1e-7, atol=_dtol(d)), f"{case.id}: permuting the gallery changed the distances"
    sub = [1, len(gallery) - 1]
    ds = _pairwise(case, params, _subset(probes, [0, 2]), _subset(gallery, sub))
    assert _close(ds, d[np.ix_([0, 2], sub)], rtol=1e-7, atol=_dtol(d)), \
        f"{case.id}: distances between two sets change with the other sets in the collections"


def check_distance_no_mutation(case: ComponentCase, tmp_path: Path | None = None) -> None:
    """``pairwise`` leaves its input arrays unchanged and gives the same result twice."""
    with _tmpdir(tmp_path) as tmp:
        params = _params(case, tmp)
    probes, gallery = _sets(case), _sets(case, SEED + 1)
    copies = [s.copy() for s in probes.samples + gallery.samples]
    dist = _build(case, params)
    a = dist.pairwise(probes, gallery, RunContext(seed=0))
    for orig, now in zip(copies, probes.samples + gallery.samples):
        assert np.array_equal(orig, now), f"{case.id}: pairwise modified its input arrays"
    b = dist.pairwise(probes, gallery, RunContext(seed=0))
    c = _pairwise(case, params, probes, gallery)
    assert _close(a, b, rtol=1e-12) and _close(a, c, rtol=1e-12), \
        f"{case.id}: pairwise gives different results on the same input (hidden state or unseeded randomness)"


def check_distance_rejects_bad_input(case: ComponentCase, tmp_path: Path | None = None) -> None:
    """A set containing NaN, and an empty collection, are refused with DataError."""
    with _tmpdir(tmp_path) as tmp:
        params = _params(case, tmp)
    probes, gallery = _sets(case), _sets(case, SEED + 1)
    samples = [s.copy() for s in probes.samples]
    samples[1][0, 0] = np.nan
    nan_probes = SetCollection(tuple(samples), probes.classes, probes.ids)
    empty = SetCollection((), np.array([], dtype=str), np.array([], dtype=str))
    for what, (p, g) in {"a probe set containing NaN": (nan_probes, gallery),
                         "a gallery set containing NaN": (gallery, nan_probes),
                         "an empty probe collection": (empty, gallery)}.items():
        try:
            _build(case, params).pairwise(p, g, RunContext(seed=0))
        except DataError:
            continue
        except Exception as exc:  # noqa: BLE001
            raise AssertionError(f"{case.id}: {what} raised {type(exc).__name__}: {exc}; raise DataError") from exc
        raise AssertionError(f"{case.id}: {what} was accepted; it must raise calibrate.errors.DataError")


DISTANCE_CHECKS = (check_distance_output, check_distance_symmetric, check_distance_self_zero,
                   check_distance_order_independent, check_distance_no_mutation, check_distance_rejects_bad_input)


# --------------------------------------------------------------------------------------------
# transforms
# --------------------------------------------------------------------------------------------

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
    """Accepts distances or similarities (refusing the other with DataError); output: distances in [0, inf)."""
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
    """``apply`` has no side effects (applying to evaluation data does not refit) and is deterministic."""
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


TRANSFORM_CHECKS = (check_transform_output, check_transform_monotone, check_transform_ignores_invalid_entries,
                    check_transform_pure)


# --------------------------------------------------------------------------------------------
# datasets
# --------------------------------------------------------------------------------------------

def _load(case: ComponentCase, params):
    data = _build(case, params).load(RunContext(seed=0))
    assert isinstance(data, (PatternSet, ScoreSplit)), \
        f"{case.id}: load() returned {type(data).__name__}; return a PatternSet or a ScoreSplit"
    return data


def check_dataset_load(case: ComponentCase, tmp_path: Path | None = None) -> None:
    """The sample input loads into a PatternSet (>= 2 classes) or a consistent ScoreSplit."""
    with _tmpdir(tmp_path) as tmp:
        data = _load(case, _params(case, tmp))
    if isinstance(data, PatternSet):
        assert len(data.classes) >= 2, f"{case.id}: the sample input gave {len(data.classes)} class(es)"
        return
    assert isinstance(data.train, DistanceMatrix) and isinstance(data.test, DistanceMatrix)
    assert np.array_equal(data.train.gallery_classes, data.test.gallery_classes), \
        f"{case.id}: training and evaluation matrices enroll different classes"
    assert isinstance(data.missing, int) and data.missing >= 0, f"{case.id}: ScoreSplit.missing must be a count"
    assert data.train.impostor_mask().any(), f"{case.id}: no training impostor comparisons"
    assert data.test.impostor_mask().any(), f"{case.id}: no evaluation impostor comparisons"


def _arrays(data) -> list[np.ndarray]:
    if isinstance(data, PatternSet):
        return [data.X, data.labels, data.sets]
    return [m for d in (data.train, data.test) for m in (d.values, d.valid, d.probe_classes, d.gallery_classes)]


def check_dataset_deterministic(case: ComponentCase, tmp_path: Path | None = None) -> None:
    """Loading twice gives the same data."""
    with _tmpdir(tmp_path) as tmp:
        params = _params(case, tmp)
        a, b = _load(case, params), _load(case, params)
    assert type(a) is type(b)
    for x, y in zip(_arrays(a), _arrays(b)):
        assert np.array_equal(x, y), f"{case.id}: loading the same input twice gives different data"


def _path_params(case: ComponentCase, params) -> list[str]:
    out = []
    for p in param_specs(case.factory):
        tp = p.annotation
        if (tp is Path or Path in get_args(tp)) and params.get(p.name) is not None:
            out.append(p.name)
    return out


def check_dataset_bad_files(case: ComponentCase, tmp_path: Path | None = None) -> None:
    """A path parameter pointing at a missing file, or at a file of junk, gives DataError (or ParameterError)."""
    with _tmpdir(tmp_path) as tmp:
        params = _params(case, tmp)
        names = _path_params(case, params)
        if not names:
            raise CheckSkipped(f"{case.id}: no path parameters")
        junk_text = tmp / "junk.txt"
        junk_text.write_text("this is not a data file\n", encoding="utf-8")
        junk_bin = tmp / "junk.bin"
        junk_bin.write_bytes(bytes(range(256)) * 4)
        for name in names:
            for what, path in (("a missing file", tmp / "does-not-exist.dat"), ("a text file of junk", junk_text),
                               ("a binary file of junk", junk_bin)):
                try:
                    _build(case, {**params, name: path}).load(RunContext(seed=0))
                except (DataError, ParameterError):
                    continue
                except Exception as exc:  # noqa: BLE001
                    raise AssertionError(f"{case.id}: {name}= {what} raised {type(exc).__name__}: {exc}; "
                                         "raise calibrate.errors.DataError naming the file and the fix") from exc
                raise AssertionError(f"{case.id}: {name}= {what} loaded without error")


DATASET_CHECKS = (check_dataset_load, check_dataset_deterministic, check_dataset_bad_files)


# --------------------------------------------------------------------------------------------
# evaluators
# --------------------------------------------------------------------------------------------

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


def _brute_counts(data: EvaluationInput, label: str, k: int) -> tuple[int, int]:
    fa = attempts = 0
    for fold in data.folds:
        table, test = fold.tables[label], fold.test
        for j, cls in enumerate(test.gallery_classes):
            tau = table.values[table.classes.index(cls), k]
            for i in range(test.shape[0]):
                if test.valid[i, j] and test.probe_classes[i] != cls:
                    attempts += 1
                    fa += bool(test.values[i, j] <= tau)
    return fa, attempts


def _evaluate(case, params, data) -> EvaluationResult:
    res = _build(case, params).evaluate(data, RunContext(seed=0))
    assert isinstance(res, EvaluationResult), f"{case.id}: evaluate() returned {type(res).__name__}, not EvaluationResult"
    return res


def check_evaluator_results(case: ComponentCase, tmp_path: Path | None = None) -> None:
    """Results (if any) cover every estimator and target, in order, with ratio = fpr / target and the
    false accepts (distance <= threshold) and impostor attempts of the evaluation data, summed over folds."""
    with _tmpdir(tmp_path) as tmp:
        params = _params(case, tmp)
    data = make_evaluation_input()
    res = _evaluate(case, params, data)
    if not res.estimators:
        return  # an evaluator that only adds report sections or files
    assert set(res.estimators) == set(data.labels), \
        f"{case.id}: results for {sorted(res.estimators)}, expected every estimator {sorted(data.labels)}"
    for label, rows in res.estimators.items():
        assert [r.target_fpr for r in rows] == list(data.targets), \
            f"{case.id}: {label}: results for targets {[r.target_fpr for r in rows]}, expected {list(data.targets)}"
        for k, r in enumerate(rows):
            assert isinstance(r, TargetResult), f"{case.id}: results must be TargetResult, got {type(r).__name__}"
            fa, attempts = _brute_counts(data, label, k)
            assert (r.false_accepts, r.impostor_attempts) == (fa, attempts), \
                f"{case.id}: {label} at {r.target_fpr}: {r.false_accepts}/{r.impostor_attempts} false accepts/attempts, " \
                f"expected {fa}/{attempts} (accept when distance <= threshold, summed over folds)"
            assert math.isclose(r.fpr, fa / attempts, rel_tol=1e-12), f"{case.id}: fpr {r.fpr} != {fa}/{attempts}"
            assert math.isclose(r.ratio, r.fpr / r.target_fpr, rel_tol=1e-12), \
                f"{case.id}: ratio {r.ratio} != fpr / target = {r.fpr / r.target_fpr}"
            assert r.fnr is None or 0.0 <= r.fnr <= 1.0, f"{case.id}: fnr {r.fnr} is not in [0, 1]"
            json.dumps(r.as_dict(), default=str)


def check_evaluator_outputs(case: ComponentCase, tmp_path: Path | None = None) -> None:
    """Report sections are markdown strings; files are bytes under plain names that do not overwrite
    the pipeline's own outputs; with plots off, no pictures are made."""
    with _tmpdir(tmp_path) as tmp:
        params = _params(case, tmp)
    for plots in (True, False):
        res = _evaluate(case, params, make_evaluation_input(plots=plots))
        assert all(isinstance(s, str) for s in res.sections), f"{case.id}: report sections must be strings"
        for name, content in res.files.items():
            assert isinstance(name, str) and name and "/" not in name and "\\" not in name and not name.startswith("."), \
                f"{case.id}: output file name {name!r} must be a plain file name"
            assert name not in RESERVED_FILES, f"{case.id}: must not overwrite the pipeline's {name}"
            assert isinstance(content, bytes), f"{case.id}: file {name!r} content must be bytes"
        if not plots:
            pictures = [n for n in res.files if n.lower().endswith((".png", ".svg", ".pdf"))]
            assert not pictures, f"{case.id}: wrote pictures {pictures} although plots are off"


def check_evaluator_deterministic(case: ComponentCase, tmp_path: Path | None = None) -> None:
    """Evaluating the same input twice gives the same results."""
    with _tmpdir(tmp_path) as tmp:
        params = _params(case, tmp)
    data = make_evaluation_input()
    a, b = _evaluate(case, params, data), _evaluate(case, params, data)
    da = {k: [r.as_dict() for r in v] for k, v in a.estimators.items()}
    db = {k: [r.as_dict() for r in v] for k, v in b.estimators.items()}
    assert json.dumps(da, sort_keys=True, default=str) == json.dumps(db, sort_keys=True, default=str), \
        f"{case.id}: two evaluations of the same input differ"


def check_evaluator_rejects_bad_input(case: ComponentCase, tmp_path: Path | None = None) -> None:
    """Negative evaluation distances, or similarities, are refused with DataError."""
    with _tmpdir(tmp_path) as tmp:
        params = _params(case, tmp)
    data = make_evaluation_input()
    fold = data.folds[0]
    for what, test in (("negative distances", fold.test.with_values(fold.test.values - 10.0)),
                       ("similarity scores", fold.test.with_values(fold.test.values, kind="similarity"))):
        bad = EvaluationInput((Fold(fold.name, fold.train, test, fold.models, fold.tables),), data.targets, False)
        try:
            _evaluate(case, params, bad)
        except DataError:
            continue
        raise AssertionError(f"{case.id}: evaluation data with {what} was accepted; it must raise DataError")


EVALUATOR_CHECKS = (check_evaluator_results, check_evaluator_outputs, check_evaluator_deterministic,
                    check_evaluator_rejects_bad_input)


# --------------------------------------------------------------------------------------------
# executors
# --------------------------------------------------------------------------------------------

def _square(x: int) -> int:
    """Module-level (picklable) work item for executor checks."""
    return x * x


def _fail_on_seven(x: int) -> int:
    if x == 7:
        raise DataError("item 7 is bad")
    return x


def check_executor_map(case: ComponentCase, tmp_path: Path | None = None) -> None:
    """Inside ``with executor:``, ``map`` returns exactly the serial loop's results in input order, handles
    an empty list, lets a worker's exception through with its type, and keeps working afterwards."""
    with _tmpdir(tmp_path) as tmp:
        params = _params(case, tmp)
    items = list(range(23))
    ex = _build(case, params)
    with ex as entered:
        assert entered is ex, f"{case.id}: __enter__ must return the executor itself"
        got = ex.map(_square, items)
        assert list(got) == [_square(i) for i in items], f"{case.id}: map gave {list(got)[:6]}..., not the serial results in order"
        assert list(ex.map(_square, [])) == [], f"{case.id}: map over no items must return []"
        try:
            ex.map(_fail_on_seven, items)
        except DataError as exc:
            assert "item 7 is bad" in str(exc), f"{case.id}: the worker's error message was lost: {exc}"
        except Exception as exc:  # noqa: BLE001
            raise AssertionError(f"{case.id}: a DataError raised by the work came back as {type(exc).__name__}: {exc}; "
                                 "re-raise the original exception so bad input still exits with code 2") from exc
        else:
            raise AssertionError(f"{case.id}: an exception raised by the work was swallowed")
        assert list(ex.map(_square, items[:5])) == [0, 1, 4, 9, 16], f"{case.id}: map fails after a worker error"


EXECUTOR_CHECKS = (check_executor_map,)

KIND_CHECKS: dict[str, tuple[Callable, ...]] = {
    "datasets": DATASET_CHECKS, "distances": DISTANCE_CHECKS, "transforms": TRANSFORM_CHECKS,
    "estimators": ESTIMATOR_CHECKS, "evaluators": EVALUATOR_CHECKS, "executors": EXECUTOR_CHECKS,
}


def checks_for(kind: str) -> tuple[Callable, ...]:
    """Every check that applies to a component of ``kind``: the generic ones, then the kind's own."""
    return GENERIC_CHECKS + KIND_CHECKS[normalise_kind(kind)]


__all__ = ["CheckSkipped", "ComponentCase", "checks_for", "make_evaluation_input", "make_impostors",
           "make_score_matrix", "make_sets", "normalise_kind", "SEED", "TARGETS"] + \
          [f.__name__ for fs in KIND_CHECKS.values() for f in fs] + [f.__name__ for f in GENERIC_CHECKS]
