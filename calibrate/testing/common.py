"""What every conformance check shares: the component under test (:class:`ComponentCase`),
:class:`CheckSkipped`, the helpers that build a component from a case, and the checks that apply
to every kind (signature, parameters stored, unknown keyword rejected, YAML round trip).

Every check is a plain function ``check_xxx(case, tmp_path=None)`` that raises
:class:`AssertionError` (or the component's own exception) when the component breaks the
contract documented in ``docs/plugins.md``, and :class:`CheckSkipped` when it cannot run
(e.g. a dataset without a ``make_params`` factory). Each kind's own checks live in the module
named after the kind (``estimators.py``, ``distances.py``, ...), ending with ``CHECKS = (...)``.
"""

from __future__ import annotations

import inspect
import math
import tempfile
from collections.abc import Callable, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from calibrate.contract.kinds import BY_NAME
from calibrate.contract.kinds import kind as _kind
from calibrate.contract.params import coerce, param_specs


class CheckSkipped(Exception):
    """Raised by a check that cannot run for this component (the message says why)."""


def normalise_kind(kind: str) -> str:
    """The plural name of ``kind`` (plural or singular); ValueError naming the kinds otherwise."""
    return _kind(kind).name


@dataclass(frozen=True)
class ComponentCase:
    """One component to check.

    :param kind: ``estimator``/``estimators``, ``distance``, ``transform``, ``dataset``, ``evaluator``, ``executor``
        or ``normalizer``.
    :param factory: the component class (as registered).
    :param params: keyword parameters to construct it with (default: none, i.e. all defaults).
    :param name: the registered name (for test ids and messages).
    :param make_params: ``make_params(tmp_path) -> dict``: writes a small sample input under
        ``tmp_path`` and returns the parameters that load it (datasets need it; merged over ``params``).
    :param skip: ``{check_name: reason}`` for checks this component is known to fail, e.g.
        ``{"check_distance_self_zero": "d(A, A) is not 0 for this measure"}``: strict expected failures
        (a listed check that passes is reported, so the entry goes once the component is fixed).
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
        return f"{BY_NAME[self.kind].singular}:{self.name}" + (f"({args})" if args else "")

    def __repr__(self) -> str:
        return f"ComponentCase({self.id})"


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
    base = BY_NAME[case.kind].base
    assert isinstance(obj, base), f"{case.id}: {type(obj).__name__} is not a calibrate.contract.base.{base.__name__}"
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


def check_params_have_defaults(case: ComponentCase, tmp_path: Path | None = None) -> None:
    """Every parameter has a default (``{plugin: NAME}`` with no parameters builds the component, and ``calibrate
    plugins`` shows what it does), except a dataset's input file (annotated ``pathlib.Path``), which the recipe
    must name."""
    for p in param_specs(case.factory):
        if p.required and not (case.kind == "datasets" and p.annotation is Path):
            raise AssertionError(
                f"{case.id}: parameter {p.name!r} of {case.factory.__name__}.__init__ has no default; give it one "
                f"({p.name}: {p.type_name()} = ...), the value a recipe that does not name it should get (only a "
                "dataset's input file, annotated pathlib.Path, may be required)")


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


GENERIC_CHECKS = (check_signature, check_params_have_defaults, check_init_stores_params, check_unknown_keyword_rejected,
                  check_params_yaml_round_trip)
