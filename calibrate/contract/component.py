"""What every component shares: the :class:`Component` base class (parameters read back from ``__init__``,
the ``progress_name`` messages use), the marks that declare the contract on the base classes (:func:`optional`,
``CONTRACT_MARK``) and :func:`overrides`, which tells whether a component overrides an optional member; also
:func:`progress_name` and :func:`check_target` (a target FPR in (0, 1)).

Plugins import these from :mod:`calibrate.contract.base`, which gathers the contract.
"""

from __future__ import annotations

import inspect
import re
from typing import Any, Callable, TypeVar, final

import numpy as np

from calibrate.errors import ParameterError


F = TypeVar("F", bound=Callable[..., Any])


#: the attribute :func:`optional` sets on a function (read by calibrate.testing.contract)
CONTRACT_MARK = "__calibrate_contract__"


def optional(function: F) -> F:
    """Marks a method of a base class as an optional part of the plugin contract: a component may
    override it; otherwise the definition on the base class (the default its docstring states) applies."""
    setattr(function, CONTRACT_MARK, "optional")
    return function


def overrides(component: Any, base: type, name: str) -> bool:
    """Whether ``component`` (an instance or a class) overrides the member ``name`` of ``base`` (an
    optional method, e.g. ``Estimator.simulate``), i.e. whether the core should use it."""
    cls = component if isinstance(component, type) else type(component)
    return getattr(cls, name, None) is not getattr(base, name)


def progress_name(component: Any) -> str:
    """How progress lines name a component: its ``progress_name`` attribute, else its class name in
    kebab case (``Ncx2Grid`` -> ``ncx2-grid``, the way plugins are usually registered)."""
    name = getattr(component, "progress_name", None)
    if isinstance(name, str) and name:
        return name
    words = re.findall(r"[A-Z]+(?![a-z])|[A-Z]?[a-z0-9]+|[0-9]+", type(component).__name__)
    return "-".join(w.lower() for w in words) or type(component).__name__


class Component:
    """Common behaviour: parameters introspected from ``__init__``."""

    #: how progress lines and messages name the component (a string, or a property computing one from
    #: the parameters, e.g. ``ncx2-grid (fast)``). Default: None, the class name in kebab case (``Ncx2Grid``
    #: -> ``ncx2-grid``)
    progress_name: str | None = None

    @final
    def get_params(self) -> dict[str, Any]:
        """The ``__init__`` parameters and their values, read back from the attributes of the same names."""
        init = type(self).__init__
        if init is object.__init__:  # no constructor of its own: no parameters (as scikit-learn)
            return {}
        names = [p for p in inspect.signature(init).parameters if p != "self"]
        return {name: getattr(self, name) for name in names}

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({args})"


def check_target(target: float) -> float:
    t = float(target)
    if not (0.0 < t < 1.0) or not np.isfinite(t):
        raise ParameterError(f"target FPR {target!r} is not in (0, 1); give it as a fraction, e.g. 0.001 for 0.1%")
    return t
