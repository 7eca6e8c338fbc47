"""Conformance kit for plugin authors (after scikit-learn's ``parametrize_with_checks``).

In your plugin's test suite::

    from calibrate.testing import parametrize_with_checks

    @parametrize_with_checks([
        ("estimator", "quantile-shift", {"weight": 0.25}),        # by registered name
        ("estimator", QuantileShift, {}),                         # or by class
        ComponentCase("dataset", MyDataset, make_params=write_sample),
    ])
    def test_conformance(component, check, tmp_path):
        check(component, tmp_path)

or, without pytest, ``check_component("estimator", QuantileShift, {"weight": 0.25})``, which
runs every check and raises :class:`AssertionError` listing the failures. The checks and what
they require are listed in ``docs/plugins.md`` ("Testing your plugin").

Layout: ``common.py`` holds :class:`ComponentCase`, :class:`CheckSkipped`, the shared helpers and
the checks every kind gets; ``samples.py`` the data generators (``make_*``); each kind's own checks
are in the module named after the kind (``datasets.py``, ``distances.py``, ``transforms.py``,
``estimators.py``, ``evaluators.py``, ``executors.py``, ``normalizers.py``), ending with ``CHECKS = (...)``.
:data:`KIND_CHECKS`, below, is the one place that maps a kind to them.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from calibrate.contract.kinds import NAMES
from calibrate.testing import datasets, distances, estimators, evaluators, executors, normalizers, piecewise, simulation, transforms
from calibrate.testing.common import GENERIC_CHECKS as _COMMON_CHECKS
from calibrate.testing.common import CheckSkipped, ComponentCase, check_signature, normalise_kind
from calibrate.testing.contract import check_contract
from calibrate.testing.samples import SEED, TARGETS, make_evaluation_input, make_impostors, make_score_matrix, make_sets

#: the checks every kind gets: the signature and parameters (common.py), then the declared contract (contract.py)
GENERIC_CHECKS = _COMMON_CHECKS + (check_contract,)

__all__ = ["CheckSkipped", "ComponentCase", "SEED", "TARGETS", "as_case", "check_component", "checks_for",
           "make_evaluation_input", "make_impostors", "make_score_matrix", "make_sets", "parametrize_with_checks"]

#: plural kind name -> that kind's own checks (the generic ones are added by :func:`checks_for`);
#: a new kind gets a module here named after it, ending with ``CHECKS = (...)``
KIND_CHECKS: dict[str, tuple[Callable, ...]] = {
    module.__name__.rpartition(".")[2]: module.CHECKS
    for module in (datasets, distances, transforms, estimators, evaluators, executors, normalizers)
}
#: estimators that implement ``simulate`` must agree with their own fit (calibrate/testing/simulation.py), and
#: so must their fits made in pieces: enroll, shard by shard (calibrate/testing/piecewise.py)
KIND_CHECKS["estimators"] = KIND_CHECKS["estimators"] + simulation.CHECKS + piecewise.CHECKS


def checks_for(kind: str) -> tuple[Callable, ...]:
    """Every check that applies to a component of ``kind``: the generic ones, then the kind's own."""
    name = normalise_kind(kind)
    if name not in KIND_CHECKS:
        raise NotImplementedError(f"the conformance kit has no checks for {name}: add calibrate/testing/{name}.py "
                                  f"ending with CHECKS = (...) and list it in KIND_CHECKS in calibrate/testing/__init__.py "
                                  f"(kinds with checks: {', '.join(n for n in NAMES if n in KIND_CHECKS)})")
    return GENERIC_CHECKS + KIND_CHECKS[name]


def as_case(component: Any, registry=None) -> ComponentCase:
    """A :class:`ComponentCase` from a case, a ``(kind, name_or_class[, params])`` tuple, or a
    ComponentInfo-like object (with ``kind``, ``name`` and ``factory``; built with default parameters).

    A name is looked up in ``registry`` (default: :func:`calibrate.contract.manager.build_registry`, i.e.
    the installed plugins)."""
    if isinstance(component, ComponentCase):
        return component
    if isinstance(component, tuple):
        if len(component) not in (2, 3):
            raise TypeError(f"expected (kind, name_or_class) or (kind, name_or_class, params), got {component!r}")
        kind, target = normalise_kind(component[0]), component[1]
        params = component[2] if len(component) == 3 else {}
        if isinstance(target, str):
            if registry is None:
                from calibrate.contract.manager import build_registry

                registry = build_registry()
            return ComponentCase(kind, registry.get(kind, target).factory, params, name=target)
        return ComponentCase(kind, target, params)
    if all(hasattr(component, a) for a in ("kind", "name", "factory")):
        return ComponentCase(component.kind, component.factory, {}, name=component.name)
    raise TypeError(f"cannot check {component!r}: give a ComponentCase, a (kind, name, params) tuple or a ComponentInfo")


