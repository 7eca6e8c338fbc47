"""Builds the plugin manager on demand: the built-ins, then the entry-point group ``calibrate``.

Nothing here runs at import time; call :func:`build_registry` (or :func:`get_plugin_manager`)
when components are needed. Set ``CALIBRATE_DISABLE_PLUGIN_AUTOLOAD=1`` to skip third-party
entry points (the built-ins are still loaded).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from importlib import metadata
from types import ModuleType

import pluggy

from . import hookspecs
from .base import KINDS
from .errors import PluginError
from .registry import ComponentInfo, Registry

ENTRY_POINT_GROUP = "calibrate"
OWN_DISTRIBUTION = "calibrate-thresholds"
DISABLE_ENV = "CALIBRATE_DISABLE_PLUGIN_AUTOLOAD"


@dataclass(frozen=True)
class PluginOrigin:
    distribution: str | None
    version: str | None


def _autoload_disabled() -> bool:
    return os.environ.get(DISABLE_ENV, "").strip().lower() not in ("", "0", "false", "no")


def get_plugin_manager(extra_plugins: tuple[object, ...] = ()) -> tuple[pluggy.PluginManager, dict[str, PluginOrigin]]:
    """A fresh plugin manager with built-ins, entry points, then ``extra_plugins`` registered."""
    pm = pluggy.PluginManager("calibrate")
    pm.add_hookspecs(hookspecs)
    origins: dict[str, PluginOrigin] = {}
    eps = sorted(metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda ep: (ep.dist is None or ep.dist.name != OWN_DISTRIBUTION, ep.name))
    own = [ep for ep in eps if ep.dist is not None and ep.dist.name == OWN_DISTRIBUTION]
    if not own:
        raise PluginError("the built-in plugins are not registered: calibrate-thresholds is not installed "
                          "(run `pip install -e .` in the repository)")
    skip_third_party = _autoload_disabled()
    for ep in eps:
        is_own = ep.dist is not None and ep.dist.name == OWN_DISTRIBUTION
        if skip_third_party and not is_own:
            continue
        try:
            plugin = ep.load()
        except Exception as exc:  # a broken third-party plugin must say who it is
            dist = ep.dist.name if ep.dist else "unknown distribution"
            raise PluginError(f"plugin {ep.name!r} from {dist} failed to import: {exc}; fix or uninstall it, "
                              f"or set {DISABLE_ENV}=1 to skip third-party plugins") from exc
        name = ep.name if is_own else f"{ep.dist.name if ep.dist else 'unknown'}:{ep.name}"
        if pm.is_registered(plugin):
            continue
        pm.register(plugin, name=name)
        origins[name] = PluginOrigin(ep.dist.name if ep.dist else None, ep.dist.version if ep.dist else None)
    for plugin in extra_plugins:
        name = getattr(plugin, "__name__", None) or type(plugin).__name__
        pm.register(plugin, name=name)
        origins[name] = PluginOrigin(None, None)
    try:
        pm.check_pending()
    except pluggy.PluginValidationError as exc:
        raise PluginError(f"{exc}; hook implementations must be named after a hook in calibrate.hookspecs "
                          f"(calibrate_register_<kind>)") from exc
    return pm, origins


def build_registry(extra_plugins: tuple[object | ModuleType, ...] = ()) -> Registry:
    """Ask every plugin to register its components; duplicates are errors naming both plugins."""
    pm, origins = get_plugin_manager(extra_plugins)
    registry = Registry()
    for kind in KINDS:
        caller = getattr(pm.hook, f"calibrate_register_{kind}")
        for impl in reversed(caller.get_hookimpls()):  # registration order
            origin = origins.get(impl.plugin_name, PluginOrigin(None, None))

            def register(name: str, factory: type, _kind=kind, _impl=impl, _origin=origin) -> None:
                registry.add(ComponentInfo(_kind, name, factory, _impl.plugin_name, _origin.distribution, _origin.version))

            impl.function(register=register)
    return registry