def _signature_fails(case: ComponentCase) -> bool:
    """Whether the component's ``__init__`` fails :func:`check_signature`: every other check builds the
    component from its parameters, so they would all fail with it (one report, not fourteen)."""
    try:
        check_signature(case, None)
    except CheckSkipped:
        return False
    except Exception:  # noqa: BLE001 - any failure of the signature check
        return True
    return False


class _PytestCheck:
    """A check as handed to the test function: ``check(component, tmp_path=None)``; a
    :class:`CheckSkipped` becomes ``pytest.skip``."""

    def __init__(self, function: Callable):
        self.function = function
        self.__name__ = function.__name__
        self.__doc__ = function.__doc__

    def __call__(self, component: ComponentCase, tmp_path: Path | None = None) -> None:
        import pytest

        if self.function is not check_signature and _signature_fails(component):
            pytest.skip(f"not run: {component.id} fails check_signature (reported there); fix that first")
        try:
            self.function(component, tmp_path)
        except CheckSkipped as exc:
            pytest.skip(str(exc))

    def __repr__(self) -> str:
        return self.__name__


def parametrize_with_checks(components: Iterable[Any], *, registry=None):
    """A ``pytest.mark.parametrize`` over every (component, check) pair, with ids
    ``KIND:NAME-check_name``. The decorated test receives ``component`` and ``check`` and calls
    ``check(component, tmp_path)``. Checks named in a case's ``skip`` are strict expected failures
    (``xfail(strict=True)``): once the component passes such a check, the test fails until the entry
    is removed, so a fixed check is noticed. When ``check_signature`` fails, the other checks are
    skipped, naming it."""
    import pytest

    cases = []
    for c in components:
        if registry is None and isinstance(c, tuple) and len(c) >= 2 and isinstance(c[1], str):
            from calibrate.contract.manager import build_registry

            registry = build_registry()
        cases.append(as_case(c, registry))
    params = []
    for case in cases:
        for check in checks_for(case.kind):
            marks = ([pytest.mark.xfail(strict=True, reason=f"listed in skip=: {case.skip[check.__name__]}")]
                     if check.__name__ in case.skip else [])
            params.append(pytest.param(case, _PytestCheck(check), marks=marks, id=f"{case.id}-{check.__name__}"))
    return pytest.mark.parametrize(("component", "check"), params)


def check_component(kind: str, factory: type, params: Mapping[str, Any] | None = None, *,
                    make_params: Callable[[Path], Mapping[str, Any]] | None = None, skip: Mapping[str, str] | None = None,
                    options: Mapping[str, Any] | None = None, name: str | None = None,
                    tmp_path: Path | None = None) -> dict[str, str]:
    """Run every check for one component; returns ``{check: "passed" | "skipped: why" | "expected failure: why"}``.

    A check named in ``skip`` must fail (it is an expected failure, with the reason given); one that
    passes is reported as a failure, so that the entry is removed once the component is fixed. When
    ``check_signature`` fails, the other checks are not run ("not run: ...").

    Raises :class:`AssertionError` naming every failed check (the first failure is chained)."""
    case = ComponentCase(kind, factory, params or {}, name=name, make_params=make_params, skip=skip or {},
                         options=options or {})
    outcome: dict[str, str] = {}
    failures: list[tuple[str, BaseException]] = []
    for check in checks_for(case.kind):
        name = check.__name__
        if failures and failures[0][0] == check_signature.__name__:
            outcome[name] = "not run: check_signature failed"
            continue
        try:
            check(case, None if tmp_path is None else Path(tmp_path) / name)
        except CheckSkipped as exc:
            outcome[name] = f"skipped: {exc}"
        except Exception as exc:  # noqa: BLE001 - collected and reported together
            if name in case.skip:
                outcome[name] = f"expected failure: {case.skip[name]}"
            else:
                outcome[name] = f"failed: {type(exc).__name__}: {exc}"
                failures.append((name, exc))
        else:
            if name in case.skip:
                exc = AssertionError(f"passes, but skip= lists it ({case.skip[name]}): remove the entry")
                outcome[name] = f"failed: {exc}"
                failures.append((name, exc))
            else:
                outcome[name] = "passed"
    if failures:
        lines = [f"{case.id} fails {len(failures)} conformance check(s):"]
        for check_name, exc in failures:
            frames = traceback.extract_tb(exc.__traceback__)
            where = f" [{Path(frames[-1].filename).name}:{frames[-1].lineno}]" if frames else ""
            lines.append(f"  {check_name}: {type(exc).__name__}: {exc}{where}")
        raise AssertionError("\n".join(lines)) from failures[0][1]
    return outcome
